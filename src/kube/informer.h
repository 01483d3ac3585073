/* SPDX-License-Identifier: MIT */
/*
 * List and watch one kind of Kubernetes object into a local cache, on a
 * thread of its own: list, then watch from the list's resourceVersion with
 * bookmarks; resume from the last version seen after a dropped connection
 * (with backoff); relist after "410 Gone". The cache always holds the
 * server's latest state of every object; readers reconcile against it as a
 * whole (level-triggered), so a replayed or merged event changes nothing.
 */
#ifndef RETWATCH_INFORMER_H
#define RETWATCH_INFORMER_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "kube/kube.h"

struct informer;

struct informer_counters {
	uint64_t lists;	  /* lists done, the first included */
	uint64_t watches; /* watch requests started */
	uint64_t events;  /* ADDED, MODIFIED, DELETED applied */
	uint64_t bookmarks;
	uint64_t gone;	   /* 410 Gone: resourceVersion too old, relisted */
	uint64_t failures; /* requests that failed (transport or HTTP) */
	uint64_t pages;	   /* list pages read */
	uint64_t copies;   /* objects copied into views (informer__sync) */
};

/*
 * A reader's own copy of the cache, for use without the lock: objs is an
 * array of the objects; the rest is informer__sync's.
 */
struct informer_view {
	cJSON *objs;
	struct informer_view_item *items; /* by key, each pointing into objs */
	size_t n;
	uint64_t version;
};

/*
 * Starts watching path (such as "/api/v1/pods") with query parameters
 * query (such as "fieldSelector=spec.nodeName%3Dn1", or NULL). Each change
 * of the cache writes 1 to the eventfd notify_fd, except, with
 * spec_changes_only, an update that keeps metadata.generation (a write to
 * the status subresource): the cache takes it without a wake-up. name is
 * used in the log. Lists read page objects per request (0: 500). The
 * cache leaves out metadata.managedFields and each field that strip names,
 * as "field" or "parent.child" (NULL-terminated; strip may be NULL): what
 * the agent never reads need not be held, nor copied; then trim (NULL:
 * none) may cut each object further, before it is cached (it must change
 * nothing of an object it trimmed already).
 */
typedef void (*informer_trim_fn)(cJSON *obj);

struct informer *informer__start(struct kube *k, const char *name, const char *path,
				 const char *query, bool spec_changes_only, int notify_fd,
				 size_t page, const char *const *strip, informer_trim_fn trim);
/* Stops the thread and frees the cache; NULL is fine. */
void informer__stop(struct informer *inf);
/* True once the first list has been loaded. */
bool informer__synced(struct informer *inf);

typedef void (*informer_fn)(const cJSON *obj, void *ctx);
/* Calls fn on every cached object, under the cache's lock (fn must not keep obj). */
void informer__foreach(struct informer *inf, informer_fn fn, void *ctx);
void informer__counters(struct informer *inf, struct informer_counters *ret);
/* Grows with every change of the cache (status-only ones included). */
uint64_t informer__version(struct informer *inf);
/*
 * Brings v in step with the cache: copies the objects added or changed
 * since v's last sync, keeps v's copies of the others (a status write to
 * one object copies that object, not the cache), drops the deleted. Whether
 * anything changed. On -ENOMEM v is left empty, to be synced again.
 */
bool informer__sync(struct informer *inf, struct informer_view *v);
void informer_view__clear(struct informer_view *v);

#endif

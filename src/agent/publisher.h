/* SPDX-License-Identifier: MIT */
/*
 * Writes status patches on a thread of its own, so that a slow or absent API
 * server never delays probing, and holds the Lease that makes one agent the
 * writer of every probe's summary. Patches wait in a queue keyed by what
 * they update; a newer patch for the same key replaces the waiting one.
 */
#ifndef RETWATCH_PUBLISHER_H
#define RETWATCH_PUBLISHER_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/kube.h"

struct publisher;

struct publisher_counters {
	uint64_t patches;  /* status patches sent */
	uint64_t failures; /* patches the server did not take */
	uint64_t lease_requests;
};

/*
 * identity: this agent's name in the Lease (its node's name). The Lease
 * lease_ns/lease_name is taken when free or expired (lease_s seconds
 * without renewal) and renewed every lease_s / 3 seconds.
 */
struct publisher *publisher__start(struct kube *k, const char *identity, const char *lease_ns,
				   const char *lease_name, int lease_s);
/* Sends what is queued, then stops; NULL is fine. */
void publisher__stop(struct publisher *p);

/*
 * Queues a server-side apply of body to path (a probe's status subresource,
 * or a report) as field manager `manager`. key names what it updates.
 */
int publisher__apply(struct publisher *p, const char *key, const char *path, const char *manager,
		     const char *body);
/* Queues a DELETE of path (an object) under key, in place of what key waits to send. */
int publisher__delete(struct publisher *p, const char *key, const char *path);
/* Drops what is kept for key (its probe is gone). */
void publisher__forget(struct publisher *p, const char *key);
/* Whether the last patch sent for key failed (so the same content must be sent again). */
bool publisher__failed(struct publisher *p, const char *key);
/* Whether the last patch sent for key was refused for its size (413, or
 * etcd's "request is too large"): the same content must be sent smaller. */
bool publisher__too_large(struct publisher *p, const char *key);
/* Whether this agent holds the Lease now. */
bool publisher__leader(struct publisher *p);
void publisher__counters(struct publisher *p, struct publisher_counters *ret);

#endif

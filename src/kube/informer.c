// SPDX-License-Identifier: MIT
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "kube/informer.h"
#include "base/log.h"

#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 5000
/* A Retry-After is honoured up to this long. */
#define RETRY_AFTER_MAX_S 60
/* The server ends each watch after this long; a new one resumes.
 * RETWATCH_WATCH_TIMEOUT_S sets another (tests, a proxy that cuts sooner). */
#define WATCH_TIMEOUT_S 240
#define WATCH_TIMEOUT_MIN_S 5
#define WATCH_TIMEOUT_MAX_S 3600
#define LIST_TIMEOUT_MS 60000
/* Objects per list page, by default. */
#define LIST_PAGE 500
#define RV_LEN 64
/* Parsing a list page this large takes about ten times its size, most of it
 * freed once the objects are slimmed: given back to the system, or the
 * agent would hold the list's peak for good (six 1.2 MB probes: 86 MiB
 * against 32 MiB). */
#define LARGE_RESPONSE (1024 * 1024)

struct entry {
	char *key; /* namespace/name */
	cJSON *obj;
	uint64_t stamp; /* unique to this state of the object */
};

struct informer_view_item {
	char *key;
	uint64_t stamp;
	cJSON *obj;
};

struct informer {
	struct kube *k;
	char *name, *path, *query;
	bool spec_changes_only;
	int notify_fd;
	size_t page;
	const char *const *strip;
	informer_trim_fn trim;
	pthread_t thread;
	volatile sig_atomic_t stop;
	int wake_fd;	    /* written with stop: ends a silent watch at once */
	long retry_after_s; /* the thread's own: the server's last Retry-After */

	pthread_mutex_t lock; /* guards everything below */
	struct entry *items;
	size_t n, cap;
	bool synced;
	uint64_t version;
	uint64_t stamps; /* last stamp given */
	struct informer_counters c;

	/* the watch thread's own */
	char rv[RV_LEN];
	bool gone;
};

static void notify(struct informer *inf)
{
	uint64_t one = 1;

	if (write(inf->notify_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("%s: failed to wake the agent: %s", inf->name, strerror(errno));
}

static char *object_key(const cJSON *obj)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const char *ns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "namespace"));
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "name"));
	char *key;

	if (!name)
		return NULL;
	if (asprintf(&key, "%s/%s", ns ? ns : "", name) < 0)
		return NULL;
	return key;
}

static const char *object_rv(const cJSON *obj)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "resourceVersion"));
}

static void set_rv(struct informer *inf, const char *rv)
{
	if (rv)
		snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
}

/* Field ownership is of no use here and is most of an object's size; the
 * fields inf->strip names are not read. */
static void slim(const struct informer *inf, cJSON *obj)
{
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
						"managedFields");
	for (const char *const *f = inf->strip; f && *f; f++) {
		const char *dot = strchr(*f, '.');
		char parent[64];

		if (!dot) {
			cJSON_DeleteItemFromObjectCaseSensitive(obj, *f);
			continue;
		}
		if ((size_t)(dot - *f) >= sizeof(parent))
			continue;
		snprintf(parent, sizeof(parent), "%.*s", (int)(dot - *f), *f);
		cJSON_DeleteItemFromObjectCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(obj, parent), dot + 1);
	}
	if (inf->trim)
		inf->trim(obj);
}

static ssize_t find(struct informer *inf, const char *key)
{
	for (size_t i = 0; i < inf->n; i++)
		if (!strcmp(inf->items[i].key, key))
			return (ssize_t)i;
	return -1;
}

static double generation(const cJSON *obj)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

	return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(md, "generation"));
}

/* Takes obj. Caller holds the lock. 1 when it replaced an object of the same
 * generation (only its status changed), else 0 or -errno. */
static int put(struct informer *inf, cJSON *obj)
{
	char *key = object_key(obj);
	ssize_t i;

	if (!key) {
		cJSON_Delete(obj);
		return -EINVAL;
	}
	slim(inf, obj);
	i = find(inf, key);
	if (i >= 0) {
		bool same = generation(inf->items[i].obj) == generation(obj);

		free(key);
		cJSON_Delete(inf->items[i].obj);
		inf->items[i].obj = obj;
		inf->items[i].stamp = ++inf->stamps;
		return same;
	}
	if (inf->n == inf->cap) {
		size_t cap = inf->cap ? inf->cap * 2 : 16;
		struct entry *items = realloc(inf->items, cap * sizeof(*items));

		if (!items) {
			free(key);
			cJSON_Delete(obj);
			return -ENOMEM;
		}
		inf->items = items;
		inf->cap = cap;
	}
	inf->items[inf->n++] = (struct entry){ key, obj, ++inf->stamps };
	return 0;
}

static void drop(struct informer *inf, const cJSON *obj)
{
	char *key = object_key(obj);
	ssize_t i = key ? find(inf, key) : -1;

	free(key);
	if (i < 0)
		return;
	free(inf->items[i].key);
	cJSON_Delete(inf->items[i].obj);
	inf->items[i] = inf->items[--inf->n];
}

static void clear(struct informer *inf)
{
	for (size_t i = 0; i < inf->n; i++) {
		free(inf->items[i].key);
		cJSON_Delete(inf->items[i].obj);
	}
	inf->n = 0;
}

static void count_failure(struct informer *inf)
{
	pthread_mutex_lock(&inf->lock);
	inf->c.failures++;
	pthread_mutex_unlock(&inf->lock);
}

/*
 * One page of the list, continuing from cont ("" for the first): its
 * objects appended to all, the next page's token into next ("" after the
 * last page), the list's resourceVersion into rv.
 */
static int list_page(struct informer *inf, const char *cont, cJSON *all, char *next,
		     size_t next_len, char *rv, size_t rv_len)
{
	struct rw_error err = { "" };
	char *path = NULL, *body = NULL, why[512], esc[3 * 1024];
	const cJSON *md;
	cJSON *doc = NULL, *items, *item;
	int status, e = -EPROTO;

	if (asprintf(&path, "%s?%s%slimit=%zu%s%s", inf->path, inf->query ? inf->query : "",
		     inf->query ? "&" : "", inf->page, *cont ? "&continue=" : "",
		     *cont ? kube__escape(cont, esc, sizeof(esc)) : "") < 0)
		return -ENOMEM;
	status = kube__request(inf->k, "GET", path, NULL, NULL, LIST_TIMEOUT_MS, &body, &err);
	if (status != 200) {
		if (status == 404)
			log_error("%s: the API server does not serve %s: is its "
				  "CustomResourceDefinition installed? (kubectl apply -f crds/)",
				  inf->name, inf->path);
		else if (status == 401 || status == 403)
			log_error("%s: the agent may not list %s (HTTP %d): check its credentials "
				  "and RBAC rules (manifests/install.yaml, charts/retwatch): %s",
				  inf->name, inf->path, status,
				  kube__error_text(body, why, sizeof(why)));
		else if ((status == 429 || status >= 500) &&
			 (inf->retry_after_s = kube__retry_after()))
			log_warn("%s: list %s: the API server answered %d with Retry-After %ld s, "
				 "retrying then",
				 inf->name, inf->path, status, inf->retry_after_s);
		else if (status == 429 || status >= 500)
			log_warn("%s: list %s: the API server is not ready (HTTP %d), retrying",
				 inf->name, inf->path, status);
		else if (status == 410)
			log_info("%s: list %s: the list's snapshot expired between pages, listing "
				 "again",
				 inf->name, inf->path);
		else if (status > 0)
			log_error("%s: list %s failed: HTTP %d: %s", inf->name, inf->path, status,
				  kube__error_text(body, why, sizeof(why)));
		else
			log_error("%s: list failed: %s", inf->name, err.msg);
		goto out;
	}
	doc = cJSON_Parse(body);
	items = cJSON_GetObjectItemCaseSensitive(doc, "items");
	md = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
	if (!cJSON_IsArray(items) || !object_rv(doc)) {
		log_error("%s: list %s: the response is not a list", inf->name, inf->path);
		goto out;
	}
	while ((item = cJSON_DetachItemFromArray(items, 0))) {
		slim(inf, item);
		cJSON_AddItemToArray(all, item);
	}
	snprintf(rv, rv_len, "%s", object_rv(doc));
	snprintf(next, next_len, "%s",
		 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "continue")) ?: "");
	e = 0;
out:
	cJSON_Delete(doc);
	if (body && strlen(body) > LARGE_RESPONSE)
		malloc_trim(0);
	free(body);
	free(path);
	return e;
}

/*
 * Replaces the cache with a fresh list, read a page of objects at a time:
 * objects deleted while no watch ran vanish.
 */
static int list(struct informer *inf)
{
	char cont[1024] = "", rv[RV_LEN] = "";
	cJSON *all = cJSON_CreateArray(), *item;
	uint64_t pages = 0;
	int e = all ? 0 : -ENOMEM;
	size_t n;

	while (!e) {
		e = list_page(inf, cont, all, cont, sizeof(cont), rv, sizeof(rv));
		pages += !e;
		if (!*cont || inf->stop)
			break;
	}
	pthread_mutex_lock(&inf->lock);
	inf->c.pages += pages;
	if (e || inf->stop) {
		inf->c.failures += e != 0;
		pthread_mutex_unlock(&inf->lock);
		cJSON_Delete(all);
		return e ? e : -ECANCELED;
	}
	clear(inf);
	while ((item = cJSON_DetachItemFromArray(all, 0)))
		put(inf, item);
	inf->synced = true;
	inf->c.lists++;
	inf->version++;
	set_rv(inf, rv);
	n = inf->n;
	pthread_mutex_unlock(&inf->lock);
	cJSON_Delete(all);
	log_info("%s: listed %zu objects at resourceVersion %s in %llu pages", inf->name, n,
		 inf->rv, (unsigned long long)pages);
	notify(inf);
	return 0;
}

static int status_code(const cJSON *status)
{
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(status, "code");

	return cJSON_IsNumber(code) ? code->valueint : 0;
}

/* One watch event; nonzero ends the watch. */
static int on_event(const char *line, size_t len, void *ctx)
{
	struct informer *inf = ctx;
	cJSON *ev = cJSON_ParseWithLength(line, len);
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, "type"));
	cJSON *obj = cJSON_DetachItemFromObjectCaseSensitive(ev, "object");
	int stop = 0;

	if (!type || !cJSON_IsObject(obj)) {
		log_warn("%s: ignoring a malformed watch event", inf->name);
	} else if (!strcmp(type, "ERROR")) {
		if (status_code(obj) == 410) {
			inf->gone = true;
		} else {
			const cJSON *msg = cJSON_GetObjectItemCaseSensitive(obj, "message");

			log_warn("%s: watch error: %s", inf->name,
				 cJSON_GetStringValue(msg) ? msg->valuestring : "(no message)");
		}
		stop = 1;
	} else if (!strcmp(type, "BOOKMARK")) {
		pthread_mutex_lock(&inf->lock);
		set_rv(inf, object_rv(obj));
		inf->c.bookmarks++;
		pthread_mutex_unlock(&inf->lock);
	} else if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED") ||
		   !strcmp(type, "DELETED")) {
		bool wake = true;

		pthread_mutex_lock(&inf->lock);
		set_rv(inf, object_rv(obj));
		if (type[0] == 'D') {
			drop(inf, obj);
		} else {
			/* generation counts spec changes; status writes keep it */
			wake = put(inf, obj) != 1 || !inf->spec_changes_only;
			obj = NULL;
		}
		inf->c.events++;
		inf->version++;
		pthread_mutex_unlock(&inf->lock);
		if (wake)
			notify(inf);
	}
	cJSON_Delete(obj);
	cJSON_Delete(ev);
	return stop;
}

/* The watches' timeoutSeconds. */
static int watch_timeout_s(void)
{
	const char *v = getenv("RETWATCH_WATCH_TIMEOUT_S");
	long s = v ? strtol(v, NULL, 10) : 0;

	if (s < WATCH_TIMEOUT_MIN_S || s > WATCH_TIMEOUT_MAX_S)
		return WATCH_TIMEOUT_S;
	return (int)s;
}

/*
 * No byte for this long on a watch of timeout_s (not even a bookmark): it is
 * restarted. The server ends a live watch at timeout_s; the margin (a
 * quarter, at most a minute) lets its last bytes come late.
 */
static int watch_idle_s(int timeout_s)
{
	int margin = timeout_s / 4;

	return timeout_s + (margin > 60 ? 60 : margin < 2 ? 2 : margin);
}

/* 0: the server ended the watch; 1: 410 Gone; -errno: it failed. */
static int watch(struct informer *inf)
{
	struct rw_error err = { "" };
	char *path = NULL;
	int status, timeout_s = watch_timeout_s(), idle_s = watch_idle_s(timeout_s);

	inf->gone = false;
	if (asprintf(&path,
		     "%s?%s%swatch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d",
		     inf->path, inf->query ? inf->query : "", inf->query ? "&" : "", inf->rv,
		     timeout_s) < 0)
		return -ENOMEM;
	pthread_mutex_lock(&inf->lock);
	inf->c.watches++;
	pthread_mutex_unlock(&inf->lock);
	status = kube__stream(inf->k, path, on_event, inf, &inf->stop, inf->wake_fd, idle_s, &err);
	free(path);
	if (inf->gone || status == 410) {
		pthread_mutex_lock(&inf->lock);
		inf->c.gone++;
		pthread_mutex_unlock(&inf->lock);
		log_info("%s: resourceVersion %s is too old (410 Gone), listing again", inf->name,
			 inf->rv);
		return 1;
	}
	if (status == 200 || status == -ECANCELED)
		return 0;
	if (status == 429 || status >= 500)
		inf->retry_after_s = kube__retry_after();
	if (status == -ETIMEDOUT)
		log_warn("%s: watch silent for %d s (no event, no bookmark, past its %d s "
			 "timeout), restarting it from resourceVersion %s",
			 inf->name, idle_s, timeout_s, inf->rv);
	else
		log_warn("%s: watch failed, will resume from resourceVersion %s: %s", inf->name,
			 inf->rv, err.msg);
	count_failure(inf);
	return status < 0 ? status : -EPROTO;
}

static void pause_ms(struct informer *inf, int ms)
{
	for (; ms > 0 && !inf->stop; ms -= 50)
		usleep(50 * 1000);
}

/* The pause before the next try: the backoff's, or the server's Retry-After
 * when longer (bounded). */
static int retry_pause_ms(struct informer *inf, int backoff_ms)
{
	long ra = inf->retry_after_s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : inf->retry_after_s;

	inf->retry_after_s = 0;
	return ra * 1000 > backoff_ms ? (int)ra * 1000 : backoff_ms;
}

static void *run(void *arg)
{
	struct informer *inf = arg;
	bool need_list = true;
	int backoff = 0;
	/* each informer its own jitter, so nodes' agents do not retry in step */
	unsigned int seed = (unsigned int)time(NULL) ^ (unsigned int)getpid() ^
			    (unsigned int)(uintptr_t)inf;

	while (!inf->stop) {
		int r;

		pause_ms(inf, retry_pause_ms(inf, kube__backoff_jitter(backoff, &seed)));
		if (need_list) {
			if (list(inf)) {
				backoff = kube__backoff_next(backoff, BACKOFF_MIN_MS,
							     BACKOFF_MAX_MS);
				continue;
			}
			need_list = false;
		}
		r = watch(inf);
		need_list = r == 1;
		if (r < 0) {
			backoff = kube__backoff_next(backoff, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
		} else {
			backoff = 0;
		}
	}
	return NULL;
}

struct informer *informer__start(struct kube *k, const char *name, const char *path,
				 const char *query, bool spec_changes_only, int notify_fd,
				 size_t page, const char *const *strip, informer_trim_fn trim)
{
	struct informer *inf = calloc(1, sizeof(*inf));
	int e;

	if (!inf)
		return NULL;
	inf->k = k;
	inf->notify_fd = notify_fd;
	inf->spec_changes_only = spec_changes_only;
	inf->page = page ? page : LIST_PAGE;
	inf->strip = strip;
	inf->trim = trim;
	inf->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&inf->lock, NULL);
	inf->name = strdup(name);
	inf->path = strdup(path);
	inf->query = query ? strdup(query) : NULL;
	if (inf->wake_fd < 0)
		goto fail;
	if (!inf->name || !inf->path || (query && !inf->query)) {
		errno = ENOMEM;
		goto fail;
	}
	e = pthread_create(&inf->thread, NULL, run, inf);
	if (e) {
		errno = e;
		goto fail;
	}
	return inf;
fail:
	e = errno;
	if (inf->wake_fd >= 0)
		close(inf->wake_fd);
	free(inf->name);
	free(inf->path);
	free(inf->query);
	pthread_mutex_destroy(&inf->lock);
	free(inf);
	errno = e;
	return NULL;
}

void informer__stop(struct informer *inf)
{
	uint64_t one = 1;

	if (!inf)
		return;
	inf->stop = 1;
	if (write(inf->wake_fd, &one, sizeof(one)) < 0)
		log_warn("%s: failed to wake the watch to stop it: %s", inf->name, strerror(errno));
	pthread_join(inf->thread, NULL);
	close(inf->wake_fd);
	clear(inf);
	free(inf->items);
	free(inf->name);
	free(inf->path);
	free(inf->query);
	pthread_mutex_destroy(&inf->lock);
	free(inf);
}

bool informer__synced(struct informer *inf)
{
	bool synced;

	pthread_mutex_lock(&inf->lock);
	synced = inf->synced;
	pthread_mutex_unlock(&inf->lock);
	return synced;
}

void informer__foreach(struct informer *inf, informer_fn fn, void *ctx)
{
	pthread_mutex_lock(&inf->lock);
	for (size_t i = 0; i < inf->n; i++)
		fn(inf->items[i].obj, ctx);
	pthread_mutex_unlock(&inf->lock);
}

void informer__counters(struct informer *inf, struct informer_counters *ret)
{
	pthread_mutex_lock(&inf->lock);
	*ret = inf->c;
	pthread_mutex_unlock(&inf->lock);
}

uint64_t informer__version(struct informer *inf)
{
	uint64_t v;

	pthread_mutex_lock(&inf->lock);
	v = inf->version;
	pthread_mutex_unlock(&inf->lock);
	return v;
}

static int item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct informer_view_item *)a)->key,
		      ((const struct informer_view_item *)b)->key);
}

static struct informer_view_item *view_find(struct informer_view *v, const char *key)
{
	struct informer_view_item want = { .key = (char *)key };

	return v->n ? bsearch(&want, v->items, v->n, sizeof(*v->items), item_cmp) : NULL;
}

void informer_view__clear(struct informer_view *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->items[i].key);
	free(v->items);
	cJSON_Delete(v->objs);
	*v = (struct informer_view){ 0 };
}

bool informer__sync(struct informer *inf, struct informer_view *v)
{
	struct informer_view_item *items;
	bool *kept;
	cJSON *objs;
	uint64_t copies = 0;
	size_t n = 0;

	pthread_mutex_lock(&inf->lock);
	if (v->objs && v->version == inf->version) {
		pthread_mutex_unlock(&inf->lock);
		return false;
	}
	objs = cJSON_CreateArray();
	items = calloc(inf->n + 1, sizeof(*items));
	kept = calloc(inf->n + 1, sizeof(*kept));
	/* first what may fail: keys and copies of the changed objects */
	for (size_t i = 0; objs && items && kept && i < inf->n; i++, n++) {
		const struct entry *e = &inf->items[i];
		struct informer_view_item *old = view_find(v, e->key);

		items[n].stamp = e->stamp;
		items[n].key = strdup(e->key);
		kept[n] = old && old->stamp == e->stamp;
		items[n].obj = kept[n] ? old->obj : cJSON_Duplicate(e->obj, true);
		copies += !kept[n];
		if (!items[n].key || !items[n].obj) {
			n++;
			goto fail;
		}
	}
	if (!objs || !items || !kept)
		goto fail;
	/* then what cannot: v's unchanged copies move over */
	for (size_t i = 0; i < n; i++) {
		if (kept[i])
			cJSON_DetachItemViaPointer(v->objs, items[i].obj);
		cJSON_AddItemToArray(objs, items[i].obj);
	}
	inf->c.copies += copies;
	v->version = inf->version;
	pthread_mutex_unlock(&inf->lock);
	for (size_t i = 0; i < v->n; i++)
		free(v->items[i].key);
	free(v->items);
	cJSON_Delete(v->objs);
	qsort(items, n, sizeof(*items), item_cmp);
	v->objs = objs;
	v->items = items;
	v->n = n;
	free(kept);
	return true;
fail:
	/* v stays as it was; the next sync tries again */
	pthread_mutex_unlock(&inf->lock);
	for (size_t i = 0; items && i < n; i++) {
		free(items[i].key);
		if (!kept[i])
			cJSON_Delete(items[i].obj);
	}
	free(items);
	free(kept);
	cJSON_Delete(objs);
	log_warn("%s: out of memory copying the cache", inf->name);
	return false;
}

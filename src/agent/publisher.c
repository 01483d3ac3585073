// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "base/log.h"
#include "agent/publisher.h"

#define PATCH_TIMEOUT_MS 10000
/* Stopping, the last patches get this long in all (the API server may be gone). */
#define STOP_GRACE_S 3
#define LEASE_TIMEOUT_MS 5000
/* How often an agent that does not hold the Lease looks whether it is free. */
#define LEASE_RETRY_S 2
/* A Retry-After is honoured up to this long (a server asking for more is
 * asked again then). */
#define RETRY_AFTER_MAX_S 60
/* Backoff of a write the server could not take now (no Retry-After given). */
#define RETRY_MIN_MS 1000
#define RETRY_MAX_MS 5000
/* A conflict is retried sooner: the newer object is there already. */
#define CONFLICT_MIN_MS 200

struct patch {
	char *key, *path, *manager, *body;
	uint64_t seq; /* when it was queued: the oldest goes first */
	bool queued, failed;
	bool too_large; /* the last send was refused for its size */
	bool del;	/* a DELETE of path, not a patch */
	struct patch *next;
};

struct publisher {
	struct kube *k;
	char *identity, *lease_path, *lease_create_path, *lease_name;
	int lease_s;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct timespec stopped; /* when stop was asked */
	struct patch *patches;	 /* every key ever seen; queued ones wait to be sent */
	uint64_t seq;
	bool leader;
	struct timespec renewed; /* when the Lease was last taken or renewed */
	struct publisher_counters c;

	/* the thread's own: the Lease as last seen */
	char seen_holder[256], seen_renew[64];
	struct timespec seen_at;
	struct timespec next_lease;
	int lease_wait_s;     /* the Lease's last Retry-After */
	int backoff_ms;	      /* the retry ceiling after the last failures */
	unsigned int seed;    /* the jitter's */
	struct timespec hold; /* nothing is sent before (a Retry-After, a backoff) */
};

static void free_patch(struct patch *pt)
{
	free(pt->key);
	free(pt->path);
	free(pt->manager);
	free(pt->body);
	free(pt);
}

static double elapsed_s(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - since->tv_sec) + (now.tv_nsec - since->tv_nsec) / 1e9;
}

/* Deletes path; called without the lock. Gone already is done. */
static bool send_delete(struct publisher *p, const char *path, long timeout_ms)
{
	struct rw_error err = { "" };
	char *resp = NULL, why[512];
	int status = kube__request(p->k, "DELETE", path, NULL, NULL, timeout_ms, &resp, &err);

	if (status < 0)
		log_warn("failed to delete %s: %s", path, err.msg);
	else if (status / 100 != 2 && status != 404)
		log_warn("failed to delete %s: HTTP %d: %s", path, status,
			 kube__error_text(resp, why, sizeof(why)));
	free(resp);
	return status / 100 == 2 || status == 404;
}

/* Whether the server refused a write for its size: 413 from the API server,
 * or etcd's "request is too large" past --max-request-bytes. */
static bool refused_as_too_large(int status, const char *resp)
{
	return status == 413 || (status / 100 >= 4 && resp && strstr(resp, "request is too large"));
}

/* What became of one write. */
struct outcome {
	bool ok;	/* done with: taken, or for an object that is gone */
	bool too_large; /* refused for its size */
	int retry_ms;	/* > 0: send it again after this long */
};

/* Whether the server asks the client to come back later: overloaded (429,
 * API Priority and Fairness) or unavailable (5xx, a restarting server). */
static bool retryable(int status)
{
	return status < 0 || status == 429 || status / 100 == 5;
}

/* The wait before the next attempt after a retryable answer: the server's
 * Retry-After (bounded), else the backoff with jitter; logged as such. */
static int retry_wait_ms(struct publisher *p, int status, const char *what, const char *path)
{
	long ra = status > 0 ? kube__retry_after() : 0;
	int ms;

	if (ra > 0) {
		ms = (int)(ra > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : ra) * 1000;
		log_warn("failed to %s %s: API server answered %d with Retry-After %ld s; "
			 "retrying in %d s",
			 what, path, status, ra, ms / 1000);
		return ms;
	}
	p->backoff_ms = kube__backoff_next(p->backoff_ms, RETRY_MIN_MS, RETRY_MAX_MS);
	ms = kube__backoff_jitter(p->backoff_ms, &p->seed);
	if (status > 0)
		log_warn("failed to %s %s: API server answered %d; retrying in %.1f s", what, path,
			 status, ms / 1000.0);
	return ms;
}

static void send_patch(struct publisher *p, const char *path, const char *manager, const char *body,
		       long timeout_ms, struct outcome *ret)
{
	struct rw_error err = { "" };
	char *url = NULL, *resp = NULL, esc[256], why[512];
	int status;

	if (asprintf(&url, "%s?fieldManager=%s&force=true", path,
		     kube__escape(manager, esc, sizeof(esc))) < 0)
		return;
	status = kube__request(p->k, "PATCH", url, "application/apply-patch+yaml", body, timeout_ms,
			       &resp, &err);
	if (status < 0)
		log_warn("failed to write status %s: %s", path, err.msg);
	else if (status / 100 != 2 && status != 409 && !retryable(status))
		log_warn("failed to write status %s: HTTP %d: %s", path, status,
			 kube__error_text(resp, why, sizeof(why)));
	else if (status == 500 && resp && strstr(resp, "field not declared in schema"))
		/* tried again: the CRDs may be applied meanwhile */
		log_error("failed to write status %s: the cluster's CRD is older than this agent "
			  "(%s): apply the CRDs of this version (kubectl apply -f crds/; Helm "
			  "never upgrades them)",
			  path, kube__error_text(resp, why, sizeof(why)));
	ret->too_large = refused_as_too_large(status, resp);
	/* 404: the probe is gone. Neither is retried. */
	ret->ok = status / 100 == 2 || status == 404;
	if (status == 409 && kube__uid_conflict(resp)) {
		/* the probe was deleted and made again: this write was for the old one */
		log_info("not writing status %s: its probe was replaced (%s)", path,
			 kube__error_text(resp, why, sizeof(why)));
		ret->ok = true;
	} else if (status == 409) {
		/* a resourceVersion conflict: an apply sends no resourceVersion,
		 * so sent again it applies to the newer object */
		p->backoff_ms = kube__backoff_next(p->backoff_ms, CONFLICT_MIN_MS, RETRY_MAX_MS);
		ret->retry_ms = kube__backoff_jitter(p->backoff_ms, &p->seed);
		log_warn("failed to write status %s: HTTP 409: %s; retrying against the newer "
			 "object in %d ms",
			 path, kube__error_text(resp, why, sizeof(why)), ret->retry_ms);
	} else if (retryable(status) && !ret->too_large) {
		ret->retry_ms = retry_wait_ms(p, status, "write status", path);
	}
	if (ret->ok)
		p->backoff_ms = 0;
	free(resp);
	free(url);
}

static struct patch *find(struct publisher *p, const char *key);
static void drop(struct publisher *p, const char *key);
static void tend_lease(struct publisher *p);

/* First queued, first sent: when patches come faster than the server takes
 * them, every key still gets its turn (a newer patch of a waiting key keeps
 * its place in the line). */
static struct patch *oldest_queued(struct publisher *p)
{
	struct patch *best = NULL;

	for (struct patch *pt = p->patches; pt; pt = pt->next)
		if (pt->queued && (!best || pt->seq < best->seq))
			best = pt;
	return best;
}

static void add_ms(struct timespec *t, long ms)
{
	t->tv_sec += ms / 1000;
	t->tv_nsec += (ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

/* How long until the hold ends (<= 0: sending is free). */
static double held_s(struct publisher *p)
{
	return -elapsed_s(&p->hold);
}

/* Sends the patch or delete of pt (a copy: a newer one may replace it
 * meanwhile), without the lock; then records what became of it. */
static void send_one(struct publisher *p, struct patch *pt, long timeout_ms)
{
	char *key = strdup(pt->key), *path = strdup(pt->path);
	char *manager = strdup(pt->manager), *body = strdup(pt->body);
	bool del = pt->del;
	struct outcome out = { 0 };

	pt->queued = false;
	pthread_mutex_unlock(&p->lock);
	if (key && path && manager && body && del)
		out.ok = send_delete(p, path, timeout_ms);
	else if (key && path && manager && body)
		send_patch(p, path, manager, body, timeout_ms, &out);
	free(path);
	free(manager);
	free(body);
	pthread_mutex_lock(&p->lock);
	p->c.patches++;
	if (!out.ok)
		p->c.failures++;
	/* the key may have been forgotten while the lock was free */
	pt = key ? find(p, key) : NULL;
	if (pt) {
		pt->failed = !out.ok;
		pt->too_large = out.too_large;
		/* sent again as it was, first in line, unless a newer one waits */
		if (out.retry_ms > 0)
			pt->queued = true;
	}
	if (out.retry_ms > 0) {
		clock_gettime(CLOCK_MONOTONIC, &p->hold);
		add_ms(&p->hold, out.retry_ms);
	}
	/* a deleted object's key is done with, unless a newer write waits */
	if (pt && out.ok && del && !pt->queued)
		drop(p, key);
	free(key);
}

static void send_queued(struct publisher *p)
{
	struct patch *pt;

	for (;;) {
		long timeout_ms = PATCH_TIMEOUT_MS;

		if (p->stop) {
			double left = STOP_GRACE_S - elapsed_s(&p->stopped);

			if (left <= 0.1)
				return;
			timeout_ms = (long)(left * 1000);
		}
		/* the server asked to wait (Retry-After), or failed: back off */
		if (held_s(p) > 0)
			return;
		pt = oldest_queued(p);
		if (!pt)
			return;
		send_one(p, pt, timeout_ms);
		/* a long queue must not let the Lease lapse */
		tend_lease(p);
	}
}

static char *lease_body(struct publisher *p, const cJSON *old)
{
	cJSON *lease = cJSON_CreateObject(), *md, *spec;
	const cJSON *ospec = cJSON_GetObjectItemCaseSensitive(old, "spec");
	const cJSON *omd = cJSON_GetObjectItemCaseSensitive(old, "metadata");
	const char *oholder = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(ospec, "holderIdentity"));
	const cJSON *trans = cJSON_GetObjectItemCaseSensitive(ospec, "leaseTransitions");
	const cJSON *acquire = cJSON_GetObjectItemCaseSensitive(ospec, "acquireTime");
	bool mine = oholder && !strcmp(oholder, p->identity);
	char now[64], *out;

	time_rfc3339(now, sizeof(now), 6); /* a Lease's MicroTime */
	cJSON_AddStringToObject(lease, "apiVersion", "coordination.k8s.io/v1");
	cJSON_AddStringToObject(lease, "kind", "Lease");
	md = cJSON_AddObjectToObject(lease, "metadata");
	cJSON_AddStringToObject(md, "name", p->lease_name);
	if (omd && cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(omd, "resourceVersion")))
		cJSON_AddStringToObject(
			md, "resourceVersion",
			cJSON_GetObjectItemCaseSensitive(omd, "resourceVersion")->valuestring);
	spec = cJSON_AddObjectToObject(lease, "spec");
	cJSON_AddStringToObject(spec, "holderIdentity", p->identity);
	cJSON_AddNumberToObject(spec, "leaseDurationSeconds", p->lease_s);
	cJSON_AddStringToObject(spec, "acquireTime",
				mine && cJSON_GetStringValue(acquire) ? acquire->valuestring : now);
	cJSON_AddStringToObject(spec, "renewTime", now);
	cJSON_AddNumberToObject(spec, "leaseTransitions",
				(cJSON_IsNumber(trans) ? trans->valueint : 0) + (old && !mine));
	out = cJSON_PrintUnformatted(lease);
	cJSON_Delete(lease);
	return out;
}

/* Whether the Lease as read is free to take: expired as seen by our own clock
 * (the holder's clock may differ), or released. */
static bool lease_free(struct publisher *p, const cJSON *lease)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
	const char *holder = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(spec, "holderIdentity"));
	const char *renew = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(spec, "renewTime"));

	if (!holder || !holder[0])
		return true;
	if (strcmp(holder, p->seen_holder) || strcmp(renew ? renew : "", p->seen_renew)) {
		snprintf(p->seen_holder, sizeof(p->seen_holder), "%s", holder);
		snprintf(p->seen_renew, sizeof(p->seen_renew), "%s", renew ? renew : "");
		clock_gettime(CLOCK_MONOTONIC, &p->seen_at);
		return false;
	}
	return elapsed_s(&p->seen_at) > p->lease_s;
}

/* The Retry-After of the Lease request just made, bounded. */
static int lease_retry_after(void)
{
	long ra = kube__retry_after();

	return (int)(ra > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : ra);
}

static bool try_lease(struct publisher *p)
{
	struct rw_error err = { "" };
	char *resp = NULL, *body = NULL, why[512];
	cJSON *lease = NULL;
	const char *holder;
	bool leader = false;
	int status;

	status = kube__request(p->k, "GET", p->lease_path, NULL, NULL, LEASE_TIMEOUT_MS, &resp,
			       &err);
	if (status == 404) {
		body = lease_body(p, NULL);
		status = kube__request(p->k, "POST", p->lease_create_path, "application/json", body,
				       LEASE_TIMEOUT_MS, NULL, &err);
		leader = status == 201;
		goto out;
	}
	if (status != 200) {
		p->lease_wait_s = status > 0 ? lease_retry_after() : 0;
		if (status > 0)
			log_warn("failed to read Lease %s: HTTP %d: %s", p->lease_path, status,
				 kube__error_text(resp, why, sizeof(why)));
		else
			log_warn("failed to read Lease %s: %s", p->lease_path, err.msg);
		goto out;
	}
	lease = cJSON_Parse(resp);
	holder = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(lease, "spec"), "holderIdentity"));
	if ((holder && !strcmp(holder, p->identity)) || lease_free(p, lease)) {
		body = lease_body(p, lease);
		status = kube__request(p->k, "PUT", p->lease_path, "application/json", body,
				       LEASE_TIMEOUT_MS, NULL, &err);
		leader = status == 200;
		p->lease_wait_s = status > 0 ? lease_retry_after() : 0;
		/* written meanwhile by another: read again at the next try, soon */
		if (status == 409)
			log_info("Lease %s changed since it was read (409 Conflict): reading it "
				 "again",
				 p->lease_path);
	}
out:
	cJSON_Delete(lease);
	free(resp);
	free(body);
	return leader;
}

static void tend_lease(struct publisher *p)
{
	struct timespec now;
	bool leader;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec < p->next_lease.tv_sec)
		return;
	pthread_mutex_unlock(&p->lock);
	leader = try_lease(p);
	pthread_mutex_lock(&p->lock);
	p->c.lease_requests++;
	if (leader != p->leader)
		log_info(leader ? "holding Lease %s: this agent writes the summaries"
				: "not holding Lease %s: another agent writes the summaries",
			 p->lease_path);
	p->leader = leader;
	if (leader)
		clock_gettime(CLOCK_MONOTONIC, &p->renewed);
	clock_gettime(CLOCK_MONOTONIC, &p->next_lease);
	p->next_lease.tv_sec += leader && p->lease_s / 3 > 0 ? p->lease_s / 3 : LEASE_RETRY_S;
	/* the server asked to wait longer (429, 503) */
	if (p->lease_wait_s > 0) {
		log_warn("Lease %s: API server answered with Retry-After %d s; trying again then",
			 p->lease_path, p->lease_wait_s);
		clock_gettime(CLOCK_MONOTONIC, &p->next_lease);
		p->next_lease.tv_sec += p->lease_wait_s;
		p->lease_wait_s = 0;
	}
}

/* Hands the Lease over at once instead of letting it expire. */
static void release_lease(struct publisher *p)
{
	struct rw_error err = { "" };
	char *resp = NULL, *body = NULL;
	cJSON *lease = NULL, *spec;
	int status;

	status = kube__request(p->k, "GET", p->lease_path, NULL, NULL, LEASE_TIMEOUT_MS, &resp,
			       &err);
	lease = status == 200 ? cJSON_Parse(resp) : NULL;
	spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
	if (spec && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(spec, "holderIdentity")) &&
	    !strcmp(cJSON_GetObjectItemCaseSensitive(spec, "holderIdentity")->valuestring,
		    p->identity)) {
		cJSON_ReplaceItemInObjectCaseSensitive(spec, "holderIdentity",
						       cJSON_CreateString(""));
		body = cJSON_PrintUnformatted(lease);
		status = kube__request(p->k, "PUT", p->lease_path, "application/json", body,
				       LEASE_TIMEOUT_MS, NULL, &err);
		if (status == 200)
			log_info("released Lease %s", p->lease_path);
	}
	cJSON_Delete(lease);
	free(resp);
	free(body);
}

static void *run(void *arg)
{
	struct publisher *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec until;

		double hold;

		send_queued(p);
		tend_lease(p);
		/* wake when a hold ends, else once a second (the Lease) */
		hold = held_s(p);
		clock_gettime(CLOCK_REALTIME, &until);
		add_ms(&until, hold > 0 && hold < 1 ? (long)(hold * 1000) + 1 : 1000);
		pthread_cond_timedwait(&p->cond, &p->lock, &until);
	}
	send_queued(p);
	if (p->leader) {
		pthread_mutex_unlock(&p->lock);
		release_lease(p);
		pthread_mutex_lock(&p->lock);
		p->leader = false;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct publisher *publisher__start(struct kube *k, const char *identity, const char *lease_ns,
				   const char *lease_name, int lease_s)
{
	struct publisher *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->k = k;
	p->lease_s = lease_s;
	/* each agent its own jitter, so nodes' agents do not retry in step */
	p->seed = (unsigned int)time(NULL) ^ (unsigned int)(uintptr_t)p;
	clock_gettime(CLOCK_MONOTONIC, &p->hold);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->identity = strdup(identity);
	p->lease_name = strdup(lease_name);
	if (!p->identity || !p->lease_name ||
	    asprintf(&p->lease_create_path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases",
		     lease_ns) < 0 ||
	    asprintf(&p->lease_path, "%s/%s", p->lease_create_path, lease_name) < 0 ||
	    pthread_create(&p->thread, NULL, run, p)) {
		free(p->identity);
		free(p->lease_name);
		free(p);
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

void publisher__stop(struct publisher *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	clock_gettime(CLOCK_MONOTONIC, &p->stopped);
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	while (p->patches) {
		struct patch *pt = p->patches;

		p->patches = pt->next;
		free_patch(pt);
	}
	free(p->identity);
	free(p->lease_name);
	free(p->lease_path);
	free(p->lease_create_path);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static struct patch *find(struct publisher *p, const char *key)
{
	struct patch *pt;

	for (pt = p->patches; pt; pt = pt->next)
		if (!strcmp(pt->key, key))
			return pt;
	return NULL;
}

/* Queues what key's patch sends: a newer one replaces a waiting one. */
static int queue(struct publisher *p, const char *key, const char *path, const char *manager,
		 const char *body, bool del)
{
	struct patch *pt;
	char *np = strdup(path), *nm = strdup(manager), *nb = strdup(body);
	int e = 0;

	pthread_mutex_lock(&p->lock);
	pt = find(p, key);
	if (!pt && (pt = calloc(1, sizeof(*pt)))) {
		pt->key = strdup(key);
		if (pt->key) {
			pt->next = p->patches;
			p->patches = pt;
		} else {
			free(pt);
			pt = NULL;
		}
	}
	if (!pt || !np || !nm || !nb) {
		e = -ENOMEM;
		free(np);
		free(nm);
		free(nb);
	} else {
		free(pt->path);
		free(pt->manager);
		free(pt->body);
		pt->path = np;
		pt->manager = nm;
		pt->body = nb;
		pt->del = del;
		if (!pt->queued)
			pt->seq = ++p->seq;
		pt->queued = true;
		pthread_cond_signal(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return e;
}

int publisher__apply(struct publisher *p, const char *key, const char *path, const char *manager,
		     const char *body)
{
	return queue(p, key, path, manager, body, false);
}

int publisher__delete(struct publisher *p, const char *key, const char *path)
{
	return queue(p, key, path, "", "", true);
}

/* Forgets key's patch; called with the lock held. */
static void drop(struct publisher *p, const char *key)
{
	struct patch **pp;

	for (pp = &p->patches; *pp; pp = &(*pp)->next) {
		if (!strcmp((*pp)->key, key)) {
			struct patch *pt = *pp;

			*pp = pt->next;
			free_patch(pt);
			return;
		}
	}
}

void publisher__forget(struct publisher *p, const char *key)
{
	pthread_mutex_lock(&p->lock);
	drop(p, key);
	pthread_mutex_unlock(&p->lock);
}

/* Whether the last patch sent for key was failed (or too_large, when asked). */
static bool last_patch(struct publisher *p, const char *key, bool too_large)
{
	struct patch *pt;
	bool yes;

	pthread_mutex_lock(&p->lock);
	pt = find(p, key);
	yes = pt && (too_large ? pt->too_large : pt->failed);
	pthread_mutex_unlock(&p->lock);
	return yes;
}

bool publisher__failed(struct publisher *p, const char *key)
{
	return last_patch(p, key, false);
}

bool publisher__too_large(struct publisher *p, const char *key)
{
	return last_patch(p, key, true);
}

bool publisher__leader(struct publisher *p)
{
	bool leader;

	pthread_mutex_lock(&p->lock);
	/* a Lease not renewed in time may be another agent's by now */
	leader = p->leader && elapsed_s(&p->renewed) < p->lease_s;
	pthread_mutex_unlock(&p->lock);
	return leader;
}

void publisher__counters(struct publisher *p, struct publisher_counters *ret)
{
	pthread_mutex_lock(&p->lock);
	*ret = p->c;
	pthread_mutex_unlock(&p->lock);
}

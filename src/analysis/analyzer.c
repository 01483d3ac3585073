// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/analyzer.h"
#include "base/cancel.h"
#include "base/clock.h"

/* A failed analysis is answered from memory this long before it is tried again. */
#define FAILED_KEEP_NS (30 * NS_PER_S)
/* One past the time limit, much longer: trying again costs a worker as much. */
#define TIMED_OUT_KEEP_NS (600 * NS_PER_S)

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_FAILED };

struct worker;

/* One file and pattern set; the record stays after a failure, as its answer. */
struct job {
	char *key;    /* the file's identity and the patterns */
	char *name;   /* the path the caller gave, for messages */
	char *origin; /* where the file is seen from, for its debug file (or NULL) */
	char *owner;  /* the tenant that asked first (analyzer__owner), or NULL */
	int fd;	      /* QUEUED: the file, until a worker takes it */
	char **patterns;
	size_t npatterns;
	enum job_state state;
	uint64_t started_ns; /* RUNNING */
	uint64_t expires_ns; /* FAILED */
	struct worker *worker;
	struct binary *bin; /* DONE */
	struct rw_error err;
	struct job *next;
};

/* The lock guards every field of struct analyzer and of its jobs and workers. */
struct worker {
	struct analyzer *a;
	bool abandoned;	     /* past the time limit: its result is not wanted */
	atomic_bool cancel;  /* set with abandoned, or at shutdown: the reading stops */
	char *owner;	     /* its job's, while it runs */
	struct worker *next; /* abandoned, in the analyzer's list */
};

struct analyzer {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs; /* the owner's, and one per live worker */
	bool stopping;
	int notify_fd;
	uint64_t timeout_ns;
	struct job *jobs;
	size_t nworkers;   /* taking jobs: 0 or 1 */
	size_t nabandoned; /* past the limit, still running */
	struct worker *abandoned;
	char *owner; /* analyzer__owner's */
	analyzer_read_fn read;
	struct analyzer_counters counters;
};

static void job_free(struct job *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->npatterns; i++)
		free(j->patterns[i]);
	free(j->patterns);
	if (j->fd >= 0)
		close(j->fd);
	binary__put(j->bin);
	free(j->key);
	free(j->name);
	free(j->origin);
	free(j->owner);
	free(j);
}

static void analyzer_destroy(struct analyzer *a)
{
	while (a->jobs) {
		struct job *j = a->jobs;

		a->jobs = j->next;
		job_free(j);
	}
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a->owner);
	free(a);
}

static void notify(struct analyzer *a)
{
	uint64_t one = 1;

	if (a->notify_fd >= 0 && write(a->notify_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: the loop is woken already */
	}
}

/*
 * Reads the file and matches the patterns, which analyses every function
 * they match (its return sites), and reads their inlined copies: what the
 * attach on the main loop would otherwise do (the copies it does not read).
 * The match's answer (too many functions, names that match nothing) is the
 * tracer's to give; the binary keeps the work.
 */
static struct binary *analyse(int fd, const char *name, char **patterns, size_t npatterns,
			      struct rw_error *err)
{
	struct binary_match m;
	struct binary *b;
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* name (/proc/PID/exe): where the file's debug file is looked for */
	b = binary__open_as(NULL, path, name, err);
	if (b && !binary__match(b, (const char *const *)patterns, npatterns, BINARY_DEFAULT_LIMIT,
				&m, NULL)) {
		binary_match__clear(&m);
		/* their inlined copies too: an unreadable tree leaves the functions as matched */
		(void)binary__inlined_keep(b, (const char *const *)patterns, npatterns);
	}
	return b;
}

static bool same_owner(const char *x, const char *y)
{
	return x == y || (x && y && !strcmp(x, y));
}

/* How many of owner's analyses were given up on and still run. */
static size_t owner_abandoned(const struct analyzer *a, const char *owner)
{
	size_t n = 0;

	for (const struct worker *w = a->abandoned; w; w = w->next)
		n += same_owner(w->owner, owner);
	return n;
}

/* The first queued job of an owner without too many abandoned analyses. */
static struct job *next_queued(struct analyzer *a)
{
	for (struct job *j = a->jobs; j; j = j->next)
		if (j->state == JOB_QUEUED &&
		    owner_abandoned(a, j->owner) < ANALYZER_MAX_ABANDONED_PER_OWNER)
			return j;
	return NULL;
}

/* w, past the limit: its reading stops where it next asks (cancel.h). */
static void abandon(struct analyzer *a, struct worker *w)
{
	atomic_store(&w->cancel, true);
	w->abandoned = true;
	w->next = a->abandoned;
	a->abandoned = w;
	a->nworkers--;
	a->nabandoned++;
}

/* An abandoned w ends: its owner may have queued jobs waiting for it. */
static void abandoned_end(struct analyzer *a, struct worker *w)
{
	struct worker **pp;

	for (pp = &a->abandoned; *pp && *pp != w; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = w->next;
	a->nabandoned--;
	pthread_cond_broadcast(&a->cond);
	notify(a);
}

/* j took longer than the limit: its answer, for a long while. */
static void time_out(struct analyzer *a, struct job *j, uint64_t now)
{
	binary__put(j->bin);
	j->bin = NULL;
	j->state = JOB_FAILED;
	j->expires_ns = now + TIMED_OUT_KEEP_NS;
	a->counters.timeouts++;
	rw_error_set(&j->err, ETIME,
		     "reading %s took more than %.3g s, the limit of one analysis (the agent's "
		     "--analysis-timeout): not traced",
		     j->name, (double)a->timeout_ns / 1e9);
}

/* Takes queued jobs one at a time until the analyzer stops or gives up on it. */
/* A worker's reading of a job it took (and owns: its fd, name and patterns are freed). */
static struct binary *read_job(analyzer_read_fn read, int fd, char *name, char **patterns,
			       size_t npatterns, struct rw_error *err)
{
	struct binary *b = read ? read(fd, patterns, npatterns, err)
				: analyse(fd, name ? name : "", patterns, npatterns, err);

	free(name);
	close(fd);
	for (size_t i = 0; i < npatterns; i++)
		free(patterns[i]);
	free(patterns);
	return b;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct analyzer *a = w->a;
	bool last;

	pthread_mutex_lock(&a->lock);
	while (!a->stopping && !w->abandoned) {
		struct job *j = next_queued(a);
		struct rw_error err = { "" };
		analyzer_read_fn read = a->read; /* a test's, else analyse() */
		char *name;
		char **patterns;
		size_t npatterns;
		uint64_t deadline;
		struct binary *b;
		int fd;

		if (!j) {
			pthread_cond_wait(&a->cond, &a->lock);
			continue;
		}
		/* the worker owns what it reads: the job may be gone when it ends */
		fd = j->fd;
		name = strdup(j->origin ? j->origin : j->name);
		patterns = j->patterns;
		npatterns = j->npatterns;
		j->fd = -1;
		j->patterns = NULL;
		j->npatterns = 0;
		j->state = JOB_RUNNING;
		j->worker = w;
		j->started_ns = clock__mono_ns();
		/* the reading stops at its limit itself, whether or not the loop looks */
		if (__builtin_add_overflow(j->started_ns, a->timeout_ns, &deadline))
			deadline = UINT64_MAX;
		cancel__bind(&w->cancel, deadline);
		free(w->owner);
		w->owner = j->owner ? strdup(j->owner) : NULL;
		pthread_mutex_unlock(&a->lock);

		b = read_job(read, fd, name, patterns, npatterns, &err);

		pthread_mutex_lock(&a->lock);
		a->counters.analyses++;
		if (w->abandoned || a->stopping) {
			binary__put(b);
			break;
		}
		j->worker = NULL;
		j->bin = b;
		j->state = b ? JOB_DONE : JOB_FAILED;
		/* past the limit is past it, whether or not the loop looked meanwhile */
		if (clock__mono_ns() - j->started_ns >= a->timeout_ns) {
			time_out(a, j, clock__mono_ns());
		} else if (!b) {
			char fdpath[64];

			/* say which file, not the worker's descriptor */
			snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
			rw_error_replace(&err, fdpath, j->name);
			j->err = err;
			j->expires_ns = clock__mono_ns() + FAILED_KEEP_NS;
		}
		notify(a);
	}
	if (w->abandoned)
		abandoned_end(a, w);
	else
		a->nworkers--;
	last = --a->refs == 0;
	pthread_mutex_unlock(&a->lock);
	cancel__bind(NULL, 0);
	free(w->owner);
	free(w);
	if (last)
		analyzer_destroy(a);
	return NULL;
}

/* A worker for the queue, unless one runs or too many are past the limit. */
static void staff(struct analyzer *a)
{
	struct worker *w;
	pthread_attr_t attr;
	pthread_t tid;

	if (a->nworkers || a->nabandoned >= ANALYZER_MAX_ABANDONED || !next_queued(a))
		return;
	w = calloc(1, sizeof(*w));
	if (!w || pthread_attr_init(&attr)) {
		free(w);
		return;
	}
	w->a = a;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&tid, &attr, work, w)) {
		free(w);
	} else {
		a->nworkers++;
		a->refs++;
	}
	pthread_attr_destroy(&attr);
}

/* Gives up on analyses past the limit and forgets failures that expired. */
static void expire(struct analyzer *a, uint64_t now)
{
	struct job **pp = &a->jobs;

	while (*pp) {
		struct job *j = *pp;

		if (j->state == JOB_RUNNING && now - j->started_ns > a->timeout_ns) {
			abandon(a, j->worker);
			j->worker = NULL;
			time_out(a, j, now);
		}
		if (j->state == JOB_FAILED && now >= j->expires_ns) {
			*pp = j->next;
			job_free(j);
			continue;
		}
		pp = &j->next;
	}
}

/*
 * The owner, the file's identity (as the binary cache tells files apart) and
 * the patterns. Each owner has jobs of its own: one whose readings wait for
 * its abandoned ones holds no one else's, and a time-out is remembered for
 * the owner that ran into it (a reading that succeeds serves all, from the
 * cache).
 */
static char *job_key(const char *owner, const struct stat *st, const char *const *patterns,
		     size_t npatterns, const char *view)
{
	size_t len = 128 + (owner ? strlen(owner) : 0) + (view ? strlen(view) + 1 : 0);
	char *key;
	int o;

	for (size_t i = 0; i < npatterns; i++)
		len += strlen(patterns[i]) + 1;
	key = malloc(len);
	if (!key)
		return NULL;
	o = snprintf(key, len, "%s\n%ju:%ju:%jd:%jd.%ld:%jd.%ld", owner ? owner : "",
		     (uintmax_t)st->st_dev, (uintmax_t)st->st_ino, (intmax_t)st->st_size,
		     (intmax_t)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
		     (intmax_t)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
	for (size_t i = 0; i < npatterns; i++)
		o += snprintf(key + o, len - o, "\n%s", patterns[i]);
	if (view)
		snprintf(key + o, len - o, "\nview %s", view);
	return key;
}

static struct job *job_new(char *key, int fd, const char *name, const char *origin,
			   const char *owner, const char *const *patterns, size_t npatterns)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->key = key;
	j->fd = fd;
	j->name = strdup(name);
	j->origin = origin ? strdup(origin) : NULL;
	j->owner = owner ? strdup(owner) : NULL;
	j->patterns = calloc(npatterns + 1, sizeof(*j->patterns));
	if (!j->name || !j->patterns || (owner && !j->owner) || (origin && !j->origin))
		goto fail;
	for (; j->npatterns < npatterns; j->npatterns++)
		if (!(j->patterns[j->npatterns] = strdup(patterns[j->npatterns])))
			goto fail;
	return j;
fail:
	j->key = NULL;
	j->fd = -1;
	job_free(j);
	return NULL;
}

enum analysis_state analyzer__check(struct analyzer *a, struct binary_cache *cache,
				    const char *path, const char *const *patterns, size_t npatterns,
				    struct rw_error *err)
{
	return analyzer__check_as(a, cache, path, NULL, patterns, npatterns, err);
}

/*
 * Whether the cache holds the view of the file at path that a process seeing
 * it as origin (else path) has: a reading adopted for another process's view
 * is not this one's (binary.h). A match that failed (a glob over its limits)
 * is not asked again: the attach gives its error.
 */
static bool view_held(const struct binary_cache *cache, const char *path, const char *origin)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	bool held = fd >= 0 && binary_cache__has(cache, fd, origin ? origin : path);

	if (fd >= 0)
		close(fd);
	return held || fd < 0;
}

/* A finished job's reading, the job gone from the queue (the lock held). */
static struct binary *job_take(struct analyzer *a, struct job *j)
{
	struct binary *b = j->bin;
	struct job **pp;

	for (pp = &a->jobs; *pp != j; pp = &(*pp)->next)
		;
	*pp = j->next;
	j->bin = NULL;
	job_free(j);
	return b;
}

/*
 * analyzer__check_as; retry: a reading that ended (adopted into the cache)
 * may be of another view of a stripped file (binary.h: another process's
 * debug file) than this caller's: then its own is queued, once.
 */
static enum analysis_state check(struct analyzer *a, struct binary_cache *cache, const char *path,
				 const char *origin, const char *const *patterns, size_t npatterns,
				 bool retry, struct rw_error *err)
{
	enum analysis_state state = ANALYSIS_PENDING;
	const char *name = origin ? origin : path;
	struct binary *adopt = NULL;
	bool other_view;
	struct job *j;
	struct stat st;
	char *key;
	int fd;

	/* non-blocking: a FIFO must not hold the loop until a writer comes */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rw_error_set(err, errno, "failed to open %s: %s", path, strerror(errno));
		return ANALYSIS_FAILED;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		rw_error_set(err, EINVAL, "%s is not a regular file", path);
		close(fd);
		return ANALYSIS_FAILED;
	}
	/* read already, and matched with these patterns: the attach finds the answer */
	if (binary_cache__answers(cache, fd, name, patterns, npatterns, BINARY_DEFAULT_LIMIT)) {
		close(fd);
		return ANALYSIS_READY;
	}
	/* read for another view only: this one is a reading of its own */
	other_view = binary_cache__has(cache, fd, NULL) && !binary_cache__has(cache, fd, name);
	pthread_mutex_lock(&a->lock);
	key = job_key(a->owner, &st, patterns, npatterns, other_view ? name : NULL);
	if (!key) {
		pthread_mutex_unlock(&a->lock);
		close(fd);
		return ANALYSIS_READY; /* without memory for a job, the tracer reads it */
	}
	expire(a, clock__mono_ns());
	for (j = a->jobs; j && strcmp(j->key, key); j = j->next)
		;
	if (!j && binary_cache__full(cache, &st, err)) {
		/* no room to use it: not read (the attach says why) */
		free(key);
		close(fd);
		state = ANALYSIS_FAILED;
	} else if (!j) {
		j = job_new(key, fd, path, origin, a->owner, patterns, npatterns);
		if (j) {
			j->next = a->jobs;
			a->jobs = j;
			pthread_cond_signal(&a->cond); /* an idle worker takes it */
		} else {
			free(key);
			close(fd);
			state = ANALYSIS_READY;
		}
	} else {
		free(key);
		close(fd);
		if (j->state == JOB_DONE || j->state == JOB_FAILED)
			state = j->state == JOB_DONE ? ANALYSIS_READY : ANALYSIS_FAILED;
		if (j->state == JOB_FAILED) {
			/* named by the path it was asked by; say this caller's */
			*err = j->err;
			rw_error_replace(err, j->name, path);
		}
	}
	if (j && j->state == JOB_DONE)
		adopt = job_take(a, j);
	staff(a);
	pthread_mutex_unlock(&a->lock);
	if (adopt) {
		binary_cache__adopt(cache, adopt);
		/* the worker's reading, freed here or before, goes back to the system */
		malloc_trim(0);
		if (state == ANALYSIS_READY && retry && !view_held(cache, path, origin))
			return check(a, cache, path, origin, patterns, npatterns, false, err);
	}
	return state;
}

enum analysis_state analyzer__check_as(struct analyzer *a, struct binary_cache *cache,
				       const char *path, const char *origin,
				       const char *const *patterns, size_t npatterns,
				       struct rw_error *err)
{
	return check(a, cache, path, origin, patterns, npatterns, true, err);
}

struct analyzer *analyzer__new(int notify_fd, uint64_t timeout_ns)
{
	struct analyzer *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	if (pthread_mutex_init(&a->lock, NULL)) {
		free(a);
		return NULL;
	}
	if (pthread_cond_init(&a->cond, NULL)) {
		pthread_mutex_destroy(&a->lock);
		free(a);
		return NULL;
	}
	a->refs = 1;
	a->notify_fd = notify_fd;
	a->timeout_ns = timeout_ns ? timeout_ns : ANALYZER_DEFAULT_TIMEOUT_NS;
	return a;
}

void analyzer__free(struct analyzer *a)
{
	bool last;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stopping = true;
	a->notify_fd = -1;
	for (struct job *j = a->jobs; j; j = j->next)
		if (j->state == JOB_RUNNING && j->worker)
			atomic_store(&j->worker->cancel, true);
	/* a running analysis ends on its own and drops its result; the last
	 * worker out frees the jobs */
	pthread_cond_broadcast(&a->cond);
	last = --a->refs == 0;
	pthread_mutex_unlock(&a->lock);
	if (last)
		analyzer_destroy(a);
}

void analyzer__owner(struct analyzer *a, const char *owner)
{
	pthread_mutex_lock(&a->lock);
	if (!same_owner(a->owner, owner)) {
		free(a->owner);
		/* without memory, the checks are no one's: the shared tenant */
		a->owner = owner ? strdup(owner) : NULL;
	}
	pthread_mutex_unlock(&a->lock);
}

void analyzer__set_read(struct analyzer *a, analyzer_read_fn fn)
{
	pthread_mutex_lock(&a->lock);
	a->read = fn;
	pthread_mutex_unlock(&a->lock);
}

void analyzer__counters(const struct analyzer *a, struct analyzer_counters *ret)
{
	struct analyzer *m = (struct analyzer *)a;

	pthread_mutex_lock(&m->lock);
	*ret = a->counters;
	ret->abandoned = a->nabandoned;
	pthread_mutex_unlock(&m->lock);
}

// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../bpf/retwatch.h"
#include "agent.h"
#include "cgroup.h"
#include "informer.h"
#include "log.h"
#include "metrics.h"
#include "probe.h"
#include "overlay.h"
#include "publisher.h"
#include "rootpath.h"
#include "symbolize.h"

#define NS_PER_S 1000000000ULL
/* New processes of traced containers are found this often. */
#define SCAN_EVERY_NS (NS_PER_S)
/* A runtime starts a container's first process in its own cgroup and moves
 * it: a young process outside any container is looked at again. */
#define PROC_SETTLE_NS (5 * NS_PER_S)
/* In-flight frames untouched this long are purged (a backstop). */
#define SWEEP_AGE_NS (60 * NS_PER_S)
#define SWEEP_EVERY_NS (5 * NS_PER_S)
/* A new probe's first results go out this soon, later ones every interval. */
#define FIRST_WRITE_NS (NS_PER_S / 2)
#define MAX_ERRORS 20
#define RETRY_NS (30 * NS_PER_S)
#define SUMMARY_MANAGER "retwatch-summary"
#define PROBES_PATH "/apis/retwatch.io/v1alpha1/functionprobes"
#define PROBE_PATH "/apis/retwatch.io/v1alpha1/namespaces/%s/functionprobes/%s"

struct fn_result {
	char *name;
	const char *mode; /* "entry+ret" or "entry-only" */
	char *reason;	  /* why entry-only */
	size_t nreturns;
	struct latency done; /* from processes no longer traced */
};

/* One process traced for one probe. */
struct trace {
	char *pod, *container, *cid, *exe;
	pid_t pid;
	uint64_t starttime;
	dev_t dev;
	ino_t ino;
	struct tracer_target *target;
	size_t *fn;    /* p->fns index of each of the target's functions */
	char *warning; /* patterns that matched nothing in this binary */
	bool seen;
	struct trace *next;
};

/* An attach that failed: tried again after a while (the kernel may have
 * been short of memory), reported as it stands meanwhile. */
struct failure {
	char *key;
	char *msg;
	uint64_t retry_ns;
	bool seen;
	struct failure *next;
};

/* What the processes no longer traced counted, by pod and container: the
 * metrics' series keep counting up across a process's exit. */
struct series {
	char *pod, *container;
	struct latency *lat; /* by p->fns index */
	size_t nlat;
	struct series *next;
};

struct probe {
	char *uid, *ns, *name, *key, *status_path;
	int64_t generation;
	time_t created;
	struct probe_spec spec;
	bool valid, expired, seen, limited;
	char spec_err[512];
	struct fn_result *fns;
	size_t nfns;
	struct trace *traces;
	struct series *gone;
	struct failure *failures;
	char *errors[MAX_ERRORS];
	size_t nerrors, nerrors_more;
	uint64_t next_write, next_summary;
	char *last_entry, *last_summary;
	bool wrote;
	struct probe *next;
};

struct proc_ent {
	pid_t pid;
	uint64_t starttime;
	uint64_t seen_ns;	     /* when first listed */
	char cid[CGROUP_ID_LEN + 1]; /* "" when in no container */
	/* learnt once, when the process is first looked at for a pod */
	char pod_uid[48]; /* the pod its cgroup was found to name, or "" */
	signed char init; /* pid 1 of its namespace: 1, 0, or -1 not known yet */
};

struct agent {
	struct agent_opts o;
	struct kube *k;
	struct tracer *tracer;
	struct binary_cache *cache;
	struct symbolizer *sym;
	struct informer *probes_inf, *pods_inf;
	struct publisher *pub;
	int notify_fd;
	char *manager;
	struct probe *probes;
	cJSON *probes_snap, *pods_snap;
	uint64_t probes_version, pods_version; /* of the snapshots */
	struct proc_ent *procs;
	size_t nprocs;
	uint64_t next_scan, next_sweep;
	/* for the metrics */
	uint64_t attach_failures, swept;
	size_t nlimited;
	bool series_warned;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void rfc3339(time_t t, char *buf, size_t len)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static time_t parse_rfc3339(const char *s)
{
	struct tm tm = { 0 };

	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return timegm(&tm);
}

static const cJSON *get(const cJSON *obj, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(obj, name);
}

static const char *get_str(const cJSON *obj, const char *name)
{
	return cJSON_GetStringValue(get(obj, name));
}

/* ---- results and errors of a probe ---- */

static size_t fn_get(struct probe *p, const char *name)
{
	struct fn_result *fns;

	for (size_t i = 0; i < p->nfns; i++)
		if (!strcmp(p->fns[i].name, name))
			return i;
	fns = realloc(p->fns, (p->nfns + 1) * sizeof(*fns));
	if (!fns)
		return SIZE_MAX;
	p->fns = fns;
	memset(&fns[p->nfns], 0, sizeof(*fns));
	fns[p->nfns].name = strdup(name);
	fns[p->nfns].mode = "entry+ret";
	if (!fns[p->nfns].name)
		return SIZE_MAX;
	return p->nfns++;
}

static void fns_clear(struct probe *p)
{
	for (size_t i = 0; i < p->nfns; i++) {
		free(p->fns[i].name);
		free(p->fns[i].reason);
	}
	free(p->fns);
	p->fns = NULL;
	p->nfns = 0;
}

static void add_error(struct probe *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_error(struct probe *p, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	int n;

	if (p->nerrors == MAX_ERRORS) {
		p->nerrors_more++;
		return;
	}
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n >= 0)
		p->errors[p->nerrors++] = msg;
}

static void errors_clear(struct probe *p)
{
	for (size_t i = 0; i < p->nerrors; i++)
		free(p->errors[i]);
	p->nerrors = p->nerrors_more = 0;
}

/* ---- traces ---- */

static void trace_free(struct trace *t)
{
	free(t->pod);
	free(t->container);
	free(t->cid);
	free(t->exe);
	free(t->fn);
	free(t->warning);
	free(t);
}

static bool process_alive(pid_t pid, uint64_t starttime)
{
	char cid[CGROUP_ID_LEN + 1];
	uint64_t st = 0;

	return !cgroup__pid_container("/proc", pid, cid, &st) && st == starttime;
}

static void series_free(struct series *s)
{
	free(s->pod);
	free(s->container);
	free(s->lat);
	free(s);
}

static void series_clear(struct probe *p)
{
	while (p->gone) {
		struct series *s = p->gone;

		p->gone = s->next;
		series_free(s);
	}
}

/* The latency of function k that pod's container's retired processes counted. */
static struct latency *series_lat(struct probe *p, const char *pod, const char *container, size_t k)
{
	struct series *s;

	for (s = p->gone; s; s = s->next)
		if (!strcmp(s->pod, pod) && !strcmp(s->container, container))
			break;
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		s->pod = strdup(pod);
		s->container = strdup(container);
		if (!s->pod || !s->container) {
			series_free(s);
			return NULL;
		}
		s->next = p->gone;
		p->gone = s;
	}
	if (k >= s->nlat) {
		struct latency *lat = realloc(s->lat, (k + 1) * sizeof(*lat));

		if (!lat)
			return NULL;
		memset(lat + s->nlat, 0, (k + 1 - s->nlat) * sizeof(*lat));
		s->lat = lat;
		s->nlat = k + 1;
	}
	return &s->lat[k];
}

/* Stops tracing; what it counted stays in the probe's results. */
static void trace_retire(struct agent *a, struct probe *p, struct trace *t, const char *why)
{
	cJSON *ev;
	int n;

	if (!process_alive(t->pid, t->starttime)) {
		n = tracer__reap(a->tracer, t->target);
		a->swept += n > 0 ? (uint64_t)n : 0;
	}
	for (size_t i = 0; i < tracer_target__nfuncs(t->target); i++) {
		struct latency l, *sl;

		if (t->fn[i] == SIZE_MAX || tracer_target__read(a->tracer, t->target, i, &l))
			continue;
		latency__merge(&p->fns[t->fn[i]].done, &l);
		sl = series_lat(p, t->pod, t->container, t->fn[i]);
		if (sl)
			latency__merge(sl, &l);
	}
	tracer__remove(a->tracer, t->target);
	symbolizer__forget(a->sym, t->pid);
	ev = log_event(LOG_INFO, "detached from process %d: %s", t->pid, why);
	cJSON_AddStringToObject(ev, "namespace", p->ns);
	cJSON_AddStringToObject(ev, "probe", p->name);
	cJSON_AddStringToObject(ev, "pod", t->pod);
	cJSON_AddStringToObject(ev, "container", t->container);
	log_emit(ev);
	trace_free(t);
}

static void traces_retire(struct agent *a, struct probe *p, bool all, const char *why)
{
	struct trace **tp = &p->traces;

	while (*tp) {
		struct trace *t = *tp;

		if (all || !t->seen) {
			*tp = t->next;
			trace_retire(a, p, t, why);
		} else {
			tp = &t->next;
		}
	}
}

static void failures_drop(struct probe *p, bool all)
{
	struct failure **fp = &p->failures;

	while (*fp) {
		struct failure *f = *fp;

		if (all || !f->seen) {
			*fp = f->next;
			free(f->key);
			free(f->msg);
			free(f);
		} else {
			fp = &f->next;
		}
	}
}

/* ---- probes ---- */

static void probe_free(struct agent *a, struct probe *p, const char *why)
{
	traces_retire(a, p, true, why);
	series_clear(p);
	failures_drop(p, true);
	errors_clear(p);
	fns_clear(p);
	probe_spec__free(&p->spec);
	free(p->uid);
	free(p->ns);
	free(p->name);
	free(p->key);
	free(p->status_path);
	free(p->last_entry);
	free(p->last_summary);
	free(p);
}

/* A restarted agent carries on from the results it wrote before. */
static void seed_results(struct agent *a, struct probe *p, const cJSON *obj)
{
	const cJSON *node, *fn;

	cJSON_ArrayForEach(node, get(get(obj, "status"), "nodes"))
	{
		const cJSON *gen = get(node, "generation");

		if (!get_str(node, "node") || strcmp(get_str(node, "node"), a->o.node) ||
		    !cJSON_IsNumber(gen) || (int64_t)gen->valuedouble != p->generation)
			continue;
		cJSON_ArrayForEach(fn, get(node, "functions"))
		{
			struct latency l;
			size_t i;

			if (!get_str(fn, "name") || probe_latency__from_json(fn, &l))
				continue;
			i = fn_get(p, get_str(fn, "name"));
			if (i != SIZE_MAX)
				p->fns[i].done = l;
		}
		log_info("probe %s/%s: carrying on from the results written before", p->ns,
			 p->name);
	}
}

static void probe_apply_spec(struct agent *a, struct probe *p, const cJSON *obj)
{
	struct rw_error err = { "" };
	const cJSON *gen = get(get(obj, "metadata"), "generation");

	traces_retire(a, p, true, "the probe's spec changed");
	series_clear(p);
	failures_drop(p, true);
	fns_clear(p);
	probe_spec__free(&p->spec);
	p->generation = cJSON_IsNumber(gen) ? (int64_t)gen->valuedouble : 0;
	p->valid = !probe_spec__parse(get(obj, "spec"), &p->spec, &err);
	snprintf(p->spec_err, sizeof(p->spec_err), "%s", p->valid ? "" : err.msg);
	p->expired = false;
	if (!p->valid)
		log_warn("probe %s/%s is not valid: %s", p->ns, p->name, err.msg);
	p->next_write = mono_ns() + FIRST_WRITE_NS;
}

static struct probe *probe_new(struct agent *a, const cJSON *obj, const char *uid)
{
	const cJSON *md = get(obj, "metadata");
	struct probe *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->uid = strdup(uid);
	p->ns = strdup(get_str(md, "namespace") ? get_str(md, "namespace") : "");
	p->name = strdup(get_str(md, "name") ? get_str(md, "name") : "");
	if (!p->uid || !p->ns || !p->name || asprintf(&p->key, "node/%s", uid) < 0 ||
	    asprintf(&p->status_path, PROBE_PATH "/status", p->ns, p->name) < 0) {
		free(p->uid);
		free(p->ns);
		free(p->name);
		free(p->key);
		free(p);
		return NULL;
	}
	p->created = parse_rfc3339(get_str(md, "creationTimestamp"));
	p->generation = -1;
	p->next = a->probes;
	a->probes = p;
	return p;
}

static struct probe *probe_find(struct agent *a, const char *uid)
{
	for (struct probe *p = a->probes; p; p = p->next)
		if (!strcmp(p->uid, uid))
			return p;
	return NULL;
}

static void probe_sync(struct agent *a, const cJSON *obj)
{
	const cJSON *md = get(obj, "metadata"), *gen = get(md, "generation");
	const char *uid = get_str(md, "uid");
	struct probe *p;
	bool fresh = false;

	if (!uid)
		return;
	p = probe_find(a, uid);
	if (!p) {
		p = probe_new(a, obj, uid);
		if (!p)
			return;
		fresh = true;
	}
	p->seen = true;
	if (!cJSON_IsNumber(gen) || (int64_t)gen->valuedouble != p->generation) {
		probe_apply_spec(a, p, obj);
		if (fresh && p->valid)
			seed_results(a, p, obj);
	}
	if (p->valid && !p->expired &&
	    time(NULL) >= p->created + (time_t)(p->spec.lifetime_ns / NS_PER_S)) {
		traces_retire(a, p, true, "the probe's lifetime ended");
		failures_drop(p, true);
		errors_clear(p);
		p->expired = true;
		log_info("probe %s/%s expired: probes detached, results kept", p->ns, p->name);
	}
}

/* ---- processes of this node ---- */

static int proc_cmp(const void *x, const void *y)
{
	const struct proc_ent *a = x, *b = y;

	return (a->pid > b->pid) - (a->pid < b->pid);
}

/*
 * Lists the processes and the container each is in. Only new (or young and
 * containerless) pids have their cgroup read; a traced process is checked
 * again by its start time.
 */
static void scan_procs(struct agent *a)
{
	struct proc_ent *next = NULL, *old;
	uint64_t now = mono_ns();
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");

	if (!d) {
		log_error("failed to list /proc: %s", strerror(errno));
		return;
	}
	while ((de = readdir(d))) {
		struct proc_ent key = { .pid = (pid_t)strtol(de->d_name, NULL, 10), .init = -1 };

		if (key.pid <= 0)
			continue;
		if (n == cap) {
			struct proc_ent *g = realloc(next,
						     (cap = cap ? cap * 2 : 512) * sizeof(*g));

			if (!g)
				break;
			next = g;
		}
		old = a->nprocs ? bsearch(&key, a->procs, a->nprocs, sizeof(key), proc_cmp) : NULL;
		if (old && (old->cid[0] || now - old->seen_ns > PROC_SETTLE_NS)) {
			next[n++] = *old;
			continue;
		}
		key.seen_ns = old ? old->seen_ns : now;
		if (cgroup__pid_container("/proc", key.pid, key.cid, &key.starttime))
			key.cid[0] = '\0';
		next[n++] = key;
	}
	closedir(d);
	qsort(next, n, sizeof(*next), proc_cmp);
	free(a->procs);
	a->procs = next;
	a->nprocs = n;
}

/* The container's first process: pid 1 in its pid namespace. */
static bool ns_init(pid_t pid)
{
	char path[64], line[256];
	bool init = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "NSpid:", 6)) {
			char *last = strrchr(line, '\t');

			init = last && strtol(last + 1, NULL, 10) == 1 && last != line + 6;
			break;
		}
	}
	fclose(f);
	return init;
}

/* ---- placing probes on processes ---- */

struct place {
	const char *pod, *container, *cid;
	const char *exe;  /* as the container sees it */
	const char *path; /* where the tracer opens it, or NULL: /proc/PID/exe */
	dev_t dev;
	ino_t ino;
};

static struct trace *trace_find(struct probe *p, pid_t pid, uint64_t starttime, dev_t dev,
				ino_t ino)
{
	for (struct trace *t = p->traces; t; t = t->next)
		if (t->pid == pid && t->starttime == starttime && t->dev == dev && t->ino == ino)
			return t;
	return NULL;
}

static struct failure *failure_find(struct probe *p, const char *key)
{
	for (struct failure *f = p->failures; f; f = f->next)
		if (!strcmp(f->key, key))
			return f;
	return NULL;
}

/* Records a failed attach; whether it is news (to log) or the same again. */
static bool remember_failure(struct probe *p, struct failure *f, const char *key, const char *msg)
{
	bool news = !f || strcmp(f->msg, msg);

	if (!f) {
		f = calloc(1, sizeof(*f));
		if (!f)
			return true;
		f->key = strdup(key);
		f->next = p->failures;
		p->failures = f;
	}
	free(f->msg);
	f->msg = strdup(msg);
	f->retry_ns = mono_ns() + RETRY_NS;
	f->seen = true;
	return news;
}

/*
 * The host's root as the agent sees it: /proc/1/root in a pod (the agent runs
 * in the host's PID namespace, not in its mount namespace), else / (run on
 * the host, or where PID 1 is out of reach).
 */
static const char *host_root(void)
{
	return access("/proc/1/root/", X_OK) ? "/" : "/proc/1/root";
}

/*
 * pid's executable in its image layer, when the container's root is an
 * overlay (as containerd, CRI-O and Docker make it); -1 otherwise.
 */
static int real_exe(pid_t pid)
{
	char link[64], exe[4096];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0 || exe[0] != '/')
		return -1;
	exe[n] = '\0';
	return overlay__open_real(pid, exe, host_root());
}

static char *unmatched_warning(struct tracer_target *tt, const char *exe)
{
	char *out = NULL, *prev;

	for (size_t i = 0; i < tracer_target__nunmatched(tt); i++) {
		const struct binary_unmatched *u = tracer_target__unmatched(tt, i);
		char hint[256] = "";
		size_t len = 0;

		for (size_t s = 0; s < u->nsuggestions && len < sizeof(hint); s++)
			len += snprintf(hint + len, sizeof(hint) - len, "%s%s", s ? ", " : "",
					u->suggestions[s]);
		prev = out;
		if (asprintf(&out, "%s%sno function matches '%s' in %s%s%s%s", prev ? prev : "",
			     prev ? "; " : "", u->pattern, exe, len ? " (did you mean: " : "", hint,
			     len ? ")" : "") < 0)
			out = NULL;
		free(prev);
	}
	return out;
}

static void log_attached(struct probe *p, const struct trace *t, size_t nfuncs, bool layer)
{
	cJSON *ev = log_event(LOG_INFO, "attached to process %d: %zu functions", t->pid, nfuncs);

	cJSON_AddStringToObject(ev, "namespace", p->ns);
	cJSON_AddStringToObject(ev, "probe", p->name);
	cJSON_AddStringToObject(ev, "pod", t->pod);
	cJSON_AddStringToObject(ev, "container", t->container);
	cJSON_AddStringToObject(ev, "executable", t->exe);
	/* attached through the image layer's file (shared with the image's other containers) */
	cJSON_AddBoolToObject(ev, "layer_file", layer);
	log_emit(ev);
}

/* Replaces each from in msg (of size len) by to. */
static void replace_path(char *msg, size_t len, const char *from, const char *to)
{
	char out[sizeof(((struct rw_error *)0)->msg)], *at, *src = msg;
	size_t o = 0, nfrom = strlen(from);

	while ((at = strstr(src, from)) && o < sizeof(out)) {
		o += snprintf(out + o, sizeof(out) - o, "%.*s%s", (int)(at - src), src, to);
		src = at + nfrom;
	}
	if (src == msg)
		return;
	if (o < sizeof(out))
		snprintf(out + o, sizeof(out) - o, "%s", src);
	snprintf(msg, len, "%s", out);
}

static void place_process(struct agent *a, struct probe *p, const struct place *pl,
			  const struct proc_ent *pe)
{
	struct rw_error err = { "" };
	const char *const *patterns = (const char *const *)p->spec.functions;
	struct tracer_target *tt;
	struct failure *f;
	struct trace *t;
	char key[128], path[96];
	int real;

	t = trace_find(p, pe->pid, pe->starttime, pl->dev, pl->ino);
	if (t) {
		t->seen = true;
		if (t->warning)
			add_error(p, "pod %s, container %s: %s", t->pod, t->container, t->warning);
		return;
	}
	snprintf(key, sizeof(key), "%d:%" PRIu64 ":%ju:%ju", pe->pid, pe->starttime,
		 (uintmax_t)pl->dev, (uintmax_t)pl->ino);
	f = failure_find(p, key);
	if (f && mono_ns() < f->retry_ns) {
		f->seen = true;
		add_error(p, "%s", f->msg);
		return;
	}
	/* attach through the image layer's file, shared by every container of the image */
	real = real_exe(pe->pid);
	if (real >= 0)
		snprintf(path, sizeof(path), "/proc/self/fd/%d", real);
	else if (pl->path)
		snprintf(path, sizeof(path), "%s", pl->path);
	else
		snprintf(path, sizeof(path), "/proc/%d/exe", pe->pid);
	tt = tracer__add(a->tracer, pe->pid, path, patterns, p->spec.nfunctions,
			 p->spec.threshold_ns, &err);
	if (real >= 0)
		close(real);
	real = real >= 0 ? 0 : -1;
	if (!tt) {
		char *msg;

		/* the tracer names the file by the path it opened, not the container's */
		replace_path(err.msg, sizeof(err.msg), path, pl->exe);
		if (asprintf(&msg, "pod %s, container %s, process %d: %s", pl->pod, pl->container,
			     pe->pid, err.msg) < 0)
			return;
		a->attach_failures++;
		if (remember_failure(p, f, key, msg))
			log_error("probe %s/%s: %s", p->ns, p->name, msg);
		add_error(p, "%s", msg);
		free(msg);
		return;
	}
	t = calloc(1, sizeof(*t));
	if (!t || !(t->fn = calloc(tracer_target__nfuncs(tt) + 1, sizeof(size_t)))) {
		free(t);
		tracer__remove(a->tracer, tt);
		return;
	}
	t->pod = strdup(pl->pod);
	t->container = strdup(pl->container);
	t->cid = strdup(pl->cid);
	t->exe = strdup(pl->exe);
	t->pid = pe->pid;
	t->starttime = pe->starttime;
	t->dev = pl->dev;
	t->ino = pl->ino;
	t->target = tt;
	t->seen = true;
	for (size_t i = 0; i < tracer_target__nfuncs(tt); i++) {
		const struct func_info *fi = tracer_target__func(tt, i)->info;
		size_t k = fn_get(p, fi->name);

		t->fn[i] = k;
		if (k == SIZE_MAX)
			continue;
		p->fns[k].nreturns = fi->nreturns;
		p->fns[k].mode = fi->mode == FUNC_MODE_ENTRY_ONLY ? "entry-only" : "entry+ret";
		free(p->fns[k].reason);
		p->fns[k].reason = fi->reason ? strdup(fi->reason) : NULL;
	}
	t->warning = unmatched_warning(tt, pl->exe);
	if (t->warning) {
		log_warn("probe %s/%s: pod %s: %s", p->ns, p->name, pl->pod, t->warning);
		add_error(p, "pod %s, container %s: %s", pl->pod, pl->container, t->warning);
	}
	t->next = p->traces;
	p->traces = t;
	log_attached(p, t, tracer_target__nfuncs(tt), real >= 0);
}

static bool exe_identity(pid_t pid, dev_t *ret_dev, ino_t *ret_ino)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (stat(path, &st))
		return false;
	*ret_dev = st.st_dev;
	*ret_ino = st.st_ino;
	return true;
}

/* The executable named in the spec, opened inside the container's root. */
static int open_in_container(struct probe *p, const struct place *pl, pid_t main_pid)
{
	char root[64];
	int rootfd, fd;

	snprintf(root, sizeof(root), "/proc/%d/root", main_pid);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		add_error(p, "pod %s, container %s: cannot open the container's root: %s", pl->pod,
			  pl->container, strerror(errno));
		return -1;
	}
	fd = rootpath__open(rootfd, p->spec.executable, O_RDONLY);
	close(rootfd);
	if (fd < 0)
		add_error(p,
			  "pod %s, container %s: cannot open spec.executable %s inside the "
			  "container: %s",
			  pl->pod, pl->container, p->spec.executable, strerror(-fd));
	return fd;
}

/*
 * Whether pid's cgroup path names the pod too: a process can make a cgroup
 * named after another container's id inside its own, but not leave its
 * pod's cgroup (kubelet names it pod<uid>, or pod<uid with _> under systemd).
 */
static bool in_pod(pid_t pid, const char *pod_uid)
{
	char path[64], text[CGROUP_FILE_MAX + 1], plain[80], under[80];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	snprintf(plain, sizeof(plain), "pod%s", pod_uid);
	snprintf(under, sizeof(under), "pod%s", pod_uid);
	for (char *c = under; *c; c++)
		*c = *c == '-' ? '_' : *c;
	return strstr(text, plain) || strstr(text, under);
}

/* in_pod and ns_init, remembered: neither changes while the process lives. */
static bool proc_in_pod(struct proc_ent *pe, const char *pod_uid)
{
	if (strcmp(pe->pod_uid, pod_uid) && strlen(pod_uid) < sizeof(pe->pod_uid) &&
	    in_pod(pe->pid, pod_uid))
		snprintf(pe->pod_uid, sizeof(pe->pod_uid), "%s", pod_uid);
	return pod_uid[0] && !strcmp(pe->pod_uid, pod_uid);
}

static bool proc_init(struct proc_ent *pe)
{
	if (pe->init < 0)
		pe->init = ns_init(pe->pid);
	return pe->init == 1;
}

/* The processes of container cid of the pod: indices into a->procs. */
static size_t container_procs(struct agent *a, const char *cid, const char *pod_uid, size_t **ret)
{
	size_t n = 0;

	*ret = calloc(a->nprocs + 1, sizeof(**ret));
	for (size_t i = 0; *ret && i < a->nprocs; i++)
		if (!strcmp(a->procs[i].cid, cid) && proc_in_pod(&a->procs[i], pod_uid))
			(*ret)[n++] = i;
	return n;
}

/*
 * Where the probe's executable is: its identity, and a path the tracer opens
 * (through *ret_fd, to close, for spec.executable). 0, or -1 with an error added.
 */
static int locate_executable(struct probe *p, struct place *pl, pid_t main_pid, char *exe,
			     size_t len, char *fdpath, size_t fdlen, int *ret_fd)
{
	struct stat st;
	ssize_t n;

	*ret_fd = -1;
	if (p->spec.executable) {
		*ret_fd = open_in_container(p, pl, main_pid);
		if (*ret_fd < 0)
			return -1;
		if (fstat(*ret_fd, &st))
			return -1;
		snprintf(fdpath, fdlen, "/proc/self/fd/%d", *ret_fd);
		pl->path = fdpath;
		pl->exe = p->spec.executable;
	} else {
		snprintf(fdpath, fdlen, "/proc/%d/exe", main_pid);
		if (stat(fdpath, &st)) {
			add_error(p,
				  "pod %s, container %s: cannot read process %d's executable: %s",
				  pl->pod, pl->container, main_pid, strerror(errno));
			return -1;
		}
		n = readlink(fdpath, exe, len - 1);
		exe[n > 0 ? n : 0] = '\0';
		pl->exe = exe;
	}
	pl->dev = st.st_dev;
	pl->ino = st.st_ino;
	return 0;
}

static void place_container(struct agent *a, struct probe *p, const char *pod, const char *pod_uid,
			    const char *container, const char *status_id)
{
	struct place pl = { .pod = pod, .container = container };
	char cid[CGROUP_ID_LEN + 1], exe[4096], fdpath[64];
	const struct proc_ent *main_pe = NULL;
	size_t *idx = NULL, n, placed = 0;
	int fd = -1;

	if (cgroup__status_container_id(status_id, cid)) {
		add_error(p, "pod %s, container %s: unknown container id %s", pod, container,
			  status_id);
		return;
	}
	pl.cid = cid;
	n = container_procs(a, cid, pod_uid, &idx);
	for (size_t k = 0; k < n && !main_pe; k++)
		if (proc_init(&a->procs[idx[k]]))
			main_pe = &a->procs[idx[k]];
	if (!n) {
		add_error(p,
			  "pod %s, container %s: no process of container %.12s on this node (the "
			  "agent needs the host's PID namespace)",
			  pod, container, cid);
		goto out;
	}
	main_pe = main_pe ? main_pe : &a->procs[idx[0]];
	if (locate_executable(p, &pl, main_pe->pid, exe, sizeof(exe), fdpath, sizeof(fdpath), &fd))
		goto out;
	for (size_t k = 0; k < n; k++) {
		const struct proc_ent *pe = &a->procs[idx[k]];
		dev_t dev;
		ino_t ino;

		if (!exe_identity(pe->pid, &dev, &ino) || dev != pl.dev || ino != pl.ino)
			continue;
		place_process(a, p, &pl, pe);
		placed++;
	}
	if (!placed)
		add_error(p, "pod %s, container %s: no process runs %s", pod, container, pl.exe);
out:
	if (fd >= 0)
		close(fd);
	free(idx);
}

static const char *waiting_reason(const cJSON *cs)
{
	const cJSON *state = get(cs, "state");
	const char *r = get_str(get(state, "waiting"), "reason");

	if (r)
		return r;
	r = get_str(get(state, "terminated"), "reason");
	return r ? r : "not started";
}

static void place_pod(struct agent *a, struct probe *p, const cJSON *pod)
{
	const char *name = get_str(get(pod, "metadata"), "name");
	const char *uid = get_str(get(pod, "metadata"), "uid");
	const cJSON *cs, *statuses = get(get(pod, "status"), "containerStatuses");
	size_t wanted = 0;

	cJSON_ArrayForEach(cs, statuses)
	{
		const char *cname = get_str(cs, "name"), *id = get_str(cs, "containerID");

		if (!cname || !probe_spec__wants_container(&p->spec, cname))
			continue;
		wanted++;
		if (!id || !get(get(cs, "state"), "running")) {
			add_error(p, "pod %s, container %s: not running (%s)", name, cname,
				  waiting_reason(cs));
			continue;
		}
		place_container(a, p, name, uid ? uid : "", cname, id);
	}
	if (!wanted)
		add_error(p, "pod %s: no running container%s%s", name,
			  p->spec.ncontainers ? " named in spec.containers" : "",
			  cJSON_GetArraySize(statuses) ? "" : " yet");
}

/* Whether p wants pod (of this node): in its namespace, selected, not done. */
static bool selected(const struct probe *p, const cJSON *pod)
{
	const cJSON *md = get(pod, "metadata");
	const char *phase = get_str(get(pod, "status"), "phase");

	return p->valid && !p->expired && get_str(md, "namespace") &&
	       !strcmp(get_str(md, "namespace"), p->ns) &&
	       probe_spec__selects(&p->spec, get(md, "labels")) &&
	       !(phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")));
}

static bool selects_any(struct agent *a, const struct probe *p)
{
	const cJSON *pod;

	cJSON_ArrayForEach(pod, a->pods_snap)
	{
		if (selected(p, pod))
			return true;
	}
	return false;
}

/* Forgets the retired processes' counts of pods no longer selected. */
static void series_prune(struct agent *a, struct probe *p)
{
	struct series **sp = &p->gone;

	while (*sp) {
		struct series *s = *sp;
		const cJSON *pod;
		bool keep = false;

		cJSON_ArrayForEach(pod, a->pods_snap)
		{
			const char *name = get_str(get(pod, "metadata"), "name");

			if (name && !strcmp(name, s->pod) && selected(p, pod))
				keep = true;
		}
		if (keep) {
			sp = &s->next;
		} else {
			*sp = s->next;
			series_free(s);
		}
	}
}

static void place_probe(struct agent *a, struct probe *p)
{
	const cJSON *pod;

	errors_clear(p);
	for (struct trace *t = p->traces; t; t = t->next)
		t->seen = false;
	for (struct failure *f = p->failures; f; f = f->next)
		f->seen = false;
	if (p->limited)
		add_error(p,
			  "this node already traces %zu probes, the most its agent takes "
			  "(--max-probes, the chart's maxProbesPerNode): this probe waits for one "
			  "of them to end",
			  a->o.max_probes);
	cJSON_ArrayForEach(pod, a->pods_snap)
	{
		if (!p->limited && selected(p, pod))
			place_pod(a, p, pod);
	}
	series_prune(a, p);
	traces_retire(a, p, false,
		      p->limited ? "the node's probe limit was reached"
				 : "its pod, container or process is gone");
	failures_drop(p, false);
}

/* Oldest first, so the probes over the limit are the newest. */
static int probe_age_cmp(const void *x, const void *y)
{
	const struct probe *p = *(const struct probe *const *)x,
			   *q = *(const struct probe *const *)y;

	if (p->created != q->created)
		return p->created < q->created ? -1 : 1;
	return strcmp(p->uid, q->uid);
}

/* Marks the probes beyond --max-probes of those with pods on this node. */
static void apply_limit(struct agent *a)
{
	struct probe **by_age;
	size_t n = 0, i = 0, active = 0;

	for (struct probe *p = a->probes; p; p = p->next)
		n++;
	a->nlimited = 0;
	by_age = calloc(n ? n : 1, sizeof(*by_age));
	if (!by_age)
		return;
	for (struct probe *p = a->probes; p; p = p->next)
		by_age[i++] = p;
	qsort(by_age, n, sizeof(*by_age), probe_age_cmp);
	for (i = 0; i < n; i++) {
		struct probe *p = by_age[i];
		bool wants = selects_any(a, p), was = p->limited;

		p->limited = wants && a->o.max_probes && active >= a->o.max_probes;
		if (p->limited) {
			a->nlimited++;
			if (!was)
				log_warn(
					"probe %s/%s not traced: this node already traces %zu probes "
					"(--max-probes)",
					p->ns, p->name, active);
		} else if (wants) {
			active++;
		}
	}
	free(by_age);
}

static cJSON *snapshot(struct informer *inf);

/* Copies the informer's cache when it changed since the last copy. */
static void refresh(struct informer *inf, cJSON **snap, uint64_t *version)
{
	uint64_t v = informer__version(inf);

	if (*snap && v == *version)
		return;
	cJSON_Delete(*snap);
	*snap = snapshot(inf);
	*version = v;
}

static void reconcile(struct agent *a)
{
	char summary_key[128];
	struct probe **pp;
	const cJSON *obj;

	refresh(a->probes_inf, &a->probes_snap, &a->probes_version);
	refresh(a->pods_inf, &a->pods_snap, &a->pods_version);
	for (struct probe *p = a->probes; p; p = p->next)
		p->seen = false;
	cJSON_ArrayForEach(obj, a->probes_snap) probe_sync(a, obj);
	for (pp = &a->probes; *pp;) {
		struct probe *p = *pp;

		if (p->seen) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		snprintf(summary_key, sizeof(summary_key), "summary/%s", p->uid);
		publisher__forget(a->pub, p->key);
		publisher__forget(a->pub, summary_key);
		probe_free(a, p, "the probe was deleted");
	}
	scan_procs(a);
	apply_limit(a);
	for (struct probe *p = a->probes; p; p = p->next)
		place_probe(a, p);
}

static void dup_into(const cJSON *obj, void *ctx)
{
	cJSON_AddItemToArray(ctx, cJSON_Duplicate(obj, true));
}

static cJSON *snapshot(struct informer *inf)
{
	cJSON *arr = cJSON_CreateArray();

	if (arr)
		informer__foreach(inf, dup_into, arr);
	return arr;
}

/* ---- this node's status entry ---- */

static int fn_now(struct agent *a, struct probe *p, size_t k, struct latency *ret)
{
	*ret = p->fns[k].done;
	for (struct trace *t = p->traces; t; t = t->next) {
		for (size_t i = 0; i < tracer_target__nfuncs(t->target); i++) {
			struct latency l;

			if (t->fn[i] == k && !tracer_target__read(a->tracer, t->target, i, &l))
				latency__merge(ret, &l);
		}
	}
	return 0;
}

static cJSON *pods_json(struct probe *p, size_t *ret_nprocs)
{
	cJSON *pods = cJSON_CreateArray(), *item, *procs;

	*ret_nprocs = 0;
	for (struct trace *t = p->traces; t; t = t->next) {
		(*ret_nprocs)++;
		procs = NULL;
		cJSON_ArrayForEach(item, pods)
		{
			if (!strcmp(get_str(item, "name"), t->pod) &&
			    !strcmp(get_str(item, "containerID"), t->cid))
				procs = cJSON_GetObjectItemCaseSensitive(item, "processes");
		}
		if (!procs) {
			item = cJSON_CreateObject();
			cJSON_AddItemToArray(pods, item);
			cJSON_AddStringToObject(item, "name", t->pod);
			cJSON_AddStringToObject(item, "container", t->container);
			cJSON_AddStringToObject(item, "containerID", t->cid);
			cJSON_AddStringToObject(item, "executable", t->exe);
			procs = cJSON_AddArrayToObject(item, "processes");
		}
		cJSON_AddItemToArray(procs, cJSON_CreateNumber(t->pid));
	}
	return pods;
}

static int str_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The entry without lastUpdate, or NULL when this node has nothing to say. */
static cJSON *node_entry(struct agent *a, struct probe *p)
{
	cJSON *e, *fns, *errs;
	size_t nprocs;

	if (!p->traces && !p->nerrors && !p->nfns && !p->wrote)
		return NULL;
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "node", a->o.node);
	cJSON_AddNumberToObject(e, "generation", (double)p->generation);
	cJSON_AddBoolToObject(e, "attached", p->traces != NULL);
	cJSON_AddItemToObject(e, "pods", pods_json(p, &nprocs));
	cJSON_AddNumberToObject(e, "processes", (double)nprocs);
	qsort(p->errors, p->nerrors, sizeof(char *), str_cmp);
	errs = cJSON_AddArrayToObject(e, "errors");
	for (size_t i = 0; i < p->nerrors; i++)
		cJSON_AddItemToArray(errs, cJSON_CreateString(p->errors[i]));
	if (p->nerrors_more) {
		char more[64];

		snprintf(more, sizeof(more), "and %zu more", p->nerrors_more);
		cJSON_AddItemToArray(errs, cJSON_CreateString(more));
	}
	fns = cJSON_AddArrayToObject(e, "functions");
	for (size_t k = 0; k < p->nfns; k++) {
		cJSON *f = cJSON_CreateObject();
		struct latency l;

		cJSON_AddItemToArray(fns, f);
		fn_now(a, p, k, &l);
		cJSON_AddStringToObject(f, "name", p->fns[k].name);
		cJSON_AddStringToObject(f, "mode", p->fns[k].mode);
		if (p->fns[k].reason)
			cJSON_AddStringToObject(f, "reason", p->fns[k].reason);
		cJSON_AddNumberToObject(f, "returnSites", (double)p->fns[k].nreturns);
		probe_latency__to_json(&l, f);
	}
	return e;
}

static char *apply_body(struct probe *p, cJSON *status)
{
	cJSON *doc = cJSON_CreateObject(), *md;
	char *out;

	cJSON_AddStringToObject(doc, "apiVersion", "retwatch.io/v1alpha1");
	cJSON_AddStringToObject(doc, "kind", "FunctionProbe");
	md = cJSON_AddObjectToObject(doc, "metadata");
	cJSON_AddStringToObject(md, "name", p->name);
	cJSON_AddStringToObject(md, "namespace", p->ns);
	/* a probe deleted and made again under the same name is another probe */
	cJSON_AddStringToObject(md, "uid", p->uid);
	cJSON_AddItemToObject(doc, "status", status);
	out = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	return out;
}

/* Now, in seconds (conditions) or milliseconds (the time of a report). */
static void add_now(cJSON *obj, const char *name, unsigned int digits)
{
	char ts[TIME_RFC3339_LEN];

	time_rfc3339(ts, sizeof(ts), digits);
	cJSON_AddStringToObject(obj, name, ts);
}

/* Spreads the writes of many agents and probes over the interval. */
static uint64_t jittered(uint64_t interval)
{
	return interval - interval / 10 + (uint64_t)rand() % (interval / 5 + 1);
}

static void write_node_status(struct agent *a, struct probe *p, uint64_t now)
{
	cJSON *entry, *status;
	char *text, *body;

	if (!p->valid || now < p->next_write)
		return;
	p->next_write = now + jittered(p->spec.interval_ns);
	entry = node_entry(a, p);
	if (!entry)
		return;
	text = cJSON_PrintUnformatted(entry);
	if (!text ||
	    (p->last_entry && !strcmp(text, p->last_entry) && !publisher__failed(a->pub, p->key))) {
		free(text);
		cJSON_Delete(entry);
		return;
	}
	add_now(entry, "lastUpdate", 3);
	status = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(status, "nodes"), entry);
	body = apply_body(p, status);
	if (body && !publisher__apply(a->pub, p->key, p->status_path, a->manager, body)) {
		free(p->last_entry);
		p->last_entry = text;
		text = NULL;
		p->wrote = true;
	}
	free(body);
	free(text);
}

/* ---- the summary and conditions, written by the Lease holder ---- */

struct merged {
	char *name;
	const char *mode, *reason;
	double returns;
	struct latency l;
};

struct summary {
	struct merged *fns;
	size_t nfns;
	int nodes, pods, processes;
	bool attached;
	const char *errors[3]; /* the first few, for the Attached condition */
	size_t nerrors;
};

static void merge_fn(struct summary *s, const cJSON *fn)
{
	const char *name = get_str(fn, "name");
	struct latency l;
	struct merged *m = NULL;

	if (!name || probe_latency__from_json(fn, &l))
		return;
	for (size_t i = 0; i < s->nfns && !m; i++)
		if (!strcmp(s->fns[i].name, name))
			m = &s->fns[i];
	if (!m) {
		m = realloc(s->fns, (s->nfns + 1) * sizeof(*m));
		if (!m)
			return;
		s->fns = m;
		m = &s->fns[s->nfns++];
		memset(m, 0, sizeof(*m));
		m->name = (char *)name;
		m->mode = get_str(fn, "mode");
		m->reason = get_str(fn, "reason");
		m->returns = cJSON_GetNumberValue(get(fn, "returnSites"));
	}
	latency__merge(&m->l, &l);
}

static void merge_nodes(struct summary *s, const cJSON *status, int64_t generation)
{
	const cJSON *node, *fn, *err;

	cJSON_ArrayForEach(node, get(status, "nodes"))
	{
		const cJSON *gen = get(node, "generation");

		if (!cJSON_IsNumber(gen) || (int64_t)gen->valuedouble != generation)
			continue;
		s->nodes++;
		s->pods += cJSON_GetArraySize(get(node, "pods"));
		s->processes += (int)cJSON_GetNumberValue(get(node, "processes"));
		s->attached |= cJSON_IsTrue(get(node, "attached"));
		cJSON_ArrayForEach(err, get(node, "errors"))
		{
			if (s->nerrors < sizeof(s->errors) / sizeof(s->errors[0]) &&
			    cJSON_IsString(err))
				s->errors[s->nerrors++] = err->valuestring;
		}
		cJSON_ArrayForEach(fn, get(node, "functions")) merge_fn(s, fn);
	}
}

static cJSON *summary_json(struct summary *s)
{
	cJSON *sum = cJSON_CreateObject(), *fns;
	const struct merged *slowest = NULL;
	uint64_t calls = 0, p99 = 0;
	char buf[LATENCY_FMT_LEN];

	cJSON_AddNumberToObject(sum, "nodes", s->nodes);
	cJSON_AddNumberToObject(sum, "pods", s->pods);
	cJSON_AddNumberToObject(sum, "processes", s->processes);
	fns = cJSON_CreateArray();
	for (size_t i = 0; i < s->nfns; i++) {
		const struct merged *m = &s->fns[i];
		cJSON *f = cJSON_CreateObject();
		uint64_t q = latency__percentile(&m->l, 0.99);

		cJSON_AddItemToArray(fns, f);
		cJSON_AddStringToObject(f, "name", m->name);
		if (m->mode)
			cJSON_AddStringToObject(f, "mode", m->mode);
		if (m->reason)
			cJSON_AddStringToObject(f, "reason", m->reason);
		cJSON_AddNumberToObject(f, "returnSites", m->returns);
		probe_latency__to_json(&m->l, f);
		calls += m->l.calls;
		if (latency__count(&m->l) && (!slowest || q > p99)) {
			slowest = m;
			p99 = q;
		}
	}
	cJSON_AddNumberToObject(sum, "calls", (double)calls);
	if (slowest) {
		cJSON_AddStringToObject(sum, "slowest", slowest->name);
		cJSON_AddStringToObject(sum, "p50",
					latency__format_ns(latency__percentile(&slowest->l, 0.5),
							   buf, sizeof(buf)));
		cJSON_AddStringToObject(sum, "p99", latency__format_ns(p99, buf, sizeof(buf)));
	}
	cJSON_AddItemToObject(sum, "functions", fns);
	return sum;
}

static void add_condition(cJSON *conds, const cJSON *old, int64_t gen, const char *type, bool ok,
			  const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
static void add_condition(cJSON *conds, const cJSON *old, int64_t gen, const char *type, bool ok,
			  const char *reason, const char *fmt, ...)
{
	const char *status = ok ? "True" : "False", *since = NULL;
	cJSON *c = cJSON_CreateObject();
	const cJSON *o;
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_ArrayForEach(o, old)
	{
		/* the time it last changed, not the time it was last written */
		if (get_str(o, "type") && !strcmp(get_str(o, "type"), type) &&
		    get_str(o, "status") && !strcmp(get_str(o, "status"), status))
			since = get_str(o, "lastTransitionTime");
	}
	cJSON_AddStringToObject(c, "type", type);
	cJSON_AddStringToObject(c, "status", status);
	cJSON_AddStringToObject(c, "reason", reason);
	cJSON_AddStringToObject(c, "message", msg);
	cJSON_AddNumberToObject(c, "observedGeneration", (double)gen);
	if (since)
		cJSON_AddStringToObject(c, "lastTransitionTime", since);
	else
		add_now(c, "lastTransitionTime", 0);
	cJSON_AddItemToArray(conds, c);
}

static void conditions(cJSON *status, struct probe *p, const struct summary *s, const cJSON *old)
{
	cJSON *c = cJSON_AddArrayToObject(status, "conditions");
	char until[32];
	int64_t g = p->generation;

	rfc3339(p->created + (time_t)(p->spec.lifetime_ns / NS_PER_S), until, sizeof(until));
	if (!p->valid) {
		add_condition(c, old, g, "Ready", false, "InvalidSpec", "%s", p->spec_err);
		add_condition(c, old, g, "Attached", false, "InvalidSpec",
			      "nothing is probed until the spec is fixed");
		return;
	}
	add_condition(c, old, g, "Ready", true, "Accepted", "the spec is valid");
	if (p->expired) {
		add_condition(c, old, g, "Expired", true, "LifetimeEnded",
			      "probes detached at %s (spec.lifetime); results stay", until);
		add_condition(c, old, g, "Attached", false, "Expired",
			      "probes detached when the lifetime ended; raise spec.lifetime to "
			      "probe again");
		return;
	}
	add_condition(c, old, g, "Expired", false, "Active", "probes detach at %s", until);
	if (s->attached)
		add_condition(c, old, g, "Attached", true, "Attached",
			      "probes live on %d processes in %d pods on %d nodes", s->processes,
			      s->pods, s->nodes);
	else if (s->nerrors)
		add_condition(c, old, g, "Attached", false, "AttachFailed",
			      "%s%s%s%s%s (all errors: status.nodes[].errors)", s->errors[0],
			      s->nerrors > 1 ? "; " : "", s->nerrors > 1 ? s->errors[1] : "",
			      s->nerrors > 2 ? "; " : "", s->nerrors > 2 ? s->errors[2] : "");
	else
		add_condition(c, old, g, "Attached", false, "NoMatchingPods",
			      "no running pod in namespace %s matches spec.selector", p->ns);
}

static void write_summary(struct agent *a, struct probe *p, const cJSON *obj, uint64_t now)
{
	const cJSON *old = get(obj, "status");
	struct summary s = { 0 };
	cJSON *status, *sum = NULL;
	char *text, *body, key[128];

	if (now < p->next_summary)
		return;
	p->next_summary = now +
			  jittered(p->valid ? p->spec.interval_ns : PROBE_DEFAULT_INTERVAL_NS);
	status = cJSON_CreateObject();
	cJSON_AddNumberToObject(status, "observedGeneration", (double)p->generation);
	if (p->valid)
		merge_nodes(&s, old, p->generation);
	conditions(status, p, &s, get(old, "conditions"));
	if (p->valid)
		cJSON_AddItemToObject(status, "summary", sum = summary_json(&s));
	free(s.fns);
	snprintf(key, sizeof(key), "summary/%s", p->uid);
	text = cJSON_PrintUnformatted(status);
	if (!text || (p->last_summary && !strcmp(text, p->last_summary) &&
		      !publisher__failed(a->pub, key))) {
		free(text);
		cJSON_Delete(status);
		return;
	}
	if (p->valid)
		add_now(sum, "lastUpdate", 3);
	body = apply_body(p, status);
	if (body && !publisher__apply(a->pub, key, p->status_path, SUMMARY_MANAGER, body)) {
		free(p->last_summary);
		p->last_summary = text;
		text = NULL;
	}
	free(body);
	free(text);
}

static void write_statuses(struct agent *a)
{
	uint64_t now = mono_ns();
	bool leader = publisher__leader(a->pub);
	const cJSON *obj;

	for (struct probe *p = a->probes; p; p = p->next)
		write_node_status(a, p, now);
	if (!leader)
		return;
	cJSON_ArrayForEach(obj, a->probes_snap)
	{
		struct probe *p = probe_find(a, get_str(get(obj, "metadata"), "uid"));

		if (p)
			write_summary(a, p, obj, now);
	}
}

/* ---- slow calls ---- */

static void log_slow_call(struct agent *a, struct probe *p, const struct trace *t, size_t i,
			  const struct tracer_event *ev)
{
	char dur[LATENCY_FMT_LEN], frame[512];
	cJSON *log, *stack;

	log = log_event(LOG_INFO, "slow call of %s: %s",
			tracer_target__func(t->target, i)->info->name,
			latency__format_ns(ev->duration_ns, dur, sizeof(dur)));
	if (!log)
		return;
	cJSON_AddStringToObject(log, "event", "slow_call");
	cJSON_AddStringToObject(log, "namespace", p->ns);
	cJSON_AddStringToObject(log, "probe", p->name);
	cJSON_AddStringToObject(log, "pod", t->pod);
	cJSON_AddStringToObject(log, "container", t->container);
	cJSON_AddStringToObject(log, "function", tracer_target__func(t->target, i)->info->name);
	cJSON_AddStringToObject(log, "duration", dur);
	cJSON_AddNumberToObject(log, "duration_ns", (double)ev->duration_ns);
	cJSON_AddNumberToObject(log, "pid", ev->pid);
	cJSON_AddNumberToObject(log, "tid", ev->tid);
	if (ev->goid)
		cJSON_AddNumberToObject(log, "goroutine", (double)ev->goid);
	stack = cJSON_AddArrayToObject(log, "stack");
	for (size_t k = 0; k < ev->nstack; k++) {
		symbolizer__resolve(a->sym, ev->pid, ev->stack[k], k == 0, frame, sizeof(frame));
		cJSON_AddItemToArray(stack, cJSON_CreateString(frame));
	}
	log_emit(log);
}

static void on_slow_call(const struct tracer_event *ev, void *ctx)
{
	struct agent *a = ctx;

	/* every probe of this process and function whose threshold the call passed */
	for (struct probe *p = a->probes; p; p = p->next) {
		if (!p->spec.threshold_ns || ev->duration_ns < p->spec.threshold_ns)
			continue;
		for (struct trace *t = p->traces; t; t = t->next) {
			if (t->pid != ev->pid)
				continue;
			for (size_t i = 0; i < tracer_target__nfuncs(t->target); i++)
				if (tracer_target__func(t->target, i)->fn_id == ev->fn_id)
					log_slow_call(a, p, t, i, ev);
		}
	}
}

/* ---- the agent ---- */

/* ---- metrics ---- */

/* Function k's latency in pod's container: its retired processes' and its live ones'. */
static void series_now(struct agent *a, struct probe *p, const char *pod, const char *container,
		       size_t k, struct latency *ret)
{
	memset(ret, 0, sizeof(*ret));
	for (struct series *s = p->gone; s; s = s->next)
		if (k < s->nlat && !strcmp(s->pod, pod) && !strcmp(s->container, container))
			latency__merge(ret, &s->lat[k]);
	for (struct trace *t = p->traces; t; t = t->next) {
		if (strcmp(t->pod, pod) || strcmp(t->container, container))
			continue;
		for (size_t i = 0; i < tracer_target__nfuncs(t->target); i++) {
			struct latency l;

			if (t->fn[i] == k && !tracer_target__read(a->tracer, t->target, i, &l))
				latency__merge(ret, &l);
		}
	}
}

/* The per-function families, each written to its own stream: a family's
 * samples must follow each other. */
struct render {
	FILE *hist, *calls, *orphans;
	size_t nseries, dropped;
};

static void render_series(struct agent *a, struct probe *p, const char *pod, const char *container,
			  struct render *r)
{
	for (size_t k = 0; k < p->nfns; k++) {
		const char *kv[] = {
			"namespace", p->ns,	  "probe",   p->name,	 "pod",
			pod,	     "container", container, "function", p->fns[k].name
		};
		char labels[4096];
		struct latency l;

		if ((a->o.max_series && r->nseries >= a->o.max_series) ||
		    prom_labels(labels, sizeof(labels), kv, 5)) {
			r->dropped++;
			continue;
		}
		r->nseries++;
		series_now(a, p, pod, container, k, &l);
		if (strcmp(p->fns[k].mode, "entry-only"))
			prom_histogram(r->hist, "retwatch_function_duration_seconds", labels, &l);
		prom_sample(r->calls, "retwatch_function_calls_total", labels, l.calls);
		prom_sample(r->orphans, "retwatch_function_orphans_total", labels, l.orphans);
	}
}

/* Each (pod, container) that p traces or traced, once. */
static void render_probe(struct agent *a, struct probe *p, struct render *r)
{
	for (struct series *s = p->gone; s; s = s->next)
		render_series(a, p, s->pod, s->container, r);
	for (struct trace *t = p->traces; t; t = t->next) {
		bool done = false;

		for (struct series *s = p->gone; s && !done; s = s->next)
			done = !strcmp(s->pod, t->pod) && !strcmp(s->container, t->container);
		for (struct trace *u = p->traces; u != t && !done; u = u->next)
			done = !strcmp(u->pod, t->pod) && !strcmp(u->container, t->container);
		if (!done)
			render_series(a, p, t->pod, t->container, r);
	}
}

static void append_stream(FILE *f, char *buf, size_t len)
{
	if (buf)
		fwrite(buf, 1, len, f);
	free(buf);
}

/* What both the stats log line and /metrics report. */
struct counters {
	struct informer_counters probes, pods;
	struct publisher_counters pub;
	size_t nprobes, ntraces;
};

static void counters_read(struct agent *a, struct counters *ret)
{
	memset(ret, 0, sizeof(*ret));
	informer__counters(a->probes_inf, &ret->probes);
	informer__counters(a->pods_inf, &ret->pods);
	publisher__counters(a->pub, &ret->pub);
	for (struct probe *p = a->probes; p; p = p->next) {
		ret->nprobes++;
		for (struct trace *t = p->traces; t; t = t->next)
			ret->ntraces++;
	}
}

static void render_counters(struct agent *a, FILE *f)
{
	static const unsigned int kernel_errors[] = {
		RW_STAT_FRAMES_FULL, RW_STAT_CONTEXTS_FULL, RW_STAT_READ_FAILED,
		RW_STAT_NOT_G_STACK, RW_STAT_NO_HIST,	    RW_STAT_NO_FUNC,
	};
	uint64_t stats[RW_STAT__MAX] = { 0 };
	int64_t inflight = tracer__inflight(a->tracer);
	struct counters c;
	char labels[128];

	tracer__stats(a->tracer, stats, RW_STAT__MAX);
	counters_read(a, &c);
	prom_family(f, "retwatch_errors_total", "counter",
		    "Errors by type: failed attaches, API requests and status patches, and "
		    "calls the kernel side could not measure.");
	snprintf(labels, sizeof(labels), "type=\"attach\"");
	prom_sample(f, "retwatch_errors_total", labels, a->attach_failures);
	snprintf(labels, sizeof(labels), "type=\"api_request\"");
	prom_sample(f, "retwatch_errors_total", labels, c.probes.failures + c.pods.failures);
	snprintf(labels, sizeof(labels), "type=\"status_patch\"");
	prom_sample(f, "retwatch_errors_total", labels, c.pub.failures);
	for (size_t i = 0; i < sizeof(kernel_errors) / sizeof(kernel_errors[0]); i++) {
		snprintf(labels, sizeof(labels), "type=\"%s\"", tracer_stat__str(kernel_errors[i]));
		prom_sample(f, "retwatch_errors_total", labels, stats[kernel_errors[i]]);
	}
	prom_family(f, "retwatch_inflight_calls", "gauge",
		    "Calls entered and not yet returned, as the kernel holds them.");
	prom_sample(f, "retwatch_inflight_calls", NULL, inflight > 0 ? (uint64_t)inflight : 0);
	prom_family(f, "retwatch_orphans_purged_total", "counter",
		    "In-flight calls dropped as never to return: by the kernel side when a newer "
		    "call proved them dead, by the sweeper when they grew old or their process "
		    "exited.");
	prom_sample(f, "retwatch_orphans_purged_total", "by=\"kernel\"",
		    stats[RW_STAT_ORPHANS_PURGED] + stats[RW_STAT_GOID_CHANGED]);
	prom_sample(f, "retwatch_orphans_purged_total", "by=\"sweeper\"", a->swept);
	prom_family(f, "retwatch_lost_events_total", "counter",
		    "Slow-call events lost because the ring buffer was full.");
	prom_sample(f, "retwatch_lost_events_total", NULL, stats[RW_STAT_RINGBUF_FULL]);
	prom_family(f, "retwatch_probes", "gauge", "FunctionProbes this agent knows of.");
	prom_sample(f, "retwatch_probes", NULL, c.nprobes);
	prom_family(f, "retwatch_probes_limited", "gauge",
		    "FunctionProbes with pods on this node not traced: over --max-probes.");
	prom_sample(f, "retwatch_probes_limited", NULL, a->nlimited);
	prom_family(f, "retwatch_traced_processes", "gauge",
		    "Processes traced, counted once per probe.");
	prom_sample(f, "retwatch_traced_processes", NULL, c.ntraces);
	prom_family(f, "retwatch_api_requests_total", "counter",
		    "Requests to the Kubernetes API server.");
	prom_sample(f, "retwatch_api_requests_total", NULL, kube__requests(a->k));
	prom_family(f, "retwatch_status_patches_total", "counter",
		    "FunctionProbe status patches sent.");
	prom_sample(f, "retwatch_status_patches_total", NULL, c.pub.patches);
	prom_family(
		f, "retwatch_lease_holder", "gauge",
		"1 while this agent holds the Lease that makes it write every probe's summary.");
	prom_sample(f, "retwatch_lease_holder", NULL, publisher__leader(a->pub));
}

static char *render_metrics(struct agent *a, size_t *ret_len)
{
	struct render r = { 0 };
	char *buf[3] = { 0 }, *out = NULL, labels[256];
	size_t len[3] = { 0 }, out_len = 0;
	FILE *f;

	r.hist = open_memstream(&buf[0], &len[0]);
	r.calls = open_memstream(&buf[1], &len[1]);
	r.orphans = open_memstream(&buf[2], &len[2]);
	f = open_memstream(&out, &out_len);
	if (!r.hist || !r.calls || !r.orphans || !f)
		goto out;
	for (struct probe *p = a->probes; p; p = p->next)
		render_probe(a, p, &r);
	fclose(r.hist);
	fclose(r.calls);
	fclose(r.orphans);
	r.hist = r.calls = r.orphans = NULL;

	prom_family(f, "retwatch_build_info", "gauge",
		    "The agent's version and how it attaches uprobes; always 1.");
	snprintf(labels, sizeof(labels), "version=\"%s\",attach_mode=\"%s\"", a->o.version,
		 tracer__attach_mode(a->tracer));
	prom_sample(f, "retwatch_build_info", labels, 1);
	prom_family(f, "retwatch_function_duration_seconds", "histogram",
		    "Duration of the calls of each probed function, per pod and container.");
	append_stream(f, buf[0], len[0]);
	prom_family(f, "retwatch_function_calls_total", "counter",
		    "Calls of each probed function (entries, for an entry-only function).");
	append_stream(f, buf[1], len[1]);
	prom_family(f, "retwatch_function_orphans_total", "counter",
		    "Calls of each probed function that never returned.");
	append_stream(f, buf[2], len[2]);
	buf[0] = buf[1] = buf[2] = NULL;
	prom_family(f, "retwatch_function_return_sites", "gauge",
		    "RET instructions probed in each function (0: entry-only).");
	for (struct probe *p = a->probes; p; p = p->next) {
		for (size_t k = 0; k < p->nfns; k++) {
			const char *kv[] = { "namespace", p->ns,      "probe",
					     p->name,	  "function", p->fns[k].name };
			char fl[4096];

			if (!prom_labels(fl, sizeof(fl), kv, 3))
				prom_sample(f, "retwatch_function_return_sites", fl,
					    p->fns[k].nreturns);
		}
	}
	render_counters(a, f);
	prom_family(f, "retwatch_metrics_series", "gauge",
		    "Per-function series exported (each of the retwatch_function_* families).");
	prom_sample(f, "retwatch_metrics_series", NULL, r.nseries);
	prom_family(f, "retwatch_metrics_series_dropped", "gauge",
		    "Per-function series left out of this scrape by --metrics-max-series.");
	prom_sample(f, "retwatch_metrics_series_dropped", NULL, r.dropped);
	if (r.dropped && !a->series_warned)
		log_warn("metrics: %zu series left out: more than %zu (raise --metrics-max-series)",
			 r.dropped, a->o.max_series);
	a->series_warned = r.dropped > 0;
out:
	for (int i = 0; i < 3; i++)
		free(buf[i]);
	if (r.hist)
		fclose(r.hist);
	if (r.calls)
		fclose(r.calls);
	if (r.orphans)
		fclose(r.orphans);
	if (!f)
		return NULL;
	if (fclose(f)) {
		free(out);
		return NULL;
	}
	*ret_len = out_len;
	return out;
}

static void serve_metrics(struct agent *a)
{
	struct metrics_server *ms = a->o.metrics;
	bool ready = informer__synced(a->probes_inf) && informer__synced(a->pods_inf);
	size_t len = 0;
	char *text;

	if (!ms)
		return;
	metrics_server__beat(ms, ready,
			     ready ? NULL
				   : "waiting for the first list of FunctionProbes and pods from "
				     "the API server");
	if (!metrics_server__wanted(ms))
		return;
	text = render_metrics(a, &len);
	metrics_server__publish(ms, text, len);
}

struct agent *agent__new(struct kube *k, const struct agent_opts *o, struct rw_error *err)
{
	struct tracer_opts topts = { .attach_mode = o->attach_mode, .partial = true };
	struct agent *a = calloc(1, sizeof(*a));
	char query[512], esc[384], sel[300];

	if (!a)
		goto nomem;
	a->o = *o;
	a->k = k;
	a->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a->cache = binary_cache__new(64);
	a->sym = symbolizer__new(a->cache);
	if (a->notify_fd < 0 || !a->cache || !a->sym ||
	    asprintf(&a->manager, "retwatch-agent-%s", o->node) < 0)
		goto nomem;
	topts.cache = a->cache;
	a->tracer = tracer__new(&topts, err);
	if (!a->tracer)
		goto fail;
	tracer__set_event_fn(a->tracer, on_slow_call, a);
	a->pub = publisher__start(k, o->node, o->lease_ns, "retwatch-summary", o->lease_s);
	snprintf(sel, sizeof(sel), "spec.nodeName=%s", o->node);
	snprintf(query, sizeof(query), "fieldSelector=%s", kube__escape(sel, esc, sizeof(esc)));
	/* status writes (this agent's among them) need no reconcile */
	a->probes_inf = informer__start(k, "functionprobes", PROBES_PATH, NULL, true, a->notify_fd);
	a->pods_inf = informer__start(k, "pods", "/api/v1/pods", query, false, a->notify_fd);
	if (!a->pub || !a->probes_inf || !a->pods_inf)
		goto nomem;
	log_info("agent on node %s: watching FunctionProbes and this node's pods at %s "
		 "(attach mode %s)",
		 o->node, kube__server(k), tracer__attach_mode(a->tracer));
	return a;
nomem:
	rw_error_set(err, ENOMEM, "out of memory");
fail:
	agent__free(a);
	return NULL;
}

static bool woken(struct agent *a)
{
	uint64_t n;

	return read(a->notify_fd, &n, sizeof(n)) == sizeof(n);
}

/* Waits up to timeout_ms for slow calls or a scrape, then delivers the calls. */
static int wait_events(struct agent *a, int timeout_ms)
{
	struct pollfd fds[2] = {
		{ .fd = tracer__fd(a->tracer), .events = POLLIN },
		{ .fd = a->o.metrics ? metrics_server__fd(a->o.metrics) : -1, .events = POLLIN },
	};

	if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	return tracer__poll(a->tracer, 0);
}

int agent__run(struct agent *a, const volatile sig_atomic_t *exiting,
	       const volatile sig_atomic_t *pause)
{
	serve_metrics(a); /* alive from the start, not after the first wait */
	while (!*exiting && !*pause) {
		uint64_t now;
		int e = wait_events(a, 100);

		if (e < 0 && e != -EINTR) {
			log_error("failed to read slow calls: %s", strerror(-e));
			return e;
		}
		now = mono_ns();
		serve_metrics(a);
		/* nothing is probed before both lists are in: a half view would detach */
		if (!informer__synced(a->probes_inf) || !informer__synced(a->pods_inf))
			continue;
		if (woken(a) || now >= a->next_scan) {
			reconcile(a);
			a->next_scan = now + SCAN_EVERY_NS;
		}
		if (now >= a->next_sweep) {
			e = tracer__sweep(a->tracer, SWEEP_AGE_NS);
			a->swept += e > 0 ? (uint64_t)e : 0;
			a->next_sweep = now + SWEEP_EVERY_NS;
		}
		write_statuses(a);
	}
	return 0;
}

void agent__log_stats(struct agent *a)
{
	struct counters c;
	cJSON *ev;

	counters_read(a, &c);
	ev = log_event(LOG_INFO, "counters");
	if (!ev)
		return;
	cJSON_AddStringToObject(ev, "event", "stats");
	cJSON_AddNumberToObject(ev, "api_requests", (double)kube__requests(a->k));
	cJSON_AddNumberToObject(ev, "lists", (double)(c.probes.lists + c.pods.lists));
	cJSON_AddNumberToObject(ev, "watches", (double)(c.probes.watches + c.pods.watches));
	cJSON_AddNumberToObject(ev, "watch_events", (double)(c.probes.events + c.pods.events));
	cJSON_AddNumberToObject(ev, "gone", (double)(c.probes.gone + c.pods.gone));
	cJSON_AddNumberToObject(ev, "request_failures",
				(double)(c.probes.failures + c.pods.failures));
	cJSON_AddNumberToObject(ev, "status_patches", (double)c.pub.patches);
	cJSON_AddNumberToObject(ev, "status_patch_failures", (double)c.pub.failures);
	cJSON_AddNumberToObject(ev, "lease_requests", (double)c.pub.lease_requests);
	cJSON_AddNumberToObject(ev, "probes", (double)c.nprobes);
	cJSON_AddNumberToObject(ev, "traced_processes", (double)c.ntraces);
	cJSON_AddBoolToObject(ev, "summary_writer", publisher__leader(a->pub));
	log_emit(ev);
}

void agent__free(struct agent *a)
{
	if (!a)
		return;
	informer__stop(a->probes_inf);
	informer__stop(a->pods_inf);
	/* a last report: detached, with every call counted until now */
	for (struct probe *p = a->probes; p && a->pub; p = p->next) {
		traces_retire(a, p, true, "the agent is stopping");
		errors_clear(p);
		p->next_write = 0;
		write_node_status(a, p, mono_ns());
	}
	while (a->probes) {
		struct probe *p = a->probes;

		a->probes = p->next;
		probe_free(a, p, "the agent is stopping");
	}
	publisher__stop(a->pub);
	tracer__free(a->tracer);
	symbolizer__free(a->sym);
	binary_cache__free(a->cache);
	cJSON_Delete(a->probes_snap);
	cJSON_Delete(a->pods_snap);
	free(a->procs);
	free(a->manager);
	if (a->notify_fd >= 0)
		close(a->notify_fd);
	free(a);
}

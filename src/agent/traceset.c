// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "trace/exeprocs.h"
#include "trace/shlib.h"
#include "agent/traceset.h"

/* A failed attach is tried again after this long (the kernel may have been short of memory). */
#define RETRY_NS (30 * NS_PER_S)
/* ... or after this long, when the hint it lacks waits for a library's reading. */
#define HINT_RETRY_NS (NS_PER_S / 2)

struct trace {
	struct traced pub;
	uint64_t starttime;
	dev_t dev;
	ino_t ino;
	struct tracer_target *target;
	char *warning;		  /* patterns that matched nothing in this binary */
	bool hints_pending;	  /* libraries the warning's hints need are being read */
	struct shlib_procs *libs; /* its library targets (LIB:FUNC patterns) */
	char *lib_warning;	  /* library patterns that match nothing yet */
	bool seen;
	struct trace *next;
};

struct failure {
	char *key;
	char *msg;
	uint64_t retry_ns;
	bool seen;
	struct failure *next;
};

struct traceset {
	struct traceset_env *env;
	struct traceset *next_in_env; /* env->all */
	struct results *results;
	char *ns, *name;
	struct trace *traces;
	struct failure *failures;
	size_t waiting; /* this turn's processes left for a later turn (traceset__waiting) */
	char *left;	/* handed over to env (traceset__leave): why, for the log */
};

struct traceset *traceset__new(struct traceset_env *env, struct results *r, const char *ns,
			       const char *name)
{
	struct traceset *ts = calloc(1, sizeof(*ts));

	if (!ts)
		return NULL;
	ts->env = env;
	ts->results = r;
	ts->ns = strdup(ns);
	ts->name = strdup(name);
	if (!ts->ns || !ts->name) {
		traceset__free(ts, NULL);
		return NULL;
	}
	ts->next_in_env = env->all;
	env->all = ts;
	return ts;
}

static void trace_free(struct trace *t)
{
	free((char *)t->pub.pod);
	free((char *)t->pub.container);
	free((char *)t->pub.cid);
	free((char *)t->pub.exe);
	free(t->warning);
	free(t->lib_warning);
	shlib_procs__free(t->libs);
	free(t);
}

static cJSON *event(struct traceset *ts, const struct trace *t, cJSON *ev)
{
	cJSON_AddStringToObject(ev, "namespace", ts->ns);
	cJSON_AddStringToObject(ev, "probe", ts->name);
	cJSON_AddStringToObject(ev, "pod", t->pub.pod);
	cJSON_AddStringToObject(ev, "container", t->pub.container);
	return ev;
}

/* Stops tracing; what it counted stays in the probe's results. */
static void trace_retire(struct traceset *ts, struct trace *t, const char *why)
{
	struct nodeproc np = { t->pub.pid, t->starttime };
	bool exited = !nodeprocs__alive(ts->env->procs, &np);

	results__retire(ts->results, t->target, exited);
	for (size_t i = 0; i < shlib_procs__ntargets(t->libs); i++)
		results__retire(ts->results, shlib_procs__target(t->libs, i), exited);
	/* gone: its share goes now, free for a process that gets its pid */
	if (exited)
		tracer__forget_pid(ts->env->tracer, t->pub.pid);
	symbolizer__forget(ts->env->sym, t->pub.pid);
	log_emit(
		event(ts, t, log_event(LOG_INFO, "detached from process %d: %s", t->pub.pid, why)));
	trace_free(t);
}

static void failures_drop(struct traceset *ts, bool all)
{
	struct failure **fp = &ts->failures;

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

/* Whether the turn's time for attaching and detaching is spent. */
static bool out_of_time(const struct traceset_env *env)
{
	return env->budget_ns && env->spent_ns >= env->budget_ns;
}

/*
 * Retires the processes not seen this turn (all: every one). Paced: while
 * the turn's time lasts; the others stay attached, and a later turn
 * retires them (reading a process's 64 counts and detaching it took 7 to
 * 100 ms, 24 of a deleted probe kept a turn 0.6 s: ASan build).
 */
static void retire(struct traceset *ts, bool all, const char *why, bool paced)
{
	struct traceset_env *env = ts->env;
	struct trace **tp = &ts->traces;

	while (*tp) {
		struct trace *t = *tp;
		uint64_t start;

		if (!all && t->seen) {
			tp = &t->next;
			continue;
		}
		if (paced && out_of_time(env)) {
			env->detach_waiting++;
			tp = &t->next;
			continue;
		}
		start = clock__mono_ns();
		*tp = t->next;
		trace_retire(ts, t, why);
		env->spent_ns += clock__mono_ns() - start;
	}
}

void traceset__free(struct traceset *ts, const char *why)
{
	if (!ts)
		return;
	for (struct traceset **p = &ts->env->all; *p; p = &(*p)->next_in_env) {
		if (*p == ts) {
			*p = ts->next_in_env;
			break;
		}
	}
	retire(ts, true, why, false);
	failures_drop(ts, true);
	free(ts->ns);
	free(ts->name);
	free(ts->left);
	free(ts);
}

/* A set left, its processes retired: gone with its results table. */
static void left_free(struct traceset *ts)
{
	struct results *r = ts->results;

	traceset__free(ts, ts->left ? ts->left : "the probe is gone");
	results__free(r);
}

void traceset__leave(struct traceset *ts, const char *why)
{
	if (!ts)
		return;
	failures_drop(ts, true);
	ts->left = strdup(why ? why : "");
	if (!ts->traces || !ts->left)
		left_free(ts);
}

void traceset__finish(struct traceset_env *env)
{
	struct traceset *ts, *next;

	for (ts = env->all; ts; ts = next) {
		next = ts->next_in_env;
		if (ts->left)
			left_free(ts);
	}
}

/*
 * Retires now, unpaced, the traces whose pid this turn's scan lists with
 * another start time: another process took it over, maybe another pod's,
 * which must not count for this probe, nor wait for its turn behind it.
 */
static void retire_reused(struct traceset *ts)
{
	struct trace **tp = &ts->traces;

	while (*tp) {
		struct trace *t = *tp;
		struct nodeproc p = { t->pub.pid, t->starttime };

		if (!nodeprocs__pod_of(ts->env->procs, p.pid) ||
		    nodeprocs__listed(ts->env->procs, &p)) {
			tp = &t->next;
			continue;
		}
		*tp = t->next;
		trace_retire(ts, t, "the process exited, its pid taken by another process");
	}
}

void traceset__turn(struct traceset_env *env, uint64_t budget_ns)
{
	struct traceset *ts, *next;

	env->budget_ns = budget_ns;
	env->spent_ns = 0;
	env->attach_waiting = 0;
	env->attach_reading = 0;
	env->detach_waiting = 0;
	/* first what was left: it holds slots and shares that attaches may need */
	for (ts = env->all; ts; ts = next) {
		next = ts->next_in_env;
		retire_reused(ts);
		if (!ts->left)
			continue;
		retire(ts, true, ts->left, true);
		if (!ts->traces)
			left_free(ts);
	}
}

void traceset__begin(struct traceset *ts)
{
	ts->waiting = 0;
	for (struct trace *t = ts->traces; t; t = t->next)
		t->seen = false;
	for (struct failure *f = ts->failures; f; f = f->next)
		f->seen = false;
}

void traceset__end(struct traceset *ts, const char *why)
{
	retire(ts, false, why, true);
	failures_drop(ts, false);
}

void traceset__retire_all(struct traceset *ts, const char *why)
{
	retire(ts, true, why, false);
	failures_drop(ts, true);
}

size_t traceset__count(const struct traceset *ts)
{
	size_t n = 0;

	for (const struct trace *t = ts->traces; t; t = t->next)
		n++;
	return n;
}

size_t traceset__waiting(const struct traceset *ts)
{
	return ts->waiting;
}

size_t traceset__ns_funcs(const struct traceset_env *env, const char *ns)
{
	size_t n = 0;

	for (const struct traceset *ts = env->all; ts; ts = ts->next_in_env) {
		if (strcmp(ts->ns, ns))
			continue;
		for (const struct trace *t = ts->traces; t; t = t->next) {
			n += tracer_target__nfuncs(t->target);
			for (size_t i = 0; i < shlib_procs__ntargets(t->libs); i++)
				n += tracer_target__nfuncs(shlib_procs__target(t->libs, i));
		}
	}
	return n;
}

/* What this namespace may still trace: its share less what it traces (SIZE_MAX: no share). */
static size_t ns_room(const struct traceset *ts)
{
	size_t used;

	if (!ts->env->max_ns_funcs)
		return SIZE_MAX;
	used = traceset__ns_funcs(ts->env, ts->ns);
	return used < ts->env->max_ns_funcs ? ts->env->max_ns_funcs - used : 0;
}

/* Says which share a refused process passed, and what sets it. */
static void ns_refused(struct traceset *ts, struct rw_error *err)
{
	char why[sizeof(err->msg)];

	snprintf(why, sizeof(why), "%s", err->msg);
	ts->env->ns_refused++;
	rw_error_set(err, EDQUOT,
		     "not traced: the probes of namespace %s may trace %zu functions on this node, "
		     "each counted once per process (--max-functions-per-namespace, the chart's "
		     "maxFunctionsPerNamespace), and trace %zu; %s: trace fewer functions or pods",
		     ts->ns, ts->env->max_ns_funcs, traceset__ns_funcs(ts->env, ts->ns), why);
}

void traceset__share_errors(const struct traceset *ts, struct errlist *errs)
{
	struct tracer_share sh;

	if (!ts->traces || tracer__share_read(ts->env->tracer, ts->ns, &sh))
		return;
	if (sh.contexts_refused)
		errlist__add(errs,
			     "calls not measured (each function's lost): the processes of "
			     "namespace %s on this node had %" PRIu64 " goroutines and threads "
			     "with traced calls in flight, its share of the node's "
			     "(--max-inflight-per-namespace, the chart's "
			     "maxInflightPerNamespace): trace fewer pods or functions, or raise it",
			     ts->ns, sh.max_contexts);
	if (sh.chunks_refused)
		errlist__add(errs,
			     "calls not measured (each function's lost): the processes of "
			     "namespace %s on this node had calls nested deeper than %d in flight "
			     "in %" PRIu64 " chunks of %d, its share of the node's (in proportion "
			     "to --max-inflight-per-namespace, the chart's "
			     "maxInflightPerNamespace): raise it, or trace functions that recurse "
			     "less deep",
			     ts->ns, TRACER_DEEP_FRAMES, sh.max_chunks, TRACER_DEEP_FRAMES);
	if (sh.too_deep)
		errlist__add(errs,
			     "calls not measured (each function's lost): %" PRIu64 " calls in "
			     "the processes of namespace %s on this node were entered with %d "
			     "traced calls in flight below them on their goroutine or thread, "
			     "the most the kernel follows: trace functions that recurse less deep",
			     sh.too_deep, ts->ns, TRACER_MAX_DEPTH);
	if (sh.map_full)
		errlist__add(
			errs,
			"calls not measured (each function's lost): %" PRIu64 " calls in "
			"the processes of namespace %s on this node found the node's "
			"in-flight maps full (%d goroutines and threads with traced calls in "
			"flight, and %d chunks of calls nested deeper than %d, every "
			"namespace's): trace fewer pods or functions on this node, or lower "
			"--max-inflight-per-namespace (the chart's maxInflightPerNamespace) so "
			"that no namespace takes them all",
			sh.map_full, ts->ns, TRACER_MAX_CONTEXTS, TRACER_MAX_CHUNKS,
			TRACER_DEEP_FRAMES);
	if (sh.events_refused)
		errlist__add(errs,
			     "slow calls not sent (each function's slowDropped): the processes of "
			     "namespace %s on this node passed its share of %" PRIu64 " slow calls "
			     "a second (--slow-calls-per-namespace, the chart's "
			     "slowCallsPerNamespace): raise slowThreshold, or the share",
			     ts->ns, sh.max_events);
}

void traceset__fork_errors(const struct traceset *ts, struct errlist *errs)
{
	const char *pod = NULL;
	bool more = false;
	uint64_t n = 0;

	for (const struct trace *t = ts->traces; t; t = t->next) {
		uint64_t k = t->target ? tracer_target__children_unprobed(t->target) : 0;

		if (!k)
			continue;
		n += k;
		more |= pod && strcmp(pod, t->pub.pod);
		pod = pod ? pod : t->pub.pod;
	}
	if (n)
		errlist__add(
			errs,
			"calls not counted: %" PRIu64 " processes forked by the traced "
			"processes of pod %s%s on this node, or started there running their "
			"executable, ended before they could be probed: another process on this "
			"node runs the same executable without this probe, so each traced "
			"process has probes of its own, which the processes it forks or that "
			"start beside it do not inherit (where every process of the executable "
			"on the node is traced, they are counted from their start)",
			n, pod, more ? " and others" : "");
}

void traceset__foreach(const struct traceset *ts, void (*fn)(const struct traced *t, void *ctx),
		       void *ctx)
{
	for (const struct trace *t = ts->traces; t; t = t->next)
		fn(&t->pub, ctx);
}

static struct trace *trace_find(struct traceset *ts, const struct placement_proc *pp)
{
	for (struct trace *t = ts->traces; t; t = t->next)
		if (t->pub.pid == pp->proc.pid && t->starttime == pp->proc.starttime &&
		    t->dev == pp->dev && t->ino == pp->ino)
			return t;
	return NULL;
}

static struct failure *failure_find(struct traceset *ts, const char *key)
{
	for (struct failure *f = ts->failures; f; f = f->next)
		if (!strcmp(f->key, key))
			return f;
	return NULL;
}

/* Records a failed attach; whether it is news (to log) or the same again. */
static bool remember_failure(struct traceset *ts, struct failure *f, const char *key,
			     const char *msg)
{
	bool news = !f || strcmp(f->msg, msg);

	if (!f) {
		f = calloc(1, sizeof(*f));
		if (!f)
			return true;
		f->key = strdup(key);
		f->next = ts->failures;
		ts->failures = f;
	}
	free(f->msg);
	f->msg = strdup(msg);
	f->retry_ns = clock__mono_ns() + RETRY_NS;
	f->seen = true;
	return news;
}

void traceset__no_match(const struct binary_unmatched *u, const char *file, char *buf, size_t len)
{
	char hint[256] = "";
	size_t n = 0;

	for (size_t s = 0; s < u->nsuggestions && n < sizeof(hint); s++)
		n += snprintf(hint + n, sizeof(hint) - n, "%s%s", s ? ", " : "", u->suggestions[s]);
	snprintf(buf, len, "no function matches '%s' in %s%s%s%s", u->pattern, file,
		 n ? " (did you mean: " : "", hint, n ? ")" : "");
}

static char *unmatched_warning(struct traceset *ts, struct tracer_target *tt, const char *exe,
			       bool *ret_pending)
{
	char *out = NULL, *prev;

	for (size_t i = 0; i < tracer_target__nunmatched(tt); i++) {
		const struct binary_unmatched *u = tracer_target__unmatched(tt, i);
		char msg[1024], lib[SHLIB_MAX_NAME], root[64];

		prev = out;
		nodeprocs__host_root(tracer_target__pid(tt), root, sizeof(root));
		/* a name of a library the process has mapped: say which */
		if (shlib__find(tracer_target__pid(tt), tracer__cache(ts->env->tracer),
				ts->env->analyzer, root, u->pattern, lib, sizeof(lib),
				ret_pending)) {
			if (asprintf(&out,
				     "%s%sno function matches '%s' in %s; %s is in %s: write "
				     "'%s:%s'",
				     prev ? prev : "", prev ? "; " : "", u->pattern, exe,
				     u->pattern, lib, lib, u->pattern) < 0)
				out = NULL;
		} else {
			traceset__no_match(u, exe, msg, sizeof(msg));
			if (asprintf(&out, "%s%s%s", prev ? prev : "", prev ? "; " : "", msg) < 0)
				out = NULL;
		}
		free(prev);
	}
	return out;
}

static void attach_failed(struct traceset *ts, const struct placement_proc *pp, struct failure *f,
			  const char *key, struct rw_error *err, struct errlist *errs)
{
	char *msg;

	if (asprintf(&msg, "pod %s, container %s, process %d: %s", pp->pod, pp->container,
		     pp->proc.pid, err->msg) < 0)
		return;
	ts->env->attach_failures++;
	if (remember_failure(ts, f, key, msg))
		log_error("probe %s/%s: %s", ts->ns, ts->name, msg);
	errlist__add(errs, "%s", msg);
	free(msg);
}

static struct trace *trace_new(const struct placement_proc *pp, struct tracer_target *tt)
{
	struct trace *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->pub.pod = strdup(pp->pod);
	t->pub.container = strdup(pp->container);
	t->pub.cid = strdup(pp->cid);
	t->pub.exe = strdup(pp->exe);
	t->pub.pid = pp->proc.pid;
	t->starttime = pp->proc.starttime;
	t->dev = pp->dev;
	t->ino = pp->ino;
	t->target = tt;
	t->seen = true;
	if (!t->pub.pod || !t->pub.container || !t->pub.cid || !t->pub.exe) {
		trace_free(t);
		return NULL;
	}
	return t;
}

static void traced_new(struct traceset *ts, const struct placement_proc *pp,
		       struct tracer_target *tt, bool layer, struct errlist *errs)
{
	struct trace *t = trace_new(pp, tt);
	cJSON *ev;

	if (!t || results__add(ts->results, tt, pp->pod, pp->container)) {
		if (t)
			trace_free(t);
		tracer__remove(ts->env->tracer, tt);
		return;
	}
	t->warning = unmatched_warning(ts, tt, pp->exe, &t->hints_pending);
	if (t->warning) {
		log_warn("probe %s/%s: pod %s: %s", ts->ns, ts->name, pp->pod, t->warning);
		errlist__add(errs, "pod %s, container %s: %s", pp->pod, pp->container, t->warning);
	}
	t->next = ts->traces;
	ts->traces = t;
	ev = log_event(LOG_INFO, "attached to process %d: %zu functions", t->pub.pid,
		       tracer_target__nfuncs(tt));
	event(ts, t, ev);
	cJSON_AddStringToObject(ev, "executable", t->pub.exe);
	/* attached through the image layer's file (shared with the image's other containers) */
	cJSON_AddBoolToObject(ev, "layer_file", layer);
	log_emit(ev);
}

struct lib_ctx {
	struct traceset *ts;
	struct trace *t;
};

/* A library target joins the probe's results, in the process's pod group. */
static int take_lib(struct tracer_target *tt, const char *lib, void *ctx)
{
	struct lib_ctx *c = ctx;
	cJSON *ev;
	int e = results__add(c->ts->results, tt, c->t->pub.pod, c->t->pub.container);

	if (e)
		return e;
	ev = log_event(LOG_INFO, "attached to library %s of process %d: %zu functions", lib,
		       c->t->pub.pid, tracer_target__nfuncs(tt));
	event(c->ts, c->t, ev);
	cJSON_AddStringToObject(ev, "library", lib);
	log_emit(ev);
	return 0;
}

/* Attaches the probe's library patterns to the libraries t's process mapped since the last
 * turn (dlopen), and lists what matches nothing yet. */
static void update_libs(struct traceset *ts, struct trace *t, struct errlist *errs)
{
	struct lib_ctx c = { ts, t };
	struct rw_error err = { "" };
	char *unmatched = NULL, root[64];

	if (!shlib_procs__wanted(t->libs))
		return;
	nodeprocs__host_root(t->pub.pid, root, sizeof(root));
	if (shlib_procs__update(t->libs, ts->env->tracer, tracer__cache(ts->env->tracer),
				ts->env->analyzer, root, ns_room(ts), take_lib, &c, &unmatched,
				&err) < 0) {
		/* the process is exiting: the next turn retires it */
		free(unmatched);
		return;
	}
	if (unmatched && (!t->lib_warning || strcmp(unmatched, t->lib_warning)))
		log_warn("probe %s/%s: pod %s: %s", ts->ns, ts->name, t->pub.pod, unmatched);
	free(t->lib_warning);
	t->lib_warning = unmatched;
	if (t->lib_warning)
		errlist__add(errs, "pod %s, container %s: %s", t->pub.pod, t->pub.container,
			     t->lib_warning);
}

/* Names the executable lacks that a library of the process has: say which.
 * Whether some library is still being read (the hint may come later). */
static bool library_hints(struct traceset *ts, pid_t pid, const char **pats, size_t n,
			  struct rw_error *err)
{
	bool pending = false;
	char lib[SHLIB_MAX_NAME], root[64];
	size_t len = strlen(err->msg);

	nodeprocs__host_root(pid, root, sizeof(root));
	for (size_t i = 0; i < n && len < sizeof(err->msg); i++) {
		if (!shlib__find(pid, tracer__cache(ts->env->tracer), ts->env->analyzer, root,
				 pats[i], lib, sizeof(lib), &pending))
			continue;
		len += snprintf(err->msg + len, sizeof(err->msg) - len,
				"; %s is in %s: write '%s:%s'", pats[i], lib, lib, pats[i]);
	}
	return pending;
}

/* The unmatched patterns' warning once the libraries its hints need are read. */
static void warning_again(struct traceset *ts, struct trace *t)
{
	char *w;

	t->hints_pending = false;
	w = unmatched_warning(ts, t->target, t->pub.exe, &t->hints_pending);
	if (w && (!t->warning || strcmp(w, t->warning)))
		log_warn("probe %s/%s: pod %s: %s", ts->ns, ts->name, t->pub.pod, w);
	free(t->warning);
	t->warning = w;
}

/* The spec's patterns without a library part: the executable's. */
static const char **exe_patterns(const struct probe_spec *spec, size_t *ret_n)
{
	const char **out = calloc(spec->nfunctions + 1, sizeof(*out));
	char lib[SHLIB_MAX_NAME];
	const char *func;

	*ret_n = 0;
	for (size_t i = 0; out && i < spec->nfunctions; i++)
		if (!binary_pattern__library(spec->functions[i], lib, sizeof(lib), &func))
			out[(*ret_n)++] = spec->functions[i];
	return out;
}

/*
 * The process exited or left the container placement found it in, when its
 * links were made; calls: what it counted meanwhile (kept), or -1.
 */
static void changed(struct traceset *ts, const struct placement_proc *pp, const char *when,
		    int64_t calls)
{
	cJSON *ev = log_event(
		LOG_INFO,
		"not attached to process %d: it exited or left container %.12s %s its "
		"probes were attached",
		pp->proc.pid, pp->cid, when);

	cJSON_AddStringToObject(ev, "namespace", ts->ns);
	cJSON_AddStringToObject(ev, "probe", ts->name);
	cJSON_AddStringToObject(ev, "pod", pp->pod);
	cJSON_AddStringToObject(ev, "container", pp->container);
	if (calls >= 0)
		cJSON_AddNumberToObject(ev, "calls_kept", (double)calls);
	log_emit(ev);
}

/* Whether pp's process exited: gone, or a zombie (no executable, no root to open). */
static bool exited(const struct traceset *ts, const struct placement_proc *pp)
{
	return !nodeprocs__alive(ts->env->procs, &pp->proc) ||
	       exeprocs__gone("/proc", pp->proc.pid);
}

/*
 * Whether pp's process exited, or left its container, while its links were
 * made (tt, made; or its attach failed: an exited process, a zombie, has no
 * executable or root to open): they go, it is said, not taken for a
 * failure, and a later turn places it again where it is still there. What
 * tt counted meanwhile stays in the pod's results: a pre-fork server's
 * worker of a millisecond can run its one statement between its histogram
 * slot's making and this check (with shared probes, counted there from the
 * slot's making).
 */
static bool gone_meanwhile(struct traceset *ts, const struct placement_proc *pp,
			   struct tracer_target *tt)
{
	int64_t calls = -1;
	bool gone;

	if (tt ? nodeprocs__still_in(ts->env->procs, &pp->proc, pp->cid, pp->pod_uid)
	       : !exited(ts, pp))
		return false;
	gone = exited(ts, pp);
	for (size_t i = 0; tt && i < tracer_target__nfuncs(tt); i++) {
		struct latency l;

		if (!tracer_target__read(ts->env->tracer, tt, i, &l))
			calls = (calls < 0 ? 0 : calls) + (int64_t)l.calls;
	}
	if (tt && !results__add(ts->results, tt, pp->pod, pp->container))
		results__retire(ts->results, tt, gone);
	else
		tracer__remove(ts->env->tracer, tt);
	if (gone)
		tracer__forget_pid(ts->env->tracer, pp->proc.pid);
	changed(ts, pp, "while", calls);
	return true;
}

/*
 * The path the tracer opens for pp's executable into path (traceset.h): the image
 * layer's file, shared by every container of the image, when it is found
 * (its descriptor is returned, for the caller to close), else the
 * container's path or /proc/PID/exe (-1).
 */
int traceset__exe_path(const struct placement_proc *pp, char *path, size_t len)
{
	int real = nodeprocs__layer_exe(pp->proc.pid);

	if (real >= 0)
		snprintf(path, len, "/proc/self/fd/%d", real);
	else if (pp->path)
		snprintf(path, len, "%s", pp->path);
	else
		snprintf(path, len, "/proc/%d/exe", pp->proc.pid);
	return real;
}

/* The functions of spec in the shared libraries of pp's process, just traced. */
static void trace_libs(struct traceset *ts, const struct placement_proc *pp,
		       const struct probe_spec *spec, struct errlist *errs)
{
	struct trace *t = trace_find(ts, pp);

	if (!t)
		return;
	t->libs = shlib_procs__new(pp->proc.pid, (const char *const *)spec->functions,
				   spec->nfunctions, spec->threshold_ns);
	update_libs(ts, t, errs);
}

/* Where the kernel lacks what the programs need: pp fails with that. */
static void attach_refused(struct traceset *ts, const struct placement_proc *pp, struct failure *f,
			   const char *key, struct errlist *errs)
{
	struct rw_error err = { "" };

	rw_error_set(&err, EOPNOTSUPP, "%s: nothing is traced on this node",
		     ts->env->no_tracer ? ts->env->no_tracer : "no tracer");
	attach_failed(ts, pp, f, key, &err, errs);
}

/*
 * Attaches a process placement found for the first time (or again after a
 * failure, f). False when its executable is being read: the loop is woken
 * when the reading ends, and a later turn attaches it.
 */
static bool attach(struct traceset *ts, const struct placement_proc *pp,
		   const struct probe_spec *spec, struct failure *f, const char *key,
		   struct errlist *errs)
{
	struct rw_error err = { "" };
	struct tracer_target *tt;
	char path[96];
	const char **pats;
	size_t npats;
	bool refused, hints_pending = false;
	int e, real = traceset__exe_path(pp, path, sizeof(path));
	char origin[32];

	/* the layer's file: its debug file is looked for in the container's root */
	snprintf(origin, sizeof(origin), "/proc/%d/exe", pp->proc.pid);
	pats = exe_patterns(spec, &npats);
	switch (pats && ts->env->analyzer
			? analyzer__check_as(ts->env->analyzer, tracer__cache(ts->env->tracer),
					     path, real >= 0 ? origin : NULL, pats, npats, &err)
			: ANALYSIS_READY) {
	case ANALYSIS_PENDING:
		free(pats);
		if (real >= 0)
			close(real);
		return false;
	case ANALYSIS_FAILED:
		free(pats);
		if (real >= 0)
			close(real);
		/* its root or executable could not be opened: it exited since the scan */
		if (exited(ts, pp)) {
			changed(ts, pp, "before", -1);
			return true;
		}
		rw_error_replace(&err, path, pp->exe);
		attach_failed(ts, pp, f, key, &err, errs);
		return true;
	case ANALYSIS_READY: break;
	}
	/* the pid may have been taken over, or the process moved, since the scan */
	if (!nodeprocs__still_in(ts->env->procs, &pp->proc, pp->cid, pp->pod_uid)) {
		free(pats);
		if (real >= 0)
			close(real);
		changed(ts, pp, "before", -1);
		return true;
	}
	/* its calls in flight and slow calls count against the namespace's share */
	e = pats ? -tracer__share(ts->env->tracer, pp->proc.pid, ts->ns, &err) : 0;
	tt = pats && !e ? tracer__add_bounded(ts->env->tracer, pp->proc.pid, path, pats, npats,
					      spec->threshold_ns, ns_room(ts), &err)
			: NULL;
	e = e ? e : errno;
	refused = !tt && e == EDQUOT;
	if (!pats)
		rw_error_set(&err, ENOMEM, "out of memory");
	else if (!tt && e == ENOENT)
		hints_pending = library_hints(ts, pp->proc.pid, pats, npats, &err);
	free(pats);
	if (real >= 0)
		close(real);
	if (gone_meanwhile(ts, pp, tt))
		return true;
	if (!tt) {
		if (refused)
			ns_refused(ts, &err);
		/* the tracer names the file by the path it opened, not the container's */
		rw_error_replace(&err, path, pp->exe);
		attach_failed(ts, pp, f, key, &err, errs);
		/* the hint's libraries are being read: try again soon, for it */
		if (hints_pending && (f = failure_find(ts, key)))
			f->retry_ns = clock__mono_ns() + HINT_RETRY_NS;
		return true;
	}
	traced_new(ts, pp, tt, real >= 0, errs);
	trace_libs(ts, pp, spec, errs);
	/* its files opened now, for the stacks of its slow calls: one read
	 * from the ring buffer after it exited is still named */
	if (ts->env->sym && (spec->threshold_ns || spec->keep))
		symbolizer__watch(ts->env->sym, pp->proc.pid);
	return true;
}

void traceset__want(struct traceset *ts, const struct placement_proc *pp,
		    const struct probe_spec *spec, struct errlist *errs)
{
	struct traceset_env *env = ts->env;
	struct trace *t = trace_find(ts, pp);
	struct failure *f;
	uint64_t start;
	char key[128];

	/* the analyses asked for below count against this namespace */
	if (env->analyzer)
		analyzer__owner(env->analyzer, ts->ns);
	if (t) {
		t->seen = true;
		if (t->hints_pending)
			warning_again(ts, t);
		if (t->warning)
			errlist__add(errs, "pod %s, container %s: %s", t->pub.pod, t->pub.container,
				     t->warning);
		update_libs(ts, t, errs);
		return;
	}
	snprintf(key, sizeof(key), "%d:%" PRIu64 ":%ju:%ju", pp->proc.pid, pp->proc.starttime,
		 (uintmax_t)pp->dev, (uintmax_t)pp->ino);
	f = failure_find(ts, key);
	if (f && clock__mono_ns() < f->retry_ns) {
		f->seen = true;
		errlist__add(errs, "%s", f->msg);
		return;
	}
	/*
	 * The turn's time for attaching and detaching is spent: a later turn
	 * attaches it (what failed before stays said until then). The first
	 * attach or detach of a turn always starts, so each turn makes progress.
	 */
	if (out_of_time(env)) {
		if (f) {
			f->seen = true;
			errlist__add(errs, "%s", f->msg);
		}
		ts->waiting++;
		env->attach_waiting++;
		return;
	}
	start = clock__mono_ns();
	if (!env->tracer) {
		attach_refused(ts, pp, f, key, errs);
	} else if (attach(ts, pp, spec, f, key, errs)) {
		env->attach_tries++;
	} else {
		env->attach_reading++;
	}
	env->spent_ns += clock__mono_ns() - start;
}

void traceset__hook_said(const char *fn, const char *target, const char *file, size_t nrets,
			 const char *error, void *ctx)
{
	(void)ctx;
	if (error)
		log_warn("calls of %s that jump through a pointer to %s (%s) stay untimed: %s", fn,
			 target, file, error);
	else
		log_info("calls of %s that jump through a pointer to %s (%s) end at its %zu RETs",
			 fn, target, file, nrets);
}

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "base/clock.h"
#include "base/recent.h"
#include "trace/results.h"
#include "trace/slowest.h"
#include "trace/symbolize.h"

/* The overhead guard's state of one function of one process. */
struct guard {
	uint64_t calls, at_ns; /* at the last check */
	double rate, overhead; /* over the last interval */
	double max;	       /* the budget when last checked */
	unsigned int over;     /* checks in a row over the budget */
};

/* A live process: its target and the row of each of its functions. */
struct member {
	struct tracer_target *target;
	char *pod, *container;
	size_t *rows;
	struct guard *guard; /* per function */
	/* while a row is held (results__hold): what its functions of the row
	 * counted then, merged; NULL when none could be read */
	struct latency *held;
	struct member *next;
};

/* What the retired processes of one pod's container counted, by row. */
struct group {
	char *pod, *container;
	struct latency *lat;
	size_t nlat;
	struct group *next;
};

struct results {
	struct tracer *t;
	struct results_row *rows;
	size_t nrows;
	struct member *members;
	struct group *groups;
	bool holding; /* row held_row is read from the members' held counts */
	size_t held_row;
	/* each row's slowest calls kept (results__keep_slowest); keep 0: none */
	size_t keep;
	uint64_t window_ns;
	struct symbolizer *sym;
	uint64_t recent_ns;	       /* results__recent's window; 0: none */
	bool capture_args;	       /* results__capture_args */
	struct slowest_budget *budget; /* the kept calls' bound (results__keep_budget) */
};

static bool streq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

struct results *results__new(struct tracer *t)
{
	struct results *r = calloc(1, sizeof(*r));

	if (r)
		r->t = t;
	return r;
}

static void member__free(struct member *m)
{
	free(m->pod);
	free(m->container);
	free(m->rows);
	free(m->guard);
	free(m->held);
	free(m);
}

static void group__free(struct group *g)
{
	free(g->pod);
	free(g->container);
	free(g->lat);
	free(g);
}

void results__free(struct results *r)
{
	if (!r)
		return;
	while (r->members)
		results__retire(r, r->members->target, false);
	while (r->groups) {
		struct group *g = r->groups;

		r->groups = g->next;
		group__free(g);
	}
	for (size_t i = 0; i < r->nrows; i++) {
		free(r->rows[i].name);
		free(r->rows[i].reason);
		free(r->rows[i].args_error);
		free(r->rows[i].inlined_reason);
		free(r->rows[i].detached_pod);
		slowest__free(r->rows[i].slowest);
		recent__free(r->rows[i].recent);
	}
	slowest_budget__put(r->budget);
	free(r->rows);
	free(r);
}

static size_t row_get(struct results *r, const char *name)
{
	struct results_row *rows;

	for (size_t i = 0; i < r->nrows; i++)
		if (!strcmp(r->rows[i].name, name))
			return i;
	rows = realloc(r->rows, (r->nrows + 1) * sizeof(*rows));
	if (!rows)
		return SIZE_MAX;
	r->rows = rows;
	memset(&rows[r->nrows], 0, sizeof(*rows));
	rows[r->nrows].name = strdup(name);
	if (!rows[r->nrows].name)
		return SIZE_MAX;
	if (r->keep) {
		rows[r->nrows].slowest = slowest__new(r->keep, r->window_ns, clock__mono_ns());
		if (!rows[r->nrows].slowest) {
			free(rows[r->nrows].name);
			return SIZE_MAX;
		}
		slowest__set_budget(rows[r->nrows].slowest, r->budget);
	}
	return r->nrows++;
}

size_t results__describe(struct results *r, const struct func_info *fi)
{
	size_t k = row_get(r, fi->name);
	struct results_row *row;

	if (k == SIZE_MAX)
		return k;
	/* the row takes the last traced binary's view of the function */
	row = &r->rows[k];
	row->mode = fi->mode;
	row->nreturns = fi->nreturns;
	free(row->reason);
	row->reason = fi->reason ? strdup(fi->reason) : NULL;
	return k;
}

/* Captures the arguments of m's functions; a row says why it cannot (the first reason). */
static void member__capture_args(struct results *r, const struct member *m)
{
	for (size_t i = 0; i < tracer_target__nfuncs(m->target); i++) {
		struct results_row *w = &r->rows[m->rows[i]];
		struct rw_error err = { 0 };

		if (tracer_target__capture_args(r->t, m->target, i, &err) && !w->args_error)
			w->args_error = strdup(err.msg);
	}
}

void results__capture_args(struct results *r)
{
	r->capture_args = true;
	for (const struct member *m = r->members; m; m = m->next)
		member__capture_args(r, m);
}

/* The row takes the last traced process's copies of the function. */
static void row__inlined(struct results_row *row, const struct tracer_target *tt, size_t i)
{
	tracer_target__inlined(tt, i, &row->inlined);
	free(row->inlined_reason);
	row->inlined_reason = row->inlined.reason ? strdup(row->inlined.reason) : NULL;
	row->inlined.reason = NULL; /* the target's: the row keeps its own copy */
}

int results__add(struct results *r, struct tracer_target *tt, const char *pod,
		 const char *container)
{
	size_t n = tracer_target__nfuncs(tt);
	struct member *m = calloc(1, sizeof(*m));

	if (!m || !(m->rows = calloc(n + 1, sizeof(*m->rows))) ||
	    !(m->guard = calloc(n + 1, sizeof(*m->guard))) || (pod && !(m->pod = strdup(pod))) ||
	    (container && !(m->container = strdup(container))))
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		const struct func_info *fi = tracer_target__func(tt, i)->info;
		struct results_row *row;
		uint8_t code[8];

		m->rows[i] = results__describe(r, fi);
		if (m->rows[i] == SIZE_MAX)
			goto nomem;
		row__inlined(&r->rows[m->rows[i]], tt, i);
		row = &r->rows[m->rows[i]];
		row->trampoline = tracer_target__func(tt, i)->trampoline;
		row->trampoline_why = tracer_target__func(tt, i)->trampoline_why;
		if (row->trampoline)
			row->nreturns = 0; /* none probed: the trampoline ends its calls */
		/* where its entry probe sits: its cost inside a duration depends on it */
		if (!binary__read(tracer_target__binary(tt),
				  fi->address + (uint64_t)tracer__entry_site(tt, fi), code,
				  sizeof(code)))
			r->rows[m->rows[i]].entry = calibrate__entry_kind(
				binary__arch(tracer_target__binary(tt)), code, sizeof(code));
	}
	/* the guard's first interval starts now */
	for (size_t i = 0; i < n; i++)
		m->guard[i].at_ns = clock__mono_ns();
	m->target = tt;
	m->next = r->members;
	r->members = m;
	for (size_t i = 0; i < n && r->keep; i++)
		tracer_target__keep_slowest(r->t, tt, i, (unsigned int)r->keep,
					    slowest__floor(r->rows[m->rows[i]].slowest), false);
	if (r->capture_args)
		member__capture_args(r, m);
	return 0;
nomem:
	if (m)
		member__free(m);
	return -ENOMEM;
}

static struct group *group_get(struct results *r, const char *pod, const char *container)
{
	struct group *g;

	for (g = r->groups; g; g = g->next)
		if (streq(g->pod, pod) && streq(g->container, container))
			return g;
	g = calloc(1, sizeof(*g));
	if (!g || !(g->pod = strdup(pod)) || !(g->container = strdup(container))) {
		if (g)
			group__free(g);
		return NULL;
	}
	g->next = r->groups;
	r->groups = g;
	return g;
}

/* The group's counts of row k. */
static struct latency *group_lat(struct group *g, size_t k)
{
	if (k >= g->nlat) {
		struct latency *lat = realloc(g->lat, (k + 1) * sizeof(*lat));

		if (!lat)
			return NULL;
		memset(lat + g->nlat, 0, (k + 1 - g->nlat) * sizeof(*lat));
		g->lat = lat;
		g->nlat = k + 1;
	}
	return &g->lat[k];
}

/* A process the row's function was detached on is retired: the row says so still. */
static void row_detached(struct results_row *row, const struct tracer_target *tt,
			 const struct guard *g, const char *pod)
{
	if (row->detached_retired++)
		return;
	row->detached_pid = tracer_target__pid(tt);
	row->detached_pod = pod ? strdup(pod) : NULL;
	row->detached_rate = g->rate;
	row->detached_overhead = g->overhead;
	row->detached_max = g->max;
}

void results__retire(struct results *r, struct tracer_target *tt, bool exited)
{
	struct member **mp = &r->members, *m;
	struct group *g;

	while (*mp && (*mp)->target != tt)
		mp = &(*mp)->next;
	m = *mp;
	if (!m)
		return;
	*mp = m->next;
	if (exited)
		tracer__reap(r->t, tt);
	g = m->pod && m->container ? group_get(r, m->pod, m->container) : NULL;
	for (size_t i = 0; i < tracer_target__nfuncs(tt); i++) {
		struct latency l, *gl;

		if (tracer_target__read(r->t, tt, i, &l))
			continue;
		latency__merge(&r->rows[m->rows[i]].done, &l);
		if (tracer_target__detached(tt, i))
			row_detached(&r->rows[m->rows[i]], tt, &m->guard[i], m->pod);
		gl = g ? group_lat(g, m->rows[i]) : NULL;
		if (gl)
			latency__merge(gl, &l);
	}
	tracer__remove(r->t, tt);
	member__free(m);
}

int results__seed(struct results *r, const char *name, const struct latency *l)
{
	size_t k = row_get(r, name);

	if (k == SIZE_MAX)
		return -ENOMEM;
	r->rows[k].done = *l;
	/* what was counted before is not recent: results__recent's first base */
	r->rows[k].seeded = true;
	return 0;
}

size_t results__nrows(const struct results *r)
{
	return r->nrows;
}

const struct results_row *results__row(const struct results *r, size_t i)
{
	return i < r->nrows ? &r->rows[i] : NULL;
}

size_t results__ntargets(const struct results *r)
{
	size_t n = 0;

	for (const struct member *m = r->members; m; m = m->next)
		n++;
	return n;
}

/* What m counted in row k (its functions of the row, merged): now, or when
 * the row was held. false when none could be read. */
static bool member_count(struct results *r, const struct member *m, size_t k, struct latency *ret)
{
	bool any = false;

	if (r->holding && k == r->held_row) {
		if (m->held)
			*ret = *m->held;
		return m->held;
	}
	memset(ret, 0, sizeof(*ret));
	for (size_t i = 0; i < tracer_target__nfuncs(m->target); i++) {
		struct latency l;

		if (m->rows[i] == k && !tracer_target__read(r->t, m->target, i, &l)) {
			latency__merge(ret, &l);
			any = true;
		}
	}
	return any;
}

int results__hold(struct results *r, size_t k)
{
	results__release(r);
	for (struct member *m = r->members; m; m = m->next) {
		struct latency l;

		if (!member_count(r, m, k, &l))
			continue;
		if (!(m->held = malloc(sizeof(*m->held)))) {
			results__release(r);
			return -ENOMEM;
		}
		*m->held = l;
	}
	r->holding = true;
	r->held_row = k;
	return 0;
}

void results__release(struct results *r)
{
	for (struct member *m = r->members; m; m = m->next) {
		free(m->held);
		m->held = NULL;
	}
	r->holding = false;
}

void results__read(struct results *r, size_t k, const char *pod, const char *container,
		   struct latency *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (k >= r->nrows)
		return;
	if (!pod) {
		*ret = r->rows[k].done;
	} else {
		for (struct group *g = r->groups; g; g = g->next)
			if (k < g->nlat && streq(g->pod, pod) && streq(g->container, container))
				latency__merge(ret, &g->lat[k]);
	}
	for (struct member *m = r->members; m; m = m->next) {
		struct latency l;

		if (pod && !(streq(m->pod, pod) && streq(m->container, container)))
			continue;
		if (member_count(r, m, k, &l))
			latency__merge(ret, &l);
	}
}

/* The member of process pid measuring ev's function, and its function's index there. */
static const struct member *member_of(const struct results *r, const struct tracer_event *ev,
				      pid_t pid, size_t *ret_i)
{
	for (const struct member *m = r->members; m; m = m->next) {
		if (tracer_target__pid(m->target) != pid)
			continue;
		for (size_t i = 0; i < tracer_target__nfuncs(m->target); i++) {
			/* a detached function's slot may be another's now */
			if (tracer_target__func(m->target, i)->fn_id != ev->fn_id ||
			    tracer_target__detached(m->target, i))
				continue;
			*ret_i = i;
			return m;
		}
	}
	return NULL;
}

/* ev's member: its process's, or for one followed from its fork, the one it was forked by. */
static const struct member *member_for(const struct results *r, const struct tracer_event *ev,
				       size_t *ret_i)
{
	const struct member *m = member_of(r, ev, ev->pid, ret_i);

	return m || ev->lender <= 0 ? m : member_of(r, ev, ev->lender, ret_i);
}

bool results__find_call(const struct results *r, const struct tracer_event *ev,
			struct results_call *ret)
{
	size_t i;
	const struct member *m = member_for(r, ev, &i);

	if (!m)
		return false;
	ret->function = r->rows[m->rows[i]].name;
	ret->pod = m->pod;
	ret->container = m->container;
	return true;
}

int results__keep_slowest(struct results *r, size_t keep, uint64_t window_ns,
			  struct symbolizer *sym)
{
	uint64_t now = clock__mono_ns();

	if (keep > SLOWEST_MAX_KEEP || keep > TRACER_MAX_KEEP)
		return -EINVAL;
	if (keep == r->keep && window_ns == r->window_ns && sym == r->sym)
		return 0;
	for (size_t k = 0; k < r->nrows; k++) {
		struct slowest *s = keep ? slowest__new(keep, window_ns, now) : NULL;

		if (keep && !s)
			return -ENOMEM;
		if (s)
			slowest__set_budget(s, r->budget);
		slowest__free(r->rows[k].slowest);
		r->rows[k].slowest = s;
	}
	r->keep = keep;
	r->window_ns = window_ns;
	r->sym = sym;
	for (struct member *m = r->members; m; m = m->next)
		for (size_t i = 0; i < tracer_target__nfuncs(m->target); i++)
			tracer_target__keep_slowest(
				r->t, m->target, i, (unsigned int)keep,
				keep ? slowest__floor(r->rows[m->rows[i]].slowest) : 0, true);
	return 0;
}

void results__keep_budget(struct results *r, struct slowest_budget *b)
{
	slowest_budget__put(r->budget);
	r->budget = slowest_budget__get(b);
	for (size_t k = 0; k < r->nrows; k++)
		if (r->rows[k].slowest)
			slowest__set_budget(r->rows[k].slowest, b);
}

/* Row k's floor to the kernel, for each live process of it (new_window: its window began). */
static void row_floor(struct results *r, size_t k, bool new_window)
{
	uint64_t floor = slowest__floor(r->rows[k].slowest);

	for (struct member *m = r->members; m; m = m->next)
		for (size_t i = 0; i < tracer_target__nfuncs(m->target); i++)
			if (m->rows[i] == k)
				tracer_target__keep_slowest(r->t, m->target, i,
							    (unsigned int)r->keep, floor,
							    new_window);
}

void results__tick(struct results *r, uint64_t now_ns)
{
	for (size_t k = 0; k < r->nrows && r->keep; k++)
		if (slowest__roll(r->rows[k].slowest, now_ns))
			row_floor(r, k, true);
}

/* ns of CLOCK_MONOTONIC as CLOCK_REALTIME, at now_ns (CLOCK_MONOTONIC). */
static uint64_t realtime_of(uint64_t ns, uint64_t now_ns)
{
	struct timespec ts;
	uint64_t real;

	clock_gettime(CLOCK_REALTIME, &ts);
	real = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	return ns <= now_ns && now_ns - ns <= real ? real - (now_ns - ns) : real;
}

bool results__offer(struct results *r, const struct tracer_event *ev, uint64_t now_ns)
{
	uint64_t pcs[UNWIND_MAX_FRAMES];
	struct slow_call c = { 0 };
	const struct member *m;
	struct slowest *s;
	char frame[512];
	size_t k, n, fi = 0;

	if (!r->keep)
		return false;
	m = member_for(r, ev, &fi);
	if (!m)
		return false;
	k = m->rows[fi];
	s = r->rows[k].slowest;
	if (slowest__roll(s, now_ns))
		row_floor(r, k, true);
	if (ev->duration_ns < slowest__floor(s))
		return false;
	c.duration_ns = ev->duration_ns;
	c.end_mono_ns = ev->start_ns + ev->duration_ns;
	c.end_ns = realtime_of(c.end_mono_ns, now_ns);
	c.pid = ev->pid;
	c.tid = ev->tid;
	c.goid = ev->goid;
	/* another probe's capture is not this one's to show */
	if ((m->pod && !(c.pod = strdup(m->pod))) ||
	    (m->container && !(c.container = strdup(m->container))) ||
	    (r->capture_args && tracer_target__captures(m->target, fi) &&
	     call_args__render(&ev->args, &c.args))) {
		slow_call__clear(&c);
		return false;
	}
	n = r->sym ? symbolizer__event_stack(r->sym, ev, pcs, UNWIND_MAX_FRAMES) : 0;
	for (size_t i = 0; i < n && c.nstack < SLOWEST_MAX_FRAMES; i++) {
		symbolizer__resolve(r->sym, ev->pid, pcs[i], i == 0, frame, sizeof(frame));
		c.stack[c.nstack] = strdup(frame);
		if (c.stack[c.nstack])
			c.nstack++;
	}
	if (!slowest__add(s, &c, now_ns))
		return false;
	row_floor(r, k, false);
	return true;
}

int results__recent(struct results *r, size_t k, uint64_t window_ns, uint64_t now_ns,
		    const struct latency *cur, struct latency *ret, uint64_t *ret_span_ns)
{
	struct results_row *row = &r->rows[k];

	if (window_ns != r->recent_ns) {
		/* readings of another window's spacing: start afresh */
		for (size_t i = 0; i < r->nrows; i++) {
			recent__free(r->rows[i].recent);
			r->rows[i].recent = NULL;
		}
		r->recent_ns = window_ns;
	}
	if (!row->recent) {
		row->recent = recent__new(window_ns);
		/* a restarted agent's first reading: the counts it carried on from */
		if (row->recent && row->seeded &&
		    recent__take(row->recent, now_ns, &row->done, ret, ret_span_ns)) {
			recent__free(row->recent);
			row->recent = NULL;
		}
	}
	if (!row->recent) {
		*ret = *cur;
		*ret_span_ns = 0;
		return -ENOMEM;
	}
	return recent__take(row->recent, now_ns, cur, ret, ret_span_ns);
}

size_t results__slowest(const struct results *r, size_t k, const struct slow_call **ret, size_t max)
{
	if (k >= r->nrows || !r->rows[k].slowest)
		return 0;
	return slowest__read(r->rows[k].slowest, ret, max);
}

void results__foreach_group(const struct results *r, results_group_fn fn, void *ctx)
{
	for (const struct group *g = r->groups; g; g = g->next)
		fn(g->pod, g->container, ctx);
	for (const struct member *m = r->members; m; m = m->next) {
		bool done = !m->pod;

		for (const struct group *g = r->groups; g && !done; g = g->next)
			done = streq(g->pod, m->pod) && streq(g->container, m->container);
		for (const struct member *o = r->members; o != m && !done; o = o->next)
			done = streq(o->pod, m->pod) && streq(o->container, m->container);
		if (!done)
			fn(m->pod, m->container, ctx);
	}
}

void results__prune_groups(struct results *r, bool (*keep)(const char *pod, void *ctx), void *ctx)
{
	struct group **gp = &r->groups;

	/* a detach of a process whose pod is gone is no longer said */
	for (size_t i = 0; i < r->nrows; i++) {
		struct results_row *row = &r->rows[i];

		if (!row->detached_retired || !row->detached_pod || keep(row->detached_pod, ctx))
			continue;
		free(row->detached_pod);
		row->detached_pod = NULL;
		row->detached_retired = 0;
	}

	while (*gp) {
		struct group *g = *gp;

		if (keep(g->pod, ctx)) {
			gp = &g->next;
		} else {
			*gp = g->next;
			group__free(g);
		}
	}
}

/* Function i of m: detached when over max twice in a row, back when max allows. */
static void guard_one(struct results *r, struct member *m, size_t i, uint64_t now_ns,
		      const struct calibration *cal, double max, results_guard_fn fn, void *ctx)
{
	const struct results_row *row = &r->rows[m->rows[i]];
	uint64_t cost_ns = row->mode == FUNC_MODE_ENTRY_ONLY
				   ? calibrate__entry_only_cost(cal, row->entry)
				   : calibrate__cost(cal, row->entry, row->trampoline);
	struct guard *g = &m->guard[i];
	struct rw_error err = { "" };
	struct results_guard ev = {
		.pid = tracer_target__pid(m->target),
		.function = row->name,
		.pod = m->pod,
		.container = m->container,
		.max = max,
	};
	struct latency l;

	if (tracer_target__detached(m->target, i)) {
		g->max = max;
		if (max > 0 && g->overhead > max)
			return;
		ev.rate = g->rate;
		ev.overhead = g->overhead;
		if (tracer_target__reattach(r->t, m->target, i, &err))
			ev.error = err.msg;
		ev.detached = tracer_target__detached(m->target, i);
		if (!ev.detached) {
			/* the rate starts afresh from the next check */
			g->at_ns = 0;
			g->over = 0;
		}
		if (fn)
			fn(&ev, ctx);
		return;
	}
	if (tracer_target__read(r->t, m->target, i, &l))
		return;
	if (g->at_ns && now_ns > g->at_ns) {
		g->rate = (double)(l.calls - (l.calls > g->calls ? g->calls : l.calls)) * 1e9 /
			  (double)(now_ns - g->at_ns);
		g->overhead = g->rate * (double)cost_ns / 1e9;
		g->over = max > 0 && g->overhead > max ? g->over + 1 : 0;
	}
	g->calls = l.calls;
	g->at_ns = now_ns;
	g->max = max;
	if (g->over < 2)
		return;
	ev.rate = g->rate;
	ev.overhead = g->overhead;
	if (tracer_target__detach(r->t, m->target, i, &err)) {
		ev.error = err.msg;
		g->over = 0; /* said again after two more intervals over */
	}
	ev.detached = tracer_target__detached(m->target, i);
	if (fn)
		fn(&ev, ctx);
}

void results__guard(struct results *r, uint64_t now_ns, const struct calibration *cal, double max,
		    results_guard_fn fn, void *ctx)
{
	for (struct member *m = r->members; m; m = m->next)
		for (size_t i = 0; i < tracer_target__nfuncs(m->target); i++)
			guard_one(r, m, i, now_ns, cal, max, fn, ctx);
}

void results__overhead(const struct results *r, size_t k, struct results_overhead *ret)
{
	const struct results_row *row = k < r->nrows ? &r->rows[k] : NULL;

	memset(ret, 0, sizeof(*ret));
	if (row && row->detached_retired) {
		ret->ndetached = row->detached_retired;
		ret->detached_pid = row->detached_pid;
		ret->detached_rate = row->detached_rate;
		ret->detached_overhead = row->detached_overhead;
		ret->max = row->detached_max;
	}
	for (const struct member *m = r->members; m; m = m->next) {
		for (size_t i = 0; i < tracer_target__nfuncs(m->target); i++) {
			const struct guard *g = &m->guard[i];

			if (m->rows[i] != k)
				continue;
			if (!tracer_target__detached(m->target, i)) {
				if (g->overhead > ret->overhead) {
					ret->overhead = g->overhead;
					ret->rate = g->rate;
				}
				continue;
			}
			if (ret->ndetached++)
				continue;
			ret->detached_pid = tracer_target__pid(m->target);
			ret->pod = m->pod;
			ret->container = m->container;
			ret->detached_rate = g->rate;
			ret->detached_overhead = g->overhead;
			ret->max = g->max;
		}
	}
}

int results__read_process(struct results *r, size_t k, pid_t pid, struct latency *ret,
			  bool *ret_detached)
{
	int e = -ENOENT;

	memset(ret, 0, sizeof(*ret));
	*ret_detached = false;
	for (struct member *m = r->members; m; m = m->next) {
		struct latency l;

		if (tracer_target__pid(m->target) != pid || !member_count(r, m, k, &l))
			continue;
		latency__merge(ret, &l);
		for (size_t i = 0; i < tracer_target__nfuncs(m->target); i++)
			*ret_detached |= m->rows[i] == k && tracer_target__detached(m->target, i);
		e = 0;
	}
	return e;
}

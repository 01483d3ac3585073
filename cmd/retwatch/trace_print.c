// SPDX-License-Identifier: MIT
/* retwatch trace: what a run shows (slow calls, the table, the slowest calls, --json). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/termsafe.h"
#include "trace/symbolize.h"
#include "trace_run.h"

/* A call's arguments on a line of their own, and what they are when raw. */
static void print_args(const struct call_args *ca)
{
	char text[2048];

	if (!ca->n)
		return;
	call_args__text(ca, text, sizeof(text));
	printf("    args: %s%s\n", text, ca->more ? " ..." : "");
	if (ca->note)
		printf("    (%s)\n", ca->note);
}

static void print_event_args(const struct trace_run *r, const struct tracer_event *ev)
{
	struct call_args ca;

	if (!r->args || call_args__render(&ev->args, &ca))
		return;
	print_args(&ca);
	call_args__clear(&ca);
}

void trace_on_slow_call(const struct tracer_event *ev, void *ctx)
{
	struct trace_run *r = ctx;
	char dur[LATENCY_FMT_LEN], frame[512];
	struct results_call rc = { .function = "?" };
	uint64_t pcs[UNWIND_MAX_FRAMES];
	size_t n;

	results__offer(r->results, ev, clock__mono_ns());
	/* the others are candidates for the slowest calls kept */
	if (!r->threshold_ns || ev->duration_ns < r->threshold_ns)
		return;
	r->slow_calls++;
	if (r->json)
		return;
	results__find_call(r->results, ev, &rc);
	printf("slow call: %s took %s (pid %d, tid %d", rc.function,
	       latency__format_ns(ev->duration_ns, dur, sizeof(dur)), ev->pid, ev->tid);
	if (ev->goid)
		printf(", goroutine %" PRIu64, ev->goid);
	printf(")\n");
	print_event_args(r, ev);
	n = symbolizer__event_stack(r->sym, ev, pcs, UNWIND_MAX_FRAMES);
	for (size_t i = 0; i < n; i++) {
		symbolizer__resolve(r->sym, ev->pid, pcs[i], i == 0, frame, sizeof(frame));
		printf("    %s\n", frame);
	}
	fflush(stdout);
}

/* Every row now: what exited processes and the live ones counted. */
static struct latency *collect(struct trace_run *r)
{
	size_t n = results__nrows(r->results);
	struct latency *now = calloc(n + 1, sizeof(*now));

	for (size_t i = 0; now && i < n; i++)
		results__read(r->results, i, NULL, NULL, &now[i]);
	return now;
}

/* The FUNCTION column: as wide as the longest name, within bounds. */
#define NAME_MIN_WIDTH 40
#define NAME_MAX_WIDTH 80

/* The bias taken out of w's durations: its entry's kind's (0 with --raw). */
static uint64_t row_bias(const struct trace_run *r, const struct results_row *w)
{
	return r->bias_ns ? calibrate__bias(&r->cal, w->entry, w->trampoline) : 0;
}

/* A duration of w as shown: less the calibrated bias of its probes, never below zero. */
uint64_t trace_shown(const struct trace_run *r, const struct results_row *w, uint64_t ns)
{
	return latency__less(ns, row_bias(r, w));
}

static void print_row(const struct trace_run *r, const struct results_row *w,
		      const struct latency *l, int width)
{
	char p50[LATENCY_FMT_LEN], p95[LATENCY_FMT_LEN], p99[LATENCY_FMT_LEN], max[LATENCY_FMT_LEN];
	/* no duration: entry-only, or every call left by a jump not followed */
	bool timed = !(w->reason && w->mode == FUNC_MODE_ENTRY_ONLY) &&
		     (latency__count(l) || !l->calls);

	/* a name wider than the column gets a line of its own: the figures stay aligned */
	if ((int)strlen(w->name) > width)
		printf("%s\n%-*s", w->name, width, "");
	else
		printf("%-*s", width, w->name);
	printf(" %10" PRIu64 " %10s %10s %10s %10s %8" PRIu64 "\n", l->calls,
	       timed ? latency__format_ns(trace_shown(r, w, latency__percentile(l, 0.50)), p50,
					  sizeof(p50))
		     : "-",
	       timed ? latency__format_ns(trace_shown(r, w, latency__percentile(l, 0.95)), p95,
					  sizeof(p95))
		     : "-",
	       timed ? latency__format_ns(trace_shown(r, w, latency__percentile(l, 0.99)), p99,
					  sizeof(p99))
		     : "-",
	       timed ? latency__format_ns(trace_shown(r, w, l->max_ns), max, sizeof(max)) : "-",
	       l->orphans);
}

/*
 * An interval's table shows its own calls: each row now less what the last
 * one counted (now[] becomes that), the bounds its buckets'. Returns how
 * long the interval was.
 */
static double since_last_table(struct trace_run *r, struct latency *now, size_t n)
{
	uint64_t t = clock__mono_ns(), was = r->last_ns;
	struct latency *last = r->last;

	if (n > r->nlast) {
		last = realloc(r->last, n * sizeof(*last));
		if (!last)
			return 0;
		memset(last + r->nlast, 0, (n - r->nlast) * sizeof(*last));
		r->last = last;
		r->nlast = n;
	}
	for (size_t i = 0; i < n; i++) {
		struct latency cur = now[i];

		latency__subtract(&now[i], &last[i]);
		latency__bound_to_buckets(&now[i]);
		last[i] = cur;
	}
	r->last_ns = t;
	return was ? (double)(t - was) / 1e9 : 0;
}

/* "Final at HH:MM:SS", or an interval's, span_s its length (0: since the start). */
static void print_heading(bool final, double span_s)
{
	time_t t = time(NULL);
	struct tm tm;

	localtime_r(&t, &tm);
	if (final)
		printf("\nFinal at %02d:%02d:%02d (the whole run)\n", tm.tm_hour, tm.tm_min,
		       tm.tm_sec);
	else if (span_s > 0)
		printf("\nInterval at %02d:%02d:%02d (its last %.1f s)\n", tm.tm_hour, tm.tm_min,
		       tm.tm_sec, span_s);
	else
		printf("\nInterval at %02d:%02d:%02d (since the start)\n", tm.tm_hour, tm.tm_min,
		       tm.tm_sec);
}

void trace_print_table(struct trace_run *r, bool final)
{
	struct latency *now = collect(r);
	int width = NAME_MIN_WIDTH;

	if (!now)
		return;
	print_heading(final, final ? 0 : since_last_table(r, now, results__nrows(r->results)));
	for (size_t i = 0; i < results__nrows(r->results); i++) {
		int len = (int)strlen(results__row(r->results, i)->name);

		if (len > width && len <= NAME_MAX_WIDTH)
			width = len;
	}
	printf("%-*s %10s %10s %10s %10s %10s %8s\n", width, "FUNCTION", "CALLS", "P50", "P95",
	       "P99", "MAX", "ORPHANS");
	for (size_t i = 0; i < results__nrows(r->results); i++)
		print_row(r, results__row(r->results, i), &now[i], width);
	for (size_t i = 0; i < results__nrows(r->results); i++) {
		const struct results_row *w = results__row(r->results, i);

		if (now[i].slow_dropped)
			printf("\n%s: %" PRIu64 " slow calls not printed: over the rate limit"
			       " (--slow-calls-per-second) or the ring buffer was full\n",
			       w->name, now[i].slow_dropped);
		struct results_overhead ov;

		results__overhead(r->results, i, &ov);
		if (ov.ndetached)
			printf("\n%s: detached from %zu process%s (first %d: %.0f calls/s cost %.2f%% "
			       "of a CPU, over --max-overhead %.2f%%); counts until then\n",
			       w->name, ov.ndetached, ov.ndetached == 1 ? "" : "es",
			       ov.detached_pid, ov.detached_rate, ov.detached_overhead * 100,
			       ov.max * 100);
		if (now[i].tail_closed)
			printf("\n%s: %" PRIu64 " of the calls ended at a RET of a function "
			       "they tail-called\n",
			       w->name, now[i].tail_closed);
		if (w->inlined.copies)
			printf("\n%s: %" PRIu64
			       " of the calls ran in its inlined copies (%zu of %zu "
			       "timed, %zu counted at their entries: %" PRIu64
			       " calls without a duration; %zu probes%s)%s%s\n",
			       w->name, now[i].inlined, w->inlined.timed, w->inlined.copies,
			       w->inlined.counted, now[i].inlined_untimed, w->inlined.sites,
			       w->inlined.only ? "; it has no code of its own" : "",
			       w->inlined_reason ? "; not timed: " : "",
			       w->inlined_reason ? w->inlined_reason : "");
		if (now[i].tail_exits)
			printf("\n%s: %" PRIu64 " of the calls left by a tail call that cannot be "
			       "followed (an indirect jump, or past the analysis' bound): "
			       "counted, not timed\n",
			       w->name, now[i].tail_exits);
		if (now[i].lost)
			printf("\n%s: %" PRIu64 " calls not measured: entered with %d traced calls"
			       " already in flight on their goroutine or thread\n",
			       w->name, now[i].lost, TRACER_MAX_DEPTH);
		if (w->mode == FUNC_MODE_ENTRY_ONLY) {
			printf("\n%s: calls counted at entry only, no duration: %s\n", w->name,
			       w->reason ? w->reason : "no return instruction found");
			continue;
		}
		/* no histogram without a duration (every call a tail exit) */
		if (!latency__count(&now[i]))
			continue;
		if (row_bias(r, w)) {
			char bias[LATENCY_FMT_LEN];

			/* the table's figures are less the bias, the kernel's buckets cannot be */
			printf("\n%s (as measured, with the probes' %s inside each call; the "
			       "table shows durations less it)\n",
			       w->name, latency__format_ns(row_bias(r, w), bias, sizeof(bias)));
		} else {
			printf("\n%s\n", w->name);
		}
		latency__print_log2(stdout, &now[i]);
	}
	fflush(stdout);
	free(now);
}

static cJSON *json_u64(uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return cJSON_CreateRaw(buf);
}

/* One figure per kind of entry instruction, by its name. */
static void json_by_entry(cJSON *root, const char *key, const uint64_t *v)
{
	cJSON *by = cJSON_AddObjectToObject(root, key);

	for (int k = 0; by && k < PROBE_ENTRY__N; k++)
		cJSON_AddItemToObject(by, probe_entry__str(k), json_u64(v[k]));
}

/* Row i in each process still traced: pid, calls, detached by the guard. */
static cJSON *json_processes(const struct trace_run *r, size_t i)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t p = 0; p < r->nprocs; p++) {
		struct latency l;
		bool detached;
		cJSON *o;

		if (!r->procs[p].target ||
		    results__read_process(r->results, i, r->procs[p].pid, &l, &detached))
			continue;
		o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "pid", r->procs[p].pid);
		cJSON_AddItemToObject(o, "calls", json_u64(l.calls));
		cJSON_AddBoolToObject(o, "detached", detached);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

static cJSON *json_row(const struct trace_run *r, size_t i, const struct latency *l)
{
	const struct results_row *w = results__row(r->results, i);
	bool durations = w->mode != FUNC_MODE_ENTRY_ONLY;
	cJSON *o = cJSON_CreateObject();
	struct results_overhead ov;

	results__overhead(r->results, i, &ov);
	/* of one CPU, the costliest process's at the last check */
	cJSON_AddNumberToObject(o, "overhead", ov.overhead);
	cJSON_AddNumberToObject(o, "detached", (double)ov.ndetached);
	cJSON_AddItemToObject(o, "processes", json_processes(r, i));
	cJSON_AddStringToObject(o, "name", w->name);
	cJSON_AddStringToObject(o, "mode", func_mode__str(w->mode));
	cJSON_AddItemToObject(o, "calls", json_u64(l->calls));
	cJSON_AddItemToObject(o, "min_ns", json_u64(durations ? trace_shown(r, w, l->min_ns) : 0));
	cJSON_AddItemToObject(
		o, "p50_ns",
		json_u64(durations ? trace_shown(r, w, latency__percentile(l, 0.50)) : 0));
	cJSON_AddItemToObject(
		o, "p95_ns",
		json_u64(durations ? trace_shown(r, w, latency__percentile(l, 0.95)) : 0));
	cJSON_AddItemToObject(
		o, "p99_ns",
		json_u64(durations ? trace_shown(r, w, latency__percentile(l, 0.99)) : 0));
	cJSON_AddItemToObject(o, "max_ns", json_u64(durations ? trace_shown(r, w, l->max_ns) : 0));
	/* the bias its durations are shown without, by the kind of its entry */
	cJSON_AddStringToObject(o, "entry", probe_entry__str(w->entry));
	cJSON_AddItemToObject(o, "probe_bias_ns",
			      json_u64(calibrate__bias(&r->cal, w->entry, w->trampoline)));
	/* where its calls end: its RETs, or the kernel's return trampoline (and why not) */
	cJSON_AddStringToObject(o, "return", w->trampoline ? "trampoline" : "ret");
	cJSON_AddItemToObject(o, "return_reason",
			      w->trampoline_why ? cJSON_CreateString(w->trampoline_why)
						: cJSON_CreateNull());
	/* as measured, whatever --raw says: nothing is hidden */
	cJSON_AddItemToObject(o, "raw_p50_ns",
			      json_u64(durations ? latency__percentile(l, 0.50) : 0));
	cJSON_AddItemToObject(o, "orphans", json_u64(l->orphans));
	cJSON_AddItemToObject(o, "tail_closed", json_u64(l->tail_closed));
	cJSON_AddItemToObject(o, "tail_exits", json_u64(l->tail_exits));
	/* its inlined copies: their calls are in calls too */
	cJSON_AddItemToObject(o, "inlined_calls", json_u64(l->inlined));
	cJSON_AddItemToObject(o, "inlined_copies", json_u64(w->inlined.copies));
	cJSON_AddItemToObject(o, "inlined_timed", json_u64(w->inlined.timed));
	/* copies whose exits are not known: counted at their entries, not timed */
	cJSON_AddItemToObject(o, "inlined_counted", json_u64(w->inlined.counted));
	cJSON_AddItemToObject(o, "inlined_untimed_calls", json_u64(l->inlined_untimed));
	cJSON_AddItemToObject(o, "inlined_sites", json_u64(w->inlined.sites));
	cJSON_AddBoolToObject(o, "inlined_only", w->inlined.only);
	cJSON_AddItemToObject(o, "inlined_reason",
			      w->inlined_reason ? cJSON_CreateString(w->inlined_reason)
						: cJSON_CreateNull());
	cJSON_AddItemToObject(o, "lost", json_u64(l->lost));
	cJSON_AddItemToObject(o, "slow_dropped", json_u64(l->slow_dropped));
	cJSON_AddItemToObject(o, "returns", json_u64(w->nreturns));
	cJSON_AddItemToObject(o, "reason",
			      w->reason && !durations ? cJSON_CreateString(w->reason)
						      : cJSON_CreateNull());
	return o;
}

/* Row i's slowest calls kept: durations less the bias, as the table's. */
static cJSON *json_slowest(const struct trace_run *r, size_t i)
{
	const struct results_row *w = results__row(r->results, i);
	const struct slow_call *calls[SLOWEST_MAX_KEEP];
	size_t n = results__slowest(r->results, i, calls, SLOWEST_MAX_KEEP);
	cJSON *arr = cJSON_CreateArray();

	for (size_t k = 0; arr && k < n; k++) {
		const struct slow_call *c = calls[k];
		cJSON *o = cJSON_CreateObject(), *stack;
		char end[TIME_RFC3339_LEN];

		if (!o)
			break;
		cJSON_AddItemToArray(arr, o);
		cJSON_AddItemToObject(o, "duration_ns",
				      json_u64(trace_shown(r, w, c->duration_ns)));
		cJSON_AddItemToObject(o, "raw_duration_ns", json_u64(c->duration_ns));
		time_rfc3339_at(c->end_ns, end, sizeof(end), 6);
		cJSON_AddStringToObject(o, "ended", end);
		cJSON_AddNumberToObject(o, "pid", c->pid);
		cJSON_AddNumberToObject(o, "tid", c->tid);
		if (c->goid)
			cJSON_AddItemToObject(o, "goroutine", json_u64(c->goid));
		stack = cJSON_AddArrayToObject(o, "stack");
		for (size_t f = 0; stack && f < c->nstack; f++)
			cJSON_AddItemToArray(stack, cJSON_CreateString(c->stack[f]));
		if (!r->args)
			continue;
		cJSON_AddItemToObject(o, "arguments", call_args__json(&c->args));
		if (c->args.note)
			cJSON_AddStringToObject(o, "arguments_note", c->args.note);
	}
	return arr;
}

/* Each function's slowest calls, after the table (--slowest N). */
void trace_print_slowest(const struct trace_run *r)
{
	for (size_t i = 0; i < results__nrows(r->results); i++) {
		const struct results_row *w = results__row(r->results, i);
		const struct slow_call *calls[SLOWEST_MAX_KEEP];
		size_t n = results__slowest(r->results, i, calls, SLOWEST_MAX_KEEP);

		if (!n)
			continue;
		printf("\nslowest calls of %s:\n", w->name);
		for (size_t k = 0; k < n; k++) {
			char dur[LATENCY_FMT_LEN], end[TIME_RFC3339_LEN];

			time_rfc3339_at(calls[k]->end_ns, end, sizeof(end), 6);
			printf("  %s (pid %d, tid %d",
			       latency__format_ns(trace_shown(r, w, calls[k]->duration_ns), dur,
						  sizeof(dur)),
			       calls[k]->pid, calls[k]->tid);
			if (calls[k]->goid)
				printf(", goroutine %" PRIu64, calls[k]->goid);
			printf(", ended %s)\n", end);
			print_args(&calls[k]->args);
			for (size_t f = 0; f < calls[k]->nstack; f++)
				printf("      %s\n", calls[k]->stack[f]);
		}
	}
}

/*
 * What of the kernel the run used: its release, the attach mode and whether
 * the kernel has uprobe_multi links (null: not probed, perf_event was
 * asked), and the entry kinds it was measured to emulate (null: not
 * calibrated).
 */
static cJSON *json_kernel(const struct trace_run *r)
{
	cJSON *o = cJSON_CreateObject(), *kinds = cJSON_CreateArray();
	int multi = tracer__has_uprobe_multi(r->t);
	uint32_t emulated = calibrate__emulated(&r->cal);

	cJSON_AddStringToObject(o, "release", r->kernel);
	cJSON_AddStringToObject(o, "attach", tracer__attach_mode(r->t));
	cJSON_AddItemToObject(o, "uprobe_multi",
			      multi < 0 ? cJSON_CreateNull() : cJSON_CreateBool(multi));
	for (int k = PROBE_ENTRY_STEPPED + 1; k < PROBE_ENTRY__N; k++)
		if (emulated & (1U << k))
			cJSON_AddItemToArray(kinds, cJSON_CreateString(probe_entry__str(k)));
	if (!r->calibrated) {
		cJSON_Delete(kinds);
		kinds = cJSON_CreateNull();
	}
	cJSON_AddItemToObject(o, "emulated_entries", kinds);
	return o;
}

void trace_print_json(struct trace_run *r, const struct tracer_counters *c)
{
	cJSON *root = cJSON_CreateObject(), *funcs = cJSON_CreateArray();

	for (size_t i = 0; i < results__nrows(r->results); i++) {
		struct latency l;

		/* one reading: the processes' calls add up to the function's */
		(void)results__hold(r->results, i);
		results__read(r->results, i, NULL, NULL, &l);
		cJSON *row = json_row(r, i, &l);
		const char *why = results__row(r->results, i)->args_error;

		cJSON_AddItemToArray(funcs, row);
		cJSON_AddItemToObject(row, "slowest_calls", json_slowest(r, i));
		if (r->args && why)
			cJSON_AddStringToObject(row, "arguments_error", why);
		results__release(r->results);
	}
	cJSON_AddItemToObject(root, "functions", funcs);
	cJSON_AddItemToObject(root, "slow_calls", json_u64(r->slow_calls));
	cJSON_AddItemToObject(root, "lost_events", json_u64(c->lost_events));
	cJSON_AddItemToObject(root, "slow_limited", json_u64(c->slow_limited));
	cJSON_AddItemToObject(root, "children_unprobed", json_u64(r->children_unprobed));
	cJSON_AddItemToObject(root, "probe_bias_ns", json_u64(r->cal.bias_ns));
	cJSON_AddItemToObject(root, "probe_bias_lo_ns", json_u64(r->cal.bias_lo_ns));
	cJSON_AddItemToObject(root, "probe_bias_hi_ns", json_u64(r->cal.bias_hi_ns));
	cJSON_AddItemToObject(root, "call_cost_ns", json_u64(r->cal.call_cost_ns));
	cJSON_AddItemToObject(root, "entry_only_call_cost_ns", json_u64(r->cal.entry_only_cost_ns));
	json_by_entry(root, "probe_bias_by_entry", r->cal.entry_bias_ns);
	json_by_entry(root, "call_cost_by_entry", r->cal.entry_cost_ns);
	/* a function entered at a PUSH whose calls end at the return trampoline (0: not used) */
	cJSON_AddItemToObject(root, "probe_bias_trampoline_ns",
			      json_u64(r->cal.trampoline_bias_ns));
	cJSON_AddItemToObject(root, "call_cost_trampoline_ns", json_u64(r->cal.trampoline_cost_ns));
	cJSON_AddBoolToObject(root, "raw", !r->bias_ns);
	cJSON_AddItemToObject(root, "kernel", json_kernel(r));
	termsafe__print_json(stdout, root, false);
	cJSON_Delete(root);
	fflush(stdout);
}

// SPDX-License-Identifier: MIT
/* retwatch trace: latencies of functions in running processes. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "base/clock.h"
#include "trace/shlib.h"
#include "trace/symbolize.h"
#include "trace_run.h"

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || !getenv("RETWATCH_DEBUG"))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* The kernel, and how the probes attach to it (its fallback where it lacks uprobe_multi). */
static void say_kernel(struct trace_run *r)
{
	struct utsname u;

	snprintf(r->kernel, sizeof(r->kernel), "%s", uname(&u) ? "unknown" : u.release);
	fprintf(stderr, "retwatch: kernel %s: %s\n", r->kernel, tracer__attach_why(r->t));
}

/* Entry probes only on the kinds of instruction this kernel emulates (as measured). */
static void say_site_kinds(struct trace_run *r)
{
	uint32_t kinds = calibrate__emulated(&r->cal);

	tracer__set_site_kinds(r->t, kinds);
	for (int k = PROBE_ENTRY_STEPPED + 1; k < PROBE_ENTRY__N; k++)
		if (!(kinds & (1U << k)))
			fprintf(stderr,
				"retwatch: this kernel steps a probe on a %s out of line (measured: "
				"over three quarters of the stepped kind's bias): entry probes stay at the first "
				"byte of functions whose entry site is one\n",
				probe_entry__str(k));
}

/* How much of a measured duration is the probes' own: taken out unless --raw. */
static void calibrate_probes(struct trace_run *r, const struct trace_args *args)
{
	char bias[LATENCY_FMT_LEN], lo[LATENCY_FMT_LEN], hi[LATENCY_FMT_LEN], cost[LATENCY_FMT_LEN];
	char push[LATENCY_FMT_LEN], nop[LATENCY_FMT_LEN], nop5[LATENCY_FMT_LEN];
	char jump[LATENCY_FMT_LEN], call[LATENCY_FMT_LEN];
	struct rw_error err = {};

	if (calibrate__run(r->t, &r->cal, &err)) {
		fprintf(stderr,
			"retwatch: warning: cannot calibrate the probes' bias and cost (durations "
			"are shown as measured, --max-overhead is off, entry probes at each "
			"function's first byte): %s\n",
			err.msg);
		tracer__set_site_kinds(r->t, 0);
		return;
	}
	r->calibrated = true;
	say_site_kinds(r);
	r->bias_ns = args->raw ? 0 : r->cal.bias_ns;
	fprintf(stderr,
		"retwatch: probe bias %s (rounds %s to %s), %s per traced call; for functions "
		"entered at a PUSH %s, at a NOP %s, at a 5-byte NOP %s, at a jump %s, at a call "
		"%s; durations shown %s\n",
		latency__format_ns(r->cal.bias_ns, bias, sizeof(bias)),
		latency__format_ns(r->cal.bias_lo_ns, lo, sizeof(lo)),
		latency__format_ns(r->cal.bias_hi_ns, hi, sizeof(hi)),
		latency__format_ns(r->cal.call_cost_ns, cost, sizeof(cost)),
		latency__format_ns(r->cal.entry_bias_ns[PROBE_ENTRY_PUSH], push, sizeof(push)),
		latency__format_ns(r->cal.entry_bias_ns[PROBE_ENTRY_NOP], nop, sizeof(nop)),
		latency__format_ns(r->cal.entry_bias_ns[PROBE_ENTRY_NOP5], nop5, sizeof(nop5)),
		latency__format_ns(r->cal.entry_bias_ns[PROBE_ENTRY_JUMP], jump, sizeof(jump)),
		latency__format_ns(r->cal.entry_bias_ns[PROBE_ENTRY_CALL], call, sizeof(call)),
		args->raw ? "as measured (--raw)" : "less the bias (--raw: as measured)");
}

/*
 * Several --pid: each pattern must match in one of their executables at
 * least (each process traces those it has); the ones that match in none are
 * said for each process, with its suggestions.
 */
static int preflight_several(struct trace_run *r, const struct trace_args *args)
{
	const char **nowhere = calloc(args->nexe_patterns, sizeof(*nowhere));
	const char **own = calloc(args->nexe_patterns, sizeof(*own));
	bool *found = calloc(args->nexe_patterns, sizeof(*found));
	struct rw_error err = {};
	size_t n = 0;
	char exe[64];
	int ret = 0;

	if (!nowhere || !own || !found) {
		fprintf(stderr, "retwatch: out of memory\n");
		free(nowhere);
		free(own);
		free(found);
		return -1;
	}
	/* the patterns each process has, in the order given */
	for (size_t j = 0; j < args->npids; j++) {
		size_t nown;

		snprintf(exe, sizeof(exe), "/proc/%d/exe", args->pids[j]);
		nown = trace_pid_patterns(r, exe, args, own);
		for (size_t i = 0, k = 0; i < args->nexe_patterns && k < nown; i++)
			if (own[k] == args->exe_patterns[i]) {
				found[i] = true;
				k++;
			}
	}
	for (size_t i = 0; i < args->nexe_patterns; i++)
		if (!found[i])
			nowhere[n++] = args->exe_patterns[i];
	for (size_t j = 0; n && j < args->npids && !ret; j++) {
		snprintf(exe, sizeof(exe), "/proc/%d/exe", args->pids[j]);
		ret = trace_check_exe(r, args->pids[j], exe, nowhere, n);
	}
	for (size_t j = 0; n && !ret && j < args->npids; j++) {
		snprintf(exe, sizeof(exe), "/proc/%d/exe", args->pids[j]);
		if (tracer__check(r->t, exe, nowhere, n, &err) == -ENOENT)
			fprintf(stderr, "retwatch: process %d: %s\n", args->pids[j], err.msg);
	}
	if (n && !ret) {
		fprintf(stderr, "retwatch: each pattern must match in one of the %zu processes\n",
			args->npids);
		ret = -1;
	}
	free(nowhere);
	free(own);
	free(found);
	return ret ? -1 : 0;
}

/*
 * The patterns checked in each --pid's executable before the calibration
 * (half a second): a typo is said at once. A process that cannot be read is
 * left to trace_add_proc, which says why.
 */
static int preflight(struct trace_run *r, const struct trace_args *args)
{
	if (args->npids > 1 && args->nexe_patterns)
		return preflight_several(r, args);
	for (size_t i = 0; args->nexe_patterns && i < args->npids; i++) {
		struct rw_error err = {};
		char exe[64];

		snprintf(exe, sizeof(exe), "/proc/%d/exe", args->pids[i]);
		if (trace_check_exe(r, args->pids[i], exe, args->exe_patterns, args->nexe_patterns))
			return -1;
		if (tracer__check(r->t, exe, args->exe_patterns, args->nexe_patterns, &err) ==
		    -ENOENT) {
			fprintf(stderr, "retwatch: process %d: %s\n", args->pids[i], err.msg);
			return -1;
		}
	}
	return 0;
}

/* A hook jump followed (tracer_opts.hook_fn): said once, as it happens. */
static void hook_said(const char *fn, const char *target, const char *file, size_t nrets,
		      const char *error, void *ctx)
{
	(void)ctx;
	if (error)
		fprintf(stderr,
			"retwatch: calls of %s that jump through a pointer to %s (%s) stay "
			"untimed: %s\n",
			fn, target, file, error);
	else
		fprintf(stderr,
			"retwatch: calls of %s that jump through a pointer to %s (%s) end at its "
			"%zu RETs\n",
			fn, target, file, nrets);
}

static int trace_start(struct trace_run *r, const struct trace_args *args)
{
	bool by_cgroup = args->ncgroups && !args->npids && !args->ncomms;
	struct tracer_opts topts = { .attach_mode = args->attach_mode,
				     .slow_calls_per_sec = args->slow_per_sec,
				     .entry_at_start = args->entry_at_start,
				     .trampoline = args->trampoline,
				     .capture_args = args->args,
				     /* --cgroup alone: a process started there
				      * running a traced one's executable, or
				      * forked by it, counts from its start */
				     .follow = args->follow || by_cgroup,
				     .follow_started = by_cgroup,
				     .hook_fn = hook_said };
	struct rw_error err = {};

	r->json = args->json;
	r->args = args->args;
	r->threshold_ns = args->threshold_ns;
	r->stacks = args->threshold_ns || args->slowest > 0 || (args->json && args->slowest < 0);
	r->cache = topts.cache = binary_cache__new(16);
	r->t = tracer__new(&topts, &err);
	if (!r->t) {
		fprintf(stderr, "retwatch: %s\n", err.msg);
		return -1;
	}
	say_kernel(r);
	if (preflight(r, args))
		return -1;
	calibrate_probes(r, args);
	r->sym = symbolizer__new(r->cache);
	r->results = results__new(r->t);
	if (!r->results) {
		fprintf(stderr, "retwatch: out of memory\n");
		return -1;
	}
	if (!r->sym ||
	    results__keep_slowest(r->results,
				  (size_t)(args->slowest >= 0 ? args->slowest
							      : (args->json ? DEFAULT_SLOWEST : 0)),
				  0, r->sym)) {
		fprintf(stderr, "retwatch: out of memory\n");
		return -1;
	}
	if (args->args)
		results__capture_args(r->results);
	tracer__set_event_fn(r->t, trace_on_slow_call, r);
	for (size_t i = 0; i < args->npids; i++)
		if (trace_add_proc(r, args->pids[i], args, false))
			return -1;
	trace_scan_procs(r, args);
	trace_hint_children(args);
	for (size_t i = 0; args->args && i < results__nrows(r->results); i++)
		if (results__row(r->results, i)->args_error)
			fprintf(stderr, "retwatch: the arguments of %s are not captured: %s\n",
				results__row(r->results, i)->name,
				results__row(r->results, i)->args_error);
	fprintf(stderr, "retwatch: tracing %zu function%s in %zu process%s (%s)%s\n",
		results__nrows(r->results), results__nrows(r->results) == 1 ? "" : "s", r->nprocs,
		r->nprocs == 1 ? "" : "es", tracer__attach_mode(r->t),
		r->json ? "" : "; Ctrl-C to stop");
	return 0;
}

/* How a function over its budget or back within it is told. */
static void on_guard(const struct results_guard *g, void *ctx)
{
	const struct trace_args *args = ctx;

	if (g->error)
		fprintf(stderr,
			"retwatch: %s in process %d costs %.2f%% of a CPU (%.0f calls/s), over "
			"--max-overhead %.2f%%, but cannot be detached: %s\n",
			g->function, g->pid, g->overhead * 100, g->rate, args->max_overhead * 100,
			g->error);
	else if (g->detached)
		fprintf(stderr,
			"retwatch: %s detached from process %d: %.0f calls/s cost %.2f%% of a CPU, "
			"over --max-overhead %.2f%% for two intervals; its counts stop here, the "
			"other functions are still measured (--max-overhead %.0f%% or 0 would keep "
			"it)\n",
			g->function, g->pid, g->rate, g->overhead * 100, args->max_overhead * 100,
			g->overhead * 200 > 1 ? g->overhead * 200 : 1);
	else
		fprintf(stderr, "retwatch: %s attached again to process %d\n", g->function, g->pid);
}

/* Until the duration ends, a signal, or every process exited. */
static void trace_loop(struct trace_run *r, const struct trace_args *args)
{
	uint64_t start = clock__mono_ns(), interval_ns = (uint64_t)(args->interval * 1e9);
	uint64_t next_report = args->interval ? start + interval_ns : UINT64_MAX;
	uint64_t next_libs = start + LIBS_EVERY_NS, next_scan = start + SCAN_EVERY_NS;
	/* --comm and --cgroup wait for processes to come; --pid ends with its own */
	bool waits = args->ncomms || args->ncgroups;
	/* the guard looks every --interval, else every second */
	uint64_t guard_ns = args->interval ? interval_ns : NS_PER_S;
	uint64_t next_guard = start + guard_ns;

	while (!exiting && (r->nlive || waits)) {
		uint64_t now;
		int e = tracer__poll(r->t, 100);

		if (e < 0 && e != -EINTR) {
			fprintf(stderr, "retwatch: failed to read slow calls: %s\n", strerror(-e));
			break;
		}
		trace_check_exits(r);
		now = clock__mono_ns();
		if (args->duration && now - start >= (uint64_t)(args->duration * 1e9))
			break;
		tracer__tick(r->t);
		if (now >= next_scan) {
			for (size_t p = 0; p < r->nprocs; p++)
				if (r->procs[p].target)
					trace_say_unprobed(r, &r->procs[p]);
			trace_scan_procs(r, args);
			next_scan = now + SCAN_EVERY_NS;
		}
		if (now >= next_libs) {
			for (size_t p = 0; p < r->nprocs; p++)
				if (r->procs[p].target)
					trace_update_libs(r, &r->procs[p], false);
			next_libs = now + LIBS_EVERY_NS;
		}
		if (now >= next_guard) {
			if (args->max_overhead > 0)
				results__guard(r->results, now, &r->cal, args->max_overhead,
					       on_guard, (void *)args);
			next_guard = now + guard_ns;
		}
		if (now >= next_report) {
			if (!r->json)
				trace_print_table(r, false);
			next_report = now + interval_ns;
		}
	}
}

static void trace_report(struct trace_run *r, const struct trace_args *args)
{
	struct tracer_counters c;

	/* slow calls still in the ring buffer (the tracees still run), then
	 * the processes that just exited */
	trace_drain_events(r);
	trace_check_exits(r);
	tracer__counters(r->t, &c);
	if (r->json) {
		trace_print_json(r, &c);
	} else {
		trace_print_table(r, true);
		trace_print_slowest(r);
		if (r->slow_calls || args->threshold_ns)
			printf("\n%" PRIu64 " slow call%s\n", r->slow_calls,
			       r->slow_calls == 1 ? "" : "s");
		if (c.lost_events)
			printf("%" PRIu64 " slow-call events lost (ring buffer full)\n",
			       c.lost_events);
		if (c.slow_limited)
			printf("%" PRIu64 " slow calls not printed: over --slow-calls-per-second\n",
			       c.slow_limited);
	}
	if (getenv("RETWATCH_DEBUG"))
		for (size_t s = 0; s < c.nall; s++)
			fprintf(stderr, "retwatch: stat %s %" PRIu64 "\n", c.all[s].name,
				c.all[s].n);
}

int cmd_trace(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct trace_args args = { .slow_per_sec = TRACER_SLOW_CALLS_PER_SEC,
				   .slowest = -1,
				   .max_overhead = CALIBRATE_DEFAULT_MAX_OVERHEAD,
				   .trampoline = true };
	struct trace_run r = {};
	int ret = trace_parse_args(argc, argv, &args);

	if (ret)
		return ret == 1 ? 0 : ret;
	libbpf_set_print(libbpf_print);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ret = 1;
	if (!trace_start(&r, &args)) {
		trace_loop(&r, &args);
		trace_report(&r, &args);
		ret = 0;
	}
	results__free(r.results);
	for (size_t p = 0; p < r.nprocs; p++) {
		if (r.procs[p].pidfd >= 0)
			close(r.procs[p].pidfd);
		shlib_procs__free(r.procs[p].libs);
	}
	free(args.exe_patterns);
	free(r.procs);
	free(r.refused);
	free(r.last);
	for (size_t i = 0; i < r.nrefused_exes; i++)
		free(r.refused_exes[i]);
	tracer__free(r.t);
	symbolizer__free(r.sym);
	binary_cache__free(r.cache);
	return ret;
}

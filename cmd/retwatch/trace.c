// SPDX-License-Identifier: MIT
/* retwatch trace: latencies of functions in running processes. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <cjson/cJSON.h>

#include "trace/calibrate.h"
#include "base/clock.h"
#include "cmd.h"
#include "base/latency.h"
#include "base/log.h"
#include "base/proctree.h"
#include "base/termsafe.h"
#include "trace/results.h"
#include "trace/shlib.h"
#include "trace/symbolize.h"
#include "trace/callargs.h"
#include "trace/tracer.h"

#define MAX_PIDS 64
/* --comm and --cgroup options at most */
#define MAX_SELECTORS 16
/* how often the traced processes' mappings are read again for new libraries */
#define LIBS_EVERY_NS NS_PER_S
/* how often /proc is read for new processes to trace (--follow, --comm, --cgroup) */
#define SCAN_EVERY_NS NS_PER_S
/* executables of selected processes whose refusal was said, at most */
#define MAX_REFUSED_EXES 64
/* --json: each function's slowest calls kept, unless --slowest says */
#define DEFAULT_SLOWEST 5

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

/* A process, known by its PID and start time (a PID is reused). */
struct proc_id {
	pid_t pid;
	uint64_t start;
};

struct proc {
	pid_t pid;
	uint64_t start; /* its start time: with pid, which process it was */
	int pidfd;
	struct tracer_target *target; /* NULL once it exited */
	struct shlib_procs *libs;     /* its library targets */
	uint64_t unprobed_said;	      /* children uncounted, said (say_unprobed) */
};

struct trace_run {
	struct tracer *t;
	struct binary_cache *cache;
	struct symbolizer *sym;
	struct results *results;
	struct proc *procs; /* every process traced, those that exited too */
	size_t nprocs, procs_cap, nlive;
	/* processes --follow, --comm or --cgroup selected that could not be
	 * traced (not asked again), and the executables whose refusal was said */
	struct proc_id *refused;
	size_t nrefused, refused_cap;
	char *refused_exes[MAX_REFUSED_EXES];
	size_t nrefused_exes;
	uint64_t children_unprobed; /* say_unprobed's, in all */
	bool json;
	bool stacks;	       /* slow calls are shown with their stacks */
	bool args;	       /* --args */
	uint64_t threshold_ns; /* --threshold: events this slow are slow calls */
	uint64_t slow_calls;
	struct calibration cal;
	bool calibrated;
	uint64_t bias_ns; /* taken out of every duration shown; 0 with --raw */
	char kernel[sizeof(((struct utsname *)0)->release)]; /* uname -r */
	/* each row's counts when the last interval's table was printed, and when */
	struct latency *last;
	size_t nlast;
	uint64_t last_ns;
};

/* The command line. */
struct trace_args {
	pid_t pids[MAX_PIDS];
	size_t npids;
	bool follow; /* the descendants of pids too */
	const char *comms[MAX_SELECTORS], *cgroups[MAX_SELECTORS];
	size_t ncomms, ncgroups;
	double duration, interval;
	uint64_t threshold_ns;
	uint32_t slow_per_sec;
	long slowest; /* --slowest: calls kept per function; -1: not given */
	enum tracer_attach_mode attach_mode;
	bool json;
	bool raw;	     /* durations as measured, the probes' bias left in */
	bool args;	     /* --args: the slow and slowest calls' arguments */
	bool entry_at_start; /* entry probes at the first byte (tracer_opts) */
	double max_overhead; /* of one CPU per function and process; 0: no guard */
	char **patterns;
	size_t npatterns;
	const char **exe_patterns; /* those without a library part */
	size_t nexe_patterns;
};

static void trace_usage(FILE *f)
{
	fprintf(f,
		"usage: retwatch trace --pid PID [--pid PID...] [--follow] [--comm NAME]\n"
		"                      [--cgroup PATH] [--duration SECONDS]\n"
		"                      [--threshold DURATION] [--slow-calls-per-second N]\n"
		"                      [--interval SECONDS] [--json] [--raw] [--slowest N]\n"
		"                      [--args [--redact NAME...] [--no-redact]]\n"
		"                      [--max-overhead BUDGET] [--attach MODE]\n"
		"                      [--entry-at-start] [--debug-dir DIR...] PATTERN...\n"
		"\n"
		"Measures every call of the functions matching PATTERN (names or globs, as\n"
		"`retwatch inspect` takes them) in the given processes, until the duration\n"
		"ends, SIGINT or SIGTERM, or every process has exited. LIB:PATTERN names\n"
		"functions of the shared libraries the processes have mapped, LIB a file\n"
		"name or a glob (libssl.so.3:SSL_write, 'libssl*:SSL_*', '*:malloc').\n"
		"  --pid PID             a process to trace (up to %d)\n"
		"  --follow              and every process it starts, now and later (its\n"
		"                        children's children too: a pre-fork server's workers)\n"
		"  --comm NAME           every process named NAME (/proc/PID/comm), now and\n"
		"                        later; repeatable, without --pid too\n"
		"  --cgroup PATH         every process of this cgroup (as /proc/PID/cgroup\n"
		"                        names it), now and later; repeatable. Alone, a\n"
		"                        process a traced one forks, or that starts there\n"
		"                        running its executable, counts from its start.\n"
		"                        New processes are attached within a second; with\n"
		"                        --comm or --cgroup, tracing goes on until the\n"
		"                        duration ends or a signal, even with none running\n"
		"  --duration SECONDS    stop after this long, in seconds or with a unit (30s, 2m;\n"
		"                        default: until interrupted)\n"
		"  --threshold DURATION  print each call at least this slow, with its stack\n"
		"                        (e.g. 10ms, 250us)\n"
		"  --slow-calls-per-second N\n"
		"                        print at most N slow calls a second per function and\n"
		"                        process on each CPU; the rest are counted (default %d;\n"
		"                        0: no limit)\n"
		"  --interval SECONDS    print the table every SECONDS as well as at the end\n"
		"  --json                print one JSON object at the end\n"
		"  --slowest N           print each function's N slowest calls at the end,\n"
		"                        with their stacks (1 to %d; 0: none; --json has\n"
		"                        the %d slowest unless told)\n"
		"  --args                show the slow and slowest calls' arguments: names,\n"
		"                        types and values from DWARF (strings: their first 64\n"
		"                        bytes), or the argument registers without it; a\n"
		"                        parameter named as a secret (password, passwd, secret,\n"
		"                        token, apikey, credential, cookie, session, auth...,\n"
		"                        case and _-. ignored) shows <redacted>, its type and\n"
		"                        length kept\n"
		"  --redact NAME         redact the parameters whose names hold NAME too\n"
		"  --no-redact           show every value, secrets included\n"
		"  --max-overhead BUDGET detach a function from a process when its probes\n"
		"                        cost more than BUDGET of one CPU there (calls/s x\n"
		"                        the calibrated cost of a traced call) at two checks\n"
		"                        in a row (every --interval, else every second):\n"
		"                        2%% (default), 0.5%%, 0 (never)\n"
		"  --raw                 durations as measured, with the part of the probes'\n"
		"                        own cost that falls inside them (by default it is\n"
		"                        calibrated at start and taken out)\n"
		"  --attach MODE         auto (default), uprobe_multi (Linux 6.6+, one link per\n"
		"                        file) or perf_event (one uprobe per offset)\n"
		"  --entry-at-start      put each entry probe at the function's first byte, not\n"
		"                        on the instruction the kernel emulates a few bytes on\n"
		"                        (`retwatch inspect` shows where): to compare costs\n"
		"  --debug-dir DIR       look for a stripped file's debug file (its static\n"
		"                        functions' names) in DIR/.build-id/ and DIR/<the\n"
		"                        file's directory>/ before /usr/lib/debug; repeatable\n",
		MAX_PIDS, TRACER_SLOW_CALLS_PER_SEC, SLOWEST_MAX_KEEP, DEFAULT_SLOWEST);
}

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

static void on_slow_call(const struct tracer_event *ev, void *ctx)
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
	return r->bias_ns ? calibrate__bias(&r->cal, w->entry) : 0;
}

/* A duration of w as shown: less the calibrated bias of its probes, never below zero. */
static uint64_t shown(const struct trace_run *r, const struct results_row *w, uint64_t ns)
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
	       timed ? latency__format_ns(shown(r, w, latency__percentile(l, 0.50)), p50,
					  sizeof(p50))
		     : "-",
	       timed ? latency__format_ns(shown(r, w, latency__percentile(l, 0.95)), p95,
					  sizeof(p95))
		     : "-",
	       timed ? latency__format_ns(shown(r, w, latency__percentile(l, 0.99)), p99,
					  sizeof(p99))
		     : "-",
	       timed ? latency__format_ns(shown(r, w, l->max_ns), max, sizeof(max)) : "-",
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

static void print_table(struct trace_run *r, bool final)
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
	cJSON_AddItemToObject(o, "min_ns", json_u64(durations ? shown(r, w, l->min_ns) : 0));
	cJSON_AddItemToObject(o, "p50_ns",
			      json_u64(durations ? shown(r, w, latency__percentile(l, 0.50)) : 0));
	cJSON_AddItemToObject(o, "p95_ns",
			      json_u64(durations ? shown(r, w, latency__percentile(l, 0.95)) : 0));
	cJSON_AddItemToObject(o, "p99_ns",
			      json_u64(durations ? shown(r, w, latency__percentile(l, 0.99)) : 0));
	cJSON_AddItemToObject(o, "max_ns", json_u64(durations ? shown(r, w, l->max_ns) : 0));
	/* the bias its durations are shown without, by the kind of its entry */
	cJSON_AddStringToObject(o, "entry", probe_entry__str(w->entry));
	cJSON_AddItemToObject(o, "probe_bias_ns", json_u64(calibrate__bias(&r->cal, w->entry)));
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
		cJSON_AddItemToObject(o, "duration_ns", json_u64(shown(r, w, c->duration_ns)));
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
static void print_slowest(const struct trace_run *r)
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
			       latency__format_ns(shown(r, w, calls[k]->duration_ns), dur,
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

static void print_json(struct trace_run *r, const struct tracer_counters *c)
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
	cJSON_AddBoolToObject(root, "raw", !r->bias_ns);
	cJSON_AddItemToObject(root, "kernel", json_kernel(r));
	termsafe__print_json(stdout, root, false);
	cJSON_Delete(root);
	fflush(stdout);
}

/*
 * Says how many more of pr's children ended uncounted: its probes are its
 * own (another process runs its executable untraced), which a child does
 * not inherit. Never a silent zero.
 */
static void say_unprobed(struct trace_run *r, struct proc *pr)
{
	uint64_t n = tracer_target__children_unprobed(pr->target);

	for (size_t i = 0; i < shlib_procs__ntargets(pr->libs); i++)
		n += tracer_target__children_unprobed(shlib_procs__target(pr->libs, i));
	if (n <= pr->unprobed_said)
		return;
	fprintf(stderr,
		"retwatch: calls not counted: %" PRIu64 " more processes forked by process %d "
		"(or by those it forked) "
		"ended before they could be probed (%" PRIu64 " in all): another process runs "
		"its executable untraced, so its probes are its own, which the processes it "
		"forks do not inherit\n",
		n - pr->unprobed_said, pr->pid, n);
	r->children_unprobed += n - pr->unprobed_said;
	pr->unprobed_said = n;
}

/* The process is gone: keep what it measured, count what it left in flight. */
static void proc_exited(struct trace_run *r, struct proc *pr)
{
	tracer__count_children(r->t, pr->target);
	for (size_t i = 0; i < shlib_procs__ntargets(pr->libs); i++)
		tracer__count_children(r->t, shlib_procs__target(pr->libs, i));
	say_unprobed(r, pr);
	results__retire(r->results, pr->target, true);
	for (size_t i = 0; i < shlib_procs__ntargets(pr->libs); i++)
		results__retire(r->results, shlib_procs__target(pr->libs, i), true);
	shlib_procs__free(pr->libs);
	pr->libs = NULL;
	symbolizer__forget(r->sym, pr->pid);
	pr->target = NULL;
	close(pr->pidfd);
	pr->pidfd = -1;
	r->nlive--;
	fprintf(stderr, "retwatch: process %d exited; %zu still traced\n", pr->pid, r->nlive);
}

/* Reads the slow calls waiting in the ring buffer (a bounded number of rounds). */
static void drain_events(struct trace_run *r)
{
	for (int round = 0; round < 16 && tracer__poll(r->t, 0) >= TRACER_POLL_MAX_EVENTS; round++)
		;
}

static void check_exits(struct trace_run *r)
{
	bool drained = false;

	for (size_t p = 0; p < r->nprocs; p++) {
		struct pollfd pfd = { .fd = r->procs[p].pidfd, .events = POLLIN };

		if (!r->procs[p].target || poll(&pfd, 1, 0) <= 0)
			continue;
		/* its last slow calls are in the ring buffer: read them while the
		 * symbolizer still holds its files */
		if (!drained)
			drain_events(r);
		drained = true;
		proc_exited(r, &r->procs[p]);
	}
}

/* Seconds, as a number ("5", "0.5") or a duration with its unit ("5s", "2m", "1m30s"). */
static int parse_seconds(const char *opt, const char *s, double *ret)
{
	uint64_t ns;
	char *end;

	errno = 0;
	*ret = strtod(s, &end);
	if (!errno && end != s && *end && !latency__parse_duration(s, &ns))
		*ret = (double)ns / 1e9;
	else if (errno || end == s || *end)
		*ret = 0;
	if (!(*ret > 0) || *ret > 1e9) {
		fprintf(stderr,
			"retwatch: invalid %s '%s': give a positive number of seconds, or a "
			"duration such as 30s or 2m\n",
			opt, s);
		return -EINVAL;
	}
	return 0;
}

static int take_target(struct tracer_target *tt, const char *lib, void *ctx)
{
	(void)lib;
	return results__add(ctx, tt, NULL, NULL);
}

/*
 * A name the executable lacks: say so, and which mapped library has it.
 * 0 when every pattern matches (or the executable cannot be read: tracer__add
 * will say why).
 */
static int check_exe(struct trace_run *r, pid_t pid, const char *exe, const struct trace_args *args)
{
	struct binary_match m = { 0 };
	struct binary *b = binary__open(r->cache, exe, NULL);
	char lib[SHLIB_MAX_NAME];
	int ret = 0;

	if (!b || binary__match(b, args->exe_patterns, args->nexe_patterns, BINARY_DEFAULT_LIMIT,
				&m, NULL))
		goto out;
	for (size_t i = 0; i < m.nunmatched && !ret; i++) {
		const char *pat = m.unmatched[i].pattern;

		if (!shlib__find(pid, r->cache, NULL, NULL, pat, lib, sizeof(lib), NULL))
			continue;
		fprintf(stderr,
			"retwatch: process %d: no function matches '%s' in %s; %s is in %s: "
			"write '%s:%s'\n",
			pid, pat, exe, pat, lib, lib, pat);
		ret = -ENOENT;
	}
out:
	binary_match__clear(&m);
	binary__put(b);
	return ret;
}

/* Libraries the process mapped since the last look (dlopen): attach to them. */
static int update_libs(struct trace_run *r, struct proc *pr, bool first)
{
	struct rw_error err = {};
	char *unmatched = NULL;
	int n;

	if (!shlib_procs__wanted(pr->libs))
		return 0;
	n = shlib_procs__update(pr->libs, r->t, r->cache, NULL, NULL, SIZE_MAX, take_target,
				r->results, &unmatched, &err);
	if (n < 0) {
		if (first)
			fprintf(stderr, "retwatch: process %d: %s\n", pr->pid, err.msg);
		free(unmatched);
		return first ? n : 0;
	}
	/* at the start, every pattern must match; later, new libraries just join */
	if (first && unmatched) {
		fprintf(stderr, "retwatch: process %d: %s\n", pr->pid, unmatched);
		free(unmatched);
		return -ENOENT;
	}
	if (!first && n > 0)
		fprintf(stderr, "retwatch: process %d: attached to %d newly loaded librar%s\n",
			pr->pid, n, n == 1 ? "y" : "ies");
	free(unmatched);
	return 0;
}

/* Room for one more process in r->procs. NULL: out of memory. */
static struct proc *proc_slot(struct trace_run *r)
{
	if (r->nprocs == r->procs_cap) {
		size_t cap = r->procs_cap * 2 + 16;
		struct proc *more = realloc(r->procs, cap * sizeof(*more));

		if (!more)
			return NULL;
		r->procs = more;
		r->procs_cap = cap;
	}
	return memset(&r->procs[r->nprocs], 0, sizeof(r->procs[0]));
}

/*
 * Why a process was not traced. A process --pid names: always said. One
 * --follow, --comm or --cgroup selected: said once per executable (a
 * shell's children run many programs that lack the functions), by the
 * caller, since the process is not asked again.
 */
static bool refusal_said(struct trace_run *r, pid_t pid, bool selected)
{
	char link[64], exe[4096];
	ssize_t n;

	if (!selected)
		return false;
	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0)
		return true; /* gone, or not ours to read: nothing useful to say */
	exe[n] = '\0';
	for (size_t i = 0; i < r->nrefused_exes; i++)
		if (!strcmp(r->refused_exes[i], exe))
			return true;
	if (r->nrefused_exes < MAX_REFUSED_EXES)
		r->refused_exes[r->nrefused_exes++] = strdup(exe);
	return false;
}

/*
 * Traces process pid: named by --pid (an error ends the run), or selected
 * (selected: it is left out, and said once per executable). 0, or -1.
 */
static int add_proc(struct trace_run *r, pid_t pid, const struct trace_args *args, bool selected)
{
	struct proc *pr = proc_slot(r);
	struct proc_stat st = {};
	struct rw_error err = {};
	char exe[64];

	if (!pr) {
		fprintf(stderr, "retwatch: out of memory\n");
		return -1;
	}
	pr->pid = pid;
	pr->start = proc_stat__read(pid, &st) ? 0 : st.start;
	pr->pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pr->pidfd < 0) {
		if (errno == ESRCH && !selected)
			fprintf(stderr, "retwatch: no process with PID %d\n", pid);
		else if (errno != ESRCH && !refusal_said(r, pid, selected))
			fprintf(stderr, "retwatch: cannot watch process %d: %s\n", pid,
				strerror(errno));
		return -1;
	}
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	pr->libs = shlib_procs__new(pid, (const char *const *)args->patterns, args->npatterns,
				    args->threshold_ns);
	if (!pr->libs) {
		fprintf(stderr, "retwatch: out of memory\n");
		close(pr->pidfd);
		return -1;
	}
	if ((selected || !check_exe(r, pid, exe, args)) &&
	    (pr->target = tracer__add(r->t, pid, exe, args->exe_patterns, args->nexe_patterns,
				      args->threshold_ns, &err)) == NULL &&
	    !refusal_said(r, pid, selected))
		fprintf(stderr, "retwatch: process %d%s: %s\n", pid,
			selected ? " (not traced)" : "", err.msg);
	if (!pr->target) {
		shlib_procs__free(pr->libs);
		close(pr->pidfd);
		return -1;
	}
	r->nprocs++;
	if (results__add(r->results, pr->target, NULL, NULL)) {
		tracer__remove(r->t, pr->target);
		pr->target = NULL;
		fprintf(stderr, "retwatch: out of memory\n");
		return -1;
	}
	r->nlive++;
	/* its files opened now: a slow call read after it exited is still named */
	if (r->stacks)
		symbolizer__watch(r->sym, pid);
	if (selected)
		fprintf(stderr, "retwatch: process %d traced too\n", pid);
	/* at the start, every pattern of a process --pid names must match */
	return update_libs(r, pr, !selected) ? -1 : 0;
}

/* Whether pid, started at start, is traced now or was, or was left out. */
static bool proc_known(const struct trace_run *r, pid_t pid, uint64_t start)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid && r->procs[i].start == start)
			return true;
	for (size_t i = 0; i < r->nrefused; i++)
		if (r->refused[i].pid == pid && r->refused[i].start == start)
			return true;
	return false;
}

/* A selected process that could not be traced: not asked again. */
static void refuse(struct trace_run *r, pid_t pid, uint64_t start)
{
	if (r->nrefused == r->refused_cap) {
		size_t cap = r->refused_cap * 2 + 16;
		void *more = realloc(r->refused, cap * sizeof(*r->refused));

		if (!more)
			return;
		r->refused = more;
		r->refused_cap = cap;
	}
	r->refused[r->nrefused].pid = pid;
	r->refused[r->nrefused].start = start;
	r->nrefused++;
}

/* Whether a process not traced yet is one --follow, --comm or --cgroup selects. */
static bool proc_selected(const struct trace_args *args, pid_t pid, const struct proc_stat *st)
{
	char cg[4096];

	for (size_t i = 0; i < args->ncomms; i++)
		if (!strcmp(st->comm, args->comms[i]))
			return true;
	if (args->ncgroups && !proctree__cgroup(pid, cg, sizeof(cg)))
		for (size_t i = 0; i < args->ncgroups; i++)
			if (!strcmp(cg, args->cgroups[i]))
				return true;
	return args->follow && proctree__descends(pid, args->pids, args->npids);
}

struct scan_ctx {
	struct trace_run *r;
	const struct trace_args *args;
};

static int scan_one(pid_t pid, void *data)
{
	struct scan_ctx *sc = data;
	struct proc_stat st;

	if (pid == getpid() || proc_stat__read(pid, &st) || proc_known(sc->r, pid, st.start) ||
	    !proc_selected(sc->args, pid, &st))
		return 0;
	if (add_proc(sc->r, pid, sc->args, true))
		refuse(sc->r, pid, st.start);
	return 0;
}

struct kids_ctx {
	pid_t parent;
	dev_t dev;
	ino_t ino;
	size_t n;
};

static int count_kid(pid_t pid, void *data)
{
	struct kids_ctx *k = data;
	struct proc_stat st;
	struct stat exe;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (!proc_stat__read(pid, &st) && st.ppid == k->parent && !stat(path, &exe) &&
	    exe.st_dev == k->dev && exe.st_ino == k->ino)
		k->n++;
	return 0;
}

/*
 * A server that does its work in children running its own executable (a
 * pre-fork server: PostgreSQL, nginx, Apache) counts nothing itself: say
 * so, and what traces them, rather than show a silent 0.
 */
static void hint_children(const struct trace_args *args)
{
	for (size_t i = 0; i < args->npids && !args->follow; i++) {
		struct kids_ctx k = { .parent = args->pids[i] };
		struct stat exe;
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/exe", k.parent);
		if (stat(path, &exe))
			continue;
		k.dev = exe.st_dev;
		k.ino = exe.st_ino;
		proctree__each(count_kid, &k);
		if (k.n)
			fprintf(stderr,
				"retwatch: process %d has %zu child process%s running its executable "
				"(a pre-fork server's workers?), not traced: --follow traces them "
				"too\n",
				k.parent, k.n, k.n == 1 ? "" : "es");
	}
}

/* The processes --follow, --comm or --cgroup select that are not traced yet: traced. */
static void scan_procs(struct trace_run *r, const struct trace_args *args)
{
	struct scan_ctx sc = { r, args };

	if (args->follow || args->ncomms || args->ncgroups)
		proctree__each(scan_one, &sc);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || !getenv("RETWATCH_DEBUG"))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int parse_pid(const char *s, struct trace_args *a)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || !*s || v <= 0 || v > 0x3fffffff) {
		fprintf(stderr, "retwatch: invalid --pid '%s': give a process ID\n", s);
		return -EINVAL;
	}
	if (a->npids == MAX_PIDS) {
		fprintf(stderr, "retwatch: at most %d --pid options\n", MAX_PIDS);
		return -EINVAL;
	}
	a->pids[a->npids++] = v;
	return 0;
}

#define STR_(x) #x
#define STR(x) STR_(x)

/* --redact NAME, --no-redact: which arguments' values are shown (callargs.h). */
static int parse_redact(int c, const char *arg)
{
	if (c == 'N') {
		call_args__redact_defaults(false);
		return 0;
	}
	if (call_args__redact_add(arg)) {
		fprintf(stderr,
			"retwatch: invalid --redact '%s': give a parameter name (at most %d of "
			"them)\n",
			arg, CALLARGS_MAX_REDACT);
		return -EINVAL;
	}
	return 0;
}

/* A whole number from 0 to max for option opt; else says what to give. */
static int parse_count(const char *opt, const char *arg, unsigned long max, const char *give,
		       unsigned long *ret)
{
	char *end;

	errno = 0;
	*ret = strtoul(arg, &end, 10);
	if (errno || *end || !*arg || arg[0] == '-' || *ret > max) {
		fprintf(stderr, "retwatch: invalid %s '%s': give %s\n", opt, arg, give);
		return -EINVAL;
	}
	return 0;
}

static int parse_option(int c, const char *arg, struct trace_args *a)
{
	switch (c) {
	case 'p': return parse_pid(arg, a);
	case 'd': return parse_seconds("--duration", arg, &a->duration);
	case 'i': return parse_seconds("--interval", arg, &a->interval);
	case 't':
		if (latency__parse_duration(arg, &a->threshold_ns) || !a->threshold_ns) {
			fprintf(stderr,
				"retwatch: invalid --threshold '%s': give a duration such as 10ms, "
				"250us or 1.5s\n",
				arg);
			return -EINVAL;
		}
		return 0;
	case 's': {
		unsigned long v;

		if (parse_count("--slow-calls-per-second", arg, UINT32_MAX,
				"a number (0: no limit)", &v))
			return -EINVAL;
		a->slow_per_sec = (uint32_t)v;
		return 0;
	}
	case 'f': a->follow = true; return 0;
	case 'c':
	case 'g': {
		const char **list = c == 'c' ? a->comms : a->cgroups;
		size_t *n = c == 'c' ? &a->ncomms : &a->ncgroups;

		if (*n == MAX_SELECTORS || !*arg ||
		    (c == 'c' && strlen(arg) >= PROCTREE_COMM_LEN) || (c == 'g' && arg[0] != '/')) {
			fprintf(stderr, "retwatch: invalid %s '%s': give %s, at most %d times\n",
				c == 'c' ? "--comm" : "--cgroup", arg,
				c == 'c' ? "a process name of at most 15 bytes"
					 : "a cgroup path starting with /",
				MAX_SELECTORS);
			return -EINVAL;
		}
		list[(*n)++] = arg;
		return 0;
	}
	case 'j': a->json = true; return 0;
	case 'S': {
		unsigned long v;

		if (parse_count("--slowest", arg, SLOWEST_MAX_KEEP,
				"a number of calls from 0 to " STR(SLOWEST_MAX_KEEP), &v))
			return -EINVAL;
		a->slowest = (long)v;
		return 0;
	}
	case 'r': a->raw = true; return 0;
	case 'A': a->args = true; return 0;
	case 'R':
	case 'N': return parse_redact(c, arg);
	case 'e': a->entry_at_start = true; return 0;
	case 'D': return cmd_debug_dir(arg) ? -EINVAL : 0;
	case 'o':
		if (calibrate__parse_overhead(arg, &a->max_overhead)) {
			fprintf(stderr,
				"retwatch: invalid --max-overhead '%s': give a share of one CPU "
				"such as 2%%, 0.5%% or 0 (no limit)\n",
				arg);
			return -EINVAL;
		}
		return 0;
	case 'a':
		if (tracer_attach_mode__parse(arg, &a->attach_mode)) {
			fprintf(stderr,
				"retwatch: invalid --attach '%s': give auto, uprobe_multi or "
				"perf_event\n",
				arg);
			return -EINVAL;
		}
		return 0;
	default: trace_usage(stderr); return -EINVAL;
	}
}

/* 0: go on; 1: done (--help); 2: a usage error. */
static int parse_args(int argc, char **argv, struct trace_args *a)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "follow", no_argument, NULL, 'f' },
		{ "comm", required_argument, NULL, 'c' },
		{ "cgroup", required_argument, NULL, 'g' },
		{ "duration", required_argument, NULL, 'd' },
		{ "threshold", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' },
		{ "slow-calls-per-second", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "slowest", required_argument, NULL, 'S' },
		{ "raw", no_argument, NULL, 'r' },
		{ "args", no_argument, NULL, 'A' },
		{ "redact", required_argument, NULL, 'R' },
		{ "no-redact", no_argument, NULL, 'N' },
		{ "max-overhead", required_argument, NULL, 'o' },
		{ "attach", required_argument, NULL, 'a' },
		{ "entry-at-start", no_argument, NULL, 'e' },
		{ "debug-dir", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "+p:fc:g:d:t:i:s:jS:rAR:No:a:eD:h", opts, NULL)) !=
	       -1) {
		if (c == 'h') {
			trace_usage(stdout);
			return 1;
		}
		if (parse_option(c, optarg, a))
			return 2;
	}
	if ((!a->npids && !a->ncomms && !a->ncgroups) || optind >= argc) {
		fprintf(stderr, "retwatch: trace needs --pid (or --comm, --cgroup) and at least "
				"one function name or glob\n");
		trace_usage(stderr);
		return 2;
	}
	if (a->follow && !a->npids) {
		fprintf(stderr, "retwatch: --follow follows the processes --pid names\n");
		trace_usage(stderr);
		return 2;
	}
	a->patterns = argv + optind;
	a->npatterns = argc - optind;
	a->exe_patterns = calloc(a->npatterns, sizeof(*a->exe_patterns));
	if (!a->exe_patterns) {
		fprintf(stderr, "retwatch: out of memory\n");
		return 2;
	}
	for (size_t i = 0; i < a->npatterns; i++) {
		char lib[SHLIB_MAX_NAME];
		const char *func;

		if (!binary_pattern__library(a->patterns[i], lib, sizeof(lib), &func))
			a->exe_patterns[a->nexe_patterns++] = a->patterns[i];
	}
	return 0;
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
#if defined(__aarch64__)
	return; /* arm64 code's entry probes are at the first byte (binanalyze.c) */
#endif
	for (int k = PROBE_ENTRY_STEPPED + 1; k < PROBE_ENTRY__N; k++)
		if (!(kinds & (1U << k)))
			fprintf(stderr,
				"retwatch: this kernel steps a probe on a %s out of line (measured: "
				"not half the stepped kind's bias): entry probes stay at the first "
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
 * The patterns checked in each --pid's executable before the calibration
 * (half a second): a typo is said at once. A process that cannot be read is
 * left to add_proc, which says why.
 */
static int preflight(struct trace_run *r, const struct trace_args *args)
{
	for (size_t i = 0; args->nexe_patterns && i < args->npids; i++) {
		struct rw_error err = {};
		char exe[64];

		snprintf(exe, sizeof(exe), "/proc/%d/exe", args->pids[i]);
		if (check_exe(r, args->pids[i], exe, args))
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
	tracer__set_event_fn(r->t, on_slow_call, r);
	for (size_t i = 0; i < args->npids; i++)
		if (add_proc(r, args->pids[i], args, false))
			return -1;
	scan_procs(r, args);
	hint_children(args);
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
		check_exits(r);
		now = clock__mono_ns();
		if (args->duration && now - start >= (uint64_t)(args->duration * 1e9))
			break;
		tracer__tick(r->t);
		if (now >= next_scan) {
			for (size_t p = 0; p < r->nprocs; p++)
				if (r->procs[p].target)
					say_unprobed(r, &r->procs[p]);
			scan_procs(r, args);
			next_scan = now + SCAN_EVERY_NS;
		}
		if (now >= next_libs) {
			for (size_t p = 0; p < r->nprocs; p++)
				if (r->procs[p].target)
					update_libs(r, &r->procs[p], false);
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
				print_table(r, false);
			next_report = now + interval_ns;
		}
	}
}

static void trace_report(struct trace_run *r, const struct trace_args *args)
{
	struct tracer_counters c;

	/* slow calls still in the ring buffer (the tracees still run), then
	 * the processes that just exited */
	drain_events(r);
	check_exits(r);
	tracer__counters(r->t, &c);
	if (r->json) {
		print_json(r, &c);
	} else {
		print_table(r, true);
		print_slowest(r);
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
				   .max_overhead = CALIBRATE_DEFAULT_MAX_OVERHEAD };
	struct trace_run r = {};
	int ret = parse_args(argc, argv, &args);

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

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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <cjson/cJSON.h>

#include "../../bpf/retwatch.h"
#include "cmd.h"
#include "latency.h"
#include "symbolize.h"
#include "tracer.h"

#define MAX_PIDS 64
/* In-flight frames untouched this long are purged (a backstop). */
#define SWEEP_AGE_NS (60ULL * 1000000000ULL)
#define SWEEP_EVERY_NS (5ULL * 1000000000ULL)

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

/* One output row: a function, over every process that has it. */
struct row {
	const char *name;
	const char *mode;
	const char *reason;
	size_t nreturns;
	struct latency done; /* from processes that exited */
	struct latency now;  /* done plus the live processes, at the last report */
};

struct proc {
	pid_t pid;
	int pidfd;
	struct tracer_target *target;
	size_t *rows; /* row of each of the target's functions */
};

struct trace_run {
	struct tracer *t;
	struct symbolizer *sym;
	struct proc procs[MAX_PIDS];
	size_t nprocs, nlive;
	struct row *rows;
	size_t nrows;
	bool json;
	uint64_t slow_calls;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void trace_usage(FILE *f)
{
	fprintf(f,
		"usage: retwatch trace --pid PID [--pid PID...] [--duration SECONDS]\n"
		"                      [--threshold DURATION] [--interval SECONDS] [--json] PATTERN...\n"
		"\n"
		"Measures every call of the functions matching PATTERN (names or globs, as\n"
		"`retwatch inspect` takes them) in the given processes, until the duration\n"
		"ends, SIGINT or SIGTERM, or every process has exited.\n"
		"  --pid PID             a process to trace (up to %d)\n"
		"  --duration SECONDS    stop after this long (default: until interrupted)\n"
		"  --threshold DURATION  print each call at least this slow, with its stack\n"
		"                        (e.g. 10ms, 250us)\n"
		"  --interval SECONDS    print the table every SECONDS as well as at the end\n"
		"  --json                print one JSON object at the end\n"
		"  --attach MODE         auto (default), uprobe_multi (Linux 6.6+, one link per\n"
		"                        file) or perf_event (one uprobe per offset)\n",
		MAX_PIDS);
}

static size_t row_for(struct trace_run *r, const struct func_info *fi)
{
	struct row *rows;

	for (size_t i = 0; i < r->nrows; i++)
		if (!strcmp(r->rows[i].name, fi->name))
			return i;
	rows = realloc(r->rows, (r->nrows + 1) * sizeof(*rows));
	if (!rows) {
		fprintf(stderr, "retwatch: out of memory\n");
		exit(1);
	}
	r->rows = rows;
	memset(&rows[r->nrows], 0, sizeof(rows[0]));
	rows[r->nrows].name = strdup(fi->name);
	rows[r->nrows].mode = func_mode__str(fi->mode);
	rows[r->nrows].reason = fi->reason ? strdup(fi->reason) : NULL;
	rows[r->nrows].nreturns = fi->nreturns;
	return r->nrows++;
}

static const char *fn_name(struct trace_run *r, pid_t pid, uint32_t fn_id)
{
	for (size_t p = 0; p < r->nprocs; p++) {
		struct tracer_target *tt = r->procs[p].target;

		if (!tt || r->procs[p].pid != pid)
			continue;
		for (size_t i = 0; i < tracer_target__nfuncs(tt); i++)
			if (tracer_target__func(tt, i)->fn_id == fn_id)
				return tracer_target__func(tt, i)->info->name;
	}
	return "?";
}

static void on_slow_call(const struct tracer_event *ev, void *ctx)
{
	struct trace_run *r = ctx;
	char dur[LATENCY_FMT_LEN], frame[512];

	r->slow_calls++;
	if (r->json)
		return;
	printf("slow call: %s took %s (pid %d, tid %d", fn_name(r, ev->pid, ev->fn_id),
	       latency__format_ns(ev->duration_ns, dur, sizeof(dur)), ev->pid, ev->tid);
	if (ev->goid)
		printf(", goroutine %" PRIu64, ev->goid);
	printf(")\n");
	for (size_t i = 0; i < ev->nstack; i++) {
		symbolizer__resolve(r->sym, ev->pid, ev->stack[i], i == 0, frame, sizeof(frame));
		printf("    %s\n", frame);
	}
	fflush(stdout);
}

/* Totals of every row: exited processes plus what the kernel holds now. */
static void collect(struct trace_run *r)
{
	struct latency l;

	for (size_t i = 0; i < r->nrows; i++)
		r->rows[i].now = r->rows[i].done;
	for (size_t p = 0; p < r->nprocs; p++) {
		struct proc *pr = &r->procs[p];

		if (!pr->target)
			continue;
		for (size_t i = 0; i < tracer_target__nfuncs(pr->target); i++)
			if (!tracer_target__read(r->t, pr->target, i, &l))
				latency__merge(&r->rows[pr->rows[i]].now, &l);
	}
}

static void print_table(struct trace_run *r, bool final)
{
	char p50[LATENCY_FMT_LEN], p95[LATENCY_FMT_LEN], p99[LATENCY_FMT_LEN], max[LATENCY_FMT_LEN];
	time_t t = time(NULL);
	struct tm tm;

	localtime_r(&t, &tm);
	printf("\n%s at %02d:%02d:%02d\n", final ? "Final" : "Interval", tm.tm_hour, tm.tm_min,
	       tm.tm_sec);
	printf("%-40s %10s %10s %10s %10s %10s %8s\n", "FUNCTION", "CALLS", "P50", "P95", "P99",
	       "MAX", "ORPHANS");
	for (size_t i = 0; i < r->nrows; i++) {
		const struct row *w = &r->rows[i];
		const struct latency *l = &w->now;

		if (w->reason && !strcmp(w->mode, "entry-only")) {
			printf("%-40s %10" PRIu64 " %10s %10s %10s %10s %8" PRIu64 "\n", w->name,
			       l->calls, "-", "-", "-", "-", l->orphans);
			continue;
		}
		printf("%-40s %10" PRIu64 " %10s %10s %10s %10s %8" PRIu64 "\n", w->name, l->calls,
		       latency__format_ns(latency__percentile(l, 0.50), p50, sizeof(p50)),
		       latency__format_ns(latency__percentile(l, 0.95), p95, sizeof(p95)),
		       latency__format_ns(latency__percentile(l, 0.99), p99, sizeof(p99)),
		       latency__format_ns(l->max_ns, max, sizeof(max)), l->orphans);
	}
	for (size_t i = 0; i < r->nrows; i++) {
		const struct row *w = &r->rows[i];

		if (!strcmp(w->mode, "entry-only")) {
			printf("\n%s: calls counted at entry only, no duration: %s\n", w->name,
			       w->reason ? w->reason : "no return instruction found");
			continue;
		}
		if (!w->now.calls)
			continue;
		printf("\n%s\n", w->name);
		latency__print_log2(stdout, &w->now);
	}
	fflush(stdout);
}

static cJSON *json_u64(uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return cJSON_CreateRaw(buf);
}

static void print_json(struct trace_run *r, uint64_t lost)
{
	cJSON *root = cJSON_CreateObject(), *funcs = cJSON_CreateArray();
	char *text;

	for (size_t i = 0; i < r->nrows; i++) {
		const struct row *w = &r->rows[i];
		const struct latency *l = &w->now;
		bool durations = strcmp(w->mode, "entry-only") != 0;
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "name", w->name);
		cJSON_AddStringToObject(o, "mode", w->mode);
		cJSON_AddItemToObject(o, "calls", json_u64(l->calls));
		cJSON_AddItemToObject(o, "min_ns", json_u64(durations ? l->min_ns : 0));
		cJSON_AddItemToObject(o, "p50_ns",
				      json_u64(durations ? latency__percentile(l, 0.50) : 0));
		cJSON_AddItemToObject(o, "p95_ns",
				      json_u64(durations ? latency__percentile(l, 0.95) : 0));
		cJSON_AddItemToObject(o, "p99_ns",
				      json_u64(durations ? latency__percentile(l, 0.99) : 0));
		cJSON_AddItemToObject(o, "max_ns", json_u64(durations ? l->max_ns : 0));
		cJSON_AddItemToObject(o, "orphans", json_u64(l->orphans));
		cJSON_AddItemToObject(o, "returns", json_u64(w->nreturns));
		cJSON_AddItemToObject(o, "reason",
				      w->reason && !durations ? cJSON_CreateString(w->reason)
							      : cJSON_CreateNull());
		cJSON_AddItemToArray(funcs, o);
	}
	cJSON_AddItemToObject(root, "functions", funcs);
	cJSON_AddItemToObject(root, "slow_calls", json_u64(r->slow_calls));
	cJSON_AddItemToObject(root, "lost_events", json_u64(lost));
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (text)
		puts(text);
	free(text);
	fflush(stdout);
}

/* The process is gone: keep what it measured, count what it left in flight. */
static void proc_exited(struct trace_run *r, struct proc *pr)
{
	struct latency l;

	tracer__reap(r->t, pr->target);
	for (size_t i = 0; i < tracer_target__nfuncs(pr->target); i++)
		if (!tracer_target__read(r->t, pr->target, i, &l))
			latency__merge(&r->rows[pr->rows[i]].done, &l);
	tracer__remove(r->t, pr->target);
	symbolizer__forget(r->sym, pr->pid);
	pr->target = NULL;
	close(pr->pidfd);
	pr->pidfd = -1;
	r->nlive--;
	fprintf(stderr, "retwatch: process %d exited; %zu still traced\n", pr->pid, r->nlive);
}

static void check_exits(struct trace_run *r)
{
	for (size_t p = 0; p < r->nprocs; p++) {
		struct pollfd pfd = { .fd = r->procs[p].pidfd, .events = POLLIN };

		if (r->procs[p].target && poll(&pfd, 1, 0) > 0)
			proc_exited(r, &r->procs[p]);
	}
}

static int parse_seconds(const char *opt, const char *s, double *ret)
{
	char *end;

	errno = 0;
	*ret = strtod(s, &end);
	if (errno || end == s || *end || !(*ret > 0) || *ret > 1e9) {
		fprintf(stderr, "retwatch: invalid %s '%s': give a positive number of seconds\n",
			opt, s);
		return -EINVAL;
	}
	return 0;
}

static int add_proc(struct trace_run *r, pid_t pid, char **patterns, size_t npatterns,
		    uint64_t threshold_ns)
{
	struct proc *pr = &r->procs[r->nprocs];
	struct rw_error err = {};
	char exe[64];

	pr->pid = pid;
	pr->pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pr->pidfd < 0) {
		if (errno == ESRCH)
			fprintf(stderr, "retwatch: no process with PID %d\n", pid);
		else
			fprintf(stderr, "retwatch: cannot watch process %d: %s\n", pid,
				strerror(errno));
		return -1;
	}
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	pr->target = tracer__add(r->t, pid, exe, (const char *const *)patterns, npatterns,
				 threshold_ns, &err);
	if (!pr->target) {
		fprintf(stderr, "retwatch: process %d: %s\n", pid, err.msg);
		close(pr->pidfd);
		return -1;
	}
	pr->rows = calloc(tracer_target__nfuncs(pr->target) + 1, sizeof(*pr->rows));
	if (!pr->rows) {
		fprintf(stderr, "retwatch: out of memory\n");
		return -1;
	}
	for (size_t i = 0; i < tracer_target__nfuncs(pr->target); i++)
		pr->rows[i] = row_for(r, tracer_target__func(pr->target, i)->info);
	r->nprocs++;
	r->nlive++;
	return 0;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || !getenv("RETWATCH_DEBUG"))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

int cmd_trace(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "threshold", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ "attach", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	pid_t pids[MAX_PIDS];
	size_t npids = 0;
	double duration = 0, interval = 0;
	uint64_t threshold_ns = 0, stats[RW_STAT__MAX] = { 0 }, start, next_report, next_sweep;
	struct tracer_opts topts = {};
	struct trace_run r = {};
	struct rw_error err = {};
	struct sigaction sa = { .sa_handler = on_signal };
	int c, ret = 1;

	while ((c = getopt_long(argc, argv, "+p:d:t:i:ja:h", opts, NULL)) != -1) {
		char *end;
		long v;

		switch (c) {
		case 'p':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || *end || !*optarg || v <= 0 || v > 0x3fffffff) {
				fprintf(stderr, "retwatch: invalid --pid '%s': give a process ID\n",
					optarg);
				return 2;
			}
			if (npids == MAX_PIDS) {
				fprintf(stderr, "retwatch: at most %d --pid options\n", MAX_PIDS);
				return 2;
			}
			pids[npids++] = v;
			break;
		case 'd':
			if (parse_seconds("--duration", optarg, &duration))
				return 2;
			break;
		case 'i':
			if (parse_seconds("--interval", optarg, &interval))
				return 2;
			break;
		case 't':
			if (latency__parse_duration(optarg, &threshold_ns) || !threshold_ns) {
				fprintf(stderr,
					"retwatch: invalid --threshold '%s': give a duration such as "
					"10ms, 250us or 1.5s\n",
					optarg);
				return 2;
			}
			break;
		case 'j': r.json = true; break;
		case 'a':
			if (tracer_attach_mode__parse(optarg, &topts.attach_mode)) {
				fprintf(stderr,
					"retwatch: invalid --attach '%s': give auto, uprobe_multi or "
					"perf_event\n",
					optarg);
				return 2;
			}
			break;
		case 'h': trace_usage(stdout); return 0;
		default: trace_usage(stderr); return 2;
		}
	}
	if (!npids || optind >= argc) {
		fprintf(stderr, "retwatch: trace needs --pid and at least one function name or "
				"glob\n");
		trace_usage(stderr);
		return 2;
	}
	libbpf_set_print(libbpf_print);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	topts.cache = binary_cache__new(16);
	r.t = tracer__new(&topts, &err);
	if (!r.t) {
		fprintf(stderr, "retwatch: %s\n", err.msg);
		goto cleanup;
	}
	r.sym = symbolizer__new(topts.cache);
	tracer__set_event_fn(r.t, on_slow_call, &r);
	for (size_t i = 0; i < npids; i++)
		if (add_proc(&r, pids[i], argv + optind, argc - optind, threshold_ns))
			goto cleanup;
	fprintf(stderr, "retwatch: tracing %zu function%s in %zu process%s (%s)%s\n", r.nrows,
		r.nrows == 1 ? "" : "s", r.nprocs, r.nprocs == 1 ? "" : "es",
		tracer__attach_mode(r.t), r.json ? "" : "; Ctrl-C to stop");

	start = now_ns();
	next_report = interval ? start + (uint64_t)(interval * 1e9) : UINT64_MAX;
	next_sweep = start + SWEEP_EVERY_NS;
	while (!exiting && r.nlive) {
		uint64_t now;
		int e = tracer__poll(r.t, 100);

		if (e < 0 && e != -EINTR) {
			fprintf(stderr, "retwatch: failed to read slow calls: %s\n", strerror(-e));
			break;
		}
		check_exits(&r);
		now = now_ns();
		if (duration && now - start >= (uint64_t)(duration * 1e9))
			break;
		if (now >= next_sweep) {
			tracer__sweep(r.t, SWEEP_AGE_NS);
			next_sweep = now + SWEEP_EVERY_NS;
		}
		if (now >= next_report) {
			if (!r.json) {
				collect(&r);
				print_table(&r, false);
			}
			next_report = now + (uint64_t)(interval * 1e9);
		}
	}
	/* slow calls still in the ring buffer, then the processes that just exited */
	tracer__poll(r.t, 0);
	check_exits(&r);
	collect(&r);
	tracer__stats(r.t, stats, RW_STAT__MAX);
	if (r.json) {
		print_json(&r, stats[RW_STAT_RINGBUF_FULL]);
	} else {
		print_table(&r, true);
		if (r.slow_calls || threshold_ns)
			printf("\n%" PRIu64 " slow call%s\n", r.slow_calls,
			       r.slow_calls == 1 ? "" : "s");
		if (stats[RW_STAT_RINGBUF_FULL])
			printf("%" PRIu64 " slow-call events lost (ring buffer full)\n",
			       stats[RW_STAT_RINGBUF_FULL]);
	}
	if (getenv("RETWATCH_DEBUG"))
		for (unsigned int s = 0; s < RW_STAT__MAX; s++)
			fprintf(stderr, "retwatch: stat %s %" PRIu64 "\n", tracer_stat__str(s),
				stats[s]);
	ret = 0;
cleanup:
	for (size_t p = 0; p < r.nprocs; p++) {
		if (r.procs[p].pidfd >= 0)
			close(r.procs[p].pidfd);
		free(r.procs[p].rows);
	}
	tracer__free(r.t);
	symbolizer__free(r.sym);
	binary_cache__free(topts.cache);
	for (size_t i = 0; i < r.nrows; i++) {
		free((char *)r.rows[i].name);
		free((char *)r.rows[i].reason);
	}
	free(r.rows);
	return ret;
}

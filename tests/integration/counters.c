// SPDX-License-Identifier: MIT
/*
 * Drives the tracer's API where `retwatch trace` does not reach it, for
 * test_counters.py: tracer__counters, tracer__tick and tracer__reap. Built by
 * the test against the layers' archives beside $RETWATCH; needs root.
 *
 *   counters [--keep N] PID EXE PATTERN...
 *       traces PID (with --keep: sends the candidates for each function's N
 *       slowest, tracer_target__keep_slowest, from a floor of 0); prints "tracing" on stderr, then answers commands read
 *       from stdin, one a line:
 *         inflight  prints tracer__inflight
 *         report    prints the JSON report (below)
 *         reap      PID has exited: calls tracer__reap, prints the JSON
 *                   report with "reaped" (what tracer__reap returned) and
 *                   "inflight_before" (tracer__inflight before it), exits
 *       and calls tracer__tick on every turn of its loop (100 ms).
 *   counters --self SECONDS
 *       traces its own function held_call, called once by a thread that
 *       stays in it; calls tracer__tick every 100 ms until it drops
 *       something or SECONDS pass, then lets the call return and prints the
 *       JSON report with "swept_after_ns" (since the call was entered, 0:
 *       never) and "tick_dropped" (what that tick returned).
 *
 * The JSON report: {"counters": {"unmeasured": {NAME: N}, "purged": N,
 * "swept": N, "lost_events": N, "slow_limited": N, "all": {NAME: N}}, "ticks":
 * (sum of tracer__tick's returns before the report), "inflight": N, "functions": {NAME: {"calls":
 * N, "orphans": N}}, ...}
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trace/tracer.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void print_counts(const char *key, const struct tracer_count *c, size_t n)
{
	printf("\"%s\":{", key);
	for (size_t i = 0; i < n; i++)
		printf("%s\"%s\":%" PRIu64, i ? "," : "", c[i].name ? c[i].name : "(null)", c[i].n);
	printf("}");
}

/* The report, without its closing brace: the caller may add fields. */
static int print_report(struct tracer *t, struct tracer_target *tt, int64_t ticks)
{
	struct tracer_counters c;
	int e;

	e = tracer__counters(t, &c);
	if (e) {
		fprintf(stderr, "counters: tracer__counters: %s\n", strerror(-e));
		return e;
	}
	printf("{\"counters\":{");
	print_counts("unmeasured", c.unmeasured, c.nunmeasured);
	printf(",\"purged\":%" PRIu64 ",\"swept\":%" PRIu64 ",\"lost_events\":%" PRIu64
	       ",\"slow_limited\":%" PRIu64 ",",
	       c.purged, c.swept, c.lost_events, c.slow_limited);
	print_counts("all", c.all, c.nall);
	printf("},\"ticks\":%" PRId64 ",\"inflight\":%" PRId64 ",\"functions\":{", ticks,
	       tracer__inflight(t));
	for (size_t i = 0; i < tracer_target__nfuncs(tt); i++) {
		const struct tracer_func *f = tracer_target__func(tt, i);
		struct latency l = { 0 };

		tracer_target__read(t, tt, i, &l);
		printf("%s\"%s\":{\"calls\":%" PRIu64 ",\"orphans\":%" PRIu64 ",\"lost\":%" PRIu64
		       "}",
		       i ? "," : "", f->info->name, (uint64_t)l.calls, (uint64_t)l.orphans,
		       (uint64_t)l.lost);
	}
	printf("}");
	return 0;
}

static int run_target(struct tracer *t, struct tracer_target *tt)
{
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	char line[64];
	int64_t ticks = 0;
	int e;

	fprintf(stderr, "tracing\n");
	for (;;) {
		e = poll(&pfd, 1, 100);
		if (e < 0 && errno != EINTR)
			return -errno;
		tracer__poll(t, 0);
		e = tracer__tick(t);
		if (e < 0)
			return e;
		ticks += e;
		if (!(pfd.revents & (POLLIN | POLLHUP)))
			continue;
		if (!fgets(line, sizeof(line), stdin))
			return -EPIPE;
		if (!strcmp(line, "inflight\n")) {
			printf("%" PRId64 "\n", tracer__inflight(t));
		} else if (!strcmp(line, "report\n")) {
			e = print_report(t, tt, ticks);
			if (e)
				return e;
			printf("}\n");
		} else if (!strcmp(line, "reap\n")) {
			int64_t before = tracer__inflight(t);
			int reaped = tracer__reap(t, tt);

			e = print_report(t, tt, ticks);
			if (e)
				return e;
			printf(",\"inflight_before\":%" PRId64 ",\"reaped\":%d}\n", before, reaped);
			return 0;
		} else {
			fprintf(stderr, "counters: unknown command %s", line);
			return -EINVAL;
		}
		fflush(stdout);
	}
}

static int held_fds[2] = { -1, -1 };
static volatile uint64_t held_since;

/* Stays in flight until a byte arrives on held_fds[0]. */
__attribute__((noinline, used)) int held_call(int fd)
{
	char c;

	held_since = now_ns();
	return (int)read(fd, &c, 1);
}

static void *held_thread(void *arg)
{
	(void)arg;
	held_call(held_fds[0]);
	return NULL;
}

static int run_self(struct tracer *t, struct tracer_target *tt, double seconds)
{
	uint64_t start = now_ns(), swept_at = 0;
	pthread_t thread;
	int dropped = 0, e;

	if (pipe(held_fds) || pthread_create(&thread, NULL, held_thread, NULL))
		return -errno;
	while (!held_since)
		usleep(1000);
	while (now_ns() - start < (uint64_t)(seconds * 1e9)) {
		dropped = tracer__tick(t);
		if (dropped) {
			swept_at = now_ns();
			break;
		}
		usleep(100 * 1000);
	}
	/* its RET now finds no frame */
	if (write(held_fds[1], "x", 1) != 1)
		return -errno;
	pthread_join(thread, NULL);
	e = print_report(t, tt, dropped);
	if (e)
		return e;
	printf(",\"tick_dropped\":%d,\"swept_after_ns\":%" PRIu64 "}\n", dropped,
	       swept_at ? swept_at - held_since : 0);
	close(held_fds[0]);
	close(held_fds[1]);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const self_patterns[] = { "held_call" };
	/* --entry-at-start first: the entry probes at the first byte (tracer_opts) */
	struct tracer_opts opts = { .entry_at_start = argc > 1 &&
						      !strcmp(argv[1], "--entry-at-start") };
	struct rw_error err = { 0 };
	struct tracer_target *tt = NULL;
	struct tracer *t = NULL;
	unsigned int keep = 0;
	int e = -EINVAL;
	bool self;

	argc -= opts.entry_at_start;
	argv += opts.entry_at_start;
	if (argc > 2 && !strcmp(argv[1], "--keep")) {
		keep = (unsigned int)atoi(argv[2]);
		argc -= 2;
		argv += 2;
	}
	self = (argc == 3 || argc == 4) && !strcmp(argv[1], "--self");
	/* --self SECONDS AGE: tracer__tick sweeps calls AGE seconds untouched */
	if (self && argc == 4)
		opts.sweep_age_ns = (uint64_t)(atof(argv[3]) * 1e9);
	if (!self && argc < 4) {
		fprintf(stderr,
			"usage: counters [--entry-at-start] [--keep N] PID EXE PATTERN... | "
			"counters "
			"--self SECONDS [SWEEP_AGE_SECONDS]\n");
		return 2;
	}
	t = tracer__new(&opts, &err);
	if (!t) {
		fprintf(stderr, "counters: %s\n", err.msg);
		return 1;
	}
	if (self)
		tt = tracer__add(t, getpid(), "/proc/self/exe", self_patterns, 1, 0, &err);
	else
		tt = tracer__add(t, atoi(argv[1]), argv[2], (const char *const *)argv + 3, argc - 3,
				 0, &err);
	if (!tt) {
		fprintf(stderr, "counters: %s\n", err.msg);
		goto out;
	}
	for (size_t i = 0; keep && i < tracer_target__nfuncs(tt); i++) {
		e = tracer_target__keep_slowest(t, tt, i, keep, 0, true);
		if (e) {
			fprintf(stderr, "counters: keep_slowest: %s\n", strerror(-e));
			goto out;
		}
	}
	e = self ? run_self(t, tt, atof(argv[2])) : run_target(t, tt);
	if (e)
		fprintf(stderr, "counters: %s\n", strerror(-e));
out:
	fflush(stdout);
	tracer__remove(t, tt);
	tracer__free(t);
	return e ? 1 : 0;
}

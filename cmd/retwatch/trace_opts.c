// SPDX-License-Identifier: MIT
/* retwatch trace: the command line (trace_usage, trace_parse_args). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/proctree.h"
#include "cmd.h"
#include "trace/shlib.h"
#include "trace_run.h"

static void trace_usage(FILE *f)
{
	fprintf(f,
		"usage: retwatch trace --pid PID [--pid PID...] [--follow] [--comm NAME]\n"
		"                      [--cgroup PATH] [--duration SECONDS]\n"
		"                      [--threshold DURATION] [--slow-calls-per-second N]\n"
		"                      [--interval SECONDS] [--json] [--raw] [--slowest N]\n"
		"                      [--args [--redact NAME...] [--no-redact]]\n"
		"                      [--max-overhead BUDGET] [--attach MODE]\n"
		"                      [--entry-at-start] [--returns ret|trampoline]\n"
		"                      [--debug-dir DIR...] PATTERN...\n"
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
		"  --returns MODE        trampoline (default): a call of a function that\n"
		"                        calls nothing ends at the kernel's return\n"
		"                        trampoline where that is safe (Linux 6.14+;\n"
		"                        `retwatch inspect` says which), at less cost, and\n"
		"                        every other at probes on its RETs; ret: every\n"
		"                        call ends at probes on its RETs\n"
		"  --entry-at-start      put each entry probe at the function's first byte, not\n"
		"                        on the instruction the kernel emulates a few bytes on\n"
		"                        (`retwatch inspect` shows where): to compare costs\n"
		"  --debug-dir DIR       look for a stripped file's debug file (its static\n"
		"                        functions' names) in DIR/.build-id/ and DIR/<the\n"
		"                        file's directory>/ before /usr/lib/debug; repeatable\n",
		MAX_PIDS, TRACER_SLOW_CALLS_PER_SEC, SLOWEST_MAX_KEEP, DEFAULT_SLOWEST);
}

/* --returns: ret or trampoline. */
static int parse_returns(const char *arg, struct trace_args *a)
{
	if (strcmp(arg, "ret") && strcmp(arg, "trampoline")) {
		fprintf(stderr, "retwatch: invalid --returns '%s': give ret or trampoline\n", arg);
		return -EINVAL;
	}
	a->trampoline = !strcmp(arg, "trampoline");
	return 0;
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
	case 'T': return parse_returns(arg, a);
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
int trace_parse_args(int argc, char **argv, struct trace_args *a)
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
		{ "returns", required_argument, NULL, 'T' },
		{ "debug-dir", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "+p:fc:g:d:t:i:s:jS:rAR:No:a:eT:D:h", opts, NULL)) !=
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

/* SPDX-License-Identifier: MIT */
/*
 * retwatch trace's run, shared by its parts: the command line
 * (trace_opts.c), the processes traced (trace_procs.c), what is shown
 * (trace_print.c) and the run itself (trace.c).
 */
#ifndef RETWATCH_TRACE_RUN_H
#define RETWATCH_TRACE_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/utsname.h>

#include "base/latency.h"
#include "trace/calibrate.h"
#include "trace/results.h"
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
	uint64_t unprobed_said;	      /* children uncounted, said (trace_say_unprobed) */
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
	uint64_t children_unprobed; /* trace_say_unprobed's, in all */
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
	bool trampoline;     /* --returns trampoline (tracer_opts) */
	double max_overhead; /* of one CPU per function and process; 0: no guard */
	char **patterns;
	size_t npatterns;
	const char **exe_patterns; /* those without a library part */
	size_t nexe_patterns;
};

/* trace_opts.c: the command line. */
int trace_parse_args(int argc, char **argv, struct trace_args *a);

/* trace_procs.c: the processes traced, as they come (--follow, --comm, --cgroup) and go. */
int trace_check_exe(struct trace_run *r, pid_t pid, const char *exe, const char *const *patterns,
		    size_t npatterns);
size_t trace_pid_patterns(struct trace_run *r, const char *exe, const struct trace_args *args,
			  const char **own);
int trace_update_libs(struct trace_run *r, struct proc *pr, bool first);
int trace_add_proc(struct trace_run *r, pid_t pid, const struct trace_args *args, bool selected);
void trace_say_unprobed(struct trace_run *r, struct proc *pr);
void trace_drain_events(struct trace_run *r);
void trace_check_exits(struct trace_run *r);
void trace_hint_children(const struct trace_args *args);
void trace_scan_procs(struct trace_run *r, const struct trace_args *args);

/* trace_print.c: what a run shows: slow calls as they come, the table, the
 * slowest calls, the JSON document. */
void trace_on_slow_call(const struct tracer_event *ev, void *ctx);
void trace_print_table(struct trace_run *r, bool final);
void trace_print_slowest(const struct trace_run *r);
void trace_print_json(struct trace_run *r, const struct tracer_counters *c);
uint64_t trace_shown(const struct trace_run *r, const struct results_row *w, uint64_t ns);

#endif

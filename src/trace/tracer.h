/* SPDX-License-Identifier: MIT */
/*
 * The tracing engine: uprobes at each function's entry and at every RET,
 * attached for each traced process with the kernel's per-process filter (an
 * untraced process of the same file never traps on them), a function slot
 * shared by the traced processes of a file, latency histograms kept in the
 * kernel per (function, process), slow calls sent through a ring buffer.
 */
#ifndef RETWATCH_TRACER_H
#define RETWATCH_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "analysis/binary.h"
#include "analysis/disasm.h"
#include "base/latency.h"
#include "base/rwerr.h"
#include "analysis/unwind.h"

struct tracer;
struct tracer_target;

enum tracer_attach_mode {
	TRACER_ATTACH_AUTO,	  /* uprobe_multi where the kernel has it, else perf_event */
	TRACER_ATTACH_MULTI,	  /* one uprobe_multi link per binary and program */
	TRACER_ATTACH_PERF_EVENT, /* one perf-event uprobe per offset */
};

struct tracer_opts {
	enum tracer_attach_mode attach_mode;
	struct binary_cache *cache; /* may be NULL */
	/* tracer__add leaves out patterns that match nothing (listed by
	 * tracer_target__unmatched) instead of failing, unless none matches */
	bool partial;
	/* slow-call events sent a second per function and process, on each
	 * CPU; the kernel counts the rest in struct latency.slow_dropped. 0: no
	 * limit */
	uint32_t slow_calls_per_sec;
	/*
	 * Each namespace's share (tracer__share) of what the node's traced
	 * processes draw from: goroutines and threads with traced calls in
	 * flight (the in-flight map holds TRACER_MAX_CONTEXTS), and slow-call
	 * events a second over every CPU (the ring buffer). 0: no limit.
	 */
	uint32_t share_contexts;
	uint32_t share_slow_calls_per_sec;
	/*
	 * The tenant (a share's name, as tracer__share takes it) about to
	 * trace a process not traced yet (a pod its probes select), "" for no
	 * tenant, NULL while the caller does not know the process yet. Where
	 * every process running a file is traced for a function, its probes
	 * are attached once for all of them; a process the function's tenant is
	 * about to trace, or a new one not known yet, does not stop that for a
	 * few seconds, any other process does. May be NULL: then every process
	 * running the file must be traced.
	 */
	const char *(*tenant_of)(pid_t pid, void *ctx);
	void *tenant_ctx;
	/* every entry probe at its function's first byte, not at the entry
	 * site the analysis chose (func_info.entry_site): to compare the two */
	bool entry_at_start;
	/*
	 * Time the calls of functions that may (binary__trampoline_refusal)
	 * from their entry probe to the kernel's return trampoline (a
	 * uretprobe at the entry) where this kernel allows it
	 * (tracer__kernel_trampoline_refusal), not to probes on their RETs:
	 * one trap a call, not a trap and a single step.
	 */
	bool trampoline;
	/* tracer__tick drops calls in flight untouched this long (0:
	 * TRACER_SWEEP_AGE_NS): a test's shorter age times the same sweep */
	uint64_t sweep_age_ns;
	/* tracer_target__capture_args may be asked (the kernel then holds
	 * 5 MiB of room for arguments); else it refuses */
	bool capture_args;
	/*
	 * Processes a traced process forks are counted from their first
	 * instruction, in its histograms (where its functions' probes are
	 * shared), until the caller traces them with tracer__add: a pre-fork
	 * server's short-lived workers are counted whole.
	 */
	bool follow;
	/*
	 * With follow: a process started anew (exec) in a traced process's
	 * cgroup, running its executable, is counted from its first instruction
	 * too, as if that process had forked it (a pod's selected container,
	 * where a shell runs the traced program again and again, each run gone
	 * before the caller sees it). Not for a tracer of a process and its
	 * descendants alone: an unrelated process of that cgroup would count.
	 */
	bool follow_started;
	/*
	 * Told when calls of function fn that leave through a jump through a
	 * pointer (a hook) are followed to the function target of file: its
	 * nrets RETs end them from now on; or, with error set, why they stay
	 * tail exits. May be NULL.
	 */
	void (*hook_fn)(const char *fn, const char *target, const char *file, size_t nrets,
			const char *error, void *ctx);
	void *hook_ctx;
};

/*
 * The oldest kernel the programs load on: the newest helper they call,
 * bpf_get_attach_cookie, came in 5.15 (tests/kernels runs 6.1 and later).
 */
#define TRACER_LOWEST_KERNEL "5.15"
/*
 * 0 where this kernel has what the BPF programs need, as far as can be
 * probed; else -EOPNOTSUPP with err naming each missing feature, the
 * release that brought it, and this kernel. tracer__new asks it when the
 * programs fail to load.
 */
int tracer__kernel_lacks(struct rw_error *err);
/*
 * Why calls on this kernel and CPU cannot return through the kernel's
 * return trampoline (tracer_opts.trampoline), or NULL when they can.
 */
const char *tracer__kernel_trampoline_refusal(void);
/*
 * Why fi's calls cannot return through the trampoline with its entry probe
 * at site (an offset from its address, tracer__site's), or NULL: the
 * analysis' reason (binary__trampoline_refusal), or the probe's place. The
 * kernel takes the return address from the top of the stack when the entry
 * probe traps, so that probe must sit where SP is still the entry's.
 */
const char *tracer__func_trampoline_refusal(const struct binary *b, const struct func_info *fi,
					    int64_t site);

/* Calls in flight untouched this long will not return (tracer__tick). */
#define TRACER_SWEEP_AGE_NS (60ULL * 1000000000ULL)

/* Slow-call events the default limit lets through a second (tracer_opts). */
#define TRACER_SLOW_CALLS_PER_SEC 100
/* The in-flight map's room: goroutines and threads with traced calls in flight. */
#define TRACER_MAX_CONTEXTS 65536
/* Calls nested deeper than this take chunks of as many frames each, of this many in all. */
#define TRACER_DEEP_FRAMES 64
#define TRACER_MAX_CHUNKS 4096
/* The most slowest calls a caller may keep per function (tracer_target__keep_slowest). */
#define TRACER_MAX_KEEP 20
/* tracer__poll delivers at most this many events a call: a flood waits for the next. */
#define TRACER_POLL_MAX_EVENTS 1024

/* One traced function of a target. */
struct tracer_func {
	const struct func_info *info; /* valid while the target lives */
	uint32_t fn_id;		      /* slot in the kernel; the cookie of its probes */
	bool go_key;		      /* keyed by goroutine, else by thread */
	/* its calls end at the kernel's return trampoline (tracer_opts.trampoline),
	 * else at probes on its RETs, trampoline_why saying why (NULL: not asked) */
	bool trampoline;
	const char *trampoline_why;
};

/* Arguments of a call (tracer_target__capture_args), as its entry probe read them. */
#define TRACER_ARG_REGS 10
#define TRACER_STR_ARGS 4
struct tracer_args {
	/* NULL: none kept (the function's arguments are not captured, or the
	 * call was too deep or on a goroutine or thread outside the
	 * kernel's index); else its parameters, what regs and str hold */
	const struct func_params *params;
	uint64_t regs[TRACER_ARG_REGS]; /* enum param_reg's order */
	/* the first bytes of the strings the parameters' string slots name,
	 * read as the call ended: str_len[i] bytes, or -errno */
	const uint8_t *str[TRACER_STR_ARGS];
	int str_len[TRACER_STR_ARGS];
};

/* A slow call, as delivered by tracer__poll. */
struct tracer_event {
	pid_t pid;
	pid_t tid;
	/* the traced process pid counts for (followed, not traced itself:
	 * forked by it, or started anew beside it where the caller asked
	 * tracer_opts.follow_started); 0: none */
	pid_t lender;
	/* lender forked pid: its mappings stand for pid's once pid is gone */
	bool lender_maps;
	uint64_t goid; /* 0: not Go or unknown */
	uint64_t start_ns;
	uint64_t duration_ns;
	uint32_t fn_id;
	const uint64_t *stack; /* user return addresses, innermost first */
	size_t nstack;
	/*
	 * Native calls: the registers at the RET and stack_copy_len bytes of
	 * the user stack at stack_copy_addr (the page holding regs.sp), for
	 * symbolizer__unwind (stack above is
	 * then a frame-pointer walk, garbage through code built without frame
	 * pointers). stack_copy_len 0: none (Go: stack is its frame pointers).
	 */
	struct unwind_regs regs;
	const uint8_t *stack_copy;
	size_t stack_copy_len;
	uint64_t stack_copy_addr;
	/*
	 * A call that returned through the kernel's return trampoline: regs
	 * and the copy are its caller's, after the return, and lead_pc (its
	 * entry) stands for its own frame, before the unwinding; 0: none.
	 */
	uint64_t lead_pc;
	struct tracer_args args;
};

typedef void (*tracer_event_fn)(const struct tracer_event *ev, void *ctx);

/* Loads the BPF programs. NULL on error, with errno and a message set. */
struct tracer *tracer__new(const struct tracer_opts *opts, struct rw_error *err);
/* Detaches and unloads everything; NULL is fine. */
void tracer__free(struct tracer *t);
/* The binary cache the tracer analyses files through (its own when opts had none). */
struct binary_cache *tracer__cache(const struct tracer *t);
/* Reads "auto", "uprobe_multi" or "perf_event"; -EINVAL for anything else. */
int tracer_attach_mode__parse(const char *s, enum tracer_attach_mode *ret);
/* "uprobe_multi" or "perf_event". */
const char *tracer__attach_mode(const struct tracer *t);
/* BPF links t holds besides its uprobes' (the fork and exec programs' while
 * it follows a traced process's forks): 0 to 2. */
size_t tracer__other_links(const struct tracer *t);
/*
 * Why that mode, for a user reading the log on a node whose kernel is not
 * the one they expect: "as asked", that the kernel has uprobe_multi links,
 * or that it has none (the fallback).
 */
const char *tracer__attach_why(const struct tracer *t);
/* Whether the kernel has uprobe_multi links: 1, 0, or -1 when not probed (perf_event asked). */
int tracer__has_uprobe_multi(const struct tracer *t);
/*
 * Where tt's entry probe of fi sits, as an offset from its entry: the
 * analysis' entry site (func_info.entry_site) when its instruction is of a
 * kind tracer__set_site_kinds allows, else 0 (the first byte).
 */
int64_t tracer__entry_site(const struct tracer_target *tt, const struct func_info *fi);
/* Every kind (enum disasm_probe_kind, a bit each) the analysis places entries on. */
#define TRACER_SITE_KINDS_ALL ((1U << DISASM_PROBE__N) - 1)
/*
 * Allows entry probes away from the first byte only on instructions of the
 * kinds in the mask (a bit per enum disasm_probe_kind): those this kernel
 * was measured to emulate in the trap (calibrate__emulated). Only narrows
 * (tracer_opts.entry_at_start allows none). Call it before the first target
 * is added: probes attached before keep their sites.
 */
void tracer__set_site_kinds(struct tracer *t, uint32_t kinds);

/*
 * What tracer__add would say of patterns in the file at path, without
 * attaching anything: 0 when they match, or the same error (a pattern that
 * matches nothing, with suggestions). Its analysis stays in the tracer's
 * cache for the attach. -errno when the file cannot be read.
 */
int tracer__check(struct tracer *t, const char *path, const char *const *patterns, size_t npatterns,
		  struct rw_error *err);

/*
 * Traces the functions matching patterns in process pid, whose executable is
 * path (for a local process, /proc/PID/exe). Function slots already made
 * for the same file are shared; the probes are this process's own.
 * threshold_ns: calls at least this slow are sent to the event callback; 0
 * for none. A pattern matching nothing fails with -ENOENT and names it, with
 * suggestions.
 */
struct tracer_target *tracer__add(struct tracer *t, pid_t pid, const char *path,
				  const char *const *patterns, size_t npatterns,
				  uint64_t threshold_ns, struct rw_error *err);
/*
 * As tracer__add, but fails with -EDQUOT, before attaching anything, when
 * the patterns match more than max_funcs functions (the caller's budget;
 * the message says how many matched).
 */
struct tracer_target *tracer__add_bounded(struct tracer *t, pid_t pid, const char *path,
					  const char *const *patterns, size_t npatterns,
					  uint64_t threshold_ns, size_t max_funcs,
					  struct rw_error *err);
/*
 * Counts pid's goroutines and threads with calls in flight, and its slow-call
 * events, against the share of namespace name (tracer_opts), from now until
 * its last target is removed. Call it before pid's first tracer__add: what
 * was in flight before counts against no share. 0, or -errno with a message
 * (-ENOSPC: too many namespaces; -EBUSY: pid has another namespace's share).
 */
int tracer__share(struct tracer *t, pid_t pid, const char *name, struct rw_error *err);

/* A namespace's share now, as the kernel counts it. */
struct tracer_share {
	uint64_t contexts, max_contexts; /* max 0: no limit */
	uint64_t contexts_refused;	 /* calls not measured: no context was left */
	/* the same for calls nested deeper than TRACER_DEEP_FRAMES: chunks of
	 * TRACER_DEEP_FRAMES frames, in the proportion of the kernel's room */
	uint64_t chunks, max_chunks, chunks_refused;
	uint64_t max_events;	 /* a second; 0: no limit */
	uint64_t events_refused; /* slow calls not sent: over max_events */
	/* calls not measured: entered with TRACER_MAX_DEPTH calls in flight on
	 * their goroutine or thread, or with the node's in-flight maps full */
	uint64_t too_deep, map_full;
};

/* -ENOENT when no traced process has namespace name's share. */
int tracer__share_read(const struct tracer *t, const char *name, struct tracer_share *ret);

/* Stops counting pid's calls and detaches probes no other target needs; NULL is fine. */
void tracer__remove(struct tracer *t, struct tracer_target *target);

pid_t tracer_target__pid(const struct tracer_target *target);
struct binary *tracer_target__binary(const struct tracer_target *target);
size_t tracer_target__nfuncs(const struct tracer_target *target);
const struct tracer_func *tracer_target__func(const struct tracer_target *target, size_t i);

/* A function's inlined copies, traced with it (analysis/inlsites.h). */
struct tracer_inlined {
	size_t copies;	    /* found */
	size_t timed;	    /* of them, probed at their entries and exits */
	size_t counted;	    /* of them, counted at their entries only (exits not known) */
	size_t sites;	    /* their entries and exits: a uprobe each */
	bool only;	    /* the function has no code of its own */
	const char *reason; /* why a copy is not timed (the first); NULL: every one is */
};
/*
 * Function i's inlined copies; all zero when it has none (in the agent, also
 * when its analyzer did not read them).
 */
void tracer_target__inlined(const struct tracer_target *target, size_t i,
			    struct tracer_inlined *ret);
/*
 * Processes target's process forked (or, with tracer_opts.follow_started,
 * that started beside it running its executable) that ended before they
 * could be probed, never counted: its probes were its own (another process
 * runs its executable untraced), and a child does not inherit those.
 * Children that ran another program are not among them. Counted at the
 * tracer's sweep, a few seconds apart, while target is traced.
 */
uint64_t tracer_target__children_unprobed(const struct tracer_target *target);
/*
 * target's process exited: its children that ended are counted now
 * (tracer_target__children_unprobed), not left to a sweep that would find
 * it traced no more. Before tracer__remove.
 */
void tracer__count_children(struct tracer *t, struct tracer_target *target);
/* Patterns left out under tracer_opts.partial, with suggestions. */
size_t tracer_target__nunmatched(const struct tracer_target *target);
const struct binary_unmatched *tracer_target__unmatched(const struct tracer_target *target,
							size_t i);
/*
 * Sends target's calls of function i that may be among the keep (at most
 * TRACER_MAX_KEEP; 0: none) slowest the caller keeps to the event callback
 * too, slow or not: those at least floor_ns slow (the caller's keep-th
 * slowest, raised as it keeps slower ones) that are among the keep slowest
 * to return on their CPU since the caller's window began (new_window: it
 * begins now). Where other targets of the process (other probes) trace the
 * function, the most calls and the lowest floor hold. Such a call below the
 * target's threshold is no slow call: a rate that refuses it counts no
 * latency.slow_dropped.
 */
int tracer_target__keep_slowest(struct tracer *t, struct tracer_target *target, size_t i,
				unsigned int keep, uint64_t floor_ns, bool new_window);
/* Reads the latency of function i since the target was added: the kernel's
 * per-CPU histograms summed (less what another target of the same process
 * and function had counted before; min and max are the histogram's own). */
int tracer_target__read(struct tracer *t, const struct tracer_target *target, size_t i,
			struct latency *ret);

/*
 * Stops probing function i in target's process, keeping what it counted
 * (tracer_target__read goes on returning it). Each function's probes are
 * links of their own in each process (pid-filtered: the kernel places their
 * breakpoints in that process only): this process's are removed, so it no
 * longer traps, and other traced processes of the file miss no call. -EBUSY
 * when another target of the same process (another probe) uses it. 0, or
 * -errno with a message.
 */
int tracer_target__detach(struct tracer *t, struct tracer_target *target, size_t i,
			  struct rw_error *err);
/* Probes function i again after tracer_target__detach; its counts carry on. */
int tracer_target__reattach(struct tracer *t, struct tracer_target *target, size_t i,
			    struct rw_error *err);
bool tracer_target__detached(const struct tracer_target *target, size_t i);

/*
 * Captures the arguments of target's function i (its entry's argument
 * registers; the strings its parameters name, read as a call is sent):
 * every call of it the event callback gets carries them in ev->args, for
 * every process of the file (a caller that shows them to only some checks
 * which target asked: tracer_target__captures). Its parameters come from
 * binary__params. -EPERM when tracer_opts.capture_args was not set; 0, or
 * -errno with a message.
 */
int tracer_target__capture_args(struct tracer *t, struct tracer_target *target, size_t i,
				struct rw_error *err);
bool tracer_target__captures(const struct tracer_target *target, size_t i);

void tracer__set_event_fn(struct tracer *t, tracer_event_fn fn, void *ctx);
/* Delivers slow-call events, at most TRACER_POLL_MAX_EVENTS (the rest stay
 * readable); returns how many, or -errno (-EINTR on a signal). */
int tracer__poll(struct tracer *t, int timeout_ms);
/* Readable when tracer__poll has events to deliver: for a caller's own poll(). */
int tracer__fd(const struct tracer *t);

/*
 * Call on every turn of the caller's loop: at most every 5 s, drops the
 * in-flight frames untouched for 60 s (tracer_opts.sweep_age_ns; calls that will never return: a
 * killed thread, a lost goroutine) and counts them as orphans of their
 * function, and gives back the contexts with no call in flight untouched
 * for 5 s. Returns how many frames it dropped (0 when no sweep was due).
 */
int tracer__tick(struct tracer *t);
/*
 * After target's process exited: its in-flight frames become orphans.
 * Returns how many were dropped.
 */
int tracer__reap(struct tracer *t, struct tracer_target *target);
/*
 * Process pid exited and no target of it is left: its frames and its
 * namespace's share are dropped now, not at the next sweep, so that a new
 * process with its pid (another namespace's) can have its own share at once.
 */
void tracer__forget_pid(struct tracer *t, pid_t pid);

/* Calls in flight: entered, not yet returned (nor purged). */
int64_t tracer__inflight(struct tracer *t);

/*
 * Nested traced calls in flight per goroutine or thread that are measured;
 * a call entered deeper is counted in struct latency.lost of its function
 * (and in the frames_full counter).
 */
#define TRACER_MAX_DEPTH 1024

struct tracer_count {
	const char *name; /* static */
	uint64_t n;
};

#define TRACER_MAX_COUNTS 32

/* What the tracer and its BPF programs counted since tracer__new. */
struct tracer_counters {
	/*
	 * Calls the kernel side could not measure, by cause: frames_full
	 * (entered deeper than TRACER_MAX_DEPTH: also in latency.lost),
	 * contexts_full, read_failed, not_g_stack, no_hist, no_func,
	 * frames_insert_failed, and morestack_read_failed (a call restarted
	 * after runtime.morestack, measured from its restart, with an orphan)
	 */
	struct tracer_count unmeasured[TRACER_MAX_COUNTS];
	size_t nunmeasured;
	/* in-flight calls the kernel dropped as dead: a newer call proved them
	 * so, or their goroutine's g was reused */
	uint64_t purged;
	/* in-flight calls the sweeper dropped: tracer__tick, tracer__reap */
	uint64_t swept;
	uint64_t lost_events; /* slow-call events dropped: the ring buffer was full */
	/* slow-call events not sent: over tracer_opts.slow_calls_per_sec */
	uint64_t slow_limited;
	/* calls not measured, and slow-call events not sent: over their
	 * namespace's share (tracer_opts.share_*) */
	uint64_t share_lost, share_limited;
	/* functions whose probes changed between shared and per-process */
	uint64_t share_changes;
	/* every counter of the BPF programs by name, for debugging */
	struct tracer_count all[TRACER_MAX_COUNTS];
	size_t nall;
};

/* Reads the counters; 0 or -errno (then all are 0). */
int tracer__counters(struct tracer *t, struct tracer_counters *ret);

#endif

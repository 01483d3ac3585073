/* SPDX-License-Identifier: MIT */
/*
 * Everything that crosses the boundary between the BPF programs
 * (bpf/trace.bpf.c) and userspace (src/trace/tracer*.c). Included by both:
 * fixed width fields, explicit padding, sizes asserted.
 */
#ifndef RETWATCH_BPF_RETWATCH_H
#define RETWATCH_BPF_RETWATCH_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#include "hist.h"

/*
 * In-flight frames remembered per goroutine (Go) or thread (native): the
 * first RW_MAX_FRAMES in its struct rw_frames, which every hit looks up;
 * deeper ones in chunks of RW_CHUNK_FRAMES (struct rw_chunk), looked up only
 * by hits that deep, up to RW_MAX_DEPTH in all. A call entered with
 * RW_MAX_DEPTH frames in flight below it is counted lost for its function.
 */
#define RW_MAX_FRAMES 64
#define RW_CHUNK_FRAMES 64
#define RW_MAX_DEPTH 1024
/* Deep chunks of all goroutines and threads together: 8 MiB at most. */
#define RW_MAX_CHUNKS 4096
_Static_assert(RW_MAX_DEPTH % RW_CHUNK_FRAMES == 0 && RW_MAX_FRAMES % RW_CHUNK_FRAMES == 0,
	       "frames split into whole chunks");
/* User stack frames sent with a slow call. */
#define RW_STACK_DEPTH 32

/*
 * Function slots, one per (file, function) traced: as many as histograms,
 * so that a namespace's share of one (tracer_opts, the agent's
 * --max-functions-per-namespace) is a share of the other (2 MiB).
 */
#define RW_MAX_FUNCS 65536
#define RW_MAX_CONTEXTS 65536
/*
 * Histograms, one per (function, process), in pages of RW_HIST_PAGE: a
 * page is a per-CPU array made by userspace when a slot in it is first
 * needed and frees when its last slot is free, held in the hist_pages
 * array of maps. Both lookups are arrays' (the verifier inlines them: a
 * per-CPU hash lookup cost a RET about 0.4x the empty program). A page
 * costs RW_HIST_PAGE histograms per CPU (8 x 4.3 KiB: 2.2 MiB on 64 CPUs),
 * where a histogram alone was 4.3 KiB per CPU: few pages, little waste.
 */
#define RW_MAX_HISTS 65536
#define RW_HIST_PAGE 8
#define RW_MAX_HIST_PAGES (RW_MAX_HISTS / RW_HIST_PAGE)
_Static_assert(RW_MAX_HISTS % RW_HIST_PAGE == 0 && (RW_HIST_PAGE & (RW_HIST_PAGE - 1)) == 0,
	       "histogram pages: a power of two, whole");

/*
 * A namespace's share of what every traced process on the node draws from:
 * the in-flight map's contexts (a goroutine's or thread's frames) and the
 * ring buffer's slow-call events. Indexed by the proc_share map's value for
 * a tgid; share 0 is every process without one (counted, never limited).
 * Userspace maps the array (BPF_F_MMAPABLE): it sets the limits and takes
 * a context back when its sweep deletes one.
 */
#define RW_MAX_SHARES 1024
#define RW_MAX_SHARED_PROCS 65536
/* The most slowest calls kept per function (struct rw_keep) */
#define RW_MAX_KEEP 20

struct rw_share {
	__u64 contexts;	    /* in the in-flight map now */
	__u64 max_contexts; /* 0: no limit */
	/* calls not measured: entered on a goroutine or thread with no
	 * context while the share's were all taken (also rw_hist.lost) */
	__u64 contexts_refused;
	/* the same for deep chunks (frames_deep: calls nested past
	 * RW_MAX_FRAMES); calls refused one are lost too */
	__u64 chunks;
	__u64 max_chunks;
	__u64 chunks_refused;
	__u64 window_ns;  /* when the current RW_RATE_WINDOW_NS began */
	__u64 events;	  /* slow-call events sent in it */
	__u64 max_events; /* per RW_RATE_WINDOW_NS, all CPUs; 0: no limit */
	/* slow calls not sent: over max_events (also rw_hist.slow_dropped) */
	__u64 events_refused;
	/* calls not measured (also rw_hist.lost): entered with RW_MAX_DEPTH
	 * frames in flight on their goroutine or thread */
	__u64 too_deep;
	/* ... or with no room left in the node's maps (frames, frames_deep) */
	__u64 map_full;
};
_Static_assert(sizeof(struct rw_share) == 96, "rw_share layout");

/*
 * The BPF cookie of every attachment. Most probes are attached per traced
 * process (the kernel runs them for that process alone), so a cookie names
 * a (function, process): the function slot in bits 0-15 (an index into the
 * funcs map), the histogram slot of that function in that process in bits
 * 16-31 (none for runtime.morestack's probe), flags in bits 32-39, and the
 * process (its tgid) in bits 40-63. A shared probe (RW_COOKIE_SHARED) is
 * every process's: its cookie names the function alone.
 */
#define RW_COOKIE_FN_MASK 0xffffULL
#define RW_COOKIE_HIST_SHIFT 16
#define RW_COOKIE_HIST_MASK 0xffffULL
#define RW_COOKIE_TGID_SHIFT 40
/* PID_MAX_LIMIT on 64-bit: every tgid fits the cookie */
#define RW_MAX_PID (1U << 22)
_Static_assert(RW_MAX_FUNCS <= RW_COOKIE_FN_MASK + 1 && RW_MAX_HISTS <= RW_COOKIE_HIST_MASK + 1 &&
		       RW_MAX_PID <= (1ULL << (64 - RW_COOKIE_TGID_SHIFT)),
	       "cookie fields");
/* This entry probe sits on runtime.morestack, not on a traced function. */
#define RW_COOKIE_MORESTACK (1ULL << 32)
/*
 * This RET probe sits in a function the cookie's function jumps to at its
 * own stack depth (a tail call, directly or through a chain of them): the
 * RET ends the traced call when SP is the traced call's entry SP.
 */
#define RW_COOKIE_TAIL (1ULL << 33)
/*
 * A probe attached once for every process that maps the file, where every
 * process running it is traced (links grow with files and functions, not
 * with processes): the process is the hit's, its histogram slot is found in
 * the proc_hists map. Counted only while its function is RW_FUNC_SHARED, as
 * a per-process probe only while it is not: both kinds stay attached while
 * a function changes kind, and each hit counts once.
 */
#define RW_COOKIE_SHARED (1ULL << 34)
/*
 * A site of an inlined copy of the cookie's function (analysis/inlsites.h):
 * an entry probe where control comes into the copy, a RET probe (exit)
 * where it goes out, both at the stack pointer of the function holding the
 * copy. An exit with no call of the function in flight at its depth is the
 * caller's own code reached another way: not a stray RET. An entry does not
 * take a frame of another function at its depth for dead: copies nest.
 */
#define RW_COOKIE_INLINE (1ULL << 35)
/*
 * With RW_COOKIE_INLINE: an entry of a copy whose exits are not known (a
 * jump through a register inside it): its calls are counted, not timed.
 */
#define RW_COOKIE_INLINE_COUNT (1ULL << 36)
/*
 * An exit probe at the function's entry, attached as a uretprobe: the call
 * just returned through the kernel's return trampoline (native code that
 * calls nothing). One program (rw_ret) ends both kinds of calls: a second
 * copy of it for these alone cost every start a second verification.
 */
#define RW_COOKIE_AFTER_RET (1ULL << 37)

/* struct rw_func.flags */
#define RW_FUNC_ACTIVE (1U << 0)
/* Go register ABI: R14 holds g; key frames by (g, g.stack.hi - SP). */
#define RW_FUNC_GO (1U << 1)
/* No RET probe: count calls at the entry only. */
#define RW_FUNC_ENTRY_ONLY (1U << 2)
/* Native code that may leave by a jump to another function (a tail call). */
#define RW_FUNC_TAIL_CALLS (1U << 3)
/*
 * Some of those jumps cannot be followed (an indirect jump, a target past
 * the analysis' bound): a call never seen returning is a tail exit, not an
 * orphan.
 */
#define RW_FUNC_TAIL_UNTIMED (1U << 4)
/* Probed by shared probes (RW_COOKIE_SHARED), not per-process ones. */
#define RW_FUNC_SHARED (1U << 5)
/*
 * Arguments captured: the entry keeps its argument registers (struct
 * rw_args) for a call in the context index up to RW_ARGS_FRAMES deep, and a
 * call sent carries them, and the bytes of the strings rw_func.str_args
 * names, read when it is sent.
 */
#define RW_FUNC_ARGS (1U << 6)
/*
 * Go: the entry probe sits past the stack check, so a call that grows its
 * stack reaches it once, after runtime.morestack: a frame of the function
 * at runtime.morestack's depth is a stale one (a call that panicked), never
 * the call under way, and is not marked as restarting.
 */
#define RW_FUNC_ENTRY_PAST_CHECK (1U << 7)
/*
 * Native code whose calls end at the kernel's return trampoline (a uretprobe),
 * not at its RETs: it calls nothing and jumps nowhere, so its frame keeps
 * its entry's address (rw_frame.entry_ip), its own frame in a slow call's
 * stack.
 */
#define RW_FUNC_TRAMPOLINE (1U << 8)

/* The registers kept: RAX, RBX, RCX, RDX, RSI, RDI, R8-R11 (Go's and the
 * System V ABI's integer argument registers), in this order. */
#define RW_ARG_REGS 10
#define RW_ARGS_FRAMES 16
#define RW_MAX_STR_ARGS 4
#define RW_STR_BYTES 64
/* rw_func.str_args: byte i, a string's pointer register (an index of
 * struct rw_args) in bits 0-3 and its length's in bits 4-7 (RW_STR_NUL: up
 * to a NUL); 0xff: none */
#define RW_STR_NUL 0xf
#define RW_STR_NONE 0xff

struct rw_args {
	__u64 r[RW_ARG_REGS];
};

/* The arguments of a context index slot's calls, by frame index. */
struct rw_ctx_args {
	struct rw_args f[RW_ARGS_FRAMES];
};

/* Offsets in runtime.g, stable since Go 1.17 (see docs/design.md). */
#define RW_G_STACK_LO 0
#define RW_G_STACK_HI 8

struct rw_func {
	__u64 size;	/* bytes of the entry range: checks a morestack return address */
	__u64 str_args; /* with RW_FUNC_ARGS: the strings read (RW_STR_NUL, RW_STR_NONE) */
	__u32 flags;
	__u32 goid_offset; /* offset of goid in runtime.g: 152, 160, or 0 when unknown */
	/*
	 * Slow-call events sent per RW_RATE_WINDOW_NS, per process and CPU
	 * (struct rw_rate); the others are counted in rw_hist.slow_dropped. 0: no limit.
	 */
	__u32 max_events;
	/*
	 * How far below the entry's the stack pointer is where the entry probe
	 * sits (func_info.entry_sp: a frame made by SUB RSP before the site);
	 * added back at the entry, not at an inlined copy's (RW_COOKIE_INLINE).
	 */
	__u32 entry_sp;
};
_Static_assert(sizeof(struct rw_func) == 32, "rw_func layout");

/* The window of rw_func.max_events. */
#define RW_RATE_WINDOW_NS 1000000000ULL

/* Frames of one goroutine (Go: id is the g address) or one thread (native: id is the tid). */
struct rw_ctx_key {
	__u32 tgid;
	__u32 pad;
	__u64 id;
};
_Static_assert(sizeof(struct rw_ctx_key) == 16, "rw_ctx_key layout");

struct rw_frame {
	__u64 depth; /* Go: g.stack.hi - SP; native: -SP; deeper frames are larger */
	__u64 start_ns;
	union {
		/* Go: the entry's address, which a morestack return address is
		 * checked against; RW_FUNC_TRAMPOLINE: the entry probe's address */
		__u64 entry_ip;
		/*
		 * Native code that may leave by a jump that cannot be followed
		 * (RW_FUNC_TAIL_UNTIMED): the return address at its entry, so
		 * that a traced function entered at its depth with the same
		 * return address is known for the one it jumped to; else 0.
		 */
		__u64 ret_addr;
	};
	__u32 fn_id;
	__u16 flags; /* RW_FRAME_* */
	/* histogram slot of (fn_id, the process) when entered: a frame closed
	 * at another function's RET (RW_FRAME_TAIL_OVER) or purged is counted
	 * there (if it still is that function's: struct rw_hist.owner) */
	__u16 hist;
};
_Static_assert(RW_MAX_HISTS <= 65536, "rw_frame.hist holds every histogram slot");
_Static_assert(sizeof(struct rw_frame) == 32, "rw_frame layout");

/* runtime.morestack was entered from this frame's prologue: its next entry is a restart. */
#define RW_FRAME_RESTARTING (1U << 0)
/*
 * Entered at the depth of the frame under it, whose function leaves only by
 * RETs and by tail calls that are followed: that call jumped here, and ends
 * with this one.
 */
#define RW_FRAME_TAIL_OVER (1U << 1)
/* Its entry kept its arguments (ctx_args, at its slot and frame index). */
#define RW_FRAME_ARGS (1U << 2)

/* Frames nest: frames[0] is the shallowest, frames[n - 1] the deepest. */
struct rw_frames {
	/*
	 * Go: g.stack when last read from user memory (a read costs more than
	 * the rest of a hit). A hit whose SP lies inside them trusts them: a
	 * copied stack is a new allocation, disjoint from the old one while
	 * both live, so the first hit after a copy falls outside and reads g.
	 */
	__u64 stack_lo;
	__u64 stack_hi;
	__u64 last_ns; /* last push or pop, for the userspace sweep */
	/*
	 * The last call lost past RW_MAX_DEPTH: its entry repeated after
	 * runtime.morestack (no frame to mark) is the same call, not a second
	 * loss. lost_depth 0: none.
	 */
	__u64 lost_depth;
	__u32 lost_fn;
	__u32 n;
	struct rw_frame f[RW_MAX_FRAMES];
};
_Static_assert(sizeof(struct rw_frames) == 40 + 32 * RW_MAX_FRAMES, "rw_frames layout");

/*
 * The context index: an open-addressing table of goroutines' and threads'
 * keys in a plain array, whose lookups the verifier inlines (a hash map's
 * lookup is a call that hashes the key: about 65 ns of a hit here). Slot s
 * of ctx_idx holds a context's key, ctx_frames[s] its frames. A slot is
 * claimed with a compare-and-swap of id (from empty or a tombstone), then
 * tgid is written: the same key is never inserted by two CPUs at once (a
 * goroutine or thread runs on one CPU at a time). Probed linearly,
 * RW_IDX_PROBES slots from the key's hash; a key that finds no room goes to
 * the frames hash map. Userspace frees a slot: tgid = 0, then id = tombstone
 * (a lookup probes past tombstones, a claim reuses them).
 */
#define RW_IDX_BITS 12
#define RW_IDX_SLOTS (1U << RW_IDX_BITS)
#define RW_IDX_PROBES 8
#define RW_IDX_EMPTY 0ULL
#define RW_IDX_TOMB 1ULL

struct rw_idx_slot {
	__u64 id;
	__u32 tgid;
	__u32 pad;
};
_Static_assert(sizeof(struct rw_idx_slot) == 16, "rw_idx_slot layout");

static inline __u32 rw_idx_hash(__u32 tgid, __u64 id)
{
	return ((id ^ ((__u64)tgid << 40) ^ tgid) * 0x9E3779B97F4A7C15ULL) >> (64 - RW_IDX_BITS);
}

/* Frames [chunk * RW_CHUNK_FRAMES, (chunk + 1) * RW_CHUNK_FRAMES) of a goroutine or thread. */
struct rw_chunk_key {
	__u32 tgid;
	__u32 chunk; /* >= RW_MAX_FRAMES / RW_CHUNK_FRAMES */
	__u64 id;    /* as in struct rw_ctx_key */
};
_Static_assert(sizeof(struct rw_chunk_key) == 16, "rw_chunk_key layout");

struct rw_chunk {
	struct rw_frame f[RW_CHUNK_FRAMES];
};
_Static_assert(sizeof(struct rw_chunk) == 32 * RW_CHUNK_FRAMES, "rw_chunk layout");

/* Latency of one function in one process (per CPU in the kernel). */
struct rw_hist_key {
	__u32 fn_id;
	__u32 tgid;
};
_Static_assert(sizeof(struct rw_hist_key) == 8, "rw_hist_key layout");

/*
 * What proc_hists holds for a (function, process): its histogram slot, and
 * the process's start time as /proc/PID/stat says it (clock ticks since
 * boot; 0: not known). A pid is a process only with its start time: until
 * userspace sees that another process took the pid over, the shared probes'
 * hits of that other process must not count as the old one's.
 */
struct rw_proc_hist {
	__u32 hist;
	__u32 pad;
	__u64 starttime;
};
_Static_assert(sizeof(struct rw_proc_hist) == 16, "rw_proc_hist layout");

/*
 * A process whose children are followed from their fork (retwatch trace
 * --follow): what the follow map holds for it, and for each process it
 * forks, set in the kernel before the child first runs. A child's hits of a
 * shared probe count in its lender's histograms until userspace gives it
 * its own (struct rw_proc_hist): a pre-fork server's worker that lives a
 * tenth of a second, gone before userspace reads /proc again, is counted
 * whole. The lender is the ancestor userspace traces (its own entry names
 * itself); starttime, as rw_proc_hist's, keeps a reused pid out.
 */
struct rw_follow {
	__u32 lender;
	__u32 flags; /* RW_FOLLOW_* */
	__u64 starttime;
};
/* A child userspace traced on its own since (with its own probes, histograms). */
#define RW_FOLLOW_TRACED (1U << 0)
/* A child that ran another program (exec): not a worker of its lender's. */
#define RW_FOLLOW_EXECED (1U << 1)
/*
 * Not forked by its lender: started anew (exec) in the lender's cgroup,
 * running the lender's executable (struct rw_exec_key). Its mappings are
 * its own, not its lender's as forked.
 */
#define RW_FOLLOW_STARTED (1U << 2)
/* Userspace's: ended, and counted as such (tracer__count_children). */
#define RW_FOLLOW_SAID (1U << 3)
_Static_assert(sizeof(struct rw_follow) == 16, "rw_follow layout");
#define RW_MAX_FOLLOWED 16384

/*
 * A traced process's cgroup (its cgroup v2 id) and executable (the kernel's
 * inode of the file it runs, an opaque number: one per file per mount, so
 * per container of an image), where userspace asks that processes started
 * anew there, running that file, be counted from their first instruction
 * as the process's forked ones are (tracer_opts.follow_started). The
 * exec_lend map holds such a key's traced process.
 */
struct rw_exec_key {
	__u64 cgid;
	__u64 exe;
};
_Static_assert(sizeof(struct rw_exec_key) == 16, "rw_exec_key layout");
/* What the rw_task_key iterator writes, per thread: its process's key. */
struct rw_task_key {
	struct rw_exec_key k;
	__u32 tgid;
	__u32 pad;
};
_Static_assert(sizeof(struct rw_task_key) == 24, "rw_task_key layout");
#define RW_MAX_EXEC_LENDERS 4096
/* USER_HZ, the ticks of /proc/PID/stat's start time, on every architecture we build for */
#define RW_NS_PER_TICK 10000000ULL

struct rw_hist {
	/*
	 * Whose histogram this slot is, set by userspace (on every CPU) when it
	 * gives the slot out; zero when it takes it back. A hit counts only in
	 * its own (function, process)'s: a late hit of a process no longer
	 * traced, or a frame of a function whose slot was taken back, does not.
	 */
	struct rw_hist_key owner;
	/* with a duration, entries of an entry-only function, and tail exits */
	__u64 calls;
	__u64 orphans; /* frames purged because a newer frame proved them dead */
	__u64 sum_ns;
	__u64 min_ns; /* 0: none yet */
	__u64 max_ns;
	/* calls not measured: entered with RW_MAX_DEPTH frames in flight on
	 * their goroutine or thread, or no room for a deep chunk */
	__u64 lost;
	/* slow calls not sent: over rw_func.max_events, or the ring buffer was full */
	__u64 slow_dropped;
	/* calls (in calls too) that ended at a RET of a function they tail-called */
	__u64 tail_closed;
	/* calls (in calls too) left by a tail call that cannot be timed: no duration */
	__u64 tail_exits;
	/* calls (in calls too) of inlined copies (RW_COOKIE_INLINE) */
	__u64 inlined;
	/* of them, counted at a copy's entry, not timed (RW_COOKIE_INLINE_COUNT) */
	__u64 inlined_untimed;
	__u64 buckets[RW_HIST_BUCKETS];
	/* not counts: the slow-call rate limiter's state (struct latency stops above) */
	struct rw_rate {
		__u64 window_ns; /* when this CPU's window began */
		__u64 sent;	 /* slow calls sent in it */
		__u64 kept;	 /* and candidates for the slowest kept (rw_keep) */
	} rate;
	/*
	 * The slowest calls that returned on this CPU since userspace began its
	 * window (rw_threshold.keep_window): a call is sent as a candidate for
	 * the slowest kept only when it is among them, so the union over CPUs
	 * and processes holds the function's slowest, and a window of N calls
	 * sends about keep x (1 + ln(N / keep)) a CPU, not N.
	 */
	struct rw_keep {
		__u32 window; /* rw_threshold.keep_window they are of */
		__u32 pad;
		__u64 ns[RW_MAX_KEEP]; /* durations; 0: a free place */
	} keep;
};
_Static_assert(sizeof(struct rw_hist) == 8 + 88 + 8 * RW_HIST_BUCKETS + 24 + 8 + 8 * RW_MAX_KEEP,
	       "rw_hist layout");

/*
 * Bytes of user stack sent with a native slow call, in whole pages from the
 * one holding SP (12 to 16 KiB above SP): userspace
 * unwinds them with the unwind tables (.eh_frame, .debug_frame), since C,
 * C++ and Rust code is mostly built without frame pointers. Go keeps frame
 * pointers and sends none. Only slow calls (rate-limited) pay for the copy.
 */
#define RW_STACK_COPY 16384
#define RW_PAGE_SIZE 4096

/*
 * Which calls of a (function, process) are sent (hist_thresholds): those at
 * least slow_ns slow (the slow-call threshold; 0: none), and, when keep is
 * set, those at least keep_ns slow (the floor userspace raises to the
 * slowest calls it keeps: a call under it could not be one of them) that
 * are among the keep slowest to return on their CPU in keep_window
 * (struct rw_keep; a new keep_window begins a new window). A call sent for
 * keep alone is not a slow call: a rate that refuses it counts no
 * slow_dropped, and it has its own rate (rw_rate.kept).
 */
struct rw_threshold {
	__u64 slow_ns;
	__u64 keep_ns;
	__u32 keep; /* 0: none; at most RW_MAX_KEEP */
	__u32 keep_window;
};
_Static_assert(sizeof(struct rw_threshold) == 24, "rw_threshold layout");

/*
 * The registers an unwinder starts from (struct unwind_regs): the RET's own
 * address, SP, the frame pointer and the callee-saved registers (the
 * caller's, restored by the time a RET runs). x86-64: RBP; RBX, R12-R15.
 * AArch64: X29; X30 (the return address), X19-X28.
 */
#if defined(__TARGET_ARCH_arm64) || defined(__aarch64__)
#define RW_SAVED_REGS 11
#else
#define RW_SAVED_REGS 5
#endif
struct rw_regs {
	__u64 ip;
	__u64 sp;
	__u64 fp;
	__u64 saved[RW_SAVED_REGS];
};
_Static_assert(sizeof(struct rw_regs) == 24 + 8 * RW_SAVED_REGS, "rw_regs layout");

/*
 * A jump through a function pointer that may leave a traced native function
 * for code not probed (a hook another file set, as PostgreSQL's
 * ExecutorRun_hook): rw_hook reads where it goes, and userspace probes the
 * RETs there as exits of the call (RW_COOKIE_TAIL). The jump's operand, as
 * the analysis decoded it: a register (RW_HOOK_REG), or the word at
 * base + index * scale + disp (RW_HOOK_MEM; base RW_REG_IP: the next
 * instruction's address). Registers are numbered as x86-64 encodes them,
 * plus one (RW_REG_*); x86-64 only.
 */
#define RW_HOOK_SITES 4 /* per function, at most */
#define RW_HOOK_REG 1
#define RW_HOOK_MEM 2
#define RW_REG_NONE 0
#define RW_REG_IP 17
#define RW_MAX_HOOK_FUNCS 4096

struct rw_hook_site {
	/* the jump's offset in its page: the same in the file and in memory */
	__u16 page_off;
	__u8 kind; /* RW_HOOK_REG, RW_HOOK_MEM; 0: no site */
	__u8 len;  /* of the instruction */
	__u8 base, index, scale;
	__u8 pad;
	__s32 disp;
};
_Static_assert(sizeof(struct rw_hook_site) == 12, "rw_hook_site layout");

/*
 * A function's hook jumps, and what tells userspace that a hook went
 * somewhere new after it followed one: followed_ns, the time (the kernel's
 * monotonic clock) the last target's RETs were probed, written by
 * userspace; missed, the calls entered since then that still left as tail
 * exits, counted by the programs (their jump went to a target not
 * followed: userspace attaches the jump's probe again to read it).
 */
struct rw_hooks {
	struct rw_hook_site site[RW_HOOK_SITES];
	__u64 followed_ns;
	__u64 missed;
};
_Static_assert(sizeof(struct rw_hooks) == 64, "rw_hooks layout");

/* A target of a function's hook jump in a process, sent once (hook_seen). */
struct rw_hook_target {
	__u32 tgid;
	__u32 fn_id;
	__u64 target;
};
_Static_assert(sizeof(struct rw_hook_target) == 16, "rw_hook_target layout");

/*
 * What rw_hook sends: the target, keyed by the process that lent the hit's
 * process its histograms where it was forked by a followed one (its address
 * space is the child's as forked, and it outlives a short-lived child: one
 * event for all its children), else by the hit's own; and the hit's.
 */
struct rw_hook_event {
	struct rw_hook_target k;
	__u32 tgid;
	__u32 pad;
};
_Static_assert(sizeof(struct rw_hook_event) == 24, "rw_hook_event layout");

/* A call at least as slow as its function's threshold. */
struct rw_event {
	__u64 start_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u64 duration_ns;
	__u64 goid;	/* 0: not Go, or unknown */
	__u64 ret_addr; /* where the RET goes: the caller, which the frame-pointer walk skips */
	__u32 pid;
	__u32 tid;
	__u32 fn_id;
	__s32 stack_bytes; /* of stack[]; negative: -errno of bpf_get_stack */
	__u64 stack[RW_STACK_DEPTH];
	struct rw_regs regs; /* at the RET */
	/* user address of rw_event_copy.copy[0]: the page holding regs.sp */
	__u64 copy_addr;
	/* bytes of rw_event_copy.copy read from copy_addr up; 0: none (Go, an
	 * unreadable stack); the record is a struct rw_event_copy when not 0 */
	__u32 copy_bytes;
	__u32 args_kept;     /* 1: args and str_len hold the call's arguments */
	struct rw_args args; /* at the entry */
	/* bytes of str[i] read (of rw_func.str_args' string i), or -errno */
	__s32 str_len[RW_MAX_STR_ARGS];
	__u8 str[RW_MAX_STR_ARGS][RW_STR_BYTES];
	/* the followed process that lent pid its histograms (pid forked by it,
	 * or started anew in its cgroup, not traced itself); 0: none */
	__u32 lender;
	__u32 flags; /* RW_EVENT_* */
};
/* lender's mappings are not pid's (RW_FOLLOW_STARTED): they do not stand for them */
#define RW_EVENT_OWN_MAPS (1U << 0)
/*
 * Sent after the call returned, through the kernel's return trampoline
 * (RW_COOKIE_AFTER_RET): regs, stack[] and the copy are the caller's, just returned to,
 * and ret_addr is where the call entered (its entry probe's address), the
 * function's own frame, which userspace puts first.
 */
#define RW_EVENT_AFTER_RET (1U << 1)
_Static_assert(sizeof(struct rw_event) == 48 + 8 * RW_STACK_DEPTH + sizeof(struct rw_regs) + 16 +
						  8 * RW_ARG_REGS + 4 * RW_MAX_STR_ARGS +
						  RW_MAX_STR_ARGS * RW_STR_BYTES + 8,
	       "rw_event layout");

/* A native slow call's record: the event, then the top of its user stack. */
struct rw_event_copy {
	struct rw_event e;
	__u8 copy[RW_STACK_COPY];
};
_Static_assert(sizeof(struct rw_event_copy) == sizeof(struct rw_event) + RW_STACK_COPY,
	       "rw_event_copy layout");

/*
 * What the programs count; each drop names its cause. Indexes of the stats
 * map. Keep in sync with stat_names[] in src/trace/tracer.c.
 */
enum rw_stat {
	/* hits counted nowhere: in a process or function whose histogram
	 * slot is not theirs (taken back: no longer traced; or a probe not
	 * filtered to its process) */
	RW_STAT_OTHER_PROCESS,
	RW_STAT_NOT_G_STACK,	/* Go function, but SP is not inside R14's g.stack */
	RW_STAT_READ_FAILED,	/* reading g from user memory failed */
	RW_STAT_FRAMES_FULL,	/* more than RW_MAX_DEPTH traced calls nested */
	RW_STAT_CONTEXTS_FULL,	/* the in-flight map had no room for a goroutine or thread */
	RW_STAT_NO_FUNC,	/* cookie names no active function slot */
	RW_STAT_NO_HIST,	/* no histogram slot for (function, process) */
	RW_STAT_UNMATCHED_RET,	/* a RET with no recorded entry (attached mid-call, purged) */
	RW_STAT_ORPHANS_PURGED, /* frames a newer frame proved dead */
	/* no longer counted: a reused g's frames are purged as any dead
	 * frames are (orphans_purged); kept so the indexes stay stable */
	RW_STAT_GOID_CHANGED,
	RW_STAT_RESTARTS,     /* entries repeated after morestack, not new calls */
	RW_STAT_RINGBUF_FULL, /* slow-call events lost */
	/* runtime.morestack's return address was unreadable: the restart will
	 * be taken for a new call, and the first start for an orphan */
	RW_STAT_MORESTACK_READ_FAILED,
	/* a new goroutine's or thread's frames could not be made: the empty
	 * template was missing, or the entry was gone right after its insert;
	 * or a deep chunk was gone (swept) while its frames were in flight */
	RW_STAT_FRAMES_INSERT_FAILED,
	RW_STAT_SLOW_LIMITED, /* slow-call events not sent: over their function's rate */
	RW_STAT_TAIL_CLOSED,  /* calls ended at a RET of a function they tail-called */
	/* in-flight calls dropped as left by a tail call that cannot be timed
	 * (they are tail exits of their function, not orphans) */
	RW_STAT_TAIL_EXITS,
	/* calls not measured: their namespace's contexts were all taken */
	RW_STAT_SHARE_CONTEXTS,
	/* slow-call events not sent: over their namespace's rate */
	RW_STAT_SHARE_EVENTS,
	/* goroutines and threads whose frames went to the frames hash map:
	 * their probes in the context index found no room (not a loss) */
	RW_STAT_CONTEXTS_HASHED,
	/* entries of a shared probe in a process not traced for its function
	 * (it maps the file; not a loss: nothing of it is measured) */
	RW_STAT_UNTRACED_HITS,
	/* entries of a shared probe in a process that took over the pid of one
	 * traced (its start time is not the traced one's): not counted for it */
	RW_STAT_REUSED_PID_HITS,
	/* calls faster than the slow-call threshold, sent as candidates for
	 * the slowest kept (rw_threshold.keep_ns), and those refused by a rate */
	RW_STAT_KEEP_SENT,
	RW_STAT_KEEP_REFUSED,
	/* processes forked by a followed one that the follow map had no room
	 * for: counted from when userspace attaches them, as without it */
	RW_STAT_FOLLOW_FULL,
	/* targets of hook jumps sent to userspace, and those the ring had no room for */
	RW_STAT_HOOK_TARGETS,
	RW_STAT_HOOK_LOST,
	/* candidates for the slowest kept not sent: inside as many calls of
	 * their own function as are kept, each at least as slow (recursion) */
	RW_STAT_KEEP_NESTED,
	RW_STAT__MAX,
};

#endif

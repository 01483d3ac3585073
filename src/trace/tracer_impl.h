/* SPDX-License-Identifier: MIT */
/*
 * The tracer's internals, shared by the files it is made of (src/trace/
 * tracer*.c); nothing outside them includes this. The public API is
 * tracer.h.
 */
#ifndef RETWATCH_TRACER_IMPL_H
#define RETWATCH_TRACER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <bpf/libbpf.h>

#include "../bpf/retwatch.h"
#include "base/clock.h"
#include "trace/exeprocs.h"
#include "trace/tracer.h"
#include "trace.skel.h"
#include "trace/uprobe.h"

/* tracer__tick sweeps this often */
#define SWEEP_EVERY_NS (5 * NS_PER_S)

/* One function of one file, with a slot in the kernel's funcs map. */
/*
 * The inlined copies of one function in a file (tracer_inline.c), probed
 * with its slot: the sites of every copy inlsites.h could decide, entries
 * and exits apart. A function that exists only inlined has a func_info of
 * its own here (own), which its slot takes.
 */
struct inl_probes {
	char *name;
	struct func_info own;
	bool has_own;
	uint64_t *entries, *exits;	    /* file offsets */
	uint64_t *entry_addrs, *exit_addrs; /* the same sites' virtual addresses */
	/* per entry: of a copy counted at its entries only (RW_COOKIE_INLINE_COUNT) */
	bool *entry_counts;
	size_t nentries, nexits;
	/* copies found, timed, and counted at their entries only */
	size_t ncopies, nprobed, ncounted;
	char reason[160]; /* why a copy is not probed (the first one), or "" */
};

struct slot {
	uint32_t fn_id;
	uint64_t address;
	/* its calls return through the kernel's trampoline (a uretprobe at the entry site), not
	 * at probes on its RETs; else why not (NULL: not asked) */
	bool trampoline;
	const char *trampoline_why;
	const struct func_info *info; /* owned by the file's binary, or by inl */
	const struct inl_probes *inl; /* its inlined copies' probes, or NULL */
	unsigned int users;
	struct rw_func meta;
	/*
	 * Each traced process's histogram slot, and its probes, a batch per
	 * traced process (chained by next), each with the process as its
	 * filter: a uprobe attached for every process would trap in each that
	 * maps the file, traced or not (another pod of the same image paid 8 us
	 * a call of a function probed in its neighbour).
	 */
	struct batch *pids;
	/*
	 * Where every process running the file is traced for the function
	 * (meta.flags RW_FUNC_SHARED), its probes are these, attached once for
	 * all of them, and the batches hold no links: a hundred replicas of
	 * one image cost two links per function, not two hundred.
	 */
	struct batch *shared;
	uint64_t made_ns;
	/* processes that stopped being traced for it lately: their grace */
	struct dropped_pid *dropped;
	size_t ndropped;
	/* its hook's missed calls (struct rw_hooks) when last looked at, and
	 * how often its hook probes were attached again for them */
	uint64_t hook_missed;
	uint32_t hook_rearms;
};

struct dropped_pid {
	pid_t pid;
	uint64_t starttime; /* the process's (exeprocs), 0: not known */
	uint64_t ns;
};

/* The RETs of a function a hook jump went to, probed as exits of the batch's calls. */
struct hook_exit {
	dev_t dev;
	ino_t ino;
	uint64_t offset; /* the function's entry, in its file */
	struct uprobe_links links;
	struct hook_exit *next;
};

/* Probes attached together, in one process (or every process: shared). */
struct batch {
	struct uprobe_links entry, ret;
	struct uprobe_links uret; /* at the entry, as a uretprobe: slot.trampoline */
	struct uprobe_links hook; /* at the function's hook jumps (rw_hook) */
	struct hook_exit *exits;
	uint64_t hook_rearmed_ns; /* hook attached again at (0: not), to read a new target */
	pid_t pid;		  /* they trap in this process alone; -1: in every process */
	uint32_t fn_id;		  /* a function's: its slot, with pid the key of proc_hists */
	/* a function's: the histogram slot of (function, pid), in the cookies */
	bool has_hist;
	uint32_t hist;
	/* calls of (function, pid) at least this slow are sent (hist_thresholds) */
	uint64_t threshold_ns;
	/* and candidates for the slowest kept (struct rw_threshold): of its
	 * targets' (tracer_target__keep_slowest) the most calls, the lowest floor */
	uint32_t keep, keep_window;
	uint64_t keep_ns;
	struct batch *next;
};

/*
 * Ids of slots in the kernel's maps (function slots, histogram slots), given
 * out and taken back. An id taken back while its links may still be closing
 * (uprobe_links__close) waits in quarantine: a probe of its old user would
 * count for its next one.
 */
struct idpool {
	uint32_t max, next;
	uint32_t *free;
	size_t nfree;
	uint32_t *quarantine;
	size_t nquarantine;
	bool lowest_first; /* give out the lowest free id (histogram slots: fewer pages) */
};

/* A file with probes in it; the path names it through our own descriptor. */
struct attached_file {
	dev_t dev;
	ino_t ino;
	int fd;
	char path[64]; /* /proc/self/fd/N */
	char *name;    /* the path we were given, for messages */
	struct binary *bin;
	struct slot **slots;
	size_t nslots;
	struct batch *morestack; /* Go: the restart marker, a batch per traced process */
	/* ... or one for every process, where every function's probes are shared */
	struct batch *morestack_shared;
	/* functions' inlined copies, by name, once a target's patterns asked */
	struct inl_probes **inl;
	size_t ninl;
	/* the patterns whose copies were read: a process forked from a traced
	 * one asks again, and the tree is not read twice */
	char **inl_read;
	size_t ninl_read;
	unsigned int users;
	struct attached_file *next;
};

struct tracer_target {
	struct tracer *t;
	pid_t pid;
	struct attached_file *file;
	uint64_t threshold_ns;
	struct binary_match match;
	struct tracer_func *funcs;
	struct slot **slots;
	uint64_t *swept_orphans; /* purged by userspace, per function */
	uint64_t *swept_tail_exits;
	struct latency **base; /* a shared histogram's counts when added, per function */
	/* per function: what it counted before it was detached (NULL: never) */
	struct latency **kept;
	/* per function: the slowest calls kept (tracer_target__keep_slowest),
	 * and whether this target asked for its arguments */
	struct target_keep {
		uint32_t n;
		uint64_t floor_ns;
		bool args;
	} * keep;
	size_t nfuncs;
	/* processes it forked that ended before they could be probed, while
	 * its probes were its own (follow__retire_gone) */
	uint64_t children_unprobed;
	/* its cgroup and executable, where tracer_opts.follow_started (all 0:
	 * unknown): processes started there lent its histograms */
	struct rw_exec_key exec_key;
	struct tracer_target *next;
};

/* A namespace's share of the in-flight map and the ring buffer (struct rw_share). */
struct share {
	char *name;
	uint32_t idx; /* in the shares map; never 0 */
	size_t npids; /* processes assigned to it */
	struct share *next;
};

struct tracer {
	struct trace *skel;
	bool multi;
	/* tracer_opts.trampoline where the kernel allows it; else why not (NULL: not asked) */
	bool trampoline;
	const char *trampoline_why;
	const char *attach_why; /* why this attach mode: tracer__attach_why */
	int has_multi;		/* tracer__has_uprobe_multi */
	struct binary_cache *cache;
	bool own_cache;
	struct attached_file *files;
	struct tracer_target *targets;
	bool partial;
	uint32_t slow_calls_per_sec;
	struct idpool fn_ids;
	struct idpool hist_ids;
	int *hist_page_fds; /* RW_MAX_HIST_PAGES of them; -1: not made yet */
	/* per page: its slots given out or in quarantine */
	uint16_t *hist_page_used;
	/* pages made with no slot used, freed a few at a time (hist_pages__trim) */
	uint32_t hist_pages_empty;
	uint32_t hist_trim_at; /* where the last trim stopped */
	struct ring_buffer *rb;
	tracer_event_fn event_fn;
	void *event_ctx;
	size_t npolled; /* events delivered by this tracer__poll */
	int ncpus;
	void *percpu_buf;
	uint64_t next_sweep_ns;	    /* tracer__tick's next sweep, on clock__mono_ns */
	uint64_t hook_check_ns;	    /* hooks__tick's next look */
	uint64_t swept;		    /* frames the sweeps dropped */
	struct rw_share *shares_mm; /* the shares map, mapped */
	/* the context index (retwatch.h, RW_IDX_*), mapped; its frames are
	 * read by lookup, so its 8.5 MB are not mapped into the process */
	struct rw_idx_slot *idx_mm;
	struct share *shares;
	uint32_t share_contexts, share_events; /* each new share's limits */
	/* processes no longer traced: the next sweep drops their frames (no hit
	 * can end them) and gives their contexts back, then their shares; one
	 * pass over the map for however many went. Sorted by sweep. */
	pid_t *retired;
	size_t nretired, retired_cap;
	/* the node's processes by executable, for shared probes */
	struct exeprocs exe;
	/* proc_hists holds each process's start time: the kernel's programs
	 * read the same clock as /proc/PID/stat gives us */
	bool starttimes;
	/* the kinds an entry probe may sit on away from the first byte
	 * (tracer__set_site_kinds; 0 with tracer_opts.entry_at_start) */
	uint32_t site_kinds;
	uint64_t sweep_age_ns; /* tracer_opts, else TRACER_SWEEP_AGE_NS */
	uint64_t next_share_check_ns;
	const char *(*tenant_of)(pid_t pid, void *ctx);
	void *tenant_ctx;
	void (*hook_fn)(const char *fn, const char *target, const char *file, size_t nrets,
			const char *error, void *ctx);
	void *hook_ctx;
	uint64_t share_changes, share_change_failures;
	/* tracer_opts.capture_args; each function slot's parameters while its
	 * arguments are captured (RW_MAX_FUNCS, made when first asked) */
	bool capture_args;
	const struct func_params **args_of;
	/* tracer_opts.follow: the fork program's link (tracer_follow.c) */
	bool follow;
	bool follow_started; /* tracer_opts.follow_started, where the kernel can */
	struct bpf_link *fork_link;
	struct bpf_link *exec_link;
};

/* Where the entry probe of fi (of binary b) goes: tracer__entry_site's answer. */
int64_t tracer__site(const struct tracer *t, struct binary *b, const struct func_info *fi);

/*
 * tracer_follow.c: processes followed from their fork, where
 * tracer_opts.follow asks (each does nothing otherwise).
 */
/* Checks that the fork program attaches (it is attached while a process is
 * traced: a tracer tracing nothing holds no link). */
int follow__start(struct tracer *t, struct rw_error *err);
/* Target tt is traced: the processes its process forks (or, where
 * tracer_opts.follow_started, that start beside it) are lent its histograms. */
void follow__add(struct tracer *t, struct tracer_target *tt);
/* tt, the last target of its process, unlinked: the process is traced no
 * more; the fork program detached after the last. */
void follow__drop(struct tracer *t, struct tracer_target *tt);
/* The process whose histograms process pid counts in, forked by it; 0: none. */
pid_t follow__lender_of(const struct tracer *t, pid_t pid);
/*
 * The children that ended, or whose lender is traced no more, retired (the
 * sweep that follows drops their frames, given back to the share they were
 * taken from: their lender's) into *ret for follow__forget; their count.
 */
size_t follow__retire_gone(struct tracer *t, uint32_t **ret);
/* Drops the follow entries of the n children in gone (follow__retire_gone), then gone. */
void follow__forget(struct tracer *t, uint32_t *gone, size_t n);

/* tracer_args.c: a slot's arguments no longer captured (its id is given back). */
void slot__forget_args(struct tracer *t, uint32_t fn_id);
/* An event's arguments (rw_event.args_kept) into ev. */
struct rw_event;
void event__args(const struct tracer *t, const struct rw_event *e, struct tracer_event *ev);

/*
 * tracer_hist.c: ids of the kernel's function and histogram slots, and the
 * histogram slots in their pages.
 */
/* The size of one CPU's value in a histogram page. */
size_t hist_value_size(void);
void idpool__release(struct idpool *p, uint32_t id, bool quarantine);
void idpool__clear(struct idpool *p);
void ids__take_back(struct tracer *t, struct idpool *p, bool wait);
void hist_pages__trim(struct tracer *t, uint64_t budget_ns);
uint64_t cookie__make(uint32_t fn_id, uint32_t hist, pid_t pid, uint64_t flags);
/* The cookie of slot s's probes in batch b, with flags (RW_COOKIE_*). */
uint64_t batch__cookie(const struct slot *s, const struct batch *b, uint64_t flags);

/* ---- hook jumps (tracer_hooks.c) ---- */
/* Attaches rw_hook at slot s's hook jumps in b's process (cookie: b's), their sites in the kernel's map. */
int hooks__attach(struct tracer *t, struct attached_file *f, const struct slot *s, struct batch *b,
		  uint64_t cookie, struct rw_error *err);
/* Function slot fn_id is gone: its hook sites too. */
void hooks__forget(struct tracer *t, uint32_t fn_id);
/* Closes b's probes at hook targets' RETs. */
void hook_exits__free(struct batch *b);
/* A hook target sent by rw_hook (ring_buffer callback). */
int hooks__on_target(void *ctx, void *data, size_t len);
/*
 * Where a followed hook's calls went somewhere new (rw_hooks.missed), its
 * probes are attached again to read where, a few times at most; attached
 * again and reading nothing new, they go after a while.
 */
void hooks__tick(struct tracer *t, uint64_t now);
int ids__alloc(struct tracer *t, struct idpool *p, uint32_t *ret_id);
int hist_slot__alloc(struct tracer *t, uint32_t fn_id, uint32_t tgid, uint32_t *ret,
		     struct rw_error *err);
int hist_slot__set_threshold(struct tracer *t, uint32_t i, const struct rw_threshold *th);
/* b's threshold_ns and keep into its histogram slot's hist_thresholds. */
int batch__set_threshold(struct tracer *t, const struct batch *b);
void hist_slot__release(struct tracer *t, uint32_t i);
int hist_slot__read(struct tracer *t, uint32_t i, struct latency *ret);

/*
 * tracer_slots.c: attached files, their function slots, each slot's probes
 * (batches), runtime.morestack's, and a target's slots attached and given
 * back.
 */
void batch__free(struct tracer *t, struct batch *b);
bool batch__attached(const struct batch *b);
int batch__attach(struct tracer *t, struct attached_file *f, struct slot *s, struct batch *b,
		  struct rw_error *err);
int file__open(struct tracer *t, pid_t pid, const char *path, struct attached_file **ret,
	       struct rw_error *err);
void file__free(struct tracer *t, struct attached_file *f);
void file__drop(struct tracer *t, struct attached_file *f);
void file__sync_morestack(struct tracer *t, struct attached_file *f);
void file__drop_morestack(struct tracer *t, struct attached_file *f, pid_t pid);
struct slot *file__find_slot(struct attached_file *f, uint64_t address);
int file__new_slot(struct tracer *t, struct attached_file *f, const struct func_info *fi,
		   struct slot **ret, struct rw_error *err);
void file__drop_slots(struct tracer *t, struct attached_file *f, struct slot **slots, size_t n);
int slot__write(struct tracer *t, const struct slot *s);
int slot__activate(struct tracer *t, struct slot *s, struct rw_error *err);
bool slot_used_in(const struct tracer *t, const struct slot *s, pid_t pid);
struct batch *slot__batch(const struct slot *s, pid_t pid);
bool slot__hist(const struct slot *s, pid_t pid, uint32_t *ret);
int slot__attach_pid(struct tracer *t, struct attached_file *f, struct slot *s, pid_t pid,
		     uint64_t threshold_ns, struct rw_error *err);
void slot__drop_pid(struct tracer *t, struct slot *s, pid_t pid);
void slot__unuse(struct tracer *t, struct attached_file *f, struct slot *s, pid_t pid);
int target__attach(struct tracer *t, struct tracer_target *tt, uint64_t threshold_ns,
		   struct rw_error *err);
int target__add_maps(struct tracer *t, struct tracer_target *tt, struct rw_error *err);
int hist__create(struct tracer *t, struct tracer_target *tt, size_t i, struct rw_error *err);

/*
 * tracer_inline.c: the inlined copies of the functions a target's patterns
 * name, read once per file and name; in the agent (partial), only those its
 * analyzer read off the main loop (binary__inlined_kept).
 */
int inline__collect(struct tracer *t, struct tracer_target *tt, const char *const *patterns,
		    size_t npatterns);
const struct inl_probes *inline__find(const struct attached_file *f, const char *name);
void inline__free(struct attached_file *f);
/*
 * The functions of f that exist only inlined, with a copy probed, whose
 * names a pattern names: up to max into ret's info; their count (all of them).
 */
size_t inline__own_for(const struct attached_file *f, const char *const *patterns, size_t npatterns,
		       struct tracer_func *ret, size_t max);
/* Whether unmatched pattern i of m names a function of f that exists only inlined, probed. */
bool inline__covers(const struct attached_file *f, const struct binary_match *m, size_t i);

/*
 * tracer_shared_probes.c: a function's probes shared by every process of its
 * file, or each traced process's own.
 */
void exe__refresh_for(struct tracer *t, pid_t pid);
bool exe__is(const struct exeproc *e, const struct attached_file *f);
bool slot__shareable(const struct tracer *t, const struct attached_file *f, const struct slot *s,
		     uint64_t now);
int slot__share(struct tracer *t, struct attached_file *f, struct slot *s, struct rw_error *err);
int slot__unshare(struct tracer *t, struct attached_file *f, struct slot *s, struct rw_error *err);
void share__check(struct tracer *t, uint64_t now);

/*
 * tracer_ns_shares.c: namespaces' shares of the in-flight map and the ring
 * buffer.
 */
uint32_t share__idx_of(const struct tracer *t, uint32_t tgid);
/* The share tgid's contexts and chunks are taken from, as the kernel's share__of finds it. */
uint32_t share__charged_idx(const struct tracer *t, uint32_t tgid);
const char *share__name_of(const struct tracer *t, pid_t pid);
void share__put(__u64 *n);
void share__drop_pid(struct tracer *t, pid_t pid);

/*
 * tracer_sweep.c: in-flight frames dropped, of processes no longer traced
 * (retired) or untouched too long.
 */
void pid__retire(struct tracer *t, pid_t pid);
void pid__unretire(struct tracer *t, pid_t pid);

#endif

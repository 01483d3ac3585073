// SPDX-License-Identifier: MIT
/*
 * The tracing engine over bpf/trace.bpf.c: function slots, probes of each
 * traced process, per-process histogram slots, slow-call events.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "../bpf/retwatch.h"
#include "base/clock.h"
#include "trace/exeprocs.h"
#include "trace/tracer.h"
#include "trace.skel.h"
#include "trace/uprobe.h"

#define MORESTACK "runtime.morestack"
/* tracer__tick: frames untouched this long are of calls that will not return */
#define SWEEP_AGE_NS (60 * NS_PER_S)
/*
 * A context with no call in flight holds only its slot (and the stack bounds
 * it cached): given back after this long untouched, as the threads a server
 * starts per request end (a thread id comes back only after pid_max others).
 */
#define SWEEP_IDLE_AGE_NS (5 * NS_PER_S)
#define SWEEP_EVERY_NS (5 * NS_PER_S)
/*
 * Whether each function's probes should be shared by every process of its
 * file, or each traced process's own, is checked this often: a process of
 * the file that is not traced (another namespace's pod of the same image)
 * traps on shared probes until then.
 */
#define SHARE_CHECK_EVERY_NS (1 * NS_PER_S)
/* A decision at attach time trusts a list of the node's processes this old. */
#define SHARE_SCAN_FRESH_NS (NS_PER_S / 2)
/*
 * A process of the file not traced for a function keeps its probes shared
 * this long: while it is about to be (the agent attaches a probe's pods a
 * few at a time; a new replica of the same namespace starts), or was just
 * (a probe being deleted). Only for processes the caller says are of the
 * same tenant (tracer_opts.tenant_of) or does not know yet (a pod just
 * started), or that were traced for it.
 */
#define SHARE_GRACE_NS (10 * NS_PER_S)
/* ... and a process that stopped being traced for it, this long. */
#define SHARE_DROP_GRACE_NS (2 * NS_PER_S)
/* Changes between shared and per-process probes stop for the turn after this long. */
#define SHARE_CHANGE_BUDGET_NS (NS_PER_S / 10)

/* One function of one file, with a slot in the kernel's funcs map. */
struct slot {
	uint32_t fn_id;
	uint64_t address;
	const struct func_info *info; /* owned by the file's binary */
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
};

struct dropped_pid {
	pid_t pid;
	uint64_t starttime; /* the process's (exeprocs), 0: not known */
	uint64_t ns;
};

/* Probes attached together, in one process (or every process: shared). */
struct batch {
	struct uprobe_links entry, ret;
	pid_t pid;	/* they trap in this process alone; -1: in every process */
	uint32_t fn_id; /* a function's: its slot, with pid the key of proc_hists */
	/* a function's: the histogram slot of (function, pid), in the cookies */
	bool has_hist;
	uint32_t hist;
	/* calls of (function, pid) at least this slow are sent (hist_thresholds) */
	uint64_t threshold_ns;
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
	size_t nfuncs;
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
	struct ring_buffer *rb;
	tracer_event_fn event_fn;
	void *event_ctx;
	size_t npolled; /* events delivered by this tracer__poll */
	int ncpus;
	void *percpu_buf;
	uint64_t next_sweep_ns;	    /* tracer__tick's next sweep, on clock__mono_ns */
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
	uint64_t next_share_check_ns;
	const char *(*tenant_of)(pid_t pid, void *ctx);
	void *tenant_ctx;
	uint64_t share_changes, share_change_failures;
};

static const char *const stat_names[] = {
	[RW_STAT_OTHER_PROCESS] = "other_process",
	[RW_STAT_NOT_G_STACK] = "not_g_stack",
	[RW_STAT_READ_FAILED] = "read_failed",
	[RW_STAT_FRAMES_FULL] = "frames_full",
	[RW_STAT_CONTEXTS_FULL] = "contexts_full",
	[RW_STAT_NO_FUNC] = "no_func",
	[RW_STAT_NO_HIST] = "no_hist",
	[RW_STAT_UNMATCHED_RET] = "unmatched_ret",
	[RW_STAT_ORPHANS_PURGED] = "orphans_purged",
	[RW_STAT_GOID_CHANGED] = "goid_changed",
	[RW_STAT_RESTARTS] = "restarts",
	[RW_STAT_RINGBUF_FULL] = "ringbuf_full",
	[RW_STAT_MORESTACK_READ_FAILED] = "morestack_read_failed",
	[RW_STAT_FRAMES_INSERT_FAILED] = "frames_insert_failed",
	[RW_STAT_SLOW_LIMITED] = "slow_limited",
	[RW_STAT_TAIL_CLOSED] = "tail_closed",
	[RW_STAT_TAIL_EXITS] = "tail_exits",
	[RW_STAT_SHARE_CONTEXTS] = "share_contexts",
	[RW_STAT_SHARE_EVENTS] = "share_events",
	[RW_STAT_CONTEXTS_HASHED] = "contexts_hashed",
	[RW_STAT_UNTRACED_HITS] = "untraced_hits",
};
_Static_assert(sizeof(stat_names) / sizeof(stat_names[0]) == RW_STAT__MAX,
	       "a name for every enum rw_stat");
_Static_assert(TRACER_MAX_DEPTH == RW_MAX_DEPTH, "tracer.h says the kernel's bound");
_Static_assert(TRACER_MAX_CONTEXTS == RW_MAX_CONTEXTS, "tracer.h says the in-flight map's room");
_Static_assert(TRACER_MAX_CHUNKS == RW_MAX_CHUNKS, "tracer.h says the deep chunks' room");
_Static_assert(TRACER_DEEP_FRAMES == RW_MAX_FRAMES && RW_MAX_FRAMES == RW_CHUNK_FRAMES,
	       "tracer.h says where chunks begin and their size");
_Static_assert(RW_STAT__MAX <= TRACER_MAX_COUNTS, "tracer_counters.all holds every counter");

/* The counters of calls the kernel side could not measure (tracer_counters.unmeasured). */
static const enum rw_stat unmeasured_stats[] = {
	RW_STAT_FRAMES_FULL,
	RW_STAT_CONTEXTS_FULL,
	RW_STAT_SHARE_CONTEXTS, /* the namespace's share of them */
	RW_STAT_READ_FAILED,
	RW_STAT_NOT_G_STACK,
	RW_STAT_NO_HIST,
	RW_STAT_NO_FUNC,
	RW_STAT_FRAMES_INSERT_FAILED,
	RW_STAT_MORESTACK_READ_FAILED,
};

const char *tracer__attach_mode(const struct tracer *t)
{
	return t->multi ? "uprobe_multi" : "perf_event";
}

/* struct latency's place in struct rw_hist: after the slot's owner */
#define HIST_COUNTS offsetof(struct rw_hist, calls)
_Static_assert(
	HIST_COUNTS + sizeof(struct latency) == offsetof(struct rw_hist, rate) &&
		HIST_COUNTS + offsetof(struct latency, min_ns) ==
			offsetof(struct rw_hist, min_ns) &&
		HIST_COUNTS + offsetof(struct latency, lost) == offsetof(struct rw_hist, lost) &&
		HIST_COUNTS + offsetof(struct latency, slow_dropped) ==
			offsetof(struct rw_hist, slow_dropped) &&
		HIST_COUNTS + offsetof(struct latency, tail_closed) ==
			offsetof(struct rw_hist, tail_closed) &&
		HIST_COUNTS + offsetof(struct latency, tail_exits) ==
			offsetof(struct rw_hist, tail_exits) &&
		HIST_COUNTS + offsetof(struct latency, buckets) ==
			offsetof(struct rw_hist, buckets),
	"struct latency must mirror struct rw_hist from its counts to its rate limiter's state");

static size_t hist_value_size(void)
{
	return (sizeof(struct rw_hist) + 7) & ~(size_t)7;
}

static int load_skel(struct tracer *t, bool multi, struct rw_error *err)
{
	enum bpf_attach_type type = multi ? UPROBE_MULTI_ATTACH_TYPE : 0;
	int e;

	t->skel = trace__open();
	if (!t->skel)
		return rw_error_set(err, errno, "failed to open the BPF programs: %s",
				    strerror(errno));
	bpf_program__set_expected_attach_type(t->skel->progs.rw_entry, type);
	bpf_program__set_expected_attach_type(t->skel->progs.rw_ret, type);
	e = trace__load(t->skel);
	if (e) {
		trace__destroy(t->skel);
		t->skel = NULL;
		if (e == -EACCES || e == -EINVAL)
			return rw_error_set(err, -e,
					    "the kernel's verifier rejected the BPF programs: %s "
					    "(RETWATCH_DEBUG=1 shows its log)",
					    strerror(-e));
		if (e == -EPERM)
			return rw_error_set(
				err, EPERM,
				"failed to load the BPF programs: %s (retwatch needs root, "
				"or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE)",
				strerror(-e));
		return rw_error_set(err, -e, "failed to load the BPF programs: %s", strerror(-e));
	}
	return 0;
}

/* Counts an event consumed; at the budget, stops the poll (libbpf hands on a
 * negative return, the event consumed, the next ones left in the buffer). */
static int polled(struct tracer *t)
{
	return ++t->npolled >= TRACER_POLL_MAX_EVENTS ? -ECANCELED : 0;
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct tracer *t = ctx;
	const struct rw_event *e = data;
	uint64_t stack[RW_STACK_DEPTH + 1];
	size_t n = 0, fp;
	struct tracer_event ev;

	if (len < sizeof(*e) || !t->event_fn)
		return polled(t);
	fp = e->stack_bytes > 0 ? (size_t)e->stack_bytes / sizeof(__u64) : 0;
	if (fp > RW_STACK_DEPTH)
		fp = RW_STACK_DEPTH;
	/* the RET's own address, then its caller, then the frame-pointer walk,
	 * up to the first address no user code can have (a walk through code
	 * without frame pointers reads garbage) */
	for (size_t i = 0; i < fp && unwind__canonical(e->stack[i]); i++) {
		stack[n++] = e->stack[i];
		if (i == 0 && e->ret_addr && unwind__canonical(e->ret_addr))
			stack[n++] = e->ret_addr;
	}
	ev = (struct tracer_event){
		.pid = e->pid,
		.tid = e->tid,
		.goid = e->goid,
		.start_ns = e->start_ns,
		.duration_ns = e->duration_ns,
		.fn_id = e->fn_id,
		.stack = stack,
		.nstack = n,
		.regs = { e->regs.ip, e->regs.sp, e->regs.bp, e->regs.bx, e->regs.r12, e->regs.r13,
			  e->regs.r14, e->regs.r15 },
	};
	/* the record is a struct rw_event_copy when it says it carries a copy */
	if (e->copy_bytes && e->copy_bytes <= RW_STACK_COPY &&
	    len >= sizeof(struct rw_event_copy)) {
		ev.stack_copy = ((const struct rw_event_copy *)data)->copy;
		ev.stack_copy_len = e->copy_bytes;
		ev.stack_copy_addr = e->copy_addr;
	}
	t->event_fn(&ev, t->event_ctx);
	return polled(t);
}

/*
 * Each traced function holds a link per program (two descriptors) so that
 * it can be detached alone: take the hard limit of open files, as far as
 * it goes, rather than the soft one (often 1024).
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

struct tracer *tracer__new(const struct tracer_opts *opts, struct rw_error *err)
{
	struct tracer *t = calloc(1, sizeof(*t));
	int e;

	if (!t) {
		rw_error_set(err, ENOMEM, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	raise_nofile();
	t->ncpus = libbpf_num_possible_cpus();
	t->next_sweep_ns = clock__mono_ns() + SWEEP_EVERY_NS;
	t->cache = opts ? opts->cache : NULL;
	t->partial = opts && opts->partial;
	t->slow_calls_per_sec = opts ? opts->slow_calls_per_sec : 0;
	t->share_contexts = opts ? opts->share_contexts : 0;
	t->share_events = opts ? opts->share_slow_calls_per_sec : 0;
	t->tenant_of = opts ? opts->tenant_of : NULL;
	t->tenant_ctx = opts ? opts->tenant_ctx : NULL;
	if (!t->cache) {
		t->cache = binary_cache__new(64);
		t->own_cache = true;
	}
	t->percpu_buf = calloc(t->ncpus > 0 ? t->ncpus : 1, hist_value_size());
	t->fn_ids.max = RW_MAX_FUNCS;
	t->hist_ids.max = RW_MAX_HISTS;
	t->hist_ids.lowest_first = true;
	t->hist_page_fds = malloc(RW_MAX_HIST_PAGES * sizeof(*t->hist_page_fds));
	t->hist_page_used = calloc(RW_MAX_HIST_PAGES, sizeof(*t->hist_page_used));
	for (int i = 0; t->hist_page_fds && i < RW_MAX_HIST_PAGES; i++)
		t->hist_page_fds[i] = -1;
	if (t->ncpus <= 0 || !t->cache || !t->percpu_buf || !t->hist_page_fds ||
	    !t->hist_page_used) {
		e = rw_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	switch (opts ? opts->attach_mode : TRACER_ATTACH_AUTO) {
	case TRACER_ATTACH_AUTO:
		e = load_skel(t, true, err);
		if (!e && !uprobe_multi_supported(bpf_program__fd(t->skel->progs.rw_entry))) {
			trace__destroy(t->skel);
			e = load_skel(t, false, err);
		} else if (!e) {
			t->multi = true;
		}
		break;
	case TRACER_ATTACH_MULTI:
		e = load_skel(t, true, err);
		if (!e && !uprobe_multi_supported(bpf_program__fd(t->skel->progs.rw_entry)))
			e = rw_error_set(
				err, EOPNOTSUPP,
				"this kernel has no uprobe_multi links (Linux 6.6 or later)");
		t->multi = true;
		break;
	default: e = load_skel(t, false, err); break;
	}
	if (e)
		goto fail;
	t->shares_mm = mmap(NULL, RW_MAX_SHARES * sizeof(struct rw_share), PROT_READ | PROT_WRITE,
			    MAP_SHARED, bpf_map__fd(t->skel->maps.shares), 0);
	if (t->shares_mm == MAP_FAILED) {
		t->shares_mm = NULL;
		e = rw_error_set(err, errno, "failed to map the namespaces' shares: %s",
				 strerror(errno));
		goto fail;
	}
	t->idx_mm = mmap(NULL, RW_IDX_SLOTS * sizeof(struct rw_idx_slot), PROT_READ | PROT_WRITE,
			 MAP_SHARED, bpf_map__fd(t->skel->maps.ctx_idx), 0);
	if (t->idx_mm == MAP_FAILED) {
		e = rw_error_set(err, errno, "failed to map the context index: %s",
				 strerror(errno));
		goto fail;
	}
	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.events), on_event, t, NULL);
	if (!t->rb) {
		e = rw_error_set(err, errno, "failed to create the ring buffer: %s",
				 strerror(errno));
		goto fail;
	}
	return t;
fail:
	tracer__free(t);
	errno = -e;
	return NULL;
}

/* ---- ids of kernel slots ---- */

/*
 * Takes back the ids in quarantine once no link is closing (wait: waits for
 * that); returns how many, now the last of p->free.
 */
static size_t idpool__take_back(struct idpool *p, bool wait)
{
	size_t n = p->nquarantine;
	uint32_t *ids;

	if (!n)
		return 0;
	if (wait)
		uprobe_links__wait_closed();
	else if (uprobe_links__closing())
		return 0;
	ids = realloc(p->free, (p->nfree + n) * sizeof(*ids));
	if (!ids)
		return 0;
	p->free = ids;
	memcpy(p->free + p->nfree, p->quarantine, n * sizeof(*ids));
	p->nfree += n;
	p->nquarantine = 0;
	return n;
}

/* A free id (ids__alloc takes back the quarantined ones first). */
static int idpool__alloc(struct idpool *p, uint32_t *ret_id)
{
	size_t k = 0;

	if (p->nfree) {
		for (size_t i = 1; p->lowest_first && i < p->nfree; i++)
			if (p->free[i] < p->free[k])
				k = i;
		*ret_id = p->free[k];
		p->free[k] = p->free[--p->nfree];
		return 0;
	}
	if (p->next >= p->max)
		return -ENOSPC;
	*ret_id = p->next++;
	return 0;
}

/* Gives id back; quarantine: a link that may still be closing holds it. */
static void idpool__release(struct idpool *p, uint32_t id, bool quarantine)
{
	uint32_t **list = quarantine ? &p->quarantine : &p->free;
	size_t *n = quarantine ? &p->nquarantine : &p->nfree;
	uint32_t *ids = realloc(*list, (*n + 1) * sizeof(*ids));

	if (!ids)
		return; /* the id leaks */
	*list = ids;
	ids[(*n)++] = id;
}

static void idpool__clear(struct idpool *p)
{
	free(p->free);
	free(p->quarantine);
}

/* ---- histogram slots ---- */

/* Makes page i of the histograms when it is not there. 0 or -errno. */
static int hist_page__make(struct tracer *t, uint32_t i)
{
	int fd, e = 0;

	if (t->hist_page_fds[i] >= 0)
		return 0;
	fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "rw_hist_page", sizeof(__u32),
			    sizeof(struct rw_hist), RW_HIST_PAGE, NULL);
	if (fd < 0)
		return -errno;
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.hist_pages), &i, &fd, BPF_ANY)) {
		e = -errno;
		close(fd);
		return e;
	}
	t->hist_page_fds[i] = fd;
	return 0;
}

/*
 * A slot of page i is free again, out of quarantine: the last one frees the
 * page (a probe deleted gives its memory back; a page is made again when
 * needed).
 */
static void hist_page__unuse(struct tracer *t, uint32_t i)
{
	if (!t->hist_page_used[i] || --t->hist_page_used[i] || t->hist_page_fds[i] < 0)
		return;
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.hist_pages), &i);
	close(t->hist_page_fds[i]);
	t->hist_page_fds[i] = -1;
}

/* idpool__take_back, with the pages of histogram slots back out of quarantine freed if empty. */
static void ids__take_back(struct tracer *t, struct idpool *p, bool wait)
{
	size_t n = idpool__take_back(p, wait);

	for (size_t k = p->nfree - n; p == &t->hist_ids && k < p->nfree; k++)
		hist_page__unuse(t, p->free[k] / RW_HIST_PAGE);
}

static int ids__alloc(struct tracer *t, struct idpool *p, uint32_t *ret_id)
{
	ids__take_back(t, p, false);
	if (!p->nfree && p->next >= p->max)
		ids__take_back(t, p, true);
	return idpool__alloc(p, ret_id);
}

/* Writes histogram slot i on every CPU: empty, owned by (fn_id, tgid) ((0, 0): nobody). */
static int hist_slot__reset(struct tracer *t, uint32_t i, uint32_t fn_id, uint32_t tgid)
{
	__u32 k = i % RW_HIST_PAGE;

	memset(t->percpu_buf, 0, hist_value_size() * t->ncpus);
	for (int cpu = 0; cpu < t->ncpus; cpu++) {
		struct rw_hist_key *owner = (void *)((char *)t->percpu_buf +
						     cpu * hist_value_size() +
						     offsetof(struct rw_hist, owner));

		owner->fn_id = fn_id;
		owner->tgid = tgid;
	}
	if (bpf_map_update_elem(t->hist_page_fds[i / RW_HIST_PAGE], &k, t->percpu_buf, BPF_ANY))
		return -errno;
	return 0;
}

/* A histogram slot for function fn_id in process tgid, empty. */
static int hist_slot__alloc(struct tracer *t, uint32_t fn_id, uint32_t tgid, uint32_t *ret,
			    struct rw_error *err)
{
	uint32_t i;
	int e;

	if (ids__alloc(t, &t->hist_ids, &i))
		return rw_error_set(err, ENOSPC,
				    "too many traced functions over all processes (at most %d at "
				    "once)",
				    RW_MAX_HISTS);
	e = hist_page__make(t, i / RW_HIST_PAGE);
	if (!e) {
		t->hist_page_used[i / RW_HIST_PAGE]++;
		e = hist_slot__reset(t, i, fn_id, tgid);
		if (e)
			hist_page__unuse(t, i / RW_HIST_PAGE);
	}
	if (e) {
		idpool__release(&t->hist_ids, i, false); /* no probe has it */
		return rw_error_set(err, -e, "failed to make a histogram: %s", strerror(-e));
	}
	*ret = i;
	return 0;
}

/* Calls counted in slot i at least threshold_ns slow are sent (0: none). */
static int hist_slot__set_threshold(struct tracer *t, uint32_t i, uint64_t threshold_ns)
{
	__u64 v = threshold_ns;

	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.hist_thresholds), &i, &v, BPF_ANY))
		return -errno;
	return 0;
}

/*
 * Takes slot i back: it counts nothing more (its owner cleared), and is
 * given out again once its links are closed.
 */
static void hist_slot__release(struct tracer *t, uint32_t i)
{
	hist_slot__reset(t, i, 0, 0);
	hist_slot__set_threshold(t, i, 0);
	idpool__release(&t->hist_ids, i, true);
}

/* Reads histogram slot i: the per-CPU counts summed. */
static int hist_slot__read(struct tracer *t, uint32_t i, struct latency *ret)
{
	__u32 k = i % RW_HIST_PAGE;

	if (bpf_map_lookup_elem(t->hist_page_fds[i / RW_HIST_PAGE], &k, t->percpu_buf))
		return -errno;
	memset(ret, 0, sizeof(*ret));
	for (int cpu = 0; cpu < t->ncpus; cpu++) {
		struct latency one;

		/* struct latency mirrors struct rw_hist's counts field by field */
		memcpy(&one, (const char *)t->percpu_buf + cpu * hist_value_size() + HIST_COUNTS,
		       sizeof(one));
		latency__merge(ret, &one);
	}
	return 0;
}

static void batch__free(struct tracer *t, struct batch *b)
{
	if (!b)
		return;
	uprobe_links__close(&b->entry);
	uprobe_links__close(&b->ret);
	if (b->has_hist) {
		struct rw_hist_key k = { .fn_id = b->fn_id, .tgid = (uint32_t)b->pid };

		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.proc_hists), &k);
		hist_slot__release(t, b->hist);
	}
	free(b);
}

static void file__free(struct tracer *t, struct attached_file *f)
{
	if (!f)
		return;
	while (f->morestack) {
		struct batch *b = f->morestack;

		f->morestack = b->next;
		batch__free(t, b);
	}
	batch__free(t, f->morestack_shared);
	for (size_t i = 0; i < f->nslots; i++) {
		while (f->slots[i]->pids) {
			struct batch *b = f->slots[i]->pids;

			f->slots[i]->pids = b->next;
			batch__free(t, b);
		}
		batch__free(t, f->slots[i]->shared);
		free(f->slots[i]->dropped);
		free(f->slots[i]);
	}
	free(f->slots);
	binary__put(f->bin);
	free(f->name);
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

static void target__free(struct tracer_target *tt)
{
	if (!tt)
		return;
	binary_match__clear(&tt->match);
	free(tt->funcs);
	free(tt->slots);
	free(tt->swept_orphans);
	free(tt->swept_tail_exits);
	for (size_t i = 0; tt->base && i < tt->nfuncs; i++)
		free(tt->base[i]);
	free(tt->base);
	for (size_t i = 0; tt->kept && i < tt->nfuncs; i++)
		free(tt->kept[i]);
	free(tt->kept);
	free(tt);
}

void tracer__free(struct tracer *t)
{
	if (!t)
		return;
	while (t->targets)
		tracer__remove(t, t->targets);
	while (t->files) {
		struct attached_file *f = t->files;

		t->files = f->next;
		file__free(t, f);
	}
	/* nothing of ours stays attached once we return */
	uprobe_links__wait_closed();
	ring_buffer__free(t->rb);
	while (t->shares) {
		struct share *sh = t->shares;

		t->shares = sh->next;
		free(sh->name);
		free(sh);
	}
	if (t->shares_mm)
		munmap(t->shares_mm, RW_MAX_SHARES * sizeof(struct rw_share));
	if (t->idx_mm && t->idx_mm != MAP_FAILED)
		munmap(t->idx_mm, RW_IDX_SLOTS * sizeof(struct rw_idx_slot));
	trace__destroy(t->skel);
	for (int i = 0; t->hist_page_fds && i < RW_MAX_HIST_PAGES; i++)
		if (t->hist_page_fds[i] >= 0)
			close(t->hist_page_fds[i]);
	free(t->hist_page_fds);
	free(t->hist_page_used);
	if (t->own_cache)
		binary_cache__free(t->cache);
	idpool__clear(&t->fn_ids);
	idpool__clear(&t->hist_ids);
	free(t->retired);
	exeprocs__clear(&t->exe);
	free(t->percpu_buf);
	free(t);
}

/* ---- function slots ---- */

static int slot__write(struct tracer *t, const struct slot *s)
{
	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.funcs), &s->fn_id, &s->meta, BPF_ANY)
		       ? -errno
		       : 0;
}

static struct slot *file__find_slot(struct attached_file *f, uint64_t address)
{
	for (size_t i = 0; i < f->nslots; i++)
		if (f->slots[i]->address == address)
			return f->slots[i];
	return NULL;
}

/* ---- Go ---- */

/*
 * R14 holds g from Go 1.17 (the register ABI) on. Where the binary does not
 * say its version, the stack-bounds check in BPF still guards the key.
 */
static int go_minor(const struct binary *b)
{
	const char *v = binary__go_version(b);
	int major, minor;

	if (!v || sscanf(v, "go%d.%d", &major, &minor) != 2 || major != 1)
		return -1;
	return minor;
}

/* Offset of runtime.g.goid (see design.md); 0 when unknown. */
static uint32_t goid_offset(int minor)
{
	if (minor < 17)
		return 0;
	return (minor == 23 || minor == 24) ? 160 : 152;
}

static bool func_uses_go_key(const struct binary *b, const struct func_info *fi)
{
	int minor;

	if (!binary__is_go(b) || !fi->go)
		return false;
	minor = go_minor(b);
	return minor < 0 || minor >= 17;
}

/* ---- attach ---- */

static int file__open(struct tracer *t, const char *path, struct attached_file **ret,
		      struct rw_error *err)
{
	struct attached_file *f;
	struct stat st;
	int fd, e;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rw_error_set(err, errno, "failed to open %s: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		e = rw_error_set(err, errno, "failed to stat %s: %s", path, strerror(errno));
		close(fd);
		return e;
	}
	for (f = t->files; f; f = f->next) {
		if (f->dev == st.st_dev && f->ino == st.st_ino) {
			close(fd);
			*ret = f;
			return 0;
		}
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		close(fd);
		return rw_error_set(err, ENOMEM, "out of memory");
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->fd = fd;
	f->name = strdup(path);
	/* The kernel resolves this to the inode we opened, whatever the path now names. */
	snprintf(f->path, sizeof(f->path), "/proc/self/fd/%d", fd);
	f->bin = binary__open(t->cache, f->path, err);
	if (!f->bin) {
		e = -errno;
		/* say which file, not our descriptor */
		char msg[sizeof(err->msg)];

		if (err) {
			snprintf(msg, sizeof(msg), "%s", err->msg);
			rw_error_set(err, -e, "%s: %s", path, msg);
		}
		file__free(t, f);
		return e;
	}
	f->next = t->files;
	t->files = f;
	*ret = f;
	return 0;
}

static void file__drop(struct tracer *t, struct attached_file *f)
{
	struct attached_file **p;

	for (p = &t->files; *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			file__free(t, f);
			return;
		}
	}
}

/* The cookie of a probe of function slot fn_id, histogram slot hist, in process pid (bpf/retwatch.h). */
static uint64_t cookie__make(uint32_t fn_id, uint32_t hist, pid_t pid, uint64_t flags)
{
	return fn_id | (uint64_t)hist << RW_COOKIE_HIST_SHIFT | flags |
	       (uint64_t)(uint32_t)pid << RW_COOKIE_TGID_SHIFT;
}

/*
 * runtime.morestack's probe in process pid (-1: in every process), made;
 * NULL when the file is not Go or it failed.
 */
static struct batch *morestack__attach(struct tracer *t, struct attached_file *f, pid_t pid)
{
	const char *pattern = MORESTACK;
	struct binary_match m = { 0 };
	uint64_t offset, cookie = pid < 0 ? RW_COOKIE_MORESTACK | RW_COOKIE_SHARED
					  : cookie__make(0, 0, pid, RW_COOKIE_MORESTACK);
	struct batch *b = NULL;

	if (!binary__is_go(f->bin) || binary__match(f->bin, &pattern, 1, 1, &m, NULL) ||
	    m.nfuncs != 1 || !(b = calloc(1, sizeof(*b))))
		goto out;
	uprobe_links__init(&b->entry);
	uprobe_links__init(&b->ret);
	b->pid = pid;
	offset = m.funcs[0]->file_offset;
	if (uprobe_attach_pid(&b->entry, bpf_program__fd(t->skel->progs.rw_entry), t->multi,
			      f->path, &offset, &cookie, 1, pid, NULL)) {
		batch__free(t, b);
		b = NULL;
	}
out:
	binary_match__clear(&m);
	return b;
}

/* Go binaries: mark restarts of a function's entry after runtime.morestack, in process pid. */
static void file__attach_morestack(struct tracer *t, struct attached_file *f, pid_t pid)
{
	struct batch *b;

	if (f->morestack_shared)
		return; /* every process has it */
	for (b = f->morestack; b; b = b->next)
		if (b->pid == pid)
			return;
	b = morestack__attach(t, f, pid);
	if (b) {
		b->next = f->morestack;
		f->morestack = b;
	}
}

/*
 * The morestack probe is shared where every function of the file is (every
 * process running the file is traced), else each traced process's own.
 * Both kinds mark a restart alike, so the new kind goes on before the old
 * one comes off.
 */
static void file__sync_morestack(struct tracer *t, struct attached_file *f)
{
	bool want = f->nslots > 0;

	for (size_t i = 0; i < f->nslots; i++)
		want = want && (f->slots[i]->meta.flags & RW_FUNC_SHARED);
	if (want && !f->morestack_shared) {
		f->morestack_shared = morestack__attach(t, f, -1);
		while (f->morestack_shared && f->morestack) {
			struct batch *b = f->morestack;

			f->morestack = b->next;
			batch__free(t, b);
		}
	} else if (!want && f->morestack_shared) {
		struct batch *b = f->morestack_shared;

		f->morestack_shared = NULL;
		for (const struct tracer_target *tt = t->targets; tt; tt = tt->next)
			if (tt->file == f)
				file__attach_morestack(t, f, tt->pid);
		batch__free(t, b);
	}
}

/* Takes the morestack probe out of process pid. */
static void file__drop_morestack(struct tracer *t, struct attached_file *f, pid_t pid)
{
	for (struct batch **p = &f->morestack; *p; p = &(*p)->next) {
		if ((*p)->pid == pid) {
			struct batch *b = *p;

			*p = b->next;
			batch__free(t, b);
			return;
		}
	}
}

/*
 * The x86 kernel refuses uprobes on instructions with a LOCK or an ES, CS,
 * SS or DS segment prefix: say which function and site, before attaching.
 */
static int check_probe_site(const struct attached_file *f, const struct func_info *fi, int64_t off,
			    struct rw_error *err)
{
	uint8_t insn[15];
	size_t i;

	if (binary__read(f->bin, fi->address + off, insn, sizeof(insn)))
		return 0; /* near the end of the segment: attaching will say */
	for (i = 0; i < sizeof(insn); i++) {
		switch (insn[i]) {
		case 0xf0:
		case 0x26:
		case 0x2e:
		case 0x36:
		case 0x3e:
			return rw_error_set(err, EOPNOTSUPP,
					    "cannot trace %s: the kernel refuses uprobes on the "
					    "instruction at %s+0x%llx (it has a LOCK or segment "
					    "prefix); choose another function",
					    fi->name, fi->name, (long long)off);
		case 0x66:
		case 0x67:
		case 0xf2:
		case 0xf3:
		case 0x64:
		case 0x65: continue; /* other prefixes */
		default: return 0;
		}
	}
	return 0;
}

/* The tail-called functions' RETs a slot probes: none for an entry-only function. */
static size_t slot__ntail_returns(const struct slot *s)
{
	return s->meta.flags & RW_FUNC_ENTRY_ONLY ? 0 : s->info->ntail_returns;
}

/*
 * Attaches slot s's probes in b's process, each with the cookie of the
 * function and its histogram slot in that process.
 */
static int batch__attach(struct tracer *t, struct attached_file *f, struct slot *s, struct batch *b,
			 struct rw_error *err)
{
	uint64_t *eoff = NULL, *ecookie = NULL, *roff = NULL, *rcookie = NULL;
	uint64_t cookie = b->pid < 0 ? s->fn_id | RW_COOKIE_SHARED
				     : cookie__make(s->fn_id, b->hist, b->pid, 0);
	struct slot **slots = &s;
	size_t ne = 0, nr = 0, nret = 0, n = 1;
	int e = -ENOMEM;

	for (size_t i = 0; i < n; i++)
		nret += slots[i]->info->nreturns + slot__ntail_returns(slots[i]);
	eoff = calloc(n, sizeof(*eoff));
	ecookie = calloc(n, sizeof(*ecookie));
	roff = calloc(nret + 1, sizeof(*roff));
	rcookie = calloc(nret + 1, sizeof(*rcookie));
	if (!eoff || !ecookie || !roff || !rcookie) {
		rw_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct func_info *fi = slots[i]->info;

		e = check_probe_site(f, fi, 0, err);
		for (size_t k = 0;
		     !e && !(slots[i]->meta.flags & RW_FUNC_ENTRY_ONLY) && k < fi->nreturns; k++)
			e = check_probe_site(f, fi, fi->returns[k], err);
		for (size_t k = 0; !e && k < slot__ntail_returns(slots[i]); k++) {
			uint64_t addr;

			/* tail_returns are file offsets: the site's address may differ */
			if (!binary__offset_to_addr(f->bin, fi->file_offset + fi->tail_returns[k],
						    &addr))
				e = check_probe_site(f, fi, (int64_t)(addr - fi->address), err);
		}
		if (e)
			goto out;
		eoff[ne] = fi->file_offset;
		ecookie[ne++] = cookie;
		if (slots[i]->meta.flags & RW_FUNC_ENTRY_ONLY)
			continue;
		for (size_t k = 0; k < fi->nreturns && nr < nret; k++) {
			roff[nr] = fi->file_offset + fi->returns[k];
			rcookie[nr++] = cookie;
		}
		/* the RETs of the functions it tail-calls: ended at its entry depth */
		for (size_t k = 0; k < slot__ntail_returns(slots[i]) && nr < nret; k++) {
			roff[nr] = fi->file_offset + fi->tail_returns[k];
			rcookie[nr++] = cookie | RW_COOKIE_TAIL;
		}
	}
	e = uprobe_attach_pid(&b->entry, bpf_program__fd(t->skel->progs.rw_entry), t->multi,
			      f->path, eoff, ecookie, ne, b->pid, err);
	if (!e && nr)
		e = uprobe_attach_pid(&b->ret, bpf_program__fd(t->skel->progs.rw_ret), t->multi,
				      f->path, roff, rcookie, nr, b->pid, err);
	if (e && err) {
		/* name the file as the user gave it, not our descriptor */
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		rw_error_set(err, -e, "%s: %s", f->name, msg);
	}
out:
	free(eoff);
	free(ecookie);
	free(roff);
	free(rcookie);
	return e;
}

/* A new slot for fi in f, not yet live: its probes are not attached. */
static int file__new_slot(struct tracer *t, struct attached_file *f, const struct func_info *fi,
			  struct slot **ret, struct rw_error *err)
{
	struct slot **slots = realloc(f->slots, (f->nslots + 1) * sizeof(*slots));
	struct slot *s;
	int minor;

	if (!slots)
		return rw_error_set(err, ENOMEM, "out of memory");
	f->slots = slots;
	s = calloc(1, sizeof(*s));
	if (!s)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (ids__alloc(t, &t->fn_ids, &s->fn_id)) {
		free(s);
		return rw_error_set(err, ENOSPC, "too many traced functions (at most %d at once)",
				    RW_MAX_FUNCS);
	}
	s->address = fi->address;
	s->info = fi;
	s->made_ns = clock__mono_ns();
	s->meta.size = fi->size;
	s->meta.max_events = t->slow_calls_per_sec;
	if (fi->mode == FUNC_MODE_ENTRY_ONLY)
		s->meta.flags |= RW_FUNC_ENTRY_ONLY;
	if (!fi->go && fi->ntail_calls)
		s->meta.flags |= RW_FUNC_TAIL_CALLS;
	if (!fi->go && (fi->ntail_untimed || fi->nindirect_jumps))
		s->meta.flags |= RW_FUNC_TAIL_UNTIMED;
	if (func_uses_go_key(f->bin, fi)) {
		minor = go_minor(f->bin);
		s->meta.flags |= RW_FUNC_GO;
		s->meta.goid_offset = goid_offset(minor < 0 ? 0 : minor);
	}
	f->slots[f->nslots++] = s;
	*ret = s;
	return 0;
}

/* Undoes slots made by file__new_slot; the others belong to earlier targets. */
static void file__drop_slots(struct tracer *t, struct attached_file *f, struct slot **slots,
			     size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct rw_func off = { 0 };

		bpf_map_update_elem(bpf_map__fd(t->skel->maps.funcs), &slots[i]->fn_id, &off,
				    BPF_ANY);
		idpool__release(&t->fn_ids, slots[i]->fn_id, true);
		for (size_t k = 0; k < f->nslots; k++) {
			if (f->slots[k] == slots[i]) {
				f->slots[k] = f->slots[--f->nslots];
				break;
			}
		}
		free(slots[i]);
	}
}

/* Makes a new slot live: its probes, attached after, find it. */
static int slot__activate(struct tracer *t, struct slot *s, struct rw_error *err)
{
	int e;

	s->meta.flags |= RW_FUNC_ACTIVE;
	e = slot__write(t, s);
	if (e)
		return rw_error_set(err, -e, "failed to store a function slot: %s", strerror(-e));
	return 0;
}

/* ---- probes of one slot in one process ---- */

/* Whether a target of process pid uses slot s. */
static bool slot_used_in(const struct tracer *t, const struct slot *s, pid_t pid)
{
	for (const struct tracer_target *o = t->targets; o; o = o->next)
		for (size_t k = 0; o->pid == pid && k < o->nfuncs; k++)
			if (o->slots[k] == s)
				return true;
	return false;
}

/* ---- shared probes: one link per function for every process of a file ---- */

static const char *share__name_of(const struct tracer *t, pid_t pid);

/* The node's processes by executable, listed again when older than max_age_ns. */
static void exe__refresh(struct tracer *t, uint64_t max_age_ns)
{
	uint64_t now = clock__mono_ns();

	if (t->exe.scanned_ns && now - t->exe.scanned_ns < max_age_ns)
		return;
	exeprocs__scan(&t->exe, "/proc", now);
}

/* The list, fresh enough to decide on process pid's functions, and with it. */
static void exe__refresh_for(struct tracer *t, pid_t pid)
{
	exe__refresh(t, SHARE_SCAN_FRESH_NS);
	/* not listed, or listed as the process that had its pid before */
	if (!exeprocs__current(&t->exe, "/proc", pid))
		exe__refresh(t, 0);
}

/*
 * Whether process e runs file f. A container's executable is seen through
 * its overlay mount (a device of its own, major 0), with the inode number
 * of the layer's file beneath when the layers share a filesystem, as the
 * runtimes' snapshots do; f is that layer's file. Another file with the
 * same inode number on another anonymous device is taken for f too: that
 * only keeps probes per process.
 */
static bool exe__is(const struct exeproc *e, const struct attached_file *f)
{
	return e->ino == f->ino && (e->dev == f->dev || !major(e->dev));
}

static struct batch *slot__batch(const struct slot *s, pid_t pid)
{
	for (struct batch *b = s->pids; b; b = b->next)
		if (b->pid == pid)
			return b;
	return NULL;
}

static bool batch__attached(const struct batch *b)
{
	return b->entry.multi_fd >= 0 || b->entry.n;
}

/* Whether process m, which runs s's file and is not traced for s, may trap on s's shared probes for now. */
static bool slot__graced(const struct tracer *t, const struct slot *s, const struct exeproc *m,
			 uint64_t now)
{
	uint64_t since = m->first_ns > s->made_ns ? m->first_ns : s->made_ns;
	const char *tenant;

	/* it was traced for s a moment ago: a probe is being deleted */
	for (size_t k = 0; k < s->ndropped; k++)
		if (s->dropped[k].pid == m->pid &&
		    (!s->dropped[k].starttime || s->dropped[k].starttime == m->starttime) &&
		    now - s->dropped[k].ns < SHARE_DROP_GRACE_NS)
			return true;
	if (!t->tenant_of || now - since >= SHARE_GRACE_NS)
		return false;
	/* new, or the function is: its tenant's, about to be traced for it */
	tenant = t->tenant_of(m->pid, t->tenant_ctx);
	/* a process just started may not be known to the caller yet */
	if (!tenant)
		return now - m->first_ns < SHARE_GRACE_NS;
	for (const struct batch *b = s->pids; *tenant && b; b = b->next) {
		const char *name = share__name_of(t, b->pid);

		if (name && !strcmp(name, tenant))
			return true;
	}
	return false;
}

/*
 * Whether s's probes may be one attachment for every process mapping its
 * file: the file is the executable of each process traced for s, and every
 * process running it is traced for s (or about to be: slot__graced), at
 * least two of them. A library (libc) is never shared: who maps it is not
 * known without reading every process's mappings.
 */
static bool slot__shareable(const struct tracer *t, const struct attached_file *f,
			    const struct slot *s, uint64_t now)
{
	size_t running = 0;

	for (const struct batch *b = s->pids; b; b = b->next) {
		const struct exeproc *e = exeprocs__find(&t->exe, b->pid);

		/* not listed: gone since (its target goes soon), or newer than the list */
		if (e && !exe__is(e, f))
			return false;
	}
	for (size_t i = 0; i < t->exe.n; i++) {
		const struct exeproc *m = &t->exe.procs[i];

		if (!exe__is(m, f))
			continue;
		if (!slot__batch(s, m->pid) && !slot__graced(t, s, m, now))
			return false;
		running++;
	}
	return running >= 2;
}

/* s's probes become one attachment for every process; its batches' links close. */
static int slot__share(struct tracer *t, struct attached_file *f, struct slot *s,
		       struct rw_error *err)
{
	struct batch *sh = calloc(1, sizeof(*sh));
	int e;

	if (!sh)
		return rw_error_set(err, ENOMEM, "out of memory");
	uprobe_links__init(&sh->entry);
	uprobe_links__init(&sh->ret);
	sh->pid = -1;
	e = batch__attach(t, f, s, sh, err);
	if (e) {
		batch__free(t, sh);
		return e;
	}
	/* from here on the shared probes count, the batches' not: each hit once */
	s->meta.flags |= RW_FUNC_SHARED;
	e = slot__write(t, s);
	if (e) {
		s->meta.flags &= ~RW_FUNC_SHARED;
		batch__free(t, sh);
		return rw_error_set(err, -e, "failed to store a function slot: %s", strerror(-e));
	}
	s->shared = sh;
	for (struct batch *b = s->pids; b; b = b->next) {
		uprobe_links__close(&b->entry);
		uprobe_links__close(&b->ret);
	}
	t->share_changes++;
	return 0;
}

/* s's probes become each traced process's own again; the shared ones close. */
static int slot__unshare(struct tracer *t, struct attached_file *f, struct slot *s,
			 struct rw_error *err)
{
	int e = 0;

	for (struct batch *b = s->pids; !e && b; b = b->next)
		if (!batch__attached(b))
			e = batch__attach(t, f, s, b, err);
	if (!e) {
		s->meta.flags &= ~RW_FUNC_SHARED;
		e = slot__write(t, s);
		if (e)
			rw_error_set(err, -e, "failed to store a function slot: %s", strerror(-e));
	}
	if (e) {
		/* still shared: the batches' links would count nothing */
		s->meta.flags |= RW_FUNC_SHARED;
		for (struct batch *b = s->pids; b; b = b->next) {
			uprobe_links__close(&b->entry);
			uprobe_links__close(&b->ret);
		}
		return e;
	}
	batch__free(t, s->shared);
	s->shared = NULL;
	t->share_changes++;
	return 0;
}

/*
 * Attaches slot s's probes for process pid, unless they are there: shared
 * where they can be. Call exe__refresh_for(pid) first, once for all of the
 * process's functions.
 */
static int slot__attach_pid(struct tracer *t, struct attached_file *f, struct slot *s, pid_t pid,
			    uint64_t threshold_ns, struct rw_error *err)
{
	struct rw_hist_key k = { .fn_id = s->fn_id, .tgid = (uint32_t)pid };
	const struct exeproc *ep;
	struct batch *b;
	int e;

	b = slot__batch(s, pid);
	if (b) {
		/* another probe of the process's namespace: the lower threshold */
		if (threshold_ns && (!b->threshold_ns || threshold_ns < b->threshold_ns) &&
		    !hist_slot__set_threshold(t, b->hist, threshold_ns))
			b->threshold_ns = threshold_ns;
		return 0;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return rw_error_set(err, ENOMEM, "out of memory");
	uprobe_links__init(&b->entry);
	uprobe_links__init(&b->ret);
	b->pid = pid;
	b->fn_id = s->fn_id;
	e = hist_slot__alloc(t, s->fn_id, (uint32_t)pid, &b->hist, err);
	if (e) {
		free(b);
		return e;
	}
	b->has_hist = true;
	/* before its probes: calls counted from the attach on are sent as slow */
	b->threshold_ns = threshold_ns;
	e = hist_slot__set_threshold(t, b->hist, threshold_ns);
	if (e) {
		e = rw_error_set(err, -e, "failed to set a slow-call threshold: %s", strerror(-e));
		batch__free(t, b);
		return e;
	}
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.proc_hists), &k, &b->hist, BPF_ANY)) {
		e = rw_error_set(err, errno, "failed to store a histogram slot: %s",
				 strerror(errno));
		batch__free(t, b);
		return e;
	}
	b->next = s->pids;
	s->pids = b;
	for (size_t i = 0; i < s->ndropped; i++)
		if (s->dropped[i].pid == pid)
			s->dropped[i] = s->dropped[--s->ndropped];
	ep = exeprocs__find(&t->exe, pid); /* exe__refresh_for(pid): the caller's */
	if (s->shared) {
		/* the shared probes count it now; unless it maps the file as a library */
		if (ep && exe__is(ep, f))
			return 0;
		e = slot__unshare(t, f, s, err);
	} else if (slot__shareable(t, f, s, clock__mono_ns()) && !slot__share(t, f, s, NULL)) {
		return 0;
	}
	if (!e && !batch__attached(b))
		e = batch__attach(t, f, s, b, err);
	if (e) {
		s->pids = b->next;
		batch__free(t, b);
	}
	return e;
}

/* Takes slot s's probes (or its share of the shared ones) out of process pid. */
static void slot__drop_pid(struct tracer *t, struct slot *s, pid_t pid)
{
	for (struct batch **p = &s->pids; *p; p = &(*p)->next) {
		if ((*p)->pid == pid) {
			struct batch *b = *p;
			struct dropped_pid *d;

			*p = b->next;
			batch__free(t, b);
			if (!s->shared)
				return;
			/* it traps on the shared probes until the next check */
			d = realloc(s->dropped, (s->ndropped + 1) * sizeof(*d));
			if (d) {
				const struct exeproc *e = exeprocs__find(&t->exe, pid);

				s->dropped = d;
				d[s->ndropped++] = (struct dropped_pid){ pid, e ? e->starttime : 0,
									 clock__mono_ns() };
			}
			return;
		}
	}
}

/* Drops the graces that have run out. */
static void slot__prune_dropped(struct slot *s, uint64_t now)
{
	for (size_t i = 0; i < s->ndropped;)
		if (now - s->dropped[i].ns >= SHARE_DROP_GRACE_NS)
			s->dropped[i] = s->dropped[--s->ndropped];
		else
			i++;
}

/*
 * Every SHARE_CHECK_EVERY_NS: each function's probes shared where every
 * process running its file is traced for it, each process's own where not
 * (a process of the file that is not traced appeared, or one stopped being
 * traced), within SHARE_CHANGE_BUDGET_NS a turn.
 */
static void share__check(struct tracer *t, uint64_t now)
{
	uint64_t deadline = now + SHARE_CHANGE_BUDGET_NS;

	if (now < t->next_share_check_ns || !t->files)
		return;
	t->next_share_check_ns = now + SHARE_CHECK_EVERY_NS;
	exe__refresh(t, 0);
	for (struct attached_file *f = t->files; f; f = f->next) {
		for (size_t i = 0; i < f->nslots && clock__mono_ns() < deadline; i++) {
			struct slot *s = f->slots[i];
			bool want;

			slot__prune_dropped(s, now);
			want = slot__shareable(t, f, s, now);
			if (want == !!s->shared)
				continue;
			if (want ? slot__share(t, f, s, NULL) : slot__unshare(t, f, s, NULL))
				t->share_change_failures++;
		}
		file__sync_morestack(t, f);
	}
}

/* Slots for the matched functions; new ones are attached. */
static int target__attach(struct tracer *t, struct tracer_target *tt, uint64_t threshold_ns,
			  struct rw_error *err)
{
	struct attached_file *f = tt->file;
	struct slot **fresh = calloc(tt->nfuncs + 1, sizeof(*fresh));
	size_t nfresh = 0;
	int e = 0;

	if (!fresh)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < tt->nfuncs; i++) {
		const struct func_info *fi = tt->funcs[i].info;
		struct slot *s = file__find_slot(f, fi->address);

		if (!s) {
			e = file__new_slot(t, f, fi, &s, err);
			if (e)
				break;
			fresh[nfresh++] = s;
		}
		tt->funcs[i].fn_id = s->fn_id;
		tt->funcs[i].go_key = s->meta.flags & RW_FUNC_GO;
		tt->slots[i] = s;
	}
	for (size_t i = 0; !e && i < nfresh; i++)
		e = slot__activate(t, fresh[i], err);
	/* probes of their own in this process (another process of the file,
	 * another pod of the image, never traps on them), or shared by every
	 * process of the file where all are traced */
	if (!e)
		exe__refresh_for(t, tt->pid);
	for (size_t i = 0; !e && i < tt->nfuncs; i++)
		e = slot__attach_pid(t, f, tt->slots[i], tt->pid, threshold_ns, err);
	if (!e) {
		file__sync_morestack(t, f);
		file__attach_morestack(t, f, tt->pid);
	}
	if (e) {
		/* tt is not among the targets yet: what it alone needed goes */
		for (size_t i = 0; i < tt->nfuncs; i++)
			if (tt->slots[i] && !slot_used_in(t, tt->slots[i], tt->pid))
				slot__drop_pid(t, tt->slots[i], tt->pid);
		file__drop_slots(t, f, fresh, nfresh);
		for (size_t i = 0; i < tt->nfuncs; i++)
			tt->slots[i] = NULL;
	}
	free(fresh);
	return e;
}

/* Slot s's histogram slot in process pid; false when s has no probes there. */
static bool slot__hist(const struct slot *s, pid_t pid, uint32_t *ret)
{
	for (const struct batch *b = s ? s->pids : NULL; b; b = b->next) {
		if (b->pid == pid && b->has_hist) {
			*ret = b->hist;
			return true;
		}
	}
	return false;
}

/* Whether a target of tt's process other than tt uses slot s. */
static bool slot_shared(const struct tracer *t, const struct tracer_target *tt,
			const struct slot *s)
{
	for (const struct tracer_target *o = t->targets; o; o = o->next)
		for (size_t k = 0; o != tt && o->pid == tt->pid && k < o->nfuncs; k++)
			if (o->slots[k] == s)
				return true;
	return false;
}

/*
 * Function i of tt's process, just attached: its histogram slot is new and
 * empty, or another target (another probe) of the process counts in it
 * already: tt's counts start from its.
 */
static int hist__create(struct tracer *t, struct tracer_target *tt, size_t i, struct rw_error *err)
{
	uint32_t h;

	if (!slot__hist(tt->slots[i], tt->pid, &h))
		return rw_error_set(err, ENOENT, "function %s has no histogram",
				    tt->funcs[i].info->name);
	if (!slot_shared(t, tt, tt->slots[i]))
		return 0;
	free(tt->base[i]);
	tt->base[i] = malloc(sizeof(struct latency));
	if (!tt->base[i] || hist_slot__read(t, h, tt->base[i]))
		return rw_error_set(err, ENOMEM, "failed to read a histogram");
	return 0;
}

static int target__add_maps(struct tracer *t, struct tracer_target *tt, struct rw_error *err)
{
	int e;

	for (size_t i = 0; i < tt->nfuncs; i++) {
		e = hist__create(t, tt, i, err);
		if (e)
			return e;
	}
	return 0;
}

/* One unmatched pattern, with its suggestions, as a message says it (names cut at 80). */
static size_t unmatched_one(const struct binary_unmatched *u, const char *path, char *out,
			    size_t len)
{
	int n = snprintf(out, len, "'%.80s%s'%s%s", u->pattern,
			 strlen(u->pattern) > 80 ? "..." : "", path ? " in " : "",
			 path ? path : "");

	for (size_t i = 0; n >= 0 && (size_t)n < len && i < u->nsuggestions; i++)
		n += snprintf(out + n, len - (size_t)n, "%s%.80s",
			      i ? ", " : " (did you mean: ", u->suggestions[i]);
	if (n >= 0 && (size_t)n < len && u->nsuggestions)
		n += snprintf(out + n, len - (size_t)n, ")");
	return n < 0 ? 0 : (size_t)n;
}

/*
 * -ENOENT naming the patterns that match nothing in path: those with
 * suggestions first (likely typos), as many as the message holds, and how
 * many more. A probe of 64 patterns named only its first before.
 */
static int unmatched_error(const struct binary_match *m, const char *path, struct rw_error *err)
{
	char msg[sizeof(err->msg)], one[sizeof(err->msg)];
	size_t len = 0, shown = 0;

	len = (size_t)snprintf(msg, sizeof(msg), "no function matches ");
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < m->nunmatched; i++) {
			const struct binary_unmatched *u = &m->unmatched[i];
			size_t n;

			if ((u->nsuggestions > 0) != (pass == 0))
				continue;
			n = unmatched_one(u, shown ? NULL : path, one, sizeof(one));
			/* room for "; nor " and the count of the rest */
			if (shown && len + n + 40 >= sizeof(msg))
				continue;
			len += (size_t)snprintf(msg + len, sizeof(msg) - len, "%s%s",
						shown ? "; nor " : "", one);
			if (len >= sizeof(msg))
				len = sizeof(msg) - 1;
			shown++;
		}
	}
	if (shown < m->nunmatched)
		snprintf(msg + len, sizeof(msg) - len, "; nor %zu more patterns",
			 m->nunmatched - shown);
	return rw_error_set(err, ENOENT, "%s", msg);
}

/* ---- namespace shares ---- */

static bool pid_traced_elsewhere(const struct tracer *t, const struct tracer_target *tt)
{
	for (const struct tracer_target *o = t->targets; o; o = o->next)
		if (o != tt && o->pid == tt->pid)
			return true;
	return false;
}

static int sweep(struct tracer *t, uint32_t pid, uint64_t max_age_ns);
static void pid__unretire(struct tracer *t, pid_t pid);

static struct share *share__by_name(const struct tracer *t, const char *name)
{
	struct share *sh = t->shares;

	while (sh && strcmp(sh->name, name))
		sh = sh->next;
	return sh;
}

/* tgid's index in the shares map: 0 when it has no share of its own. */
static uint32_t share__idx_of(const struct tracer *t, uint32_t tgid)
{
	__u32 idx;

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.proc_share), &tgid, &idx) ||
	    idx >= RW_MAX_SHARES)
		return 0;
	return idx;
}

/* The name of process pid's share, or NULL when it has none. */
static const char *share__name_of(const struct tracer *t, pid_t pid)
{
	uint32_t idx = share__idx_of(t, (uint32_t)pid);

	for (const struct share *sh = t->shares; idx && sh; sh = sh->next)
		if (sh->idx == idx)
			return sh->name;
	return NULL;
}

/* One of *n, taken by the programs, given back (never below 0). */
static void share__put(__u64 *n)
{
	__u64 v = __atomic_load_n(n, __ATOMIC_RELAXED);

	/* the programs add with atomic instructions on the same word */
	while (v && !__atomic_compare_exchange_n(n, &v, v - 1, false, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
		;
}

/* A new share for namespace name into *ret: 0, or -errno with a message. */
static int share__new(struct tracer *t, const char *name, struct share **ret, struct rw_error *err)
{
	bool used[RW_MAX_SHARES] = { true }; /* 0: the processes without a share */
	struct share *sh;
	uint32_t idx = 1;

	for (sh = t->shares; sh; sh = sh->next)
		used[sh->idx] = true;
	while (idx < RW_MAX_SHARES && used[idx])
		idx++;
	if (idx == RW_MAX_SHARES)
		return rw_error_set(err, ENOSPC,
				    "processes of %d namespaces are traced on this node, the most "
				    "its in-flight map and ring buffer are shared among",
				    RW_MAX_SHARES - 1);
	sh = calloc(1, sizeof(*sh));
	if (!sh || !(sh->name = strdup(name))) {
		free(sh);
		return rw_error_set(err, ENOMEM, "out of memory");
	}
	sh->idx = idx;
	/* no process counts against an unused index: nothing races these stores */
	memset(&t->shares_mm[idx], 0, sizeof(t->shares_mm[idx]));
	t->shares_mm[idx].max_contexts = t->share_contexts;
	/* deep chunks in the same proportion as the maps' room */
	t->shares_mm[idx].max_chunks = (uint64_t)t->share_contexts * RW_MAX_CHUNKS /
				       RW_MAX_CONTEXTS;
	if (t->share_contexts && !t->shares_mm[idx].max_chunks)
		t->shares_mm[idx].max_chunks = 1;
	t->shares_mm[idx].max_events = t->share_events;
	sh->next = t->shares;
	t->shares = sh;
	*ret = sh;
	return 0;
}

static void share__free_unused(struct tracer *t, uint32_t idx)
{
	struct share **p = &t->shares, *sh;

	while (*p && (*p)->idx != idx)
		p = &(*p)->next;
	sh = *p;
	if (!sh || sh->npids)
		return;
	*p = sh->next;
	free(sh->name);
	free(sh);
}

int tracer__share(struct tracer *t, pid_t pid, const char *name, struct rw_error *err)
{
	__u32 tgid = pid, idx = share__idx_of(t, tgid);
	struct share *sh = share__by_name(t, name);

	pid__unretire(t, pid);
	if (sh && sh->idx == idx)
		return 0;
	if (idx)
		return rw_error_set(err, EBUSY,
				    "process %d counts against another namespace's share already",
				    pid);
	if (!sh) {
		int e = share__new(t, name, &sh, err);

		if (e)
			return e;
	}
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.proc_share), &tgid, &sh->idx,
				BPF_NOEXIST)) {
		int e = errno;

		share__free_unused(t, sh->idx);
		return rw_error_set(err, e, "failed to give process %d its namespace's share: %s",
				    pid, strerror(e));
	}
	sh->npids++;
	return 0;
}

/* pid has no share any more (its frames are gone). */
static void share__drop_pid(struct tracer *t, pid_t pid)
{
	__u32 tgid = pid, idx = share__idx_of(t, tgid);
	struct share *sh = t->shares;

	if (!idx)
		return;
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.proc_share), &tgid);
	while (sh && sh->idx != idx)
		sh = sh->next;
	if (sh && sh->npids)
		sh->npids--;
	share__free_unused(t, idx);
}

/* pid is traced no more: the next sweep drops its frames, then its share. */
static void pid__retire(struct tracer *t, pid_t pid)
{
	for (size_t i = 0; i < t->nretired; i++)
		if (t->retired[i] == pid)
			return;
	if (t->nretired == t->retired_cap) {
		size_t cap = t->retired_cap * 2 + 16;
		pid_t *more = realloc(t->retired, cap * sizeof(*more));

		if (!more) {
			/* no room to wait: drop its frames now */
			sweep(t, pid, 0);
			share__drop_pid(t, pid);
			return;
		}
		t->retired = more;
		t->retired_cap = cap;
	}
	t->retired[t->nretired++] = pid;
}

/* pid is traced again before the sweep: its frames and share stay. */
static void pid__unretire(struct tracer *t, pid_t pid)
{
	for (size_t i = 0; i < t->nretired; i++) {
		if (t->retired[i] == pid) {
			t->retired[i] = t->retired[--t->nretired];
			return;
		}
	}
}

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

static bool pid__retired(const struct tracer *t, uint32_t tgid)
{
	pid_t key = (pid_t)tgid;

	return t->nretired && bsearch(&key, t->retired, t->nretired, sizeof(key), pid_cmp);
}

int tracer__share_read(const struct tracer *t, const char *name, struct tracer_share *ret)
{
	const struct share *sh = share__by_name(t, name);
	const struct rw_share *m;

	memset(ret, 0, sizeof(*ret));
	if (!sh)
		return -ENOENT;
	m = &t->shares_mm[sh->idx];
	ret->contexts = __atomic_load_n(&m->contexts, __ATOMIC_RELAXED);
	ret->max_contexts = m->max_contexts;
	ret->contexts_refused = __atomic_load_n(&m->contexts_refused, __ATOMIC_RELAXED);
	ret->chunks = __atomic_load_n(&m->chunks, __ATOMIC_RELAXED);
	ret->max_chunks = m->max_chunks;
	ret->chunks_refused = __atomic_load_n(&m->chunks_refused, __ATOMIC_RELAXED);
	ret->max_events = m->max_events;
	ret->events_refused = __atomic_load_n(&m->events_refused, __ATOMIC_RELAXED);
	ret->too_deep = __atomic_load_n(&m->too_deep, __ATOMIC_RELAXED);
	ret->map_full = __atomic_load_n(&m->map_full, __ATOMIC_RELAXED);
	return 0;
}

struct tracer_target *tracer__add(struct tracer *t, pid_t pid, const char *path,
				  const char *const *patterns, size_t npatterns,
				  uint64_t threshold_ns, struct rw_error *err)
{
	return tracer__add_bounded(t, pid, path, patterns, npatterns, threshold_ns, SIZE_MAX, err);
}

struct tracer_target *tracer__add_bounded(struct tracer *t, pid_t pid, const char *path,
					  const char *const *patterns, size_t npatterns,
					  uint64_t threshold_ns, size_t max_funcs,
					  struct rw_error *err)
{
	struct tracer_target *tt = calloc(1, sizeof(*tt));
	int e;

	if (!tt) {
		errno = ENOMEM;
		rw_error_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	tt->t = t;
	tt->pid = pid;
	tt->threshold_ns = threshold_ns;
	pid__unretire(t, pid);
	/* a probe's cookie holds its process's tgid */
	if (pid <= 0 || (uint32_t)pid >= RW_MAX_PID) {
		e = rw_error_set(err, ERANGE, "cannot trace process %d: not a pid", pid);
		goto fail;
	}
	e = file__open(t, path, &tt->file, err);
	if (e)
		goto fail;
	tt->file->users++;
	e = binary__match(tt->file->bin, patterns, npatterns, BINARY_DEFAULT_LIMIT, &tt->match,
			  err);
	if (e)
		goto fail;
	if (tt->match.nunmatched && !(t->partial && tt->match.nfuncs)) {
		e = unmatched_error(&tt->match, path, err);
		goto fail;
	}
	if (tt->match.nfuncs > max_funcs) {
		e = rw_error_set(err, EDQUOT,
				 "the patterns match %zu functions in %s, more than %zu",
				 tt->match.nfuncs, path, max_funcs);
		goto fail;
	}
	tt->nfuncs = tt->match.nfuncs;
	tt->funcs = calloc(tt->nfuncs + 1, sizeof(*tt->funcs));
	tt->slots = calloc(tt->nfuncs + 1, sizeof(*tt->slots));
	tt->swept_orphans = calloc(tt->nfuncs + 1, sizeof(*tt->swept_orphans));
	tt->swept_tail_exits = calloc(tt->nfuncs + 1, sizeof(*tt->swept_tail_exits));
	tt->base = calloc(tt->nfuncs + 1, sizeof(*tt->base));
	tt->kept = calloc(tt->nfuncs + 1, sizeof(*tt->kept));
	if (!tt->funcs || !tt->slots || !tt->swept_orphans || !tt->swept_tail_exits || !tt->base ||
	    !tt->kept) {
		e = rw_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < tt->nfuncs; i++)
		tt->funcs[i].info = tt->match.funcs[i];
	e = target__attach(t, tt, threshold_ns, err);
	if (e)
		goto fail;
	for (size_t i = 0; i < tt->nfuncs; i++)
		tt->slots[i]->users++;
	tt->next = t->targets;
	t->targets = tt;
	e = target__add_maps(t, tt, err);
	if (e) {
		tracer__remove(t, tt);
		errno = -e;
		return NULL;
	}
	return tt;
fail:
	if (!pid_traced_elsewhere(t, tt))
		pid__retire(t, pid);
	if (tt->file && --tt->file->users == 0)
		file__drop(t, tt->file);
	target__free(tt);
	errno = -e;
	return NULL;
}

/* Whether another target of tt's process uses tt's file. */
static bool pid_uses_file(const struct tracer *t, const struct tracer_target *tt)
{
	for (const struct tracer_target *o = t->targets; o; o = o->next)
		if (o != tt && o->pid == tt->pid && o->file == tt->file)
			return true;
	return false;
}

/* A target of process pid no longer uses slot s (it is out of t->targets,
 * or its slots[] no longer holds s). */
static void slot__unuse(struct tracer *t, struct attached_file *f, struct slot *s, pid_t pid)
{
	struct rw_func off = { 0 };

	if (!slot_used_in(t, s, pid))
		slot__drop_pid(t, s, pid);
	if (--s->users)
		return;
	bpf_map_update_elem(bpf_map__fd(t->skel->maps.funcs), &s->fn_id, &off, BPF_ANY);
	while (s->pids)
		slot__drop_pid(t, s, s->pids->pid);
	batch__free(t, s->shared);
	free(s->dropped);
	for (size_t k = 0; k < f->nslots; k++) {
		if (f->slots[k] == s) {
			f->slots[k] = f->slots[--f->nslots];
			break;
		}
	}
	idpool__release(&t->fn_ids, s->fn_id, true);
	free(s);
}

void tracer__remove(struct tracer *t, struct tracer_target *tt)
{
	struct tracer_target **p;
	bool last;

	if (!tt)
		return;
	for (p = &t->targets; *p; p = &(*p)->next) {
		if (*p == tt) {
			*p = tt->next;
			break;
		}
	}
	last = !pid_traced_elsewhere(t, tt);
	if (tt->file && !pid_uses_file(t, tt))
		file__drop_morestack(t, tt->file, tt->pid);
	/* a function no other target of the process uses loses its probes there
	 * and its histogram slot: the slot counts nothing more at once, though
	 * its links take a while to close */
	for (size_t i = 0; i < tt->nfuncs; i++)
		if (tt->slots[i])
			slot__unuse(t, tt->file, tt->slots[i], tt->pid);
	if (tt->file && tt->file->users > 1)
		file__sync_morestack(t, tt->file);
	/* its probes are gone: no hit will end its calls in flight */
	if (last)
		pid__retire(t, tt->pid);
	if (tt->file && --tt->file->users == 0)
		file__drop(t, tt->file);
	target__free(tt);
}

/* ---- one function of one process detached, and back (the overhead guard) ---- */

int tracer_target__detach(struct tracer *t, struct tracer_target *tt, size_t i,
			  struct rw_error *err)
{
	struct latency now;
	struct slot *s;
	uint32_t h;

	if (i >= tt->nfuncs)
		return rw_error_set(err, EINVAL, "no function %zu", i);
	s = tt->slots[i];
	if (!s)
		return 0;
	/* another target of this process (another probe) measures it too */
	tt->slots[i] = NULL;
	if (slot_used_in(t, s, tt->pid)) {
		tt->slots[i] = s;
		return rw_error_set(err, EBUSY, "another probe measures %s in this process",
				    s->info->name);
	}
	/* what it counted, kept: its histogram slot goes with its probes */
	if (!slot__hist(s, tt->pid, &h) || hist_slot__read(t, h, &now))
		memset(&now, 0, sizeof(now));
	else if (tt->base[i])
		latency__subtract(&now, tt->base[i]);
	/* its probes in this process go; the others' stay */
	slot__unuse(t, tt->file, s, tt->pid);
	free(tt->base[i]);
	tt->base[i] = NULL;
	if (!tt->kept[i])
		tt->kept[i] = calloc(1, sizeof(*tt->kept[i]));
	if (tt->kept[i])
		latency__merge(tt->kept[i], &now);
	return 0;
}

int tracer_target__reattach(struct tracer *t, struct tracer_target *tt, size_t i,
			    struct rw_error *err)
{
	const struct func_info *fi;
	struct slot *s;
	int e;

	if (i >= tt->nfuncs)
		return rw_error_set(err, EINVAL, "no function %zu", i);
	if (tt->slots[i])
		return 0;
	fi = tt->funcs[i].info;
	exe__refresh_for(t, tt->pid);
	s = file__find_slot(tt->file, fi->address);
	if (!s) {
		e = file__new_slot(t, tt->file, fi, &s, err);
		if (e)
			return e;
		e = slot__activate(t, s, err);
		if (!e)
			e = slot__attach_pid(t, tt->file, s, tt->pid, tt->threshold_ns, err);
		if (e) {
			slot__drop_pid(t, s, tt->pid);
			file__drop_slots(t, tt->file, &s, 1);
			return e;
		}
	} else {
		/* probes of their own for this process, where the slot has left it */
		e = slot__attach_pid(t, tt->file, s, tt->pid, tt->threshold_ns, err);
		if (e)
			return e;
		/* a slot of a live batch, probes attached: active again */
		s->meta.flags |= RW_FUNC_ACTIVE;
		slot__write(t, s);
	}
	s->users++;
	tt->slots[i] = s;
	tt->funcs[i].fn_id = s->fn_id;
	return hist__create(t, tt, i, err);
}

bool tracer_target__detached(const struct tracer_target *tt, size_t i)
{
	return i < tt->nfuncs && !tt->slots[i];
}

pid_t tracer_target__pid(const struct tracer_target *tt)
{
	return tt->pid;
}

struct binary *tracer_target__binary(const struct tracer_target *tt)
{
	return tt->file->bin;
}

size_t tracer_target__nfuncs(const struct tracer_target *tt)
{
	return tt->nfuncs;
}

const struct tracer_func *tracer_target__func(const struct tracer_target *tt, size_t i)
{
	return i < tt->nfuncs ? &tt->funcs[i] : NULL;
}

int tracer_target__read(struct tracer *t, const struct tracer_target *tt, size_t i,
			struct latency *ret)
{
	uint32_t h;
	int e;

	if (i >= tt->nfuncs)
		return -EINVAL;
	if (!tt->slots[i]) { /* detached */
		memset(ret, 0, sizeof(*ret));
	} else {
		if (!slot__hist(tt->slots[i], tt->pid, &h))
			return -ENOENT;
		e = hist_slot__read(t, h, ret);
		if (e)
			return e;
		if (tt->base[i])
			latency__subtract(ret, tt->base[i]);
	}
	if (tt->kept[i])
		latency__merge(ret, tt->kept[i]);
	ret->orphans += tt->swept_orphans[i];
	ret->tail_exits += tt->swept_tail_exits[i];
	return 0;
}

size_t tracer_target__nunmatched(const struct tracer_target *tt)
{
	return tt->match.nunmatched;
}

const struct binary_unmatched *tracer_target__unmatched(const struct tracer_target *tt, size_t i)
{
	return i < tt->match.nunmatched ? &tt->match.unmatched[i] : NULL;
}

void tracer__set_event_fn(struct tracer *t, tracer_event_fn fn, void *ctx)
{
	t->event_fn = fn;
	t->event_ctx = ctx;
}

int tracer__poll(struct tracer *t, int timeout_ms)
{
	int e;

	t->npolled = 0;
	/* histogram slots whose links are closed: their empty pages go */
	ids__take_back(t, &t->hist_ids, false);
	e = ring_buffer__poll(t->rb, timeout_ms);
	if (e == -ECANCELED && t->npolled >= TRACER_POLL_MAX_EVENTS)
		return (int)t->npolled;
	return e;
}

int tracer__fd(const struct tracer *t)
{
	return ring_buffer__epoll_fd(t->rb);
}

/*
 * Counts a purged frame against the function it belongs to: an orphan, or a
 * tail exit of a function that may leave by a jump that cannot be followed
 * (as the kernel counts them).
 */
static void count_swept(struct tracer *t, uint32_t tgid, uint32_t fn_id)
{
	for (struct tracer_target *tt = t->targets; tt; tt = tt->next) {
		if ((uint32_t)tt->pid != tgid)
			continue;
		for (size_t i = 0; i < tt->nfuncs; i++) {
			if (tt->funcs[i].fn_id != fn_id)
				continue;
			if (tt->slots[i] && (tt->slots[i]->meta.flags & RW_FUNC_TAIL_UNTIMED))
				tt->swept_tail_exits[i]++;
			else
				tt->swept_orphans[i]++;
			return;
		}
	}
}

/* BPF may have touched the frames after we read the clock: that is fresh too. */
static bool stale(const struct rw_frames *fr, uint64_t now, uint64_t max_age_ns)
{
	/* nothing in flight, nor a lost call's return to tell from a new call */
	if (!fr->n && !fr->lost_depth && max_age_ns > SWEEP_IDLE_AGE_NS)
		max_age_ns = SWEEP_IDLE_AGE_NS;
	return fr->last_ns < now && now - fr->last_ns >= max_age_ns;
}

/* Counts a dropped goroutine's or thread's frames as swept orphans, deep ones too. */
static int count_swept_frames(struct tracer *t, const struct rw_ctx_key *key,
			      const struct rw_frames *fr)
{
	int fd = bpf_map__fd(t->skel->maps.frames_deep), dropped = 0;
	uint32_t n = fr->n < RW_MAX_DEPTH ? fr->n : RW_MAX_DEPTH, loaded = 0;
	struct rw_chunk ch;

	for (uint32_t k = 0; k < n; k++) {
		const struct rw_frame *f = &fr->f[k % RW_MAX_FRAMES];

		if (k >= RW_MAX_FRAMES) {
			struct rw_chunk_key ck = { .tgid = key->tgid,
						   .chunk = k / RW_CHUNK_FRAMES,
						   .id = key->id };

			if (ck.chunk != loaded && bpf_map_lookup_elem(fd, &ck, &ch)) {
				/* deleted under its frames (a racing sweep): nothing to count */
				k = (ck.chunk + 1) * RW_CHUNK_FRAMES - 1;
				continue;
			}
			loaded = ck.chunk;
			f = &ch.f[k % RW_CHUNK_FRAMES];
		}
		count_swept(t, key->tgid, f->fn_id);
		dropped++;
	}
	return dropped;
}

/* key's slot in the context index, or -1. */
static int idx__find(const struct tracer *t, const struct rw_ctx_key *key)
{
	uint32_t h = rw_idx_hash(key->tgid, key->id);

	for (int i = 0; i < RW_IDX_PROBES; i++) {
		uint32_t s = (h + i) & (RW_IDX_SLOTS - 1);
		const volatile struct rw_idx_slot *sl = &t->idx_mm[s];

		if (sl->id == key->id && sl->tgid == key->tgid)
			return s;
		if (sl->id == RW_IDX_EMPTY)
			return -1;
	}
	return -1;
}

/*
 * Frees the context index's slots of pid (0: any) or untouched for
 * max_age_ns, as sweep does the hash map's: tgid cleared first, so no
 * reader matches it, then the slot a tombstone. The frames dropped.
 */
static int sweep_idx(struct tracer *t, uint32_t pid, uint64_t max_age_ns, uint64_t now)
{
	int fd = bpf_map__fd(t->skel->maps.ctx_frames), dropped = 0;
	struct rw_frames fr;

	for (uint32_t s = 0; s < RW_IDX_SLOTS; s++) {
		volatile struct rw_idx_slot *sl = &t->idx_mm[s];
		struct rw_ctx_key key = { .tgid = sl->tgid, .id = sl->id };

		if (key.id == RW_IDX_EMPTY || key.id == RW_IDX_TOMB || !key.tgid)
			continue;
		if (pid && key.tgid != pid)
			continue;
		if (bpf_map_lookup_elem(fd, &s, &fr))
			continue;
		if (!pid && !stale(&fr, now, max_age_ns) && !pid__retired(t, key.tgid))
			continue;
		sl->tgid = 0;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		sl->id = RW_IDX_TOMB;
		share__put(&t->shares_mm[share__idx_of(t, key.tgid)].contexts);
		dropped += count_swept_frames(t, &key, &fr);
	}
	return dropped;
}

/* Deletes the deep chunks of pid (0: any) whose goroutine or thread has no frames left. */
static void sweep_chunks(struct tracer *t, uint32_t pid)
{
	int fd = bpf_map__fd(t->skel->maps.frames_deep);
	int ffd = bpf_map__fd(t->skel->maps.frames);
	struct rw_chunk_key key, next, *prev = NULL, *doomed = NULL;
	size_t ndoomed = 0, cap = 0;
	struct rw_frames fr;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		struct rw_ctx_key owner = { .tgid = next.tgid, .id = next.id };

		key = next;
		prev = &key;
		if (pid ? key.tgid != pid
			: !bpf_map_lookup_elem(ffd, &owner, &fr) || idx__find(t, &owner) >= 0)
			continue;
		if (ndoomed == cap) {
			struct rw_chunk_key *more = realloc(doomed, (cap * 2 + 16) * sizeof(*more));

			if (!more)
				break;
			doomed = more;
			cap = cap * 2 + 16;
		}
		doomed[ndoomed++] = key;
	}
	for (size_t i = 0; i < ndoomed; i++)
		if (!bpf_map_delete_elem(fd, &doomed[i]))
			share__put(&t->shares_mm[share__idx_of(t, doomed[i].tgid)].chunks);
	free(doomed);
}

/* Drops in-flight frames: of pid (0: any) or untouched for max_age_ns. */
static int sweep(struct tracer *t, uint32_t pid, uint64_t max_age_ns)
{
	int fd = bpf_map__fd(t->skel->maps.frames), dropped = 0;
	struct rw_ctx_key key, next, *prev = NULL, *doomed = NULL;
	size_t ndoomed = 0, cap = 0;
	struct rw_frames fr;
	uint64_t now = clock__mono_ns();

	if (!pid && t->nretired)
		qsort(t->retired, t->nretired, sizeof(*t->retired), pid_cmp);
	/* deleting while walking would restart the walk: collect first */
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &fr))
			continue;
		if (pid ? key.tgid != pid
			: !stale(&fr, now, max_age_ns) && !pid__retired(t, key.tgid))
			continue;
		if (ndoomed == cap) {
			struct rw_ctx_key *more = realloc(doomed, (cap * 2 + 16) * sizeof(*more));

			if (!more)
				break;
			doomed = more;
			cap = cap * 2 + 16;
		}
		doomed[ndoomed++] = key;
	}
	for (size_t i = 0; i < ndoomed; i++) {
		/* read again: the frames may have moved on since the walk */
		if (bpf_map_lookup_elem(fd, &doomed[i], &fr) ||
		    (!pid && !stale(&fr, now, max_age_ns) && !pid__retired(t, doomed[i].tgid)))
			continue;
		if (bpf_map_delete_elem(fd, &doomed[i]))
			continue;
		share__put(&t->shares_mm[share__idx_of(t, doomed[i].tgid)].contexts);
		dropped += count_swept_frames(t, &doomed[i], &fr);
	}
	free(doomed);
	dropped += sweep_idx(t, pid, max_age_ns, now);
	sweep_chunks(t, pid);
	t->swept += dropped;
	/* the retired processes' frames are gone: their shares go too */
	for (; !pid && t->nretired; t->nretired--)
		share__drop_pid(t, t->retired[t->nretired - 1]);
	return dropped;
}

int tracer__tick(struct tracer *t)
{
	uint64_t now = clock__mono_ns();

	share__check(t, now);
	if (now < t->next_sweep_ns)
		return 0;
	t->next_sweep_ns = now + SWEEP_EVERY_NS;
	return sweep(t, 0, SWEEP_AGE_NS);
}

int tracer__reap(struct tracer *t, struct tracer_target *tt)
{
	return sweep(t, tt->pid, 0);
}

void tracer__forget_pid(struct tracer *t, pid_t pid)
{
	for (const struct tracer_target *o = t->targets; o; o = o->next)
		if (o->pid == pid)
			return;
	/* the process is gone: its frames and share need not wait for the sweep */
	sweep(t, pid, 0);
	pid__unretire(t, pid);
	share__drop_pid(t, pid);
}

int64_t tracer__inflight(struct tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.frames);
	struct rw_ctx_key key, next, *prev = NULL;
	struct rw_frames fr;
	int64_t n = 0;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(fd, &key, &fr))
			n += fr.n < RW_MAX_DEPTH ? fr.n : RW_MAX_DEPTH;
	}
	fd = bpf_map__fd(t->skel->maps.ctx_frames);
	for (uint32_t s = 0; s < RW_IDX_SLOTS; s++) {
		if (!t->idx_mm[s].tgid || t->idx_mm[s].id <= RW_IDX_TOMB ||
		    bpf_map_lookup_elem(fd, &s, &fr))
			continue;
		n += fr.n < RW_MAX_DEPTH ? fr.n : RW_MAX_DEPTH;
	}
	return n;
}

/* The programs' counters, summed over CPUs, indexed by enum rw_stat. */
static int stats__read(struct tracer *t, uint64_t ret[RW_STAT__MAX])
{
	uint64_t *vals = calloc(t->ncpus, sizeof(*vals));
	int fd = bpf_map__fd(t->skel->maps.stats), e = 0;

	if (!vals)
		return -ENOMEM;
	for (__u32 s = 0; s < RW_STAT__MAX; s++) {
		ret[s] = 0;
		if (bpf_map_lookup_elem(fd, &s, vals)) {
			e = e ? e : -errno;
			continue;
		}
		for (int cpu = 0; cpu < t->ncpus; cpu++)
			ret[s] += vals[cpu];
	}
	free(vals);
	return e;
}

int tracer__counters(struct tracer *t, struct tracer_counters *ret)
{
	uint64_t stats[RW_STAT__MAX];
	int e;

	memset(ret, 0, sizeof(*ret));
	e = stats__read(t, stats);
	if (e)
		return e;
	for (size_t i = 0; i < sizeof(unmeasured_stats) / sizeof(unmeasured_stats[0]); i++)
		ret->unmeasured[ret->nunmeasured++] = (struct tracer_count){
			.name = stat_names[unmeasured_stats[i]],
			.n = stats[unmeasured_stats[i]],
		};
	ret->purged = stats[RW_STAT_ORPHANS_PURGED] + stats[RW_STAT_GOID_CHANGED];
	ret->swept = t->swept;
	ret->lost_events = stats[RW_STAT_RINGBUF_FULL];
	ret->slow_limited = stats[RW_STAT_SLOW_LIMITED];
	ret->share_lost = stats[RW_STAT_SHARE_CONTEXTS];
	ret->share_limited = stats[RW_STAT_SHARE_EVENTS];
	for (unsigned int s = 0; s < RW_STAT__MAX; s++)
		ret->all[ret->nall++] = (struct tracer_count){ .name = stat_names[s],
							       .n = stats[s] };
	return 0;
}

struct binary_cache *tracer__cache(const struct tracer *t)
{
	return t->cache;
}

int tracer_attach_mode__parse(const char *s, enum tracer_attach_mode *ret)
{
	static const char *const names[] = {
		[TRACER_ATTACH_AUTO] = "auto",
		[TRACER_ATTACH_MULTI] = "uprobe_multi",
		[TRACER_ATTACH_PERF_EVENT] = "perf_event",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i])) {
			*ret = (enum tracer_attach_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

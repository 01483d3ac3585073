// SPDX-License-Identifier: MIT
/*
 * The tracing engine over bpf/trace.bpf.c: loading the programs, adding and
 * removing targets, reading their latencies, delivering slow-call events,
 * the counters. Its pieces (tracer_impl.h): tracer_hist.c, tracer_slots.c,
 * tracer_shared_probes.c, tracer_ns_shares.c, tracer_detach.c, tracer_sweep.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "analysis/disasm.h"
#include "analysis/goinline.h"
#include "analysis/inlsites.h"
#include "base/clock.h"
#include "trace/tracer_impl.h"
#include "trace/uprobe.h"

_Static_assert(sizeof(((struct rw_regs *)0)->saved) == sizeof(((struct unwind_regs *)0)->saved),
	       "the registers sent are those an unwind starts from");

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
	[RW_STAT_HOOK_TARGETS] = "hook_targets",
	[RW_STAT_HOOK_LOST] = "hook_lost",
	[RW_STAT_SHARE_CONTEXTS] = "share_contexts",
	[RW_STAT_SHARE_EVENTS] = "share_events",
	[RW_STAT_CONTEXTS_HASHED] = "contexts_hashed",
	[RW_STAT_UNTRACED_HITS] = "untraced_hits",
	[RW_STAT_REUSED_PID_HITS] = "reused_pid_hits",
	[RW_STAT_KEEP_SENT] = "keep_sent",
	[RW_STAT_KEEP_REFUSED] = "keep_refused",
	[RW_STAT_FOLLOW_FULL] = "follow_full",
	[RW_STAT_KEEP_NESTED] = "keep_nested",
};
_Static_assert(sizeof(stat_names) / sizeof(stat_names[0]) == RW_STAT__MAX,
	       "a name for every enum rw_stat");
_Static_assert(TRACER_MAX_DEPTH == RW_MAX_DEPTH, "tracer.h says the kernel's bound");
_Static_assert(TRACER_MAX_KEEP == RW_MAX_KEEP, "tracer.h says the kernel's slowest calls kept");
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

size_t tracer__other_links(const struct tracer *t)
{
	return (t->fork_link != NULL) + (t->exec_link != NULL);
}

const char *tracer__attach_mode(const struct tracer *t)
{
	return t->multi ? "uprobe_multi" : "perf_event";
}

/* of each tracer__poll, for freeing empty histogram pages (hist_pages__trim) */
#define HIST_TRIM_NS (NS_PER_S / 100)

#define WHY_MULTI "uprobe_multi links: one per file and program"
#define WHY_NO_MULTI                                                                          \
	"no uprobe_multi links in this kernel (Linux 6.6 or later has them): one perf_event " \
	"uprobe per offset"
#define WHY_ASKED "perf_event uprobes, one per offset, as asked"

const char *tracer__attach_why(const struct tracer *t)
{
	return t->attach_why;
}

int tracer__has_uprobe_multi(const struct tracer *t)
{
	return t->has_multi;
}

int64_t tracer__site(const struct tracer *t, struct binary *b, const struct func_info *fi)
{
	uint8_t code[8];

	if (!fi->entry_site || t->site_kinds == TRACER_SITE_KINDS_ALL)
		return fi->entry_site;
	if (!t->site_kinds ||
	    binary__read(b, fi->address + (uint64_t)fi->entry_site, code, sizeof(code)))
		return 0;
	return t->site_kinds & (1U << disasm__probe_kind_of(binary__arch(b), code, sizeof(code)))
		       ? fi->entry_site
		       : 0;
}

int64_t tracer__entry_site(const struct tracer_target *tt, const struct func_info *fi)
{
	return tracer__site(tt->t, tt->file->bin, fi);
}

void tracer__set_site_kinds(struct tracer *t, uint32_t kinds)
{
	/* the analysis never moves an entry to a stepped instruction, so allowing
	 * that kind changes no site; it lets a mask of every emulated kind be
	 * TRACER_SITE_KINDS_ALL, which tracer__site takes without reading the
	 * binary. 0 stays 0: no entry moves at all. */
	t->site_kinds &= kinds ? kinds | 1U << DISASM_PROBE_STEPPED : 0;
}

static int load_skel(struct tracer *t, bool multi, struct rw_error *err)
{
	enum bpf_attach_type type = multi ? UPROBE_MULTI_ATTACH_TYPE : 0;
	int e, k;

	t->skel = trace__open();
	if (!t->skel)
		return rw_error_set(err, errno, "failed to open the BPF programs: %s",
				    strerror(errno));
	/* the arguments' room (5 MiB) only where they may be captured */
	if (!t->capture_args)
		bpf_map__set_max_entries(t->skel->maps.ctx_args, 1);
	bpf_program__set_autoload(t->skel->progs.rw_fork, t->follow);
	bpf_program__set_autoload(t->skel->progs.rw_task_key, t->follow_started);
	bpf_program__set_expected_attach_type(t->skel->progs.rw_entry, type);
	bpf_program__set_expected_attach_type(t->skel->progs.rw_ret, type);
	bpf_program__set_expected_attach_type(t->skel->progs.rw_hook, type);
	e = trace__load(t->skel);
	if (e) {
		trace__destroy(t->skel);
		t->skel = NULL;
		/* an older kernel: what it lacks, in words */
		if (e != -EPERM && (k = tracer__kernel_lacks(err)))
			return k;
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
	bool after_ret;

	if (len < sizeof(*e) || !t->event_fn)
		return polled(t);
	after_ret = e->flags & RW_EVENT_AFTER_RET;
	fp = e->stack_bytes > 0 ? (size_t)e->stack_bytes / sizeof(__u64) : 0;
	if (fp > RW_STACK_DEPTH)
		fp = RW_STACK_DEPTH;
	/* the RET's own address, then its caller, then the frame-pointer walk,
	 * up to the first address no user code can have (a walk through code
	 * without frame pointers reads garbage); returned, the call's entry,
	 * then the walk from where it returned to */
	if (after_ret && e->ret_addr && unwind__canonical(e->ret_addr))
		stack[n++] = e->ret_addr;
	for (size_t i = 0; i < fp && unwind__canonical(e->stack[i]); i++) {
		stack[n++] = e->stack[i];
		if (i == 0 && !after_ret && e->ret_addr && unwind__canonical(e->ret_addr))
			stack[n++] = e->ret_addr;
	}
	ev = (struct tracer_event){
		.pid = e->pid,
		.tid = e->tid,
		.lender = (pid_t)e->lender,
		.lender_maps = e->lender && !(e->flags & RW_EVENT_OWN_MAPS),
		.goid = e->goid,
		.start_ns = e->start_ns,
		.duration_ns = e->duration_ns,
		.fn_id = e->fn_id,
		.stack = stack,
		.nstack = n,
		.regs = { .ip = e->regs.ip, .sp = e->regs.sp, .fp = e->regs.fp },
		.lead_pc = after_ret ? e->ret_addr : 0,
	};
	memcpy(ev.regs.saved, e->regs.saved, sizeof(ev.regs.saved));
	/* the record is a struct rw_event_copy when it says it carries a copy */
	if (e->copy_bytes && e->copy_bytes <= RW_STACK_COPY &&
	    len >= sizeof(struct rw_event_copy)) {
		ev.stack_copy = ((const struct rw_event_copy *)data)->copy;
		ev.stack_copy_len = e->copy_bytes;
		ev.stack_copy_addr = e->copy_addr;
	}
	event__args(t, e, &ev);
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

/*
 * Loads the programs for the attach mode: uprobe_multi links where asked for,
 * or (auto) where the kernel has them, else perf-event uprobes.
 */
static int load_programs(struct tracer *t, enum tracer_attach_mode mode, struct rw_error *err)
{
	int e;

	switch (mode) {
	case TRACER_ATTACH_AUTO:
		e = load_skel(t, true, err);
		if (!e && !uprobe_multi_supported(bpf_program__fd(t->skel->progs.rw_entry))) {
			trace__destroy(t->skel);
			e = load_skel(t, false, err);
			t->attach_why = WHY_NO_MULTI;
			t->has_multi = 0;
		} else if (!e) {
			t->multi = true;
			t->attach_why = WHY_MULTI;
			t->has_multi = 1;
		}
		break;
	case TRACER_ATTACH_MULTI:
		e = load_skel(t, true, err);
		if (!e && !uprobe_multi_supported(bpf_program__fd(t->skel->progs.rw_entry)))
			e = rw_error_set(
				err, EOPNOTSUPP,
				"this kernel has no uprobe_multi links (Linux 6.6 or later)");
		t->multi = true;
		t->attach_why = WHY_MULTI;
		t->has_multi = 1;
		break;
	default:
		e = load_skel(t, false, err);
		t->attach_why = WHY_ASKED;
		t->has_multi = -1;
		break;
	}
	return e;
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
	t->hook_fn = opts ? opts->hook_fn : NULL;
	t->hook_ctx = opts ? opts->hook_ctx : NULL;
	t->starttimes = !clock__boottime_shifted();
	t->site_kinds = opts && opts->entry_at_start ? 0 : TRACER_SITE_KINDS_ALL;
	t->capture_args = opts && opts->capture_args;
	t->trampoline_why = opts && opts->trampoline ? tracer__kernel_trampoline_refusal() : NULL;
	t->trampoline = opts && opts->trampoline && !t->trampoline_why;
	t->follow = opts && opts->follow;
	t->follow_started = t->follow && opts->follow_started;
	t->sweep_age_ns = opts && opts->sweep_age_ns ? opts->sweep_age_ns : TRACER_SWEEP_AGE_NS;
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
	e = load_programs(t, opts ? opts->attach_mode : TRACER_ATTACH_AUTO, err);
	if (!e && t->follow)
		e = follow__start(t, err);
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
	if (!t->rb ||
	    ring_buffer__add(t->rb, bpf_map__fd(t->skel->maps.hook_events), hooks__on_target, t)) {
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

static void target__free(struct tracer_target *tt)
{
	if (!tt)
		return;
	binary_match__clear(&tt->match);
	free(tt->funcs);
	free(tt->slots);
	free(tt->swept_orphans);
	free(tt->swept_tail_exits);
	free(tt->keep);
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
	bpf_link__destroy(t->fork_link);
	bpf_link__destroy(t->exec_link);
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
	free(t->args_of);
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

/* Whether copy c of l is one of pat's, the first of its caller among them. */
static bool new_caller(const struct inl_list *l, const char *pat, size_t c)
{
	if (!binary__inlined_match(pat, l->copies[c].name))
		return false;
	for (size_t d = 0; d < c; d++)
		if (binary__inlined_match(pat, l->copies[d].name) &&
		    !strcmp(l->copies[d].caller, l->copies[c].caller))
			return false;
	return true;
}

/*
 * "'P' in PATH exists only inlined, in N callers (A, B, ...), and its
 * copies cannot be probed: WHY" for the first unmatched pattern that names a
 * function the compiler inlined everywhere and whose copies cannot be
 * probed (inlsites.h), into msg, from the copies kept (NULL: read here);
 * which patterns name such functions is marked in ret_inlined: 1, or 2
 * where a copy can be probed, timed or counted (traced then,
 * tracer_inline.c). The length written, 0 when none is.
 */
static size_t inlined_only(struct binary *b, const struct binary_match *m, const char *path,
			   struct inl_list *kept, uint8_t *ret_inlined, char *msg, size_t len)
{
	struct inl_list *l = kept;
	const char **pats = calloc(m->nunmatched ? m->nunmatched : 1, sizeof(*pats));
	size_t out = 0;

	if (!pats)
		return 0;
	for (size_t i = 0; i < m->nunmatched; i++)
		pats[i] = m->unmatched[i].pattern;
	/* an unreadable tree leaves the plain "no function matches" */
	if ((!kept && binary__inlined(b, pats, m->nunmatched, &l, NULL)) || !l ||
	    binary__inlined_probe(b, l))
		goto out;
	for (size_t i = 0; i < m->nunmatched; i++) {
		size_t ncallers = 0, shown = 0;
		const char *why = NULL;
		int n;

		for (size_t c = 0; c < l->ncopies; c++) {
			const struct inl_sites *st = l->copies[c].sites;

			ncallers += new_caller(l, pats[i], c);
			if (!binary__inlined_match(pats[i], l->copies[c].name) || !st)
				continue;
			/* timed, or counted at its entries */
			if (st->mode != INLSITES_NOT_PROBED)
				ret_inlined[i] = 2;
			else if (!why)
				why = st->reason;
		}
		if (!ncallers || ret_inlined[i] == 2)
			continue;
		ret_inlined[i] = 1;
		if (out)
			continue;
		n = snprintf(msg, len, "'%.80s' in %s exists only inlined, in %zu caller%s (",
			     pats[i], path, ncallers, ncallers == 1 ? "" : "s");
		for (size_t c = 0; n >= 0 && (size_t)n < len && c < l->ncopies && shown < 3; c++)
			if (new_caller(l, pats[i], c))
				n += snprintf(msg + n, len - (size_t)n, "%s%.80s",
					      shown++ ? ", " : "", l->copies[c].caller);
		if (n >= 0 && (size_t)n < len)
			n += snprintf(
				msg + n, len - (size_t)n,
				"%s), and its copies cannot be probed: %.160s; trace its callers",
				ncallers > shown ? ", ..." : "", why ? why : "not read");
		out = n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
	}
out:
	if (l != kept)
		inl_list__free(l);
	free(pats);
	return out;
}

/*
 * -ENOENT naming the patterns that match nothing in path: a function that
 * exists only inlined first (said so, not "no function matches"; from the
 * copies kept, or read with inlined_too only: the agent (partial) runs this
 * on its main loop, where reading a big Go binary's inline tree, 73 ms for
 * kube-apiserver, does not belong: its analyzer keeps them), then those
 * with suggestions (likely typos), as many as the message holds, and how
 * many more. A probe of 64 patterns named only its first before.
 */
static int unmatched_error(struct binary *b, const struct binary_match *m, const char *path,
			   struct inl_list *kept, bool inlined_too, struct rw_error *err)
{
	char msg[sizeof(err->msg)], one[sizeof(err->msg)], note[sizeof(err->msg) - 8];
	size_t len = 0, shown = 0, missing = 0, unprobed = 0;
	uint8_t *inlined = calloc(m->nunmatched ? m->nunmatched : 1, sizeof(*inlined));

	if (!inlined)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (inlined_too || kept)
		len = inlined_only(b, m, path, kept, inlined, msg, sizeof(msg));
	for (size_t i = 0; i < m->nunmatched; i++) {
		missing += !inlined[i];
		unprobed += inlined[i] == 1;
	}
	/* every one names a function whose inlined copies are traced */
	if (!missing && !unprobed) {
		free(inlined);
		return 0;
	}
	if (len && !missing) {
		free(inlined);
		return rw_error_set(err, ENOENT, "%s", msg);
	}
	len += (size_t)snprintf(msg + len, sizeof(msg) - len, "%sno function matches ",
				len ? "; " : "");
	if (len >= sizeof(msg))
		len = sizeof(msg) - 1;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < m->nunmatched; i++) {
			const struct binary_unmatched *u = &m->unmatched[i];
			size_t n;

			if ((u->nsuggestions > 0) != (pass == 0) || inlined[i])
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
	if (shown < missing && len < sizeof(msg))
		len += (size_t)snprintf(msg + len, sizeof(msg) - len, "; nor %zu more patterns",
					missing - shown);
	if (len < sizeof(msg) && binary__stripped_note(b, note, sizeof(note)))
		snprintf(msg + len, sizeof(msg) - len, ": %s", note);
	free(inlined);
	return rw_error_set(err, ENOENT, "%s", msg);
}

/*
 * Drops from tt's unmatched patterns those that name a function that exists
 * only inlined, traced through its copies: matched, as far as a user is told.
 */
static void unmatched__drop_inlined(struct tracer_target *tt)
{
	struct binary_match *m = &tt->match;
	size_t n = 0;

	for (size_t i = 0; i < m->nunmatched; i++)
		if (!inline__covers(tt->file, m, i))
			m->unmatched[n++] = m->unmatched[i];
	m->nunmatched = n;
}

int tracer__check(struct tracer *t, const char *path, const char *const *patterns, size_t npatterns,
		  struct rw_error *err)
{
	struct binary_match m = { 0 };
	struct binary *b = binary__open(t->cache, path, err);
	int e;

	if (!b)
		return -(errno ? errno : EINVAL);
	e = binary__match(b, patterns, npatterns, BINARY_DEFAULT_LIMIT, &m, err);
	if (!e && m.nunmatched && !(t->partial && m.nfuncs))
		e = unmatched_error(b, &m, path, NULL, !t->partial, err);
	binary_match__clear(&m);
	binary__put(b);
	return e;
}

static bool pid_traced_elsewhere(const struct tracer *t, const struct tracer_target *tt)
{
	for (const struct tracer_target *o = t->targets; o; o = o->next)
		if (o != tt && o->pid == tt->pid)
			return true;
	return false;
}

struct tracer_target *tracer__add(struct tracer *t, pid_t pid, const char *path,
				  const char *const *patterns, size_t npatterns,
				  uint64_t threshold_ns, struct rw_error *err)
{
	return tracer__add_bounded(t, pid, path, patterns, npatterns, threshold_ns, SIZE_MAX, err);
}

/*
 * The functions tt traces in its file: those the patterns match, and those
 * that exist only inlined (tracer_inline.c); its arrays made for them.
 */
static int target__functions(struct tracer *t, struct tracer_target *tt, const char *path,
			     const char *const *patterns, size_t npatterns, size_t max_funcs,
			     struct rw_error *err)
{
	size_t nown;
	int e;

	/* an analysis can read other machines' code (inspect); a probe cannot run it */
	if (!binary__native(tt->file->bin))
		return rw_error_set(err, ENOEXEC, "%s is %s code: this retwatch traces %s", path,
				    binary__machine(tt->file->bin), RW_MACHINE);
	e = binary__match(tt->file->bin, patterns, npatterns, BINARY_DEFAULT_LIMIT, &tt->match,
			  err);
	if (e)
		return e;
	/* inlined copies too (in the agent, as its analyzer read them: see unmatched_error) */
	if (inline__collect(t, tt, patterns, npatterns))
		return rw_error_set(err, ENOMEM, "out of memory");
	nown = inline__own_for(tt->file, patterns, npatterns, NULL, 0);
	unmatched__drop_inlined(tt);
	if (tt->match.nunmatched && !(t->partial && tt->match.nfuncs + nown)) {
		e = unmatched_error(
			tt->file->bin, &tt->match, path,
			t->partial ? binary__inlined_kept(tt->file->bin, patterns, npatterns)
				   : NULL,
			!t->partial, err);
		if (e)
			return e;
	}
	if (tt->match.nfuncs + nown > max_funcs)
		return rw_error_set(err, EDQUOT,
				    "the patterns match %zu functions in %s, more than %zu",
				    tt->match.nfuncs + nown, path, max_funcs);
	tt->nfuncs = tt->match.nfuncs + nown;
	tt->funcs = calloc(tt->nfuncs + 1, sizeof(*tt->funcs));
	tt->slots = calloc(tt->nfuncs + 1, sizeof(*tt->slots));
	tt->swept_orphans = calloc(tt->nfuncs + 1, sizeof(*tt->swept_orphans));
	tt->swept_tail_exits = calloc(tt->nfuncs + 1, sizeof(*tt->swept_tail_exits));
	tt->base = calloc(tt->nfuncs + 1, sizeof(*tt->base));
	tt->kept = calloc(tt->nfuncs + 1, sizeof(*tt->kept));
	tt->keep = calloc(tt->nfuncs + 1, sizeof(*tt->keep));
	if (!tt->funcs || !tt->slots || !tt->swept_orphans || !tt->swept_tail_exits || !tt->base ||
	    !tt->kept || !tt->keep)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < tt->match.nfuncs; i++)
		tt->funcs[i].info = tt->match.funcs[i];
	inline__own_for(tt->file, patterns, npatterns, tt->funcs + tt->match.nfuncs, nown);
	return 0;
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
	e = file__open(t, pid, path, &tt->file, err);
	if (e)
		goto fail;
	tt->file->users++;
	e = target__functions(t, tt, path, patterns, npatterns, max_funcs, err);
	if (e)
		goto fail;
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
	follow__add(t, tt);
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
	if (last) {
		pid__retire(t, tt->pid);
		follow__drop(t, tt);
	}
	if (tt->file && --tt->file->users == 0)
		file__drop(t, tt->file);
	target__free(tt);
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

int tracer_target__keep_slowest(struct tracer *t, struct tracer_target *tt, size_t i,
				unsigned int keep, uint64_t floor_ns, bool new_window)
{
	uint32_t most = 0, window;
	const struct slot *s;
	uint64_t lowest = 0;
	struct batch *b;

	if (i >= tt->nfuncs || keep > TRACER_MAX_KEEP)
		return -EINVAL;
	tt->keep[i].n = keep;
	tt->keep[i].floor_ns = keep ? floor_ns : 0;
	s = tt->slots[i];
	b = s ? slot__batch(s, tt->pid) : NULL;
	if (!b || !b->has_hist)
		return 0; /* detached: tracer_target__reattach sets it again */
	/* the process's targets (probes) of the function: the most calls, the lowest floor */
	for (const struct tracer_target *o = t->targets; o; o = o->next) {
		if (o->pid != tt->pid || o == tt)
			continue;
		for (size_t k = 0; k < o->nfuncs; k++) {
			if (o->slots[k] != s || !o->keep[k].n)
				continue;
			most = o->keep[k].n > most ? o->keep[k].n : most;
			if (!lowest || o->keep[k].floor_ns < lowest)
				lowest = o->keep[k].floor_ns;
		}
	}
	if (keep) {
		most = keep > most ? keep : most;
		if (!lowest || floor_ns < lowest)
			lowest = floor_ns;
	}
	window = b->keep_window + (new_window ? 1 : 0);
	if (most == b->keep && lowest == b->keep_ns && window == b->keep_window)
		return 0;
	b->keep = most;
	b->keep_ns = lowest;
	b->keep_window = window;
	return batch__set_threshold(t, b);
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
	ret->calls += tt->swept_tail_exits[i];
	return 0;
}

uint64_t tracer_target__children_unprobed(const struct tracer_target *tt)
{
	return tt->children_unprobed;
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
	/* histogram slots whose links are closed: their empty pages go, a few at a time */
	ids__take_back(t, &t->hist_ids, false);
	hist_pages__trim(t, HIST_TRIM_NS);
	e = ring_buffer__poll(t->rb, timeout_ms);
	if (e == -ECANCELED && t->npolled >= TRACER_POLL_MAX_EVENTS)
		return (int)t->npolled;
	return e;
}

int tracer__fd(const struct tracer *t)
{
	return ring_buffer__epoll_fd(t->rb);
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
	ret->share_changes = t->share_changes;
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

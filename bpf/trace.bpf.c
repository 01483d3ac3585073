// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The two programs of the tracing engine: rw_entry at every traced function's
 * entry (and at runtime.morestack of Go binaries), rw_ret at every RET
 * instruction. Most attachments are one process's (the kernel runs them
 * for that process alone), and their cookie names the function slot and that
 * function's histogram slot in that process; a shared attachment is every
 * process's that maps the file, and the hit's process finds its histogram
 * slot in proc_hists.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "retwatch.h"
#include "hist.h"
#include "maps.bpf.h"
#include "frames.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

static __always_inline const struct rw_func *func__lookup(__u32 fn_id)
{
	const struct rw_func *fn = bpf_map_lookup_elem(&funcs, &fn_id);

	if (!fn || !(fn->flags & RW_FUNC_ACTIVE)) {
		stat_inc(RW_STAT_NO_FUNC);
		return NULL;
	}
	return fn;
}

/* The histogram slot a cookie names. */
static __always_inline __u32 cookie__hist(__u64 cookie)
{
	return (cookie >> RW_COOKIE_HIST_SHIFT) & RW_COOKIE_HIST_MASK;
}

/*
 * The hit's pid_tgid. A per-process attachment's cookie says which process:
 * a Go hit (keyed by goroutine) needs no more; a native hit (keyed by
 * thread) asks for its tid, a helper call, as does every shared hit.
 */
static __always_inline __u64 hit__pid_tgid(__u64 cookie, bool go)
{
	if (go && !(cookie & RW_COOKIE_SHARED))
		return cookie >> RW_COOKIE_TGID_SHIFT << 32;
	return bpf_get_current_pid_tgid();
}

/*
 * Whether this attachment is the one fn counts by: while a function changes
 * between shared and per-process probes both are attached, and a hit runs
 * both; the other one's run is not a second call.
 */
static __always_inline bool hit__counts(const struct rw_func *fn, __u64 cookie)
{
	return !(fn->flags & RW_FUNC_SHARED) == !(cookie & RW_COOKIE_SHARED);
}

/*
 * The current process's start time as /proc/PID/stat gives it (its thread
 * group leader's, in clock ticks since boot). A per-process attachment needs
 * no such check: the kernel runs it only in the task it was made for, never
 * in another that takes over its pid.
 */
static __always_inline __u64 current__starttime(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return task->group_leader->start_boottime / RW_NS_PER_TICK;
}

/*
 * The histogram slot of k's function lent to k's process, forked by a
 * followed one and not yet given its own by userspace (struct rw_follow).
 */
static __always_inline bool follow__hist(struct rw_hist_key *k, __u32 *ret)
{
	const struct rw_follow *f = bpf_map_lookup_elem(&follow, &k->tgid);
	const struct rw_proc_hist *h;

	if (!f || f->lender == k->tgid || (f->starttime && f->starttime != current__starttime())) {
		stat_inc(RW_STAT_UNTRACED_HITS);
		return false;
	}
	k->tgid = f->lender;
	h = bpf_map_lookup_elem(&proc_hists, k);
	if (!h) {
		stat_inc(RW_STAT_UNTRACED_HITS);
		return false;
	}
	*ret = h->hist;
	return true;
}

/*
 * The histogram slot of (fn_id, tgid) at an entry: the cookie's, or for a
 * shared probe proc_hists' (or its lender's); false in a process not
 * traced for fn_id.
 */
static __always_inline bool hit__hist(__u64 cookie, __u32 fn_id, __u32 tgid, __u32 *ret)
{
	struct rw_hist_key k = { .fn_id = fn_id, .tgid = tgid };
	const struct rw_proc_hist *h;

	if (!(cookie & RW_COOKIE_SHARED)) {
		*ret = cookie__hist(cookie);
		return true;
	}
	h = bpf_map_lookup_elem(&proc_hists, &k);
	if (!h)
		return follow__hist(&k, ret);
	if (h->starttime && h->starttime != current__starttime()) {
		stat_inc(RW_STAT_REUSED_PID_HITS);
		return false;
	}
	*ret = h->hist;
	return true;
}

static __always_inline void hist__record(struct rw_hist *h, __u64 ns)
{
	unsigned int b = rw_hist_bucket(ns);

	h->calls++;
	h->sum_ns += ns;
	if (!h->min_ns || ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
	if (b < RW_HIST_BUCKETS)
		h->buckets[b]++;
}

/*
 * runtime.morestack, called from a function's prologue before its frame
 * exists: the function will start over at its entry on a larger stack (or
 * after a preemption) at the same depth. Mark its frame so that second entry
 * is not taken for a new call. The return address proves which function
 * called: a stale frame at the same depth must not be revived.
 */
static __always_inline void on_morestack(struct pt_regs *regs, __u64 cookie)
{
	__u64 pid_tgid = hit__pid_tgid(cookie, true);
	const struct rw_func go = { .flags = RW_FUNC_GO };
	struct rw_frame *top;
	struct rw_frames *fr;
	const struct rw_func *fn;
	struct call_ctx c;
	__u64 ret_addr;

	call_ctx__init(&c, regs, &go, pid_tgid);
	fr = frames__find(&c);
	if (!fr)
		return;
	top = frames__top(fr, &c.key);
	if (!top)
		return;
	/* An x86 CALL pushed a return address: the caller's entry SP is 8 higher. */
	if (top->depth + CALL_PUSHES != c.depth)
		return;
	ret_addr = regs__ret_addr(regs);
	if (!ret_addr) {
		stat_inc(RW_STAT_MORESTACK_READ_FAILED);
		return;
	}
	fn = bpf_map_lookup_elem(&funcs, &top->fn_id);
	if (!fn || (fn->flags & RW_FUNC_ENTRY_PAST_CHECK) || ret_addr <= top->entry_ip ||
	    ret_addr > top->entry_ip + fn->size)
		return;
	top->flags |= RW_FRAME_RESTARTING;
}

/*
 * A call counted at its entry, with no duration: an entry-only function's,
 * or an inlined copy's (inl) whose exits are not known or whose function is
 * entry-only.
 */
static __always_inline void hist__count_entry(__u32 hist, __u32 fn_id, __u32 tgid, bool inl)
{
	struct rw_hist *h = hist__get(hist, fn_id, tgid);

	if (!h)
		return;
	h->calls++;
	if (inl) {
		h->inlined++;
		h->inlined_untimed++;
	}
}

/*
 * Keeps the argument registers of a call about to be pushed at frame index n
 * of c's context (RW_FUNC_ARGS): in the context index, not too deep.
 * Whether they were kept.
 */
static __always_inline bool args__keep(struct pt_regs *regs, const struct call_ctx *c, __u32 n)
{
	struct rw_ctx_args *a;
	struct rw_args *f;
	__u32 slot = c->slot;

	if (n >= RW_ARGS_FRAMES || slot >= RW_IDX_SLOTS)
		return false;
	a = bpf_map_lookup_elem(&ctx_args, &slot);
	if (!a)
		return false;
	asm volatile("" : "+r"(n));
	f = &a->f[n & (RW_ARGS_FRAMES - 1)];
	regs__args(regs, f->r);
	return true;
}

SEC("uprobe")
int rw_entry(struct pt_regs *regs)
{
	__u64 cookie = bpf_get_attach_cookie(regs), pid_tgid;
	__u32 fn_id = cookie & RW_COOKIE_FN_MASK;
	const struct rw_func *fn;
	struct rw_frames *fr;
	struct call_ctx c;
	__u32 flags, hist;

	/* restarts are marked by either kind of probe alike: twice is once */
	if (cookie & RW_COOKIE_MORESTACK) {
		on_morestack(regs, cookie);
		return 0;
	}
	fn = func__lookup(fn_id);
	if (!fn || !hit__counts(fn, cookie))
		return 0;
	pid_tgid = hit__pid_tgid(cookie, fn->flags & RW_FUNC_GO);
	if (!hit__hist(cookie, fn_id, pid_tgid >> 32, &hist))
		return 0;
	if ((fn->flags & RW_FUNC_ENTRY_ONLY) || (cookie & RW_COOKIE_INLINE_COUNT)) {
		hist__count_entry(hist, fn_id, pid_tgid >> 32, cookie & RW_COOKIE_INLINE);
		return 0;
	}
	call_ctx__init(&c, regs, fn, pid_tgid);
	if (!(cookie & RW_COOKIE_INLINE))
		call_ctx__at_entry(&c, fn->entry_sp);
	c.hist = hist;
	fr = frames__get(&c, fn_id);
	if (!fr)
		return 0;
	frames__purge_deeper(fr, &c.key, c.depth);
	if (cookie & RW_COOKIE_INLINE) {
		frames__inline_entry(fr, &c, fn_id);
		flags = 0;
	} else if (frames__restarted(fr, &c, fn_id, REG_IP(regs), &flags)) {
		return 0;
	}
	if ((fn->flags & RW_FUNC_ARGS) && args__keep(regs, &c, fr->n))
		flags |= RW_FRAME_ARGS;
	frames__push(fr, &c, fn, fn_id, REG_IP(regs), flags);
	return 0;
}

/* The goroutine id of a slow call's g: read only for slow calls, so no hit pays for it. */
static __always_inline __u64 goid__read(const struct call_ctx *c, const struct rw_func *fn)
{
	__u32 off = fn->goid_offset;
	__u64 goid;

	if (!c->go || (off != 152 && off != 160))
		return 0;
	if (bpf_probe_read_user(&goid, sizeof(goid), (void *)(c->key.id + off)))
		return 0;
	return goid;
}

/* A call not sent: a slow call is counted in its histogram's slow_dropped
 * and in stat; a candidate for the slowest kept only in RW_STAT_KEEP_REFUSED. */
static __always_inline void slow_call__refused(struct rw_hist *h, bool slow, __u32 stat)
{
	if (slow) {
		h->slow_dropped++;
		stat_inc(stat);
	} else {
		stat_inc(RW_STAT_KEEP_REFUSED);
	}
}

/*
 * Whether a slow call may go to the ring buffer: at most fn->max_events per
 * window, counted per CPU in the (function, process) histogram the RET
 * already holds, so a 1 ns threshold on a hot function cannot flood the ring
 * buffer shared by every probe, nor its reader. Checked before the reserve.
 */
static __always_inline bool slow_call__admit(struct rw_hist *h, const struct rw_func *fn, __u64 now,
					     bool slow)
{
	__u64 *sent = slow ? &h->rate.sent : &h->rate.kept;

	if (!fn->max_events)
		return true;
	if (now - h->rate.window_ns >= RW_RATE_WINDOW_NS) {
		h->rate.window_ns = now;
		h->rate.sent = 0;
		h->rate.kept = 0;
	}
	if (*sent >= fn->max_events) {
		slow_call__refused(h, slow, RW_STAT_SLOW_LIMITED);
		return false;
	}
	(*sent)++;
	return true;
}

/*
 * Whether a call of dur is among the th->keep slowest to return on this
 * CPU in th's window (struct rw_keep): it takes the place of the fastest.
 * A global function: the verifier checks its loops once, not at each of
 * frame__close's places.
 */
__noinline int keep__enter(struct rw_hist *h, const struct rw_threshold *th, __u64 dur)
{
	__u64 least = ~0ULL;
	__u32 at = 0;

	if (!h || !th)
		return 0;
	if (h->keep.window != th->keep_window) {
		for (int i = 0; i < RW_MAX_KEEP; i++)
			h->keep.ns[i] = 0;
		h->keep.window = th->keep_window;
	}
	for (__u32 i = 0; i < RW_MAX_KEEP && i < th->keep; i++) {
		if (h->keep.ns[i] < least) {
			least = h->keep.ns[i];
			at = i;
		}
	}
	if (dur <= least || at >= RW_MAX_KEEP)
		return false;
	h->keep.ns[at] = dur;
	return true;
}

/*
 * Whether a call of fn_id returning with the n frames of fr under it in
 * flight has keep calls of its own function among them. Each will last at
 * least as long as it (they began before it and end after it), so it cannot
 * be among the keep slowest: a recursion's inner levels, each a new slowest
 * on its CPU as they return innermost first, would fill the ring buffer and
 * leave no room for the outermost. Frames past fr->f (deep chunks) are not
 * looked at: fewer found, more sent. An enclosing call that never returns
 * (a panic, a longjmp) is counted all the same. A global function: the
 * verifier checks the loop once.
 */
__noinline int keep__nested(const struct rw_frames *fr, __u32 n, __u32 fn_id, __u32 keep)
{
	__u32 found = 0;

	if (!fr)
		return 0;
	for (__u32 i = 0; i < RW_MAX_FRAMES && i < n; i++) {
		if (fr->f[i].fn_id == fn_id && ++found >= keep)
			return 1;
	}
	return 0;
}

/*
 * Whether tgid's namespace may send one more slow call in this window: at
 * most max_events a window over every CPU, so one namespace's probes cannot
 * fill the ring buffer the node's other namespaces share. The window's
 * reset may race with another CPU's: a few events more or less.
 */
static __always_inline bool share__admit_event(struct rw_hist *h, __u32 tgid, __u64 now, bool slow)
{
	struct rw_share *sh = share__of(tgid);

	if (!sh || !sh->max_events)
		return true;
	if (now - sh->window_ns >= RW_RATE_WINDOW_NS) {
		sh->window_ns = now;
		sh->events = 0;
	}
	if (sh->events >= sh->max_events) {
		if (slow)
			__sync_fetch_and_add(&sh->events_refused, 1);
		slow_call__refused(h, slow, RW_STAT_SHARE_EVENTS);
		return false;
	}
	__sync_fetch_and_add(&sh->events, 1);
	return true;
}

/*
 * The top of the user stack into dst, for userspace to unwind: whole pages
 * from the one holding sp (at base), up to where the stack's mapping ends.
 * Page by page, since a read that faults part way costs as much again
 * (measured: a halving 16 KiB read cost 10 us more per slow call). The bytes read.
 */
static __always_inline __u32 stack_copy__read(__u8 *dst, __u64 base)
{
	__u32 n = 0;

#pragma unroll
	for (int i = 0; i < RW_STACK_COPY / RW_PAGE_SIZE; i++) {
		if (bpf_probe_read_user(dst + i * RW_PAGE_SIZE, RW_PAGE_SIZE,
					(void *)(base + i * RW_PAGE_SIZE)))
			break;
		n += RW_PAGE_SIZE;
	}
	return n;
}

static __always_inline void slow_call__fill(struct rw_event *e, struct pt_regs *regs,
					    const struct call_ctx *c, const struct rw_func *fn,
					    __u32 fn_id, __u64 start, __u64 dur, __u64 entry_ip)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(); /* the tid: a Go hit has not asked */
	__u32 tgid = pid_tgid >> 32;
	const struct rw_follow *lent = bpf_map_lookup_elem(&follow, &tgid);

	e->lender = lent ? lent->lender : 0;
	e->flags = lent && (lent->flags & RW_FOLLOW_STARTED) ? RW_EVENT_OWN_MAPS : 0;
	if (c->after_ret)
		e->flags |= RW_EVENT_AFTER_RET;
	e->start_ns = start;
	e->duration_ns = dur;
	e->goid = goid__read(c, fn);
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->fn_id = fn_id;
	/* at a RET, BP already holds the caller's frame: the walk starts one up;
	 * returned, the walk starts in the caller, and the call's frame is its entry */
	e->ret_addr = c->after_ret ? entry_ip : regs__ret_addr(regs);
	e->stack_bytes = bpf_get_stack(regs, e->stack, sizeof(e->stack), BPF_F_USER_STACK);
	e->regs.ip = REG_IP(regs);
	e->regs.sp = REG_SP(regs);
	e->regs.fp = REG_FP(regs);
	regs__callee_saved(regs, e->regs.saved);
	e->copy_addr = REG_SP(regs) & ~(__u64)(RW_PAGE_SIZE - 1);
	e->copy_bytes = 0;
	e->args_kept = 0;
}

/* String i of fn->str_args (a Go string or []byte: pointer and length
 * registers; C: up to a NUL), read now into e: the bytes read, or -errno. */
static __always_inline __s32 arg_string__read(struct rw_event *e, const struct rw_func *fn, int i)
{
	__u32 spec = (fn->str_args >> (8 * i)) & 0xff, pr = spec & 0xf, lr = spec >> 4;
	__u64 ptr, len;
	long r;

	if (spec == RW_STR_NONE || pr >= RW_ARG_REGS)
		return 0;
	ptr = e->args.r[pr];
	if (lr == RW_STR_NUL)
		return bpf_probe_read_user_str(e->str[i], RW_STR_BYTES, (void *)ptr);
	if (lr >= RW_ARG_REGS)
		return 0;
	len = e->args.r[lr];
	if (len > RW_STR_BYTES)
		len = RW_STR_BYTES;
	if (len == 0)
		return 0;
	r = bpf_probe_read_user(e->str[i], len, (void *)ptr);
	return r ? (__s32)r : (__s32)len;
}

/*
 * The arguments its entry kept (frame index idx of c's context, when the
 * frame says so) into e, and the bytes of its strings, read as it ends.
 */
static __always_inline void slow_call__args(struct rw_event *e, const struct call_ctx *c,
					    const struct rw_func *fn, __u32 idx, __u32 frame_flags)
{
	struct rw_ctx_args *a;
	__u32 slot = c->slot;

	if (!(frame_flags & RW_FRAME_ARGS) || !(fn->flags & RW_FUNC_ARGS) ||
	    idx >= RW_ARGS_FRAMES || slot >= RW_IDX_SLOTS)
		return;
	a = bpf_map_lookup_elem(&ctx_args, &slot);
	if (!a)
		return;
	asm volatile("" : "+r"(idx));
	e->args = a->f[idx & (RW_ARGS_FRAMES - 1)];
	e->args_kept = 1;
#pragma unroll
	for (int i = 0; i < RW_MAX_STR_ARGS; i++)
		e->str_len[i] = arg_string__read(e, fn, i);
}

/* Go's frame-pointer walk (stack[]) is its stack; native code sends its
 * stack's top too, where userspace unwinds it through the unwind tables. */
static __always_inline void slow_call__send(struct pt_regs *regs, const struct call_ctx *c,
					    const struct rw_func *fn, __u32 fn_id, __u64 start,
					    __u64 dur, struct rw_hist *h, bool slow, __u32 idx,
					    __u32 frame_flags, __u64 entry_ip)
{
	struct rw_event_copy *ec;
	struct rw_event *e;

	if (c->go) {
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e)
			goto full;
		slow_call__fill(e, regs, c, fn, fn_id, start, dur, entry_ip);
		slow_call__args(e, c, fn, idx, frame_flags);
		bpf_ringbuf_submit(e, 0);
		goto sent;
	}
	ec = bpf_ringbuf_reserve(&events, sizeof(*ec), 0);
	if (!ec)
		goto full;
	slow_call__fill(&ec->e, regs, c, fn, fn_id, start, dur, entry_ip);
	slow_call__args(&ec->e, c, fn, idx, frame_flags);
	ec->e.copy_bytes = stack_copy__read(ec->copy, ec->e.copy_addr);
	bpf_ringbuf_submit(ec, 0);
sent:
	if (!slow)
		stat_inc(RW_STAT_KEEP_SENT);
	return;
full:
	slow_call__refused(h, slow, RW_STAT_RINGBUF_FULL);
}

/*
 * The deepest frame, when this RET (or a copy's exit) ends it: a frame of
 * fn_id at the RET's depth, raised above others at that depth
 * (frames__raise). Frames deeper than the RET were left by a panic or
 * longjmp.
 */
static __always_inline struct rw_frame *frames__ret_top(struct rw_frames *fr,
							const struct call_ctx *c, __u32 fn_id)
{
	struct rw_frame *top;

	frames__purge_deeper(fr, &c->key, c->depth);
	top = frames__top(fr, &c->key);
	if (!top || top->depth != c->depth)
		return NULL;
	if (top->fn_id == fn_id)
		return top;
	return frames__raise(fr, c, fn_id);
}

/*
 * A RET probe of a function that fn_id's function tail-calls: it ends the
 * traced call only at the depth the call was entered at (the tail jump left
 * SP there). A call of the same function from anywhere else returns at
 * another depth and is neither counted nor disturbs a frame.
 */
static __always_inline struct rw_frame *frames__tail_top(struct rw_frames *fr,
							 const struct call_ctx *c, __u32 fn_id)
{
	struct rw_frame *top = frames__top(fr, &c->key);

	if (!top || top->depth < c->depth)
		return NULL;
	return frames__ret_top(fr, c, fn_id);
}

/*
 * Ends the call of top, the deepest frame, a call of fn, now: its duration
 * into its function's histogram, slot hist (tail: at a RET of a function it
 * tail-called), and a slow-call event if due. Returns the frame's flags.
 */
static __always_inline __u32 frame__close(struct pt_regs *regs, struct rw_frames *fr,
					  struct rw_frame *top, const struct rw_func *fn,
					  const struct call_ctx *c, __u64 now, __u32 hist,
					  bool tail, bool inl)
{
	__u32 fn_id = top->fn_id, flags = top->flags, idx = fr->n - 1;
	__u64 start = top->start_ns, dur = now - start, entry_ip = top->entry_ip;
	const struct rw_threshold *th;
	struct rw_hist *h;
	bool slow, keep;

	fr->n--;
	fr->last_ns = now;
	h = hist__get(hist, fn_id, c->key.tgid);
	if (!h)
		return flags;
	hist__record(h, dur);
	if (tail) {
		h->tail_closed++;
		stat_inc(RW_STAT_TAIL_CLOSED);
	}
	if (inl)
		h->inlined++;
	th = bpf_map_lookup_elem(&hist_thresholds, &hist);
	if (!th)
		return flags;
	slow = th->slow_ns && dur >= th->slow_ns;
	/* a slow call is sent whether or not it is among the slowest */
	keep = th->keep && dur >= th->keep_ns && keep__enter(h, th, dur);
	if (keep && !slow && keep__nested(fr, idx, fn_id, th->keep)) {
		stat_inc(RW_STAT_KEEP_NESTED);
		keep = false;
	}
	if ((slow || keep) && slow_call__admit(h, fn, now, slow) &&
	    share__admit_event(h, c->key.tgid, now, slow))
		slow_call__send(regs, c, fn, fn_id, start, dur, h, slow, idx, flags, entry_ip);
	return flags;
}

/* Callers stacked under a closed frame at its depth tail-called it: their calls end too. */
#define RW_MAX_TAIL_OVER 4

/*
 * A call of the cookie's function ends: at one of its RETs, or just after
 * it returned through the kernel's return trampoline (RW_COOKIE_AFTER_RET,
 * attached as a uretprobe at its entry: the RET popped the return address,
 * and SP is 8 above the entry's). Native code that calls nothing returns
 * that way (binary__trampoline_refusal), so no frame can be deeper than its
 * own and no tail or inlined copy's exit comes there.
 */
SEC("uprobe")
int rw_ret(struct pt_regs *regs)
{
	__u64 now = bpf_ktime_get_ns(), cookie = bpf_get_attach_cookie(regs), pid_tgid;
	__u32 fn_id = cookie & RW_COOKIE_FN_MASK, flags;
	bool tail = cookie & RW_COOKIE_TAIL, inl = cookie & RW_COOKIE_INLINE;
	const struct rw_func *fn;
	struct rw_frames *fr;
	struct rw_frame *top;
	struct call_ctx c;

	fn = func__lookup(fn_id);
	if (!fn || !hit__counts(fn, cookie))
		return 0;
	pid_tgid = hit__pid_tgid(cookie, fn->flags & RW_FUNC_GO);
	call_ctx__init(&c, regs, fn, pid_tgid);
	call_ctx__after_ret(&c, (cookie & RW_COOKIE_AFTER_RET) >> 37);
	fr = frames__lookup(&c.key, &c.slot);
	if (!fr) {
		if (!tail && !inl)
			stat_inc(RW_STAT_UNMATCHED_RET);
		return 0;
	}
	if (!frames__depth(fr, &c))
		return 0;
	top = tail ? frames__tail_top(fr, &c, fn_id) : frames__ret_top(fr, &c, fn_id);
	if (!top) {
		/* an exit of a copy reached by the caller's own code */
		if (tail || inl)
			return 0;
		if (fr->lost_depth == c.depth)
			fr->lost_depth = 0; /* the lost call returned */
		stat_inc(RW_STAT_UNMATCHED_RET);
		return 0;
	}
	/* the cookie's slot: the frame's may be of an earlier attachment; a
	 * shared probe's cookie has none, and its frame's is the entry's */
	flags = frame__close(regs, fr, top, fn, &c, now,
			     cookie & RW_COOKIE_SHARED ? top->hist : cookie__hist(cookie), tail,
			     inl);
	for (int i = 0; i < RW_MAX_TAIL_OVER && (flags & RW_FRAME_TAIL_OVER); i++) {
		top = frames__top(fr, &c.key);
		if (!top || top->depth != c.depth)
			break;
		fn = bpf_map_lookup_elem(&funcs, &top->fn_id);
		if (!fn)
			break;
		flags = frame__close(regs, fr, top, fn, &c, now, top->hist, true, false);
	}
	return 0;
}

#if defined(__TARGET_ARCH_x86)
/* A general-purpose register by its RW_REG_* number; the next instruction's address for RW_REG_IP. */
static __always_inline __u64 regs__gp(struct pt_regs *regs, __u8 r, __u8 len)
{
	switch (r) {
	case 1: return regs->ax;
	case 2: return regs->cx;
	case 3: return regs->dx;
	case 4: return regs->bx;
	case 5: return regs->sp;
	case 6: return regs->bp;
	case 7: return regs->si;
	case 8: return regs->di;
	case 9: return regs->r8;
	case 10: return regs->r9;
	case 11: return regs->r10;
	case 12: return regs->r11;
	case 13: return regs->r12;
	case 14: return regs->r13;
	case 15: return regs->r14;
	case 16: return regs->r15;
	case RW_REG_IP: return regs->ip + len;
	}
	return 0;
}

/* Where the hook jump site h (the instruction at the probe) goes; 0 when unread. */
static __always_inline __u64 hook__target(struct pt_regs *regs, const struct rw_hook_site *h)
{
	__u64 addr, target = 0;

	if (h->kind == RW_HOOK_REG)
		return regs__gp(regs, h->base, h->len);
	addr = regs__gp(regs, h->base, h->len) + regs__gp(regs, h->index, h->len) * h->scale +
	       (__s64)h->disp;
	if (bpf_probe_read_user(&target, sizeof(target), (void *)addr))
		return 0;
	return target;
}
#endif

/*
 * A jump of a traced function through a function pointer (struct
 * rw_hooks): where it goes is sent to userspace, once per (process,
 * function, target) while hook_seen remembers it (the children of a
 * followed process count as it), for its RETs to be probed as the call's
 * exits. The jump itself is left alone: the call is
 * still in flight, at its entry's depth, and ends at such a RET.
 */
SEC("uprobe")
int rw_hook(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	__u64 cookie = bpf_get_attach_cookie(regs), ip = REG_IP(regs);
	__u32 fn_id = cookie & RW_COOKIE_FN_MASK;
	struct rw_hook_target k = { .fn_id = fn_id };
	const struct rw_follow *lent;
	const struct rw_hooks *hooks;
	struct rw_hook_event *ev;
	const struct rw_func *fn;
	__u32 tgid;
	__u8 one = 1;

	fn = func__lookup(fn_id);
	if (!fn || !hit__counts(fn, cookie))
		return 0;
	hooks = bpf_map_lookup_elem(&hook_sites, &fn_id);
	if (!hooks)
		return 0;
	for (int i = 0; i < RW_HOOK_SITES; i++) {
		const struct rw_hook_site *h = &hooks->site[i];

		if (!h->kind || h->page_off != (ip & 0xfff))
			continue;
		k.target = hook__target(regs, h);
		break;
	}
	if (!k.target)
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	lent = bpf_map_lookup_elem(&follow, &tgid);
	/* where it jumped is read in the lender's mappings, the child's as forked */
	k.tgid = lent && lent->lender && !(lent->flags & RW_FOLLOW_STARTED) ? lent->lender : tgid;
	if (bpf_map_lookup_elem(&hook_seen, &k))
		return 0;
	ev = bpf_ringbuf_reserve(&hook_events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(RW_STAT_HOOK_LOST);
		return 0;
	}
	ev->k = k;
	ev->tgid = tgid;
	ev->pad = 0;
	bpf_ringbuf_submit(ev, 0);
	bpf_map_update_elem(&hook_seen, &k, &one, BPF_ANY);
	stat_inc(RW_STAT_HOOK_TARGETS);
#endif
	return 0;
}

/*
 * A process forked by a followed one is followed too, lent the same
 * histograms (struct rw_follow): the tracepoint fires before the child
 * first runs, so its first call counts. Threads share their process's.
 * Attached only where userspace follows processes (tracer_opts.follow).
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(rw_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	const struct rw_follow *p;
	struct rw_follow f = {};

	if (ptgid == ctgid)
		return 0;
	p = bpf_map_lookup_elem(&follow, &ptgid);
	if (!p)
		return 0;
	f.lender = p->lender;
	/* a child of one started anew has its mappings, not the lender's */
	f.flags = p->flags & RW_FOLLOW_STARTED;
	f.starttime = p->starttime ? child->start_boottime / RW_NS_PER_TICK : 0;
	if (bpf_map_update_elem(&follow, &ctgid, &f, BPF_ANY))
		stat_inc(RW_STAT_FOLLOW_FULL);
	return 0;
}

/*
 * A process that runs a program anew (exec): where the caller asked (a
 * traced process's cgroup and executable in exec_lend) it is followed from
 * its first instruction, lent that process's histograms as if forked by it
 * (a program a pod's shell starts again and again, each run gone before a
 * scan of /proc sees it). Else a followed child is marked so (a shell a
 * server forks is not one of its workers): userspace counts the children
 * that ended before they could be probed, and leaves those out.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(rw_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct rw_follow *f = bpf_map_lookup_elem(&follow, &tgid);
	struct rw_exec_key k = { .cgid = bpf_get_current_cgroup_id() };
	const struct rw_follow *lf;
	struct rw_follow started = {};
	const __u32 *lender;

	/* a traced process runs its own histograms, whatever it runs */
	if (f && (f->lender == tgid || (f->flags & RW_FOLLOW_TRACED)))
		return 0;
	k.exe = (__u64)p->mm->exe_file->f_inode;
	lender = bpf_map_lookup_elem(&exec_lend, &k);
	if (lender && *lender != tgid && (lf = bpf_map_lookup_elem(&follow, lender))) {
		started.lender = *lender;
		started.flags = RW_FOLLOW_STARTED;
		started.starttime = lf->starttime ? p->start_boottime / RW_NS_PER_TICK : 0;
		if (!bpf_map_update_elem(&follow, &tgid, &started, BPF_ANY))
			return 0;
		stat_inc(RW_STAT_FOLLOW_FULL);
	}
	if (f)
		f->flags |= RW_FOLLOW_EXECED;
	return 0;
}

/*
 * The caller's question for a process it traces (tracer_opts.follow_started,
 * iterating its threads, or every thread where the kernel cannot iterate
 * one process's: the record names its process): its cgroup and executable,
 * a struct rw_task_key per thread that has an address space.
 */
SEC("iter/task")
int rw_task_key(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct rw_task_key r = {};

	if (!task || !task->mm)
		return 0;
	r.k.cgid = task->cgroups->dfl_cgrp->kn->id;
	r.k.exe = (__u64)task->mm->exe_file->f_inode;
	r.tgid = task->tgid;
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

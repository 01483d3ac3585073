/* SPDX-License-Identifier: MIT */
/*
 * In-flight calls: which frame a probe hit belongs to. Go frames are keyed
 * by (tgid, g, g.stack.hi - SP): the depth from the top of the goroutine's
 * stack survives the goroutine moving to another thread and its stack being
 * copied; recursion gives each level its own depth. Native frames are keyed
 * by (tgid, tid, SP). See docs/design.md, "5. Timing a call: the in-flight key".
 *
 * A g reused by a new goroutine needs no check of its goid (a read of user
 * memory on every entry): the dead goroutine's frames nest like any others,
 * so the new goroutine's first entry at or above their depth purges them,
 * and a RET pairs only with a frame of its own function at its own depth.
 */
#ifndef RETWATCH_FRAMES_BPF_H
#define RETWATCH_FRAMES_BPF_H

#include "retwatch.h"
#include "arch.bpf.h"
#include "maps.bpf.h"

struct call_ctx {
	struct rw_ctx_key key;
	__u64 depth;
	__u64 sp;
	__u32 hist; /* the entry's histogram slot (its cookie's), for a new frame */
	__u32 slot; /* of the context index holding its frames; RW_IDX_SLOTS: none */
	bool go;
	bool after_ret; /* the call returned already (the kernel's return trampoline) */
#ifdef REG_LR
	__u64 lr; /* the return address at an entry */
#endif
};

/* Keys the current hit: by goroutine (R14 or X28, not yet proven to be g) or by thread. */
static __always_inline void call_ctx__init(struct call_ctx *c, struct pt_regs *regs,
					   const struct rw_func *fn, __u64 pid_tgid)
{
	c->key.tgid = pid_tgid >> 32;
	c->key.pad = 0;
	c->sp = REG_SP(regs);
#ifdef REG_LR
	c->lr = REG_LR(regs);
#endif
	c->go = fn->flags & RW_FUNC_GO;
	c->key.id = c->go ? REG_GO_G(regs) : (__u32)pid_tgid;
	c->depth = 0 - c->sp; /* native: the stack grows down, deeper is larger */
	c->hist = 0;
	c->slot = RW_IDX_SLOTS;
	c->after_ret = false;
}

/*
 * At an entry probe placed past a SUB RSP, imm (rw_func.entry_sp): the
 * entry's stack pointer, where the call's return address is and by which
 * its RET is matched.
 */
static __always_inline void call_ctx__at_entry(struct call_ctx *c, __u32 sp)
{
	c->sp += sp;
	c->depth = 0 - c->sp;
}

/*
 * Where after_ret (0 or 1): keys a call just returned from at the depth it
 * was entered at, its RET having popped the return address. Without a
 * branch, so that the verifier walks the rest of the program once for both.
 */
static __always_inline void call_ctx__after_ret(struct call_ctx *c, __u64 after_ret)
{
	c->sp -= CALL_PUSHES * after_ret;
	c->depth = 0 - c->sp;
	c->after_ret = after_ret;
}

/*
 * Histogram slot i, when it is (fn_id, tgid)'s, or lent to tgid (struct
 * rw_follow); else NULL, counted. Two array lookups the verifier inlines,
 * and a hash lookup only for a slot not tgid's own.
 */
static __always_inline struct rw_hist *hist__get(__u32 i, __u32 fn_id, __u32 tgid)
{
	__u32 page = i / RW_HIST_PAGE, k = i % RW_HIST_PAGE;
	struct rw_hist *h = NULL;
	void *p;

	p = bpf_map_lookup_elem(&hist_pages, &page);
	if (p)
		h = bpf_map_lookup_elem(p, &k);
	if (!h) {
		stat_inc(RW_STAT_NO_HIST);
		return NULL;
	}
	/* a followed child's calls begun in its lender's histogram end there */
	if (h->owner.fn_id != fn_id ||
	    (h->owner.tgid != tgid && !follow__lends(tgid, h->owner.tgid))) {
		stat_inc(RW_STAT_OTHER_PROCESS);
		return NULL;
	}
	return h;
}

/*
 * Go: reads g.stack from user memory into lo and hi; false when the frame
 * cannot be keyed (the drop is counted). R14 is not g in ABI0 (assembly)
 * code: the stack bounds prove it.
 */
static __always_inline bool g_stack__read(const struct call_ctx *c, __u64 *lo, __u64 *hi)
{
	__u64 st[2];

	if (bpf_probe_read_user(st, sizeof(st), (void *)c->key.id)) {
		stat_inc(RW_STAT_READ_FAILED);
		return false;
	}
	if (c->sp < st[RW_G_STACK_LO / 8] || c->sp >= st[RW_G_STACK_HI / 8]) {
		stat_inc(RW_STAT_NOT_G_STACK);
		return false;
	}
	*lo = st[RW_G_STACK_LO / 8];
	*hi = st[RW_G_STACK_HI / 8];
	return true;
}

/*
 * Sets c->depth for a hit on fr's goroutine: from fr's remembered stack
 * bounds when SP lies inside them, else from g read again (and remembered).
 * Native frames have their depth already. False when the frame cannot be
 * keyed (counted).
 */
static __always_inline bool frames__depth(struct rw_frames *fr, struct call_ctx *c)
{
	__u64 lo, hi;

	if (!c->go)
		return true;
	if (c->sp < fr->stack_lo || c->sp >= fr->stack_hi) {
		if (!g_stack__read(c, &lo, &hi))
			return false;
		fr->stack_lo = lo;
		fr->stack_hi = hi;
	}
	c->depth = fr->stack_hi - c->sp;
	return true;
}

/* The frames of key in the context index, their slot in *slot; NULL when it has none there. */
static __always_inline struct rw_frames *idx__find(const struct rw_ctx_key *key, __u32 *slot)
{
	__u32 h = rw_idx_hash(key->tgid, key->id);

#pragma unroll
	for (int i = 0; i < RW_IDX_PROBES; i++) {
		__u32 s = (h + i) & (RW_IDX_SLOTS - 1);
		struct rw_idx_slot *sl = bpf_map_lookup_elem(&ctx_idx, &s);

		if (!sl)
			return NULL;
		if (sl->id == key->id && sl->tgid == key->tgid) {
			*slot = s;
			return bpf_map_lookup_elem(&ctx_frames, &s);
		}
		if (sl->id == RW_IDX_EMPTY)
			return NULL;
	}
	return NULL;
}

/*
 * Claims a slot of the context index for key (not in it: the caller looked),
 * its frames made empty and fresh (a sweep must not take them for idle
 * before their first push); NULL when the key's probes found no room.
 */
static __always_inline struct rw_frames *idx__claim(const struct rw_ctx_key *key, __u32 *slot)
{
	__u32 h = rw_idx_hash(key->tgid, key->id);

	if (key->id <= RW_IDX_TOMB) /* thread 1 (init) would read as a tombstone */
		return NULL;
	for (int i = 0; i < RW_IDX_PROBES; i++) {
		__u32 s = (h + i) & (RW_IDX_SLOTS - 1);
		struct rw_idx_slot *sl = bpf_map_lookup_elem(&ctx_idx, &s);
		struct rw_frames *fr;
		__u64 cur;

		if (!sl)
			return NULL;
		cur = sl->id;
		if (cur != RW_IDX_EMPTY && cur != RW_IDX_TOMB)
			continue;
		if (__sync_val_compare_and_swap(&sl->id, cur, key->id) != cur)
			continue;
		fr = bpf_map_lookup_elem(&ctx_frames, &s);
		if (!fr) {
			sl->id = RW_IDX_TOMB;
			return NULL;
		}
		fr->n = 0;
		fr->lost_depth = 0;
		fr->lost_fn = 0;
		fr->last_ns = bpf_ktime_get_ns();
		fr->stack_lo = 0;
		fr->stack_hi = 0;
		asm volatile("" ::: "memory");
		sl->tgid = key->tgid; /* last: the sweep skips a slot until it is set */
		*slot = s;
		return fr;
	}
	return NULL;
}

/* key's frames, in the context index (*slot set) or else in the frames hash map. */
static __always_inline struct rw_frames *frames__lookup(const struct rw_ctx_key *key, __u32 *slot)
{
	struct rw_frames *fr = idx__find(key, slot);

	if (fr)
		return fr;
	return bpf_map_lookup_elem(&frames, key);
}

/* A call that could not be recorded: lost to its function. */
static __always_inline void call__lost(const struct call_ctx *c, __u32 fn_id)
{
	struct rw_hist *h = hist__get(c->hist, fn_id, c->key.tgid);

	if (h)
		h->lost++;
}

/*
 * Takes a context of tgid's share for a new goroutine or thread; false when
 * they are all taken (the call of fn_id is lost, counted). Checked, then
 * added: CPUs racing past the check may overshoot the limit by one each.
 */
static __always_inline bool share__take_context(struct rw_share *sh, const struct call_ctx *c,
						__u32 fn_id)
{
	if (sh->max_contexts && sh->contexts >= sh->max_contexts) {
		__sync_fetch_and_add(&sh->contexts_refused, 1);
		stat_inc(RW_STAT_SHARE_CONTEXTS);
		call__lost(c, fn_id);
		return false;
	}
	__sync_fetch_and_add(&sh->contexts, 1);
	return true;
}

/*
 * The frames of c's goroutine or thread, made empty on its first call (of
 * fn_id), with c->depth set; NULL when they cannot be had (the drop is
 * counted). A Go frame's g is proven before anything is made for it. A new
 * context counts against its process's share; the userspace sweep that
 * deletes it gives it back.
 */
static __always_inline struct rw_frames *frames__get(struct call_ctx *c, __u32 fn_id)
{
	struct rw_frames *fr = frames__lookup(&c->key, &c->slot);
	__u64 lo = 0, hi = 0;
	struct rw_share *sh;
	__u32 zero = 0;
	void *empty;

	if (fr)
		return frames__depth(fr, c) ? fr : NULL;
	if (c->go && !g_stack__read(c, &lo, &hi))
		return NULL;
	empty = bpf_map_lookup_elem(&frames_zero, &zero);
	sh = share__of(c->key.tgid);
	if (!empty || !sh) {
		stat_inc(RW_STAT_FRAMES_INSERT_FAILED);
		return NULL;
	}
	if (!share__take_context(sh, c, fn_id))
		return NULL;
	fr = idx__claim(&c->key, &c->slot);
	if (fr) {
		if (c->go) {
			fr->stack_lo = lo;
			fr->stack_hi = hi;
			c->depth = hi - c->sp;
		}
		return fr;
	}
	stat_inc(RW_STAT_CONTEXTS_HASHED);
	if (bpf_map_update_elem(&frames, &c->key, empty, BPF_NOEXIST)) {
		__sync_fetch_and_add(&sh->contexts, -1);
		__sync_fetch_and_add(&sh->map_full, 1);
		stat_inc(RW_STAT_CONTEXTS_FULL);
		call__lost(c, fn_id);
		return NULL;
	}
	/* NULL when deleted right after the insert (a sweep, or the process reaped) */
	fr = bpf_map_lookup_elem(&frames, &c->key);
	if (!fr) {
		stat_inc(RW_STAT_FRAMES_INSERT_FAILED);
		return NULL;
	}
	if (c->go) {
		fr->stack_lo = lo;
		fr->stack_hi = hi;
		c->depth = hi - c->sp;
	}
	return fr;
}

/* The frames of c's goroutine or thread if any, with c->depth set; else NULL. */
static __always_inline struct rw_frames *frames__find(struct call_ctx *c)
{
	struct rw_frames *fr = frames__lookup(&c->key, &c->slot);

	return fr && frames__depth(fr, c) ? fr : NULL;
}

/*
 * &fr->f[i] in a form the verifier accepts: the compiler would drop a mask it
 * can prove redundant, so hide i's range from it first.
 */
static __always_inline struct rw_frame *frame_at(struct rw_frames *fr, __u32 i)
{
	asm volatile("" : "+r"(i));
	return &fr->f[i & (RW_MAX_FRAMES - 1)];
}

/*
 * Frame i >= RW_MAX_FRAMES of key's goroutine or thread, in its deep chunk;
 * make: the chunk is made when missing, against its process's share (the
 * userspace sweep gives it back). NULL when it is missing (or cannot be
 * made: counted).
 */
static __always_inline struct rw_frame *frame__deep(const struct rw_ctx_key *key, __u32 i,
						    bool make)
{
	struct rw_chunk_key ck = { .tgid = key->tgid, .chunk = i / RW_CHUNK_FRAMES, .id = key->id };
	struct rw_chunk *ch = bpf_map_lookup_elem(&frames_deep, &ck);
	__u32 zero = 0, k = i % RW_CHUNK_FRAMES;
	struct rw_share *sh;
	void *empty;

	if (!ch && make) {
		/* a frame is written before it is read: any contents will do */
		empty = bpf_map_lookup_elem(&frames_zero, &zero);
		sh = share__of(key->tgid);
		if (!empty || !sh) {
			stat_inc(RW_STAT_CONTEXTS_FULL);
			return NULL;
		}
		/* checked, then added, as share__take_context */
		if (sh->max_chunks && sh->chunks >= sh->max_chunks) {
			__sync_fetch_and_add(&sh->chunks_refused, 1);
			stat_inc(RW_STAT_SHARE_CONTEXTS);
			return NULL;
		}
		__sync_fetch_and_add(&sh->chunks, 1);
		if (bpf_map_update_elem(&frames_deep, &ck, empty, BPF_NOEXIST)) {
			__sync_fetch_and_add(&sh->chunks, -1);
			__sync_fetch_and_add(&sh->map_full, 1);
			stat_inc(RW_STAT_CONTEXTS_FULL);
			return NULL;
		}
		ch = bpf_map_lookup_elem(&frames_deep, &ck);
	}
	if (!ch)
		return NULL;
	asm volatile("" : "+r"(k));
	return &ch->f[k & (RW_CHUNK_FRAMES - 1)];
}

/*
 * The deepest recorded frame; NULL when there is none. A deep chunk swept
 * away under in-flight frames loses them (counted): n drops to below it.
 */
static __always_inline struct rw_frame *frames__top(struct rw_frames *fr,
						    const struct rw_ctx_key *key)
{
	struct rw_frame *top;
	__u32 n = fr->n;

	if (n == 0)
		return NULL;
	if (n <= RW_MAX_FRAMES)
		return frame_at(fr, n - 1);
	top = frame__deep(key, n - 1, false);
	if (!top) {
		fr->n = (n - 1) / RW_CHUNK_FRAMES * RW_CHUNK_FRAMES;
		stat_inc(RW_STAT_FRAMES_INSERT_FAILED);
	}
	return top;
}

/*
 * Whether a dead frame's call left by a tail call rather than by a panic or
 * longjmp: its function may leave by a jump that cannot be followed, or a
 * new call begins at its very depth (same_depth) and it may leave by any
 * jump to another function (a traced function it tail-called).
 */
static __always_inline bool frame__tail_exit(const struct rw_frame *f, bool same_depth)
{
	__u32 fn_id = f->fn_id; /* a key on the stack: f may be a global function's memory */
	const struct rw_func *fn = bpf_map_lookup_elem(&funcs, &fn_id);

	if (!fn)
		return false;
	return (fn->flags & RW_FUNC_TAIL_UNTIMED) ||
	       (same_depth && (fn->flags & RW_FUNC_TAIL_CALLS));
}

/*
 * A tail exit of a call entered after its function's hook target was
 * followed (struct rw_hooks): the hook went somewhere else.
 */
static __always_inline void hook__missed(const struct rw_frame *f)
{
	__u32 fn_id = f->fn_id; /* as frame__tail_exit's */
	struct rw_hooks *hooks = bpf_map_lookup_elem(&hook_sites, &fn_id);

	if (hooks && hooks->followed_ns && f->start_ns > hooks->followed_ns)
		__sync_fetch_and_add(&hooks->missed, 1);
}

/*
 * A dead frame: an orphan of its function, counted once under why; or a
 * tail exit (frame__tail_exit). Only dead frames pay for the distinction.
 */
static __always_inline void frame__orphan(const struct rw_frame *f, __u32 tgid, enum rw_stat why,
					  bool same_depth)
{
	struct rw_hist *h = hist__get(f->hist, f->fn_id, tgid);
	bool tail = frame__tail_exit(f, same_depth);

	/* a tail exit is a call, whatever its exit: in calls, without a duration */
	if (h && tail) {
		h->tail_exits++;
		h->calls++;
		hook__missed(f);
	} else if (h)
		h->orphans++;
	stat_inc(tail ? RW_STAT_TAIL_EXITS : why);
}

/*
 * One step of frames__purge_deep: pops key's deepest frame, an orphan, when
 * it is deeper than depth; 1 when none is. A global function, as the loop
 * that calls it: the verifier checks each once, so the loop costs it a few
 * instructions a step, not a frame's whole purge (a bounded loop rather
 * than bpf_loop, Linux 5.17, so that 5.15 loads it).
 */
__noinline int frames__purge_step(struct rw_frames *fr, const struct rw_ctx_key *key, __u64 depth)
{
	struct rw_frame *top;

	if (!fr || !key)
		return 1;
	top = frames__top(fr, key);
	if (!top || top->depth <= depth)
		return 1;
	frame__orphan(top, key->tgid, RW_STAT_ORPHANS_PURGED, false);
	fr->n--;
	return 0;
}

/* frames__purge_deeper past the frames every hit looks at, in their chunks. */
__noinline int frames__purge_deep(struct rw_frames *fr, const struct rw_ctx_key *key, __u64 depth)
{
	for (int i = 0; i < RW_MAX_DEPTH; i++)
		if (frames__purge_step(fr, key, depth))
			break;
	return 0;
}

/* Frames nest: a frame at depth d proves every recorded frame deeper than d dead. */
static __always_inline void frames__purge_deeper(struct rw_frames *fr, const struct rw_ctx_key *key,
						 __u64 depth)
{
	/* deep frames: a loop the verifier checks once, paid only that deep */
	if (fr->n > RW_MAX_FRAMES) {
		frames__purge_deep(fr, key, depth);
		return;
	}
	for (int i = 0; i < RW_MAX_FRAMES; i++) {
		struct rw_frame *top;

		if (fr->n == 0)
			break;
		top = frame_at(fr, fr->n - 1);
		if (top->depth <= depth)
			break;
		frame__orphan(top, key->tgid, RW_STAT_ORPHANS_PURGED, false);
		fr->n--;
	}
}

/*
 * The return address at a native entry (the top of the stack), or 0: read
 * only for calls whose frame may need it (frames__push), and for entries
 * at the depth of such a frame (frame__tail_caller).
 */
static __always_inline __u64 call__ret_addr(const struct call_ctx *c)
{
#ifdef REG_LR
	return c->lr;
#else
	__u64 ret_addr;

	if (bpf_probe_read_user(&ret_addr, sizeof(ret_addr), (void *)c->sp))
		return 0;
	return ret_addr;
#endif
}

/*
 * Whether a native frame's call jumped to the entry at its depth. When its
 * function's jumps to other functions are all followed, a call at its depth
 * can only be one it jumped to. When some are not (a jump through a
 * register or memory), a call left that way also leaves its frame at that
 * depth, and the caller's next call lands there: the entry is the jump's
 * only with the frame's own return address on the stack (another call from
 * the caller returns elsewhere), so no call is given a duration it does not
 * have.
 */
static __always_inline bool frame__tail_caller(const struct rw_frame *f, const struct call_ctx *c,
					       __u32 fn_id)
{
	const struct rw_func *fn;

	if (c->go || f->fn_id == fn_id)
		return false;
	fn = bpf_map_lookup_elem(&funcs, &f->fn_id);
	if (!fn)
		return false;
	if (fn->flags & RW_FUNC_TAIL_UNTIMED)
		return f->ret_addr && f->ret_addr == call__ret_addr(c);
	return fn->flags & RW_FUNC_TAIL_CALLS;
}

/*
 * An entry at the depth of the deepest recorded frame: the same call started
 * over after runtime.morestack (true: nothing to push); a function the
 * recorded call tail-called (*ret_flags gets RW_FRAME_TAIL_OVER: both end
 * at the same RET); or a new call that proves the recorded one dead.
 */
static __always_inline bool frames__restarted(struct rw_frames *fr, const struct call_ctx *c,
					      __u32 fn_id, __u64 ip, __u32 *ret_flags)
{
	struct rw_frame *top = frames__top(fr, &c->key);

	*ret_flags = 0;
	if (!top || top->depth != c->depth)
		return false;
	if (top->fn_id == fn_id && (top->flags & RW_FRAME_RESTARTING)) {
		top->flags &= ~RW_FRAME_RESTARTING;
		top->entry_ip = ip;
		stat_inc(RW_STAT_RESTARTS);
		return true;
	}
	if (frame__tail_caller(top, c, fn_id)) {
		*ret_flags = RW_FRAME_TAIL_OVER;
		return false;
	}
	frame__orphan(top, c->key.tgid, RW_STAT_ORPHANS_PURGED, true);
	fr->n--;
	return false;
}

/*
 * An entry of an inlined copy (RW_COOKIE_INLINE) at the depth of the
 * deepest recorded frame: a frame of the same function there is a copy's
 * call that never reached an exit (a panic, longjmp), dead; a frame of
 * another function is a copy this one is nested in, or the function holding
 * it, and stays.
 */
static __always_inline void frames__inline_entry(struct rw_frames *fr, const struct call_ctx *c,
						 __u32 fn_id)
{
	struct rw_frame *top = frames__top(fr, &c->key);

	if (!top || top->depth != c->depth || top->fn_id != fn_id)
		return;
	frame__orphan(top, c->key.tgid, RW_STAT_ORPHANS_PURGED, false);
	fr->n--;
}

/*
 * Frames looked at below the deepest for a RET's own, all at its depth:
 * inlined copies (RW_COOKIE_INLINE) run at the stack pointer of the
 * function holding them, so a frameless function and its copies, or copies
 * whose code the compiler interleaved (a span inside another's), share a
 * depth, and a copy's exit may come with another frame above its own.
 */
#define RW_SAME_DEPTH 4

/*
 * The frame of fn_id at c's depth among the deepest RW_SAME_DEPTH, all at
 * that depth, moved to the top (the frames above it shift down one: their
 * order at one depth means nothing); NULL when there is none. Within the
 * first RW_MAX_FRAMES, and never past a frame that kept its arguments (kept
 * by frame index).
 */
static __always_inline struct rw_frame *frames__raise(struct rw_frames *fr,
						      const struct call_ctx *c, __u32 fn_id)
{
	__u32 n = fr->n;
	struct rw_frame *top, *f, saved;
	int k;

	if (n == 0 || n > RW_MAX_FRAMES)
		return NULL;
	top = frame_at(fr, n - 1);
	if (top->depth != c->depth)
		return NULL;
	if (top->fn_id == fn_id)
		return top;
	for (k = 1; k < RW_SAME_DEPTH; k++) {
		if ((__u32)k >= n)
			return NULL;
		f = frame_at(fr, n - 1 - k);
		if (f->depth != c->depth || (f->flags & RW_FRAME_ARGS))
			return NULL;
		if (f->fn_id == fn_id)
			break;
	}
	if (k >= RW_SAME_DEPTH || (top->flags & RW_FRAME_ARGS))
		return NULL;
	saved = *frame_at(fr, n - 1 - k);
	for (int j = RW_SAME_DEPTH - 1; j > 0; j--)
		if (j <= k)
			*frame_at(fr, n - 1 - j) = *frame_at(fr, n - j);
	top = frame_at(fr, n - 1);
	*top = saved;
	return top;
}

/* A call lost past RW_MAX_DEPTH: counted for its function and its process's share. */
static __always_inline void call__too_deep(const struct call_ctx *c, __u32 fn_id)
{
	struct rw_share *sh = share__of(c->key.tgid);

	if (sh)
		__sync_fetch_and_add(&sh->too_deep, 1);
	call__lost(c, fn_id);
	stat_inc(RW_STAT_FRAMES_FULL);
}

/*
 * Records a call of fn entered now at ip; no room: counted as lost, not
 * recorded.
 */
static __always_inline void frames__push(struct rw_frames *fr, const struct call_ctx *c,
					 const struct rw_func *fn, __u32 fn_id, __u64 ip,
					 __u32 flags)
{
	struct rw_frame *top;
	__u32 n = fr->n;

	if (n >= RW_MAX_DEPTH) {
		if (fr->lost_depth == c->depth && fr->lost_fn == fn_id) {
			stat_inc(RW_STAT_RESTARTS); /* restarted after morestack */
			return;
		}
		fr->lost_depth = c->depth;
		fr->lost_fn = fn_id;
		call__too_deep(c, fn_id);
		return;
	}
	if (n < RW_MAX_FRAMES) {
		top = frame_at(fr, n);
	} else {
		top = frame__deep(&c->key, n, true);
		if (!top) {
			call__lost(c, fn_id); /* the cause counted by frame__deep */
			return;
		}
	}
	top->depth = c->depth;
	top->start_ns = bpf_ktime_get_ns();
	if (c->go || (fn->flags & RW_FUNC_TRAMPOLINE))
		top->entry_ip = ip;
	else
		top->ret_addr = fn->flags & RW_FUNC_TAIL_UNTIMED ? call__ret_addr(c) : 0;
	top->fn_id = fn_id;
	top->flags = flags;
	top->hist = c->hist;
	fr->n = n + 1;
	fr->last_ns = top->start_ns;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * In-flight calls: which frame a probe hit belongs to. Go frames are keyed
 * by (tgid, g, g.stack.hi - SP): the depth from the top of the goroutine's
 * stack survives the goroutine moving to another thread and its stack being
 * copied; recursion gives each level its own depth. Native frames are keyed
 * by (tgid, tid, SP). See design.md, "The in-flight call key".
 */
#ifndef RETWATCH_FRAMES_BPF_H
#define RETWATCH_FRAMES_BPF_H

#include "retwatch.h"
#include "maps.bpf.h"

struct call_ctx {
	struct rw_ctx_key key;
	__u64 depth;
	__u64 goid;
};

/*
 * Fills c for the current hit; false when the frame cannot be keyed (the
 * drop is counted). with_goid: also read the goroutine id, in the same copy
 * from user memory (each copy costs more than the bytes it moves).
 */
static __always_inline bool call_ctx__init(struct call_ctx *c, struct pt_regs *regs,
					   const struct rw_func *fn, __u64 pid_tgid, bool with_goid)
{
	__u64 sp = regs->sp, g = regs->r14, gbuf[RW_G_GOID_MAX / 8 + 1];
	__u32 goff = fn->goid_offset;
	long size = sizeof(__u64) * 2;

	c->key.tgid = pid_tgid >> 32;
	c->key.pad = 0;
	c->goid = 0;
	if (!(fn->flags & RW_FUNC_GO)) {
		c->key.id = (__u32)pid_tgid;
		c->depth = 0 - sp; /* the stack grows down: deeper is larger */
		return true;
	}
	with_goid = with_goid && (goff == 152 || goff == 160);
	if (with_goid)
		size = sizeof(gbuf);
	/* R14 is not g in ABI0 (assembly) code: prove it by the stack bounds. */
	if (bpf_probe_read_user(gbuf, size, (void *)g)) {
		stat_inc(RW_STAT_READ_FAILED);
		return false;
	}
	if (sp < gbuf[RW_G_STACK_LO / 8] || sp >= gbuf[RW_G_STACK_HI / 8]) {
		stat_inc(RW_STAT_NOT_G_STACK);
		return false;
	}
	if (with_goid)
		/* constant indexes: the verifier refuses variable ones into the stack */
		c->goid = goff == 160 ? gbuf[160 / 8] : gbuf[152 / 8];
	c->key.id = g;
	c->depth = gbuf[RW_G_STACK_HI / 8] - sp;
	return true;
}

/*
 * The frames of c's goroutine or thread, made empty on its first call;
 * NULL when they cannot be made (the drop is counted).
 */
static __always_inline struct rw_frames *frames__get(const struct call_ctx *c)
{
	struct rw_frames *fr = bpf_map_lookup_elem(&frames, &c->key);
	__u32 zero = 0;
	void *empty;

	if (fr)
		return fr;
	empty = bpf_map_lookup_elem(&frames_zero, &zero);
	if (!empty) {
		stat_inc(RW_STAT_FRAMES_INSERT_FAILED);
		return NULL;
	}
	if (bpf_map_update_elem(&frames, &c->key, empty, BPF_NOEXIST)) {
		stat_inc(RW_STAT_CONTEXTS_FULL);
		return NULL;
	}
	/* NULL when deleted right after the insert (a sweep, or the process reaped) */
	fr = bpf_map_lookup_elem(&frames, &c->key);
	if (!fr) {
		stat_inc(RW_STAT_FRAMES_INSERT_FAILED);
		return NULL;
	}
	fr->goid = c->goid;
	return fr;
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

/* A dead frame: an orphan of its function, counted once under why. */
static __always_inline void frame__orphan(const struct rw_frame *f, __u32 tgid, enum rw_stat why)
{
	struct rw_hist_key hk = { .fn_id = f->fn_id, .tgid = tgid };
	struct rw_hist *h = bpf_map_lookup_elem(&hists, &hk);

	if (h)
		h->orphans++;
	stat_inc(why);
}

/* Frames of a goroutine whose g now runs another goroutine are all dead. */
static __always_inline void frames__check_owner(struct rw_frames *fr, const struct call_ctx *c)
{
	if (fr->goid == c->goid)
		return;
	for (int i = 0; i < RW_MAX_FRAMES; i++) {
		if (fr->n == 0)
			break;
		fr->n--;
		frame__orphan(frame_at(fr, fr->n), c->key.tgid, RW_STAT_GOID_CHANGED);
	}
	fr->goid = c->goid;
}

/* Frames nest: a frame at depth d proves every recorded frame deeper than d dead. */
static __always_inline void frames__purge_deeper(struct rw_frames *fr, __u64 depth, __u32 tgid)
{
	for (int i = 0; i < RW_MAX_FRAMES; i++) {
		struct rw_frame *top;

		if (fr->n == 0)
			break;
		top = frame_at(fr, fr->n - 1);
		if (top->depth <= depth)
			break;
		frame__orphan(top, tgid, RW_STAT_ORPHANS_PURGED);
		fr->n--;
	}
}

/*
 * An entry at the depth of the deepest recorded frame: the same call started
 * over after runtime.morestack (true: nothing to push), or a new call that
 * proves the recorded one dead.
 */
static __always_inline bool frames__restarted(struct rw_frames *fr, const struct call_ctx *c,
					      __u32 fn_id, __u64 ip)
{
	struct rw_frame *top;

	if (fr->n == 0)
		return false;
	top = frame_at(fr, fr->n - 1);
	if (top->depth != c->depth)
		return false;
	if (top->fn_id == fn_id && (top->flags & RW_FRAME_RESTARTING)) {
		top->flags &= ~RW_FRAME_RESTARTING;
		top->entry_ip = ip;
		stat_inc(RW_STAT_RESTARTS);
		return true;
	}
	frame__orphan(top, c->key.tgid, RW_STAT_ORPHANS_PURGED);
	fr->n--;
	return false;
}

/* Records a call entered now at ip; no room: counted, not recorded. */
static __always_inline void frames__push(struct rw_frames *fr, const struct call_ctx *c,
					 __u32 fn_id, __u64 ip)
{
	struct rw_frame *top;

	if (fr->n >= RW_MAX_FRAMES) {
		stat_inc(RW_STAT_FRAMES_FULL);
		return;
	}
	top = frame_at(fr, fr->n);
	top->depth = c->depth;
	top->start_ns = bpf_ktime_get_ns();
	top->entry_ip = ip;
	top->fn_id = fn_id;
	top->flags = 0;
	fr->n++;
	fr->last_ns = top->start_ns;
}

#endif

/* SPDX-License-Identifier: MIT */
/* Maps shared by the entry and RET programs, and the counter helper. */
#ifndef RETWATCH_MAPS_BPF_H
#define RETWATCH_MAPS_BPF_H

#include "retwatch.h"

/* Function slots, indexed by the low 32 bits of a probe's cookie. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RW_MAX_FUNCS);
	__type(key, __u32);
	__type(value, struct rw_func);
} funcs SEC(".maps");

/* Each namespace's share (struct rw_share), for userspace to map. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RW_MAX_SHARES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rw_share);
} shares SEC(".maps");

/* The share of each traced process that has one: tgid -> index in shares. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RW_MAX_SHARED_PROCS);
	__type(key, __u32);
	__type(value, __u32);
} proc_share SEC(".maps");

/* In-flight frames per goroutine or thread the context index has no room for; allocated as they appear. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RW_MAX_CONTEXTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct rw_ctx_key);
	__type(value, struct rw_frames);
} frames SEC(".maps");

/*
 * The context index (retwatch.h, RW_IDX_*): slot s holds a goroutine's or
 * thread's key, ctx_frames[s] its frames. Arrays, so every lookup is inlined
 * by the verifier: no helper call, no hashing by the kernel. ctx_idx is
 * mapped by userspace, which frees slots.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RW_IDX_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rw_idx_slot);
} ctx_idx SEC(".maps");

/* The frames of ctx_idx's slots, slot for slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RW_IDX_SLOTS);
	__type(key, __u32);
	__type(value, struct rw_frames);
} ctx_frames SEC(".maps");

/* The arguments of calls in the context index (RW_FUNC_ARGS), by slot. Made
 * with one entry when the tracer captures none (5 MiB otherwise). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RW_IDX_SLOTS);
	__type(key, __u32);
	__type(value, struct rw_ctx_args);
} ctx_args SEC(".maps");

/* In-flight frames deeper than RW_MAX_FRAMES, a chunk at a time; made as they are needed. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RW_MAX_CHUNKS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct rw_chunk_key);
	__type(value, struct rw_chunk);
} frames_deep SEC(".maps");

/*
 * Latency per (function, process), per CPU: slot i is entry i % RW_HIST_PAGE
 * of page i / RW_HIST_PAGE, a per-CPU array userspace makes when needed.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, RW_MAX_HIST_PAGES);
	__type(key, __u32);
	__array(
		values, struct {
			__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
			__uint(max_entries, RW_HIST_PAGE);
			__uint(key_size, sizeof(__u32));
			/* a size, not a type: a type this deep reaches BTF undefined */
			__uint(value_size, sizeof(struct rw_hist));
		});
} hist_pages SEC(".maps");

/*
 * The histogram slot of each (function, process) traced: what a shared
 * probe's entry (RW_COOKIE_SHARED) looks up, its cookie naming no process.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RW_MAX_HISTS);
	__type(key, struct rw_hist_key);
	__type(value, struct rw_proc_hist);
} proc_hists SEC(".maps");

/* Processes followed from their fork, by tgid (struct rw_follow). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RW_MAX_FOLLOWED);
	__type(key, __u32);
	__type(value, struct rw_follow);
} follow SEC(".maps");

/* Traced processes lending to those started anew beside them (struct rw_exec_key). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RW_MAX_EXEC_LENDERS);
	__type(key, struct rw_exec_key);
	__type(value, __u32);
} exec_lend SEC(".maps");

/*
 * Which calls of each histogram slot, that is of each (function, process)
 * traced, are sent (struct rw_threshold): a process's own probes' choice,
 * never that of another process of the same file, whose probe may be
 * another tenant's.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RW_MAX_HISTS);
	__type(key, __u32);
	__type(value, struct rw_threshold);
} hist_thresholds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RW_STAT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Slow calls, with their user stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* Functions' hook jumps (struct rw_hooks), by function slot. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RW_MAX_HOOK_FUNCS);
	__type(key, __u32);
	__type(value, struct rw_hooks);
} hook_sites SEC(".maps");

/* The hook targets sent (struct rw_hook_target): each once, while remembered. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct rw_hook_target);
	__type(value, __u8);
} hook_seen SEC(".maps");

/* Where hook jumps went, for userspace to probe there. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} hook_events SEC(".maps");

/* An empty rw_frames to insert from: too large for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rw_frames);
} frames_zero SEC(".maps");

static __always_inline void stat_inc(enum rw_stat s)
{
	__u32 key = s;
	__u64 *v = bpf_map_lookup_elem(&stats, &key);

	if (v)
		(*v)++;
}

/* Whether followed process tgid's hits count in process lender's histograms. */
static __always_inline bool follow__lends(__u32 tgid, __u32 lender)
{
	const struct rw_follow *f = bpf_map_lookup_elem(&follow, &tgid);

	return f && lender && f->lender == lender;
}

/*
 * tgid's share: its own, or, for a process followed from its fork and not
 * given its own yet, its lender's (a pre-fork server's workers are held to
 * their namespace's share); else share 0. NULL only if the map is broken.
 */
static __always_inline struct rw_share *share__of(__u32 tgid)
{
	__u32 *idx = bpf_map_lookup_elem(&proc_share, &tgid), zero = 0;
	const struct rw_follow *f;

	if (!idx) {
		f = bpf_map_lookup_elem(&follow, &tgid);
		if (f)
			idx = bpf_map_lookup_elem(&proc_share, &f->lender);
	}
	return bpf_map_lookup_elem(&shares, idx ? idx : &zero);
}

#endif

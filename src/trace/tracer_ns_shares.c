// SPDX-License-Identifier: MIT
/*
 * Namespace shares: each namespace's share of the in-flight map and the ring
 * buffer (struct rw_share, in the shares map), and which share each traced
 * process counts against.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "trace/tracer_impl.h"

static struct share *share__by_name(const struct tracer *t, const char *name)
{
	struct share *sh = t->shares;

	while (sh && strcmp(sh->name, name))
		sh = sh->next;
	return sh;
}

/* tgid's index in the shares map: 0 when it has no share of its own. */
uint32_t share__idx_of(const struct tracer *t, uint32_t tgid)
{
	__u32 idx;

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.proc_share), &tgid, &idx) ||
	    idx >= RW_MAX_SHARES)
		return 0;
	return idx;
}

/*
 * tgid's own share, or, for a process followed from its fork without one,
 * its lender's: as the programs' share__of chose it when they took from it.
 */
uint32_t share__charged_idx(const struct tracer *t, uint32_t tgid)
{
	uint32_t idx = share__idx_of(t, tgid);
	struct rw_follow f;

	if (idx || !t->follow || bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.follow), &tgid, &f))
		return idx;
	return share__idx_of(t, f.lender);
}

/* The name of process pid's share, or NULL when it has none. */
const char *share__name_of(const struct tracer *t, pid_t pid)
{
	uint32_t idx = share__idx_of(t, (uint32_t)pid);

	for (const struct share *sh = t->shares; idx && sh; sh = sh->next)
		if (sh->idx == idx)
			return sh->name;
	return NULL;
}

/* One of *n, taken by the programs, given back (never below 0). */
void share__put(__u64 *n)
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
void share__drop_pid(struct tracer *t, pid_t pid)
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

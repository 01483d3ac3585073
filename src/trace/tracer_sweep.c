// SPDX-License-Identifier: MIT
/*
 * The sweep of in-flight entries: frames of calls that will never return
 * (a killed thread, a lost goroutine, a process no longer traced) dropped
 * and counted as orphans, idle contexts given back, and the processes
 * retired until the next sweep.
 */
#include <stdbool.h>
#include <stdlib.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "base/clock.h"
#include "trace/tracer_impl.h"

/*
 * A context with no call in flight holds only its slot (and the stack bounds
 * it cached): given back after this long untouched, as the threads a server
 * starts per request end (a thread id comes back only after pid_max others).
 */
#define SWEEP_IDLE_AGE_NS (5 * NS_PER_S)

static int sweep(struct tracer *t, uint32_t pid, uint64_t max_age_ns);

/* pid is traced no more: the next sweep drops its frames, then its share. */
void pid__retire(struct tracer *t, pid_t pid)
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
void pid__unretire(struct tracer *t, pid_t pid)
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
		share__put(&t->shares_mm[share__charged_idx(t, key.tgid)].contexts);
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
			share__put(&t->shares_mm[share__charged_idx(t, doomed[i].tgid)].chunks);
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
		share__put(&t->shares_mm[share__charged_idx(t, doomed[i].tgid)].contexts);
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
	uint32_t *gone = NULL;
	size_t ngone;
	int dropped;

	share__check(t, now);
	hooks__tick(t, now);
	if (now < t->next_sweep_ns)
		return 0;
	t->next_sweep_ns = now + SWEEP_EVERY_NS;
	ngone = follow__retire_gone(t, &gone);
	dropped = sweep(t, 0, t->sweep_age_ns);
	/* after the sweep: their frames were given back to their lenders' shares */
	follow__forget(t, gone, ngone);
	return dropped;
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

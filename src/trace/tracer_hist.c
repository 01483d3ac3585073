// SPDX-License-Identifier: MIT
/*
 * The tracer's slots in the kernel's maps: ids of function and histogram
 * slots given out and taken back (through quarantine), and the histogram
 * slots themselves, in per-CPU pages made when needed and freed when empty.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "trace/tracer_impl.h"
#include "trace/uprobe.h"

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
		HIST_COUNTS + offsetof(struct latency, inlined) ==
			offsetof(struct rw_hist, inlined) &&
		HIST_COUNTS + offsetof(struct latency, inlined_untimed) ==
			offsetof(struct rw_hist, inlined_untimed) &&
		HIST_COUNTS + offsetof(struct latency, buckets) ==
			offsetof(struct rw_hist, buckets),
	"struct latency must mirror struct rw_hist from its counts to its rate limiter's state");

size_t hist_value_size(void)
{
	return (sizeof(struct rw_hist) + 7) & ~(size_t)7;
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
void idpool__release(struct idpool *p, uint32_t id, bool quarantine)
{
	uint32_t **list = quarantine ? &p->quarantine : &p->free;
	size_t *n = quarantine ? &p->nquarantine : &p->nfree;
	uint32_t *ids = realloc(*list, (*n + 1) * sizeof(*ids));

	if (!ids)
		return; /* the id leaks */
	*list = ids;
	ids[(*n)++] = id;
}

void idpool__clear(struct idpool *p)
{
	free(p->free);
	free(p->quarantine);
}

/* ---- histogram slots ---- */

/* Makes page i of the histograms when it is not there. 0 or -errno. */
static int hist_page__make(struct tracer *t, uint32_t i)
{
	int fd, e = 0;

	if (t->hist_page_fds[i] >= 0) {
		/* empty, not freed yet: used again */
		t->hist_pages_empty -= !t->hist_page_used[i];
		return 0;
	}
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

/* A slot of page i is free again, out of quarantine: the last one leaves the page empty. */
static void hist_page__unuse(struct tracer *t, uint32_t i)
{
	if (!t->hist_page_used[i] || --t->hist_page_used[i] || t->hist_page_fds[i] < 0)
		return;
	t->hist_pages_empty++;
}

/*
 * Frees empty pages (a deleted probe gives its memory back; a page is made
 * again when needed) until budget_ns is spent. Each goes out of the map of
 * pages, and the kernel waits a grace period for that (5 ms and more on a
 * busy machine): the 160 pages of 20 processes of 64 functions freed at
 * once held the agent's loop 0.75 s.
 */
void hist_pages__trim(struct tracer *t, uint64_t budget_ns)
{
	uint64_t start = clock__mono_ns();

	for (uint32_t n = 0; t->hist_pages_empty && n < RW_MAX_HIST_PAGES; n++) {
		uint32_t i = t->hist_trim_at;

		t->hist_trim_at = (i + 1) % RW_MAX_HIST_PAGES;
		if (t->hist_page_used[i] || t->hist_page_fds[i] < 0)
			continue;
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.hist_pages), &i);
		close(t->hist_page_fds[i]);
		t->hist_page_fds[i] = -1;
		t->hist_pages_empty--;
		if (clock__mono_ns() - start >= budget_ns)
			break;
	}
}

/* idpool__take_back, with the pages of histogram slots back out of quarantine freed if empty. */
void ids__take_back(struct tracer *t, struct idpool *p, bool wait)
{
	size_t n = idpool__take_back(p, wait);

	for (size_t k = p->nfree - n; p == &t->hist_ids && k < p->nfree; k++)
		hist_page__unuse(t, p->free[k] / RW_HIST_PAGE);
}

int ids__alloc(struct tracer *t, struct idpool *p, uint32_t *ret_id)
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
int hist_slot__alloc(struct tracer *t, uint32_t fn_id, uint32_t tgid, uint32_t *ret,
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

/* Which calls counted in slot i are sent (struct rw_threshold; NULL: none). */
int hist_slot__set_threshold(struct tracer *t, uint32_t i, const struct rw_threshold *th)
{
	struct rw_threshold none = {};

	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.hist_thresholds), &i, th ? th : &none,
				BPF_ANY))
		return -errno;
	return 0;
}

int batch__set_threshold(struct tracer *t, const struct batch *b)
{
	struct rw_threshold th = { .slow_ns = b->threshold_ns,
				   .keep_ns = b->keep_ns,
				   .keep = b->keep,
				   .keep_window = b->keep_window };

	return hist_slot__set_threshold(t, b->hist, &th);
}

/*
 * Takes slot i back: it counts nothing more (its owner cleared), and is
 * given out again once its links are closed.
 */
void hist_slot__release(struct tracer *t, uint32_t i)
{
	hist_slot__reset(t, i, 0, 0);
	hist_slot__set_threshold(t, i, NULL);
	idpool__release(&t->hist_ids, i, true);
}

/* Reads histogram slot i: the per-CPU counts summed. */
int hist_slot__read(struct tracer *t, uint32_t i, struct latency *ret)
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

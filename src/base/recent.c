// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/recent.h"

/* A reading: its counts, and its non-empty buckets as (index, count). */
struct reading {
	uint64_t at_ns;
	struct latency head; /* buckets left zero */
	uint16_t *idx;
	uint64_t *cnt;
	size_t n;
};

struct recent {
	uint64_t window_ns;
	struct reading *r; /* oldest first */
	size_t n;
};

struct recent *recent__new(uint64_t window_ns)
{
	struct recent *r;

	if (!window_ns)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (r)
		r->window_ns = window_ns;
	return r;
}

static void reading__clear(struct reading *x)
{
	free(x->idx);
	free(x->cnt);
}

void recent__free(struct recent *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		reading__clear(&r->r[i]);
	free(r->r);
	free(r);
}

static int reading__make(struct reading *x, uint64_t at, const struct latency *l)
{
	size_t n = 0;

	for (size_t b = 0; b < RW_HIST_BUCKETS; b++)
		n += l->buckets[b] != 0;
	memset(x, 0, sizeof(*x));
	x->idx = malloc((n ? n : 1) * sizeof(*x->idx));
	x->cnt = malloc((n ? n : 1) * sizeof(*x->cnt));
	if (!x->idx || !x->cnt) {
		reading__clear(x);
		return -ENOMEM;
	}
	x->at_ns = at;
	x->head = *l;
	memset(x->head.buckets, 0, sizeof(x->head.buckets));
	for (size_t b = 0; b < RW_HIST_BUCKETS; b++) {
		if (!l->buckets[b])
			continue;
		x->idx[x->n] = (uint16_t)b;
		x->cnt[x->n++] = l->buckets[b];
	}
	return 0;
}

int recent__take(struct recent *r, uint64_t now_ns, const struct latency *cur, struct latency *ret,
		 uint64_t *ret_span_ns)
{
	const struct reading *base = NULL;
	struct reading *more, add;
	size_t keep = 0;

	*ret = *cur;
	*ret_span_ns = 0;
	/* the newest reading at least a window old (7/8 of one: readings
	 * come at report intervals, jittered by up to 10%); those before go */
	for (size_t i = 0; i < r->n; i++)
		if (now_ns >= r->r[i].at_ns && now_ns - r->r[i].at_ns >= r->window_ns / 8 * 7)
			keep = i;
	if (keep) {
		for (size_t i = 0; i < keep; i++)
			reading__clear(&r->r[i]);
		memmove(r->r, r->r + keep, (r->n - keep) * sizeof(*r->r));
		r->n -= keep;
	}
	if (r->n) {
		base = &r->r[0];
		latency__subtract(ret, &base->head);
		for (size_t k = 0; k < base->n; k++)
			ret->buckets[base->idx[k]] -= base->cnt[k] < ret->buckets[base->idx[k]]
							      ? base->cnt[k]
							      : ret->buckets[base->idx[k]];
		*ret_span_ns = now_ns - base->at_ns;
		latency__bound_to_buckets(ret);
	}
	if (reading__make(&add, now_ns, cur))
		return -ENOMEM;
	more = realloc(r->r, (r->n + 1) * sizeof(*more));
	if (!more) {
		reading__clear(&add);
		return -ENOMEM;
	}
	r->r = more;
	r->r[r->n++] = add;
	return 0;
}

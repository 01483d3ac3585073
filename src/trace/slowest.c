// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "trace/slowest.h"

/* One window's calls, slowest first. */
struct window {
	struct slow_call c[SLOWEST_MAX_KEEP];
	size_t n;
};

struct slowest {
	size_t keep;
	uint64_t window_ns, begun_ns; /* the current window's start */
	struct window cur, prev;
	struct slowest_budget *budget; /* NULL: none */
};

struct slowest_budget *slowest_budget__new(size_t max, struct slowest_budget *parent)
{
	struct slowest_budget *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->max = max;
	b->parent = slowest_budget__get(parent);
	b->refs = 1;
	return b;
}

struct slowest_budget *slowest_budget__get(struct slowest_budget *b)
{
	if (b)
		b->refs++;
	return b;
}

void slowest_budget__put(struct slowest_budget *b)
{
	if (!b || --b->refs)
		return;
	slowest_budget__put(b->parent);
	free(b);
}

/* Counts bytes in (sign 1) or out (-1) of b and its parents. */
static void budget_count(struct slowest_budget *b, size_t bytes, int sign)
{
	for (; b; b = b->parent)
		b->used = sign > 0 ? b->used + bytes
				   : b->used - (bytes < b->used ? bytes : b->used);
}

/* Whether bytes more fit b and its parents, when freed are freed first. */
static bool budget_fits(const struct slowest_budget *b, size_t bytes, size_t freed)
{
	for (; b; b = b->parent) {
		size_t used = b->used - (freed < b->used ? freed : b->used);

		if (b->max && (used > b->max || bytes > b->max - used))
			return false;
	}
	return true;
}

/* What c's strings hold. */
static size_t call_bytes(const struct slow_call *c)
{
	size_t n = sizeof(*c);

	n += c->pod ? strlen(c->pod) + 1 : 0;
	n += c->container ? strlen(c->container) + 1 : 0;
	for (size_t i = 0; i < c->nstack; i++)
		n += strlen(c->stack[i]) + 1;
	return n + call_args__bytes(&c->args);
}

void slow_call__clear(struct slow_call *c)
{
	free(c->pod);
	free(c->container);
	for (size_t i = 0; i < c->nstack; i++)
		free(c->stack[i]);
	call_args__clear(&c->args);
	memset(c, 0, sizeof(*c));
}

/* Clears call c of s, counted out of its budget. */
static void drop(struct slowest *s, struct slow_call *c)
{
	budget_count(s->budget, c->bytes, -1);
	slow_call__clear(c);
}

static void window__clear(struct slowest *s, struct window *w)
{
	for (size_t i = 0; i < w->n; i++)
		drop(s, &w->c[i]);
	w->n = 0;
}

/* The bytes s's calls hold. */
static size_t held(const struct slowest *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->cur.n; i++)
		n += s->cur.c[i].bytes;
	for (size_t i = 0; i < s->prev.n; i++)
		n += s->prev.c[i].bytes;
	return n;
}

void slowest__set_budget(struct slowest *s, struct slowest_budget *b)
{
	size_t n = held(s);

	budget_count(s->budget, n, -1);
	slowest_budget__put(s->budget);
	s->budget = slowest_budget__get(b);
	budget_count(s->budget, n, 1);
}

struct slowest *slowest__new(size_t keep, uint64_t window_ns, uint64_t now_ns)
{
	struct slowest *s;

	if (!keep || keep > SLOWEST_MAX_KEEP)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->keep = keep;
	s->window_ns = window_ns;
	s->begun_ns = now_ns;
	return s;
}

void slowest__free(struct slowest *s)
{
	if (!s)
		return;
	window__clear(s, &s->cur);
	window__clear(s, &s->prev);
	slowest_budget__put(s->budget);
	free(s);
}

bool slowest__roll(struct slowest *s, uint64_t now_ns)
{
	if (!s->window_ns || now_ns - s->begun_ns < s->window_ns || now_ns < s->begun_ns)
		return false;
	/* a window without calls keeps the one before: idle, nothing changes */
	if (s->cur.n) {
		window__clear(s, &s->prev);
		s->prev = s->cur; /* the calls move: cur forgets them below */
		s->cur.n = 0;
	}
	s->begun_ns += (now_ns - s->begun_ns) / s->window_ns * s->window_ns;
	return true;
}

uint64_t slowest__floor(const struct slowest *s)
{
	if (s->cur.n < s->keep)
		return 1;
	return s->cur.c[s->keep - 1].duration_ns + 1;
}

bool slowest__add(struct slowest *s, struct slow_call *c, uint64_t now_ns)
{
	struct window *w = &s->cur;
	size_t at;

	if (c->duration_ns < slowest__floor(s)) {
		slow_call__clear(c);
		return false;
	}
	c->bytes = call_bytes(c);
	/* the fastest makes room when the window is full */
	if (!budget_fits(s->budget, c->bytes, w->n == s->keep ? w->c[w->n - 1].bytes : 0)) {
		for (struct slowest_budget *b = s->budget; b; b = b->parent) {
			b->refused++;
			b->last_refused_ns = now_ns;
		}
		slow_call__clear(c);
		return false;
	}
	if (w->n == s->keep)
		drop(s, &w->c[--w->n]);
	budget_count(s->budget, c->bytes, 1);
	for (at = w->n; at > 0 && w->c[at - 1].duration_ns < c->duration_ns; at--)
		w->c[at] = w->c[at - 1];
	w->c[at] = *c;
	w->n++;
	memset(c, 0, sizeof(*c));
	return true;
}

size_t slowest__read(const struct slowest *s, const struct slow_call **ret, size_t max)
{
	size_t i = 0, j = 0, n = 0;

	if (max > s->keep)
		max = s->keep;
	/* both windows are sorted: merge them */
	while (n < max && (i < s->cur.n || j < s->prev.n)) {
		if (j >= s->prev.n ||
		    (i < s->cur.n && s->cur.c[i].duration_ns >= s->prev.c[j].duration_ns))
			ret[n++] = &s->cur.c[i++];
		else
			ret[n++] = &s->prev.c[j++];
	}
	return n;
}

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
};

void slow_call__clear(struct slow_call *c)
{
	free(c->pod);
	free(c->container);
	for (size_t i = 0; i < c->nstack; i++)
		free(c->stack[i]);
	call_args__clear(&c->args);
	memset(c, 0, sizeof(*c));
}

static void window__clear(struct window *w)
{
	for (size_t i = 0; i < w->n; i++)
		slow_call__clear(&w->c[i]);
	w->n = 0;
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
	window__clear(&s->cur);
	window__clear(&s->prev);
	free(s);
}

bool slowest__roll(struct slowest *s, uint64_t now_ns)
{
	if (!s->window_ns || now_ns - s->begun_ns < s->window_ns || now_ns < s->begun_ns)
		return false;
	/* a window without calls keeps the one before: idle, nothing changes */
	if (s->cur.n) {
		window__clear(&s->prev);
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

bool slowest__add(struct slowest *s, struct slow_call *c)
{
	struct window *w = &s->cur;
	size_t at;

	if (c->duration_ns < slowest__floor(s)) {
		slow_call__clear(c);
		return false;
	}
	if (w->n == s->keep)
		slow_call__clear(&w->c[--w->n]); /* the fastest makes room */
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

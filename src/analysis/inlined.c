// SPDX-License-Identifier: MIT
/* Lists of inlined copies (inlined.h), shared by the Go and DWARF readers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/inlined.h"

void inl_list__free(struct inl_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->ncopies; i++) {
		free(l->copies[i].name);
		free(l->copies[i].caller);
		free(l->copies[i].outer);
		free(l->copies[i].ranges);
		free(l->copies[i].sites);
	}
	free(l->copies);
	free(l);
}

size_t inl_list__ncallers(const struct inl_list *l)
{
	size_t n = 0;

	/* quadratic in the copies listed, INL_MAX_COPIES at most */
	for (size_t i = 0; l && i < l->ncopies; i++) {
		size_t j = 0;

		while (j < i && strcmp(l->copies[j].caller, l->copies[i].caller))
			j++;
		n += j == i;
	}
	return n;
}

int inl_list__add(struct inl_list *l, size_t *cap, const char *name, const char *caller,
		  const char *outer, uint64_t entry, unsigned int depth, size_t *ret_i)
{
	struct inl_copy *cp;

	*ret_i = SIZE_MAX;
	l->nmatched++;
	if (l->ncopies >= INL_MAX_COPIES)
		return 0;
	if (l->ncopies == *cap) {
		size_t ncap = *cap ? 2 * *cap : 16;
		void *p = reallocarray(l->copies, ncap, sizeof(*l->copies));

		if (!p)
			return -ENOMEM;
		l->copies = p;
		*cap = ncap;
	}
	cp = &l->copies[l->ncopies];
	*cp = (struct inl_copy){ .outer_entry = entry, .depth = depth };
	cp->name = strdup(name);
	cp->caller = strdup(caller);
	cp->outer = strdup(outer);
	l->ncopies++; /* freed with the list even when a strdup failed */
	if (!cp->name || !cp->caller || !cp->outer)
		return -ENOMEM;
	*ret_i = l->ncopies - 1;
	return 0;
}

int inl_copy__add_range(struct inl_list *l, struct inl_copy *c, uint64_t lo, uint64_t hi)
{
	struct addr_range *last = c->nranges ? &c->ranges[c->nranges - 1] : NULL;
	void *p;

	if (last && last->hi == lo) {
		last->hi = hi;
		return 0;
	}
	if (l->nranges >= INL_MAX_RANGES)
		return -E2BIG;
	/* the array doubles when the count reaches a power of two */
	if (!(c->nranges & (c->nranges - 1))) {
		p = reallocarray(c->ranges, c->nranges ? 2 * c->nranges : 1, sizeof(*c->ranges));
		if (!p)
			return -ENOMEM;
		c->ranges = p;
	}
	c->ranges[c->nranges++] = (struct addr_range){ .lo = lo, .hi = hi };
	l->nranges++;
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * Inlined copies traced with their function: the copies of the functions a
 * target's patterns name (Go's inline tree, DWARF), each copy's entries and
 * exits (analysis/inlsites.h) added to its function's slot, whose probes
 * carry RW_COOKIE_INLINE there. Read once per file and name: the tree of a
 * big Go binary takes tens of milliseconds. A function that exists only
 * inlined gets a func_info of its own, so it is traced as any other.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/inlined.h"
#include "analysis/inlsites.h"
#include "trace/tracer_impl.h"

/* Sites of one function's copies probed at most: past it, copies are left out (said). */
#define INL_MAX_FUNC_SITES 1024

const struct inl_probes *inline__find(const struct attached_file *f, const char *name)
{
	for (size_t i = 0; i < f->ninl; i++)
		if (!strcmp(f->inl[i]->name, name))
			return f->inl[i];
	return NULL;
}

static void probes__free(struct inl_probes *ip)
{
	if (!ip)
		return;
	free(ip->name);
	free(ip->entries);
	free(ip->exits);
	free(ip->entry_addrs);
	free(ip->exit_addrs);
	free(ip->entry_counts);
	free(ip);
}

void inline__free(struct attached_file *f)
{
	for (size_t i = 0; i < f->ninl; i++)
		probes__free(f->inl[i]);
	free(f->inl);
	f->inl = NULL;
	f->ninl = 0;
	for (size_t i = 0; i < f->ninl_read; i++)
		free(f->inl_read[i]);
	free(f->inl_read);
	f->inl_read = NULL;
	f->ninl_read = 0;
}

/* The patterns not read for f yet, into unread (npatterns of room); how many. */
static size_t patterns__unread(const struct attached_file *f, const char *const *patterns,
			       size_t npatterns, const char **unread)
{
	size_t n = 0;

	for (size_t i = 0; i < npatterns; i++) {
		bool seen = false;

		for (size_t k = 0; !seen && k < f->ninl_read; k++)
			seen = !strcmp(f->inl_read[k], patterns[i]);
		if (!seen)
			unread[n++] = patterns[i];
	}
	return n;
}

static int patterns__remember(struct attached_file *f, const char *const *patterns, size_t n)
{
	char **p = realloc(f->inl_read, (f->ninl_read + n) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	f->inl_read = p;
	for (size_t i = 0; i < n; i++) {
		p[f->ninl_read] = strdup(patterns[i]);
		if (!p[f->ninl_read])
			return -ENOMEM;
		f->ninl_read++;
	}
	return 0;
}

static struct inl_probes *probes__new(struct attached_file *f, const char *name)
{
	struct inl_probes **p = realloc(f->inl, (f->ninl + 1) * sizeof(*p));
	struct inl_probes *ip;

	if (!p)
		return NULL;
	f->inl = p;
	ip = calloc(1, sizeof(*ip));
	if (!ip || !(ip->name = strdup(name))) {
		free(ip);
		return NULL;
	}
	f->inl[f->ninl++] = ip;
	return ip;
}

/* Appends n sites (virtual addresses, file offset = address + delta) to *offs and *addrs. */
static int sites__add(uint64_t **offs, uint64_t **addrs, size_t *len, const uint64_t *site,
		      size_t n, uint64_t delta)
{
	uint64_t *o = realloc(*offs, (*len + n) * sizeof(*o));
	uint64_t *a;

	if (!o)
		return -ENOMEM;
	*offs = o;
	a = realloc(*addrs, (*len + n) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	*addrs = a;
	for (size_t i = 0; i < n; i++) {
		o[*len + i] = site[i] + delta;
		a[*len + i] = site[i];
	}
	*len += n;
	return 0;
}

/* Marks the last n entries as those of a copy counted (or timed). */
static int entries__mark(struct inl_probes *ip, size_t n, bool counts)
{
	bool *m = realloc(ip->entry_counts, (ip->nentries ? ip->nentries : 1) * sizeof(*m));

	if (!m)
		return -ENOMEM;
	ip->entry_counts = m;
	for (size_t i = ip->nentries - n; i < ip->nentries; i++)
		m[i] = counts;
	return 0;
}

static int probes__add_copy(struct binary *b, struct inl_probes *ip, const struct inl_copy *c)
{
	const struct inl_sites *s = c->sites;
	const struct func_info *outer;
	bool counts = s && s->mode == INLSITES_ENTRY_ONLY;
	int e;

	ip->ncopies++;
	/* not timed, or counted at its entries only: said alike */
	if ((!s || s->mode != INLSITES_TIMED) && !ip->reason[0])
		snprintf(ip->reason, sizeof(ip->reason), "its copy in %.50s: %.90s", c->outer,
			 s ? s->reason : "not read");
	if (!s || (s->mode != INLSITES_TIMED && !counts))
		return 0;
	if (ip->nentries + ip->nexits + s->nentries + s->nexits > INL_MAX_FUNC_SITES) {
		if (!ip->reason[0])
			snprintf(ip->reason, sizeof(ip->reason),
				 "its copies have more than %d sites: the rest are not probed",
				 INL_MAX_FUNC_SITES);
		return 0;
	}
	outer = binary__func_at(b, c->outer_entry);
	if (!outer)
		return 0;
	e = sites__add(&ip->entries, &ip->entry_addrs, &ip->nentries, s->entries, s->nentries,
		       outer->file_offset - outer->address);
	if (!e)
		e = entries__mark(ip, s->nentries, counts);
	if (!e)
		e = sites__add(&ip->exits, &ip->exit_addrs, &ip->nexits, s->exits, s->nexits,
			       outer->file_offset - outer->address);
	if (!e && counts)
		ip->ncounted++;
	else if (!e)
		ip->nprobed++;
	return e;
}

static bool matched_by_name(const struct binary_match *m, const char *name)
{
	for (size_t i = 0; i < m->nfuncs; i++)
		if (!strcmp(m->funcs[i]->name, name))
			return true;
	return false;
}

/* A function that exists only inlined: traced through a func_info of its own. */
static void probes__own(struct inl_probes *ip, const struct binary *b)
{
	if (!ip->nprobed && !ip->ncounted)
		return;
	ip->has_own = true;
	ip->own = (struct func_info){
		.name = ip->name,
		/* its first entry site: what the row's entry kind and bias are of */
		.address = ip->entry_addrs[0],
		.file_offset = ip->entries[0],
		.source = binary__is_go(b) ? FUNC_SOURCE_PCLNTAB : FUNC_SOURCE_DWARF,
		.go = binary__is_go(b),
		/* every copy counted at its entries only: no duration */
		.mode = ip->nprobed ? FUNC_MODE_ENTRY_RET : FUNC_MODE_ENTRY_ONLY,
		.reason = ip->nprobed ? NULL : ip->reason,
		.exits_known = ip->nprobed > 0,
	};
}

int inline__collect(struct tracer *t, struct tracer_target *tt, const char *const *patterns,
		    size_t npatterns)
{
	struct attached_file *f = tt->file;
	/* the agent's analyzer read them off its main loop, or nobody did */
	struct inl_list *kept = t->partial ? binary__inlined_kept(f->bin, patterns, npatterns)
					   : NULL;
	const char **unread;
	struct inl_list *l = NULL;
	size_t first = f->ninl, nunread;
	int e;

	if (t->partial && !kept)
		return 0;
	unread = calloc(npatterns + 1, sizeof(*unread));
	if (!unread)
		return -ENOMEM;
	nunread = patterns__unread(f, patterns, npatterns, unread);
	e = nunread ? patterns__remember(f, unread, nunread) : 0;
	if (!e && nunread && kept)
		l = kept; /* all the patterns' copies: those read for a target before are skipped */
	/* an unreadable tree (a Go table before 1.20, bad DWARF): the functions as matched */
	else if (e || !nunread || binary__inlined(f->bin, unread, nunread, &l, NULL))
		l = NULL;
	free(unread);
	if (!l)
		return e;
	e = binary__inlined_probe(f->bin, l);
	for (size_t i = 0; !e && i < l->ncopies; i++) {
		const struct inl_copy *c = &l->copies[i];
		struct inl_probes *ip = (struct inl_probes *)inline__find(f, c->name);
		size_t k = 0;

		/* read for an earlier target: complete already */
		while (ip && k < f->ninl && f->inl[k] != ip)
			k++;
		if (ip && k < first)
			continue;
		if (!ip)
			ip = probes__new(f, c->name);
		e = ip ? probes__add_copy(f->bin, ip, c) : -ENOMEM;
	}
	for (size_t i = first; !e && i < f->ninl; i++)
		if (!matched_by_name(&tt->match, f->inl[i]->name))
			probes__own(f->inl[i], f->bin);
	if (l != kept)
		inl_list__free(l);
	return e;
}

bool inline__covers(const struct attached_file *f, const struct binary_match *m, size_t i)
{
	for (size_t k = 0; k < f->ninl; k++)
		if (f->inl[k]->has_own &&
		    binary__inlined_match(m->unmatched[i].pattern, f->inl[k]->name))
			return true;
	return false;
}

size_t inline__own_for(const struct attached_file *f, const char *const *patterns, size_t npatterns,
		       struct tracer_func *ret, size_t max)
{
	size_t n = 0;

	for (size_t k = 0; k < f->ninl; k++) {
		bool named = false;

		for (size_t i = 0; !named && i < npatterns; i++)
			named = binary__inlined_match(patterns[i], f->inl[k]->name);
		if (!named || !f->inl[k]->has_own)
			continue;
		if (n < max)
			ret[n].info = &f->inl[k]->own;
		n++;
	}
	return n;
}

void tracer_target__inlined(const struct tracer_target *tt, size_t i, struct tracer_inlined *ret)
{
	const struct inl_probes *ip = i < tt->nfuncs && tt->slots[i] ? tt->slots[i]->inl : NULL;

	*ret = (struct tracer_inlined){ 0 };
	if (!ip)
		return;
	ret->copies = ip->ncopies;
	ret->timed = ip->nprobed;
	ret->counted = ip->ncounted;
	ret->sites = ip->nentries + ip->nexits;
	ret->only = ip->has_own;
	ret->reason = ip->reason[0] ? ip->reason : NULL;
}

// SPDX-License-Identifier: MIT
/*
 * The last matches' answers, kept per binary and carried to a new reading
 * of the same file.
 * binary_impl.h holds what the pieces share.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gelf.h>

#include "analysis/binary.h"
#include "analysis/binary_impl.h"
#include "base/cancel.h"
#include "base/demangle.h"
#include "analysis/disasm.h"
#include "analysis/elfbin.h"
#include "analysis/gopclntab.h"
#include "analysis/inlined.h"

void bin_memo__free(struct match_memo *mm)
{
	if (!mm)
		return;
	free(mm->key);
	binary_match__clear(&mm->m);
	free(mm->at);
	inl_list__free(mm->inl);
	free(mm);
}

/* patterns and limit as one key; NULL when out of memory */
static char *memo_key(const char *const *patterns, size_t npatterns, size_t *ret_len)
{
	size_t len = 0;
	char *key;

	for (size_t i = 0; i < npatterns; i++)
		len += strlen(patterns[i]) + 1;
	key = malloc(len ? len : 1);
	if (!key)
		return NULL;
	*ret_len = 0;
	for (size_t i = 0; i < npatterns; i++) {
		size_t n = strlen(patterns[i]) + 1;

		memcpy(key + *ret_len, patterns[i], n);
		*ret_len += n;
	}
	return key;
}

/* The remembered answer for a key (memo_key), or NULL. */
static struct match_memo *memo_find_key(const struct binary *b, const char *key, size_t len,
					size_t npatterns, size_t limit)
{
	struct match_memo *mm;

	for (mm = b->memo; mm; mm = mm->next)
		if (mm->limit == limit && mm->npatterns == npatterns && mm->key_len == len &&
		    !memcmp(mm->key, key, len))
			break;
	return mm;
}

/* The remembered answer for patterns and limit, to add to; NULL when none. */
static struct match_memo *memo_find(const struct binary *b, const char *const *patterns,
				    size_t npatterns, size_t limit)
{
	struct match_memo *mm = NULL;
	size_t len;
	char *key = memo_key(patterns, npatterns, &len);

	if (key)
		mm = memo_find_key(b, key, len, npatterns, limit);
	free(key);
	return mm;
}

/* The remembered answer for patterns and limit, or NULL. */
const struct match_memo *bin_memo__find(const struct binary *b, const char *const *patterns,
					size_t npatterns, size_t limit)
{
	return memo_find(b, patterns, npatterns, limit);
}

int binary__inlined_keep(struct binary *b, const char *const *patterns, size_t npatterns)
{
	struct match_memo *mm = memo_find(b, patterns, npatterns, BINARY_DEFAULT_LIMIT);
	struct inl_list *l = NULL;
	int e;

	if (!mm)
		return -ENOENT;
	if (mm->inl)
		return 0;
	e = binary__inlined(b, patterns, npatterns, &l, NULL);
	if (!e)
		e = binary__inlined_probe(b, l);
	if (e || (l && !l->ncopies)) {
		inl_list__free(l);
		return e;
	}
	mm->inl = l;
	return 0;
}

struct inl_list *binary__inlined_kept(const struct binary *b, const char *const *patterns,
				      size_t npatterns)
{
	struct match_memo *mm = memo_find(b, patterns, npatterns, BINARY_DEFAULT_LIMIT);

	return mm ? mm->inl : NULL;
}

/* Keeps mm, latest first, and forgets the oldest past MEMO_MAX. */
static void memo_push(struct binary *b, struct match_memo *mm)
{
	struct match_memo **pp;
	size_t n = 1;

	mm->next = b->memo;
	b->memo = mm;
	for (pp = &mm->next; *pp && n < MEMO_MAX; pp = &(*pp)->next)
		n++;
	while (*pp) {
		struct match_memo *old = *pp;

		*pp = old->next;
		bin_memo__free(old);
	}
}

/* A copy of the remembered answer, for patterns; false when there is none. */
bool bin_memo__get(const struct binary *b, const char *const *patterns, size_t npatterns,
		   size_t limit, struct binary_match *m)
{
	const struct match_memo *mm = bin_memo__find(b, patterns, npatterns, limit);

	if (!mm)
		return false;
	memset(m, 0, sizeof(*m));
	m->funcs = calloc(mm->m.nfuncs + 1, sizeof(*m->funcs));
	m->unmatched = calloc(mm->m.nunmatched + 1, sizeof(*m->unmatched));
	if (!m->funcs || !m->unmatched) {
		binary_match__clear(m);
		return false;
	}
	if (mm->m.nfuncs)
		memcpy(m->funcs, mm->m.funcs, mm->m.nfuncs * sizeof(*m->funcs));
	m->nfuncs = mm->m.nfuncs;
	for (size_t k = 0; k < mm->m.nunmatched; k++) {
		m->unmatched[k] = mm->m.unmatched[k];
		m->unmatched[k].pattern = patterns[mm->at[k]];
	}
	m->nunmatched = mm->m.nunmatched;
	return true;
}

/* Remembers m, the answer for patterns; nothing when out of memory. */
void bin_memo__put(struct binary *b, const char *const *patterns, size_t npatterns, size_t limit,
		   const struct binary_match *m)
{
	struct match_memo *mm = calloc(1, sizeof(*mm));
	size_t k = 0;

	if (!mm)
		return;
	mm->key = memo_key(patterns, npatterns, &mm->key_len);
	mm->m.funcs = calloc(m->nfuncs + 1, sizeof(*mm->m.funcs));
	mm->m.unmatched = calloc(m->nunmatched + 1, sizeof(*mm->m.unmatched));
	mm->at = calloc(m->nunmatched + 1, sizeof(*mm->at));
	if (!mm->key || !mm->m.funcs || !mm->m.unmatched || !mm->at) {
		bin_memo__free(mm);
		return;
	}
	mm->limit = limit;
	mm->npatterns = npatterns;
	if (m->nfuncs)
		memcpy(mm->m.funcs, m->funcs, m->nfuncs * sizeof(*m->funcs));
	mm->m.nfuncs = m->nfuncs;
	/* unmatched are in the patterns' order */
	for (size_t i = 0; i < npatterns && k < m->nunmatched; i++) {
		if (m->unmatched[k].pattern != patterns[i])
			continue;
		mm->m.unmatched[k] = m->unmatched[k];
		mm->m.unmatched[k].pattern = NULL;
		mm->at[k++] = i;
	}
	if (k != m->nunmatched) {
		bin_memo__free(mm);
		return;
	}
	mm->m.nunmatched = k;
	memo_push(b, mm);
}

/* b's entry of the function another reading of the same file listed as fi. */
static struct fn_entry *entry_of(struct binary *b, const struct func_info *fi)
{
	for (size_t i = bin_match__key_lower_bound(b, fi->name);
	     i < b->nkeys && !strcmp(b->keys[i].name, fi->name); i++) {
		struct fn_entry *f = &b->fns[b->fns[b->keys[i].fn].canon];

		if (f->addr == fi->address && !f->dropped)
			return f;
	}
	return NULL;
}

/* b's string for a suggestion another reading of the same file made. */
static const char *suggestion_of(const struct binary *b, const char *name)
{
	for (size_t i = bin_match__key_lower_bound(b, name);
	     i < b->nkeys && !strcmp(b->keys[i].name, name); i++) {
		const char *d = bin_match__display_name(&b->fns[b->fns[b->keys[i].fn].canon]);

		if (!strcmp(d, name))
			return d;
	}
	return NULL;
}

/*
 * from, an answer of another reading of the same file, as b's own (its
 * inlined copies taken: addresses and names, the same in both); NULL when it
 * cannot be.
 */
static struct match_memo *memo_translate(struct binary *b, struct match_memo *from)
{
	struct match_memo *mm = calloc(1, sizeof(*mm));
	size_t cap = 0;

	if (!mm)
		return NULL;
	*mm = (struct match_memo){ .key_len = from->key_len,
				   .limit = from->limit,
				   .npatterns = from->npatterns };
	mm->key = malloc(from->key_len ? from->key_len : 1);
	mm->m.unmatched = calloc(from->m.nunmatched + 1, sizeof(*mm->m.unmatched));
	mm->at = calloc(from->m.nunmatched + 1, sizeof(*mm->at));
	if (!mm->key || !mm->m.unmatched || !mm->at)
		goto fail;
	memcpy(mm->key, from->key, from->key_len);
	/* the same functions, analysed here: bounded by the limit, as the match was */
	b->match_gen++;
	for (size_t i = 0; i < from->m.nfuncs; i++) {
		struct fn_entry *f = entry_of(b, from->m.funcs[i]);

		if (!f || bin_match__add(b, &mm->m, f, &cap))
			goto fail;
	}
	if (mm->m.nfuncs != from->m.nfuncs)
		goto fail;
	for (size_t k = 0; k < from->m.nunmatched; k++) {
		struct binary_unmatched *u = &mm->m.unmatched[k];

		*u = from->m.unmatched[k];
		for (size_t s = 0; s < u->nsuggestions; s++)
			if (!(u->suggestions[s] = suggestion_of(b, u->suggestions[s])))
				goto fail;
		mm->at[k] = from->at[k];
	}
	mm->m.nunmatched = from->m.nunmatched;
	mm->inl = from->inl;
	from->inl = NULL;
	return mm;
fail:
	bin_memo__free(mm);
	return NULL;
}

/*
 * Takes the answers another reading of the same file remembers (the
 * analyzer's, on its thread) as b's own, so that the attach finds them: the
 * matched functions are analysed here, the globs and suggestions are not
 * computed again. An answer b cannot take is left out: b matches it itself.
 */
void bin_memo__import(struct binary *b, struct binary *from)
{
	struct match_memo *list[MEMO_MAX];
	size_t n = 0;

	for (struct match_memo *mm = from->memo; mm && n < MEMO_MAX; mm = mm->next)
		list[n++] = mm;
	/* oldest first, so that b's order is from's */
	while (n--) {
		struct match_memo *mm = memo_find_key(b, list[n]->key, list[n]->key_len,
						      list[n]->npatterns, list[n]->limit);

		if (mm) {
			/* matched here before, its copies read there */
			if (!mm->inl) {
				mm->inl = list[n]->inl;
				list[n]->inl = NULL;
			}
			continue;
		}
		mm = memo_translate(b, list[n]);
		if (mm)
			memo_push(b, mm);
	}
}

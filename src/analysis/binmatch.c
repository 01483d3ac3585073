// SPDX-License-Identifier: MIT
/*
 * Matching patterns against the index: globs, keys, suggestions for a name
 * that matches nothing, Go ABI wrappers, IFUNCs.
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

/* ---- globs ---- */

bool glob_has_wildcards(const char *p)
{
	for (; *p; p++) {
		if (*p == '\\' && p[1])
			p++;
		else if (*p == '*' || *p == '?')
			return true;
	}
	return false;
}

/*
 * "LIB:FUNC": the first colon that is not half of "::" (C++ and Rust paths),
 * before anything of a C++ signature or a Go generic name; LIB holds ".so"
 * or a wildcard, so Go's "type:.eq.T" stays a function name.
 */
bool binary_pattern__library(const char *pattern, char *lib, size_t liblen, const char **ret_func)
{
	size_t i;

	for (i = 0; pattern[i] && !strchr("(<[{ ", pattern[i]); i++) {
		if (pattern[i] == '\\' && pattern[i + 1]) {
			i++;
			continue;
		}
		if (pattern[i] != ':')
			continue;
		if (pattern[i + 1] == ':') {
			i++;
			continue;
		}
		break;
	}
	if (pattern[i] != ':' || i == 0 || !pattern[i + 1] || i >= liblen)
		return false;
	memcpy(lib, pattern, i);
	lib[i] = '\0';
	if (!strstr(lib, ".so") && !glob_has_wildcards(lib))
		return false;
	*ret_func = pattern + i + 1;
	return true;
}

int glob_check(const char *p, struct rw_error *err)
{
	size_t len = strlen(p), stars = 0;

	for (const char *c = p; *c; c++) {
		if (*c == '\\' && c[1])
			c++;
		else if (*c == '*')
			stars++;
	}
	if (len > GLOB_MAX_LEN)
		return rw_error_set(
			err, EINVAL,
			"pattern '%.64s...' is %zu bytes long, more than %d (the limit of "
			"a pattern with '*' or '?'): shorten it, or give the exact name",
			p, len, GLOB_MAX_LEN);
	if (stars > GLOB_MAX_STARS)
		return rw_error_set(err, EINVAL,
				    "pattern '%s' holds %zu '*', more than %d (the limit of a "
				    "pattern): merge them, or give the exact name",
				    p, stars, GLOB_MAX_STARS);
	return 0;
}

/* `*` and `?` with backtracking to the last star only: linear in practice,
 * O(len(p) * len(s)) at worst, never exponential. */
bool glob_match(const char *p, const char *s)
{
	const char *star_p = NULL, *star_s = NULL;

	while (*s) {
		if (*p == '*') {
			star_p = ++p;
			star_s = s;
			continue;
		}
		if (*p == '?' || (*p == '\\' && p[1] && p[1] == *s) || (*p != '\\' && *p == *s)) {
			p += (*p == '\\') ? 2 : 1;
			s++;
			continue;
		}
		if (*p == '\\' && !p[1] && *s == '\\') {
			p++;
			s++;
			continue;
		}
		if (!star_p)
			return false;
		p = star_p;
		s = ++star_s;
	}
	while (*p == '*')
		p++;
	return !*p;
}

#define MAX_WRAPPER_SIZE 256

/* First entry of [first, end) (sorted by address within one name) at addr, or end. */
static size_t run_find_addr(const struct binary *b, size_t first, size_t end, uint64_t addr)
{
	size_t lo = first, hi = end;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->fns[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < end && b->fns[lo].addr == addr ? lo : end;
}

/* Whether entry i of the run [first, end) calls or jumps to another entry of
 * the run that is not dropped. */
static bool wraps_other(const struct binary *b, size_t i, size_t first, size_t end)
{
	const struct fn_entry *from = &b->fns[i];
	uint8_t buf[MAX_WRAPPER_SIZE];
	size_t len = from->size < sizeof(buf) ? from->size : sizeof(buf);

	/* an ABI wrapper is a few instructions that end in a CALL or JMP to the
	 * body: look for a rel32 displacement that reaches an entry of the same
	 * name. A byte scan is enough here since it only classifies (no probe
	 * goes where it points), and a false match would need an entry's exact
	 * distance. */
	if (len < 5 || elfbin__read(b->eb, from->addr, buf, len))
		return false;
	for (size_t k = 0; k + 5 <= len; k++) {
		uint64_t target;
		int32_t rel;

		if (buf[k] != 0xe8 && buf[k] != 0xe9)
			continue;
		memcpy(&rel, buf + k + 1, 4);
		target = from->addr + k + 5 + (int64_t)rel;
		for (size_t j = run_find_addr(b, first, end, target);
		     j < end && b->fns[j].addr == target; j++)
			if (j != i && !b->fns[j].dropped)
				return true;
	}
	return false;
}

/*
 * Go emits, for a function called across ABIs, a body and a small wrapper
 * under the same name (the ABI0 one is "name.abi0" in .symtab). Keep the body:
 * the entry that does not merely call into the other. One read and at most
 * MAX_WRAPPER_SIZE lookups per entry: a run of thousands of same-named
 * entries in a hostile file costs O(n log n).
 */
static void drop_abi_wrappers(struct binary *b, size_t first, size_t end)
{
	for (size_t i = first; i < end; i++)
		if (!b->fns[i].dropped && b->fns[i].size <= MAX_WRAPPER_SIZE &&
		    wraps_other(b, i, first, end))
			b->fns[i].dropped = true;
}

/* ---- matching ---- */

int bin_match__add(struct binary *b, struct binary_match *m, struct fn_entry *f, size_t *cap)
{
	int ret;

	f = &b->fns[f->canon];
	if (f->match_gen == b->match_gen)
		return 0; /* listed by an earlier pattern */
	ret = bin_analysis__analyzed(b, f);
	if (!ret)
		ret = bin_analysis__follow_tails(b, f);
	if (ret)
		return ret;
	f->match_gen = b->match_gen;
	if (m->nfuncs == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		void *p = realloc(m->funcs, ncap * sizeof(*m->funcs));

		if (!p)
			return -ENOMEM;
		m->funcs = p;
		*cap = ncap;
	}
	m->funcs[m->nfuncs++] = f->info;
	return 0;
}

/*
 * Work bound of one pattern's suggestions, in edit-distance cells: a binary
 * of many long names (or 64 patterns against it) must not stall the caller.
 * Real names rarely get near it: most fail the length test, the rest leave
 * the band within a few rows.
 */
#define SUGGEST_CELL_BUDGET (1u << 20)
#define SUGGEST_MAX_LEN 255

/*
 * Edit distance, or max + 1 once it must exceed max. Only the band of cells
 * within max of the diagonal can hold a distance of at most max (O(max * la),
 * not O(la * lb)); each cell computed is taken from *budget, and an empty
 * budget answers max + 1.
 */
static size_t bounded_distance(const char *a, size_t la, const char *b, size_t lb, size_t max,
			       size_t *budget)
{
	size_t row[SUGGEST_MAX_LEN + 1], inf = max + 1;

	if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN || (la > lb ? la - lb : lb - la) > max)
		return inf;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j <= max ? j : inf;
	for (size_t i = 1; i <= la; i++) {
		size_t lo = i > max ? i - max : 1, hi = i + max < lb ? i + max : lb;
		size_t prev, best;

		if (lo > hi)
			return inf;
		if (*budget < hi - lo + 1) {
			*budget = 0;
			return inf;
		}
		*budget -= hi - lo + 1;
		prev = row[lo - 1];
		/* column lo - 1 of this row lies outside the band unless it is 0 */
		row[lo - 1] = lo == 1 && i <= max ? i : inf;
		best = row[lo - 1];
		for (size_t j = lo; j <= hi; j++) {
			size_t cur = row[j];
			size_t sub = prev + (a[i - 1] != b[j - 1]);
			size_t del = cur + 1, ins = row[j - 1] + 1;
			size_t v = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);

			row[j] = v < inf ? v : inf;
			prev = cur;
			if (row[j] < best)
				best = row[j];
		}
		if (best > max)
			return inf;
	}
	return row[lb] <= max ? row[lb] : inf;
}

/* One unmatched pattern's search for similar names. */
struct suggester {
	char lit[SUGGEST_MAX_LEN + 1]; /* the pattern without wildcards */
	size_t lp, max;		       /* its length, the largest distance kept */
	int diff[256];		       /* its letter counts minus those of a tail */
	size_t budget;		       /* cells left (bounded_distance) */
};

static bool is_name_sep(char c)
{
	return c == '.' || c == '/' || c == ':';
}

/*
 * The distance from the pattern to the name or to any tail of it after a
 * '.', '/' or ':', so "ProcessPaymnt" finds "main.ProcessPayment" and
 * "total" finds "shop::Cart::total"; max + 1 when above max. The tails are
 * walked from the end, keeping the difference of letter counts between the
 * pattern and the tail: a distance is at least the larger of its positive and
 * negative sums, so most tails are ruled out in O(1), and the whole name in
 * O(length).
 */
static size_t name_distance(struct suggester *sg, const char *name)
{
	size_t ln = strlen(name), best = sg->max + 1, pos = sg->lp, neg = 0;

	for (size_t k = ln + 1; k-- > 0;) {
		size_t tl = ln - k;

		if ((!k || is_name_sep(name[k - 1])) && (pos > neg ? pos : neg) < best &&
		    (tl > sg->lp ? tl - sg->lp : sg->lp - tl) < best && sg->budget) {
			size_t d = bounded_distance(sg->lit, sg->lp, name + k, tl, best - 1,
						    &sg->budget);

			if (d < best)
				best = d;
		}
		if (k) {
			unsigned char c = name[k - 1];

			if (sg->diff[c]-- > 0)
				pos--;
			else
				neg++;
		}
	}
	for (size_t k = 0; k < ln; k++)
		sg->diff[(unsigned char)name[k]]++;
	return best;
}

/* The name to show for entry f: demangled when it was mangled. */
const char *bin_match__display_name(const struct fn_entry *f)
{
	return f->demangled ? f->demangled : f->name;
}

/* Whether key is a Go generic function's name without its instantiation. */
static bool generic_key(const struct binary *b, const struct name_key *key)
{
	const struct fn_entry *f = &b->fns[key->fn];

	return b->pcln && !f->demangled && key->name != f->name && strcmp(key->name, f->name);
}

static void suggest(const struct binary *b, struct binary_unmatched *u)
{
	struct suggester sg = { .budget = SUGGEST_CELL_BUDGET };
	size_t dist[BINARY_MAX_SUGGESTIONS], fn[BINARY_MAX_SUGGESTIONS];

	for (const char *p = u->pattern; *p && sg.lp < SUGGEST_MAX_LEN; p++)
		if (*p != '*' && *p != '?' && *p != '\\')
			sg.lit[sg.lp++] = *p;
	for (size_t i = 0; i < sg.lp; i++)
		sg.diff[(unsigned char)sg.lit[i]]++;
	sg.max = sg.lp / 4 > 2 ? sg.lp / 4 : 2;
	for (size_t i = 0, d = 0; i < b->nkeys; i++) {
		const char *name = b->keys[i].name, *shown;
		size_t c = b->fns[b->keys[i].fn].canon, k;

		if (cancel__requested())
			return; /* the caller tells */
		/* a name shared by several functions (overloads) is measured once */
		if (!i || strcmp(name, b->keys[i - 1].name)) {
			/* past the budget only the linear substring test is left */
			d = name_distance(&sg, name);
			if (d > sg.max && sg.lp >= 4 && strcasestr(name, sg.lit))
				d = sg.max; /* a substring is a fair guess too */
		}
		if (d > sg.max || b->fns[c].dropped)
			continue;
		/* a Go generic function by its name without instantiation, once
		 * for all its instances (build_keys) */
		shown = generic_key(b, &b->keys[i]) ? name : bin_match__display_name(&b->fns[c]);
		/* one function once, at its best distance (its names are several) */
		for (k = 0; k < u->nsuggestions && fn[k] != c && strcmp(u->suggestions[k], shown);
		     k++)
			;
		if (k < u->nsuggestions) {
			if (d >= dist[k])
				continue;
			memmove(&dist[k], &dist[k + 1], (u->nsuggestions - k - 1) * sizeof(*dist));
			memmove(&fn[k], &fn[k + 1], (u->nsuggestions - k - 1) * sizeof(*fn));
			memmove(&u->suggestions[k], &u->suggestions[k + 1],
				(u->nsuggestions - k - 1) * sizeof(*u->suggestions));
			u->nsuggestions--;
		}
		/* insertion into the best few, ordered by distance then key */
		k = u->nsuggestions;
		if (k == BINARY_MAX_SUGGESTIONS) {
			if (d >= dist[k - 1])
				continue;
			k--;
		} else {
			u->nsuggestions++;
		}
		while (k > 0 && dist[k - 1] > d) {
			dist[k] = dist[k - 1];
			fn[k] = fn[k - 1];
			u->suggestions[k] = u->suggestions[k - 1];
			k--;
		}
		dist[k] = d;
		fn[k] = c;
		u->suggestions[k] = shown;
	}
}

/* End of the run of entries sharing the name of entry i. */
static size_t same_name_end(const struct binary *b, size_t i)
{
	size_t j = i + 1;

	while (j < b->nfns && !strcmp(b->fns[j].name, b->fns[i].name))
		j++;
	return j;
}

/* In a Go binary, drops the ABI wrappers among the entries named as entry
 * j, once per name. The run of the name is found from j (a glob over every
 * name asks for each entry: a binary search each was 17 string compares). */
static void check_wrappers(struct binary *b, size_t j)
{
	size_t first = j, end;

	if (!b->pcln || b->fns[j].wrappers_checked)
		return;
	while (first > 0 && !strcmp(b->fns[first - 1].name, b->fns[j].name))
		first--;
	end = same_name_end(b, first);
	if (end - first > 1)
		drop_abi_wrappers(b, first, end);
	for (size_t i = first; i < end; i++)
		b->fns[i].wrappers_checked = true;
}

/* First key equal to name, or b->nkeys. */
size_t bin_match__key_lower_bound(const struct binary *b, const char *name)
{
	size_t lo = 0, hi = b->nkeys;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(b->keys[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t key_run_end(const struct binary *b, size_t i)
{
	size_t j = i + 1;

	while (j < b->nkeys && !strcmp(b->keys[j].name, b->keys[i].name))
		j++;
	return j;
}

/* Lists the functions of the keys [first, end), Go ABI wrappers left out. */
static int add_keys(struct binary *b, struct binary_match *m, size_t first, size_t end, size_t *cap,
		    struct rw_error *err)
{
	int ret;

	for (size_t k = first; k < end; k++) {
		struct fn_entry *f = &b->fns[b->keys[k].fn];

		if (cancel__requested())
			return bin_index__cancelled(b, err);
		check_wrappers(b, b->keys[k].fn);
		if (f->dropped || b->fns[f->canon].ifunc)
			continue;
		ret = bin_match__add(b, m, f, cap);
		if (ret == -ECANCELED)
			return bin_index__cancelled(b, err);
		if (ret)
			return rw_error_set(err, -ret, "out of memory");
	}
	return 0;
}

/* ---- IFUNCs ---- */

#define IFUNC_MAX_IMPLS 8

/* A symbol's name at exactly addr, or NULL. */
static const char *sym_name_at(const struct binary *b, uint64_t addr)
{
	const struct elfbin_sym *s = bin_index__sym_exactly_at(b, addr);

	return s ? s->name : NULL;
}

/*
 * The code an IFUNC's resolver can return: x86-64 resolvers load each
 * candidate's address with a RIP-relative LEA (REX.W 8D /r, mod 00, rm 101)
 * and return one. A byte scan is enough: it only names candidates in a
 * message (no probe goes there), and a target must lie in executable code
 * outside the resolver. Distinct targets in the order found, at most max.
 */
static size_t ifunc_impls(const struct binary *b, const struct fn_entry *f, uint64_t *out,
			  size_t max)
{
	uint8_t buf[MAX_WRAPPER_SIZE * 2];
	size_t len = f->size < sizeof(buf) ? f->size : sizeof(buf), n = 0;

	if (len < 7 || elfbin__read(b->eb, f->addr, buf, len))
		return 0;
	for (size_t k = 0; k + 7 <= len && n < max; k++) {
		uint64_t target;
		int32_t rel;
		bool seen = false;

		if ((buf[k] & 0xfb) != 0x48 || buf[k + 1] != 0x8d || (buf[k + 2] & 0xc7) != 0x05)
			continue;
		memcpy(&rel, buf + k + 3, 4);
		target = f->addr + k + 7 + (int64_t)rel;
		if ((target >= f->addr && target < f->addr + f->size) ||
		    !elfbin__is_code(b->eb, target, 1))
			continue;
		for (size_t i = 0; i < n; i++)
			seen |= out[i] == target;
		if (!seen)
			out[n++] = target;
	}
	return n;
}

/*
 * A name whose symbol is an IFUNC is refused: the code there is the
 * resolver, run once per process by the dynamic linker, while calls go
 * straight to the implementation it chose. Say so and name what to trace.
 */
static int ifunc_refuse(const struct binary *b, const char *pat, const struct fn_entry *f,
			struct rw_error *err)
{
	uint64_t impl[IFUNC_MAX_IMPLS];
	size_t n = ifunc_impls(b, &b->fns[f->canon], impl, IFUNC_MAX_IMPLS), named = 0, unnamed = 0;
	char names[320] = "", addrs[160] = "";

	for (size_t i = 0; i < n; i++) {
		const char *name = sym_name_at(b, impl[i]);
		char *dst;
		size_t cap, used;

		/* memcpy@GLIBC_2.2.5 is a candidate of memcpy@@GLIBC_2.14: the
		 * name is refused, so it is no name to trace */
		if (name && (!strcmp(name, pat) || !strcmp(name, f->name)))
			name = NULL;
		dst = name ? names : addrs;
		cap = name ? sizeof(names) : sizeof(addrs);
		used = strlen(dst);
		if (name)
			snprintf(dst + used, cap - used, "%s%s", named++ ? ", " : "", name);
		else
			snprintf(dst + used, cap - used, "%s0x%" PRIx64, unnamed++ ? ", " : "",
				 impl[i]);
	}
	if (named)
		return rw_error_set(
			err, EINVAL,
			"'%s' is an IFUNC in %s: the code at its symbol is a resolver the dynamic linker runs once to pick an implementation for the CPU, and calls go to that implementation; trace the implementations instead: %s",
			pat, b->path, names);
	return rw_error_set(
		err, EINVAL,
		"'%s' is an IFUNC in %s: the code at its symbol is a resolver the dynamic linker runs once to pick an implementation for the CPU, and calls go to that implementation; %s%s%s",
		pat, b->path,
		unnamed ? "its implementations have no symbols in this file, at "
			: "no implementation could be named",
		addrs,
		unnamed ? ": trace the functions that call it, or use a build with symbols" : "");
}

/* How many functions (one per address, wrappers left out) the keys
 * [first, end) add to the current count. */
static size_t count_keys(struct binary *b, size_t first, size_t end)
{
	size_t n = 0;

	for (size_t k = first; k < end; k++) {
		struct fn_entry *f = &b->fns[b->keys[k].fn], *c;

		check_wrappers(b, b->keys[k].fn);
		c = &b->fns[f->canon];
		if (f->dropped || c->ifunc || c->count_gen == b->count_gen)
			continue;
		c->count_gen = b->count_gen;
		n++;
	}
	return n;
}

/* A name past GLOB_MAX_NAME is found by its exact name only (binary.h). */
static bool glob_matches_key(const char *pat, const char *name)
{
	return strnlen(name, GLOB_MAX_NAME + 1) <= GLOB_MAX_NAME && glob_match(pat, name);
}

/*
 * A glob over every name, matched once a name (it costs the pattern's length
 * times the name's): the runs it matches are kept from the count for the
 * listing.
 */
static int match_glob(struct binary *b, const char *pat, size_t limit, struct binary_match *m,
		      size_t *cap, bool *ret_found, struct rw_error *err)
{
	size_t *runs = NULL, nruns = 0, runs_cap = 0, count = 0, end;
	int ret = 0;

	b->count_gen++;
	for (size_t i = 0; i < b->nkeys; i = end) {
		end = key_run_end(b, i);
		if (cancel__requested()) {
			ret = bin_index__cancelled(b, err);
			goto out;
		}
		if (!glob_matches_key(pat, b->keys[i].name))
			continue;
		count += count_keys(b, i, end);
		/* past the limit only the count is wanted, for the message */
		if (count > limit)
			continue;
		if (nruns == runs_cap) {
			size_t ncap = runs_cap ? runs_cap * 2 : 16;
			void *p = reallocarray(runs, ncap, sizeof(*runs));

			if (!p) {
				ret = rw_error_set(err, ENOMEM, "out of memory");
				goto out;
			}
			runs = p;
			runs_cap = ncap;
		}
		runs[nruns++] = i;
	}
	if (count > limit) {
		ret = rw_error_set(
			err, E2BIG,
			"pattern '%s' matches %zu functions, more than the limit of %zu; narrow the pattern or raise the limit",
			pat, count, limit);
		goto out;
	}
	for (size_t r = 0; r < nruns && !ret; r++) {
		ret = add_keys(b, m, runs[r], key_run_end(b, runs[r]), cap, err);
		*ret_found = !ret;
	}
out:
	free(runs);
	return ret;
}

static int match_one(struct binary *b, const char *pat, size_t limit, struct binary_match *m,
		     size_t *cap, bool *ret_found, struct rw_error *err)
{
	size_t i = bin_match__key_lower_bound(b, pat), count = 0, end;
	int ret;

	*ret_found = false;
	/* an exact name wins over reading it as a glob: main.(*Cart).Add */
	if (i < b->nkeys && !strcmp(b->keys[i].name, pat)) {
		end = key_run_end(b, i);
		for (size_t k = i; k < end; k++)
			if (b->fns[b->fns[b->keys[k].fn].canon].ifunc)
				return ifunc_refuse(b, pat, &b->fns[b->keys[k].fn], err);
		/* a name many functions share (static C functions, overloads) is bounded too */
		b->count_gen++;
		count = count_keys(b, i, end);
		if (count > limit)
			return rw_error_set(
				err, E2BIG,
				"name '%s' matches %zu functions, more than the limit of %zu; give a longer name (a C++ signature) or raise the limit",
				pat, count, limit);
		*ret_found = true;
		return add_keys(b, m, i, end, cap, err);
	}
	if (!glob_has_wildcards(pat))
		return 0;
	ret = glob_check(pat, err);
	if (ret)
		return ret;
	return match_glob(b, pat, limit, m, cap, ret_found, err);
}

/* The name of pattern in the index (a "key·1" as the runtime prints it is
 * "key.1" there); an empty pattern is refused. */
static int index_pattern(struct binary *b, const char *pattern, const char **ret,
			 struct rw_error *err)
{
	if (!*pattern)
		return rw_error_set(err, EINVAL,
				    "empty function name; give a name or a glob such as 'main.*'");
	*ret = pattern;
	if (strstr(pattern, "\xc2\xb7") && !(*ret = bin_index__dot_name(b, pattern)))
		return rw_error_set(err, ENOMEM, "out of memory");
	return 0;
}

/* A pattern that matches nothing, with similar names. */
static int unmatched(const struct binary *b, const char *pattern, struct binary_unmatched *u,
		     struct rw_error *err)
{
	u->pattern = pattern;
	suggest(b, u);
	return cancel__requested() ? bin_index__cancelled(b, err) : 0;
}

static int match_uncached(struct binary *b, const char *const *patterns, size_t npatterns,
			  size_t limit, struct binary_match *m, struct rw_error *err);

int binary__match(struct binary *b, const char *const *patterns, size_t npatterns, size_t limit,
		  struct binary_match *m, struct rw_error *err)
{
	int ret;

	if (bin_memo__get(b, patterns, npatterns, limit, m))
		return 0;
	ret = match_uncached(b, patterns, npatterns, limit, m, err);
	if (!ret)
		bin_memo__put(b, patterns, npatterns, limit, m);
	return ret;
}

static int match_uncached(struct binary *b, const char *const *patterns, size_t npatterns,
			  size_t limit, struct binary_match *m, struct rw_error *err)
{
	size_t cap = 0;
	int ret = 0;

	memset(m, 0, sizeof(*m));
	b->match_gen++;
	m->unmatched = calloc(npatterns ? npatterns : 1, sizeof(*m->unmatched));
	if (!m->unmatched)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < npatterns && !ret; i++) {
		const char *pat;
		bool found;

		ret = index_pattern(b, patterns[i], &pat, err);
		if (!ret)
			ret = match_one(b, pat, limit, m, &cap, &found, err);
		if (!ret && !found)
			ret = unmatched(b, patterns[i], &m->unmatched[m->nunmatched++], err);
	}
	if (ret)
		binary_match__clear(m);
	return ret;
}

void binary_match__clear(struct binary_match *m)
{
	if (!m)
		return;
	free(m->funcs);
	free(m->unmatched);
	memset(m, 0, sizeof(*m));
}

/* ---- listing (binary__list): names, no analysis ---- */

/* Lists the functions of the keys [first, end) not listed yet; whether any matched. */
static int list_keys(struct binary *b, size_t first, size_t end, size_t max, size_t *cap,
		     struct binary_list *l)
{
	for (size_t k = first; k < end; k++) {
		struct fn_entry *f = &b->fns[b->keys[k].fn], *c;
		const char *name;

		check_wrappers(b, b->keys[k].fn);
		c = &b->fns[f->canon];
		if (f->dropped || c->ifunc || c->count_gen == b->count_gen)
			continue;
		c->count_gen = b->count_gen;
		l->total++;
		if (l->nfuncs >= max)
			continue;
		if (l->nfuncs == *cap) {
			size_t ncap = *cap ? *cap * 2 : 64;
			void *p = reallocarray(l->funcs, ncap, sizeof(*l->funcs));

			if (!p)
				return -ENOMEM;
			l->funcs = p;
			*cap = ncap;
		}
		name = bin_match__display_name(c);
		l->funcs[l->nfuncs++] = (struct binary_listed){
			.name = name,
			.size = c->size,
			.go = c->source == FUNC_SOURCE_PCLNTAB,
			.generic = b->pcln && strchr(name, '['),
		};
	}
	return 0;
}

/* One pattern's functions (NULL: every function); whether it matched any. */
static int list_one(struct binary *b, const char *pat, size_t max, size_t *cap,
		    struct binary_list *l, bool *ret_found, struct rw_error *err)
{
	size_t i = pat ? bin_match__key_lower_bound(b, pat) : b->nkeys, end;
	int ret;

	*ret_found = false;
	if (pat && i < b->nkeys && !strcmp(b->keys[i].name, pat)) {
		*ret_found = true;
		ret = list_keys(b, i, key_run_end(b, i), max, cap, l);
		return ret ? rw_error_set(err, -ret, "out of memory") : 0;
	}
	if (pat && !glob_has_wildcards(pat))
		return 0;
	if (pat && (ret = glob_check(pat, err)))
		return ret;
	for (i = 0; i < b->nkeys; i = end) {
		end = key_run_end(b, i);
		if (cancel__requested())
			return bin_index__cancelled(b, err);
		if (pat && !glob_matches_key(pat, b->keys[i].name))
			continue;
		*ret_found = true;
		ret = list_keys(b, i, end, max, cap, l);
		if (ret)
			return rw_error_set(err, -ret, "out of memory");
	}
	return 0;
}

int binary__list(struct binary *b, const char *const *patterns, size_t npatterns, size_t max,
		 struct binary_list *l, struct rw_error *err)
{
	size_t cap = 0;
	int ret = 0;

	memset(l, 0, sizeof(*l));
	/* one generation for the call: a function two patterns match is listed once */
	b->count_gen++;
	l->unmatched = calloc(npatterns ? npatterns : 1, sizeof(*l->unmatched));
	if (!l->unmatched)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < (npatterns ? npatterns : 1) && !ret; i++) {
		const char *pat = NULL;
		bool found;

		if (npatterns)
			ret = index_pattern(b, patterns[i], &pat, err);
		if (!ret)
			ret = list_one(b, pat, max, &cap, l, &found, err);
		if (!ret && !found && pat)
			ret = unmatched(b, patterns[i], &l->unmatched[l->nunmatched++], err);
	}
	if (ret)
		binary_list__clear(l);
	return ret;
}

void binary_list__clear(struct binary_list *l)
{
	if (!l)
		return;
	free(l->funcs);
	free(l->unmatched);
	memset(l, 0, sizeof(*l));
}

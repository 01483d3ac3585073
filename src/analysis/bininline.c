// SPDX-License-Identifier: MIT
/*
 * The inlined copies of the functions patterns name: Go's inline tree
 * (goinline.h), or for native code DWARF's inlined subroutines
 * (dwarfinfo.h), read on demand and not kept with the cached binary (most
 * patterns name functions that have bodies of their own).
 */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/binary.h"
#include "analysis/binary_impl.h"
#include "analysis/elfbin.h"
#include "analysis/goinline.h"
#include "analysis/inlsites.h"

struct inl_patterns {
	const char *const *pat;
	size_t n;
};

static bool name_matches(const char *pattern, bool glob, const char *name)
{
	if (!glob)
		return !strcmp(name, pattern);
	return strnlen(name, GLOB_MAX_NAME + 1) <= GLOB_MAX_NAME && glob_match(pattern, name);
}

/* As functions are matched: a Go generic instance by its name without brackets too. */
bool binary__inlined_match(const char *pattern, const char *name)
{
	char bare[GLOB_MAX_NAME + 1];
	bool glob = glob_has_wildcards(pattern);

	if (name_matches(pattern, glob, name))
		return true;
	return strchr(name, '[') && !strchr(pattern, '[') &&
	       bin_index__generic_base(name, bare, sizeof(bare)) &&
	       name_matches(pattern, glob, bare);
}

static bool inl_match(const char *name, void *arg)
{
	const struct inl_patterns *p = arg;

	for (size_t i = 0; i < p->n; i++)
		if (binary__inlined_match(p->pat[i], name))
			return true;
	return false;
}

int binary__inlined(struct binary *b, const char *const *patterns, size_t npatterns,
		    struct inl_list **ret_list, struct rw_error *err)
{
	struct inl_patterns p = { .pat = patterns, .n = npatterns };
	int ret;

	*ret_list = NULL;
	if ((!b->pcln && !b->dwarf) || !npatterns)
		return 0;
	for (size_t i = 0; i < npatterns; i++) {
		if (!glob_has_wildcards(patterns[i]))
			continue;
		ret = glob_check(patterns[i], err);
		if (ret)
			return ret;
	}
	if (!b->pcln)
		return dwarfinfo__inlined(b->dwarf, inl_match, &p, ret_list, err);
	return goinline__load(elfbin__elf(b->eb), elfbin__fd(b->eb), inl_match, &p, ret_list, err);
}

/* Functions that never return, by name: Go's panics and fatal errors, C's aborts. */
static bool noreturn_name(const char *n)
{
	static const char *const prefixes[] = { "runtime.gopanic", "runtime.panic",
						"runtime.goPanic", "runtime.throw",
						"runtime.fatal",   "runtime.Goexit" };
	static const char *const names[] = {
		"abort",	 "exit",	"_exit",	 "__stack_chk_fail",
		"__assert_fail", "__cxa_throw", "__cxa_rethrow", "_Unwind_Resume",
		"longjmp",	 "siglongjmp",	"pthread_exit",	 "__fortify_fail"
	};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(*prefixes); i++)
		if (!strncmp(n, prefixes[i], strlen(prefixes[i])))
			return true;
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (!strcmp(n, names[i]))
			return true;
	return false;
}

static bool noreturn_at(uint64_t addr, void *arg)
{
	const struct func_info *fi = binary__func_at(arg, addr);

	return fi && fi->address == addr && noreturn_name(fi->name);
}

int binary__inlined_sites(struct binary *b, const struct inl_copy *c, struct inl_sites *ret)
{
	const struct func_info *fi = binary__func_at(b, c->outer_entry);
	struct code_range cr[DWARF_MAX_RANGES];
	size_t n = 0, total = 0;
	int e = 0;

	memset(ret, 0, sizeof(*ret));
	ret->mode = INLSITES_NOT_PROBED;
	if (!fi || fi->address != c->outer_entry) {
		snprintf(ret->reason, sizeof(ret->reason), "the function holding it is not known");
		return 0;
	}
	for (size_t i = 0; i < fi->nranges && i < DWARF_MAX_RANGES; i++) {
		uint64_t len = fi->ranges[i].hi - fi->ranges[i].lo;
		uint8_t *bytes;

		total += len;
		if (total > DISASM_MAX_BYTES) {
			snprintf(ret->reason, sizeof(ret->reason),
				 "the function holding it is larger than %u bytes",
				 DISASM_MAX_BYTES);
			goto out;
		}
		bytes = malloc(len ? len : 1);
		if (!bytes) {
			e = -ENOMEM;
			goto out;
		}
		cr[n++] = (struct code_range){ .addr = fi->ranges[i].lo,
					       .bytes = bytes,
					       .len = len };
		if (binary__read(b, fi->ranges[i].lo, bytes, len)) {
			snprintf(ret->reason, sizeof(ret->reason),
				 "the code of the function holding it cannot be read");
			goto out;
		}
	}
	/* a .cold part may lie below the entry range: the sweep wants them ascending */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && cr[j].addr < cr[j - 1].addr; j--) {
			struct code_range t = cr[j];

			cr[j] = cr[j - 1];
			cr[j - 1] = t;
		}
	e = inlsites__find(binary__arch(b), cr, n, fi->address, c->ranges, c->nranges, noreturn_at,
			   b, ret);
out:
	for (size_t i = 0; i < n; i++)
		free((void *)cr[i].bytes);
	return e;
}

int binary__inlined_probe(struct binary *b, struct inl_list *l)
{
	for (size_t i = 0; l && i < l->ncopies; i++) {
		struct inl_copy *c = &l->copies[i];
		int e;

		if (c->sites)
			continue;
		c->sites = malloc(sizeof(*c->sites));
		if (!c->sites)
			return -ENOMEM;
		e = binary__inlined_sites(b, c, c->sites);
		if (e)
			return e;
	}
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * The inlined copies of the functions patterns name: Go's inline tree
 * (goinline.h), or for native code DWARF's inlined subroutines
 * (dwarfinfo.h), read on demand and not kept with the cached binary (most
 * patterns name functions that have bodies of their own).
 */
#include <errno.h>
#include <string.h>

#include "analysis/binary.h"
#include "analysis/binary_impl.h"
#include "analysis/goinline.h"

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

// SPDX-License-Identifier: MIT
/*
 * The DWARF reader over a hostile in-memory ELF file: its functions, and
 * every inlined copy of every function (dwarfinfo__inlined).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libelf.h>

#include "analysis/dwarfinfo.h"
#include "analysis/inlined.h"

static bool any_name(const char *name, void *arg)
{
	(void)arg;
	return name[0] != 0;
}

/* Every copy's strings and ranges read (ASan checks them), and their order. */
static void check_inlined(const struct dwarfinfo *di)
{
	struct inl_list *l = NULL;
	struct rw_error err;
	volatile size_t sum = 0;

	if (dwarfinfo__inlined(di, any_name, NULL, &l, &err))
		return;
	for (size_t i = 0; i < l->ncopies; i++) {
		const struct inl_copy *c = &l->copies[i];

		sum += strlen(c->name) + strlen(c->caller) + strlen(c->outer);
		for (size_t r = 0; r < c->nranges; r++)
			if (c->ranges[r].hi <= c->ranges[r].lo ||
			    (r && c->ranges[r].lo < c->ranges[r - 1].hi))
				abort(); /* ranges are non-empty, sorted and disjoint */
	}
	(void)sum;
	inl_list__free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dwarfinfo *di = NULL;
	struct rw_error err;
	char *copy;
	Elf *elf;

	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	elf_version(EV_CURRENT);
	elf = elf_memory(copy, size);
	if (elf && !dwarfinfo__load(elf, &di, &err)) {
		size_t n;
		const struct dwarf_func *f = dwarfinfo__funcs(di, &n);

		for (size_t i = 0; i < n; i++)
			if (dwarfinfo__find_entry(di, f[i].entry) == NULL)
				abort(); /* every entry must be found again */
		check_inlined(di);
		dwarfinfo__free(di);
	}
	if (elf)
		elf_end(elf);
	free(copy);
	return 0;
}

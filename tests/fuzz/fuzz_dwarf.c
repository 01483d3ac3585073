// SPDX-License-Identifier: MIT
/*
 * The DWARF reader over a hostile in-memory ELF file: its functions, every
 * inlined copy of every function (dwarfinfo__inlined), and the parameters of
 * the first functions (params__from_dwarf), as Go and as C.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libelf.h>

#include "analysis/dwarfinfo.h"
#include "analysis/inlined.h"
#include "analysis/params.h"

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

/* Parameters: bounded, their names terminated, their registers and string slots in range. */
static void check_params(const struct dwarfinfo *di, const struct dwarf_func *f, size_t n)
{
	for (size_t i = 0; i < n && i < 8; i++) {
		struct func_params fp;
		struct rw_error err;

		struct params_at at = { f[i].entry, f[i].entry + (i & 3), (uint32_t)i * 0x9e37 };

		if (params__from_dwarf(di, &at, i & 1, &fp, &err))
			continue;
		if (fp.n > PARAMS_MAX || fp.nstrings > PARAMS_MAX_STRINGS)
			abort();
		for (size_t k = 0; k < fp.n; k++) {
			const struct param *p = &fp.p[k];

			if (strnlen(p->name, sizeof(p->name)) == sizeof(p->name) ||
			    strnlen(p->type, sizeof(p->type)) == sizeof(p->type) ||
			    p->nregs > PARAM_MAX_REGS || p->string >= PARAMS_MAX_STRINGS)
				abort();
			for (size_t r = 0; r < p->nregs; r++)
				if (p->regs[r] >= PREG__COUNT)
					abort();
		}
		(void)params__kernel_strings(&fp);
	}
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
		check_params(di, f, n);
		dwarfinfo__free(di);
	}
	if (elf)
		elf_end(elf);
	free(copy);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * The unwinder over a hostile ELF file's unwind tables (.eh_frame,
 * .debug_frame: rules and DWARF expressions its owner wrote) and a hostile
 * stack (the same bytes, seen as the copy of a stack). Every walk must end
 * within UNWIND_MAX_FRAMES, with canonical addresses only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>

#include "analysis/unwind.h"

#define STACK_BASE 0x7ff000000000ULL

struct tables {
	Dwarf_CFI *eh;
	Dwarf_CFI *debug;
};

static Dwarf_CFI *find(void *ctx, uint64_t pc, enum unwind_table which, uint64_t *ret_bias)
{
	const struct tables *t = ctx;

	(void)pc;
	*ret_bias = 0;
	return which == UNWIND_EH_FRAME ? t->eh : t->debug;
}

static uint64_t word(const uint8_t *data, size_t size, size_t at)
{
	uint64_t v = 0;

	if (size >= 8)
		memcpy(&v, data + at % (size - 7), 8);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tables t = {};
	uint64_t pcs[UNWIND_MAX_FRAMES];
	Dwarf *dw = NULL;
	GElf_Ehdr eh;
	char *copy;
	Elf *elf;

	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	elf_version(EV_CURRENT);
	elf = elf_memory(copy, size);
	if (elf) {
		/* as the symbolizer does: a table is run only once checked */
		if (unwind__section_ok(elf, ".eh_frame", true))
			t.eh = dwarf_getcfi_elf(elf);
		dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
		t.debug = dw && unwind__section_ok(elf, ".debug_frame", false) ? dwarf_getcfi(dw)
									       : NULL;
	}
	/* starting points: the entry, and addresses the input itself holds */
	for (int i = 0; i < 8; i++) {
		struct unwind_regs r = {
			.ip = i == 0 && elf && gelf_getehdr(elf, &eh)
				      ? eh.e_entry
				      : word(data, size, 64 * i + 24),
			.sp = STACK_BASE + (word(data, size, 8 * i) & 0xfff),
			.fp = STACK_BASE + (word(data, size, 8 * i + 16) & 0xffff),
			.saved = { word(data, size, 8 * i + 32) },
		};
		size_t n = unwind__stack(&r, data, size, STACK_BASE, find, &t, pcs,
					 UNWIND_MAX_FRAMES);

		if (n > UNWIND_MAX_FRAMES)
			abort();
		for (size_t k = 0; k < n; k++)
			if (!unwind__canonical(pcs[k]))
				abort();
	}
	if (dw)
		dwarf_end(dw);
	if (t.eh)
		dwarf_cfi_end(t.eh);
	if (elf)
		elf_end(elf);
	free(copy);
	return 0;
}

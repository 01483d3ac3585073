// SPDX-License-Identifier: MIT
/* The DWARF reader over a hostile in-memory ELF file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libelf.h>

#include "analysis/dwarfinfo.h"

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
		dwarfinfo__free(di);
	}
	if (elf)
		elf_end(elf);
	free(copy);
	return 0;
}

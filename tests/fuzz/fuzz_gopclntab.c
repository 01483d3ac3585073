// SPDX-License-Identifier: MIT
/*
 * The .gopclntab reader over hostile bytes, twice:
 *  - gopclntab__parse() on the input after its first 8 bytes, which give the
 *    text start (little-endian; 0 lets the header's be used);
 *  - gopclntab__load() and gobuildinfo__version() on the whole input as an
 *    ELF file in memory;
 *  - gopclntab__load() on it as a file, as the agent reads one: through its
 *    descriptor (a memfd), the table's parts read from it.
 * Silent on every input: no logging, a crash or sanitizer report is the
 * only output.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/gopclntab.h"

static void load_from_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct gopclntab *tab = NULL;
	struct rw_error err;
	Elf *elf;

	if (fd < 0)
		fd = memfd_create("fuzz_gopclntab", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		return;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return;
	if (!gopclntab__load(elf, fd, &tab, &err)) {
		volatile size_t sum = 0;

		for (size_t i = 0; i < tab->nfuncs; i++)
			sum += strlen(tab->funcs[i].name);
		(void)sum;
	}
	gopclntab__free(tab);
	elf_end(elf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int elf_ready;
	struct gopclntab *tab = NULL;
	struct rw_error err;
	uint64_t text = 0;
	char *copy, *ver;
	Elf *elf;

	if (size >= 8) {
		for (int i = 0; i < 8; i++)
			text |= (uint64_t)data[i] << (8 * i);
		if (!gopclntab__parse(data + 8, size - 8, text, &tab, &err)) {
			/* touch every result so that ASan checks it */
			volatile size_t sum = 0;

			for (size_t i = 0; i < tab->nfuncs; i++)
				sum += strlen(tab->funcs[i].name) +
				       (tab->funcs[i].end - tab->funcs[i].entry);
			(void)sum;
		}
		gopclntab__free(tab);
		tab = NULL;
	}

	if (!elf_ready) {
		elf_version(EV_CURRENT);
		elf_ready = 1;
	}
	/* elf_memory() may write to its image: never to libFuzzer's buffer */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	elf = elf_memory(copy, size);
	if (elf) {
		if (!gopclntab__load(elf, -1, &tab, &err)) {
			volatile size_t sum = 0;

			for (size_t i = 0; i < tab->nfuncs; i++)
				sum += strlen(tab->funcs[i].name);
			(void)sum;
		}
		gopclntab__free(tab);
		ver = gobuildinfo__version(elf);
		free(ver);
		elf_end(elf);
	}
	free(copy);
	load_from_file(data, size);
	return 0;
}

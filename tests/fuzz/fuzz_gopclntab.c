// SPDX-License-Identifier: MIT
/*
 * The .gopclntab reader over hostile bytes, twice:
 *  - gopclntab__parse() on the input after its first 8 bytes, which give the
 *    text start (little-endian; 0 lets the header's be used);
 *  - goinline__parse() on the same table, with go:func.* at the offset the
 *    input's last 4 bytes give (modulo its size: the linker puts go:func.*
 *    inside the table), listing every inlined call;
 *  - gopclntab__load(), goinline__load() and gobuildinfo__version() on the
 *    whole input as an ELF file in memory;
 *  - gopclntab__load() and goinline__load() on it as a file, as the agent
 *    reads one: through its descriptor (a memfd), the table read from it.
 * Silent on every input: no logging, a crash or sanitizer report is the
 * only output.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/goinline.h"
#include "analysis/gopclntab.h"

static bool any_name(const char *name, void *arg)
{
	(void)arg;
	return name[0] != 0;
}

/* Touches every copy so that ASan checks it. */
static void touch_copies(const struct inl_list *l)
{
	volatile size_t sum = 0;

	for (size_t i = 0; l && i < l->ncopies; i++) {
		const struct inl_copy *c = &l->copies[i];

		sum += strlen(c->name) + strlen(c->caller) + strlen(c->outer) + c->depth;
		for (size_t r = 0; r < c->nranges; r++)
			sum += c->ranges[r].hi - c->ranges[r].lo;
	}
	(void)sum;
}

static void inline_parse(const uint8_t *data, size_t size, uint64_t text)
{
	struct inl_list *l = NULL;
	struct rw_error err;
	size_t g = 0;

	if (size >= 4)
		g = (size_t)(data[size - 4] | data[size - 3] << 8 | data[size - 2] << 16 |
			     (uint32_t)data[size - 1] << 24) %
		    (size + 1);
	if (!goinline__parse(data, size, text, data + g, size - g, any_name, NULL, &l, &err))
		touch_copies(l);
	inl_list__free(l);
}

static void inline_load(Elf *elf, int fd)
{
	struct inl_list *l = NULL;
	struct rw_error err;

	if (!goinline__load(elf, fd, any_name, NULL, &l, &err))
		touch_copies(l);
	inl_list__free(l);
}

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
	inline_load(elf, fd);
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
		inline_parse(data + 8, size - 8, text);
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
		inline_load(elf, -1);
		ver = gobuildinfo__version(elf);
		free(ver);
		elf_end(elf);
	}
	free(copy);
	load_from_file(data, size);
	return 0;
}

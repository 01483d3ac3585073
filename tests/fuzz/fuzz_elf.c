// SPDX-License-Identifier: MIT
/*
 * The whole analysis over a hostile file: ELF headers, symbols, notes, DWARF,
 * .gopclntab, disassembly of every function, name matching and listing.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/binary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const pats[] = { "*", "main", "mian" };
	struct binary_match m;
	struct binary_list l;
	struct rw_error err;
	struct binary *b;
	char path[64];
	int fd;

	fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	b = binary__open(NULL, path, &err);
	if (b && !binary__match(b, pats, 3, 1u << 20, &m, &err))
		binary_match__clear(&m);
	/* the names a List probe lists, bounded, and again with none (every one) */
	if (b && !binary__list(b, pats, 3, 16, &l, &err)) {
		if (l.nfuncs > 16 || l.nfuncs > l.total)
			__builtin_trap();
		binary_list__clear(&l);
	}
	if (b && !binary__list(b, pats, 0, 16, &l, &err))
		binary_list__clear(&l);
	binary__put(b);
	close(fd);
	return 0;
}

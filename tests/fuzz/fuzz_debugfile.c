// SPDX-License-Identifier: MIT
/*
 * A stripped binary read with a hostile separate debug file: the debug
 * file's headers, build id note, .gnu_debuglink, symbols and DWARF, over the
 * binary's code, held against that code (a debug file that names a function
 * inside an instruction is not used), and each function found checked as it
 * is before a probe is attached. Input: a 4-byte little-endian length L,
 * then L bytes of the binary, then the debug file; an input whose L does not
 * fit (any plain ELF file: the seeds) is both the binary and its own debug
 * file.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/binary.h"

static int file_of(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-debugfile", MFD_CLOEXEC);

	if (fd >= 0 && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Each function's entry and RETs through the check before attaching (binvouch.c). */
static void vouch_all(struct binary *b, const struct binary_match *m)
{
	struct rw_error err;
	size_t bad;

	for (size_t i = 0; i < m->nfuncs && i < 64; i++) {
		const struct func_info *fi = m->funcs[i];
		uint64_t addrs[17] = { fi->address };
		size_t n = 1;

		for (size_t k = 0; k < fi->nreturns && n < 17; k++)
			addrs[n++] = fi->address + (uint64_t)fi->returns[k];
		binary__vouch(b, addrs, n, &bad, &err);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const pats[] = { "*", "main", "parse_*" };
	const uint8_t *bin = data, *dbg = data;
	size_t bin_size = size, dbg_size = size;
	char path[64], debug_path[64];
	struct binary_match m;
	struct rw_error err;
	struct binary *b;
	uint32_t len = 0;
	int fd, dfd;

	if (size >= 4) {
		memcpy(&len, data, 4);
		if (len <= size - 4) {
			bin = data + 4;
			bin_size = len;
			dbg = data + 4 + len;
			dbg_size = size - 4 - len;
		}
	}
	fd = file_of(bin, bin_size);
	dfd = file_of(dbg, dbg_size);
	if (fd >= 0 && dfd >= 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		snprintf(debug_path, sizeof(debug_path), "/proc/self/fd/%d", dfd);
		b = binary__open_with_debug_file(path, debug_path, &err);
		if (b && !binary__match(b, pats, 3, 1u << 20, &m, &err)) {
			vouch_all(b, &m);
			binary_match__clear(&m);
		}
		binary__put(b);
	}
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return 0;
}

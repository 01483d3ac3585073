// SPDX-License-Identifier: MIT
/*
 * What an analysis holds, as the cache's byte bound counts it
 * (binary__bytes), beside the heap it takes (glibc's mallinfo2: in-use
 * chunks and mmapped blocks, measured around the open of each file, this
 * program's one thread). Prints figures; asserts nothing. Build without
 * sanitizers: their allocators report no such figures.
 *
 *   analysis_mem FILE...
 */
#include <malloc.h>
#include <stdio.h>

#include "analysis/binary.h"
#include "base/rwerr.h"

static size_t heap_in_use(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

int main(int argc, char **argv)
{
	/* no cache: each analysis freed after its figures */
	printf("%-56s %10s %10s %6s\n", "file", "heap MiB", "counted", "ratio");
	for (int i = 1; i < argc; i++) {
		struct rw_error err = { "" };
		size_t before = heap_in_use(), heap, counted;
		struct binary *b = binary__open(NULL, argv[i], &err);

		if (!b) {
			printf("%-56s %s\n", argv[i], err.msg);
			continue;
		}
		heap = heap_in_use() - before;
		counted = binary__bytes(b);
		printf("%-56s %10.1f %10.1f %6.2f\n", argv[i], (double)heap / 1048576,
		       (double)counted / 1048576, heap ? (double)counted / (double)heap : 0);
		binary__put(b);
	}
	return 0;
}

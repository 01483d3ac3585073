// SPDX-License-Identifier: MIT
/*
 * /proc/PID/maps text, which a process can shape (paths are its own to
 * choose): parsing, and lookups at every boundary it produced.
 */
#include <stdint.h>
#include <string.h>

#include "procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct procmaps *m = procmaps__parse((const char *)data, size, NULL);
	const struct procmap *v;
	char path[96];
	size_t n;

	if (!m)
		return 0;
	v = procmaps__maps(m, &n);
	for (size_t i = 0; i < n; i++) {
		const struct procmap *hit;

		/* sorted, disjoint, and findable at both ends */
		if (v[i].start >= v[i].end || (i && v[i].start < v[i - 1].end))
			__builtin_trap();
		if (procmaps__find(m, v[i].start) != &v[i] ||
		    procmaps__find(m, v[i].end - 1) != &v[i])
			__builtin_trap();
		hit = procmaps__find(m, v[i].end);
		if (hit && hit != &v[i + 1])
			__builtin_trap();
		if (strlen(v[i].path) > size)
			__builtin_trap();
		if (procmap__file_path(&v[i], 1, path, sizeof(path)))
			__builtin_trap();
	}
	procmaps__find(m, 0);
	procmaps__find(m, UINT64_MAX);
	procmaps__free(m);
	return 0;
}

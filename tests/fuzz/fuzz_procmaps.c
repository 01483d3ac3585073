// SPDX-License-Identifier: MIT
/*
 * /proc/PID/maps text, which a process can shape (paths are its own to
 * choose): parsing, lookups at every boundary it produced, and the list of
 * mapped files that library patterns are matched against.
 */
#include <stdint.h>
#include <string.h>

#include "base/procmaps.h"
#include "trace/shlib.h"

/* One entry per file, each named by the last component of an absolute path. */
static void check_libs(const uint8_t *data, size_t size)
{
	struct shlib_list l;

	if (shlib_list__parse((const char *)data, size, &l, NULL))
		return;
	for (size_t i = 0; i < l.n; i++) {
		const struct shlib *a = &l.libs[i];

		if (a->path[0] != '/' || !a->name[0] || strchr(a->name, '/') ||
		    strcmp(a->path + strlen(a->path) - strlen(a->name), a->name))
			__builtin_trap();
		for (size_t k = 0; k < i; k++)
			if (l.libs[k].map->inode == a->map->inode &&
			    l.libs[k].map->dev_major == a->map->dev_major &&
			    l.libs[k].map->dev_minor == a->map->dev_minor)
				__builtin_trap();
		shlib__matches(a, "lib*.so*");
		shlib__matches(a, "/usr/*");
	}
	shlib_list__clear(&l);
}

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
	check_libs(data, size);
	return 0;
}

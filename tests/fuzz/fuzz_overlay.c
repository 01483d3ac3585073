// SPDX-License-Identifier: MIT
/* /proc/PID/mountinfo text, which a container's own mounts shape. */
#include <stdint.h>
#include <string.h>

#include "base/overlay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const paths[] = { "/", "/app/server", "/opt/x/y" };
	struct overlay_file of;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		if (overlay__parse((const char *)data, size, paths[i], &of))
			continue;
		if (!of.nlowers || of.nlowers > OVERLAY_MAX_LAYERS || of.rel[0] == '/')
			__builtin_trap();
		for (size_t k = 0; k < of.nlowers; k++)
			if (!of.lowers[k][0] || strlen(of.lowers[k]) > size)
				__builtin_trap();
		overlay_file__free(&of);
	}
	return 0;
}

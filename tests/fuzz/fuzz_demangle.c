// SPDX-License-Identifier: MIT
/* The demangler over hostile symbol names, as a hostile .symtab gives them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/demangle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *name = malloc(size + 3), buf[DEMANGLE_MAX_OUT + 1];

	if (!name)
		return 0;
	/* half the inputs as C++ names, half as Rust v0 names */
	memcpy(name, size && data[0] & 1 ? "_R" : "_Z", 2);
	if (size)
		memcpy(name + 2, data + 1, size - 1);
	name[size ? size + 1 : 2] = 0;
	demangle(name, true, buf, sizeof(buf));
	demangle(name, false, buf, sizeof(buf));
	free(name);
	return 0;
}

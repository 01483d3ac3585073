// SPDX-License-Identifier: MIT
/*
 * A function's bytes, from a container's file: the input split at its first
 * byte's position into an entry range and a second (cold) range. Every site
 * found lies inside a range, sorted, and never past the budgets; a function
 * over a budget has none. Silent on every input.
 */
#include <stdint.h>
#include <string.h>

#include "disasm.h"

static int64_t offset_of(const struct code_range *r, size_t n, int64_t site, uint64_t entry)
{
	for (size_t i = 0; i < n; i++)
		if (entry + site >= r[i].addr && entry + site - r[i].addr < r[i].len)
			return 0;
	return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct code_range r[2];
	struct disasm_result res;
	size_t split;

	if (!size)
		return 0;
	split = 1 + (size_t)data[0] * size / 256;
	split = split > size ? size : split;
	r[0] = (struct code_range){ 0x401000, data, split };
	r[1] = (struct code_range){ 0x801000, data + split, size - split };
	if (disasm__scan(r, r[1].len ? 2 : 1, 0x401000, &res))
		return 0;
	if (res.nreturns > DISASM_MAX_RETURNS || (res.over_budget && res.nreturns) ||
	    (res.over_budget && !strstr(res.reason, "limit")))
		__builtin_trap();
	for (size_t i = 0; i < res.nreturns; i++)
		if (offset_of(r, 2, res.returns[i], 0x401000) ||
		    (i && res.returns[i - 1] >= res.returns[i]))
			__builtin_trap();
	disasm_result__clear(&res);
	return 0;
}

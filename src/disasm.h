/* SPDX-License-Identifier: MIT */
/*
 * Finds a function's exits by disassembling every byte of its ranges with
 * Zydis in one linear sweep per range. A byte sequence that does not decode
 * stops the sweep: resyncing by skipping bytes could place a probe inside an
 * instruction, which corrupts the traced process.
 */
#ifndef RETWATCH_DISASM_H
#define RETWATCH_DISASM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct code_range {
	uint64_t addr;
	const uint8_t *bytes;
	size_t len;
};

struct disasm_result {
	int64_t *returns; /* return instructions, as offsets from the entry */
	size_t nreturns;
	int64_t *tail_calls; /* jumps that leave the function's ranges */
	size_t ntail_calls;
	size_t ninsns;
	bool undecodable;
	uint64_t bad_addr; /* where decoding failed, when undecodable */
	/* End of the last instruction of ranges[0] that is not int3 padding. */
	uint64_t code_end;
	char reason[200]; /* why the function is entry-only, or "" */
};

/* Scans ranges (ranges[0] holds the entry). 0, or -ENOMEM. */
int disasm__scan(const struct code_range *ranges, size_t nranges, uint64_t entry,
		 struct disasm_result *ret_res);
void disasm_result__clear(struct disasm_result *res);

#endif

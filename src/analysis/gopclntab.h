/* SPDX-License-Identifier: MIT */
/*
 * Go's .gopclntab: every function's name, entry and end, even in stripped
 * binaries. Layouts of Go 1.16 to 1.26 (pcHeader magics 0xfffffffa, 0xfffffff0,
 * 0xfffffff1). The input is hostile: every offset is bounds-checked.
 */
#ifndef RETWATCH_GOPCLNTAB_H
#define RETWATCH_GOPCLNTAB_H

#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

#include "base/rwerr.h"

/*
 * Budgets against a container's file crafted to exhaust the agent: without
 * them memory grew with the declared table size (a 64 MiB table of zeros
 * past a valid header was 8 million empty functions and 559 MB). Real
 * tables stay far below: kube-apiserver v1.34 has 164,718 functions in a
 * 68 MiB .gopclntab, kubectl 83,385 in 36 MiB, Debian's prometheus 63,128
 * in 13 MiB; analysing kube-apiserver takes 163 MB, the chart's limit is
 * 256 MiB. A table past either bound is refused, naming the limit.
 */
#define GOPCLNTAB_MAX_FUNCS (1u << 19)
#define GOPCLNTAB_MAX_SIZE (128u << 20)

struct gofunc {
	const char *name; /* points into gopclntab->strings */
	uint64_t entry;	  /* virtual address */
	uint64_t end;	  /* virtual address one past the last byte */
};

struct gopclntab {
	uint32_t magic;	     /* pcHeader magic */
	uint64_t text_start; /* virtual address that entry offsets are relative to
			      * (0 for go1.16/1.17, whose entries are absolute) */
	struct gofunc *
		funcs; /* sorted by entry; ABI wrappers dropped where a body of the same name exists
			       * (the ABI0 or the ABIInternal one: see gopclntab.c) */
	size_t nfuncs;
	char *strings; /* owned storage for the names */
	size_t strings_len;
};

/*
 * Pure parser over the bytes of a pclntab, fuzzable without an ELF file.
 * text_start: the address function offsets are relative to; 0 means "take it
 * from the header" (which Go 1.26 writes as 0: then the caller must supply it).
 * Ignored for go1.16/1.17 tables, whose entries are absolute addresses.
 * Addresses are link-time virtual addresses (for a PIE, before the load bias).
 * Functions without code (entry == end) are left out, so memory follows the
 * functions the table really holds, not the count it declares.
 * Returns 0, or -EINVAL / -ENOMEM / -EFBIG (past a budget) with a message
 * in err.
 */
int gopclntab__parse(const uint8_t *data, size_t size, uint64_t text_start,
		     struct gopclntab **ret_tab, struct rw_error *err);

/*
 * Finds and parses the pclntab of an ELF file: the .gopclntab section, or for
 * binaries without that section name (externally linked, PIE), the
 * runtime.pclntab symbol / the pcHeader found through runtime.firstmoduledata.
 * Works on stripped binaries (-ldflags=-s -w, and even without section
 * headers), resolves Go 1.26's zero text start and the text start of cgo
 * binaries (runtime.text, not the start of .text).
 * Returns 0, -ENOENT (with a message) when the file is not ELF or not a Go
 * binary, or -EINVAL with a message in err for a corrupted table or a
 * truncated file, -EFBIG past a budget (checked before the table is read).
 * fd, when not -1, is elf's file: the table is read from it, only the parts
 * the functions' names and addresses need, and none of it is kept.
 */
int gopclntab__load(Elf *elf, int fd, struct gopclntab **ret_tab, struct rw_error *err);

void gopclntab__free(struct gopclntab *tab);
/* The memory tab holds (the analysis cache's budget counts it). */
size_t gopclntab__bytes(const struct gopclntab *tab);

/*
 * The Go version ("go1.26.8") from the build info (.go.buildinfo), or NULL.
 * The caller frees the string.
 */
char *gobuildinfo__version(Elf *elf);

#endif

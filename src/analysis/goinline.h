/* SPDX-License-Identifier: MIT */
/*
 * Inlined copies of Go functions, from the inline tree that Go keeps in
 * .gopclntab for tracebacks (so stripped binaries have it): each function's
 * FUNCDATA_InlTree lists the calls inlined into it, and its
 * PCDATA_InlTreeIndex table says which of them each instruction belongs to.
 * Go 1.20 and later (pcHeader magic 0xfffffff1) only: the table layout of
 * go1.18/1.19 kept a different tree. The input is hostile: every offset is
 * bounds-checked, the tree's parent chains are checked for loops, and the
 * work is bounded (GOINL_MAX_STEPS).
 */
#ifndef RETWATCH_GOINLINE_H
#define RETWATCH_GOINLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

#include "analysis/inlined.h"
#include "base/rwerr.h"

/*
 * Work bound of one reading, in pc-value steps, tree entries and name bytes
 * (64 a step): kube-apiserver v1.34 (68,000 functions with a tree, 219,000
 * inlined calls) takes 1.1 million steps; a table crafted to cost more is
 * refused.
 */
#define GOINL_MAX_STEPS (64u << 20)
/* Runs of one inline index in one function (12 bytes each, held per function). */
#define GOINL_MAX_RUNS (1u << 20)
/* Inline tree entries per function: the runtime's own bound (inlineUnwinder). */
#define GOINL_MAX_TREE (1u << 20)

/*
 * Pure parser over a pclntab's bytes (as gopclntab__parse takes them) and
 * the bytes at moduledata.gofunc (go:func.*), which FUNCDATA offsets are
 * relative to. Lists the copies of every inlined function match accepts.
 * Returns 0, -EOPNOTSUPP for a table older than go1.20, -EINVAL for a
 * corrupted table or tree, -EFBIG past GOINL_MAX_STEPS, -ENOMEM,
 * -ECANCELED; with a message in err.
 */
int goinline__parse(const uint8_t *data, size_t size, uint64_t text_start, const uint8_t *gofunc,
		    size_t gofunc_size, inl_match_fn match, void *arg, struct inl_list **ret_list,
		    struct rw_error *err);

/*
 * Finds the pclntab and go:func.* of an ELF file (its symbol, else
 * runtime.firstmoduledata's gofunc: works stripped) and parses them. fd as
 * for gopclntab__load. -ENOENT when the file is not a Go binary.
 */
int goinline__load(Elf *elf, int fd, inl_match_fn match, void *arg, struct inl_list **ret_list,
		   struct rw_error *err);

#endif

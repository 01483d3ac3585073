/* SPDX-License-Identifier: MIT */
/*
 * Unwinding a copy of the top of a user stack with the unwind tables
 * (.eh_frame, .debug_frame) through libdw's CFI interface: each step asks
 * for the rules at the frame's PC and evaluates them over the copy. Code
 * without tables is stepped by its frame pointer. The copy and the tables
 * come from the traced process: every read is bounds-checked against the
 * copy, the walk ends when SP stops growing, at a non-canonical address, or
 * after UNWIND_MAX_FRAMES.
 */
#ifndef RETWATCH_UNWIND_H
#define RETWATCH_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

#include <elfutils/libdw.h>

#define UNWIND_MAX_FRAMES 64

/*
 * Registers an unwind starts from (as struct rw_regs in bpf/retwatch.h):
 * the instruction's address, SP, the frame pointer and the other registers
 * a callee saves, whose rules the unwind tables give. x86-64: RBP, then
 * RBX, R12-R15. AArch64: X29, then the link register X30 (the return
 * address until a call saves it) and X19-X28.
 */
#if defined(__aarch64__)
#define UNWIND_SAVED 11
#else
#define UNWIND_SAVED 5
#endif
struct unwind_regs {
	uint64_t ip, sp, fp;
	uint64_t saved[UNWIND_SAVED];
};

/* Which unwind table unwind_cfi_fn is asked for, in the order they are tried. */
enum unwind_table {
	UNWIND_EH_FRAME,    /* .eh_frame: in every x86-64 ELF file, loaded with it */
	UNWIND_DEBUG_FRAME, /* .debug_frame: of the file, or of its separate debug file */
};

/*
 * The CFI table of one kind for the file mapped at pc, or NULL (none, or pc
 * is in no file), and the bias to subtract from a runtime address to get
 * that file's own address. A frame with neither table is stepped by its
 * frame pointer. .debug_frame is asked for only where .eh_frame has no rule
 * for pc, so its (costly) DWARF can be opened on demand.
 */
typedef Dwarf_CFI *(*unwind_cfi_fn)(void *ctx, uint64_t pc, enum unwind_table which,
				    uint64_t *ret_bias);

/*
 * Writes the frames of the stack into pcs: pcs[0] = regs->ip, then each
 * caller's return address, innermost first; at most max. stack holds len
 * bytes of the process's memory at address base (which should hold
 * regs->sp). Returns how many were written (at least 1 when ip is
 * canonical).
 */
size_t unwind__stack(const struct unwind_regs *regs, const void *stack, size_t len, uint64_t base,
		     unwind_cfi_fn find, void *ctx, uint64_t *pcs, size_t max);

/*
 * libdw makes room for every register a table's rule names, up to 2^27 of
 * them: a hostile table could make each step allocate and clear gigabytes.
 * x86-64's DWARF registers end below 67, AArch64's below 128; a table naming any register above
 * this, or an instruction we do not know, is not used.
 */
#define UNWIND_MAX_REGNO 127
/* Entries of one table checked at most (libc's .eh_frame has about 3,500). */
#define UNWIND_MAX_TABLE_ENTRIES 4000000

/*
 * Whether a .eh_frame (eh_frame true) or .debug_frame section's data is one
 * libdw may run: every entry parses, every register it names is at most
 * UNWIND_MAX_REGNO, every instruction is known. Linear in the section.
 */
bool unwind__table_ok(Elf *elf, Elf_Data *data, bool eh_frame);
/*
 * unwind__table_ok over the section named name (".eh_frame",
 * ".debug_frame"); false when there is none. A compressed section is
 * refused: libdw decompresses the DWARF sections it opens (call this after
 * dwarf_begin_elf), so one still compressed is not what it would run.
 */
bool unwind__section_ok(Elf *elf, const char *name, bool eh_frame);

/* Whether addr can be a user address: not 0, below 2^47 on x86-64 (four-
 * level paging), below 2^52 on AArch64 (48-bit and 52-bit address spaces). */
static inline int unwind__canonical(uint64_t addr)
{
#if defined(__aarch64__)
	return addr && addr < (1ULL << 52);
#else
	return addr && addr < (1ULL << 47);
#endif
}

#endif

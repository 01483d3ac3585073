/* SPDX-License-Identifier: MIT */
/*
 * An ELF executable or shared object opened for analysis. The file is
 * container-controlled: headers are validated against the file size before
 * use, and code bytes are read with pread (never mmap, so a file truncated
 * under us cannot raise SIGBUS in the agent).
 */
#ifndef RETWATCH_ELFBIN_H
#define RETWATCH_ELFBIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <libelf.h>

#include "base/rwerr.h"

struct elfbin;

struct elfbin_sym {
	const char *name; /* owned by the elfbin */
	uint64_t addr;
	uint64_t size;
	bool local;
	/* STT_GNU_IFUNC: the code at addr is a resolver that picks the
	 * implementation once, at load; calls never run it */
	bool ifunc;
};

/* Opens path; NULL on error with errno set and a message in err. */
struct elfbin *elfbin__open(const char *path, struct rw_error *err);
/* The same over an already open descriptor (taken over: closed by __free). */
struct elfbin *elfbin__open_fd(int fd, const char *path, struct rw_error *err);
/*
 * A separate debug file (found by build id or .gnu_debuglink): its sections
 * are read as elfbin__open_fd reads them, but its program headers are the
 * stripped file's, whose segments it does not hold: they are not loaded
 * (the address functions below fail on it).
 */
struct elfbin *elfbin__open_debug_fd(int fd, const char *path, struct rw_error *err);
void elfbin__free(struct elfbin *eb);
/* The memory eb holds: its symbols, its FDEs, and the sections libelf read
 * for them (held until the end); the analysis cache's budget counts it. */
size_t elfbin__bytes(const struct elfbin *eb);

Elf *elfbin__elf(const struct elfbin *eb);
bool elfbin__has_symtab(const struct elfbin *eb);
/* The ELF machine: EM_X86_64 or EM_AARCH64 (elfbin__open refuses the others). */
unsigned int elfbin__machine(const struct elfbin *eb);
/* GNU build id as hex, else Go's build id string, else NULL. */
const char *elfbin__build_id(const struct elfbin *eb);

/* .gnu_debuglink's file name (a bare name, no '/') and CRC-32, or NULL. */
const char *elfbin__debuglink(const struct elfbin *eb, uint32_t *ret_crc);
/* The descriptor the file is read through. */
int elfbin__fd(const struct elfbin *eb);

/* Function symbols of .symtab and .dynsym, deduplicated, sorted by address. */
const struct elfbin_sym *elfbin__syms(const struct elfbin *eb, size_t *ret_n);

/* File offset of a virtual address inside a loaded, file-backed segment. */
int elfbin__addr_to_offset(const struct elfbin *eb, uint64_t addr, uint64_t *ret_off);
/*
 * Virtual address of a file offset inside a loaded, file-backed segment
 * (executable segments first, where file ranges of segments overlap).
 * 0, or -ERANGE.
 */
int elfbin__offset_to_addr(const struct elfbin *eb, uint64_t off, uint64_t *ret_addr);
/* Whether [addr, addr+len) lies in one executable PT_LOAD segment. */
bool elfbin__is_code(const struct elfbin *eb, uint64_t addr, uint64_t len);
/* Reads len bytes at a virtual address into buf. 0 or -errno. */
int elfbin__read(const struct elfbin *eb, uint64_t addr, void *buf, size_t len);

/*
 * The range [lo, hi) of the unwind table entry (an FDE of .eh_frame) that
 * starts exactly at addr. 0, -ENOENT (no table, or no FDE starts there), or
 * -ENOMEM. The first call reads the whole table.
 */
int elfbin__fde_at(struct elfbin *eb, uint64_t addr, uint64_t *ret_lo, uint64_t *ret_hi);
/*
 * The start of the last unwind table entry (FDE) that starts at or before
 * addr: a function start the file itself names, stripped or not. 0,
 * -ENOENT (no table, or none starts there or before) or -ENOMEM.
 */
int elfbin__fde_start_before(struct elfbin *eb, uint64_t addr, uint64_t *ret_lo);
/*
 * Whether the unwind table says addr runs in a function's entry state: the
 * CFA is RSP + 8 and no callee-saved register is stored. 1 or 0; -ENOENT
 * when no table covers addr. Code a compiler moved out of a function (a
 * .cold part) that runs inside the function's frame is not in it.
 */
int elfbin__entry_state_at(struct elfbin *eb, uint64_t addr);
/*
 * The start of the last executable section that starts at or before addr
 * (code begins an instruction there). 0, or -ENOENT.
 */
int elfbin__code_section_before(const struct elfbin *eb, uint64_t addr, uint64_t *ret_start);
/* Whether addr lies in a .plt, .plt.sec or .plt.got section (PLT stubs). */
bool elfbin__in_plt(const struct elfbin *eb, uint64_t addr);

#endif

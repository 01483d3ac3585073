/* SPDX-License-Identifier: MIT */
/*
 * Binary analysis: which functions a binary holds, where each one starts in
 * the file, and where it returns. Every later stage (the tracer, the agent)
 * asks this module, through a cache keyed by (st_dev, st_ino, size, mtime,
 * ctime): a path alone could name a different file by the time we attach, and
 * whoever may write the file may also set its mtime back, but not its ctime.
 * A stripped file's functions are named by a debug file that each process
 * may see differently (one in a container's root): its analysis is keyed by
 * that file's identity too, and used only for processes that see it.
 */
#ifndef RETWATCH_BINARY_H
#define RETWATCH_BINARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/disasm.h"
#include "analysis/dwarfinfo.h"
#include "base/rwerr.h"

#define BINARY_DEFAULT_LIMIT 256
#define BINARY_MAX_SUGGESTIONS 5

enum func_source {
	FUNC_SOURCE_SYMTAB,
	FUNC_SOURCE_DWARF,
	FUNC_SOURCE_PCLNTAB,
};

enum func_mode {
	FUNC_MODE_ENTRY_RET,
	FUNC_MODE_ENTRY_RET_TAILCALL,
	FUNC_MODE_ENTRY_ONLY,
};

struct func_info {
	const char *name;      /* as in the binary (mangled for C++ and Rust) */
	const char *demangled; /* C++ with parameters, Rust without hash; NULL if not mangled */
	uint64_t address;      /* virtual address of the entry */
	uint64_t file_offset;  /* what a uprobe attaches at */
	uint64_t size;	       /* of the entry range */
	/* where the entry probe goes, as an offset from address (entrysite.h);
	 * 0: the first byte */
	int64_t entry_site;
	/*
	 * The general-purpose registers an instruction between address and
	 * the entry site writes (any width of them), a bit each in hardware
	 * encoding order: bit 0 RAX, 1 RCX, 2 RDX, 3 RBX, 4 RSP, 5 RBP, 6 RSI,
	 * 7 RDI, 8-15 R8-R15. 0 when the site is the first byte. A register
	 * not among them holds at the site what it held at the entry (an
	 * argument passed in it, though DWARF may place it on the stack
	 * there); memory may differ: the skipped instructions may store above
	 * the return address ([RSP + 8] and up, a stack argument's slot).
	 */
	uint32_t entry_clobbers;
	/*
	 * How far below the entry's the stack pointer is at the entry site,
	 * in bytes: what the skipped instructions' SUB RSP, imm took (a frame
	 * made without a PUSH). The probe there adds it back, to key the call
	 * at the entry's depth and read its return address. 0 at the first byte.
	 */
	uint32_t entry_sp;
	/* Go: the entry site is past the stack check (entrysite__past_check) */
	bool entry_past_check;
	enum func_source source;
	bool go; /* in Go's function table: Go code, not C linked in by cgo */
	/* ranges[0] holds the entry; DWARF_MAX_RANGES at most (Go: one) */
	struct addr_range *ranges;
	size_t nranges;
	enum func_mode mode;
	const char *reason;	/* why entry-only, else NULL */
	const int64_t *returns; /* offsets from address, ascending */
	size_t nreturns;
	const int64_t *tail_calls;
	const uint64_t *tail_targets; /* where each goes; 0: not known (through memory) */
	size_t ntail_calls;
	/*
	 * Native code (not Go), for functions binary__match lists: the tail
	 * calls followed to the functions they jump to, transitively (within
	 * BINARY_TAIL_MAX_DEPTH jumps, BINARY_TAIL_MAX_FUNCS functions and
	 * BINARY_TAIL_MAX_RETURNS return sites): the RETs of those functions,
	 * as offsets from file_offset, ascending. A RET among them ends a call
	 * when it runs at the call's entry stack pointer.
	 */
	const int64_t *tail_returns;
	size_t ntail_returns;
	size_t ntail_followed; /* tail_calls whose target is followed */
	/*
	 * Jumps, here or in a function reached by tail calls, that cannot be
	 * followed: through memory (a GOT slot, a PLT stub), to an address
	 * that is no function's entry, or past the bounds. Calls that leave
	 * through them are tail exits, without a duration.
	 */
	size_t ntail_untimed;
	/* jumps through a register or a computed address there: a switch
	 * table, or a tail call through a function pointer (not decidable);
	 * calls never seen returning are tail exits too */
	size_t nindirect_jumps;
	size_t ncalls; /* its CALL instructions, of any form */
	/* its instructions that switch stacks (disasm_insn.switches_stack) */
	size_t nstack_switches;
	/* its code may reach its return slot (disasm__return_slot_used) */
	bool return_slot_used;
	/* of its own jumps through a register or memory that may leave it (not
	 * a switch table's; native x86-64 code): where each goes is read where
	 * it runs, and the RETs there end the call */
	const struct disasm_hook *hooks;
	size_t nhooks;
	bool exits_known;	    /* the sweep of every range completed */
	struct func_params *params; /* binary__params' answer, made when asked */
};

/* Bounds of following tail calls (func_info.tail_returns). */
#define BINARY_TAIL_MAX_DEPTH 4
#define BINARY_TAIL_MAX_FUNCS 32
#define BINARY_TAIL_MAX_RETURNS 256

struct binary_unmatched {
	const char *pattern;
	/* similar names, demangled where mangled; one per function */
	const char *suggestions[BINARY_MAX_SUGGESTIONS];
	size_t nsuggestions;
};

struct binary_match {
	const struct func_info **funcs; /* owned by the binary, valid until it is put */
	size_t nfuncs;
	struct binary_unmatched *unmatched;
	size_t nunmatched;
};

/* One function binary__list names, without analysing it. */
struct binary_listed {
	const char *name; /* demangled where mangled; owned by the binary */
	uint64_t size;	  /* of its entry range */
	bool go;	  /* in Go's function table */
	bool generic;	  /* a Go generic function's instance (its name holds '[') */
};

struct binary_list {
	struct binary_listed *funcs; /* at most the max asked for, in name order per pattern */
	size_t nfuncs;
	size_t total; /* functions matched: nfuncs and those left out */
	struct binary_unmatched *unmatched;
	size_t nunmatched;
};

struct binary;
struct binary_cache;
struct stat;

struct binary_cache *binary_cache__new(size_t max_entries);
/*
 * Bounds the memory of the analyses no one uses (kept for the next process
 * of the same file) to max_bytes, as binary__bytes counts them, the least
 * recently used going first; 0: by count alone. Analyses in use are never
 * dropped, and do not count against it; nor does one adopted for a minute,
 * or until it is opened (it was read for a caller about to open it).
 */
void binary_cache__set_max_bytes(struct binary_cache *cache, size_t max_bytes);
/*
 * Bounds the memory of all the analyses together to max_total (0: no bound):
 * those no one uses are dropped, least recently used first, to make room;
 * a file whose analysis would take the ones in use (and adopted, above)
 * over it is refused, with ENOSPC and a message naming name (what sets the
 * bound, such as a flag): binary__open fails, and so does the analysis a
 * full cache would start (binary_cache__full). A file is read before its
 * size is known, so the bound can be passed by one file's analysis while
 * it is read and refused.
 */
void binary_cache__set_max_total(struct binary_cache *cache, size_t max_total, const char *name);
/*
 * 0 while the analyses in use leave room for the file st describes (one
 * refused before, for the bytes its analysis held then); else -ENOSPC, with
 * a message in err that says why the file is not read (its caller names it).
 */
int binary_cache__full(struct binary_cache *cache, const struct stat *st, struct rw_error *err);
/* Frees the cache; binaries still held stay valid until put. */
void binary_cache__free(struct binary_cache *cache);
/*
 * Whether the cache holds an analysis of the file fd refers to, opened as
 * name (binary__open_as's origin, else its path): a stripped file's for
 * the debug file a process that sees it so would be named by; name NULL:
 * for any.
 */
bool binary_cache__has(const struct binary_cache *cache, int fd, const char *name);
/*
 * Whether the cache holds an analysis of the file fd refers to (opened as
 * name) that answers these patterns and limit (binary__match remembers its
 * last few answers); with no patterns, binary_cache__has.
 */
bool binary_cache__answers(const struct binary_cache *cache, int fd, const char *name,
			   const char *const *patterns, size_t npatterns, size_t limit);
/*
 * Takes b, opened without a cache (on another thread, see analyzer.h), with
 * the caller's reference into cache. When the cache holds the same file
 * already, b is dropped and the cached binary takes b's remembered match
 * answers (analysing the functions they list, not matching again).
 */
void binary_cache__adopt(struct binary_cache *cache, struct binary *b);
void binary_cache__stats(const struct binary_cache *cache, size_t *ret_hits, size_t *ret_misses);
/* The analyses the cache holds, how many of them no one uses (those adopted
 * and not opened since aside), and their bytes. */
struct binary_cache_use {
	size_t count, unused;
	size_t bytes, unused_bytes;
	size_t evicted; /* dropped for the bounds so far */
	size_t refused; /* files not analysed or not used for binary_cache__set_max_total */
};
void binary_cache__use(const struct binary_cache *cache, struct binary_cache_use *ret);
/*
 * The memory an analysis holds, counted from what it keeps: its index,
 * the symbol tables and debug sections libelf and libdw read for it, the
 * Go function table. A little below the heap it takes (libelf's and libdw's
 * own tables are not counted): 0.93 of it for kube-apiserver (37.8 MiB),
 * 0.74 for libc with its debug file (bench/analysis_mem.sh).
 */
size_t binary__bytes(const struct binary *b);

/*
 * Opens and indexes a binary, or returns the cached analysis of the same
 * file. cache may be NULL. NULL on error, with errno and a message set.
 */
struct binary *binary__open(struct binary_cache *cache, const char *path, struct rw_error *err);
/*
 * binary__open of path (such as /proc/self/fd/N), which origin named when
 * it was opened (such as /proc/PID/exe): the debug file is looked for
 * beside origin, inside its process's root first, where origin still leads
 * to the file opened.
 */
struct binary *binary__open_as(struct binary_cache *cache, const char *path, const char *origin,
			       struct rw_error *err);
/*
 * binary__open, without a cache, with the file debug_path names as the
 * stripped file's debug file instead of one searched for (checked as one
 * found is: a regular ELF file, its build id the file's when both have one;
 * else not used). For tests and fuzzing.
 */
struct binary *binary__open_with_debug_file(const char *path, const char *debug_path,
					    struct rw_error *err);
/* Drops a reference taken by binary__open; NULL is fine. */
void binary__put(struct binary *b);

const char *binary__path(const struct binary *b);
const char *binary__go_version(const struct binary *b); /* NULL if not Go */
const char *binary__build_id(const struct binary *b);	/* NULL if none */
/*
 * Why a call of fi cannot return through the kernel's return trampoline
 * (a uretprobe hijacks the return address on the stack while the call runs),
 * or NULL when it can: only where nothing can read that address before the
 * call returns. An unwinder walks a frame only from code the frame calls
 * (a C++ throw, Rust's panic, a profiler or a Go traceback from a callee, a
 * signal handler's backtrace aside), so fi must call nothing and leave only
 * by its own RETs: no CALL, no jump out of it or through a register, no
 * switch to another stack (a RET there would not reach the trampoline, and
 * the kernel would match a later one with the wrong call), no use of its
 * return slot (which holds the trampoline's address meanwhile), its every
 * instruction read; native x86-64 code of a file with no Go in it
 * (Go's runtime walks its stacks from anywhere: preemption, the GC).
 */
const char *binary__trampoline_refusal(const struct binary *b, const struct func_info *fi);

/* "x86-64" or "aarch64": the instruction set its code is read as. */
const char *binary__machine(const struct binary *b);
enum disasm_arch binary__arch(const struct binary *b);
/* Whether its code runs on the machine retwatch was built for (traceable here). */
bool binary__native(const struct binary *b);
/* The machine retwatch was built for, as binary__machine names it. */
#if defined(__aarch64__)
#define RW_MACHINE "aarch64"
#else
#define RW_MACHINE "x86-64"
#endif
bool binary__stripped(const struct binary *b);
bool binary__is_go(const struct binary *b);
size_t binary__nfuncs(const struct binary *b);
/*
 * Why a pattern may match nothing in a stripped native file without a
 * debug file (debugfile.h): it has only the functions it exports (its
 * dynamic symbols), or none; where its debug file was looked for. Writes the
 * note, saying what to write instead, into buf (len > 0) and returns true;
 * false for a file whose names were all searched (not stripped, or Go,
 * whose function table survives stripping).
 */
bool binary__stripped_note(const struct binary *b, char *buf, size_t len);
/*
 * Where a stripped file's function names and DWARF came from: its separate
 * debug file's path (as the root it was found in sees it), or NULL when the
 * names are the file's own.
 */
const char *binary__debug_file(const struct binary *b);
/* Why a debug file found was not used (a CRC that is not the link's), or NULL. */
const char *binary__debug_note(const struct binary *b);

/*
 * Matches names or globs (`*`, `?`; `\` escapes; brackets are literal since
 * Go generic names hold them; a pattern equal to a function's name matches
 * that name only). A C++ or Rust function is matched by its symbol name and
 * by its demangled names: "shop::Cart::total(int) const", "shop::Cart::total"
 * (every overload), "main::compute" (Rust, no hash). One function per
 * address: names sharing an entry (aliases, a function in both .symtab and
 * DWARF) list it once. Patterns that match nothing are listed in the result
 * with similar names. A glob, or a name shared by several functions (C
 * static functions, C++ overloads), matching more than limit functions fails
 * with -E2BIG.
 */
int binary__match(struct binary *b, const char *const *patterns, size_t npatterns, size_t limit,
		  struct binary_match *ret_match, struct rw_error *err);
void binary_match__clear(struct binary_match *m);

/*
 * The functions the patterns name (as binary__match matches them; none:
 * every function), one per address, Go ABI wrappers and IFUNC resolvers
 * left out, without analysing any: at most max listed, total counting the
 * rest. Patterns that match nothing are listed with similar names. For a
 * user looking for a name to trace: a glob over every name, no disassembly.
 * 0, or -errno with a message in err.
 */
int binary__list(struct binary *b, const char *const *patterns, size_t npatterns, size_t max,
		 struct binary_list *ret_list, struct rw_error *err);
void binary_list__clear(struct binary_list *l);

/*
 * The function whose ranges (entry range or another, such as a .cold part)
 * hold the virtual address vaddr, analysed as binary__match would; NULL when
 * none does. The innermost match wins where ranges nest. The first call
 * builds an address index.
 */
const struct func_info *binary__func_at(struct binary *b, uint64_t vaddr);
/*
 * The native function entered at vaddr, named by a symbol or, with none, by
 * the unwind table entry that starts there in a function's entry state,
 * with its RETs known; NULL when there is none.
 */
const struct func_info *binary__entry_at(struct binary *b, uint64_t vaddr);
/* Virtual address of a file offset (elfbin__offset_to_addr). 0 or -ERANGE. */
int binary__offset_to_addr(const struct binary *b, uint64_t off, uint64_t *ret_addr);
/*
 * Whether each of addrs (virtual addresses, any order) is an instruction of
 * the file's own code, where a probe may go (binvouch.c): in an executable
 * segment, and where an instruction begins when the code is decoded from
 * the nearest function start before it that the file itself names (the
 * unwind table's entry covering it, Go's function table, its own symbol
 * tables, the start of its section; never a debug file's). 0; -EILSEQ with
 * *ret_bad the index of an address that is not and why in err; -ENOMEM.
 */
int binary__vouch(struct binary *b, const uint64_t *addrs, size_t n, size_t *ret_bad,
		  struct rw_error *err);
/*
 * binary__vouch, where only an address the decoding steps over fails (one
 * with no function start of the file's own before it, or too far from it,
 * passes): whether a table of addresses found elsewhere (a debug file)
 * contradicts the file's code.
 */
int binary__disagrees(struct binary *b, const uint64_t *addrs, size_t n, size_t *ret_bad,
		      struct rw_error *err);
/* binary__vouch of file offsets (what uprobes attach at). */
int binary__vouch_offsets(struct binary *b, const uint64_t *offs, size_t n, size_t *ret_bad,
			  struct rw_error *err);
/* Reads len bytes at virtual address addr from the file. */
int binary__read(const struct binary *b, uint64_t addr, void *buf, size_t len);

struct inl_list;
/*
 * The inlined copies (goinline.h) of the functions the patterns name (names,
 * or globs as binary__match takes them), with their callers and ranges: Go's
 * inline tree, read from the file on each call, once for all the patterns;
 * for native code, DWARF's inlined subroutines. *ret_list is NULL for a
 * file that has neither. 0, or -errno with a message in err (a corrupted
 * tree or DWARF; a Go table older than go1.20: -EOPNOTSUPP).
 */
int binary__inlined(struct binary *b, const char *const *patterns, size_t npatterns,
		    struct inl_list **ret_list, struct rw_error *err);
/* Whether an inlined copy's name is one that pattern names (as binary__inlined matches). */
bool binary__inlined_match(const char *pattern, const char *name);
struct inl_copy;
struct inl_sites;
/*
 * Where copy c (of binary__inlined's list) can be probed (inlsites.h), from
 * the code of the function holding it. 0, or -ENOMEM.
 */
int binary__inlined_sites(struct binary *b, const struct inl_copy *c, struct inl_sites *ret);
/* Fills the sites of every copy of l (inl_copy.sites). 0, or -ENOMEM. */
int binary__inlined_probe(struct binary *b, struct inl_list *l);
/*
 * binary__inlined for patterns, with every copy's sites, kept with the
 * answer binary__match remembers for the same patterns: the agent's analyzer
 * reads a big Go binary's tree (73 ms for kube-apiserver) on its thread, and
 * the attach on the main loop finds it (binary__inlined_kept). It goes with
 * that answer to another reading of the same file (binary_cache__adopt).
 * 0; -ENOENT when no match of these patterns is remembered; a reading's error.
 */
int binary__inlined_keep(struct binary *b, const char *const *patterns, size_t npatterns);
/* The copies binary__inlined_keep kept for patterns, owned by b; NULL: not kept, or none. */
struct inl_list *binary__inlined_kept(const struct binary *b, const char *const *patterns,
				      size_t npatterns);

struct func_params;
/*
 * The parameters of fi (params.h) as they are at its entry probe's address
 * (fi->address + site): from DWARF (a Go file's own, a native file's own or
 * its debug file's), else the ABI's argument registers, unnamed, with why.
 * Kept with fi (the same site asked again answers at once). NULL on an
 * error, with a message.
 */
const struct func_params *binary__params(struct binary *b, const struct func_info *fi, int64_t site,
					 struct rw_error *err);

const char *func_source__str(enum func_source s);
const char *func_mode__str(enum func_mode m);

/*
 * Whether pattern names a shared library: "LIB:FUNC", where LIB is a file
 * name or a glob over file names holding ".so" or a wildcard
 * ("libssl.so.3:SSL_write", "libssl*:SSL_*", "*:malloc"; with a '/' it is
 * matched against the whole path), and the colon is not half of a C++ or
 * Rust "::". Copies LIB into lib (of liblen bytes; false when it does not
 * fit) and points *ret_func at FUNC.
 */
bool binary_pattern__library(const char *pattern, char *lib, size_t liblen, const char **ret_func);

/*
 * What a glob may cost: matching is O(pattern x name) at worst, once per
 * name of the binary, so a long pattern over long names is refused or
 * skipped. A pattern with wildcards holds at most GLOB_MAX_LEN bytes and
 * GLOB_MAX_STARS '*'; a name longer than GLOB_MAX_NAME is matched by its exact
 * name only (no real function's name comes near it). The worst glob is then
 * 256 x 4,096 steps a name.
 */
#define GLOB_MAX_LEN 256
#define GLOB_MAX_STARS 8
#define GLOB_MAX_NAME 4096

/* 0, or -EINVAL with a message naming the limit a glob is over. */
int glob_check(const char *pattern, struct rw_error *err);

/* Exposed for tests. */
bool glob_match(const char *pattern, const char *name);
bool glob_has_wildcards(const char *pattern);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The binary index's insides, shared by its pieces and by no one else:
 * binary.c (the index: symbols, pclntab and DWARF; names and keys; the
 * address index), binmatch.c (globs, matching, suggestions, wrappers,
 * IFUNCs), binmemo.c (the last matches' answers), binanalyze.c (each
 * matched function's RETs, cold parts and tail calls) and bincache.c (open,
 * the cache, the accessors).
 */
#ifndef RETWATCH_BINARY_IMPL_H
#define RETWATCH_BINARY_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "analysis/binary.h"
#include "analysis/dwarfinfo.h"
#include "analysis/elfbin.h"
#include "base/rwerr.h"

/* Larger "functions" come from corrupted tables, not compilers. */
#define MAX_FUNC_SIZE (64u << 20)

/*
 * One function of the index; a big Go binary has 165,000 of them, held for
 * as long as the file is cached: the fields are laid out small (80 bytes).
 */
struct fn_entry {
	const char *name;
	uint64_t addr, size;
	const char *demangled; /* C++ with parameters, Rust without hash; or NULL */
	/* The three below are allocated when needed: a probe analyses a few
	 * functions and few have cold parts (held in place, they made the
	 * index 6 times as large). */
	struct addr_range *extra;  /* .cold parts: DWARF_MAX_RANGES - 1 at most */
	struct func_info *info;	   /* analysis, made on first match (struct analysis) */
	struct disasm_result *dis; /* with it, in the same allocation */
	uint32_t canon;		   /* the entry listed for its address (itself, or an alias's) */
	unsigned int match_gen;	   /* binary__match call that last listed it */
	unsigned int count_gen;	   /* the glob that last counted it */
	uint8_t source;		   /* enum func_source */
	uint8_t nextra;
	bool dropped;	       /* a Go ABI wrapper whose body is another entry */
	bool wrappers_checked; /* its name's run went through drop_abi_wrappers */
	bool ifunc;	       /* an IFUNC's resolver (set on its address's canon) */
	bool tails_followed;
};

_Static_assert(DWARF_MAX_RANGES - 1 <= UINT8_MAX, "fn_entry.nextra holds the cold parts' count");

/* fn_entry.canon is an index: the index holds fewer entries than this. */
#define MAX_FNS UINT32_MAX

/* A file's identity, as the cache tells files apart (binary.h). */
struct file_id {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime;
	bool set; /* false: no file */
};

struct binary {
	struct binary_cache *cache;
	struct binary *next; /* in the cache */
	int refs;
	uint64_t last_use;
	size_t bytes;		 /* binary__bytes when last measured: at its open and each put */
	uint64_t fresh_until_ns; /* adopted, not opened since: held till then (bincache.c) */
	char *path;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime;
	struct elfbin *eb;
	/* a stripped file's separate debug file (debugfile.h): its symbols and
	 * DWARF name the functions, eb's code and headers place them */
	struct elfbin *dbg;
	char *dbg_path;
	char *dbg_note; /* a debug file ignored (a CRC that is not the link's), or NULL */
	/*
	 * A stripped file's view: the first debug file its search met
	 * (debugfile__locate), found or not, used or not. The analysis is
	 * shared only by processes whose search meets the same file: one
	 * container's debug file never names another's functions.
	 */
	struct file_id view;
	struct dwarfinfo *dwarf;
	/* a Go file's DWARF, opened for binary__params (the index skips it) */
	struct dwarfinfo *go_dwarf;
	bool go_dwarf_tried;
	struct gopclntab *pcln;
	char *go_version;
	struct fn_entry *fns; /* sorted by name, then address */
	size_t nfns, cap;
	char **names; /* storage for names we made */
	size_t nnames, names_cap;
	unsigned int match_gen, count_gen;
	size_t ncanon;	       /* entries that are their address's own */
	struct name_key *keys; /* every name a pattern matches, sorted */
	size_t nkeys;
	/* functions without a symbol (a stripped binary's static ones) that
	 * tail calls reach, found from their FDEs; each allocated on its own */
	struct fn_entry **anon;
	size_t nanon;
	struct fn_range *by_addr; /* built by binary__func_at */
	size_t nby_addr;
	struct match_memo *memo; /* the last successful binary__match calls, latest first */
	/* cold parts of named functions found from the unwind tables as the
	 * functions are analysed (add_cold_parts), sorted, disjoint */
	struct cold_part *cold;
	size_t ncold;
};

/*
 * A match's answer, kept for the next call with the same patterns and
 * limit: the analyzer matches on its thread, and the attach on the main
 * loop asks again (as does each further process of the same file), where
 * the globs over every name and the suggestions for a name that matches
 * nothing took a second for a big Go binary. The last MEMO_MAX are kept.
 */
struct match_memo {
	char *key; /* the patterns, each with its NUL */
	size_t key_len, limit, npatterns;
	struct binary_match m; /* unmatched[k].pattern: NULL, see at */
	size_t *at;	       /* unmatched[k] is patterns[at[k]] */
	/* the patterns' inlined copies with their sites (binary__inlined_keep),
	 * read off the main loop as the match was; NULL: not read, or none */
	struct inl_list *inl;
	struct match_memo *next;
};

#define MEMO_MAX 8

struct cold_part {
	uint64_t lo, hi; /* [lo, hi) */
	struct fn_entry *f;
};

/* A name of entry fn: its own, or a demangled form of it. */
struct name_key {
	const char *name;
	size_t fn;
};

/* One address range of a function, in the address index. */
struct fn_range {
	uint64_t lo, hi; /* [lo, hi) */
	uint64_t max_hi; /* the largest hi of this and every earlier range */
	size_t fn;	 /* index in fns */
	bool entry;	 /* the range holding the entry */
};

struct binary_cache {
	struct binary *head;
	size_t count, max;
	size_t max_bytes, evicted, refused;
	size_t max_total;    /* binary_cache__set_max_total; 0: none */
	char total_name[48]; /* what sets it, for the refusal's message */
	/* the last files refused for it, with what their analysis held: not read again in vain */
	struct refused_file {
		dev_t dev;
		ino_t ino;
		off_t size;
		struct timespec mtime;
		size_t bytes;
	} refused_files[8];
	unsigned refused_next;
	size_t hits, misses;
	uint64_t clock;
};

/* binary.c: the index */
int bin_index__build(struct binary *b, struct rw_error *err);
/* The analyzer gave up on this reading (cancel.h): ECANCELED, in err. */
int bin_index__cancelled(const struct binary *b, struct rw_error *err);
/* The function symbols functions are named by: the debug file's, else the file's. */
const struct elfbin_sym *bin_index__syms(const struct binary *b, size_t *ret_n);
/* The symbol at exactly addr, or NULL. */
const struct elfbin_sym *bin_index__sym_exactly_at(const struct binary *b, uint64_t addr);
const char *bin_index__dot_name(struct binary *b, const char *name);
/* A Go generic name without its instantiation ("main.Sum" of "main.Sum[go.shape.int]"). */
bool bin_index__generic_base(const char *name, char *buf, size_t len);
/* Whether pclntab lists a function at addr. */
bool bin_index__pcln_has_entry(const struct binary *b, uint64_t addr);
/* Whether addr, or any of [lo, hi), is in a function of the index. */
bool bin_index__addr_known(struct binary *b, uint64_t addr);
bool bin_index__range_known(struct binary *b, uint64_t lo, uint64_t hi);

/* binmatch.c: matching */
size_t bin_match__key_lower_bound(const struct binary *b, const char *name);
const char *bin_match__display_name(const struct fn_entry *f);
int bin_match__add(struct binary *b, struct binary_match *m, struct fn_entry *f, size_t *cap);

/* binanalyze.c: a matched function's analysis, made on first use */
int bin_analysis__analyzed(struct binary *b, struct fn_entry *f);
int bin_analysis__follow_tails(struct binary *b, struct fn_entry *f);
const struct cold_part *bin_analysis__cold_at(const struct binary *b, uint64_t addr);
size_t bin_analysis__cold_after(const struct binary *b, uint64_t addr);
void bin_analysis__free(struct fn_entry *f);

/* binmemo.c: the last matches' answers */
bool bin_memo__get(const struct binary *b, const char *const *patterns, size_t npatterns,
		   size_t limit, struct binary_match *m);
void bin_memo__put(struct binary *b, const char *const *patterns, size_t npatterns, size_t limit,
		   const struct binary_match *m);
void bin_memo__free(struct match_memo *mm);
const struct match_memo *bin_memo__find(const struct binary *b, const char *const *patterns,
					size_t npatterns, size_t limit);
void bin_memo__import(struct binary *b, struct binary *from);

#endif

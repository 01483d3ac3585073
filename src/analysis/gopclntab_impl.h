/* SPDX-License-Identifier: MIT */
/*
 * Shared between the pieces of the gopclntab module: gopclntab.c parses the
 * bytes of a table (gopclntab__parse), gomodule.c finds and reads one in an
 * ELF file (gopclntab__load) and reads the build info beside it. What the
 * ELF side needs of the parser: the pcHeader layouts, the header checks
 * (run on a table's first page before the rest is read) and the parse.
 */
#ifndef RETWATCH_GOPCLNTAB_IMPL_H
#define RETWATCH_GOPCLNTAB_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rwerr.h"
#include "analysis/gopclntab.h"

#define GO12_MAGIC 0xfffffffbU	/* go1.2 to go1.15: not supported */
#define GO116_MAGIC 0xfffffffaU /* go1.16, go1.17 */
#define GO118_MAGIC 0xfffffff0U /* go1.18, go1.19 */
#define GO120_MAGIC 0xfffffff1U /* go1.20 to go1.26 */

#define PCHDR_PREFIX 8 /* magic, pad1, pad2, minLC, ptrSize */

struct pcln_layout {
	uint32_t magic;
	const char *go;		 /* for messages */
	unsigned int hdr_words;	 /* uintptr words after the 8-byte prefix */
	int text_word;		 /* index of textStart, -1 when absent */
	unsigned int name_word;	 /* funcnameOffset */
	unsigned int pcln_word;	 /* pclnOffset */
	unsigned int ftab_field; /* bytes of one functab field */
	unsigned int f_entry;	 /* bytes of _func.entry(Off) at offset 0 */
	unsigned int f_nameoff;	 /* offset of _func.nameOff */
	unsigned int f_funcid;	 /* offset of _func.funcID */
	unsigned int f_size;	 /* fixed part of _func that must be present */
};

static inline uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* True when [off, off + len) lies inside [0, size), without overflowing. */
static inline bool in_bounds(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* The layout of a supported magic, or NULL. */
const struct pcln_layout *pcln_layout_of(uint32_t magic);

/* Where the tables are, from the header, once checked against the section. */
struct pcln_hdr {
	const struct pcln_layout *l;
	size_t size;	     /* of the section */
	size_t hdr_len;	     /* bytes of the pcHeader */
	uint64_t w[8];	     /* its uintptr words, l->hdr_words of them */
	uint64_t text_start; /* what go1.18+ entries are offsets from */
	size_t nfunc;	     /* at most UINT32_MAX and what the section holds */
	uint64_t pcln_off;   /* functab, then the _func records */
	uint64_t name_off;   /* funcnametab */
	uint64_t names_len;  /* bytes of funcnametab */
};

/* Reads the pcHeader: magic, prefix, the words, and the text start. */
int pcln_read_header(const uint8_t *data, size_t size, uint64_t text_start, struct pcln_hdr *h,
		     struct rw_error *err);
/* Checks that the function count, the functab and the name table fit in the section. */
int pcln_locate_tables(struct pcln_hdr *h, struct rw_error *err);

/* -EFBIG, with the message for a table of size bytes past GOPCLNTAB_MAX_SIZE. */
int pcln_too_big(uint64_t size, struct rw_error *err);

/* A table read into an anonymous mapping (gomodule.c's table_read). */
struct table_map {
	uint8_t *data;
	size_t len;
};

/* gopclntab__parse; tm, when not NULL, holds data: what is read is released as the parse goes. */
int pcln_parse(const uint8_t *data, size_t size, uint64_t text_start, const struct table_map *tm,
	       struct gopclntab **ret_tab, struct rw_error *err);

#endif

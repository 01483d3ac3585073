/* SPDX-License-Identifier: MIT */
/*
 * Reading a hostile ELF file's contents through libelf, the part of ELF
 * access below elfbin (which opens files) and unwind (which checks their
 * tables): strings of string tables, checked for their terminator, and the
 * file's image, its allocated bytes by virtual address (its sections, or its
 * segments when it has no section headers), where the Go readers
 * (gomodule.c) find the runtime's tables without symbols.
 */
#ifndef RETWATCH_ELFIMG_H
#define RETWATCH_ELFIMG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

#include "base/rwerr.h"

/* A NUL-terminated string of string table section ndx, or NULL. */
const char *elf_safe_strptr(Elf *elf, size_t ndx, size_t off);

struct elfimg_region {
	const char *name;    /* section name, NULL for a segment */
	uint64_t addr;	     /* virtual address of data[0] */
	const uint8_t *data; /* bytes in the file, NULL until loaded */
	Elf_Scn *scn;	     /* section still to load, or NULL */
	uint64_t size;
	uint64_t offset; /* of a section in the file */
	bool writable;
	bool exec; /* code: never holds a table, a header or a moduledata */
};

struct elfimg_rel {
	uint64_t offset; /* where the loader stores ... */
	uint64_t addend; /* ... this link-time address plus the load bias */
};

struct elfimg {
	Elf *elf;
	int fd;		    /* the file, to read the table from; -1: through libelf */
	uint64_t file_size; /* when fd >= 0 */
	struct elfimg_region *reg;
	size_t nreg;
	struct elfimg_rel *rel; /* R_X86_64_RELATIVE, sorted by offset */
	size_t nrel;
	bool rel_loaded;
	/* symbols from .symtab, 0 when absent (stripped) */
	uint64_t sym_text, sym_pclntab, sym_epclntab;
	uint64_t sym_gofunc; /* go:func.* (Go 1.20+), what funcdata offsets are from */
};

/*
 * The regions of elf (nothing is read yet); fd, when not -1 and a regular
 * file, is elf's file, kept for readers that pread from it. 0, -ENOENT (not
 * ELF), -EINVAL (corrupted or truncated) or -ENOMEM, with a message in err.
 * img is to be freed with elfimg__free whatever the result.
 */
int elfimg__init(struct elfimg *img, Elf *elf, int fd, struct rw_error *err);
void elfimg__free(struct elfimg *img);
/* Reads runtime.text, runtime.pclntab, runtime.epclntab and go:func.* from .symtab. */
void elfimg__symbols(struct elfimg *img);
/* Reads the R_X86_64_RELATIVE relocations (once). 0 or -ENOMEM. */
int elfimg__load_relatives(struct elfimg *img, struct rw_error *err);

/* Loads a section's bytes on first use; false when they cannot be read. */
bool elfimg_region__load(const struct elfimg_region *r);

bool elfimg__has_sections(const struct elfimg *img);
bool elfimg__section_named(const struct elfimg *img, const char *name);
/* The loaded section of that name, or NULL. */
const struct elfimg_region *elfimg__section(const struct elfimg *img, const char *name);
/* The loaded region holding [addr, addr + len), or NULL. */
const struct elfimg_region *elfimg__find(const struct elfimg *img, uint64_t addr, uint64_t len);
/* Reads a pointer at addr: its relocation's addend if it has one. */
bool elfimg__ptr(const struct elfimg *img, uint64_t addr, uint64_t *out);

#endif

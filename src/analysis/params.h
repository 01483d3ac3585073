/* SPDX-License-Identifier: MIT */
/*
 * A function's parameters as its entry probe can read them: for each, its
 * name and type from DWARF, what kind of value it is, and the registers
 * that hold it at the probe's address (the entry site), or why it cannot be
 * read there (on the stack, in a floating-point register, optimized out).
 * Without DWARF for the function, the registers its ABI passes arguments
 * in, unnamed (raw).
 */
#ifndef RETWATCH_PARAMS_H
#define RETWATCH_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rwerr.h"

struct dwarfinfo;

/*
 * The registers an entry probe captures, in this order (the kernel's
 * struct rw_args): Go's register ABI passes integer arguments in RAX, RBX,
 * RCX, RDI, RSI, R8-R11; the System V ABI in RDI, RSI, RDX, RCX, R8, R9.
 * On AArch64 slot i is Xi (X0-X9): Go passes integers in X0-X15, AAPCS64 in
 * X0-X7 (bpf/arch.bpf.h's regs__args reads them so).
 */
enum param_reg {
	PREG_RAX,
	PREG_RBX,
	PREG_RCX,
	PREG_RDX,
	PREG_RSI,
	PREG_RDI,
	PREG_R8,
	PREG_R9,
	PREG_R10,
	PREG_R11,
	PREG__COUNT,
};

enum param_kind {
	PARAM_INT,
	PARAM_UINT,
	PARAM_BOOL,
	PARAM_PTR,
	PARAM_STRING,  /* Go string: pointer and length */
	PARAM_BYTES,   /* Go []byte: pointer, length (and capacity) */
	PARAM_CSTRING, /* char *: up to its NUL */
	PARAM_SLICE,   /* another Go slice: pointer, length, capacity (shown: the two) */
	PARAM_OTHER,   /* not read: its type is named */
};

#define PARAMS_MAX 16
#define PARAM_NAME_LEN 48
#define PARAM_TYPE_LEN 80
#define PARAM_MAX_REGS 3
/* Parameters whose bytes the kernel reads when a call is sent: the first ones. */
#define PARAMS_MAX_STRINGS 4
/* Bytes of a string read. */
#define PARAMS_STRING_BYTES 64

struct param {
	char name[PARAM_NAME_LEN];
	char type[PARAM_TYPE_LEN];
	uint8_t kind; /* enum param_kind */
	uint8_t size; /* bytes of an integer */
	uint8_t nregs;
	/* enum param_reg: the value, or pointer, length (and a slice's capacity) */
	uint8_t regs[PARAM_MAX_REGS];
	int8_t string;	 /* its string slot (< PARAMS_MAX_STRINGS), -1: none */
	const char *why; /* not read: why; else NULL */
};

struct func_params {
	struct param p[PARAMS_MAX];
	size_t n;
	size_t more; /* parameters past PARAMS_MAX, not listed */
	size_t nstrings;
	/* no DWARF describes the function: p holds its ABI's argument
	 * registers, named by register */
	bool raw;
	const char *raw_why; /* why raw */
	int64_t site;	     /* the address they were read at, from the entry */
};

/* Where a function's parameters are read: its entry probe's address. */
struct params_at {
	uint64_t entry; /* the function's entry address */
	uint64_t site;	/* its entry probe's address: entry, or a few instructions in */
	/* the registers the instructions from entry to site write
	 * (func_info.entry_clobbers: hardware numbers, a bit each) */
	uint32_t clobbers;
	/* AArch64 code: DWARF's and the capture slots' registers are Xn (slot i: Xi) */
	bool a64;
};

/*
 * The parameters of the function entered at at->entry, as they are at
 * at->site, from di; go: Go code (no char *). A parameter DWARF places on
 * the stack at the site is read where it was at the entry, when that is
 * registers at->clobbers leaves alone. 0, -ENOENT when di has no such
 * function, -EFBIG past a bound of work, with a message.
 */
int params__from_dwarf(const struct dwarfinfo *di, const struct params_at *at, bool go,
		       struct func_params *ret, struct rw_error *err);
/*
 * The registers go's or the C ABI (System V's; AArch64's: AAPCS64) passes
 * the first integer arguments in, unnamed; a64: AArch64 code.
 */
void params__raw(struct func_params *ret, bool go, bool a64, const char *why);
/*
 * Packs the string slots of fp for the kernel (struct rw_func.str_args):
 * byte i is slot i's pointer register, and in its high half its length
 * register (0xf: up to a NUL); 0xff: unused.
 */
uint64_t params__kernel_strings(const struct func_params *fp);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * What inlsites.c (the sweep, x86-64 through Zydis) and inlsites_a64.c
 * (AArch64) share: what one instruction does to control and to the stack
 * pointer. Internal to the analysis.
 */
#ifndef RETWATCH_INLSITES_IMPL_H
#define RETWATCH_INLSITES_IMPL_H

#include <stdbool.h>
#include <stdint.h>

/* What an instruction does to where the code goes next. */
enum inl_flow {
	FLOW_NEXT,    /* the next instruction (a call too: it returns there) */
	FLOW_JCC,     /* the next one, or its target */
	FLOW_JMP,     /* its target */
	FLOW_JMP_REG, /* through a register or memory: not known */
	FLOW_RET,     /* out of the function */
	FLOW_STOP,    /* nowhere: INT3, UD2, HLT; BRK, UDF */
};

/* A stack pointer not known at an instruction: never reached, or reached with two values. */
#define SP_UNSET INT64_MIN
#define SP_UNKNOWN (INT64_MIN + 1)

struct inl_step {
	uint64_t target;  /* of a direct jump, or of a direct call (call_known) */
	int64_t sp_delta; /* SP_UNKNOWN: it sets the stack pointer to something else */
	uint8_t flow;	  /* enum inl_flow */
	bool call;	  /* its fall-through is where it returns */
	bool call_known;  /* a call whose target is known */
};

#define INLSITES_A64_INSN 4u

/* The AArch64 instruction w at addr. */
void inlsites__step_a64(uint32_t w, uint64_t addr, struct inl_step *ret);

#endif

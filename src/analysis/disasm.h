/* SPDX-License-Identifier: MIT */
/*
 * Finds a function's exits by disassembling every byte of its ranges in one
 * linear sweep per range. x86-64: the common instruction forms from a table
 * of their encodings (checked against Zydis), everything else with Zydis. A
 * byte sequence that does not decode stops the sweep: resyncing by skipping
 * bytes could place a probe inside an instruction, which corrupts the
 * traced process. AArch64 (disasm_a64.c): one aligned word per instruction,
 * the literal pools' words skipped.
 */
#ifndef RETWATCH_DISASM_H
#define RETWATCH_DISASM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Budgets per function, against a container's file crafted to exhaust the
 * agent (one 64 MiB symbol of RET bytes is 67 million sites). Real software
 * stays far below: measured with `retwatch inspect --json BINARY '*'`, the
 * most RETs in one function are 2,623 (the Go 1.26 compiler's
 * ssa.rewriteValueAMD64), 910 (libpython3.11's _PyUnicode_ToNumeric), 130
 * (Debian's prometheus); the largest function is 918 KB (prometheus's
 * aws-sdk-go endpoints.init). A function past either bound is entry-only,
 * with the limit in its reason; the other functions are not affected.
 */
#define DISASM_MAX_RETURNS 16384
#define DISASM_MAX_BYTES (4u << 20)

struct code_range {
	uint64_t addr;
	const uint8_t *bytes;
	size_t len;
};

/*
 * Direct jumps that land near the entry, within DISASM_ENTRY_RUN bytes of
 * it: what the entry site must not skip (entrysite.h).
 */
#define DISASM_ENTRY_RUN 128

struct disasm_jump {
	uint64_t from, to; /* virtual addresses */
};

/*
 * A jump that leaves through a function pointer (a hook), x86-64: through a
 * register (DISASM_HOOK_REG, base), or through the word at base + index *
 * scale + disp (DISASM_HOOK_MEM). Registers are numbered as x86-64 encodes
 * them plus one (RAX 1 ... R15 16), DISASM_REG_IP for RIP-relative (the next
 * instruction's address), 0 for none.
 */
#define DISASM_HOOK_REG 1
#define DISASM_HOOK_MEM 2
#define DISASM_REG_IP 17

struct disasm_hook {
	int64_t off; /* from the entry */
	uint8_t len, kind, base, index, scale;
	int32_t disp;
};

struct disasm_result {
	int64_t *returns; /* return instructions, as offsets from the entry */
	size_t nreturns;
	int64_t *tail_calls; /* jumps that leave the function's ranges */
	/* where each of tail_calls goes (a virtual address); 0: not known
	 * (a jump through memory, such as a GOT slot) */
	uint64_t *tail_targets;
	size_t ntail_calls;
	/*
	 * Unconditional jumps through a register or a computed address (not
	 * RIP-relative): a switch table inside the
	 * function, or a tail call through a function pointer (which one is
	 * not decidable from the instruction).
	 */
	size_t nindirect_jumps;
	size_t ncalls;		/* CALL instructions, of any form */
	size_t nstack_switches; /* instructions that switch stacks (disasm_insn) */
	/* x86-64 code that calls nothing: whether it reaches its return slot
	 * (disasm__return_slot_used); false where not looked at */
	bool return_slot_used;
	/* of those, and of the jumps through RIP-relative memory in tail_calls:
	 * the ones that could be read where they run (x86-64) */
	struct disasm_hook *hooks;
	size_t nhooks;
	/* direct JMPs and Jccs of the function to [entry, entry + DISASM_ENTRY_RUN) */
	struct disasm_jump *entry_jumps;
	size_t nentry_jumps;
	size_t ninsns;
	bool undecodable;
	bool over_budget;  /* past DISASM_MAX_RETURNS or DISASM_MAX_BYTES: entry-only */
	uint64_t bad_addr; /* where decoding failed, when undecodable */
	/* End of the last instruction of ranges[0] that is not int3 padding. */
	uint64_t code_end;
	char *reason; /* why the function is entry-only (allocated), or NULL */
};

/* One instruction as the sweep sees it. */
enum disasm_kind {
	DISASM_OTHER,
	DISASM_RET,
	DISASM_INT3,
	DISASM_JUMP_REL, /* a JMP or Jcc to rel bytes from its end */
	DISASM_CALL,	 /* a CALL of any form */
};

struct disasm_insn {
	size_t length;
	enum disasm_kind kind;
	int64_t rel;
	/*
	 * It loads the stack pointer from elsewhere than the stack itself (a
	 * MOV, LEA, XCHG, CMOV or POP into RSP not from RSP or RBP): a switch
	 * to another stack, as swapcontext makes. ADD, SUB and AND of RSP,
	 * PUSH, POP, LEAVE and `mov %rbp,%rsp` stay on the stack.
	 */
	bool switches_stack;
};

/*
 * What an instruction costs a uprobe placed on it: the kernel emulates a
 * PUSH of a register, the NOP forms, relative jumps and a direct CALL in the
 * trap, and steps anything else out of line with a second trap (which forms
 * a kernel emulates varies: the calibration measures each).
 */
enum disasm_probe_kind {
	DISASM_PROBE_STEPPED, /* anything else: LEA, CMP, SUB, MOV, ENDBR64... */
	DISASM_PROBE_PUSH,    /* PUSH of a register (50-57, 41 50-57) */
	DISASM_PROBE_NOP,     /* other NOPs: 90, 66 90, 0f 1f /0 */
	DISASM_PROBE_NOP5,    /* the five-byte NOP (0f 1f 44 00 00) */
	DISASM_PROBE_JUMP,    /* a relative JMP or Jcc (eb, e9, 70-7f, 0f 80-8f) */
	/* a direct CALL (e8 rel32, no prefix: the kernel refuses 66 e8, and
	 * emulates the push of the return address with the jump) */
	DISASM_PROBE_CALL,
	DISASM_PROBE__N,
};

/* The kind of the instruction at code (len bytes). */
enum disasm_probe_kind disasm__probe_kind(const uint8_t *code, size_t len);
/*
 * The same for AArch64, whose kinds the calibration measures as x86's
 * namesakes: the frame's STP X29, X30, [SP, #-n]! (push), NOP (nop), the
 * other hints: BTI, PACIASP (nop5), B, B.cond, CBZ, TBZ (jump), BL (call).
 */
enum disasm_probe_kind disasm__probe_kind_a64(const uint8_t *code, size_t len);

/*
 * Reads the instruction at p (n bytes there) when it has one of the common
 * forms a table of encodings covers (no legacy prefix, at most one REX, an
 * opcode whose length the table knows for its ModRM): nine in ten of a Go
 * binary's instructions. false leaves it to Zydis: every other form, and
 * bytes cut short. Where it answers, Zydis answers the same (the unit tests
 * compare them over every opcode, REX, ModRM and SIB). Exposed for tests.
 */
bool disasm__quick(const uint8_t *p, size_t n, struct disasm_insn *ret_insn);

/* The instruction sets the sweep reads (the ELF file's machine). */
enum disasm_arch {
	DISASM_X86_64,
	DISASM_AARCH64,
};

/* disasm__probe_kind or disasm__probe_kind_a64, by arch. */
enum disasm_probe_kind disasm__probe_kind_of(enum disasm_arch arch, const uint8_t *code,
					     size_t len);

/*
 * Scans ranges (ranges[0] holds the entry) of arch's code. 0, or -ENOMEM. A
 * function over a budget is not an error: it comes back with no sites,
 * over_budget set and the limit in reason.
 */
int disasm__scan(enum disasm_arch arch, const struct code_range *ranges, size_t nranges,
		 uint64_t entry, struct disasm_result *ret_res);
void disasm_result__clear(struct disasm_result *res);

/*
 * Whether x86-64 code in ranges (ranges[0] holding the entry) may reach
 * its return slot, the word at the entry's stack pointer: a POP of it, a
 * read or write of it, its address taken (retslot.c). Ers towards true: a
 * depth it cannot follow, bytes it cannot decode.
 */
bool disasm__return_slot_used(const struct code_range *ranges, size_t nranges);

/*
 * Whether each of addrs (ascending, n of them, each in [start, start + len))
 * begins an instruction of code, decoded one instruction after another from
 * start, the first byte of code: x86-64 by the sweep's decoders, AArch64 one
 * aligned word at a time. A probe written anywhere else changes the
 * instruction it lands in. 0; -EILSEQ with *ret_bad the index of the first
 * address that is not (the decoding stepped over it, or stopped at bytes
 * that do not decode before reaching it); -EINVAL for addrs out of order or
 * range; -ECANCELED (cancel.h).
 */
int disasm__boundaries(enum disasm_arch arch, const uint8_t *code, size_t len, uint64_t start,
		       const uint64_t *addrs, size_t n, size_t *ret_bad);

#endif

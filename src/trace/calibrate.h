/* SPDX-License-Identifier: MIT */
/*
 * How much of the probes' own cost a measured duration holds, and what one
 * traced call costs its thread, measured on this machine at start: the
 * tracer probes an empty function of our own binary at its entry and RET,
 * which is called many times in rounds. A measured duration starts inside
 * the entry trap (after the BPF program read the clock) and ends inside the
 * RET trap, so it holds the return to user space from the first trap and
 * the entry into the kernel of the second: the empty function's measured
 * duration is that bias, nearly alone.
 */
#ifndef RETWATCH_CALIBRATE_H
#define RETWATCH_CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/disasm.h"
#include "base/rwerr.h"
#include "trace/tracer.h"

/*
 * What the entry probe leaves inside a measured duration depends on the
 * first instruction of the function: the kernel emulates some in the trap
 * (a PUSH of a register, some NOPs on 6.x kernels) and single-steps the rest
 * out of line, with a second trap. Measured on a 6.18 kernel: about 0.8 us
 * inside a duration for the first, 4 us for the rest. Which forms a kernel
 * emulates varies (here a 4-byte NOP with a SIB byte and no displacement is
 * stepped, the other NOPs are not), so each kind below is calibrated on a
 * function of its own that begins with one of its forms; any other
 * instruction counts as stepped.
 */
enum probe_entry {
	PROBE_ENTRY_STEPPED, /* anything else: LEA, CMP, SUB, MOV, ENDBR64... */
	PROBE_ENTRY_PUSH,    /* PUSH of a register (50-57, 41 50-57) */
	PROBE_ENTRY_NOP,     /* other NOPs: 90, 66 90, 0f 1f /0 (calibrated on 90) */
	PROBE_ENTRY_NOP5,    /* the five-byte NOP (0f 1f 44 00 00) */
	PROBE_ENTRY_JUMP,    /* a relative JMP or Jcc (calibrated on a Jcc) */
	PROBE_ENTRY_CALL,    /* a direct CALL (e8 rel32) */
	PROBE_ENTRY__N,
};

_Static_assert(PROBE_ENTRY_STEPPED == (int)DISASM_PROBE_STEPPED &&
		       PROBE_ENTRY_PUSH == (int)DISASM_PROBE_PUSH &&
		       PROBE_ENTRY_NOP == (int)DISASM_PROBE_NOP &&
		       PROBE_ENTRY_NOP5 == (int)DISASM_PROBE_NOP5 &&
		       PROBE_ENTRY_JUMP == (int)DISASM_PROBE_JUMP &&
		       PROBE_ENTRY_CALL == (int)DISASM_PROBE_CALL &&
		       PROBE_ENTRY__N == (int)DISASM_PROBE__N,
	       "the kinds are the disassembler's");

/* The kind of the instruction at code (len bytes of a function's entry site,
 * of arch's code). */
enum probe_entry calibrate__entry_kind(enum disasm_arch arch, const uint8_t *code, size_t len);
const char *probe_entry__str(enum probe_entry e);
/* The kind probe_entry__str names; PROBE_ENTRY_STEPPED for NULL or any other text. */
enum probe_entry probe_entry__parse(const char *s);

struct calibration {
	/* over the rounds (12 to 24, 20 ms apart), the median of the lower
	 * half of each round's median measured duration of the empty function:
	 * what reported durations have taken out */
	uint64_t bias_ns;
	uint64_t bias_lo_ns, bias_hi_ns; /* the lowest and highest round's median */
	/* what one traced call adds to its thread's time (both traps and the
	 * BPF programs): the traced rounds' time per call less the untraced
	 * rounds' (each the median of the lower half); the overhead guard's
	 * unit of cost */
	uint64_t call_cost_ns;
	uint64_t calls; /* traced calls measured */
	/* the same two for a function entered at each kind of instruction
	 * (bias_ns and call_cost_ns are PROBE_ENTRY_STEPPED's) */
	uint64_t entry_bias_ns[PROBE_ENTRY__N], entry_cost_ns[PROBE_ENTRY__N];
	/* what a call of a function probed at its entry alone costs (one trap,
	 * one program): measured on one entered at a LEA; for the other kinds,
	 * their call cost less the RET's share that measurement shows */
	uint64_t entry_only_cost_ns, entry_only_ns[PROBE_ENTRY__N];
	/* the bias and the call cost of a function entered at a PUSH whose
	 * calls end at the kernel's return trampoline (tracer_opts.trampoline);
	 * 0: not measured (not used) */
	uint64_t trampoline_bias_ns, trampoline_cost_ns;
};

/*
 * A figure of a function entered at kind e (at) for one whose calls end at
 * the trampoline: at with the RET's share of it replaced by the
 * trampoline's, the difference both make on a function entered at a PUSH
 * (push: with RET probes, tramp: with the trampoline). The two traps' shares
 * add up. at itself where the trampoline was not measured.
 */
static inline uint64_t calibrate__to_trampoline(uint64_t at, uint64_t push, uint64_t tramp)
{
	int64_t v = (int64_t)at - (int64_t)push + (int64_t)tramp;

	return !tramp || !push ? at : v > 0 ? (uint64_t)v : 0;
}

/*
 * A figure measured per kind of entry (by_entry, stepped's where a kind has
 * none) for a function entered at kind e, whose calls end at its RETs or at
 * the return trampoline (tramp: the figure at a PUSH with the trampoline).
 */
static inline uint64_t calibrate__figure(const uint64_t *by_entry, uint64_t stepped, uint64_t tramp,
					 enum probe_entry e, bool trampoline)
{
	uint64_t v = e < PROBE_ENTRY__N && by_entry[e] ? by_entry[e] : stepped;

	return trampoline ? calibrate__to_trampoline(v, by_entry[PROBE_ENTRY_PUSH], tramp) : v;
}

/* The bias and the call cost of a function entered at kind e, ending at its RETs or not. */
static inline uint64_t calibrate__bias(const struct calibration *cal, enum probe_entry e,
				       bool trampoline)
{
	return calibrate__figure(cal->entry_bias_ns, cal->bias_ns, cal->trampoline_bias_ns, e,
				 trampoline);
}

static inline uint64_t calibrate__cost(const struct calibration *cal, enum probe_entry e,
				       bool trampoline)
{
	return calibrate__figure(cal->entry_cost_ns, cal->call_cost_ns, cal->trampoline_cost_ns, e,
				 trampoline);
}

/* The call cost of a function entered at kind e and probed at its entry alone. */
static inline uint64_t calibrate__entry_only_cost(const struct calibration *cal, enum probe_entry e)
{
	return e < PROBE_ENTRY__N && cal->entry_only_ns[e] ? cal->entry_only_ns[e]
							   : calibrate__cost(cal, e, false);
}

/*
 * The kinds (a bit per enum probe_entry) this kernel was measured to emulate
 * in the trap: a function entered at one has at most three quarters of the
 * bias of one entered at a stepped instruction (one trap, not two; both pay
 * the programs, so more than half: arm64's 6.1 under TCG measured 0.53,
 * where a stepped kind measures about 1). 0 when cal holds nothing. What
 * tracer__set_site_kinds takes.
 */
uint32_t calibrate__emulated(const struct calibration *cal);

/*
 * Calibrates with tracer t (probes attached for the run, removed after),
 * in half a second to a second (fewer rounds where the figures settle).
 * 0, or -errno with a message (then ret is all zeros: nothing is taken out).
 */
int calibrate__run(struct tracer *t, struct calibration *ret, struct rw_error *err);

/*
 * Whether n figures of a calibration (ns) are those measured a few rounds
 * before, nearly: each within 50 ns plus 1/32 of the larger. A calibration
 * ends early, after 12 of its 24 rounds at least, once they are.
 */
bool calibrate__settled(const uint64_t *now, const uint64_t *then, size_t n);

/*
 * The same a round at a time, for a loop that must not stop for half a
 * second: start attaches the probes (and times the untraced rounds); each
 * step times one traced round, a few milliseconds, and returns 0 while
 * rounds remain, 1 when *ret holds the result, or -errno with a message.
 * Rounds should be tens of milliseconds apart. free removes the probes.
 */
struct calibrator;
int calibrator__start(struct tracer *t, struct calibrator **ret, struct rw_error *err);
int calibrator__step(struct calibrator *c, struct calibration *ret, struct rw_error *err);
void calibrator__free(struct calibrator *c);

/*
 * Reads an overhead budget: a percentage of one CPU ("2%", "0.5%") or a
 * fraction of one ("0.02"); "0" disables. 0, or -EINVAL (negative, over
 * 100%, not a number).
 */
int calibrate__parse_overhead(const char *s, double *ret);
#define CALIBRATE_DEFAULT_MAX_OVERHEAD 0.02

#endif

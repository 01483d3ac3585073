// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trace/calibrate.h"
#include "base/clock.h"
#include "base/latency.h"

#define ROUNDS 24
#define ROUND_CALLS 400
/*
 * A calibration ends before ROUNDS once its figures have settled: after at
 * least MIN_ROUNDS, when every figure computed over the rounds so far is
 * within SETTLED_NS plus 1/SETTLED_PART of what it was SETTLE_LAG rounds
 * earlier. On a calm machine the rounds agree and it stops at MIN_ROUNDS;
 * under load they do not, and it takes all of them.
 */
#define MIN_ROUNDS 12
#define SETTLE_LAG 4
#define SETTLED_NS 50
#define SETTLED_PART 32
/* Rounds are spread out in time, so that a burst of load on the machine
 * (another process, an interrupt storm) slows a few of them, not all. */
#define ROUND_GAP_NS (20 * 1000 * 1000)

/*
 * What is probed: one function entered at an instruction every kernel steps
 * out of line, and the same entered at each kind an entry probe may sit on,
 * then one probed at its entry only. Written in assembly: compiled, a
 * sanitizer's overflow check would give the first a branch its entry probe
 * would move to (entrysite.h).
 */
int retwatch_calibrate_target(int x);
int retwatch_calibrate_push(int x);
int retwatch_calibrate_nop(int x);
int retwatch_calibrate_nop5(int x);
int retwatch_calibrate_jump(int x);
int retwatch_calibrate_call(int x);
int retwatch_calibrate_entry_only(int x);
int retwatch_calibrate_leaf(int x);
#if defined(__x86_64__)
/*
 * Entered at a LEA (stepped), a PUSH, a NOP, a five-byte NOP, a Jcc and a
 * CALL (of a function that only returns, not probed). Each holds a CALL
 * after its RET, never run: a function that calls is one whose calls end
 * at probes on its RETs (binary__trampoline_refusal), the kind these
 * calibrate; retwatch_calibrate_leaf, which calls nothing, ends at the
 * kernel's return trampoline where the tracer uses it.
 */
#define CALL_TARGET(fn, x) (fn)(x)
__asm__(".text\n"
	".globl retwatch_calibrate_leaf\n"
	".type retwatch_calibrate_leaf, @function\n"
	"retwatch_calibrate_leaf:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea 1(%rdi), %eax\n"
	"	pop %rbp\n"
	"	ret\n"
	".size retwatch_calibrate_leaf, . - retwatch_calibrate_leaf\n"
	".globl retwatch_calibrate_target\n"
	".type retwatch_calibrate_target, @function\n"
	"retwatch_calibrate_target:\n"
	"	lea 1(%rdi), %eax\n"
	"	ret\n"
	"	call retwatch_calibrate_callee\n"
	".size retwatch_calibrate_target, . - retwatch_calibrate_target\n"
	".globl retwatch_calibrate_push\n"
	".type retwatch_calibrate_push, @function\n"
	"retwatch_calibrate_push:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea 1(%rdi), %eax\n"
	"	pop %rbp\n"
	"	ret\n"
	"	call retwatch_calibrate_callee\n"
	".size retwatch_calibrate_push, . - retwatch_calibrate_push\n"
	".globl retwatch_calibrate_nop\n"
	".type retwatch_calibrate_nop, @function\n"
	"retwatch_calibrate_nop:\n"
	"	.byte 0x90\n"
	"	lea 1(%rdi), %eax\n"
	"	ret\n"
	"	call retwatch_calibrate_callee\n"
	".size retwatch_calibrate_nop, . - retwatch_calibrate_nop\n"
	".globl retwatch_calibrate_nop5\n"
	".type retwatch_calibrate_nop5, @function\n"
	"retwatch_calibrate_nop5:\n"
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"	lea 1(%rdi), %eax\n"
	"	ret\n"
	"	call retwatch_calibrate_callee\n"
	".size retwatch_calibrate_nop5, . - retwatch_calibrate_nop5\n"
	/* either way to the next instruction, whatever the flags */
	".globl retwatch_calibrate_jump\n"
	".type retwatch_calibrate_jump, @function\n"
	"retwatch_calibrate_jump:\n"
	"	js 1f\n"
	"1:	lea 1(%rdi), %eax\n"
	"	ret\n"
	"	call retwatch_calibrate_callee\n"
	".size retwatch_calibrate_jump, . - retwatch_calibrate_jump\n"
	/* its callee is a function of its own: a RET inside its range would
	 * be one of its return sites */
	".globl retwatch_calibrate_call\n"
	".type retwatch_calibrate_call, @function\n"
	"retwatch_calibrate_call:\n"
	"	call retwatch_calibrate_callee\n"
	"	lea 1(%rdi), %eax\n"
	"	ret\n"
	".size retwatch_calibrate_call, . - retwatch_calibrate_call\n"
	".type retwatch_calibrate_callee, @function\n"
	"retwatch_calibrate_callee:\n"
	"	ret\n"
	".size retwatch_calibrate_callee, . - retwatch_calibrate_callee\n"
	/* no RET: it leaves by an indirect jump to its return address, so it is
	 * probed at its entry only (entered at a LEA, as the first) */
	".globl retwatch_calibrate_entry_only\n"
	".type retwatch_calibrate_entry_only, @function\n"
	"retwatch_calibrate_entry_only:\n"
	"	lea 1(%rdi), %eax\n"
	"	pop %rcx\n"
	"	jmp *%rcx\n"
	".size retwatch_calibrate_entry_only, . - retwatch_calibrate_entry_only\n");

#elif defined(__aarch64__)
/*
 * Entered at an ADD (stepped), the frame's STP (the kind named push), a NOP,
 * a BTI landing pad (the kind named nop5: a hint, as x86's long NOPs are),
 * a B.cond and a BL. A BL as the first instruction overwrites the return
 * address in X30, so every target is called through
 * retwatch_calibrate_invoke, which hands it its return address in X9.
 */
int retwatch_calibrate_invoke(int (*fn)(int), int x);
#define CALL_TARGET(fn, x) retwatch_calibrate_invoke((fn), (x))
__asm__(".text\n"
	".globl retwatch_calibrate_invoke\n"
	".type retwatch_calibrate_invoke, %function\n"
	"retwatch_calibrate_invoke:\n"
	"	stp x29, x30, [sp, #-16]!\n"
	"	mov x29, sp\n"
	"	mov x16, x0\n"
	"	mov w0, w1\n"
	"	adr x9, 1f\n"
	"	br x16\n"
	"1:	ldp x29, x30, [sp], #16\n"
	"	ret\n"
	".size retwatch_calibrate_invoke, . - retwatch_calibrate_invoke\n"
	".globl retwatch_calibrate_target\n"
	".type retwatch_calibrate_target, %function\n"
	"retwatch_calibrate_target:\n"
	"	add w0, w0, #1\n"
	"	ret x9\n"
	".size retwatch_calibrate_target, . - retwatch_calibrate_target\n"
	/* the same: arm64 calls never end at the return trampoline */
	".globl retwatch_calibrate_leaf\n"
	".type retwatch_calibrate_leaf, %function\n"
	"retwatch_calibrate_leaf:\n"
	"	add w0, w0, #1\n"
	"	ret x9\n"
	".size retwatch_calibrate_leaf, . - retwatch_calibrate_leaf\n"
	".globl retwatch_calibrate_push\n"
	".type retwatch_calibrate_push, %function\n"
	"retwatch_calibrate_push:\n"
	"	stp x29, x30, [sp, #-16]!\n"
	"	mov x29, sp\n"
	"	add w0, w0, #1\n"
	"	ldp x29, x30, [sp], #16\n"
	"	ret x9\n"
	".size retwatch_calibrate_push, . - retwatch_calibrate_push\n"
	".globl retwatch_calibrate_nop\n"
	".type retwatch_calibrate_nop, %function\n"
	"retwatch_calibrate_nop:\n"
	"	nop\n"
	"	add w0, w0, #1\n"
	"	ret x9\n"
	".size retwatch_calibrate_nop, . - retwatch_calibrate_nop\n"
	".globl retwatch_calibrate_nop5\n"
	".type retwatch_calibrate_nop5, %function\n"
	"retwatch_calibrate_nop5:\n"
	"	hint #34\n" /* bti c */
	"	add w0, w0, #1\n"
	"	ret x9\n"
	".size retwatch_calibrate_nop5, . - retwatch_calibrate_nop5\n"
	/* either way to the next instruction, whatever the flags */
	".globl retwatch_calibrate_jump\n"
	".type retwatch_calibrate_jump, %function\n"
	"retwatch_calibrate_jump:\n"
	"	b.mi 1f\n"
	"1:	add w0, w0, #1\n"
	"	ret x9\n"
	".size retwatch_calibrate_jump, . - retwatch_calibrate_jump\n"
	".globl retwatch_calibrate_call\n"
	".type retwatch_calibrate_call, %function\n"
	"retwatch_calibrate_call:\n"
	"	bl retwatch_calibrate_callee\n"
	"	add w0, w0, #1\n"
	"	ret x9\n"
	".size retwatch_calibrate_call, . - retwatch_calibrate_call\n"
	".type retwatch_calibrate_callee, %function\n"
	"retwatch_calibrate_callee:\n"
	"	ret\n"
	".size retwatch_calibrate_callee, . - retwatch_calibrate_callee\n"
	/* no RET: it leaves by a jump through a register to its return address */
	".globl retwatch_calibrate_entry_only\n"
	".type retwatch_calibrate_entry_only, %function\n"
	"retwatch_calibrate_entry_only:\n"
	"	add w0, w0, #1\n"
	"	br x9\n"
	".size retwatch_calibrate_entry_only, . - retwatch_calibrate_entry_only\n");
#else
#error "calibrate.c has its targets for x86-64 and AArch64"
#endif

/*
 * The targets: one per kind of entry, then one probed at its entry only,
 * then one entered at a PUSH whose calls may end at the trampoline (an
 * emulated entry: a stepped one's figures vary by more than the two
 * ways of ending differ).
 */
#define CAL_ENTRY_ONLY PROBE_ENTRY__N
#define CAL_LEAF (PROBE_ENTRY__N + 1)
#define CAL_TARGETS (PROBE_ENTRY__N + 2)

static int (*const targets[CAL_TARGETS])(int) = {
	[PROBE_ENTRY_STEPPED] = retwatch_calibrate_target,
	[PROBE_ENTRY_PUSH] = retwatch_calibrate_push,
	[PROBE_ENTRY_NOP] = retwatch_calibrate_nop,
	[PROBE_ENTRY_NOP5] = retwatch_calibrate_nop5,
	[PROBE_ENTRY_JUMP] = retwatch_calibrate_jump,
	[PROBE_ENTRY_CALL] = retwatch_calibrate_call,
	[CAL_ENTRY_ONLY] = retwatch_calibrate_entry_only,
	[CAL_LEAF] = retwatch_calibrate_leaf,
};
static const char *const target_names[CAL_TARGETS] = {
	[PROBE_ENTRY_STEPPED] = "retwatch_calibrate_target",
	[PROBE_ENTRY_PUSH] = "retwatch_calibrate_push",
	[PROBE_ENTRY_NOP] = "retwatch_calibrate_nop",
	[PROBE_ENTRY_NOP5] = "retwatch_calibrate_nop5",
	[PROBE_ENTRY_JUMP] = "retwatch_calibrate_jump",
	[PROBE_ENTRY_CALL] = "retwatch_calibrate_call",
	[CAL_ENTRY_ONLY] = "retwatch_calibrate_entry_only",
	[CAL_LEAF] = "retwatch_calibrate_leaf",
};

enum probe_entry calibrate__entry_kind(enum disasm_arch arch, const uint8_t *code, size_t len)
{
	return (enum probe_entry)disasm__probe_kind_of(arch, code, len);
}

enum probe_entry probe_entry__parse(const char *s)
{
	for (int k = 0; s && k < PROBE_ENTRY__N; k++)
		if (!strcmp(s, probe_entry__str(k)))
			return k;
	return PROBE_ENTRY_STEPPED;
}

const char *probe_entry__str(enum probe_entry e)
{
	switch (e) {
	case PROBE_ENTRY_PUSH: return "push";
	case PROBE_ENTRY_NOP: return "nop";
	case PROBE_ENTRY_NOP5: return "nop5";
	case PROBE_ENTRY_JUMP: return "jump";
	case PROBE_ENTRY_CALL: return "call";
	default: return "stepped";
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The median of the lower half: load only ever makes a round slower, so the
 * rounds a burst slowed are left out, while the statistic stays a middle
 * one of the calm rounds rather than their luckiest.
 */
static uint64_t lower_median(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 4];
}

/* lower_median of the first n values of v, v left as it is. */
static uint64_t lower_median_of(const uint64_t *v, size_t n)
{
	uint64_t copy[ROUNDS];

	memcpy(copy, v, n * sizeof(*v));
	return lower_median(copy, n);
}

static void gap(void)
{
	struct timespec ts = { 0, ROUND_GAP_NS };

	nanosleep(&ts, NULL);
}

/* ns per call of a round of calls of target k. */
static uint64_t time_round(int k, int *sum)
{
	uint64_t t0 = clock__mono_ns();

	for (int i = 0; i < ROUND_CALLS; i++)
		*sum += CALL_TARGET(targets[k], i);
	return (clock__mono_ns() - t0) / ROUND_CALLS;
}

/* The index of target k's function in tt. */
static size_t target_func(const struct tracer_target *tt, int k)
{
	for (size_t i = 0; i < tracer_target__nfuncs(tt); i++)
		if (!strcmp(tracer_target__func(tt, i)->info->name, target_names[k]))
			return i;
	return SIZE_MAX;
}

/* A calibration in progress: the untraced rounds done, the traced ones a step at a time. */
struct calibrator {
	struct tracer *t;
	struct tracer_target *tt;
	size_t fn[CAL_TARGETS];
	uint64_t untraced[CAL_TARGETS][ROUNDS], traced[CAL_TARGETS][ROUNDS];
	uint64_t p50[CAL_TARGETS][ROUNDS]; /* CAL_ENTRY_ONLY's: 0 */
	struct latency prev[CAL_TARGETS];
	/* the figures over the rounds so far, after each round (settled) */
	uint64_t figures[ROUNDS][2 * CAL_TARGETS];
	uint64_t calls;
	int round, sum;
};

int calibrator__start(struct tracer *t, struct calibrator **ret, struct rw_error *err)
{
	struct calibrator *c = calloc(1, sizeof(*c));
	char exe[64];
	int e;

	*ret = NULL;
	if (!c)
		return rw_error_set(err, ENOMEM, "out of memory");
	c->t = t;
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < CAL_TARGETS; k++)
			c->untraced[k][r] = time_round(k, &c->sum);
	snprintf(exe, sizeof(exe), "/proc/%d/exe", getpid());
	c->tt = tracer__add(t, getpid(), exe, target_names, CAL_TARGETS, 0, err);
	if (!c->tt) {
		e = -(errno ? errno : EINVAL);
		goto fail;
	}
	for (int k = 0; k < CAL_TARGETS; k++) {
		c->fn[k] = target_func(c->tt, k);
		if (c->fn[k] == SIZE_MAX) {
			e = rw_error_set(err, ENOENT, "%s is not among the functions probed",
					 target_names[k]);
			goto fail;
		}
	}
	if (tracer_target__func(c->tt, c->fn[CAL_ENTRY_ONLY])->info->mode != FUNC_MODE_ENTRY_ONLY) {
		e = rw_error_set(err, EINVAL, "%s is not probed at its entry only",
				 target_names[CAL_ENTRY_ONLY]);
		goto fail;
	}
	*ret = c;
	return 0;
fail:
	calibrator__free(c);
	return e;
}

void calibrator__free(struct calibrator *c)
{
	if (!c)
		return;
	if (c->tt)
		tracer__remove(c->t, c->tt);
	free(c);
}

/* The calibration from the rounds done; 0, or -errno with a message. */
static int calibrator__result(struct calibrator *c, struct calibration *ret, struct rw_error *err)
{
	uint64_t ret_cost;

	int rounds = c->round;

	memset(ret, 0, sizeof(*ret));
	ret->calls = c->calls;
	if (c->calls < (uint64_t)CAL_TARGETS * rounds * ROUND_CALLS / 2)
		/* the kernel knows processes by their pid in the host's namespace */
		return rw_error_set(err, ENODATA,
				    "%ju of %d calls measured (in a PID namespace of its own, "
				    "the probes cannot see this process)",
				    (uintmax_t)c->calls, CAL_TARGETS * rounds * ROUND_CALLS);
	if (!c->sum)
		return rw_error_set(err, EINVAL, "the calibration's calls did not run");
	for (int k = 0; k < CAL_TARGETS; k++) {
		uint64_t cost = latency__less(lower_median(c->traced[k], rounds),
					      lower_median(c->untraced[k], ROUNDS));

		if (k == CAL_ENTRY_ONLY) {
			ret->entry_only_cost_ns = cost;
			continue;
		}
		if (k == CAL_LEAF)
			continue; /* below */
		ret->entry_bias_ns[k] = lower_median(c->p50[k], rounds);
		ret->entry_cost_ns[k] = cost;
	}
	ret->bias_ns = ret->entry_bias_ns[PROBE_ENTRY_STEPPED];
	/* sorted by lower_median: the lowest and the highest round */
	ret->bias_lo_ns = c->p50[PROBE_ENTRY_STEPPED][0];
	ret->bias_hi_ns = c->p50[PROBE_ENTRY_STEPPED][rounds - 1];
	ret->call_cost_ns = ret->entry_cost_ns[PROBE_ENTRY_STEPPED];
	/* the RET's share of a call's cost: the same (stepped) entry with and without it */
	ret_cost = latency__less(ret->call_cost_ns, ret->entry_only_cost_ns);
	for (int k = 0; k < PROBE_ENTRY__N; k++)
		ret->entry_only_ns[k] = k == PROBE_ENTRY_STEPPED
						? ret->entry_only_cost_ns
						: latency__less(ret->entry_cost_ns[k], ret_cost);
	/* the leaf is the PUSH target but for the way its calls end */
	if (tracer_target__func(c->tt, c->fn[CAL_LEAF])->trampoline) {
		ret->trampoline_bias_ns = lower_median(c->p50[CAL_LEAF], rounds);
		ret->trampoline_cost_ns = latency__less(
			lower_median(c->traced[CAL_LEAF], rounds),
			lower_median(c->untraced[CAL_LEAF], ROUNDS));
	}
	return 0;
}

bool calibrate__settled(const uint64_t *now, const uint64_t *then, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t hi = now[i] > then[i] ? now[i] : then[i];
		uint64_t lo = now[i] > then[i] ? then[i] : now[i];

		if (hi - lo > SETTLED_NS + hi / SETTLED_PART)
			return false;
	}
	return true;
}

/*
 * Whether the figures over the rounds so far (each target's traced time per
 * call, each kind's bias) are those of SETTLE_LAG rounds before, nearly:
 * more rounds would not change the calibration.
 */
static bool settled(struct calibrator *c)
{
	uint64_t *now = c->figures[c->round - 1], *then;

	for (int k = 0; k < CAL_TARGETS; k++)
		now[k] = lower_median_of(c->traced[k], c->round);
	for (int k = 0; k < CAL_TARGETS; k++)
		now[CAL_TARGETS + k] = lower_median_of(c->p50[k], c->round);
	if (c->round < MIN_ROUNDS)
		return false;
	then = c->figures[c->round - 1 - SETTLE_LAG];
	return calibrate__settled(now, then, 2 * CAL_TARGETS);
}

int calibrator__step(struct calibrator *c, struct calibration *ret, struct rw_error *err)
{
	int e;

	for (int k = 0; k < CAL_TARGETS; k++) {
		struct latency now, round;

		c->traced[k][c->round] = time_round(k, &c->sum);
		e = tracer_target__read(c->t, c->tt, c->fn[k], &now);
		if (e)
			return rw_error_set(err, -e, "failed to read the calibration histogram: %s",
					    strerror(-e));
		c->calls += latency__count(&now) - latency__count(&c->prev[k]);
		if (k != CAL_ENTRY_ONLY) {
			/* this round's calls alone */
			round = now;
			latency__subtract(&round, &c->prev[k]);
			round.min_ns = round.max_ns = 0; /* the cumulative ones would clamp */
			c->p50[k][c->round] = latency__percentile(&round, 0.5);
		}
		c->prev[k] = now;
	}
	c->round++;
	if (!settled(c) && c->round < ROUNDS)
		return 0;
	e = calibrator__result(c, ret, err);
	return e ? e : 1;
}

int calibrate__run(struct tracer *t, struct calibration *ret, struct rw_error *err)
{
	struct calibrator *c;
	int e;

	memset(ret, 0, sizeof(*ret));
	e = calibrator__start(t, &c, err);
	if (e)
		return e;
	while (!(e = calibrator__step(c, ret, err)))
		gap();
	calibrator__free(c);
	if (e < 0) {
		memset(ret, 0, sizeof(*ret));
		return e;
	}
	return 0;
}

int calibrate__parse_overhead(const char *s, double *ret)
{
	char *end;
	double v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v >= 0))
		return -EINVAL;
	if (*end == '%') {
		v /= 100;
		end++;
	}
	if (*end || v > 1)
		return -EINVAL;
	*ret = v;
	return 0;
}

uint32_t calibrate__emulated(const struct calibration *cal)
{
	uint32_t kinds = 0;

	for (int k = 0; k < PROBE_ENTRY__N; k++)
		if (k != PROBE_ENTRY_STEPPED && cal->bias_ns && cal->entry_bias_ns[k] &&
		    cal->entry_bias_ns[k] * 4 <= cal->bias_ns * 3)
			kinds |= 1U << k;
	return kinds;
}

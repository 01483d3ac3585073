// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calibrate.h"
#include "clock.h"
#include "latency.h"

#define ROUNDS 24
#define ROUND_CALLS 400
/* Rounds are spread out in time, so that a burst of load on the machine
 * (another process, an interrupt storm) slows a few of them, not all. */
#define ROUND_GAP_NS (20 * 1000 * 1000)

/* What is probed: kept out of line and alive by `used`. Its entry is a LEA. */
__attribute__((noinline, used)) int retwatch_calibrate_target(int x)
{
	/* the compiler may not fold the calls away */
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

/* The same function entered at a PUSH, at a NOP and at a five-byte NOP. */
int retwatch_calibrate_push(int x);
int retwatch_calibrate_nop(int x);
int retwatch_calibrate_nop5(int x);
__asm__(".text\n"
	".globl retwatch_calibrate_push\n"
	".type retwatch_calibrate_push, @function\n"
	"retwatch_calibrate_push:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea 1(%rdi), %eax\n"
	"	pop %rbp\n"
	"	ret\n"
	".size retwatch_calibrate_push, . - retwatch_calibrate_push\n"
	".globl retwatch_calibrate_nop\n"
	".type retwatch_calibrate_nop, @function\n"
	"retwatch_calibrate_nop:\n"
	"	.byte 0x90\n"
	"	lea 1(%rdi), %eax\n"
	"	ret\n"
	".size retwatch_calibrate_nop, . - retwatch_calibrate_nop\n"
	".globl retwatch_calibrate_nop5\n"
	".type retwatch_calibrate_nop5, @function\n"
	"retwatch_calibrate_nop5:\n"
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"	lea 1(%rdi), %eax\n"
	"	ret\n"
	".size retwatch_calibrate_nop5, . - retwatch_calibrate_nop5\n");

static int (*const targets[PROBE_ENTRY__N])(int) = {
	[PROBE_ENTRY_STEPPED] = retwatch_calibrate_target,
	[PROBE_ENTRY_PUSH] = retwatch_calibrate_push,
	[PROBE_ENTRY_NOP] = retwatch_calibrate_nop,
	[PROBE_ENTRY_NOP5] = retwatch_calibrate_nop5,
};
static const char *const target_names[PROBE_ENTRY__N] = {
	[PROBE_ENTRY_STEPPED] = "retwatch_calibrate_target",
	[PROBE_ENTRY_PUSH] = "retwatch_calibrate_push",
	[PROBE_ENTRY_NOP] = "retwatch_calibrate_nop",
	[PROBE_ENTRY_NOP5] = "retwatch_calibrate_nop5",
};

enum probe_entry calibrate__entry_kind(const uint8_t *code, size_t len)
{
	static const uint8_t nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

	size_t i = len >= 1 && code[0] == 0x66; /* operand size */

	if (len >= sizeof(nop5) && !memcmp(code, nop5, sizeof(nop5)))
		return PROBE_ENTRY_NOP5;
	if (i < len && code[i] == 0x90)
		return PROBE_ENTRY_NOP;
	if (i + 2 < len && code[i] == 0x0f && code[i + 1] == 0x1f && !(code[i + 2] & 0x38))
		return PROBE_ENTRY_NOP;
	if (len >= 1 && code[0] >= 0x50 && code[0] <= 0x57)
		return PROBE_ENTRY_PUSH;
	if (len >= 2 && code[0] == 0x41 && code[1] >= 0x50 && code[1] <= 0x57)
		return PROBE_ENTRY_PUSH;
	return PROBE_ENTRY_STEPPED;
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
		*sum += targets[k](i);
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

int calibrate__run(struct tracer *t, struct calibration *ret, struct rw_error *err)
{
	uint64_t untraced[PROBE_ENTRY__N][ROUNDS], traced[PROBE_ENTRY__N][ROUNDS];
	uint64_t p50[PROBE_ENTRY__N][ROUNDS];
	struct latency prev[PROBE_ENTRY__N] = { 0 }, now;
	size_t fn[PROBE_ENTRY__N];
	struct tracer_target *tt;
	char exe[64];
	int sum = 0, e = 0;

	memset(ret, 0, sizeof(*ret));
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < PROBE_ENTRY__N; k++)
			untraced[k][r] = time_round(k, &sum);
	snprintf(exe, sizeof(exe), "/proc/%d/exe", getpid());
	tt = tracer__add(t, getpid(), exe, target_names, PROBE_ENTRY__N, 0, err);
	if (!tt)
		return -errno;
	for (int k = 0; k < PROBE_ENTRY__N; k++) {
		fn[k] = target_func(tt, k);
		if (fn[k] == SIZE_MAX) {
			e = rw_error_set(err, ENOENT, "%s is not among the functions probed",
					 target_names[k]);
			goto out;
		}
	}
	for (int r = 0; r < ROUNDS; r++) {
		if (r)
			gap();
		for (int k = 0; k < PROBE_ENTRY__N; k++) {
			struct latency round;

			traced[k][r] = time_round(k, &sum);
			e = tracer_target__read(t, tt, fn[k], &now);
			if (e) {
				rw_error_set(err, -e,
					     "failed to read the calibration histogram: %s",
					     strerror(-e));
				goto out;
			}
			ret->calls += latency__count(&now) - latency__count(&prev[k]);
			/* this round's calls alone */
			round = now;
			latency__subtract(&round, &prev[k]);
			round.min_ns = round.max_ns = 0; /* the cumulative ones would clamp */
			p50[k][r] = latency__percentile(&round, 0.5);
			prev[k] = now;
		}
	}
	if (ret->calls < PROBE_ENTRY__N * ROUNDS * ROUND_CALLS / 2) {
		/* the kernel knows processes by their pid in the host's namespace */
		e = rw_error_set(err, ENODATA,
				 "%ju of %d calls measured (in a PID namespace of its own, "
				 "the probes cannot see this process)",
				 (uintmax_t)ret->calls, PROBE_ENTRY__N * ROUNDS * ROUND_CALLS);
		goto out;
	}
	for (int k = 0; k < PROBE_ENTRY__N; k++) {
		ret->entry_bias_ns[k] = lower_median(p50[k], ROUNDS);
		ret->entry_cost_ns[k] = calibrate__less(lower_median(traced[k], ROUNDS),
							lower_median(untraced[k], ROUNDS));
	}
	ret->bias_ns = ret->entry_bias_ns[PROBE_ENTRY_STEPPED];
	/* sorted by lower_median: the lowest and the highest round */
	ret->bias_lo_ns = p50[PROBE_ENTRY_STEPPED][0];
	ret->bias_hi_ns = p50[PROBE_ENTRY_STEPPED][ROUNDS - 1];
	ret->call_cost_ns = ret->entry_cost_ns[PROBE_ENTRY_STEPPED];
out:
	tracer__remove(t, tt);
	if (e || !sum) {
		memset(ret, 0, sizeof(*ret));
		return e ? e : -EINVAL;
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

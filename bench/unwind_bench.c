// SPDX-License-Identifier: MIT
/*
 * Time to unwind and symbolize one slow call's stack copy, as retwatch does
 * for each event of native code: this program copies the top of its own
 * stack five calls deep (built with -O2 -fomit-frame-pointer), then times
 * symbolizer__unwind plus symbolizer__resolve of every frame, cold (a new
 * symbolizer: the process's maps read, its files, unwind tables and debug
 * files opened, as for the first event of a process) and warm (the same
 * symbolizer again, as for later events). Prints figures.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "trace/symbolize.h"

#define COPY 16384

static struct unwind_regs regs;
static uint8_t stack[COPY];
static size_t stack_len;

static size_t stack_left(uint64_t sp)
{
	pthread_attr_t a;
	size_t size, left = 0;
	void *lo;

	if (!pthread_getattr_np(pthread_self(), &a)) {
		if (!pthread_attr_getstack(&a, &lo, &size))
			left = (uintptr_t)lo + size - sp;
		pthread_attr_destroy(&a);
	}
	return left < COPY ? left : COPY;
}

__attribute__((noinline)) void bench_capture(void);
__attribute__((noinline)) void bench_capture(void)
{
	__asm__ volatile("lea 0(%%rip), %%rax\n\t"
			 "mov %%rax, 0(%[r])\n\t"
			 "mov %%rsp, 8(%[r])\n\t"
			 "mov %%rbp, 16(%[r])\n\t"
			 "mov %%rbx, 24(%[r])\n\t"
			 "mov %%r12, 32(%[r])\n\t"
			 "mov %%r13, 40(%[r])\n\t"
			 "mov %%r14, 48(%[r])\n\t"
			 "mov %%r15, 56(%[r])\n\t"
			 :
			 : [r] "r"(&regs)
			 : "rax", "memory");
	stack_len = stack_left(regs.sp);
	memcpy(stack, (const void *)regs.sp, stack_len);
}

#define LEVEL(name, next)                           \
	__attribute__((noinline)) void name(int x); \
	__attribute__((noinline)) void name(int x)  \
	{                                           \
		volatile int keep = x * 3;          \
		next(keep + 1);                     \
		__asm__ volatile("" ::: "memory");  \
	}
static void capture_int(int x)
{
	(void)x;
	bench_capture();
}
LEVEL(bench_d, capture_int)
LEVEL(bench_c, bench_d)
LEVEL(bench_b, bench_c)
LEVEL(bench_a, bench_b)

/* One event: unwind, then name every frame. Returns the frames. */
static size_t one(struct symbolizer *s, int print)
{
	uint64_t pcs[UNWIND_MAX_FRAMES];
	char frame[512];
	size_t n = symbolizer__unwind(s, getpid(), &regs, stack, stack_len, regs.sp, pcs,
				      UNWIND_MAX_FRAMES);

	for (size_t i = 0; i < n; i++) {
		symbolizer__resolve(s, getpid(), pcs[i], i == 0, frame, sizeof(frame));
		if (print)
			printf("    %s\n", frame);
	}
	return n;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int cold = argc > 1 ? atoi(argv[1]) : 50, warm = argc > 2 ? atoi(argv[2]) : 5000;
	uint64_t *t = calloc(cold, sizeof(*t)), start;
	struct symbolizer *s;
	size_t n = 0;

	bench_a(1);
	printf("stack copy: %zu bytes; frames:\n", stack_len);
	s = symbolizer__new(NULL);
	one(s, 1);
	symbolizer__free(s);
	for (int i = 0; i < cold; i++) {
		start = clock__mono_ns();
		s = symbolizer__new(NULL);
		n = one(s, 0);
		symbolizer__free(s);
		t[i] = clock__mono_ns() - start;
	}
	qsort(t, cold, sizeof(*t), cmp);
	printf("cold (first event of a process: maps, files, tables, debug files): median %.1f us, "
	       "min %.1f us over %d (%zu frames)\n",
	       t[cold / 2] / 1e3, t[0] / 1e3, cold, n);
	s = symbolizer__new(NULL);
	one(s, 0);
	start = clock__mono_ns();
	for (int i = 0; i < warm; i++)
		n = one(s, 0);
	printf("warm (later events): %.2f us per event over %d (%zu frames)\n",
	       (clock__mono_ns() - start) / 1e3 / warm, warm, n);
	symbolizer__free(s);
	free(t);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * workload_c: the C twin of bench/workload (same protocol): calls one small
 * function in a loop and prints how long a call takes, one measured round
 * per line read on stdin. Built with -fcf-protection=full, so the_framed
 * begins with endbr64 and then pushes: its entry probe goes on the PUSH;
 * the_subframe begins with endbr64 and makes its frame with SUB RSP, then
 * stores into it before its first branch: its entry probe goes on that
 * branch, 24 bytes below the entry's stack pointer.
 *
 * usage: workload_c [-n CALLS] [-f the_framed|the_subframe]
 * output: "pid PID", then for each input line "round CALLS NS_PER_CALL"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noipa)) static long leaf(long i)
{
	__asm__ volatile("" : "+r"(i));
	return i * 3;
}

/* i outlives the call: kept in a register the function saves first (a PUSH) */
__attribute__((noinline, used)) long the_framed(long i)
{
	long r = leaf(i);

	if (i & 1)
		return r ^ i;
	return r + i;
}

struct pair {
	long a, b;
};

__attribute__((noipa)) static void touch(struct pair *p)
{
	p->a += p->b;
}

/* p lives in a frame made by SUB RSP; odd calls pass it on */
__attribute__((noinline, used)) long the_subframe(long i)
{
	struct pair p = { 0, i };

	if (i & 1)
		touch(&p);
	return p.a + 1;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long (*fn)(long) = the_framed;
	long n = 200000;
	char line[64];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-n"))
			n = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-f") && !strcmp(argv[i + 1], "the_subframe"))
			fn = the_subframe;
	}
	printf("pid %d\n", getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		double t0 = now_ns();
		long s = 0;

		for (long i = 0; i < n; i++)
			s += fn(i);
		sink += s;
		printf("round %ld %.1f\n", n, (now_ns() - t0) / (double)n);
		fflush(stdout);
	}
	return 0;
}

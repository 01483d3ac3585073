// SPDX-License-Identifier: MIT
/*
 * workload_c: the C twin of bench/workload (same protocol): calls one small
 * function in a loop and prints how long a call takes, one measured round
 * per line read on stdin. Built with -fcf-protection=full, so the_framed
 * begins with endbr64 and then pushes: its entry probe goes on the PUSH.
 *
 * usage: workload_c [-n CALLS]
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

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = 200000;
	char line[64];

	for (int i = 1; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "-n"))
			n = atol(argv[i + 1]);
	printf("pid %d\n", getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		double t0 = now_ns();
		long s = 0;

		for (long i = 0; i < n; i++)
			s += the_framed(i);
		sink += s;
		printf("round %ld %.1f\n", n, (now_ns() - t0) / (double)n);
		fflush(stdout);
	}
	return 0;
}

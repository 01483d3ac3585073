// SPDX-License-Identifier: MIT
/*
 * The workload of bench/return_bench.py: two C leaves (they call nothing),
 * framed_leaf, which pushes a frame pointer first (its entry probe's PUSH
 * is emulated in the trap), and bare_leaf, whose first instruction is a MOV
 * (stepped out of line). Written in assembly, so the compiler's choices
 * do not change what is measured.
 *
 * usage: leaves [-n CALLS]
 * output: "pid PID", then for each input line naming a function ("framed"
 * or "bare"), "round NAME CALLS NS_PER_CALL SUM"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

long framed_leaf(long i);
long bare_leaf(long i);
__asm__(".text\n"
	".globl framed_leaf\n"
	".type framed_leaf, @function\n"
	"framed_leaf:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea 1(%rdi, %rdi, 2), %rax\n"
	"	pop %rbp\n"
	"	ret\n"
	".size framed_leaf, . - framed_leaf\n"
	".globl bare_leaf\n"
	".type bare_leaf, @function\n"
	"bare_leaf:\n"
	"	mov %rdi, %rax\n"
	"	xor $5, %rax\n"
	"	ret\n"
	".size bare_leaf, . - bare_leaf\n");

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 2 && !strcmp(argv[1], "-n") ? atol(argv[2]) : 100000;
	char line[64];

	printf("pid %d\n", getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		long (*fn)(long) = strncmp(line, "bare", 4) ? framed_leaf : bare_leaf;
		long sum = 0;
		double t0 = now_ns();

		for (long i = 0; i < n; i++)
			sum += fn(i);
		printf("round %s %ld %.1f %ld\n", fn == bare_leaf ? "bare" : "framed", n,
		       (now_ns() - t0) / n, sum);
		fflush(stdout);
	}
	return 0;
}

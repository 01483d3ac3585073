// SPDX-License-Identifier: MIT
/*
 * The workload of bench/follow_bench.py: calls hit(), a two-instruction
 * function, N times per line read on stdin, itself ("self") or in a child
 * it forks and waits for ("child"), then prints "done".
 *
 * usage: forkcost [N]       output: "ready PID", then "done" per line
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noinline)) long hit(long i)
{
	__asm__ volatile("" : "+r"(i));
	return i * 3;
}

static void calls(long n)
{
	for (long i = 0; i < n; i++)
		sink += hit(i);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	char line[32];

	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "child", 5)) {
			pid_t c = fork();

			if (!c) {
				calls(n);
				_exit(0);
			}
			waitpid(c, NULL, 0);
		} else {
			calls(n);
		}
		printf("done\n");
		fflush(stdout);
	}
	return 0;
}

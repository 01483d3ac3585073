/* SPDX-License-Identifier: MIT */
/*
 * The pause image's program, built here so that no image is pulled: the
 * first process of every pod sandbox, holding its namespaces. It waits for
 * signals, reaps the children a shared PID namespace would hand it, and exits
 * 0 on SIGTERM or SIGINT (as PID 1 it gets no default action for them).
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void on_child(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	signal(SIGCHLD, on_child);
	for (;;)
		pause();
}

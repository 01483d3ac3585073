// SPDX-License-Identifier: MIT
/*
 * setpid PID CGROUP_PROCS PROGRAM [ARG...]: starts PROGRAM as a child with
 * process id PID (0: any), moved first into every cgroup whose cgroup.procs
 * file is listed in CGROUP_PROCS (':' between them). Prints the child's pid
 * once it runs PROGRAM there, waits for it and exits as it did. clone3() with set_tid picks the exact
 * pid: root in the initial PID namespace may (CAP_SYS_ADMIN), and the pid
 * must be free. The agent's tests use it to make a process of one pod take
 * the pid a process of another pod just had.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int join_cgroups(char *list)
{
	for (char *f = strtok(list, ":"); f; f = strtok(NULL, ":")) {
		int fd = open(f, O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, "0", 1) != 1) {
			fprintf(stderr, "setpid: cannot join %s: %s\n", f, strerror(errno));
			return -1;
		}
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	pid_t want, child;
	struct clone_args args = { .exit_signal = SIGCHLD };
	int status, done[2];
	char c;

	if (argc < 4) {
		fprintf(stderr, "usage: setpid PID CGROUP_PROCS PROGRAM [ARG...]\n");
		return 2;
	}
	want = (pid_t)atoi(argv[1]);
	if (want > 0) {
		args.set_tid = (uint64_t)(uintptr_t)&want;
		args.set_tid_size = 1;
	}
	/* closed by the child's exec: it runs PROGRAM, in its cgroups */
	if (pipe2(done, O_CLOEXEC)) {
		perror("setpid: pipe");
		return 1;
	}
	child = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
	if (child < 0) {
		fprintf(stderr, "setpid: clone3 with pid %d: %s\n", want, strerror(errno));
		return 1;
	}
	if (child == 0) {
		if (!*argv[2] || !join_cgroups(argv[2])) {
			execv(argv[3], argv + 3);
			fprintf(stderr, "setpid: cannot run %s: %s\n", argv[3], strerror(errno));
		}
		/* the parent learns that the child failed */
		if (write(done[1], "!", 1) < 0)
			_exit(126);
		_exit(127);
	}
	close(done[1]);
	if (read(done[0], &c, 1) != 0) {
		waitpid(child, &status, 0);
		return 127;
	}
	printf("%d\n", child);
	fflush(stdout);
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

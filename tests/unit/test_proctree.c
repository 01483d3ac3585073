// SPDX-License-Identifier: MIT
/* proctree: /proc/PID/stat lines, names a process chose included, and this test's own tree. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/proctree.h"
#include "test.h"

static int parse(const char *line, struct proc_stat *st)
{
	return proc_stat__parse(line, strlen(line), st);
}

TEST(proc_stat_reads_parent_start_and_name)
{
	struct proc_stat st;
	const char *line = "4242 (postgres) S 4200 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 "
			   "20 0 1 0 987654 123456 789 18446744073709551615";

	ASSERT_EQ(parse(line, &st), 0);
	ASSERT_EQ(st.ppid, 4200);
	ASSERT_EQ(st.start, 987654);
	ASSERT_STREQ(st.comm, "postgres");
	return true;
}

TEST(proc_stat_name_holding_parentheses_and_spaces)
{
	struct proc_stat st;
	/* a process may name itself ") S 1 1": the fields follow the last ')' */
	const char *line = "77 (a) S 1 1 ) x) R 50 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4321 0 0";

	ASSERT_EQ(parse(line, &st), 0);
	ASSERT_EQ(st.ppid, 50);
	ASSERT_EQ(st.start, 4321);
	ASSERT_STREQ(st.comm, "a) S 1 1 ) x");
	return true;
}

TEST(proc_stat_refuses_malformed_lines)
{
	struct proc_stat st;

	ASSERT_EQ(parse("", &st), -EINVAL);
	ASSERT_EQ(parse("12 no name S 1", &st), -EINVAL);
	ASSERT_EQ(parse("12 (x) S", &st), -EINVAL);
	ASSERT_EQ(parse("12 (x) S 1 2 3", &st), -EINVAL);
	ASSERT_EQ(parse("12 (x) S notanumber 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", &st), -EINVAL);
	return true;
}

TEST(proctree_knows_this_process_and_its_child)
{
	pid_t me = getpid(), child, roots[1] = { me };
	struct proc_stat st;
	char cg[4096];
	int fds[2], status;
	bool descends, self;

	ASSERT_EQ(proc_stat__read(me, &st), 0);
	ASSERT_EQ(st.ppid, getppid());
	ASSERT_EQ(pipe(fds), 0);
	child = fork();
	ASSERT_TRUE(child >= 0);
	if (child == 0) {
		char c;

		close(fds[1]);
		while (read(fds[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(fds[0]);
	descends = proctree__descends(child, roots, 1);
	self = proctree__descends(me, roots, 1);
	close(fds[1]);
	waitpid(child, &status, 0);
	ASSERT_TRUE(descends);
	ASSERT_TRUE(!self); /* a root is not its own descendant */
	ASSERT_EQ(proc_stat__read(child, &st), -ENOENT);
	ASSERT_EQ(proctree__cgroup(me, cg, sizeof(cg)), 0);
	ASSERT_TRUE(cg[0] == '/');
	return true;
}

// SPDX-License-Identifier: MIT
/* Which processes run which file, over a fake /proc tree: a pid taken over is a new process. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace/exeprocs.h"
#include "test.h"

/* PROC/PID running file exe, started at start. */
static bool fake(const char *proc, int pid, const char *exe, const char *start)
{
	char dir[4096], link[4200], stat[256];
	int n;

	snprintf(dir, sizeof(dir), "%s/%d", proc, pid);
	snprintf(link, sizeof(link), "%s/exe", dir);
	if (mkdir(dir, 0755) && !CHECK(errno == EEXIST, "mkdir %s: %s", dir, strerror(errno)))
		return false;
	unlink(link);
	n = snprintf(stat, sizeof(stat),
		     "%d (a) b) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %s 3133440 380 0\n", pid,
		     start);
	return CHECK(!symlink(exe, link), "symlink %s: %s", link, strerror(errno)) &&
	       test__write_file(dir, "stat", stat, (size_t)n);
}

TEST(exeprocs_pid_reuse)
{
	char proc[] = "/tmp/retwatch-exeprocs-XXXXXX";
	struct exeprocs ep = {};
	const struct exeproc *e;
	bool ok = ASSERT_TRUE(mkdtemp(proc));

	if (!ok)
		return false;
	ok = fake(proc, 100, "/usr/bin/sleep", "1000") &&
	     ASSERT_OK(exeprocs__scan(&ep, proc, 10)) &&
	     ASSERT_TRUE((e = exeprocs__find(&ep, 100))) && ASSERT_EQ(e->starttime, 1000) &&
	     ASSERT_EQ(e->first_ns, 10) && ASSERT_OK(exeprocs__scan(&ep, proc, 20)) &&
	     ASSERT_TRUE((e = exeprocs__find(&ep, 100))) && ASSERT_EQ(e->first_ns, 10) &&
	     ASSERT_TRUE(exeprocs__current(&ep, proc, 100) == e);
	/* another process takes pid 100, running the same file: new since its scan */
	ok = ok && fake(proc, 100, "/usr/bin/sleep", "2000") &&
	     ASSERT_TRUE(exeprocs__find(&ep, 100)) &&
	     ASSERT_TRUE(exeprocs__current(&ep, proc, 100) == NULL) &&
	     ASSERT_OK(exeprocs__scan(&ep, proc, 30)) &&
	     ASSERT_TRUE((e = exeprocs__current(&ep, proc, 100))) &&
	     ASSERT_EQ(e->starttime, 2000) && ASSERT_EQ(e->first_ns, 30);
	/* a stat that cannot be read: not listed */
	ok = ok && test__write_file(proc, "100/stat", "100 (a", 6) &&
	     ASSERT_OK(exeprocs__scan(&ep, proc, 40)) && ASSERT_TRUE(!exeprocs__find(&ep, 100));
	exeprocs__clear(&ep);
	test__rm_tree(proc);
	return ok;
}

/* The real /proc: a zombie (exited, not reaped) and a reaped process run
 * nothing; this one runs its executable. */
TEST(exeprocs_gone)
{
	pid_t child = fork();
	siginfo_t info;
	int status;
	bool ok;

	if (child == 0)
		_exit(0);
	if (!ASSERT_TRUE(child > 0))
		return false;
	/* a zombie once its exit is seen: waitid with WNOWAIT leaves it unreaped */
	ok = ASSERT_OK(waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT)) &&
	     ASSERT_TRUE(exeprocs__gone("/proc", child)) &&
	     ASSERT_FALSE(exeprocs__gone("/proc", getpid()));
	ok = ASSERT_EQ(waitpid(child, &status, 0), child) && ok;
	return ok && ASSERT_TRUE(exeprocs__gone("/proc", child));
}

// SPDX-License-Identifier: MIT
/*
 * The node's processes over a fake /proc tree: a pid another process takes
 * over between two scans (its start time changes) is looked up afresh, never
 * left in its predecessor's container.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/nodeprocs.h"
#include "test.h"

#define ID_A "675bb0ddd524f7a0afc8f979c9734eae124fa398c54b51630f9cbf4b7f174663"
#define ID_B "6ccc719c737b501d7cf35097e8dea949ec6e9fd82ddcdcf89dc58bfd342cc1e0"
#define UID_A "8f6ca8fd-03a1-4da0-ad1e-3cb8b5b27c8a"
#define UID_B "b3ff92dc-6b9c-45cc-8025-57c908b3a52d"
#define UID_C "08b48be6-5ff3-405c-8385-a8091a44eddd"

/* PROC/PID with a cgroup in container id of pod uid (NULL: in none) and a start time. */
static bool fake(const char *proc, int pid, const char *uid, const char *id, const char *start)
{
	char dir[4096], cgroup[256], stat[512];
	int n;

	snprintf(dir, sizeof(dir), "%s/%d", proc, pid);
	if (mkdir(dir, 0755) && !CHECK(errno == EEXIST, "mkdir %s: %s", dir, strerror(errno)))
		return false;
	if (uid)
		snprintf(cgroup, sizeof(cgroup), "0::/kubepods/besteffort/pod%s/%s\n", uid, id);
	else
		snprintf(cgroup, sizeof(cgroup), "0::/system.slice/cron.service\n");
	/* a name with ") " and digits in it: the fields count from the last ")" */
	n = snprintf(stat, sizeof(stat),
		     "%d (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9) R 1 2 3 0 -1 4194304 99 0 "
		     "0 0 0 0 0 0 20 0 1 0 %s 3133440 380 0\n",
		     pid, start);
	return test__write_file(dir, "cgroup", cgroup, strlen(cgroup)) &&
	       test__write_file(dir, "stat", stat, (size_t)n);
}

static bool in_container(struct nodeprocs *np, const char *id, const char *uid, pid_t want_pid,
			 uint64_t want_start)
{
	struct nodeproc *v = NULL;
	size_t n = nodeprocs__container(np, id, uid, &v);
	bool ok = want_pid ? ASSERT_EQ(n, 1) && ASSERT_EQ(v[0].pid, want_pid) &&
				     ASSERT_EQ(v[0].starttime, want_start)
			   : ASSERT_EQ(n, 0);

	free(v);
	return ok;
}

TEST(nodeprocs_pid_reuse)
{
	char proc[] = "/tmp/retwatch-nodeprocs-XXXXXX";
	struct nodeprocs *np = NULL;
	struct nodeproc old = { 100, 1000 }, now = { 100, 2000 };
	bool ok = ASSERT_TRUE(mkdtemp(proc));

	if (!ok)
		return false;
	np = nodeprocs__new(proc);
	ok = ASSERT_TRUE(np) && fake(proc, 100, UID_A, ID_A, "1000") &&
	     fake(proc, 200, NULL, NULL, "1500");
	if (ok)
		nodeprocs__scan(np);
	ok = ok && ASSERT_STREQ(nodeprocs__pod_of(np, 100), UID_A) &&
	     ASSERT_STREQ(nodeprocs__pod_of(np, 200), "") &&
	     in_container(np, ID_A, UID_A, 100, 1000) && ASSERT_TRUE(nodeprocs__listed(np, &old));
	/* pid 100 exits; a process of pod B gets its pid before the next scan */
	ok = ok && fake(proc, 100, UID_B, ID_B, "2000");
	if (ok)
		nodeprocs__scan(np);
	ok = ok && ASSERT_STREQ(nodeprocs__pod_of(np, 100), UID_B) &&
	     in_container(np, ID_A, UID_A, 0, 0) && in_container(np, ID_B, UID_B, 100, 2000) &&
	     ASSERT_FALSE(nodeprocs__listed(np, &old)) &&
	     ASSERT_TRUE(nodeprocs__listed(np, &now)) && ASSERT_FALSE(nodeprocs__alive(np, &old)) &&
	     ASSERT_TRUE(nodeprocs__alive(np, &now));
	/* the same process moved (its start time the same): scans keep what they read... */
	ok = ok && fake(proc, 100, UID_C, ID_B, "2000");
	if (ok)
		nodeprocs__scan(np);
	ok = ok && ASSERT_STREQ(nodeprocs__pod_of(np, 100), UID_B) &&
	     /* ...until an attach's check finds it moved */
	     ASSERT_FALSE(nodeprocs__still_in(np, &now, ID_B, UID_B)) &&
	     ASSERT_FALSE(nodeprocs__still_in(np, &old, ID_B, UID_C));
	if (ok)
		nodeprocs__scan(np);
	ok = ok && ASSERT_STREQ(nodeprocs__pod_of(np, 100), UID_C) &&
	     ASSERT_TRUE(nodeprocs__still_in(np, &now, ID_B, UID_C)) &&
	     in_container(np, ID_B, UID_C, 100, 2000);
	/* a stat file that cannot be parsed: the process is not listed */
	ok = ok && test__write_file(proc, "100/stat", "100 (x S", 8);
	if (ok)
		nodeprocs__scan(np);
	ok = ok && ASSERT_TRUE(nodeprocs__pod_of(np, 100) == NULL) &&
	     ASSERT_STREQ(nodeprocs__pod_of(np, 200), "") &&
	     ASSERT_FALSE(nodeprocs__still_in(np, &now, ID_B, UID_C));
	nodeprocs__free(np);
	test__rm_tree(proc);
	return ok;
}

// SPDX-License-Identifier: MIT
/*
 * Container ids from /proc/PID/cgroup text: real files of every runtime and
 * cgroup driver (tests/fixtures/cgroup/), the rules one at a time, malformed
 * and hostile text, Pod status ids, and a fake /proc tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cgroup.h"
#include "test.h"

#define ID_A "675bb0ddd524f7a0afc8f979c9734eae124fa398c54b51630f9cbf4b7f174663"
#define ID_B "6ccc719c737b501d7cf35097e8dea949ec6e9fd82ddcdcf89dc58bfd342cc1e0"
#define ID_C "ff87fc209e7937f38e1257694276f5ce14d0b209d186808d1628de4672d44900"
#define POD "kubepods-burstable-pod08b48be6_5ff3_405c_8385_a8091a44eddd.slice"
#define UID_B3 "b3ff92dc-6b9c-45cc-8025-57c908b3a52d"
#define UID_08 "08b48be6-5ff3-405c-8385-a8091a44eddd"
#define UID_8F "8f6ca8fd-03a1-4da0-ad1e-3cb8b5b27c8a"
#define UID_65 "6590d241-bc8d-49f7-b9e1-8349f3e998ac"
#define UID_27 "27b7547b-eb4e-4b39-9592-3563cd1567bd"
#define UID_F2 "f241c01b-9271-4a83-8f80-e740eece6c4e"
#define UID_51 "512c600c-89d8-47c2-8a46-bf031a91920c"

/* tests/fixtures/cgroup/NAME, found from this file's path: fixtures are sources, not built. */
static char *read_fixture(const char *name, size_t *ret_len)
{
	char path[4096], *text = NULL;
	const char *slash = strrchr(__FILE__, '/');
	size_t cap = 0;
	FILE *f, *mem;
	int c;

	snprintf(path, sizeof(path), "%.*s/../fixtures/cgroup/%s",
		 slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".", name);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	mem = open_memstream(&text, &cap);
	while (mem && (c = fgetc(f)) != EOF)
		fputc(c, mem);
	if (mem)
		fclose(mem);
	fclose(f);
	*ret_len = cap;
	return text;
}

static bool parses_to(const char *text, size_t len, int want_ret, const char *want_id)
{
	char id[CGROUP_ID_LEN + 1] = "unchanged";
	int ret = cgroup__parse_container_id(text, len, id);

	if (!CHECK(ret == want_ret, "%d, want %d for:\n%.*s", ret, want_ret, (int)len, text))
		return false;
	return CHECK(!strcmp(id, want_id ? want_id : "unchanged"), "id %s, want %s for:\n%.*s", id,
		     want_id ? want_id : "unchanged", (int)len, text);
}

static bool parses(const char *text, int want_ret, const char *want_id)
{
	return parses_to(text, strlen(text), want_ret, want_id);
}

TEST(cgroup_fixtures)
{
	static const struct {
		const char *file, *id; /* NULL: -ENOENT */
	} cases[] = {
		{ "v1-cgroupfs-besteffort", ID_A },
		{ "v1-cgroupfs-burstable", ID_B },
		{ "v1-cgroupfs-guaranteed", ID_C },
		{ "v2-cgroupfs-besteffort", ID_A },
		{ "v2-cgroupfs-burstable", ID_B },
		{ "v2-cgroupfs-guaranteed", ID_C },
		{ "v2-systemd-containerd-burstable",
		  "9efc98011fcc593f4235f3cc6c79024d2f4d728a41a87d2082d48abf326ba609" },
		{ "v2-systemd-crio-besteffort",
		  "ab94c8d022d47360ac22475472ae4c36afa4285fe9dfee49ad070953147fc26b" },
		{ "v2-systemd-crio-conmon", NULL },
		{ "v2-systemd-docker-guaranteed",
		  "fc4f6d2bcec85276e433aed80bd15141f0372c14a52a712814fd8ef22cac77c8" },
		{ "v1-systemd-containerd-burstable",
		  "9efc98011fcc593f4235f3cc6c79024d2f4d728a41a87d2082d48abf326ba609" },
		{ "v1-systemd-crio-besteffort",
		  "ab94c8d022d47360ac22475472ae4c36afa4285fe9dfee49ad070953147fc26b" },
		{ "v1-systemd-crio-conmon", NULL },
		{ "v1-systemd-docker-guaranteed",
		  "fc4f6d2bcec85276e433aed80bd15141f0372c14a52a712814fd8ef22cac77c8" },
		{ "v1-containerd-service-colon",
		  "f6983e3ddc15259408da1b0e813dea46255453dd90583a1ed4bc224f36462359" },
		{ "v1-docker", "d99a3680c4e28f89edfe5d7f5a0b79124fe41f50401f76739ed3e5fe502ad431" },
		{ "v2-docker-systemd",
		  "0effd588765b95bc9d63ea18e614ee4f19594731e8bb9986629517c8e014f38c" },
		{ "v2-namespaced-root", NULL },
		{ "v1-namespaced-root", NULL },
		{ "v2-namespaced-cgroupfs",
		  "3671d5b7f766c85a3f4f8b5eae0de76268d947859b6cfb5ba8e1c3b6a70b85aa" },
		{ "v2-namespaced-systemd",
		  "3671d5b7f766c85a3f4f8b5eae0de76268d947859b6cfb5ba8e1c3b6a70b85aa" },
		/* the pod's container, not the kind node's */
		{ "v2-kind-from-host",
		  "ba745e4ea85f7b252dd2f585be725b6ab7197bb9619b62738e102d687bda002b" },
		{ "v2-kind-from-node",
		  "ba745e4ea85f7b252dd2f585be725b6ab7197bb9619b62738e102d687bda002b" },
		{ "v2-kind-node-containerd",
		  "5f5a8f62c71e1492d71b295bde1e98c6909805184d72d26e3f7187e2bca6210c" },
		{ "v1-kind-from-host",
		  "d45a8c7db389cd85596a58954a07963f177a71c9daada339cd19215a6837902a" },
		{ "v2-deleted",
		  "60df6819bf491207f223ea887d40e00c4a528802ee5e3a1b6aed50dc7144efb6" },
		{ "v2-podman-rootless",
		  "d45a8c7db389cd85596a58954a07963f177a71c9daada339cd19215a6837902a" },
		{ "v2-user-slice", NULL },
		{ "v2-init-scope", NULL },
		{ "v2-system-service", NULL },
		{ "v1-host-session", NULL },
		/* a sandbox's own cgroup named by 32 hex digits is no container */
		{ "v1-sandbox-32hex", NULL },
	};
	bool ok = true;

	for (size_t i = 0; ok && i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len;
		char *text = read_fixture(cases[i].file, &len);

		/* the fixtures are sources, read relative to the repository root */
		if (!CHECK(text, "tests/fixtures/cgroup/%s not found: run from the repository root",
			   cases[i].file))
			return false;
		ok = parses_to(text, len, cases[i].id ? 0 : -ENOENT, cases[i].id);
		if (!ok)
			fprintf(stderr, "  in fixture %s\n", cases[i].file);
		free(text);
	}
	return ok;
}

TEST(cgroup_component_rules)
{
	return parses("0::/" ID_A "\n", 0, ID_A) &&
	       parses("0::/a/cri-containerd-" ID_A ".scope", 0, ID_A) &&
	       parses("0::/a/crio-" ID_A ".scope", 0, ID_A) &&
	       parses("0::/a/docker-" ID_A ".scope", 0, ID_A) &&
	       parses("0::/a/libpod-" ID_A ".scope", 0, ID_A) &&
	       parses("0::/a/" POD ":cri-containerd:" ID_A, 0, ID_A) &&
	       parses("0::/a/" POD ":crio:" ID_A, 0, ID_A) &&
	       /* the monitors of CRI-O and podman, unknown runtimes, near misses */
	       parses("0::/a/crio-conmon-" ID_A ".scope", -ENOENT, NULL) &&
	       parses("0::/a/libpod-conmon-" ID_A ".scope", -ENOENT, NULL) &&
	       parses("0::/a/rkt-" ID_A ".scope", -ENOENT, NULL) &&
	       parses("0::/a/-" ID_A ".scope", -ENOENT, NULL) &&
	       parses("0::/a/docker" ID_A ".scope", -ENOENT, NULL) &&
	       parses("0::/a/docker-" ID_A ".scopes", -ENOENT, NULL) &&
	       parses("0::/a/docker-" ID_A ".slice", -ENOENT, NULL) &&
	       parses("0::/a/docker-" ID_A, -ENOENT, NULL) &&
	       parses("0::/a/x" ID_A, -ENOENT, NULL) && parses("0::/a/" ID_A "0", -ENOENT, NULL) &&
	       parses("0::/a/675BB0DDD524F7A0AFC8F979C9734EAE124FA398C54B51630F9CBF4B7F174663",
		      -ENOENT, NULL) &&
	       parses("0::/a/675bb0ddd524f7a0afc8f979c9734eae124fa398c54b51630f9cbf4b7f17466",
		      -ENOENT, NULL) &&
	       parses("0::/a/675bb0ddd524f7a0afc8f979c9734eae124fa398c54b51630f9cbf4b7f17466g",
		      -ENOENT, NULL) &&
	       parses("0::/a/:cri-containerd:" ID_A, -ENOENT, NULL) &&
	       parses("0::/a/x:y:cri-containerd:" ID_A, -ENOENT, NULL) &&
	       parses("0::/a/" POD ":rkt:" ID_A, -ENOENT, NULL) &&
	       parses("0::/a/" POD "::" ID_A, -ENOENT, NULL) &&
	       parses("0::/a/" POD ":cri-containerd-" ID_A, -ENOENT, NULL);
}

TEST(cgroup_line_preference)
{
	/* the last on a line: nested containers (kind, Docker-in-Docker) */
	return parses("0::/docker/" ID_A "/docker/" ID_B "/sub", 0, ID_B) &&
	       /* deepest across lines */
	       parses("2:cpu:/docker/" ID_A "/docker/" ID_B "\n0::/docker/" ID_A, 0, ID_B) &&
	       parses("2:cpu:/docker/" ID_A "\n1:name=systemd:/x/docker/" ID_B "\n0::/", 0, ID_B) &&
	       /* a tie: the v2 line, then the first v1 line */
	       parses("3:cpu:/docker/" ID_A "\n2:pids:/docker/" ID_B "\n0::/docker/" ID_C, 0,
		      ID_C) &&
	       parses("3:cpu:/docker/" ID_A "\n2:pids:/docker/" ID_B "\n0::/", 0, ID_A) &&
	       parses("3:rdma:/\n2:pids:/docker/" ID_B "\n0::/init.scope", 0, ID_B) &&
	       /* ".." goes up: here the v1 id sits deeper */
	       parses("1:cpu:/a/b/" ID_A "\n0::/../../../b/" ID_B, 0, ID_A) &&
	       parses("0::/./a/" ID_A, 0, ID_A) &&
	       parses("0::/kubepods/x/" ID_A " (deleted)", 0, ID_A) &&
	       parses("0::/kubepods/x/crio-" ID_A ".scope (deleted)\n", 0, ID_A) &&
	       /* len ends the text, not a NUL */
	       parses_to("0::/docker/" ID_A, strlen("0::/docker/" ID_A) - 1, -ENOENT, NULL);
}

TEST(cgroup_malformed)
{
	char many[64 * 16], nul[] = "0::/docker/" ID_A;
	size_t n = 0;

	for (int h = 70; h > 0; h--)
		n += snprintf(many + n, sizeof(many) - n, "%d:c:/\n", h);
	nul[5] = '\0';
	return parses("", -EINVAL, NULL) && parses("\n", -EINVAL, NULL) &&
	       parses("0::", -EINVAL, NULL) && parses("0::docker/" ID_A, -EINVAL, NULL) &&
	       parses("0:/docker/" ID_A, -EINVAL, NULL) && parses(":cpu:/", -EINVAL, NULL) &&
	       parses("x:cpu:/", -EINVAL, NULL) && parses("-1:cpu:/", -EINVAL, NULL) &&
	       parses("1234567890:cpu:/", -EINVAL, NULL) &&
	       /* v2 names no controllers, v1 always does */
	       parses("0:cpu:/", -EINVAL, NULL) && parses("1::/", -EINVAL, NULL) &&
	       parses("2:cpu:/\n\n0::/", -EINVAL, NULL) &&
	       parses_to(nul, sizeof(nul) - 1, -EINVAL, NULL) && parses(many, -EINVAL, NULL) &&
	       parses(many + strlen("70:c:/\n") * 7, -ENOENT, NULL) &&
	       parses_to(NULL, 0, -EINVAL, NULL);
}

/*
 * Lines a cgroup name with a newline would add (the kernel refuses such
 * names): never a second line of a hierarchy, nor a line after the v2 one.
 */
TEST(cgroup_injected_lines)
{
	return parses("0::/kubepods/p/" ID_A "/x\n0::/kubepods/p/" ID_B, -EINVAL, NULL) &&
	       parses("0::/kubepods/p/" ID_A "/x\n1:cpu:/a/b/c/d/" ID_B, -EINVAL, NULL) &&
	       parses("2:cpu:/kubepods/p/" ID_A "/x\n2:cpu:/a/b/c/d/" ID_B "\n0::/", -EINVAL,
		      NULL) &&
	       parses("2:cpu:/kubepods/p/" ID_A "/x\n0::/a/b/c/d/" ID_B "\n0::/", -EINVAL, NULL);
}

TEST(cgroup_status_container_id)
{
	static const char *const good[] = {
		"containerd://" ID_A,
		"cri-o://" ID_A,
		"docker://" ID_A,
		"cri-dockerd+v2.x://" ID_A,
		"abcdefghijklmnopqrstuvwxyzabcdef://" ID_A, /* 32 */
	};
	static const char *const bad[] = {
		"",
		ID_A,
		"containerd://",
		"containerd:/" ID_A,
		"containerd:" ID_A,
		"://" ID_A,
		"1containerd://" ID_A,
		"-containerd://" ID_A,
		"contai nerd://" ID_A,
		"abcdefghijklmnopqrstuvwxyzabcdefg://" ID_A, /* 33 */
		"containerd://" ID_A "0",
		"containerd://" ID_A "/",
		"containerd:///" ID_A,
		"containerd://675bb0ddd524f7a0afc8f979c9734eae124fa398c54b51630f9cbf4b7f17466",
		"containerd://675BB0DDD524F7A0AFC8F979C9734EAE124FA398C54B51630F9CBF4B7F174663",
		"containerd://675bb0ddd524f7a0afc8f979c9734eae124fa398c54b51630f9cbf4b7f17466x",
	};
	char id[CGROUP_ID_LEN + 1];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		memset(id, 'x', sizeof(id));
		if (!CHECK(!cgroup__status_container_id(good[i], id), "\"%s\" refused", good[i]) ||
		    !ASSERT_STREQ(id, ID_A))
			return false;
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!CHECK(cgroup__status_container_id(bad[i], id) == -EINVAL, "\"%s\" accepted",
			   bad[i]))
			return false;
	return ASSERT_EQ(cgroup__status_container_id(NULL, id), -EINVAL);
}

/* PROC/PID/ with a cgroup and a stat file. */
static bool fake_pid(const char *proc, int pid, const char *cgroup, size_t cgroup_len,
		     const char *stat)
{
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/%d", proc, pid);
	return ASSERT_OK(mkdir(dir, 0755)) && test__write_file(dir, "cgroup", cgroup, cgroup_len) &&
	       (!stat || test__write_file(dir, "stat", stat, strlen(stat)));
}

/* A name with ") " in it, which a process may choose: fields count from the last ")". */
#define STAT_TRICKY                                                                                  \
	"4242 (a) S 1 2 3) R 1596 1596 17803 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 692614 3133440 " \
	"380 18446744073709551615 93911999012864 93911999032745 140734935575328 0 0 0 0 0 0 0 0 0 "  \
	"17 0 0 0 0 0 0 93911999048752 93911999050368 93913017786368 140734935579331 "               \
	"140734935579351 140734935579351 140734935580651 0\n"

/* A stat line of a process named comm (between the parentheses) started at start. */
static size_t stat_line(char *buf, size_t len, const char *comm, const char *start)
{
	int n = snprintf(buf, len,
			 "4242 (%s) S 1 2 3 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 %s 3133440 380 "
			 "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
			 comm, start);

	return n < 0 ? 0 : (size_t)n;
}

static bool starttime_is(const char *comm, const char *start, int want_ret, uint64_t want)
{
	char buf[1024];
	uint64_t got = 7;
	size_t len = stat_line(buf, sizeof(buf), comm, start);
	int ret = cgroup__parse_starttime(buf, len, &got);

	return CHECK(ret == want_ret, "comm \"%s\", start \"%s\": %d, want %d", comm, start, ret,
		     want_ret) &&
	       CHECK(got == (want_ret ? 7 : want), "comm \"%s\": %" PRIu64 ", want %" PRIu64, comm,
		     got, want);
}

/* The process names a process may give itself (prctl PR_SET_NAME, or its file's name). */
TEST(cgroup_parse_starttime)
{
	static const char *const names[] = {
		"sh",	     "",
		"a b c",     ")",
		"))",	     "(",
		") S 1 2 3", "x) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 666 1",
		"new\nline", "tab\there",
	};
	const char *tricky = STAT_TRICKY;
	uint64_t got = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!starttime_is(names[i], "692614", 0, 692614))
			return false;
	return starttime_is("sh", "18446744073709551615", 0, UINT64_MAX) &&
	       starttime_is("sh", "0", 0, 0) &&
	       /* over 64 bits, not a number, empty, signed */
	       starttime_is("sh", "18446744073709551616", -EINVAL, 0) &&
	       starttime_is("sh", "99999999999999999999999", -EINVAL, 0) &&
	       starttime_is("sh", "12a", -EINVAL, 0) && starttime_is("sh", "", -EINVAL, 0) &&
	       starttime_is("sh", "-1", -EINVAL, 0) &&
	       /* no ")", too few fields, the text cut (len) before field 22 */
	       ASSERT_EQ(cgroup__parse_starttime("4242 (sh S 1 2", 14, &got), -EINVAL) &&
	       ASSERT_EQ(cgroup__parse_starttime("4242 (sh) S 1 2 3\n", 18, &got), -EINVAL) &&
	       ASSERT_EQ(cgroup__parse_starttime(tricky, 60, &got), -EINVAL) &&
	       ASSERT_EQ(cgroup__parse_starttime("", 0, &got), -EINVAL) &&
	       /* the last ")", not the first, ends the name */
	       ASSERT_OK(cgroup__parse_starttime(tricky, strlen(tricky), &got)) &&
	       ASSERT_EQ(got, 692614);
}

TEST(cgroup_pid_container)
{
	char proc[] = "/tmp/retwatch-proc-XXXXXX", id[CGROUP_ID_LEN + 1], *big = NULL;
	const char *v2 = "0::/kubepods/besteffort/podx/" ID_A "\n";
	const char *nested = "0::/kubepods/besteffort/pod" UID_8F "/" ID_A "/pod" UID_08 "/" ID_B
			     "\n";
	char uid[CGROUP_UID_MAX + 1];
	uint64_t start = 0;
	bool ok;

	if (!ASSERT_TRUE(mkdtemp(proc)))
		return false;
	big = malloc(CGROUP_FILE_MAX + 10);
	ok = ASSERT_TRUE(big) && fake_pid(proc, 4242, v2, strlen(v2), STAT_TRICKY) &&
	     fake_pid(proc, 7, "0::/init.scope\n", 15, STAT_TRICKY) &&
	     fake_pid(proc, 8, v2, strlen(v2), "8 (x) S 1 2 3\n") &&
	     fake_pid(proc, 9, v2, strlen(v2), NULL) &&
	     fake_pid(proc, 12, nested, strlen(nested), STAT_TRICKY);
	if (ok) {
		memset(big, 'a', CGROUP_FILE_MAX + 10);
		memcpy(big, "0::/", 4);
		ok = fake_pid(proc, 10, big, CGROUP_FILE_MAX + 10, STAT_TRICKY);
	}
	ok = ok && ASSERT_OK(cgroup__pid_container(proc, 4242, id, &start)) &&
	     ASSERT_STREQ(id, ID_A) && ASSERT_EQ(start, 692614) &&
	     ASSERT_OK(cgroup__pid_container(proc, 4242, id, NULL)) &&
	     ASSERT_EQ(cgroup__pid_container(proc, 7, id, &start), -ENOENT) &&
	     ASSERT_EQ(cgroup__pid_container(proc, 8, id, &start), -EINVAL) &&
	     ASSERT_OK(cgroup__pid_container(proc, 8, id, NULL)) &&
	     /* the stat file vanishing: the process exited meanwhile */
	     ASSERT_EQ(cgroup__pid_container(proc, 9, id, &start), -ENOENT) &&
	     ASSERT_EQ(cgroup__pid_container(proc, 10, id, &start), -EFBIG) &&
	     ASSERT_EQ(cgroup__pid_container(proc, 11, id, &start), -ENOENT) &&
	     ASSERT_EQ(cgroup__pid_container(proc, 0, id, &start), -EINVAL) &&
	     ASSERT_EQ(cgroup__pid_container(proc, -1, id, &start), -EINVAL) &&
	     /* the pod reading: "podx" is no pod; a nested cgroup claims nothing */
	     ASSERT_EQ(cgroup__pid_pod(proc, 4242, uid, id, &start), -ENOENT) &&
	     ASSERT_OK(cgroup__pid_pod(proc, 12, uid, id, &start)) && ASSERT_STREQ(uid, UID_8F) &&
	     ASSERT_STREQ(id, ID_A) && ASSERT_EQ(start, 692614) &&
	     ASSERT_OK(cgroup__pid_container(proc, 12, id, NULL)) && ASSERT_STREQ(id, ID_B) &&
	     /* the start time alone: of a process in no container too */
	     ASSERT_OK(cgroup__pid_starttime(proc, 7, &start)) && ASSERT_EQ(start, 692614) &&
	     ASSERT_EQ(cgroup__pid_starttime(proc, 8, &start), -EINVAL) &&
	     ASSERT_EQ(cgroup__pid_starttime(proc, 9, &start), -ENOENT) &&
	     ASSERT_EQ(cgroup__pid_starttime(proc, 11, &start), -ENOENT) &&
	     ASSERT_EQ(cgroup__pid_starttime(proc, 0, &start), -EINVAL);
	/* the real one: this process may or may not run in a container */
	if (ok) {
		int ret = cgroup__pid_container("/proc", getpid(), id, &start);

		ok = CHECK(ret == 0 || ret == -ENOENT, "own /proc/self/cgroup: %d", ret);
	}
	free(big);
	test__rm_tree(proc);
	return ok;
}

static bool pod_is(const char *text, size_t len, int want_ret, const char *want_uid,
		   const char *want_id)
{
	char uid[CGROUP_UID_MAX + 1] = "unchanged", id[CGROUP_ID_LEN + 1] = "unchanged";
	int ret = cgroup__parse_pod(text, len, uid, id);

	return CHECK(ret == want_ret && !strcmp(uid, want_uid ? want_uid : "unchanged") &&
			     !strcmp(id, want_id ? want_id : "unchanged"),
		     "%d %s %s, want %d %s %s for:\n%.*s", ret, uid, id, want_ret,
		     want_uid ? want_uid : "unchanged", want_id ? want_id : "unchanged", (int)len,
		     text);
}

/* Every real file: the pod and container of each runtime and driver, none elsewhere. */
TEST(cgroup_parse_pod_fixtures)
{
	static const struct {
		const char *file, *uid; /* NULL: -ENOENT */
	} cases[] = {
		{ "v1-cgroupfs-besteffort", UID_B3 },
		{ "v1-cgroupfs-burstable", UID_08 },
		{ "v1-cgroupfs-guaranteed", UID_8F },
		{ "v1-containerd-service-colon", "4a324b86-5b65-45c8-868c-c1a143c3d342" },
		{ "v1-kind-from-host", UID_08 },
		{ "v1-systemd-containerd-burstable", UID_65 },
		{ "v1-systemd-crio-besteffort", UID_27 },
		{ "v1-systemd-docker-guaranteed", UID_F2 },
		{ "v2-cgroupfs-besteffort", UID_B3 },
		{ "v2-cgroupfs-burstable", UID_08 },
		{ "v2-cgroupfs-guaranteed", UID_8F },
		{ "v2-deleted", UID_65 },
		{ "v2-kind-from-host", UID_B3 },
		{ "v2-kind-from-node", UID_B3 },
		{ "v2-namespaced-cgroupfs", UID_51 },
		{ "v2-namespaced-systemd", UID_51 },
		{ "v2-systemd-containerd-burstable", UID_65 },
		{ "v2-systemd-crio-besteffort", UID_27 },
		{ "v2-systemd-docker-guaranteed", UID_F2 },
		/* the pod's, but the runtime's monitor, not a container */
		{ "v1-systemd-crio-conmon", NULL },
		{ "v2-systemd-crio-conmon", NULL },
		/* containers, but of no pod */
		{ "v1-docker", NULL },
		{ "v2-docker-systemd", NULL },
		{ "v2-kind-node-containerd", NULL },
		{ "v2-podman-rootless", NULL },
		{ "v2-user-slice", NULL },
		{ "v1-sandbox-32hex", NULL },
	};
	bool ok = true;

	for (size_t i = 0; ok && i < sizeof(cases) / sizeof(cases[0]); i++) {
		char id[CGROUP_ID_LEN + 1];
		size_t len;
		char *text = read_fixture(cases[i].file, &len);

		if (!CHECK(text, "tests/fixtures/cgroup/%s not found: run from the repository root",
			   cases[i].file))
			return false;
		/* the same container as the whole-path rules find */
		ok = !cases[i].uid ? pod_is(text, len, -ENOENT, NULL, NULL)
				   : ASSERT_OK(cgroup__parse_container_id(text, len, id)) &&
					     pod_is(text, len, 0, cases[i].uid, id);
		if (!ok)
			fprintf(stderr, "  in fixture %s\n", cases[i].file);
		free(text);
	}
	return ok;
}

/*
 * The pod component first, the container component right after it: a
 * container that creates cgroups below its own and names them after another
 * pod and container claims neither.
 */
TEST(cgroup_parse_pod_positions)
{
#define CGFS(uid) "/kubepods/besteffort/pod" uid "/"
	static const struct {
		const char *text, *uid, *id; /* uid NULL: -ENOENT; "" : -EINVAL */
	} cases[] = {
		{ "0::" CGFS(UID_8F) ID_A "\n", UID_8F, ID_A },
		/* nested inside container A of pod 8f...: still A of 8f... */
		{ "0::" CGFS(UID_8F) ID_A CGFS(UID_08) ID_B "\n", UID_8F, ID_A },
		{ "0::" CGFS(UID_8F) ID_A "/pod" UID_08 "/" ID_B "\n", UID_8F, ID_A },
		{ "0::" CGFS(UID_8F) ID_A "/" ID_B "\n", UID_8F, ID_A },
		{ "0::" CGFS(UID_8F) ID_A
		  "/kubepods-besteffort-pod08b48be6_5ff3_405c_8385_a8091a44eddd.slice/"
		  "cri-containerd-" ID_B ".scope\n",
		  UID_8F, ID_A },
		{ "0::/kubepods.slice/kubepods-besteffort.slice"
		  "/kubepods-besteffort-pod6590d241_bc8d_49f7_b9e1_8349f3e998ac.slice/"
		  "cri-containerd-" ID_A ".scope/pod" UID_08 "/" ID_B "\n",
		  UID_65, ID_A },
		/* the container component must follow the pod's directly */
		{ "0::" CGFS(UID_8F) "sub/" ID_A "\n", NULL, NULL },
		{ "0::" CGFS(UID_8F) "\n", NULL, NULL },
		/* a pod component below another pod's own cgroup is its making */
		{ "0::" CGFS(UID_8F) "sub" CGFS(UID_08) ID_B "\n", NULL, NULL },
		{ "0::/kubepods.slice/kubepods-pod6590d241_bc8d_49f7_b9e1_8349f3e998ac.slice/"
		  "docker-" ID_C ".scope\n",
		  UID_65, ID_C },
		/* not the kubelet's names */
		{ "0::/kubepods/besteffort/xpod" UID_8F "/" ID_A "\n", NULL, NULL },
		{ "0::/kubepods/besteffort/pod" UID_8F "/" ID_A "x\n", NULL, NULL },
		{ "0::/x/pod" UID_8F "zz/" ID_A "\n", NULL, NULL },
		{ "0::/mine-pod6590d241_bc8d_49f7_b9e1_8349f3e998ac.slice/" ID_A "\n", NULL, NULL },
		{ "0::/kubepods/pod/" ID_A "\n", NULL, NULL },
		{ "0::/kubepods/pod" UID_8F UID_8F "/" ID_A "\n", NULL, NULL },
		/* hierarchies that disagree: refused */
		{ "4:pids:" CGFS(UID_8F) ID_A "\n3:memory:" CGFS(UID_8F) ID_B "\n", "", NULL },
		{ "4:pids:" CGFS(UID_8F) ID_A "\n3:memory:" CGFS(UID_08) ID_A "\n", "", NULL },
		/* one hierarchy outside the pod's cgroups is not a disagreement */
		{ "4:pids:" CGFS(UID_8F) ID_A "\n3:name=systemd:/user.slice\n", UID_8F, ID_A },
		{ "0::" CGFS(UID_8F) ID_A "\nnot a line\n", "", NULL },
	};
	bool ok = true;

	for (size_t i = 0; ok && i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *t = cases[i].text, *uid = cases[i].uid;

		ok = pod_is(t, strlen(t),
			    !uid    ? -ENOENT
			    : !*uid ? -EINVAL
				    : 0,
			    uid && *uid ? uid : NULL, cases[i].id);
	}
	return ok;
#undef CGFS
}

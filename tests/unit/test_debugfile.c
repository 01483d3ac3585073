// SPDX-License-Identifier: MIT
/*
 * Separate debug files: the .build-id path, the CRC-32 of .gnu_debuglink,
 * and the search inside a fake container root (a temp directory): a debug
 * file found there by build id, by its link, and the tricks that must not
 * work (a symlink out of the root, a FIFO in its place, another binary's
 * debug file under this one's build id).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/binary.h"
#include "analysis/debugfile.h"
#include "test.h"

TEST(debugfile_build_id_path)
{
	char buf[128];

	return ASSERT_OK(debugfile__build_id_path("/usr/lib/debug", "ab12cd", buf, sizeof(buf))) &&
	       ASSERT_STREQ(buf, "/usr/lib/debug/.build-id/ab/12cd.debug") &&
	       ASSERT_OK(debugfile__build_id_path("/d/", "0011", buf, sizeof(buf))) &&
	       ASSERT_STREQ(buf, "/d/.build-id/00/11.debug") &&
	       ASSERT_EQ(debugfile__build_id_path("/d", "ab1", buf, sizeof(buf)), -EINVAL) &&
	       ASSERT_EQ(debugfile__build_id_path("/d", "AB12", buf, sizeof(buf)), -EINVAL) &&
	       ASSERT_EQ(debugfile__build_id_path("/d", "ab", buf, sizeof(buf)), -EINVAL) &&
	       ASSERT_EQ(debugfile__build_id_path("/d", "ab/../x", buf, sizeof(buf)), -EINVAL) &&
	       ASSERT_EQ(debugfile__build_id_path("/d", NULL, buf, sizeof(buf)), -EINVAL) &&
	       ASSERT_EQ(debugfile__build_id_path("/usr/lib/debug", "ab12cd", buf, 20),
			 -ENAMETOOLONG);
}

static int memfd_with(const char *text)
{
	char path[] = "/tmp/rw-crc-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	unlink(path);
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		return -1;
	}
	return fd;
}

TEST(debugfile_crc32)
{
	uint32_t crc = 1;
	int a = memfd_with("123456789"), e = memfd_with("");
	bool ok;

	/* the CRC-32 check value (ISO-HDLC, as zlib and gdb compute it) */
	ok = ASSERT_TRUE(a >= 0 && e >= 0) && ASSERT_OK(debugfile__crc32(a, 1 << 20, &crc)) &&
	     ASSERT_EQ(crc, 0xcbf43926u) && ASSERT_OK(debugfile__crc32(e, 1 << 20, &crc)) &&
	     ASSERT_EQ(crc, 0) && ASSERT_EQ(debugfile__crc32(a, 8, &crc), -EFBIG) &&
	     ASSERT_OK(debugfile__crc32(a, 9, &crc)) && ASSERT_EQ(crc, 0xcbf43926u);
	if (a >= 0)
		close(a);
	if (e >= 0)
		close(e);
	return ok;
}

static bool copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;
	bool ok = true;

	if (in < 0)
		return CHECK(false, "open %s: %s", from, strerror(errno));
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0) {
		close(in);
		return CHECK(false, "create %s: %s", to, strerror(errno));
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ok &= write(out, buf, n) == n;
	close(in);
	close(out);
	return CHECK(ok && n == 0, "copy %s to %s", from, to);
}

static bool mkdirs(const char *top, const char *rel)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	for (char *p = path + strlen(top) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		mkdir(path, 0755);
		*p = '/';
	}
	return CHECK(!mkdir(path, 0755) || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* The debug file searched for bin inside root: its path there, or "" when none is found. */
static bool find_in(const char *root, struct elfbin *bin, const char *bin_path,
		    struct debugfile *df)
{
	int root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int e;

	if (!CHECK(root_fd >= 0, "open %s: %s", root, strerror(errno)))
		return false;
	e = debugfile__find(bin, root_fd, bin_path, df);
	close(root_fd);
	if (e)
		df->path[0] = 0;
	return true;
}

TEST(debugfile_find_in_container_root)
{
	const char *exe = test__fixture("c/debug/debugfix");
	const char *dbg = test__fixture("c/debug/debugfix.debug");
	const char *other = test__fixture("c/normal/cfix");
	char top[] = "/tmp/rw-debugfile-XXXXXX", rel[256], path[4096], want[300];
	struct debugfile *df = calloc(1, sizeof(*df));
	struct rw_error err;
	struct elfbin *bin = NULL;
	const char *id;
	bool ok = false;

	if (!exe || !dbg || !other) {
		free(df);
		return true;
	}
	if (!ASSERT_TRUE(df && mkdtemp(top)))
		goto cleanup;
	bin = elfbin__open(exe, &err);
	id = bin ? elfbin__build_id(bin) : NULL;
	if (!ASSERT_TRUE(id) || !mkdirs(top, "app") || !mkdirs(top, "usr/lib/debug/.build-id"))
		goto cleanup;
	snprintf(rel, sizeof(rel), "usr/lib/debug/.build-id/%.2s", id);
	snprintf(want, sizeof(want), "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
	snprintf(path, sizeof(path), "%s%s", top, want);
	if (!mkdirs(top, rel))
		goto cleanup;

	/* nothing there yet; the node's /usr/lib/debug holds no such id either */
	ok = find_in(top, bin, "/app/debugfix", df) && ASSERT_STREQ(df->path, "");
	/* a symlink to the node's copy resolves inside the root: not found */
	ok = ok && ASSERT_OK(symlink(dbg, path)) && find_in(top, bin, "/app/debugfix", df) &&
	     ASSERT_STREQ(df->path, "") && ASSERT_OK(unlink(path));
	/* a FIFO in its place is not opened (nor waited on) */
	ok = ok && ASSERT_OK(mkfifo(path, 0644)) && find_in(top, bin, "/app/debugfix", df) &&
	     ASSERT_STREQ(df->path, "") && ASSERT_OK(unlink(path));
	/* another binary's file under this build id: its build id differs */
	ok = ok && copy_file(other, path) && find_in(top, bin, "/app/debugfix", df) &&
	     ASSERT_STREQ(df->path, "") && ASSERT_OK(unlink(path));
	/* the real one, by build id, inside the container */
	ok = ok && copy_file(dbg, path) && find_in(top, bin, "/app/debugfix", df) &&
	     ASSERT_STREQ(df->path, want) && ASSERT_TRUE(df->in_container) && ASSERT_TRUE(df->eb) &&
	     ASSERT_STREQ(elfbin__build_id(df->eb), id);
	elfbin__free(df->eb);
	df->eb = NULL;
	/* by .gnu_debuglink, beside the binary as the container sees it */
	ok = ok && ASSERT_OK(unlink(path));
	snprintf(path, sizeof(path), "%s/app/debugfix.debug", top);
	ok = ok && copy_file(dbg, path) && find_in(top, bin, "/app/debugfix", df) &&
	     ASSERT_STREQ(df->path, "/app/debugfix.debug") && ASSERT_TRUE(df->in_container);
	elfbin__free(df->eb);
cleanup:
	elfbin__free(bin);
	test__rm_tree(top);
	free(df);
	return ok;
}

TEST(debugfile_named_names_static_functions)
{
	const char *exe = test__fixture("c/debug/debugfix");
	const char *dbg = test__fixture("c/debug/debugfix.debug");
	const char *other = test__fixture("c/normal/cfix");
	static const char *const pats[] = { "parse_record" };
	struct binary_match m = {};
	struct rw_error err;
	struct binary *b, *wrong;
	bool ok;

	if (!exe || !dbg || !other)
		return true;
	b = binary__open_with_debug_file(exe, dbg, &err);
	/* another binary's file (another build id) is not used */
	wrong = binary__open_with_debug_file(exe, other, &err);
	ok = ASSERT_TRUE(b && wrong) && ASSERT_STREQ(binary__debug_file(b), dbg) &&
	     ASSERT_OK(binary__match(b, pats, 1, 8, &m, &err)) && ASSERT_EQ(m.nfuncs, 1) &&
	     ASSERT_EQ(m.funcs[0]->address, m.funcs[0]->file_offset) &&
	     ASSERT_TRUE(m.funcs[0]->nreturns >= 1) && ASSERT_FALSE(binary__debug_file(wrong)) &&
	     ASSERT_EQ(binary__nfuncs(wrong), 0);
	binary_match__clear(&m);
	binary__put(b);
	binary__put(wrong);
	return ok;
}

/*
 * A file opened as /proc/self/fd/N and named by its origin (the agent's
 * /proc/PID/exe): the debug file beside the origin is used only where the
 * origin leads to the file opened.
 */
TEST(debugfile_beside_origin_only_when_it_is_the_file)
{
	const char *exe = test__fixture("c/debug/debugfix");
	const char *dbg = test__fixture("c/debug/debugfix.debug");
	char top[] = "/tmp/rw-origin-XXXXXX", a[4096], b[4096], fdpath[64];
	struct binary *same = NULL, *other = NULL;
	struct rw_error err;
	bool ok = false;
	int fd = -1;

	if (!exe || !dbg)
		return true;
	if (!ASSERT_TRUE(mkdtemp(top)) || !mkdirs(top, "a") || !mkdirs(top, "b"))
		goto cleanup;
	snprintf(a, sizeof(a), "%s/a/debugfix", top);
	snprintf(b, sizeof(b), "%s/b/debugfix.debug", top);
	if (!copy_file(exe, a) || !copy_file(dbg, b))
		goto cleanup;
	fd = open(a, O_RDONLY | O_CLOEXEC);
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	/* b/debugfix is a copy, another file: b/ is not where the file is */
	snprintf(b, sizeof(b), "%s/b/debugfix", top);
	other = copy_file(exe, b) ? binary__open_as(NULL, fdpath, b, &err) : NULL;
	/* the file moved over the copy: its origin leads to it, the debug file is beside */
	ok = ASSERT_TRUE(fd >= 0 && other) && ASSERT_FALSE(binary__debug_file(other)) &&
	     ASSERT_OK(rename(a, b));
	same = ok ? binary__open_as(NULL, fdpath, b, &err) : NULL;
	snprintf(a, sizeof(a), "%s/b/debugfix.debug", top);
	ok = ok && ASSERT_TRUE(same) && ASSERT_STREQ(binary__debug_file(same), a);
cleanup:
	binary__put(same);
	binary__put(other);
	if (fd >= 0)
		close(fd);
	test__rm_tree(top);
	return ok;
}

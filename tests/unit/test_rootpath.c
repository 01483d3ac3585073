// SPDX-License-Identifier: MIT
/*
 * Opening paths inside a fake container root built in a temp directory:
 * every trick a container's owner can plant ("..", absolute and relative
 * symlinks, procfs magic links) ends inside the root or is refused. The
 * root holds its own etc/passwd and etc/shadow, and a decoy etc/passwd sits
 * just outside it, so a read shows which side a path reached.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/rootpath.h"
#include "test.h"

#define INSIDE_PASSWD "root:x:0:0:inside the container:/root:/bin/sh\n"
#define INSIDE_SHADOW "root:*:19000:0:99999:7:::inside\n"
#define OUTSIDE "decoy outside the container root\n"

static bool put_file(const char *top, const char *rel, const char *text)
{
	return test__write_file(top, rel, text, strlen(text));
}

static bool put_dir(const char *top, const char *rel)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	return CHECK(!mkdir(path, 0755), "mkdir %s: %s", path, strerror(errno));
}

static bool put_link(const char *top, const char *rel, const char *target)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	return CHECK(!symlink(target, path), "symlink %s: %s", path, strerror(errno));
}

/*
 * TOP/etc/passwd          the decoy
 * TOP/root/etc/{passwd,shadow}
 * TOP/root/bin/app        -> /etc/passwd
 * TOP/root/x              -> ../../../../etc/shadow
 * TOP/root/a/b/link       -> ../c/next -> ../../d/final -> ../etc/passwd
 * TOP/root/d/dirlink      -> /
 * TOP/root/proc-escape    -> /proc/self/root/etc/passwd
 */
static bool build_tree(const char *top)
{
	return put_dir(top, "etc") && put_file(top, "etc/passwd", OUTSIDE) &&
	       put_dir(top, "root") && put_dir(top, "root/etc") &&
	       put_file(top, "root/etc/passwd", INSIDE_PASSWD) &&
	       put_file(top, "root/etc/shadow", INSIDE_SHADOW) && put_dir(top, "root/bin") &&
	       put_link(top, "root/bin/app", "/etc/passwd") &&
	       put_link(top, "root/x", "../../../../etc/shadow") && put_dir(top, "root/a") &&
	       put_dir(top, "root/a/b") && put_dir(top, "root/a/c") && put_dir(top, "root/d") &&
	       put_link(top, "root/a/b/link", "../c/next") &&
	       put_link(top, "root/a/c/next", "../../d/final") &&
	       put_link(top, "root/d/final", "../etc/passwd") &&
	       put_link(top, "root/d/dirlink", "/") &&
	       put_link(top, "root/proc-escape", "/proc/self/root/etc/passwd");
}

/* path opens inside root_fd and reads exactly want. */
static bool reads(int root_fd, const char *path, const char *want)
{
	char buf[256];
	int fd = rootpath__open(root_fd, path, O_RDONLY);
	ssize_t n;

	if (!CHECK(fd >= 0, "\"%s\": %s", path, strerror(-fd)))
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return CHECK(!strcmp(buf, want), "\"%s\" read \"%s\", want \"%s\"", path, buf, want);
}

static bool refused(int root_fd, const char *path, int flags, int want)
{
	int fd = rootpath__open(root_fd, path, flags);

	if (fd >= 0)
		close(fd);
	return CHECK(fd == want, "\"%s\": %d, want %d", path ? path : "(null)", fd, want);
}

static bool opens(int root_fd, const char *path)
{
	int fd = rootpath__open(root_fd, path, O_RDONLY);

	if (fd >= 0)
		close(fd);
	return CHECK(fd >= 0, "\"%s\": %s", path, strerror(-fd));
}

/* False (a skip) where the kernel has no openat2. */
static bool have_openat2(void)
{
	int fd = rootpath__open(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY);

	if (fd == -ENOSYS) {
		test__skip("the kernel has no openat2 (Linux 5.6)");
		return false;
	}
	if (fd >= 0)
		close(fd);
	return true;
}

static bool inside_cases(int root)
{
	int fd = rootpath__open(root, "etc", O_RDONLY | O_DIRECTORY);
	bool ok = CHECK(fd >= 0, "etc: %d", fd) && ASSERT_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);

	if (fd >= 0)
		close(fd);
	return ok && reads(root, "/etc/passwd", INSIDE_PASSWD) &&
	       reads(root, "etc/passwd", INSIDE_PASSWD) &&
	       reads(root, "../etc/passwd", INSIDE_PASSWD) &&
	       reads(root, "/../../../../../etc/shadow", INSIDE_SHADOW) &&
	       reads(root, "bin/../../etc/passwd", INSIDE_PASSWD) &&
	       reads(root, "/bin/app", INSIDE_PASSWD) && reads(root, "bin/app", INSIDE_PASSWD) &&
	       reads(root, "x", INSIDE_SHADOW) && reads(root, "a/b/link", INSIDE_PASSWD) &&
	       reads(root, "d/dirlink/../etc/shadow", INSIDE_SHADOW) &&
	       reads(root, "d/dirlink/d/dirlink/etc/passwd", INSIDE_PASSWD) &&
	       /* resolved in the root, where there is no /proc */
	       refused(root, "proc-escape", O_RDONLY, -ENOENT) &&
	       refused(root, "missing", O_RDONLY, -ENOENT) &&
	       refused(root, "etc/passwd", O_RDONLY | O_DIRECTORY, -ENOTDIR) &&
	       refused(root, "etc/new", O_WRONLY | O_CREAT, -EINVAL) &&
	       refused(root, "etc", O_RDWR | O_TMPFILE, -EINVAL) &&
	       refused(root, NULL, O_RDONLY, -EINVAL) &&
	       refused(-1, "etc/passwd", O_RDONLY, -EBADF);
}

TEST(rootpath_stays_inside)
{
	char top[] = "/tmp/retwatch-root-XXXXXX", root_path[64];
	int root = -1, plain = -1;
	bool ok;

	if (!have_openat2())
		return true;
	if (!ASSERT_TRUE(mkdtemp(top)))
		return false;
	snprintf(root_path, sizeof(root_path), "%s/root", top);
	ok = build_tree(top);
	if (ok) {
		root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		plain = open(root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ok = ASSERT_TRUE(root >= 0 && plain >= 0);
	}
	/* an O_PATH fd as /proc/PID/root gives, and a plain one */
	ok = ok && inside_cases(root) && inside_cases(plain);
	if (root >= 0)
		close(root);
	if (plain >= 0)
		close(plain);
	test__rm_tree(top);
	return ok;
}

/*
 * A container's /proc is a real procfs, whose /proc/self/root and
 * /proc/self/fd/N are magic links out of any root. Here the root is "/" (so
 * /proc is the real one) and the planted link lives in a temp directory.
 */
TEST(rootpath_refuses_magic_links)
{
	char top[] = "/tmp/retwatch-magic-XXXXXX", link[64], fd_path[64];
	int root = -1, self = -1, fd;
	bool ok;

	if (!have_openat2())
		return true;
	if (!ASSERT_TRUE(mkdtemp(top)))
		return false;
	snprintf(link, sizeof(link), "%s/app", top);
	ok = put_link(top, "app", "/proc/self/root/etc/passwd");
	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	self = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
	ok = ok && ASSERT_TRUE(root >= 0 && self >= 0);
	/* plain open follows it */
	fd = ok ? open(link, O_RDONLY | O_CLOEXEC) : -1;
	ok = ok && CHECK(fd >= 0, "open %s: %s", link, strerror(errno));
	if (fd >= 0)
		close(fd);
	snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", root);
	ok = ok && refused(root, link + 1, O_RDONLY, -ELOOP) &&
	     refused(root, "/proc/self/root/etc/passwd", O_RDONLY, -ELOOP) &&
	     refused(root, fd_path, O_RDONLY | O_DIRECTORY, -ELOOP) &&
	     refused(self, "root/etc/passwd", O_RDONLY, -ELOOP) &&
	     refused(self, "cwd", O_RDONLY | O_DIRECTORY, -ELOOP) &&
	     /* procfs itself is fine: only its magic links are refused */
	     opens(self, "status");
	if (root >= 0)
		close(root);
	if (self >= 0)
		close(self);
	test__rm_tree(top);
	return ok;
}

/* path is refused as kind, at once; alarm() ends the run if the open blocks. */
static bool not_regular(int root_fd, const char *path, mode_t kind)
{
	mode_t mode = 0777;
	int fd;

	alarm(10);
	fd = rootpath__open_regular(root_fd, path, &mode);
	alarm(0);
	if (fd >= 0)
		close(fd);
	return CHECK(fd == -ENXIO && mode == kind, "\"%s\": %d (mode 0%o), want %d (mode 0%o)",
		     path, fd, (unsigned int)mode, -ENXIO, (unsigned int)kind);
}

/*
 * A FIFO is what hung the agent: an O_RDONLY open waits for a writer. A
 * FIFO, a socket, a device node and a directory, directly and through a
 * symlink, are refused without being opened; a regular file reads.
 */
TEST(rootpath_opens_only_regular_files)
{
	char top[] = "/tmp/retwatch-kinds-XXXXXX", path[128];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int root = -1, sock = -1, fd = -1;
	mode_t mode = 0777;
	char buf[64] = "";
	bool ok;

	if (!have_openat2())
		return true;
	if (!ASSERT_TRUE(mkdtemp(top)))
		return false;
	snprintf(path, sizeof(path), "%s/fifo", top);
	ok = CHECK(!mkfifo(path, 0644), "mkfifo %s: %s", path, strerror(errno)) &&
	     put_link(top, "to-fifo", "/fifo") && put_dir(top, "dir") &&
	     put_file(top, "app", INSIDE_PASSWD);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", top);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ok = ok && CHECK(sock >= 0 && !bind(sock, (struct sockaddr *)&sa, sizeof(sa)),
			 "bind %s: %s", sa.sun_path, strerror(errno));
	/* a device node needs CAP_MKNOD: checked where the tests run as root */
	snprintf(path, sizeof(path), "%s/null", top);
	if (ok && mknod(path, S_IFCHR | 0666, makedev(1, 3)))
		ok = put_file(top, "null", "");
	root = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ok = ok && ASSERT_TRUE(root >= 0) && not_regular(root, "fifo", S_IFIFO) &&
	     not_regular(root, "/to-fifo", S_IFIFO) && not_regular(root, "sock", S_IFSOCK) &&
	     not_regular(root, "dir", S_IFDIR) &&
	     (access(path, W_OK) || geteuid() || not_regular(root, "null", S_IFCHR)) &&
	     ASSERT_STREQ(rootpath__kind(S_IFIFO), "a FIFO");
	if (ok) {
		fd = rootpath__open_regular(root, "../app", &mode);
		ok = CHECK(fd >= 0, "app: %s", strerror(-fd)) && ASSERT_EQ(mode, 0) &&
		     ASSERT_EQ(read(fd, buf, sizeof(buf) - 1), (ssize_t)strlen(INSIDE_PASSWD)) &&
		     ASSERT_STREQ(buf, INSIDE_PASSWD) &&
		     ASSERT_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC) &&
		     ASSERT_EQ(rootpath__open_regular(root, "missing", &mode), -ENOENT) &&
		     ASSERT_EQ(mode, 0);
	}
	if (fd >= 0)
		close(fd);
	if (sock >= 0)
		close(sock);
	if (root >= 0)
		close(root);
	test__rm_tree(top);
	return ok;
}

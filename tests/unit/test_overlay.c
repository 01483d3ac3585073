// SPDX-License-Identifier: MIT
/* The layers of an overlay mount, from /proc/PID/mountinfo text. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/overlay.h"
#include "test.h"

static const char mountinfo[] =
	"1 0 0:39 / / rw,relatime - overlay overlay rw,lowerdir=/l/top\\072x:/l/mid\\054y::/l/"
	"data,upperdir=/u,workdir=/w,uuid=on\n"
	"2 1 0:5 / /proc rw,nosuid - proc proc rw\n"
	"3 1 254:0 /srv/data /data rw - ext4 /dev/vda rw\n"
	"4 1 0:40 /sub /opt ro - overlay overlay ro,lowerdir=/a:/b\n"
	"5 4 0:41 / /opt ro - overlay overlay ro,lowerdir=/c\n";

static int parse(const char *path, struct overlay_file *of)
{
	return overlay__parse(mountinfo, sizeof(mountinfo) - 1, path, of);
}

TEST(overlay_root_mount)
{
	struct overlay_file of;
	bool ok;

	if (!ASSERT_OK(parse("/app/podapp", &of)))
		return false;
	/* escaped : and , come back; the data-only layer after :: is a lower too */
	ok = ASSERT_STREQ(of.upper, "/u") && ASSERT_EQ(of.nlowers, 3) &&
	     ASSERT_STREQ(of.lowers[0], "/l/top:x") && ASSERT_STREQ(of.lowers[1], "/l/mid,y") &&
	     ASSERT_STREQ(of.lowers[2], "/l/data") && ASSERT_STREQ(of.rel, "app/podapp") &&
	     ASSERT_EQ(of.dev, makedev(0, 39));
	overlay_file__free(&of);
	return ok;
}

/* A NUL has no escape in a path: \000 stays as written, never an empty layer. */
TEST(overlay_nul_escape_stays_literal)
{
	static const char text[] =
		"1 0 0:39 / / rw - overlay overlay rw,lowerdir=\\000:/l/a\\000b\n";
	struct overlay_file of;
	bool ok;

	if (!ASSERT_OK(overlay__parse(text, sizeof(text) - 1, "/x", &of)))
		return false;
	ok = ASSERT_EQ(of.nlowers, 2) && ASSERT_STREQ(of.lowers[0], "\\000") &&
	     ASSERT_STREQ(of.lowers[1], "/l/a\\000b");
	overlay_file__free(&of);
	return ok;
}

TEST(overlay_other_mounts)
{
	struct overlay_file of;
	bool ok;

	/* a deeper mount that is no overlay */
	if (!ASSERT_EQ(parse("/data/x", &of), -ENOENT) ||
	    !ASSERT_EQ(parse("/proc/1/exe", &of), -ENOENT))
		return false;
	/* "/database" is not under "/data" */
	if (!ASSERT_OK(parse("/database", &of)))
		return false;
	overlay_file__free(&of);
	/* stacked on /opt: the last one is on top (its root is /) */
	if (!ASSERT_OK(parse("/opt/bin/tool", &of)))
		return false;
	ok = ASSERT_EQ(of.nlowers, 1) && ASSERT_STREQ(of.lowers[0], "/c") &&
	     ASSERT_STREQ(of.rel, "bin/tool") && ASSERT_TRUE(of.upper == NULL);
	overlay_file__free(&of);
	return ok;
}

TEST(overlay_bind_of_a_subdirectory)
{
	static const char text[] = "4 1 0:40 /sub/dir /opt ro - overlay overlay ro,lowerdir=/a:/b\n";
	struct overlay_file of;
	bool ok;

	if (!ASSERT_OK(overlay__parse(text, sizeof(text) - 1, "/opt/tool", &of)))
		return false;
	ok = ASSERT_STREQ(of.rel, "sub/dir/tool") && ASSERT_EQ(of.nlowers, 2);
	overlay_file__free(&of);
	return ok;
}

TEST(overlay_malformed)
{
	static const char *const bad[] = {
		"1 0 0:39 / / rw - overlay overlay rw,upperdir=/u\n", /* no lowerdir */
		"1 0 0:39 / /\n",				      /* cut short */
		"1 0 0:39 / / rw overlay overlay rw,lowerdir=/a\n",   /* no separator */
		"",
	};
	struct overlay_file of;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!CHECK(overlay__parse(bad[i], strlen(bad[i]), "/x", &of) == -EINVAL,
			   "accepted %s", bad[i]))
			return false;
	return ASSERT_EQ(overlay__parse(mountinfo, sizeof(mountinfo) - 1, "relative", &of),
			 -EINVAL);
}

/* fd is the file at path (same device and inode). */
static bool same_file(int fd, const char *path)
{
	struct stat a, b;

	return CHECK(fd >= 0, "%s: %s", path, strerror(-fd)) && ASSERT_OK(fstat(fd, &a)) &&
	       ASSERT_OK(stat(path, &b)) && ASSERT_EQ(a.st_dev, b.st_dev) &&
	       ASSERT_EQ(a.st_ino, b.st_ino);
}

static bool refused(int fd, const char *why)
{
	if (fd >= 0)
		close(fd);
	return CHECK(fd == -ENOENT, "%s: %d, want -ENOENT", why, fd);
}

/*
 * A real overlay mounted in this process's namespace (needs root): the
 * layer's file is opened only when its layer lies below a layer root, and
 * comes back as the lower layer's own inode.
 */
TEST(overlay_layers_only_below_the_roots)
{
	char top[] = "/tmp/retwatch-ovl-XXXXXX", opts[512], path[128], other[128], app[128];
	const char *mine[1], *defaults[] = { OVERLAY_DEFAULT_ROOTS };
	bool ok, mounted = false;
	int fd;

	if (geteuid()) {
		test__skip("mounting an overlay needs root");
		return true;
	}
	if (!ASSERT_TRUE(mkdtemp(top)))
		return false;
	snprintf(path, sizeof(path), "%s/snapshots", top);
	ok = !mkdir(path, 0755);
	for (const char *d = "l\0u\0w\0m\0"; ok && *d; d += strlen(d) + 1) {
		snprintf(path, sizeof(path), "%s/%s", top, d);
		ok = CHECK(!mkdir(path, 0755), "mkdir %s", path);
	}
	ok = ok && test__write_file(top, "l/app", "layer file\n", 11);
	snprintf(opts, sizeof(opts), "lowerdir=%s/l,upperdir=%s/u,workdir=%s/w", top, top, top);
	snprintf(path, sizeof(path), "%s/m", top);
	mounted = ok && !mount("overlay", path, "overlay", 0, opts);
	ok = ok && CHECK(mounted, "mount overlay on %s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/m/app", top);
	snprintf(app, sizeof(app), "%s/l/app", top);
	snprintf(other, sizeof(other), "%s/snapshots", top);
	mine[0] = top;
	/* below the root given */
	ok = ok && ASSERT_OK(overlay__set_roots(mine, 1)) &&
	     same_file(fd = overlay__open_real(getpid(), path, "/"), app);
	if (ok)
		close(fd);
	/* the defaults, or another directory: the layer is not opened */
	mine[0] = other;
	ok = ok && ASSERT_OK(overlay__set_roots(mine, 1)) &&
	     refused(overlay__open_real(getpid(), path, "/"), "another root") &&
	     ASSERT_OK(overlay__set_roots(defaults, sizeof(defaults) / sizeof(defaults[0]))) &&
	     refused(overlay__open_real(getpid(), path, "/"), "the default roots");
	/* the defaults stay set: a bad root changes nothing */
	mine[0] = "relative";
	ok = ok && ASSERT_EQ(overlay__set_roots(mine, 1), -EINVAL);
	if (mounted) {
		snprintf(path, sizeof(path), "%s/m", top);
		umount2(path, MNT_DETACH);
	}
	test__rm_tree(top);
	return ok;
}

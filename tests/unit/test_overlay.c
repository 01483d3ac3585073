// SPDX-License-Identifier: MIT
/* The layers of an overlay mount, from /proc/PID/mountinfo text. */
#include <errno.h>
#include <string.h>

#include "overlay.h"
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
	     ASSERT_STREQ(of.lowers[2], "/l/data") && ASSERT_STREQ(of.rel, "app/podapp");
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

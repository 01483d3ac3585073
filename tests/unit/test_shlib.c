// SPDX-License-Identifier: MIT
#include <string.h>

#include "analysis/binary.h"
#include "trace/shlib.h"
#include "test.h"

/* Whether pattern splits into lib and func. */
static bool splits(const char *pattern, const char *lib, const char *func)
{
	char got[SHLIB_MAX_NAME];
	const char *f = NULL;

	if (!binary_pattern__library(pattern, got, sizeof(got), &f))
		return !lib;
	return lib && !strcmp(got, lib) && !strcmp(f, func);
}

TEST(pattern_library_parts)
{
	return ASSERT_TRUE(splits("libssl.so.3:SSL_write", "libssl.so.3", "SSL_write")) &&
	       ASSERT_TRUE(splits("libssl*:SSL_*", "libssl*", "SSL_*")) &&
	       ASSERT_TRUE(splits("*:malloc", "*", "malloc")) &&
	       ASSERT_TRUE(splits("/usr/lib/x86_64-linux-gnu/libc.so.6:malloc",
				  "/usr/lib/x86_64-linux-gnu/libc.so.6", "malloc")) &&
	       /* a C++ name with its library: the first single colon */
	       ASSERT_TRUE(
		       splits("libshop.so:shop::Cart::total", "libshop.so", "shop::Cart::total")) &&
	       ASSERT_TRUE(splits("libpython3.11.so.1.0:_PyEval_EvalFrameDefault",
				  "libpython3.11.so.1.0", "_PyEval_EvalFrameDefault"));
}

TEST(pattern_names_without_library)
{
	return ASSERT_TRUE(splits("SSL_write", NULL, NULL)) &&
	       /* C++ and Rust paths, signatures, Go names */
	       ASSERT_TRUE(splits("shop::Cart::total", NULL, NULL)) &&
	       ASSERT_TRUE(splits("shop::*::total(*", NULL, NULL)) &&
	       ASSERT_TRUE(splits("'shop::Cart::total(int) const'", NULL, NULL)) &&
	       ASSERT_TRUE(splits("std::map<int, a:b>::find", NULL, NULL)) &&
	       ASSERT_TRUE(splits("main.Map[go.shape.struct { a:b }]", NULL, NULL)) &&
	       /* Go 1.20's "type:" functions: no .so, no wildcard */
	       ASSERT_TRUE(splits("type:.eq.main.Point", NULL, NULL)) &&
	       /* nothing before or after the colon, an escaped wildcard */
	       ASSERT_TRUE(splits(":malloc", NULL, NULL)) &&
	       ASSERT_TRUE(splits("libc.so.6:", NULL, NULL)) &&
	       ASSERT_TRUE(splits("lib\\*:f", NULL, NULL));
}

TEST(pattern_library_too_long)
{
	char pattern[600];

	memset(pattern, 'a', 400);
	memcpy(pattern + 400, ".so:f", 6);
	return ASSERT_TRUE(splits(pattern, NULL, NULL));
}

TEST(shlib_list_one_per_file)
{
	static const char maps[] =
		"5580a0000000-5580a0001000 r-xp 00001000 fe:00 100 /app/server\n"
		"7f0000000000-7f0000010000 r-xp 00002000 fe:00 200 /usr/lib/libssl.so.3\n"
		/* a second code mapping of the same file */
		"7f0000020000-7f0000030000 r-xp 00012000 fe:00 200 /usr/lib/libssl.so.3\n"
		/* same inode number, another device: another file */
		"7f0000040000-7f0000050000 r-xp 00002000 00:36 200 /other/libssl.so.3\n"
		"7f0000060000-7f0000070000 r--p 00000000 fe:00 300 /usr/lib/libdata.so\n"
		"7f0000080000-7f0000090000 r-xp 00000000 00:00 0 \n"
		"7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]\n"
		"7f00000a0000-7f00000b0000 r-xp 00002000 fe:00 400 /usr/lib/libgone.so (deleted)\n";
	struct shlib_list l;
	bool ok;

	if (!ASSERT_EQ(shlib_list__parse(maps, sizeof(maps) - 1, &l, NULL), 0))
		return false;
	ok = ASSERT_EQ(l.n, 4) && ASSERT_STREQ(l.libs[0].name, "server") &&
	     ASSERT_STREQ(l.libs[1].name, "libssl.so.3") &&
	     ASSERT_EQ(l.libs[1].map->start, 0x7f0000000000ULL) &&
	     ASSERT_STREQ(l.libs[2].path, "/other/libssl.so.3") &&
	     ASSERT_STREQ(l.libs[3].name, "libgone.so") && ASSERT_TRUE(l.libs[3].map->deleted) &&
	     ASSERT_TRUE(shlib__matches(&l.libs[1], "libssl*")) &&
	     ASSERT_FALSE(shlib__matches(&l.libs[1], "libcrypto*")) &&
	     ASSERT_TRUE(shlib__matches(&l.libs[2], "/other/*")) &&
	     ASSERT_FALSE(shlib__matches(&l.libs[1], "/other/*"));
	shlib_list__clear(&l);
	return ok;
}

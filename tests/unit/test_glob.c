// SPDX-License-Identifier: MIT
#include "analysis/binary.h"
#include "test.h"

TEST(glob_literal_and_wildcards)
{
	return ASSERT_TRUE(glob_match("main.add", "main.add")) &&
	       ASSERT_FALSE(glob_match("main.add", "main.addMany")) &&
	       ASSERT_TRUE(glob_match("main.add*", "main.addMany")) &&
	       ASSERT_TRUE(glob_match("main.add*", "main.add")) &&
	       ASSERT_FALSE(glob_match("main.add*", "main.sub")) &&
	       ASSERT_TRUE(glob_match("parse_?", "parse_x")) &&
	       ASSERT_FALSE(glob_match("parse_?", "parse_xy")) &&
	       ASSERT_TRUE(glob_match("*", "")) &&
	       ASSERT_TRUE(glob_match("*Cart*", "main.(*Cart).Add")) &&
	       ASSERT_FALSE(glob_match("", "x"));
}

TEST(glob_go_names)
{
	/* brackets are literal: Go generic instances carry them */
	return ASSERT_TRUE(glob_match("main.Map[...]", "main.Map[...]")) &&
	       ASSERT_TRUE(glob_match("main.Map[*]", "main.Map[go.shape.int]")) &&
	       ASSERT_FALSE(glob_match("main.Map[*]", "main.Mapper")) &&
	       ASSERT_TRUE(glob_match("github.com/x/y.(*Cart).*", "github.com/x/y.(*Cart).Add")) &&
	       ASSERT_FALSE(glob_match("github.com/x/y.(*Cart).*", "github.com/x/y.Cart.Add"));
}

TEST(glob_escapes)
{
	return ASSERT_TRUE(glob_match("a\\*b", "a*b")) &&
	       ASSERT_FALSE(glob_match("a\\*b", "axb")) &&
	       ASSERT_FALSE(glob_has_wildcards("a\\*b")) &&
	       ASSERT_TRUE(glob_has_wildcards("a*b")) && ASSERT_TRUE(glob_has_wildcards("a?")) &&
	       ASSERT_FALSE(glob_has_wildcards("main.Map[x]"));
}

TEST(glob_backtracking_is_bounded)
{
	char name[4097], pat[64];

	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	snprintf(pat, sizeof(pat), "*a*a*a*a*a*a*a*a*b");
	/* quadratic at worst: returns at once even for a hostile pattern */
	return ASSERT_FALSE(glob_match(pat, name));
}

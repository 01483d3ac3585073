// SPDX-License-Identifier: MIT
/*
 * What reaches a terminal (base/termsafe.h): controls a traced program's
 * names could hold (OSC that sets a title or the clipboard, CSI that clears
 * the screen, C1 controls, bytes of no UTF-8 character) are shown as escapes;
 * UTF-8 text passes; JSON stays valid and means the same.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/termsafe.h"
#include "test.h"

TEST(termsafe_json_valid_and_same_values)
{
	char *j = termsafe__json("{\"n\":\"a\x7f"
				 "b\xc2\x9b"
				 "c\xff\",\"u\":\"\xc2\xb7\\u001b\"}\n");
	bool ok = ASSERT_TRUE(j) && ASSERT_STREQ(j, "{\"n\":\"a\\u007fb\\u009bc\\ufffd\","
						    "\"u\":\"\xc2\xb7\\u001b\"}\n");

	free(j);
	return ok;
}

/* What the stream wrote to a pipe, given in the pieces of writes. */
static bool stream_gives(const char *const *pieces, size_t n, const char *want)
{
	char got[256] = "";
	int fds[2];
	ssize_t r;
	FILE *f;

	if (!ASSERT_OK(pipe(fds)))
		return false;
	f = termsafe__stream(fds[1]);
	if (!ASSERT_TRUE(f))
		return false;
	setvbuf(f, NULL, _IONBF, 0);
	for (size_t i = 0; i < n; i++)
		fputs(pieces[i], f);
	fclose(f);
	close(fds[1]);
	r = read(fds[0], got, sizeof(got) - 1);
	close(fds[0]);
	return ASSERT_TRUE(r >= 0) && ASSERT_STREQ(got, want);
}

TEST(termsafe_escapes_controls_keeps_text)
{
	const char *in[] = { "main.\x1b]0;owned\x07x\x1b[2J\x7f\r\tok\n" };

	return stream_gives(in, 1, "main.\\x1b]0;owned\\x07x\\x1b[2J\\x7f\\x0d\tok\n");
}

TEST(termsafe_c1_and_malformed_utf8_escaped_utf8_kept)
{
	/* U+009B (CSI as C1), a stray continuation, an overlong '/', a surrogate,
	 * a cut sequence at the end */
	const char *bad[] = { "a\xc2\x9b"
			      "b\x80"
			      "c\xc0\xaf"
			      "d\xed\xa0\x80"
			      "e\xe6\x97" };
	/* Go's middle dot, a CJK name and an emoji as they are */
	const char *good[] = { "main.(*T)\xc2\xb7"
			       "f \xe6\x97\xa5\xf0\x9f\x98\x80" };

	return stream_gives(bad, 1, "a\\xc2\\x9bb\\x80c\\xc0\\xafd\\xed\\xa0\\x80e\\xe6\\x97") &&
	       stream_gives(good, 1, good[0]) &&
	       ASSERT_FALSE(termsafe__needs(good[0], strlen(good[0]))) &&
	       ASSERT_TRUE(termsafe__needs("x\x1b", 2));
}

TEST(termsafe_stream_keeps_sequences_cut_between_writes)
{
	/* a middle dot and a C1 CSI, each cut after its first byte; an ESC */
	const char *a[] = { "x\xc2", "\xb7y\xc2", "\x9b[2Jz\x1b", "]0;t\x07" };
	/* a cut sequence the stream ends in, and one a bad byte breaks */
	const char *b[] = { "p\xe6\x97", "q\xe6", "Aok\xf0\x9f" };

	return stream_gives(a, 4, "x\xc2\xb7y\\xc2\\x9b[2Jz\\x1b]0;t\\x07") &&
	       stream_gives(b, 3, "p\\xe6\\x97q\\xe6Aok\\xf0\\x9f");
}

/* What termsafe__cell() writes of s in width columns, and the columns it says. */
static bool cell_gives(const char *s, int width, bool last, const char *want, size_t cols)
{
	char *out = NULL;
	size_t len = 0, got;
	FILE *f = open_memstream(&out, &len);
	bool ok;

	if (!ASSERT_TRUE(f))
		return false;
	got = termsafe__cell(f, s, width, last);
	fclose(f);
	ok = ASSERT_STREQ(out, want) && ASSERT_EQ(got, cols);
	free(out);
	return ok;
}

TEST(termsafe_cell_ascii_fits_or_ends_in_ellipsis)
{
	return cell_gives("main.a", 6, false, "main.a", 6) &&
	       cell_gives("main.a", 8, false, "main.a  ", 8) &&
	       cell_gives("main.a", 8, true, "main.a", 6) &&
	       /* one over: the last column is the ellipsis */
	       cell_gives("main.ab", 6, false, "main.\xe2\x80\xa6", 6) &&
	       cell_gives("main.ab", 6, true, "main.\xe2\x80\xa6", 6) &&
	       cell_gives("", 3, false, "   ", 3) &&
	       /* width < 0: whole, no padding */
	       cell_gives("main.ab", -1, false, "main.ab", 7) &&
	       ASSERT_EQ(termsafe__width("main.ab"), 7);
}

TEST(termsafe_cell_edges_one_and_zero_columns)
{
	return cell_gives("a", 1, false, "a", 1) && cell_gives("ab", 1, false, "\xe2\x80\xa6", 1) &&
	       cell_gives("\xe6\x97\xa5", 1, false, "\xe2\x80\xa6", 1) &&
	       cell_gives("ab", 0, false, "", 0) && cell_gives("", 0, false, "", 0);
}

TEST(termsafe_cell_utf8_cut_at_a_character)
{
	/* Go's middle dot (2 bytes, 1 column), CJK (3 bytes, 2 columns), an
	 * emoji (4 bytes, 2 columns), a combining acute (0 columns) */
	const char *go = "p\xc2\xb7"
			 "f";
	const char *cjk = "\xe6\x97\xa5\xe6\x9c\xac";

	return ASSERT_EQ(termsafe__width(go), 3) && cell_gives(go, 3, false, go, 3) &&
	       cell_gives(go, 4, false,
			  "p\xc2\xb7"
			  "f ",
			  4) &&
	       cell_gives("a\xc2\xb7\xc2\xb7"
			  "b",
			  3, false, "a\xc2\xb7\xe2\x80\xa6", 3) &&
	       ASSERT_EQ(termsafe__width(cjk), 4) && cell_gives(cjk, 4, false, cjk, 4) &&
	       /* a wide character that would end past the room is left out whole,
		* and the cell padded to its width */
	       cell_gives(cjk, 3, false, "\xe6\x97\xa5\xe2\x80\xa6", 3) &&
	       cell_gives(cjk, 2, false, "\xe2\x80\xa6 ", 2) &&
	       cell_gives("x\xf0\x9f\x98\x80y", 3, false, "x\xe2\x80\xa6 ", 3) &&
	       cell_gives("e\xcc\x81t\xc3\xa9", 3, false, "e\xcc\x81t\xc3\xa9", 3);
}

TEST(termsafe_cell_escapes_take_four_columns)
{
	/* ESC, a C1 CSI (two escaped bytes), a tab and a newline, a bad byte */
	const char *evil = "a\x1b"
			   "b";

	return ASSERT_EQ(termsafe__width(evil), 6) && cell_gives(evil, 8, false, "a\\x1bb  ", 8) &&
	       /* no escape cut in half: it goes whole, or not at all */
	       cell_gives(evil, 5, false, "a\xe2\x80\xa6   ", 5) &&
	       cell_gives(evil, 5, true, "a\xe2\x80\xa6", 2) &&
	       ASSERT_EQ(termsafe__width("\xc2\x9b"), 8) &&
	       cell_gives("\xc2\x9bz", 9, false, "\\xc2\\x9bz", 9) &&
	       cell_gives("a\tb\nc", -1, false, "a\\x09b\\x0ac", 11) &&
	       cell_gives("\xff\xe6\x97", -1, false, "\\xff\\xe6\\x97", 12);
}

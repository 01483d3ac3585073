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

/* SPDX-License-Identifier: MIT */
/*
 * A small test harness: TEST(name) registers a test; ASSERT_*() return false
 * from the test on failure (after printing where), so a test can also use
 * `if (!ASSERT_...) goto cleanup;` to release what it holds.
 */
#ifndef RETWATCH_TEST_H
#define RETWATCH_TEST_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef bool (*test_fn)(void);
void test__register(const char *name, test_fn fn);
/* Path of a fixture under $RETWATCH_FIXTURES (default build/fixtures), or NULL
 * when it does not exist (the test is then skipped with a message). */
const char *test__fixture(const char *rel);
void test__skip(const char *why);
/* Removes dir and everything under it, symlinks not followed. */
void test__rm_tree(const char *dir);
/* Writes len bytes to dir/name; false, with a message, when it cannot. */
bool test__write_file(const char *dir, const char *name, const void *data, size_t len);

#define TEST(name)                                                     \
	static bool test_##name(void);                                 \
	__attribute__((constructor)) static void register_##name(void) \
	{                                                              \
		test__register(#name, test_##name);                    \
	}                                                              \
	static bool test_##name(void)

#define CHECK(cond, fmt, ...)                                                                     \
	({                                                                                        \
		bool ok_ = (cond);                                                                \
		if (!ok_)                                                                         \
			fprintf(stderr, "  %s:%d: " fmt "\n", __FILE__, __LINE__, ##__VA_ARGS__); \
		ok_;                                                                              \
	})

#define ASSERT_TRUE(c) CHECK((c), "expected true: %s", #c)
#define ASSERT_FALSE(c) CHECK(!(c), "expected false: %s", #c)
#define ASSERT_EQ(a, b)                                                    \
	({                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);        \
		CHECK(a_ == b_, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
	})
#define ASSERT_NEQ(a, b)                                            \
	({                                                          \
		long long a_ = (long long)(a), b_ = (long long)(b); \
		CHECK(a_ != b_, "%s != %s: both %lld", #a, #b, a_); \
	})
#define ASSERT_OK(e) ASSERT_EQ((e), 0)
#define ASSERT_STREQ(a, b)                                                              \
	({                                                                              \
		const char *a_ = (a), *b_ = (b);                                        \
		CHECK(a_ &&b_ && !strcmp(a_, b_), "%s == %s: \"%s\" != \"%s\"", #a, #b, \
		      a_ ? a_ : "(null)", b_ ? b_ : "(null)");                          \
	})
#define ASSERT_STRCONTAINS(hay, needle)                                                          \
	({                                                                                       \
		const char *h_ = (hay), *n_ = (needle);                                          \
		CHECK(h_ &&strstr(h_, n_), "\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", \
		      n_);                                                                       \
	})

/* Little-endian stores, for tests that build binary tables by hand. */
static inline void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

#endif

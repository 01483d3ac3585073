// SPDX-License-Identifier: MIT
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#define MAX_TESTS 512

static struct {
	const char *name;
	test_fn fn;
} tests[MAX_TESTS];
static int ntests;
static const char *skip_reason;

void test__register(const char *name, test_fn fn)
{
	if (ntests < MAX_TESTS)
		tests[ntests++] = (typeof(tests[0])){ name, fn };
}

void test__skip(const char *why)
{
	skip_reason = why;
}

const char *test__fixture(const char *rel)
{
	static char path[4][4096];
	static int slot;
	const char *dir = getenv("RETWATCH_FIXTURES");
	char *p = path[slot++ % 4];

	snprintf(p, sizeof(path[0]), "%s/%s", dir ? dir : "build/fixtures", rel);
	if (access(p, R_OK))
		return NULL;
	return p;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void test__rm_tree(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

bool test__write_file(const char *dir, const char *name, const void *data, size_t len)
{
	char path[4096];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!CHECK(f, "cannot create %s: %s", path, strerror(errno)))
		return false;
	ok = fwrite(data, 1, len, f) == len;
	return ASSERT_TRUE(!fclose(f) && ok);
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0;

	for (int i = 0; i < ntests; i++) {
		if (argc > 1 && !strstr(tests[i].name, argv[1]))
			continue;
		skip_reason = NULL;
		bool ok = tests[i].fn();
		if (skip_reason) {
			printf("SKIP %s: %s\n", tests[i].name, skip_reason);
			skipped++;
		} else if (ok) {
			printf("ok   %s\n", tests[i].name);
			passed++;
		} else {
			printf("FAIL %s\n", tests[i].name);
			failed++;
		}
	}
	printf("unit: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}

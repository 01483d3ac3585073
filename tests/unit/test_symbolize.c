// SPDX-License-Identifier: MIT
/* /proc/PID/maps parsing, and symbolization of this very process. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/procmaps.h"
#include "trace/symbolize.h"
#include "test.h"

/* Non-static and not inlined: the test looks its name up in this binary. */
__attribute__((noinline)) uintptr_t symbolize_test_target(void);
__attribute__((noinline)) uintptr_t symbolize_test_target(void)
{
	__asm__ volatile("" ::: "memory");
	return (uintptr_t)__builtin_return_address(0);
}

static const char maps_text[] =
	/* out of order; the kernel sorts them, a hostile text need not */
	"7f0000400000-7f0000401000 r-xp 00002000 103:0a 99 /opt/my app/bin x\n"
	"55d0c0000000-55d0c0001000 r--p 00000000 fd:01 1234   /usr/bin/prog\n"
	"55d0c0001000-55d0c0005000 r-xp 00001000 fd:01 1234                     /usr/bin/prog\n"
	"7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n"
	"7f0000010000-7f0000011000 r-xp 00000000 00:00 0\n"
	"7f0000200000-7f0000300000 r-xp 00010000 08:02 77 /tmp/a.out (deleted)\n"
	"7ffc00001000-7ffc00003000 r-xp 00000000 00:00 0                          [vdso]\n"
	/* overlaps the mapping above: dropped */
	"7ffc00002000-7ffc00004000 r-xp 00000000 00:00 0 [overlap]\n"
	"\n"
	"garbage\n"
	"7f0000500000-7f0000400000 r-xp 00000000 00:00 0 /start/after/end\n"
	"7f0000600000-7f0000601000 r-xp\n"
	"7f0000700000-7f0000701000 rwzp 00000000 00:00 0 /bad/perms\n"
	"7f0000800000-7f0000801000 r-xp 00000000 00:00 99999999999999999999999 /inode/overflow\n"
	"10000000000000000-10000000000001000 r-xp 00000000 00:00 0 /seventeen/digits\n"
	"7f0000a00000-7f0000a01000 r-xp 00000000 0000000001:00 0 /long/major\n"
	"7f0000b00000-7f0000b01000 r-xp 00000000 00:00 0x1 /hex/inode\n"
	"7f0000c00000 7f0000c01000 r-xp 00000000 00:00 0 /no/dash\n"
	"7f0000d00000-7f0000d01000 r-xp 00000000 00:00 0 /has\0nul\n"
	/* last line without a newline */
	"7f0000e00000-7f0000e01000 r-xs 00000000 00:05 5 /dev/zero";

TEST(procmaps_parse_crafted)
{
	struct rw_error err = {};
	struct procmaps *m = procmaps__parse(maps_text, sizeof(maps_text) - 1, &err);
	const struct procmap *v;
	size_t n;
	bool ok;

	if (!CHECK(m, "%s", err.msg))
		return false;
	v = procmaps__maps(m, &n);
	ok = ASSERT_EQ(n, 7);
	if (!ok)
		goto cleanup;
	ok = ASSERT_EQ(v[0].start, 0x55d0c0001000) && ASSERT_EQ(v[0].end, 0x55d0c0005000) &&
	     ASSERT_EQ(v[0].offset, 0x1000) && ASSERT_EQ(v[0].dev_major, 0xfd) &&
	     ASSERT_EQ(v[0].dev_minor, 1) && ASSERT_EQ(v[0].inode, 1234) &&
	     ASSERT_STREQ(v[0].path, "/usr/bin/prog") && ASSERT_FALSE(v[0].deleted);
	/* anonymous, with and without the trailing space */
	ok = ok && ASSERT_EQ(v[1].start, 0x7f0000000000) && ASSERT_STREQ(v[1].path, "") &&
	     ASSERT_EQ(v[1].inode, 0) && ASSERT_STREQ(v[2].path, "");
	ok = ok && ASSERT_STREQ(v[3].path, "/tmp/a.out") && ASSERT_TRUE(v[3].deleted) &&
	     ASSERT_EQ(v[3].offset, 0x10000) && ASSERT_EQ(v[3].dev_major, 8);
	ok = ok && ASSERT_STREQ(v[4].path, "/opt/my app/bin x") &&
	     ASSERT_EQ(v[4].dev_major, 0x103) && ASSERT_EQ(v[4].dev_minor, 0xa);
	ok = ok && ASSERT_STREQ(v[5].path, "/dev/zero") && ASSERT_EQ(v[5].inode, 5);
	ok = ok && ASSERT_STREQ(v[6].path, "[vdso]") && ASSERT_EQ(v[6].end, 0x7ffc00003000);
	if (!ok)
		goto cleanup;
	ok = ASSERT_EQ(procmaps__find(m, 0x55d0c0001000), &v[0]) &&
	     ASSERT_EQ(procmaps__find(m, 0x55d0c0004fff), &v[0]) &&
	     ASSERT_EQ(procmaps__find(m, 0x55d0c0005000), NULL) &&
	     ASSERT_EQ(procmaps__find(m, 0x55d0c0000fff), NULL) &&
	     ASSERT_EQ(procmaps__find(m, 0), NULL) &&
	     ASSERT_EQ(procmaps__find(m, UINT64_MAX), NULL) &&
	     ASSERT_EQ(procmaps__find(m, 0x7f0000400800), &v[4]) &&
	     ASSERT_EQ(procmaps__find(m, 0x7ffc00003000), NULL);
cleanup:
	procmaps__free(m);
	return ok;
}

TEST(procmaps_parse_empty_and_junk)
{
	static const char junk[] = "\n\n-\n - \n0-1\n0-1 ---p 0 0:0 0\nffffffffffffffff-0\n\xff\xfe";
	struct procmaps *a = procmaps__parse("", 0, NULL), *b;
	size_t n = 1;
	bool ok;

	ok = ASSERT_TRUE(a) && ASSERT_EQ((procmaps__maps(a, &n), n), 0) &&
	     ASSERT_EQ(procmaps__find(a, 0x1000), NULL);
	b = procmaps__parse(junk, sizeof(junk) - 1, NULL);
	ok = ok && ASSERT_TRUE(b) && ASSERT_EQ((procmaps__maps(b, &n), n), 0);
	procmaps__free(a);
	procmaps__free(b);
	procmaps__free(NULL);
	return ok;
}

TEST(procmap_file_path)
{
	struct procmap map = { .start = 0x7f12ab000000, .end = 0x7f12ab021000 };
	char buf[64], tiny[8];

	return ASSERT_OK(procmap__file_path(&map, 42, buf, sizeof(buf))) &&
	       ASSERT_STREQ(buf, "/proc/42/map_files/7f12ab000000-7f12ab021000") &&
	       ASSERT_EQ(procmap__file_path(&map, 42, tiny, sizeof(tiny)), -ENAMETOOLONG);
}

TEST(procmaps_load_self)
{
	uint64_t addr = (uintptr_t)symbolize_test_target;
	const struct procmap *map;
	struct rw_error err = {};
	struct procmaps *m;
	char exe[PATH_MAX];
	ssize_t n;
	bool ok;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (!ASSERT_TRUE(n > 0))
		return false;
	exe[n] = 0;
	m = procmaps__load(getpid(), &err);
	if (!CHECK(m, "%s", err.msg))
		return false;
	map = procmaps__find(m, addr);
	ok = ASSERT_TRUE(map) && ASSERT_STREQ(map->path, exe) && ASSERT_TRUE(map->inode);
	procmaps__free(m);
	/* pid_max is at most 2^22 */
	m = procmaps__load(0x7ffffff0, &err);
	return ok && ASSERT_FALSE(m) && ASSERT_EQ(errno, ENOENT) &&
	       ASSERT_STRCONTAINS(err.msg, "failed to open /proc/2147483632/maps");
}

/* Whether this process may open its own map_files (CAP_SYS_ADMIN). */
static bool can_open_map_files(void)
{
	uint64_t addr = (uintptr_t)symbolize_test_target;
	struct procmaps *m = procmaps__load(getpid(), NULL);
	const struct procmap *map = m ? procmaps__find(m, addr) : NULL;
	char path[96];
	int fd = -1;

	if (map && !procmap__file_path(map, getpid(), path, sizeof(path)))
		fd = open(path, O_RDONLY | O_CLOEXEC);
	procmaps__free(m);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

TEST(symbolize_self)
{
	uint64_t fn = (uintptr_t)symbolize_test_target, ret_addr;
	struct binary_cache *cache = binary_cache__new(8);
	struct symbolizer *s = symbolizer__new(cache);
	char buf[512], want[PATH_MAX + 64], exe[PATH_MAX];
	size_t hits, misses;
	ssize_t n;
	bool ok = ASSERT_TRUE(cache) && ASSERT_TRUE(s);

	if (!ok)
		goto cleanup;
	if (!can_open_map_files()) {
		test__skip("cannot open /proc/self/map_files (needs CAP_SYS_ADMIN)");
		goto cleanup;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (!ASSERT_TRUE(n > 0))
		goto cleanup;
	exe[n] = 0;
	/* the instruction pointer: exact */
	snprintf(want, sizeof(want), "symbolize_test_target+0x0 (%s)", exe);
	ok = ASSERT_OK(symbolizer__resolve(s, getpid(), fn, true, buf, sizeof(buf))) &&
	     ASSERT_STREQ(buf, want);
	snprintf(want, sizeof(want), "symbolize_test_target+0x3 (%s)", exe);
	ok = ok && ASSERT_OK(symbolizer__resolve(s, getpid(), fn + 3, true, buf, sizeof(buf))) &&
	     ASSERT_STREQ(buf, want);
	/* a return address at a function's first byte belongs to the one before */
	ok = ok && ASSERT_TRUE(symbolizer__resolve(s, getpid(), fn, false, buf, sizeof(buf)) ||
			       strncmp(buf, "symbolize_test_target", 21));
	/* a real return address: into this test function, after the call */
	ret_addr = symbolize_test_target();
	ok = ok && ASSERT_OK(symbolizer__resolve(s, getpid(), ret_addr, false, buf, sizeof(buf))) &&
	     ASSERT_STRCONTAINS(buf, "test_symbolize_self+0x");
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_EQ(misses, 1) && ASSERT_EQ(hits, 0);
	/* forgotten, then read again: the analysis comes from the cache */
	symbolizer__forget(s, getpid());
	symbolizer__forget(s, getpid());
	ok = ok && ASSERT_OK(symbolizer__resolve(s, getpid(), fn, true, buf, sizeof(buf)));
	binary_cache__stats(cache, &hits, &misses);
	ok = ok && ASSERT_EQ(misses, 1) && ASSERT_EQ(hits, 1);
	/* a function of a shared library */
	ok = ok &&
	     ASSERT_OK(symbolizer__resolve(s, getpid(), (uintptr_t)getppid, true, buf,
					   sizeof(buf))) &&
	     ASSERT_STRCONTAINS(buf, "getppid+0x0 (") && ASSERT_STRCONTAINS(buf, "libc.so");
	/* a truncated buffer still holds a string */
	ok = ok && ASSERT_OK(symbolizer__resolve(s, getpid(), fn, true, buf, 10)) &&
	     ASSERT_STREQ(buf, "symbolize");
cleanup:
	symbolizer__free(s);
	binary_cache__free(cache);
	return ok;
}

TEST(symbolize_rereads_maps)
{
	uint64_t fn = (uintptr_t)symbolize_test_target, copy;
	struct symbolizer *s = symbolizer__new(NULL);
	struct procmaps *m = procmaps__load(getpid(), NULL);
	const struct procmap *text = m ? procmaps__find(m, fn) : NULL;
	char buf[512];
	void *p = MAP_FAILED;
	int fd = -1;
	bool ok = ASSERT_TRUE(s) && ASSERT_TRUE(text);

	if (!ok)
		goto cleanup;
	if (!can_open_map_files()) {
		test__skip("cannot open /proc/self/map_files (needs CAP_SYS_ADMIN)");
		goto cleanup;
	}
	/* read the maps, then map our code a second time, at a file offset */
	ok = ASSERT_OK(symbolizer__resolve(s, getpid(), fn, true, buf, sizeof(buf)));
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (!ok || !ASSERT_TRUE(fd >= 0))
		goto cleanup;
	p = mmap(NULL, text->end - text->start, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd,
		 text->offset);
	if (!ASSERT_TRUE(p != MAP_FAILED))
		goto cleanup;
	copy = (uintptr_t)p + (fn - text->start);
	usleep(110 * 1000); /* maps are reread at most every 100 ms */
	ok = ASSERT_OK(symbolizer__resolve(s, getpid(), copy + 2, false, buf, sizeof(buf))) &&
	     ASSERT_STRCONTAINS(buf, "symbolize_test_target+0x2 (");
cleanup:
	if (p != MAP_FAILED)
		munmap(p, text->end - text->start);
	if (fd >= 0)
		close(fd);
	procmaps__free(m);
	symbolizer__free(s);
	return ok;
}

TEST(symbolize_unknown_addresses)
{
	struct symbolizer *s = symbolizer__new(NULL);
	unsigned long vdso = getauxval(AT_SYSINFO_EHDR);
	char buf[256], want[64];
	bool ok = ASSERT_TRUE(s);

	if (!ok)
		return false;
	ok = ASSERT_EQ(symbolizer__resolve(s, getpid(), 0x10, true, buf, sizeof(buf)), -ENOENT) &&
	     ASSERT_STREQ(buf, "0x10 (?)");
	ok = ok &&
	     ASSERT_EQ(symbolizer__resolve(s, getpid(), 0, false, buf, sizeof(buf)), -ENOENT) &&
	     ASSERT_STREQ(buf, "0x0 (?)");
	if (vdso) {
		snprintf(want, sizeof(want), "0x%lx ([vdso])", vdso + 0x10);
		ok = ok &&
		     ASSERT_TRUE(symbolizer__resolve(s, getpid(), vdso + 0x10, true, buf,
						     sizeof(buf)) < 0) &&
		     ASSERT_STREQ(buf, want);
	}
	ok = ok &&
	     ASSERT_EQ(symbolizer__resolve(s, 0x7ffffff0, 0x401000, false, buf, sizeof(buf)),
		       -ESRCH) &&
	     ASSERT_STREQ(buf, "0x401000 (?)");
	symbolizer__forget(s, 12345); /* never seen */
	symbolizer__free(s);
	symbolizer__free(NULL);
	return ok;
}

/* A C++ program's frame reads as its demangled name. */
TEST(symbolize_demangles)
{
	const char *path = test__fixture("cpp/shop"), *pat[] = { "shop::Cart::total(int) const" };
	struct binary_match m = {};
	struct rw_error err = {};
	struct symbolizer *s = NULL;
	struct procmaps *maps = NULL;
	struct binary *b = NULL;
	const struct procmap *pm;
	char buf[256], ready[64];
	uint64_t addr = 0;
	size_t n;
	bool ok = false;
	FILE *out;
	int in[2], outp[2];
	pid_t pid;

	if (!path) {
		test__skip("cpp fixture not built (tests/fixtures/build.sh)");
		return true;
	}
	if (!ASSERT_OK(pipe(in)) || !ASSERT_OK(pipe(outp)))
		return false;
	pid = fork();
	if (!ASSERT_TRUE(pid >= 0))
		return false;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(outp[1], 1);
		close(in[1]);
		close(outp[0]);
		execl(path, path, "1", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(outp[1]);
	out = fdopen(outp[0], "r");
	/* "ready PID": its mappings are in place */
	if (!ASSERT_TRUE(out && fgets(ready, sizeof(ready), out) && !strncmp(ready, "ready ", 6)))
		goto cleanup;
	b = binary__open(NULL, path, &err);
	maps = procmaps__load(pid, &err);
	if (!ASSERT_TRUE(b && maps) || !ASSERT_OK(binary__match(b, pat, 1, 16, &m, &err)) ||
	    !ASSERT_EQ(m.nfuncs, 1))
		goto cleanup;
	pm = procmaps__maps(maps, &n);
	for (size_t i = 0; i < n; i++)
		if (strstr(pm[i].path, "cpp/shop") && m.funcs[0]->file_offset >= pm[i].offset &&
		    m.funcs[0]->file_offset - pm[i].offset < pm[i].end - pm[i].start)
			addr = pm[i].start + (m.funcs[0]->file_offset - pm[i].offset) + 2;
	s = symbolizer__new(NULL);
	ok = ASSERT_NEQ(addr, 0) && ASSERT_TRUE(s) &&
	     ASSERT_OK(symbolizer__resolve(s, pid, addr, true, buf, sizeof(buf))) &&
	     ASSERT_STRCONTAINS(buf, "shop::Cart::total(int) const+0x2 (");
cleanup:
	symbolizer__free(s);
	binary_match__clear(&m);
	binary__put(b);
	procmaps__free(maps);
	close(in[1]); /* the program reads EOF, runs, exits */
	if (out)
		fclose(out);
	waitpid(pid, NULL, 0);
	return ok;
}

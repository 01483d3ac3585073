// SPDX-License-Identifier: MIT
/*
 * Abandoned analyses (issue 25, item 4): a glob's cost is bounded, a reading
 * past the time limit is cancelled (its thread's CPU stops), and a tenant's
 * abandoned readings hold no other tenant's analyses. The files are made
 * here: an ET_EXEC with one R+X PT_LOAD over .text (a RET per symbol), its
 * .symtab and .strtab.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "analysis/analyzer.h"
#include "analysis/binary.h"
#include "base/cancel.h"
#include "test.h"

#define BASE 0x10000000ULL
#define TEXT_OFF 0x1000ULL

static bool put(int fd, const void *p, size_t n, size_t off)
{
	return !n || pwrite(fd, p, n, (off_t)off) == (ssize_t)n;
}

/*
 * An executable of nsyms functions of one RET each, named by name_len bytes
 * of 'a' ending in the symbol's number, written to a new file under dir;
 * true with its path in ret_path.
 */
static bool write_names_elf(const char *dir, size_t nsyms, size_t name_len, char *ret_path,
			    size_t path_len)
{
	static const char shstr[] = "\0.text\0.symtab\0.strtab\0.shstrtab";
	size_t ntext = nsyms, nsym = (nsyms + 1) * sizeof(Elf64_Sym),
	       nstr = 1 + nsyms * (name_len + 1);
	size_t off_sym, off_str, off_shstr, off_sh;
	Elf64_Shdr sh[5] = {};
	Elf64_Ehdr eh = {};
	Elf64_Phdr ph = {};
	uint8_t *text = malloc(ntext);
	Elf64_Sym *sym = calloc(nsyms + 1, sizeof(*sym));
	char *str = calloc(1, nstr);
	bool ok = false;
	int fd = -1;

	snprintf(ret_path, path_len, "%s/names-%zux%zu", dir, nsyms, name_len);
	if (!text || !sym || !str)
		goto cleanup;
	memset(text, 0xc3, ntext);
	for (size_t i = 0; i < nsyms; i++) {
		char *name = str + 1 + i * (name_len + 1);

		memset(name, 'a', name_len);
		snprintf(name + name_len - 6, 7, "%06zu", i);
		sym[1 + i] = (Elf64_Sym){ .st_name = (uint32_t)(name - str),
					  .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
					  .st_shndx = 1,
					  .st_value = BASE + TEXT_OFF + i,
					  .st_size = 1 };
	}
	off_sym = (TEXT_OFF + ntext + 15) & ~15ul;
	off_str = off_sym + nsym;
	off_shstr = off_str + nstr;
	off_sh = (off_shstr + sizeof(shstr) + 7) & ~7ul;
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_entry = BASE + TEXT_OFF;
	eh.e_phoff = sizeof(eh);
	eh.e_shoff = off_sh;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = 5;
	eh.e_shstrndx = 4;
	ph = (Elf64_Phdr){ .p_type = PT_LOAD,
			   .p_flags = PF_R | PF_X,
			   .p_vaddr = BASE,
			   .p_paddr = BASE,
			   .p_filesz = TEXT_OFF + ntext,
			   .p_memsz = TEXT_OFF + ntext,
			   .p_align = 0x1000 };
	sh[1] = (Elf64_Shdr){ .sh_name = 1,
			      .sh_type = SHT_PROGBITS,
			      .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
			      .sh_addr = BASE + TEXT_OFF,
			      .sh_offset = TEXT_OFF,
			      .sh_size = ntext,
			      .sh_addralign = 16 };
	sh[2] = (Elf64_Shdr){ .sh_name = 7,
			      .sh_type = SHT_SYMTAB,
			      .sh_offset = off_sym,
			      .sh_size = nsym,
			      .sh_link = 3,
			      .sh_info = 1,
			      .sh_addralign = 8,
			      .sh_entsize = sizeof(Elf64_Sym) };
	sh[3] = (Elf64_Shdr){ .sh_name = 15,
			      .sh_type = SHT_STRTAB,
			      .sh_offset = off_str,
			      .sh_size = nstr,
			      .sh_addralign = 1 };
	sh[4] = (Elf64_Shdr){ .sh_name = 23,
			      .sh_type = SHT_STRTAB,
			      .sh_offset = off_shstr,
			      .sh_size = sizeof(shstr),
			      .sh_addralign = 1 };
	fd = open(ret_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	ok = CHECK(fd >= 0, "cannot create %s", ret_path) && put(fd, &eh, sizeof(eh), 0) &&
	     put(fd, &ph, sizeof(ph), sizeof(eh)) && put(fd, text, ntext, TEXT_OFF) &&
	     put(fd, sym, nsym, off_sym) && put(fd, str, nstr, off_str) &&
	     put(fd, shstr, sizeof(shstr), off_shstr) && put(fd, sh, sizeof(sh), off_sh);
cleanup:
	if (fd >= 0)
		close(fd);
	free(text);
	free(sym);
	free(str);
	return ok;
}

/* The whole process's CPU time, every thread's (the workers are detached). */
static double process_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Asks until the answer is not PENDING or seconds pass. */
static enum analysis_state settle_for(struct analyzer *a, struct binary_cache *c, int efd,
				      const char *path, const char *const *pats, size_t n,
				      struct rw_error *err, double seconds)
{
	enum analysis_state s = ANALYSIS_PENDING;
	struct pollfd p = { .fd = efd, .events = POLLIN };
	double end = mono() + seconds;
	uint64_t v;

	while (s == ANALYSIS_PENDING && mono() < end) {
		s = analyzer__check(a, c, path, pats, n, err);
		if (s == ANALYSIS_PENDING && poll(&p, 1, 20) > 0 && read(efd, &v, sizeof(v)) < 0)
			break;
	}
	return s;
}

static size_t abandoned_now(struct analyzer *a)
{
	struct analyzer_counters n;

	analyzer__counters(a, &n);
	return n.abandoned;
}

/*
 * The reviewer's glob (1 KB) is refused at once over the reviewer's file
 * (1,000 names of 16 KB): it cost 22.8 s of CPU. So is a glob of too many
 * '*'; a name past GLOB_MAX_NAME is left to exact names.
 */
TEST(glob_cost_is_bounded_with_an_error_naming_the_limit)
{
	char dir[] = "/tmp/rw-cancel-XXXXXX", path[128], pat[1025], stars[64];
	static char exact[16385];
	const char *pats[1];
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b = NULL;
	bool ok = false;
	double t0;

	if (!ASSERT_TRUE(mkdtemp(dir)) || !write_names_elf(dir, 1000, 16384, path, sizeof(path)))
		goto cleanup;
	b = binary__open(NULL, path, &err);
	if (!CHECK(b, "%s", err.msg) || !ASSERT_EQ(binary__nfuncs(b), 1000))
		goto cleanup;
	pat[0] = '*';
	memset(pat + 1, 'a', sizeof(pat) - 3);
	pat[sizeof(pat) - 2] = 'b';
	pat[sizeof(pat) - 1] = 0;
	pats[0] = pat;
	t0 = thread_cpu();
	if (!ASSERT_EQ(binary__match(b, pats, 1, 100000, &m, &err), -EINVAL) ||
	    !CHECK(thread_cpu() - t0 < 0.5, "refusing took %.2f s of CPU", thread_cpu() - t0) ||
	    !ASSERT_STRCONTAINS(err.msg, "1024 bytes long, more than 256") ||
	    !ASSERT_STRCONTAINS(err.msg, "shorten it"))
		goto cleanup;
	snprintf(stars, sizeof(stars), "a*b*c*d*e*f*g*h*i*j");
	pats[0] = stars;
	if (!ASSERT_EQ(binary__match(b, pats, 1, 100000, &m, &err), -EINVAL) ||
	    !ASSERT_STRCONTAINS(err.msg, "holds 9 '*', more than 8"))
		goto cleanup;
	/* names of 16 KB are past GLOB_MAX_NAME: no glob reaches them, their exact name does */
	pats[0] = "*000007";
	if (!ASSERT_OK(binary__match(b, pats, 1, 100000, &m, &err)) || !ASSERT_EQ(m.nfuncs, 0))
		goto cleanup;
	binary_match__clear(&m);
	memset(exact, 'a', 16384 - 6);
	strcpy(exact + 16384 - 6, "000007");
	pats[0] = exact;
	ok = ASSERT_OK(binary__match(b, pats, 1, 100000, &m, &err)) && ASSERT_EQ(m.nfuncs, 1);
cleanup:
	binary_match__clear(&m);
	binary__put(b);
	test__rm_tree(dir);
	return ok;
}

/* 64 globs of GLOB_MAX_LEN bytes: '*', 'a's that every name holds, then what no name ends with. */
static void costly_globs(const char *ret_pats[64])
{
	static char pat[64][GLOB_MAX_LEN + 1];

	for (size_t i = 0; i < 64; i++) {
		pat[i][0] = '*';
		memset(pat[i] + 1, 'a', GLOB_MAX_LEN - 3);
		pat[i][GLOB_MAX_LEN - 2] = 'A' + i % 26;
		pat[i][GLOB_MAX_LEN - 1] = 'A' + i / 26;
		ret_pats[i] = pat[i];
	}
}

/*
 * Within the bounds a glob still costs: 64 patterns of 256 bytes over 1,000
 * names of 4 KB (about 4 s of CPU each without ASan). Past a 200 ms limit the
 * analysis fails as timed out, and its worker stops: the abandoned worker
 * ends within a second and the process's CPU no longer grows.
 */
TEST(analyzer_cancels_an_abandoned_reading)
{
	char dir[] = "/tmp/rw-cancel-XXXXXX", path[128];
	const char *pats[64];
	struct binary_cache *c = binary_cache__new(4);
	struct rw_error err = {};
	struct analyzer *a = NULL;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	double failed_at, ended_at, cpu0, cpu1, spent0 = process_cpu();
	bool ok = false;

	if (!ASSERT_TRUE(c && efd >= 0 && mkdtemp(dir)) ||
	    !write_names_elf(dir, 1000, GLOB_MAX_NAME, path, sizeof(path)))
		goto cleanup;
	costly_globs(pats);
	a = analyzer__new(efd, 200 * 1000000ull);
	if (!ASSERT_TRUE(a))
		goto cleanup;
	if (!ASSERT_EQ(settle_for(a, c, efd, path, pats, 64, &err, 30), ANALYSIS_FAILED) ||
	    !ASSERT_STRCONTAINS(err.msg, "--analysis-timeout"))
		goto cleanup;
	failed_at = mono();
	while (abandoned_now(a) && mono() - failed_at < 5)
		usleep(1000);
	ended_at = mono();
	cpu0 = process_cpu();
	usleep(1000000);
	cpu1 = process_cpu();
	fprintf(stderr,
		"  the abandoned worker ended %.3f s after the timeout; CPU over the next second "
		"%.3f s; %.2f s of CPU in all\n",
		ended_at - failed_at, cpu1 - cpu0, cpu1 - spent0);
	ok = CHECK(!abandoned_now(a), "the abandoned worker still runs %.1f s after the timeout",
		   mono() - failed_at) &&
	     CHECK(ended_at - failed_at < 1.0, "the worker ended %.3f s after the timeout",
		   ended_at - failed_at) &&
	     CHECK(cpu1 - cpu0 < 0.1, "the process spent %.3f s of CPU in the second after",
		   cpu1 - cpu0);
cleanup:
	analyzer__free(a);
	binary_cache__free(c);
	if (efd >= 0)
		close(efd);
	test__rm_tree(dir);
	return ok;
}

/*
 * The same reading, asked once and then not again (the loop that would
 * abandon it is busy): it stops at its limit by itself, the process's CPU
 * does not grow, and the next question gets the time-out with no worker
 * abandoned.
 */
TEST(analyzer_reading_stops_at_its_limit_unasked)
{
	char dir[] = "/tmp/rw-cancel-XXXXXX", path[128];
	const char *pats[64];
	struct binary_cache *c = binary_cache__new(4);
	struct rw_error err = {};
	struct analyzer *a = NULL;
	struct analyzer_counters n;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	double cpu0, cpu1;
	bool ok = false;

	if (!ASSERT_TRUE(c && efd >= 0 && mkdtemp(dir)) ||
	    !write_names_elf(dir, 1000, GLOB_MAX_NAME, path, sizeof(path)))
		goto cleanup;
	costly_globs(pats);
	a = analyzer__new(efd, 200 * 1000000ull);
	if (!ASSERT_TRUE(a) ||
	    !ASSERT_EQ(analyzer__check(a, c, path, pats, 64, &err), ANALYSIS_PENDING))
		goto cleanup;
	usleep(1200000);
	cpu0 = process_cpu();
	usleep(1000000);
	cpu1 = process_cpu();
	fprintf(stderr, "  unasked: CPU over the second from 1.2 s after the start %.3f s\n",
		cpu1 - cpu0);
	if (!CHECK(cpu1 - cpu0 < 0.1, "the process spent %.3f s of CPU in that second",
		   cpu1 - cpu0) ||
	    !ASSERT_EQ(settle_for(a, c, efd, path, pats, 64, &err, 5), ANALYSIS_FAILED) ||
	    !ASSERT_STRCONTAINS(err.msg, "--analysis-timeout"))
		goto cleanup;
	analyzer__counters(a, &n);
	ok = ASSERT_EQ(n.timeouts, 1) && ASSERT_EQ(n.abandoned, 0);
cleanup:
	analyzer__free(a);
	binary_cache__free(c);
	if (efd >= 0)
		close(efd);
	test__rm_tree(dir);
	return ok;
}

/* A reading that no cancel stops (a read blocked on a hung file system), until released. */
static atomic_bool held_release;

static struct binary *held_read(int fd, char **patterns, size_t npatterns, struct rw_error *err)
{
	struct binary_match m;
	struct binary *b;
	char path[64];

	if (npatterns && !strcmp(patterns[0], "hold")) {
		while (!atomic_load(&held_release))
			usleep(1000);
		rw_error_set(err, EIO, "released");
		return NULL;
	}
	/* as the analyzer's own: the match's answer is remembered by the binary */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	b = binary__open(NULL, path, err);
	if (b && !binary__match(b, (const char *const *)patterns, npatterns, BINARY_DEFAULT_LIMIT,
				&m, NULL))
		binary_match__clear(&m);
	return b;
}

/*
 * Namespace a's reading is abandoned and still runs: a's next analysis waits
 * for it, b's runs at once; once a's ends, a's waiting one runs.
 */
TEST(analyzer_abandoned_readings_hold_only_their_namespace)
{
	char dir[] = "/tmp/rw-cancel-XXXXXX", path[128];
	const char *hold[] = { "hold" }, *next_a[] = { "f*" }, *for_b[] = { "g*" };
	struct binary_cache *c = binary_cache__new(4);
	struct rw_error err = {};
	struct analyzer *a = NULL;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	bool ok = false;

	atomic_store(&held_release, false);
	if (!ASSERT_TRUE(c && efd >= 0 && mkdtemp(dir)) ||
	    !write_names_elf(dir, 16, 32, path, sizeof(path)))
		goto cleanup;
	a = analyzer__new(efd, 100 * 1000000ull);
	if (!ASSERT_TRUE(a))
		goto cleanup;
	analyzer__set_read(a, held_read);
	analyzer__owner(a, "ns-a");
	if (!ASSERT_EQ(settle_for(a, c, efd, path, hold, 1, &err, 10), ANALYSIS_FAILED) ||
	    !ASSERT_STRCONTAINS(err.msg, "--analysis-timeout") || !ASSERT_EQ(abandoned_now(a), 1))
		goto cleanup;
	/* a's next reading gets no worker while a's abandoned one runs */
	if (!ASSERT_EQ(settle_for(a, c, efd, path, next_a, 1, &err, 0.5), ANALYSIS_PENDING))
		goto cleanup;
	analyzer__owner(a, "ns-b");
	if (!ASSERT_EQ(settle_for(a, c, efd, path, for_b, 1, &err, 10), ANALYSIS_READY) ||
	    !ASSERT_EQ(abandoned_now(a), 1))
		goto cleanup;
	analyzer__owner(a, "ns-a");
	if (!ASSERT_EQ(analyzer__check(a, c, path, next_a, 1, &err), ANALYSIS_PENDING))
		goto cleanup;
	atomic_store(&held_release, true);
	ok = ASSERT_EQ(settle_for(a, c, efd, path, next_a, 1, &err, 10), ANALYSIS_READY) &&
	     ASSERT_EQ(abandoned_now(a), 0);
cleanup:
	atomic_store(&held_release, true);
	analyzer__free(a);
	binary_cache__free(c);
	if (efd >= 0)
		close(efd);
	test__rm_tree(dir);
	return ok;
}

/*
 * A thread whose flag is set stops reading: a Go binary (its function table),
 * a C one with DWARF only, and a match over a binary open already, each with
 * an error saying so; unbound again, the same thread reads them whole.
 */
TEST(a_cancelled_thread_stops_reading_with_an_error)
{
	const char *files[] = { test__fixture("go/native/demo"),
				test__fixture("c/dwarf-only/cfix") },
		   *pats[] = { "main*" };
	static atomic_bool flag;
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b = NULL;
	bool ok = true;

	if (!files[0] || !files[1])
		return true;
	for (size_t i = 0; ok && i < 2; i++) {
		atomic_store(&flag, true);
		cancel__bind(&flag, 0);
		b = binary__open(NULL, files[i], &err);
		ok = ASSERT_TRUE(!b) && ASSERT_EQ(errno, ECANCELED) &&
		     ASSERT_STRCONTAINS(err.msg, "cancelled");
		binary__put(b);
		cancel__bind(NULL, 0);
		b = binary__open(NULL, files[i], &err);
		ok = ok && CHECK(b, "%s", err.msg);
		if (ok) {
			cancel__bind(&flag, 0);
			ok = ASSERT_EQ(binary__match(b, pats, 1, 100000, &m, &err), -ECANCELED) &&
			     ASSERT_STRCONTAINS(err.msg, "cancelled");
			binary_match__clear(&m);
			cancel__bind(NULL, 0);
			ok = ok && ASSERT_OK(binary__match(b, pats, 1, 100000, &m, &err)) &&
			     ASSERT_TRUE(m.nfuncs > 0);
			binary_match__clear(&m);
		}
		binary__put(b);
		b = NULL;
	}
	cancel__bind(NULL, 0);
	return ok;
}

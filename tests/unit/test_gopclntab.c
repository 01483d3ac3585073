// SPDX-License-Identifier: MIT
/*
 * The .gopclntab reader: synthetic tables for every layout and for malformed
 * input, and real Go binaries that the tests build themselves (go1.21,
 * go1.23 through GOTOOLCHAIN, and the machine's go), cached under
 * /tmp/retwatch-test-cache/<toolchain>/<variant>/ so that a warm run is fast.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/gopclntab.h"
#include "test.h"

/* ---- synthetic tables ---------------------------------------------------- */

#define M116 0xfffffffaU
#define M118 0xfffffff0U
#define M120 0xfffffff1U

struct sfunc {
	uint32_t off; /* entry, as an offset from the text start */
	const char *name;
	uint8_t funcid;
};

struct synth {
	uint8_t *buf;
	size_t size;
	size_t name_off, pcln_off; /* as written in the header */
	size_t names_len;	   /* bytes of the name table */
	size_t rec_off[8];	   /* absolute offset of each _func */
};

/*
 * A table in the layout of `magic` with functions fs (sorted by offset) and
 * the last function ending at text + end. text is written into the header's
 * textStart (go1.18+) or added to the absolute entries (go1.16).
 */
static struct synth synth_build(uint32_t magic, const struct sfunc *fs, size_t n, uint32_t end,
				uint64_t text)
{
	bool old = magic == M116;
	size_t words = old ? 7 : 8, fld = old ? 8 : 4;
	size_t recsz = magic == M118 ? 40 : 44, funcid_at = magic == M118 ? 36 : 40;
	size_t hdr = 8 + words * 8, names = 0, pos, ftab;
	struct synth s = { 0 };

	for (size_t i = 0; i < n; i++)
		names += strlen(fs[i].name) + 1;
	/* header, names, 4 bytes each of cutab/filetab/pctab, ftab, records */
	pos = hdr + names + 12;
	pos = (pos + 7) & ~(size_t)7;
	ftab = pos;
	s.size = ftab + (2 * n + 1) * fld + n * recsz;
	s.buf = calloc(1, s.size);
	s.name_off = hdr;
	s.names_len = names;
	s.pcln_off = ftab;

	put32(s.buf, magic);
	s.buf[6] = 1;
	s.buf[7] = 8;
	put64(s.buf + 8, n);
	put64(s.buf + 16, 1);
	if (!old)
		put64(s.buf + 24, text);
	{
		size_t w = old ? 24 : 32;
		uint64_t offs[5] = { hdr, hdr + names, hdr + names + 4, hdr + names + 8, ftab };

		for (int i = 0; i < 5; i++)
			put64(s.buf + w + 8 * i, offs[i]);
	}
	pos = hdr;
	for (size_t i = 0; i < n; i++) {
		uint64_t e = old ? text + fs[i].off : fs[i].off;
		size_t rec = ftab + (2 * n + 1) * fld + i * recsz;
		size_t nameoff = pos - hdr;

		strcpy((char *)s.buf + pos, fs[i].name);
		pos += strlen(fs[i].name) + 1;
		if (old) {
			put64(s.buf + ftab + 16 * i, e);
			put64(s.buf + ftab + 16 * i + 8, rec - ftab);
			put64(s.buf + rec, e);
			put32(s.buf + rec + 8, (uint32_t)nameoff);
		} else {
			put32(s.buf + ftab + 8 * i, (uint32_t)e);
			put32(s.buf + ftab + 8 * i + 4, (uint32_t)(rec - ftab));
			put32(s.buf + rec, (uint32_t)e);
			put32(s.buf + rec + 4, (uint32_t)nameoff);
		}
		s.buf[rec + funcid_at] = fs[i].funcid;
		if (i < 8)
			s.rec_off[i] = rec;
	}
	if (old)
		put64(s.buf + ftab + 16 * n, text + end);
	else
		put32(s.buf + ftab + 8 * n, end);
	return s;
}

static const struct sfunc three[] = {
	{ 0x000, "main.first", 0 },
	{ 0x040, "main.(*Cart).Add", 0 },
	{ 0x0a0, "main.Map[go.shape.int,go.shape.int]", 0 },
};

static bool check_three(const struct gopclntab *t, uint64_t text)
{
	return ASSERT_EQ(t->nfuncs, 3) && ASSERT_STREQ(t->funcs[0].name, "main.first") &&
	       ASSERT_EQ(t->funcs[0].entry, text) && ASSERT_EQ(t->funcs[0].end, text + 0x40) &&
	       ASSERT_STREQ(t->funcs[1].name, "main.(*Cart).Add") &&
	       ASSERT_EQ(t->funcs[1].entry, text + 0x40) &&
	       ASSERT_EQ(t->funcs[1].end, text + 0xa0) &&
	       ASSERT_STREQ(t->funcs[2].name, "main.Map[go.shape.int,go.shape.int]") &&
	       ASSERT_EQ(t->funcs[2].entry, text + 0xa0) &&
	       ASSERT_EQ(t->funcs[2].end, text + 0x123);
}

TEST(gopclntab_synthetic_layouts)
{
	const uint32_t magics[] = { M116, M118, M120 };
	struct gopclntab *t = NULL;
	struct rw_error err = { 0 };
	bool ok = true;

	for (size_t i = 0; ok && i < 3; i++) {
		struct synth s = synth_build(magics[i], three, 3, 0x123, 0x401000);

		ok = ASSERT_OK(gopclntab__parse(s.buf, s.size, 0, &t, &err)) &&
		     ASSERT_EQ(t->magic, magics[i]) && check_three(t, 0x401000);
		gopclntab__free(t);
		t = NULL;
		/* a caller-supplied text start wins over the header's */
		if (ok && magics[i] != M116) {
			ok = ASSERT_OK(gopclntab__parse(s.buf, s.size, 0x2c400, &t, &err)) &&
			     ASSERT_EQ(t->text_start, 0x2c400) && check_three(t, 0x2c400);
			gopclntab__free(t);
			t = NULL;
		}
		free(s.buf);
	}
	return ok;
}

/* go1.26 writes 0 as textStart: the caller must give it. */
TEST(gopclntab_zero_text_start)
{
	struct synth s = synth_build(M120, three, 3, 0x123, 0);
	struct gopclntab *t = NULL;
	struct rw_error err = { 0 };
	bool ok;

	ok = ASSERT_EQ(gopclntab__parse(s.buf, s.size, 0, &t, &err), -EINVAL) &&
	     ASSERT_TRUE(t == NULL) && ASSERT_STRCONTAINS(err.msg, "no text start") &&
	     ASSERT_OK(gopclntab__parse(s.buf, s.size, 0x401000, &t, &err)) &&
	     check_three(t, 0x401000);
	gopclntab__free(t);
	free(s.buf);
	return ok;
}

static const struct gofunc *find_func(const struct gopclntab *t, const char *name, int *count)
{
	const struct gofunc *found = NULL;

	*count = 0;
	for (size_t i = 0; i < t->nfuncs; i++) {
		if (!strcmp(t->funcs[i].name, name)) {
			found = found ? found : &t->funcs[i];
			(*count)++;
		}
	}
	return found;
}

TEST(gopclntab_synthetic_abi_wrappers)
{
	/* funcID 21/22/23 is FuncIDWrapper, depending on the release */
	const struct sfunc fs[] = {
		{ 0x000, "main.goCallee", 0 },	 /* body, smaller */
		{ 0x020, "main.tie", 22 },	 /* body marked wrapper, big */
		{ 0x100, "runtime.asmBody", 2 }, /* special funcID */
		{ 0x140, "main.same", 0 },	 /* indistinguishable */
		{ 0x160, "main.same", 0 },
		{ 0x180, "main.goCallee", 22 },	  /* ABI0 wrapper, larger */
		{ 0x1c0, "main.tie", 22 },	  /* ABI0 wrapper, small */
		{ 0x1e0, "runtime.asmBody", 22 }, /* ABIInternal wrapper */
	};
	struct synth s = synth_build(M118, fs, 8, 0x200, 0x1000);
	struct gopclntab *t = NULL;
	struct rw_error err = { 0 };
	const struct gofunc *f;
	int count;
	bool ok;

	ok = ASSERT_OK(gopclntab__parse(s.buf, s.size, 0, &t, &err)) && ASSERT_EQ(t->nfuncs, 5);
	if (ok) {
		f = find_func(t, "main.goCallee", &count);
		ok = ASSERT_EQ(count, 1) && ASSERT_EQ(f->entry, 0x1000) &&
		     ASSERT_EQ(f->end, 0x1020);
	}
	if (ok) {
		f = find_func(t, "main.tie", &count);
		ok = ASSERT_EQ(count, 1) && ASSERT_EQ(f->entry, 0x1020);
	}
	if (ok) {
		f = find_func(t, "runtime.asmBody", &count);
		ok = ASSERT_EQ(count, 1) && ASSERT_EQ(f->entry, 0x1100);
	}
	if (ok) {
		find_func(t, "main.same", &count);
		ok = ASSERT_EQ(count, 2);
	}
	for (size_t i = 1; ok && i < t->nfuncs; i++)
		ok = ASSERT_TRUE(t->funcs[i - 1].entry < t->funcs[i].entry);
	gopclntab__free(t);
	free(s.buf);
	return ok;
}

/* Parses buf and expects -EINVAL with `msg` in the message. */
static bool expect_einval(const uint8_t *buf, size_t size, uint64_t text, const char *msg)
{
	struct gopclntab *t = (struct gopclntab *)1;
	struct rw_error err = { 0 };
	int ret = gopclntab__parse(buf, size, text, &t, &err);

	if (!ASSERT_EQ(ret, -EINVAL) || !ASSERT_TRUE(t == NULL)) {
		if (!ret)
			gopclntab__free(t);
		return false;
	}
	return ASSERT_STRCONTAINS(err.msg, msg);
}

TEST(gopclntab_malformed)
{
	struct synth s = synth_build(M120, three, 3, 0x123, 0x401000);
	uint8_t *b = malloc(s.size);
	bool ok = true;

#define MUTATE(stmt, text, msg)                                 \
	do {                                                    \
		memcpy(b, s.buf, s.size);                       \
		stmt;                                           \
		ok = ok && expect_einval(b, s.size, text, msg); \
	} while (0)

	/* truncated: inside the prefix, the header, the ftab, the records */
	ok = ok && expect_einval(s.buf, 5, 0, "too few for the header");
	ok = ok && expect_einval(s.buf, 40, 0, "header needs 0x48 bytes");
	ok = ok && expect_einval(s.buf, s.pcln_off + 10, 0, "function table at offset");
	ok = ok && expect_einval(s.buf, s.size - 1, 0, "record at offset");
	ok = ok && expect_einval(NULL, 0, 0, "too few for the header");

	MUTATE(put32(b, 0x12345678), 0, "bad magic 0x12345678");
	MUTATE(put32(b, 0xfffffffb), 0, "go1.2-1.15");
	MUTATE(put32(b, 0xf1ffffff), 0, "big-endian");
	MUTATE(b[4] = 1, 0, "padding");
	MUTATE(b[6] = 2, 0, "quantum 2 is neither amd64's 1 nor arm64's 4");
	MUTATE(b[7] = 4, 0, "pointer size 4 is not 8");
	MUTATE(put64(b + 8, 0), 0, "no functions");
	/* a huge count must not be multiplied or allocated */
	MUTATE(put64(b + 8, 0x2000000000000001ULL), 0, "cannot fit");
	MUTATE(put64(b + 8, UINT64_MAX), 0, "cannot fit");
	MUTATE(put64(b + 8, s.size / 8 + 1), 0, "cannot fit");
	/* offsets past the end */
	MUTATE(put64(b + 64, s.size - 4), 0, "runs past the end of the section");
	MUTATE(put64(b + 64, UINT64_MAX - 2), 0, "runs past the end of the section");
	MUTATE(put64(b + 32, s.size + 100), 0, "name table at offset");
	MUTATE(put64(b + 32, 4), 0, "name table at offset");
	MUTATE(put32(b + s.pcln_off + 4, 0xfffffff0), 0, "record at offset");
	MUTATE(put32(b + s.rec_off[1], 0x41), 0, "has entry 0x41");
	MUTATE(put32(b + s.rec_off[2] + 4, 0x7fffffff), 0, "name offset 0x7fffffff is outside");
	MUTATE(put32(b + s.rec_off[2] + 4, 0x80000000), 0, "name offset 0x80000000 is outside");
	/* the last name loses its NUL: the name table ends at the cutab */
	MUTATE(b[s.name_off + s.names_len - 1] = 'x', 0, "runs past the end of the name table");
	MUTATE(put32(b + s.pcln_off + 16, 0x30), 0, "not sorted");
	MUTATE((void)0, UINT64_MAX - 0x50, "address overflows");
#undef MUTATE
	free(b);
	free(s.buf);
	return ok;
}

/*
 * The go1.16/1.17 layout's own checks: 7 header words, 8-byte functab fields
 * and _func.entry, absolute entries (so a caller's text start is ignored).
 */
TEST(gopclntab_malformed_go116)
{
	struct synth s = synth_build(M116, three, 3, 0x123, 0x401000);
	struct rw_error err = { 0 };
	struct gopclntab *t = NULL;
	uint8_t *b = malloc(s.size);
	bool ok = true;

#define MUTATE(stmt, msg)                                    \
	do {                                                 \
		memcpy(b, s.buf, s.size);                    \
		stmt;                                        \
		ok = ok && expect_einval(b, s.size, 0, msg); \
	} while (0)

	ok = ok && expect_einval(s.buf, 40, 0, "go1.16/1.17 header needs 0x40 bytes");
	ok = ok && expect_einval(NULL, 16, 0, "no data");
	ok = ok && ASSERT_EQ(gopclntab__parse(s.buf, s.size, 0, NULL, &err), -EINVAL);
	MUTATE(put64(b + 8, s.size / 16 + 1), "cannot fit");
	MUTATE(put64(b + 56, s.size - 8), "runs past the end of the section");
	MUTATE(put64(b + 24, s.size), "name table at offset");
	MUTATE(put64(b + s.pcln_off + 16, 0x400000), "not sorted");
	MUTATE(put64(b + s.pcln_off + 8, UINT64_MAX - 8), "record at offset");
	MUTATE(put64(b + s.rec_off[1], 0x41), "has entry 0x41");
	MUTATE(put32(b + s.rec_off[2] + 8, 0x80000000), "name offset 0x80000000 is outside");
#undef MUTATE
	/* a text start that would overflow go1.18+ entries is not used */
	ok = ok && ASSERT_OK(gopclntab__parse(s.buf, s.size, UINT64_MAX - 0x50, &t, &err)) &&
	     ASSERT_EQ(t->text_start, 0) && check_three(t, 0x401000);
	gopclntab__free(t);
	free(b);
	free(s.buf);
	return ok;
}

/* Every prefix of a valid table fails cleanly (or parses): never crashes. */
TEST(gopclntab_every_truncation)
{
	struct synth s = synth_build(M120, three, 3, 0x123, 0x401000);
	struct rw_error err;
	bool ok = true;

	for (size_t n = 0; ok && n < s.size; n++) {
		struct gopclntab *t = NULL;
		uint8_t *copy = malloc(n ? n : 1); /* ASan sees reads past n */

		memcpy(copy, s.buf, n);
		err.msg[0] = '\0';
		ok = ASSERT_EQ(gopclntab__parse(copy, n, 0, &t, &err), -EINVAL) &&
		     ASSERT_TRUE(err.msg[0] != '\0');
		gopclntab__free(t);
		free(copy);
	}
	free(s.buf);
	return ok;
}

/* ---- real Go binaries ------------------------------------------------------ */

#define CACHE_DIR "/tmp/retwatch-test-cache"
#define SRC_VERSION "v2" /* bump when the sources below change */
/* go needs a home for its caches and downloaded toolchains */
#define GO_ENV "HOME=\"${HOME:-" CACHE_DIR "/home}\""

static const char main_go[] =
	"package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\n"
	"\t\"example.com/prog/abi\"\n)\n\n"
	"type Cart struct {\n\titems []string\n\ttotal int\n}\n\n"
	"//go:noinline\nfunc (c *Cart) Add(item string, price int) {\n"
	"\tc.items = append(c.items, item)\n\tc.total += price\n}\n\n"
	"//go:noinline\nfunc Map[T, U any](xs []T, f func(T) U) []U {\n"
	"\tout := make([]U, 0, len(xs))\n\tfor _, x := range xs {\n"
	"\t\tout = append(out, f(x))\n\t}\n\treturn out\n}\n\n"
	"//go:noinline\nfunc compute(a, b int) int { return a*b + len(os.Args) }\n\n"
	"func main() {\n\tc := &Cart{}\n\tc.Add(\"apple\", 3)\n\tn := len(os.Args)\n"
	"\tsq := Map([]int{1, 2, 3}, func(x int) int { return x*x + n })\n"
	"\tfmt.Println(c.total, sq, compute(2, 3), abi.Demo())\n}\n";

/* An assembly function used as a func value (ABI0 body, ABIInternal
 * wrapper) and a Go function called from assembly (ABIInternal body, ABI0
 * wrapper), in a package of their own: a package using cgo cannot have Go
 * assembly. */
static const char abi_go[] =
	"package abi\n\nfunc asmAdd(a, b int) int\nfunc asmCallGo(x int) int\n\n"
	"//go:noinline\nfunc goCallee(x int) int { return x*3 + 1 }\n\n"
	"var addFn = asmAdd\n\n"
	"func Demo() int { return addFn(1, 2) + asmCallGo(4) }\n";

static const char asm_s[] = "#include \"textflag.h\"\n\n"
			    "TEXT ·asmAdd(SB), NOSPLIT, $0-24\n\tMOVQ a+0(FP), AX\n"
			    "\tADDQ b+8(FP), AX\n\tMOVQ AX, ret+16(FP)\n\tRET\n\n"
			    "TEXT ·asmCallGo(SB), $16-16\n\tMOVQ x+0(FP), AX\n\tMOVQ AX, 0(SP)\n"
			    "\tCALL ·goCallee(SB)\n\tMOVQ 8(SP), AX\n\tMOVQ AX, ret+8(FP)\n\tRET\n";

static const char cgo_go[] =
	"package main\n\n/*\nstatic int add_c(int a, int b) { return a + b; }\n*/\n"
	"import \"C\"\n\n//go:noinline\n"
	"func callC(a, b int) int { return int(C.add_c(C.int(a), C.int(b))) }\n\n"
	"func init() { _ = callC(1, 2) }\n";

static const char go_mod[] = "module example.com/prog\n\ngo 1.21\n";

struct variant {
	const char *name;
	bool cgo, stripped;
	const char *flags;
	const char *unstripped; /* the same build with symbols */
};

static const struct variant variants[] = {
	{ "default", false, false, "", NULL },
	{ "stripped", false, true, "-ldflags='-s -w'", "default" },
	{ "pie", false, false, "-buildmode=pie", NULL },
	{ "pie-stripped", false, true, "-buildmode=pie -ldflags='-s -w'", "pie" },
	{ "cgo", true, false, "", NULL },
	{ "cgo-stripped", true, true, "-ldflags='-s -w'", "cgo" },
	/* externally linked PIE: no .gopclntab section before go1.26 */
	{ "cgo-pie", true, false, "-buildmode=pie", NULL },
	{ "cgo-pie-stripped", true, true, "-buildmode=pie -ldflags='-s -w'", "cgo-pie" },
};

static bool have_go(void)
{
	static int have = -1;

	if (have < 0)
		have = !system("go version >/dev/null 2>&1");
	return have;
}

static bool write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!text) /* a directory */
		return !mkdir(path, 0755);
	f = fopen(path, "w");
	if (!f)
		return false;
	ok = fputs(text, f) >= 0;
	return !fclose(f) && ok;
}

/* The source tree of a variant, written once per SRC_VERSION. */
static const char *source_dir(bool cgo)
{
	static char dirs[2][256];
	char *d = dirs[cgo];

	snprintf(d, sizeof(dirs[0]), CACHE_DIR "/src-%s-%s", SRC_VERSION, cgo ? "cgo" : "pure");
	if (access(d, F_OK)) {
		char tmp[300];

		snprintf(tmp, sizeof(tmp), "%s.tmp%d", d, (int)getpid());
		mkdir(CACHE_DIR, 0755);
		if (mkdir(tmp, 0755) || !write_file(tmp, "main.go", main_go) ||
		    !write_file(tmp, "abi", NULL) || !write_file(tmp, "abi/abi.go", abi_go) ||
		    !write_file(tmp, "abi/asm_amd64.s", asm_s) ||
		    !write_file(tmp, "go.mod", go_mod) ||
		    (cgo && !write_file(tmp, "cgo.go", cgo_go)))
			return NULL;
		/* another run may have won the race: then use its tree */
		if (rename(tmp, d)) {
			char cmd[400];

			snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
			if (system(cmd)) {
				/* a leftover temporary tree is harmless */
			}
		}
	}
	return d;
}

/* The `go version` of a toolchain, e.g. "go1.21.13". */
static bool toolchain_version(const char *toolchain, char *out, size_t len)
{
	char cmd[256];
	FILE *p;
	bool ok;

	snprintf(cmd, sizeof(cmd), "cd /tmp && " GO_ENV " GOTOOLCHAIN=%s go env GOVERSION",
		 toolchain);
	p = popen(cmd, "r");
	if (!p)
		return false;
	ok = fgets(out, (int)len, p) != NULL;
	if (pclose(p))
		ok = false;
	out[strcspn(out, "\n")] = '\0';
	return ok;
}

/*
 * Path of the program built by `toolchain` ("local" for the machine's go),
 * whose `go version` is `version`, as `variant`, building it on the first
 * call. The cache is keyed by the version, not the toolchain name, so that
 * a new local go is not tested with the old one's builds. NULL on failure.
 */
static const char *go_binary(const char *toolchain, const char *version, const struct variant *v)
{
	static char path[16][512];
	static int slot;
	char *p = path[slot++ % 16];
	char dir[400], cmd[2048];
	const char *src;

	snprintf(dir, sizeof(dir), CACHE_DIR "/%s-%s/%s", version, SRC_VERSION, v->name);
	snprintf(p, sizeof(path[0]), "%s/prog", dir);
	if (!access(p, R_OK))
		return p;
	src = source_dir(v->cgo);
	if (!src)
		return NULL;
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s' && cd '%s' && " GO_ENV " GOTOOLCHAIN=%s "
		 "CGO_ENABLED=%d GOFLAGS= go build %s -o '%s.tmp%d' . "
		 ">'%s/build.log' 2>&1 && "
		 "mv -f '%s.tmp%d' '%s'",
		 dir, src, toolchain, v->cgo, v->flags, p, (int)getpid(), dir, p, (int)getpid(), p);
	if (system(cmd)) {
		fprintf(stderr, "  building %s/%s failed, see %s/build.log\n", toolchain, v->name,
			dir);
		return NULL;
	}
	return p;
}

struct elf_file {
	int fd;
	Elf *elf;
};

static bool elf_file_open(struct elf_file *f, const char *path)
{
	elf_version(EV_CURRENT);
	f->fd = open(path, O_RDONLY);
	f->elf = f->fd < 0 ? NULL : elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	return f->elf != NULL;
}

static void elf_file_close(struct elf_file *f)
{
	elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
}

/* Symbol `name` from .symtab: its value and size. */
static bool symtab_lookup(Elf *elf, const char *name, uint64_t *value, uint64_t *size)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;

			if (!gelf_getsym(d, (int)i, &s))
				continue;
			n = elf_strptr(elf, sh.sh_link, s.st_name);
			if (n && !strcmp(n, name)) {
				*value = s.st_value;
				*size = s.st_size;
				return true;
			}
		}
	}
	return false;
}

static bool section_addr(Elf *elf, const char *name, uint64_t *addr)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && !strcmp(n, name)) {
			*addr = sh.sh_addr;
			return true;
		}
	}
	return false;
}

/*
 * Function `name` of the table agrees with the symtab symbol `sym`: same
 * entry, and the end is the symbol's end plus the padding to the next
 * function (functions are 32-byte aligned, some assembly 64).
 */
static bool matches_symtab(const struct gopclntab *t, Elf *elf, const char *name, const char *sym)
{
	const struct gofunc *f;
	uint64_t value, size;
	int count;

	f = find_func(t, name, &count);
	if (!CHECK(f, "no function %s in the pclntab", name) ||
	    !CHECK(count == 1, "%d functions named %s", count, name) ||
	    !CHECK(symtab_lookup(elf, sym, &value, &size), "no symbol %s", sym))
		return false;
	return CHECK(f->entry == value, "%s: entry 0x%" PRIx64 " != symtab 0x%" PRIx64, name,
		     f->entry, value) &&
	       CHECK(f->end >= value + size && f->end - (value + size) < 64,
		     "%s: end 0x%" PRIx64 " does not fit symtab 0x%" PRIx64 "+%" PRIu64, name,
		     f->end, value, size);
}

static bool same_tables(const struct gopclntab *a, const struct gopclntab *b)
{
	if (!ASSERT_EQ(a->nfuncs, b->nfuncs) || !ASSERT_EQ(a->text_start, b->text_start))
		return false;
	for (size_t i = 0; i < a->nfuncs; i++)
		if (!CHECK(!strcmp(a->funcs[i].name, b->funcs[i].name) &&
				   a->funcs[i].entry == b->funcs[i].entry &&
				   a->funcs[i].end == b->funcs[i].end,
			   "function %zu: %s 0x%" PRIx64 "-0x%" PRIx64 " != %s 0x%" PRIx64
			   "-0x%" PRIx64,
			   i, a->funcs[i].name, a->funcs[i].entry, a->funcs[i].end,
			   b->funcs[i].name, b->funcs[i].entry, b->funcs[i].end))
			return false;
	return true;
}

/* through_file: the table read from the file's descriptor (only the parts
 * the parse needs), else through libelf (all of it) */
static bool load_file_as(const char *path, struct gopclntab **t, char **version, bool through_file)
{
	struct rw_error err = { 0 };
	struct elf_file f;
	int ret;

	if (!CHECK(elf_file_open(&f, path), "cannot open %s", path))
		return false;
	ret = gopclntab__load(f.elf, through_file ? f.fd : -1, t, &err);
	if (version)
		*version = gobuildinfo__version(f.elf);
	elf_file_close(&f);
	return CHECK(ret == 0, "%s: %d %s", path, ret, err.msg);
}

static bool load_file(const char *path, struct gopclntab **t, char **version)
{
	return load_file_as(path, t, version, true);
}

/*
 * Loads the file with its section header table cut off (e_shoff, e_shnum
 * and e_shstrndx zeroed, as sstrip does): only the segments are left.
 */
static bool load_without_sections(const char *path, struct gopclntab **t)
{
	struct rw_error err = { 0 };
	uint8_t *img = NULL;
	Elf *elf = NULL;
	struct stat st;
	bool ok = false;
	int fd, ret;

	fd = open(path, O_RDONLY);
	if (!CHECK(fd >= 0 && !fstat(fd, &st), "cannot open %s", path))
		goto cleanup;
	img = malloc((size_t)st.st_size);
	if (!ASSERT_TRUE(img) || !ASSERT_EQ(read(fd, img, (size_t)st.st_size), st.st_size))
		goto cleanup;
	put64(img + 0x28, 0);	  /* e_shoff */
	memset(img + 0x3c, 0, 4); /* e_shnum, e_shstrndx */
	elf = elf_memory((char *)img, (size_t)st.st_size);
	ret = elf ? gopclntab__load(elf, -1, t, &err) : -1;
	ok = CHECK(ret == 0, "%s without sections: %d %s", path, ret, err.msg);
cleanup:
	elf_end(elf);
	free(img);
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Checks of an unstripped build against its own symtab. */
static bool check_against_symtab(const char *path, const struct gopclntab *t, bool cgo)
{
	struct elf_file f;
	uint64_t text_sym, size, text_sec;
	bool ok;

	if (!CHECK(elf_file_open(&f, path), "cannot open %s", path))
		return false;
	ok = matches_symtab(t, f.elf, "main.main", "main.main") &&
	     matches_symtab(t, f.elf, "main.(*Cart).Add", "main.(*Cart).Add") &&
	     matches_symtab(t, f.elf, "main.main.func1", "main.main.func1") &&
	     matches_symtab(t, f.elf, "main.Map[go.shape.int,go.shape.int]",
			    "main.Map[go.shape.int,go.shape.int]") &&
	     matches_symtab(t, f.elf, "main.compute", "main.compute") &&
	     /* Go body called from assembly: the ABI0 wrapper is dropped */
	     matches_symtab(t, f.elf, "example.com/prog/abi.goCallee",
			    "example.com/prog/abi.goCallee") &&
	     /* assembly used from Go: the body is the symtab's ".abi0" */
	     matches_symtab(t, f.elf, "example.com/prog/abi.asmAdd",
			    "example.com/prog/abi.asmAdd.abi0") &&
	     matches_symtab(t, f.elf, "runtime.osyield", "runtime.osyield.abi0") &&
	     matches_symtab(t, f.elf, "runtime.args", "runtime.args") &&
	     /* both carry FuncIDWrapper: the bigger one is the body */
	     matches_symtab(t, f.elf, "reflect.callMethod", "reflect.callMethod") &&
	     ASSERT_TRUE(symtab_lookup(f.elf, "runtime.text", &text_sym, &size)) &&
	     ASSERT_EQ(t->text_start, text_sym);
	/* cgo: C code comes first, so the Go text does not start .text */
	if (ok && cgo)
		ok = ASSERT_TRUE(section_addr(f.elf, ".text", &text_sec)) &&
		     ASSERT_NEQ(text_sec, text_sym);
	for (size_t i = 1; ok && i < t->nfuncs; i++)
		ok = CHECK(t->funcs[i - 1].entry < t->funcs[i].entry &&
				   t->funcs[i - 1].end <= t->funcs[i].entry,
			   "functions %zu and %zu out of order", i - 1, i);
	elf_file_close(&f);
	return ok;
}

static bool check_toolchain(const char *toolchain)
{
	struct gopclntab *tabs[sizeof(variants) / sizeof(variants[0])] = { 0 };
	char want[64];
	bool ok = true;

	if (!have_go()) {
		test__skip("no go toolchain on PATH");
		return true;
	}
	ok = CHECK(toolchain_version(toolchain, want, sizeof(want)),
		   "cannot run go with GOTOOLCHAIN=%s", toolchain);
	for (size_t i = 0; ok && i < sizeof(variants) / sizeof(variants[0]); i++) {
		const struct variant *v = &variants[i];
		const char *path = go_binary(toolchain, want, v);
		char *version = NULL;

		ok = CHECK(path, "no %s build for %s", v->name, toolchain) &&
		     load_file(path, &tabs[i], &version) &&
		     CHECK(version && !strcmp(version, want), "%s: build info version %s, want %s",
			   path, version ? version : "(null)", want);
		free(version);
		if (ok && !v->stripped)
			ok = CHECK(check_against_symtab(path, tabs[i], v->cgo), "in %s", path);
		if (ok) {
			/* the parts read from the file give the table all of it gives */
			struct gopclntab *whole = NULL;

			ok = load_file_as(path, &whole, NULL, false) &&
			     CHECK(same_tables(tabs[i], whole),
				   "%s differs when read through libelf", path);
			gopclntab__free(whole);
		}
		for (size_t j = 0; ok && v->unstripped && j < i; j++)
			if (!strcmp(variants[j].name, v->unstripped))
				ok = CHECK(same_tables(tabs[j], tabs[i]), "%s differs from %s",
					   path, variants[j].name);
		if (ok && v->stripped) {
			struct gopclntab *nosec = NULL;

			ok = load_without_sections(path, &nosec) &&
			     CHECK(same_tables(tabs[i], nosec),
				   "%s differs without section headers", path);
			gopclntab__free(nosec);
		}
	}
	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
		gopclntab__free(tabs[i]);
	return ok;
}

TEST(gopclntab_go1_21)
{
	return check_toolchain("go1.21.13");
}

TEST(gopclntab_go1_23)
{
	return check_toolchain("go1.23.12");
}

/* The machine's own go (go1.26: zero textStart, .go.module). */
TEST(gopclntab_go_local)
{
	return check_toolchain("local");
}

/* A Go binary whose table is damaged: -EINVAL, not -ENOENT. */
TEST(gopclntab_load_corrupted)
{
	const struct variant *v = &variants[1]; /* stripped */
	struct rw_error err = { 0 };
	struct gopclntab *t = NULL;
	uint8_t *img = NULL;
	Elf *elf = NULL;
	const char *path = NULL;
	char version[64];
	struct stat st;
	size_t hdr = 0;
	bool ok = false;
	int fd = -1;

	if (!have_go()) {
		test__skip("no go toolchain on PATH");
		return true;
	}
	if (toolchain_version("local", version, sizeof(version)))
		path = go_binary("local", version, v);
	if (!ASSERT_TRUE(path) || !ASSERT_TRUE((fd = open(path, O_RDONLY)) >= 0) ||
	    !ASSERT_OK(fstat(fd, &st)))
		goto cleanup;
	img = malloc((size_t)st.st_size);
	if (!ASSERT_EQ(read(fd, img, (size_t)st.st_size), st.st_size))
		goto cleanup;
	/* the pcHeader: the first go1.20+ magic at an 8-aligned offset */
	for (size_t i = 0; i + 8 < (size_t)st.st_size && !hdr; i += 8)
		if (!memcmp(img + i, "\xf1\xff\xff\xff\x00\x00\x01\x08", 8))
			hdr = i;
	if (!ASSERT_NEQ(hdr, 0))
		goto cleanup;
	put64(img + hdr + 8, 0x7fffffffffffULL); /* nfunc */
	elf_version(EV_CURRENT);
	elf = elf_memory((char *)img, (size_t)st.st_size);
	ok = ASSERT_TRUE(elf) && ASSERT_EQ(gopclntab__load(elf, -1, &t, &err), -EINVAL) &&
	     ASSERT_TRUE(t == NULL) && ASSERT_STRCONTAINS(err.msg, "functions cannot fit");
cleanup:
	elf_end(elf);
	free(img);
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Not Go: -ENOENT, and no version. */
TEST(gopclntab_load_not_go)
{
	static char garbage[] = "definitely not an ELF file";
	struct rw_error err = { 0 };
	struct gopclntab *t = NULL;
	struct elf_file f;
	Elf *elf;
	bool ok;

	ok = ASSERT_TRUE(elf_file_open(&f, "/proc/self/exe")) &&
	     ASSERT_EQ(gopclntab__load(f.elf, f.fd, &t, &err), -ENOENT) &&
	     ASSERT_STRCONTAINS(err.msg, "not a Go binary") &&
	     ASSERT_TRUE(gobuildinfo__version(f.elf) == NULL);
	elf_file_close(&f);
	if (!ok)
		return false;
	elf = elf_memory(garbage, sizeof(garbage));
	ok = ASSERT_EQ(gopclntab__load(elf, -1, &t, &err), -ENOENT) && ASSERT_TRUE(t == NULL) &&
	     ASSERT_TRUE(gobuildinfo__version(elf) == NULL);
	elf_end(elf);
	return ok && ASSERT_EQ(gopclntab__load(NULL, -1, &t, &err), -ENOENT);
}

/*
 * The shared fixtures (tests/fixtures/build.sh), when they have been built:
 * go/<version>/<variant>/{demo,cgodemo} and the damaged tables under
 * malformed/. Skipped otherwise: the tests above build their own programs.
 */
TEST(gopclntab_fixtures)
{
	static const struct {
		const char *variant, *prog, *twin;
	} fx[] = {
		{ "default", "demo", NULL }, { "stripped", "demo", "default" },
		{ "pie", "demo", NULL },     { "pie-stripped", "demo", "pie" },
		{ "cgo", "cgodemo", NULL },  { "cgo-stripped", "cgodemo", "cgo" },
	};
	const size_t nfx = sizeof(fx) / sizeof(fx[0]);
	const char *godir = test__fixture("go");
	DIR *dir = godir ? opendir(godir) : NULL;
	struct dirent *de;
	int found = 0;
	bool ok = true;

	/* one directory per toolchain, named by its version */
	while (ok && dir && (de = readdir(dir))) {
		struct gopclntab *tabs[sizeof(fx) / sizeof(fx[0])] = { 0 };
		const char *toolchain = de->d_name;

		if (strncmp(toolchain, "go1.", 4))
			continue;

		for (size_t i = 0; ok && i < nfx; i++) {
			char rel[512], *version = NULL;
			const char *path;
			struct elf_file f;
			uint64_t text, size;

			snprintf(rel, sizeof(rel), "go/%s/%s/%s", toolchain, fx[i].variant,
				 fx[i].prog);
			path = test__fixture(rel);
			if (!path)
				continue;
			found++;
			ok = load_file(path, &tabs[i], &version) &&
			     ASSERT_STREQ(version, toolchain);
			free(version);
			if (ok && !fx[i].twin) {
				ok = ASSERT_TRUE(elf_file_open(&f, path)) &&
				     matches_symtab(tabs[i], f.elf, "main.main", "main.main") &&
				     ASSERT_TRUE(
					     symtab_lookup(f.elf, "runtime.text", &text, &size)) &&
				     ASSERT_EQ(tabs[i]->text_start, text);
				elf_file_close(&f);
			}
			for (size_t j = 0; ok && fx[i].twin && j < i; j++)
				if (!strcmp(fx[j].variant, fx[i].twin) && tabs[j])
					ok = CHECK(same_tables(tabs[j], tabs[i]),
						   "%s differs from its twin", path);
		}
		for (size_t i = 0; i < nfx; i++)
			gopclntab__free(tabs[i]);
	}
	if (dir)
		closedir(dir);

	/* damaged Go binaries: -EINVAL and a message naming the table */
	static const char *const damaged[] = { "gopclntab-header", "gopclntab-functab",
					       "gopclntab-middle" };
	for (size_t i = 0; ok && i < 3; i++) {
		struct rw_error err = { 0 };
		struct gopclntab *t = NULL;
		char rel[128];
		const char *path;
		struct elf_file f;

		snprintf(rel, sizeof(rel), "malformed/%s", damaged[i]);
		path = test__fixture(rel);
		if (!path)
			continue;
		found++;
		ok = ASSERT_TRUE(elf_file_open(&f, path)) &&
		     ASSERT_EQ(gopclntab__load(f.elf, f.fd, &t, &err), -EINVAL) &&
		     ASSERT_STRCONTAINS(err.msg, "corrupted .gopclntab");
		elf_file_close(&f);
		gopclntab__free(t);
	}
	if (!found)
		test__skip("no fixtures: run make fixtures");
	return ok;
}

/*
 * A valid go1.20+ header over size bytes of zeros (the issue's attack: a
 * sparse file): each zero functab pair reads as a function at the text
 * start, with an empty name and no code, whose record is the functab itself.
 */
static uint8_t *zero_table(size_t size, uint64_t nfunc)
{
	uint8_t *b = calloc(1, size);

	if (!b)
		return NULL;
	put32(b, M120);
	b[6] = 1;
	b[7] = 8;
	put64(b + 8, nfunc);
	put64(b + 24, 0x401000);
	for (int w = 3; w < 8; w++) /* every table at offset 72, after the header */
		put64(b + 8 + 8 * w, 72);
	return b;
}

static bool expect_error(const uint8_t *buf, size_t size, int want, const char *msg)
{
	struct gopclntab *t = (struct gopclntab *)1;
	struct rw_error err = { 0 };
	int ret = gopclntab__parse(buf, size, 0, &t, &err);

	if (!ret)
		gopclntab__free(t);
	return ASSERT_EQ(ret, want) && ASSERT_TRUE(t == NULL) && ASSERT_STRCONTAINS(err.msg, msg);
}

/*
 * Budgets: a table that declares more functions than real binaries have (or
 * is larger than they are) is refused naming the limit, before anything is
 * allocated per function; one within them that holds no function with code
 * is refused too, and functions without code are left out.
 */
TEST(gopclntab_budgets)
{
	const size_t size = 64u << 20;
	uint8_t *many = zero_table(size, (size - 72) / 8 - 1);
	uint8_t *at_limit = zero_table(size, GOPCLNTAB_MAX_FUNCS);
	uint8_t *huge = zero_table((size_t)GOPCLNTAB_MAX_SIZE + 1, GOPCLNTAB_MAX_FUNCS);
	const struct sfunc fs[] = {
		{ 0x000, "main.a", 0 },
		{ 0x040, "main.empty", 0 }, /* ends where it starts */
		{ 0x040, "main.b", 0 },
	};
	struct synth s = synth_build(M120, fs, 3, 0x80, 0x1000);
	struct gopclntab *t = NULL;
	struct rw_error err = { 0 };
	bool ok = ASSERT_TRUE(many && at_limit && huge && s.buf);

	ok = ok &&
	     expect_error(many, size, -EFBIG,
			  "declares 8388598 functions, more than 524288 (the limit per binary)") &&
	     expect_error(at_limit, size, -EINVAL, "none of its 524288 functions has any code") &&
	     expect_error(huge, (size_t)GOPCLNTAB_MAX_SIZE + 1, -EFBIG,
			  ".gopclntab is 134217729 bytes, more than 128 MiB (the limit)");
	ok = ok && ASSERT_OK(gopclntab__parse(s.buf, s.size, 0, &t, &err)) &&
	     ASSERT_EQ(t->nfuncs, 2) && ASSERT_STREQ(t->funcs[0].name, "main.a") &&
	     ASSERT_EQ(t->funcs[0].end, 0x1040) && ASSERT_STREQ(t->funcs[1].name, "main.b") &&
	     ASSERT_EQ(t->funcs[1].end, 0x1080);
	gopclntab__free(t);
	free(s.buf);
	free(many);
	free(at_limit);
	free(huge);
	return ok;
}

/*
 * Many functions under one name (a crafted table: the issue's 4,000
 * duplicates took 11 s in a quadratic pass): the one with the smallest
 * funcID is kept, the rest dropped, in one sort and one pass.
 */
TEST(gopclntab_many_duplicate_names)
{
	enum { N = 50000 };
	struct sfunc *fs = calloc(N, sizeof(*fs));
	struct gopclntab *t = NULL;
	struct rw_error err = { 0 };
	struct synth s = { 0 };
	bool ok = ASSERT_TRUE(fs);

	for (size_t i = 0; ok && i < N; i++)
		fs[i] = (struct sfunc){ (uint32_t)(16 * i), "main.dup", i == N / 2 ? 0 : 22 };
	if (ok)
		s = synth_build(M120, fs, N, 16 * N, 0x1000);
	ok = ok && ASSERT_TRUE(s.buf) && ASSERT_OK(gopclntab__parse(s.buf, s.size, 0, &t, &err)) &&
	     ASSERT_EQ(t->nfuncs, 1) && ASSERT_EQ(t->funcs[0].entry, 0x1000 + 16 * (N / 2));
	gopclntab__free(t);
	free(s.buf);
	free(fs);
	return ok;
}

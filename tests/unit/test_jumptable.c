// SPDX-License-Identifier: MIT
#include <string.h>

#include "analysis/entrysite.h"
#include "analysis/jumptable.h"
#include "test.h"

#define ENTRY 0x1000
#define TABLE 0x8000

/* The file's data: a table at TABLE. */
static uint8_t data[1024];
static size_t data_len;

static int read_data(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < TABLE || addr - TABLE > data_len || len > data_len - (addr - TABLE))
		return -1;
	memcpy(buf, data + (addr - TABLE), len);
	return 0;
}

/* Fills the table: n 32-bit offsets from TABLE to the function's bytes at offs[i]. */
static void rel32_table(const int64_t *offs, size_t n)
{
	memset(data, 0, sizeof(data));
	for (size_t i = 0; i < n; i++) {
		int32_t v = (int32_t)(ENTRY + offs[i] - TABLE);

		memcpy(data + 4 * i, &v, 4);
	}
	data_len = sizeof(data);
}

static void abs64_table(const int64_t *offs, size_t n)
{
	memset(data, 0, sizeof(data));
	for (size_t i = 0; i < n; i++) {
		uint64_t v = ENTRY + (uint64_t)offs[i];

		memcpy(data + 8 * i, &v, 8);
	}
	data_len = sizeof(data);
}

/*
 * gcc's switch (PIC), CET: endbr64; push rbx; cmp edi, 3; ja default;
 * lea rdx, [rip + TABLE]; movsxd rax, [rdx + rdi*4]; add rax, rdx;
 * notrack jmp rax; four cases (each mov eax, n; pop rbx; ret).
 */
static const uint8_t gcc_fn[] = {
	0xf3, 0x0f, 0x1e, 0xfa,			  /* endbr64            @0 */
	0x53,					  /* push rbx           @4 */
	0x83, 0xff, 0x03,			  /* cmp edi, 3         @5 */
	0x77, 0x26,				  /* ja 0x1030          @8 */
	0x48, 0x8d, 0x15, 0xef, 0x6f, 0x00, 0x00, /* lea rdx, [rip+0x6fef] @10: 0x8000 */
	0x48, 0x63, 0x04, 0xba,			  /* movsxd rax, [rdx+rdi*4] @17 */
	0x48, 0x01, 0xd0,			  /* add rax, rdx       @21 */
	0x3e, 0xff, 0xe0,			  /* notrack jmp rax    @24 */
	0xb8, 0x00, 0x00, 0x00, 0x00, 0x5b, 0xc3, /* @27 */
	0xb8, 0x01, 0x00, 0x00, 0x00, 0x5b, 0xc3, /* @34 */
	0xb8, 0x02, 0x00, 0x00, 0x00, 0x5b, 0xc3, /* @41 */
	0x31, 0xc0, 0x5b, 0xc3,			  /* xor eax, eax; pop rbx; ret  @48: default */
};

/* Go's: push rbp; cmp rax, 2; ja; lea rcx, [rip + TABLE]; jmp [rcx + rax*8]; cases. */
static const uint8_t go_fn[] = {
	0x55,					  /* push rbp           @0 */
	0x48, 0x83, 0xf8, 0x02,			  /* cmp rax, 2         @1 */
	0x77, 0x10,				  /* ja 0x1017          @5 */
	0x48, 0x8d, 0x0d, 0xf2, 0x6f, 0x00, 0x00, /* lea rcx, [rip+0x6ff2] @7: 0x8000 */
	0xff, 0x24, 0xc1,			  /* jmp [rcx+rax*8]    @14 */
	0x5d, 0xc3,				  /* @17 */
	0x5d, 0xc3,				  /* @19 */
	0x5d, 0xc3,				  /* @21 */
	0x5d, 0xc3,				  /* @23: default */
};

static int read_fn(const uint8_t *code, size_t len, struct jumptable *jt)
{
	struct code_range r = { ENTRY, code, len };

	return jumptable__read(&r, 1, read_data, NULL, jt);
}

TEST(jumptable_gcc_pic)
{
	static const int64_t cases[] = { 27, 34, 41, 48 };
	struct jumptable jt;
	bool ok;

	rel32_table(cases, 4);
	ok = ASSERT_OK(read_fn(gcc_fn, sizeof(gcc_fn), &jt)) && ASSERT_EQ(jt.njumps, 1) &&
	     ASSERT_EQ(jt.nresolved, 1) && ASSERT_EQ(jt.ntargets, 4) &&
	     ASSERT_EQ(jt.targets[0], ENTRY + 27) && ASSERT_EQ(jt.targets[3], ENTRY + 48) &&
	     /* a switch's jump, not a hook's */
	     ASSERT_EQ(jt.ntables_at, 1) && ASSERT_EQ(jt.tables_at[0], ENTRY + 24);
	jumptable__clear(&jt);
	return ok;
}

TEST(jumptable_go)
{
	static const int64_t cases[] = { 17, 19, 21 };
	struct jumptable jt;
	bool ok;

	abs64_table(cases, 3);
	ok = ASSERT_OK(read_fn(go_fn, sizeof(go_fn), &jt)) && ASSERT_EQ(jt.nresolved, 1) &&
	     ASSERT_EQ(jt.ntargets, 3) && ASSERT_EQ(jt.targets[2], ENTRY + 21) &&
	     ASSERT_EQ(jt.ntables_at, 1) && ASSERT_EQ(jt.tables_at[0], ENTRY + 14);
	jumptable__clear(&jt);
	return ok;
}

TEST(jumptable_non_pic)
{
	/* jmp [rax*8 + 0x8000]; ret; ret */
	static const uint8_t code[] = { 0xff, 0x24, 0xc5, 0x00, 0x80, 0x00, 0x00, 0xc3, 0xc3 };
	static const int64_t cases[] = { 7, 8 };
	struct jumptable jt;
	bool ok;

	abs64_table(cases, 2);
	ok = ASSERT_OK(read_fn(code, sizeof(code), &jt)) && ASSERT_EQ(jt.nresolved, 1) &&
	     ASSERT_EQ(jt.ntargets, 2);
	jumptable__clear(&jt);
	return ok;
}

TEST(jumptable_not_read)
{
	static const int64_t cases[] = { 27, 34, 41, 48 };
	/* mov rax, [rdi+0x10]; jmp rax: a tail call through a pointer */
	static const uint8_t pointer[] = { 0x48, 0x8b, 0x47, 0x10, 0xff, 0xe0 };
	uint8_t other_base[sizeof(gcc_fn)];
	struct jumptable jt;
	bool ok;

	rel32_table(cases, 4);
	ok = ASSERT_OK(read_fn(pointer, sizeof(pointer), &jt)) && ASSERT_EQ(jt.njumps, 1) &&
	     ASSERT_EQ(jt.nresolved, 0) && ASSERT_EQ(jt.ntargets, 0) &&
	     /* a hook's jump: no table's form */
	     ASSERT_EQ(jt.ntables_at, 0);
	jumptable__clear(&jt);
	/* the entries loaded through another register than the table's */
	memcpy(other_base, gcc_fn, sizeof(other_base));
	other_base[20] = 0xb9; /* movsxd rax, [rcx+rdi*4] */
	ok = ok && ASSERT_OK(read_fn(other_base, sizeof(other_base), &jt)) &&
	     ASSERT_EQ(jt.nresolved, 0);
	jumptable__clear(&jt);
	/* the first entry out of the function: no table there */
	data_len = sizeof(data);
	memset(data, 0xff, sizeof(data));
	ok = ok && ASSERT_OK(read_fn(gcc_fn, sizeof(gcc_fn), &jt)) && ASSERT_EQ(jt.nresolved, 0);
	jumptable__clear(&jt);
	/* the file ends inside the table */
	rel32_table(cases, 4);
	data_len = 8;
	ok = ok && ASSERT_OK(read_fn(gcc_fn, sizeof(gcc_fn), &jt)) && ASSERT_EQ(jt.nresolved, 0);
	jumptable__clear(&jt);
	return ok;
}

TEST(jumptable_without_end_is_not_read)
{
	struct jumptable jt;
	bool ok;

	/* every entry lands in the function, past JUMPTABLE_MAX_ENTRIES: the
	 * data here is 1 KiB of 4-byte offsets to case 27, then the read fails */
	for (size_t i = 0; i < sizeof(data) / 4; i++) {
		int32_t v = ENTRY + 27 - TABLE;

		memcpy(data + 4 * i, &v, 4);
	}
	data_len = sizeof(data);
	ok = ASSERT_OK(read_fn(gcc_fn, sizeof(gcc_fn), &jt)) && ASSERT_EQ(jt.nresolved, 0) &&
	     ASSERT_EQ(jt.ntargets, 0);
	jumptable__clear(&jt);
	return ok;
}

/* The entry site of code at ENTRY with its jump tables read from data. */
static int64_t site_with_tables(const uint8_t *code, size_t len, bool read_tables)
{
	struct code_range r = { ENTRY, code, len };
	struct jumptable jt = { 0 };
	struct disasm_result dis;
	uint32_t sp;
	int64_t site = -1;

	if (disasm__scan(DISASM_X86_64, &r, 1, ENTRY, &dis))
		return -1;
	if (!read_tables || !jumptable__read(&r, 1, read_data, NULL, &jt))
		site = entrysite__choose(&r, &dis, false, NULL, NULL, read_tables ? &jt : NULL,
					 &sp);
	jumptable__clear(&jt);
	disasm_result__clear(&dis);
	return site;
}

TEST(jumptable_entry_site)
{
	static const int64_t cases[] = { 27, 34, 41, 48 }, into_run[] = { 27, 4, 41, 48 },
			     to_entry[] = { 0, 34, 41, 48 };

	rel32_table(cases, 4);
	if (!ASSERT_EQ(site_with_tables(gcc_fn, sizeof(gcc_fn), true), 4) ||
	    /* not read: any jump through a register could land anywhere */
	    !ASSERT_EQ(site_with_tables(gcc_fn, sizeof(gcc_fn), false), 0))
		return false;
	/* a case on the PUSH the probe would sit on */
	rel32_table(into_run, 4);
	if (!ASSERT_EQ(site_with_tables(gcc_fn, sizeof(gcc_fn), true), 0))
		return false;
	/* a case back at the entry, a loop */
	rel32_table(to_entry, 4);
	return ASSERT_EQ(site_with_tables(gcc_fn, sizeof(gcc_fn), true), 0);
}

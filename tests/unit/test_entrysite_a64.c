// SPDX-License-Identifier: MIT
#include <string.h>

#include "analysis/entrysite.h"
#include "test.h"

#define ENTRY 0x1000
#define MORESTACK 0x9000

static bool morestack_at(void *ctx, uint64_t addr)
{
	(void)ctx;
	return addr == MORESTACK;
}

/* The words of AArch64 code at ENTRY, as bytes (little-endian). */
struct a64_code {
	uint8_t bytes[4 * 32];
	size_t len;
};

static struct a64_code a64(const uint32_t *words, size_t n)
{
	struct a64_code c = { .len = 4 * n };

	for (size_t i = 0; i < n && i < 32; i++)
		for (int b = 0; b < 4; b++)
			c.bytes[4 * i + b] = (uint8_t)(words[i] >> (8 * b));
	return c;
}

/* The entry site of the code, swept first as the analysis does; -1 on error. */
static int64_t site_of(const uint32_t *words, size_t n, bool go)
{
	struct a64_code c = a64(words, n);
	struct code_range r = { ENTRY, c.bytes, c.len };
	struct disasm_result dis;
	int64_t site;

	if (disasm__scan(DISASM_AARCH64, &r, 1, ENTRY, &dis))
		return -1;
	site = entrysite__choose_a64(&r, &dis, go, morestack_at, NULL);
	disasm_result__clear(&dis);
	return site;
}

#define SITE(words, go) site_of((words), sizeof(words) / sizeof((words)[0]), (go))

/* A Go function as Go 1.26 builds it: stack check, body, its morestack block at 0x30. */
static const uint32_t go_fn[] = {
	0xf9400b90, /* ldr x16, [x28, #16]   (g's stack guard) */
	0xeb3063ff, /* cmp sp, x16 */
	0x54000149, /* b.ls 0x1030           @8: the site */
	0xf81e0ffe, /* str x30, [sp, #-32]!  (moves SP: the run ends) */
	0xf81f83fd, /* stur x29, [sp, #-8] */
	0xd10023fd, /* sub x29, sp, #8 */
	0xf90017e0, /* str x0, [sp, #40] */
	0x94001bf9, /* bl 0x8000 */
	0xf94017e0, /* ldr x0, [sp, #40] */
	0xf85f83fd, /* ldur x29, [sp, #-8] */
	0xf84207fe, /* ldr x30, [sp], #32 */
	0xd65f03c0, /* ret */
	0xf90007e0, /* str x0, [sp, #8]      @0x30: the morestack block */
	0xaa1e03e3, /* mov x3, x30 */
	0x94001ff2, /* bl 0x9000             (runtime.morestack_noctxt) */
	0xf94007e0, /* ldr x0, [sp, #8] */
	0x17fffff0, /* b 0x1000 */
};

TEST(entrysite_a64_go_on_its_stack_check)
{
	return ASSERT_EQ(SITE(go_fn, true), 8) &&
	       /* the same words as C code: the block's B back to the entry
		* would pass the probe twice */
	       ASSERT_EQ(SITE(go_fn, false), 0);
}

TEST(entrysite_a64_go_large_frame_check)
{
	/* a frame larger than the guard's slack: SUB X17 before the compare */
	static const uint32_t code[] = {
		0xf9400b90, /* ldr x16, [x28, #16] */
		0xd10283f1, /* sub x17, sp, #0xa0 */
		0xeb10023f, /* cmp x17, x16 */
		0x54000129, /* b.ls 0x1030          @12 */
		0xd10483f4, /* sub x20, sp, #0x120 */
		0xa93ffa9d, /* stp x29, x30, [x20, #-8] */
		0x9100029f, /* mov sp, x20          (writes SP: the run ends) */
		0xd65f03c0, /* ret */
		0xd503201f, 0xd503201f, 0xd503201f,
		0xd503201f, 0xf90007e0, /* str x0, [sp, #8]     @0x30 */
		0xaa1e03e3,		/* mov x3, x30 */
		0x94001ff2,		/* bl 0x9000 */
		0xf94007e0,		/* ldr x0, [sp, #8] */
		0x17fffff0,		/* b 0x1000 */
	};
	struct a64_code c = a64(code, sizeof(code) / sizeof(code[0]));
	struct code_range r = { ENTRY, c.bytes, c.len };

	return ASSERT_EQ(SITE(code, true), 12) &&
	       ASSERT_EQ(entrysite__clobbers_a64(&r, 12), (1U << 16) | (1U << 17)) &&
	       ASSERT_EQ(entrysite__clobbers_a64(&r, 0), 0);
}

TEST(entrysite_a64_past_the_stack_check)
{
	struct a64_code c = a64(go_fn, sizeof(go_fn) / sizeof(go_fn[0]));
	struct code_range r = { ENTRY, c.bytes, c.len };

	/* on the check's B.LS, or at the first byte: a restart passes it twice */
	return ASSERT_TRUE(!entrysite__past_check_a64(&r, 8, morestack_at, NULL)) &&
	       ASSERT_TRUE(!entrysite__past_check_a64(&r, 0, morestack_at, NULL)) &&
	       /* past it: once */
	       ASSERT_TRUE(entrysite__past_check_a64(&r, 12, morestack_at, NULL)) &&
	       ASSERT_EQ(entrysite__clobbers_a64(&r, 8), 1U << 16);
}

TEST(entrysite_a64_go_block_must_call_morestack)
{
	uint32_t code[sizeof(go_fn) / sizeof(go_fn[0])];

	memcpy(code, go_fn, sizeof(code));
	code[14] = 0x94001ff1; /* bl 0x8ffc: not runtime.morestack */
	if (!ASSERT_EQ(SITE(code, true), 0))
		return false;
	memcpy(code, go_fn, sizeof(code));
	code[16] = 0x17fffff1; /* b 0x1004: not back to the entry */
	return ASSERT_EQ(SITE(code, true), 0);
}

TEST(entrysite_a64_registers_kept)
{
	/* a Go function whose skipped words write X28 (g), a C one X30 (the
	 * return address) or the stack pointer: at the first byte */
	uint32_t code[sizeof(go_fn) / sizeof(go_fn[0])];
	static const uint32_t lr[] = { 0xaa0003fe /* mov x30, x0 */, 0xb4000040 /* cbz x0 */,
				       0xd65f03c0 };
	static const uint32_t sp[] = { 0xd10043ff /* sub sp, sp, #16 */, 0xb4000040, 0xd65f03c0 };
	static const uint32_t x2[] = { 0x2a0003e2 /* mov w2, w0 */, 0xb4000040, 0xd65f03c0 };

	memcpy(code, go_fn, sizeof(code));
	code[1] = 0xaa0003fc; /* mov x28, x0 */
	return ASSERT_EQ(SITE(code, true), 0) && ASSERT_EQ(SITE(lr, false), 0) &&
	       ASSERT_EQ(SITE(sp, false), 0) &&
	       /* any other register: on the CBZ */
	       ASSERT_EQ(SITE(x2, false), 4);
}

TEST(entrysite_a64_c_past_a_move_onto_the_frame)
{
	static const uint32_t code[] = {
		0x2a0003e2, /* mov w2, w0 */
		0xa9be7bfd, /* stp x29, x30, [sp, #-32]!   @4: push */
		0x910003fd, /* mov x29, sp */
		0xa8c27bfd, /* ldp x29, x30, [sp], #32 */
		0xd65f03c0, /* ret */
	};
	struct a64_code c = a64(code, sizeof(code) / sizeof(code[0]));

	return ASSERT_EQ(SITE(code, false), 4) &&
	       ASSERT_EQ(disasm__probe_kind_a64(c.bytes + 4, 4), DISASM_PROBE_PUSH) &&
	       ASSERT_EQ(entrysite__clobbers_a64(&(struct code_range){ ENTRY, c.bytes, c.len }, 4),
			 1U << 2);
}

TEST(entrysite_a64_stays_at_the_first_byte)
{
	/* a leaf that computes and returns: nothing simulated before the RET */
	static const uint32_t leaf[] = { 0x8b010000 /* add x0, x0, x1 */, 0xd65f03c0 };
	/* a BL back onto the word it follows: the probe would be passed again */
	static const uint32_t bl_back[] = { 0xaa0003e1 /* mov x1, x0 */, 0x97ffffff /* bl 0x1000 */,
					    0xd65f03c0 };
	static const uint32_t bl_self[] = { 0xaa0003e1, 0x94000000 /* bl . */, 0xd65f03c0 };
	/* a jump through a register: it could land on a skipped word */
	static const uint32_t br[] = { 0xaa0003e1, 0xb4000040, 0xd61f0020 /* br x1 */, 0xd65f03c0 };
	/* a store with writeback to the stack pointer ends the run */
	static const uint32_t wb[] = { 0xf81f0fe0 /* str x0, [sp, #-16]! */, 0xb4000040,
				       0xd65f03c0 };
	/* a loop back onto a skipped word */
	static const uint32_t loop[] = { 0xd1000400 /* sub x0, x0, #1 */,
					 0xb5ffffe0 /* cbnz x0, 0x1000 */, 0x91000400,
					 0xb5ffffe0 /* cbnz x0, 0x1008 */, 0xd65f03c0 };

	return ASSERT_EQ(SITE(leaf, false), 0) &&
	       /* a recursion's BL lands on the entry: allowed */
	       ASSERT_EQ(SITE(bl_back, false), 4) && ASSERT_EQ(SITE(bl_self, false), 0) &&
	       ASSERT_EQ(SITE(br, false), 0) && ASSERT_EQ(SITE(wb, false), 0) &&
	       ASSERT_EQ(SITE(loop, false), 0);
}

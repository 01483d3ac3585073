// SPDX-License-Identifier: MIT
/* Unwinding a copy of this very process's stack, and stacks made up to mislead. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/elfbin.h"
#include "trace/symbolize.h"
#include "test.h"
#include "analysis/unwind.h"

#define COPY 16384

struct capture {
	struct unwind_regs regs;
	uint8_t stack[COPY];
	size_t len;
};

/* Byte by byte, not instrumented: the copy reads other frames' redzones. */
__attribute__((no_sanitize_address, noinline)) static void copy_stack(uint8_t *dst,
								      const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((volatile uint8_t *)dst)[i] = src[i];
}

/* Bytes of this thread's stack from sp to its top, at most COPY. */
static size_t stack_left(uint64_t sp)
{
	pthread_attr_t a;
	size_t size, left = 0;
	void *lo;

	if (!pthread_getattr_np(pthread_self(), &a)) {
		if (!pthread_attr_getstack(&a, &lo, &size))
			left = (uintptr_t)lo + size - sp;
		pthread_attr_destroy(&a);
	}
	return left < COPY ? left : COPY;
}

/* The registers at one instruction of unwind_test_c and the stack above them. */
__attribute__((noinline)) void unwind_test_c(struct capture *c);
__attribute__((noinline)) void unwind_test_c(struct capture *c)
{
	struct unwind_regs *r = &c->regs;

	__asm__ volatile("lea 0(%%rip), %%rax\n\t"
			 "mov %%rax, 0(%[r])\n\t"
			 "mov %%rsp, 8(%[r])\n\t"
			 "mov %%rbp, 16(%[r])\n\t"
			 "mov %%rbx, 24(%[r])\n\t"
			 "mov %%r12, 32(%[r])\n\t"
			 "mov %%r13, 40(%[r])\n\t"
			 "mov %%r14, 48(%[r])\n\t"
			 "mov %%r15, 56(%[r])\n\t"
			 :
			 : [r] "r"(r)
			 : "rax", "memory");
	c->len = stack_left(r->sp);
	copy_stack(c->stack, (const uint8_t *)r->sp, c->len);
}

__attribute__((noinline)) void unwind_test_b(struct capture *c);
__attribute__((noinline)) void unwind_test_b(struct capture *c)
{
	unwind_test_c(c);
	__asm__ volatile("" ::: "memory"); /* no tail call */
}

__attribute__((noinline)) void unwind_test_a(struct capture *c);
__attribute__((noinline)) void unwind_test_a(struct capture *c)
{
	unwind_test_b(c);
	__asm__ volatile("" ::: "memory");
}

TEST(unwind_own_stack)
{
	static const char *const want[] = { "unwind_test_c+", "unwind_test_b+", "unwind_test_a+",
					    "test_unwind_own_stack+" };
	struct capture *c = calloc(1, sizeof(*c));
	struct symbolizer *s = symbolizer__new(NULL);
	uint64_t pcs[UNWIND_MAX_FRAMES];
	char frame[512];
	size_t n = 0;
	bool ok = false;

	if (!ASSERT_TRUE(c) || !ASSERT_TRUE(s))
		goto cleanup;
	unwind_test_a(c);
	n = symbolizer__unwind(s, getpid(), &c->regs, c->stack, c->len, c->regs.sp, pcs,
			       UNWIND_MAX_FRAMES);
	if (!CHECK(n >= 4, "%zu frames", n))
		goto cleanup;
	for (size_t i = 0; i < 4; i++) {
		symbolizer__resolve(s, getpid(), pcs[i], i == 0, frame, sizeof(frame));
		if (!CHECK(!strncmp(frame, want[i], strlen(want[i])), "frame %zu: %s, not %s*", i,
			   frame, want[i]))
			goto cleanup;
	}
	for (size_t i = 0; i < n; i++)
		if (!ASSERT_TRUE(unwind__canonical(pcs[i])))
			goto cleanup;
	ok = true;
cleanup:
	symbolizer__free(s);
	free(c);
	return ok;
}

static Dwarf_CFI *no_cfi(void *ctx, uint64_t pc, enum unwind_table which, uint64_t *ret_bias)
{
	(void)ctx;
	(void)pc;
	(void)which;
	(void)ret_bias;
	return NULL;
}

TEST(unwind_hostile_frame_pointers)
{
	uint64_t stack[64] = {}, pcs[UNWIND_MAX_FRAMES];
	struct unwind_regs r = { .ip = 0x401000, .sp = 0x7ff000000000 };
	size_t n;

	/* a frame pointer naming itself: the walk must stop, not loop */
	r.fp = r.sp + 16;
	stack[0] = 0x401100; /* frame 0's return address at SP */
	stack[2] = r.fp;     /* [fp] = fp */
	stack[3] = 0x401200;
	n = unwind__stack(&r, stack, sizeof(stack), r.sp, no_cfi, NULL, pcs, UNWIND_MAX_FRAMES);
	if (!ASSERT_TRUE(n >= 2 && n <= 4))
		return false;
	/* a non-canonical return address ends the walk before it is written */
	stack[0] = 0xfff0c7b4fff0c884ULL;
	n = unwind__stack(&r, stack, sizeof(stack), r.sp, no_cfi, NULL, pcs, UNWIND_MAX_FRAMES);
	if (!ASSERT_EQ(n, 1))
		return false;
	/* a frame pointer pointing past the copy reads nothing */
	stack[0] = 0x401100;
	r.fp = r.sp + sizeof(stack) - 8;
	n = unwind__stack(&r, stack, sizeof(stack), r.sp, no_cfi, NULL, pcs, UNWIND_MAX_FRAMES);
	if (!ASSERT_EQ(n, 2))
		return false;
	/* an instruction pointer no code can have: nothing */
	r.ip = 1ULL << 63;
	n = unwind__stack(&r, stack, sizeof(stack), r.sp, no_cfi, NULL, pcs, UNWIND_MAX_FRAMES);
	return ASSERT_EQ(n, 0);
}

TEST(unwind_random_stacks_are_bounded)
{
	struct capture *c = calloc(1, sizeof(*c));
	struct symbolizer *s = symbolizer__new(NULL);
	uint64_t pcs[UNWIND_MAX_FRAMES];
	bool ok = false;

	if (!ASSERT_TRUE(c) || !ASSERT_TRUE(s))
		goto cleanup;
	/* real registers and tables, a stack of noise: every walk ends, bounded */
	unwind_test_a(c);
	srand(15);
	for (int round = 0; round < 200; round++) {
		size_t n;

		for (size_t i = 8; i < c->len; i++)
			c->stack[i] = rand();
		n = symbolizer__unwind(s, getpid(), &c->regs, c->stack, c->len, c->regs.sp, pcs,
				       UNWIND_MAX_FRAMES);
		if (!ASSERT_TRUE(n >= 1 && n <= UNWIND_MAX_FRAMES))
			goto cleanup;
		for (size_t i = 0; i < n; i++)
			if (!ASSERT_TRUE(unwind__canonical(pcs[i])))
				goto cleanup;
	}
	ok = true;
cleanup:
	symbolizer__free(s);
	free(c);
	return ok;
}

/* A .eh_frame of one CIE (zR, pcrel sdata4) with extra instructions, and a terminator. */
static size_t make_cie(uint8_t *buf, const uint8_t *extra, size_t nextra)
{
	static const uint8_t head[] = { 0,    0,  0, 0,	   1,	 'z', 'R', 0,	 1,
					0x78, 16, 1, 0x1b, 0x0c, 7,   8,   0x90, 1 };
	size_t n = sizeof(head) + nextra;
	uint32_t len;

	memcpy(buf + 4, head, sizeof(head));
	memcpy(buf + 4 + sizeof(head), extra, nextra);
	while (n % 4)
		buf[4 + n++] = 0; /* DW_CFA_nop */
	len = n;
	memcpy(buf, &len, 4);
	memset(buf + 4 + n, 0, 4);
	return 4 + n + 4;
}

TEST(unwind_tables_checked)
{
	/* DW_CFA_offset_extended r200000: libdw would make room for 200,001 registers */
	static const uint8_t huge_reg[] = { 0x05, 0xc0, 0x9a, 0x0c, 1 };
	/* DW_CFA_offset_extended r15: fine */
	static const uint8_t r15[] = { 0x05, 15, 2 };
	/* an opcode DWARF does not have */
	static const uint8_t unknown[] = { 0x3a };
	struct rw_error err;
	struct elfbin *eb = elfbin__open("/proc/self/exe", &err);
	uint8_t buf[64];
	Elf_Data d = { .d_buf = buf };
	bool ok = false;

	if (!CHECK(eb, "%s", err.msg))
		return false;
	/* this very binary's tables, as gcc wrote them */
	if (!ASSERT_TRUE(unwind__section_ok(elfbin__elf(eb), ".eh_frame", true)))
		goto cleanup;
	d.d_size = make_cie(buf, r15, sizeof(r15));
	if (!ASSERT_TRUE(unwind__table_ok(elfbin__elf(eb), &d, true)))
		goto cleanup;
	d.d_size = make_cie(buf, huge_reg, sizeof(huge_reg));
	if (!ASSERT_FALSE(unwind__table_ok(elfbin__elf(eb), &d, true)))
		goto cleanup;
	d.d_size = make_cie(buf, unknown, sizeof(unknown));
	if (!ASSERT_FALSE(unwind__table_ok(elfbin__elf(eb), &d, true)))
		goto cleanup;
	/* cut short: the entry runs past the section */
	d.d_size = make_cie(buf, r15, sizeof(r15)) - 10;
	ok = ASSERT_FALSE(unwind__table_ok(elfbin__elf(eb), &d, true));
cleanup:
	elfbin__free(eb);
	return ok;
}

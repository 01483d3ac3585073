/* SPDX-License-Identifier: MIT */
/*
 * The registers a probe reads, per architecture (-D__TARGET_ARCH_x86 or
 * -D__TARGET_ARCH_arm64, with that architecture's vmlinux.h).
 *
 * x86-64: a CALL pushes its return address, so at an entry and at a RET it
 * is the word at SP; Go's g is in R14 (ABIInternal).
 * arm64: a BL leaves its return address in the link register X30, where a
 * RET takes it from; SP is the caller's at the entry and at the RET alike
 * (nothing is pushed); Go's g is in X28.
 */
#ifndef RETWATCH_ARCH_BPF_H
#define RETWATCH_ARCH_BPF_H

#if defined(__TARGET_ARCH_x86)
#define REG_IP(r) ((r)->ip)
#define REG_SP(r) ((r)->sp)
#define REG_FP(r) ((r)->bp)
#define REG_GO_G(r) ((r)->r14)
/* what a call leaves on the stack: its return address */
#define CALL_PUSHES 8
#elif defined(__TARGET_ARCH_arm64)
#define REG_IP(r) ((r)->pc)
#define REG_SP(r) ((r)->sp)
#define REG_FP(r) ((r)->regs[29])
#define REG_GO_G(r) ((r)->regs[28])
#define REG_LR(r) ((r)->regs[30])
#define CALL_PUSHES 0
#else
#error "retwatch's BPF programs are built for x86 or arm64 (-D__TARGET_ARCH_x86/arm64)"
#endif

/* The return address at a function's entry or at its RET; 0 when unread. */
static __always_inline __u64 regs__ret_addr(struct pt_regs *regs)
{
#ifdef REG_LR
	return REG_LR(regs);
#else
	__u64 ret_addr;

	if (bpf_probe_read_user(&ret_addr, sizeof(ret_addr), (void *)REG_SP(regs)))
		return 0;
	return ret_addr;
#endif
}

/* The first RW_ARG_REGS integer argument registers, in the order the
 * userspace argument specs index them (src/trace/callargs.c). */
static __always_inline void regs__args(struct pt_regs *regs, __u64 *r)
{
#if defined(__TARGET_ARCH_x86)
	r[0] = regs->ax;
	r[1] = regs->bx;
	r[2] = regs->cx;
	r[3] = regs->dx;
	r[4] = regs->si;
	r[5] = regs->di;
	r[6] = regs->r8;
	r[7] = regs->r9;
	r[8] = regs->r10;
	r[9] = regs->r11;
#else
#pragma unroll
	for (int i = 0; i < RW_ARG_REGS; i++)
		r[i] = regs->regs[i];
#endif
}

/* struct rw_regs.saved: the callee-saved registers an unwinder starts from. */
static __always_inline void regs__callee_saved(struct pt_regs *regs, __u64 *r)
{
#if defined(__TARGET_ARCH_x86)
	r[0] = regs->bx;
	r[1] = regs->r12;
	r[2] = regs->r13;
	r[3] = regs->r14;
	r[4] = regs->r15;
#else
	r[0] = REG_LR(regs);
#pragma unroll
	for (int i = 0; i < 10; i++)
		r[1 + i] = regs->regs[19 + i];
#endif
}

#endif /* RETWATCH_ARCH_BPF_H */

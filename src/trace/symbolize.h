/* SPDX-License-Identifier: MIT */
/*
 * User stack addresses of a process to "function+0xoff (binary)". Each
 * process's executable mappings are read once and kept until the process is
 * forgotten; a mapped file is opened through /proc/PID/map_files (the
 * process's file, even inside a container or deleted) and analysed through
 * the binary cache, so a binary shared by many processes is read once.
 * Not thread-safe.
 */
#ifndef RETWATCH_SYMBOLIZE_H
#define RETWATCH_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "analysis/binary.h"
#include "trace/tracer.h"
#include "analysis/unwind.h"

struct symbolizer;

/* cache may be NULL (each process then opens its binaries itself). NULL and
 * errno set on error. */
struct symbolizer *symbolizer__new(struct binary_cache *cache);
/* NULL is fine. */
void symbolizer__free(struct symbolizer *s);
/*
 * Where pid's container runtime sees the host's files (its overlay's layer
 * paths are valid there): writes it into buf and returns true, or false.
 */
typedef bool (*symbolizer_root_fn)(pid_t pid, char *buf, size_t len);
/*
 * Opens a mapped file that lives in a container image's layer as that
 * layer's file (overlay.h), found through fn's root: the containers of one
 * image share one analysis in the cache, not one each. Files elsewhere are
 * opened as before (through the process's view).
 */
void symbolizer__set_root_fn(struct symbolizer *s, symbolizer_root_fn fn);

/*
 * Writes addr of process pid into buf as one of:
 *   "main.sleepFor+0x2a (/app/tracee)"  a function of a mapped file (C++ and
 *                                       Rust ones demangled)
 *   "/app/tracee+0x4a1b2c"              a mapped file, no function there: the
 *                                       file offset
 *   "0x7ffc1234 ([vdso])"               a mapping without a file ([anon]: unnamed)
 *   "0x1234 (?)"                        no executable mapping holds addr
 * The path is the one the process sees; " (deleted)" follows a deleted file.
 * Names come from the file's symbols and DWARF, else from its separate
 * debug file inside the process's root (/usr/lib/debug/.build-id/xx/yyyy.debug,
 * or the one its .gnu_debuglink names, beside it, in .debug/ or under
 * /usr/lib/debug), used only when its build id (or CRC-32) is the file's.
 *
 * Stack convention: frame 0 of a stack is the instruction pointer (is_ip
 * true), looked up as is; every other frame is a return address, which
 * points just past its CALL and may be the first byte of the next function,
 * so addr - 1 is looked up (the offset printed is still addr's).
 *
 * buf is always filled (truncated to len). Returns 0 when a function was
 * named, else -errno saying why not (-ENOENT: no mapping or no function;
 * -ESRCH: the process is gone; others from opening the binary). When addr is
 * in no mapping the process's maps are read again (mapped since: dlopen), at
 * most once per call and once per 100 ms per process, since frames unwound
 * through code without frame pointers are often garbage.
 */
int symbolizer__resolve(struct symbolizer *s, pid_t pid, uint64_t addr, bool is_ip, char *buf,
			size_t len);

/*
 * Unwinds a copy of the top of pid's user stack (len bytes at address base,
 * which holds regs->sp)
 * with the unwind tables of the files mapped there (.eh_frame, .debug_frame,
 * a separate debug file's .debug_frame), by frame pointer where a file has
 * none, into ret_pcs: regs->ip, then each return address, innermost first,
 * as symbolizer__resolve takes them. Stops at a non-canonical address, when
 * a step does not climb the stack, or at max (<= UNWIND_MAX_FRAMES) frames.
 * Returns how many were written.
 */
size_t symbolizer__unwind(struct symbolizer *s, pid_t pid, const struct unwind_regs *regs,
			  const void *stack, size_t len, uint64_t base, uint64_t *ret_pcs,
			  size_t max);

/*
 * A slow call's frames into ret_pcs (max of them, UNWIND_MAX_FRAMES is
 * enough), innermost first, for symbolizer__resolve: its stack copy unwound
 * when it carries one (native code), else the frame-pointer walk it
 * carries (Go). Returns how many.
 */
size_t symbolizer__event_stack(struct symbolizer *s, const struct tracer_event *ev,
			       uint64_t *ret_pcs, size_t max);

/*
 * Reads pid's mappings and opens their files now, while it runs: its slow
 * calls read after it exited (from the ring buffer, on a loaded machine)
 * are still named. Without it, a process is read at its first slow call.
 */
void symbolizer__watch(struct symbolizer *s, pid_t pid);

/* Drops what is kept for pid (call it when the process exits: pids are reused). */
void symbolizer__forget(struct symbolizer *s, pid_t pid);

#endif

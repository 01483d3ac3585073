/* SPDX-License-Identifier: MIT */
/*
 * The one clock of every schedule (CLOCK_MONOTONIC, as bpf_ktime_get_ns
 * reads it, so kernel and userspace times compare), and the wall-clock
 * times the API server's objects hold (RFC 3339, UTC).
 */
#ifndef RETWATCH_CLOCK_H
#define RETWATCH_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define NS_PER_S 1000000000ULL

/* Now on CLOCK_MONOTONIC, in nanoseconds. */
uint64_t clock__mono_ns(void);
/*
 * Whether this process's time namespace shifts CLOCK_BOOTTIME from the
 * kernel's (/proc/self/timens_offsets): the start times /proc/PID/stat gives
 * us are then not the ones the kernel's programs read.
 */
bool clock__boottime_shifted(void);
/* t as "2026-11-23T12:00:00Z". */
void clock__rfc3339(time_t t, char *buf, size_t len);
/* Reads the seconds of an RFC 3339 time ("...Z"); 0 when s is NULL or not one. */
time_t clock__parse_rfc3339(const char *s);

#endif

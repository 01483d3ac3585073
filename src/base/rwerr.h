/* SPDX-License-Identifier: MIT */
/* A caller-owned error message: library code fills it, the caller logs it. */
#ifndef RETWATCH_RWERR_H
#define RETWATCH_RWERR_H

#include <stdarg.h>
#include <stddef.h>

struct rw_error {
	char msg[1024];
};

/* Sets err->msg from a printf format; err may be NULL. Always returns -errnum
 * (errnum is a positive errno value) so callers can `return rw_error_set(...)`. */
int rw_error_set(struct rw_error *err, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Replaces each from in err's message by to (a path we opened by the one the user gave). */
void rw_error_replace(struct rw_error *err, const char *from, const char *to);

#endif

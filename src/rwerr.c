// SPDX-License-Identifier: MIT
#include <stdio.h>

#include "rwerr.h"

int rw_error_set(struct rw_error *err, int errnum, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -errnum;
}

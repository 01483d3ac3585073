// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>

#include "base/rwerr.h"

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

void rw_error_replace(struct rw_error *err, const char *from, const char *to)
{
	char out[sizeof(err->msg)], *at, *src;
	size_t o = 0, nfrom = strlen(from);

	if (!err || !nfrom)
		return;
	src = err->msg;
	while ((at = strstr(src, from)) && o < sizeof(out)) {
		o += snprintf(out + o, sizeof(out) - o, "%.*s%s", (int)(at - src), src, to);
		src = at + nfrom;
	}
	if (src == err->msg)
		return;
	if (o < sizeof(out))
		snprintf(out + o, sizeof(out) - o, "%s", src);
	snprintf(err->msg, sizeof(err->msg), "%s", out);
}

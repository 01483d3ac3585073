// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errlist.h"

void errlist__add(struct errlist *e, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	int n;

	if (e->n == ERRLIST_MAX) {
		e->more++;
		return;
	}
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n >= 0)
		e->msgs[e->n++] = msg;
}

void errlist__clear(struct errlist *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->msgs[i]);
	e->n = e->more = 0;
}

static int str_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

void errlist__sort(struct errlist *e)
{
	qsort(e->msgs, e->n, sizeof(e->msgs[0]), str_cmp);
}

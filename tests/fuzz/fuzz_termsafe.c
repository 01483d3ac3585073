// SPDX-License-Identifier: MIT
/*
 * What reaches a terminal (base/termsafe.h) over any bytes a name could
 * hold: the stream writes nothing that would be escaped again, the same
 * whether the bytes come in one write or two cut anywhere; the JSON text
 * has no such byte either.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/termsafe.h"

/* What the stream writes for data cut at cut (read back through a pipe). */
static size_t streamed(const uint8_t *data, size_t size, size_t cut, char *out, size_t len)
{
	int fds[2];
	size_t n = 0;
	ssize_t r;
	FILE *f;

	if (pipe(fds))
		abort();
	if (!(f = termsafe__stream(fds[1])))
		abort();
	setvbuf(f, NULL, _IONBF, 0);
	fwrite(data, 1, cut, f);
	fwrite(data + cut, 1, size - cut, f);
	fclose(f);
	close(fds[1]);
	while (n < len && (r = read(fds[0], out + n, len - n)) > 0)
		n += (size_t)r;
	close(fds[0]);
	return n;
}

/* A table cell of s: exactly width columns (whole when width < 0), and
 * nothing a terminal would take as a command, whatever s holds. */
static void cell(const char *s, int width)
{
	char *out = NULL;
	size_t n = 0, cols;
	FILE *f = open_memstream(&out, &n);

	if (!f)
		return;
	cols = termsafe__cell(f, s, width, false);
	fclose(f);
	if ((width >= 0 && cols != (size_t)width) || (width < 0 && cols != termsafe__width(s)) ||
	    termsafe__needs(out, n))
		abort();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, *json, *a, *b;
	size_t len, na, nb;

	if (size > 4096)
		return 0;
	s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	len = 4 * size + 1;
	json = termsafe__json(s);
	if (!json || termsafe__needs(json, strlen(json)))
		abort();
	cell(s, size ? data[0] % 48 : 0);
	cell(s, -1);
	/* the stream escapes NUL too and reads the whole input; the pipe holds 64 KiB */
	a = malloc(len);
	b = malloc(len);
	na = streamed(data, size, 0, a, len);
	nb = streamed(data, size, size ? data[0] % (size + 1) : 0, b, len);
	if (na != nb || memcmp(a, b, na) || termsafe__needs(a, na))
		abort();
	free(a);
	free(b);
	free(json);
	free(s);
	return 0;
}

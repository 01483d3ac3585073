// SPDX-License-Identifier: MIT
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "base/demangle.h"

struct out {
	char *buf;
	size_t len, used;
	jmp_buf overflow;
};

/*
 * The callback interfaces of libiberty allocate nothing (their working
 * arrays live on the stack): leaving one by longjmp as soon as the output
 * passes the bound is safe, and bounds the time a name can cost, however
 * its substitutions multiply.
 */
static void put(const char *s, size_t n, void *opaque)
{
	struct out *o = opaque;

	if (!n)
		return; /* Rust's demangler hands out empty pieces, s NULL at times */
	if (n >= o->len - o->used)
		longjmp(o->overflow, 1);
	memcpy(o->buf + o->used, s, n);
	o->used += n;
	o->buf[o->used] = 0;
}

static bool run(const char *name, bool rust, int options, char *buf, size_t len)
{
	char tmp[DEMANGLE_MAX_OUT + 1];
	struct out o = { .buf = tmp, .len = sizeof(tmp) };
	int ok;

	tmp[0] = 0;
	if (setjmp(o.overflow))
		return false;
	ok = rust ? rust_demangle_callback(name, options, put, &o)
		  : cplus_demangle_v3_callback(name, options, put, &o);
	if (!ok || !o.used || o.used >= len)
		return false;
	memcpy(buf, tmp, o.used + 1);
	return true;
}

/*
 * Whether a Rust v0 name may hold a punycode identifier ("u" and its
 * length): libiberty decodes one into a buffer of its own, which the
 * longjmp of put() would leak when the bound ends the output inside it.
 * Such names (and a few others with "u" and a digit) stay mangled.
 */
static bool v0_punycode(const char *name)
{
	if (strncmp(name, "_R", 2))
		return false;
	for (const char *p = strchr(name, 'u'); p; p = strchr(p + 1, 'u'))
		if (p[1] >= '0' && p[1] <= '9')
			return true;
	return false;
}

/*
 * Whether a Rust v0 name may hold a binder of more than V0_MAX_BOUND
 * lifetimes ("for<'a, 'b, ...>": G and a base-62 count right after a fn
 * type's F or a dyn type's D). libiberty loops once per lifetime, and where
 * it parses without printing (an impl's own path) the output bound of put()
 * never stops it: "FGzzzzzzzzz_" cost 62^9 turns. Real names bind a few.
 * An identifier that happens to hold such letters stays mangled too.
 */
#define V0_MAX_BOUND 64

static bool v0_huge_binder(const char *name)
{
	if (strncmp(name, "_R", 2))
		return false;
	for (const char *p = strchr(name, 'G'); p; p = strchr(p + 1, 'G')) {
		uint64_t n = 0;
		const char *q;

		if (p[-1] != 'F' && p[-1] != 'D')
			continue;
		for (q = p + 1; *q && *q != '_' && n <= V0_MAX_BOUND; q++) {
			if (*q >= '0' && *q <= '9')
				n = n * 62 + (uint64_t)(*q - '0');
			else if (*q >= 'a' && *q <= 'z')
				n = n * 62 + 10 + (uint64_t)(*q - 'a');
			else if (*q >= 'A' && *q <= 'Z')
				n = n * 62 + 36 + (uint64_t)(*q - 'A');
			else
				break;
		}
		if (n > V0_MAX_BOUND)
			return true;
	}
	return false;
}

bool demangle(const char *name, bool params, char *buf, size_t len)
{
	if (!len || strnlen(name, DEMANGLE_MAX_IN + 1) > DEMANGLE_MAX_IN || v0_punycode(name) ||
	    v0_huge_binder(name))
		return false;
	/* Rust's legacy names are C++-shaped (_ZN...17h<hash>E): Rust first */
	if ((!strncmp(name, "_R", 2) || !strncmp(name, "_ZN", 3)) && run(name, true, 0, buf, len))
		return true;
	if (strncmp(name, "_Z", 2))
		return false;
	/* the default recursion limit of libiberty stays on */
	return run(name, false, params ? DMGL_PARAMS | DMGL_ANSI : 0, buf, len);
}

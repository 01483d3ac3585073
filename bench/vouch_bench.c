// SPDX-License-Identifier: MIT
/*
 * What the check before attaching costs (binvouch.c): every function a
 * pattern matches in a file, its entry, entry site, RETs and tail-called
 * functions' RETs held against the file's own code, one function at a time
 * as the tracer attaches them, and all at once; and, given a debug file, its
 * functions held against the same code as when the debug file is found
 * (binary__disagrees). Prints figures; asserts nothing.
 *
 *   vouch_bench FILE [DEBUGFILE|-] [PATTERN...]     (default pattern: *)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/binary.h"
#include "analysis/elfbin.h"
#include "base/clock.h"

static double ms_since(uint64_t t0)
{
	return (double)(clock__mono_ns() - t0) / 1e6;
}

/* Every probe address of fi, as virtual addresses, appended to *addrs. */
static int sites_of(struct binary *b, const struct func_info *fi, uint64_t **addrs, size_t *n,
		    size_t *cap)
{
	size_t need = *n + 2 + fi->nreturns + fi->ntail_returns;

	if (need > *cap) {
		uint64_t *p = realloc(*addrs, need * 2 * sizeof(*p));

		if (!p)
			return -ENOMEM;
		*addrs = p;
		*cap = need * 2;
	}
	(*addrs)[(*n)++] = fi->address;
	(*addrs)[(*n)++] = fi->address + (uint64_t)fi->entry_site;
	for (size_t k = 0; k < fi->nreturns; k++)
		(*addrs)[(*n)++] = fi->address + (uint64_t)fi->returns[k];
	for (size_t k = 0; k < fi->ntail_returns; k++) {
		uint64_t a;

		if (!binary__offset_to_addr(b, fi->file_offset + (uint64_t)fi->tail_returns[k], &a))
			(*addrs)[(*n)++] = a;
	}
	return 0;
}

static void debug_file(struct binary *b, const char *path)
{
	struct rw_error err = { "" };
	struct elfbin *d = elfbin__open(path, &err);
	const struct elfbin_sym *syms;
	uint64_t *addrs, t0;
	size_t n, bad = 0;
	int e;

	if (!d) {
		fprintf(stderr, "vouch_bench: %s: %s\n", path, err.msg);
		return;
	}
	syms = elfbin__syms(d, &n);
	addrs = calloc(n ? n : 1, sizeof(*addrs));
	for (size_t i = 0; addrs && i < n; i++)
		addrs[i] = syms[i].addr;
	t0 = clock__mono_ns();
	e = addrs ? binary__disagrees(b, addrs, n, &bad, &err) : -ENOMEM;
	printf("debug file %s: %zu functions held against the code in %.2f ms (%s)\n", path, n,
	       ms_since(t0), e ? err.msg : "agrees");
	free(addrs);
	elfbin__free(d);
}

int main(int argc, char **argv)
{
	const char *all = "*";
	const char *const *pats = argc > 3 ? (const char *const *)argv + 3 : &all;
	size_t npats = argc > 3 ? (size_t)argc - 3 : 1, n = 0, cap = 0, bad, refused = 0;
	struct rw_error err = { "" };
	struct binary_match m = { 0 };
	double per_max = 0, per_sum = 0;
	uint64_t *addrs = NULL, t0;
	struct binary *b;

	if (argc < 2) {
		fprintf(stderr, "usage: vouch_bench FILE [DEBUGFILE|-] [PATTERN...]\n");
		return 2;
	}
	t0 = clock__mono_ns();
	b = binary__open(NULL, argv[1], &err);
	if (!b) {
		fprintf(stderr, "vouch_bench: %s\n", err.msg);
		return 1;
	}
	printf("%s: %zu functions, opened in %.1f ms%s%s\n", argv[1], binary__nfuncs(b),
	       ms_since(t0), binary__debug_file(b) ? ", debug file " : "",
	       binary__debug_file(b) ? binary__debug_file(b) : "");
	t0 = clock__mono_ns();
	if (binary__match(b, pats, npats, 1u << 20, &m, &err)) {
		fprintf(stderr, "vouch_bench: %s\n", err.msg);
		return 1;
	}
	printf("matched and analysed %zu functions in %.1f ms\n", m.nfuncs, ms_since(t0));
	for (size_t i = 0; i < m.nfuncs; i++) {
		size_t from = n;
		double ms;

		if (sites_of(b, m.funcs[i], &addrs, &n, &cap))
			return 1;
		t0 = clock__mono_ns();
		if (binary__vouch(b, addrs + from, n - from, &bad, &err) && ++refused <= 5)
			printf("refused %s: %s\n", m.funcs[i]->name, err.msg);
		ms = ms_since(t0);
		per_sum += ms;
		per_max = ms > per_max ? ms : per_max;
	}
	printf("one function at a time (as attached): %zu addresses of %zu functions in %.1f ms, "
	       "%.1f us a function on average, %.2f ms the most; %zu refused\n",
	       n, m.nfuncs, per_sum, m.nfuncs ? per_sum * 1e3 / (double)m.nfuncs : 0.0, per_max,
	       refused);
	t0 = clock__mono_ns();
	binary__vouch(b, addrs, n, &bad, &err);
	printf("all at once: %.1f ms\n", ms_since(t0));
	if (argc > 2 && strcmp(argv[2], "-"))
		debug_file(b, argv[2]);
	free(addrs);
	binary_match__clear(&m);
	binary__put(b);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * shlib_bench: how long attaching to NFUNCS functions of a shared library in
 * a running process takes, the way `retwatch trace --pid PID LIB:NAME...` and
 * the agent do it (shlib_procs__update: read the process's mappings, open
 * the library through the process, analyse it, attach at every entry and
 * RET). Picks NFUNCS entry+ret functions spread evenly over the library's
 * functions in name order (the same ones every run) and names each one
 * exactly. A round: a new tracer with an empty analysis cache (not timed),
 * attach (cold: the analysis included), detach, attach again (warm: the
 * cached analysis), detach.
 *
 * usage: shlib_bench PID LIB [NFUNCS [ROUNDS [MODE]]]
 *   LIB     the library's file name or glob, as in a pattern (libc.so.6)
 *   NFUNCS  default 100; ROUNDS default 3; MODE auto, uprobe_multi or
 *           perf_event (default auto)
 *
 * Prints one "key value" line a figure (medians over the rounds).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "analysis/binary.h"
#include "base/clock.h"
#include "trace/shlib.h"
#include "trace/tracer.h"

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level, (void)fmt, (void)ap;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static double median_ms(uint64_t *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) / 1e6;
}

/* "LIB:name" for NFUNCS entry+ret functions spread over the library's. */
static char **pick(pid_t pid, const char *lib, size_t nwant, size_t *ret_n)
{
	struct binary_match all = { 0 };
	const char *star = "*";
	struct shlib_list l;
	struct binary *b = NULL;
	char path[64], **out = NULL;
	size_t ncand = 0, n = 0, k = 0;
	int fd = -1;

	*ret_n = 0;
	if (shlib_list__load(pid, &l, NULL))
		return NULL;
	for (size_t i = 0; i < l.n && fd < 0; i++)
		if (shlib__matches(&l.libs[i], lib))
			fd = shlib__open(pid, &l.libs[i], NULL, NULL);
	if (fd < 0)
		goto out;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	b = binary__open(NULL, path, NULL);
	if (!b || binary__match(b, &star, 1, SIZE_MAX, &all, NULL))
		goto out;
	for (size_t i = 0; i < all.nfuncs; i++)
		ncand += all.funcs[i]->mode == FUNC_MODE_ENTRY_RET;
	if (nwant > ncand)
		nwant = ncand;
	out = calloc(nwant + 1, sizeof(*out));
	for (size_t i = 0; out && i < all.nfuncs && n < nwant; i++) {
		if (all.funcs[i]->mode != FUNC_MODE_ENTRY_RET)
			continue;
		if ((unsigned __int128)k++ * nwant < (unsigned __int128)n * ncand)
			continue;
		if (asprintf(&out[n], "%s:%s", lib, all.funcs[i]->name) < 0)
			break;
		n++;
	}
	printf("library_functions %zu\nentry_ret_functions %zu\n", all.nfuncs, ncand);
	*ret_n = n;
out:
	binary_match__clear(&all);
	binary__put(b);
	if (fd >= 0)
		close(fd);
	shlib_list__clear(&l);
	return out;
}

/* Attaches; the targets' functions and return sites. 0 or -errno. */
static int attach(struct tracer *t, struct binary_cache *cache, pid_t pid, char **pats, size_t n,
		  struct shlib_procs **ret, size_t *ret_funcs, size_t *ret_rets)
{
	struct rw_error err = { "" };
	char *unmatched = NULL;
	int e;

	*ret = shlib_procs__new(pid, (const char *const *)pats, n, 0);
	if (!*ret)
		return -ENOMEM;
	e = shlib_procs__update(*ret, t, cache, NULL, NULL, SIZE_MAX, NULL, NULL, &unmatched, &err);
	if (e == 0)
		e = -EIO;
	if (unmatched)
		fprintf(stderr, "shlib_bench: %s\n", unmatched);
	free(unmatched);
	if (e < 0)
		fprintf(stderr, "shlib_bench: attach failed: %s\n",
			err.msg[0] ? err.msg : "see above");
	*ret_funcs = *ret_rets = 0;
	for (size_t i = 0; i < shlib_procs__ntargets(*ret); i++) {
		struct tracer_target *tt = shlib_procs__target(*ret, i);

		for (size_t k = 0; k < tracer_target__nfuncs(tt); k++)
			*ret_rets += tracer_target__func(tt, k)->info->nreturns;
		*ret_funcs += tracer_target__nfuncs(tt);
	}
	return e < 0 ? e : 0;
}

static void detach(struct tracer *t, struct shlib_procs *sp)
{
	for (size_t i = 0; i < shlib_procs__ntargets(sp); i++)
		tracer__remove(t, shlib_procs__target(sp, i));
	shlib_procs__free(sp);
}

int main(int argc, char **argv)
{
	struct tracer_opts opts = { 0 };
	uint64_t cold[16], warm[16], det[16];
	size_t n, nfuncs = 0, nrets = 0;
	int rounds;
	char **pats;
	pid_t pid;

	if (argc < 3) {
		fprintf(stderr, "usage: shlib_bench PID LIB [NFUNCS [ROUNDS [MODE]]]\n");
		return 2;
	}
	libbpf_set_print(quiet);
	pid = atoi(argv[1]);
	rounds = argc > 4 ? atoi(argv[4]) : 3;
	if (rounds < 1 || rounds > 16 ||
	    (argc > 5 && tracer_attach_mode__parse(argv[5], &opts.attach_mode))) {
		fprintf(stderr,
			"shlib_bench: ROUNDS 1 to 16; MODE auto, uprobe_multi or perf_event\n");
		return 2;
	}
	pats = pick(pid, argv[2], argc > 3 ? strtoul(argv[3], NULL, 10) : 100, &n);
	if (!pats || !n) {
		fprintf(stderr, "shlib_bench: no library matching %s in process %d\n", argv[2],
			pid);
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		struct rw_error err = { "" };
		struct shlib_procs *sp;
		struct tracer *t;
		uint64_t t0;

		opts.cache = binary_cache__new(16);
		t = tracer__new(&opts, &err);
		if (!t) {
			fprintf(stderr, "shlib_bench: %s\n", err.msg);
			return 1;
		}
		if (!r)
			printf("attach_mode %s\n", tracer__attach_mode(t));
		t0 = clock__mono_ns();
		if (attach(t, opts.cache, pid, pats, n, &sp, &nfuncs, &nrets))
			return 1;
		cold[r] = clock__mono_ns() - t0;
		t0 = clock__mono_ns();
		detach(t, sp);
		det[r] = clock__mono_ns() - t0;
		/* the kernel frees the deleted histograms after a grace period:
		 * attaching again at once can find its allocator's cache empty */
		sleep(2);
		t0 = clock__mono_ns();
		if (attach(t, opts.cache, pid, pats, n, &sp, &nfuncs, &nrets))
			return 1;
		warm[r] = clock__mono_ns() - t0;
		detach(t, sp);
		tracer__free(t);
		binary_cache__free(opts.cache);
	}
	printf("functions %zu\nreturn_sites %zu\nrounds %d\n", nfuncs, nrets, rounds);
	printf("attach_cold_ms %.1f\nattach_warm_ms %.1f\ndetach_ms %.1f\n",
	       median_ms(cold, rounds), median_ms(warm, rounds), median_ms(det, rounds));
	for (size_t i = 0; i < n; i++)
		free(pats[i]);
	free(pats);
	return 0;
}

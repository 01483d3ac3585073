// SPDX-License-Identifier: MIT
/*
 * attach_time: how long attaching takes at the entries and RETs of many
 * functions of one binary, with uprobe_multi links and with one perf-event
 * uprobe per offset. Picks NFUNCS entry+ret functions spread evenly over the
 * binary's functions in name order (the same ones every run), attaches an
 * empty program at all their entries and RETs as the tracer would (a link for
 * the entries, a link for the RETs), and times attach and detach. uprobes
 * attach to the file: no process needs to run it.
 *
 * usage: attach_time BINARY [NFUNCS [BUDGET_SECONDS [REPEATS]]]
 *   NFUNCS          functions to probe (default 1000)
 *   BUDGET_SECONDS  time the per-offset path may take, attach and detach;
 *                   past it, an evenly spread subset of the offsets is
 *                   timed and the figures extrapolated (default 100)
 *   REPEATS         uprobe_multi attach/detach rounds (default 3)
 *
 * Prints one "key value" line a figure, for a script to read.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/binary.h"
#include "emptyprog.h"
#include "trace/uprobe.h"

/* Offsets timed first, to size the per-offset run to the budget. */
#define CALIBRATION 8

/* NFUNCS entry+ret functions spread evenly over those the binary has. */
static size_t pick(const struct binary_match *all, size_t nwant, const struct func_info **ret)
{
	size_t ncand = 0, n = 0, k = 0;

	for (size_t i = 0; i < all->nfuncs; i++)
		ncand += all->funcs[i]->mode == FUNC_MODE_ENTRY_RET;
	if (nwant > ncand)
		nwant = ncand;
	for (size_t i = 0; i < all->nfuncs && n < nwant; i++) {
		if (all->funcs[i]->mode != FUNC_MODE_ENTRY_RET)
			continue;
		/* candidate k is taken when it is the first at or past n * ncand / nwant */
		if ((unsigned __int128)k * nwant >= (unsigned __int128)n * ncand)
			ret[n++] = all->funcs[i];
		k++;
	}
	printf("candidates %zu\n", ncand);
	return n;
}

static int time_multi(int prog_fd, const char *path, const struct offsets *o, int repeats)
{
	struct uprobe_links entry, ret;
	struct rw_error err = { 0 };
	int e = 0;

	uprobe_links__init(&entry);
	uprobe_links__init(&ret);
	for (int r = 0; r < repeats && !e; r++) {
		double t0 = now_s(), t1, t2;

		e = uprobe_attach(&entry, prog_fd, true, path, o->entries, o->cookies, o->nentries,
				  &err);
		if (!e)
			e = uprobe_attach(&ret, prog_fd, true, path, o->rets, o->cookies, o->nrets,
					  &err);
		t1 = now_s();
		uprobe_links__close(&ret);
		uprobe_links__close(&entry);
		t2 = now_s();
		if (e) {
			fprintf(stderr, "attach_time: %s\n", err.msg);
			break;
		}
		printf("multi_attach_s %.6f\nmulti_detach_s %.6f\n", t1 - t0, t2 - t1);
		fflush(stdout);
	}
	return e;
}

/* m of the n offsets, spread evenly. */
static void spread(const uint64_t *offsets, size_t n, uint64_t *ret, size_t m)
{
	for (size_t i = 0; i < m; i++)
		ret[i] = offsets[(unsigned __int128)i * n / m];
}

/* One perf-event uprobe an offset: attach, then detach, timed. */
static int perf_round(int prog_fd, const char *path, const uint64_t *offsets, size_t n,
		      const uint64_t *cookies, double *ret_attach, double *ret_detach)
{
	struct uprobe_links l;
	struct rw_error err = { 0 };
	double t0 = now_s(), t1;
	int e;

	uprobe_links__init(&l);
	e = uprobe_attach(&l, prog_fd, false, path, offsets, cookies, n, &err);
	t1 = now_s();
	uprobe_links__close(&l);
	*ret_attach = t1 - t0;
	*ret_detach = now_s() - t1;
	if (e)
		fprintf(stderr, "attach_time: %s\n", err.msg);
	return e;
}

/*
 * Detaching a perf-event uprobe waits for RCU grace periods under a global
 * lock, so it can cost far more than attaching; when attaching and detaching
 * all offsets would not fit in the budget, time an evenly spread subset and
 * extrapolate.
 */
static int time_perf(int prog_fd, const char *path, const uint64_t *offsets, size_t n,
		     const uint64_t *cookies, double budget)
{
	uint64_t *sub = calloc(n + 1, sizeof(*sub));
	size_t m = n < CALIBRATION ? n : CALIBRATION;
	double ta, td;
	int e = -ENOMEM;

	if (!sub)
		return e;
	spread(offsets, n, sub, m);
	e = perf_round(prog_fd, path, sub, m, cookies, &ta, &td);
	if (e)
		goto out;
	printf("perf_calibration_offsets %zu\nperf_calibration_attach_s %.6f\n"
	       "perf_calibration_detach_s %.6f\n",
	       m, ta, td);
	if ((ta + td) / m * n > budget)
		m = budget / ((ta + td) / m);
	else
		m = n;
	if (m < CALIBRATION)
		m = n < CALIBRATION ? n : CALIBRATION;
	spread(offsets, n, sub, m);
	fflush(stdout);
	e = perf_round(prog_fd, path, sub, m, cookies, &ta, &td);
	if (e)
		goto out;
	printf("perf_offsets_measured %zu\nperf_attach_s %.6f\nperf_detach_s %.6f\n", m, ta, td);
	if (m < n)
		printf("perf_attach_extrapolated_s %.3f\nperf_detach_extrapolated_s %.3f\n",
		       ta * n / m, td * n / m);
out:
	free(sub);
	return e;
}

int main(int argc, char **argv)
{
	const char *star = "*";
	struct binary_match all = { 0 };
	const struct func_info **funcs = NULL;
	struct offsets o = { 0 };
	struct binary *bin = NULL;
	struct rw_error err = { 0 };
	uint64_t *both = NULL;
	size_t nwant = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000, n;
	double budget = argc > 3 ? atof(argv[3]) : 100, t0;
	int repeats = argc > 4 ? atoi(argv[4]) : 3, multi_fd = -1, perf_fd = -1, status = 1;

	if (argc < 2 || argc > 5 || !nwant || !(budget > 0) || repeats < 1) {
		fprintf(stderr, "usage: attach_time BINARY [NFUNCS [BUDGET_SECONDS [REPEATS]]]\n");
		return 2;
	}
	t0 = now_s();
	bin = binary__open(NULL, argv[1], &err);
	if (!bin || binary__match(bin, &star, 1, SIZE_MAX, &all, &err)) {
		fprintf(stderr, "attach_time: %s: %s\n", argv[1], err.msg);
		goto cleanup;
	}
	printf("functions %zu\nanalysis_s %.3f\n", all.nfuncs, now_s() - t0);
	funcs = calloc(nwant, sizeof(*funcs));
	if (!funcs)
		goto cleanup;
	n = pick(&all, nwant, funcs);
	if (offsets__collect(funcs, n, &o))
		goto cleanup;
	printf("picked %zu\nentries %zu\nrets %zu\n", n, o.nentries, o.nrets);
	fflush(stdout);

	multi_fd = empty_prog__load(true);
	perf_fd = empty_prog__load(false);
	if (multi_fd < 0 || perf_fd < 0) {
		fprintf(stderr, "attach_time: failed to load the empty program: %s\n",
			strerror(multi_fd < 0 ? -multi_fd : -perf_fd));
		goto cleanup;
	}
	printf("prog_id %u\nprog_id %u\n", prog__id(multi_fd), prog__id(perf_fd));
	fflush(stdout);
	if (!uprobe_multi_supported(multi_fd))
		printf("multi_unsupported 1\n");
	else if (time_multi(multi_fd, argv[1], &o, repeats))
		goto cleanup;

	/* the per-offset path: entries then RETs, one perf event each */
	both = calloc(o.nentries + o.nrets + 1, sizeof(*both));
	if (!both)
		goto cleanup;
	memcpy(both, o.entries, o.nentries * sizeof(*both));
	memcpy(both + o.nentries, o.rets, o.nrets * sizeof(*both));
	if (time_perf(perf_fd, argv[1], both, o.nentries + o.nrets, o.cookies, budget))
		goto cleanup;
	status = 0;
cleanup:
	if (perf_fd >= 0)
		close(perf_fd);
	if (multi_fd >= 0)
		close(multi_fd);
	free(both);
	offsets__free(&o);
	free(funcs);
	binary_match__clear(&all);
	binary__put(bin);
	return status;
}

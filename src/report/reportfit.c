// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kobj.h"
#include "base/latency.h"
#include "report/reportfit.h"
#include "report/statuswire.h"

/* One pod's row of a function, as the entry holds it. */
struct row {
	cJSON *item;
	uint64_t p99;
	size_t bytes; /* printed, with its comma */
};

/* A function of the entry: its pod rows (detached while fitting), slowest first. */
struct fn_rows {
	cJSON *fn, *pods;
	struct row *rows;
	size_t n;
	uint64_t bias; /* taken out of its rows' percentiles (status__add_bias) */
};

/* The folded pods of one revision. */
struct fold {
	const char *rev; /* "" when the pods have none */
	size_t pods;
	struct latency l;
};

static size_t json_size(const cJSON *o)
{
	char *text = cJSON_PrintUnformatted(o);
	size_t n = text ? strlen(text) : SIZE_MAX;

	free(text);
	return n;
}

static int by_p99(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	const char *nx = kobj_str(x->item, "name"), *ny = kobj_str(y->item, "name");

	if (x->p99 != y->p99)
		return x->p99 > y->p99 ? -1 : 1;
	return strcmp(nx ? nx : "", ny ? ny : "");
}

/* Takes fn's pod rows out of it, sorted slowest first. */
static int take_rows(struct fn_rows *f, cJSON *fn)
{
	const cJSON *item;
	size_t i = 0;

	f->fn = fn;
	f->bias = (uint64_t)kobj_int(fn, "probeBiasNs", 0);
	f->pods = cJSON_DetachItemFromObjectCaseSensitive(fn, "pods");
	f->n = (size_t)cJSON_GetArraySize(f->pods);
	f->rows = calloc(f->n ? f->n : 1, sizeof(*f->rows));
	if (!f->rows)
		return -ENOMEM;
	cJSON_ArrayForEach(item, f->pods)
	{
		struct latency l;

		f->rows[i].item = (cJSON *)item;
		f->rows[i].p99 = status_latency__from_json(item, &l)
					 ? 0
					 : latency__percentile(&l, 0.99);
		f->rows[i].bytes = json_size(item) + 1;
		i++;
	}
	qsort(f->rows, f->n, sizeof(*f->rows), by_p99);
	return 0;
}

/* The rows past the first keep of f, one per revision. */
static int add_folds(const struct fn_rows *f, size_t keep, cJSON *arr)
{
	struct fold *folds = NULL;
	size_t nfolds = 0;
	int ret = 0;

	if (keep < f->n && !(folds = calloc(f->n - keep, sizeof(*folds))))
		return -ENOMEM;
	for (size_t i = keep; i < f->n; i++) {
		const char *rev = kobj_str(f->rows[i].item, "revision");
		struct latency l;
		size_t k;

		rev = rev ? rev : "";
		if (status_latency__from_json(f->rows[i].item, &l))
			continue; /* not ours; never written */
		for (k = 0; k < nfolds && strcmp(folds[k].rev, rev); k++)
			;
		if (k == nfolds)
			folds[nfolds++].rev = rev;
		folds[k].pods++;
		latency__merge(&folds[k].l, &l);
	}
	for (size_t k = 0; k < nfolds && !ret; k++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(arr, o) ||
		    (*folds[k].rev && !cJSON_AddStringToObject(o, "revision", folds[k].rev)) ||
		    !cJSON_AddNumberToObject(o, "folded", (double)folds[k].pods) ||
		    status_latency__to_json(&folds[k].l, o)) {
			ret = -ENOMEM;
			break;
		}
		if (f->bias)
			status__take_bias(o, f->bias);
	}
	free(folds);
	return ret;
}

/*
 * Gives every function its first keep rows and folds of the rest: the rows
 * themselves when final, else references to them (a trial's size).
 */
static int build(struct fn_rows *fs, size_t nfs, size_t keep, bool final)
{
	for (size_t i = 0; i < nfs; i++) {
		struct fn_rows *f = &fs[i];
		cJSON *arr = cJSON_CreateArray();

		if (!arr)
			return -ENOMEM;
		cJSON_DeleteItemFromObjectCaseSensitive(f->fn, "pods");
		cJSON_AddItemToObject(f->fn, "pods", arr);
		for (size_t k = 0; k < keep && k < f->n; k++) {
			cJSON *row = final ? cJSON_Duplicate(f->rows[k].item, true) : NULL;

			if (final ? !row || !cJSON_AddItemToArray(arr, row)
				  : !cJSON_AddItemReferenceToArray(arr, f->rows[k].item)) {
				cJSON_Delete(row);
				return -ENOMEM;
			}
		}
		if (add_folds(f, keep, arr))
			return -ENOMEM;
	}
	return 0;
}

/*
 * The largest number of pods each function keeps whole within limit. The
 * entry with every pod folded is printed once; each kept row adds its own
 * size to that (its pods' folds shrink or go, never grow), so the estimate
 * is checked by one more print, and bisected below only when off.
 */
static size_t best_keep(cJSON *entry, struct fn_rows *fs, size_t nfs, size_t widest, size_t limit)
{
	size_t lo = 0, hi, folded, keep; /* widest does not fit */

	if (build(fs, nfs, 0, false) || (folded = json_size(entry)) > limit)
		return 0;
	for (keep = 0; keep < widest; keep++) {
		size_t more = 0;

		for (size_t i = 0; i < nfs; i++)
			if (keep < fs[i].n)
				more += fs[i].rows[keep].bytes;
		if (folded + more > limit)
			break;
		folded += more;
	}
	if (keep == 0 || (!build(fs, nfs, keep, false) && json_size(entry) <= limit))
		return keep;
	hi = keep;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (!build(fs, nfs, mid, false) && json_size(entry) <= limit)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Drops whole pod rows: each function counts its pods instead. */
static void unlist_pods(struct fn_rows *fs, size_t nfs, struct reportfit *ret)
{
	for (size_t i = 0; i < nfs; i++) {
		cJSON_DeleteItemFromObjectCaseSensitive(fs[i].fn, "pods");
		cJSON_AddArrayToObject(fs[i].fn, "pods");
		cJSON_AddNumberToObject(fs[i].fn, "podsUnlisted", (double)fs[i].n);
		if (fs[i].n > ret->unlisted)
			ret->unlisted = fs[i].n;
	}
}

/* Removes items from the end of arr until size fits limit; how many. */
static size_t drop_tail(cJSON *arr, size_t *size, size_t limit)
{
	size_t n = 0;
	cJSON *last;

	while (*size > limit && (last = cJSON_GetArrayItem(arr, cJSON_GetArraySize(arr) - 1))) {
		size_t item = json_size(last) + 1; /* and its comma */

		cJSON_DeleteItemFromArray(arr, cJSON_GetArraySize(arr) - 1);
		*size = *size > item ? *size - item : 0;
		n++;
	}
	return n;
}

static int by_calls_desc(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	int64_t cx = kobj_int(x, "calls", 0), cy = kobj_int(y, "calls", 0);

	return cx != cy ? (cx > cy ? -1 : 1) : 0;
}

/* Orders arr's items by calls, most first (the least called go first). */
static int sort_by_calls(cJSON *arr)
{
	size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
	cJSON **items = calloc(n ? n : 1, sizeof(*items));
	cJSON *it;

	if (!items)
		return -ENOMEM;
	while ((it = cJSON_DetachItemFromArray(arr, 0)))
		items[i++] = it;
	qsort(items, i, sizeof(*items), by_calls_desc);
	for (size_t k = 0; k < i; k++)
		cJSON_AddItemToArray(arr, items[k]);
	free(items);
	return 0;
}

/* Every function's slowest calls beyond the first keep of them go. */
static void cut_calls(cJSON *fns, size_t keep)
{
	const cJSON *fn;

	cJSON_ArrayForEach(fn, fns)
	{
		cJSON *calls = (cJSON *)kobj_get(fn, "slowestCalls");

		while (cJSON_GetArraySize(calls) > (int)keep)
			cJSON_DeleteItemFromArray(calls, cJSON_GetArraySize(calls) - 1);
		if (calls && !keep)
			cJSON_DeleteItemFromObjectCaseSensitive((cJSON *)fn, "slowestCalls");
	}
}

/* What `,"slowestCalls":[]` holds besides the calls. */
#define CALLS_KEY_BYTES (sizeof(",\"slowestCalls\":[]") - 1)

/*
 * Cuts every function's slowest calls to the same number, as few as it
 * takes to fit limit (none: the array goes); *size is entry's size after.
 * Sets r's calls (the most a function had) and calls_kept. Each call is
 * printed once: what cutting to each number saves is added up from those,
 * and the entry printed whole again only to check.
 */
static void fit_calls(cJSON *entry, cJSON *fns, size_t limit, size_t *size, struct reportfit *r)
{
	size_t *saves, over;
	const cJSON *fn, *call;

	cJSON_ArrayForEach(fn, fns)
	{
		size_t n = (size_t)cJSON_GetArraySize(kobj_get(fn, "slowestCalls"));

		r->calls = n > r->calls ? n : r->calls;
	}
	r->calls_kept = r->calls;
	if (*size <= limit || !r->calls)
		return;
	/* saves[i]: the bytes of every function's call i, with its comma */
	saves = calloc(r->calls, sizeof(*saves));
	if (saves) {
		cJSON_ArrayForEach(fn, fns)
		{
			size_t i = 0;

			cJSON_ArrayForEach(call, kobj_get(fn, "slowestCalls"))
				saves[i++] += json_size(call) + 1;
			if (i)
				saves[0] += CALLS_KEY_BYTES - 1;
		}
		over = *size - limit;
		while (r->calls_kept > 0 && over > 0) {
			r->calls_kept--;
			over = saves[r->calls_kept] < over ? over - saves[r->calls_kept] : 0;
		}
		free(saves);
		cut_calls(fns, r->calls_kept);
		*size = json_size(entry);
	}
	/* without memory, or counted short: one at a time */
	while (*size > limit && r->calls_kept > 0) {
		cut_calls(fns, --r->calls_kept);
		*size = json_size(entry);
	}
}

static void say(cJSON *entry, const struct reportfit *r, size_t budget)
{
	cJSON *errs = (cJSON *)kobj_get(entry, "errors");
	char msg[640];
	int n;

	if (!errs)
		errs = cJSON_AddArrayToObject(entry, "errors");
	n = snprintf(msg, sizeof(msg),
		     "report over its byte budget (%zu KiB; %zu KiB whole): ", budget / 1024,
		     (r->whole + 1023) / 1024);
	if (r->calls_kept < r->calls)
		n += snprintf(msg + n, sizeof(msg) - (size_t)n,
			      "each function lists its %zu slowest calls of %zu; ", r->calls_kept,
			      r->calls);
	if (r->unlisted)
		n += snprintf(msg + n, sizeof(msg) - (size_t)n,
			      "no pod rows (up to %zu pods of a function counted, not listed)",
			      r->unlisted);
	else if (r->kept < r->pods)
		n += snprintf(msg + n, sizeof(msg) - (size_t)n,
			      "each function lists its %zu slowest of up to %zu pods, the rest "
			      "folded into one row per revision (counted in full)",
			      r->kept, r->pods);
	else
		n += snprintf(msg + n, sizeof(msg) - (size_t)n, "every pod listed");
	if (r->pods_left)
		n += snprintf(msg + n, sizeof(msg) - (size_t)n, "; %zu pods left out of its pods",
			      r->pods_left);
	if (r->fns_left)
		n += snprintf(msg + n, sizeof(msg) - (size_t)n,
			      "; %zu least-called functions left out", r->fns_left);
	snprintf(msg + n, sizeof(msg) - (size_t)n,
		 "; raise --report-budget (the chart's reportBudget) where etcd takes larger "
		 "objects (--max-request-bytes), or probe fewer functions or pods");
	cJSON_AddItemToArray(errs, cJSON_CreateString(msg));
}

int reportfit__entry(cJSON *entry, size_t budget, const struct reportfit_cut *cut,
		     struct reportfit *ret)
{
	size_t limit = budget > REPORTFIT_ENVELOPE ? budget - REPORTFIT_ENVELOPE : 0;
	cJSON *fns = (cJSON *)kobj_get(entry, "functions"), *fn;
	struct fn_rows *fs = NULL;
	size_t nfs = 0, size;
	int err = 0;

	memset(ret, 0, sizeof(*ret));
	ret->whole = ret->bytes = size = json_size(entry);
	if (size <= limit && !(cut && cut->calls))
		return 0;
	/* the slowest calls go before any pod is folded: the counts stay whole */
	fit_calls(entry, fns, limit, &size, ret);
	if (cut && cut->calls > ret->calls) {
		ret->calls = cut->calls;
		ret->whole += cut->bytes;
	}
	if (size <= limit) {
		say(entry, ret, budget);
		ret->bytes = json_size(entry);
		return 0;
	}
	nfs = (size_t)cJSON_GetArraySize(fns);
	fs = calloc(nfs ? nfs : 1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	nfs = 0;
	cJSON_ArrayForEach(fn, fns)
	{
		if ((err = take_rows(&fs[nfs++], fn)))
			goto out;
		if (fs[nfs - 1].n > ret->pods)
			ret->pods = fs[nfs - 1].n;
	}
	ret->kept = best_keep(entry, fs, nfs, ret->pods, limit);
	if ((err = build(fs, nfs, ret->kept, true)))
		goto out;
	size = json_size(entry);
	if (size > limit) {
		unlist_pods(fs, nfs, ret);
		size = json_size(entry);
	}
	if (size > limit) {
		cJSON *pods = (cJSON *)kobj_get(entry, "pods");

		ret->pods_left = drop_tail(pods, &size, limit);
		if (ret->pods_left)
			cJSON_AddNumberToObject(entry, "podsOmitted", (double)ret->pods_left);
	}
	if (size > limit && !(err = sort_by_calls(fns))) {
		ret->fns_left = drop_tail(fns, &size, limit);
		if (ret->fns_left)
			cJSON_AddNumberToObject(entry, "functionsOmitted", (double)ret->fns_left);
	}
	say(entry, ret, budget);
	ret->bytes = json_size(entry);
out:
	for (size_t i = 0; i < nfs; i++) {
		cJSON_Delete(fs[i].pods);
		free(fs[i].rows);
	}
	free(fs);
	return err;
}

bool reportfit__summary(cJSON *status, size_t budget)
{
	size_t limit = budget > REPORTFIT_ENVELOPE ? budget - REPORTFIT_ENVELOPE : 0;
	cJSON *sum = (cJSON *)kobj_get(status, "summary");
	cJSON *fns = (cJSON *)kobj_get(sum, "functions"), *fn;
	size_t size = json_size(status), left;

	if (size <= limit)
		return true;
	/* the summary's readers take its percentiles; the buckets are the reports' */
	cJSON_ArrayForEach(fn, fns)
	{
		cJSON_DeleteItemFromObjectCaseSensitive(fn, "bucketCounts");
		cJSON_DeleteItemFromObjectCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(fn, "recent"), "bucketCounts");
	}
	size = json_size(status);
	if (size > limit) {
		struct reportfit r = { 0 };

		fit_calls(status, fns, limit, &size, &r);
		if (r.calls_kept < r.calls)
			cJSON_AddNumberToObject(sum, "slowestCallsKept", (double)r.calls_kept);
	}
	if (size > limit && !sort_by_calls(fns)) {
		left = drop_tail(fns, &size, limit);
		if (left)
			cJSON_AddNumberToObject(sum, "functionsOmitted", (double)left);
	}
	return size <= limit;
}

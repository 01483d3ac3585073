/* SPDX-License-Identifier: MIT */
/*
 * Synthetic node results for the scale benchmarks: the entry a node's
 * report holds for a probe of 64 functions over 2 pods, each latency with
 * 40 non-empty buckets, the pods of one of two revisions (by node parity).
 */
#ifndef RETWATCH_BENCH_SYNTHETIC_H
#define RETWATCH_BENCH_SYNTHETIC_H

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "base/latency.h"
#include "agent/status.h"

#define SYNTHETIC_FUNCS 64
#define SYNTHETIC_PODS 2

/* A latency of 200 calls over 40 buckets; extra more calls in the first bucket. */
static inline cJSON *synthetic_latency(unsigned seed, unsigned extra)
{
	struct latency *l = calloc(1, sizeof(*l));
	cJSON *o = cJSON_CreateObject();

	for (int b = 0; b < 40; b++)
		for (int k = 0; k < 5; k++)
			latency__record(l, (uint64_t)(100000 + (b * 60000) + (seed % 7) * 1000 + k));
	for (unsigned k = 0; k < extra; k++)
		latency__record(l, 100000);
	status_latency__to_json(l, o);
	free(l);
	return o;
}

/* Node n's entry; extra more calls of the first function in its first pod. */
static inline cJSON *synthetic_entry(int n, unsigned extra)
{
	cJSON *e = cJSON_CreateObject(), *fns, *pods;

	cJSON_AddNumberToObject(e, "generation", 1);
	cJSON_AddBoolToObject(e, "attached", 1);
	cJSON_AddNumberToObject(e, "processes", SYNTHETIC_PODS);
	pods = cJSON_AddArrayToObject(e, "pods");
	for (int pd = 0; pd < SYNTHETIC_PODS; pd++)
		cJSON_AddItemToArray(pods, cJSON_CreateObject());
	fns = cJSON_AddArrayToObject(e, "functions");
	for (int f = 0; f < SYNTHETIC_FUNCS; f++) {
		cJSON *fo = synthetic_latency(n + f, f == 0 ? extra : 0);
		cJSON *fpods = cJSON_AddArrayToObject(fo, "pods");
		char name[64];

		snprintf(name, sizeof(name), "main.(*Server).function%02d", f);
		cJSON_AddStringToObject(fo, "name", name);
		cJSON_AddStringToObject(fo, "mode", "entry+ret");
		cJSON_AddNumberToObject(fo, "returnSites", 2);
		for (int pd = 0; pd < SYNTHETIC_PODS; pd++) {
			cJSON *po = synthetic_latency(n * 3 + pd + f, f == 0 && pd == 0 ? extra : 0);
			char pn[64];

			snprintf(pn, sizeof(pn), "web-%s-%d", n % 2 ? "7c9b" : "5d8f", n * 2 + pd);
			cJSON_AddStringToObject(po, "name", pn);
			cJSON_AddStringToObject(po, "container", "app");
			cJSON_AddStringToObject(po, "revision", n % 2 ? "web-7c9b" : "web-5d8f");
			cJSON_AddItemToArray(fpods, po);
		}
		cJSON_AddItemToArray(fns, fo);
	}
	return e;
}

#endif

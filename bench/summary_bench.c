// SPDX-License-Identifier: MIT
/*
 * The summary writer's merge at cluster scale, in process (no API server):
 * NODES synthetic FunctionProbeReports of 64 functions, 2 pods each, 40
 * non-empty buckets per latency, two revisions. Prints one report's size,
 * the probe's status body (what every agent's watch receives once per
 * interval), the time spent merging and max RSS. Asserts nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include "clock.h"
#include "kobj.h"
#include "status.h"
#include "summary.h"

static cJSON *lat(unsigned seed)
{
	struct latency *l = calloc(1, sizeof(*l));
	cJSON *o = cJSON_CreateObject();
	for (int b = 0; b < 40; b++)
		for (int k = 0; k < 5; k++)
			latency__record(l,
					(uint64_t)(100000 + (b * 60000) + (seed % 7) * 1000 + k));
	status_latency__to_json(l, o);
	free(l);
	return o;
}

int main(int argc, char **argv)
{
	int nodes = argc > 1 ? atoi(argv[1]) : 1000;
	struct summary *s = summary__new(1);
	struct status_probe p = { "uid", "ns", "probe", 1 };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	size_t report_len = 0;
	struct timespec a, b;
	double merge_s = 0;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int n = 0; n < nodes; n++) {
		cJSON *r = cJSON_CreateObject(), *e = cJSON_CreateObject(), *fns;
		char node[32];
		snprintf(node, sizeof(node), "node-%d", n);
		cJSON_AddStringToObject(r, "node", node);
		cJSON_AddItemToObject(r, "status", e);
		cJSON_AddNumberToObject(e, "generation", 1);
		cJSON_AddBoolToObject(e, "attached", 1);
		cJSON_AddNumberToObject(e, "processes", 2);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(e, "pods"), cJSON_CreateObject());
		cJSON_AddItemToArray(cJSON_GetObjectItem(e, "pods"), cJSON_CreateObject());
		fns = cJSON_AddArrayToObject(e, "functions");
		for (int f = 0; f < 64; f++) {
			cJSON *fo = lat(n + f), *pods = cJSON_AddArrayToObject(fo, "pods");
			char name[64];
			snprintf(name, sizeof(name), "main.(*Server).function%02d", f);
			cJSON_AddStringToObject(fo, "name", name);
			cJSON_AddStringToObject(fo, "mode", "entry+ret");
			for (int pd = 0; pd < 2; pd++) {
				cJSON *po = lat(n * 3 + pd + f);
				char pn[64];
				snprintf(pn, sizeof(pn), "web-%s-%d", n % 2 ? "7c9b" : "5d8f",
					 n * 2 + pd);
				cJSON_AddStringToObject(po, "name", pn);
				cJSON_AddStringToObject(po, "container", "app");
				cJSON_AddStringToObject(po, "revision",
							n % 2 ? "web-7c9b" : "web-5d8f");
				cJSON_AddItemToArray(pods, po);
			}
			cJSON_AddItemToArray(fns, fo);
		}
		if (n == 0) {
			char *t = cJSON_PrintUnformatted(r);
			report_len = strlen(t);
			free(t);
		}
		struct timespec x, y;
		clock_gettime(CLOCK_MONOTONIC, &x);
		summary__add_report(s, r);
		clock_gettime(CLOCK_MONOTONIC, &y);
		merge_s += (y.tv_sec - x.tv_sec) + (y.tv_nsec - x.tv_nsec) / 1e9;
		cJSON_Delete(r);
	}
	cJSON *doc = summary__doc(&p, &st, NULL, s,
				  summary__interval(summary__writers(s), 10 * NS_PER_S, 50));
	summary__stamp(doc);
	char *body = status__apply_body(&p, doc);
	clock_gettime(CLOCK_MONOTONIC, &b);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("nodes %d: report %zu bytes; probe status body %zu bytes; all %.2f s, merging %.2f s; maxrss %ld MiB\n",
	       nodes, report_len, strlen(body),
	       (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9, merge_s, ru.ru_maxrss / 1024);
	summary__free(s);
	free(body);
	return 0;
}

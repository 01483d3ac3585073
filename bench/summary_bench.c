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
#include "base/clock.h"
#include "kube/kobj.h"
#include "agent/status.h"
#include "report/summary.h"
#include "synthetic.h"

int main(int argc, char **argv)
{
	int nodes = argc > 1 ? atoi(argv[1]) : 1000;
	struct summary *s = summary__new(1);
	struct status_probe p = { "uid", "ns", "probe", 1, false };
	struct status_state st = { .valid = true, .expires = 2000000000 };
	size_t report_len = 0;
	struct timespec a, b;
	double merge_s = 0;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int n = 0; n < nodes; n++) {
		cJSON *r = cJSON_CreateObject();
		char node[32];
		snprintf(node, sizeof(node), "node-%d", n);
		cJSON_AddStringToObject(r, "node", node);
		cJSON_AddItemToObject(r, "status", synthetic_entry(n, 0));
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

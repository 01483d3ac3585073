// SPDX-License-Identifier: MIT
/*
 * The node side of bench/scale_bench.py: writes the results of COUNT
 * simulated nodes (synthetic.h) for one probe to a real API server, one
 * server-side apply per node, as the agent writes them (status.c's bodies,
 * each node's own field manager):
 *   report  each node's FunctionProbeReport (today's layout)
 *   legacy  each node's entry in the FunctionProbe's status.nodes (the
 *           layout before reports)
 * Node EXTRA_NODE's first function gets EXTRA more calls (a change the
 * summary must show). Prints one line per write: HTTP status, milliseconds,
 * body bytes.
 *
 * Usage: scale_writer KUBECONFIG report|legacy NS PROBE UID FIRST COUNT EXTRA_NODE EXTRA
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "synthetic.h"

static char *legacy_body(const struct status_probe *p, const char *node, cJSON *entry)
{
	cJSON *status = cJSON_CreateObject(), *nodes = cJSON_AddArrayToObject(status, "nodes"), *fn;
	time_t now = time(NULL);
	char ts[32];

	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	/* that layout had no per-pod latencies */
	cJSON_ArrayForEach(fn, cJSON_GetObjectItem(entry, "functions"))
		cJSON_DeleteItemFromObject(fn, "pods");
	cJSON_AddStringToObject(entry, "node", node);
	cJSON_AddStringToObject(entry, "lastUpdate", ts);
	cJSON_AddItemToArray(nodes, entry);
	return status__apply_body(p, status);
}

int main(int argc, char **argv)
{
	struct kube_creds creds = { 0 };
	struct rw_error err = { "" };
	struct kube *k;
	bool legacy;
	int first, count, extra_node;
	unsigned extra;

	if (argc != 10) {
		fprintf(stderr, "usage: scale_writer KUBECONFIG report|legacy NS PROBE UID FIRST "
				"COUNT EXTRA_NODE EXTRA\n");
		return 2;
	}
	legacy = !strcmp(argv[2], "legacy");
	first = atoi(argv[6]);
	count = atoi(argv[7]);
	extra_node = atoi(argv[8]);
	extra = (unsigned)atoi(argv[9]);
	if (kubeconfig__load(argv[1], NULL, &creds, &err) || !(k = kube__new(&creds, &err))) {
		fprintf(stderr, "scale_writer: %s\n", err.msg);
		return 1;
	}
	struct status_probe p = { argv[5], argv[3], argv[4], 1, false };
	for (int n = first; n < first + count; n++) {
		char node[32], *body, *path, *manager, *url = NULL, *resp = NULL;
		cJSON *entry;
		uint64_t t0;
		int status;

		snprintf(node, sizeof(node), "node-%05d", n);
		entry = synthetic_entry(n, n == extra_node ? extra : 0);
		if (legacy) {
			body = legacy_body(&p, node, entry);
			path = status__path(p.ns, p.name);
		} else {
			char name[STATUS_NAME_LEN];

			body = status__report_body(&p, node, entry, 10 * NS_PER_S);
			status__report_name(&p, node, name, sizeof(name));
			path = status__report_path(p.ns, name);
		}
		manager = status__node_manager(node);
		if (!body || !path || !manager ||
		    asprintf(&url, "%s?fieldManager=%s&force=true", path, manager) < 0) {
			fprintf(stderr, "scale_writer: out of memory\n");
			return 1;
		}
		t0 = clock__mono_ns();
		status = kube__request(k, "PATCH", url, "application/apply-patch+yaml", body, 60000,
				       &resp, &err);
		printf("%d %.3f %zu\n", status, (double)(clock__mono_ns() - t0) / 1e6,
		       strlen(body));
		if (status / 100 != 2) {
			char why[300];

			fprintf(stderr, "scale_writer: %s: HTTP %d: %s\n", node, status,
				status < 0 ? err.msg : kube__error_text(resp, why, sizeof(why)));
		}
		fflush(stdout);
		free(resp);
		free(url);
		free(manager);
		free(path);
		free(body);
	}
	kube__free(k);
	kube_creds__free(&creds);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * An agent restarted carries on from this node's reports: listing them at
 * start, and handing each probe its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/kobj.h"
#include "kube/kube.h"
#include "report/statuswire.h"
#include "base/log.h"
#include "agent/agent_impl.h"

/* This node's report of probe uid, as listed when the agent started. */
const cJSON *agent_seeds__for(struct agent *a, const struct fprobe *p)
{
	const cJSON *r;

	/* this node's report of that probe, in the probe's namespace: a report
	 * another tenant wrote elsewhere naming the probe is none of its own */
	cJSON_ArrayForEach(r, a->seeds)
	{
		const char *uid = kobj_str(kobj_get(r, "probe"), "uid");
		const char *ns = kobj_namespace(r), *node = kobj_str(r, "node");

		if (uid && !strcmp(uid, p->cluster_uid ? p->cluster_uid : p->uid) && ns &&
		    !strcmp(ns, p->ns) && node && !strcmp(node, a->o.node))
			return r;
	}
	return NULL;
}

/*
 * A list request at start, asked again while the API server answers that it
 * is busy (429: an API Priority and Fairness queue full as every agent of a
 * rolled DaemonSet lists at once), failing (5xx) or out of reach: up to
 * SEEDS_TRIES times, 0.25 s after the first, twice as long each time (about
 * 8 s in all; the kubelet's liveness probe waits 30). Returns the last
 * status, as kube__request does.
 */
#define SEEDS_TRIES 6

static int list_tried(struct agent *a, const char *url, char **ret_body, struct rw_error *err)
{
	struct timespec wait = { 0, 250000000 };
	int status = -EIO;

	for (int i = 0; i < SEEDS_TRIES; i++) {
		if (i) {
			log_info("listing this node's reports again in %.2f s: %s%.200s",
				 (double)wait.tv_sec + wait.tv_nsec / 1e9,
				 status < 0 ? err->msg : "HTTP error: ",
				 status < 0 || !*ret_body ? "" : *ret_body);
			free(*ret_body);
			*ret_body = NULL;
			nanosleep(&wait, NULL);
			wait.tv_sec = wait.tv_sec * 2 + (wait.tv_nsec * 2) / 1000000000;
			wait.tv_nsec = (wait.tv_nsec * 2) % 1000000000;
		}
		status = kube__request(a->k, "GET", url, NULL, NULL, 10000, ret_body, err);
		if (status >= 0 && status != 429 && status < 500)
			break;
	}
	return status;
}

/* Lists the reports this node wrote before (an agent restarted carries on
 * from them). Without them, counts start afresh; the log says why. */
void agent_seeds__load(struct agent *a)
{
	char sel[STATUS_KEY_LEN + 300], esc[3 * sizeof(sel)], tok[1024], cont[1024] = "";
	struct rw_error err = { "" };
	const cJSON *item;

	a->seeds = cJSON_CreateArray();
	if (!a->seeds || strlen(a->o.node) > STATUS_LABEL_VALUE_MAX)
		return;
	snprintf(sel, sizeof(sel), STATUS_LABEL_NODE "=%s", a->o.node);
	kube__escape(sel, esc, sizeof(esc));
	do {
		char *url = NULL, *body = NULL;
		cJSON *doc = NULL;
		int status = -ENOMEM;

		if (asprintf(&url, STATUS_REPORTS_ALL "?labelSelector=%s&limit=100%s%s", esc,
			     *cont ? "&continue=" : "",
			     *cont ? kube__escape(cont, tok, sizeof(tok)) : "") >= 0)
			status = list_tried(a, url, &body, &err);
		free(url);
		if (status != 200 || !(doc = cJSON_Parse(body))) {
			log_warn(
				"failed to list this node's reports (counts start afresh): %s%.200s",
				status < 0 ? err.msg : "HTTP error: ", status < 0 ? "" : body);
			free(body);
			return;
		}
		cJSON_ArrayForEach(item, kobj_get(doc, "items"))
			cJSON_AddItemToArray(a->seeds, cJSON_Duplicate(item, true));
		snprintf(cont, sizeof(cont), "%s",
			 kobj_str(kobj_get(doc, "metadata"), "continue") ?: "");
		cJSON_Delete(doc);
		free(body);
	} while (*cont);
}

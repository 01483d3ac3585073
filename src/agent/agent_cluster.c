// SPDX-License-Identifier: MIT
/*
 * ClusterFunctionProbes in the agent: watched with the namespaces (their
 * labels), each expanded into a probe per namespace its namespaceSelector
 * selects (cfprobe.h), which agent.c tracks beside the FunctionProbes; the
 * summary writer's requests for their statuses.
 */
#include <errno.h>
#include <string.h>

#include "agent/agent_impl.h"
#include "agent/cfprobe.h"
#include "kube/informer.h"
#include "kube/kobj.h"
#include "agent/publisher.h"
#include "report/statuswire.h"
#include "agent/summarizer.h"

/* What the agent never reads of them (agent.c's reasons) */
static const char *const cprobe_strip[] = { "status.summary", "status.namespaces",
					    "metadata.annotations", "metadata.labels", NULL };
static const char *const ns_strip[] = { "spec", "status", "metadata.annotations", NULL };

int agent_cluster__start(struct agent *a)
{
	/* status writes (this agent's among them) need no reconcile */
	a->cprobes_inf = informer__start(a->k, "clusterfunctionprobes", CFPROBES_PATH, NULL, true,
					 a->notify_fd, a->o.list_page, cprobe_strip, cfprobe__trim);
	a->ns_inf = informer__start(a->k, "namespaces", "/api/v1/namespaces", NULL, false,
				    a->notify_fd, a->o.list_page, ns_strip, NULL);
	return a->cprobes_inf && a->ns_inf ? 0 : -ENOMEM;
}

/* A ClusterFunctionProbe was deleted: what the summary writer keeps of it goes. */
static void forget(const char *uid, void *ctx)
{
	struct agent *a = ctx;
	char key[STATUS_KEY_LEN];

	status__summary_key(uid, key, sizeof(key));
	publisher__forget(a->pub, key);
	summarizer__forget(a->sum, uid);
}

cJSON *agent_cluster__probes(struct agent *a)
{
	/* a half view would drop the probes of the namespaces not listed yet */
	if (!informer__synced(a->cprobes_inf) || !informer__synced(a->ns_inf))
		return NULL;
	informer__sync(a->cprobes_inf, &a->cprobes_snap);
	informer__sync(a->ns_inf, &a->ns_snap);
	cfprobes__sync(&a->cprobes, a->cprobes_snap.objs, forget, a);
	return cfprobes__expand(a->cprobes, a->cprobes_snap.objs, a->ns_snap.objs);
}

void agent_cluster__summaries(struct agent *a, uint64_t now)
{
	const cJSON *obj;

	cJSON_ArrayForEach(obj, a->cprobes_snap.objs)
	{
		const char *uid = kobj_uid(obj);

		for (struct cfprobe *c = a->cprobes; c && uid; c = c->next)
			if (!strcmp(c->uid, uid))
				cfprobe__request_summary(c, a->sum, obj, a->env.deny_args, now);
	}
}

void agent_cluster__stop(struct agent *a)
{
	informer__stop(a->cprobes_inf);
	informer__stop(a->ns_inf);
	a->cprobes_inf = a->ns_inf = NULL;
	cfprobes__free(a->cprobes);
	a->cprobes = NULL;
	informer_view__clear(&a->cprobes_snap);
	informer_view__clear(&a->ns_snap);
}

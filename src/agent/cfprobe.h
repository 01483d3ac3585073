/* SPDX-License-Identifier: MIT */
/*
 * A ClusterFunctionProbe as an agent tracks it: a FunctionProbe's spec over
 * the namespaces its namespaceSelector selects. Each agent expands it into
 * one FunctionProbe-shaped object per selected namespace, which the agent
 * tracks as any FunctionProbe of that namespace (fprobe.h): the namespace's
 * pods are probed under its shares and its node's report is written there.
 * The summary writer merges the reports of every namespace into the
 * ClusterFunctionProbe's status (summarizer.h).
 */
#ifndef RETWATCH_CFPROBE_H
#define RETWATCH_CFPROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "agent/probe.h"
#include "agent/summarizer.h"

/* Where an expanded object names its ClusterFunctionProbe's uid (the agent
 * makes these objects; none comes from the API server). */
#define CFPROBE_UID_FIELD "clusterProbeUid"
#define CFPROBES_PATH "/apis/retwatch.io/v1alpha1/clusterfunctionprobes"

struct cfprobe {
	char *uid, *name;
	int64_t generation;
	time_t created;
	struct probe_spec spec;	 /* the pods' spec, as a FunctionProbe's */
	struct probe_spec nssel; /* spec.namespaceSelector, as a selector of labels */
	bool valid;		 /* both parsed; else spec_err says why */
	bool seen;
	char spec_err[512];
	uint64_t next_summary;
	struct cfprobe *next;
};

/* The informer's trim (informer.h) of a ClusterFunctionProbe: the spec kept
 * as a FunctionProbe's is (probe_spec__trim), its namespaceSelector too, or
 * only why it is over the bounds. */
void cfprobe__trim(cJSON *obj);

/* Brings list in step with objs (the ClusterFunctionProbes as the server has
 * them): new ones parsed, changed ones parsed again, deleted ones freed
 * (their uids handed to gone, when not NULL, before). */
void cfprobes__sync(struct cfprobe **list, const cJSON *objs,
		    void (*gone)(const char *uid, void *ctx), void *ctx);
void cfprobes__free(struct cfprobe *list);

/*
 * One FunctionProbe-shaped object per valid probe of list and namespace of
 * namespaces (Namespace objects) its namespaceSelector selects: uid
 * "<uid>/<namespace>", the probe's name, generation, creation time, spec
 * (without namespaceSelector) and status.reportInterval, and CFPROBE_UID_FIELD.
 * objs: the ClusterFunctionProbes list was synced with. NULL on ENOMEM.
 */
cJSON *cfprobes__expand(const struct cfprobe *list, const cJSON *objs, const cJSON *namespaces);

/* Asks sum for c's status when its interval passed (obj: the probe as the
 * server has it; args_denied: the agent's --argument-capture deny). */
void cfprobe__request_summary(struct cfprobe *c, struct summarizer *sum, const cJSON *obj,
			      bool args_denied, uint64_t now);

#endif

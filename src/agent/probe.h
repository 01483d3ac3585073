/* SPDX-License-Identifier: MIT */
/*
 * The FunctionProbe resource (crds/functionprobe.yaml): its spec, checked
 * again here beyond what the schema can say, and label selectors.
 */
#ifndef RETWATCH_PROBE_H
#define RETWATCH_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/labels.h"
#include "base/rwerr.h"

/* Bounds on what a tenant writes, as crds/functionprobe.yaml has them: a
 * selector costs every pod check of every agent, a spec every agent's memory. */
#define PROBE_MAX_FUNCTIONS 64
#define PROBE_MAX_CONTAINERS 64
#define PROBE_MAX_MATCH_LABELS 64
#define PROBE_MAX_MATCH_EXPRESSIONS 32
#define PROBE_MAX_LABEL_VALUES 256
/* Kubernetes' own: a key is [prefix/]name, a DNS subdomain and 63 bytes */
#define PROBE_LABEL_PREFIX_MAX 253
#define PROBE_LABEL_NAME_MAX 63
#define PROBE_LABEL_VALUE_MAX 63
#define PROBE_MIN_INTERVAL_NS (2ULL * 1000000000ULL)
#define PROBE_DEFAULT_INTERVAL_NS (10ULL * 1000000000ULL)
#define PROBE_DEFAULT_LIFETIME_NS (3600ULL * 1000000000ULL)
/* spec.window: the slowest calls (and recent latency) are of the last one to two */
#define PROBE_DEFAULT_WINDOW_NS (60ULL * 1000000000ULL)
/* spec.slowCalls.keep: each function's slowest calls in a report and the summary */
#define PROBE_DEFAULT_KEEP 5
#define PROBE_MAX_KEEP 20

enum label_op { LABEL_IN, LABEL_NOT_IN, LABEL_EXISTS, LABEL_DOES_NOT_EXIST };

struct label_req {
	char *key;
	enum label_op op;
	char **values;
	size_t nvalues;
};

struct probe_spec {
	struct label_req *selector; /* all must hold; none selects every pod */
	size_t nselector;
	char **containers; /* none: every container */
	size_t ncontainers;
	char *executable; /* NULL: each container's main process */
	char **functions;
	size_t nfunctions;
	uint64_t threshold_ns; /* 0: no slow-call log */
	uint64_t lifetime_ns;
	uint64_t interval_ns;
	/* the overhead guard's budget per function and process, a share of one
	 * CPU (spec.maxOverhead; default 2%); 0: no guard */
	double max_overhead;
	uint64_t window_ns; /* spec.window */
	unsigned int keep;  /* spec.slowCalls.keep: 0: none */
	/* spec.captureArguments: the slowest calls (and the slow calls
	 * logged) carry their arguments, where the agent allows it */
	bool capture_args;
	/* spec.mode List: nothing attached, the functions the patterns match
	 * listed in each node's report (funclist.h) */
	bool list;
};

/* Parses and checks a spec; err says which field is wrong and how. */
int probe_spec__parse(const cJSON *spec, struct probe_spec *ret, struct rw_error *err);
/* Whether spec's lists and maps are within the bounds above, before anything
 * of it is copied: counts and lengths only, O(size of spec). */
int probe_spec__check_bounds(const cJSON *spec, struct rw_error *err);
/*
 * What a FunctionProbe's spec may cost every agent that caches it: spec
 * keeps only the fields a spec has, and none when it is over the bounds,
 * then PROBE_REFUSED says why (probe_spec__parse refuses it with that).
 */
#define PROBE_REFUSED "retwatch.io/refused"
void probe_spec__trim(cJSON *spec);
void probe_spec__free(struct probe_spec *s);
/* Whether the selector matches a pod's labels (NULL: none): a lookup per
 * requirement, O(size of the selector) whatever the pod carries. */
bool probe_spec__selects(const struct probe_spec *s, const struct labels *labels);
bool probe_spec__wants_container(const struct probe_spec *s, const char *name);

#endif

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

#include "rwerr.h"

#define PROBE_MAX_FUNCTIONS 64
#define PROBE_MIN_INTERVAL_NS (2ULL * 1000000000ULL)
#define PROBE_DEFAULT_INTERVAL_NS (10ULL * 1000000000ULL)
#define PROBE_DEFAULT_LIFETIME_NS (3600ULL * 1000000000ULL)

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
};

/* Parses and checks a spec; err says which field is wrong and how. */
int probe_spec__parse(const cJSON *spec, struct probe_spec *ret, struct rw_error *err);
void probe_spec__free(struct probe_spec *s);
/* Whether the selector matches labels (a JSON object of strings, or NULL). */
bool probe_spec__selects(const struct probe_spec *s, const cJSON *labels);
bool probe_spec__wants_container(const struct probe_spec *s, const char *name);

#endif

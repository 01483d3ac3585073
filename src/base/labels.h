/* SPDX-License-Identifier: MIT */
/*
 * A pod's labels indexed by a hash of their keys, so that a selector costs
 * what it holds, not what it holds times what the pod carries: pods, like
 * probes, are written by tenants, and a pod may carry thousands of labels.
 * The index borrows the JSON's strings: it is valid while the object is.
 */
#ifndef RETWATCH_LABELS_H
#define RETWATCH_LABELS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct label_slot {
	const char *key;   /* NULL: free */
	const char *value; /* NULL: the label's value is not a string */
	uint64_t hash;
};

struct labels {
	struct label_slot *slots;
	size_t mask; /* slots - 1, a power of two less one */
	size_t n;
	uint64_t seed;
};

/* Indexes labels (a JSON object of strings; anything else is no label).
 * When a key repeats, the first counts (as cJSON's lookups find it). */
int labels__build(const cJSON *labels, struct labels *ret);
/* The value of key, or NULL when the pod has no such label (or not a string). */
const char *labels__get(const struct labels *l, const char *key);
void labels__clear(struct labels *l);

#endif

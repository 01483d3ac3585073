/* SPDX-License-Identifier: MIT */
/*
 * The cluster's nodes, as the summary writer checks reports against them: a
 * FunctionProbeReport counts only when the node it names is a Node of the
 * cluster. The names are listed (metadata only) at most once a minute; a
 * list that fails, or lists none (a cluster whose nodes the agent may not
 * list, a test's API server without Node objects), checks nothing.
 */
#ifndef RETWATCH_NODESET_H
#define RETWATCH_NODESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define NODESET_EVERY_NS (60ull * 1000000000ull)
/* The most names kept; a larger cluster's list is not used (checks nothing). */
#define NODESET_MAX 100000

struct kube;

struct nodeset {
	char **names; /* sorted */
	size_t n, cap;
	uint64_t listed_ns; /* when last listed; 0: never */
	bool usable;	    /* the last list succeeded with at least one name */
};

/* Lists the nodes again when the last list is older than NODESET_EVERY_NS. */
void nodeset__refresh(struct nodeset *ns, struct kube *k, uint64_t now_ns);
/* Whether name is a node of the cluster; true when nothing can be checked. */
bool nodeset__has(const struct nodeset *ns, const char *name);
/* Adds the names of a list's items (a page). 0, -E2BIG past NODESET_MAX, -ENOMEM. */
int nodeset__add_page(struct nodeset *ns, const cJSON *doc);
/* Sorts the names added and makes them the set's. */
void nodeset__done(struct nodeset *ns);
void nodeset__clear(struct nodeset *ns);

#endif

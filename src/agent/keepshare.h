/* SPDX-License-Identifier: MIT */
/*
 * What the slowest calls the probes keep may hold in the agent's memory
 * (slowest.h: their stacks, arguments, pods): each namespace's probes
 * together at most KEEPSHARE_NS_BYTES, every namespace's together at most
 * KEEPSHARE_NODE_BYTES. A call past either is not kept, and its probe's
 * report says why; the other namespaces keep theirs.
 */
#ifndef RETWATCH_KEEPSHARE_H
#define RETWATCH_KEEPSHARE_H

#include <stddef.h>

#include "trace/slowest.h"

#define KEEPSHARE_NS_BYTES (16u << 20)
#define KEEPSHARE_NODE_BYTES (32u << 20)

struct keepshare;

/* ns_max, node_max: the bounds in bytes (0: none). NULL on ENOMEM. */
struct keepshare *keepshare__new(size_t ns_max, size_t node_max);
/* Frees k; the budgets tables still hold stay theirs. NULL is fine. */
void keepshare__free(struct keepshare *k);
/* ns's budget, made when new: k's own (take a reference to keep it). NULL on ENOMEM. */
struct slowest_budget *keepshare__budget(struct keepshare *k, const char *ns);
/* The node's budget, every namespace's within it. */
const struct slowest_budget *keepshare__node(const struct keepshare *k);
/* Forgets the namespaces' budgets no table holds. */
void keepshare__sweep(struct keepshare *k);

#endif

// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "agent/keepshare.h"

struct ns_budget {
	char *ns;
	struct slowest_budget *b;
};

struct keepshare {
	size_t ns_max;
	struct slowest_budget *node;
	struct ns_budget *v;
	size_t n, cap;
};

struct keepshare *keepshare__new(size_t ns_max, size_t node_max)
{
	struct keepshare *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->ns_max = ns_max;
	k->node = slowest_budget__new(node_max, NULL);
	if (!k->node) {
		free(k);
		return NULL;
	}
	return k;
}

void keepshare__free(struct keepshare *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++) {
		free(k->v[i].ns);
		slowest_budget__put(k->v[i].b);
	}
	free(k->v);
	slowest_budget__put(k->node);
	free(k);
}

struct slowest_budget *keepshare__budget(struct keepshare *k, const char *ns)
{
	struct ns_budget *v;

	for (size_t i = 0; i < k->n; i++)
		if (!strcmp(k->v[i].ns, ns))
			return k->v[i].b;
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 8;

		v = realloc(k->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		k->v = v;
		k->cap = cap;
	}
	v = &k->v[k->n];
	v->ns = strdup(ns);
	v->b = v->ns ? slowest_budget__new(k->ns_max, k->node) : NULL;
	if (!v->b) {
		free(v->ns);
		return NULL;
	}
	k->n++;
	return v->b;
}

const struct slowest_budget *keepshare__node(const struct keepshare *k)
{
	return k->node;
}

void keepshare__sweep(struct keepshare *k)
{
	size_t n = 0;

	for (size_t i = 0; i < k->n; i++) {
		/* k's own reference alone, and nothing counted in it */
		if (k->v[i].b->refs == 1 && !k->v[i].b->used) {
			free(k->v[i].ns);
			slowest_budget__put(k->v[i].b);
			continue;
		}
		k->v[n++] = k->v[i];
	}
	k->n = n;
}

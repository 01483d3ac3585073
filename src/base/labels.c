// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/labels.h"

static uint64_t process_seed;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

/* Keys come from tenants: a seed they cannot know keeps them from choosing
 * keys that all land in one chain. */
static void seed_init(void)
{
	struct timespec ts;

	if (getrandom(&process_seed, sizeof(process_seed), GRND_NONBLOCK) == sizeof(process_seed))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	process_seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_sec;
}

static uint64_t hash(uint64_t seed, const char *s)
{
	uint64_t h = seed ^ 0xcbf29ce484222325ULL;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	/* splitmix64's finalizer: every bit of h reaches the slot index */
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

static struct label_slot *slot_of(const struct labels *l, const char *key, uint64_t h)
{
	for (size_t i = h & l->mask;; i = (i + 1) & l->mask) {
		struct label_slot *s = &l->slots[i];

		if (!s->key || (s->hash == h && !strcmp(s->key, key)))
			return s;
	}
}

int labels__build(const cJSON *labels, struct labels *ret)
{
	size_t n = 0, cap = 8;
	const cJSON *v;

	memset(ret, 0, sizeof(*ret));
	if (!cJSON_IsObject(labels))
		return 0;
	cJSON_ArrayForEach(v, labels) n++;
	/* at most half full: a miss ends at a free slot soon */
	while (cap < 2 * n)
		cap *= 2;
	ret->slots = calloc(cap, sizeof(*ret->slots));
	if (!ret->slots)
		return -ENOMEM;
	ret->mask = cap - 1;
	pthread_once(&seed_once, seed_init);
	ret->seed = process_seed;
	cJSON_ArrayForEach(v, labels)
	{
		uint64_t h;
		struct label_slot *s;

		if (!v->string)
			continue;
		h = hash(ret->seed, v->string);
		s = slot_of(ret, v->string, h);
		if (s->key)
			continue;
		s->key = v->string;
		s->value = cJSON_GetStringValue(v);
		s->hash = h;
		ret->n++;
	}
	return 0;
}

const char *labels__get(const struct labels *l, const char *key)
{
	if (!l || !l->n || !key)
		return NULL;
	return slot_of(l, key, hash(l->seed, key))->value;
}

void labels__clear(struct labels *l)
{
	if (!l)
		return;
	free(l->slots);
	memset(l, 0, sizeof(*l));
}

/* SPDX-License-Identifier: MIT */
/* The errors a probe's status lists for this node: bounded, sorted when written. */
#ifndef RETWATCH_ERRLIST_H
#define RETWATCH_ERRLIST_H

#include <stddef.h>

#define ERRLIST_MAX 20

struct errlist {
	char *msgs[ERRLIST_MAX];
	size_t n;
	size_t more; /* errors past ERRLIST_MAX, counted only */
};

void errlist__add(struct errlist *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void errlist__clear(struct errlist *e);
/* Sorts the messages (a status that does not change is not written again). */
void errlist__sort(struct errlist *e);

#endif

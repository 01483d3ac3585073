/* SPDX-License-Identifier: MIT */
/*
 * What the plugin prints of FunctionProbes: a probe's live table (per
 * function: calls, lifetime and recent p50/p99, the slowest pods, the
 * revisions), its slowest calls once each, a namespace's probes (get), every
 * function of them slowest first (top), and YAML. The objects come from the
 * API server: a missing or odd field prints as "-", never crashes.
 */
#ifndef RETWATCH_VIEW_H
#define RETWATCH_VIEW_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#define VIEW_SEEN_MAX 1024

/* The slowest calls already printed (a ring of their keys). */
struct view_seen {
	uint64_t keys[VIEW_SEEN_MAX];
	size_t n;
};

/* The condition of type of a probe: its status, reason and message ("" when
 * absent); returns whether it is there. */
int view__condition(const cJSON *probe, const char *type, const char **ret_status,
		    const char **ret_reason, const char **ret_message);

/*
 * The tables cut a name longer than its column's bound with "…"; their
 * _wide forms (-o wide) print every name whole, each column as wide as its
 * longest. Columns are counted in the terminal's columns (base/termsafe.h).
 */
/* The table of one probe's functions, under a line naming it. */
void view__table(FILE *f, const cJSON *probe);
void view__table_wide(FILE *f, const cJSON *probe);
/* The summary's slowest calls not printed before; returns how many were new. */
int view__slow_calls(FILE *f, const cJSON *probe, struct view_seen *seen);
/* A FunctionProbeList as a table, one probe a row. */
void view__list(FILE *f, const cJSON *list);
void view__list_wide(FILE *f, const cJSON *list);
/* Every function of a FunctionProbeList's probes, the highest p99 first. */
void view__top(FILE *f, const cJSON *list);
void view__top_wide(FILE *f, const cJSON *list);
/* obj as YAML (a document, no leading ---). */
void view__yaml(FILE *f, const cJSON *obj);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A FunctionProbe of spec.mode List on this node: no uprobe is attached;
 * each executable the selected pods run (once per file: the containers of
 * one image share it) is read off the main loop, and the functions the
 * patterns match in it and, for LIB:NAME patterns, in the libraries its
 * process has mapped are listed in the node's report (functionList),
 * bounded, for `kubectl retwatch functions`.
 */
#ifndef RETWATCH_FUNCLIST_H
#define RETWATCH_FUNCLIST_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "base/errlist.h"
#include "agent/placement.h"
#include "agent/probe.h"
#include "agent/traceset.h"

/* Names listed per executable (its own and its libraries'), the rest counted. */
#define FUNCLIST_MAX_NAMES 1000
/* Executables listed per node and probe, the rest counted. */
#define FUNCLIST_MAX_FILES 16
/* Libraries of a process read for LIB:NAME patterns: each is an analysis. */
#define FUNCLIST_MAX_LIBS 64
/* Pods named per executable, the rest counted. */
#define FUNCLIST_MAX_PODS 16
/*
 * What listing one file may take of the main loop: its globs and the
 * suggestions for a pattern that matches nothing. Measured on a Go binary
 * of 165,000 functions (kube-apiserver, 119 MB): every name 30-60 ms,
 * suggestions 0.7-1.0 s (ASan build: 0.06-0.17 s and 1.05 s). A file is
 * listed once per probe, and listing shares the turn's time with attaching.
 */
#define FUNCLIST_DEADLINE_NS (2000ull * 1000000ull)

struct funclist;

/* ns: the probe's namespace, whose analyses it counts against. NULL on ENOMEM. */
struct funclist *funclist__new(struct traceset_env *env, const char *ns);
void funclist__free(struct funclist *fl); /* NULL is fine */

/* A turn: begin, want each process placement finds, end. */
void funclist__begin(struct funclist *fl);
void funclist__want(struct funclist *fl, const struct placement_proc *pp,
		    const struct probe_spec *spec, struct errlist *errs);
/* Whether an executable was listed this turn (the report is due now). */
bool funclist__end(struct funclist *fl);

/* Executables known, and those still being read. */
size_t funclist__count(const struct funclist *fl);
size_t funclist__pending(const struct funclist *fl);
/*
 * Adds functionList (one object an executable: executable, pods[],
 * functions[] {name, size, library, generic}, matched, omitted, errors[])
 * and functionListPending to a report's status entry, within budget bytes
 * of names (each executable's list cut alike, omitted says how many).
 */
void funclist__add_to(const struct funclist *fl, cJSON *entry, size_t budget);

#endif

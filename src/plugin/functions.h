/* SPDX-License-Identifier: MIT */
/*
 * `kubectl retwatch functions`: a FunctionProbe of spec.mode List for a
 * workload's pods, whose agents list the functions the patterns match in
 * the pods' executables (and libraries) in their reports; the lists are
 * merged (one per executable, whatever the nodes that run it), printed,
 * and the probe deleted.
 */
#ifndef RETWATCH_FUNCTIONS_CMD_H
#define RETWATCH_FUNCTIONS_CMD_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "base/rwerr.h"
#include "plugin/cli.h"
#include "plugin/kctl.h"

/*
 * Whether the reports (a FunctionProbeReportList as the API server returns
 * it, written by agents: hostile) answer for every node of nodes (strings;
 * NULL or empty: for some node): each with its list read, or errors.
 */
bool functions__answered(const cJSON *reports, const cJSON *nodes);
/*
 * The reports' lists merged: {executables: [{executable, nodes, pods,
 * functions, matched, omitted, errors}], errors: [the nodes' own]}, an
 * executable of several nodes listed once when its lists are the same;
 * strings as the agents wrote them (stdout shows their controls escaped:
 * base/termsafe.h). NULL when out of memory.
 */
cJSON *functions__merge(const cJSON *reports);
/* Prints merged as tables, a name longer than its column cut with "…" (the
 * _wide form, -o wide: whole). Returns how many functions matched in all. */
size_t functions__print(FILE *out, const cJSON *merged);
size_t functions__print_wide(FILE *out, const cJSON *merged);

/* Runs the command; 0, or -errno (err says why: nothing matched, with the
 * suggestions; no agent answered; a 403 names the verb and resource). */
int functions__run(struct kctl *c, const struct plugin_cli *cli, const volatile sig_atomic_t *stop,
		   struct rw_error *err);

#endif

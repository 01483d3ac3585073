/* SPDX-License-Identifier: MIT */
/*
 * `kubectl retwatch trace`: a FunctionProbe for a workload's pods, made,
 * watched until attached (or told why not), shown live at each report, and
 * deleted when --for ends or *stop is set (unless --keep).
 */
#ifndef RETWATCH_TRACE_CMD_H
#define RETWATCH_TRACE_CMD_H

#include <signal.h>

#include <cjson/cJSON.h>

#include "base/rwerr.h"
#include "plugin/cli.h"
#include "plugin/kctl.h"

/* The FunctionProbe to create (generateName, labels, spec), to cJSON_Delete;
 * takes selector. NULL when out of memory. */
cJSON *trace__probe_doc(const struct plugin_cli *cli, cJSON *selector);

/* Runs the command; 0 when --for ended or *stop was set, -errno (err says why). */
int trace__run(struct kctl *c, const struct plugin_cli *cli, const volatile sig_atomic_t *stop,
	       struct rw_error *err);

#endif

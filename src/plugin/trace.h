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

/* A FunctionProbe the plugin made. */
struct trace_probe {
	char name[256];
	char uid[128];
	char path[512]; /* its API path */
};

/* The pods' LabelSelector: -l's, the workload's spec.selector, or a pod's labels. */
int trace__selector(struct kctl *c, const struct plugin_cli *cli, cJSON **ret,
		    struct rw_error *err);
/* Creates the probe of trace__probe_doc (takes sel). 0 or -errno (err says why: a 403 names
 * the verb and resource). */
int trace__create(struct kctl *c, const struct plugin_cli *cli, cJSON *sel, struct trace_probe *ret,
		  struct rw_error *err);
/* Deletes it (unless --keep), saying so on stderr. */
void trace__delete(struct kctl *c, const struct plugin_cli *cli, const struct trace_probe *p);

/* The FunctionProbe to create (generateName, labels, spec), to cJSON_Delete;
 * takes selector. NULL when out of memory. */
cJSON *trace__probe_doc(const struct plugin_cli *cli, cJSON *selector);

/* Runs the command; 0 when --for ended or *stop was set, -errno (err says why). */
int trace__run(struct kctl *c, const struct plugin_cli *cli, const volatile sig_atomic_t *stop,
	       struct rw_error *err);

#endif

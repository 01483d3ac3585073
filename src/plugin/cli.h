/* SPDX-License-Identifier: MIT */
/*
 * kubectl-retwatch's command line: `kubectl retwatch trace|functions|get|top ...`,
 * parsed without side effects (tests/unit/test_plugin.c). A mistake gets a
 * message saying what to write instead.
 */
#ifndef RETWATCH_PLUGIN_CLI_H
#define RETWATCH_PLUGIN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rwerr.h"

#define PLUGIN_MAX_PATTERNS 64 /* a FunctionProbe's spec.functions holds at most 64 */

enum plugin_cmd { PLUGIN_HELP, PLUGIN_TRACE, PLUGIN_GET, PLUGIN_TOP, PLUGIN_FUNCTIONS };
/* -o: a table with long names cut (none), with names whole (wide), or the object */
enum plugin_output { PLUGIN_OUT_TABLE, PLUGIN_OUT_WIDE, PLUGIN_OUT_JSON, PLUGIN_OUT_YAML };

/* The workload kinds trace takes, as KIND/NAME. */
enum plugin_kind {
	PLUGIN_KIND_NONE,
	PLUGIN_KIND_POD,
	PLUGIN_KIND_DEPLOY,
	PLUGIN_KIND_STS,
	PLUGIN_KIND_DS
};

struct plugin_cli {
	enum plugin_cmd cmd;
	const char *kubeconfig; /* --kubeconfig, else NULL: $KUBECONFIG, ~/.kube/config */
	const char *context;	/* --context, else NULL: the current context */
	const char *ns;		/* -n, else NULL: the context's namespace, else default */
	/* -A/--all-namespaces: trace, get and top with ClusterFunctionProbes */
	bool all_ns;
	/* trace */
	enum plugin_kind kind;
	const char *name;     /* of the workload; get: of the probe (or NULL) */
	const char *selector; /* -l */
	const char *patterns[PLUGIN_MAX_PATTERNS];
	size_t npatterns;
	const char *lifetime; /* --for as given (default 2m) */
	uint64_t lifetime_ns;
	const char *threshold; /* --threshold as given, or NULL */
	const char *interval;  /* --interval: the probe's reportInterval (default 2s) */
	bool keep;
	bool args; /* --args: spec.captureArguments */
	/* functions: how long the agents have to answer (--timeout, default 30s) */
	const char *timeout; /* as given */
	uint64_t timeout_ns;
	/* get and top; functions (json or wide) and trace (wide) */
	enum plugin_output output;
};

/* Parses argv (argv[0] the program). -EINVAL with a message. */
int plugin_cli__parse(int argc, char **argv, struct plugin_cli *ret, struct rw_error *err);

/* The kind a KIND of KIND/NAME names (deploy, deployment, deployments,
 * deployment.apps, sts, ds, po, pod...), PLUGIN_KIND_NONE for another. */
enum plugin_kind plugin_kind__parse(const char *kind, size_t len);
/* Singular name, resource (plural) and API group path prefix of a kind. */
const char *plugin_kind__name(enum plugin_kind k);
const char *plugin_kind__resource(enum plugin_kind k);
const char *plugin_kind__api(enum plugin_kind k);

extern const char plugin_cli__usage[];

#endif

// SPDX-License-Identifier: MIT
/*
 * kubectl-retwatch: the kubectl plugin (`kubectl retwatch ...`) for
 * investigations with FunctionProbes: trace a workload's functions live for
 * a while and leave nothing behind, find the names to trace, read the probes
 * of a namespace.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kobj.h"
#include "base/termsafe.h"
#include "plugin/cli.h"
#include "plugin/functions.h"
#include "plugin/kctl.h"
#include "plugin/trace.h"
#include "plugin/view.h"

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	exiting = sig;
}

static void print_json(const cJSON *obj)
{
	termsafe__print_json(stdout, obj, true);
}

/* get [NAME] and top: one GET, then a table, JSON or YAML. */
static int read_probes(struct kctl *c, const struct plugin_cli *cli, struct rw_error *err)
{
	bool wide = cli->output == PLUGIN_OUT_WIDE;
	char path[512];
	cJSON *obj = NULL;
	int st;

	/* -A: the ClusterFunctionProbes */
	if (c->all_ns)
		snprintf(path, sizeof(path), FPROBE_API "/clusterfunctionprobes%s%s",
			 cli->name ? "/" : "", cli->name ? cli->name : "");
	else
		snprintf(path, sizeof(path), FPROBE_API "/namespaces/%s/functionprobes%s%s", c->ns,
			 cli->name ? "/" : "", cli->name ? cli->name : "");
	if (cli->name && strpbrk(cli->name, "/?#%"))
		return rw_error_set(err, EINVAL, "%s: not a probe's name", cli->name);
	st = kctl__call(c, "GET", path, NULL, cli->name ? "get" : "list",
			c->all_ns ? CFPROBE_RESOURCE : FPROBE_RESOURCE, cli->name, &obj, err);
	if (st < 200 || st > 299 || !obj) {
		cJSON_Delete(obj);
		if (st < 0)
			return st;
		/* kctl__call said why; else the body was no JSON */
		return err->msg[0] ? -EIO : rw_error_set(err, EIO, "the API server sent no JSON");
	}
	if (cli->output == PLUGIN_OUT_JSON)
		print_json(obj);
	else if (cli->output == PLUGIN_OUT_YAML)
		view__yaml(stdout, obj);
	else if (cli->cmd == PLUGIN_TOP)
		(wide ? view__top_wide : view__top)(stdout, obj);
	else if (cli->name) {
		struct view_seen *seen = calloc(1, sizeof(*seen));

		(wide ? view__table_wide : view__table)(stdout, obj);
		if (seen)
			view__slow_calls(stdout, obj, seen);
		free(seen);
	} else
		(wide ? view__list_wide : view__list)(stdout, obj);
	cJSON_Delete(obj);
	return 0;
}

int main(int argc, char **argv)
{
	struct rw_error err = { { 0 } };
	struct plugin_cli cli;
	struct kctl c = { 0 };
	int e;

	/* names, values and messages come from pods and agents */
	termsafe__install();
	if (plugin_cli__parse(argc, argv, &cli, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 2;
	}
	if (cli.cmd == PLUGIN_HELP) {
		fputs(plugin_cli__usage, stdout);
		return 0;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if ((e = kctl__open(&cli, &c, &err)))
		goto out;
	if (cli.cmd == PLUGIN_TRACE)
		e = trace__run(&c, &cli, &exiting, &err);
	else if (cli.cmd == PLUGIN_FUNCTIONS)
		e = functions__run(&c, &cli, &exiting, &err);
	else
		e = read_probes(&c, &cli, &err);
out:
	kctl__close(&c);
	if (e) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	return exiting ? 128 + exiting : 0;
}

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/kobj.h"
#include "base/termsafe.h"
#include "report/statuswire.h"
#include "plugin/functions.h"
#include "plugin/selector.h"
#include "plugin/trace.h"
#include "plugin/view.h"

#define POLL_MS 500
/* Nodes waited for by name (the pods' nodes); more are waited for as "some". */
#define MAX_NODES 64
/* Errors printed per executable, and characters of a name or message printed. */
#define MAX_ERRORS 16
#define MAX_TEXT 512

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* v when it is an array, else NULL: what a hostile report holds is iterated as written */
static const cJSON *arr(const cJSON *v)
{
	return cJSON_IsArray(v) ? v : NULL;
}

static const cJSON *items(const cJSON *list)
{
	return arr(kobj_get(list, "items"));
}

/* Whether a node's report holds its answer: every executable read, or errors. */
static bool report_done(const cJSON *status)
{
	const cJSON *list = kobj_get(status, "functionList"), *f;
	size_t read = 0;

	if (kobj_int(status, "functionListPending", 0) != 0)
		return false;
	cJSON_ArrayForEach(f, arr(list))
	{
		if (cJSON_IsTrue(kobj_get(f, "pending")))
			return false;
		read++;
	}
	return read || cJSON_GetArraySize(kobj_get(status, "errors")) > 0;
}

bool functions__answered(const cJSON *reports, const cJSON *nodes)
{
	const cJSON *r, *n;
	size_t want = 0, have = 0;

	cJSON_ArrayForEach(n, arr(nodes))
	{
		bool found = false;

		want++;
		cJSON_ArrayForEach(r, items(reports))
		{
			const char *node = kobj_str(r, "node");

			if (node && cJSON_IsString(n) && !strcmp(node, n->valuestring) &&
			    report_done(kobj_get(r, "status")))
				found = true;
		}
		have += found;
	}
	if (want)
		return have == want;
	cJSON_ArrayForEach(r, items(reports))
	{
		if (report_done(kobj_get(r, "status")))
			return true;
	}
	return false;
}

/* The executable of merged that lists the same as f, or NULL. */
static cJSON *same_exe(cJSON *exes, const cJSON *f)
{
	cJSON *e;

	cJSON_ArrayForEach(e, exes)
	{
		if (cJSON_Compare(kobj_get(e, "executable"), kobj_get(f, "executable"), true) &&
		    cJSON_Compare(kobj_get(e, "matched"), kobj_get(f, "matched"), true) &&
		    cJSON_Compare(kobj_get(e, "functions"), kobj_get(f, "functions"), true))
			return e;
	}
	return NULL;
}

static void add_copy(cJSON *to, const char *key, const cJSON *v)
{
	if (v)
		cJSON_AddItemToObject(to, key, cJSON_Duplicate(v, true));
}

/* Appends the items of array from to array to (atomic: a copy of each). */
static void append(cJSON *to, const cJSON *from)
{
	const cJSON *v;

	cJSON_ArrayForEach(v, arr(from)) cJSON_AddItemToArray(to, cJSON_Duplicate(v, true));
}

static bool has_string(const cJSON *a, const char *s)
{
	const cJSON *v;

	cJSON_ArrayForEach(v, a)
	{
		if (cJSON_IsString(v) && !strcmp(v->valuestring, s))
			return true;
	}
	return false;
}

static void add_exe(cJSON *exes, const cJSON *f, const char *node)
{
	cJSON *e = same_exe(exes, f);

	if (!cJSON_IsString(kobj_get(f, "executable")) || cJSON_IsTrue(kobj_get(f, "pending")))
		return;
	if (!e) {
		e = cJSON_CreateObject();
		cJSON_AddItemToArray(exes, e);
		add_copy(e, "executable", kobj_get(f, "executable"));
		cJSON_AddArrayToObject(e, "nodes");
		cJSON_AddArrayToObject(e, "pods");
		add_copy(e, "functions", kobj_get(f, "functions"));
		add_copy(e, "matched", kobj_get(f, "matched"));
		add_copy(e, "omitted", kobj_get(f, "omitted"));
		add_copy(e, "errors", kobj_get(f, "errors"));
	}
	if (!has_string(cJSON_GetObjectItem(e, "nodes"), node))
		cJSON_AddItemToArray(cJSON_GetObjectItem(e, "nodes"), cJSON_CreateString(node));
	append(cJSON_GetObjectItem(e, "pods"), kobj_get(f, "pods"));
}

cJSON *functions__merge(const cJSON *reports)
{
	cJSON *out = cJSON_CreateObject(), *exes, *errs;
	const cJSON *r, *f;

	if (!out)
		return NULL;
	exes = cJSON_AddArrayToObject(out, "executables");
	errs = cJSON_AddArrayToObject(out, "errors");
	cJSON_ArrayForEach(r, items(reports))
	{
		const cJSON *st = kobj_get(r, "status"), *list = kobj_get(st, "functionList"), *e;
		const char *node = kobj_str(r, "node");

		if (!node)
			continue;
		cJSON_ArrayForEach(f, arr(list))
		{
			add_exe(exes, f, node);
		}
		cJSON_ArrayForEach(e, arr(kobj_get(st, "errors")))
		{
			char msg[MAX_TEXT + 300];

			if (!cJSON_IsString(e))
				continue;
			snprintf(msg, sizeof(msg), "node %.253s: %.*s", node, MAX_TEXT,
				 e->valuestring);
			cJSON_AddItemToArray(errs, cJSON_CreateString(msg));
		}
	}
	return out;
}

/* A name within a line: cut past max columns with "…", or whole when wide. */
static void name_cell(FILE *out, const char *s, int max, bool wide)
{
	termsafe__cell(out, s, wide ? -1 : max, true);
}

/* "web-1 (app), web-2 (app) on node-a": the pods and nodes of an executable. */
static void where(FILE *out, const cJSON *e, bool wide)
{
	const cJSON *v;
	int n = 0;

	cJSON_ArrayForEach(v, arr(kobj_get(e, "pods")))
	{
		if (n++ >= 8)
			continue;
		fputs(n > 1 ? ", " : "", out);
		name_cell(out, kobj_str(v, "pod") ?: "?", 63, wide);
		fputs(" (", out);
		name_cell(out, kobj_str(v, "container") ?: "?", 63, wide);
		fputc(')', out);
	}
	if (n > 8)
		fprintf(out, " and %d more", n - 8);
	n = 0;
	cJSON_ArrayForEach(v, arr(kobj_get(e, "nodes")))
	{
		if (!cJSON_IsString(v) || n++ >= 8)
			continue;
		fputs(n > 1 ? ", " : " on node ", out);
		name_cell(out, v->valuestring, 253, wide);
	}
	if (n > 8)
		fprintf(out, " and %d more", n - 8);
}

/* LIB:NAME, as a pattern names a library's function; NAME of the executable's.
 * A new string (free() it), or NULL. */
static char *full_name(const cJSON *f)
{
	const char *fn = kobj_str(f, "name"), *lib = kobj_str(f, "library");
	char *s = NULL;

	if (fn && asprintf(&s, "%s%s%s", lib ? lib : "", lib ? ":" : "", fn) < 0)
		return NULL;
	return s;
}

/* The FUNCTION column's width: its longest name, up to 60 unless wide. */
static int function_width(const cJSON *e, bool wide)
{
	const cJSON *f;
	int w = (int)strlen("FUNCTION");

	cJSON_ArrayForEach(f, arr(kobj_get(e, "functions")))
	{
		char *full = full_name(f);
		size_t n = full ? termsafe__width(full) : 0;

		free(full);
		if (!wide && n > 60)
			n = 60;
		w = n > (size_t)w && n < INT_MAX / 2 ? (int)n : w;
	}
	return w;
}

static void print_exe(FILE *out, const cJSON *e, bool wide)
{
	const cJSON *f;
	int64_t matched = kobj_int(e, "matched", 0), omitted = kobj_int(e, "omitted", 0);
	int w = function_width(e, wide);

	name_cell(out, kobj_str(e, "executable") ?: "?", MAX_TEXT, wide);
	fputs(" in ", out);
	where(out, e, wide);
	fprintf(out, ": %" PRId64 " function%s\n", matched, matched == 1 ? "" : "s");
	if (!cJSON_GetArraySize(kobj_get(e, "functions")))
		return;
	fprintf(out, "%-*s %10s  %s\n", w, "FUNCTION", "SIZE", "WHERE");
	cJSON_ArrayForEach(f, arr(kobj_get(e, "functions")))
	{
		const char *lib = kobj_str(f, "library");
		char *full = full_name(f);

		if (!full)
			continue;
		termsafe__cell(out, full, w, false);
		fprintf(out, " %10" PRId64 "  ", kobj_int(f, "size", 0));
		name_cell(out, lib ? lib : "executable", MAX_TEXT, wide);
		fprintf(out, "%s\n",
			cJSON_IsTrue(kobj_get(f, "generic")) ? " (generic instance)" : "");
		free(full);
	}
	if (omitted > 0)
		fprintf(out,
			"... and %" PRId64 " more: an agent lists at most 1000 functions per "
			"executable; give a narrower pattern\n",
			omitted);
}

static size_t print(FILE *out, const cJSON *merged, bool wide)
{
	const cJSON *e;
	size_t total = 0;
	bool first = true;

	cJSON_ArrayForEach(e, arr(kobj_get(merged, "executables")))
	{
		int64_t m = kobj_int(e, "matched", 0);

		if (!first)
			fputc('\n', out);
		first = false;
		print_exe(out, e, wide);
		total += m > 0 ? (size_t)m : 0;
	}
	return total;
}

size_t functions__print(FILE *out, const cJSON *merged)
{
	return print(out, merged, false);
}

size_t functions__print_wide(FILE *out, const cJSON *merged)
{
	return print(out, merged, true);
}

/* The nodes of the pods the selector matches now, as a JSON array (NULL: not known). */
static cJSON *pod_nodes(struct kctl *c, const cJSON *sel, int *ret_pods)
{
	char text[2048], q[6144], path[6400];
	struct rw_error err = { { 0 } };
	cJSON *list = NULL, *nodes;
	const cJSON *p;

	*ret_pods = -1;
	if (selector__format(sel, text, sizeof(text)))
		return NULL;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods?limit=500&labelSelector=%s", c->ns,
		 kube__escape(text, q, sizeof(q)));
	if (kctl__call(c, "GET", path, NULL, "list", "pods", NULL, &list, &err) != 200) {
		fprintf(stderr, "note: cannot list the pods of %s (%s): waiting for any node\n",
			text, err.msg);
		return NULL;
	}
	nodes = cJSON_CreateArray();
	*ret_pods = 0;
	cJSON_ArrayForEach(p, items(list))
	{
		const char *node = kobj_str(kobj_get(p, "spec"), "nodeName");
		const cJSON *n;
		bool seen = false;

		(*ret_pods)++;
		if (!node || !nodes)
			continue;
		cJSON_ArrayForEach(n, nodes) seen |= !strcmp(n->valuestring, node);
		if (!seen && cJSON_GetArraySize(nodes) < MAX_NODES)
			cJSON_AddItemToArray(nodes, cJSON_CreateString(node));
	}
	fprintf(stderr, "listing the functions of %d pod%s matching %s\n", *ret_pods,
		*ret_pods == 1 ? "" : "s", text);
	cJSON_Delete(list);
	return nodes;
}

/* The nodes of nodes no report answers for yet, into buf. */
static void silent_nodes(const cJSON *reports, const cJSON *nodes, char *buf, size_t len)
{
	const cJSON *n, *r;
	size_t off = 0;

	buf[0] = '\0';
	cJSON_ArrayForEach(n, nodes)
	{
		bool done = false;

		cJSON_ArrayForEach(r, items(reports))
		{
			const char *node = kobj_str(r, "node");

			done |= node && !strcmp(node, n->valuestring) &&
				report_done(kobj_get(r, "status"));
		}
		if (!done && off < len)
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "",
						n->valuestring);
	}
}

/* The probe's spec refused by the agents: -EINVAL with why. */
static int refused(struct kctl *c, const struct trace_probe *p, struct rw_error *err)
{
	const char *st, *reason, *msg;
	cJSON *obj = NULL;
	int e = 0;

	if (kctl__call(c, "GET", p->path, NULL, "get", FPROBE_RESOURCE, p->name, &obj, err) ==
		    200 &&
	    view__condition(obj, "Ready", &st, &reason, &msg) && !strcmp(st, "False"))
		e = rw_error_set(err, EINVAL, "the agents refused the probe's spec: %s", msg);
	cJSON_Delete(obj);
	return e;
}

/* Reads the probe's reports until every node answered, the time is out or *stop. */
static int wait_reports(struct kctl *c, const struct trace_probe *p, const cJSON *nodes,
			uint64_t timeout_ns, const volatile sig_atomic_t *stop, cJSON **ret,
			struct rw_error *err)
{
	char sel[256], q[768], path[1024];
	uint64_t end = now_ns() + timeout_ns;
	int st, e;

	snprintf(sel, sizeof(sel), STATUS_LABEL_PROBE_UID "=%s", p->uid);
	snprintf(path, sizeof(path),
		 FPROBE_API "/namespaces/%s/functionprobereports?labelSelector=%s", c->ns,
		 kube__escape(sel, q, sizeof(q)));
	*ret = NULL;
	while (!*stop) {
		cJSON_Delete(*ret);
		*ret = NULL;
		st = kctl__call(c, "GET", path, NULL, "list", "functionprobereports.retwatch.io",
				NULL, ret, err);
		if (st == 403 || st == 404)
			return -EACCES;
		if (st == 200 && functions__answered(*ret, nodes))
			return 0;
		if ((e = refused(c, p, err)))
			return e;
		if (now_ns() >= end)
			return -ETIMEDOUT;
		for (int ms = POLL_MS; ms > 0 && !*stop; ms -= 50)
			usleep(50 * 1000);
	}
	return 0;
}

/* Nothing matched: -ENOENT, with what the agents said (the suggestions). */
static int nothing(const cJSON *merged, struct rw_error *err)
{
	char msg[sizeof(err->msg)];
	const cJSON *e, *m;
	size_t off = 0, n = 0;

	msg[0] = '\0';
	cJSON_ArrayForEach(e, arr(kobj_get(merged, "executables")))
	{
		cJSON_ArrayForEach(m, arr(kobj_get(e, "errors")))
		{
			if (cJSON_IsString(m) && n++ < MAX_ERRORS && off < sizeof(msg))
				off += (size_t)snprintf(msg + off, sizeof(msg) - off, "%s%.*s",
							off ? "; " : "", MAX_TEXT, m->valuestring);
		}
	}
	return rw_error_set(err, ENOENT, "nothing matched: %s",
			    msg[0] ? msg : "the agents listed no function");
}

static void print_errors(const cJSON *merged)
{
	const cJSON *e, *m;

	cJSON_ArrayForEach(m, arr(kobj_get(merged, "errors")))
		fprintf(stderr, "warning: %.*s\n", MAX_TEXT, m->valuestring);
	cJSON_ArrayForEach(e, arr(kobj_get(merged, "executables")))
	{
		cJSON_ArrayForEach(m, arr(kobj_get(e, "errors")))
		{
			if (cJSON_IsString(m))
				fprintf(stderr, "note: %.*s: %.*s\n", MAX_TEXT,
					kobj_str(e, "executable") ?: "?", MAX_TEXT, m->valuestring);
		}
	}
}

/* What the reports say, printed: 0, or why nothing can be printed. */
static int answer(const struct plugin_cli *cli, const cJSON *reports, struct rw_error *err)
{
	cJSON *merged = functions__merge(reports);
	size_t total;
	int e = 0;

	if (!merged)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (cli->output == PLUGIN_OUT_JSON) {
		termsafe__print_json(stdout, merged, true);
		cJSON_Delete(merged);
		return 0;
	}
	total = cli->output == PLUGIN_OUT_WIDE ? functions__print_wide(stdout, merged)
					       : functions__print(stdout, merged);
	fflush(stdout);
	if (!total)
		e = nothing(merged, err);
	else
		print_errors(merged);
	cJSON_Delete(merged);
	return e;
}

int functions__run(struct kctl *c, const struct plugin_cli *cli, const volatile sig_atomic_t *stop,
		   struct rw_error *err)
{
	struct trace_probe p = { 0 };
	cJSON *sel = NULL, *nodes, *reports = NULL;
	char silent[1024];
	int e, npods;

	if ((e = trace__selector(c, cli, &sel, err)))
		return e;
	nodes = pod_nodes(c, sel, &npods);
	if (!npods) {
		cJSON_Delete(sel);
		cJSON_Delete(nodes);
		return rw_error_set(err, ENOENT,
				    "no pod of namespace %s matches the selector: nothing to list",
				    c->ns);
	}
	if (*stop) {
		cJSON_Delete(sel);
		cJSON_Delete(nodes);
		return 0;
	}
	if ((e = trace__create(c, cli, sel, &p, err))) {
		cJSON_Delete(nodes);
		return e;
	}
	e = wait_reports(c, &p, nodes, cli->timeout_ns, stop, &reports, err);
	trace__delete(c, cli, &p);
	if (e == -EACCES) {
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		e = rw_error_set(err, EACCES,
				 "%s; the agents' lists are in the probe's FunctionProbeReports",
				 msg);
	} else if (e == -ETIMEDOUT) {
		silent_nodes(reports, nodes, silent, sizeof(silent));
		e = rw_error_set(err, ETIMEDOUT,
				 "no retwatch agent answered %s%s within %s: is retwatch-agent "
				 "running there (kubectl get daemonset -A -l "
				 "app.kubernetes.io/name=retwatch)?",
				 silent[0] ? "on node " : "for the pods' nodes", silent,
				 cli->timeout);
		/* what the other nodes said is shown all the same */
		if (reports && cJSON_GetArraySize(items(reports))) {
			struct rw_error ignored = { { 0 } };

			answer(cli, reports, &ignored);
		}
	} else if (!e && !*stop)
		e = answer(cli, reports, err);
	cJSON_Delete(reports);
	cJSON_Delete(nodes);
	return e;
}

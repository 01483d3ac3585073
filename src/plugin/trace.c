// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/kobj.h"
#include "base/latency.h"
#include "base/termsafe.h"
#include "plugin/selector.h"
#include "plugin/trace.h"
#include "plugin/view.h"

#define POLL_MS 500
/* What -A makes: a ClusterFunctionProbe over every namespace. */
#define KIND(c) ((c)->all_ns ? "ClusterFunctionProbe" : "FunctionProbe")
#define RESOURCE(c) ((c)->all_ns ? CFPROBE_RESOURCE : FPROBE_RESOURCE)
/* Without a word from any agent this long, say where to look. */
#define NO_AGENT_HINT_NS (10ull * 1000000000ull)

struct trace {
	struct kctl *c;
	const struct plugin_cli *cli;
	const volatile sig_atomic_t *stop;
	struct trace_probe ref;
	bool tty;
	/* following the probe */
	uint64_t start, end;
	bool attached, told, hinted;
	char last[64];		/* summary.lastUpdate of the table shown last */
	char rv[64];		/* resourceVersion of the watch's last event */
	bool deleted;		/* the watch saw the probe deleted */
	struct view_seen *seen; /* the slowest calls printed */
	/* on a terminal, the countdown under the table moves every second:
	 * a thread of its own rewrites that line, out_mu between its writes and
	 * the table's */
	pthread_mutex_t out_mu;
	pthread_cond_t tick_cv; /* signalled when ticking is cleared */
	bool counting;		/* the countdown line is the screen's last */
	bool ticking;		/* the thread runs; cleared to end it */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleeps ms, or less when *stop is set. */
static void nap(const volatile sig_atomic_t *stop, int ms)
{
	for (; ms > 0 && !*stop; ms -= 50)
		usleep(50 * 1000);
}

/* "retwatch-deploy-payments-": a DNS-1123 prefix the API server completes. */
static void generate_name(const struct plugin_cli *cli, char *buf, size_t len)
{
	size_t off;

	snprintf(buf, len, "retwatch-%s%s%.40s", cli->name ? plugin_kind__name(cli->kind) : "",
		 cli->name ? "-" : "", cli->name ? cli->name : "");
	for (off = 0; buf[off]; off++) {
		char ch = buf[off];

		if (ch >= 'A' && ch <= 'Z')
			buf[off] = (char)(ch - 'A' + 'a');
		else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')))
			buf[off] = '-';
	}
	while (off && buf[off - 1] == '-')
		off--;
	snprintf(buf + off, len - off, "-");
}

cJSON *trace__probe_doc(const struct plugin_cli *cli, cJSON *selector)
{
	cJSON *doc = cJSON_CreateObject(), *meta, *spec, *fns;
	bool every = cli->cmd == PLUGIN_FUNCTIONS && !cli->npatterns;
	char gen[64];

	if (!doc) {
		cJSON_Delete(selector);
		return NULL;
	}
	generate_name(cli, gen, sizeof(gen));
	cJSON_AddStringToObject(doc, "apiVersion", "retwatch.io/v1alpha1");
	cJSON_AddStringToObject(doc, "kind", KIND(cli));
	meta = cJSON_AddObjectToObject(doc, "metadata");
	cJSON_AddStringToObject(meta, "generateName", gen);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "labels"),
				"app.kubernetes.io/managed-by", PLUGIN_MANAGED_BY);
	spec = cJSON_AddObjectToObject(doc, "spec");
	cJSON_AddItemToObject(spec, "selector", selector);
	/* -A: every namespace ({} selects them all) */
	if (cli->all_ns)
		cJSON_AddObjectToObject(spec, "namespaceSelector");
	fns = cJSON_AddArrayToObject(spec, "functions");
	for (size_t i = 0; i < cli->npatterns; i++)
		cJSON_AddItemToArray(fns, cJSON_CreateString(cli->patterns[i]));
	cJSON_AddStringToObject(spec, "lifetime", cli->lifetime);
	cJSON_AddStringToObject(spec, "reportInterval", cli->interval);
	if (cli->threshold)
		cJSON_AddStringToObject(spec, "slowThreshold", cli->threshold);
	if (cli->args)
		cJSON_AddBoolToObject(spec, "captureArguments", true);
	/* functions: the names only, nothing attached; none given: every one */
	if (cli->cmd == PLUGIN_FUNCTIONS) {
		cJSON_AddStringToObject(spec, "mode", "List");
		if (every)
			cJSON_AddItemToArray(fns, cJSON_CreateString("*"));
	}
	if (!fns || !selector || cJSON_GetArraySize(fns) != (int)cli->npatterns + every) {
		cJSON_Delete(doc);
		return NULL;
	}
	return doc;
}

int trace__selector(struct kctl *c, const struct plugin_cli *cli, cJSON **ret, struct rw_error *err)
{
	char path[512], res[64];
	cJSON *obj = NULL;
	int st, e;

	if (cli->selector)
		return selector__parse(cli->selector, ret, err);
	snprintf(path, sizeof(path), "%s/namespaces/%s/%s/%s", plugin_kind__api(cli->kind), c->ns,
		 plugin_kind__resource(cli->kind), cli->name);
	snprintf(res, sizeof(res), "%s%s", plugin_kind__resource(cli->kind),
		 cli->kind == PLUGIN_KIND_POD ? "" : ".apps");
	if (strchr(cli->name, '?') || strchr(cli->name, '#') || strchr(cli->name, '%'))
		return rw_error_set(err, EINVAL, "%s: not a %s name", cli->name,
				    plugin_kind__name(cli->kind));
	st = kctl__call(c, "GET", path, NULL, "get", res, cli->name, &obj, err);
	if (st < 200 || st > 299)
		return st < 0 ? st : -EIO;
	if (cli->kind == PLUGIN_KIND_POD)
		e = selector__from_labels(kobj_get(kobj_get(obj, "metadata"), "labels"), ret, err);
	else
		e = selector__from_json(kobj_get(kobj_get(obj, "spec"), "selector"), ret, err);
	if (e) {
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		rw_error_set(err, -e, "%s/%s: %s", plugin_kind__name(cli->kind), cli->name, msg);
	}
	cJSON_Delete(obj);
	return e;
}

/* Says which pods the selector matches now (informative: a user who may
 * not list pods still traces). */
static void show_pods(struct trace *t, const cJSON *sel)
{
	char text[2048], q[6144], path[6400];
	struct rw_error err = { { 0 } };
	cJSON *list = NULL;
	const cJSON *p;
	int n = 0;

	if (selector__format(sel, text, sizeof(text)))
		return;
	if (t->c->all_ns)
		snprintf(path, sizeof(path), "/api/v1/pods?limit=500&labelSelector=%s",
			 kube__escape(text, q, sizeof(q)));
	else
		snprintf(path, sizeof(path),
			 "/api/v1/namespaces/%s/pods?limit=500&labelSelector=%s", t->c->ns,
			 kube__escape(text, q, sizeof(q)));
	if (kctl__call(t->c, "GET", path, NULL, "list", "pods", NULL, &list, &err) != 200) {
		fprintf(stderr, "note: cannot list the pods of %s (%s)\n", text, err.msg);
		return;
	}
	cJSON_ArrayForEach(p, kobj_get(list, "items")) n++;
	if (!n)
		fprintf(stderr, "note: no pod of %s%s matches %s yet\n",
			t->c->all_ns ? "any namespace" : "namespace ", t->c->all_ns ? "" : t->c->ns,
			text);
	else
		fprintf(stderr, "tracing %d pod%s matching %s%s:", n, n == 1 ? "" : "s", text,
			kobj_get(kobj_get(list, "metadata"), "continue") ? " (and more)" : "");
	n = 0;
	cJSON_ArrayForEach(p, kobj_get(list, "items"))
	{
		if (n++ < 10)
			fprintf(stderr, " %.63s", kobj_name(p) ? kobj_name(p) : "?");
	}
	if (n)
		fprintf(stderr, "%s\n", n > 10 ? " ..." : "");
	if (t->cli->kind == PLUGIN_KIND_POD && n > 1)
		fprintf(stderr,
			"note: a FunctionProbe selects pods by label: %d pods carry the labels of "
			"pod %s, all are traced\n",
			n, t->cli->name);
	cJSON_Delete(list);
}

int trace__create(struct kctl *c, const struct plugin_cli *cli, cJSON *sel, struct trace_probe *ret,
		  struct rw_error *err)
{
	cJSON *doc = trace__probe_doc(cli, sel), *made = NULL;
	char path[256];
	const char *uid;
	int st;

	if (!doc)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (c->all_ns)
		snprintf(path, sizeof(path), FPROBE_API "/clusterfunctionprobes");
	else
		snprintf(path, sizeof(path), FPROBE_API "/namespaces/%s/functionprobes", c->ns);
	st = kctl__call(c, "POST", path, doc, "create", RESOURCE(c), NULL, &made, err);
	cJSON_Delete(doc);
	uid = kobj_uid(made);
	if (st >= 200 && st <= 299 && (!kobj_name(made) || !uid))
		st = rw_error_set(err, EIO, "the API server's answer to the create names no probe");
	if (st >= 200 && st <= 299) {
		snprintf(ret->name, sizeof(ret->name), "%s", kobj_name(made));
		snprintf(ret->uid, sizeof(ret->uid), "%s", uid);
		snprintf(ret->path, sizeof(ret->path), "%s/%s", path, ret->name);
		fprintf(stderr, "created %s %s %s%s (lifetime %s)\n", KIND(c), ret->name,
			c->all_ns ? "over every namespace" : "in namespace ",
			c->all_ns ? "" : c->ns, cli->lifetime);
	}
	cJSON_Delete(made);
	return st < 0 ? st : st > 299 ? -EIO : 0;
}

static int get_probe(struct trace *t, cJSON **ret, struct rw_error *err)
{
	int st = kctl__call(t->c, "GET", t->ref.path, NULL, "get", RESOURCE(t->c), t->ref.name, ret,
			    err);

	if (st == 404)
		return rw_error_set(err, ENOENT, "%s %s was deleted while it ran", KIND(t->c),
				    t->ref.name);
	return st >= 200 && st <= 299 && *ret ? 0 : st < 0 ? st : -EIO;
}

void trace__delete(struct kctl *c, const struct plugin_cli *cli, const struct trace_probe *p)
{
	struct rw_error err = { { 0 } };
	cJSON *gone = NULL;
	int st;

	char where[80];

	snprintf(where, sizeof(where), "%s%s", c->all_ns ? "-A" : "-n ", c->all_ns ? "" : c->ns);
	if (cli->keep) {
		fprintf(stderr,
			"kept %s %s: kubectl retwatch get %s %s; kubectl delete %s %s%s%s\n",
			KIND(c), p->name, p->name, where, RESOURCE(c), p->name,
			c->all_ns ? "" : " -n ", c->all_ns ? "" : c->ns);
		return;
	}
	st = kctl__call(c, "DELETE", p->path, NULL, "delete", RESOURCE(c), p->name, &gone, &err);
	cJSON_Delete(gone);
	if ((st >= 200 && st <= 299) || st == 404)
		fprintf(stderr, "deleted %s %s\n", KIND(c), p->name);
	else
		fprintf(stderr, "error: %s; delete it: kubectl delete %s %s%s%s\n", err.msg,
			RESOURCE(c), p->name, c->all_ns ? "" : " -n ", c->all_ns ? "" : c->ns);
}

/* Not attached yet is said once it lasts this long: the first summary may
 * come before any agent has attached. */
#define NOT_YET_QUIET_NS (5ull * 1000000000ull)

/* 1 once attached, 0 not yet, -errno when it never will be (err says why).
 * *told: whether "not attached yet" was said (set when quiet is false). */
static int attach_state(const cJSON *probe, bool quiet, bool *told, struct rw_error *err)
{
	const char *st, *reason, *msg;

	if (view__condition(probe, "Ready", &st, &reason, &msg) && !strcmp(st, "False"))
		return rw_error_set(err, EINVAL, "the agents refused the probe's spec: %s", msg);
	if (!view__condition(probe, "Attached", &st, &reason, &msg))
		return 0;
	if (!strcmp(st, "True")) {
		fprintf(stderr, "attached: %s\n", msg);
		return 1;
	}
	if (!strcmp(reason, "AttachFailed") || !strcmp(reason, "InvalidSpec"))
		return rw_error_set(err, ENOENT, "the probe did not attach: %s", msg);
	if (!*told && !quiet) {
		fprintf(stderr, "not attached yet (%s): %s\n", reason, msg);
		*told = true;
	}
	return 0;
}

/* The last line of a terminal's screen, without its newline: the tick
 * thread rewrites it. */
static void countdown(const struct trace *t, uint64_t now)
{
	printf("%s: %" PRIu64 "s left; Ctrl-C ends it%s", t->ref.name,
	       t->end > now ? (t->end - now) / UINT64_C(1000000000) : 0,
	       t->cli->keep ? "" : " and deletes the probe");
}

/* The table at each new report; the slowest calls as they come. */
static void show(struct trace *t, const cJSON *probe)
{
	const char *upd = kobj_str(kobj_get(kobj_get(probe, "status"), "summary"), "lastUpdate");
	uint64_t now = now_ns();

	if (!upd || !strncmp(upd, t->last, sizeof(t->last)))
		return;
	pthread_mutex_lock(&t->out_mu);
	snprintf(t->last, sizeof(t->last), "%s", upd);
	t->counting = false;
	if (t->tty) {
		/* a live screen: every current slowest call again under the table */
		memset(t->seen, 0, sizeof(*t->seen));
		termsafe__control(stdout, STDOUT_FILENO, "\033[H\033[2J");
	}
	if (t->cli->output == PLUGIN_OUT_WIDE)
		view__table_wide(stdout, probe);
	else
		view__table(stdout, probe);
	view__slow_calls(stdout, probe, t->seen);
	if (t->tty) {
		putchar('\n');
		countdown(t, now);
		t->counting = true;
	} else {
		putchar('\n');
	}
	fflush(stdout);
	pthread_mutex_unlock(&t->out_mu);
}

/* Rewrites the countdown line each second until follow() ends. */
static void *tick(void *arg)
{
	struct trace *t = arg;
	struct timespec at;

	pthread_mutex_lock(&t->out_mu);
	clock_gettime(CLOCK_REALTIME, &at);
	while (t->ticking) {
		at.tv_sec++;
		pthread_cond_timedwait(&t->tick_cv, &t->out_mu, &at);
		if (!t->ticking || *t->stop)
			break;
		if (t->counting) {
			termsafe__control(stdout, STDOUT_FILENO, "\r\033[K");
			countdown(t, now_ns());
			fflush(stdout);
		}
	}
	pthread_mutex_unlock(&t->out_mu);
	return NULL;
}

static void no_agent_hint(struct trace *t)
{
	fprintf(stderr,
		"no agent has reported on %s yet: is retwatch-agent running on the pods' nodes "
		"(kubectl get daemonset -A -l app.kubernetes.io/name=retwatch)?\n",
		t->ref.name);
}

/* One state of the probe: attached yet, or why not; the table once attached.
 * -errno when it will never attach. */
static int on_probe(struct trace *t, const cJSON *p, struct rw_error *err)
{
	int e;

	if (!t->attached) {
		e = attach_state(p, now_ns() - t->start < NOT_YET_QUIET_NS, &t->told, err);
		if (e < 0)
			return e;
		t->attached = e == 1;
	}
	if (!t->attached && !t->hinted && !kobj_get(p, "status") &&
	    now_ns() - t->start > NO_AGENT_HINT_NS) {
		no_agent_hint(t);
		t->hinted = true;
	}
	if (t->attached)
		show(t, p);
	return 0;
}

/* GETs the probe every POLL_MS until the end (or until attached). */
static int poll_probe(struct trace *t, bool until_attached, struct rw_error *err)
{
	int e = 0, fails = 0;

	while (!*t->stop && now_ns() < t->end && !(until_attached && t->attached)) {
		cJSON *p = NULL;

		if ((e = get_probe(t, &p, err))) {
			if (e == -ENOENT || ++fails == 20)
				return e;
			fprintf(stderr, "warning: %s\n", err->msg);
		} else {
			fails = 0;
			e = on_probe(t, p, err);
			cJSON_Delete(p);
			if (e)
				return e;
		}
		if (!(until_attached && t->attached))
			nap(t->stop, POLL_MS);
	}
	return 0;
}

/* One event of the watch; nonzero ends this watch. */
static int on_event(const char *line, size_t len, void *ctx)
{
	struct trace *t = ctx;
	cJSON *ev = cJSON_ParseWithLength(line, len);
	const char *type = kobj_str(ev, "type"), *rv;
	const cJSON *obj = kobj_get(ev, "object");
	struct rw_error err = { { 0 } };
	int stop = 0;

	if (type && !strcmp(type, "DELETED")) {
		t->deleted = true;
		stop = 1;
	} else if (type && !strcmp(type, "ERROR")) {
		t->rv[0] = '\0'; /* 410 Gone, or another: watch afresh from now */
		stop = 1;
	} else if (type && (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED"))) {
		rv = kobj_str(kobj_get(obj, "metadata"), "resourceVersion");
		snprintf(t->rv, sizeof(t->rv), "%s", rv && strlen(rv) < sizeof(t->rv) ? rv : "");
		on_probe(t, obj, &err); /* attached already: nothing fails */
	}
	cJSON_Delete(ev);
	return stop || now_ns() >= t->end;
}

/*
 * Watches the probe until the end (the server ends each watch then:
 * timeoutSeconds), from the last event's resourceVersion. -EACCES when the
 * user may not watch: polling serves instead.
 */
static int watch_probe(struct trace *t, struct rw_error *err)
{
	char path[2048], sel[300], qsel[900], qrv[200];
	int st, fails = 0;

	snprintf(sel, sizeof(sel), "metadata.name=%s", t->ref.name);
	kube__escape(sel, qsel, sizeof(qsel));
	while (!*t->stop && now_ns() < t->end) {
		uint64_t left = (t->end - now_ns()) / UINT64_C(1000000000) + 1;

		snprintf(path, sizeof(path),
			 FPROBE_API "%s%s%s%s?watch=1&fieldSelector=%s"
				    "&timeoutSeconds=%" PRIu64 "%s%s",
			 t->c->all_ns ? "" : "/namespaces/", t->c->all_ns ? "" : t->c->ns,
			 t->c->all_ns ? "" : "/functionprobes",
			 t->c->all_ns ? "/clusterfunctionprobes" : "", qsel, left,
			 t->rv[0] ? "&resourceVersion=" : "",
			 kube__escape(t->rv, qrv, sizeof(qrv)));
		st = kube__stream(t->c->k, path, on_event, t, t->stop, -1, (int)left + 30, err);
		if (t->deleted)
			return rw_error_set(err, ENOENT, "%s %s was deleted while it ran",
					    KIND(t->c), t->ref.name);
		if (st == 403)
			return -EACCES;
		if (st == 200 || st == -ECANCELED) {
			fails = 0;
			continue;
		}
		if (st == 410)
			t->rv[0] = '\0';
		if (++fails == 10)
			return rw_error_set(err, EIO, "failed to watch %s %s: %s", KIND(t->c),
					    t->ref.name, err->msg);
		nap(t->stop, 1000);
	}
	return 0;
}

static int follow(struct trace *t, struct rw_error *err)
{
	pthread_t ticker;
	bool ticking;
	int e;

	if (!(t->seen = calloc(1, sizeof(*t->seen))))
		return rw_error_set(err, ENOMEM, "out of memory");
	pthread_mutex_init(&t->out_mu, NULL);
	pthread_cond_init(&t->tick_cv, NULL);
	t->ticking = t->tty;
	ticking = t->tty && !pthread_create(&ticker, NULL, tick, t);
	e = poll_probe(t, true, err);
	if (!e && t->attached && (e = watch_probe(t, err)) == -EACCES) {
		fprintf(stderr,
			"note: you may not watch %s: reading the probe every %d ms instead\n",
			RESOURCE(t->c), POLL_MS);
		e = poll_probe(t, false, err);
	}
	pthread_mutex_lock(&t->out_mu);
	t->ticking = false;
	pthread_cond_signal(&t->tick_cv);
	if (t->counting) /* what follows starts a line of its own */
		putchar('\n');
	t->counting = false;
	pthread_mutex_unlock(&t->out_mu);
	if (ticking)
		pthread_join(ticker, NULL);
	pthread_cond_destroy(&t->tick_cv);
	pthread_mutex_destroy(&t->out_mu);
	free(t->seen);
	t->seen = NULL;
	return e;
}

int trace__run(struct kctl *c, const struct plugin_cli *cli, const volatile sig_atomic_t *stop,
	       struct rw_error *err)
{
	struct trace t = { .c = c, .cli = cli, .stop = stop, .tty = isatty(STDOUT_FILENO) };
	cJSON *sel = NULL;
	int e;

	if ((e = trace__selector(c, cli, &sel, err)))
		return e;
	show_pods(&t, sel);
	if (*stop) {
		cJSON_Delete(sel);
		return 0;
	}
	t.start = now_ns();
	t.end = t.start + cli->lifetime_ns;
	if ((e = trace__create(c, cli, sel, &t.ref, err)))
		return e;
	e = follow(&t, err);
	trace__delete(c, cli, &t.ref);
	return e;
}

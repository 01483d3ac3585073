// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/kctl.h"

/* The kubeconfig kubectl would read: the first file of $KUBECONFIG that
 * exists (kubectl merges them all; the first holds the current context in
 * the usual case), else ~/.kube/config. */
static int find_kubeconfig(const struct plugin_cli *cli, char *buf, size_t len,
			   struct rw_error *err)
{
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");

	if (cli->kubeconfig) {
		snprintf(buf, len, "%s", cli->kubeconfig);
		return 0;
	}
	for (const char *p = env; p && *p;) {
		size_t n = strcspn(p, ":");

		snprintf(buf, len, "%.*s", (int)n, p);
		if (n && !access(buf, R_OK))
			return 0;
		p += n + (p[n] == ':');
	}
	if (env && *env)
		return rw_error_set(err, ENOENT, "KUBECONFIG=%s: no such file can be read", env);
	if (!home)
		return rw_error_set(
			err, ENOENT,
			"no kubeconfig: set KUBECONFIG or --kubeconfig (HOME is unset)");
	snprintf(buf, len, "%s/.kube/config", home);
	return 0;
}

int kctl__open(const struct plugin_cli *cli, struct kctl *c, struct rw_error *err)
{
	struct kube_creds creds = { 0 };
	const char *ns;
	int e;

	memset(c, 0, sizeof(*c));
	if ((e = find_kubeconfig(cli, c->kubeconfig, sizeof(c->kubeconfig), err)))
		return e;
	/* the user's own kubeconfig, as kubectl reads it: its exec plugin runs */
	if ((e = kubeconfig__load_opts(c->kubeconfig, cli->context, KUBECONFIG_EXEC, &creds,
				       err))) {
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		if (!strstr(msg, c->kubeconfig))
			rw_error_set(err, -e, "%s: %s", c->kubeconfig, msg);
		return e;
	}
	ns = cli->ns ? cli->ns : creds.namespace ? creds.namespace : "default";
	if (!*ns || strlen(ns) >= sizeof(c->ns) ||
	    strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(ns)) {
		e = rw_error_set(
			err, EINVAL,
			"\"%.80s\" is not a namespace name: lowercase letters, digits and '-', "
			"at most 63",
			ns);
		goto out;
	}
	snprintf(c->ns, sizeof(c->ns), "%s", ns);
	c->all_ns = cli->all_ns;
	if (!(c->k = kube__new(&creds, err)))
		e = -errno;
out:
	kube_creds__free(&creds);
	return e;
}

void kctl__close(struct kctl *c)
{
	if (c)
		kube__free(c->k);
}

void kctl__explain(int status, const char *body, const char *verb, const char *resource,
		   const char *ns, const char *name, struct rw_error *err)
{
	char said[384];

	kube__error_text(body, said, sizeof(said));
	if (status == 401)
		rw_error_set(err, EACCES,
			     "the API server did not accept your kubeconfig's credentials (HTTP "
			     "401): log in again, or check the user of the current context");
	else if (status == 403 && !*ns)
		rw_error_set(err, EACCES,
			     "you may not %s %s cluster-wide: ask for the '%s' verb on %s (a "
			     "ClusterRole bound to you with a ClusterRoleBinding, such as the "
			     "chart's retwatch-cluster-investigator) (the server said: %s)",
			     verb, resource, verb, resource, said);
	else if (status == 403)
		rw_error_set(err, EACCES,
			     "you may not %s %s in namespace %s: ask for the '%s' verb on %s in "
			     "namespace %s (a Role bound to you) (the server said: %s)",
			     verb, resource, ns, verb, resource, ns, said);
	else if (status == 404 && name)
		rw_error_set(err, ENOENT, "%s \"%s\" not found%s%s", resource, name,
			     *ns ? " in namespace " : "", ns);
	else if (status == 404)
		rw_error_set(err, ENOENT,
			     "the API server does not serve %s: is retwatch installed (its CRDs, "
			     "docs/agent.md)?",
			     resource);
	else
		rw_error_set(err, EIO, "failed to %s %s%s%s%s%s: HTTP %d: %s", verb, resource,
			     name ? " " : "", name ? name : "", *ns ? " in namespace " : "", ns,
			     status, said);
}

int kctl__call(struct kctl *c, const char *method, const char *path, const cJSON *body,
	       const char *verb, const char *resource, const char *name, cJSON **ret,
	       struct rw_error *err)
{
	char *text = body ? cJSON_PrintUnformatted(body) : NULL, *resp = NULL;
	int status;

	*ret = NULL;
	if (body && !text)
		return rw_error_set(err, ENOMEM, "out of memory");
	status = kube__request(c->k, method, path, body ? "application/json" : NULL, text, 30000,
			       &resp, err);
	free(text);
	if (status < 0) {
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		rw_error_set(err, -status, "failed to reach the API server %s: %s",
			     kube__server(c->k), msg);
	} else if (status < 200 || status > 299) {
		kctl__explain(status, resp, verb, resource, c->all_ns ? "" : c->ns, name, err);
	} else if (resp) {
		*ret = cJSON_Parse(resp);
	}
	free(resp);
	return status;
}

// SPDX-License-Identifier: MIT
/* Credentials of the service account a pod runs as (kubeconfig.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/kubeconfig.h"
#include "kube/kubeconfig_impl.h"

#define SA_NAMESPACE_MAX 256

/* https://HOST:PORT from the variables the kubelet sets in every container. */
static int in_cluster_server(const char *host, const char *port, char **ret, struct rw_error *err)
{
	bool v6 = strchr(host, ':');
	char *end;
	unsigned long n;

	for (const char *s = host; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '-' || *s == ':'))
			return rw_error_set(
				err, EINVAL,
				"kubeconfig: KUBERNETES_SERVICE_HOST \"%.64s\" is not a host name or address",
				host);
	errno = 0;
	n = strtoul(port, &end, 10);
	if (errno || *end || port[0] < '0' || port[0] > '9' || !n || n > 65535)
		return rw_error_set(
			err, EINVAL,
			"kubeconfig: KUBERNETES_SERVICE_PORT \"%.16s\" is not a port number", port);
	if (asprintf(ret, "https://%s%s%s:%lu", v6 ? "[" : "", host, v6 ? "]" : "", n) < 0) {
		*ret = NULL;
		return rw_error_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

/* sa_dir/name, which must be readable. */
static int sa_file(const char *sa_dir, const char *name, char **ret, struct rw_error *err)
{
	int r;

	if (asprintf(ret, "%s/%s", sa_dir, name) < 0) {
		*ret = NULL;
		return rw_error_set(err, ENOMEM, "out of memory");
	}
	if (access(*ret, R_OK)) {
		r = errno;
		return rw_error_set(
			err, r,
			"kubeconfig: cannot read the service account's %s: %s: mount its token (automountServiceAccountToken: true)",
			*ret, strerror(r));
	}
	return 0;
}

/* The pod's namespace from sa_dir/namespace, or NULL when there is none. */
static int sa_namespace(const char *sa_dir, char **ret, struct rw_error *err)
{
	char *path = NULL, *text = NULL;
	size_t len = 0;
	int r;

	if (asprintf(&path, "%s/namespace", sa_dir) < 0)
		return rw_error_set(err, ENOMEM, "out of memory");
	r = kubeconfig__read_file(path, SA_NAMESPACE_MAX, &text, &len);
	if (r == -ENOENT) {
		r = 0;
		goto cleanup;
	}
	if (r) {
		rw_error_set(err, -r, "kubeconfig: failed to read %s: %s", path, strerror(-r));
		goto cleanup;
	}
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		len--;
	text[len] = '\0';
	if (!kubeconfig__is_namespace(text, len)) {
		r = rw_error_set(err, EINVAL,
				 "kubeconfig: %s holds \"%.64s\", not a namespace name", path,
				 text);
		goto cleanup;
	}
	*ret = text;
	text = NULL;
cleanup:
	free(text);
	free(path);
	return r;
}

int kubeconfig__in_cluster(const char *sa_dir, struct kube_creds *ret, struct rw_error *err)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	struct kube_creds c = {};
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!sa_dir)
		sa_dir = KUBE_SA_DIR;
	if (!host || !*host || !port || !*port)
		return rw_error_set(
			err, ENOENT,
			"kubeconfig: not in a pod (KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is not set): pass a kubeconfig");
	r = in_cluster_server(host, port, &c.server, err);
	if (!r)
		r = sa_file(sa_dir, "token", &c.token_file, err);
	if (!r)
		r = sa_file(sa_dir, "ca.crt", &c.ca_file, err);
	if (!r)
		r = sa_namespace(sa_dir, &c.namespace, err);
	if (r)
		kube_creds__free(&c);
	else
		*ret = c;
	return r;
}

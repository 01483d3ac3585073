/* SPDX-License-Identifier: MIT */
/*
 * The plugin's view of the API server: the user's kubeconfig (as kubectl
 * finds it), the namespace, JSON requests, and errors in words a kubectl
 * user acts on (403: the verb and resource to ask for; 404: what is missing).
 */
#ifndef RETWATCH_KCTL_H
#define RETWATCH_KCTL_H

#include <cjson/cJSON.h>

#include "kube/kube.h"
#include "base/rwerr.h"
#include "plugin/cli.h"

#define FPROBE_API "/apis/retwatch.io/v1alpha1"
#define FPROBE_RESOURCE "functionprobes.retwatch.io"
#define CFPROBE_RESOURCE "clusterfunctionprobes.retwatch.io"
#define PLUGIN_MANAGED_BY "kubectl-retwatch"

struct kctl {
	struct kube *k;
	char ns[64];
	bool all_ns;	       /* -A: cluster-wide requests, ClusterFunctionProbes */
	char kubeconfig[4096]; /* the file read, for messages */
};

/*
 * Reads the kubeconfig (--kubeconfig, else the first file of $KUBECONFIG,
 * else ~/.kube/config) and its context; the namespace is -n, else the
 * context's, else "default".
 */
int kctl__open(const struct plugin_cli *cli, struct kctl *ret, struct rw_error *err);
void kctl__close(struct kctl *c);

/*
 * One request with a JSON body (or NULL); *ret the parsed response (NULL
 * when none or not JSON). Returns the HTTP status (2xx: success) or -errno.
 * A status other than 2xx sets err by kctl__explain with verb, resource and
 * name.
 */
int kctl__call(struct kctl *c, const char *method, const char *path, const cJSON *body,
	       const char *verb, const char *resource, const char *name, cJSON **ret,
	       struct rw_error *err);

/* What an HTTP status of an API request means to the user, into err (ns
 * "": a cluster-wide request). */
void kctl__explain(int status, const char *body, const char *verb, const char *resource,
		   const char *ns, const char *name, struct rw_error *err);

#endif

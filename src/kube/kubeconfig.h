/* SPDX-License-Identifier: MIT */
/*
 * Credentials to reach the Kubernetes API server: from a kubeconfig file
 * (the layout kubectl reads) or from the service account a pod runs as.
 * A kubeconfig is the user's text: it is parsed with limits (KUBECONFIG_MAX
 * bytes, no YAML aliases, bounded nesting and node count), and a mistake
 * gets a message naming the field and what to change.
 */
#ifndef RETWATCH_KUBECONFIG_H
#define RETWATCH_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/rwerr.h"

#define KUBECONFIG_MAX (1024 * 1024)
#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/*
 * Where a PEM field and its file both are set, the PEM wins and the file is
 * NULL (as in kubectl). When token and token_file both are set, the file's
 * content wins (kubectl rereads it); the caller trims its trailing newline
 * and must refuse control characters in it (it goes into an HTTP header).
 */
/*
 * A user whose credentials an exec plugin gives (client.authentication.k8s.io):
 * the program kubectl would run, as the kubeconfig names it. Only callers
 * that ask (KUBECONFIG_EXEC: the kubectl plugin, run by the user) accept
 * one; the agent takes only what the file holds.
 */
#define KUBE_EXEC_MAX_ARGS 64
#define KUBE_EXEC_MAX_ENV 64
struct kube_exec {
	char *command;	   /* a path (relative ones made absolute), or a name looked up in PATH */
	char **argv;	   /* command, then args; NULL-terminated */
	char **env;	   /* NAME=VALUE added to the environment; NULL-terminated */
	char *api_version; /* client.authentication.k8s.io/v1 or v1beta1 */
	char *install_hint;
	char *server; /* the cluster's, for KUBERNETES_EXEC_INFO */
};

/* kubeconfig__parse_opts flags */
#define KUBECONFIG_EXEC (1U << 0) /* a user's exec plugin is accepted */

struct kube_creds {
	char *server; /* https://host:port[/path], no trailing slash */
	char *ca_pem; /* CA bundle (PEM bytes; a NUL follows, as after every *_pem), or NULL */
	size_t ca_pem_len;
	char *ca_file;	/* or an absolute file path, or NULL (system CAs) */
	char *cert_pem; /* client certificate */
	size_t cert_pem_len;
	char *cert_file;
	char *key_pem; /* client key: set with the certificate, never alone */
	size_t key_pem_len;
	char *key_file;
	char *token;	  /* bearer token (printable ASCII), or NULL */
	char *token_file; /* or a file to read it from (projected tokens rotate: reread it) */
	bool insecure; /* insecure-skip-tls-verify: refused by the agent, reported by the parser */
	char *namespace;	/* the context's namespace, or the service account's, or NULL */
	struct kube_exec *exec; /* with KUBECONFIG_EXEC: the plugin that gives the token */
};

/*
 * Parses kubeconfig text (not NUL-terminated); context NULL means
 * current-context. Relative file paths are resolved against base_dir (the
 * kubeconfig's directory; NULL: they are refused). Errors:
 * -ENOENT (no such context, cluster or user), -EOPNOTSUPP (an exec or
 * auth-provider user), -EFBIG (over KUBECONFIG_MAX), -EINVAL (anything else
 * wrong), -ENOMEM; err says which field and what to change. *ret is zeroed on
 * error, so kube_creds__free() is always safe.
 */
int kubeconfig__parse(const char *text, size_t len, const char *context, const char *base_dir,
		      struct kube_creds *ret, struct rw_error *err);
/* The same, with KUBECONFIG_* flags. */
int kubeconfig__parse_opts(const char *text, size_t len, const char *context, const char *base_dir,
			   unsigned int flags, struct kube_creds *ret, struct rw_error *err);
/* The same from a file; relative paths in it are relative to its directory. */
int kubeconfig__load(const char *path, const char *context, struct kube_creds *ret,
		     struct rw_error *err);
int kubeconfig__load_opts(const char *path, const char *context, unsigned int flags,
			  struct kube_creds *ret, struct rw_error *err);
/* Frees an exec plugin's description; NULL ok. */
void kube_exec__free(struct kube_exec *x);
/* A copy of x, or NULL (out of memory). */
struct kube_exec *kube_exec__dup(const struct kube_exec *x);
/*
 * In a pod: server from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT
 * (an IPv6 host in brackets), token_file, ca_file and namespace from sa_dir
 * (NULL: KUBE_SA_DIR). -ENOENT when not in a pod or no token is mounted.
 */
int kubeconfig__in_cluster(const char *sa_dir, struct kube_creds *ret, struct rw_error *err);
/* Frees the members (wiping the secrets first) and zeroes the struct; NULL ok. */
void kube_creds__free(struct kube_creds *c);

#endif

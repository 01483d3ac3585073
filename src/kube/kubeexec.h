/* SPDX-License-Identifier: MIT */
/*
 * Running a kubeconfig user's exec plugin as kubectl does
 * (client.authentication.k8s.io): the program, its arguments and its
 * environment as the kubeconfig names them, KUBERNETES_EXEC_INFO set, no
 * stdin (not interactive), its stderr the caller's. Its stdout is an
 * ExecCredential; the token in it is what the plugin lends: bounded, and
 * checked as a header value.
 */
#ifndef RETWATCH_KUBEEXEC_H
#define RETWATCH_KUBEEXEC_H

#include <stddef.h>
#include <time.h>

#include "kube/kubeconfig.h"
#include "base/rwerr.h"

/* The most bytes of ExecCredential read, and the seconds a plugin may take. */
#define KUBE_EXEC_MAX_OUTPUT (1024 * 1024)
#define KUBE_EXEC_TIMEOUT_S 60

/*
 * Runs x: 0 with *ret_token (to free) and *ret_expiry (0: none said), or an
 * error that says what the plugin did (not found, exit status, no token).
 */
int kube_exec__run(const struct kube_exec *x, char **ret_token, time_t *ret_expiry,
		   struct rw_error *err);
/* Parses an ExecCredential (exposed for tests and the fuzzer). */
int kube_exec__parse(const char *text, size_t len, const char *api_version, char **ret_token,
		     time_t *ret_expiry, struct rw_error *err);

#endif

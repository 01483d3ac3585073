// SPDX-License-Identifier: MIT
/*
 * Kubeconfig text, a user's file: parsed for the current context with a
 * base directory and for a named one without, and every success checked
 * for what the agent relies on (an https server, absolute paths, a
 * certificate only with its key, some credential, headers without control
 * characters), and, as the kubectl plugin reads it, an exec plugin's
 * command, arguments and apiVersion. Everything is freed, so leaks show.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "kube/kubeconfig.h"

static bool printable(const char *s)
{
	for (; s && *s; s++)
		if (*s <= ' ' || *s >= 0x7f)
			return false;
	return true;
}

static void check(const struct kube_creds *c)
{
	size_t n = strlen(c->server);

	if (strncmp(c->server, "https://", 8) || n <= 8 || c->server[n - 1] == '/' ||
	    !printable(c->server))
		__builtin_trap();
	if ((c->ca_file && c->ca_file[0] != '/') || (c->cert_file && c->cert_file[0] != '/') ||
	    (c->key_file && c->key_file[0] != '/') || (c->token_file && c->token_file[0] != '/'))
		__builtin_trap();
	if ((c->ca_pem && c->ca_file) || (c->cert_pem && c->cert_file) ||
	    (c->key_pem && c->key_file))
		__builtin_trap();
	if (!(c->cert_pem || c->cert_file) != !(c->key_pem || c->key_file))
		__builtin_trap();
	if (!c->token && !c->token_file && !c->cert_pem && !c->cert_file && !c->exec)
		__builtin_trap();
	/* an exec plugin: a command, the argv that runs it, a known apiVersion */
	if (c->exec &&
	    (!c->exec->command || !c->exec->command[0] || !c->exec->argv ||
	     strcmp(c->exec->argv[0], c->exec->command) || !c->exec->env || !c->exec->api_version ||
	     strncmp(c->exec->api_version, "client.authentication.k8s.io/v1", 31) ||
	     (strchr(c->exec->command, '/') && c->exec->command[0] != '/') || !c->exec->server ||
	     strcmp(c->exec->server, c->server)))
		__builtin_trap();
	if (!printable(c->token) || (c->namespace && !c->namespace[0]))
		__builtin_trap();
}

static void parse(const uint8_t *data, size_t size, const char *context, const char *base)
{
	static const struct kube_creds zero;
	struct kube_creds c;
	struct rw_error err = {};
	/* as the kubectl plugin reads it (exec users too; nothing is run) */
	int ret = kubeconfig__parse_opts((const char *)data, size, context, base,
					 size % 2 ? KUBECONFIG_EXEC : 0, &c, &err);

	if (!ret)
		check(&c);
	else if (!err.msg[0] || memcmp(&c, &zero, sizeof(c)) ||
		 (ret != -EINVAL && ret != -ENOENT && ret != -EOPNOTSUPP && ret != -EFBIG))
		__builtin_trap();
	kube_creds__free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	parse(data, size, NULL, "/home/u/.kube");
	parse(data, size, "dev", NULL);
	return 0;
}

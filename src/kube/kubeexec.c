// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kube/kubeexec.h"
#include "base/clock.h"

extern char **environ;

#define MAX_TOKEN 16384

void kube_exec__free(struct kube_exec *x)
{
	if (!x)
		return;
	free(x->command);
	for (size_t i = 0; x->argv && x->argv[i]; i++)
		free(x->argv[i]);
	free(x->argv);
	for (size_t i = 0; x->env && x->env[i]; i++)
		free(x->env[i]);
	free(x->env);
	free(x->api_version);
	free(x->install_hint);
	free(x->server);
	free(x);
}

static char **strv_dup(char *const *v)
{
	size_t n = 0;
	char **r;

	while (v && v[n])
		n++;
	r = calloc(n + 1, sizeof(*r));
	for (size_t i = 0; r && i < n; i++) {
		if (!(r[i] = strdup(v[i]))) {
			while (i--)
				free(r[i]);
			free(r);
			return NULL;
		}
	}
	return r;
}

struct kube_exec *kube_exec__dup(const struct kube_exec *x)
{
	struct kube_exec *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->command = strdup(x->command);
	r->argv = strv_dup(x->argv);
	r->env = strv_dup(x->env);
	r->api_version = strdup(x->api_version);
	r->install_hint = x->install_hint ? strdup(x->install_hint) : NULL;
	r->server = x->server ? strdup(x->server) : NULL;
	if (!r->command || !r->argv || !r->env || !r->api_version ||
	    (x->install_hint && !r->install_hint) || (x->server && !r->server)) {
		kube_exec__free(r);
		return NULL;
	}
	return r;
}

/* No space, control character or non-ASCII byte: the token goes into a header. */
static bool token_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > MAX_TOKEN)
		return false;
	for (; *s; s++)
		if (*s <= ' ' || *s >= 0x7f)
			return false;
	return true;
}

int kube_exec__parse(const char *text, size_t len, const char *api_version, char **ret_token,
		     time_t *ret_expiry, struct rw_error *err)
{
	cJSON *doc = cJSON_ParseWithLength(text, len), *status, *v;
	const char *kind, *version, *token;
	int e = 0;

	*ret_token = NULL;
	*ret_expiry = 0;
	if (!doc)
		return rw_error_set(err, EINVAL, "its output is not JSON (an ExecCredential)");
	kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "kind"));
	version = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "apiVersion"));
	status = cJSON_GetObjectItemCaseSensitive(doc, "status");
	token = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(status, "token"));
	if (!kind || strcmp(kind, "ExecCredential"))
		e = rw_error_set(err, EINVAL, "its output is not an ExecCredential (kind %.64s)",
				 kind ? kind : "unset");
	else if (!version || strcmp(version, api_version))
		e = rw_error_set(err, EINVAL,
				 "its ExecCredential's apiVersion is %.64s, the kubeconfig asks "
				 "for %.64s",
				 version ? version : "unset", api_version);
	else if (!token && cJSON_GetObjectItemCaseSensitive(status, "clientCertificateData"))
		e = rw_error_set(err, EOPNOTSUPP,
				 "it gives a client certificate, which retwatch does not take from "
				 "exec plugins: use a token");
	else if (!token)
		e = rw_error_set(err, EINVAL, "its ExecCredential has no status.token");
	else if (!token_ok(token))
		e = rw_error_set(err, EINVAL,
				 "its token is empty, over %d bytes, or holds a space or control "
				 "character",
				 MAX_TOKEN);
	if (!e) {
		v = cJSON_GetObjectItemCaseSensitive(status, "expirationTimestamp");
		if (cJSON_GetStringValue(v) &&
		    !(*ret_expiry = clock__parse_rfc3339(v->valuestring)))
			e = rw_error_set(err, EINVAL,
					 "its expirationTimestamp %.64s is not an RFC 3339 time",
					 v->valuestring);
	}
	if (!e && !(*ret_token = strdup(token)))
		e = rw_error_set(err, ENOMEM, "out of memory");
	cJSON_Delete(doc);
	return e;
}

/* Up to KUBE_EXEC_MAX_OUTPUT bytes of fd until EOF or the deadline. */
static int read_output(int fd, time_t deadline, char **ret, size_t *ret_len)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		time_t now = time(NULL);
		ssize_t n;
		int r;

		if (now >= deadline) {
			free(buf);
			return -ETIMEDOUT;
		}
		r = poll(&pfd, 1, (int)(deadline - now) * 1000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			free(buf);
			return r ? -errno : -ETIMEDOUT;
		}
		if (len + 4096 > cap) {
			char *more = cap * 2 > KUBE_EXEC_MAX_OUTPUT + 4096 ? NULL
									   : realloc(buf, cap * 2);

			if (!more) {
				free(buf);
				return -EFBIG;
			}
			buf = more;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

/* environ, then x's variables, then KUBERNETES_EXEC_INFO; to free (not the strings but info). */
static char **plugin_env(const struct kube_exec *x, char **info)
{
	size_t n = 0, m = 0, k = 0;
	char **env;

	while (environ && environ[n])
		n++;
	while (x->env && x->env[m])
		m++;
	env = calloc(n + m + 2, sizeof(*env));
	if (!env)
		return NULL;
	if (asprintf(info,
		     "KUBERNETES_EXEC_INFO={\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\","
		     "\"spec\":{\"interactive\":false}}",
		     x->api_version) < 0) {
		free(env);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "KUBERNETES_EXEC_INFO=", 21))
			env[k++] = environ[i];
	for (size_t i = 0; i < m; i++)
		env[k++] = x->env[i];
	env[k] = *info;
	return env;
}

int kube_exec__run(const struct kube_exec *x, char **ret_token, time_t *ret_expiry,
		   struct rw_error *err)
{
	posix_spawn_file_actions_t fa;
	char **env, *info = NULL, *out = NULL, hint[300] = "";
	int pipefd[2], status = 0, e;
	size_t len = 0;
	pid_t pid;

	*ret_token = NULL;
	*ret_expiry = 0;
	if (x->install_hint)
		snprintf(hint, sizeof(hint), " (%.280s)", x->install_hint);
	env = plugin_env(x, &info);
	if (!env)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (pipe2(pipefd, O_CLOEXEC)) {
		e = rw_error_set(err, errno, "cannot run %s: %s", x->command, strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	e = posix_spawnp(&pid, x->command, &fa, NULL, x->argv, env);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (e) {
		close(pipefd[0]);
		e = rw_error_set(err, e, "the kubeconfig's exec plugin %s cannot be run: %s%s",
				 x->command, strerror(e), hint);
		goto out;
	}
	e = read_output(pipefd[0], time(NULL) + KUBE_EXEC_TIMEOUT_S, &out, &len);
	close(pipefd[0]);
	if (e)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (e) {
		e = rw_error_set(err, -e, "the kubeconfig's exec plugin %s: %s", x->command,
				 e == -ETIMEDOUT ? "no answer within 60 s"
				 : e == -EFBIG	 ? "its output is over 1 MiB"
						 : strerror(-e));
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		e = rw_error_set(err, EACCES, "the kubeconfig's exec plugin %s failed (%s %d)%s",
				 x->command, WIFEXITED(status) ? "exit status" : "signal",
				 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), hint);
		goto out;
	}
	e = kube_exec__parse(out, len, x->api_version, ret_token, ret_expiry, err);
	if (e) {
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		rw_error_set(err, -e, "the kubeconfig's exec plugin %s: %s", x->command, msg);
	}
out:
	if (out) {
		explicit_bzero(out, len);
		free(out);
	}
	free(info);
	free(env);
	return e;
}

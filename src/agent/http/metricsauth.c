// SPDX-License-Identifier: MIT
#include "agent/http/metricsauth.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "base/clock.h"
#include "kube/kube.h"

/* Each review waits at most this long for the API server. */
#define REVIEW_TIMEOUT_MS 5000
#define TOKENREVIEWS "/apis/authentication.k8s.io/v1/tokenreviews"
#define SUBJECTACCESSREVIEWS "/apis/authorization.k8s.io/v1/subjectaccessreviews"

struct cached {
	char *token; /* NULL: a free slot */
	size_t len;
	uint64_t expires_ns;
	int code;
	char why[160];
};

struct metrics_auth {
	struct kube *k;
	pthread_mutex_t mu; /* guards cache */
	struct cached cache[METRICS_AUTH_CACHE];
	uint64_t reviews;	/* atomic */
	unsigned int reviewing; /* atomic: tokens under review now */
};

struct metrics_auth *metrics_auth__new(struct kube *k)
{
	struct metrics_auth *ma = calloc(1, sizeof(*ma));

	if (!ma)
		return NULL;
	ma->k = k;
	pthread_mutex_init(&ma->mu, NULL);
	return ma;
}

void metrics_auth__free(struct metrics_auth *ma)
{
	if (!ma)
		return;
	for (size_t i = 0; i < METRICS_AUTH_CACHE; i++)
		free(ma->cache[i].token);
	pthread_mutex_destroy(&ma->mu);
	free(ma);
}

uint64_t metrics_auth__reviews(const struct metrics_auth *ma)
{
	return __atomic_load_n(&ma->reviews, __ATOMIC_RELAXED);
}

/* The token of "Bearer TOKEN" into *ret_token and *ret_len; false when the
 * header is not that, or the token is too long or not printable ASCII. */
static bool bearer(const char *authorization, const char **ret_token, size_t *ret_len)
{
	const char *t;
	size_t n;

	if (!authorization || strncasecmp(authorization, "Bearer ", 7))
		return false;
	t = authorization + 7;
	while (*t == ' ')
		t++;
	n = strlen(t); /* libmicrohttpd bounds a request's headers (32 KiB) */
	while (n && t[n - 1] == ' ')
		n--;
	if (!n || n > METRICS_AUTH_MAX_TOKEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (t[i] <= ' ' || t[i] > '~')
			return false;
	*ret_token = t;
	*ret_len = n;
	return true;
}

/* A cached answer for token: its code (and why), or 0. */
static int cache_get(struct metrics_auth *ma, const char *token, size_t len, char *why,
		     size_t why_len)
{
	uint64_t now = clock__mono_ns();
	int code = 0;

	pthread_mutex_lock(&ma->mu);
	for (size_t i = 0; i < METRICS_AUTH_CACHE; i++) {
		struct cached *c = &ma->cache[i];

		if (c->token && c->len == len && c->expires_ns > now &&
		    !memcmp(c->token, token, len)) {
			code = c->code;
			snprintf(why, why_len, "%s", c->why);
			break;
		}
	}
	pthread_mutex_unlock(&ma->mu);
	return code;
}

/* Keeps an answer, in a free or expired slot, else in place of the one that
 * expires first. Out of memory: not kept. */
static void cache_put(struct metrics_auth *ma, const char *token, size_t len, int code,
		      const char *why)
{
	uint64_t now = clock__mono_ns();
	struct cached *slot = &ma->cache[0];
	char *copy = malloc(len);

	if (!copy)
		return;
	memcpy(copy, token, len);
	pthread_mutex_lock(&ma->mu);
	for (size_t i = 0; i < METRICS_AUTH_CACHE; i++) {
		struct cached *c = &ma->cache[i];

		if (!c->token || c->expires_ns <= now) {
			slot = c;
			break;
		}
		if (c->expires_ns < slot->expires_ns)
			slot = c;
	}
	free(slot->token);
	slot->token = copy;
	slot->len = len;
	slot->code = code;
	slot->expires_ns = now + (code == 200 ? METRICS_AUTH_ALLOWED_NS : METRICS_AUTH_DENIED_NS);
	snprintf(slot->why, sizeof(slot->why), "%s", why);
	pthread_mutex_unlock(&ma->mu);
}

/* POSTs body (taken over, freed) to path; the parsed response, or NULL with
 * why set (the API server's status or the transport's failure). */
static cJSON *review(struct metrics_auth *ma, const char *path, cJSON *body, char *why,
		     size_t why_len)
{
	char *text = cJSON_PrintUnformatted(body), *resp = NULL, msg[128];
	struct rw_error err = { "" };
	cJSON *doc = NULL;
	int code;

	cJSON_Delete(body);
	if (!text || !ma->k) {
		snprintf(why, why_len,
			 text ? "no API server to review the token" : "out of memory");
		free(text);
		return NULL;
	}
	__atomic_add_fetch(&ma->reviews, 1, __ATOMIC_RELAXED);
	code = kube__request(ma->k, "POST", path, "application/json", text, REVIEW_TIMEOUT_MS,
			     &resp, &err);
	free(text);
	if (code < 0)
		snprintf(why, why_len, "failed to reach the API server: %s", err.msg);
	else if (code != 201 && code != 200)
		snprintf(why, why_len, "POST %s: HTTP %d: %s", path, code,
			 kube__error_text(resp, msg, sizeof(msg)));
	else if (!(doc = cJSON_Parse(resp)))
		snprintf(why, why_len, "POST %s: the answer is not JSON", path);
	free(resp);
	return doc;
}

static cJSON *review_body(const char *kind, const char *api_version, cJSON **ret_spec)
{
	cJSON *body = cJSON_CreateObject();

	if (!body)
		return NULL;
	cJSON_AddStringToObject(body, "apiVersion", api_version);
	cJSON_AddStringToObject(body, "kind", kind);
	*ret_spec = cJSON_AddObjectToObject(body, "spec");
	return body;
}

/* TokenReview: the authenticated user (status.user, detached, to free), or
 * NULL with *ret_code 401 (not authenticated) or 503 (no answer). */
static cJSON *authenticate(struct metrics_auth *ma, const char *token, size_t len, int *ret_code,
			   char *why, size_t why_len)
{
	char *copy = strndup(token, len);
	cJSON *spec = NULL, *body = review_body("TokenReview", "authentication.k8s.io/v1", &spec);
	cJSON *doc, *status, *user = NULL;

	*ret_code = 503;
	if (!copy || !body || !spec || !cJSON_AddStringToObject(spec, "token", copy)) {
		free(copy);
		cJSON_Delete(body);
		snprintf(why, why_len, "out of memory");
		return NULL;
	}
	free(copy);
	doc = review(ma, TOKENREVIEWS, body, why, why_len);
	if (!doc)
		return NULL;
	status = cJSON_GetObjectItemCaseSensitive(doc, "status");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(status, "authenticated")) &&
	    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(status, "user"), "username"))) {
		user = cJSON_DetachItemFromObjectCaseSensitive(status, "user");
	} else {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(status, "error");

		*ret_code = 401;
		snprintf(why, why_len, "the bearer token is not valid%s%s",
			 cJSON_IsString(e) ? ": " : "", cJSON_IsString(e) ? e->valuestring : "");
	}
	cJSON_Delete(doc);
	return user;
}

/* SubjectAccessReview of user (a TokenReview's status.user) for get
 * /metrics: 200 or 403, or 503 without an answer. */
static int authorize(struct metrics_auth *ma, const cJSON *user, char *why, size_t why_len)
{
	static const char *const fields[] = { "uid", "groups", "extra" };
	const char *name = cJSON_GetObjectItemCaseSensitive(user, "username")->valuestring;
	cJSON *spec = NULL,
	      *body = review_body("SubjectAccessReview", "authorization.k8s.io/v1", &spec);
	cJSON *attrs, *doc, *status;
	int code = 403;

	if (!body || !spec || !cJSON_AddStringToObject(spec, "user", name))
		goto oom;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(user, fields[i]);

		if (f && !cJSON_AddItemToObject(spec, fields[i], cJSON_Duplicate(f, true)))
			goto oom;
	}
	attrs = cJSON_AddObjectToObject(spec, "nonResourceAttributes");
	if (!attrs || !cJSON_AddStringToObject(attrs, "path", "/metrics") ||
	    !cJSON_AddStringToObject(attrs, "verb", "get"))
		goto oom;
	doc = review(ma, SUBJECTACCESSREVIEWS, body, why, why_len);
	if (!doc)
		return 503;
	status = cJSON_GetObjectItemCaseSensitive(doc, "status");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(status, "allowed")))
		code = 200;
	else
		snprintf(why, why_len,
			 "user \"%.64s\" may not get /metrics: bind it to the ClusterRole that "
			 "grants get on the non-resource URL /metrics",
			 name);
	cJSON_Delete(doc);
	return code;
oom:
	cJSON_Delete(body);
	snprintf(why, why_len, "out of memory");
	return 503;
}

int metrics_auth__check(struct metrics_auth *ma, const char *authorization, char *why, size_t len)
{
	const char *token;
	size_t n;
	cJSON *user;
	int code;

	why[0] = '\0';
	if (!bearer(authorization, &token, &n)) {
		snprintf(why, len,
			 "/metrics needs an Authorization: Bearer header with a token the API "
			 "server accepts (at most %d bytes)",
			 METRICS_AUTH_MAX_TOKEN);
		return 401;
	}
	code = cache_get(ma, token, n, why, len);
	if (code)
		return code;
	/* clients with fresh tokens on every connection must not turn into as
	 * many requests to the API server */
	if (__atomic_add_fetch(&ma->reviewing, 1, __ATOMIC_RELAXED) > METRICS_AUTH_REVIEWING) {
		snprintf(why, len, "too many tokens under review at once: try again");
		code = 503;
		goto out;
	}
	user = authenticate(ma, token, n, &code, why, len);
	if (user) {
		code = authorize(ma, user, why, len);
		cJSON_Delete(user);
	}
	if (code != 503)
		cache_put(ma, token, n, code, why);
out:
	__atomic_sub_fetch(&ma->reviewing, 1, __ATOMIC_RELAXED);
	return code;
}

/* SPDX-License-Identifier: MIT */
/*
 * Who may read /metrics, as kube-rbac-proxy decides it: the request's bearer
 * token is checked with a TokenReview, and the user it names with a
 * SubjectAccessReview for the non-resource URL "/metrics", verb "get". The
 * answers are cached for a short while, in a table of bounded size. Called
 * from the HTTP server's connection threads: a review waits for the API
 * server on the thread of the request that needs it, never on the agent's
 * main loop or on the health listener.
 */
#ifndef RETWATCH_METRICSAUTH_H
#define RETWATCH_METRICSAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/rwerr.h"

struct kube;
struct metrics_auth;

/* A bearer token longer than this is refused without a review. */
#define METRICS_AUTH_MAX_TOKEN 8192
/* Tokens under review at once; more get 503 (not cached). */
#define METRICS_AUTH_REVIEWING 8
/* Answers kept at once; the oldest goes first. */
#define METRICS_AUTH_CACHE 128
/* How long an answer is kept: an allowed token, a refused one. */
#define METRICS_AUTH_ALLOWED_NS (60ULL * 1000000000ULL)
#define METRICS_AUTH_DENIED_NS (10ULL * 1000000000ULL)

/* Reviews through k (which must outlive it; NULL: a well-formed token gets
 * 503, for tests of the header's checks). NULL with errno on error. */
struct metrics_auth *metrics_auth__new(struct kube *k);
/* NULL is fine. */
void metrics_auth__free(struct metrics_auth *ma);

/*
 * Decides on a request whose Authorization header is authorization (NULL
 * when it has none). Returns the HTTP status to answer with: 200 when the
 * user may get /metrics, 401 without a valid bearer token, 403 when the
 * user may not, 503 when the API server did not answer (not cached). why
 * (len > 0) says why on anything but 200, for the response and the log.
 */
int metrics_auth__check(struct metrics_auth *ma, const char *authorization, char *why, size_t len);

/* Reviews sent to the API server so far (TokenReviews and SubjectAccessReviews). */
uint64_t metrics_auth__reviews(const struct metrics_auth *ma);

#endif

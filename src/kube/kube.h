/* SPDX-License-Identifier: MIT */
/*
 * A Kubernetes API client over libcurl: single requests and streamed
 * watches, TLS verified against the cluster's CA, bearer token (reread from
 * its file, as projected tokens rotate) or client certificate. Each call
 * uses its own connection state, so threads may share one struct kube.
 */
#ifndef RETWATCH_KUBE_H
#define RETWATCH_KUBE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "kube/kubeconfig.h"
#include "base/rwerr.h"

struct kube;

/* Copies what it needs from creds. NULL on error (insecure TLS is refused). */
struct kube *kube__new(const struct kube_creds *creds, struct rw_error *err);
void kube__free(struct kube *k);
const char *kube__server(const struct kube *k);

/*
 * One request to path (with its query). body and content_type may be NULL.
 * Returns the HTTP status, or -errno when no response came (err says why).
 * *ret_body gets the response body, NUL-terminated, to free (or NULL).
 */
int kube__request(struct kube *k, const char *method, const char *path, const char *content_type,
		  const char *body, long timeout_ms, char **ret_body, struct rw_error *err);

/*
 * kube__request's GET, asking for accept (an Accept header's value, such as
 * a PartialObjectMetadataList's: the objects' metadata alone).
 */
int kube__get_as(struct kube *k, const char *path, const char *accept, long timeout_ms,
		 char **ret_body, struct rw_error *err);

/* Called with each line of a streamed response; nonzero stops the stream. */
typedef int (*kube_line_fn)(const char *line, size_t len, void *ctx);

/*
 * Streams GET path line by line to fn while the status is 200. Stops when
 * the server ends the response, when *stop becomes nonzero, when nothing
 * arrives for idle_s seconds, or when fn asks. Returns the HTTP status (for
 * other statuses err holds the start of the body), -ECANCELED when stopped
 * by *stop or fn, or -errno on a transport failure.
 *
 * *stop is looked at when bytes come, and about once a second on a silent
 * stream; with wake_fd (an eventfd, or -1), the stream also stops as soon
 * as wake_fd becomes readable: whoever sets *stop writes it.
 */
int kube__stream(struct kube *k, const char *path, kube_line_fn fn, void *ctx,
		 const volatile sig_atomic_t *stop, int wake_fd, int idle_s, struct rw_error *err);

/*
 * The Retry-After of the calling thread's last response (429, 503), in
 * seconds, 0 without one: the wait the server asks for before the next
 * attempt (an HTTP date is turned into seconds from now).
 */
long kube__retry_after(void);
/*
 * Whether a 409's Status body says the write's uid precondition failed: the
 * object was deleted and made again under its name, so the write is for an
 * object that is gone. Any other 409 (a resourceVersion conflict) is worth
 * sending again against the newer object.
 */
bool kube__uid_conflict(const char *body);

/* Requests started so far (watches included), by every thread. */
unsigned long kube__requests(const struct kube *k);

/* Escapes s for a URL query value into buf (truncated to len). */
const char *kube__escape(const char *s, char *buf, size_t len);
/*
 * What an error response says, for a log line: the message of a
 * Kubernetes Status body (an admission policy's or a validation's words),
 * else the body's first bytes. Into buf (len > 0); returns buf.
 */
const char *kube__error_text(const char *body, char *buf, size_t len);

/*
 * The next retry's ceiling after a failure: min_ms at first (prev_ms 0),
 * then doubled, never above max_ms (nor below min_ms).
 */
int kube__backoff_next(int prev_ms, int min_ms, int max_ms);
/*
 * How long to wait under a ceiling of ceil_ms, with jitter: uniformly in
 * [ceil_ms / 2, ceil_ms], so agents failing together do not retry together.
 * *seed is the caller's rand_r state. 0 for a ceiling <= 0.
 */
int kube__backoff_jitter(int ceil_ms, unsigned int *seed);

#endif

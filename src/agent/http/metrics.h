/* SPDX-License-Identifier: MIT */
/*
 * The agent's HTTP endpoint (libmicrohttpd, its own threads): /metrics in
 * the Prometheus text format, /healthz and /readyz. The agent's state lives
 * on its main thread, so a scrape asks that thread for a fresh rendering
 * and waits for it; the HTTP threads never touch the agent's data. Also the
 * text format's writers, shared by every metric the agent exports.
 */
#ifndef RETWATCH_METRICS_H
#define RETWATCH_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/latency.h"
#include "base/rwerr.h"

struct metrics_auth;
struct metrics_server;
struct metrics_tls;

/*
 * Parses "HOST:PORT", ":PORT" (every address) or "[IPv6]:PORT" into
 * ret_host ("" for every address; at least 64 bytes) and ret_port. Hosts
 * are numeric addresses, never names. -EINVAL with a message otherwise.
 */
int metrics__parse_address(const char *s, char *ret_host, size_t host_len, uint16_t *ret_port,
			   struct rw_error *err);

/* Listens on address (as metrics__parse_address reads it; port 0 picks a
 * free one; NULL: no /metrics listener, only the health one), over TLS only
 * with tls's certificate (metricstls.h; taken over, even on error), over
 * plain HTTP when tls is NULL. NULL on error, with a message. */
struct metrics_server *metrics_server__start(const char *address, struct metrics_tls *tls,
					     struct rw_error *err);
/* The port it listens on. */
uint16_t metrics_server__port(const struct metrics_server *ms);
/* Whether /metrics is served over TLS (the health listener never is: the
 * kubelet's probes read only "ok" there). */
bool metrics_server__tls(const struct metrics_server *ms);
/*
 * Serves /healthz and /readyz on address too, from a listener of their own
 * that the clients of /metrics cannot use up: its own connection limits,
 * short timeouts, one thread that never waits. -errno with a message.
 */
int metrics_server__serve_health(struct metrics_server *ms, const char *address,
				 struct rw_error *err);
/* The port of the health listener (0: none). */
uint16_t metrics_server__health_port(const struct metrics_server *ms);
/* /metrics answers only requests that auth allows (metricsauth.h), from
 * now on; auth must outlive ms. NULL: everyone. */
void metrics_server__require_auth(struct metrics_server *ms, struct metrics_auth *auth);
/* Stops serving; NULL is fine. */
void metrics_server__stop(struct metrics_server *ms);

/*
 * Main thread, every turn of its loop: proves it is alive (/healthz fails
 * when it stopped turning) and says whether it is ready (why_not is served
 * by /readyz meanwhile).
 */
void metrics_server__beat(struct metrics_server *ms, bool ready, const char *why_not);
/* Main thread: whether a scrape waits for a rendering. */
bool metrics_server__wanted(struct metrics_server *ms);
/* Readable when a scrape began waiting: the main thread polls it to render
 * at once instead of at its next turn (metrics_server__wanted clears it). */
int metrics_server__fd(const struct metrics_server *ms);
/* Main thread: hands over a rendering (malloc'd; taken over, even on NULL). */
void metrics_server__publish(struct metrics_server *ms, char *text, size_t len);

/* ---- the text format ---- */

/* "# HELP" and "# TYPE" lines of a family. */
void prom_family(FILE *f, const char *name, const char *type, const char *help);
/*
 * Renders n label pairs kv[2i] = kv[2i+1] as `a="x",b="y"` (values escaped)
 * into buf. -ENOSPC when it does not fit.
 */
int prom_labels(char *buf, size_t len, const char *const *kv, size_t n);
/* One sample: name{labels} value; labels may be "" or NULL. */
void prom_sample(FILE *f, const char *name, const char *labels, uint64_t value);
/* One sample of ns as seconds, exactly ("0.000004051"). */
void prom_sample_seconds(FILE *f, const char *name, const char *labels, uint64_t ns);
/* One sample of a real number (%.6g). */
void prom_sample_real(FILE *f, const char *name, const char *labels, double value);
/*
 * The _bucket, _sum and _count samples of l's calls with a duration, in
 * seconds. The buckets' upper bounds are 2^k ns for k = 10 .. 36 (1.024 us
 * to 68.7 s), edges of the kernel's own buckets, so each count is exact: a
 * call counts below le when it took less than le.
 */
void prom_histogram(FILE *f, const char *name, const char *labels, const struct latency *l);

#endif

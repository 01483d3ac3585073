/* SPDX-License-Identifier: MIT */
/*
 * The certificate /metrics is served with over TLS: a scraper's bearer token
 * and every tenant's function names never cross the pod network in clear.
 * Either the administrator's (PEM files: a Secret the chart makes or one of
 * cert-manager's), or, without one, a self-signed certificate the agent makes
 * at start and holds in memory only (encrypted, but a scraper cannot tell it
 * from another's: it is for clusters that give none).
 */
#ifndef RETWATCH_METRICSTLS_H
#define RETWATCH_METRICSTLS_H

#include "base/rwerr.h"

struct metrics_tls {
	char *cert_pem; /* the chain, the server's certificate first */
	char *key_pem;
	char about[160]; /* for the log: whose it is, and until when */
};

/*
 * Reads a PEM certificate (chain) and its private key from cert_file and
 * key_file, and checks that they parse and belong together. -errno with a
 * message naming the file and what to change.
 */
int metrics_tls__load(const char *cert_file, const char *key_file, struct metrics_tls *ret,
		      struct rw_error *err);

/*
 * Makes a new ECDSA P-256 key and a certificate for it, signed by itself,
 * valid for a year from an hour ago, naming name (CN and DNS name). -errno
 * with a message.
 */
int metrics_tls__self_signed(const char *name, struct metrics_tls *ret, struct rw_error *err);

/* Frees what load or self_signed made (the key's memory wiped first). */
void metrics_tls__free(struct metrics_tls *t);

#endif

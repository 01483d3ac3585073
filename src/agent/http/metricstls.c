// SPDX-License-Identifier: MIT
#include "agent/http/metricstls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

/* A PEM file larger than this is no certificate or key of ours. */
#define PEM_MAX (1 << 20)
#define SELF_SIGNED_DAYS 365

/* The file's text, NUL-terminated; NULL with err set. */
static char *read_pem(const char *path, const char *what, struct rw_error *err)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t n;

	if (!f) {
		rw_error_set(err, errno, "failed to read the metrics TLS %s %s: %s", what, path,
			     strerror(errno));
		return NULL;
	}
	buf = malloc(PEM_MAX + 1);
	if (!buf) {
		rw_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	n = fread(buf, 1, PEM_MAX + 1, f);
	if (ferror(f) || n > PEM_MAX || !n) {
		rw_error_set(err, EINVAL, "the metrics TLS %s %s is %s", what, path,
			     ferror(f) ? "unreadable"
			     : n       ? "over 1 MiB: no PEM file"
				       : "empty");
		free(buf);
		buf = NULL;
		goto out;
	}
	buf[n] = '\0';
out:
	fclose(f);
	return buf;
}

/* "CN ..., until YYYY-MM-DD" of the PEM chain's first certificate, and
 * whether it has expired. */
static int describe(const char *cert_pem, char *about, size_t len, struct rw_error *err)
{
	gnutls_datum_t d = { (unsigned char *)cert_pem, (unsigned int)strlen(cert_pem) };
	gnutls_x509_crt_t crt;
	char cn[96] = "";
	size_t cn_len = sizeof(cn) - 1;
	struct tm tm;
	time_t until;
	int e;

	if (gnutls_x509_crt_init(&crt) < 0)
		return rw_error_set(err, ENOMEM, "out of memory");
	e = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM);
	if (e < 0) {
		gnutls_x509_crt_deinit(crt);
		return rw_error_set(err, EINVAL, "%s", gnutls_strerror(e));
	}
	if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &cn_len) < 0)
		snprintf(cn, sizeof(cn), "(no common name)");
	until = gnutls_x509_crt_get_expiration_time(crt);
	gnutls_x509_crt_deinit(crt);
	if (until == (time_t)-1 || !gmtime_r(&until, &tm))
		return rw_error_set(err, EINVAL, "it has no expiration time");
	snprintf(about, len, "CN %.80s, %s %04d-%02d-%02d", cn,
		 until < time(NULL) ? "EXPIRED on" : "valid until", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday);
	return 0;
}

int metrics_tls__load(const char *cert_file, const char *key_file, struct metrics_tls *ret,
		      struct rw_error *err)
{
	gnutls_certificate_credentials_t cred = NULL;
	struct rw_error why = { "" };
	gnutls_datum_t c, k;
	int e;

	memset(ret, 0, sizeof(*ret));
	if (!(ret->cert_pem = read_pem(cert_file, "certificate", err)) ||
	    !(ret->key_pem = read_pem(key_file, "key", err)))
		goto fail;
	c = (gnutls_datum_t){ (unsigned char *)ret->cert_pem, (unsigned int)strlen(ret->cert_pem) };
	k = (gnutls_datum_t){ (unsigned char *)ret->key_pem, (unsigned int)strlen(ret->key_pem) };
	if (gnutls_certificate_allocate_credentials(&cred) < 0) {
		rw_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	/* parses both, and refuses a key that is not the certificate's */
	e = gnutls_certificate_set_x509_key_mem2(cred, &c, &k, GNUTLS_X509_FMT_PEM, NULL, 0);
	gnutls_certificate_free_credentials(cred);
	if (e < 0) {
		rw_error_set(err, EINVAL,
			     "the metrics TLS certificate %s and key %s are not a PEM certificate "
			     "and its unencrypted private key: %s",
			     cert_file, key_file, gnutls_strerror(e));
		goto fail;
	}
	if (describe(ret->cert_pem, ret->about, sizeof(ret->about), &why)) {
		rw_error_set(err, EINVAL, "the metrics TLS certificate %s: %s", cert_file, why.msg);
		goto fail;
	}
	return 0;
fail:
	metrics_tls__free(ret);
	return -EINVAL;
}

/* The PEM of what export2 exports, as a malloc'd string. */
static char *pem_string(const gnutls_datum_t *d)
{
	char *s = malloc(d->size + 1);

	if (s) {
		memcpy(s, d->data, d->size);
		s[d->size] = '\0';
	}
	return s;
}

static int sign_self(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *name)
{
	unsigned char serial[16];
	time_t now = time(NULL);
	int e;

	e = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
	serial[0] &= 0x7f; /* a positive number */
	if (e >= 0)
		e = gnutls_x509_crt_set_version(crt, 3);
	if (e >= 0)
		e = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
	if (e >= 0)
		e = gnutls_x509_crt_set_activation_time(crt, now - 3600);
	if (e >= 0)
		e = gnutls_x509_crt_set_expiration_time(crt, now + SELF_SIGNED_DAYS * 86400L);
	if (e >= 0)
		e = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, name,
						  (unsigned int)strlen(name));
	if (e >= 0)
		e = gnutls_x509_crt_set_subject_alt_name(
			crt, GNUTLS_SAN_DNSNAME, name, (unsigned int)strlen(name), GNUTLS_FSAN_SET);
	if (e >= 0)
		e = gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
	if (e >= 0)
		e = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
	if (e >= 0)
		e = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
	if (e >= 0)
		e = gnutls_x509_crt_set_key(crt, key);
	if (e >= 0)
		e = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
	return e;
}

int metrics_tls__self_signed(const char *name, struct metrics_tls *ret, struct rw_error *err)
{
	gnutls_datum_t cert = { NULL, 0 }, pkey = { NULL, 0 };
	gnutls_x509_privkey_t key = NULL;
	gnutls_x509_crt_t crt = NULL;
	int e;

	memset(ret, 0, sizeof(*ret));
	e = gnutls_x509_privkey_init(&key);
	if (e >= 0)
		e = gnutls_x509_privkey_generate(
			key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
	if (e >= 0)
		e = gnutls_x509_crt_init(&crt);
	if (e >= 0)
		e = sign_self(crt, key, name);
	if (e >= 0)
		e = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cert);
	if (e >= 0)
		e = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &pkey);
	if (e >= 0 && (!(ret->cert_pem = pem_string(&cert)) || !(ret->key_pem = pem_string(&pkey))))
		e = GNUTLS_E_MEMORY_ERROR;
	if (e < 0)
		rw_error_set(err, EINVAL,
			     "failed to make a self-signed certificate for /metrics: %s",
			     gnutls_strerror(e));
	else if (describe(ret->cert_pem, ret->about, sizeof(ret->about), err))
		e = -1;
	if (pkey.data) {
		explicit_bzero(pkey.data, pkey.size);
		gnutls_free(pkey.data);
	}
	gnutls_free(cert.data);
	if (crt)
		gnutls_x509_crt_deinit(crt);
	if (key)
		gnutls_x509_privkey_deinit(key);
	if (e < 0) {
		metrics_tls__free(ret);
		return -EINVAL;
	}
	return 0;
}

void metrics_tls__free(struct metrics_tls *t)
{
	if (t->key_pem) {
		explicit_bzero(t->key_pem, strlen(t->key_pem));
		free(t->key_pem);
	}
	free(t->cert_pem);
	memset(t, 0, sizeof(*t));
}

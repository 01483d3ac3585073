// SPDX-License-Identifier: MIT
/* /metrics over TLS: the agent's own certificate, the administrator's, and
 * what a plain request gets. Over loopback, with libcurl as the scraper. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "agent/http/metrics.h"
#include "agent/http/metricstls.h"
#include "test.h"

static size_t discard(char *data, size_t size, size_t n, void *ctx)
{
	(void)data;
	(void)ctx;
	return size * n;
}

/*
 * GET path on the port over scheme; with ca (PEM), verified against it as
 * the host "retwatch-agent", else unverified. The status, or -1 when the
 * request failed (curl's error in why).
 */
static long get(const char *scheme, uint16_t port, const char *ca, char *why, size_t len)
{
	CURL *c = curl_easy_init();
	struct curl_slist *resolve = NULL;
	struct curl_blob blob = { (void *)ca, ca ? strlen(ca) : 0, CURL_BLOB_COPY };
	char url[128], entry[64];
	long code = -1;
	CURLcode e;

	snprintf(url, sizeof(url), "%s://%s:%u/readyz", scheme, ca ? "retwatch-agent" : "127.0.0.1",
		 port);
	snprintf(entry, sizeof(entry), "retwatch-agent:%u:127.0.0.1", port);
	resolve = curl_slist_append(NULL, entry);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_RESOLVE, resolve);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (ca)
		curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, ca ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, ca ? 2L : 0L);
	e = curl_easy_perform(c);
	if (e == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	snprintf(why, len, "%s", curl_easy_strerror(e));
	curl_easy_cleanup(c);
	curl_slist_free_all(resolve);
	return code;
}

TEST(metrics_tls_self_signed_serves_only_tls)
{
	struct rw_error err = { "" };
	struct metrics_tls tls;
	struct metrics_server *ms;
	char *ca, why[256];
	uint16_t port;
	bool ok;

	if (!CHECK(!metrics_tls__self_signed("retwatch-agent", &tls, &err), "%s", err.msg))
		return false;
	ok = ASSERT_STRCONTAINS(tls.about, "CN retwatch-agent, valid until ") &&
	     ASSERT_STRCONTAINS(tls.cert_pem, "-----BEGIN CERTIFICATE-----") &&
	     ASSERT_STRCONTAINS(tls.key_pem, "PRIVATE KEY-----");
	ca = strdup(tls.cert_pem);
	ms = metrics_server__start("127.0.0.1:0", &tls, &err);
	if (!CHECK(ms && ca, "%s", err.msg)) {
		free(ca);
		return false;
	}
	ok = ok && ASSERT_TRUE(tls.cert_pem == NULL) && ASSERT_TRUE(metrics_server__tls(ms));
	port = metrics_server__port(ms);
	metrics_server__beat(ms, true, NULL);
	/* the certificate verifies as its own authority, for its name */
	ok = ok && CHECK(get("https", port, ca, why, sizeof(why)) == 200, "%s", why) &&
	     CHECK(get("https", port, NULL, why, sizeof(why)) == 200, "%s", why);
	/* a plain request gets no answer at all */
	ok = ok && ASSERT_EQ(get("http", port, NULL, why, sizeof(why)), -1);
	metrics_server__stop(ms);
	free(ca);
	return ok;
}

static bool write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	bool ok = f && fputs(text, f) >= 0;

	if (f && fclose(f))
		ok = false;
	return ok;
}

TEST(metrics_tls_load_checks_the_pair)
{
	struct rw_error err = { "" };
	struct metrics_tls a, b, got;
	char dir[] = "/tmp/rw-tls-XXXXXX", cert[64], key[64], other[64], empty[64];
	bool ok;

	if (!CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno)))
		return false;
	snprintf(cert, sizeof(cert), "%s/tls.crt", dir);
	snprintf(key, sizeof(key), "%s/tls.key", dir);
	snprintf(other, sizeof(other), "%s/other.key", dir);
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	ok = CHECK(!metrics_tls__self_signed("a.example", &a, &err), "%s", err.msg);
	ok = ok && CHECK(!metrics_tls__self_signed("b.example", &b, &err), "%s", err.msg);
	ok = ok && ASSERT_TRUE(write_file(cert, a.cert_pem)) &&
	     ASSERT_TRUE(write_file(key, a.key_pem)) && ASSERT_TRUE(write_file(other, b.key_pem)) &&
	     ASSERT_TRUE(write_file(empty, ""));
	/* the pair */
	ok = ok && CHECK(!metrics_tls__load(cert, key, &got, &err), "%s", err.msg) &&
	     ASSERT_STRCONTAINS(got.about, "CN a.example") &&
	     ASSERT_STREQ(got.cert_pem, a.cert_pem);
	metrics_tls__free(&got);
	/* another certificate's key, the two swapped, an empty file, no file:
	 * refused, naming the files */
	ok = ok && ASSERT_EQ(metrics_tls__load(cert, other, &got, &err), -EINVAL) &&
	     ASSERT_STRCONTAINS(err.msg, other) && ASSERT_TRUE(got.cert_pem == NULL);
	ok = ok && ASSERT_EQ(metrics_tls__load(key, cert, &got, &err), -EINVAL) &&
	     ASSERT_STRCONTAINS(err.msg, "not a PEM certificate and its unencrypted private key");
	ok = ok && ASSERT_EQ(metrics_tls__load(empty, key, &got, &err), -EINVAL) &&
	     ASSERT_STRCONTAINS(err.msg, "is empty");
	ok = ok &&
	     ASSERT_EQ(metrics_tls__load(cert, "/nonexistent/tls.key", &got, &err), -EINVAL) &&
	     ASSERT_STRCONTAINS(err.msg, "/nonexistent/tls.key: No such file");
	metrics_tls__free(&a);
	metrics_tls__free(&b);
	unlink(cert);
	unlink(key);
	unlink(other);
	unlink(empty);
	rmdir(dir);
	return ok;
}

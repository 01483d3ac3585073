// SPDX-License-Identifier: MIT
/* The Prometheus text format's writers and the HTTP endpoint, over loopback. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "agent/http/metrics.h"
#include "agent/http/metricsauth.h"
#include "test.h"

TEST(metrics_parse_address)
{
	static const char *const bad[] = {
		"9431", ":",	    "host:9431", "1.2.3.4:", "1.2.3.4:x",  ":65536",
		":-1",	"::1:9431", "[::1]",	 "[nope]:1", "1.2.3.4:+5", "",
	};
	struct rw_error err = { "" };
	char host[64];
	uint16_t port;
	bool ok = true;

	ok &= ASSERT_OK(metrics__parse_address(":9431", host, sizeof(host), &port, &err)) &&
	      ASSERT_STREQ(host, "") && ASSERT_EQ(port, 9431);
	ok &= ASSERT_OK(metrics__parse_address("127.0.0.1:0", host, sizeof(host), &port, &err)) &&
	      ASSERT_STREQ(host, "127.0.0.1") && ASSERT_EQ(port, 0);
	ok &= ASSERT_OK(metrics__parse_address("[::1]:80", host, sizeof(host), &port, &err)) &&
	      ASSERT_STREQ(host, "::1") && ASSERT_EQ(port, 80);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = '\0';
		ok &= CHECK(metrics__parse_address(bad[i], host, sizeof(host), &port, &err) ==
				    -EINVAL,
			    "\"%s\" accepted", bad[i]) &&
		      ASSERT_STRCONTAINS(err.msg, "127.0.0.1:9431");
	}
	return ok;
}

TEST(metrics_labels_escape)
{
	const char *kv[] = { "pod", "a\"b\\c\nd", "function", "main.(*T).Run" };
	char buf[128], tiny[12];

	return ASSERT_OK(prom_labels(buf, sizeof(buf), kv, 2)) &&
	       ASSERT_STREQ(buf, "pod=\"a\\\"b\\\\c\\nd\",function=\"main.(*T).Run\"") &&
	       ASSERT_EQ(prom_labels(tiny, sizeof(tiny), kv, 2), -ENOSPC);
}

TEST(metrics_labels_keep_utf8_replace_the_rest)
{
	/* é and 😀 stay; a stray byte, an overlong '/', a surrogate and a cut
	 * sequence become U+FFFD each byte */
	const char *kv[] = { "function",
			     "caf\xc3\xa9 \xf0\x9f\x98\x80 \xff \xc0\xaf \xed\xa0\x80 \xe2\x82" };
	char buf[256];

	return ASSERT_OK(prom_labels(buf, sizeof(buf), kv, 1)) &&
	       ASSERT_STREQ(buf, "function=\"caf\xc3\xa9 \xf0\x9f\x98\x80 \xef\xbf\xbd "
				 "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
				 "\xef\xbf\xbd\xef\xbf\xbd\"");
}

/* The count of one bucket line of text, or -1. */
static long long bucket(const char *text, const char *le)
{
	char needle[96];
	const char *at;

	snprintf(needle, sizeof(needle), "le=\"%s\"} ", le);
	at = strstr(text, needle);
	return at ? strtoll(at + strlen(needle), NULL, 10) : -1;
}

TEST(metrics_histogram_exact_edges)
{
	struct latency l = { 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	bool ok;

	/* 1023 ns is under 2^10 ns, 1024 ns is not; 3 ms and 100 s fall far above */
	latency__record(&l, 1023);
	latency__record(&l, 1024);
	latency__record(&l, 3000000);
	latency__record(&l, 100000000000ULL);
	prom_histogram(f, "x_seconds", "a=\"b\"", &l);
	fclose(f);
	ok = ASSERT_EQ(bucket(text, "0.000001024"), 1) &&
	     ASSERT_EQ(bucket(text, "0.000002048"), 2) &&
	     ASSERT_EQ(bucket(text, "0.002097152"), 2) &&
	     ASSERT_EQ(bucket(text, "0.004194304"), 3) &&
	     ASSERT_EQ(bucket(text, "68.719476736"), 3) && ASSERT_EQ(bucket(text, "+Inf"), 4) &&
	     ASSERT_STRCONTAINS(text, "x_seconds_bucket{a=\"b\",le=\"0.000001024\"} 1\n") &&
	     ASSERT_STRCONTAINS(text, "x_seconds_sum{a=\"b\"} 100.003002047\n") &&
	     ASSERT_STRCONTAINS(text, "x_seconds_count{a=\"b\"} 4\n");
	free(text);
	return ok;
}

/* ---- the endpoint ---- */

struct body {
	char buf[8192];
	size_t len;
};

static size_t collect(char *data, size_t size, size_t n, void *ctx)
{
	struct body *b = ctx;
	size_t take = size * n;

	if (take > sizeof(b->buf) - 1 - b->len)
		take = sizeof(b->buf) - 1 - b->len;
	memcpy(b->buf + b->len, data, take);
	b->len += take;
	b->buf[b->len] = '\0';
	return size * n;
}

static long get(uint16_t port, const char *path, const char *method, struct body *b)
{
	CURL *c = curl_easy_init();
	char url[128];
	long code = -1;

	b->len = 0;
	b->buf[0] = '\0';
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	return code;
}

/* Plays the agent's main loop: renders whenever a scrape asks. */
struct loop {
	struct metrics_server *ms;
	volatile int stop;
	int renders;
};

static void *main_loop(void *arg)
{
	struct loop *lp = arg;

	while (!lp->stop) {
		metrics_server__beat(lp->ms, true, NULL);
		if (metrics_server__wanted(lp->ms)) {
			char *text = NULL;
			int n = asprintf(&text, "# TYPE t counter\nt_total %d\n", ++lp->renders);

			metrics_server__publish(lp->ms, text, n > 0 ? (size_t)n : 0);
		}
		usleep(1000);
	}
	return NULL;
}

TEST(metrics_endpoint)
{
	struct rw_error err = { "" };
	struct metrics_server *ms = metrics_server__start("127.0.0.1:0", NULL, &err);
	struct loop lp = { .ms = ms };
	struct body b;
	pthread_t th;
	bool ok;

	if (!CHECK(ms, "%s", err.msg))
		return false;
	/* before the main loop turns: not alive, not ready */
	ok = ASSERT_EQ(get(metrics_server__port(ms), "/healthz", "GET", &b), 503) &&
	     ASSERT_STRCONTAINS(b.buf, "not running yet");
	metrics_server__beat(ms, false, "waiting for the lists");
	ok = ok && ASSERT_EQ(get(metrics_server__port(ms), "/healthz", "GET", &b), 200) &&
	     ASSERT_EQ(get(metrics_server__port(ms), "/readyz", "GET", &b), 503) &&
	     ASSERT_STRCONTAINS(b.buf, "waiting for the lists");
	pthread_create(&th, NULL, main_loop, &lp);
	/* each scrape gets a rendering made after it asked */
	ok = ok && ASSERT_EQ(get(metrics_server__port(ms), "/metrics", "GET", &b), 200) &&
	     ASSERT_STRCONTAINS(b.buf, "t_total 1\n") &&
	     ASSERT_EQ(get(metrics_server__port(ms), "/metrics", "GET", &b), 200) &&
	     ASSERT_STRCONTAINS(b.buf, "t_total 2\n") &&
	     ASSERT_EQ(get(metrics_server__port(ms), "/readyz", "GET", &b), 200) &&
	     ASSERT_EQ(get(metrics_server__port(ms), "/nope", "GET", &b), 404) &&
	     ASSERT_EQ(get(metrics_server__port(ms), "/metrics", "DELETE", &b), 405);
	lp.stop = 1;
	pthread_join(th, NULL);
	/* nobody renders: the scrape gives up with 503 instead of hanging */
	ok = ok && ASSERT_EQ(get(metrics_server__port(ms), "/metrics", "GET", &b), 503);
	metrics_server__stop(ms);
	return ok;
}

TEST(metrics_port_in_use)
{
	struct rw_error err = { "" };
	struct metrics_server *a = metrics_server__start("127.0.0.1:0", NULL, &err), *b;
	char addr[32];
	bool ok;

	if (!CHECK(a, "%s", err.msg))
		return false;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", metrics_server__port(a));
	b = metrics_server__start(addr, NULL, &err);
	ok = ASSERT_TRUE(b == NULL) && ASSERT_STRCONTAINS(err.msg, "--metrics-address");
	metrics_server__stop(b);
	metrics_server__stop(a);
	return ok;
}

TEST(metrics_every_address_serves_ipv4)
{
	struct rw_error err = { "" };
	struct metrics_server *ms = metrics_server__start(":0", NULL, &err);
	struct body b;
	bool ok;

	if (!CHECK(ms, "%s", err.msg))
		return false;
	metrics_server__beat(ms, true, NULL);
	ok = ASSERT_NEQ(metrics_server__port(ms), 0) &&
	     ASSERT_EQ(get(metrics_server__port(ms), "/readyz", "GET", &b), 200);
	metrics_server__stop(ms);
	return ok;
}

struct scrape {
	uint16_t port;
	struct body b;
	long code;
};

static void *scrape(void *arg)
{
	struct scrape *sc = arg;

	sc->code = get(sc->port, "/metrics", "GET", &sc->b);
	return NULL;
}

#define FILLED (FD_SETSIZE + 16)

/* Opens descriptors until the highest is FILLED: what the server accepts
 * next is numbered past what select() takes. *ret_n are open in fds. */
static bool fill_descriptors(int *fds, size_t *ret_n)
{
	int fd = -1;

	*ret_n = 0;
	while (fd < FILLED && *ret_n <= FILLED) {
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return CHECK(false, "open: %s", strerror(errno));
		fds[(*ret_n)++] = fd;
	}
	return ASSERT_TRUE(fd >= FILLED);
}

/*
 * An agent holding thousands of BPF links: every socket the server accepts
 * is numbered past FD_SETSIZE. Each is served, and /healthz answers while a
 * scrape waits for the main loop.
 */
TEST(metrics_serves_descriptors_past_fd_setsize)
{
	struct rw_error err = { "" };
	struct metrics_server *ms = NULL;
	struct scrape sc = { .code = -1 };
	int *fds = calloc(FILLED + 1, sizeof(*fds));
	struct rlimit was, rl;
	struct body b;
	pthread_t th;
	bool ok = false, started = false;
	size_t n = 0;

	if (getrlimit(RLIMIT_NOFILE, &was) || was.rlim_max < FILLED + 256) {
		test__skip("the open files hard limit is under FD_SETSIZE + 272");
		free(fds);
		return true;
	}
	rl = was;
	if (rl.rlim_cur < FILLED + 256)
		rl.rlim_cur = FILLED + 256;
	if (!ASSERT_TRUE(fds) || !ASSERT_OK(setrlimit(RLIMIT_NOFILE, &rl)))
		goto cleanup;
	ms = metrics_server__start("127.0.0.1:0", NULL, &err);
	if (!CHECK(ms, "%s", err.msg) || !fill_descriptors(fds, &n))
		goto cleanup;
	metrics_server__beat(ms, true, NULL);
	sc.port = metrics_server__port(ms);
	if (!ASSERT_OK(pthread_create(&th, NULL, scrape, &sc)))
		goto cleanup;
	started = true;
	/* the scrape waits for a rendering: /healthz does not wait behind it */
	for (int i = 0; i < 2000 && !metrics_server__wanted(ms); i++)
		usleep(1000);
	ok = ASSERT_EQ(get(sc.port, "/healthz", "GET", &b), 200) && ASSERT_STREQ(b.buf, "ok\n") &&
	     ASSERT_EQ(get(sc.port, "/readyz", "GET", &b), 200);
	metrics_server__publish(ms, strdup("t_total 1\n"), 10);
	pthread_join(th, NULL);
	started = false;
	ok = ok && ASSERT_EQ(sc.code, 200) && ASSERT_STREQ(sc.b.buf, "t_total 1\n");
cleanup:
	metrics_server__stop(ms); /* a waiting scrape gets its 503 now */
	if (started)
		pthread_join(th, NULL);
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	setrlimit(RLIMIT_NOFILE, &was);
	return ok;
}

/* ---- issue 25: the health listener, the bearer header's checks ---- */

/* A connection to port from source that began a request and says no more;
 * -1 when the server refused it. */
static int hold(const char *source, uint16_t port)
{
	struct sockaddr_in from = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, source, &from.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	to.sin_port = htons(port);
	if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof(from)) ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

TEST(metrics_health_listener_outlasts_held_connections)
{
	struct rw_error err = { "" };
	struct metrics_server *ms = metrics_server__start("127.0.0.1:0", NULL, &err);
	int fds[64];
	size_t n = 0;
	struct body b;
	bool ok = false;
	char source[32];

	if (!CHECK(ms, "%s", err.msg))
		return false;
	if (!CHECK(!metrics_server__serve_health(ms, "127.0.0.1:0", &err), "%s", err.msg))
		goto cleanup;
	metrics_server__beat(ms, true, NULL);
	/* every connection of the metrics port (8 from each of four addresses),
	 * and 16 of the health port from one address */
	for (int i = 0; i < 32; i++) {
		snprintf(source, sizeof(source), "127.0.0.%d", 2 + i / 8);
		fds[n] = hold(source, metrics_server__port(ms));
		n += fds[n] >= 0;
	}
	for (int i = 0; i < 16; i++) {
		fds[n] = hold("127.0.0.6", metrics_server__health_port(ms));
		n += fds[n] >= 0;
	}
	usleep(200 * 1000);
	ok = ASSERT_TRUE(n >= 32) &&
	     ASSERT_EQ(get(metrics_server__health_port(ms), "/healthz", "GET", &b), 200) &&
	     ASSERT_STREQ(b.buf, "ok\n") &&
	     ASSERT_EQ(get(metrics_server__health_port(ms), "/readyz", "GET", &b), 200) &&
	     ASSERT_EQ(get(metrics_server__health_port(ms), "/metrics", "GET", &b), 404) &&
	     ASSERT_EQ(get(metrics_server__health_port(ms), "/healthz", "POST", &b), 405);
cleanup:
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	metrics_server__stop(ms);
	return ok;
}

TEST(metrics_auth_refuses_a_malformed_header_unreviewed)
{
	static const char *const bad[] = {
		NULL,	      "",	    "Basic dXNlcjpwdw==", "Bearer",	 "Bearer ",
		"Bearer    ", "Bearer a b", "Bearer a\tb",	  "Bearer \x7f", "Bearer\ttoken",
	};
	struct metrics_auth *ma = metrics_auth__new(NULL);
	char why[256], *huge = malloc(METRICS_AUTH_MAX_TOKEN + 16);
	bool ok = ASSERT_TRUE(ma) && ASSERT_TRUE(huge);

	for (size_t i = 0; ok && i < sizeof(bad) / sizeof(bad[0]); i++)
		ok = CHECK(metrics_auth__check(ma, bad[i], why, sizeof(why)) == 401, "header %zu",
			   i) &&
		     ASSERT_STRCONTAINS(why, "Bearer");
	if (ok) {
		memcpy(huge, "Bearer ", 7);
		memset(huge + 7, 'x', METRICS_AUTH_MAX_TOKEN + 1);
		huge[7 + METRICS_AUTH_MAX_TOKEN + 1] = '\0';
		ok = ASSERT_EQ(metrics_auth__check(ma, huge, why, sizeof(why)), 401);
		/* a token of the longest length and a second word: not its prefix */
		memcpy(huge + 7 + METRICS_AUTH_MAX_TOKEN, " y", 3);
		ok = ok && ASSERT_EQ(metrics_auth__check(ma, huge, why, sizeof(why)), 401);
		/* one byte shorter is well formed: reviewed (here: nobody to ask) */
		huge[7 + METRICS_AUTH_MAX_TOKEN] = '\0';
		ok = ok && ASSERT_EQ(metrics_auth__reviews(ma), 0) &&
		     ASSERT_EQ(metrics_auth__check(ma, huge, why, sizeof(why)), 503) &&
		     ASSERT_EQ(metrics_auth__check(ma, "bearer abc.def", why, sizeof(why)), 503);
	}
	free(huge);
	metrics_auth__free(ma);
	return ok;
}

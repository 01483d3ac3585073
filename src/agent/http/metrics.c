// SPDX-License-Identifier: MIT
#include "agent/http/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "base/clock.h"
#include "base/log.h"
#include "agent/http/metricsauth.h"
#include "agent/http/metricstls.h"

/* A scrape waits this long for the main thread, which turns every 100 ms. */
#define RENDER_WAIT_S 5
/* /healthz fails once the main thread has not turned for this long. */
#define STALL_NS (30ULL * 1000000000ULL)
/* Connections at once, and from one address: a client that holds many
 * leaves the kubelet's probes and Prometheus room. */
#define MAX_CONNECTIONS 32
#define MAX_CONNECTIONS_PER_IP 8
#define CONNECTION_TIMEOUT_S 10
/* The health listener answers from one thread that never waits: a client
 * costs it a socket, not a thread, and is dropped after HEALTH_TIMEOUT_S
 * (the kubelet's probe takes milliseconds). Its own limits: the metrics
 * port's clients cannot use them up. */
#define HEALTH_CONNECTIONS 64
#define HEALTH_CONNECTIONS_PER_IP 4
#define HEALTH_TIMEOUT_S 3
/* The endpoint's own messages (a refused connection, a timed-out one): one
 * line per this long, with a count of those left out. */
#define LOG_EVERY_NS (10ULL * 1000000000ULL)
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_server {
	struct MHD_Daemon *d, *health;
	uint16_t port, health_port;
	struct metrics_auth *auth; /* NULL: /metrics is open */
	struct metrics_tls tls;	   /* cert_pem NULL: plain HTTP */
	pthread_mutex_t log_mu;	   /* guards the two below */
	uint64_t logged_ns, log_skipped;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a rendering was published */
	/* scrapes ask for rendering number `asked`; `rendered` is the newest */
	uint64_t asked, rendered;
	int wake_fd; /* written when a scrape asks */
	char *text;
	size_t len;
	uint64_t beat_ns;
	bool ready;
	char why_not[256];
};

int metrics__parse_address(const char *s, char *ret_host, size_t host_len, uint16_t *ret_port,
			   struct rw_error *err)
{
	const char *colon = strrchr(s, ':'), *host = s;
	size_t hlen = colon ? (size_t)(colon - s) : 0;
	struct in6_addr a6;
	struct in_addr a4;
	char *end;
	unsigned long port;

	if (!colon || !colon[1])
		goto bad;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port > 65535 || colon[1] == '-' || colon[1] == '+')
		goto bad;
	if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
		host++;
		hlen -= 2;
	} else if (memchr(host, ':', hlen)) {
		goto bad; /* an IPv6 address needs its brackets */
	}
	if (hlen >= host_len || hlen >= INET6_ADDRSTRLEN)
		goto bad;
	memcpy(ret_host, host, hlen);
	ret_host[hlen] = '\0';
	if (hlen && inet_pton(AF_INET, ret_host, &a4) != 1 &&
	    inet_pton(AF_INET6, ret_host, &a6) != 1)
		goto bad;
	*ret_port = (uint16_t)port;
	return 0;
bad:
	return rw_error_set(err, EINVAL,
			    "metrics address \"%s\" is not HOST:PORT: give a numeric address and a "
			    "port, such as :9431, 127.0.0.1:9431 or [::1]:9431",
			    s);
}

/* ---- serving ---- */

static enum MHD_Result respond(struct MHD_Connection *c, unsigned int code, char *body, size_t len,
			       const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned int code, const char *text)
{
	char *body = NULL;
	int n = asprintf(&body, "%s\n", text);

	if (n < 0)
		return MHD_NO;
	return respond(c, code, body, (size_t)n, "text/plain; charset=utf-8");
}

/* HTTP thread: asks the main thread for a rendering and waits for it. */
static enum MHD_Result serve_metrics(struct metrics_server *ms, struct MHD_Connection *c)
{
	struct timespec deadline;
	uint64_t want;
	char *copy = NULL, tail[256];
	size_t len = 0;
	int e = 0;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += RENDER_WAIT_S;
	pthread_mutex_lock(&ms->mu);
	want = ++ms->asked;
	if (eventfd_write(ms->wake_fd, 1))
		log_warn("metrics endpoint: failed to wake the main loop: %s", strerror(errno));
	while (ms->rendered < want && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&ms->cv, &ms->mu, &deadline);
	if (ms->rendered >= want && ms->text) {
		copy = malloc(ms->len + sizeof(tail));
		if (copy) {
			memcpy(copy, ms->text, ms->len);
			len = ms->len;
		}
	}
	pthread_mutex_unlock(&ms->mu);
	/* the reviews are the HTTP server's own: counted here, not by the page */
	if (copy && ms->auth) {
		int n = snprintf(tail, sizeof(tail),
				 "# HELP retwatch_metrics_auth_reviews_total TokenReviews and "
				 "SubjectAccessReviews sent for scrapes of /metrics\n"
				 "# TYPE retwatch_metrics_auth_reviews_total counter\n"
				 "retwatch_metrics_auth_reviews_total %" PRIu64 "\n",
				 metrics_auth__reviews(ms->auth));

		if (n > 0 && (size_t)n < sizeof(tail)) {
			memcpy(copy + len, tail, (size_t)n);
			len += (size_t)n;
		}
	}
	if (!copy)
		return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "the agent's main loop did not render the metrics in time");
	return respond(c, MHD_HTTP_OK, copy, len, CONTENT_TYPE);
}

static enum MHD_Result serve_health(struct metrics_server *ms, struct MHD_Connection *c,
				    bool readiness)
{
	char msg[320];
	unsigned int code = MHD_HTTP_OK;
	uint64_t idle;

	pthread_mutex_lock(&ms->mu);
	idle = clock__mono_ns() - ms->beat_ns;
	if (!ms->beat_ns || idle > STALL_NS) {
		code = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(msg, sizeof(msg), "the agent's main loop is %s",
			 ms->beat_ns ? "stalled" : "not running yet");
	} else if (readiness && !ms->ready) {
		code = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(msg, sizeof(msg), "not ready: %s", ms->why_not);
	} else {
		snprintf(msg, sizeof(msg), "ok");
	}
	pthread_mutex_unlock(&ms->mu);
	return respond_text(c, code, msg);
}

/* Logs skipped messages' count once LOG_EVERY_NS has passed since the last
 * line; with ms->log_mu held. */
static void log_skipped(struct metrics_server *ms, uint64_t now)
{
	cJSON *ev;

	if (!ms->log_skipped || now - ms->logged_ns < LOG_EVERY_NS)
		return;
	ev = log_event(LOG_WARN, "metrics endpoint: %" PRIu64 " more messages left out in %.0f s",
		       ms->log_skipped, (double)(now - ms->logged_ns) / 1e9);
	if (ev)
		cJSON_AddNumberToObject(ev, "left_out", (double)ms->log_skipped);
	log_emit(ev);
	ms->log_skipped = 0;
	ms->logged_ns = now;
}

/*
 * The endpoint's messages, such as libmicrohttpd's on a connection refused
 * at the limit: a client that opens connections as fast as it can must not
 * fill the log, so one line per LOG_EVERY_NS, which says how many were left
 * out since the last (or the main loop's beat says it, once a burst is over).
 */
static void vlog_limited(struct metrics_server *ms, const char *fmt, va_list ap)
{
	uint64_t now = clock__mono_ns(), skipped, since;
	char msg[512];
	cJSON *ev;

	pthread_mutex_lock(&ms->log_mu);
	if (ms->logged_ns && now - ms->logged_ns < LOG_EVERY_NS) {
		ms->log_skipped++;
		pthread_mutex_unlock(&ms->log_mu);
		return;
	}
	skipped = ms->log_skipped;
	since = now - ms->logged_ns;
	ms->log_skipped = 0;
	ms->logged_ns = now;
	pthread_mutex_unlock(&ms->log_mu);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	if (!skipped) {
		log_warn("metrics endpoint: %s", msg);
		return;
	}
	ev = log_event(LOG_WARN,
		       "metrics endpoint: %s (%" PRIu64 " more messages left out in %.0f s)", msg,
		       skipped, (double)since / 1e9);
	if (ev)
		cJSON_AddNumberToObject(ev, "left_out", (double)skipped);
	log_emit(ev);
}

static void log_limited(struct metrics_server *ms, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void log_limited(struct metrics_server *ms, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog_limited(ms, fmt, ap);
	va_end(ap);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	vlog_limited(cls, fmt, ap);
}

/* The request's answer when /metrics needs a token: MHD_YES after queueing
 * a refusal, else (the user may read it) the caller goes on. */
static bool refused(struct metrics_server *ms, struct MHD_Connection *c, enum MHD_Result *ret)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	struct MHD_Response *r;
	char why[256], *body = NULL;
	int code, n;

	if (!ms->auth)
		return false;
	code = metrics_auth__check(ms->auth, h, why, sizeof(why));
	if (code == MHD_HTTP_OK)
		return false;
	if (code == MHD_HTTP_SERVICE_UNAVAILABLE)
		log_limited(ms, "failed to review a scrape's token: %s", why);
	n = asprintf(&body, "%s\n", why);
	r = n < 0 ? NULL : MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(n < 0 ? NULL : body);
		*ret = MHD_NO;
		return true;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (code == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"retwatch-agent\"");
	*ret = MHD_queue_response(c, (unsigned int)code, r);
	MHD_destroy_response(r);
	return true;
}

/* What both listeners check first: no body, GET or HEAD. MHD_YES/MHD_NO
 * when answered, else -1. */
static int check_request(struct MHD_Connection *c, const char *method, size_t *upload_data_size)
{
	if (*upload_data_size)
		return MHD_NO; /* no request here has a body */
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD");
	return -1;
}

static bool is_health(const char *url)
{
	return !strcmp(url, "/healthz") || !strcmp(url, "/readyz");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct metrics_server *ms = cls;
	enum MHD_Result ret;
	int done = check_request(c, method, upload_data_size);

	(void)version;
	(void)upload_data;
	(void)con_cls;
	if (done >= 0)
		return (enum MHD_Result)done;
	if (!strcmp(url, "/metrics"))
		return refused(ms, c, &ret) ? ret : serve_metrics(ms, c);
	if (is_health(url))
		return serve_health(ms, c, !strcmp(url, "/readyz"));
	return respond_text(c, MHD_HTTP_NOT_FOUND, "not found: try /metrics, /healthz or /readyz");
}

/* The health listener: answers at once, never waits for the main thread. */
static enum MHD_Result handle_health(void *cls, struct MHD_Connection *c, const char *url,
				     const char *method, const char *version,
				     const char *upload_data, size_t *upload_data_size,
				     void **con_cls)
{
	struct metrics_server *ms = cls;
	int done = check_request(c, method, upload_data_size);

	(void)version;
	(void)upload_data;
	(void)con_cls;
	if (done >= 0)
		return (enum MHD_Result)done;
	if (is_health(url))
		return serve_health(ms, c, !strcmp(url, "/readyz"));
	return respond_text(c, MHD_HTTP_NOT_FOUND,
			    "not found: try /healthz or /readyz (/metrics has its own port)");
}

/*
 * A thread per connection: a scrape waits for the main loop inside its
 * handler (up to RENDER_WAIT_S), and its token's review for the API server.
 * Every thread waits with poll(): select() takes no descriptor from
 * FD_SETSIZE (1024) on, and an agent holding thousands of BPF links gets
 * sockets numbered past it (libmicrohttpd's epoll mode refuses a thread
 * per connection).
 */
static struct MHD_Daemon *listen_on(struct metrics_server *ms, const struct sockaddr *sa,
				    uint16_t port, unsigned int extra_flags)
{
	struct MHD_OptionItem tls[] = {
		{ MHD_OPTION_HTTPS_MEM_CERT, 0, ms->tls.cert_pem },
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, ms->tls.key_pem },
		{ MHD_OPTION_END, 0, NULL },
	};

	/* TLS only, when there is a certificate: a plain request fails the
	 * handshake, and never sees an answer */
	if (ms->tls.cert_pem)
		extra_flags |= MHD_USE_TLS;
	else
		tls[0].option = MHD_OPTION_END;
	return MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_THREAD_PER_CONNECTION |
					MHD_USE_ERROR_LOG | extra_flags,
				/* the logger first, or the options before it log on stderr;
				 * the address is sa, port only names it in messages */
				port, NULL, NULL, handle, ms, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
				ms, MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_CONNECTION_LIMIT,
				(unsigned int)MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				(unsigned int)MAX_CONNECTIONS_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned int)CONNECTION_TIMEOUT_S, MHD_OPTION_ARRAY, tls,
				MHD_OPTION_END);
}

/* The health listener: one thread polls every connection (its handler
 * never blocks), so holding its connections costs a client sockets only. */
static struct MHD_Daemon *listen_health(struct metrics_server *ms, const struct sockaddr *sa,
					uint16_t port, unsigned int extra_flags)
{
	return MHD_start_daemon(
		MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | extra_flags, port, NULL, NULL,
		handle_health, ms, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, ms, MHD_OPTION_SOCK_ADDR,
		sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HEALTH_CONNECTIONS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)HEALTH_CONNECTIONS_PER_IP,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HEALTH_TIMEOUT_S, MHD_OPTION_END);
}

typedef struct MHD_Daemon *(*listen_fn)(struct metrics_server *ms, const struct sockaddr *sa,
					uint16_t port, unsigned int extra_flags);

/* Listens on address with fn: ret_port gets the port bound. NULL with err
 * set when it cannot. */
static struct MHD_Daemon *listen_at(struct metrics_server *ms, const char *address, listen_fn fn,
				    const char *flag, uint16_t *ret_port, struct rw_error *err)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	const union MHD_DaemonInfo *info;
	char host[INET6_ADDRSTRLEN];
	struct MHD_Daemon *d;
	uint16_t port;

	if (metrics__parse_address(address, host, sizeof(host), &port, err))
		return NULL;
	s4.sin_port = s6.sin6_port = htons(port);
	if (inet_pton(AF_INET6, host, &s6.sin6_addr) == 1) {
		d = fn(ms, (struct sockaddr *)&s6, port, MHD_USE_IPv6);
	} else if (host[0]) {
		inet_pton(AF_INET, host, &s4.sin_addr);
		d = fn(ms, (struct sockaddr *)&s4, port, 0);
	} else {
		/* every address: both families where the kernel has IPv6 */
		s6.sin6_addr = in6addr_any;
		d = fn(ms, (struct sockaddr *)&s6, port, MHD_USE_DUAL_STACK);
		if (!d)
			d = fn(ms, (struct sockaddr *)&s4, port, 0);
	}
	if (!d) {
		rw_error_set(err, EADDRINUSE,
			     "failed to listen on %s (is the port in use? give another with %s)",
			     address, flag);
		return NULL;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	*ret_port = info ? info->port : port;
	return d;
}

struct metrics_server *metrics_server__start(const char *address, struct metrics_tls *tls,
					     struct rw_error *err)
{
	struct metrics_server *ms;

	if (MHD_is_feature_supported(MHD_FEATURE_POLL) != MHD_YES ||
	    (tls && tls->cert_pem && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)) {
		rw_error_set(
			err, ENOTSUP, "failed to serve metrics: libmicrohttpd was built without %s",
			MHD_is_feature_supported(MHD_FEATURE_POLL) != MHD_YES ? "poll()" : "TLS");
		if (tls)
			metrics_tls__free(tls);
		return NULL;
	}
	ms = calloc(1, sizeof(*ms));
	if (!ms) {
		rw_error_set(err, ENOMEM, "out of memory");
		if (tls)
			metrics_tls__free(tls);
		return NULL;
	}
	if (tls) {
		ms->tls = *tls;
		memset(tls, 0, sizeof(*tls));
	}
	pthread_mutex_init(&ms->mu, NULL);
	pthread_mutex_init(&ms->log_mu, NULL);
	pthread_cond_init(&ms->cv, NULL);
	ms->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ms->wake_fd < 0) {
		rw_error_set(err, errno, "failed to make an eventfd: %s", strerror(errno));
		metrics_server__stop(ms);
		return NULL;
	}
	snprintf(ms->why_not, sizeof(ms->why_not), "starting");
	if (address &&
	    !(ms->d = listen_at(ms, address, listen_on, "--metrics-address", &ms->port, err))) {
		metrics_server__stop(ms);
		return NULL;
	}
	return ms;
}

int metrics_server__serve_health(struct metrics_server *ms, const char *address,
				 struct rw_error *err)
{
	if (ms->health)
		return rw_error_set(err, EBUSY, "the health listener is already serving");
	ms->health = listen_at(ms, address, listen_health, "--health-address", &ms->health_port,
			       err);
	return ms->health ? 0 : -EADDRINUSE;
}

uint16_t metrics_server__health_port(const struct metrics_server *ms)
{
	return ms->health_port;
}

void metrics_server__require_auth(struct metrics_server *ms, struct metrics_auth *auth)
{
	ms->auth = auth;
}

int metrics_server__fd(const struct metrics_server *ms)
{
	return ms->wake_fd;
}

uint16_t metrics_server__port(const struct metrics_server *ms)
{
	return ms->port;
}

bool metrics_server__tls(const struct metrics_server *ms)
{
	return ms->tls.cert_pem;
}

void metrics_server__stop(struct metrics_server *ms)
{
	if (!ms)
		return;
	/* scrapes waiting for a rendering get 503 now, not after RENDER_WAIT_S */
	metrics_server__publish(ms, NULL, 0);
	if (ms->d)
		MHD_stop_daemon(ms->d);
	if (ms->health)
		MHD_stop_daemon(ms->health);
	metrics_tls__free(&ms->tls);
	pthread_cond_destroy(&ms->cv);
	pthread_mutex_destroy(&ms->mu);
	pthread_mutex_destroy(&ms->log_mu);
	if (ms->wake_fd >= 0)
		close(ms->wake_fd);
	free(ms->text);
	free(ms);
}

void metrics_server__beat(struct metrics_server *ms, bool ready, const char *why_not)
{
	pthread_mutex_lock(&ms->mu);
	ms->beat_ns = clock__mono_ns();
	ms->ready = ready;
	snprintf(ms->why_not, sizeof(ms->why_not), "%s", why_not ? why_not : "");
	pthread_mutex_unlock(&ms->mu);
	/* the count of messages left out, once a burst is over */
	pthread_mutex_lock(&ms->log_mu);
	log_skipped(ms, clock__mono_ns());
	pthread_mutex_unlock(&ms->log_mu);
}

bool metrics_server__wanted(struct metrics_server *ms)
{
	eventfd_t n;
	bool wanted;

	eventfd_read(ms->wake_fd, &n); /* EAGAIN when nobody asked: fine */
	pthread_mutex_lock(&ms->mu);
	wanted = ms->asked > ms->rendered;
	pthread_mutex_unlock(&ms->mu);
	return wanted;
}

void metrics_server__publish(struct metrics_server *ms, char *text, size_t len)
{
	pthread_mutex_lock(&ms->mu);
	free(ms->text);
	ms->text = text;
	ms->len = text ? len : 0;
	/* rendered after every scrape asked so far began: it answers them all */
	ms->rendered = ms->asked;
	pthread_cond_broadcast(&ms->cv);
	pthread_mutex_unlock(&ms->mu);
}

/* ---- the text format ---- */

void prom_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629), 0 if none. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	/* no overlong forms, no surrogates, nothing above U+10FFFF */
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

int prom_labels(char *buf, size_t len, const char *const *kv, size_t n)
{
	size_t at = 0;

#define PUT(ch)                         \
	do {                            \
		if (at + 1 >= len)      \
			return -ENOSPC; \
		buf[at++] = (ch);       \
	} while (0)
	for (size_t i = 0; i < n; i++) {
		if (i)
			PUT(',');
		for (const char *k = kv[2 * i]; *k; k++)
			PUT(*k);
		PUT('=');
		PUT('"');
		for (const char *v = kv[2 * i + 1]; v && *v;) {
			size_t u = utf8_len((const unsigned char *)v);

			/* the format escapes exactly these three in label values */
			if (*v == '\\' || *v == '"') {
				PUT('\\');
				PUT(*v);
			} else if (*v == '\n') {
				PUT('\\');
				PUT('n');
			} else if (!u) {
				/* a function name comes from a container's binary: one
				 * byte that is not UTF-8 would fail the whole scrape */
				PUT('\xef');
				PUT('\xbf');
				PUT('\xbd');
				u = 1;
			} else {
				for (size_t k = 0; k < u; k++)
					PUT(v[k]);
			}
			v += u;
		}
		PUT('"');
	}
#undef PUT
	if (!len)
		return -ENOSPC;
	buf[at] = '\0';
	return 0;
}

void prom_sample(FILE *f, const char *name, const char *labels, uint64_t value)
{
	if (labels && labels[0])
		fprintf(f, "%s{%s} %" PRIu64 "\n", name, labels, value);
	else
		fprintf(f, "%s %" PRIu64 "\n", name, value);
}

/* ns as an exact decimal number of seconds: 1024 -> "0.000001024". */
static const char *seconds(uint64_t ns, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%" PRIu64 ".%09" PRIu64, ns / (uint64_t)1000000000,
			 ns % (uint64_t)1000000000);

	while (n > 2 && buf[n - 1] == '0' && buf[n - 2] != '.')
		buf[--n] = '\0';
	return buf;
}

#define PROM_FIRST_EXP 10

void prom_histogram(FILE *f, const char *name, const char *labels, const struct latency *l)
{
	const char *sep = labels && labels[0] ? "," : "";
	char le[32], sum[32];
	uint64_t below = 0;
	unsigned int b = 0;

	if (!labels)
		labels = "";
	for (unsigned int e = PROM_FIRST_EXP; e <= RW_HIST_MAX_EXP; e++) {
		/* 2^e ns begins a bucket: those before it hold the faster calls */
		unsigned int edge = rw_hist_bucket(1ULL << e);

		for (; b < edge; b++)
			below += l->buckets[b];
		fprintf(f, "%s_bucket{%s%sle=\"%s\"} %" PRIu64 "\n", name, labels, sep,
			seconds(1ULL << e, le, sizeof(le)), below);
	}
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep,
		latency__count(l));
	if (labels[0]) {
		fprintf(f, "%s_sum{%s} %s\n", name, labels, seconds(l->sum_ns, sum, sizeof(sum)));
		fprintf(f, "%s_count{%s} %" PRIu64 "\n", name, labels, latency__count(l));
	} else {
		fprintf(f, "%s_sum %s\n", name, seconds(l->sum_ns, sum, sizeof(sum)));
		fprintf(f, "%s_count %" PRIu64 "\n", name, latency__count(l));
	}
}

void prom_sample_seconds(FILE *f, const char *name, const char *labels, uint64_t ns)
{
	char buf[48];

	if (labels && labels[0])
		fprintf(f, "%s{%s} %s\n", name, labels, seconds(ns, buf, sizeof(buf)));
	else
		fprintf(f, "%s %s\n", name, seconds(ns, buf, sizeof(buf)));
}

void prom_sample_real(FILE *f, const char *name, const char *labels, double value)
{
	if (labels && labels[0])
		fprintf(f, "%s{%s} %.6g\n", name, labels, value);
	else
		fprintf(f, "%s %.6g\n", name, value);
}

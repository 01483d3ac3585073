// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <cjson/cJSON.h>

#include "kube/kube.h"
#include "kube/kubeexec.h"

/* A rotated projected token is picked up within this long. */
#define TOKEN_REREAD_S 60
#define MAX_TOKEN 16384
/* A response body larger than this is refused (a list of pods of one node
 * or of every FunctionProbe stays far below). */
#define MAX_BODY (256u << 20)
#define MAX_LINE (64u << 20)
#define ERR_BODY 400

struct kube {
	char *server;
	struct curl_blob ca, cert, key;
	char *ca_file, *cert_file, *key_file;
	pthread_mutex_t lock; /* guards token and token_read */
	char *token;
	char *token_file;
	time_t token_read;
	/* a kubeconfig user's exec plugin: its token, until token_expiry (0:
	 * until the API server answers 401) */
	struct kube_exec *exec;
	time_t token_expiry;
	unsigned long requests; /* atomic */
};

/* The calling thread's last Retry-After (kube__retry_after). */
static __thread long retry_after_s;

struct buf {
	char *data;
	size_t len, cap, max;
};

static int buf_add(struct buf *b, const char *p, size_t n)
{
	if (b->len + n + 1 > b->max)
		return -E2BIG;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *d;

		while (cap < b->len + n + 1)
			cap *= 2;
		d = realloc(b->data, cap);
		if (!d)
			return -ENOMEM;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static int blob_dup(struct curl_blob *dst, const char *src, size_t len)
{
	if (!src)
		return 0;
	dst->data = malloc(len ? len : 1);
	if (!dst->data)
		return -ENOMEM;
	memcpy(dst->data, src, len);
	dst->len = len;
	dst->flags = CURL_BLOB_NOCOPY;
	return 0;
}

static int str_dup(char **dst, const char *src)
{
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct kube *kube__new(const struct kube_creds *c, struct rw_error *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct kube *k;
	size_t n;

	if (!c->server || strncmp(c->server, "https://", 8)) {
		rw_error_set(err, EINVAL,
			     "the API server address must start with https:// (got %s)",
			     c->server ? c->server : "none");
		errno = EINVAL;
		return NULL;
	}
	if (c->insecure) {
		rw_error_set(err, EINVAL,
			     "insecure-skip-tls-verify is set: retwatch verifies the API server's "
			     "certificate; give the cluster's CA instead");
		errno = EINVAL;
		return NULL;
	}
	pthread_once(&once, curl_init_once);
	k = calloc(1, sizeof(*k));
	if (!k)
		goto nomem;
	pthread_mutex_init(&k->lock, NULL);
	if (str_dup(&k->server, c->server) || blob_dup(&k->ca, c->ca_pem, c->ca_pem_len) ||
	    blob_dup(&k->cert, c->cert_pem, c->cert_pem_len) ||
	    blob_dup(&k->key, c->key_pem, c->key_pem_len) || str_dup(&k->ca_file, c->ca_file) ||
	    str_dup(&k->cert_file, c->cert_file) || str_dup(&k->key_file, c->key_file) ||
	    str_dup(&k->token, c->token) || str_dup(&k->token_file, c->token_file) ||
	    (c->exec && !(k->exec = kube_exec__dup(c->exec))))
		goto nomem;
	n = strlen(k->server);
	while (n && k->server[n - 1] == '/')
		k->server[--n] = '\0';
	return k;
nomem:
	kube__free(k);
	rw_error_set(err, ENOMEM, "out of memory");
	errno = ENOMEM;
	return NULL;
}

void kube__free(struct kube *k)
{
	if (!k)
		return;
	free(k->server);
	free(k->ca.data);
	free(k->cert.data);
	free(k->key.data);
	free(k->ca_file);
	free(k->cert_file);
	free(k->key_file);
	if (k->token)
		explicit_bzero(k->token, strlen(k->token));
	free(k->token);
	free(k->token_file);
	kube_exec__free(k->exec);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

const char *kube__server(const struct kube *k)
{
	return k->server;
}

static int read_token_file(const char *path, char **ret, struct rw_error *err)
{
	char buf[MAX_TOKEN + 1];
	size_t n;
	FILE *f = fopen(path, "re");

	if (!f)
		return rw_error_set(err, errno, "failed to read token file %s: %s", path,
				    strerror(errno));
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (n > MAX_TOKEN)
		return rw_error_set(err, E2BIG, "token file %s is larger than %d bytes", path,
				    MAX_TOKEN);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	if (!n)
		return rw_error_set(err, EINVAL, "token file %s is empty", path);
	/* the token goes into an HTTP header */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x21 || (unsigned char)buf[i] > 0x7e)
			return rw_error_set(
				err, EINVAL,
				"token file %s holds a character not allowed in a token", path);
	*ret = strdup(buf);
	return *ret ? 0 : rw_error_set(err, ENOMEM, "out of memory");
}

/* The "Authorization" header line, or NULL without a token; to free. */
static int auth_header(struct kube *k, char **ret, struct rw_error *err)
{
	time_t now = time(NULL);
	int e = 0;

	*ret = NULL;
	pthread_mutex_lock(&k->lock);
	if (k->token_file && (!k->token || now - k->token_read >= TOKEN_REREAD_S)) {
		char *tok = NULL;

		e = read_token_file(k->token_file, &tok, err);
		if (!e) {
			free(k->token);
			k->token = tok;
			k->token_read = now;
		}
	}
	/* a plugin's token is asked for again a little before it expires */
	if (k->exec && (!k->token || (k->token_expiry && now + 10 >= k->token_expiry))) {
		char *tok = NULL;
		time_t expiry = 0;

		e = kube_exec__run(k->exec, &tok, &expiry, err);
		if (!e) {
			free(k->token);
			k->token = tok;
			k->token_expiry = expiry;
		}
	}
	if (!e && k->token && asprintf(ret, "Authorization: Bearer %s", k->token) < 0) {
		*ret = NULL;
		e = rw_error_set(err, ENOMEM, "out of memory");
	}
	pthread_mutex_unlock(&k->lock);
	return e;
}

struct call {
	struct buf body;
	kube_line_fn fn;
	void *ctx;
	CURL *curl;
	long status;
	bool stopped;
	const volatile sig_atomic_t *stop;
	int wake_fd;	    /* readable: stop now (-1: none) */
	size_t lines_from;  /* start of the unfinished line in body */
	const char *accept; /* the Accept header's value (NULL: application/json) */
};

static long response_status(struct call *c)
{
	if (!c->status)
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->status);
	return c->status;
}

/* Hands each whole line to the callback, keeping the unfinished tail. */
static int deliver_lines(struct call *c)
{
	char *start = c->body.data, *end = c->body.data + c->body.len, *nl;

	while ((nl = memchr(start, '\n', end - start))) {
		*nl = '\0';
		if (nl > start && c->fn(start, nl - start, c->ctx)) {
			c->stopped = true;
			return -1;
		}
		start = nl + 1;
	}
	c->body.len = end - start;
	memmove(c->body.data, start, c->body.len);
	return 0;
}

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
	struct call *c = ctx;

	n *= size;
	if (buf_add(&c->body, p, n))
		return 0; /* too large or out of memory: fails the transfer */
	if (c->fn && response_status(c) == 200 && deliver_lines(c))
		return 0;
	return n;
}

static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct call *c = ctx;

	(void)dt, (void)dn, (void)ut, (void)un;
	if (c->stop && *c->stop) {
		c->stopped = true;
		return 1;
	}
	return 0;
}

static void set_tls(struct kube *k, CURL *curl)
{
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
	if (k->ca.data)
		curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &k->ca);
	else if (k->ca_file)
		curl_easy_setopt(curl, CURLOPT_CAINFO, k->ca_file);
	if (k->cert.data)
		curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &k->cert);
	else if (k->cert_file)
		curl_easy_setopt(curl, CURLOPT_SSLCERT, k->cert_file);
	if (k->key.data)
		curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &k->key);
	else if (k->key_file)
		curl_easy_setopt(curl, CURLOPT_SSLKEY, k->key_file);
}

static pthread_key_t handle_key;

static void handle_free(void *h)
{
	curl_easy_cleanup(h);
}

static void handle_key_init(void)
{
	pthread_key_create(&handle_key, handle_free);
}

/* The calling thread's handle for single requests, reset for a new one. */
static CURL *thread_handle(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	CURL *h;

	pthread_once(&once, handle_key_init);
	h = pthread_getspecific(handle_key);
	if (h) {
		curl_easy_reset(h); /* keeps the connection */
		return h;
	}
	h = curl_easy_init();
	if (h && pthread_setspecific(handle_key, h)) {
		curl_easy_cleanup(h);
		h = NULL;
	}
	return h;
}

/* A 401: an exec plugin's token is asked for again at the next request. */
static void token_refused(struct kube *k)
{
	if (!k->exec)
		return;
	pthread_mutex_lock(&k->lock);
	if (k->token)
		explicit_bzero(k->token, strlen(k->token));
	free(k->token);
	k->token = NULL;
	pthread_mutex_unlock(&k->lock);
}

/*
 * curl_easy_perform, but the transfer ends as soon as c->wake_fd becomes
 * readable: a silent watch would otherwise see its stop flag only at the
 * next progress call, up to a second later, and the agent's exit wait for it.
 */
static CURLcode perform_wakeable(struct call *c)
{
	struct curl_waitfd wake = { .fd = c->wake_fd, .events = CURL_WAIT_POLLIN };
	CURLM *m = curl_multi_init();
	CURLcode rc = CURLE_OUT_OF_MEMORY;
	int running = 1;
	CURLMsg *msg;

	if (!m)
		return rc;
	if (curl_multi_add_handle(m, c->curl)) {
		curl_multi_cleanup(m);
		return rc;
	}
	while (running) {
		if (curl_multi_perform(m, &running) || !running)
			break;
		wake.revents = 0;
		if (curl_multi_poll(m, &wake, 1, 1000, NULL))
			break;
		if (wake.revents) {
			c->stopped = true;
			break;
		}
	}
	rc = c->stopped ? CURLE_ABORTED_BY_CALLBACK : CURLE_RECV_ERROR;
	while ((msg = curl_multi_info_read(m, &running)))
		if (msg->msg == CURLMSG_DONE)
			rc = msg->data.result;
	curl_multi_remove_handle(m, c->curl);
	curl_multi_cleanup(m);
	return rc;
}

static int perform(struct kube *k, struct call *c, const char *method, const char *path,
		   const char *content_type, const char *body, long timeout_ms, int idle_s,
		   struct rw_error *err)
{
	struct curl_slist *hdrs = NULL;
	char errbuf[CURL_ERROR_SIZE] = "", *url = NULL, *auth = NULL, *ct = NULL, *acc = NULL;
	CURLcode rc;
	int e;

	__atomic_add_fetch(&k->requests, 1, __ATOMIC_RELAXED);
	retry_after_s = 0;
	e = auth_header(k, &auth, err);
	if (e)
		return e;
	/* a thread's requests share one handle, and so its open connection */
	c->curl = c->fn ? curl_easy_init() : thread_handle();
	if (!c->curl || asprintf(&url, "%s%s", k->server, path) < 0 ||
	    (content_type && asprintf(&ct, "Content-Type: %s", content_type) < 0)) {
		url = NULL;
		e = rw_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if (c->accept && asprintf(&acc, "Accept: %s", c->accept) < 0) {
		e = rw_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	hdrs = curl_slist_append(hdrs, acc ? acc : "Accept: application/json");
	if (auth)
		hdrs = curl_slist_append(hdrs, auth);
	if (ct)
		hdrs = curl_slist_append(hdrs, ct);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "retwatch-agent");
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	/* a peer that vanished without closing is noticed on long watches */
	curl_easy_setopt(c->curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c->curl, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(c->curl, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	if (timeout_ms)
		curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	if (idle_s) {
		curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, (long)idle_s);
	}
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
	set_tls(k, c->curl);
	rc = c->fn && c->wake_fd >= 0 ? perform_wakeable(c) : curl_easy_perform(c->curl);
	if (c->stopped) {
		e = -ECANCELED;
	} else if (rc != CURLE_OK) {
		e = rw_error_set(err, rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : ECONNABORTED,
				 "%s %s: %s", method, path,
				 errbuf[0] ? errbuf : curl_easy_strerror(rc));
	} else {
		curl_off_t ra = 0;

		e = (int)response_status(c);
		if (curl_easy_getinfo(c->curl, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
			retry_after_s = (long)ra;
		if (e == 401)
			token_refused(k);
	}
out:
	curl_slist_free_all(hdrs);
	if (c->fn)
		curl_easy_cleanup(c->curl);
	free(url);
	free(auth);
	free(ct);
	free(acc);
	return e;
}

int kube__request(struct kube *k, const char *method, const char *path, const char *content_type,
		  const char *body, long timeout_ms, char **ret_body, struct rw_error *err)
{
	struct call c = { .body.max = MAX_BODY, .wake_fd = -1 };
	int e;

	e = perform(k, &c, method, path, content_type, body, timeout_ms, 0, err);
	if (ret_body && e > 0)
		*ret_body = c.body.data;
	else
		free(c.body.data);
	return e;
}

int kube__get_as(struct kube *k, const char *path, const char *accept, long timeout_ms,
		 char **ret_body, struct rw_error *err)
{
	struct call c = { .body.max = MAX_BODY, .wake_fd = -1, .accept = accept };
	int e;

	e = perform(k, &c, "GET", path, NULL, NULL, timeout_ms, 0, err);
	if (ret_body && e > 0)
		*ret_body = c.body.data;
	else
		free(c.body.data);
	return e;
}

int kube__stream(struct kube *k, const char *path, kube_line_fn fn, void *ctx,
		 const volatile sig_atomic_t *stop, int wake_fd, int idle_s, struct rw_error *err)
{
	struct call c = {
		.body.max = MAX_LINE, .fn = fn, .ctx = ctx, .stop = stop, .wake_fd = wake_fd
	};
	int e;

	e = perform(k, &c, "GET", path, NULL, NULL, 0, idle_s, err);
	if (e > 0 && e != 200)
		rw_error_set(err, EPROTO, "GET %s: HTTP %d: %.*s", path, e, ERR_BODY,
			     c.body.data ? c.body.data : "");
	free(c.body.data);
	return e;
}

long kube__retry_after(void)
{
	return retry_after_s;
}

bool kube__uid_conflict(const char *body)
{
	cJSON *doc = body ? cJSON_Parse(body) : NULL;
	const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "message"));
	/* the storage layer's words for a failed uid precondition */
	bool yes = msg && strstr(msg, "Precondition failed: UID in precondition");

	cJSON_Delete(doc);
	return yes;
}

unsigned long kube__requests(const struct kube *k)
{
	return __atomic_load_n(&k->requests, __ATOMIC_RELAXED);
}

const char *kube__escape(const char *s, char *buf, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s && o + 4 < len; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
			buf[o++] = (char)ch;
		} else {
			buf[o++] = '%';
			buf[o++] = hex[ch >> 4];
			buf[o++] = hex[ch & 15];
		}
	}
	if (len)
		buf[o] = '\0';
	return buf;
}

const char *kube__error_text(const char *body, char *buf, size_t len)
{
	cJSON *doc = body ? cJSON_Parse(body) : NULL;
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(doc, "message");

	if (cJSON_IsString(msg))
		snprintf(buf, len, "%s", msg->valuestring);
	else
		snprintf(buf, len, "%.300s", body ? body : "");
	cJSON_Delete(doc);
	return buf;
}

int kube__backoff_next(int prev_ms, int min_ms, int max_ms)
{
	long next = prev_ms > 0 ? 2L * prev_ms : min_ms;

	if (next < min_ms)
		next = min_ms;
	return next > max_ms ? max_ms : (int)next;
}

int kube__backoff_jitter(int ceil_ms, unsigned int *seed)
{
	int half = ceil_ms / 2;

	if (ceil_ms <= 0)
		return 0;
	return half + rand_r(seed) % (ceil_ms - half + 1);
}

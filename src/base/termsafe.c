// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/termsafe.h"

enum kind { PASS, ESCAPE, MORE };

/*
 * What the bytes at p (n of them, n > 0) start: a character to pass, bytes
 * to escape (a control, a C1 control's two bytes, or a byte that begins no
 * well-formed UTF-8 sequence), or the beginning of a sequence cut at n.
 * *ret_len gets how many bytes it covers. Well-formed UTF-8 is Unicode's
 * table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF.
 */
static enum kind classify(const unsigned char *p, size_t n, size_t *ret_len)
{
	unsigned char b = p[0], lo = 0x80, hi = 0xbf;
	size_t need;

	*ret_len = 1;
	if (b < 0x80)
		return (b < 0x20 && b != '\t' && b != '\n') || b == 0x7f ? ESCAPE : PASS;
	if (b >= 0xc2 && b <= 0xdf) {
		need = 2;
	} else if (b >= 0xe0 && b <= 0xef) {
		need = 3;
		lo = b == 0xe0 ? 0xa0 : 0x80;
		hi = b == 0xed ? 0x9f : 0xbf;
	} else if (b >= 0xf0 && b <= 0xf4) {
		need = 4;
		lo = b == 0xf0 ? 0x90 : 0x80;
		hi = b == 0xf4 ? 0x8f : 0xbf;
	} else {
		return ESCAPE;
	}
	for (size_t i = 1; i < need; i++) {
		if (i >= n)
			return MORE;
		if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xbf))
			return ESCAPE; /* the lead alone; what follows is looked at afresh */
	}
	*ret_len = need;
	return b == 0xc2 && p[1] <= 0x9f ? ESCAPE : PASS;
}

/* classify() of a NUL-terminated string's tail: a cut sequence is escaped. */
static enum kind classify_str(const unsigned char *p, size_t *ret_len)
{
	enum kind k = classify(p, strnlen((const char *)p, 4), ret_len);

	if (k == MORE) {
		*ret_len = 1;
		return ESCAPE;
	}
	return k;
}

bool termsafe__needs(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len;

	for (size_t i = 0; i < n; i += len)
		if (classify(p + i, n - i, &len) != PASS)
			return true;
	return false;
}

static const char hex[] = "0123456789abcdef";

char *termsafe__json(const char *text)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t cap = strlen(text) * 6 + 1, o = 0, n;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	while (*p) {
		enum kind k = classify_str(p, &n);

		if (k == PASS) {
			memcpy(out + o, p, n);
			o += n;
		} else {
			/* a C1 control is its second byte's code point */
			unsigned char c = n == 2 ? p[1] : p[0];

			if (n == 2 || c < 0x20 || c == 0x7f)
				o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
			else
				o += (size_t)snprintf(out + o, cap - o, "\\ufffd");
		}
		p += n;
	}
	out[o] = '\0';
	return out;
}

int termsafe__print_json(FILE *f, const cJSON *v, bool indented)
{
	char *text = indented ? cJSON_Print(v) : cJSON_PrintUnformatted(v);
	char *safe = text ? termsafe__json(text) : NULL;

	if (safe)
		fprintf(f, "%s\n", safe);
	free(safe);
	free(text);
	return safe ? 0 : -ENOMEM;
}

struct range {
	uint32_t lo, hi;
};

/* East Asian Wide and Fullwidth: the blocks of Markus Kuhn's wcwidth, and
 * the emoji blocks terminals show in two columns. */
static const struct range wide[] = {
	{ 0x1100, 0x115f },   { 0x2329, 0x232a },   { 0x2e80, 0x303e },	  { 0x3040, 0xa4cf },
	{ 0xa960, 0xa97f },   { 0xac00, 0xd7a3 },   { 0xf900, 0xfaff },	  { 0xfe10, 0xfe19 },
	{ 0xfe30, 0xfe6f },   { 0xff00, 0xff60 },   { 0xffe0, 0xffe6 },	  { 0x1f300, 0x1f64f },
	{ 0x1f900, 0x1f9ff }, { 0x20000, 0x2fffd }, { 0x30000, 0x3fffd },
};

/* Zero width: the combining blocks (marks of a script's own block, such as
 * Devanagari's vowel signs, count one), zero-width spaces and joiners, and
 * variation selectors. */
static const struct range zero[] = {
	{ 0x0300, 0x036f }, { 0x1ab0, 0x1aff }, { 0x1dc0, 0x1dff }, { 0x200b, 0x200f },
	{ 0x20d0, 0x20ff }, { 0xfe00, 0xfe0f }, { 0xfe20, 0xfe2f }, { 0xe0100, 0xe01ef },
};

static bool in(const struct range *r, size_t n, uint32_t c)
{
	for (size_t i = 0; i < n; i++)
		if (c >= r[i].lo && c <= r[i].hi)
			return true;
	return false;
}

/* The columns of the well-formed UTF-8 sequence p (len bytes). */
static size_t char_width(const unsigned char *p, size_t len)
{
	uint32_t c = len == 1 ? p[0] : p[0] & (0x7f >> len);

	for (size_t i = 1; i < len; i++)
		c = c << 6 | (p[i] & 0x3f);
	if (in(zero, sizeof(zero) / sizeof(zero[0]), c))
		return 0;
	return in(wide, sizeof(wide) / sizeof(wide[0]), c) ? 2 : 1;
}

/* The character at p as a cell shows it: its bytes (*ret_len), whether they
 * are escaped (*ret_escaped), and the columns it takes. */
static size_t cell_char(const unsigned char *p, size_t *ret_len, bool *ret_escaped)
{
	enum kind k = classify_str(p, ret_len);

	*ret_escaped = k == ESCAPE || *p == '\t' || *p == '\n';
	return *ret_escaped ? 4 * *ret_len : char_width(p, *ret_len);
}

size_t termsafe__width(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t w = 0, len;
	bool escaped;

	for (; *p; p += len)
		w += cell_char(p, &len, &escaped);
	return w;
}

size_t termsafe__cell(FILE *f, const char *s, int width, bool last)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t total = termsafe__width(s), used = 0, room = total, len, w;
	bool cut = width >= 0 && total > (size_t)width, escaped;

	if (!width)
		return 0;
	if (cut)
		room = (size_t)width - 1; /* the ellipsis' column */
	for (; *p; p += len) {
		if (used + (w = cell_char(p, &len, &escaped)) > room)
			break;
		for (size_t i = 0; escaped && i < len; i++)
			fprintf(f, "\\x%c%c", hex[p[i] >> 4], hex[p[i] & 15]);
		if (!escaped)
			fwrite(p, 1, len, f);
		used += w;
	}
	if (cut) {
		fputs("\xe2\x80\xa6", f); /* U+2026 … */
		used++;
	}
	for (; !last && width > 0 && used < (size_t)width; used++)
		fputc(' ', f);
	return used;
}

/* The stream's state: a UTF-8 sequence the last write cut is kept in pend. */
struct tstream {
	int fd;
	unsigned char pend[4];
	size_t npend;
};

struct outbuf {
	int fd;
	int err;
	size_t n;
	char b[4096];
};

static void write_all(struct outbuf *o)
{
	for (size_t off = 0; off < o->n && !o->err;) {
		ssize_t w = write(o->fd, o->b + off, o->n - off);

		if (w < 0 && errno != EINTR)
			o->err = errno;
		else if (w > 0)
			off += (size_t)w;
	}
	o->n = 0;
}

static void emit(struct outbuf *o, const unsigned char *p, size_t n, enum kind k)
{
	for (size_t i = 0; i < n; i++) {
		if (o->n + 4 > sizeof(o->b))
			write_all(o);
		if (k == PASS) {
			o->b[o->n++] = (char)p[i];
			continue;
		}
		o->b[o->n++] = '\\';
		o->b[o->n++] = 'x';
		o->b[o->n++] = hex[p[i] >> 4];
		o->b[o->n++] = hex[p[i] & 15];
	}
}

/* Escapes what pend holds as far as it can be told; MORE when it still waits. */
static enum kind drain_pending(struct tstream *t, struct outbuf *o)
{
	while (t->npend) {
		size_t len;
		enum kind k = classify(t->pend, t->npend, &len);

		if (k == MORE)
			return MORE;
		emit(o, t->pend, len, k);
		t->npend -= len;
		memmove(t->pend, t->pend + len, t->npend);
	}
	return PASS;
}

static ssize_t stream_write(void *cookie, const char *buf, size_t size)
{
	struct tstream *t = cookie;
	const unsigned char *p = (const unsigned char *)buf;
	struct outbuf o = { .fd = t->fd };
	size_t i = 0, len;

	while (i < size) {
		enum kind k;

		if (t->npend) {
			t->pend[t->npend++] = p[i++];
			drain_pending(t, &o);
			continue;
		}
		k = classify(p + i, size - i, &len);
		if (k == MORE) {
			memcpy(t->pend, p + i, size - i);
			t->npend = size - i;
			break;
		}
		emit(&o, p + i, len, k);
		i += len;
	}
	write_all(&o);
	if (o.err) {
		errno = o.err;
		return -1;
	}
	return (ssize_t)size;
}

/* A sequence still cut when the stream ends is escaped. */
static void flush_cut(struct tstream *t)
{
	struct outbuf o = { .fd = t->fd };

	emit(&o, t->pend, t->npend, ESCAPE);
	t->npend = 0;
	write_all(&o);
}

static int stream_close(void *cookie)
{
	flush_cut(cookie);
	free(cookie);
	return 0;
}

/* A stream to fd; *ret_state its state, for the caller to flush at exit. */
static FILE *stream_open(int fd, struct tstream **ret_state)
{
	cookie_io_functions_t io = { .write = stream_write, .close = stream_close };
	struct tstream *t = calloc(1, sizeof(*t));
	FILE *f;

	if (!t)
		return NULL;
	t->fd = fd;
	if (!(f = fopencookie(t, "w", io))) {
		free(t);
		return NULL;
	}
	if (ret_state)
		*ret_state = t;
	return f;
}

FILE *termsafe__stream(int fd)
{
	return stream_open(fd, NULL);
}

static FILE *installed[2];
static struct tstream *installed_state[2];

/* At exit, before stdio flushes every stream: a sequence still cut is shown. */
static void flush_installed(void)
{
	for (int i = 0; i < 2; i++)
		if (installed[i]) {
			fflush(installed[i]);
			flush_cut(installed_state[i]);
		}
}

static FILE *install_one(int i, int fd, FILE *was, int mode)
{
	FILE *f = stream_open(fd, &installed_state[i]);

	if (!f)
		return was;
	setvbuf(f, NULL, mode, mode == _IONBF ? 0 : BUFSIZ);
	fflush(was);
	installed[i] = f;
	return f;
}

void termsafe__install(void)
{
	if (installed[0] || installed[1])
		return;
	stdout = install_one(0, STDOUT_FILENO, stdout, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF);
	stderr = install_one(1, STDERR_FILENO, stderr, _IONBF);
	atexit(flush_installed);
}

void termsafe__control(FILE *f, int fd, const char *seq)
{
	struct outbuf o = { .fd = fd, .n = strlen(seq) };

	fflush(f);
	if (o.n > sizeof(o.b))
		return;
	memcpy(o.b, seq, o.n);
	write_all(&o);
}

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/procmaps.h"

#define DELETED_SUFFIX " (deleted)"

struct procmaps {
	struct procmap *maps;
	size_t n, cap;
};

/* A bounded cursor over one line. */
struct cursor {
	const char *p, *end;
};

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* 1 to max_digits hex digits. */
static bool take_hex(struct cursor *c, unsigned int max_digits, uint64_t *ret)
{
	uint64_t v = 0;
	unsigned int n = 0;
	int d;

	while (c->p < c->end && (d = hex_digit(*c->p)) >= 0) {
		if (++n > max_digits)
			return false;
		v = v << 4 | (unsigned int)d;
		c->p++;
	}
	*ret = v;
	return n > 0;
}

static bool take_dec(struct cursor *c, uint64_t *ret)
{
	uint64_t v = 0;
	bool any = false;

	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned int d = *c->p - '0';

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
		c->p++;
		any = true;
	}
	*ret = v;
	return any;
}

static bool take_char(struct cursor *c, char ch)
{
	if (c->p >= c->end || *c->p != ch)
		return false;
	c->p++;
	return true;
}

/* "rwxp": four flags, each its letter or '-' (the last 'p' or 's'). */
static bool take_perms(struct cursor *c, bool *ret_exec)
{
	static const char letters[] = "rwx";

	if (c->end - c->p < 4)
		return false;
	for (int i = 0; i < 3; i++)
		if (c->p[i] != letters[i] && c->p[i] != '-')
			return false;
	if (c->p[3] != 'p' && c->p[3] != 's')
		return false;
	*ret_exec = c->p[2] == 'x';
	c->p += 4;
	return true;
}

/*
 * "start-end perms offset major:minor inode [path]". False when the line is
 * malformed; ret->path then points into the line (length in *ret_path_len).
 */
static bool parse_line(const char *line, size_t len, struct procmap *ret, size_t *ret_path_len,
		       bool *ret_exec)
{
	struct cursor c = { line, line + len };
	uint64_t major, minor;

	memset(ret, 0, sizeof(*ret));
	if (memchr(line, 0, len))
		return false;
	if (!take_hex(&c, 16, &ret->start) || !take_char(&c, '-') || !take_hex(&c, 16, &ret->end) ||
	    !take_char(&c, ' ') || !take_perms(&c, ret_exec) || !take_char(&c, ' ') ||
	    !take_hex(&c, 16, &ret->offset) || !take_char(&c, ' ') || !take_hex(&c, 8, &major) ||
	    !take_char(&c, ':') || !take_hex(&c, 8, &minor) || !take_char(&c, ' ') ||
	    !take_dec(&c, &ret->inode))
		return false;
	if (ret->start >= ret->end)
		return false;
	if (c.p < c.end && !take_char(&c, ' '))
		return false;
	/* the kernel pads to a column; the path is the rest and may hold spaces */
	while (c.p < c.end && *c.p == ' ')
		c.p++;
	ret->dev_major = (unsigned int)major;
	ret->dev_minor = (unsigned int)minor;
	ret->path = c.p;
	*ret_path_len = c.end - c.p;
	return true;
}

/* Adds one line if it parses and maps code. 0, or -ENOMEM. */
static int add_line(struct procmaps *m, const char *line, size_t len)
{
	struct procmap map;
	size_t plen, slen = strlen(DELETED_SUFFIX);
	bool exec;
	char *path;

	if (!parse_line(line, len, &map, &plen, &exec) || !exec)
		return 0;
	if (plen > slen && !memcmp(map.path + plen - slen, DELETED_SUFFIX, slen)) {
		map.deleted = true;
		plen -= slen;
	}
	if (m->n == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 64;
		void *p = realloc(m->maps, ncap * sizeof(*m->maps));

		if (!p)
			return -ENOMEM;
		m->maps = p;
		m->cap = ncap;
	}
	path = strndup(map.path, plen);
	if (!path)
		return -ENOMEM;
	map.path = path;
	m->maps[m->n++] = map;
	return 0;
}

static int map_cmp(const void *a, const void *b)
{
	const struct procmap *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* The kernel lists mappings sorted and disjoint; make sure of it. */
static void finish(struct procmaps *m)
{
	size_t j = 0;

	if (!m->n)
		return;
	qsort(m->maps, m->n, sizeof(*m->maps), map_cmp);
	for (size_t i = 0; i < m->n; i++) {
		if (j && m->maps[i].start < m->maps[j - 1].end) {
			free((char *)m->maps[i].path);
			continue;
		}
		m->maps[j++] = m->maps[i];
	}
	m->n = j;
}

struct procmaps *procmaps__parse(const char *text, size_t len, struct rw_error *err)
{
	const char *p = text, *end = text + len;
	struct procmaps *m;
	int ret;

	m = calloc(1, sizeof(*m));
	if (!m)
		goto nomem;
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		ret = add_line(m, p, n);
		if (ret)
			goto nomem;
		p += n + (nl ? 1 : 0);
	}
	finish(m);
	return m;
nomem:
	procmaps__free(m);
	rw_error_set(err, ENOMEM, "out of memory");
	errno = ENOMEM;
	return NULL;
}

struct procmaps *procmaps__load(pid_t pid, struct rw_error *err)
{
	struct procmaps *m = NULL;
	char path[64], *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f) {
		ret = -errno;
		rw_error_set(err, -ret, "failed to open %s: %s", path, strerror(-ret));
		goto cleanup;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		ret = rw_error_set(err, ENOMEM, "out of memory");
		goto cleanup;
	}
	errno = 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			n--;
		ret = add_line(m, line, n);
		if (ret) {
			rw_error_set(err, ENOMEM, "out of memory");
			goto cleanup;
		}
		errno = 0;
	}
	/* a process that exits while we read makes read() fail with ESRCH */
	if (errno || ferror(f)) {
		ret = -(errno ? errno : EIO);
		rw_error_set(err, -ret, "failed to read %s: %s", path, strerror(-ret));
		goto cleanup;
	}
	finish(m);
cleanup:
	free(line);
	if (f)
		fclose(f);
	if (ret) {
		procmaps__free(m);
		errno = -ret;
		return NULL;
	}
	return m;
}

void procmaps__free(struct procmaps *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free((char *)m->maps[i].path);
	free(m->maps);
	free(m);
}

const struct procmap *procmaps__maps(const struct procmaps *m, size_t *ret_n)
{
	*ret_n = m->n;
	return m->maps;
}

const struct procmap *procmaps__find(const struct procmaps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	/* the first mapping starting after addr; addr can only be in the one before */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->maps[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && addr < m->maps[lo - 1].end)
		return &m->maps[lo - 1];
	return NULL;
}

int procmap__file_path(const struct procmap *map, pid_t pid, char *buf, size_t len)
{
	/* the kernel names them "%lx-%lx": lowercase hex, no 0x, no padding */
	int n = snprintf(buf, len, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, map->start,
			 map->end);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

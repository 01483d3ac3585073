// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cgroup.h"

#define DELETED_SUFFIX " (deleted)"
#define SCOPE_SUFFIX ".scope"
#define STAT_MAX 4096
/* the kernel prints one line per hierarchy: about 15 with every v1 controller */
#define MAX_LINES 64
#define MAX_HIERARCHY_DIGITS 9
#define MAX_SCHEME 32

/* The id one line names, where it sits, and how the line ranks on a tie. */
struct found {
	const char *id; /* NULL: none */
	long depth;
	size_t rank;	  /* 0: the v2 line; v1 lines from 1 in file order */
	const char *path; /* the line's path, " (deleted)" cut off */
	size_t plen;
};

static bool is_id(const char *p, size_t n)
{
	if (n != CGROUP_ID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

static bool is_runtime(const char *p, size_t n)
{
	/* not crio-conmon or libpod-conmon: their monitor process is not the container */
	static const char *const runtimes[] = { "cri-containerd", "crio", "docker", "libpod" };

	for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++)
		if (strlen(runtimes[i]) == n && !memcmp(runtimes[i], p, n))
			return true;
	return false;
}

/* The container id path component c (n bytes) names (see cgroup.h), or NULL. */
static const char *component_id(const char *c, size_t n)
{
	const size_t slen = strlen(SCOPE_SUFFIX);
	const char *id, *colon;

	if (is_id(c, n))
		return c;
	/* "<runtime>-<id>.scope" */
	if (n > CGROUP_ID_LEN + slen + 1 && !memcmp(c + n - slen, SCOPE_SUFFIX, slen)) {
		id = c + n - slen - CGROUP_ID_LEN;
		if (id[-1] == '-' && is_id(id, CGROUP_ID_LEN) && is_runtime(c, id - 1 - c))
			return id;
	}
	/* "<slice>:<runtime>:<id>" */
	if (n > CGROUP_ID_LEN + 1) {
		id = c + n - CGROUP_ID_LEN;
		if (id[-1] != ':' || !is_id(id, CGROUP_ID_LEN))
			return NULL;
		colon = memrchr(c, ':', id - 1 - c);
		if (colon && colon > c && !memchr(c, ':', colon - c) &&
		    is_runtime(colon + 1, id - 1 - (colon + 1)))
			return id;
	}
	return NULL;
}

/* The last container id in a cgroup path, and its depth, into ret. */
static void path_id(const char *path, size_t len, struct found *ret)
{
	const char *p = path, *end = path + len;
	long depth = 0;

	ret->id = NULL;
	while (p < end) {
		const char *slash = memchr(p, '/', end - p), *id;
		size_t n = slash ? (size_t)(slash - p) : (size_t)(end - p);

		/* a reader in a cgroup namespace sees paths outside it through ".." */
		if (n == 2 && !memcmp(p, "..", 2))
			depth--;
		else if (n && !(n == 1 && *p == '.'))
			depth++;
		id = component_id(p, n);
		if (id) {
			ret->id = id;
			ret->depth = depth;
		}
		p += n + (slash ? 1 : 0);
	}
}

/* "ID:CONTROLLERS:/PATH" into *ret_hierarchy and ret. False when malformed. */
static bool parse_line(const char *line, size_t len, size_t rank, unsigned int *ret_hierarchy,
		       struct found *ret)
{
	const char *end = line + len, *c1, *c2, *path;
	size_t plen, slen = strlen(DELETED_SUFFIX);
	unsigned int h = 0;

	c1 = memchr(line, ':', len);
	if (!c1 || c1 == line || c1 - line > MAX_HIERARCHY_DIGITS)
		return false;
	for (const char *p = line; p < c1; p++) {
		if (*p < '0' || *p > '9')
			return false;
		h = h * 10 + (*p - '0');
	}
	c2 = memchr(c1 + 1, ':', end - (c1 + 1));
	if (!c2 || c2 + 1 >= end || c2[1] != '/')
		return false;
	/* v2 has no controllers in the line, v1 always names some (or name=) */
	if ((h == 0) != (c2 == c1 + 1))
		return false;
	path = c2 + 1;
	plen = end - path;
	if (plen > slen && !memcmp(end - slen, DELETED_SUFFIX, slen))
		plen -= slen;
	path_id(path, plen, ret);
	ret->path = path;
	ret->plen = plen;
	ret->rank = h ? rank : 0;
	*ret_hierarchy = h;
	return true;
}

static bool better(const struct found *a, const struct found *b)
{
	if (!a->id)
		return false;
	if (!b->id)
		return true;
	if (a->depth != b->depth)
		return a->depth > b->depth;
	return a->rank < b->rank;
}

/*
 * The kernel prints each hierarchy once, the v2 one last. It refuses cgroup
 * names with a newline, which could add lines; were one to slip through (an
 * old kernel), a repeated hierarchy or a line after the v2 one gives it away.
 */
static bool seen_before(const unsigned int *seen, size_t n, unsigned int h)
{
	for (size_t i = 0; i < n; i++)
		if (seen[i] == h)
			return true;
	return false;
}

/*
 * Checks every line of a /proc/PID/cgroup text and hands each one's fields
 * to fn, in order; fn's nonzero return ends the walk and is returned.
 * -EINVAL for a malformed text (see seen_before).
 */
static int parse_lines(const char *text, size_t len, int (*fn)(const struct found *f, void *ctx),
		       void *ctx)
{
	const char *p = text, *end = text + len;
	unsigned int seen[MAX_LINES];
	size_t nlines = 0;
	struct found f;

	if (!text || !len || memchr(text, 0, len))
		return -EINVAL;
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		unsigned int h;
		int e;

		if (nlines == MAX_LINES || (nlines && seen[nlines - 1] == 0) ||
		    !parse_line(p, n, nlines + 1, &h, &f) || seen_before(seen, nlines, h))
			return -EINVAL;
		seen[nlines++] = h;
		p += n + (nl ? 1 : 0);
		if ((e = fn(&f, ctx)))
			return e;
	}
	return 0;
}

static int keep_best(const struct found *f, void *ctx)
{
	struct found *best = ctx;

	if (better(f, best))
		*best = *f;
	return 0;
}

int cgroup__parse_container_id(const char *text, size_t len, char *ret_id)
{
	struct found best = {};
	int e = parse_lines(text, len, keep_best, &best);

	if (e)
		return e;
	if (!best.id)
		return -ENOENT;
	memcpy(ret_id, best.id, CGROUP_ID_LEN);
	ret_id[CGROUP_ID_LEN] = '\0';
	return 0;
}

/* Whether [c, c + n) is all characters of set. */
static bool all_of(const char *c, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(set, c[i]) || !c[i])
			return false;
	return true;
}

static bool ends_with(const char *c, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && !memcmp(c + n - k, suffix, k);
}

/*
 * Whether path component c (n bytes) is a pod's cgroup, as the kubelet names
 * it: "pod<uid>" (cgroupfs driver) or "<root>kubepods[-<qos>]-pod<uid, '-'
 * as '_'>.slice" (systemd driver; <root> is "kubelet-" in a kind node), which
 * cgroup v1 under containerd.service shows as "<slice>:<runtime>:<id>".
 * The uid goes to ret_uid with '-' (CGROUP_UID_MAX + 1 bytes); *ret_in_slice
 * tells whether the component also names the container.
 */
static bool pod_component(const char *c, size_t n, char *ret_uid, bool *ret_in_slice)
{
	static const char *const qos[] = { "kubepods", "kubepods-besteffort",
					   "kubepods-burstable" };
	const char *colon = memchr(c, ':', n), *u, *pod;
	const size_t slen = strlen(".slice");
	size_t ulen;

	*ret_in_slice = colon != NULL;
	if (!colon && n > 3 && n - 3 <= CGROUP_UID_MAX && !memcmp(c, "pod", 3) &&
	    all_of(c + 3, n - 3, "0123456789abcdefABCDEF-")) {
		memcpy(ret_uid, c + 3, n - 3);
		ret_uid[n - 3] = '\0';
		return true;
	}
	n = colon ? (size_t)(colon - c) : n;
	if (!ends_with(c, n, ".slice"))
		return false;
	/* the last "-pod" before ".slice": the uid holds no '-' here */
	pod = memrchr(c, '-', n - slen);
	if (!pod || n - slen - (pod - c) < 4 || memcmp(pod, "-pod", 4))
		return false;
	u = pod + 4;
	ulen = n - slen - (u - c);
	if (!ulen || ulen > CGROUP_UID_MAX || !all_of(u, ulen, "0123456789abcdefABCDEF_"))
		return false;
	for (size_t i = 0; i < sizeof(qos) / sizeof(qos[0]); i++) {
		if (!ends_with(c, pod - c, qos[i]))
			continue;
		for (size_t k = 0; k < ulen; k++)
			ret_uid[k] = u[k] == '_' ? '-' : u[k];
		ret_uid[ulen] = '\0';
		return true;
	}
	return false;
}

/*
 * The pod and container a cgroup path names: the first pod component (a
 * container can create cgroups only below its own, so anything that looks
 * like a pod deeper down is its own making), and the container component
 * right after it, or inside it for the "<slice>:<runtime>:<id>" form.
 * False when the path is in no pod's container.
 */
static bool path_pod(const char *path, size_t len, char *ret_uid, const char **ret_id)
{
	const char *p = path, *end = path + len;

	while (p < end) {
		const char *slash = memchr(p, '/', end - p), *next;
		size_t n = slash ? (size_t)(slash - p) : (size_t)(end - p);
		bool in_slice;

		if (!pod_component(p, n, ret_uid, &in_slice)) {
			p += n + (slash ? 1 : 0);
			continue;
		}
		if (in_slice) {
			*ret_id = component_id(p, n);
			return *ret_id != NULL;
		}
		if (!slash)
			return false;
		next = slash + 1;
		slash = memchr(next, '/', end - next);
		*ret_id = component_id(next, (slash ? slash : end) - next);
		return *ret_id != NULL;
	}
	return false;
}

struct pod_found {
	char uid[CGROUP_UID_MAX + 1];
	const char *id;
};

static int same_pod(const struct found *f, void *ctx)
{
	struct pod_found *pf = ctx;
	char uid[CGROUP_UID_MAX + 1];
	const char *id;

	if (!path_pod(f->path, f->plen, uid, &id))
		return 0;
	/* every hierarchy places a process in the same pod container */
	if (pf->id && (strcmp(pf->uid, uid) || memcmp(pf->id, id, CGROUP_ID_LEN)))
		return -EINVAL;
	pf->id = id;
	memcpy(pf->uid, uid, sizeof(uid));
	return 0;
}

int cgroup__parse_pod(const char *text, size_t len, char *ret_uid, char *ret_id)
{
	struct pod_found pf = {};
	int e = parse_lines(text, len, same_pod, &pf);

	if (e)
		return e;
	if (!pf.id)
		return -ENOENT;
	memcpy(ret_uid, pf.uid, sizeof(pf.uid));
	memcpy(ret_id, pf.id, CGROUP_ID_LEN);
	ret_id[CGROUP_ID_LEN] = '\0';
	return 0;
}

static bool is_scheme_char(char c, size_t i)
{
	bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');

	/* RFC 3986: a letter, then letters, digits, '+', '-', '.' */
	return alpha || (i && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'));
}

int cgroup__status_container_id(const char *container_id, char *ret_id)
{
	const char *id;
	size_t n = 0;

	if (!container_id)
		return -EINVAL;
	while (n <= MAX_SCHEME && is_scheme_char(container_id[n], n))
		n++;
	if (!n || n > MAX_SCHEME || strncmp(container_id + n, "://", 3))
		return -EINVAL;
	id = container_id + n + 3;
	if (strnlen(id, CGROUP_ID_LEN + 1) != CGROUP_ID_LEN || !is_id(id, CGROUP_ID_LEN))
		return -EINVAL;
	memcpy(ret_id, id, CGROUP_ID_LEN + 1);
	return 0;
}

/* Up to size bytes of file name under directory fd dir. 0 or -errno. */
static int read_at(int dir, const char *name, char *buf, size_t size, size_t *ret_len)
{
	int fd = openat(dir, name, O_RDONLY | O_CLOEXEC), ret = 0;
	size_t len = 0;

	if (fd < 0)
		return -errno;
	while (len < size) {
		ssize_t n = read(fd, buf + len, size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			ret = -errno;
		if (n <= 0)
			break;
		len += n;
	}
	close(fd);
	*ret_len = len;
	return ret;
}

int cgroup__parse_starttime(const char *text, size_t len, uint64_t *ret)
{
	const char *p = memrchr(text, ')', len), *end = text + len, *start = text;
	uint64_t v = 0;

	if (!p)
		return -EINVAL;
	p++;
	for (int field = 3; field <= 22; field++) {
		if (p >= end || *p++ != ' ')
			return -EINVAL;
		start = p;
		while (p < end && *p != ' ' && *p != '\n')
			p++;
		if (p == start)
			return -EINVAL;
	}
	for (const char *q = start; q < p; q++) {
		unsigned int d = *q - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*ret = v;
	return 0;
}

/* The start time in stat file name under directory fd dir. */
static int read_starttime_at(int dir, const char *name, uint64_t *ret)
{
	char buf[STAT_MAX];
	size_t len;
	int err = read_at(dir, name, buf, sizeof(buf), &len);

	if (err)
		return err;
	/* a real one is a few hundred bytes: a full buffer is not one */
	if (len == sizeof(buf))
		return -EINVAL;
	return cgroup__parse_starttime(buf, len, ret);
}

int cgroup__pid_starttime(const char *proc, pid_t pid, uint64_t *ret_starttime)
{
	char path[PATH_MAX];
	int ret;

	if (pid <= 0)
		return -EINVAL;
	ret = snprintf(path, sizeof(path), "%s/%d/stat", proc, (int)pid);
	if (ret < 0 || (size_t)ret >= sizeof(path))
		return -ENAMETOOLONG;
	/* one file: no directory to open first (every process, every scan) */
	ret = read_starttime_at(AT_FDCWD, path, ret_starttime);
	return ret == -ESRCH ? -ENOENT : ret;
}

/* Reads PROC/PID/cgroup and parses it, for a pod's container when ret_uid is not NULL. */
static int pid_read(const char *proc, pid_t pid, char *ret_uid, char *ret_id,
		    uint64_t *ret_starttime)
{
	char path[PATH_MAX], id[CGROUP_ID_LEN + 1], uid[CGROUP_UID_MAX + 1], *buf = NULL;
	uint64_t start = 0;
	int dir = -1, ret;
	size_t len;

	if (pid <= 0)
		return -EINVAL;
	ret = snprintf(path, sizeof(path), "%s/%d", proc, (int)pid);
	if (ret < 0 || (size_t)ret >= sizeof(path))
		return -ENAMETOOLONG;
	/* both files through one directory fd: it stays with this process, not its pid */
	dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		ret = -errno;
		goto cleanup;
	}
	buf = malloc(CGROUP_FILE_MAX + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto cleanup;
	}
	ret = read_at(dir, "cgroup", buf, CGROUP_FILE_MAX + 1, &len);
	if (!ret && len > CGROUP_FILE_MAX)
		ret = -EFBIG;
	if (!ret)
		ret = ret_uid ? cgroup__parse_pod(buf, len, uid, id)
			      : cgroup__parse_container_id(buf, len, id);
	if (!ret && ret_starttime)
		ret = read_starttime_at(dir, "stat", &start);
cleanup:
	free(buf);
	if (dir >= 0)
		close(dir);
	/* the files of a process that exited meanwhile fail with ESRCH */
	if (ret == -ESRCH)
		return -ENOENT;
	if (ret)
		return ret;
	memcpy(ret_id, id, sizeof(id));
	if (ret_uid)
		memcpy(ret_uid, uid, sizeof(uid));
	if (ret_starttime)
		*ret_starttime = start;
	return 0;
}

int cgroup__pid_container(const char *proc, pid_t pid, char *ret_id, uint64_t *ret_starttime)
{
	return pid_read(proc, pid, NULL, ret_id, ret_starttime);
}

int cgroup__pid_pod(const char *proc, pid_t pid, char *ret_uid, char *ret_id,
		    uint64_t *ret_starttime)
{
	return pid_read(proc, pid, ret_uid, ret_id, ret_starttime);
}

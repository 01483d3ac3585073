// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/overlay.h"
#include "base/rootpath.h"

#define MOUNTINFO_MAX (4 << 20)

/* Copies [s, s + n) into a new string, turning the kernel's \ooo escapes back
 * (not \000: no path holds a NUL, and it would cut the string short). */
static char *unescape(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7' &&
		    (s[i + 1] != '0' || s[i + 2] != '0' || s[i + 3] != '0')) {
			*o++ = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
				      (s[i + 3] - '0'));
			i += 3;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	return out;
}

/* The n-th space-separated field of line [s, end), or NULL. */
static const char *field(const char *s, const char *end, int n, size_t *ret_len)
{
	for (int i = 0; s < end; i++) {
		const char *e = memchr(s, ' ', end - s);

		e = e ? e : end;
		if (i == n) {
			*ret_len = e - s;
			return s;
		}
		s = e + 1;
	}
	return NULL;
}

/* Whether mount point mp (unescaped) holds path, and how long a prefix it is. */
static size_t covers(const char *mp, const char *path)
{
	size_t n = strlen(mp);

	if (!strcmp(mp, "/"))
		return 1;
	if (strncmp(mp, path, n) || (path[n] != '/' && path[n] != '\0'))
		return 0;
	return n;
}

/* Splits "lowerdir=a:b::c" (data-only layers after "::") into of->lowers. */
static int split_lowers(const char *s, size_t n, struct overlay_file *of)
{
	size_t start = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != ':')
			continue;
		if (i > start) {
			if (of->nlowers == OVERLAY_MAX_LAYERS)
				return -EINVAL;
			of->lowers[of->nlowers] = unescape(s + start, i - start);
			if (!of->lowers[of->nlowers++])
				return -ENOMEM;
		}
		start = i + 1;
	}
	return of->nlowers ? 0 : -EINVAL;
}

static int parse_options(const char *opts, size_t n, struct overlay_file *of)
{
	const char *end = opts + n;
	int e;

	while (opts < end) {
		const char *comma = memchr(opts, ',', end - opts);
		size_t len = (comma ? comma : end) - opts;

		if (len > 9 && !strncmp(opts, "lowerdir=", 9)) {
			e = split_lowers(opts + 9, len - 9, of);
			if (e)
				return e;
		} else if (len > 9 && !strncmp(opts, "upperdir=", 9)) {
			free(of->upper);
			of->upper = unescape(opts + 9, len - 9);
			if (!of->upper)
				return -ENOMEM;
		}
		opts += len + 1;
	}
	return of->nlowers ? 0 : -EINVAL;
}

struct mount_line {
	const char *root, *opts, *fstype;
	size_t nroot, nopts, nfstype;
	size_t depth;
	dev_t dev;
};

/* "major:minor" into a dev_t. */
static bool parse_dev(const char *s, size_t n, dev_t *ret)
{
	unsigned long v[2] = { 0, 0 };
	int k = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == ':' && k == 0 && i > 0) {
			k = 1;
		} else if (s[i] >= '0' && s[i] <= '9' && v[k] <= 0xfffffff) {
			v[k] = v[k] * 10 + (unsigned long)(s[i] - '0');
		} else {
			return false;
		}
	}
	if (k != 1 || s[n - 1] == ':')
		return false;
	*ret = makedev(v[0], v[1]);
	return true;
}

/* The line's fields after the optional ones ("-" separates them). */
static bool read_line(const char *s, const char *end, const char *path, struct mount_line *ret)
{
	const char *mp, *sep, *dev;
	size_t nmp = 0, nsep = 0, ndev = 0;
	char *mpu;
	int i;

	dev = field(s, end, 2, &ndev);
	ret->root = field(s, end, 3, &ret->nroot);
	mp = field(s, end, 4, &nmp);
	if (!dev || !parse_dev(dev, ndev, &ret->dev) || !ret->root || !mp || nmp > 4096)
		return false;
	for (i = 6; (sep = field(s, end, i, &nsep)) && !(nsep == 1 && *sep == '-'); i++)
		;
	ret->fstype = sep ? field(s, end, i + 1, &ret->nfstype) : NULL;
	ret->opts = sep ? field(s, end, i + 3, &ret->nopts) : NULL;
	if (!ret->fstype || !ret->opts)
		return false;
	mpu = unescape(mp, nmp);
	ret->depth = mpu ? covers(mpu, path) : 0;
	free(mpu);
	return ret->depth > 0;
}

static int fill(const struct mount_line *m, const char *path, size_t depth,
		struct overlay_file *ret)
{
	char *root = unescape(m->root, m->nroot);
	const char *rest = path + (depth == 1 ? 0 : depth), *inner;
	int n;

	if (!root)
		return -ENOMEM;
	while (*rest == '/')
		rest++;
	/* the mount's root inside the filesystem, without its leading / */
	for (inner = root; *inner == '/'; inner++)
		;
	n = snprintf(ret->rel, sizeof(ret->rel), "%s%s%s", inner, inner[0] && *rest ? "/" : "",
		     rest);
	free(root);
	if (n < 0 || (size_t)n >= sizeof(ret->rel))
		return -ENAMETOOLONG;
	return parse_options(m->opts, m->nopts, ret);
}

int overlay__parse(const char *text, size_t len, const char *path, struct overlay_file *ret)
{
	const char *s = text, *end = text + len;
	struct mount_line best = { 0 };
	int e;

	memset(ret, 0, sizeof(*ret));
	if (path[0] != '/' || memchr(text, '\0', len))
		return -EINVAL;
	while (s < end) {
		const char *nl = memchr(s, '\n', end - s);
		struct mount_line m = { 0 };

		nl = nl ? nl : end;
		/* the last of equally deep mounts is the one on top */
		if (read_line(s, nl, path, &m) && m.depth >= best.depth)
			best = m;
		s = nl + 1;
	}
	if (!best.depth)
		return -EINVAL;
	if (best.nfstype != 7 || strncmp(best.fstype, "overlay", 7))
		return -ENOENT;
	e = fill(&best, path, best.depth, ret);
	ret->dev = best.dev;
	if (e)
		overlay_file__free(ret);
	return e;
}

void overlay_file__free(struct overlay_file *of)
{
	if (!of)
		return;
	free(of->upper);
	for (size_t i = 0; i < of->nlowers; i++)
		free(of->lowers[i]);
	memset(of, 0, sizeof(*of));
}

static char *read_mountinfo(pid_t pid, size_t *ret_len)
{
	char path[64], *buf = malloc(MOUNTINFO_MAX + 1);
	size_t n = 0;
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || !buf) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while (n < MOUNTINFO_MAX && (r = read(fd, buf + n, MOUNTINFO_MAX - n)) > 0)
		n += r;
	close(fd);
	buf[n] = '\0';
	*ret_len = n;
	return buf;
}

static const char *const default_roots[] = { OVERLAY_DEFAULT_ROOTS };
static char *roots[OVERLAY_MAX_ROOTS];
static size_t nroots;
static bool roots_set;

int overlay__set_roots(const char *const *r, size_t n)
{
	char *copy[OVERLAY_MAX_ROOTS] = { 0 };

	if (n > OVERLAY_MAX_ROOTS)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!r[i] || r[i][0] != '/' || !(copy[i] = strdup(r[i]))) {
			bool nomem = r[i] && r[i][0] == '/';

			for (size_t k = 0; k < i; k++)
				free(copy[k]);
			return nomem ? -ENOMEM : -EINVAL;
		}
		/* "/a/b/" and "/a/b" are one root */
		for (size_t len = strlen(copy[i]); len > 1 && copy[i][len - 1] == '/'; len--)
			copy[i][len - 1] = '\0';
	}
	for (size_t i = 0; i < nroots; i++)
		free(roots[i]);
	memcpy(roots, copy, sizeof(roots));
	nroots = n;
	roots_set = true;
	return 0;
}

/* The layer root that dir lies below, and dir's path inside it; NULL when none. */
static const char *root_of(const char *dir, const char **ret_inside)
{
	const char *const *r = roots_set ? (const char *const *)roots : default_roots;
	size_t n = roots_set ? nroots : sizeof(default_roots) / sizeof(default_roots[0]);

	if (dir[0] != '/')
		return NULL;

	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(r[i]);

		if (len == 1) { /* "/": every directory */
			*ret_inside = dir + 1;
			return r[i];
		}
		if (!strncmp(dir, r[i], len) && dir[len] == '/') {
			*ret_inside = dir + len + 1;
			return r[i];
		}
	}
	return NULL;
}

/*
 * Layer dir (a host path from the container's mountinfo) below its layer
 * root, opened confined to that root: neither ".." nor a symlink in the
 * part the mountinfo names leads out of it. Returns an O_PATH fd; *ret_dev
 * is the root's device.
 */
static int open_layer_dir(const char *host_root, const char *dir, dev_t *ret_dev)
{
	char path[8192];
	const char *root, *inside;
	struct stat st;
	int rfd, dfd;

	root = root_of(dir, &inside);
	if (!root)
		return -EPERM;
	if (snprintf(path, sizeof(path), "%s%s", host_root, root) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	rfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	if (fstat(rfd, &st)) {
		dfd = -errno;
		goto cleanup;
	}
	*ret_dev = st.st_dev;
	dfd = rootpath__open(rfd, *inside ? inside : ".", O_PATH | O_DIRECTORY);
cleanup:
	close(rfd);
	return dfd;
}

/* path's file in layer dir (seen through host_root), if it is the same file as seen. */
static int open_in_layer(const char *host_root, const char *dir, const char *rel,
			 const struct stat *seen)
{
	struct stat st;
	dev_t root_dev = 0;
	int dfd, fd;

	dfd = open_layer_dir(host_root, dir, &root_dev);
	if (dfd < 0)
		return dfd;
	fd = rootpath__open_regular(dfd, rel, NULL);
	close(dfd);
	if (fd < 0)
		return fd;
	/* the inode number is compared on the root's filesystem only */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_dev != root_dev ||
	    st.st_ino != seen->st_ino || st.st_size != seen->st_size ||
	    st.st_mtim.tv_sec != seen->st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != seen->st_mtim.tv_nsec) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

int overlay__open_real(pid_t pid, const char *path, const char *host_root)
{
	struct overlay_file of;
	char seen_path[4200], *text;
	struct stat seen;
	size_t len;
	int e, fd = -ENOENT;

	snprintf(seen_path, sizeof(seen_path), "/proc/%d/root%s", pid, path);
	if (stat(seen_path, &seen))
		return -errno;
	text = read_mountinfo(pid, &len);
	if (!text)
		return -ENOENT;
	e = overlay__parse(text, len, path, &of);
	free(text);
	if (e)
		return e;
	/* the mount found must be the one the process sees the file on */
	if (of.dev != seen.st_dev) {
		overlay_file__free(&of);
		return -ENOENT;
	}
	if (of.upper)
		fd = open_in_layer(host_root, of.upper, of.rel, &seen);
	for (size_t i = 0; fd < 0 && i < of.nlowers; i++)
		fd = open_in_layer(host_root, of.lowers[i], of.rel, &seen);
	overlay_file__free(&of);
	return fd < 0 ? -ENOENT : fd;
}

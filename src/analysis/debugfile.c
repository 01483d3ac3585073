// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "analysis/debugfile.h"
#include "base/cancel.h"
#include "base/rootpath.h"

/* --debug-dir: set while the command line is parsed, read by every open after */
static char *dirs[DEBUGFILE_MAX_DIRS];
static size_t ndirs;

int debugfile__add_dir(const char *dir)
{
	size_t n = dir ? strlen(dir) : 0;

	if (!n || dir[0] != '/')
		return -EINVAL;
	if (ndirs == DEBUGFILE_MAX_DIRS)
		return -E2BIG;
	dirs[ndirs] = strdup(dir);
	if (!dirs[ndirs])
		return -ENOMEM;
	/* "dir/" and "dir" are one directory: paths are joined with a '/' */
	while (n > 1 && dirs[ndirs][n - 1] == '/')
		dirs[ndirs][--n] = 0;
	ndirs++;
	return 0;
}

void debugfile__clear_dirs(void)
{
	for (size_t i = 0; i < ndirs; i++)
		free(dirs[i]);
	ndirs = 0;
}

static bool is_hex_id(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n < 4 || n % 2)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

int debugfile__build_id_path(const char *dir, const char *build_id, char *buf, size_t len)
{
	int n;

	if (!is_hex_id(build_id))
		return -EINVAL;
	n = snprintf(buf, len, "%s%s.build-id/%.2s/%s.debug", dir,
		     dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", build_id, build_id + 2);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int debugfile__crc32(int fd, uint64_t max, uint32_t *ret_crc)
{
	unsigned char buf[65536];
	uLong crc = crc32(0, NULL, 0);
	uint64_t done = 0;
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), (off_t)done)) > 0) {
		if ((uint64_t)n > max - done)
			return -EFBIG;
		/* a gigabyte takes a second: the analyzer's time limit holds here too */
		if (cancel__requested())
			return -ECANCELED;
		crc = crc32(crc, buf, (uInt)n);
		done += (uint64_t)n;
	}
	if (n < 0)
		return -errno;
	*ret_crc = (uint32_t)crc;
	return 0;
}

struct elfbin *debugfile__open_fd(const struct elfbin *bin, int fd, const char *path)
{
	const char *want = elfbin__build_id(bin), *have;
	struct rw_error err;
	struct elfbin *d;
	struct stat st;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > DEBUGFILE_MAX_BYTES) {
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	d = elfbin__open_debug_fd(fd, path, &err);
	if (!d)
		return NULL;
	have = elfbin__build_id(d);
	if (is_hex_id(want) && is_hex_id(have) && strcmp(want, have)) {
		elfbin__free(d);
		errno = ESTALE;
		return NULL;
	}
	return d;
}

/* What a search needs: the binary, its link, where notes go. */
struct search {
	const struct elfbin *bin;
	const char *id; /* hex GNU build id, or NULL */
	const char *link;
	uint32_t crc;
	struct debugfile *ret;
	/* debugfile__locate: the first candidate's identity, unchecked */
	struct stat *locate;
};

/*
 * The debug file at path inside root_fd, when it is bin's: by build id (the
 * same id, which debugfile__open_fd checks), or by link (the CRC-32 the
 * link holds). A mismatched CRC is said in ret->note.
 */
static bool try_path(struct search *s, int root_fd, const char *path, bool by_link)
{
	struct elfbin *d;
	uint32_t crc = 0;
	int fd, e;

	fd = rootpath__open_regular(root_fd, path, NULL);
	if (fd < 0)
		return false;
	if (s->locate) {
		bool ok = !fstat(fd, s->locate);

		close(fd);
		return ok;
	}
	if (by_link) {
		e = debugfile__crc32(fd, DEBUGFILE_MAX_BYTES, &crc);
		if (e || crc != s->crc) {
			if (!s->ret->note[0] && e)
				snprintf(s->ret->note, sizeof(s->ret->note),
					 "ignored debug file %s: %s", path, strerror(-e));
			else if (!s->ret->note[0])
				snprintf(s->ret->note, sizeof(s->ret->note),
					 "ignored debug file %s: its CRC-32 is %08x, not the %08x "
					 "that .gnu_debuglink holds",
					 path, crc, s->crc);
			close(fd);
			return false;
		}
	}
	d = debugfile__open_fd(s->bin, fd, path);
	if (!d)
		return false;
	if (!by_link && !is_hex_id(elfbin__build_id(d))) {
		elfbin__free(d); /* under .build-id, a file without one is no match */
		return false;
	}
	s->ret->eb = d;
	snprintf(s->ret->path, sizeof(s->ret->path), "%s", path);
	return true;
}

/* .build-id/xx/yyyy.debug under the --debug-dir directories (node only) and /usr/lib/debug. */
static bool by_build_id(struct search *s, int root_fd, bool node)
{
	char path[DEBUGFILE_PATH_MAX];

	if (!s->id)
		return false;
	for (size_t i = 0; node && i < ndirs; i++)
		if (!debugfile__build_id_path(dirs[i], s->id, path, sizeof(path)) &&
		    try_path(s, root_fd, path, false))
			return true;
	return !debugfile__build_id_path(DEBUGFILE_DIR, s->id, path, sizeof(path)) &&
	       try_path(s, root_fd, path, false);
}

/* The link's name beside the binary, in .debug/ beside it, under each debug directory. */
static bool by_link(struct search *s, int root_fd, const char *bin_path, bool node)
{
	const char *slash = bin_path && bin_path[0] == '/' ? strrchr(bin_path, '/') : NULL;
	char path[DEBUGFILE_PATH_MAX];
	int dir, n;

	if (!s->link || !slash)
		return false;
	dir = (int)(slash - bin_path);
	for (size_t i = 0; i < 2 + (node ? ndirs : 0) + 1; i++) {
		if (i == 0)
			n = snprintf(path, sizeof(path), "%.*s/%s", dir, bin_path, s->link);
		else if (i == 1)
			n = snprintf(path, sizeof(path), "%.*s/.debug/%s", dir, bin_path, s->link);
		else
			n = snprintf(path, sizeof(path), "%s%.*s/%s",
				     i - 2 < ndirs ? dirs[i - 2] : DEBUGFILE_DIR, dir, bin_path,
				     s->link);
		/* a link naming the binary itself is no debug file */
		if (n > 0 && (size_t)n < sizeof(path) && strcmp(path, bin_path) &&
		    try_path(s, root_fd, path, true))
			return true;
	}
	return false;
}

/* The search of debugfile__find, in its order: the root's, then the node's. */
static int search(struct search *s, int root_fd, const char *bin_path)
{
	struct debugfile *ret = s->ret;
	int node_fd;
	bool found = false;

	s->id = is_hex_id(elfbin__build_id(s->bin)) ? elfbin__build_id(s->bin) : NULL;
	s->link = elfbin__debuglink(s->bin, &s->crc);
	if (!s->id && !s->link)
		return -ENOENT;
	if (root_fd >= 0) {
		found = by_build_id(s, root_fd, false) || by_link(s, root_fd, bin_path, false);
		ret->in_container = found;
	}
	if (found)
		return 0;
	/* the node's files, resolved as a container's are: "/" is the root */
	node_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (node_fd < 0)
		return -ENOENT;
	found = by_build_id(s, node_fd, true) ||
		(root_fd < 0 && by_link(s, node_fd, bin_path, true));
	close(node_fd);
	return found ? 0 : -ENOENT;
}

int debugfile__find(const struct elfbin *bin, int root_fd, const char *bin_path,
		    struct debugfile *ret)
{
	struct search s = { .bin = bin, .ret = ret };

	memset(ret, 0, sizeof(*ret));
	return search(&s, root_fd, bin_path);
}

int debugfile__locate(const struct elfbin *bin, int root_fd, const char *bin_path,
		      struct stat *ret_st)
{
	struct debugfile *unused = calloc(1, sizeof(*unused));
	struct search s = { .bin = bin, .ret = unused, .locate = ret_st };
	int e;

	if (!unused)
		return -ENOMEM;
	e = search(&s, root_fd, bin_path);
	free(unused);
	return e;
}

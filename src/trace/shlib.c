// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/overlay.h"
#include "base/rootpath.h"
#include "trace/shlib.h"

#define OVERLAYFS_MAGIC 0x794c7630
/* shlib__find opens at most this many libraries for a hint */
#define FIND_MAX_LIBS 64
/*
 * Library files a process's patterns may open and analyse, over its life:
 * the process chooses how many files it maps (tens of thousands), the
 * agent's work per process stays bounded.
 */
#define MAX_LIBS 256

static bool same_file(const struct procmap *a, const struct procmap *b)
{
	return a->inode == b->inode && a->dev_major == b->dev_major && a->dev_minor == b->dev_minor;
}

static int list_from(struct procmaps *maps, struct shlib_list *ret, struct rw_error *err)
{
	size_t n;
	const struct procmap *m = procmaps__maps(maps, &n);

	memset(ret, 0, sizeof(*ret));
	ret->maps = maps;
	ret->libs = calloc(n + 1, sizeof(*ret->libs));
	if (!ret->libs) {
		shlib_list__clear(ret);
		return rw_error_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const char *slash = strrchr(m[i].path, '/');
		bool dup = false;

		/* [vdso], anonymous code (JIT), a path the process cannot name */
		if (!m[i].inode || m[i].path[0] != '/' || !slash[1])
			continue;
		for (size_t k = 0; k < ret->n && !dup; k++)
			dup = same_file(ret->libs[k].map, &m[i]);
		if (dup)
			continue;
		ret->libs[ret->n++] = (struct shlib){ .name = slash + 1,
						      .path = m[i].path,
						      .map = &m[i] };
	}
	return 0;
}

int shlib_list__load(pid_t pid, struct shlib_list *ret, struct rw_error *err)
{
	struct procmaps *maps = procmaps__load(pid, err);

	if (!maps) {
		memset(ret, 0, sizeof(*ret));
		return -errno;
	}
	return list_from(maps, ret, err);
}

int shlib_list__parse(const char *text, size_t len, struct shlib_list *ret, struct rw_error *err)
{
	struct procmaps *maps = procmaps__parse(text, len, err);

	if (!maps) {
		memset(ret, 0, sizeof(*ret));
		return -ENOMEM;
	}
	return list_from(maps, ret, err);
}

void shlib_list__clear(struct shlib_list *l)
{
	procmaps__free(l->maps);
	free(l->libs);
	memset(l, 0, sizeof(*l));
}

bool shlib__matches(const struct shlib *l, const char *lib)
{
	return glob_match(lib, strchr(lib, '/') ? l->path : l->name);
}

/*
 * The mapped file itself: its inode, on the mapping's device. A file mapped
 * through an overlay shows the overlay's device with the layer file's inode
 * number: opened through the overlay, or as its layer file (layer), the
 * device is the overlay's or the layer's own.
 */
static int check_file(int fd, const struct shlib *lib, bool layer, struct rw_error *err)
{
	struct statfs sfs;
	struct stat st;

	if (fstat(fd, &st))
		return rw_error_set(err, errno, "failed to stat %s: %s", lib->path,
				    strerror(errno));
	if (!S_ISREG(st.st_mode))
		return rw_error_set(err, ENXIO, "%s is %s, not a regular file", lib->path,
				    rootpath__kind(st.st_mode));
	if (st.st_ino == lib->map->inode &&
	    (layer ||
	     (major(st.st_dev) == lib->map->dev_major && minor(st.st_dev) == lib->map->dev_minor) ||
	     (!fstatfs(fd, &sfs) && sfs.f_type == OVERLAYFS_MAGIC)))
		return 0;
	return rw_error_set(err, ESTALE,
			    "%s is no longer the file the process mapped (replaced since it was "
			    "loaded)",
			    lib->path);
}

int shlib__open(pid_t pid, const struct shlib *lib, const char *host_root, struct rw_error *err)
{
	char path[96];
	int fd = -1, rootfd, e;
	bool layer;

	/* a deleted library's path names another file now: only its mapping is it */
	if (host_root && !lib->map->deleted)
		fd = overlay__open_real(pid, lib->path, host_root);
	layer = fd >= 0;
	if (fd < 0 && !procmap__file_path(lib->map, pid, path, sizeof(path)))
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && lib->map->deleted)
		return rw_error_set(err, errno,
				    "%s was deleted after process %d loaded it, and "
				    "its mapping cannot be opened: %s",
				    lib->path, pid, strerror(errno));
	if (fd < 0) {
		snprintf(path, sizeof(path), "/proc/%d/root", pid);
		rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (rootfd < 0)
			return rw_error_set(err, errno, "failed to open %s: %s", path,
					    strerror(errno));
		fd = rootpath__open_regular(rootfd, lib->path, NULL);
		close(rootfd);
		if (fd < 0)
			return rw_error_set(err, -fd, "failed to open %s in process %d's root: %s",
					    lib->path, pid, strerror(-fd));
	}
	e = check_file(fd, lib, layer, err);
	if (e) {
		close(fd);
		return e;
	}
	return fd;
}

int shlib__open_map(pid_t pid, const struct procmap *map, const char *host_root,
		    struct rw_error *err)
{
	struct shlib lib = { .name = map->path, .path = map->path, .map = map };

	if (!map->inode || !map->path[0])
		return -ENOENT;
	return shlib__open(pid, &lib, host_root, err);
}

/* The executable's path as its mappings name it, to skip it. */
static void exe_path(pid_t pid, char *buf, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
}

/* Whether pattern matches a function of the file open as fd (read already, with an analyzer). */
static bool has_match(struct binary_cache *cache, struct analyzer *an, int fd, const char *pattern,
		      bool *ret_pending)
{
	struct binary_match m = { 0 };
	char path[64];
	struct binary *b;
	bool found;
	int e;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* read once for every pattern's hint: the file alone is asked for */
	switch (an ? analyzer__check(an, cache, path, NULL, 0, NULL) : ANALYSIS_READY) {
	case ANALYSIS_PENDING:
		if (ret_pending)
			*ret_pending = true;
		return false;
	case ANALYSIS_FAILED: return false;
	case ANALYSIS_READY: break;
	}
	b = binary__open(cache, path, NULL);
	if (!b)
		return false;
	e = binary__match(b, &pattern, 1, BINARY_DEFAULT_LIMIT, &m, NULL);
	found = e == -E2BIG || (!e && m.nfuncs);
	binary_match__clear(&m);
	binary__put(b);
	return found;
}

bool shlib__find(pid_t pid, struct binary_cache *cache, struct analyzer *an, const char *host_root,
		 const char *pattern, char *buf, size_t len, bool *ret_pending)
{
	struct shlib_list l;
	char exe[4096];
	bool found = false;

	if (shlib_list__load(pid, &l, NULL))
		return false;
	exe_path(pid, exe, sizeof(exe));
	for (size_t i = 0; i < l.n && i < FIND_MAX_LIBS && !found; i++) {
		int fd;

		if (!strcmp(l.libs[i].path, exe))
			continue;
		fd = shlib__open(pid, &l.libs[i], host_root, NULL);
		if (fd < 0)
			continue;
		found = has_match(cache, an, fd, pattern, ret_pending);
		close(fd);
		if (found)
			snprintf(buf, len, "%s", l.libs[i].name);
	}
	shlib_list__clear(&l);
	return found;
}

/* ---- a process's library targets ---- */

/* A pattern with a library part. */
struct lib_pattern {
	char *full; /* "libssl*:SSL_write" */
	char lib[SHLIB_MAX_NAME];
	const char *func; /* into full */
	bool matched;	  /* a function of some library */
	bool lib_seen;	  /* some library's name matched lib */
	/* no library matched lib: whether the executable has func (looked once) */
	bool exe_checked, in_exe;
	char *miss; /* the first matching library's "no function matches" */
};

struct shlib_procs {
	pid_t pid;
	uint64_t threshold_ns;
	struct lib_pattern *pats;
	size_t npats;
	struct procmap *seen; /* files looked at (their device and inode) */
	size_t nseen;
	bool too_many; /* more than MAX_LIBS files matched */
	char *errors;  /* files that could not be opened or analysed, "; "-separated */
	/* a library refused for the namespace's share of functions: tried again
	 * once the share has more room than the over_room it had then */
	char *over;
	size_t over_room;
	struct tracer_target **targets;
	size_t ntargets;
};

struct shlib_procs *shlib_procs__new(pid_t pid, const char *const *patterns, size_t npatterns,
				     uint64_t threshold_ns)
{
	struct shlib_procs *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return NULL;
	sp->pid = pid;
	sp->threshold_ns = threshold_ns;
	sp->pats = calloc(npatterns + 1, sizeof(*sp->pats));
	if (!sp->pats)
		goto nomem;
	for (size_t i = 0; i < npatterns; i++) {
		struct lib_pattern *p = &sp->pats[sp->npats];
		const char *func;

		if (!binary_pattern__library(patterns[i], p->lib, sizeof(p->lib), &func))
			continue;
		p->full = strdup(patterns[i]);
		if (!p->full)
			goto nomem;
		p->func = p->full + (func - patterns[i]);
		sp->npats++;
	}
	return sp;
nomem:
	shlib_procs__free(sp);
	return NULL;
}

void shlib_procs__free(struct shlib_procs *sp)
{
	if (!sp)
		return;
	for (size_t i = 0; i < sp->npats; i++) {
		free(sp->pats[i].full);
		free(sp->pats[i].miss);
	}
	free(sp->pats);
	free(sp->seen);
	free(sp->errors);
	free(sp->over);
	free(sp->targets);
	free(sp);
}

bool shlib_procs__wanted(const struct shlib_procs *sp)
{
	return sp && sp->npats;
}

size_t shlib_procs__ntargets(const struct shlib_procs *sp)
{
	return sp ? sp->ntargets : 0;
}

struct tracer_target *shlib_procs__target(const struct shlib_procs *sp, size_t i)
{
	return i < sp->ntargets ? sp->targets[i] : NULL;
}

/* Appends "; "-separated text to *list (dropped on ENOMEM). */
static void append(char **list, const char *text)
{
	char *next;

	if (asprintf(&next, "%s%s%s", *list ? *list : "", *list ? "; " : "", text) < 0)
		return;
	free(*list);
	*list = next;
}

static bool seen_before(const struct shlib_procs *sp, const struct procmap *m)
{
	for (size_t i = 0; i < sp->nseen; i++)
		if (same_file(&sp->seen[i], m))
			return true;
	return false;
}

/* 0, or -ENOMEM (the file is looked at again next time). */
static int seen_add(struct shlib_procs *sp, const struct procmap *m)
{
	struct procmap *more = realloc(sp->seen, (sp->nseen + 1) * sizeof(*more));

	if (!more)
		return -ENOMEM;
	sp->seen = more;
	sp->seen[sp->nseen] = *m;
	sp->seen[sp->nseen++].path = NULL;
	return 0;
}

static char *miss_text(const struct lib_pattern *p, const char *lib,
		       const struct binary_unmatched *u)
{
	char hint[256] = "", *out;
	size_t len = 0;

	for (size_t s = 0; u && s < u->nsuggestions && len < sizeof(hint); s++)
		len += snprintf(hint + len, sizeof(hint) - len, "%s%s", s ? ", " : "",
				u->suggestions[s]);
	if (asprintf(&out, "no function matches '%s' in %s%s%s%s", p->func, lib,
		     len ? " (did you mean: " : "", hint, len ? ")" : "") < 0)
		return NULL;
	return out;
}

/* The functions of file fd that the patterns naming lib match: into funcs. */
static size_t match_lib(struct shlib_procs *sp, struct binary_cache *cache, const char *path,
			const struct shlib *lib, const char **funcs)
{
	struct rw_error e = { "" };
	struct binary *b = binary__open(cache, path, &e);
	size_t n = 0;
	char *msg;

	if (!b) {
		if (asprintf(&msg, "%s: %s", lib->path, e.msg) >= 0)
			append(&sp->errors, msg), free(msg);
		return 0;
	}
	for (size_t i = 0; i < sp->npats; i++) {
		struct lib_pattern *p = &sp->pats[i];
		struct binary_match m = { 0 };

		if (!shlib__matches(lib, p->lib))
			continue;
		if (binary__match(b, &p->func, 1, BINARY_DEFAULT_LIMIT, &m, &e)) {
			if (asprintf(&msg, "'%s' in %s: %s", p->full, lib->name, e.msg) >= 0)
				append(&sp->errors, msg), free(msg);
		} else if (m.nfuncs) {
			p->matched = true;
			funcs[n++] = p->func;
		} else if (!p->miss) {
			p->miss = miss_text(p, lib->name, m.nunmatched ? &m.unmatched[0] : NULL);
		}
		binary_match__clear(&m);
	}
	binary__put(b);
	return n;
}

/* The tracer names the file by the descriptor it was given: name the library. */
static void name_file(struct rw_error *err, const char *fdpath, const char *name)
{
	char out[sizeof(err->msg)];
	const char *at = strstr(err->msg, fdpath);

	if (!at)
		return;
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - err->msg), err->msg, name,
		 at + strlen(fdpath));
	snprintf(err->msg, sizeof(err->msg), "%s", out);
}

/*
 * Whether the analyzer has read lib (open as path) for the patterns naming
 * it: LIB_READ; LIB_PENDING to come back; LIB_FAILED with the error listed.
 */
enum { LIB_READ, LIB_PENDING, LIB_FAILED };

static int lib_read(struct shlib_procs *sp, struct analyzer *an, struct binary_cache *cache,
		    const char *path, const struct shlib *lib)
{
	const char **funcs = calloc(sp->npats + 1, sizeof(*funcs));
	struct rw_error e = { "" };
	size_t n = 0;
	char *msg;
	int state;

	if (!funcs)
		return LIB_READ; /* the tracer reads it */
	for (size_t i = 0; i < sp->npats; i++)
		if (shlib__matches(lib, sp->pats[i].lib))
			funcs[n++] = sp->pats[i].func;
	state = analyzer__check(an, cache, path, funcs, n, &e);
	free(funcs);
	if (state == ANALYSIS_PENDING)
		return LIB_PENDING;
	if (state == ANALYSIS_READY)
		return LIB_READ;
	name_file(&e, path, lib->path);
	if (asprintf(&msg, "%s: %s", lib->name, e.msg) >= 0)
		append(&sp->errors, msg), free(msg);
	return LIB_FAILED;
}

/* Attaches the patterns naming lib to it, within *room functions (less what
 * it takes). 1 when a target was added, 2 when lib is still being read, 3
 * when it would pass the namespace's share (sp->over says so). */
static int attach_lib(struct shlib_procs *sp, struct tracer *t, struct binary_cache *cache,
		      struct analyzer *an, const char *host_root, const struct shlib *lib,
		      shlib_target_fn fn, void *ctx, size_t *room)
{
	const char **funcs = calloc(sp->npats + 1, sizeof(*funcs));
	struct tracer_target **more, *tt;
	struct rw_error e = { "" };
	char path[64], *msg;
	size_t n;
	int fd, ret = 0;

	if (!funcs)
		return -ENOMEM;
	fd = shlib__open(sp->pid, lib, host_root, &e);
	if (fd < 0) {
		append(&sp->errors, e.msg);
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	switch (an ? lib_read(sp, an, cache, path, lib) : LIB_READ) {
	case LIB_PENDING: ret = 2; goto out;
	case LIB_FAILED: goto out;
	}
	n = match_lib(sp, cache, path, lib, funcs);
	if (!n)
		goto out;
	more = realloc(sp->targets, (sp->ntargets + 1) * sizeof(*more));
	if (!more) {
		ret = -ENOMEM;
		goto out;
	}
	sp->targets = more;
	tt = tracer__add_bounded(t, sp->pid, path, funcs, n, sp->threshold_ns, *room, &e);
	if (!tt && errno == EDQUOT) {
		name_file(&e, path, lib->path);
		if (asprintf(&msg,
			     "%s: %s: not traced, over the namespace's share of functions "
			     "(--max-functions-per-namespace, the chart's "
			     "maxFunctionsPerNamespace); tried again when the share has room",
			     lib->name, e.msg) >= 0) {
			free(sp->over);
			sp->over = msg;
		}
		sp->over_room = *room;
		ret = 3;
		goto out;
	}
	if (!tt) {
		name_file(&e, path, lib->path);
		if (asprintf(&msg, "%s: %s", lib->name, e.msg) >= 0)
			append(&sp->errors, msg), free(msg);
		goto out;
	}
	*room -= *room == SIZE_MAX ? 0 : tracer_target__nfuncs(tt);
	if (fn && fn(tt, lib->name, ctx)) {
		tracer__remove(t, tt);
		ret = -ENOMEM;
		goto out;
	}
	sp->targets[sp->ntargets++] = tt;
	ret = 1;
out:
	if (fd >= 0)
		close(fd);
	free(funcs);
	return ret;
}

/*
 * A pattern whose library the process has not mapped may name a function
 * linked into the executable itself (a library built in): looked for once,
 * so that the error can say what to write instead.
 */
static void check_exe(struct shlib_procs *sp, struct binary_cache *cache, struct analyzer *an)
{
	char path[64];
	int fd = -1;

	for (size_t k = 0; k < sp->npats; k++) {
		struct lib_pattern *p = &sp->pats[k];
		bool pending = false;

		if (p->lib_seen || p->exe_checked)
			continue;
		if (fd < 0) {
			snprintf(path, sizeof(path), "/proc/%d/exe", sp->pid);
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
			if (fd < 0)
				return;
		}
		p->in_exe = has_match(cache, an, fd, p->func, &pending);
		p->exe_checked = !pending;
	}
	if (fd >= 0)
		close(fd);
}

static char *unmatched_text(const struct shlib_procs *sp)
{
	char *out = NULL, *msg;

	for (size_t i = 0; i < sp->npats; i++) {
		const struct lib_pattern *p = &sp->pats[i];

		if (p->matched)
			continue;
		if (!p->lib_seen && p->in_exe) {
			if (asprintf(&msg,
				     "no library the process has mapped matches '%s' (in '%s'), "
				     "but its executable has %s: write '%s'",
				     p->lib, p->full, p->func, p->func) < 0)
				continue;
		} else if (!p->lib_seen) {
			if (asprintf(&msg,
				     "no library the process has mapped matches '%s' (in '%s')",
				     p->lib, p->full) < 0)
				continue;
		} else if (p->miss) {
			msg = strdup(p->miss);
		} else if (asprintf(&msg, "no function matches '%s'", p->full) < 0) {
			continue;
		}
		if (msg)
			append(&out, msg);
		free(msg);
	}
	if (sp->errors)
		append(&out, sp->errors);
	if (sp->over)
		append(&out, sp->over);
	return out;
}

int shlib_procs__update(struct shlib_procs *sp, struct tracer *t, struct binary_cache *cache,
			struct analyzer *an, const char *host_root, size_t room, shlib_target_fn fn,
			void *ctx, char **ret_unmatched, struct rw_error *err)
{
	struct shlib_list l;
	int e, added = 0;
	/* a refused library waits until its namespace's share has more room */
	bool wait = sp->over && room <= sp->over_room;

	*ret_unmatched = NULL;
	if (!sp->npats)
		return 0;
	if (!wait) {
		free(sp->over);
		sp->over = NULL;
	}
	e = shlib_list__load(sp->pid, &l, err);
	if (e)
		return e;
	for (size_t i = 0; i < l.n; i++) {
		bool wanted = false;

		for (size_t k = 0; k < sp->npats; k++) {
			if (shlib__matches(&l.libs[i], sp->pats[k].lib))
				wanted = sp->pats[k].lib_seen = true;
		}
		if (!wanted || seen_before(sp, l.libs[i].map) || wait)
			continue;
		if (sp->nseen >= MAX_LIBS) {
			if (!sp->too_many)
				append(&sp->errors,
				       "the process maps more than 256 files that library "
				       "patterns match: the others are left out");
			sp->too_many = true;
			break;
		}
		if (seen_add(sp, l.libs[i].map))
			continue;
		e = attach_lib(sp, t, cache, an, host_root, &l.libs[i], fn, ctx, &room);
		if (e < 0) {
			rw_error_set(err, -e, "out of memory");
			shlib_list__clear(&l);
			return e;
		}
		if (e == 2 || e == 3) {
			sp->nseen--; /* being read, or refused: looked at again */
			continue;
		}
		added += e;
	}
	shlib_list__clear(&l);
	check_exe(sp, cache, an);
	*ret_unmatched = unmatched_text(sp);
	return added;
}

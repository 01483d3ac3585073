// SPDX-License-Identifier: MIT
/*
 * Opening a binary, the cache of open binaries, and the accessors.
 * binary_impl.h holds what the pieces share.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gelf.h>

#include "analysis/binary.h"
#include "analysis/binary_impl.h"
#include "analysis/debugfile.h"
#include "base/cancel.h"
#include "base/clock.h"
#include "base/rootpath.h"
#include "base/demangle.h"
#include "analysis/disasm.h"
#include "analysis/dwarfinfo.h"
#include "analysis/elfbin.h"
#include "analysis/gopclntab.h"

/* ---- lifecycle and cache ---- */

/* An adopted analysis is kept this long for its caller to open it, whatever
 * the byte bound (the count bound still applies). */
#define ADOPTED_FRESH_NS (60 * NS_PER_S)

static void binary_free(struct binary *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->nfns; i++) {
		bin_analysis__free(&b->fns[i]);
		free(b->fns[i].extra);
	}
	for (size_t i = 0; i < b->nanon; i++) {
		bin_analysis__free(b->anon[i]);
		free(b->anon[i]->extra);
		free(b->anon[i]);
	}
	free(b->anon);
	free(b->cold);
	free(b->fns);
	free(b->by_addr);
	while (b->memo) {
		struct match_memo *mm = b->memo;

		b->memo = mm->next;
		bin_memo__free(mm);
	}
	free(b->keys);
	for (size_t i = 0; i < b->nnames; i++)
		free(b->names[i]);
	free(b->names);
	gopclntab__free(b->pcln);
	dwarfinfo__free(b->dwarf);
	dwarfinfo__free(b->go_dwarf);
	elfbin__free(b->dbg);
	free(b->dbg_path);
	free(b->dbg_note);
	elfbin__free(b->eb);
	free(b->go_version);
	free(b->path);
	free(b);
}

static bool same_file(const struct binary *b, const struct stat *st)
{
	return b->dev == st->st_dev && b->ino == st->st_ino && b->size == st->st_size &&
	       b->mtime.tv_sec == st->st_mtim.tv_sec && b->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       b->ctime.tv_sec == st->st_ctim.tv_sec && b->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static struct file_id file_id_of(const struct stat *st)
{
	return (struct file_id){ .dev = st->st_dev,
				 .ino = st->st_ino,
				 .size = st->st_size,
				 .mtime = st->st_mtim,
				 .ctime = st->st_ctim,
				 .set = true };
}

static bool same_id(const struct file_id *a, const struct file_id *b)
{
	if (!a->set || !b->set)
		return a->set == b->set;
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

size_t binary__bytes(const struct binary *b)
{
	size_t n = sizeof(*b) + b->cap * sizeof(*b->fns) + b->nkeys * sizeof(*b->keys) +
		   b->nanon * (sizeof(*b->anon) + sizeof(**b->anon)) +
		   b->nby_addr * sizeof(*b->by_addr) + b->ncold * sizeof(*b->cold) +
		   b->names_cap * sizeof(*b->names);

	for (size_t i = 0; i < b->nnames; i++)
		n += strlen(b->names[i]) + 1;
	return n + elfbin__bytes(b->eb) + elfbin__bytes(b->dbg) + dwarfinfo__bytes(b->dwarf) +
	       dwarfinfo__bytes(b->go_dwarf) + gopclntab__bytes(b->pcln);
}

/*
 * Whether b counts against the byte bound, and may go for it: no one uses
 * it, and it is not an analysis read off the caller's thread that the
 * caller has not opened yet (binary_cache__adopt): dropped at once, it
 * would be read again where the caller opens it, on its main loop.
 */
static bool unused(const struct binary *b, uint64_t now)
{
	return !b->refs && now >= b->fresh_until_ns;
}

/* The bytes of the analyses no one uses. */
static size_t unused_bytes(const struct binary_cache *c, uint64_t now)
{
	size_t n = 0;

	for (const struct binary *b = c->head; b; b = b->next)
		n += unused(b, now) ? b->bytes : 0;
	return n;
}

/* The bytes of the analyses that are used (or about to be), but for except's. */
static size_t held_bytes(const struct binary_cache *c, const struct binary *except, uint64_t now)
{
	size_t n = 0;

	for (const struct binary *b = c->head; b; b = b->next)
		n += b != except && !unused(b, now) ? b->bytes : 0;
	return n;
}

/* Whether the cache holds more than one of its byte bounds allows. */
static bool over_bytes(const struct binary_cache *c, uint64_t now)
{
	size_t free_ = unused_bytes(c, now);

	return (c->max_bytes && free_ > c->max_bytes) ||
	       (c->max_total && free_ && held_bytes(c, NULL, now) + free_ > c->max_total);
}

static void cache_evict(struct binary_cache *c)
{
	uint64_t now = clock__mono_ns();

	for (;;) {
		bool by_count = c->count > c->max;
		struct binary **pp, **victim = NULL;

		if (!by_count && !over_bytes(c, now))
			return;
		/* the count bound takes any analysis no one uses, the byte bound unused() ones */
		for (pp = &c->head; *pp; pp = &(*pp)->next)
			if ((by_count ? !(*pp)->refs : unused(*pp, now)) &&
			    (!victim || (*pp)->last_use < (*victim)->last_use))
				victim = pp;
		if (!victim)
			return; /* everything is in use */
		struct binary *v = *victim;

		*victim = v->next;
		c->count--;
		c->evicted++;
		binary_free(v);
	}
}

/* n bytes for a message: "38.2 MiB", "12 KiB". */
static const char *size_text(char buf[32], size_t n)
{
	if (n >= 1024 * 1024)
		snprintf(buf, 32, "%.1f MiB", (double)n / (1024 * 1024));
	else
		snprintf(buf, 32, "%zu KiB", (n + 1023) / 1024);
	return buf;
}

/*
 * 0 when taking an analysis of bytes (0: one not read yet) into use keeps
 * those in use but for b within the cache's total; else -ENOSPC, said.
 */
static int room_for(struct binary_cache *c, const struct binary *b, size_t bytes,
		    struct rw_error *err)
{
	size_t held = c && c->max_total ? held_bytes(c, b, clock__mono_ns()) : 0;
	char b1[32], b2[32], b3[32];

	if (!c || !c->max_total || (bytes ? held + bytes <= c->max_total : held < c->max_total))
		return 0;
	c->refused++;
	if (!bytes)
		return rw_error_set(err, ENOSPC,
				    "not analysed: the analyses of the files traced now hold %s, "
				    "all that %s allows; it is when fewer are traced, or with a "
				    "larger bound",
				    size_text(b1, held), c->total_name);
	return rw_error_set(err, ENOSPC,
			    "not traced: its analysis holds %s, and those of the files traced "
			    "now %s, over the %s that %s allows; it is when fewer are traced, "
			    "or with a larger bound",
			    size_text(b1, bytes), size_text(b2, held), size_text(b3, c->max_total),
			    c->total_name);
}

#define NREFUSED (sizeof(((struct binary_cache *)0)->refused_files) / sizeof(struct refused_file))

/* The entry of refused_files for the file st describes, or NULL. */
static struct refused_file *refused_file(struct binary_cache *c, const struct stat *st)
{
	for (size_t i = 0; i < NREFUSED; i++) {
		struct refused_file *r = &c->refused_files[i];

		if (r->bytes && r->dev == st->st_dev && r->ino == st->st_ino &&
		    r->size == st->st_size && r->mtime.tv_sec == st->st_mtim.tv_sec &&
		    r->mtime.tv_nsec == st->st_mtim.tv_nsec)
			return r;
	}
	return NULL;
}

/* Remembers that b's file was refused, with the bytes its analysis holds. */
static void remember_refused(struct binary_cache *c, const struct binary *b)
{
	struct stat st = {
		.st_dev = b->dev, .st_ino = b->ino, .st_size = b->size, .st_mtim = b->mtime
	};
	struct refused_file *r = refused_file(c, &st);

	if (!r)
		r = &c->refused_files[c->refused_next++ % NREFUSED];
	*r = (struct refused_file){ b->dev, b->ino, b->size, b->mtime, b->bytes };
}

int binary_cache__full(struct binary_cache *c, const struct stat *st, struct rw_error *err)
{
	const struct refused_file *r = c && st ? refused_file(c, st) : NULL;

	return room_for(c, NULL, r ? r->bytes : 0, err);
}

/* What a path that is not a regular file names, for an error. */
static const char *file_kind(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a file";
}

/*
 * Whether path, resolved inside root_fd (-1: the node's "/"), is the file
 * want describes: the same inode, on the same device or seen through an
 * overlay (its own device, major 0, with the layer file's inode number: the
 * agent opens a container's executable as the image layer's file).
 */
static bool same_file_at(int root_fd, const char *path, const struct stat *want)
{
	int node_fd = root_fd < 0 ? open("/", O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
	int fd = rootpath__open(root_fd < 0 ? node_fd : root_fd, path, O_PATH);
	struct stat st;
	bool same = fd >= 0 && !fstat(fd, &st) && st.st_ino == want->st_ino &&
		    (st.st_dev == want->st_dev || !major(st.st_dev));

	if (fd >= 0)
		close(fd);
	if (node_fd >= 0)
		close(node_fd);
	return same;
}

/*
 * An exe link's text is the path from our root when the process's root is
 * under it (a chroot): "/srv/root/bin/x" for "/bin/x" in root "/srv/root".
 */
static void strip_root_prefix(const char *root, char *buf)
{
	char top[DEBUGFILE_PATH_MAX];
	ssize_t n = readlink(root, top, sizeof(top) - 1);

	if (n <= 1 || top[0] != '/')
		return; /* "/": the same as ours, or a root we cannot name */
	top[n] = 0;
	if (!strncmp(buf, top, (size_t)n) && buf[n] == '/')
		memmove(buf, buf + n, strlen(buf + n) + 1);
}

/*
 * Where the file opened as path lies, for finding its debug file beside it:
 * inside a process's root ("/proc/PID/root/usr/bin/x", or /proc/PID/exe and
 * its link's text: *ret_root_fd that root, and "/usr/bin/x") or on the node
 * (-1, and the text of a /proc link such as /proc/self/fd/N, else the real
 * path). A link's text is what its process sees, so the path found must
 * lead to the file opened (want) where it is looked up. False when it cannot be
 * told (then the debug file is looked for by build id only).
 */
static bool file_place(const char *path, const struct stat *want, int *ret_root_fd, char *buf,
		       size_t len)
{
	char root[64] = "";
	int pid_len = 0, exe_len = 0;
	ssize_t n;

	*ret_root_fd = -1;
	sscanf(path, "/proc/%*[0-9]/root/%n", &pid_len);
	sscanf(path, "/proc/%*[0-9]/exe%n", &exe_len);
	if (pid_len > 0) {
		snprintf(root, sizeof(root), "%.*s", pid_len - 1, path);
		if (snprintf(buf, len, "/%s", path + pid_len) >= (int)len)
			return false;
	} else if (!strncmp(path, "/proc/", 6)) {
		if (exe_len > 0 && !path[exe_len])
			snprintf(root, sizeof(root), "%.*sroot", exe_len - 3, path);
		n = readlink(path, buf, len - 1);
		if (n <= 0 || buf[0] != '/')
			return false;
		buf[n] = 0;
	} else if (!realpath(path, buf)) { /* buf holds PATH_MAX bytes */
		return false;
	}
	if (root[0] && (*ret_root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return false;
	if (exe_len > 0)
		strip_root_prefix(root, buf);
	return same_file_at(*ret_root_fd, buf, want);
}

/*
 * The view of stripped file b for a process that sees it as path (st: the
 * file opened): the first debug file its search meets (debugfile.h). A
 * file with a symbol table of its own has one view for everyone.
 */
static struct file_id view_of(const struct binary *b, const char *path, const struct stat *st)
{
	char place[DEBUGFILE_PATH_MAX];
	struct file_id id = { .set = false };
	struct stat dst;
	int root_fd = -1;

	if (elfbin__has_symtab(b->eb))
		return id;
	if (!file_place(path, st, &root_fd, place, sizeof(place)))
		place[0] = 0;
	if (!debugfile__locate(b->eb, root_fd, place[0] ? place : NULL, &dst))
		id = file_id_of(&dst);
	if (root_fd >= 0)
		close(root_fd);
	return id;
}

/*
 * Whether cached b answers for the file at path (st: the file opened): the
 * same file, and for a stripped one the same view (view_of, computed once
 * per lookup into *view, *known set); path NULL: any view.
 */
static bool cache_answers(const struct binary *b, const char *path, const struct stat *st,
			  struct file_id *view, bool *known)
{
	if (!same_file(b, st))
		return false;
	if (!path || elfbin__has_symtab(b->eb))
		return true;
	if (!*known) {
		*view = view_of(b, path, st);
		*known = true;
	}
	return same_id(&b->view, view);
}

/* debug_path, named by the caller, as the debug file of b (checked as one found is). */
static struct elfbin *open_named_debug_file(struct binary *b, const char *debug_path)
{
	int fd = open(debug_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	return fd < 0 ? NULL : debugfile__open_fd(b->eb, fd, debug_path);
}

/*
 * Whether debug file dbg (at dbg_path) agrees with b's code: every function
 * it names starts at an instruction of the file's own code, decoded from a
 * start the file itself names (binary__vouch). A debug file is found by a
 * build id or a link name that anyone may copy: one of another build, or
 * forged in a container's root, names functions inside instructions, and a
 * probe there would change what the traced program computes. 0; -EILSEQ
 * with the note to keep in *ret_note; -ENOMEM.
 */
static int debug_file_agrees(struct binary *b, const struct elfbin *dbg, const char *dbg_path,
			     char **ret_note)
{
	size_t n, bad = 0;
	const struct elfbin_sym *syms = elfbin__syms(dbg, &n);
	uint64_t *addrs = calloc(n ? n : 1, sizeof(*addrs));
	struct rw_error err = { "" };
	int e = 0;

	*ret_note = NULL;
	if (!addrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		addrs[i] = syms[i].addr;
	e = binary__disagrees(b, addrs, n, &bad, &err);
	if (e == -EILSEQ &&
	    asprintf(ret_note,
		     "ignored debug file %s: it does not match the executable: function %.128s: %s",
		     dbg_path, syms[bad].name, err.msg) < 0) {
		*ret_note = NULL;
		e = -ENOMEM;
	}
	free(addrs);
	return e == -EILSEQ || e == -ENOMEM ? e : 0;
}

/*
 * A stripped file's separate debug file (debugfile.h), if one is found, or
 * the one debug_path names (when not NULL), when it agrees with the file's
 * code (debug_file_agrees). 0 or -ENOMEM.
 */
static int open_debug_file(struct binary *b, const char *path, const struct stat *st,
			   const char *debug_path)
{
	struct debugfile *df;
	char place[DEBUGFILE_PATH_MAX];
	int root_fd = -1, ret;

	if (elfbin__has_symtab(b->eb))
		return 0;
	df = calloc(1, sizeof(*df));
	if (!df)
		return -ENOMEM;
	if (debug_path) {
		df->eb = open_named_debug_file(b, debug_path);
		snprintf(df->path, sizeof(df->path), "%s", debug_path);
	} else {
		b->view = view_of(b, path, st);
		if (!file_place(path, st, &root_fd, place, sizeof(place)))
			place[0] = 0; /* by build id only */
		debugfile__find(b->eb, root_fd, place[0] ? place : NULL, df);
	}
	ret = df->eb ? debug_file_agrees(b, df->eb, df->path, &b->dbg_note) : 0;
	if (ret == -EILSEQ) {
		elfbin__free(df->eb);
		df->eb = NULL;
		ret = 0;
	}
	if (df->eb) {
		b->dbg = df->eb;
		b->dbg_path = strdup(df->path);
	}
	if (df->note[0] && !b->dbg_note)
		b->dbg_note = strdup(df->note);
	if (!ret)
		ret = (b->dbg && !b->dbg_path) || (df->note[0] && !b->dbg_note) ? -ENOMEM : 0;
	if (root_fd >= 0)
		close(root_fd);
	free(df);
	return ret;
}

/* The cached analysis that answers for the file at path (cache_answers), with a reference. */
static struct binary *cache_find(struct binary_cache *cache, const char *path,
				 const struct stat *st, bool *ret_refused, struct rw_error *err)
{
	struct file_id view;
	bool view_known = false;

	for (struct binary *b = cache ? cache->head : NULL; b; b = b->next) {
		if (cache_answers(b, path, st, &view, &view_known)) {
			if (!b->refs && room_for(cache, b, b->bytes, err)) {
				remember_refused(cache, b);
				b->fresh_until_ns = 0; /* refused: it may go */
				cache_evict(cache);
				*ret_refused = true;
				return NULL;
			}
			b->refs++;
			b->last_use = ++cache->clock;
			b->fresh_until_ns = 0;
			cache->hits++;
			return b;
		}
	}
	return NULL;
}

/* Puts b, just read, into cache: b, or NULL (ENOSPC) when there is no room to use it. */
static struct binary *cache_insert(struct binary_cache *cache, struct binary *b,
				   struct rw_error *err)
{
	b->cache = cache;
	b->next = cache->head;
	cache->head = b;
	cache->count++;
	cache->misses++;
	b->last_use = ++cache->clock;
	if (room_for(cache, b, b->bytes, err)) {
		remember_refused(cache, b);
		b->refs = 0; /* kept, unused, for when there is room */
		cache_evict(cache);
		errno = ENOSPC;
		return NULL;
	}
	cache_evict(cache);
	return b;
}

static struct binary *open_binary(struct binary_cache *cache, const char *path, const char *origin,
				  const char *debug_path, struct rw_error *err)
{
	bool refused = false;
	struct binary *b;
	struct stat st;
	int fd, ret;

	/* O_NONBLOCK: opening a FIFO for reading waits for a writer (for ever) */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		ret = errno;
		rw_error_set(err, ret, "failed to open %s: %s", path, strerror(ret));
		errno = ret;
		return NULL;
	}
	if (fstat(fd, &st)) {
		ret = errno;
		rw_error_set(err, ret, "failed to stat %s: %s", path, strerror(ret));
		close(fd);
		errno = ret;
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		rw_error_set(err, EINVAL,
			     "%s is not a regular file (%s): name an executable or library", path,
			     file_kind(st.st_mode));
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	b = cache_find(cache, origin ? origin : path, &st, &refused, err);
	if (b || refused || binary_cache__full(cache, &st, err)) {
		close(fd);
		errno = b ? 0 : ENOSPC;
		return b;
	}
	b = calloc(1, sizeof(*b));
	if (!b || !(b->path = strdup(path))) {
		free(b);
		close(fd);
		rw_error_set(err, ENOMEM, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	b->refs = 1;
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	b->size = st.st_size;
	b->mtime = st.st_mtim;
	b->ctime = st.st_ctim;
	b->eb = elfbin__open_fd(fd, path, err);
	if (!b->eb) {
		ret = errno;
		binary_free(b);
		errno = ret;
		return NULL;
	}
	ret = open_debug_file(b, origin ? origin : path, &st, debug_path);
	if (ret)
		ret = rw_error_set(err, -ret, "out of memory");
	else
		ret = bin_index__build(b, err);
	if (ret) {
		binary_free(b);
		errno = -ret;
		return NULL;
	}
	b->bytes = binary__bytes(b);
	return cache ? cache_insert(cache, b, err) : b;
}

struct binary *binary__open(struct binary_cache *cache, const char *path, struct rw_error *err)
{
	return open_binary(cache, path, NULL, NULL, err);
}

struct binary *binary__open_as(struct binary_cache *cache, const char *path, const char *origin,
			       struct rw_error *err)
{
	return open_binary(cache, path, origin, NULL, err);
}

struct binary *binary__open_with_debug_file(const char *path, const char *debug_path,
					    struct rw_error *err)
{
	return open_binary(NULL, path, NULL, debug_path, err);
}

void binary__put(struct binary *b)
{
	if (!b)
		return;
	if (--b->refs > 0)
		return;
	if (!b->cache) {
		binary_free(b);
		return;
	}
	/* what it read since, for the functions analysed */
	b->bytes = binary__bytes(b);
	cache_evict(b->cache);
}

struct binary_cache *binary_cache__new(size_t max_entries)
{
	struct binary_cache *c = calloc(1, sizeof(*c));

	if (c)
		c->max = max_entries ? max_entries : 1;
	return c;
}

void binary_cache__free(struct binary_cache *c)
{
	struct binary *b, *next;

	if (!c)
		return;
	for (b = c->head; b; b = next) {
		next = b->next;
		b->next = NULL;
		if (b->refs)
			b->cache = NULL; /* its holder frees it */
		else
			binary_free(b);
	}
	free(c);
}

bool binary_cache__has(const struct binary_cache *c, int fd, const char *name)
{
	return binary_cache__answers(c, fd, name, NULL, 0, 0);
}

bool binary_cache__answers(const struct binary_cache *c, int fd, const char *name,
			   const char *const *patterns, size_t npatterns, size_t limit)
{
	struct file_id view;
	bool view_known = false;
	struct stat st;

	if (!c || fstat(fd, &st))
		return false;
	for (const struct binary *b = c->head; b; b = b->next)
		if (cache_answers(b, name, &st, &view, &view_known))
			return !npatterns || bin_memo__find(b, patterns, npatterns, limit);
	return false;
}

void binary_cache__adopt(struct binary_cache *c, struct binary *b)
{
	struct stat st = { .st_dev = b->dev,
			   .st_ino = b->ino,
			   .st_size = b->size,
			   .st_mtim = b->mtime,
			   .st_ctim = b->ctime };

	for (struct binary *o = c->head; o; o = o->next) {
		if (same_file(o, &st) && same_id(&o->view, &b->view)) {
			/* analysed twice: the first stays, with the second's answers */
			bin_memo__import(o, b);
			binary__put(b);
			return;
		}
	}
	b->cache = c;
	b->next = c->head;
	c->head = b;
	c->count++;
	b->last_use = ++c->clock;
	b->fresh_until_ns = clock__mono_ns() + ADOPTED_FRESH_NS;
	b->refs--; /* the cache holds it now, unused */
	cache_evict(c);
}

void binary_cache__set_max_bytes(struct binary_cache *c, size_t max_bytes)
{
	c->max_bytes = max_bytes;
	cache_evict(c);
}

void binary_cache__set_max_total(struct binary_cache *c, size_t max_total, const char *name)
{
	c->max_total = max_total;
	snprintf(c->total_name, sizeof(c->total_name), "%s", name ? name : "the cache's bound");
	cache_evict(c);
}

void binary_cache__use(const struct binary_cache *c, struct binary_cache_use *ret)
{
	uint64_t now = clock__mono_ns();

	memset(ret, 0, sizeof(*ret));
	for (const struct binary *b = c->head; b; b = b->next) {
		ret->count++;
		ret->bytes += b->bytes;
		ret->unused += unused(b, now);
		ret->unused_bytes += unused(b, now) ? b->bytes : 0;
	}
	ret->evicted = c->evicted;
	ret->refused = c->refused;
}

void binary_cache__stats(const struct binary_cache *c, size_t *ret_hits, size_t *ret_misses)
{
	*ret_hits = c->hits;
	*ret_misses = c->misses;
}

const char *binary__path(const struct binary *b)
{
	return b->path;
}

const char *binary__go_version(const struct binary *b)
{
	return b->go_version;
}

const char *binary__machine(const struct binary *b)
{
	return elfbin__machine(b->eb) == EM_AARCH64 ? "aarch64" : "x86-64";
}

enum disasm_arch binary__arch(const struct binary *b)
{
	return elfbin__machine(b->eb) == EM_AARCH64 ? DISASM_AARCH64 : DISASM_X86_64;
}

bool binary__native(const struct binary *b)
{
#if defined(__x86_64__)
	return elfbin__machine(b->eb) == EM_X86_64;
#elif defined(__aarch64__)
	return elfbin__machine(b->eb) == EM_AARCH64;
#else
	return false;
#endif
}

const char *binary__build_id(const struct binary *b)
{
	return elfbin__build_id(b->eb);
}

bool binary__stripped(const struct binary *b)
{
	return !elfbin__has_symtab(b->eb);
}

bool binary__stripped_note(const struct binary *b, char *buf, size_t len)
{
	const char *id = binary__build_id(b), *sep = b->dbg_note ? "; " : "";
	char where[DEBUGFILE_PATH_MAX];
	int n;

	if (!binary__stripped(b) || binary__is_go(b) || b->dbg)
		return false;
	/* a debug file found and refused: that is what to fix, said first */
	if (b->dbg_note && !strncmp(b->dbg_note, "ignored debug file ", 19)) {
		snprintf(buf, len, "the file is stripped; %s", b->dbg_note);
		return true;
	}
	/* what to install, or what --debug-dir's directory should hold */
	if (!id || debugfile__build_id_path("", id, where, sizeof(where)))
		snprintf(where, sizeof(where), "%s", "the file its .gnu_debuglink names");
	else
		memmove(where, where + 1, strlen(where)); /* "/.build-id/..." */
	if (!b->nfns)
		n = snprintf(
			buf, len,
			"the file is stripped: it has no symbol table and exports no function; "
			"functions of the shared libraries it loads are named as LIB:PATTERN "
			"('libc.so.6:malloc'); its own are in its debug file, not found: install "
			"its debug symbols, or give --debug-dir DIR holding %s (the agent: "
			"the chart's debugDirs, directories of the node)",
			where);
	else
		n = snprintf(
			buf, len,
			"the file is stripped: only the %zu functions it exports were searched, "
			"not its static ones; no debug file of it was found: install its debug "
			"symbols, or give --debug-dir DIR holding %s (the agent: the chart's "
			"debugDirs, directories of the node)",
			b->nfns, where);
	if (n >= 0 && (size_t)n < len && *sep)
		snprintf(buf + n, len - (size_t)n, "%s%s", sep, b->dbg_note);
	return true;
}

const char *binary__debug_file(const struct binary *b)
{
	return b->dbg_path;
}

const char *binary__debug_note(const struct binary *b)
{
	return b->dbg_note;
}

bool binary__is_go(const struct binary *b)
{
	return b->pcln != NULL;
}

size_t binary__nfuncs(const struct binary *b)
{
	return b->ncanon;
}

/* SPDX-License-Identifier: MIT */
/*
 * Separate debug files, found as gdb finds them: by GNU build id under
 * .build-id/xx/yyyy.debug of each debug directory (those --debug-dir names,
 * then /usr/lib/debug), then by the name .gnu_debuglink holds, beside the
 * binary, in .debug/ beside it and under each debug directory followed by
 * the binary's directory, accepted only when its CRC-32 is the one the link
 * holds. A debug file is as hostile as the binary: opened inside a root
 * (rootpath.h: no symlink leads out), regular files only, non-blocking,
 * DEBUGFILE_MAX_BYTES at most, and its build id must be the binary's when
 * both have one. Its symbols and DWARF name the binary's functions; its
 * code sections are empty (NOBITS): code and file offsets stay the binary's.
 */
#ifndef RETWATCH_DEBUGFILE_H
#define RETWATCH_DEBUGFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "analysis/elfbin.h"

#define DEBUGFILE_DIR "/usr/lib/debug"
/* a debug file larger than this is not read (nor its CRC computed) */
#define DEBUGFILE_MAX_BYTES (1ULL << 30)
/* --debug-dir options at most */
#define DEBUGFILE_MAX_DIRS 16
#define DEBUGFILE_PATH_MAX 4096

/*
 * Adds dir (an absolute path on the node) to the directories searched
 * before /usr/lib/debug, for every binary opened from now on. 0, -EINVAL
 * (not absolute), -E2BIG (DEBUGFILE_MAX_DIRS already) or -ENOMEM.
 */
int debugfile__add_dir(const char *dir);
void debugfile__clear_dirs(void);

/*
 * dir/.build-id/xx/yyyy.debug for a build id in lowercase hex (xx: its first
 * byte, yyyy: the rest). 0, -EINVAL (not hex, or shorter than 2 bytes) or
 * -ENAMETOOLONG.
 */
int debugfile__build_id_path(const char *dir, const char *build_id, char *buf, size_t len);

/*
 * The CRC-32 .gnu_debuglink holds (zlib's, ISO-HDLC) of the first max bytes
 * of fd: 0, -EFBIG when the file is longer, -ECANCELED (cancel.h), or -errno.
 */
int debugfile__crc32(int fd, uint64_t max, uint32_t *ret_crc);

struct debugfile {
	struct elfbin *eb;		     /* the debug file, or NULL */
	char path[DEBUGFILE_PATH_MAX];	     /* where it was found, as its root sees it */
	bool in_container;		     /* found under the container's root, not the node's */
	char note[DEBUGFILE_PATH_MAX + 256]; /* why a candidate was ignored, or "" */
};

/*
 * Finds the debug file of bin (a stripped binary) at bin_path, as seen from
 * root_fd (an O_PATH directory fd of a container's root, such as
 * /proc/PID/root; -1 for the node's own files). In a container its root is
 * searched first, then the node's, by build id only (a debuglink names a
 * file by a name anyone may choose). 0 with ret->eb set (to free with
 * elfbin__free), or -ENOENT (ret->note may say which candidate was ignored
 * and why).
 */
int debugfile__find(const struct elfbin *bin, int root_fd, const char *bin_path,
		    struct debugfile *ret);

/*
 * The first file debugfile__find would look at for bin (at bin_path, seen
 * from root_fd), whether or not it is bin's debug file: its identity in
 * *ret_st. What a process would be named by depends on it alone, so two
 * processes whose searches meet the same first file are named alike
 * (binary.h: the cache's key). Opens it, reads nothing. 0, -ENOENT (no
 * file there) or -ENOMEM.
 */
int debugfile__locate(const struct elfbin *bin, int root_fd, const char *bin_path,
		      struct stat *ret_st);

/*
 * Opens fd (taken over) as the debug file of bin: the checks of
 * debugfile__find after the file is opened (an ELF file, its build id the
 * binary's when both have one). NULL with errno set.
 */
struct elfbin *debugfile__open_fd(const struct elfbin *bin, int fd, const char *path);

#endif

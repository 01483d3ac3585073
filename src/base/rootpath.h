/* SPDX-License-Identifier: MIT */
/*
 * Opening a file as a container sees it. The container's root
 * (/proc/PID/root) is full of paths its owner chose: a symlink there may
 * point at "/etc/shadow", "../../../..", or a procfs magic link such as
 * /proc/self/root, and following it from the host would open the host's
 * file. The kernel resolves the path instead (openat2(2), Linux 5.6), with
 * the root as "/" for every step.
 */
#ifndef RETWATCH_ROOTPATH_H
#define RETWATCH_ROOTPATH_H

#include <sys/types.h>

/*
 * Opens path (absolute or relative, as the container sees it) inside the
 * directory root_fd (e.g. an O_PATH fd of /proc/PID/root) so that neither
 * "..", absolute symlinks nor magic links lead out of it: openat2(2) with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS. flags as for open(2) (O_CLOEXEC is
 * always added); O_CREAT and O_TMPFILE are refused (-EINVAL): this is for
 * reading. Returns an fd or -errno: -ELOOP for a magic link on the way,
 * -ENOSYS where the kernel has no openat2 (a seccomp filter that does not
 * know it may answer -EPERM instead).
 */
int rootpath__open(int root_fd, const char *path, int flags);

/*
 * Opens path inside root_fd as rootpath__open does, read-only, and only when
 * it is a regular file. A container can put a FIFO there (whose open blocks
 * until a writer comes: forever, on the agent's main loop), a socket or a
 * device node (whose open runs a driver): the type is checked on an O_PATH
 * handle, before anything is opened for reading, and the file is then
 * reopened through that handle (the same inode, whatever is renamed
 * meanwhile), non-blocking. Returns an fd or -errno; -ENXIO when the file is
 * not a regular one, and then *ret_mode (when not NULL) holds its type for
 * rootpath__kind(); *ret_mode is 0 on other errors.
 */
int rootpath__open_regular(int root_fd, const char *path, mode_t *ret_mode);

/* What a file of this mode is, for messages: "a FIFO", "a directory", ... */
const char *rootpath__kind(mode_t mode);

#endif

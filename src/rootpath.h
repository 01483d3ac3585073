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

#endif

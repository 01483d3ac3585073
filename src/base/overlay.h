/* SPDX-License-Identifier: MIT */
/*
 * Under overlayfs, the file a uprobe really lands on. Each container sees
 * its own overlay mount of the image (its own device number), but a uprobe
 * attaches to the layer's file beneath, which every container of the image
 * shares. Attaching through the overlay once per container would put several
 * probes on one file; attaching through the layer's file lets the tracer
 * attach once per real file.
 */
#ifndef RETWATCH_OVERLAY_H
#define RETWATCH_OVERLAY_H

#include <stddef.h>
#include <sys/types.h>

#define OVERLAY_MAX_LAYERS 128

/* Where a path of a process lives, when its mount is an overlay. */
struct overlay_file {
	char *upper;			  /* upperdir, or NULL */
	char *lowers[OVERLAY_MAX_LAYERS]; /* lowerdirs, topmost first */
	size_t nlowers;
	char rel[4096]; /* the path inside the mount's root, without a leading / */
	dev_t dev;	/* the mount's device (mountinfo's major:minor) */
};

/*
 * Where the container runtimes keep their image layers: layer files are
 * opened only below these directories (of the host), whatever a mountinfo
 * line names. The defaults are containerd's (and k3s's) overlayfs
 * snapshotter, CRI-O's and Podman's storage, and Docker's overlay2.
 */
#define OVERLAY_DEFAULT_ROOTS                                                   \
	"/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots", \
		"/var/lib/rancher/k3s/agent/containerd/"                        \
		"io.containerd.snapshotter.v1.overlayfs/snapshots",             \
		"/var/lib/containers/storage/overlay", "/var/lib/docker/overlay2"
#define OVERLAY_MAX_ROOTS 16

/*
 * Replaces the layer roots (absolute paths, without a trailing /; copied).
 * 0, -EINVAL (a path not absolute, or more than OVERLAY_MAX_ROOTS), -ENOMEM.
 */
int overlay__set_roots(const char *const *roots, size_t n);

/*
 * Finds the mount holding path in the text of a /proc/PID/mountinfo file
 * (the longest mount point that is a prefix of path, the last such mount
 * when stacked) and, when it is an overlay, its layers (unescaped) and the
 * path inside it. 0; -ENOENT when the mount is not an overlay; -EINVAL when
 * the text is malformed. The text is the process's own to shape: bounded.
 * ret->dev is the mount's device, for the caller to check against the file.
 */
int overlay__parse(const char *text, size_t len, const char *path, struct overlay_file *ret);
void overlay_file__free(struct overlay_file *of);

/*
 * Opens the layer's file of path (canonical, as process pid sees it) on an
 * overlay: the upper layer's if the container changed it, else the topmost
 * lower layer that has it, opened inside the layer (a symlink there cannot
 * lead out) through host_root (the host's root as the caller sees it, such
 * as "/proc/1/root", or "/"), and only when the mount found is the one the
 * process sees the file on (its device), the layer lies below a layer root
 * (overlay__set_roots()) and is opened confined to it, the file is on the
 * root's own filesystem (its device) and is the same file the process sees
 * (inode number, size and modification time). Returns an fd, or -ENOENT
 * (not on an overlay, or no such layer file), -errno.
 */
int overlay__open_real(pid_t pid, const char *path, const char *host_root);

#endif

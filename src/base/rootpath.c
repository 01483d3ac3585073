// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/rootpath.h"

/* openat2 fails with EAGAIN when a rename or mount raced the lookup */
#define EAGAIN_RETRIES 8

int rootpath__open(int root_fd, const char *path, int flags)
{
	struct open_how how = {
		/* an int's bits, not its sign extension: openat2 refuses unknown high bits */
		.flags = (uint64_t)(unsigned int)(flags | O_CLOEXEC),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	if (!path || (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		return -EINVAL;
	for (int i = 0; i < EAGAIN_RETRIES; i++) {
		fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno != EAGAIN)
			break;
	}
	return -errno;
}

int rootpath__open_regular(int root_fd, const char *path, mode_t *ret_mode)
{
	char self[64];
	struct stat st;
	int pfd, fd;

	if (ret_mode)
		*ret_mode = 0;
	/* O_PATH opens nothing: no FIFO waits for a writer, no driver runs */
	pfd = rootpath__open(root_fd, path, O_PATH);
	if (pfd < 0)
		return pfd;
	if (fstat(pfd, &st)) {
		fd = -errno;
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		if (ret_mode)
			*ret_mode = st.st_mode & S_IFMT;
		fd = -ENXIO;
		goto cleanup;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
cleanup:
	close(pfd);
	return fd;
}

const char *rootpath__kind(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "a regular file";
	case S_IFDIR: return "a directory";
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFLNK: return "a symbolic link";
	default: return "not a regular file";
	}
}

// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rootpath.h"

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

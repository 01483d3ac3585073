// SPDX-License-Identifier: MIT
#include "base/openfiles.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

int open_files__read(struct open_files *ret)
{
	struct rlimit rl;
	struct dirent *de;
	DIR *d;

	memset(ret, 0, sizeof(*ret));
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	ret->soft = rl.rlim_cur;
	ret->hard = rl.rlim_max;
	d = opendir("/proc/self/fd");
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			ret->open++;
	closedir(d);
	/* the directory's own descriptor was listed too */
	if (ret->open)
		ret->open--;
	return 0;
}

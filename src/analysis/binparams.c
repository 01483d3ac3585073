// SPDX-License-Identifier: MIT
/* A function's parameters at its entry probe (params.h), kept with its analysis. */
#include <errno.h>
#include <stdlib.h>

#include "analysis/binary.h"
#include "analysis/binary_impl.h"
#include "analysis/elfbin.h"
#include "analysis/params.h"

/* The DWARF describing fi: a native file's index loaded it; a Go file's is opened now. */
static const struct dwarfinfo *dwarf_for(struct binary *b, const struct func_info *fi)
{
	if (b->dwarf || !fi->go)
		return b->dwarf;
	if (!b->go_dwarf_tried) {
		b->go_dwarf_tried = true;
		if (dwarfinfo__open(elfbin__elf(b->dbg ? b->dbg : b->eb), &b->go_dwarf))
			b->go_dwarf = NULL;
	}
	return b->go_dwarf;
}

const struct func_params *binary__params(struct binary *b, const struct func_info *fi, int64_t site,
					 struct rw_error *err)
{
	struct func_info *mfi = (struct func_info *)fi; /* b owns it: the answer is kept there */
	struct params_at at = { .entry = fi->address,
				.site = fi->address + (uint64_t)site,
				.clobbers = site ? fi->entry_clobbers : 0,
				.a64 = binary__arch(b) == DISASM_AARCH64 };
	const struct dwarfinfo *di;
	struct func_params *fp;
	int ret;

	if (fi->params && fi->params->site == site)
		return fi->params;
	fp = malloc(sizeof(*fp));
	if (!fp) {
		rw_error_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	di = dwarf_for(b, fi);
	ret = di ? params__from_dwarf(di, &at, fi->go, fp, err) : -ENOENT;
	if (ret == -ENOENT)
		params__raw(fp, fi->go, at.a64,
			    di ? "its DWARF does not describe the function: the argument registers"
			       : "the file has no DWARF (stripped, or built without -g): the "
				 "argument registers");
	else if (ret) {
		free(fp);
		return NULL;
	}
	fp->site = site;
	free(mfi->params);
	mfi->params = fp;
	return fp;
}

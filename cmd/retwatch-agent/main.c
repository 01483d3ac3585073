// SPDX-License-Identifier: MIT
#include <stdio.h>

int main(void)
{
	fprintf(stderr, "retwatch-agent: not built yet\n");
	return 1;
}

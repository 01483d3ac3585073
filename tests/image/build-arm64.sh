#!/usr/bin/env bash
# Build the node agent's image for linux/arm64 without running arm64 code
# on this machine (no emulator registered with the kernel): the Dockerfile's
# runtime packages for arm64 with their dependencies, unpacked (not
# installed: tests/kernels/vm.py sysroot arm64 --runtime), this machine's CA
# bundle (the same on every architecture), and the programs of `make arm64`,
# committed from scratch with the Dockerfile's entrypoint and labels.
# Prints build output, then on its last line the image's name.
#
#   tests/image/build-arm64.sh [IMAGE]  # default localhost/retwatch-agent:test-arm64
#
# With the amd64 image (tests/image/build.sh) it makes one manifest list
# (tests/image/test_arm64_image.py; `buildah manifest push --all` publishes
# both under one name). Needs root, buildah, and `make arm64` done.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
image=${1:-localhost/retwatch-agent:test-arm64}
buildah=(buildah ${RETWATCH_BUILDAH_STORAGE:+--storage-driver "$RETWATCH_BUILDAH_STORAGE"})
bins=(retwatch-agent retwatch kubectl-retwatch)

for b in "${bins[@]}"; do
	if [[ ! -x $repo/build-arm64/$b ]]; then
		echo "build-arm64.sh: build-arm64/$b is missing (make arm64)" >&2
		exit 1
	fi
done
root=$(python3 "$repo/tests/kernels/vm.py" sysroot arm64 --runtime)
version=$(sed -n 's/^#define RETWATCH_VERSION "\(.*\)"/\1/p' "$repo/cmd/retwatch-agent/main.c")
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)

ctr=$("${buildah[@]}" from --arch arm64 --os linux scratch)
trap '"${buildah[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
# like the Dockerfile's runtime stage, without documentation
for d in etc lib usr/lib; do
	"${buildah[@]}" copy --quiet "$ctr" "$root/$d" "/$d" >/dev/null
done
"${buildah[@]}" copy --quiet "$ctr" /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ >/dev/null
for b in "${bins[@]}"; do
	"${buildah[@]}" copy --quiet --chmod 0755 "$ctr" "$repo/build-arm64/$b" /usr/local/bin/ >/dev/null
done
"${buildah[@]}" config --arch arm64 --os linux \
	--entrypoint '["/usr/local/bin/retwatch-agent"]' --cmd '' \
	--label org.opencontainers.image.title=retwatch-agent \
	--label "org.opencontainers.image.description=retwatch node agent: latency of functions in pods, by eBPF uprobes" \
	--label "org.opencontainers.image.version=$version" \
	--label "org.opencontainers.image.revision=$revision" \
	--label "org.opencontainers.image.base.name=debian bookworm arm64 packages" \
	"$ctr"
"${buildah[@]}" commit --quiet "$ctr" "$image" >&2
echo "$image"

#!/usr/bin/env bash
# Build the node agent's image from the Dockerfile with buildah, without a
# registry or a Docker daemon: both stages start from the local base that
# tests/image/base.sh makes (cached). Prints build output, then on its last
# line the image's name.
#
#   tests/image/build.sh [IMAGE]    # default localhost/retwatch-agent:test
#
# Needs root and buildah, debootstrap (scripts/deps.sh installs them).
# RETWATCH_BUILDAH_STORAGE=vfs picks a storage driver where overlay cannot
# work (a store on overlayfs, as inside a container); it must match the
# store's existing driver.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
image=${1:-localhost/retwatch-agent:test}
buildah=(buildah ${RETWATCH_BUILDAH_STORAGE:+--storage-driver "$RETWATCH_BUILDAH_STORAGE"})

base=$(bash "$repo/tests/image/base.sh")
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)

# --isolation chroot: RUN steps need neither runc nor CNI, so a build leaves
#   no bridge or firewall rule on the host, and they share the host's network
#   (the only way to the Debian mirror) and its /sys, where `make` reads
#   /sys/kernel/btf/vmlinux. The default, oci, also works here as root, but
#   its private network adds a CNI bridge (cni-podman0) to the host.
# --network host: says so explicitly, for builders that would honour it.
# --layers: every step is cached in containers storage, so an unchanged tree
#   rebuilds in seconds and a source edit reuses the dependency layer.
# --pull=never: the bases are local; no registry is asked about them.
# Storage: containers storage's default, overlay on this machine's ext4
#   (native diff): vfs would copy the whole build stage (clang, llvm) into
#   every step's layer, gigabytes and minutes more.
"${buildah[@]}" bud \
	--isolation chroot --network host --layers --pull=never \
	--build-arg BUILD_BASE="$base" --build-arg BASE="$base" \
	--build-arg REVISION="$revision" \
	--file "$repo/Dockerfile" --tag "$image" "$repo" >&2
echo "$image"

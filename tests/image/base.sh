#!/usr/bin/env bash
# Make a Debian bookworm base image in containers storage without a registry:
# debootstrap --variant=minbase, trimmed like debian:bookworm-slim, imported
# with buildah. Prints the image's name.
#
#   tests/image/base.sh      # -> localhost/retwatch-base:bookworm-<key>
#
# The key hashes this script, the architecture and the mirrors, so a changed
# recipe makes a new base. The rootfs tarball is cached in
# ${RETWATCH_CACHE:-$HOME/.cache/retwatch}/image/ and the image reused from
# containers storage: only the first run debootstraps (about a minute).
#
# RETWATCH_DEBIAN_MIRROR and RETWATCH_DEBIAN_SECURITY name the mirrors; the
# defaults are those of this project's machines. Needs root, debootstrap and
# buildah (scripts/deps.sh installs them).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
suite=bookworm
arch=$(dpkg --print-architecture)
mirror=${RETWATCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${RETWATCH_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
cache=${RETWATCH_CACHE:-$HOME/.cache/retwatch}/image
buildah=(buildah ${RETWATCH_BUILDAH_STORAGE:+--storage-driver "$RETWATCH_BUILDAH_STORAGE"})

key=$(printf '%s\n' "$suite" "$arch" "$mirror" "$security" | cat - "$here/base.sh" |
	sha256sum | cut -c1-12)
image=localhost/retwatch-base:$suite-$key
tarball=$cache/base-$suite-$key.tar

mkdir -p "$cache"
# Two test runs at once must not debootstrap into the same directory.
exec 9>"$cache/base.lock"
flock 9

if "${buildah[@]}" inspect --type image "$image" >/dev/null 2>&1; then
	echo "$image"
	exit 0
fi

tmp=
ctr=
cleanup() {
	[[ -z $ctr ]] || "${buildah[@]}" rm "$ctr" >/dev/null 2>&1 || true
	[[ -z $tmp ]] || rm -rf "$tmp"
}
trap cleanup EXIT

if [[ ! -s $tarball ]]; then
	echo "base: debootstrap $suite ($arch) from $mirror" >&2
	tmp=$(mktemp -d "$cache/base-XXXXXX")
	root=$tmp/root
	if ! debootstrap --variant=minbase --arch="$arch" "$suite" "$root" "$mirror" \
		>"$tmp/debootstrap.log" 2>&1; then
		tail -n 20 "$tmp/debootstrap.log" >&2
		echo "base: debootstrap failed (log above)" >&2
		exit 1
	fi

	# The same mirrors as the host. The mirror serves a fixed snapshot whose
	# Release files are past their Valid-Until date: apt would refuse them.
	rm -f "$root/etc/apt/sources.list"
	cat >"$root/etc/apt/sources.list.d/debian.sources" <<-EOF
		Types: deb
		URIs: $mirror
		Suites: $suite $suite-updates
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

		Types: deb
		URIs: $security
		Suites: $suite-security
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	cat >"$root/etc/apt/apt.conf.d/99retwatch-mirror" <<-EOF
		Acquire::Check-Valid-Until "false";
		Acquire::Check-Date "false";
	EOF
	# As in debian:bookworm-slim: no downloaded .debs kept, no translations,
	# no documentation but copyrights; images built on it stay small.
	cat >"$root/etc/apt/apt.conf.d/99retwatch-slim" <<-EOF
		DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
		APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
		Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
		Acquire::Languages "none";
	EOF
	cat >"$root/etc/dpkg/dpkg.cfg.d/retwatch-slim" <<-EOF
		path-exclude /usr/share/doc/*
		path-include /usr/share/doc/*/copyright
		path-exclude /usr/share/info/*
		path-exclude /usr/share/locale/*
		path-exclude /usr/share/man/*
		path-exclude /usr/share/groff/*
		path-exclude /usr/share/lintian/*
	EOF
	find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
	find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
	rm -rf "${root:?}"/usr/share/{info,locale,man,groff,lintian}/* \
		"${root:?}"/var/cache/apt/archives/*.deb "${root:?}"/var/cache/apt/*.bin \
		"${root:?}"/var/lib/apt/lists/* "${root:?}"/var/log/* "${root:?}"/dev/*
	# The builder and the runtime provide these; keep the host's out.
	: >"$root/etc/resolv.conf"
	echo localhost >"$root/etc/hostname"

	tar --numeric-owner -C "$root" -cf "$tmp/base.tar" .
	mv "$tmp/base.tar" "$tarball"
	# A new key supersedes the older bases.
	find "$cache" -maxdepth 1 -name "base-$suite-*.tar" ! -path "$tarball" -delete
fi

echo "base: importing $tarball as $image" >&2
ctr=$("${buildah[@]}" from scratch)
"${buildah[@]}" add "$ctr" "$tarball" / >/dev/null
"${buildah[@]}" config --os linux --arch "$arch" --cmd '["/bin/bash"]' "$ctr"
"${buildah[@]}" commit --quiet --rm "$ctr" "$image" >/dev/null
ctr=
# Older bases' images: in use by a build's cache, they stay until pruned.
"${buildah[@]}" images --format '{{.Name}}:{{.Tag}}' |
	grep "^localhost/retwatch-base:$suite-" | grep -vFx "$image" |
	xargs -r "${buildah[@]}" rmi >/dev/null 2>&1 || true
echo "$image"

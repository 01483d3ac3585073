#!/usr/bin/env bash
# Install every build and test dependency of retwatch on Debian bookworm.
# Idempotent: when everything is present it only checks and returns.
#
#   scripts/deps.sh           everything `make test` and `make demo` need
#   scripts/deps.sh --build   only what `make all` needs (the image's build
#                             stage: no test tools, pytest or Go)
set -euo pipefail

build_pkgs=(
	make gcc pkg-config clang llvm bpftool
	libbpf-dev libelf-dev libdw-dev libzydis-dev zlib1g-dev
	libcurl4-openssl-dev libcjson-dev libyaml-dev libmicrohttpd-dev libgnutls28-dev
	libiberty-dev
)
pkgs=(
	"${build_pkgs[@]}" clang-format-14 binutils file time
	runc busybox-static libcap2-bin buildah debootstrap prometheus
	libclang-rt-14-dev
	golang-1.19-go
	g++
	containerd containernetworking-plugins iproute2 openssl
	libssl3 # the libssl.so.3 Debian's nginx (below) loads: SSL_write traced in it
	libc6-dbg
	# the libraries of Debian's PostgreSQL 15 (below), not the server: no
	# service is installed or started
	libicu72 libxml2 libldap-2.5-0 libsasl2-2 libgssapi-krb5-2 libsystemd0
	libzstd1 liblz4-1 libpq5
	qemu-system-x86 # the kernel matrix (tests/kernels): Debian's kernels under TCG
	binutils-aarch64-linux-gnu # objdump of AArch64 code: the arm64 analysis' reference
	gcc-aarch64-linux-gnu # make arm64: the cross compiler
	qemu-system-arm # make arm64test: Debian's arm64 kernel under TCG
)

# The Rust test fixture needs a rustc: Debian's, unless one is on PATH
# (rustup's, say).
if ! command -v rustc >/dev/null 2>&1; then
	pkgs+=(rustc)
fi

build_only=0
case "${1:-}" in
"") ;;
--build)
	build_only=1
	pkgs=("${build_pkgs[@]}")
	;;
*)
	echo "usage: scripts/deps.sh [--build]" >&2
	exit 2
	;;
esac

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if ((${#missing[@]})); then
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ((build_only)); then
	exit 0
fi

if ! python3 -m pytest --version >/dev/null 2>&1; then
	echo "deps: installing pytest"
	python3 -m pip install -q pytest
fi
if ! python3 -c 'import yaml' >/dev/null 2>&1; then
	echo "deps: installing PyYAML"
	python3 -m pip install -q pyyaml
fi

if ! command -v go >/dev/null 2>&1; then
	echo "deps: go is required (Go 1.21 or later on PATH) to build the test fixtures" >&2
	exit 1
fi

# Real software the integration tests trace, unpacked from Debian's packages
# into the cache, not installed (no service starts on the host). Where the
# download is impossible (offline), NAME.unavailable says why and the tests
# that need it skip with that reason.
debs=${RETWATCH_CACHE:-$HOME/.cache/retwatch}/debs
fetch_deb() { # NAME PACKAGE...: unpack the packages into $debs/NAME, once
	local name=$1 dir=$debs/$1 tmp d
	shift
	[[ -e $dir/.done ]] && return 0
	mkdir -p "$debs"
	tmp=$(mktemp -d)
	chmod 755 "$tmp" # apt-get download writes as _apt where it can
	if (cd "$tmp" && { apt-get download -qq "$@" || { apt-get update -qq && apt-get download -qq "$@"; }; }) >/dev/null 2>&1; then
		rm -rf "$dir"
		mkdir -p "$dir"
		for d in "$tmp"/*.deb; do
			dpkg-deb -x "$d" "$dir"
		done
		touch "$dir/.done"
		rm -f "$debs/$name.unavailable"
	else
		echo "apt-get download $* failed" >"$debs/$name.unavailable"
		echo "deps: could not download $* (the tests that trace it skip)" >&2
	fi
	rm -rf "$tmp"
}
fetch_deb nginx nginx
# redis-server is redis-check-rdb run by that name; its libraries beside it
fetch_deb redis redis-tools libjemalloc2 liblzf1
# PostgreSQL 15's server, initdb and pgbench, run from the cache as a
# pre-fork server under the tests' own user and socket directory
fetch_deb postgresql postgresql-15

# The kernel matrix's kernels (tests/kernels/vm.py): Debian's 6.1 and 6.12
# images, and Debian 11's 5.10 (refused in words), through apt with the
# script's own lists, kept in the cache. A failed download fails here:
# `make test` runs them.
python3 tests/kernels/vm.py fetch 6.1 6.12 5.10 arm64-6.1
# Debian's arm64 libc, read by the AArch64 analysis' tests (not installed:
# dpkg gets no second architecture)
python3 tests/kernels/vm.py debs arm64 libc libc6 >/dev/null
# make arm64's sysroot and the arm64 VM's root: Debian's arm64 build
# packages and busybox with their dependencies, unpacked (not installed)
python3 tests/kernels/vm.py sysroot arm64 >/dev/null

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
	libcurl4-openssl-dev libcjson-dev libyaml-dev libmicrohttpd-dev
	libiberty-dev
)
pkgs=(
	"${build_pkgs[@]}" clang-format-14 binutils file time
	runc busybox-static libcap2-bin buildah debootstrap prometheus
	libclang-rt-14-dev
	golang-1.19-go
	g++
	openssl
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

#!/usr/bin/env bash
# Install every build and test dependency of retwatch on Debian bookworm.
# Idempotent: when everything is present it only checks and returns.
set -euo pipefail

pkgs=(
	make gcc pkg-config clang clang-format-14 llvm bpftool binutils file time
	libbpf-dev libelf-dev libdw-dev libzydis-dev zlib1g-dev
	libcurl4-openssl-dev libcjson-dev libyaml-dev runc busybox-static
	libclang-rt-14-dev
	golang-1.19-go
)

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

if ! python3 -m pytest --version >/dev/null 2>&1; then
	echo "deps: installing pytest"
	python3 -m pip install -q pytest
fi

if ! command -v go >/dev/null 2>&1; then
	echo "deps: go is required (Go 1.21 or later on PATH) to build the test fixtures" >&2
	exit 1
fi

# The node agent's image, run by the DaemonSet: retwatch-agent, and the
# retwatch CLI beside it for `kubectl exec`, and the kubectl plugin
# (kubectl-retwatch, for a release archive or a toolbox image), on Debian
# bookworm with only the shared libraries the three need.
#
#   docker build -t retwatch-agent .
#   docker build --build-arg REVISION="$(git rev-parse HEAD)" -t retwatch-agent .
#
# BUILD_BASE and BASE name the stages' bases so that a machine without a
# registry can build from local images (tests/image/build.sh makes one with
# debootstrap). Builders must see /sys/kernel/btf/vmlinux in RUN steps, as
# docker and buildah do: `make` generates vmlinux.h from it; CO-RE relocates
# the programs to the node's kernel at load time.
ARG BUILD_BASE=debian:bookworm
ARG BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
WORKDIR /src
# The dependency layer first, so that editing the sources reuses it.
COPY scripts/deps.sh scripts/
RUN bash scripts/deps.sh --build && rm -rf /var/lib/apt/lists/*
COPY Makefile ./
COPY bpf/ bpf/
COPY src/ src/
COPY cmd/ cmd/
RUN make -j"$(nproc)" all

FROM ${BASE}
# Runtime packages of every library in `objdump -p` NEEDED of the three
# binaries; libzycore1.4 comes with libzydis4.0. libiberty (the demangler)
# is linked statically: libiberty-dev ships only an archive. ca-certificates for
# API servers whose certificate a public CA signed.
RUN apt-get update \
	&& DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		libbpf1 libelf1 libdw1 libzydis4.0 libzycore1.4 libcjson1 libyaml-0-2 \
		libcurl4 zlib1g libmicrohttpd12 libgnutls30 ca-certificates \
	&& rm -rf /var/lib/apt/lists/*
# Not stripped: --self-check finds the function it probes in the agent's
# own symbol table.
COPY --from=build /src/build/retwatch-agent /src/build/retwatch /src/build/kubectl-retwatch \
	/usr/local/bin/

# Declared here, not above, so that a new revision rebuilds only this layer.
# VERSION must follow RETWATCH_VERSION in cmd/retwatch-agent/main.c
# (tests/image checks it).
ARG BASE
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="retwatch-agent" \
	org.opencontainers.image.description="retwatch node agent: latency of functions in pods, by eBPF uprobes" \
	org.opencontainers.image.version="${VERSION}" \
	org.opencontainers.image.revision="${REVISION}" \
	org.opencontainers.image.base.name="${BASE}"
ENTRYPOINT ["/usr/local/bin/retwatch-agent"]

# retwatch — build, test, fuzz.  `make V=1` shows the commands.
OUTPUT ?= build
CC ?= gcc
CLANG ?= clang
CLANG_FORMAT ?= clang-format-14

BPFTOOL ?= bpftool
# Generated BPF files (vmlinux.h, *.bpf.o, *.skel.h), shared by every OUTPUT
# of an architecture.
BPF_OUT := build/bpf
BPF_ARCH := x86
AR := ar
RETWATCH_CACHE ?= $(HOME)/.cache/retwatch

# make ARCH=arm64 (what `make arm64` runs): cross-built with Debian's cross
# compiler against Debian's arm64 packages unpacked into a sysroot (not
# installed: tests/kernels/vm.py sysroot arm64), the BPF programs against
# the BTF of Debian's arm64 kernel.
ifeq ($(ARCH),arm64)
SYSROOT := $(RETWATCH_CACHE)/debs-arm64/sysroot
CC := aarch64-linux-gnu-gcc --sysroot=$(SYSROOT)
AR := aarch64-linux-gnu-ar
BPF_OUT := build/bpf-arm64
BPF_ARCH := arm64
endif

CFLAGS_BASE := -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -Isrc -I$(BPF_OUT)
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
# The libraries each layer of src/ links against; a program links its own
# layers' and those below (LIBS_TRACE for the CLI, LIBS for the agent).
LIBS_BASE := -lbpf -lcjson -liberty
LIBS_ANALYSIS := -lelf -ldw -lZydis -lZycore -lz $(LIBS_BASE)
LIBS_TRACE := $(LIBS_ANALYSIS)
LIBS := -lcurl -lyaml -lmicrohttpd -lgnutls $(LIBS_TRACE)
LIBS_PLUGIN := -lcurl -lyaml -lcjson
BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -Wall -Werror -I$(BPF_OUT) -Ibpf -mcpu=v3
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_SKELS := $(patsubst bpf/%.bpf.c,$(BPF_OUT)/%.skel.h,$(BPF_SRCS))

CFLAGS := $(CFLAGS_BASE)
ifeq ($(SANITIZE),1)
CFLAGS += $(SAN_FLAGS)
LDFLAGS += $(SAN_FLAGS)
endif

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# src/ in layers, lowest first; a layer includes only its own headers and
# those of the layers it stands on (scripts/layers.sh checks, in make lint).
LAYERS := base analysis kube trace report agent plugin
layer_srcs = $(wildcard src/$(1)/*.c src/$(1)/*/*.c)
LIB_SRCS := $(foreach l,$(LAYERS),$(call layer_srcs,$(l)))
# Archives, highest layer first as the linker wants them.
TRACE_ARS := $(OUTPUT)/libretwatch-trace.a $(OUTPUT)/libretwatch-analysis.a \
	$(OUTPUT)/libretwatch-base.a
AGENT_ARS := $(OUTPUT)/libretwatch-agent.a $(OUTPUT)/libretwatch-report.a \
	$(OUTPUT)/libretwatch-kube.a $(TRACE_ARS)
ALL_ARS := $(OUTPUT)/libretwatch-plugin.a $(AGENT_ARS)
UNIT_SRCS := $(wildcard tests/unit/*.c)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRCS))
FUZZ_LIB_OBJS := $(patsubst src/%.c,build/fuzz/obj/%.o,$(LIB_SRCS))
# make test fuzzes each target this long (two at a time on two CPUs): a smoke
# run within the suite's time; longer runs: make fuzz FUZZ_SECONDS=600
FUZZ_SECONDS ?= 12

.DELETE_ON_ERROR:
# Generated BPF files are kept, not deleted as intermediates.
.SECONDARY: $(BPF_SKELS) $(BPF_SKELS:.skel.h=.bpf.o) $(FUZZ_LIB_OBJS)
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin

.PHONY: arm64 arm64test install plugin-archive link-flags all clean test unit asan fixtures itest kerneltest agenttest fuzz fuzz-build deps lint demo demo-down demo-cli manifests helm charttest imagetest clustertest cluster-bench

all: $(OUTPUT)/retwatch $(OUTPUT)/retwatch-agent $(OUTPUT)/kubectl-retwatch

ifeq ($(ARCH),arm64)
$(BPF_OUT)/vmlinux.h:
	$(Q)mkdir -p $(BPF_OUT)
	$(call msg,GEN,$@)
	$(Q)python3 tests/kernels/vm.py btf arm64-6.1 $(BPF_OUT)/vmlinux.btf
	$(Q)$(BPFTOOL) btf dump file $(BPF_OUT)/vmlinux.btf format c > $@
else
$(BPF_OUT)/vmlinux.h:
	$(Q)mkdir -p $(BPF_OUT)
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@
endif

$(BPF_OUT)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(BPF_OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BPF_OUT)/%.skel.h: $(BPF_OUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $* > $@

# Each object's header dependencies are generated as it compiles (-MMD);
# the BPF skeletons come first, since the tracer includes one.
$(OUTPUT)/obj/%.o: %.c $(BPF_SKELS)
	$(Q)mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(CFLAGS_$(firstword $(subst /, ,$<))) -MMD -MP -c $< -o $@
CFLAGS_tests := -Itests/unit

define layer_archive
$(OUTPUT)/libretwatch-$(1).a: $(patsubst %.c,$(OUTPUT)/obj/%.o,$(call layer_srcs,$(1)))
	$$(call msg,AR,$$@)
	$$(Q)rm -f $$@ && $$(AR) rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call layer_archive,$(l))))

objs_of = $(patsubst %.c,$(OUTPUT)/obj/%.o,$(1))
CMD_OBJS := $(call objs_of,$(wildcard cmd/retwatch/*.c))
AGENT_OBJS := $(call objs_of,$(wildcard cmd/retwatch-agent/*.c))
PLUGIN_OBJS := $(call objs_of,$(wildcard cmd/kubectl-retwatch/*.c))
UNIT_OBJS := $(call objs_of,$(UNIT_SRCS))
-include $(patsubst %.o,%.d,$(call objs_of,$(LIB_SRCS) $(wildcard cmd/*/*.c) $(UNIT_SRCS)))

# The CLI links the engine's layers only: no libcurl, libyaml, libmicrohttpd.
$(OUTPUT)/retwatch: $(CMD_OBJS) $(TRACE_ARS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LIBS_TRACE) -o $@

$(OUTPUT)/retwatch-agent: $(AGENT_OBJS) $(AGENT_ARS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LIBS) -o $@

# The kubectl plugin: the agent's Kubernetes client, no tracer (so none of
# the tracer's libraries, whatever the linker's --as-needed default).
$(OUTPUT)/kubectl-retwatch: $(PLUGIN_OBJS) $(ALL_ARS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LIBS_PLUGIN) -o $@

$(OUTPUT)/unit_tests: $(UNIT_OBJS) $(ALL_ARS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LIBS) -o $@

# The three programs for arm64, in build-arm64.
arm64:
	$(Q)python3 tests/kernels/vm.py sysroot arm64 >/dev/null
	$(Q)$(MAKE) --no-print-directory ARCH=arm64 OUTPUT=build-arm64 \
		build-arm64/retwatch build-arm64/retwatch-agent build-arm64/kubectl-retwatch

# The three programs into $(DESTDIR)$(BINDIR): kubectl finds kubectl-retwatch
# on PATH as `kubectl retwatch`.
install: all
	$(call msg,INSTALL,$(DESTDIR)$(BINDIR))
	$(Q)install -d $(DESTDIR)$(BINDIR)
	$(Q)install -m 0755 $(OUTPUT)/retwatch $(OUTPUT)/retwatch-agent $(OUTPUT)/kubectl-retwatch \
		$(DESTDIR)$(BINDIR)/

# The kubectl plugin's release archive, laid out as plugins/retwatch.yaml
# says (kubectl-retwatch at its top); prints the sha256 the manifest takes.
plugin-archive: $(OUTPUT)/kubectl-retwatch
	$(call msg,TAR,$(OUTPUT)/kubectl-retwatch-linux-amd64.tar.gz)
	$(Q)tar -C $(OUTPUT) --owner=0 --group=0 --numeric-owner --mtime=@0 \
		-czf $(OUTPUT)/kubectl-retwatch-linux-amd64.tar.gz kubectl-retwatch
	$(Q)sha256sum $(OUTPUT)/kubectl-retwatch-linux-amd64.tar.gz

# What a program outside the Makefile (bench/, the integration tests' drivers)
# links against: every layer's archive of OUTPUT, and their libraries.
link-flags:
	@echo $(ALL_ARS) $(LIBS)

deps:
	$(Q)bash scripts/deps.sh

# Everything under AddressSanitizer and UndefinedBehaviorSanitizer.
asan:
	$(Q)$(MAKE) --no-print-directory OUTPUT=build/asan SANITIZE=1 build/asan/retwatch build/asan/retwatch-agent \
		build/asan/kubectl-retwatch build/asan/unit_tests

fixtures:
	$(Q)bash tests/fixtures/build.sh build/fixtures

unit: asan fixtures
	$(Q)RETWATCH_FIXTURES=build/fixtures build/asan/unit_tests

itest: asan fixtures
	$(Q)RETWATCH=build/asan/retwatch RETWATCH_FIXTURES=build/fixtures \
		python3 -m pytest -q -p no:cacheprovider --durations=15 tests/integration

# Coverage-guided fuzzing of every parser of untrusted input, bounded in time.
# The library is compiled once for every target (instrumented, without
# libFuzzer's main), each target linked against it.
FUZZ_CFLAGS := -O1 -g -std=gnu11 -D_GNU_SOURCE -Isrc -I$(BPF_OUT) -fno-sanitize-recover=all

build/fuzz/obj/%.o: src/%.c $(BPF_SKELS)
	$(Q)mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@
-include $(FUZZ_LIB_OBJS:.o=.d)

build/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_OBJS)
	$(Q)mkdir -p build/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined $< $(FUZZ_LIB_OBJS) \
		$(LIBS) -o $@

fuzz-build: $(FUZZ_BINS)

# The node agent against a real API server (built from Go modules, cached)
# and runc containers; needs root.
agenttest: asan fixtures
	$(Q)RETWATCH_AGENT=build/asan/retwatch-agent RETWATCH_PLUGIN=build/asan/kubectl-retwatch \
		python3 -m pytest -q -p no:cacheprovider --durations=15 tests/agent

# helm, built from its Go module (tests/helm, cached); prints its directory.
helm:
	$(Q)bash tests/helm/build.sh

# manifests/install.yaml, rendered from the Helm chart (charts/retwatch).
manifests:
	$(call msg,HELM,manifests/install.yaml)
	$(Q)bash manifests/render.sh > manifests/install.yaml.tmp
	$(Q)mv manifests/install.yaml.tmp manifests/install.yaml

# The chart and the manifests against the real API server (part of agenttest).
charttest: asan
	$(Q)RETWATCH_AGENT=build/asan/retwatch-agent \
		python3 -m pytest -q -p no:cacheprovider tests/agent/test_install.py

# The node agent's image (Dockerfile), built with buildah on a Debian base
# made with debootstrap (cached), run with runc; needs root.
imagetest: arm64
	$(Q)python3 -m pytest -q -p no:cacheprovider tests/image

# The agent as the DaemonSet pod `helm install` makes, under a kubelet: a
# single-node cluster from real parts (tests/cluster; Kubernetes binaries
# built from Go modules and cached, Debian's containerd, runc and CNI
# plugins, images built with buildah), in its own network and mount
# namespaces and cgroup; needs root.
clustertest:
	$(Q)python3 -m pytest -q -p no:cacheprovider --durations=10 tests/cluster

# The main job, as users run it, on this machine: the local single-node
# cluster of tests/cluster (no cluster of one's own needed; left running),
# the agent installed with helm, the demo payment service as a Deployment,
# the example FunctionProbe and its live numbers; needs root.
demo: deps
	$(Q)python3 tests/cluster/demo.py up

# Stops the cluster of demo and removes everything it made.
demo-down:
	$(Q)python3 tests/cluster/demo.py down

# Timings and memory of the agent's pod in the single-node cluster
# (bench/cluster_bench.py: prints figures, asserts nothing); needs root.
cluster-bench:
	$(Q)python3 bench/cluster_bench.py

fuzz: fuzz-build fixtures
	$(Q)bash tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

# The engine on the kernels users' nodes run: Debian's 6.1 (bookworm) and
# 6.12 (bookworm-backports), each booted under QEMU (TCG) on this machine's
# root, read-only, running tests/kernels/guest with build/retwatch; the two
# side by side, each ending with its own `N passed, N failed` line.
kerneltest: all fixtures
	$(Q)python3 tests/kernels/vm.py matrix 6.1 6.12 5.10

# arm64's tracees: tests/fixtures/tracee (a stripped PIE, and as built by
# default: with DWARF, for its arguments' names), c/tracee.c with frame
# pointers (slow calls' stacks are walked through the frame records),
# c/deepstack.c without them, and tests/fixtures/inline (inlined copies).
ARM64_TRACEES := build-arm64/tracees/go-tracee build-arm64/tracees/go-tracee-dwarf \
	build-arm64/tracees/c-tracee build-arm64/tracees/deepstack build-arm64/tracees/inlinefix
build-arm64/tracees/go-tracee: $(wildcard tests/fixtures/tracee/*)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)cd tests/fixtures/tracee && GOARCH=arm64 CGO_ENABLED=0 GOTOOLCHAIN=local \
		go build -trimpath -buildmode=pie -ldflags='-s -w' -o $(CURDIR)/$@ .
build-arm64/tracees/go-tracee-dwarf: $(wildcard tests/fixtures/tracee/*)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)cd tests/fixtures/tracee && GOARCH=arm64 CGO_ENABLED=0 GOTOOLCHAIN=local \
		go build -trimpath -o $(CURDIR)/$@ .
build-arm64/tracees/inlinefix: $(wildcard tests/fixtures/inline/*)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)cd tests/fixtures/inline && GOARCH=arm64 CGO_ENABLED=0 GOTOOLCHAIN=local \
		go build -trimpath -o $(CURDIR)/$@ .
build-arm64/tracees/c-tracee: tests/fixtures/c/tracee.c | arm64
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)aarch64-linux-gnu-gcc --sysroot=$(RETWATCH_CACHE)/debs-arm64/sysroot \
		-O2 -g -pthread -fno-omit-frame-pointer -o $@ $<
build-arm64/tracees/deepstack: tests/fixtures/c/deepstack.c | arm64
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)aarch64-linux-gnu-gcc --sysroot=$(RETWATCH_CACHE)/debs-arm64/sysroot \
		-O2 -g -fomit-frame-pointer -o $@ $<

# build-arm64/retwatch in Debian's arm64 kernels (6.1, 6.12) under
# qemu-system-aarch64; build/retwatch reads the tracees' entry sites.
arm64test: all arm64 $(ARM64_TRACEES)
	$(Q)python3 tests/kernels/vm.py fetch arm64-6.1 arm64-6.12
	$(Q)python3 -m pytest -q -p no:cacheprovider --color=no -s tests/kernels/test_arm64.py

# each stage timed, the times listed at the end (scripts/stages.sh)
# one after another; agenttest+arm64test,kerneltest,fuzz (the agent stage
# mostly waits) saves 7 minutes, not adopted yet: docs/development.md
TEST_STAGES := deps lint all unit itest kerneltest arm64test agenttest imagetest clustertest fuzz
test:
	$(Q)MAKE="$(MAKE)" bash scripts/stages.sh $(TEST_STAGES)

FORMATTED := $(wildcard src/*/*.[ch] src/*/*/*.[ch] cmd/*/*.c tests/unit/*.[ch] tests/fuzz/*.c bpf/*.[ch])
lint:
	$(Q)$(CLANG_FORMAT) --dry-run --Werror $(FORMATTED)
	$(Q)bash scripts/layers.sh
	$(Q)bash scripts/limits.sh

# The same engine without a cluster: `retwatch trace` of the Go demo
# service's payment flow, run here as a plain process.
demo-cli: deps all
	$(call msg,GO,build/demo/demo)
	$(Q)mkdir -p build/demo && cd tests/fixtures/go && GOFLAGS=-buildvcs=false go build -o ../../../build/demo/demo .
	$(Q)bash scripts/demo.sh $(OUTPUT)/retwatch build/demo/demo

clean:
	$(Q)rm -rf build

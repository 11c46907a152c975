# Cicada top-level Makefile. Each component keeps its rules in its own
# folder (<dir>/<dir>.mk); this file sets the shared variables and targets.

BUILD    ?= build
CUDA     ?= /usr/local/cuda
NVCC     ?= $(CUDA)/bin/nvcc
CC       ?= cc
CFLAGS   ?= -O2 -g
# -MMD -MP: each compile writes the headers it read into a .d file beside
# its output, included below, so editing any header rebuilds what reads
# it. Rules name only generated headers, order-only (they must exist
# before the first compile).
DEPFLAGS := -MMD -MP
CFLAGS   += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -fPIC -pthread \
            -I$(CUDA)/include -I/usr/include/tirpc -I$(BUILD)/gen -Iwire $(DEPFLAGS)
LDLIBS_RPC := -ltirpc -lssl -lcrypto
CUDA_STUBS := $(CUDA)/lib64/stubs
# Kernels for the tests: sm_90 for the H100, PTX for JIT on anything else.
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90

# A rule that fails leaves no half-written output behind.
.DELETE_ON_ERROR:

.PHONY: default all bundle deps test test-gpu demo bench bench-cr bench-migrate bench-torch bench-coldstart bench-tenancy fuzz clean conformance
# `make` alone builds and bundles (what a GPU node needs); `make all` only
# builds, from this tree, system headers and libraries, and $(CUDA).
default: all bundle
all:

include wire/wire.mk
include snapshot-format/snapshot.mk
include session/session.mk
include interposer/interposer.mk
include nvml/nvml.mk
include gpu-server/gpu-server.mk
include criu-plugin/criu-plugin.mk
include migrate/migrate.mk
include template/template.mk
include cicadactl/cicadactl.mk
include slurm/slurm.mk
include tests/fakecuda/fakecuda.mk
include tests/tests.mk
include tests/fuzz/fuzz.mk
include tests/tools/tools.mk
include bench/bench.mk
include tests/snapshot/snapshot-tests.mk
include packaging/packaging.mk
include tests/unit/unit.mk
include clients/rust/rust.mk

# The header dependencies the compiler wrote at the last build (-MMD).
# They are only read: the empty rule keeps make from looking for a way
# to make them (built-in rules would chain into the generators).
DEPFILES := $(shell find $(BUILD) -name '*.d' 2>/dev/null)
-include $(DEPFILES)
$(DEPFILES): ;

deps:
	bash scripts/install-deps.sh

# 'make test' works on a fresh machine: dependencies (only what is
# missing is installed), build, then the suite.
test:
	bash scripts/install-deps.sh
	$(MAKE) all bundle
	bash tests/run-tests.sh

# On a GPU node, from prebuilt outputs (never rebuilds).
test-gpu:
	bash tests/run-tests.sh --gpu

demo:
	bash scripts/demo.sh

bench:
	bash bench/run-bench.sh

# On a GPU node: two tenants held to half the SMs each (--sm-share).
bench-tenancy:
	bash bench/run-bench-tenancy.sh

# On a GPU node: public CUDA programs natively and through Cicada
# (tests/conformance; CORPUS from tests/conformance/prepare.sh). With
# CONFORMANCE_LIST=libsamples, NVIDIA's library samples instead (CORPUS
# from tests/conformance/prepare-libsamples.sh, built where nvcc is).
CORPUS ?= .corpus
CONFORMANCE_LIST ?= programs
conformance:
	CONFORMANCE_LIST=$(CONFORMANCE_LIST) bash tests/conformance/run.sh $(CORPUS)

clean:
	rm -rf $(BUILD) $(DEB_DIR)

# Libraries a GPU node may lack, next to the binaries (found by rpath).
# Copies of this machine's system libraries.
$(BUILD)/lib/deps/.stamp: scripts/bundle-deps.sh
	bash scripts/bundle-deps.sh $(BUILD)/lib/deps && touch $@
all: $(BUILD)/lib/deps/.stamp

# bundle: CRIU (the one `make deps` built with scripts/criu-patches) and
# its libraries, for GPU nodes that have none (bin/criu wraps it). It
# reads this machine's installed criu, so it is not part of `all`; the
# tests, the demo and the benchmarks run it through `make` or `make test`.
$(BUILD)/bin/criu: scripts/bundle-criu.sh scripts/criu-wrapper.in $(wildcard scripts/criu-patches/*.patch)
	bash scripts/bundle-criu.sh $(BUILD)
bundle: $(BUILD)/bin/criu
# and runc, where this machine has one, for the container test on GPU
# nodes without it (tests/containers/run.sh)
$(BUILD)/bin/runc: scripts/bundle-runc.sh
	bash scripts/bundle-runc.sh $(BUILD)
bundle: $(BUILD)/bin/runc

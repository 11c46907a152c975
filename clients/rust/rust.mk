# rust.mk: the Rust client (clients/rust). Its kernels (nvcc) into
# build/rust/kernels, its examples (Debian's cargo and rustc 1.63,
# offline; the crates' target folder is build/rust/target) into
# build/rust/bin, and the GPU check's native C twin of the examples. A
# GPU node runs them from build/ (clients/rust/gpu-check.sh) with no
# cargo. Without cargo the crate is skipped, said once.

RUST_DIR := $(BUILD)/rust
RUST_KERNELS := $(addprefix $(RUST_DIR)/kernels/rust_kernels.,ptx cubin fatbin)
RUST_EXAMPLES := vector_add matmul no_driver steps
# Debian's toolchain when there is one (CI's), else the PATH's.
CARGO ?= $(firstword $(wildcard /usr/bin/cargo) $(shell command -v cargo 2>/dev/null))
RUST_RUSTC := $(firstword $(wildcard /usr/bin/rustc) $(shell command -v rustc 2>/dev/null))
RUST_ENV = CARGO_TARGET_DIR=$(abspath $(RUST_DIR))/target CARGO_NET_OFFLINE=true RUSTC=$(RUST_RUSTC) \
	CUDA=$(CUDA) CC=$(CC)
RUST_SRCS := $(wildcard clients/rust/cicada/src/*.rs clients/rust/cicada/examples/*.rs clients/rust/cicada/examples/common/*.rs) \
	clients/rust/cicada/Cargo.toml clients/rust/cicada/build.rs \
	wire/calls.tbl wire/cicada.x wire/gen-calls.py wire/rust_gen.py wire/cuda_h.py

.PHONY: rust
rust: $(RUST_KERNELS) $(RUST_DIR)/bin/native_kernels
all: rust

$(RUST_DIR)/kernels/rust_kernels.ptx: clients/rust/kernels/rust_kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=compute_90 -o $@ $<
$(RUST_DIR)/kernels/rust_kernels.cubin: clients/rust/kernels/rust_kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -cubin $(NVCC_ARCH) -o $@ $<
$(RUST_DIR)/kernels/rust_kernels.fatbin: clients/rust/kernels/rust_kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin $(NVCC_ARCH) -gencode arch=compute_90,code=compute_90 -o $@ $<

# The same kernels run natively through the driver API (gpu-check.sh).
$(RUST_DIR)/bin/native_kernels: clients/rust/gpu-check/native_kernels.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(TESTS_LDCUDA)

ifneq ($(CARGO),)
rust: $(RUST_DIR)/bin/.examples
$(RUST_DIR)/bin/.examples: $(RUST_SRCS)
	@mkdir -p $(@D)
	cd clients/rust/cicada && $(RUST_ENV) $(CARGO) build --offline --release --examples
	for e in $(RUST_EXAMPLES); do cp $(RUST_DIR)/target/release/examples/$$e $(@D)/$$e || exit 1; done
	touch $@
else
rust:
	@echo "rust: no cargo here (apt install cargo); the Rust client is not built"
endif

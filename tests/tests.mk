# Test kernels (cubin, PTX and fatbin of each .cu) and the driver-API
# test programs. The programs link the stub libcuda so they NEED
# libcuda.so.1 and find the real, the interposer or the CPU stand-in
# at run time through LD_LIBRARY_PATH. dlopen_app links no libcuda;
# nvml_query and share_view link no NVML.

TESTS_KDIR := $(BUILD)/tests/kernels
TESTS_PDIR := $(BUILD)/tests/programs

TESTS_KERNEL_NAMES := kernels_a kernels_b kernels_cr kernels_assert kernels_graph
TESTS_KERNELS := $(foreach k,$(TESTS_KERNEL_NAMES),\
	$(TESTS_KDIR)/$(k).cubin $(TESTS_KDIR)/$(k).ptx $(TESTS_KDIR)/$(k).fatbin)

TESTS_CUDA_PROGS := vecadd_cubin vecadd_ptx vecadd_library multi_module \
	memcpy_all streams_events launch_1000 sm_share device_query context_ops errors_app \
	zero_copy cr_pattern cr_hold misc_calls jit_link managed_mem graph_nodes vmm_app device_assert multi_gpu \
	ipc_pair vmm_share tensor_map stream_memops user_objects host_devptr stage_flood graph_pageable graph_conditional \
	quota_routes share_view
TESTS_CUDA_BINS := $(addprefix $(TESTS_PDIR)/,$(TESTS_CUDA_PROGS))
TESTS_BINS := $(TESTS_CUDA_BINS) $(TESTS_PDIR)/dlopen_app

TESTS_LDCUDA := -L$(CUDA_STUBS) -lcuda -Wl,-rpath-link,$(CUDA_STUBS)

.PHONY: test-kernels test-programs
test-kernels: $(TESTS_KERNELS)
test-programs: $(TESTS_BINS)
all: $(TESTS_KERNELS) $(TESTS_BINS)

$(TESTS_KDIR)/%.cubin: tests/kernels/%.cu
	@mkdir -p $(@D)
	$(NVCC) -cubin $(NVCC_ARCH) -o $@ $<

$(TESTS_KDIR)/%.ptx: tests/kernels/%.cu
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=compute_90 -o $@ $<

# SASS for the H100 plus compute_90 PTX for the driver to JIT elsewhere.
$(TESTS_KDIR)/%.fatbin: tests/kernels/%.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin $(NVCC_ARCH) -gencode arch=compute_90,code=compute_90 \
		-o $@ $<

$(TESTS_PDIR)/%.o: tests/programs/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(TESTS_CUDA_BINS): $(TESTS_PDIR)/%: $(TESTS_PDIR)/%.o $(TESTS_PDIR)/common.o
	$(CC) $(CFLAGS) -o $@ $^ $(TESTS_LDCUDA)

# share_view dlopens NVML as well (nvml-wire.h declares what it asks).
$(TESTS_PDIR)/share_view: TESTS_LDCUDA += -ldl

# The checkpoint/restore programs share cr_common.c.
TESTS_CR_BINS := $(TESTS_PDIR)/cr_pattern $(TESTS_PDIR)/cr_hold
$(TESTS_CR_BINS): $(TESTS_PDIR)/cr_common.o

$(TESTS_PDIR)/dlopen_app: $(TESTS_PDIR)/dlopen_app.o $(TESTS_PDIR)/common.o
	$(CC) $(CFLAGS) -o $@ $^ -ldl

# nvrtc through dlopen, as cuBLASLt uses it: no libcuda linked either.
$(TESTS_PDIR)/nvrtc_cache: $(TESTS_PDIR)/nvrtc_cache.o
	$(CC) $(CFLAGS) -o $@ $^ -ldl
all: $(TESTS_PDIR)/nvrtc_cache

# NVML through dlopen: it builds without NVML and runs on the real one or
# on Cicada's replacement.
$(TESTS_PDIR)/nvml_query: tests/programs/nvml_query.c | $(GEN)/cicada.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< -ldl
all: $(TESTS_PDIR)/nvml_query

# CUDA runtime programs, built the normal way: nvcc's default static
# runtime, and again with -cudart shared (the shared runtime is copied next
# to them, for nodes without a toolkit). They reach the driver only
# through dlopen("libcuda.so.1").
TESTS_RT_PROGS := rt_basic rt_features rt_texture rt_mapped
TESTS_RT_STATIC := rt_steps rt_graph_copy
TESTS_RT_BINS := $(addprefix $(TESTS_PDIR)/,$(TESTS_RT_PROGS) $(TESTS_RT_STATIC)) \
	$(addsuffix _shared,$(addprefix $(TESTS_PDIR)/,$(TESTS_RT_PROGS)))
TESTS_RT_FLAGS := $(NVCC_ARCH) -gencode arch=compute_90,code=compute_90 -Xcompiler -pthread

$(TESTS_PDIR)/%: tests/programs/%.cu tests/programs/rt_common.h
	@mkdir -p $(@D)
	$(NVCC) $(TESTS_RT_FLAGS) -o $@ $<

$(TESTS_PDIR)/%_shared: tests/programs/%.cu tests/programs/rt_common.h $(TESTS_PDIR)/libcudart.so.13
	$(NVCC) $(TESTS_RT_FLAGS) -cudart shared -Xlinker -rpath,'$$ORIGIN' -o $@ $<

# CUDA library programs, linked to the toolkit's shared libraries: rt_X
# takes -lX (cuBLAS with cuBLASLt underneath, cuFFT, cuRAND, cuSOLVER with
# cuBLAS and cuSPARSE underneath, cuSPARSE).
TESTS_LIB_BINS := $(addprefix $(TESTS_PDIR)/,rt_cublas rt_cufft rt_curand rt_cusolver rt_cusparse)
$(TESTS_LIB_BINS): $(TESTS_PDIR)/%: tests/programs/%.cu tests/programs/rt_common.h
	@mkdir -p $(@D)
	$(NVCC) $(TESTS_RT_FLAGS) -o $@ $< -l$(patsubst rt_%,%,$*)
all: $(TESTS_LIB_BINS)

# The library uses behind wrong results once seen in public programs:
# Thrust's radix sort, batched GEMMs, FFT convolution, and cuBLAS with
# cuSPARSE captured into a graph (rt_X takes the libraries listed).
comma := ,
TESTS_LIB2 := rt_thrust: rt_cublas_batched:cublas rt_fft_conv:cufft rt_cg_graph:cublas,cusparse
TESTS_LIB2_BINS := $(foreach p,$(TESTS_LIB2),$(TESTS_PDIR)/$(firstword $(subst :, ,$(p))))
$(TESTS_LIB2_BINS): $(TESTS_PDIR)/%: tests/programs/%.cu tests/programs/rt_common.h
	@mkdir -p $(@D)
	$(NVCC) $(TESTS_RT_FLAGS) -o $@ $< $(addprefix -l,$(subst $(comma), ,$(word 2,$(subst :, ,$(filter $*:%,$(TESTS_LIB2))))))
all: $(TESTS_LIB2_BINS)

# cuFFT in steps, for checkpoint/restore on a GPU node.
$(TESTS_PDIR)/rt_cufft_steps: tests/programs/rt_cufft_steps.cu tests/programs/rt_common.h
	@mkdir -p $(@D)
	$(NVCC) $(TESTS_RT_FLAGS) -o $@ $< -lcufft
all: $(TESTS_PDIR)/rt_cufft_steps

$(TESTS_PDIR)/libcudart.so.13:
	@mkdir -p $(@D)
	cp -L $(CUDA)/lib64/libcudart.so.13 $@

all: $(TESTS_RT_BINS)

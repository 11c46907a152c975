# wire.mk: generates the protocol (rpcgen over cicada.x plus the program
# block from calls.tbl) and builds the transport into a static library.

GEN := $(BUILD)/gen
# calls.tbl may take prototypes from cuda.h (wire/cuda_h.py).
GEN_CALLS_OPTS = --cc $(CC) --include $(CUDA)/include
WIRE_GEN := $(GEN)/cicada.x $(GEN)/cicada.h $(GEN)/cicada_xdr.c \
            $(GEN)/client_calls.c $(GEN)/client_calls.h $(GEN)/server_calls.c $(GEN)/server_calls.h
WIRE_SRCS := wire/addr.c wire/shm.c wire/message.c wire/log.c wire/attr.c wire/auth.c wire/tls.c wire/proc.c wire/control.c
WIRE_OBJS := $(WIRE_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/gen/cicada_xdr.o
WIRE_LIB := $(BUILD)/wire/libwire.a

$(GEN)/cicada.x: wire/cicada.x wire/calls.tbl wire/gen-calls.py wire/cuda_h.py
	@mkdir -p $(@D)
	python3 wire/gen-calls.py $(GEN_CALLS_OPTS) x wire/calls.tbl wire/cicada.x > $@
$(GEN)/cicada.h: $(GEN)/cicada.x
	cd $(GEN) && rm -f cicada.h && rpcgen -h -M cicada.x -o cicada.h
$(GEN)/cicada_xdr.c: $(GEN)/cicada.x $(GEN)/cicada.h
	cd $(GEN) && rm -f cicada_xdr.c && rpcgen -c -M cicada.x -o cicada_xdr.c
$(GEN)/client_calls.c: wire/calls.tbl wire/gen-calls.py wire/cuda_h.py
	@mkdir -p $(@D)
	python3 wire/gen-calls.py $(GEN_CALLS_OPTS) client wire/calls.tbl > $@
$(GEN)/client_calls.h: wire/calls.tbl wire/gen-calls.py wire/cuda_h.py
	@mkdir -p $(@D)
	python3 wire/gen-calls.py $(GEN_CALLS_OPTS) client-h wire/calls.tbl > $@
$(GEN)/server_calls.c: wire/calls.tbl wire/gen-calls.py wire/cuda_h.py
	@mkdir -p $(@D)
	python3 wire/gen-calls.py $(GEN_CALLS_OPTS) server wire/calls.tbl > $@
$(GEN)/server_calls.h: wire/calls.tbl wire/gen-calls.py wire/cuda_h.py
	@mkdir -p $(@D)
	python3 wire/gen-calls.py $(GEN_CALLS_OPTS) server-h wire/calls.tbl > $@

$(BUILD)/gen/cicada_xdr.o: $(GEN)/cicada_xdr.c
	$(CC) $(CFLAGS) -Wno-unused-variable -c $< -o $@

$(BUILD)/wire/%.o: wire/%.c | $(GEN)/cicada.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -c $< -o $@

$(WIRE_LIB): $(WIRE_OBJS)
	ar rcs $@ $^

all: $(WIRE_LIB)

# quorum — build, test, bench.
#   make deps    install the Debian packages it needs (as root; else prints the line)
#   make         build build/quorum (CLI) and build/libquorum.a
#   make test    build and run the unit tests
#   make demo    synthesize a tiny model and answer a question (main job)
#   make bench   reset/paged/batched benchmark on a qwen2.5-0.5b-shaped model

CC      ?= gcc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -MMD -MP
CPPFLAGS += -Icommon -I$(B)
LDLIBS  = -lzmq -lprotobuf-c -lyaml -ljansson -lpcre2-8 -lm -lpthread
SHARED  ?= ../shared
B       := build

# SIMD translation units: compiled for their ISA, chosen at run time.
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c

COMMON_SRC := $(sort $(wildcard common/*.c))
PROTO_GEN  := $(B)/proto/quorum.pb-c.c $(B)/proto/quorum.pb-c.h
COMMON_OBJ := $(COMMON_SRC:%.c=$(B)/%.o) $(B)/proto/quorum.pb-c.o
COORD_SRC  := $(sort $(wildcard coordinator/*.c))
COORD_OBJ  := $(COORD_SRC:%.c=$(B)/obj/%.o)
WORKER_SRC := $(sort $(wildcard worker/*.c))
WORKER_OBJ := $(WORKER_SRC:%.c=$(B)/obj/%.o)
PROGS      := $(B)/quorum $(if $(COORD_SRC),$(B)/coordinator) $(if $(WORKER_SRC),$(B)/worker)
TOOLS_SRC  := $(sort $(wildcard tools/*.c))
TOOLS_OBJ  := $(TOOLS_SRC:%.c=$(B)/%.o)
TEST_SRC   := $(sort $(wildcard tests/test_*.c))
TEST_BIN   := $(TEST_SRC:tests/%.c=$(B)/tests/%)
BENCH_SRC  := $(sort $(wildcard bench/*.c))
BENCH_BIN  := $(BENCH_SRC:bench/%.c=$(B)/bench/%)
LIB        := $(B)/libquorum.a

.PHONY: all deps test demo bench bench-kern clean benchbins
.SECONDARY:
all: $(PROGS)

deps:
	sh tools/deps.sh

# protobuf-c code generated at build time; everything may include it
$(PROTO_GEN) &: proto/quorum.proto
	@mkdir -p $(B)
	protoc-c --c_out=$(B) proto/quorum.proto
$(COMMON_OBJ) $(TOOLS_OBJ) $(COORD_OBJ) $(WORKER_OBJ): | $(PROTO_GEN)
$(B)/tests/%.o $(B)/bench/%.o: | $(PROTO_GEN)

$(B)/%_avx2.o: CFLAGS += $(AVX2_FLAGS)
$(B)/%_avx512.o: CFLAGS += $(AVX512_FLAGS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# the programs $(B)/coordinator and $(B)/worker are files: objects go aside
$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIB): $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/proto/quorum.pb-c.o: $(B)/proto/quorum.pb-c.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(B)/quorum: $(TOOLS_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(TOOLS_OBJ) $(LIB) $(LDLIBS)

$(B)/coordinator: $(COORD_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(COORD_OBJ) $(LIB) $(LDLIBS)

$(B)/worker: $(WORKER_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(WORKER_OBJ) $(LIB) $(LDLIBS)

$(B)/tests/%: $(B)/tests/%.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS) -lcmocka

$(B)/bench/%: $(B)/bench/%.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

benchbins: $(BENCH_BIN)

test: deps all $(TEST_BIN)
	QUORUM_SHARED=$(SHARED) QUORUM_BIN=$(B)/quorum QUORUM_BUILD=$(B) \
		sh tests/run.sh $(TEST_BIN) tests/cluster_e2e.sh

QWEN_TOK   := $(SHARED)/data/tokenizers/qwen2/tokenizer.json
DEMO_MODEL := $(B)/models/tiny-qwen2-q8_0.gguf
BENCH_MODEL := $(B)/models/qwen2.5-0.5b-q8_0.gguf
QUESTION   ?= A farmer has 17 sheep and buys 23 more. How many sheep are there?

$(DEMO_MODEL): | $(B)/quorum
	@mkdir -p $(dir $@)
	$(B)/quorum mkmodel --shape tiny --type q8_0 --tokenizer $(QWEN_TOK) -o $@

$(BENCH_MODEL): | $(B)/quorum
	@mkdir -p $(dir $@)
	$(B)/quorum mkmodel --shape qwen2.5-0.5b --type q8_0 --tokenizer $(QWEN_TOK) -o $@

# The main job: synthesize the default model if missing, answer a question.
demo: deps all $(DEMO_MODEL)
	$(B)/quorum run --model $(DEMO_MODEL) -n 8 --max-new-tokens 64 "$(QUESTION)"

# Benchmarks (not tests): one run, side by side.
bench: deps all $(BENCH_MODEL)
	$(B)/quorum bench --model $(BENCH_MODEL)

bench-kern: deps benchbins
	$(B)/bench/bench_kern

clean:
	rm -rf $(B)

-include $(COMMON_OBJ:.o=.d) $(TOOLS_OBJ:.o=.d) $(COORD_OBJ:.o=.d) $(WORKER_OBJ:.o=.d) $(TEST_BIN:=.d) $(BENCH_BIN:=.d)

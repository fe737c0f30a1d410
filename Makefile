# quorum — build, test, bench.
#   make deps    install the Debian packages it needs (as root; else prints the line)
#   make         build build/quorum (CLI) and build/libquorum.a
#   make test    build and run the unit tests
#   make demo    synthesize a tiny model and evaluate a prompt (main job)

CC      ?= gcc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -MMD -MP
CPPFLAGS += -Icommon
LDLIBS  = -ljansson -lpcre2-8 -lm -lpthread
SHARED  ?= ../shared
B       := build

# SIMD translation units: compiled for their ISA, chosen at run time.
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c

COMMON_SRC := $(sort $(wildcard common/*.c))
COMMON_OBJ := $(COMMON_SRC:%.c=$(B)/%.o)
TOOLS_SRC  := $(sort $(wildcard tools/*.c))
TOOLS_OBJ  := $(TOOLS_SRC:%.c=$(B)/%.o)
TEST_SRC   := $(sort $(wildcard tests/test_*.c))
TEST_BIN   := $(TEST_SRC:tests/%.c=$(B)/tests/%)
BENCH_SRC  := $(sort $(wildcard bench/*.c))
BENCH_BIN  := $(BENCH_SRC:bench/%.c=$(B)/bench/%)
LIB        := $(B)/libquorum.a

.PHONY: all deps test demo clean benchbins
.SECONDARY:
all: $(B)/quorum

deps:
	sh tools/deps.sh

$(B)/%_avx2.o: CFLAGS += $(AVX2_FLAGS)
$(B)/%_avx512.o: CFLAGS += $(AVX512_FLAGS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIB): $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/quorum: $(TOOLS_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(TOOLS_OBJ) $(LIB) $(LDLIBS)

$(B)/tests/%: $(B)/tests/%.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS) -lcmocka

$(B)/bench/%: $(B)/bench/%.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

benchbins: $(BENCH_BIN)

test: deps all $(TEST_BIN)
	QUORUM_SHARED=$(SHARED) QUORUM_BIN=$(B)/quorum sh tests/run.sh $(TEST_BIN)

DEMO_MODEL := $(B)/models/tiny-qwen2.gguf
$(DEMO_MODEL): $(B)/quorum
	@mkdir -p $(dir $@)
	$(B)/quorum mkmodel --arch qwen2 --shape tiny --type f32 \
		--tokenizer $(SHARED)/data/tokenizers/qwen2/tokenizer.json -o $@

demo: deps all $(DEMO_MODEL)
	$(B)/quorum eval --model $(DEMO_MODEL) --tokens 9707,11,1879,0 --top 5

clean:
	rm -rf $(B)

-include $(COMMON_OBJ:.o=.d) $(TOOLS_OBJ:.o=.d) $(TEST_BIN:=.d) $(BENCH_BIN:=.d)

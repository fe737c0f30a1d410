# quorum — build, test, bench.
#   make deps    install the Debian packages it needs (as root; else prints the line)
#   make         build build/quorum (CLI) and build/libquorum.a
#   make test    build and run the unit tests (TEST_JOBS=2 at a time)
#   make test-build  only build them (and the programs)
#   make test-one T=NAME  one test alone
#   make demo    a local cluster answers a question (main job)
#   make demo-run  the same in one process
#   make bench   reset/paged/batched benchmark on a qwen2.5-0.5b-shaped model
#   make bench-sched  the coordinator's scheduler against simulated workers

CC      ?= gcc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -MMD -MP
# project headers by path, never found for a <system> include: the
# library's as "wing/name.h" (common/), the programs' and tests' others
# from the root ("coordinator/scheduler.h"), generated ones in $(B)
CPPFLAGS += -iquote common -iquote . -iquote $(B)
LDLIBS  = -lzmq -lprotobuf-c -lyaml -ljansson -lpcre2-8 -lm -lpthread

B       := build
# the x86 SIMD kernels (each chosen at run time by CPU detection)
KERN_X86 := common/kernels/x86

# SIMD translation units: compiled for their ISA, chosen at run time.
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
# kern_int_avx2.c is built a second time with vpdpbusd (AVX-512 VNNI), and
# for the tests a third time on AVX2 with vpdpbusd emulated
# (without UBSan in a sanitizer build: instrumenting its intrinsics takes
# minutes per build; the AVX2 build, the same code, keeps it)
VNNI_FLAGS   := $(AVX512_FLAGS) -mavx512vnni -DKERN_INT_VNNI=1 \
		-fno-sanitize=undefined
VNNI_EMU_FLAGS := $(AVX2_FLAGS) -DKERN_INT_VNNI=2 -fno-sanitize=undefined

# kern_float.c, the float kernels written once against kern_vec.h's width
# mappings, is built once per vector width: kern_float_avx2.o (8 lanes)
# and kern_float_avx512.o (16), each with its ISA's flags
KERN_FLOAT := $(KERN_X86)/kern_float.c
KERN_FLOAT_OBJ := $(KERN_X86)/kern_float_avx2.o $(KERN_X86)/kern_float_avx512.o

COMMON_SRC := $(filter-out $(KERN_FLOAT), \
		$(sort $(wildcard common/*.c common/*/*.c common/*/*/*.c)))
PROTO_GEN  := $(B)/proto/quorum.pb-c.c $(B)/proto/quorum.pb-c.h
# (test-asan takes the plain tree's VNNI build: see there)
KERN_VNNI_OBJ ?= $(B)/$(KERN_X86)/kern_int_vnni.o
COMMON_OBJ := $(COMMON_SRC:%.c=$(B)/%.o) $(KERN_VNNI_OBJ) \
	      $(KERN_FLOAT_OBJ:%=$(B)/%) $(B)/proto/quorum.pb-c.o
COORD_SRC  := $(sort $(wildcard coordinator/*.c))
COORD_OBJ  := $(COORD_SRC:%.c=$(B)/obj/%.o)
WORKER_SRC := $(sort $(wildcard worker/*.c))
WORKER_OBJ := $(WORKER_SRC:%.c=$(B)/obj/%.o)
PROGS      := $(B)/quorum $(if $(COORD_SRC),$(B)/coordinator) $(if $(WORKER_SRC),$(B)/worker)
TOOLS_SRC  := $(sort $(wildcard tools/*.c tools/*/*.c))
TOOLS_OBJ  := $(TOOLS_SRC:%.c=$(B)/%.o)
TEST_SRC   := $(sort $(wildcard tests/test_*.c))
TEST_BIN   := $(TEST_SRC:tests/%.c=$(B)/tests/%)
BENCH_SRC  := $(sort $(wildcard bench/*.c))
BENCH_BIN  := $(BENCH_SRC:bench/%.c=$(B)/bench/%)
LIB        := $(B)/libquorum.a

.PHONY: all deps test demo demo-run bench bench-kern clean benchbins
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

# the integer kernels under ASan only in a sanitizer build (see VNNI_FLAGS)
$(B)/$(KERN_X86)/kern_int_avx2.o: CFLAGS += -fno-sanitize=undefined
$(B)/$(KERN_X86)/kern_int_vnni.o: $(KERN_X86)/kern_int_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(VNNI_FLAGS) -c $< -o $@

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# (the ISA flags come from the %_avx2.o / %_avx512.o rules above)
%/kern_float_avx2.o: KERN_VEC_W = 8
%/kern_float_avx512.o: KERN_VEC_W = 16
$(KERN_FLOAT_OBJ:%=$(B)/%): $(B)/$(KERN_X86)/kern_float_%.o: $(KERN_FLOAT)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DKERN_VEC_W=$(KERN_VEC_W) -c $< -o $@

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
	$(CC) $(CFLAGS) -o $@ $(TOOLS_OBJ) $(LIB) $(LDLIBS) -lmicrohttpd

# The status page of `quorum serve`, embedded as a C string (no build
# step beyond this; awk is in every base system).
$(B)/gateway_page.h: tools/gateway/page.html
	@mkdir -p $(B)
	awk 'BEGIN { print "static const char gwpage_html[] =" } \
	     { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); print "\"" $$0 "\\n\"" } \
	     END { print ";" }' $< > $@
$(B)/tools/gateway/serve.o: $(B)/gateway_page.h

# `quorum --version`: the version (one place: the file VERSION) and the
# git commit the build is from ("unknown" outside a git checkout, or
# QUORUM_GIT=... from the caller). version.h is rewritten only when it
# changes, so an unchanged tree relinks nothing.
QUORUM_VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
QUORUM_GIT ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
.PHONY: FORCE
$(B)/version.h: FORCE
	@mkdir -p $(B)
	@printf '#define QUORUM_VERSION "%s"\n#define QUORUM_GIT "%s"\n' \
		'$(QUORUM_VERSION)' '$(QUORUM_GIT)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@
$(B)/tools/quorum.o: $(B)/version.h

$(B)/coordinator: $(COORD_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(COORD_OBJ) $(LIB) $(LDLIBS)

$(B)/worker: $(WORKER_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(WORKER_OBJ) $(LIB) $(LDLIBS)

$(B)/tests/%: $(B)/tests/%.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $(filter %.o,$^) $(LIB) $(LDLIBS) -lcmocka

# the tests that include tests/isautil.h also run the VNNI kernels' code
# with vpdpbusd emulated (test-asan takes the plain tree's: see there)
$(B)/tests/kern_int_emu.o: $(KERN_X86)/kern_int_avx2.c | $(PROTO_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(VNNI_EMU_FLAGS) -c $< -o $@
KERN_EMU_OBJ ?= $(B)/tests/kern_int_emu.o
$(B)/tests/test_quant $(B)/tests/test_fwd: $(KERN_EMU_OBJ)

# test_client also checks the CLI's UTF-8 helpers, eval-set's statistics
# (tools/evstats.c) and the gateway's OpenAI shapes
# (tools/gateway/openai.c, responses.c) in-process
$(B)/tests/test_client: $(B)/tools/client.o $(B)/tools/gateway/openai.o \
	$(B)/tools/gateway/responses.o $(B)/tools/evstats.o

# the scheduler in-process: the coordinator's objects but its main, and
# the fake workers of tests/fakeworker.c (test_sched and sched_sim)
SCHED_OBJ := $(filter-out $(B)/obj/coordinator/main.o,$(COORD_OBJ)) \
	     $(B)/tests/fakeworker.o
$(B)/tests/test_sched: $(B)/tests/test_sched.o $(SCHED_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(SCHED_OBJ) $(LIB) $(LDLIBS) -lcmocka

# the table test of the sampling settings: the CLI's flag parser, the
# gateway's request parser and the scheduler, in-process
PARAMS_OBJ := $(B)/tools/sampflags.o $(B)/tools/cli.o \
	      $(B)/tools/gateway/openai.o $(B)/tools/client.o
$(B)/tests/test_params: $(B)/tests/test_params.o $(PARAMS_OBJ) $(SCHED_OBJ) \
			$(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(PARAMS_OBJ) $(SCHED_OBJ) $(LIB) $(LDLIBS) \
		-lcmocka

$(B)/bench/%: $(B)/bench/%.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# the scheduler against simulated workers (issue 13)
$(B)/bench/sched_sim: $(B)/bench/sched_sim.o $(SCHED_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(SCHED_OBJ) $(LIB) $(LDLIBS)

benchbins: $(BENCH_BIN)

# TEST_EXCLUDE: test programs left out of this run (see test-asan).
# TEST_JOBS tests run at once (tests/run.sh -j; each picks its own ports
# and temp names), the slowest first so that none is left to run alone
# at the end; the suite is mostly one busy core at a time, so 2 share a
# 2-core machine. TEST_JOBS=1 runs them one at a time.
TEST_JOBS ?= 2
TEST_SLOW := $(B)/tests/test_run_stop $(B)/tests/test_fwd \
	     $(B)/tests/test_failures $(B)/tests/test_cluster \
	     $(B)/tests/test_cluster_stop $(B)/tests/test_gateway \
	     $(B)/tests/test_samp $(B)/tests/test_quant tests/train_data.sh \
	     $(B)/tests/test_cluster_merge tests/netns_e2e.sh \
	     $(B)/tests/test_security $(B)/tests/test_hygiene
TEST_ALL := $(TEST_BIN) tests/golden.sh tests/layers.sh tests/limits_loop.sh tests/train_data.sh \
		tests/cluster_e2e.sh tests/restart_e2e.sh tests/fair_e2e.sh tests/netns_e2e.sh \
		tests/kv_q8_e2e.sh tests/kv_win_e2e.sh tests/serve_local_e2e.sh \
		tests/gw_caps_e2e.sh
TEST_RUN := $(filter-out $(TEST_EXCLUDE), \
		$(foreach t,$(TEST_SLOW),$(filter $(t),$(TEST_ALL))) \
		$(filter-out $(TEST_SLOW),$(TEST_ALL)))
test: deps test-build
	QUORUM_BIN=$(B)/quorum QUORUM_BUILD=$(B) \
		sh tests/run.sh -j $(TEST_JOBS) $(TEST_RUN)
# The programs and tests built, none run. The integer kernels' builds
# (a few minutes each under ASan) come first, so that make -j starts
# them side by side instead of one after the other at the end.
SLOW_OBJ = $(B)/$(KERN_X86)/kern_int_avx2.o $(KERN_EMU_OBJ) \
	    $(KERN_VNNI_OBJ)
test-build: $(SLOW_OBJ) all $(TEST_BIN)
.PHONY: test-build

# One test alone: make test-one T=vote (tests/test_vote.c) or T=golden
# (tests/golden.sh); what it needs is built first.
T ?=
TEST_ONE = $(or $(filter %/test_$(T) %/$(T).sh %/$(T),$(TEST_ALL)), \
		$(error no test named '$(T)': T=vote, T=test_vote, T=golden...))
test-one: deps all $(TEST_BIN)
	@test -n "$(T)" || { echo "make test-one T=NAME" >&2; exit 2; }
	QUORUM_BIN=$(B)/quorum QUORUM_BUILD=$(B) sh tests/run.sh $(TEST_ONE)
.PHONY: test-one

# The gateway as the official openai npm package sees it (Node from
# Debian; the package pinned by tests/sdk/package-lock.json).
test-sdk: all
	sh tools/deps.sh sdk
	cd tests/sdk && npm ci --no-audit --no-fund
	sh tests/sdk/run.sh $(B)
.PHONY: test-sdk

QWEN_TOK   := data/tokenizers/qwen2/tokenizer.json
# The main job's model: quorum-arith, trained for this repository
# (models/README.md); the synthesized models are for shapes and speed.
DEMO_MODEL := models/arith.gguf
TINY_MODEL := $(B)/models/tiny-qwen2-q8_0.gguf
BENCH_MODEL := $(B)/models/qwen2.5-0.5b-q8_0.gguf
# bench-prefix-200: a small shape (dim 256, 4 layers, context 8192) with
# the shipped model's 809-token vocabulary, fast enough for 200 problems
PREFIX_MODEL := $(B)/models/small-arith-q8_0.gguf
QUESTION   ?= Mia has 45 stickers. She gives 12 to her brother and then buys 3 packs of 8. How many stickers does she have now?

$(TINY_MODEL): | $(B)/quorum
	@mkdir -p $(dir $@)
	$(B)/quorum mkmodel --shape tiny --type q8_0 --tokenizer $(QWEN_TOK) -o $@

$(BENCH_MODEL): | $(B)/quorum
	@mkdir -p $(dir $@)
	$(B)/quorum mkmodel --shape qwen2.5-0.5b --type q8_0 --tokenizer $(QWEN_TOK) -o $@

$(PREFIX_MODEL): | $(B)/quorum
	@mkdir -p $(dir $@)
	$(B)/quorum mkmodel --shape small --type q8_0 --tokenizer $(DEMO_MODEL) -o $@

# The main job: a local cluster (coordinator + 2 workers) on the default
# model (synthesized if missing) answers a question, then stops.
demo: deps all
	B=$(B) MODEL=$(DEMO_MODEL) sh deploy/local-cluster.sh "$(QUESTION)"

# The same question in one process (no cluster).
demo-run: deps all
	$(B)/quorum run --model $(DEMO_MODEL) -n 8 --max-new-tokens 64 "$(QUESTION)"

# ---- the trained model (issues 11, 28, 34; not part of the build or tests)
#   make train       trains quorum-arith's last stage (TRAIN_RECIPE, issue
#                    34) on the CPU (PyTorch from Debian) into
#                    TRAIN_OUT.gguf, checkpointing to TRAIN_OUT-ckpt.pt every
#                    10 minutes; stopped and run again, it resumes
#   make train-gpu   the same recipe on an NVIDIA GPU (a CUDA build of
#                    PyTorch); the schedule follows time, so a GPU trains
#                    more tokens in it
#   make eval-arith  the accuracy-vs-N tables and plots of models/README.md
# The stage continues the model shipped before issue 34 (its weights are
# in the history: TRAIN_INIT is made from that commit's models/arith.gguf).
TRAIN_PY     := /usr/bin/python3
TRAIN_OUT    ?= models/arith
TRAIN_INIT_COMMIT ?= eb4d307
TRAIN_INIT   ?= $(B)/arith-issue11.gguf
TRAIN_RECIPE ?= --init-gguf $(TRAIN_INIT) --tok models/arith-tok.json \
		--mix plain:0.5,phrasing:0.2,problems:0.3 --lr 4e-4 \
		--warmup 30 --level-start 1 --minutes 150 --seed 21
$(TRAIN_INIT):
	@mkdir -p $(dir $@)
	git show $(TRAIN_INIT_COMMIT):models/arith.gguf > $@
TRAIN_ARGS   ?= --ckpt-minutes 10
GPU_ARGS     ?= --device cuda --ckpt-minutes 2
EVAL_NS     ?= 1,3,8,16,32
EVAL_TEMP   ?= 0.7
EVAL_SWEEP  ?= 1.0 1.3
.PHONY: train train-gpu train-deps eval-arith
train-deps:
	sh tools/deps.sh train
train: train-deps $(TRAIN_INIT)
	$(TRAIN_PY) train/train.py --out $(TRAIN_OUT) --resume $(TRAIN_RECIPE) \
		$(TRAIN_ARGS)
	sha256sum $(TRAIN_OUT).gguf | sed 's| .*|  arith.gguf|' > $(TRAIN_OUT).gguf.sha256
train-gpu: $(TRAIN_INIT)
	python3 train/train.py --out $(TRAIN_OUT) --resume $(TRAIN_RECIPE) \
		$(GPU_ARGS)
	sha256sum $(TRAIN_OUT).gguf | sed 's| .*|  arith.gguf|' > $(TRAIN_OUT).gguf.sha256
eval-arith: all train-deps
	$(B)/quorum eval-set --model $(DEMO_MODEL) --file train/data/test.jsonl \
		-n $(EVAL_NS) --prefix --temperature $(EVAL_TEMP) --json \
		> models/arith-eval.json
	for t in $(EVAL_SWEEP); do \
		$(B)/quorum eval-set --model $(DEMO_MODEL) \
			--file train/data/test.jsonl -n $(EVAL_NS) --prefix \
			--temperature $$t --top-k 0 --top-p 1 --json \
			> models/arith-eval-t$$t.json || exit 1; \
	done
	$(B)/quorum eval-set --model $(DEMO_MODEL) --file train/data/test.jsonl \
		-n 1 --temperature 0 --json > models/arith-greedy.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) --file train/data/test.jsonl \
		-n $(EVAL_NS) --prefix --temperature $(EVAL_TEMP) \
		--shots train/data/shots3.jsonl --max-new-tokens 160 --json \
		> models/arith-eval-shots.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) \
		--file train/data/handwritten.jsonl -n $(EVAL_NS) --prefix \
		--temperature $(EVAL_TEMP) --json > models/arith-hw-eval.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) \
		--file train/data/handwritten.jsonl -n $(EVAL_NS) --prefix \
		--temperature 1.0 --top-k 0 --top-p 1 --json \
		> models/arith-hw-eval-t1.0.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) \
		--file train/data/handwritten.jsonl -n $(EVAL_NS) --prefix \
		--temperature $(EVAL_TEMP) --shots train/data/shots3.jsonl \
		--max-new-tokens 160 --json > models/arith-hw-shots.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) \
		--file train/data/handwritten.jsonl -n 1 --temperature 0 --json \
		> models/arith-hw-greedy.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) \
		--file train/data/dev.jsonl -n $(EVAL_NS) --prefix \
		--temperature $(EVAL_TEMP) --json > models/arith-dev-eval.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) \
		--file train/data/dev.jsonl -n $(EVAL_NS) --prefix \
		--temperature 1.0 --top-k 0 --top-p 1 --json \
		> models/arith-dev-eval-t1.0.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) \
		--file train/data/dev.jsonl -n $(EVAL_NS) --prefix \
		--temperature $(EVAL_TEMP) --shots train/data/shots3.jsonl \
		--max-new-tokens 160 --json > models/arith-dev-shots.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) \
		--file train/data/dev.jsonl -n 1 --temperature 0 --json \
		> models/arith-dev-greedy.json
	$(B)/quorum eval-set --model $(DEMO_MODEL) \
		--file train/data/handwritten.jsonl -n $(EVAL_NS) --prefix \
		--temperature 1.0 --top-k 0 --top-p 1 --shots \
		train/data/shots3.jsonl --max-new-tokens 160 --json \
		> models/arith-hw-shots-t1.0.json
	$(TRAIN_PY) train/plot.py --eval models/arith-dev-eval.json \
		--eval models/arith-dev-eval-t1.0.json \
		--eval models/arith-dev-shots.json \
		--greedy models/arith-dev-greedy.json --out models \
		--name arith-accuracy-dev.png --title "dev set"
	$(TRAIN_PY) train/plot.py --curve models/arith-curve.json --out models
	$(TRAIN_PY) train/plot.py --train models/arith-train.csv \
		--eval models/arith-eval.json \
		$(foreach t,$(EVAL_SWEEP),--eval models/arith-eval-t$(t).json) \
		--greedy models/arith-greedy.json --out models
	$(TRAIN_PY) train/plot.py --eval models/arith-hw-eval.json \
		--eval models/arith-hw-eval-t1.0.json \
		--eval models/arith-hw-shots.json \
		--greedy models/arith-hw-greedy.json --out models \
		--name arith-accuracy-hw.png --title "hand-written set"

# Benchmarks (not tests): one run, side by side.
bench: deps all $(BENCH_MODEL)
	$(B)/quorum bench --model $(BENCH_MODEL)

bench-kern: deps benchbins
	$(B)/bench/bench_kern

# The coordinator's scheduler against 16..1024 simulated workers (no model)
.PHONY: bench-sched
bench-sched: deps $(B)/bench/sched_sim
	$(B)/bench/sched_sim --workers 16,256,1024 2>/dev/null
	$(B)/bench/sched_sim --workers 256,1024 --hosts 16 2>/dev/null

# Issue 5's benchmark: in-process vs a 1x2 and a 2x1 local cluster, same
# work (N = 8, 32; 64 tokens/sample), samples checked byte-identical.
.PHONY: bench-cluster bench-prefix bench-prefix-200 bench-merge
bench-cluster: deps all $(BENCH_MODEL)
	BENCH_MODEL=$(BENCH_MODEL) timeout 1800 sh bench/cluster_bench.sh $(B)

# issue 16: an 8-shot prompt over many questions, prefix cache on and off
bench-prefix: deps all $(BENCH_MODEL)
	BENCH_MODEL=$(BENCH_MODEL) timeout 7200 sh bench/prefix_bench.sh $(B)

# the same at the issue's 200 problems, on the small shape
bench-prefix-200: deps all $(PREFIX_MODEL)
	BENCH_MODEL=$(PREFIX_MODEL) BENCH_Q=200 timeout 7200 sh bench/prefix_bench.sh $(B)

# Issue 15's benchmark: 16 concurrent requests (N = 4, 64 tokens/sample)
# on one worker, merged rounds vs one decode job at a time.
bench-merge: deps all $(BENCH_MODEL)
	BENCH_MODEL=$(BENCH_MODEL) timeout 3600 sh bench/merge_bench.sh $(B)

clean:
	rm -rf $(B)

# ---- deployment: container image, Kubernetes, Debian package (issue 25) ----
#   make image     the OCI image (FROM scratch: programs, their libraries,
#                  the model; deploy/image/build.sh), tagged $(IMAGE_TAG)
#   make test-k8s  plays deploy/k8s/base under podman and asks it (tests/k8s_e2e.sh)
#   make deb       $(B)/deb/quorum_<version>_amd64.deb (deploy/debian/build.sh)
#   make test-deb  installs it in a clean Debian 12 container, runs it, purges it
# podman runs with deploy/containers/containers.conf (runc, no default ulimits).
IMAGE_TAG    ?= localhost/quorum:$(QUORUM_VERSION)
QUORUM_SOURCE ?= $(shell git remote get-url origin 2>/dev/null || echo unknown)
DEPLOY_ENV   := CONTAINERS_CONF=$(CURDIR)/deploy/containers/containers.conf \
		QUORUM_VERSION='$(QUORUM_VERSION)' QUORUM_GIT='$(QUORUM_GIT)' \
		QUORUM_SOURCE='$(QUORUM_SOURCE)'
DEB          := $(B)/deb/quorum_$(QUORUM_VERSION)_amd64.deb
.PHONY: deploy-deps image test-k8s deb test-deb
deploy-deps:
	sh tools/deps.sh deploy
image: deps deploy-deps all
	$(DEPLOY_ENV) sh deploy/image/build.sh $(B) $(IMAGE_TAG)
test-k8s: image
	$(DEPLOY_ENV) timeout 900 sh tests/k8s_e2e.sh $(B) $(IMAGE_TAG)
deb: deps deploy-deps all
	$(DEPLOY_ENV) sh deploy/debian/build.sh $(B)
test-deb: deb
	$(DEPLOY_ENV) timeout 900 sh tests/deb_install.sh $(B) $(DEB)

-include $(COMMON_OBJ:.o=.d) $(TOOLS_OBJ:.o=.d) $(COORD_OBJ:.o=.d) $(WORKER_OBJ:.o=.d) $(TEST_BIN:=.d) $(BENCH_BIN:=.d) $(B)/tests/kern_int_emu.d \
	$(B)/tests/fakeworker.d

# ---- fuzzing and sanitizer builds (issue 6) --------------------------------
#   make fuzz        each libFuzzer target for FUZZ_SECONDS (default 60);
#                    fails when one finds a crash (build-fuzz/crashes/<t>/)
#   make fuzz-ci     the same, 15 s each
#   make fuzz-build  only build the targets
#   make test-asan   library, programs and tests with ASan+UBSan in
#                    build-asan/, then tests/run.sh over them
# The fuzz targets (fuzz/fuzz_*.c) are built with clang against the library
# sources compiled once more with ASan+UBSan and coverage, in build-fuzz/.
FUZZ_CC      ?= clang-14
FB           := build-fuzz
FUZZ_INC     := -iquote common -iquote . -iquote $(FB)
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := gguf wire cfg tok mathkey gbnf params
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all \
		-fno-omit-frame-pointer
FUZZ_CFLAGS  := -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
		-std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -MMD -MP
# The integer kernels (kern_int_avx2.c: matrix products only, which no
# fuzz target reaches, and the slowest file to compile) are the plain
# tree's objects, uninstrumented: two clang builds of it fewer.
FUZZ_KERN_INT := $(B)/$(KERN_X86)/kern_int_avx2.o $(B)/$(KERN_X86)/kern_int_vnni.o
FUZZ_OBJ     := $(filter-out $(FB)/$(KERN_X86)/kern_int_avx2.o, \
			$(COMMON_SRC:%.c=$(FB)/%.o)) $(FUZZ_KERN_INT) \
		$(KERN_FLOAT_OBJ:%=$(FB)/%) $(FB)/proto/quorum.pb-c.o
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FB)/fuzz_%)
ASAN_CFLAGS  := -O2 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
		-fno-omit-frame-pointer

.PHONY: fuzz fuzz-ci fuzz-build fuzz-seeds test-asan asan-build

$(FB)/proto/quorum.pb-c.c $(FB)/proto/quorum.pb-c.h &: proto/quorum.proto
	@mkdir -p $(FB)
	protoc-c --c_out=$(FB) proto/quorum.proto
$(filter $(FB)/%,$(FUZZ_OBJ)) $(FUZZ_BIN:=.o): | $(FB)/proto/quorum.pb-c.h

# The SIMD kernels go without UBSan here: clang spends minutes (8 for
# kern_int_avx2.c's integer tiles) instrumenting their intrinsics, and the
# fuzz targets hardly reach them; test-asan runs them under ASan+UBSan
# (gcc), checked bit for bit against the scalar reference.
$(FB)/%_avx2.o: FUZZ_ISA = $(AVX2_FLAGS) -fno-sanitize=undefined
$(FB)/%_avx512.o: FUZZ_ISA = $(AVX512_FLAGS) -fno-sanitize=undefined

$(FB)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_INC) $(FUZZ_CFLAGS) $(FUZZ_ISA) -c $< -o $@

$(KERN_FLOAT_OBJ:%=$(FB)/%): $(FB)/$(KERN_X86)/kern_float_%.o: $(KERN_FLOAT)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_INC) $(FUZZ_CFLAGS) $(FUZZ_ISA) \
		-DKERN_VEC_W=$(KERN_VEC_W) -c $< -o $@

$(FB)/proto/quorum.pb-c.o: $(FB)/proto/quorum.pb-c.c
	$(FUZZ_CC) $(FUZZ_INC) $(FUZZ_CFLAGS) -c $< -o $@

$(FB)/fuzz_%.o: fuzz/fuzz_%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_INC) $(FUZZ_CFLAGS) -c $< -o $@

$(FB)/fuzz_%: $(FB)/fuzz_%.o $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)
# the gateway's request parsers (tools/gateway/openai.c, responses.c) and
# what they use
$(FB)/fuzz_params: $(FB)/tools/gateway/openai.o \
	$(FB)/tools/gateway/responses.o $(FB)/tools/client.o
$(FB)/tools/gateway/openai.o $(FB)/tools/gateway/responses.o \
$(FB)/tools/client.o: | $(FB)/proto/quorum.pb-c.h

fuzz-build: deps $(FUZZ_BIN)

fuzz: fuzz-build
	sh fuzz/run.sh $(FB) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-ci: fuzz-build
	sh fuzz/run.sh $(FB) 15 $(FUZZ_TARGETS)

# The ordinary build and test rules, B=build-asan, with the sanitizer flags
# in CFLAGS (from the environment, so the rules' += still applies).
# test_failures and netns_e2e are left out: their cases assert detection
# and recovery of killed processes and cut links within heartbeat-based
# bounds, under long decodes that the sanitizers' slowdown stretches past
# them; they run in every plain `make test`. QUORUM_TEST_QUICK makes the
# exhaustive determinism matrices (test_run, test_fwd) take a diagonal and
# the gateway's 50-client load test send 2 requests per client, not 10
# (all of it in tests/testutil.h's tu_quick and its callers): the
# sanitizers see every code path, the plain run every combination.
# The AVX-512 VNNI build of the integer kernels and the AVX2 build with
# vpdpbusd emulated (test_quant's and test_fwd's ISA passes) are the
# plain tree's, uninstrumented: each compile of that file takes minutes
# under ASan (the tiles' huge functions) and was the CI's tail. The
# emulated build's loads and stores are the AVX2 build's (they differ in
# register arithmetic only), which is instrumented and runs in every
# model test; the 512-bit tiles' are checked bit for bit against the
# scalar reference.
ASAN_MAKE = CFLAGS="$(ASAN_CFLAGS)" QUORUM_TMP=build-asan/tmp \
	ASAN_OPTIONS=detect_leaks=1 QUORUM_TEST_QUICK=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		$(MAKE) --no-print-directory B=build-asan \
			KERN_VNNI_OBJ=$(B)/$(KERN_X86)/kern_int_vnni.o \
			KERN_EMU_OBJ=$(B)/tests/kern_int_emu.o \
			TEST_EXCLUDE="build-asan/tests/test_failures \
			tests/train_data.sh tests/netns_e2e.sh"
# asan-build: only the build of test-asan (CI compiles it while the
# deployment tests wait on podman).
asan-build: $(B)/$(KERN_X86)/kern_int_vnni.o $(B)/tests/kern_int_emu.o
	@mkdir -p build-asan/tmp
	$(ASAN_MAKE) test-build
test-asan: asan-build
	$(ASAN_MAKE) test

-include $(FUZZ_OBJ:.o=.d) $(FUZZ_BIN:=.d)

# Rewrites the generated seeds of fuzz/corpus/ (the cfg seeds are files).
$(FB)/mkseeds: fuzz/mkseeds.c $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_INC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -o $@ $^ $(LDLIBS)
fuzz-seeds: $(FB)/mkseeds
	mkdir -p fuzz/corpus/gguf fuzz/corpus/wire fuzz/corpus/tok
	$(FB)/mkseeds

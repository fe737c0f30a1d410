/*
 * mkseeds — writes the seed corpora of the fuzz targets (small valid
 * inputs) into fuzz/corpus/<target>/. Run from the repository root:
 *   make fuzz-seeds
 * The committed corpus is its output; cfg seeds are hand-written YAML.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "infer/model.h"
#include "proto/quorum.pb-c.h"
#include "qerr.h"
#include "format/quant.h"
#include "text/tok.h"

#define DIR "fuzz/corpus/"

static void die(const char *what)
{
	fprintf(stderr, "mkseeds: %s: %s\n", what, qerr_detail());
	exit(1);
}

static void put(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(p, 1, n, f) != n || fclose(f))
		die(path);
}

/* ---- gguf ------------------------------------------------------------- */

/* Types and row lengths of the seed's tensors written with tensor(), so
 * that fill() writes valid blocks for the quantized ones. */
static struct { uint32_t type; uint64_t ne0; } seed_t[64];
static int seed_n;

static int tensor(gguf_writer *w, const char *name, uint32_t type, int nd,
		  uint64_t a, uint64_t b)
{
	uint64_t ne[2] = {a, b};

	if (seed_n == 64)
		return -1;
	seed_t[seed_n].type = type;
	seed_t[seed_n++].ne0 = a;
	return gguf_w_tensor(w, name, type, (uint32_t)nd, ne);
}

static float pattern(uint64_t i, int idx)
{
	return (float)((int)((i * 7 + (uint64_t)idx) % 13) - 6) / 8.0f;
}

static int fill(void *ctx, int idx, void *dst, uint64_t nbytes)
{
	(void)ctx;
	if (idx < seed_n && quant_is_quant(seed_t[idx].type)) {
		uint32_t t = seed_t[idx].type;
		uint64_t k = seed_t[idx].ne0;
		uint64_t rb = k / (uint64_t)ggml_block_elems(t) *
			      (uint64_t)ggml_block_bytes(t);
		float *row = malloc(k * sizeof(float));

		if (!row)
			return -1;
		for (uint64_t r = 0; r < nbytes / rb; r++) {
			for (uint64_t i = 0; i < k; i++)
				row[i] = pattern(r * k + i, idx);
			quant_quantize_row(t, row, (char *)dst + r * rb, (int)k);
		}
		free(row);
		return 0;
	}
	for (uint64_t i = 0; i < nbytes / 4; i++) {
		float v = pattern(i, idx);

		memcpy((char *)dst + 4 * i, &v, 4);
	}
	return 0;
}

/* A vocabulary of n tokens: bytes "a".."p" plus merges and specials. */
static void gpt2_vocab(gguf_writer *w)
{
	static const char *const toks[] = {
		"a", "b", "c", "d", "e", "h", "l", "o", "\xc4\xa0", "ab", "he",
		"ll", "\xc4\xa0h", "<|endoftext|>", "<|im_end|>", "[PAD15]",
	};
	static const int32_t types[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
					1, 3, 3, 5};
	static const char *const merges[] = {"a b", "h e", "l l",
					     "\xc4\xa0 h"};
	uint64_t len[16], mlen[4];

	for (int i = 0; i < 16; i++)
		len[i] = strlen(toks[i]);
	for (int i = 0; i < 4; i++)
		mlen[i] = strlen(merges[i]);
	if (gguf_w_str(w, "tokenizer.ggml.model", "gpt2") ||
	    gguf_w_str(w, "tokenizer.ggml.pre", "qwen2") ||
	    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, len, 16) ||
	    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, types, 16) ||
	    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, mlen, 4) ||
	    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 13) ||
	    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 13) ||
	    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 0))
		die("gpt2 vocab");
}

static void spm_vocab(gguf_writer *w)
{
	static const char *const toks[] = {
		"<unk>", "<s>", "</s>", "<0x00>", "<0x41>", "<0xFF>",
		"\xe2\x96\x81", "a", "b", ("\xe2\x96\x81" "a"), "ab", "c",
	};
	static const int32_t types[] = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 4};
	static const float scores[] = {0, 0, 0, 0, 0, 0, -1, -2, -3, -0.5f,
				       -0.25f, 0};
	uint64_t len[12];

	for (int i = 0; i < 12; i++)
		len[i] = strlen(toks[i]);
	if (gguf_w_str(w, "tokenizer.ggml.model", "llama") ||
	    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, len, 12) ||
	    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, types, 12) ||
	    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_FLOAT32, scores, 12) ||
	    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0) ||
	    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1) ||
	    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2))
		die("spm vocab");
}

/* A qwen2 model: dim 8, 1 layer, 2 heads, 1 kv head, ffn 16, vocab 16. */
static void micro_model(gguf_writer *w)
{
	static const struct { const char *n; int d; uint64_t a, b; } t[] = {
		{"token_embd.weight", 2, 8, 16},
		{"output_norm.weight", 1, 8, 1},
		{"blk.0.attn_norm.weight", 1, 8, 1},
		{"blk.0.attn_q.weight", 2, 8, 8},
		{"blk.0.attn_k.weight", 2, 8, 4},
		{"blk.0.attn_v.weight", 2, 8, 4},
		{"blk.0.attn_output.weight", 2, 8, 8},
		{"blk.0.attn_q.bias", 1, 8, 1},
		{"blk.0.attn_k.bias", 1, 4, 1},
		{"blk.0.attn_v.bias", 1, 4, 1},
		{"blk.0.ffn_norm.weight", 1, 8, 1},
		{"blk.0.ffn_gate.weight", 2, 8, 16},
		{"blk.0.ffn_up.weight", 2, 8, 16},
		{"blk.0.ffn_down.weight", 2, 16, 8},
	};

	if (gguf_w_str(w, "general.architecture", "qwen2") ||
	    gguf_w_u32(w, "qwen2.context_length", 64) ||
	    gguf_w_u32(w, "qwen2.embedding_length", 8) ||
	    gguf_w_u32(w, "qwen2.block_count", 1) ||
	    gguf_w_u32(w, "qwen2.feed_forward_length", 16) ||
	    gguf_w_u32(w, "qwen2.attention.head_count", 2) ||
	    gguf_w_u32(w, "qwen2.attention.head_count_kv", 1) ||
	    gguf_w_f32(w, "qwen2.rope.freq_base", 10000.0f) ||
	    gguf_w_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-6f))
		die("model keys");
	gpt2_vocab(w);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t ne[2] = {t[i].a, t[i].b};

		if (gguf_w_tensor(w, t[i].n, GGML_TYPE_F32, (uint32_t)t[i].d, ne))
			die(t[i].n);
	}
}

static void every_type(gguf_writer *w)
{
	static const uint8_t u8[] = {1, 2, 3};
	static const int32_t i32[] = {-1, 0, 7};
	static const float f32[] = {0.5f, -2.0f};
	static const char *const s[] = {"x", "yz"};
	static const uint64_t sl[] = {1, 2};
	uint64_t ne1[1] = {4}, ne2[2] = {32, 2};

	if (gguf_w_u32(w, "t.u32", 7) || gguf_w_i32(w, "t.i32", -7) ||
	    gguf_w_f32(w, "t.f32", 1.5f) || gguf_w_bool(w, "t.bool", 1) ||
	    gguf_w_str(w, "t.str", "hello") ||
	    gguf_w_u32(w, "general.alignment", 32) ||
	    gguf_w_arr(w, "t.arr_u8", GGUF_UINT8, u8, 3) ||
	    gguf_w_arr(w, "t.arr_i32", GGUF_INT32, i32, 3) ||
	    gguf_w_arr(w, "t.arr_f32", GGUF_FLOAT32, f32, 2) ||
	    gguf_w_arr_str(w, "t.arr_str", s, sl, 2) ||
	    gguf_w_tensor(w, "v", GGML_TYPE_F32, 1, ne1) ||
	    gguf_w_tensor(w, "m", GGML_TYPE_Q8_0, 2, ne2))
		die("every type");
}

static void qwen2_keys(gguf_writer *w, const char *arch, int dim, int ffn,
		       int heads, int kv, int head_dim)
{
	char k[96];
#define K(x) (snprintf(k, sizeof(k), "%s.%s", arch, x), k)
	if (gguf_w_str(w, "general.architecture", arch) ||
	    gguf_w_u32(w, K("context_length"), 64) ||
	    gguf_w_u32(w, K("embedding_length"), (uint32_t)dim) ||
	    gguf_w_u32(w, K("block_count"), 1) ||
	    gguf_w_u32(w, K("feed_forward_length"), (uint32_t)ffn) ||
	    gguf_w_u32(w, K("attention.head_count"), (uint32_t)heads) ||
	    gguf_w_u32(w, K("attention.head_count_kv"), (uint32_t)kv) ||
	    (head_dim && gguf_w_u32(w, K("attention.key_length"),
				     (uint32_t)head_dim)) ||
	    (head_dim && gguf_w_u32(w, K("attention.value_length"),
				     (uint32_t)head_dim)) ||
	    gguf_w_f32(w, K("rope.freq_base"), 10000.0f) ||
	    gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-6f))
		die("model keys");
#undef K
}

/* qwen2, dim 32, 1 layer, 2 heads, 1 kv head, ffn 32: every matrix in
 * another 32-element block type. */
static void quant32_model(gguf_writer *w)
{
	static const struct { const char *n; uint32_t t; int d; uint64_t a, b; } t[] = {
		{"token_embd.weight", GGML_TYPE_Q8_0, 2, 32, 16},
		{"output_norm.weight", GGML_TYPE_F32, 1, 32, 1},
		{"blk.0.attn_norm.weight", GGML_TYPE_F32, 1, 32, 1},
		{"blk.0.attn_q.weight", GGML_TYPE_Q4_0, 2, 32, 32},
		{"blk.0.attn_k.weight", GGML_TYPE_Q4_1, 2, 32, 16},
		{"blk.0.attn_v.weight", GGML_TYPE_Q5_0, 2, 32, 16},
		{"blk.0.attn_output.weight", GGML_TYPE_Q5_1, 2, 32, 32},
		{"blk.0.attn_q.bias", GGML_TYPE_F32, 1, 32, 1},
		{"blk.0.attn_k.bias", GGML_TYPE_F32, 1, 16, 1},
		{"blk.0.attn_v.bias", GGML_TYPE_F32, 1, 16, 1},
		{"blk.0.ffn_norm.weight", GGML_TYPE_F32, 1, 32, 1},
		{"blk.0.ffn_gate.weight", GGML_TYPE_IQ4_NL, 2, 32, 32},
		{"blk.0.ffn_up.weight", GGML_TYPE_MXFP4, 2, 32, 32},
		{"blk.0.ffn_down.weight", GGML_TYPE_Q4_0, 2, 32, 32},
	};

	qwen2_keys(w, "qwen2", 32, 32, 2, 1, 0);
	gpt2_vocab(w);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (tensor(w, t[i].n, t[i].t, t[i].d, t[i].a, t[i].b))
			die(t[i].n);
}

/* qwen3, dim 256, 1 layer, 1 head of 32 (key_length), ffn 32: the
 * K-quants and IQ4_XS on rows of 256, 32-block types on rows of 32. */
static void quant256_model(gguf_writer *w)
{
	static const struct { const char *n; uint32_t t; int d; uint64_t a, b; } t[] = {
		{"token_embd.weight", GGML_TYPE_IQ4_XS, 2, 256, 16},
		{"output_norm.weight", GGML_TYPE_F32, 1, 256, 1},
		{"blk.0.attn_norm.weight", GGML_TYPE_F32, 1, 256, 1},
		{"blk.0.attn_q.weight", GGML_TYPE_Q4_K, 2, 256, 32},
		{"blk.0.attn_k.weight", GGML_TYPE_Q3_K, 2, 256, 32},
		{"blk.0.attn_v.weight", GGML_TYPE_Q5_K, 2, 256, 32},
		{"blk.0.attn_q_norm.weight", GGML_TYPE_F32, 1, 32, 1},
		{"blk.0.attn_k_norm.weight", GGML_TYPE_F32, 1, 32, 1},
		{"blk.0.attn_output.weight", GGML_TYPE_Q4_1, 2, 32, 256},
		{"blk.0.ffn_norm.weight", GGML_TYPE_F32, 1, 256, 1},
		{"blk.0.ffn_gate.weight", GGML_TYPE_Q6_K, 2, 256, 32},
		{"blk.0.ffn_up.weight", GGML_TYPE_Q2_K, 2, 256, 32},
		{"blk.0.ffn_down.weight", GGML_TYPE_IQ4_NL, 2, 32, 256},
	};

	qwen2_keys(w, "qwen3", 256, 32, 1, 1, 32);
	gpt2_vocab(w);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (tensor(w, t[i].n, t[i].t, t[i].d, t[i].a, t[i].b))
			die(t[i].n);
}

static void gguf_seed(const char *name, void (*build)(gguf_writer *),
		      int check)
{
	char path[256];
	gguf_writer *w;
	gguf_file *g;
	tok *t;
	model *m;

	snprintf(path, sizeof(path), DIR "gguf/%s.gguf", name);
	seed_n = 0;
	if (gguf_writer_new(&w))
		die("writer");
	if (build)
		build(w);
	if (gguf_writer_save(w, path, fill, NULL))
		die(path);
	gguf_writer_free(&w);
	/* a seed that does not get where it is meant to is useless */
	if (gguf_open(path, &g))
		die(path);
	if (check >= 1) {
		if (tok_load(g, &t))
			die(path);
		tok_free(&t);
	}
	if (check >= 2) {
		if (model_from_gguf(g, &m))
			die(path);
		model_free(&m);
		return;
	}
	gguf_close(&g);
}

/* ---- wire ------------------------------------------------------------ */

/* fuzz_wire's input: kind, frames - 1, then the one frame. */
static void wire_seed(const char *name, int kind, const ProtobufCMessage *m)
{
	char path[256];
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n + 2);

	if (!buf)
		die("malloc");
	buf[0] = (uint8_t)kind;
	buf[1] = 0;
	protobuf_c_message_pack(m, buf + 2);
	snprintf(path, sizeof(path), DIR "wire/%s", name);
	put(path, buf, n + 2);
	free(buf);
}

static void wire_seeds(void)
{
	Quorum__SamplingParams sp = QUORUM__SAMPLING_PARAMS__INIT;
	Quorum__Ask ask = QUORUM__ASK__INIT;
	Quorum__StatusQuery sq = QUORUM__STATUS_QUERY__INIT;
	Quorum__ClientRequest cr = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__WorkerMsg wm = QUORUM__WORKER_MSG__INIT;
	Quorum__Register reg = QUORUM__REGISTER__INIT;
	Quorum__Heartbeat hb = QUORUM__HEARTBEAT__INIT;
	Quorum__PrefixReady pr = QUORUM__PREFIX_READY__INIT;
	Quorum__Sample smp = QUORUM__SAMPLE__INIT;
	Quorum__SampleResult sr = QUORUM__SAMPLE_RESULT__INIT;
	Quorum__JobDone jd = QUORUM__JOB_DONE__INIT;
	Quorum__RootData rd = QUORUM__ROOT_DATA__INIT;
	Quorum__ImportedRoot ir = QUORUM__IMPORTED_ROOT__INIT;
	Quorum__WorkerError we = QUORUM__WORKER_ERROR__INIT;
	Quorum__CoordMsg cm = QUORUM__COORD_MSG__INIT;
	Quorum__Prefill pf = QUORUM__PREFILL__INIT;
	Quorum__DecodeJob dj = QUORUM__DECODE_JOB__INIT;
	Quorum__RootRef rr = QUORUM__ROOT_REF__INIT;
	Quorum__Cancel cc = QUORUM__CANCEL__INIT;
	Quorum__Release rl = QUORUM__RELEASE__INIT;
	Quorum__ExportRoot er = QUORUM__EXPORT_ROOT__INIT;
	uint32_t toks[] = {1, 2, 3, 50256}, blocks[] = {0, 5}, idx[] = {0, 3};
	uint8_t logits[16] = {0, 0, 128, 63}, kv[32] = {1};

	sp.has_n = 1; sp.n = 4; sp.has_seed = 1; sp.seed = 42;
	sp.has_temperature = 1; sp.temperature = 0.7f;
	sp.has_top_k = 1; sp.top_k = 40; sp.has_top_p = 1; sp.top_p = 0.9f;
	sp.has_max_new_tokens = 1; sp.max_new_tokens = 16;
	sp.has_ignore_eos = 1; sp.ignore_eos = 0;
	ask.question.data = (uint8_t *)"What is 2+2?";
	ask.question.len = 12;
	ask.has_system = 1;
	ask.system.data = (uint8_t *)"Be brief.";
	ask.system.len = 9;
	ask.params = &sp;
	ask.has_deadline_ms = 1;
	ask.deadline_ms = 5000;
	cr.version = 1;
	cr.request_id = 7;
	cr.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	cr.ask = &ask;
	wire_seed("client_ask", 0, &cr.base);
	cr.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	cr.status = &sq;
	wire_seed("client_status", 0, &cr.base);

	wm.version = 1;
	wm.worker_id = "w0";
	reg.host = "h1"; reg.pid = 123; reg.slots = 8; reg.pool_name = "/q-p0";
	reg.model_fingerprint = 0x1234;
	reg.has_pool_blocks = 1; reg.pool_blocks = 64;
	reg.has_block_tokens = 1; reg.block_tokens = 16;
	wm.body_case = QUORUM__WORKER_MSG__BODY_REGISTER;
	wm.register_ = &reg;
	wire_seed("worker_register", 1, &wm.base);
	hb.has_blocks_used = 1; hb.blocks_used = 3;
	hb.has_busy = 1; hb.busy = 1;
	wm.body_case = QUORUM__WORKER_MSG__BODY_HEARTBEAT;
	wm.heartbeat = &hb;
	wire_seed("worker_heartbeat", 1, &wm.base);
	pr.request_id = 1; pr.attempt = 0; pr.root_id = 2; pr.n_tokens = 20;
	pr.n_blocks = 2; pr.blocks = blocks;
	pr.logits.data = logits; pr.logits.len = sizeof(logits);
	pr.pool_name = "/q-p0";
	wm.body_case = QUORUM__WORKER_MSG__BODY_PREFIX_READY;
	wm.prefix_ready = &pr;
	wire_seed("worker_prefix_ready", 1, &wm.base);
	smp.index = 3; smp.has_answer = 1;
	smp.answer.data = (uint8_t *)"4"; smp.answer.len = 1;
	smp.tokens = 5; smp.finish = "stop";
	smp.text.data = (uint8_t *)"It is 4"; smp.text.len = 7;
	sr.request_id = 1; sr.attempt = 0; sr.sample = &smp;
	wm.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
	wm.sample = &sr;
	wire_seed("worker_sample", 1, &wm.base);
	jd.request_id = 1; jd.status = QUORUM__STATUS__STATUS_OK;
	jd.has_decode_ms = 1; jd.decode_ms = 1.5;
	wm.body_case = QUORUM__WORKER_MSG__BODY_JOB_DONE;
	wm.job_done = &jd;
	wire_seed("worker_job_done", 1, &wm.base);
	rd.request_id = 1; rd.n_tokens = 20;
	rd.kv.data = kv; rd.kv.len = sizeof(kv);
	rd.logits.data = logits; rd.logits.len = sizeof(logits);
	wm.body_case = QUORUM__WORKER_MSG__BODY_ROOT_DATA;
	wm.root_data = &rd;
	wire_seed("worker_root_data", 1, &wm.base);
	ir.request_id = 1; ir.root_id = 4; ir.n_tokens = 20;
	ir.n_blocks = 2; ir.blocks = blocks; ir.pool_name = "/q-p1";
	wm.body_case = QUORUM__WORKER_MSG__BODY_IMPORTED;
	wm.imported = &ir;
	wire_seed("worker_imported", 1, &wm.base);
	we.has_request_id = 1; we.request_id = 1;
	we.status = QUORUM__STATUS__STATUS_INTERNAL; we.error = "boom";
	wm.body_case = QUORUM__WORKER_MSG__BODY_ERROR;
	wm.error = &we;
	wire_seed("worker_error", 1, &wm.base);

	cm.version = 1;
	cm.body_case = QUORUM__COORD_MSG__BODY_HEARTBEAT;
	cm.heartbeat = &hb;
	wire_seed("coord_heartbeat", 2, &cm.base);
	pf.request_id = 1; pf.n_tokens = 4; pf.tokens = toks;
	cm.body_case = QUORUM__COORD_MSG__BODY_PREFILL;
	cm.prefill = &pf;
	wire_seed("coord_prefill", 2, &cm.base);
	rr.worker_id = "w0"; rr.host = "h1"; rr.pool_name = "/q-p0";
	rr.root_id = 2; rr.n_tokens = 20; rr.n_blocks = 2; rr.blocks = blocks;
	dj.request_id = 1; dj.root = &rr;
	dj.logits.data = logits; dj.logits.len = sizeof(logits);
	dj.n_indices = 2; dj.indices = idx; dj.params = &sp;
	cm.body_case = QUORUM__COORD_MSG__BODY_DECODE;
	cm.decode = &dj;
	wire_seed("coord_decode", 2, &cm.base);
	cc.request_id = 1;
	cm.body_case = QUORUM__COORD_MSG__BODY_CANCEL;
	cm.cancel = &cc;
	wire_seed("coord_cancel", 2, &cm.base);
	rl.root_id = 2;
	cm.body_case = QUORUM__COORD_MSG__BODY_RELEASE;
	cm.release = &rl;
	wire_seed("coord_release", 2, &cm.base);
	er.request_id = 1; er.root_id = 2;
	cm.body_case = QUORUM__COORD_MSG__BODY_EXPORT_ROOT;
	cm.export_root = &er;
	wire_seed("coord_export_root", 2, &cm.base);
	cm.body_case = QUORUM__COORD_MSG__BODY_IMPORT_ROOT;
	cm.import_root = &rd;
	wire_seed("coord_import_root", 2, &cm.base);
	/* a copy in chunks: the next chunk asked for, a partial one */
	er.has_from_tokens = 1; er.from_tokens = 16;
	er.has_chunk_bytes = 1; er.chunk_bytes = 65536;
	cm.body_case = QUORUM__COORD_MSG__BODY_EXPORT_ROOT;
	cm.export_root = &er;
	wire_seed("coord_export_chunk", 2, &cm.base);
	rd.has_from_tokens = 1; rd.from_tokens = 16; rd.n_tokens = 32;
	rd.has_partial = 1; rd.partial = 1; rd.logits.len = 0;
	rd.has_base_root_id = 1; rd.base_root_id = 5;
	cm.body_case = QUORUM__COORD_MSG__BODY_IMPORT_ROOT;
	cm.import_root = &rd;
	wire_seed("coord_import_chunk", 2, &cm.base);
	cm.body_case = QUORUM__COORD_MSG__BODY_REJECT;
	cm.reject = &we;
	wire_seed("coord_reject", 2, &cm.base);
	/* a two-frame message (refused) and an oversized one with the cap */
	put(DIR "wire/two_frames", "\x00\x01\x03" "abc" "\x08\x01", 8);
	{
		uint8_t big[80] = {0x80, 0};

		put(DIR "wire/over_cap", big, sizeof(big));
	}
}

/* ---- tok ------------------------------------------------------------- */

static void tok_seed(const char *name, unsigned mode, const char *text)
{
	char path[256];
	size_t n = strlen(text);
	char *buf = malloc(n + 1);

	if (!buf)
		die("malloc");
	buf[0] = (char)mode;
	memcpy(buf + 1, text, n);
	snprintf(path, sizeof(path), DIR "tok/%s", name);
	put(path, buf, n + 1);
	free(buf);
}

static void tok_seeds(void)
{
	static const char mixed[] =
		"Hello world! It's 2024, isn't it? \xc3\xa9t\xc3\xa9 "
		"\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80  \n\n\tx";
	static const char special[] =
		"<|im_start|>user\nHi<|im_end|>\n<s>a</s><|endoftext|>"
		"<|start|>assistant<|channel|>final<|message|>42<|return|>";
	static const char invalid[] = "ok \xff\xfe \xc3( \xed\xa0\x80 end";
	uint8_t ids[1 + 4 * 6] = {0x80 | 0x40 | 3};

	for (int v = 0; v < 4; v++) {
		char nm[64];

		snprintf(nm, sizeof(nm), "mixed_%d", v);
		tok_seed(nm, (unsigned)v, mixed);
		snprintf(nm, sizeof(nm), "special_%d", v);
		tok_seed(nm, (unsigned)v | 4, special);
		snprintf(nm, sizeof(nm), "add_special_%d", v);
		tok_seed(nm, (unsigned)v | 8, " leading space");
		snprintf(nm, sizeof(nm), "invalid_%d", v);
		tok_seed(nm, (unsigned)v, invalid);
	}
	for (int i = 0; i < 6; i++)
		ids[1 + 4 * i] = (uint8_t)(i * 37 + 1);
	put(DIR "tok/decode_ids", ids, sizeof(ids));
	ids[0] = 0x80 | 0x04 | 0x08 | 1;
	ids[4] = 0xff; /* one id far out of range */
	put(DIR "tok/decode_bad_id", ids, sizeof(ids));
}

int main(void)
{
	gguf_seed("empty", NULL, 0);
	gguf_seed("every_type", every_type, 0);
	gguf_seed("vocab_gpt2", gpt2_vocab, 1);
	gguf_seed("vocab_spm", spm_vocab, 1);
	gguf_seed("model_qwen2", micro_model, 2);
	gguf_seed("model_qwen2_quant32", quant32_model, 2);
	gguf_seed("model_qwen3_quant256", quant256_model, 2);
	wire_seeds();
	tok_seeds();
	return 0;
}

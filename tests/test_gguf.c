/*
 * GGUF reader/writer and model validation: round trips, and every kind of
 * bad file gives one clear error (never a crash).
 */
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "format/gguf.h"
#include "format/hugemem.h"
#include "infer/model.h"
#include "kernels/kern.h"
#include "qerr.h"
#include "testutil.h"

/* ---- a small model written with the writer --------------------------- */

enum flaw {
	OK = 0,
	NO_ARCH,         /* general.architecture missing */
	BAD_ARCH,        /* architecture "gpt9" */
	NO_BLOCKS,       /* qwen2.block_count missing */
	VOCAB_MISMATCH,  /* 10 tokens, embedding of 12 rows */
	BAD_TYPE,        /* attn_q in IQ2_XXS (unsupported) */
	NO_TENSOR,       /* ffn_down of layer 0 missing */
	BAD_SHAPE,       /* attn_k with the wrong row count */
	HEADS_INDIVISIBLE,
	PARTIAL_BLOCK,   /* attn_k.bias in Q8_0: 16 elements, not a block */
	ROPE_LONGROPE,   /* rope.scaling.type longrope: not supported */
	KV_HEADS,        /* head_count_kv 3 does not divide head_count 2 */
	EXTRA_LAYER,     /* block_count 1, and a blk.1 tensor too */
	QK_NORM,         /* qwen3's attn_q_norm in a qwen2 file */
	DUP_TENSOR,      /* blk.0.ffn_norm.weight twice */
	OVERLAP,         /* output_norm's offset patched to token_embd's */
	LLAMA_BO,        /* a llama model with attn_output.bias (valid) */
	TRAILING_ONES,   /* attn_q [D, D, 1], output_norm [D, 1] (valid) */
	TRAILING_TWO,    /* attn_k [D, D / 2, 2]: a third dimension */
	BOOL_DIM,        /* embedding_length written as a bool (true) */
};

#define D 32
#define F 64
#define NV 10

typedef struct {
	uint32_t type;
	uint64_t ne[4];
	int n_dims;
	char name[64];
} tinfo;

static int fill_zero(void *ctx, int idx, void *dst, uint64_t nbytes)
{
	(void)ctx;
	(void)idx;
	memset(dst, 0, nbytes);
	/* Q8_0 scale 0 and F32 zeros are both valid */
	return 0;
}

/* Every tensor's bytes a pattern that differs by tensor and never reads
 * as all zeros (test_copy_tensors_if: a page dropped by mistake from a
 * private copy reads as zeros); for files only opened, never loaded. */
static int fill_pattern(void *ctx, int idx, void *dst, uint64_t nbytes)
{
	unsigned char *p = dst;

	(void)ctx;
	for (uint64_t i = 0; i < nbytes; i++)
		p[i] = (unsigned char)(1 + (i * 7 + (uint64_t)idx * 13) % 251);
	return 0;
}

/* build's fill: zeros, or fill_pattern while this is set */
static int build_pattern;

static void build(const char *path, enum flaw fl)
{
	gguf_writer *w;
	const char *toks[NV] = {"a", "b", "c", "d", "e", "f", "g", "h", "i",
				"j"};
	int32_t tt[NV];
	tinfo t[32];
	int nt = 0;
	const char *arch = fl == LLAMA_BO ? "llama" : "qwen2";
	char key[96];

	for (int i = 0; i < NV; i++)
		tt[i] = 1;
	assert_int_equal(gguf_writer_new(&w), 0);
	if (fl != NO_ARCH)
		gguf_w_str(w, "general.architecture",
			   fl == BAD_ARCH ? "gpt9" : arch);
#define K(k) (snprintf(key, sizeof(key), "%s.%s", arch, k), key)
	gguf_w_u32(w, K("context_length"), 64);
	if (fl == BOOL_DIM)
		gguf_w_bool(w, K("embedding_length"), 1);
	else
		gguf_w_u32(w, K("embedding_length"), D);
	if (fl != NO_BLOCKS)
		gguf_w_u32(w, K("block_count"), 1);
	gguf_w_u32(w, K("feed_forward_length"), F);
	gguf_w_u32(w, K("attention.head_count"),
		   fl == HEADS_INDIVISIBLE ? 3 : 2);
	gguf_w_u32(w, K("attention.head_count_kv"), fl == KV_HEADS ? 3 : 1);
	if (fl == ROPE_LONGROPE)
		gguf_w_str(w, K("rope.scaling.type"), "longrope");
	gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-6f);
#undef K
	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, NV);
	gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, tt, NV);
#define T(nm, ty, a, b, nd)                                                  \
	do {                                                                 \
		snprintf(t[nt].name, sizeof(t[nt].name), "%s", nm);          \
		t[nt].type = ty;                                             \
		t[nt].ne[0] = a;                                             \
		t[nt].ne[1] = b;                                             \
		t[nt].ne[2] = t[nt].ne[3] = 1;                               \
		t[nt].n_dims = nd;                                           \
		nt++;                                                        \
	} while (0)
	T("token_embd.weight", GGML_TYPE_F32, D, fl == VOCAB_MISMATCH ? 12 : NV,
	  2);
	T("output_norm.weight", GGML_TYPE_F32, D, 1, fl == TRAILING_ONES ? 2 : 1);
	T("blk.0.attn_norm.weight", GGML_TYPE_F32, D, 1, 1);
	T("blk.0.attn_q.weight",
	  fl == BAD_TYPE ? GGML_TYPE_IQ2_XXS : GGML_TYPE_Q8_0, D, D,
	  fl == TRAILING_ONES ? 3 : 2);
	T("blk.0.attn_k.weight", GGML_TYPE_F16, D, fl == BAD_SHAPE ? 8 : D / 2,
	  2);
	if (fl == TRAILING_TWO) {
		t[nt - 1].n_dims = 3;
		t[nt - 1].ne[2] = 2;
	}
	T("blk.0.attn_v.weight", GGML_TYPE_BF16, D, D / 2, 2);
	T("blk.0.attn_q.bias", GGML_TYPE_F32, D, 1, 1);
	T("blk.0.attn_k.bias", GGML_TYPE_F32, D / 2, 1, 1);
	T("blk.0.attn_v.bias", GGML_TYPE_F32, D / 2, 1, 1);
	T("blk.0.attn_output.weight", GGML_TYPE_F32, D, D, 2);
	T("blk.0.ffn_norm.weight", GGML_TYPE_F32, D, 1, 1);
	T("blk.0.ffn_gate.weight", GGML_TYPE_F32, D, F, 2);
	T("blk.0.ffn_up.weight", GGML_TYPE_F32, D, F, 2);
	if (fl != NO_TENSOR)
		T("blk.0.ffn_down.weight", GGML_TYPE_F32, F, D, 2);
	if (fl == EXTRA_LAYER)
		T("blk.1.attn_q.weight", GGML_TYPE_F32, D, D, 2);
	if (fl == QK_NORM)
		T("blk.0.attn_q_norm.weight", GGML_TYPE_F32, D / 2, 1, 1);
	if (fl == DUP_TENSOR)
		T("blk.0.ffn_norm.weight", GGML_TYPE_F32, D, 1, 1);
	if (fl == LLAMA_BO)
		T("blk.0.attn_output.bias", GGML_TYPE_F32, D, 1, 1);
#undef T
	for (int i = 0; i < nt; i++) {
		if (t[i].type == GGML_TYPE_IQ2_XXS) {
			/* the writer refuses unknown layouts; fake an IQ2_XXS
			 * tensor as F32 and patch the type byte later */
			assert_int_equal(gguf_w_tensor(w, t[i].name,
						       GGML_TYPE_F32,
						       t[i].n_dims, t[i].ne), 0);
		} else {
			assert_int_equal(gguf_w_tensor(w, t[i].name, t[i].type,
						       t[i].n_dims, t[i].ne), 0);
		}
	}
	assert_int_equal(gguf_writer_save(w, path, build_pattern ? fill_pattern
							   : fill_zero, NULL), 0);
	gguf_writer_free(&w);
	assert_null(w);
	if (fl == BAD_TYPE || fl == PARTIAL_BLOCK) {
		/* patch the type of attn_q: find its name, skip dims */
		FILE *f = fopen(path, "r+b");
		char buf[4096];
		size_t n = fread(buf, 1, sizeof(buf), f);
		const char *nm = fl == BAD_TYPE ? "blk.0.attn_q.weight"
						: "blk.0.attn_k.bias";
		char *p = memmem(buf, n, nm, strlen(nm));
		uint32_t q4 = fl == BAD_TYPE ? GGML_TYPE_IQ2_XXS : GGML_TYPE_Q8_0;
		long dims = fl == BAD_TYPE ? 16 : 8;

		assert_non_null(p);
		/* name, n_dims u32, n_dims x u64 ne, then the type */
		fseek(f, (long)(p - buf) + (long)strlen(nm) + 4 + dims, SEEK_SET);
		fwrite(&q4, 4, 1, f);
		fclose(f);
	}
	if (fl == OVERLAP) {
		/* output_norm's offset (after name, n_dims, 1 dim, type)
		 * made token_embd's, 0: the two tensors share bytes */
		FILE *f = fopen(path, "r+b");
		char buf[4096];
		size_t n = fread(buf, 1, sizeof(buf), f);
		const char *nm = "output_norm.weight";
		char *p = memmem(buf, n, nm, strlen(nm));
		uint64_t zero = 0;

		assert_non_null(p);
		fseek(f, (long)(p - buf) + (long)strlen(nm) + 4 + 8 + 4,
		      SEEK_SET);
		fwrite(&zero, 8, 1, f);
		fclose(f);
	}
}

static char path[512];

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "%s/gguf-%d.gguf", tu_tmpdir(),
		 (int)getpid());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static void test_roundtrip(void **state)
{
	gguf_file *g;
	const gguf_kv *kv;
	const gguf_tensor *t;
	uint32_t u;
	gguf_str s;
	model *m;

	(void)state;
	build(path, OK);
	assert_int_equal(gguf_open(path, &g), 0);
	assert_int_equal(gguf_get_str(g, "general.architecture", &s), 0);
	assert_true(gguf_str_eq(s, "qwen2"));
	assert_int_equal(gguf_get_u32(g, "qwen2.embedding_length", &u), 0);
	assert_int_equal(u, D);
	assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING,
				      &kv), 0);
	assert_int_equal(kv->arr_n, NV);
	assert_true(gguf_str_eq(kv->arr_str[9], "j"));
	/* wrong-typed access is an error, not a reinterpretation */
	assert_int_equal(gguf_get_str(g, "qwen2.embedding_length", &s),
			 QERR_FORMAT);
	assert_int_equal(gguf_get_u32(g, "nope", &u), QERR_MISSING);
	t = gguf_find_tensor(g, "blk.0.attn_q.weight");
	assert_non_null(t);
	assert_int_equal(t->type, GGML_TYPE_Q8_0);
	assert_int_equal(t->nbytes, D / 32 * 34 * D);
	assert_int_equal((uintptr_t)t->data % 32, 0);
	gguf_close(&g);
	assert_null(g);
	assert_int_equal(model_load(path, &m), 0);
	assert_int_equal(m->cfg.head_dim, 16);
	assert_int_equal(m->cfg.kv_dim, 16);
	assert_int_equal(m->cfg.vocab, NV);
	assert_true(m->tied_output);
	assert_int_equal(m->cfg.rope_mode, MODEL_ROPE_NEOX);
	model_free(&m);
	assert_null(m);
}

/* gguf_copy_tensors: every tensor's bytes move to a private copy that
 * starts on a 2 MiB boundary (the data section's first tensor), equal to
 * the file's; the metadata still reads; a second call changes nothing.
 * model_load with QUORUM_WEIGHTS=copy and =map gives the same weights. */
/* hugemem: on a 2 MiB boundary, whole pages, zero-filled and
 * writable to the last byte; nothing for 0 bytes or a size past the
 * address space. */
static void test_hugemem(void **state)
{
	const size_t hp = (size_t)2 << 20, page = (size_t)sysconf(_SC_PAGESIZE);
	const size_t sizes[] = {1, 4096, hp - 1, hp, hp + 1, 3 * hp + 17};

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *p = hugemem_alloc(n);

		assert_non_null(p);
		assert_int_equal((uintptr_t)p % hp, 0);
		assert_int_equal(hugemem_span(n) % page, 0);
		assert_true(hugemem_span(n) >= n && hugemem_span(n) < n + page);
		assert_int_equal(p[0], 0);
		assert_int_equal(p[n / 2], 0);
		assert_int_equal(p[n - 1], 0);
		memset(p, 0xa5, n);
		assert_int_equal(p[n - 1], 0xa5);
		hugemem_free(p, n);
	}
	assert_null(hugemem_alloc(0));
	assert_null(hugemem_alloc(SIZE_MAX));
	assert_null(hugemem_alloc(SIZE_MAX - hp));
	hugemem_free(NULL, 0);
}

/* Every tensor of g: its bytes (saved) and where they are (before). */
struct snap {
	uint64_t n;
	unsigned char **saved;
	const void **before;
};

static struct snap snap_take(const gguf_file *g)
{
	struct snap sn = {gguf_n_tensors(g), NULL, NULL};

	sn.saved = calloc(sn.n, sizeof(*sn.saved));
	sn.before = calloc(sn.n, sizeof(*sn.before));
	assert_non_null(sn.saved);
	assert_non_null(sn.before);
	for (uint64_t i = 0; i < sn.n; i++) {
		const gguf_tensor *t = gguf_tensor_at(g, i);

		sn.saved[i] = malloc(t->nbytes);
		assert_non_null(sn.saved[i]);
		memcpy(sn.saved[i], t->data, t->nbytes);
		sn.before[i] = t->data;
	}
	return sn;
}

static void snap_free(struct snap *sn)
{
	for (uint64_t i = 0; i < sn->n; i++)
		free(sn->saved[i]);
	free(sn->saved);
	free(sn->before);
}

/* gguf_copy_tensors_if: the tensors keep accepts move to the copy (each
 * at its offset from a 2 MiB boundary), the others stay in the mapping;
 * every tensor's bytes read the same. gguf_drop_mapped drops pages of
 * the mapping only: a dropped tensor in the mapping reads again (from the
 * page cache), and a copied tensor is left alone (its private pages
 * dropped would read as zeros). */
static int keep_odd(const gguf_tensor *t, void *ctx)
{
	const gguf_file *g = ctx;

	return (int)(t - gguf_tensor_at(g, 0)) % 2;
}

static void test_copy_tensors_if(void **state)
{
	gguf_file *g;
	uint64_t n;
	struct snap sn;
	unsigned char **saved;
	const void **before;

	(void)state;
	build_pattern = 1;
	build(path, OK);
	build_pattern = 0;
	assert_int_equal(gguf_open(path, &g), 0);
	n = gguf_n_tensors(g);
	assert_true(n >= 4);
	sn = snap_take(g);
	saved = sn.saved;
	before = sn.before;
	assert_int_equal(gguf_copy_tensors_if(g, keep_odd, g), 0);
	for (uint64_t i = 0; i < n; i++) {
		const gguf_tensor *t = gguf_tensor_at(g, i);

		if (i % 2) {
			assert_ptr_not_equal(t->data, before[i]);
			assert_int_equal(((uintptr_t)t->data - t->offset) %
					 (2u << 20), 0);
		} else {
			assert_ptr_equal(t->data, before[i]);
		}
		assert_memory_equal(t->data, saved[i], t->nbytes);
		/* a whole page or more of each, dropped where it is */
		gguf_drop_mapped(g, t->data, t->nbytes);
		assert_memory_equal(t->data, saved[i], t->nbytes);
	}
	/* the premise: a copied and a mapped tensor of two pages or more
	 * (whole pages inside them to drop) */
	assert_true(gguf_tensor_at(g, 11)->nbytes >= 8192 &&
		    gguf_tensor_at(g, 12)->nbytes >= 8192);
	/* from the first tensor to the mapping's end, then a range outside
	 * the mapping: no effect on any bytes */
	{
		const char *lo = before[0], *end = lo;

		for (uint64_t i = 0; i < n; i += 2)
			if ((const char *)before[i] +
			    gguf_tensor_at(g, i)->nbytes > end)
				end = (const char *)before[i] +
				      gguf_tensor_at(g, i)->nbytes;
		gguf_drop_mapped(g, lo, (size_t)(end - lo));
	}
	gguf_drop_mapped(g, saved[0], gguf_tensor_at(g, 0)->nbytes);
	for (uint64_t i = 0; i < n; i++)
		assert_memory_equal(gguf_tensor_at(g, i)->data, saved[i],
				    gguf_tensor_at(g, i)->nbytes);
	gguf_close(&g);
	snap_free(&sn);
}

static void test_copy_tensors(void **state)
{
	gguf_file *g;
	gguf_str s;
	uint64_t n;
	struct snap sn;
	unsigned char **saved;
	const void **before;
	model *mc, *mm;

	(void)state;
	build(path, OK);
	assert_int_equal(gguf_open(path, &g), 0);
	n = gguf_n_tensors(g);
	sn = snap_take(g);
	saved = sn.saved;
	before = sn.before;
	assert_int_equal(gguf_copy_tensors(g), 0);
	for (uint64_t i = 0; i < n; i++) {
		const gguf_tensor *t = gguf_tensor_at(g, i);
		assert_ptr_not_equal(t->data, before[i]);
		assert_int_equal(((uintptr_t)t->data - t->offset) % (2u << 20), 0);
		assert_memory_equal(t->data, saved[i], t->nbytes);
		before[i] = t->data;
	}
	assert_int_equal(gguf_copy_tensors(g), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_ptr_equal(gguf_tensor_at(g, i)->data, before[i]);
	assert_int_equal(gguf_get_str(g, "general.architecture", &s), 0);
	assert_true(gguf_str_eq(s, "qwen2"));
	gguf_close(&g);
	snap_free(&sn);

	setenv("QUORUM_WEIGHTS", "copy", 1);
	assert_int_equal(model_load(path, &mc), 0);
	setenv("QUORUM_WEIGHTS", "map", 1);
	assert_int_equal(model_load(path, &mm), 0);
	unsetenv("QUORUM_WEIGHTS");
	/* Every matrix the forward pass packs (model_packed_mat, slot by
	 * slot: the named tensor, so the slots' names and fields agree)
	 * stays in the mapping exactly where its packed copy serves every
	 * row count (attn_q, Q8_0, on x86), else is copied (the floats):
	 * the copy sits at each tensor's offset from a 2 MiB boundary, the
	 * mapping at the file's data offset, which is not page aligned. */
	{
		static const char *const names[MODEL_PK_N + 1] = {
			"blk.0.attn_q.weight", "blk.0.attn_k.weight",
			"blk.0.attn_v.weight", "blk.0.attn_output.weight",
			"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
			"blk.0.ffn_down.weight", "token_embd.weight"};
		int left = 0;

		for (int i = 0; i <= MODEL_PK_N; i++) {
			const model_mat *w = i < MODEL_PK_N
				? model_packed_mat(mc, 0, i)
				: model_packed_mat(mc, mc->cfg.n_layers, 0);
			const gguf_tensor *t = gguf_find_tensor(mc->gguf,
								names[i]);
			int copied = ((uintptr_t)t->data - t->offset) %
				     (2u << 20) == 0;

			assert_non_null(w);
			assert_ptr_equal(w->data, t->data);
			assert_int_equal(copied,
					 !kern_pack_covers(w->type, w->k));
			left += !copied;
		}
		assert_int_equal(left, kern_pack_covers(GGML_TYPE_Q8_0,
							mc->layers[0].wq.k));
		assert_null(model_packed_mat(mc, mc->cfg.n_layers, 1));
	}
	assert_ptr_not_equal(mc->layers[0].wk.data, mm->layers[0].wk.data);
	assert_memory_equal(mc->layers[0].wq.data, mm->layers[0].wq.data,
			    gguf_find_tensor(mm->gguf, "blk.0.attn_q.weight")->nbytes);
	assert_memory_equal(mc->layers[0].wk.data, mm->layers[0].wk.data,
			    gguf_find_tensor(mm->gguf, "blk.0.attn_k.weight")->nbytes);
	assert_memory_equal(mc->tok_embd.data, mm->tok_embd.data,
			    gguf_find_tensor(mm->gguf, "token_embd.weight")->nbytes);
	model_free(&mc);
	model_free(&mm);
}

/* Found by fuzz/mkseeds under UBSan: saving a writer with no metadata
 * copied its empty (NULL) buffer with memcpy. An empty file is valid. */
static void test_empty_file(void **state)
{
	gguf_writer *w;
	gguf_file *g;

	(void)state;
	assert_int_equal(gguf_writer_new(&w), 0);
	assert_int_equal(gguf_writer_save(w, path, NULL, NULL), 0);
	gguf_writer_free(&w);
	assert_int_equal(gguf_open(path, &g), 0);
	assert_int_equal(gguf_n_kv(g), 0);
	assert_int_equal(gguf_n_tensors(g), 0);
	assert_int_equal(gguf_file_size(g), 24);
	gguf_close(&g);
	/* a directory for the file is said as such (the rename had failed
	 * with "Is a directory" or "Device or resource busy") */
	{
		char dir[sizeof(path)];

		snprintf(dir, sizeof(dir), "%s", path);
		*strrchr(dir, '/') = '\0';
		assert_int_equal(gguf_writer_new(&w), 0);
		assert_int_not_equal(gguf_writer_save(w, dir, NULL, NULL), 0);
		assert_non_null(strstr(qerr_detail(), "is a directory"));
		gguf_writer_free(&w);
	}
}

/* Found by fuzz/mkseeds: general.alignment 64 was written while the
 * tensors were laid out at 32, a file the reader refused. */
static void test_writer_alignment(void **state)
{
	static const struct { uint32_t v; int rc; } cases[] = {
		{32, 0}, {64, QERR_UNSUPPORTED}, {1, QERR_UNSUPPORTED},
	};
	uint64_t ne[1] = {4};
	gguf_writer *w;
	gguf_file *g;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(gguf_writer_new(&w), 0);
		assert_int_equal(gguf_w_u32(w, "general.alignment", cases[i].v),
				 cases[i].rc);
		assert_int_equal(gguf_w_tensor(w, "v", GGML_TYPE_F32, 1, ne),
				 cases[i].rc);
		assert_int_equal(gguf_writer_save(w, path, fill_zero, NULL),
				 cases[i].rc);
		gguf_writer_free(&w);
		if (!cases[i].rc) {
			assert_int_equal(gguf_open(path, &g), 0);
			gguf_close(&g);
		}
	}
	assert_int_equal(gguf_writer_new(&w), 0);
	assert_int_equal(gguf_w_str(w, "general.alignment", "32"),
			 QERR_UNSUPPORTED);
	gguf_writer_free(&w);
}

/* Model-level flaws: each fails with its code and a message naming the
 * culprit. */
static void test_model_flaws(void **state)
{
	static const struct {
		enum flaw fl;
		int code;
		const char *needle;
	} cases[] = {
		{NO_ARCH, QERR_MISSING, "general.architecture"},
		{BAD_ARCH, QERR_UNSUPPORTED, "gpt9"},
		{BAD_ARCH, QERR_UNSUPPORTED, "qwen2, qwen3, llama, gemma3"},
		{ROPE_LONGROPE, QERR_UNSUPPORTED, "'longrope' is not supported "
						  "(none, linear, yarn)"},
		{KV_HEADS, QERR_FORMAT, "head_count_kv 3"},
		{NO_BLOCKS, QERR_MISSING, "qwen2.block_count"},
		{VOCAB_MISMATCH, QERR_FORMAT, "10 tokens"},
		{BAD_TYPE, QERR_UNSUPPORTED,
		 "blk.0.attn_q.weight: weight type IQ2_XXS (16) is not "
		 "supported (supported: F32, F16"},
		{NO_TENSOR, QERR_MISSING, "blk.0.ffn_down.weight"},
		{BAD_SHAPE, QERR_FORMAT, "blk.0.attn_k.weight"},
		{HEADS_INDIVISIBLE, QERR_FORMAT, "divide"},
		/* found by fuzz_gguf: an assert in kern_row_f32 */
		{PARTIAL_BLOCK, QERR_FORMAT, "blk.0.attn_k.bias"},
		/* tensors the loader never reads: ignoring them would run
		 * a different model than the file's (llama.cpp refuses) */
		{EXTRA_LAYER, QERR_FORMAT, "tensor 'blk.1.attn_q.weight' is "
					   "not a tensor of a 1-layer qwen2 "
					   "model (block_count 1)"},
		{QK_NORM, QERR_FORMAT, "tensor 'blk.0.attn_q_norm.weight' is "
				       "not a tensor of a qwen2 model"},
		{DUP_TENSOR, QERR_FORMAT, "duplicate tensor name "
					  "'blk.0.ffn_norm.weight'"},
		/* a bool is no size: it had been read as 1 */
		{BOOL_DIM, QERR_FORMAT, "metadata key 'qwen2.embedding_length' "
					"has type bool, want u32"},
		{TRAILING_TWO, QERR_FORMAT, "tensor 'blk.0.attn_k.weight' has 3 "
					    "dims [32, 16, ...], want 2 [32, "
					    "16]"},
		{OVERLAP, QERR_FORMAT, "tensors 'token_embd.weight' (1280 "
				       "bytes at data offset 0) and "
				       "'output_norm.weight' (128 bytes at 0) "
				       "overlap"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		model *m = (model *)1;
		int rc;

		build(path, cases[i].fl);
		rc = model_load(path, &m);
		if (rc != cases[i].code || !strstr(qerr_detail(),
						   cases[i].needle))
			fail_msg("case %zu: rc %d (%s), want %d with '%s'", i,
				 rc, qerr_detail(), cases[i].code,
				 cases[i].needle);
		assert_null(m);
		assert_non_null(strstr(qerr_detail(), path));
	}
}

/* An unsupported architecture's name with a control byte is shown with
 * it escaped: "qwe\0" had printed as 'qwe'. */
static void write_bytes(const char *p, const void *d, size_t n);

static void test_arch_control_byte(void **state)
{
	model *m = NULL;
	size_t n = 0;
	char *f, *at;

	(void)state;
	build(path, BAD_ARCH);
	assert_non_null(f = tu_slurp(path, &n));
	assert_non_null(at = memmem(f, n, "gpt9", 4));
	memcpy(at, "qwe\0", 4);
	write_bytes(path, f, n);
	free(f);
	assert_int_equal(model_load(path, &m), QERR_UNSUPPORTED);
	assert_non_null(strstr(qerr_detail(), "architecture 'qwe\\x00'"));
	assert_null(m);
}

/* Dimensions of size 1 after a tensor's own are no dimensions: a matrix
 * [k, n, 1] and a vector [n, 1] load, as llama.cpp loads them (they had
 * been refused as "shape [32, 32], want [32, 32]"). */
static void test_trailing_ones(void **state)
{
	model *m = NULL;

	(void)state;
	build(path, TRAILING_ONES);
	if (model_load(path, &m))
		fail_msg("%s", qerr_detail());
	assert_non_null(m);
	assert_int_equal(m->cfg.dim, D);
	model_free(&m);
}

/* A llama model may have an output projection bias (llama.cpp's llama
 * loader reads it when present and adds it): it is read and applied,
 * not ignored (a different model) nor refused. */
static void test_llama_output_bias(void **state)
{
	model *m;

	(void)state;
	build(path, LLAMA_BO);
	if (model_load(path, &m))
		fail_msg("%s", qerr_detail());
	assert_int_equal(m->cfg.arch, MODEL_LLAMA);
	assert_non_null(m->layers[0].bo);
	assert_non_null(m->layers[0].bq);
	model_free(&m);
}

/* ---- a mixture of experts (qwen3moe) and its flaws ------------------- */

enum moe_flaw {
	MOE_OK = 0,
	MOE_NO_EXPERT,    /* ffn_up_exps of layer 0 missing */
	MOE_USED_GT,      /* expert_used_count 5 > expert_count 4 */
	MOE_NO_COUNT,     /* expert_count missing */
	MOE_BAD_SHAPE,    /* ffn_down_exps with 3 experts */
	MOE_FLAT,         /* ffn_gate_exps 2-D */
	MOE_NAN_ROUTER,   /* a NaN in ffn_gate_inp */
};
#define ME 4
#define MF 16

static int fill_moe(void *ctx, int idx, void *dst, uint64_t nbytes)
{
	const int *nan_idx = ctx;

	memset(dst, 0, nbytes);
	if (idx == *nan_idx)
		((float *)dst)[37] = NAN; /* expert 1, element 5 */
	return 0;
}

static void build_moe(const char *p, enum moe_flaw fl)
{
	gguf_writer *w;
	const char *toks[NV] = {"a", "b", "c", "d", "e", "f", "g", "h", "i",
				"j"};
	int32_t tt[NV];
	static const struct {
		const char *name;
		int n_dims;
		uint64_t ne[3];
	} t[] = {
		{"token_embd.weight", 2, {D, NV, 1}},
		{"output_norm.weight", 1, {D, 1, 1}},
		{"blk.0.attn_norm.weight", 1, {D, 1, 1}},
		{"blk.0.attn_q.weight", 2, {D, D, 1}},
		{"blk.0.attn_k.weight", 2, {D, D / 2, 1}},
		{"blk.0.attn_v.weight", 2, {D, D / 2, 1}},
		{"blk.0.attn_q_norm.weight", 1, {D / 2, 1, 1}},
		{"blk.0.attn_k_norm.weight", 1, {D / 2, 1, 1}},
		{"blk.0.attn_output.weight", 2, {D, D, 1}},
		{"blk.0.ffn_norm.weight", 1, {D, 1, 1}},
		{"blk.0.ffn_gate_inp.weight", 2, {D, ME, 1}},
		{"blk.0.ffn_gate_exps.weight", 3, {D, MF, ME}},
		{"blk.0.ffn_up_exps.weight", 3, {D, MF, ME}},
		{"blk.0.ffn_down_exps.weight", 3, {MF, D, ME}},
	};
	int nan_idx = -1, n = 0;

	for (int i = 0; i < NV; i++)
		tt[i] = 1;
	assert_int_equal(gguf_writer_new(&w), 0);
	gguf_w_str(w, "general.architecture", "qwen3moe");
	gguf_w_u32(w, "qwen3moe.context_length", 64);
	gguf_w_u32(w, "qwen3moe.embedding_length", D);
	gguf_w_u32(w, "qwen3moe.block_count", 1);
	gguf_w_u32(w, "qwen3moe.attention.head_count", 2);
	gguf_w_u32(w, "qwen3moe.attention.head_count_kv", 1);
	if (fl != MOE_NO_COUNT)
		gguf_w_u32(w, "qwen3moe.expert_count", ME);
	gguf_w_u32(w, "qwen3moe.expert_used_count", fl == MOE_USED_GT ? 5 : 2);
	gguf_w_u32(w, "qwen3moe.expert_feed_forward_length", MF);
	gguf_w_f32(w, "qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, NV);
	gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, tt, NV);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t ne[3] = {t[i].ne[0], t[i].ne[1], t[i].ne[2]};
		int nd = t[i].n_dims;

		if (fl == MOE_NO_EXPERT && strstr(t[i].name, "ffn_up_exps"))
			continue;
		if (fl == MOE_BAD_SHAPE && strstr(t[i].name, "down_exps"))
			ne[2] = 3;
		if (fl == MOE_FLAT && strstr(t[i].name, "gate_exps")) {
			ne[1] *= ne[2];
			nd = 2;
		}
		if (fl == MOE_NAN_ROUTER && strstr(t[i].name, "gate_inp"))
			nan_idx = n;
		assert_int_equal(gguf_w_tensor(w, t[i].name, GGML_TYPE_F32,
					       (uint32_t)nd, ne), 0);
		n++;
	}
	assert_int_equal(gguf_writer_save(w, p, fill_moe, &nan_idx), 0);
	gguf_writer_free(&w);
}

static void test_moe_flaws(void **state)
{
	static const struct {
		enum moe_flaw fl;
		int code;
		const char *needle;
	} cases[] = {
		{MOE_NO_EXPERT, QERR_MISSING, "blk.0.ffn_up_exps.weight"},
		{MOE_USED_GT, QERR_RANGE, "qwen3moe.expert_used_count = 5 "
					  "exceeds qwen3moe.expert_count = 4"},
		{MOE_NO_COUNT, QERR_MISSING, "qwen3moe.expert_count"},
		{MOE_BAD_SHAPE, QERR_FORMAT, "'blk.0.ffn_down_exps.weight' has "
					     "3 dims [16, 32, 3], want 3 "
					     "[16, 32, 4]"},
		{MOE_FLAT, QERR_FORMAT, "'blk.0.ffn_gate_exps.weight' has 2 "
					"dims"},
		{MOE_NAN_ROUTER, QERR_FORMAT,
		 "'blk.0.ffn_gate_inp.weight' (router) row 1 element 5 is nan"},
	};
	model *m;

	(void)state;
	build_moe(path, MOE_OK);
	assert_int_equal(model_load(path, &m), 0);
	assert_int_equal(m->cfg.arch, MODEL_QWEN3MOE);
	assert_int_equal(m->cfg.n_expert, ME);
	assert_int_equal(m->cfg.n_expert_used, 2);
	assert_int_equal(m->cfg.expert_ffn, MF);
	assert_true(m->cfg.qk_norm);
	assert_non_null(m->layers[0].router.data);
	assert_int_equal(m->layers[0].w_down.k, MF);
	assert_int_equal(m->layers[0].w_down.n, D);
	assert_int_equal(m->layers[0].w_down.stride, (size_t)MF * D * 4);
	model_free(&m);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		m = (model *)1;
		build_moe(path, cases[i].fl);
		rc = model_load(path, &m);
		if (rc != cases[i].code || !strstr(qerr_detail(),
						   cases[i].needle))
			fail_msg("moe case %zu: rc %d (%s), want %d with '%s'",
				 i, rc, qerr_detail(), cases[i].code,
				 cases[i].needle);
		assert_null(m);
		assert_non_null(strstr(qerr_detail(), path));
	}
}

/* ---- gpt-oss and its flaws ------------------------------------------ */

enum oss_flaw {
	OSS_OK = 0,
	OSS_NO_EXPERT,    /* ffn_down_exps.weight missing */
	OSS_USED_GT,      /* expert_used_count 5 > expert_count 4 */
	OSS_BAD_SHAPE,    /* ffn_gate_exps with 3 experts */
	OSS_NAN_ROUTER,   /* a NaN in ffn_gate_inp.weight */
	OSS_NAN_RBIAS,    /* a NaN in ffn_gate_inp.bias */
	OSS_NO_SINKS,     /* attn_sinks.weight missing */
	OSS_NAN_SINK,     /* a NaN sink */
	OSS_NO_EXP_BIAS,  /* ffn_up_exps.bias missing */
	OSS_FLAT_BIAS,    /* ffn_down_exps.bias 1-D */
	OSS_NO_OUT_BIAS,  /* attn_output.bias missing */
	OSS_NO_WINDOW,    /* attention.sliding_window missing */
};

struct oss_nan {
	int idx;  /* tensor index that gets a NaN (-1: none) */
	int elem; /* at this element */
};

static int fill_oss(void *ctx, int idx, void *dst, uint64_t nbytes)
{
	const struct oss_nan *nan = ctx;

	memset(dst, 0, nbytes);
	if (idx == nan->idx)
		((float *)dst)[nan->elem] = NAN;
	return 0;
}

static void build_oss(const char *p, enum oss_flaw fl)
{
	gguf_writer *w;
	const char *toks[NV] = {"a", "b", "c", "d", "e", "f", "g", "h", "i",
				"j"};
	int32_t tt[NV];
	static const struct {
		const char *name;
		int n_dims;
		uint64_t ne[3];
	} t[] = {
		{"token_embd.weight", 2, {D, NV, 1}},
		{"output_norm.weight", 1, {D, 1, 1}},
		{"output.weight", 2, {D, NV, 1}},
		{"blk.0.attn_norm.weight", 1, {D, 1, 1}},
		{"blk.0.attn_q.weight", 2, {D, D, 1}},
		{"blk.0.attn_q.bias", 1, {D, 1, 1}},
		{"blk.0.attn_k.weight", 2, {D, D / 2, 1}},
		{"blk.0.attn_k.bias", 1, {D / 2, 1, 1}},
		{"blk.0.attn_v.weight", 2, {D, D / 2, 1}},
		{"blk.0.attn_v.bias", 1, {D / 2, 1, 1}},
		{"blk.0.attn_output.weight", 2, {D, D, 1}},
		{"blk.0.attn_output.bias", 1, {D, 1, 1}},
		{"blk.0.attn_sinks.weight", 1, {2, 1, 1}},
		{"blk.0.post_attention_norm.weight", 1, {D, 1, 1}},
		{"blk.0.ffn_gate_inp.weight", 2, {D, ME, 1}},
		{"blk.0.ffn_gate_inp.bias", 1, {ME, 1, 1}},
		{"blk.0.ffn_gate_exps.weight", 3, {D, MF, ME}},
		{"blk.0.ffn_gate_exps.bias", 2, {MF, ME, 1}},
		{"blk.0.ffn_up_exps.weight", 3, {D, MF, ME}},
		{"blk.0.ffn_up_exps.bias", 2, {MF, ME, 1}},
		{"blk.0.ffn_down_exps.weight", 3, {MF, D, ME}},
		{"blk.0.ffn_down_exps.bias", 2, {D, ME, 1}},
	};
	struct oss_nan nan = {-1, 0};
	int n = 0;

	for (int i = 0; i < NV; i++)
		tt[i] = 1;
	assert_int_equal(gguf_writer_new(&w), 0);
	gguf_w_str(w, "general.architecture", "gpt-oss");
	gguf_w_u32(w, "gpt-oss.context_length", 64);
	gguf_w_u32(w, "gpt-oss.embedding_length", D);
	gguf_w_u32(w, "gpt-oss.block_count", 1);
	gguf_w_u32(w, "gpt-oss.attention.head_count", 2);
	gguf_w_u32(w, "gpt-oss.attention.head_count_kv", 1);
	gguf_w_u32(w, "gpt-oss.expert_count", ME);
	gguf_w_u32(w, "gpt-oss.expert_used_count", fl == OSS_USED_GT ? 5 : 2);
	gguf_w_u32(w, "gpt-oss.expert_feed_forward_length", MF);
	if (fl != OSS_NO_WINDOW)
		gguf_w_u32(w, "gpt-oss.attention.sliding_window", 4);
	gguf_w_str(w, "gpt-oss.rope.scaling.type", "yarn");
	gguf_w_f32(w, "gpt-oss.rope.scaling.factor", 4.0f);
	gguf_w_u32(w, "gpt-oss.rope.scaling.original_context_length", 16);
	gguf_w_f32(w, "gpt-oss.attention.layer_norm_rms_epsilon", 1e-5f);
	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, NV);
	gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, tt, NV);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t ne[3] = {t[i].ne[0], t[i].ne[1], t[i].ne[2]};
		const char *nm = t[i].name;
		int nd = t[i].n_dims;

		if ((fl == OSS_NO_EXPERT && strstr(nm, "down_exps.weight")) ||
		    (fl == OSS_NO_SINKS && strstr(nm, "sinks")) ||
		    (fl == OSS_NO_EXP_BIAS && strstr(nm, "up_exps.bias")) ||
		    (fl == OSS_NO_OUT_BIAS && strstr(nm, "output.bias")))
			continue;
		if (fl == OSS_BAD_SHAPE && strstr(nm, "gate_exps.weight"))
			ne[2] = 3;
		if (fl == OSS_FLAT_BIAS && strstr(nm, "down_exps.bias")) {
			ne[0] *= ne[1];
			ne[1] = 1;
			nd = 1;
		}
		if ((fl == OSS_NAN_ROUTER && strstr(nm, "gate_inp.weight")) ||
		    (fl == OSS_NAN_RBIAS && strstr(nm, "gate_inp.bias")) ||
		    (fl == OSS_NAN_SINK && strstr(nm, "sinks")))
			nan = (struct oss_nan){n, fl == OSS_NAN_ROUTER ? 37 : 1};
		assert_int_equal(gguf_w_tensor(w, nm, GGML_TYPE_F32,
					       (uint32_t)nd, ne), 0);
		n++;
	}
	assert_int_equal(gguf_writer_save(w, p, fill_oss, &nan), 0);
	gguf_writer_free(&w);
}

static void test_gptoss_flaws(void **state)
{
	static const struct {
		enum oss_flaw fl;
		int code;
		const char *needle;
	} cases[] = {
		{OSS_NO_EXPERT, QERR_MISSING, "'blk.0.ffn_down_exps.weight'"},
		{OSS_USED_GT, QERR_RANGE, "gpt-oss.expert_used_count = 5 "
					  "exceeds gpt-oss.expert_count = 4"},
		{OSS_BAD_SHAPE, QERR_FORMAT, "'blk.0.ffn_gate_exps.weight' has "
					     "3 dims [32, 16, 3], want 3 "
					     "[32, 16, 4]"},
		{OSS_NAN_ROUTER, QERR_FORMAT,
		 "'blk.0.ffn_gate_inp.weight' (router) row 1 element 5 is nan"},
		{OSS_NAN_RBIAS, QERR_FORMAT,
		 "'blk.0.ffn_gate_inp.bias' element 1 is nan"},
		{OSS_NO_SINKS, QERR_MISSING, "'blk.0.attn_sinks.weight'"},
		{OSS_NAN_SINK, QERR_FORMAT,
		 "'blk.0.attn_sinks.weight' element 1 is nan"},
		{OSS_NO_EXP_BIAS, QERR_MISSING, "'blk.0.ffn_up_exps.bias'"},
		{OSS_FLAT_BIAS, QERR_FORMAT, "'blk.0.ffn_down_exps.bias' has 1 "
					     "dims [128, 1], want 2 [32, 4]"},
		{OSS_NO_OUT_BIAS, QERR_MISSING, "'blk.0.attn_output.bias'"},
		{OSS_NO_WINDOW, QERR_MISSING, "gpt-oss.attention.sliding_window"},
	};
	const model_config *c;
	model *m;

	(void)state;
	build_oss(path, OSS_OK);
	assert_int_equal(model_load(path, &m), 0);
	c = &m->cfg;
	assert_int_equal(c->arch, MODEL_GPTOSS);
	assert_string_equal(model_arch_name(c->arch), "gpt-oss");
	assert_int_equal(c->n_expert, ME);
	assert_int_equal(c->expert_ffn, MF);
	assert_int_equal(c->expert_gating, MODEL_GATE_SOFTMAX_WEIGHT);
	assert_int_equal(c->expert_act, MODEL_ACT_SWIGLU_OAI);
	assert_false(c->expert_norm_w);
	assert_false(c->qk_norm);
	assert_true(c->attn_sinks);
	assert_int_equal(c->swa_window, 4);
	assert_int_equal(c->swa_pattern, 2);
	assert_true(m->layers[0].swa); /* layer 0 of pattern 2: local */
	assert_true(c->rope_yarn);
	assert_true(c->rope_scale == 0.25f && c->rope_scale_swa == 0.25f);
	assert_int_equal(c->yarn_orig_ctx, 16);
	assert_true(c->rope_base_swa == c->rope_base);
	assert_non_null(m->layers[0].bo);
	assert_non_null(m->layers[0].sinks);
	assert_non_null(m->layers[0].router_b);
	assert_non_null(m->layers[0].b_gate);
	assert_non_null(m->layers[0].b_up);
	assert_non_null(m->layers[0].b_down);
	assert_non_null(m->layers[0].ffn_norm);
	assert_null(m->layers[0].post_attn_norm);
	model_free(&m);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		m = (model *)1;
		build_oss(path, cases[i].fl);
		rc = model_load(path, &m);
		if (rc != cases[i].code || !strstr(qerr_detail(),
						   cases[i].needle))
			fail_msg("gpt-oss case %zu: rc %d (%s), want %d with "
				 "'%s'", i, rc, qerr_detail(), cases[i].code,
				 cases[i].needle);
		assert_null(m);
		assert_non_null(strstr(qerr_detail(), path));
	}
}

static void write_bytes(const char *p, const void *d, size_t n)
{
	FILE *f = fopen(p, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(d, 1, n, f), n);
	fclose(f);
}

/* Every truncation of a valid file is rejected cleanly. */
static void test_truncations(void **state)
{
	size_t n = 0;
	uint8_t *b;
	char tp[600];
	int rejected = 0;

	(void)state;
	build(path, OK);
	assert_non_null(b = (uint8_t *)tu_slurp(path, &n));
	snprintf(tp, sizeof(tp), "%s.trunc", path);
	for (size_t len = 0; len < n; len += len < 600 ? 1 : 97) {
		gguf_file *g = NULL;

		write_bytes(tp, b, len);
		if (gguf_open(tp, &g) != 0) {
			assert_null(g);
			assert_true(strlen(qerr_detail()) > 0);
			rejected++;
		} else {
			fail_msg("truncated to %zu of %zu bytes was accepted",
				 len, n);
		}
	}
	printf("  %d truncations rejected\n", rejected);
	unlink(tp);
	free(b);
}

/* Header-level corruptions. */
static void test_corrupt_headers(void **state)
{
	size_t n = 0;
	uint8_t *b, *c;
	char tp[600];
	uint64_t big = UINT64_MAX / 2;
	static const struct {
		const char *what;
		size_t off;   /* where to patch */
		int width;    /* bytes of the patch from `big`, 0: special */
		int code;
	} cases[] = {
		{"magic", 0, 0, QERR_FORMAT},
		{"version 7", 4, 0, QERR_UNSUPPORTED},
		{"tensor count", 8, 8, QERR_FORMAT},
		{"kv count", 16, 8, QERR_FORMAT},
		{"first key length", 24, 8, QERR_FORMAT},
	};
	(void)state;
	build(path, OK);
	assert_non_null(b = (uint8_t *)tu_slurp(path, &n));
	c = malloc(n);
	snprintf(tp, sizeof(tp), "%s.bad", path);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gguf_file *g = NULL;
		uint32_t v7 = 7;

		memcpy(c, b, n);
		if (i == 0)
			memcpy(c, "GGML", 4);
		else if (i == 1)
			memcpy(c + 4, &v7, 4);
		else
			memcpy(c + cases[i].off, &big, cases[i].width);
		write_bytes(tp, c, n);
		if (gguf_open(tp, &g) != cases[i].code)
			fail_msg("%s: got '%s'", cases[i].what, qerr_detail());
		assert_null(g);
	}
	/* a big-endian file: its version reads byte-swapped, and is said so */
	{
		gguf_file *g = NULL;
		uint32_t be3 = 0x03000000u;

		memcpy(c, b, n);
		memcpy(c + 4, &be3, 4);
		write_bytes(tp, c, n);
		assert_int_equal(gguf_open(tp, &g), QERR_UNSUPPORTED);
		assert_non_null(strstr(qerr_detail(), "a big-endian file"));
	}
	/* a row of 2^62 F32 elements: whole blocks (of one), its bytes past
	 * 64 bits; it had been called a row of partial blocks */
	{
		static const char nm[] = "output_norm.weight";
		gguf_file *g = NULL;
		uint64_t ne0 = (uint64_t)1 << 62;
		uint8_t *at;

		memcpy(c, b, n);
		assert_non_null(at = memmem(c, n, nm, sizeof(nm) - 1));
		/* the name, n_dims (u32), then ne[0] */
		memcpy(at + sizeof(nm) - 1 + 4, &ne0, 8);
		write_bytes(tp, c, n);
		assert_int_equal(gguf_open(tp, &g), QERR_FORMAT);
		assert_non_null(strstr(qerr_detail(), "tensor 'output_norm."
					"weight' size overflows"));
	}
	/* tensor data pointing past the end: cut the last tensor's bytes */
	write_bytes(tp, b, n - 8);
	{
		gguf_file *g;
		assert_int_equal(gguf_open(tp, &g), QERR_FORMAT);
		assert_non_null(strstr(qerr_detail(), "past the end"));
	}
	/* missing file and a directory */
	{
		gguf_file *g;
		assert_int_equal(gguf_open("/nonexistent/x.gguf", &g), QERR_IO);
		assert_int_equal(gguf_open("/", &g), QERR_IO);
	}
	/* random bytes never crash */
	srand(1);
	for (int r = 0; r < 200; r++) {
		gguf_file *g = NULL;

		memcpy(c, b, n);
		for (int k = 0; k < 8; k++)
			c[(size_t)rand() % 200] = (uint8_t)rand();
		write_bytes(tp, c, n);
		if (gguf_open(tp, &g) == 0) {
			model *m;
			gguf_close(&g);
			if (model_load(tp, &m) == 0)
				model_free(&m);
		}
	}
	unlink(tp);
	free(b);
	free(c);
}

/* Names are unique, among 65,536 keys too (the header's cap): the
 * second of two equal keys, far apart, is refused by name, and the
 * same keys without it open. (They were compared pair by pair: 4.8 s
 * for a file of 65,536 keys of one length.) */
static void test_unique_keys(void **state)
{
	enum { NK = 65536 };
	(void)state;
	for (int dup = 0; dup < 2; dup++) {
		gguf_writer *w;
		gguf_file *g = NULL;
		char key[32];

		assert_int_equal(gguf_writer_new(&w), 0);
		for (int i = 0; i < NK - dup; i++) {
			snprintf(key, sizeof(key), "k.%08d", i);
			gguf_w_u32(w, key, (uint32_t)i);
		}
		if (dup)
			gguf_w_u32(w, "k.00000007", 7);
		assert_int_equal(gguf_writer_save(w, path, NULL, NULL), 0);
		gguf_writer_free(&w);
		if (!dup) {
			uint32_t v = 0;

			assert_int_equal(gguf_open(path, &g), 0);
			assert_int_equal(gguf_n_kv(g), NK);
			assert_int_equal(gguf_get_u32(g, "k.00065535", &v), 0);
			assert_int_equal(v, 65535);
			gguf_close(&g);
			continue;
		}
		assert_int_equal(gguf_open(path, &g), QERR_FORMAT);
		assert_null(g);
		assert_non_null(strstr(qerr_detail(), "duplicate metadata key "
					"'k.00000007'"));
	}
}

static void test_qerr_strings(void **state)
{
	(void)state;
	for (int c = 0; c < QERR_COUNT_; c++) {
		assert_non_null(qerr_str(c));
		assert_string_not_equal(qerr_str(c), "unknown error");
	}
	assert_string_equal(qerr_str(-1), "unknown error");
	assert_int_equal(qerr_fail(QERR_IO, "x %d", 5), QERR_IO);
	assert_string_equal(qerr_detail(), "x 5");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_empty_file),
		cmocka_unit_test(test_hugemem),
		cmocka_unit_test(test_copy_tensors),
		cmocka_unit_test(test_copy_tensors_if),
		cmocka_unit_test(test_writer_alignment),
		cmocka_unit_test(test_model_flaws),
		cmocka_unit_test(test_llama_output_bias),
		cmocka_unit_test(test_trailing_ones),
		cmocka_unit_test(test_arch_control_byte),
		cmocka_unit_test(test_moe_flaws),
		cmocka_unit_test(test_gptoss_flaws),
		cmocka_unit_test(test_truncations),
		cmocka_unit_test(test_corrupt_headers),
		cmocka_unit_test(test_unique_keys),
		cmocka_unit_test(test_qerr_strings),
	};

	return cmocka_run_group_tests_name("gguf", tests, setup, teardown);
}

/* quorum quantize — re-quantize an F32/F16/BF16 GGUF with llama.cpp's
 * per-tensor recipes (common/format/quant.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format/gguf.h"
#include "qerr.h"
#include "format/quant.h"

static void help(void)
{
	printf("usage: quorum quantize IN.gguf OUT.gguf TYPE\n\n"
	       "Re-quantize a model whose matrices are F32, F16 or BF16.\n"
	       "TYPE: %s.\n"
	       "As llama.cpp's llama-quantize: 1-D tensors stay F32; output\n"
	       "(and a tied token_embd) becomes Q6_K (Q8_0 when its rows are\n"
	       "not whole 256-blocks); the Q3_K_M, Q4_K_M, Q5_K_M, Q2_K and\n"
	       "IQ4 mixes upgrade attn_v / ffn_down / attn_output by layer;\n"
	       "a type whose block does not divide a row falls back (Q4_K ->\n"
	       "Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, IQ4_XS ->\n"
	       "IQ4_NL).\n"
	       "MXFP4 (or MXFP4_MOE, llama.cpp's name) in a model with expert\n"
	       "tensors (ffn_*_exps) is llama.cpp's MXFP4_MOE: the experts\n"
	       "become MXFP4, every other matrix Q8_0; in a model without\n"
	       "experts every matrix becomes MXFP4 (F16 where rows are not\n"
	       "whole 32-blocks). The file loads in llama.cpp.\n"
	       "A NaN or infinite weight is refused, naming its tensor, row\n"
	       "and element (exit 1), where a quantized copy would hide it.\n",
	       quant_ftype_list());
}

typedef struct {
	const gguf_file *in;
	const gguf_tensor **src;
	uint32_t *type;
} qctx;

static int fill(void *ctx, int idx, void *dst, uint64_t nbytes)
{
	qctx *q = ctx;
	const gguf_tensor *t = q->src[idx];
	uint64_t k = t->ne[0], rows = 1;
	uint64_t sb = ggml_row_bytes(t->type, k), db;
	float *row = malloc(k * sizeof(float));

	if (!row)
		return qerr_fail(QERR_NOMEM, "quantize: out of memory");
	db = ggml_row_bytes(q->type[idx], k);
	for (int d = 1; d < 4; d++)
		rows *= t->ne[d];
	for (uint64_t r = 0; r < rows; r++) {
		const uint8_t *s = (const uint8_t *)t->data + r * sb;
		if (q->type[idx] == t->type) {
			memcpy((uint8_t *)dst + r * db, s, db);
			continue;
		}
		quant_dequant_row(t->type, s, row, (int)k);
		/* the quantizers' scales drop a NaN (a broken model would
		 * come out answering) and make an infinity a scale the
		 * loader refuses: named here instead */
		for (uint64_t i = 0; i < k; i++)
			if (!isfinite(row[i])) {
				const char *what = isnan(row[i]) ? "NaN"
								 : "infinite";

				free(row);
				return qerr_fail(QERR_FORMAT, "tensor '%.*s' row "
						 "%llu element %llu is %s: not "
						 "quantized", (int)t->name.len,
						 t->name.ptr,
						 (unsigned long long)r,
						 (unsigned long long)i, what);
			}
		quant_quantize_row(q->type[idx], row, (uint8_t *)dst + r * db,
				   (int)k);
	}
	free(row);
	(void)nbytes;
	return 0;
}

static int get_u32(const gguf_file *g, const char *arch, const char *suf,
		   uint32_t *v)
{
	char key[128];
	snprintf(key, sizeof(key), "%s.%s", arch, suf);
	return gguf_get_u32(g, key, v);
}

int cmd_quantize(int argc, char **argv)
{
	const quant_ftype *ft;
	gguf_file *g = NULL;
	gguf_writer *w = NULL;
	gguf_str as;
	char arch[64];
	uint32_t n_layers = 0, heads = 1, kv_heads = 1;
	qctx q = {0};
	int rc, tied, n_q = 0, experts = 0, recipe;
	uint64_t n_t, in_bytes = 0, out_bytes = 0;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		help();
		return 0;
	}
	if (argc != 4)
		return cli_usage_error("quantize", "want IN.gguf OUT.gguf TYPE");
	ft = quant_ftype_find(argv[3]);
	if (!ft)
		return cli_usage_error("quantize", "unknown type '%s' (%s)",
				       argv[3], quant_ftype_list());
	if ((rc = gguf_open(argv[1], &g)))
		goto fail;
	if ((rc = gguf_get_str(g, "general.architecture", &as)))
		goto fail;
	snprintf(arch, sizeof(arch), "%.*s", (int)(as.len < 60 ? as.len : 60),
		 as.ptr);
	get_u32(g, arch, "block_count", &n_layers);
	get_u32(g, arch, "attention.head_count", &heads);
	get_u32(g, arch, "attention.head_count_kv", &kv_heads);
	tied = gguf_find_tensor(g, "output.weight") == NULL;
	n_t = gguf_n_tensors(g);
	for (uint64_t i = 0; i < n_t; i++)
		experts |= gguf_tensor_at(g, i)->n_dims == 3;
	recipe = quant_ftype_recipe(ft, 1, experts);
	q.in = g;
	q.src = calloc(n_t ? n_t : 1, sizeof(*q.src));
	q.type = calloc(n_t ? n_t : 1, sizeof(*q.type));
	if (!q.src || !q.type) {
		rc = qerr_fail(QERR_NOMEM, "quantize: out of memory");
		goto fail;
	}
	if ((rc = gguf_writer_new(&w)))
		goto fail;
	for (uint64_t i = 0; i < gguf_n_kv(g); i++) {
		const gguf_kv *kv = gguf_kv_at(g, i);
		if (gguf_str_eq(kv->key, "general.file_type") ||
		    gguf_str_eq(kv->key, "general.alignment"))
			continue;
		if ((rc = gguf_w_kv(w, kv)))
			goto fail;
	}
	gguf_w_u32(w, "general.file_type", ft->llama_ftype);
	for (uint64_t i = 0; i < n_t; i++) {
		const gguf_tensor *t = gguf_tensor_at(g, i);
		char name[256];
		snprintf(name, sizeof(name), "%.*s",
			 (int)(t->name.len < 250 ? t->name.len : 250),
			 t->name.ptr);
		if (!t->data) {
			rc = qerr_fail(QERR_UNSUPPORTED, "%s: %s: type %s cannot "
				       "be read (supported: %s)", argv[1], name,
				       ggml_type_name(t->type),
				       quant_supported_list());
			goto fail;
		}
		uint32_t ty = quant_tensor_type(ft, recipe, name, (int)t->n_dims,
						t->ne[0], (int)n_layers,
						kv_heads ? (int)(heads / kv_heads) : 1,
						tied);
		if (quant_is_quant(t->type) && ty != t->type) {
			rc = qerr_fail(QERR_UNSUPPORTED, "%s: %s is already %s; "
				       "quantize from an F32, F16 or BF16 file",
				       argv[1], name, ggml_type_name(t->type));
			goto fail;
		}
		q.src[i] = t;
		q.type[i] = ty;
		n_q += quant_is_quant(ty);
		in_bytes += t->nbytes;
		out_bytes += ggml_row_bytes(ty, t->ne[0]) * (t->nbytes /
			     ggml_row_bytes(t->type, t->ne[0]));
		if ((rc = gguf_w_tensor(w, name, ty, t->n_dims, t->ne)))
			goto fail;
	}
	if ((rc = gguf_writer_save(w, argv[2], fill, &q)))
		goto fail;
	fprintf(stderr, "quorum quantize: wrote %s (%s: %d of %llu tensors "
		"quantized, %.1f MB -> %.1f MB)\n", argv[2], ft->name, n_q,
		(unsigned long long)n_t, (double)in_bytes / 1e6,
		(double)out_bytes / 1e6);
	gguf_writer_free(&w);
	gguf_close(&g);
	free(q.src);
	free(q.type);
	return 0;
fail:
	fprintf(stderr, "quorum quantize: %s\n", qerr_detail());
	gguf_writer_free(&w);
	gguf_close(&g);
	free(q.src);
	free(q.type);
	return 1;
}

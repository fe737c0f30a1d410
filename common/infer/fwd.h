/*
 * fwd — the transformer forward pass over a paged KV cache.
 *
 * One call advances any number of sequences: sequence i appends n_new[i]
 * tokens (a prefill chunk, or 1 token in decode), all rows of all
 * sequences forming one M-row batch so every weight matrix is read once
 * per call. Each row's result is bit-identical however the rows are
 * batched or chunked and whatever the thread count: matmuls reduce in the
 * kernels' canonical order, attention of a row reads only its own
 * sequence's K/V in position order, and K/V written by a row are the same
 * bits whichever batch wrote them.
 *
 * Per layer: RMSNorm -> Q,K,V (+bias) -> per-head Q/K RMSNorm (qwen3,
 * gemma3) -> rotary (YaRN-scaled when the model says so) -> K,V into the
 * pool -> causal GQA attention (only the last swa_window positions on
 * sliding-window layers; all blocks stay in the cache; gpt-oss: each
 * head's sink in its softmax) -> output projection (+bias) -> [RMSNorm,
 * gemma3] -> residual -> RMSNorm -> gated MLP (SiLU; GELU-tanh for gemma3)
 * -> [RMSNorm] -> residual; with a mixture of experts (qwen3moe, gpt-oss)
 * the gated MLP is the router, top-k and the chosen experts' gated FFNs
 * (fwd_moe_ffn; gpt-oss: biases and the clamped SwiGLU), rows grouped by
 * expert so each expert's matrices are read once per call.
 * Embeddings are scaled by embd_scale first. Then the final
 * RMSNorm and the logits (soft-capped when the model says so) of the
 * last row of each sequence (or of every row).
 */
#ifndef QUORUM_FWD_H
#define QUORUM_FWD_H

#include <stdint.h>

#include "infer/kv.h"
#include "infer/model.h"
#include "kernels/tpool.h"

typedef struct fwd fwd;

/* max_rows: rows per call (prefill chunk size; >= the decode batch). The
 * pool (tp, may be NULL) is borrowed. */
int fwd_new(const model *m, int max_rows, tpool *tp, fwd **out);
void fwd_free(fwd **f);
int fwd_max_rows(const fwd *f);

/*
 * Shared-prefix attention (off by default; on when the environment has
 * QUORUM_SHARED_ATTN=1 at fwd_new: on a 2-core AMD EPYC it has not been
 * faster yet, see docs/performance.md). In a decode batch (one new row per
 * sequence), rows whose page tables hold the same block at the same index
 * (forks of one root, roots sharing a cached prefix) read that block's
 * keys and values once per layer for all of them. Off, every row walks
 * its own blocks (the definition). The bits are the same either way: each
 * row's scores are the same dots, its softmax the same call, its value
 * sums run over its positions in the same order.
 */
void fwd_set_shared_attn(fwd *f, int on);
/* fwd_batch calls so far that read shared blocks once for several rows. */
long fwd_shared_calls(const fwd *f);

/*
 * Appends tokens to n_seq sequences in one batch. seqs[i] gets n_new[i]
 * tokens (taken in order from tokens[]); sum(n_new) <= max_rows. Positions
 * continue from each sequence's n_tokens. Reserves KV (copy-on-write of a
 * shared tail block) for all sequences first: on QERR_FULL nothing changed.
 * logits: when not NULL, receives the vocab-sized logits of the last row of
 * each sequence, (n_seq, vocab) — or of every row, (sum n_new, vocab), when
 * all_rows is set.
 */
int fwd_batch(fwd *f, kv_pool *pool, kv_seq *const *seqs, const int *n_new,
	      int n_seq, const int32_t *tokens, float *logits, int all_rows);

/* Prefill of n tokens in chunks of max_rows; logits (vocab) of the last
 * token when not NULL. */
int fwd_prefill(fwd *f, kv_pool *pool, kv_seq *seq, const int32_t *tokens,
		int n, float *logits);

/*
 * Router of one row. gating MODEL_GATE_SOFTMAX: logits (n experts) become
 * softmax probabilities in place and w[j] gets the chosen ones';
 * MODEL_GATE_SOFTMAX_WEIGHT (gpt-oss): logits stay, and w[0..k) is the
 * softmax (kern_softmax) of the chosen k logits. sel[0..k) gets the k
 * highest-ranked experts in rank order (ties: the lower expert id first;
 * a NaN ranks below every number, so NaN logits give defined, NaN,
 * weights). With norm, w is then divided by its sum (taken in double,
 * clamped below at 2^-14).
 */
void fwd_moe_route(float *logits, int n, int k, int gating, int norm,
		   int *sel, float *w);

/*
 * One head's attention softmax over scores s[0..n): kern_softmax, or with
 * a sink (not NULL; s then has room for n + 1) the softmax of the n
 * scores and *sink, whose probability is dropped: s[i] = e^(s_i - m) /
 * (sum_t e^(s_t - m) + e^(sink - m)), m the max of both (llama.cpp's
 * soft_max with sinks). s[n] is clobbered.
 */
void fwd_att_softmax(float *s, int n, const float *sink);

/*
 * Rotary of kind (0 global layers, 1 sliding-window layers): the
 * head_dim/2 angular frequencies inv_freq (position p turns pair i by
 * p * inv_freq[i]) and the factor cos and sin are scaled by (1 without
 * YaRN). What fwd_batch uses, exposed for tests.
 */
void fwd_rope_freqs(const model *m, int kind, double *inv_freq,
		    float *mscale);

/* The mixture-of-experts FFN of layer l on M (<= max_rows) normed rows x
 * (M, dim) into y (M, dim): what fwd_batch computes there, exposed for
 * tests. QERR_ARG if layer l has no experts. */
int fwd_moe_ffn(fwd *f, int l, const float *x, int M, float *y);

/* Checks a pool matches the model (layers, kv_dim; a q8_0 pool needs
 * head_dim % 32 == 0). QERR_ARG naming what differs. */
int fwd_check_pool(const model *m, const kv_pool *pool);
/* The kv_params.win_pattern of a pool for m whose windowed layers' rows
 * can be released (kv_seq_drop_window with cfg.swa_window): m's
 * swa_pattern when some layer is sliding-window, else 0. */
int fwd_kv_win_pattern(const model *m);

#endif

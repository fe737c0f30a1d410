/*
 * kern_impl — the kernels' internal header: the per-ISA operation table
 * (struct kern_ops), one matmul call's arguments (struct kern_mm), and the
 * names each ISA's files export into the tables. Not for use outside
 * kernels/ (and the kernel tests, which install emulated tables).
 *
 * implements: the dispatch seam between kern.c (scalar reference and
 * dispatch) and x86/: kern_float.c (float and attention kernels, once
 * per width), kern_int_avx2.c (integer matmul, once per ISA), kern_avx2.c
 * (the AVX2 table), kern_avx512.c (the AVX-512 tables).
 */
#ifndef QUORUM_KERN_IMPL_H
#define QUORUM_KERN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "format/quant.h"

/* One kern_matmul call; a backend computes columns [j0, j1) for all M. */
struct kern_mm {
	const void *W;
	uint32_t wtype;
	int K, N;
	size_t row_bytes; /* bytes of one row of W */
	const float *bias;
	const float *x;
	int ldx, M;
	float *y;
	int ldy;
	/* integer path (qmatmul): the M activation rows, each quantized on
	 * its own (quant_act_row) into a quant_arow of xq_bytes */
	const char *xq;
	size_t xq_bytes;
	/* W laid out by ops->pack for this ISA (kern_pack), or NULL: a
	 * backend may read its rows there instead of preparing them */
	const void *pk;
	/* pk's next block requested during this one (kern_prefetching) */
	int pf;
};

struct kern_ops {
	/* quantized W times the integer activations mm->xq, columns
	 * [j0, j1) for all M rows: quant.h's S1/S2 and combination */
	void (*qmatmul)(const struct kern_mm *mm, int j0, int j1);
	/* optional: lays out the codes a->q and the sums a->bsum of an
	 * activation row of K for this qmatmul of M rows (the layout may
	 * depend on M; d and s untouched; the integer sums the kernel
	 * forms from them are unchanged) */
	void (*qact)(uint32_t wtype, quant_arow *a, int K, int M, int pk);
	/* optional (with qact): the bytes of an activation row for qact and
	 * qmatmul of M rows, at least quant_arow_bytes (the quant_arow comes
	 * first; qact may lay out more behind it); pk: the weights come
	 * packed (kern_mm.pk), which may choose another kernel */
	size_t (*qact_bytes)(uint32_t wtype, int K, int M, int pk);
	/* optional: the bytes of N rows of K of wtype laid out for this
	 * qmatmul (0: no such layout, or none it would use for up to
	 * max_rows activation rows), and the layout of rows [j0, j1) of
	 * mm->W at dst (j0 and j1 even or j1 = N; dst the whole layout's
	 * start): kern_pack's */
	size_t (*pack_bytes)(uint32_t wtype, int K, int N, int max_rows);
	void (*pack)(const struct kern_mm *mm, void *dst, int j0, int j1);
	/* optional: quant_act_row, the same bits (faster) */
	void (*act_row)(const float *x, int n, int unit, quant_arow *a);
	float (*dot)(const float *a, const float *b, int n);
	float (*dot_f16)(const float *a, const uint16_t *b, int n);
	void (*matmul)(const struct kern_mm *mm, int j0, int j1);
	void (*rmsnorm)(const float *x, const float *w, int n, float eps,
			float *out);
	void (*silu_mul)(float *g, const float *u, int n);
	void (*softmax)(float *x, int n);
	void (*axpy)(float *y, float a, const float *x, int n);
	void (*axpy_f16)(float *y, float a, const uint16_t *x, int n);
	void (*att_scores)(const float *q, int ldq, int nq, const void *k,
			   size_t ldk, uint32_t kt, int nt, int n, float scale,
			   float *s, int lds);
	void (*att_values)(float *out, int ldo, int nq, const float *s,
			   int lds, const void *v, size_t ldv, uint32_t kt,
			   int nt, int n);
	/* Q8_0 keys' scores (kern.h's kern_att_scores_q8) of nq queries
	 * quantized by kern_att_q8_prep: quant_arows of n, unit 32, qb
	 * bytes apart from qz */
	void (*att_q8)(const char *qz, size_t qb, int nq, const void *k,
		       size_t ldk, int nt, int n, float scale, float *s,
		       int lds);
	void (*row_f32)(const void *row, uint32_t wtype, int K, float *out);
	void (*f32_to_f16_row)(const float *x, uint16_t *out, int n);
	/* the machine's limits (kern_measure_limits): multiply-adds of n
	 * rounds of independent chains, register only (ten; sixteen for
	 * vpdpbusd); a streaming read */
	uint64_t (*peak_int8)(int64_t n);
	uint64_t (*peak_f32)(int64_t n);
	float (*read_sum)(const float *x, size_t n);
};

/* X(0) .. X(9): the limits' ten chains as ten named variables (a##k).
 * An array of them, even fully unrolled, gcc 12 kept on the stack, a
 * store and a load around every step, and the loop measured store
 * forwarding instead (a third of the AMD EPYC Zen 5's int8 rate). */
#define KERN_TEN(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)
/* X(0) .. X(15): sixteen, where an instruction's latency needs more than
 * ten in flight (the VNNI build's vpdpbusd: on an Intel Xeon, family 6
 * model 167, one thread, ten chains ran 404-414 G multiply-adds/s and
 * twelve to twenty 433-453, two a cycle at its clock; the f32 FMA's ten
 * already at its two a cycle). 32 registers hold them. */
#define KERN_SIXTEEN(X) KERN_TEN(X) X(10) X(11) X(12) X(13) X(14) X(15)

/* kern_int_avx2.c's integer matmul: built for AVX2 (kern_avx2_*, the
 * AVX2 and AVX-512 tables), for AVX-512 VNNI (kern_vnni_*), and, in the
 * tests only, for AVX2 with vpdpbusd emulated (kern_vnni_emu_*). */
#define KERN_INT_FNS(p)                                                     \
	void p##qmatmul(const struct kern_mm *mm, int j0, int j1);          \
	void p##qact(uint32_t wtype, quant_arow *a, int K, int M, int pk); \
	size_t p##qact_bytes(uint32_t wtype, int K, int M, int pk);        \
	size_t p##pack_bytes(uint32_t wtype, int K, int N, int max_rows);  \
	void p##pack(const struct kern_mm *mm, void *dst, int j0, int j1); \
	void p##act_row(const float *x, int n, int unit, quant_arow *a);   \
	uint64_t p##peak_int8(int64_t n);                                   \
	void p##att_q8(const char *qz, size_t qb, int nq, const void *k,    \
		       size_t ldk, int nt, int n, float scale, float *s,    \
		       int lds);
KERN_INT_FNS(kern_avx2_)
KERN_INT_FNS(kern_vnni_)
KERN_INT_FNS(kern_vnni_emu_)

/* kern_float.c's float and attention kernels, built at 8 lanes
 * (kern_avx2_*, AVX2) and at 16 (kern_avx512_*, AVX-512), and their
 * entries of an ops table. */
#define KERN_FLOAT_FNS(p)                                                   \
	float p##dot(const float *a, const float *b, int n);                \
	float p##dot_f16(const float *a, const uint16_t *b, int n);         \
	void p##matmul(const struct kern_mm *mm, int j0, int j1);           \
	void p##rmsnorm(const float *x, const float *w, int n, float eps,   \
			float *out);                                        \
	void p##silu_mul(float *g, const float *u, int n);                  \
	void p##softmax(float *x, int n);                                   \
	void p##axpy(float *y, float a, const float *x, int n);             \
	void p##axpy_f16(float *y, float a, const uint16_t *x, int n);      \
	void p##row_f32(const void *row, uint32_t wtype, int K, float *out); \
	void p##f32_to_f16_row(const float *x, uint16_t *out, int n);       \
	uint64_t p##peak_f32(int64_t n);                                    \
	float p##read_sum(const float *x, size_t n);                        \
	void p##att_scores(const float *q, int ldq, int nq, const void *k,  \
			   size_t ldk, uint32_t kt, int nt, int n,          \
			   float scale, float *s, int lds);                 \
	void p##att_values(float *out, int ldo, int nq, const float *s,     \
			   int lds, const void *v, size_t ldv, uint32_t kt, \
			   int nt, int n);
KERN_FLOAT_FNS(kern_avx2_)
KERN_FLOAT_FNS(kern_avx512_)
#define KERN_FLOAT_OPS(p)                                                   \
	.dot = p##dot, .dot_f16 = p##dot_f16, .matmul = p##matmul,          \
	.rmsnorm = p##rmsnorm, .silu_mul = p##silu_mul,                     \
	.softmax = p##softmax, .axpy = p##axpy, .axpy_f16 = p##axpy_f16,    \
	.row_f32 = p##row_f32, .f32_to_f16_row = p##f32_to_f16_row,        \
	.peak_f32 = p##peak_f32, .read_sum = p##read_sum,                   \
	.att_scores = p##att_scores, .att_values = p##att_values,

extern const struct kern_ops kern_ops_scalar;
extern const struct kern_ops kern_ops_avx2;
extern const struct kern_ops kern_ops_avx512;
extern const struct kern_ops kern_ops_avx512vnni;

/* Tests only: runs the kernels of ops as ISA isa from now on, whatever
 * this CPU has (an emulation of a set it lacks); NULL restores isa's
 * own table. */
void kern_impl_install(int isa, const struct kern_ops *ops);

/* Columns per matmul task unit: backends may assume a task range starts
 * at a multiple of this. */
#define KERN_MM_COLS 16

#endif

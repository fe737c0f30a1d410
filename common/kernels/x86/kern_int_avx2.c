/*
 * kern_int_avx2 — the integer matmul of quantized weights (quant.h's S1,
 * S2 and float combination) on 256-bit vectors, with the activation-row
 * quantizer and the unpacking it uses.
 *
 * Built twice (Makefile): for AVX2, where a step of byte products is
 * maddubs + madd, and for AVX-512 VNNI, where it is one vpdpbusd
 * (KERN_INT_VNNI = 1). Both compute the same exact integer sums, so the
 * two builds give the same bits. Tests build it a third time for AVX2
 * with vpdpbusd emulated by widening products (KERN_INT_VNNI = 2), which
 * checks the VNNI build's code paths on a CPU without VNNI.
 *
 * It also holds Q8_0 keys' attention scores, an integer dot too
 * (kern_int_att.h). Its kern_avx2_* / kern_vnni_* functions (kern_impl.h's
 * KERN_INT_FNS) fill the integer entries of the ops tables in kern_avx2.c and
 * kern_avx512.c; f16 scales go through format/half.h.
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "format/ggml.h"
#include "format/half.h"
#include "kernels/kern.h"
#include "kernels/kern_impl.h"
#include "kernels/x86/kern_tr.h"

#define INLINE static inline __attribute__((always_inline))

#ifndef KERN_INT_VNNI
#define KERN_INT_VNNI 0
#endif
#if KERN_INT_VNNI == 1
#define KI_NAME(f) kern_vnni_##f
#elif KERN_INT_VNNI == 2
#define KI_NAME(f) kern_vnni_emu_##f
#else
#define KI_NAME(f) kern_avx2_##f
#endif

/* acc plus, in each int32 lane, the sum of its 4 byte products u * s (u
 * unsigned, s signed). maddubs would saturate its int16 pairs, vpdpbusd
 * not: the callers' pairs never exceed int16 (see the integer matmul's
 * comment), so both are the exact sum. */
INLINE __m256i dp4(__m256i acc, __m256i u, __m256i s)
{
#if KERN_INT_VNNI == 1
	return _mm256_dpbusd_epi32(acc, u, s);
#elif KERN_INT_VNNI == 2
	/* even and odd bytes widened to int16: every product and pair sum
	 * is exact in madd's int32 */
	__m256i ue = _mm256_and_si256(u, _mm256_set1_epi16(0xff));
	__m256i uo = _mm256_srli_epi16(u, 8);
	__m256i se = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8);
	__m256i so = _mm256_srai_epi16(s, 8);
	return _mm256_add_epi32(acc, _mm256_add_epi32(
		_mm256_madd_epi16(ue, se), _mm256_madd_epi16(uo, so)));
#else
	return _mm256_add_epi32(acc, _mm256_madd_epi16(
		_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* The strategies, one part each (each under 1,000 lines; one translation
 * unit per build, so every build rule stays as it is). */
#include "kern_int_unpack.h"
#include "kern_int_act.h"
#include "kern_int_tiles.h"
#include "kern_int_q8.h"
#include "kern_int_kq.h"
#include "kern_int_q8z.h"
#include "kern_int_kqz.h"
#include "kern_int_att.h"

/* ---- dispatch --------------------------------------------------------- */

/* The activation rows' layout for the kernel of M rows of wtype (the
 * values are unchanged). Q4_K and Q6_K: with kg_use, units side by
 * side (kg_act, codes and bsum); else per 64 the byte pairs of elements
 * 0..31 and 32..63 interleaved as unpack{lo,hi}_epi16 interleave them
 * (see pair_u). Q8_0 and MXFP4: units side by side (struct q8g,
 * q8_act; the VNNI build's Q8_0 tiles: qz_act, behind the row). Other
 * types keep quant_act_row's order. */
void KI_NAME(qact)(uint32_t wtype, quant_arow *a, int K, int M, int pk)
{
	(void)pk; /* the VNNI build's tiles only */
#if KERN_INT_VNNI == 1
	if (qz_use(wtype, M, pk)) {
		/* behind the row's quant_arow (KI_NAME(qact_bytes)) */
		qz_act(a, K, (char *)a->q + quant_arow_bytes(K, 32));
		return;
	}
#endif
	if (wtype == GGML_TYPE_Q8_0 || wtype == GGML_TYPE_MXFP4)
		q8_act(a->q, a->q, K, q8_direct(wtype, M, pk));
	if (kg_use(wtype, M, K, pk)
#if KERN_INT_VNNI == 1
	    || kz_use(wtype, M, pk)
#endif
	   ) {
		kg_act(a, K, wtype == GGML_TYPE_Q4_K ? QK_Q4_K : QK_Q6_K);
#if KERN_INT_VNNI == 1
		/* Q6_K's tiles take the activations unsigned, + 128
		 * (kz_prep_q6) */
		if (wtype == GGML_TYPE_Q6_K && kz_use(wtype, M, pk))
			for (int k = 0; k < K; k += 32)
				_mm256_storeu_si256((__m256i *)(a->q + k),
					_mm256_xor_si256(_mm256_loadu_si256(
						(const __m256i *)(a->q + k)),
						_mm256_set1_epi8((char)0x80)));
#endif
		return;
	}
	if (wtype != GGML_TYPE_Q4_K && wtype != GGML_TYPE_Q6_K)
		return;
	for (int k = 0; k < K; k += 64) {
		__m256i lo = _mm256_loadu_si256((const __m256i *)(a->q + k));
		__m256i hi = _mm256_loadu_si256((const __m256i *)(a->q + k + 32));
		_mm256_storeu_si256((__m256i *)(a->q + k),
				    _mm256_unpacklo_epi16(lo, hi));
		_mm256_storeu_si256((__m256i *)(a->q + k + 32),
				    _mm256_unpackhi_epi16(lo, hi));
	}
}

/* Bytes of an activation row for the kernel of M rows of wtype: its
 * quant_arow, and the VNNI build's Q8_0 tiles' layout behind it. */
size_t KI_NAME(qact_bytes)(uint32_t wtype, int K, int M, int pk)
{
	size_t n = quant_arow_bytes(K, quant_unit(wtype));
#if KERN_INT_VNNI == 1
	if (qz_use(wtype, M, pk))
		n += qz_act_bytes(K);
#else
	(void)M;
	(void)pk;
#endif
	return n;
}

/* Every tile of rows against the jn weight rows from j (w, ws bytes
 * apart); pf: their requests for the next block of packed rows, or
 * NULL. */
static void qtiles(const struct kern_mm *mm, int j, int jn, const char *w,
		   size_t ws, qblock_fn blockf, struct qt_pf *pf)
{
	int unit = quant_unit(mm->wtype);

	for (int m0 = 0; m0 < mm->M; m0 += QT_R) {
		int R = mm->M - m0 < QT_R ? mm->M - m0 : QT_R;
		struct qtile t;
		qtile_bind(mm, m0, R, unit, &t);
		blockf(mm, &t, R, m0, j, jn, w, ws, pf);
	}
}

/* Rows of ws bytes per block: as many as fit QT_PREP_BYTES, at least 1,
 * at most QT_JB. */
static int qt_block_rows(size_t ws)
{
	int jb = (int)(QT_PREP_BYTES / ws);

	return jb < 1 ? 1 : jb > QT_JB ? QT_JB : jb;
}

/* Columns [j0, j1) in blocks of prepared weight rows of ws bytes
 * (qt_block_rows): prep writes each row of a block once, then every
 * tile of rows passes over the block (blockf). */
static void qprep_run(const struct kern_mm *mm, int j0, int j1, size_t ws,
		      void (*prep)(const struct kern_mm *mm, const uint8_t *row,
				   char *dst),
		      qblock_fn blockf)
{
	int jb = qt_block_rows(ws);
	char *buf = aligned_alloc(64, (ws * (size_t)jb + 63) & ~(size_t)63);

	if (!buf)
		abort(); /* a block of prepared rows per task */
	for (int j = j0; j < j1; j += jb) {
		int jn = j1 - j < jb ? j1 - j : jb;
		for (int c = 0; c < jn; c++)
			prep(mm, (const uint8_t *)mm->W + (size_t)(j + c) *
				 mm->row_bytes, buf + (size_t)c * ws);
		qtiles(mm, j, jn, buf, ws, blockf, NULL);
	}
	free(buf);
}

/* Columns [j0, j1) of rows packed at load (mm->pk, ws bytes each), in
 * blocks (qt_block_rows): every tile of rows passes over a block while
 * they request the next one's lines (struct qt_pf). */
static void qpacked_run(const struct kern_mm *mm, int j0, int j1, size_t ws,
			int nu, qblock_fn blockf)
{
	int jb = qt_block_rows(ws), tiles = (mm->M + QT_R - 1) / QT_R;

	for (int j = j0; j < j1; j += jb) {
		int jn = j1 - j < jb ? j1 - j : jb;
		int nx = j1 - (j + jn) < jb ? j1 - (j + jn) : jb;
		const char *blk = (const char *)mm->pk + (size_t)j * ws;
		struct qt_pf pf;

		qt_pf_init(&pf, mm, blk + (size_t)jn * ws, (size_t)nx * ws,
			   (size_t)tiles * (size_t)jn * (size_t)nu, ws, tiles);
		qtiles(mm, j, jn, blk, ws, blockf, &pf);
	}
}

static void kg_prep_row(const struct kern_mm *mm, const uint8_t *row,
			char *dst)
{
	kg_prep(row, mm->K / QK_K, kg_kind(mm->wtype), (__m256i *)dst);
}

static void q8g_prep_row(const struct kern_mm *mm, const uint8_t *row,
			 char *dst)
{
	q8g_prep(row, mm->K / 32, dst);
}

/* Q8_0 and MXFP4 (units side by side). */
static void q8_qmatmul(const struct kern_mm *mm, int j0, int j1)
{
	int mx = mm->wtype == GGML_TYPE_MXFP4, nu = mm->K / 32;

	if (q8_direct(mm->wtype, mm->M, mm->pk != NULL)) {
		/* a block of rows stays in cache while the tiles pass */
		for (int j = j0; j < j1; j += QT_JB)
			qtiles(mm, j, j1 - j < QT_JB ? j1 - j : QT_JB, NULL, 0,
			       mx ? mx_block_direct : q8g_block_direct, NULL);
		return;
	}
	if (q8_pk_use(mm->M, mm->pk != NULL))
		qpacked_run(mm, j0, j1, q8g_row_bytes(nu), nu, q8g_block_prep);
	else
		qprep_run(mm, j0, j1, q8g_row_bytes(nu), q8g_prep_row,
			  q8g_block_prep);
}

void KI_NAME(qmatmul)(const struct kern_mm *mm, int j0, int j1)
{
#if KERN_INT_VNNI == 1
	if (qz_use(mm->wtype, mm->M, mm->pk != NULL)) {
		qz_qmatmul(mm, j0, j1);
		return;
	}
	if (kz_use(mm->wtype, mm->M, mm->pk != NULL)) {
		kz_qmatmul(mm, j0, j1);
		return;
	}
#endif
	int K = mm->K;
	qblock_fn blockf;
	quant_wrow wr[QT_JB];
	char *buf = NULL;
	size_t ws = 0; /* bytes per unpacked row (0: the packed rows) */

	if (mm->wtype == GGML_TYPE_Q8_0 || mm->wtype == GGML_TYPE_MXFP4) {
		q8_qmatmul(mm, j0, j1);
		return;
	}
	if (kg_use(mm->wtype, mm->M, mm->K, mm->pk != NULL)) {
		qblock_fn kf = mm->wtype == GGML_TYPE_Q4_K ? kg_block_q4_K
							  : kg_block_q6_K;
		size_t kb = kg_row_bytes(K / QK_K, kg_kind(mm->wtype));

		/* the VNNI build's packed copy is kz's (above) */
		if (KERN_INT_VNNI != 1 && mm->pk)
			qpacked_run(mm, j0, j1, kb, K / QK_K, kf);
		else
			qprep_run(mm, j0, j1, kb, kg_prep_row, kf);
		return;
	}
	switch (mm->wtype) {
	case GGML_TYPE_Q4_K: blockf = qblock_q4_K; break;
	case GGML_TYPE_Q6_K: blockf = qblock_q6_K; break;
	case GGML_TYPE_Q5_0: blockf = qblock_q5_0; break;
	default:
		blockf = qblock_gen;
		ws = quant_wrow_bytes(K);
		buf = aligned_alloc(64, (ws * QT_JB + 63) & ~(size_t)63);
		if (!buf)
			abort(); /* QT_JB unpacked rows per task */
		for (int c = 0; c < QT_JB; c++)
			quant_wrow_bind(&wr[c], buf + (size_t)c * ws, K);
	}
	for (int j = j0; j < j1; j += QT_JB) {
		int jn = j1 - j < QT_JB ? j1 - j : QT_JB;
		const char *w = (const char *)mm->W + (size_t)j * mm->row_bytes;
		size_t wstride = mm->row_bytes;
		if (buf) {
			for (int c = 0; c < jn; c++) {
				const uint8_t *row = (const uint8_t *)w +
						     (size_t)c * mm->row_bytes;
				if (!v_unpack(mm->wtype, row, &wr[c], K))
					quant_unpack_row(mm->wtype, row, &wr[c], K);
			}
			w = (const char *)wr;
			wstride = sizeof(quant_wrow);
		}
		qtiles(mm, j, jn, w, wstride, blockf, NULL);
	}
	free(buf);
}


/* ---- packed weights (kern_pack) ----------------------------------------- */

/* The VNNI build packs the weight pairs its register tiles read, for the
 * types it has tiles for, when a matmul of up to max_rows rows would take
 * them; the AVX2 builds Q8_0's prepared rows (q8g_prep), row j at j
 * q8g_row_bytes(K / 32). */
size_t KI_NAME(pack_bytes)(uint32_t wtype, int K, int N, int max_rows)
{
#if KERN_INT_VNNI == 1
	if (qz_use(wtype, max_rows, 1))
		return qz_pack_bytes(K, N);
	if (kz_use(wtype, max_rows, 1))
		return kz_pack_bytes(wtype, K, N);
#else
	if (wtype == GGML_TYPE_Q8_0 && q8_pk_use(max_rows, 1))
		return (size_t)N * q8g_row_bytes(K / 32);
	if ((wtype == GGML_TYPE_Q4_K || wtype == GGML_TYPE_Q6_K) &&
	    kg_use(wtype, max_rows, K, 1))
		return (size_t)N * kg_row_bytes(K / QK_K, kg_kind(wtype));
#endif
	return 0;
}

void KI_NAME(pack)(const struct kern_mm *mm, void *dst, int j0, int j1)
{
#if KERN_INT_VNNI == 1
	if (mm->wtype == GGML_TYPE_Q8_0)
		qz_pack(mm, dst, j0, j1);
	else
		kz_pack(mm, dst, j0, j1);
#else
	int q8 = mm->wtype == GGML_TYPE_Q8_0;
	size_t ws = q8 ? q8g_row_bytes(mm->K / 32)
		       : kg_row_bytes(mm->K / QK_K, kg_kind(mm->wtype));

	for (int j = j0; j < j1; j++) {
		const uint8_t *row = (const uint8_t *)mm->W +
				     (size_t)j * mm->row_bytes;
		char *out = (char *)dst + (size_t)j * ws;

		if (q8)
			q8g_prep(row, mm->K / 32, out);
		else
			kg_prep_row(mm, row, out);
	}
#endif
}

/* ---- the machine's limits (kern_measure_limits) ------------------------ */

/* int8 multiply-adds of n rounds of independent chains of this build's
 * step, register only: the ceiling of the matmul's products (one 512-bit
 * vpdpbusd in the VNNI build, sixteen chains; maddubs + madd + add, or
 * the emulation, on 256 bits otherwise, ten chains, each step's chain
 * through one add). */
uint64_t KI_NAME(peak_int8)(int64_t n)
{
	/* named chains (KERN_SIXTEEN, KERN_TEN: never an array) */
#if KERN_INT_VNNI == 1
	const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
#define PK_DECL(k) __m512i a##k = _mm512_set1_epi32(k);
#define PK_STEP(k) a##k = _mm512_dpbusd_epi32(a##k, u, s); IN_REG(a##k);
#define PK_SUM(k) sink += _mm512_reduce_add_epi32(a##k);
#define PK_MACS 64
#define PK_CHAINS KERN_SIXTEEN
#define PK_N 16
#else
	/* u opaque at each step: else gcc computes the one product of
	 * these constants (maddubs, madd) once, for all ten chains */
	__m256i u = _mm256_set1_epi8(3);
	const __m256i s = _mm256_set1_epi8(-2);
#define PK_DECL(k) __m256i a##k = _mm256_set1_epi32(k);
#define PK_STEP(k) IN_REG(u); a##k = dp4(a##k, u, s); IN_REG(a##k);
#define PK_SUM(k) sink += _mm256_extract_epi32(a##k, 0);
#define PK_MACS 32
#define PK_CHAINS KERN_TEN
#define PK_N 10
#endif
	int sink = 0;

	PK_CHAINS(PK_DECL)
	for (int64_t i = 0; i < n; i++) {
		PK_CHAINS(PK_STEP)
	}
	PK_CHAINS(PK_SUM)
	__asm__ volatile("" : : "r"(sink));
	return (uint64_t)n * PK_N * PK_MACS;
#undef PK_DECL
#undef PK_STEP
#undef PK_SUM
#undef PK_CHAINS
#undef PK_N
#undef PK_MACS
}

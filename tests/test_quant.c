/*
 * quant: every weight type's dequantization of random blocks against a
 * per-element decoder written here from ggml's definitions (bit-exact),
 * hand-worked literal blocks, quantizer round-trip error, the integer
 * matmul (bit-identical across ISAs, threads and batch composition, and
 * within a bound of a double-precision reference), the exact f32
 * activation path, and clear load errors for corrupt quantized tensors.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/half.h"
#include "kernels/kern.h"
#include "kernels/kern_impl.h"
#include "infer/model.h"
#include "qerr.h"
#include "format/quant.h"
#include "kernels/tpool.h"
#include "isautil.h"
#include "testutil.h"

static const uint32_t types[] = {
	GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
	GGML_TYPE_Q8_0, GGML_TYPE_IQ4_NL, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
	GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS,
	GGML_TYPE_MXFP4,
};
#define N_TYPES (int)(sizeof(types) / sizeof(types[0]))

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* Roughly normal, unit variance. */
static float rndn(void)
{
	float s = 0;
	for (int i = 0; i < 4; i++)
		s += (float)rnd32() / 4294967296.0f - 0.5f;
	return s * 1.7320508f;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	assert_non_null(p);
	return p;
}

/* ---- a per-element decoder, straight from ggml's definitions ------------ */

static float h16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return half_f16_to_f32(h);
}

static void k4_scale_min(int j, const uint8_t *q, int *d, int *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
	}
}

static const int8_t kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
			      1, 13, 25, 38, 53, 69, 89, 113};

/* OCP E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0
 * is subnormal (0 or 0.5). */
static double e2m1(int c)
{
	int ex = (c >> 1) & 3, man = c & 1;
	double v = ex ? ldexp(1.0 + 0.5 * man, ex - 1) : 0.5 * man;
	return c & 8 ? -v : v;
}

static float ref_elem(uint32_t t, const uint8_t *b, int e)
{
	int j = e % 16, hi = (e % 32) >= 16;
	switch (t) {
	case GGML_TYPE_Q4_0: {
		int x = (hi ? b[2 + j] >> 4 : b[2 + j] & 15) - 8;
		return (float)x * h16(b);
	}
	case GGML_TYPE_Q4_1: {
		int x = hi ? b[4 + j] >> 4 : b[4 + j] & 15;
		return (float)x * h16(b) + h16(b + 2);
	}
	case GGML_TYPE_Q5_0:
	case GGML_TYPE_Q5_1: {
		int o = t == GGML_TYPE_Q5_0 ? 2 : 4;
		uint32_t qh;
		memcpy(&qh, b + o, 4);
		int x = (hi ? b[o + 4 + j] >> 4 : b[o + 4 + j] & 15) |
			(int)((qh >> e) & 1) << 4;
		if (t == GGML_TYPE_Q5_0)
			return (float)(x - 16) * h16(b);
		return (float)x * h16(b) + h16(b + 2);
	}
	case GGML_TYPE_Q8_0:
		return (float)(int8_t)b[2 + e] * h16(b);
	case GGML_TYPE_IQ4_NL:
		return h16(b) * (float)kv[hi ? b[2 + j] >> 4 : b[2 + j] & 15];
	case GGML_TYPE_MXFP4: {
		/* ggml: the doubled value as an integer (so -0 is 0) times
		 * half the scale, 2^(e - 128), one f32 product */
		int c = hi ? b[1 + j] >> 4 : b[1 + j] & 15;
		return (float)(int)(2.0 * e2m1(c)) * ldexpf(1.0f, b[0] - 128);
	}
	case GGML_TYPE_Q2_K: {
		int n = e / 128, sh = 2 * ((e % 128) / 32), l = e % 32;
		int q = (b[16 + 32 * n + l] >> sh) & 3, sc = b[e / 16];
		float dl = h16(b + 80) * (float)(sc & 0xF);
		float ml = h16(b + 82) * (float)(sc >> 4);
		return dl * (float)q - ml;
	}
	case GGML_TYPE_Q3_K: {
		/* ggml's aux trick on the 12 scale bytes */
		uint32_t aux[4], tmp;
		const int8_t *scales = (const int8_t *)aux;
		memcpy(aux, b + 96, 12);
		tmp = aux[2];
		aux[2] = ((aux[0] >> 4) & 0x0f0f0f0f) | (((tmp >> 4) & 0x03030303) << 4);
		aux[3] = ((aux[1] >> 4) & 0x0f0f0f0f) | (((tmp >> 6) & 0x03030303) << 4);
		aux[0] = (aux[0] & 0x0f0f0f0f) | (((tmp >> 0) & 0x03030303) << 4);
		aux[1] = (aux[1] & 0x0f0f0f0f) | (((tmp >> 2) & 0x03030303) << 4);
		int n = e / 128, jj = (e % 128) / 32, l = e % 32;
		int q = (b[32 + 32 * n + l] >> (2 * jj)) & 3;
		q -= (b[l] & (1 << (4 * n + jj))) ? 0 : 4;
		float dl = h16(b + 108) * (float)(scales[e / 16] - 32);
		return dl * (float)q;
	}
	case GGML_TYPE_Q4_K:
	case GGML_TYPE_Q5_K: {
		int five = t == GGML_TYPE_Q5_K, c = e / 64, w = e % 64, l = w % 32;
		const uint8_t *qs = b + (five ? 48 : 16);
		int sc, m, q = w < 32 ? qs[32 * c + l] & 15 : qs[32 * c + l] >> 4;
		if (five && (b[16 + l] & (1 << (2 * c + (w >= 32)))))
			q += 16;
		k4_scale_min(2 * c + (w >= 32), b + 4, &sc, &m);
		float d1 = h16(b) * (float)sc, m1 = h16(b + 2) * (float)m;
		return d1 * (float)q - m1;
	}
	case GGML_TYPE_Q6_K: {
		int n = e / 128, r = e % 128, l = r % 32, qt = r / 32;
		const uint8_t *ql = b + 64 * n, *qh = b + 128 + 32 * n;
		int lo = qt == 0 ? ql[l] & 15 : qt == 1 ? ql[l + 32] & 15 :
			 qt == 2 ? ql[l] >> 4 : ql[l + 32] >> 4;
		int q = (lo | ((qh[l] >> (2 * qt)) & 3) << 4) - 32;
		return h16(b + 208) * (float)(int8_t)b[192 + e / 16] * (float)q;
	}
	case GGML_TYPE_IQ4_XS: {
		int ib = e / 32;
		uint16_t sh;
		memcpy(&sh, b + 2, 2);
		int ls = ((b[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) |
			 (((sh >> 2 * ib) & 3) << 4);
		uint8_t v = b[8 + 16 * ib + j];
		float dl = h16(b) * (float)(ls - 32);
		return dl * (float)kv[hi ? v >> 4 : v & 15];
	}
	}
	return NAN;
}

/* Random bytes with finite f16 scales at the type's scale fields. */
static void rand_block(uint32_t t, uint8_t *b)
{
	int nb = ggml_block_bytes(t);
	int off[2] = {-1, -1};
	for (int i = 0; i < nb; i++)
		b[i] = (uint8_t)rnd32();
	switch (t) {
	case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K:
	case GGML_TYPE_Q5_K:
		off[0] = 0, off[1] = 2; break;
	case GGML_TYPE_Q2_K: off[0] = 80, off[1] = 82; break;
	case GGML_TYPE_Q3_K: off[0] = 108; break;
	case GGML_TYPE_Q6_K: off[0] = 208; break;
	case GGML_TYPE_MXFP4: break; /* every E8M0 byte is a scale */
	default: off[0] = 0;
	}
	for (int i = 0; i < 2; i++)
		if (off[i] >= 0) {
			/* exponent 5..25: finite, normal */
			uint16_t h = (uint16_t)((rnd32() & 0x83ff) |
						((5 + rnd32() % 21) << 10));
			memcpy(b + off[i], &h, 2);
		}
}

static void test_dequant_blocks(void **state)
{
	(void)state;
	for (int ti = 0; ti < N_TYPES; ti++) {
		uint32_t t = types[ti];
		int be = ggml_block_elems(t), bb = ggml_block_bytes(t);
		uint8_t *blk = xmalloc((size_t)bb * 8);
		float *out = xmalloc(sizeof(float) * (size_t)be * 8);

		for (int rep = 0; rep < 50; rep++) {
			for (int b = 0; b < 8; b++)
				rand_block(t, blk + (size_t)b * bb);
			quant_dequant_row(t, blk, out, be * 8);
			for (int e = 0; e < be * 8; e++) {
				float r = ref_elem(t, blk + (size_t)(e / be) * bb,
						   e % be);
				if (memcmp(&r, &out[e], 4))
					fail_msg("%s element %d: %g, want %g",
						 ggml_type_name(t), e, out[e], r);
			}
		}
		free(blk);
		free(out);
	}
}

/* Blocks whose values are worked out by hand. */
static void test_dequant_literal(void **state)
{
	float out[256];
	(void)state;
	{
		ggml_block_q4_0 b = {0x3800 /* 0.5 */, {0}};
		b.qs[0] = 0x1f; /* element 0: 15 - 8 = 7; element 16: 1 - 8 */
		b.qs[3] = 0x80; /* element 3: -8; element 19: 0 */
		quant_dequant_row(GGML_TYPE_Q4_0, &b, out, 32);
		assert_true(out[0] == 3.5f && out[16] == -3.5f);
		assert_true(out[3] == -4.0f && out[19] == 0.0f);
		assert_true(out[1] == -4.0f);
	}
	{
		ggml_block_q5_1 b = {0x4000 /* 2 */, 0xbc00 /* -1 */, {0}, {0}};
		b.qh[2] = 0x01; /* bit 16: element 16 gets +16 */
		b.qs[0] = 0x32; /* element 0: 2; element 16: 3 | 16 */
		quant_dequant_row(GGML_TYPE_Q5_1, &b, out, 32);
		assert_true(out[0] == 3.0f && out[16] == 37.0f);
		assert_true(out[1] == -1.0f);
	}
	{
		ggml_block_q4_K b;
		memset(&b, 0, sizeof(b));
		b.d = 0x3c00;    /* 1 */
		b.dmin = 0x3800; /* 0.5 */
		b.scales[0] = 3;          /* sub-block 0: scale 3 */
		b.scales[4] = 2;          /* sub-block 0: min 2 */
		b.scales[9] = 0x45;       /* sub-block 5: scale 5, min 4 */
		b.scales[1] = 0x40;       /* sub-block 5: scale += 16 */
		b.qs[0] = 0x27;           /* e0 = 7, e32 = 2 */
		b.qs[64] = 0x09;          /* sub-block 4 (e128) 9; sub-block 5 (e160) 0 */
		quant_dequant_row(GGML_TYPE_Q4_K, &b, out, 256);
		assert_true(out[0] == 3.0f * 7 - 1.0f);  /* 20 */
		assert_true(out[1] == -1.0f);
		assert_true(out[160] == 21.0f * 0 - 2.0f);
		assert_true(out[128] == 0.0f);  /* sub-block 4: scale 0, min 0 */
	}
	{
		ggml_block_q6_K b;
		memset(&b, 0, sizeof(b));
		b.d = 0x3c00;
		b.scales[0] = -2;
		b.scales[4] = 3;
		b.ql[0] = 0x05;   /* e0 low 5, e64 low 0 */
		b.qh[0] = 0x12;   /* e0 high 2 -> 37 - 32 = 5; e64 high 1 -> 16-32 */
		quant_dequant_row(GGML_TYPE_Q6_K, &b, out, 256);
		assert_true(out[0] == -10.0f);
		assert_true(out[64] == 3.0f * -16.0f);
		assert_true(out[1] == -2.0f * -32.0f);
	}
	{
		ggml_block_iq4_nl b = {0x3c00, {0}};
		b.qs[5] = 0xf0; /* element 5: -127, element 21: 113 */
		quant_dequant_row(GGML_TYPE_IQ4_NL, &b, out, 32);
		assert_true(out[5] == -127.0f && out[21] == 113.0f);
	}
	{
		/* every code: element j low nibble j, element 16 + j high
		 * nibble 15 - j; e = 127: scale 1, the E2M1 values */
		static const float e2[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6,
					     0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
		ggml_block_mxfp4 b = {127, {0}};
		for (int j = 0; j < 16; j++)
			b.qs[j] = (uint8_t)(j | (15 - j) << 4);
		quant_dequant_row(GGML_TYPE_MXFP4, &b, out, 32);
		for (int j = 0; j < 16; j++) {
			assert_true(out[j] == e2[j]);
			assert_true(out[16 + j] == e2[15 - j]);
		}
		/* code 8 (-0 in E2M1) is +0, as ggml's integer table has it */
		assert_false(signbit(out[8]));
		/* e = 130: scale 8 */
		b.e = 130;
		quant_dequant_row(GGML_TYPE_MXFP4, &b, out, 32);
		assert_true(out[7] == 48.0f && out[16] == -48.0f);
		/* e = 0 and 1: the f32 subnormals 2^-128 and 2^-127 as half
		 * scales; e = 2: the smallest normal */
		b.e = 0;
		quant_dequant_row(GGML_TYPE_MXFP4, &b, out, 32);
		assert_true(out[1] == ldexpf(1.0f, -128)); /* 0.5 x 2^-127 */
		assert_true(out[7] == 12.0f * ldexpf(1.0f, -128));
		assert_true(out[30] == ldexpf(1.0f, -128)); /* code 1 */
		assert_true(out[16] == -12.0f * ldexpf(1.0f, -128)); /* 15 */
		b.e = 1;
		quant_dequant_row(GGML_TYPE_MXFP4, &b, out, 32);
		assert_true(out[1] == ldexpf(1.0f, -127));
		assert_true(quant_e8m0_half(2) == ldexpf(1.0f, -126));
		/* e = 254: 2^126 x code; from 4 (doubled 4 = 2^128) on it
		 * overflows to Inf, as ggml's f32 product does */
		b.e = 254;
		quant_dequant_row(GGML_TYPE_MXFP4, &b, out, 32);
		assert_true(out[1] == ldexpf(1.0f, 126));
		assert_true(out[3] == 3.0f * ldexpf(1.0f, 126));
		assert_true(isinf(out[4]) && out[4] > 0);
		assert_true(isinf(out[16]) && out[16] < 0); /* code 15 */
		/* e = 255 (NaN in the OCP spec): ggml reads 2^127, not NaN */
		b.e = 255;
		quant_dequant_row(GGML_TYPE_MXFP4, &b, out, 32);
		assert_true(quant_e8m0_half(255) == ldexpf(1.0f, 127));
		assert_true(out[0] == 0.0f && out[1] == ldexpf(1.0f, 127));
		assert_true(out[9] == -ldexpf(1.0f, 127));
		assert_true(out[30] == ldexpf(1.0f, 127)); /* code 1 */
		assert_true(isinf(out[2]));
		for (int e = 0; e < 256; e++)
			assert_true(quant_e8m0_half((uint8_t)e) ==
				    ldexpf(1.0f, e - 128));
	}
}

/* Bytes llama.cpp's gguf-py (MXFP4.quantize_blocks, the numpy twin of
 * ggml's quantize_row_mxfp4_ref) made from 4 blocks of
 * x[i] = ((37 i) mod 101 - 50) / 7 * 2^s, s = -3, 0, 5, 20 per block
 * (all f32 operations); generated once by hand, see docs/models.md. */
static void test_mxfp4_gguf_py(void **state)
{
	static const uint8_t want[4 * 17] = {
	0x7c, 0x7f, 0xec, 0x35, 0x7f, 0xc9, 0x56, 0xfe, 0xa2, 0x67, 0xed, 0x14, 0x7f, 0xdb, 0x46, 0x7f, 0xc0,
	0x7f, 0x35, 0x7f, 0xd9, 0x56, 0xfe, 0xa2, 0x67, 0xed, 0x14, 0x7f, 0xeb, 0x36, 0x7f, 0xc0, 0x57, 0xfe,
	0x84, 0xd9, 0x56, 0xfe, 0xb1, 0x67, 0xfd, 0x04, 0x7f, 0xeb, 0x36, 0x7f, 0xc9, 0x56, 0xfe, 0xa2, 0x67,
	0x93, 0xfe, 0xb1, 0x67, 0xfd, 0x04, 0x7f, 0xec, 0x35, 0x7f, 0xc9, 0x56, 0xfe, 0xa2, 0x67, 0xed, 0x14,
	};
	static const int sh[4] = {-3, 0, 5, 20};
	float x[128];
	uint8_t q[4 * 17];
	(void)state;
	for (int i = 0; i < 128; i++)
		x[i] = (float)((i * 37) % 101 - 50) / 7.0f * ldexpf(1.0f, sh[i / 32]);
	quant_quantize_row(GGML_TYPE_MXFP4, x, q, 128);
	for (int i = 0; i < 4 * 17; i++)
		if (q[i] != want[i])
			fail_msg("block %d byte %d: 0x%02x, gguf-py 0x%02x", i / 17,
				 i % 17, q[i], want[i]);
}

/* MXFP4's quantizer against one in double precision written from the
 * definition: scale 2^(floor(log2 amax) - 2), each element the nearest
 * E2M1 value (ties: the lower code, as ggml). The codes are compared
 * through their values: +0 and -0 (codes 0 and 8) are one value. */
static void test_mxfp4_quant(void **state)
{
	enum { NB = 4000 };
	static float x[NB * 32];
	static ggml_block_mxfp4 q[NB];
	int n_pow2 = 0;
	(void)state;
	for (int b = 0; b < NB; b++) {
		/* magnitudes over a wide range; some blocks whose largest
		 * element is an exact power of 2, some with zeros, one all
		 * zero, some elements exactly between two values */
		float s = ldexpf(1.0f, (int)(rnd32() % 200) - 100);
		for (int i = 0; i < 32; i++)
			x[b * 32 + i] = rndn() * s;
		if (b % 7 == 0) {
			x[b * 32 + 5] = ldexpf(1.0f, (int)(rnd32() % 60) - 30);
			for (int i = 0; i < 32; i++)
				if (fabsf(x[b * 32 + i]) > x[b * 32 + 5])
					x[b * 32 + i] *= 0.25f;
		}
		if (b % 11 == 0)
			for (int i = 0; i < 32; i += 3)
				x[b * 32 + i] = 0.0f;
		if (b == 17)
			memset(x + b * 32, 0, 32 * sizeof(float));
		if (b % 13 == 0) { /* amax 8: scale 2 (half 1): ties at 2.5, 5, 7 */
			x[b * 32] = 8.0f;
			x[b * 32 + 1] = 2.5f;
			x[b * 32 + 2] = -5.0f;
			x[b * 32 + 3] = 7.0f;
		}
	}
	quant_quantize_row(GGML_TYPE_MXFP4, x, q, NB * 32);
	for (int b = 0; b < NB; b++) {
		const float *v = x + b * 32;
		double amax = 0, d;
		int e;
		for (int i = 0; i < 32; i++)
			amax = fmax(amax, fabs((double)v[i]));
		if (amax == 0) {
			e = 0;
		} else {
			int ex;
			frexp(amax, &ex); /* amax = m 2^ex, m in [0.5, 1) */
			e = ex - 1 - 2 + 127;
			n_pow2 += frexp(amax, &ex) == 0.5;
		}
		if (q[b].e != e)
			fail_msg("block %d: scale byte %d, want %d (amax %g)", b,
				 q[b].e, e, amax);
		d = ldexp(1.0, e - 128);
		for (int i = 0; i < 32; i++) {
			int c = i < 16 ? q[b].qs[i] & 15 : q[b].qs[i - 16] >> 4;
			double best = INFINITY, got = fabs(2 * e2m1(c) * d - v[i]);
			int bc = 0;
			for (int k = 0; k < 16; k++) {
				double err = fabs(2 * e2m1(k) * d - v[i]);
				if (err < best) {
					best = err;
					bc = k;
				}
			}
			if (e2m1(c) != e2m1(bc))
				fail_msg("block %d element %d (%g): code %d (err "
					 "%g), want %d (err %g)", b, i, v[i], c,
					 got, bc, best);
		}
	}
	assert_true(n_pow2 > NB / 10);
}

/* Quantize -> dequantize: relative RMS error per type, within a bound
 * (ggml's own quantizers land in the same ranges on such data). */
static void test_roundtrip(void **state)
{
	static const struct { uint32_t t; double bound; } b[] = {
		{GGML_TYPE_Q4_0, 0.12}, {GGML_TYPE_Q4_1, 0.10},
		{GGML_TYPE_Q5_0, 0.06}, {GGML_TYPE_Q5_1, 0.05},
		{GGML_TYPE_Q8_0, 0.006}, {GGML_TYPE_IQ4_NL, 0.10},
		{GGML_TYPE_Q2_K, 0.40}, {GGML_TYPE_Q3_K, 0.22},
		{GGML_TYPE_Q4_K, 0.12}, {GGML_TYPE_Q5_K, 0.06},
		{GGML_TYPE_Q6_K, 0.035}, {GGML_TYPE_IQ4_XS, 0.10},
		{GGML_TYPE_MXFP4, 0.14},
	};
	int n = 4096;
	float *x = xmalloc(sizeof(float) * (size_t)n);
	float *y = xmalloc(sizeof(float) * (size_t)n);
	uint8_t *q = xmalloc((size_t)n * 2);
	(void)state;
	for (int i = 0; i < n; i++)
		x[i] = rndn() * 0.05f;
	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
		double se = 0, ss = 0;
		quant_quantize_row(b[i].t, x, q, n);
		quant_dequant_row(b[i].t, q, y, n);
		for (int k = 0; k < n; k++) {
			se += ((double)y[k] - x[k]) * ((double)y[k] - x[k]);
			ss += (double)x[k] * x[k];
		}
		printf("  %-6s round-trip relative RMS error %.4f (bound %.3f)\n",
		       ggml_type_name(b[i].t), sqrt(se / ss), b[i].bound);
		assert_true(sqrt(se / ss) < b[i].bound);
	}
	free(x);
	free(y);
	free(q);
}

/* ---- the integer matmul ---------------------------------------------- */

#define MM_N 37
#define MM_M 32

static int k_of(uint32_t t)
{
	return quant_unit(t) == QK_K ? 768 : 416; /* 3 units; 13 units */
}

static void mm(tpool *tp, const void *W, uint32_t t, int K, const float *x,
	       int M, const float *bias, float *y)
{
	kern_matmul(tp, W, t, K, MM_N, bias, x, K, M, y, MM_N);
}

static void test_int_matmul(void **state)
{
	tpool *tp;
	(void)state;
	assert_int_equal(tpool_new(2, &tp), 0);
	for (int ti = 0; ti < N_TYPES; ti++) {
		uint32_t t = types[ti];
		int K = k_of(t);
		size_t rb = ggml_row_bytes(t, (uint64_t)K);
		uint8_t *W = xmalloc(rb * MM_N);
		float *wf = xmalloc(sizeof(float) * (size_t)K * MM_N);
		float *x = xmalloc(sizeof(float) * (size_t)K * MM_M);
		float *bias = xmalloc(sizeof(float) * MM_N);
		float *y0 = xmalloc(sizeof(float) * MM_N * MM_M);
		float *y1 = xmalloc(sizeof(float) * MM_N * MM_M);
		double worst = 0;

		for (int i = 0; i < K * MM_N; i++)
			wf[i] = rndn() * 0.1f;
		for (int j = 0; j < MM_N; j++) {
			quant_quantize_row(t, wf + (size_t)j * K, W + rb * j, K);
			quant_dequant_row(t, W + rb * j, wf + (size_t)j * K, K);
			bias[j] = rndn();
		}
		for (int i = 0; i < K * MM_M; i++)
			x[i] = rndn() * (i % 7 == 0 ? 4.0f : 1.0f);
		kern_set_isa(KERN_ISA_SCALAR);
		mm(NULL, W, t, K, x, MM_M, bias, y0);
		/* accuracy against double with the same (dequantized) weights */
		for (int m = 0; m < MM_M; m++)
			for (int j = 0; j < MM_N; j++) {
				double r = bias[j], a = 0;
				for (int k = 0; k < K; k++) {
					double p = (double)wf[(size_t)j * K + k] *
						   x[(size_t)m * K + k];
					r += p;
					a += fabs(p);
				}
				double e = fabs(y0[m * MM_N + j] - r) / a;
				worst = e > worst ? e : worst;
			}
		printf("  %-6s integer dot: max |y - ref| / sum|w x| = %.2g\n",
		       ggml_type_name(t), worst);
		assert_true(worst < 1e-2);
		/* every ISA, threads, and each row alone: the same bits */
		for (int isa = KERN_ISA_SCALAR; isa <= iu_last_isa(); isa++) {
			if (!iu_use_isa(isa))
				continue;
			mm(tp, W, t, K, x, MM_M, bias, y1);
			if (memcmp(y0, y1, sizeof(float) * MM_N * MM_M))
				fail_msg("%s: %s differs from scalar",
					 ggml_type_name(t), iu_isa_label(isa));
			for (int m = 0; m < MM_M; m += 5) {
				mm(NULL, W, t, K, x + (size_t)m * K, 1, bias, y1);
				if (memcmp(y0 + m * MM_N, y1, sizeof(float) * MM_N))
					fail_msg("%s: %s row %d alone differs",
						 ggml_type_name(t),
						 iu_isa_label(isa), m);
			}
		}
		/* the f32 activation path: the canonical dot of the
		 * dequantized row, on every ISA */
		kern_set_activations(KERN_ACT_F32);
		for (int isa = KERN_ISA_SCALAR; isa <= iu_last_isa(); isa++) {
			if (!iu_use_isa(isa))
				continue;
			mm(tp, W, t, K, x, MM_M, NULL, y1);
			for (int m = 0; m < MM_M; m++)
				for (int j = 0; j < MM_N; j++) {
					float r = kern_dot(x + (size_t)m * K,
							   wf + (size_t)j * K, K);
					if (memcmp(&r, &y1[m * MM_N + j], 4))
						fail_msg("%s f32 path %s [%d,%d]",
							 ggml_type_name(t),
							 iu_isa_label(isa), m, j);
				}
		}
		kern_set_activations(KERN_ACT_INT);
		kern_set_isa(kern_isa_detect());
		free(W);
		free(wf);
		free(x);
		free(bias);
		free(y0);
		free(y1);
	}
	tpool_free(&tp);
}

/* The SIMD integer matmul works on tiles of rows and blocks of columns,
 * with 8 units per step of the float combination: every tile remainder
 * (M = 1..37 rows taken at any offset of a 37-row batch: one tile, a few
 * tiles decoding the weights in each, many with the weights decoded once),
 * a unit count that is and is not a multiple of 8, columns not a multiple
 * of the block, and 1 or 2 threads must give the scalar reference's bits,
 * with the weights as the file has them and packed (kern_pack). */
#define TL_M 37
#define TL_N 41

static void test_int_tiles(void **state)
{
	tpool *tp;
	(void)state;
	assert_int_equal(tpool_new(2, &tp), 0);
	for (int ti = 0; ti < N_TYPES; ti++) {
		uint32_t t = types[ti];
		/* K-quants: 2 or 9 units (9: two passes of a tile over the
		 * row, 2048 elements each); 1, 6, 7 and 15 units (Q4_K's
		 * groups side by side for M > 24: 1; 4 + 2; 4 + 2 + 1;
		 * 8 + 4 + 2 + 1). Units of 32 (Q8_0's groups side by side
		 * the same way): 28 (896, Qwen2.5-0.5B's dim: 8 + 8 + 8 + 4),
		 * 16, 9 (8 + 1), 73 (two passes of other types' tiles), 7
		 * (4 + 2 + 1) and 10 (8 + 2) */
		int kq = quant_unit(t) == QK_K;
		int Ks[6] = {kq ? 512 : 896, kq ? 2304 : 512,
			     kq ? 256 : 288, kq ? 1536 : 2336,
			     kq ? 1792 : 224, kq ? 3840 : 320};
		for (int ki = 0; ki < 6 && Ks[ki]; ki++) {
			int K = Ks[ki];
			size_t rb = ggml_row_bytes(t, (uint64_t)K);
			uint8_t *W = xmalloc(rb * TL_N);
			float *wf = xmalloc(sizeof(float) * (size_t)K);
			float *x = xmalloc(sizeof(float) * (size_t)K * TL_M);
			float *y0 = xmalloc(sizeof(float) * TL_N * TL_M);
			float *y1 = xmalloc(sizeof(float) * TL_N * TL_M);

			for (int j = 0; j < TL_N; j++) {
				for (int k = 0; k < K; k++)
					wf[k] = rndn() * 0.1f;
				quant_quantize_row(t, wf, W + rb * j, K);
			}
			for (int i = 0; i < K * TL_M; i++)
				x[i] = rndn() * (i % 5 == 0 ? 3.0f : 1.0f);
			kern_set_isa(KERN_ISA_SCALAR);
			kern_matmul(NULL, W, t, K, TL_N, NULL, x, K, TL_M, y0,
				    TL_N);
			kern_packed *pk = NULL, *last_pk = NULL;

			for (int isa = KERN_ISA_SCALAR + 1; isa <= iu_last_isa();
			     isa++) {
				if (!iu_use_isa(isa))
					continue;
				/* and packed, where this ISA packs t */
				assert_int_equal(kern_pack(tp, W, t, K, TL_N,
							   TL_M, &pk), 0);
				/* the VNNI build packs its tiles' types, the
				 * AVX2 builds (the emulated VNNI level too)
				 * Q8_0's prepared rows and, for 4 rows or
				 * more, Q4_K's and Q6_K's (a test that
				 * cannot skip them unseen) */
				if (!getenv("QUORUM_PACK") &&
				    (t == GGML_TYPE_Q8_0 ||
				     ((t == GGML_TYPE_Q4_K ||
				       t == GGML_TYPE_Q6_K) &&
				      (isa != KERN_ISA_AVX512VNNI ||
				       isa <= kern_isa_detect()))))
					assert_non_null(pk);
				for (int P = 0; P < (pk ? 2 : 1); P++)
				for (int M = 1; M <= TL_M; M++)
					for (int off = 0; off + M <= TL_M;
					     off += M < 7 ? 3 : M < TL_M ? TL_M - M : 1) {
						struct kern_mat km = {
							.W = W, .wtype = t,
							.N = TL_N, .y = y1,
							.ldy = TL_N,
							.pk = P ? pk : NULL};
						kern_matmul_n(M % 2 ? tp : NULL,
							      &km, 1, K,
							      x + (size_t)off * K,
							      K, M);
						if (memcmp(y0 + off * TL_N, y1,
							   sizeof(float) * TL_N *
								   (size_t)M))
							fail_msg("%s K=%d %s%s: rows "
								 "%d..%d differ",
								 ggml_type_name(t), K,
								 iu_isa_label(isa),
								 P ? " packed" : "",
								 off, off + M - 1);
					}
				if (pk) {
					kern_packed_free(&last_pk);
					last_pk = pk;
					pk = NULL;
				}
			}
			/* a copy packed for another ISA is not read there */
			if (last_pk) {
				struct kern_mat km = {.W = W, .wtype = t,
						      .N = TL_N, .y = y1,
						      .ldy = TL_N,
						      .pk = last_pk};

				assert_true(iu_use_isa(KERN_ISA_AVX2));
				kern_matmul_n(tp, &km, 1, K, x, K, TL_M);
				assert_memory_equal(y0, y1, sizeof(float) *
						    TL_N * TL_M);
				kern_packed_free(&last_pk);
			}
			kern_set_isa(kern_isa_detect());
			free(W);
			free(wf);
			free(x);
			free(y0);
			free(y1);
		}
	}
	tpool_free(&tp);
}

/* Packed weights in several blocks per task: the tiles walk a packed
 * copy block by block (each block's pairs at their offset in the copy)
 * and request the next block's lines while they compute on this one
 * (kern_set_prefetch). N = 333 columns (an odd last pair) of K = 896
 * (Q8_0) and 1536 (Q4_K, Q6_K): 64-row blocks of pairs of 1,920 and
 * 4,096 bytes; K = 4864 (Q8_0) and 3840 (Q4_K): 28- and 32-row blocks of
 * longer pairs, Q8_0's walked in 3 passes of K (56, 56 and 40 units).
 * 8, 12, 32, 33 and 97 rows (97: three groups of rows whose lanes wait
 * between passes, 48 + 48 + 1), 1 and 2 threads, the prefetch on and
 * off: the scalar reference's bits. */
#define BL_N 333
#define BL_M 97

static void test_int_blocks(void **state)
{
	static const struct {
		uint32_t t;
		int K;
	} cases[] = {{GGML_TYPE_Q8_0, 896}, {GGML_TYPE_Q8_0, 4864},
		     {GGML_TYPE_Q4_K, 1536}, {GGML_TYPE_Q6_K, 1536},
		     {GGML_TYPE_Q4_K, 3840}};
	static const int Ms[] = {8, 12, 32, 33, BL_M};
	tpool *tp;
	(void)state;
	assert_int_equal(tpool_new(2, &tp), 0);
	for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
		uint32_t t = cases[ci].t;
		int K = cases[ci].K;
		size_t rb = ggml_row_bytes(t, (uint64_t)K);
		uint8_t *W = xmalloc(rb * BL_N);
		float *wf = xmalloc(sizeof(float) * (size_t)K);
		float *x = xmalloc(sizeof(float) * (size_t)K * BL_M);
		float *y0 = xmalloc(sizeof(float) * BL_N * BL_M);
		float *y1 = xmalloc(sizeof(float) * BL_N * BL_M);
		kern_packed *pk = NULL;

		for (int j = 0; j < BL_N; j++) {
			for (int k = 0; k < K; k++)
				wf[k] = rndn() * 0.1f;
			quant_quantize_row(t, wf, W + rb * j, K);
		}
		for (int i = 0; i < K * BL_M; i++)
			x[i] = rndn();
		kern_set_isa(KERN_ISA_SCALAR);
		kern_matmul(NULL, W, t, K, BL_N, NULL, x, K, BL_M, y0, BL_N);
		kern_set_isa(kern_isa_detect());
		assert_int_equal(kern_pack(tp, W, t, K, BL_N, BL_M, &pk), 0);
		for (int pf = 0; pf < 2; pf++)
			for (size_t mi = 0; mi < sizeof(Ms) / sizeof(Ms[0]); mi++)
				for (int th = 0; th < 2; th++) {
					struct kern_mat km = {.W = W, .wtype = t,
						.N = BL_N, .y = y1, .ldy = BL_N,
						.pk = pk};

					kern_set_prefetch(pf);
					kern_matmul_n(th ? tp : NULL, &km, 1, K, x,
						      K, Ms[mi]);
					if (memcmp(y0, y1, sizeof(float) * BL_N *
						   (size_t)Ms[mi]))
						fail_msg("%s K=%d %s M=%d, %d "
							 "thread(s), prefetch "
							 "%s: differs",
							 ggml_type_name(t), K,
							 pk ? "packed" : "unpacked",
							 Ms[mi], th + 1,
							 pf ? "on" : "off");
				}
		kern_set_prefetch(1);
		kern_packed_free(&pk);
		free(W);
		free(wf);
		free(x);
		free(y0);
		free(y1);
	}
	tpool_free(&tp);
}

/* MXFP4's kernels build the E8M0 scale in vector lanes and decode
 * codes by table: every scale byte 0..255 (2^-128 and 2^-127 subnormal,
 * 2^127 at 0xFF), every code, rows of 1, 2, 3, 7, 9, 10 and 90 units
 * (gpt-oss's 2880: 11 groups of 8 and a tail of 2), M = 1..20 (one to
 * three tiles, each decoding the blocks), with a bias, on 1 or 2
 * threads: the scalar reference's bits. Small
 * activations keep 2^127 scales finite. */
#define MX_M 20
#define MX_N 19

static void test_int_mxfp4_edges(void **state)
{
	static const int nus[] = {1, 2, 3, 7, 9, 10, 90};
	tpool *tp;
	(void)state;
	assert_int_equal(tpool_new(2, &tp), 0);
	for (size_t ki = 0; ki < sizeof(nus) / sizeof(nus[0]); ki++) {
		int nu = nus[ki], K = 32 * nu;
		ggml_block_mxfp4 *W = xmalloc(sizeof(*W) * (size_t)nu * MX_N);
		float *x = xmalloc(sizeof(float) * (size_t)K * MX_M);
		float *bias = xmalloc(sizeof(float) * MX_N);
		float *y0 = xmalloc(sizeof(float) * MX_N * MX_M);
		float *y1 = xmalloc(sizeof(float) * MX_N * MX_M);

		for (int b = 0; b < nu * MX_N; b++) {
			W[b].e = (uint8_t)(b * 97 + (int)ki);
			for (int i = 0; i < 16; i++)
				W[b].qs[i] = (uint8_t)rnd32();
		}
		for (int j = 0; j < MX_N; j++)
			bias[j] = rndn();
		for (int i = 0; i < K * MX_M; i++)
			x[i] = rndn() * 1e-4f;
		kern_set_isa(KERN_ISA_SCALAR);
		kern_matmul(NULL, W, GGML_TYPE_MXFP4, K, MX_N, bias, x, K, MX_M,
			    y0, MX_N);
		for (int i = 0; i < MX_N * MX_M; i++)
			assert_true(isfinite(y0[i])); /* bits, not NaN payloads */
		for (int isa = KERN_ISA_SCALAR + 1; isa <= iu_last_isa(); isa++) {
			if (!iu_use_isa(isa))
				continue;
			for (int M = 1; M <= MX_M; M++) {
				memset(y1, 0xff, sizeof(float) * MX_N * MX_M);
				kern_matmul(M % 2 ? tp : NULL, W, GGML_TYPE_MXFP4, K,
					    MX_N, bias, x, K, M, y1, MX_N);
				if (memcmp(y0, y1, sizeof(float) * MX_N * (size_t)M))
					fail_msg("MXFP4 K=%d %s M=%d differs", K,
						 iu_isa_label(isa), M);
			}
		}
		kern_set_isa(kern_isa_detect());
		free(W);
		free(x);
		free(bias);
		free(y0);
		free(y1);
	}
	tpool_free(&tp);
}

/* kern_matmul_n: matrices of several types (two sharing a type, so one
 * quantized x), one with a bias, fused in one job, give each matrix the
 * bits kern_matmul gives it alone, for 1..37 rows, with and without a
 * pool, on every ISA; the columns of the job's tasks straddle the
 * matrices' boundaries. */
#define MN_M 37
static void test_matmul_n(void **state)
{
	static const uint32_t mt[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K,
				      GGML_TYPE_Q4_K, GGML_TYPE_Q8_0,
				      GGML_TYPE_F32};
	static const int mn[] = {300, 37, 129, 100, 20};
	const int K = 512;
	tpool *tp;
	(void)state;
	assert_int_equal(tpool_new(2, &tp), 0);
	for (int set = 0; set < 2; set++) {
		/* set 0: Q4_K, Q6_K, Q4_K, Q8_0; set 1: Q6_K, Q4_K, Q8_0, F32 */
		const uint32_t *ts = mt + set;
		const int *ns = mn + set;
		uint8_t *W[KERN_MM_MAX];
		float *y0[KERN_MM_MAX], *y1[KERN_MM_MAX];
		float *x = xmalloc(sizeof(float) * (size_t)K * MN_M);
		float *wf = xmalloc(sizeof(float) * (size_t)K);
		float *bias = xmalloc(sizeof(float) * 300);
		struct kern_mat km[KERN_MM_MAX];

		for (int i = 0; i < 300; i++)
			bias[i] = rndn();
		for (int i = 0; i < K * MN_M; i++)
			x[i] = rndn() * (i % 7 == 0 ? 4.0f : 1.0f);
		for (int i = 0; i < KERN_MM_MAX; i++) {
			size_t rb = ggml_row_bytes(ts[i], (uint64_t)K);
			W[i] = xmalloc(rb * (size_t)ns[i]);
			y0[i] = xmalloc(sizeof(float) * (size_t)ns[i] * MN_M);
			y1[i] = xmalloc(sizeof(float) * (size_t)ns[i] * MN_M);
			for (int j = 0; j < ns[i]; j++) {
				for (int k = 0; k < K; k++)
					wf[k] = rndn() * 0.1f;
				if (ts[i] == GGML_TYPE_F32)
					memcpy(W[i] + rb * j, wf, rb);
				else
					quant_quantize_row(ts[i], wf, W[i] + rb * j, K);
			}
			km[i] = (struct kern_mat){.W = W[i], .wtype = ts[i],
				.N = ns[i], .bias = i == 1 ? bias : NULL,
				.y = y1[i], .ldy = ns[i]};
		}
		for (int isa = KERN_ISA_SCALAR; isa <= iu_last_isa(); isa++) {
			if (!iu_use_isa(isa))
				continue;
			for (int M = 1; M <= MN_M; M++) {
				for (int i = 0; i < KERN_MM_MAX; i++)
					kern_matmul(NULL, W[i], ts[i], K, ns[i],
						    km[i].bias, x, K, M, y0[i],
						    ns[i]);
				for (int th = 0; th < 2; th++) {
					for (int i = 0; i < KERN_MM_MAX; i++)
						memset(y1[i], 0xff, sizeof(float) *
						       (size_t)ns[i] * M);
					kern_matmul_n(th ? tp : NULL, km,
						      KERN_MM_MAX, K, x, K, M);
					for (int i = 0; i < KERN_MM_MAX; i++)
						if (memcmp(y0[i], y1[i], sizeof(float) *
							   (size_t)ns[i] * M))
							fail_msg("set %d %s M=%d %d "
								 "threads: matrix %d (%s) "
								 "differs", set,
								 iu_isa_label(isa), M,
								 th + 1, i,
								 ggml_type_name(ts[i]));
				}
			}
		}
		kern_set_isa(kern_isa_detect());
		for (int i = 0; i < KERN_MM_MAX; i++) {
			free(W[i]);
			free(y0[i]);
			free(y1[i]);
		}
		free(x);
		free(wf);
		free(bias);
	}
	tpool_free(&tp);
}

/* The SIMD quantizer of activation rows gives quant_act_row's bytes:
 * random rows, ties of the largest magnitude with either sign first,
 * halves that round to even, zero units, NaN and Inf, f16 overflow of
 * the block sum, subnormals; rows of whole and partial batches of 16
 * units (the VNNI build's act_units16: 1024 is two, 896 one and 12
 * units, 736 one and 7, 32 one unit), and not a byte written outside
 * the row's parts (the whole buffer compared, padding included). */
static void test_act_simd(void **state)
{
	enum { KMAX = 1024 };
	static const int Ks[] = {1024, 896, 736, 32};
	static float x[KMAX];
	(void)state;
	if (kern_isa_detect() < KERN_ISA_AVX2)
		skip();
	char *b0 = xmalloc(quant_arow_bytes(KMAX, 32));
	char *b1 = xmalloc(quant_arow_bytes(KMAX, 32));
	for (int trial = 0; trial < 800; trial++) {
		int K = Ks[trial / 2 % 4];
		int unit = trial % 2 && K % QK_K == 0 ? QK_K : 32;
		size_t nb = quant_arow_bytes(K, unit);
		for (int k = 0; k < K; k++)
			x[k] = rndn() * (trial % 7 == 0 ? 1e-39f :
					 trial % 5 == 0 ? 3e4f : 1.0f);
		switch (trial % 11) {
		case 1: /* a tie of the largest magnitude, either sign first */
			x[37 % K] = 9.0f;
			x[38 % K] = -9.0f;
			x[300 % K] = -9.0f;
			x[520 % K] = -9.0f;
			x[523 % K] = 9.0f;
			x[700 % K] = 9.0f;
			break;
		case 2: /* codes that are exact halves: round to even */
			for (int k = 0; k < K; k++) /* amax 127: id = 1 */
				x[k] = k % 32 ? (float)((k * 7) % 253 - 126) + 0.5f
					      : 127.0f;
			break;
		case 3: /* zero units */
			memset(x, 0, sizeof(float) * (size_t)(K / 2));
			x[100 % K] = -0.0f;
			break;
		case 4:
			x[77 % K] = NAN;
			x[K - 3] = -INFINITY;
			break;
		case 5: /* the block sum overflows f16 */
			for (int k = 0; k < K; k++)
				x[k] = 60000.0f;
			break;
		}
		quant_arow a0, a1;
		memset(b0, 0x55, nb);
		quant_arow_bind(&a0, b0, K, unit);
		quant_arow_bind(&a1, b1, K, unit);
		quant_act_row(x, K, unit, &a0);
		/* the AVX2 build, the emulated VNNI build (256-bit, as
		 * AVX2's), and where the CPU has it the VNNI build's own
		 * (512-bit) */
		void (*const fn[3])(const float *, int, int, quant_arow *) = {
			kern_ops_avx2.act_row, kern_vnni_emu_act_row,
			kern_ops_avx512vnni.act_row};
		static const char *const name[3] = {"avx2", "vnni emulated",
						    "avx512vnni"};
		int nv = kern_isa_detect() >= KERN_ISA_AVX512VNNI ? 3 : 2;
		for (int v = 0; v < nv; v++) {
			memset(b1, 0x55, nb);
			fn[v](x, K, unit, &a1);
			if (memcmp(b0, b1, nb))
				fail_msg("trial %d (K %d, unit %d): the SIMD "
					 "quantizer (%s) differs", trial, K,
					 unit, name[v]);
		}
	}
	free(b0);
	free(b1);
}

/* A non-finite activation gives NaN, not garbage. */
/* Activation blocks of 32 carry Q8_1's block sum as ggml does: d (before
 * its f16 rounding) times the sum of q, rounded to f16; an f16 overflow
 * keeps the f32 product. Worked by hand. */
static void test_act_q8_1(void **state)
{
	float x[64];
	char buf[4096];
	quant_arow a;
	(void)state;

	assert_true(quant_arow_bytes(64, 32) <= sizeof(buf));
	quant_arow_bind(&a, buf, 64, 32);
	/* block 0: 100 then 31 ones: d = 100/127, q = 127, 1 x 31 (1.27
	 * rounds to 1), sum 158, d * sum = 124.409... -> f16 124.4375 */
	/* block 1: 254, 2, 1, zeros: d = 2, q = 127, 1, 0 (0.5 to even) */
	for (int k = 0; k < 64; k++)
		x[k] = k < 32 ? 1.0f : 0.0f;
	x[0] = 100.0f;
	x[32] = 254.0f;
	x[33] = 2.0f;
	x[34] = 1.0f;
	quant_act_row(x, 64, 32, &a);
	assert_int_equal(a.q[0], 127);
	assert_int_equal(a.q[1], 1);
	assert_true(a.s[0] == 124.4375f);
	assert_true(a.d[1] == 2.0f);
	assert_int_equal(a.q[32], 127);
	assert_int_equal(a.q[33], 1);
	assert_int_equal(a.q[34], 0);
	assert_true(a.s[1] == 256.0f);
	/* 60000 everywhere: d * sum = 472.4... * 4064 overflows f16 */
	for (int k = 0; k < 32; k++)
		x[k] = 60000.0f;
	quant_act_row(x, 32, 32, &a);
	assert_true(a.s[0] == (60000.0f / 127.0f) * 4064.0f);
}

static void test_int_nan(void **state)
{
	int K = 256;
	uint8_t W[144];
	float w[256], x[256], y;
	(void)state;
	for (int i = 0; i < K; i++) {
		w[i] = rndn();
		x[i] = rndn();
	}
	quant_quantize_row(GGML_TYPE_Q4_K, w, W, K);
	x[7] = INFINITY;
	kern_matmul(NULL, W, GGML_TYPE_Q4_K, K, 1, NULL, x, K, 1, &y, 1);
	assert_true(isnan(y));
}

/* ---- corrupt quantized tensors --------------------------------------- */

static void spit(const char *p, const void *b, size_t n)
{
	FILE *f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	fclose(f);
}

/* The same refusal whatever becomes of the weights: copied out of the
 * file (as a model of 64 MiB or more is by default; a tensor the reader
 * left unsized had been given data there, and the row kernel aborted)
 * or read from its mapping. */
static void expect_load_error(const char *path, int code, const char *a,
			      const char *b)
{
	static const char *const modes[] = {NULL, "copy", "map"};

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		model *m = NULL;
		int rc;

		if (modes[i])
			setenv("QUORUM_WEIGHTS", modes[i], 1);
		rc = model_load(path, &m);
		unsetenv("QUORUM_WEIGHTS");
		if (rc != code || !strstr(qerr_detail(), a) ||
		    (b && !strstr(qerr_detail(), b)))
			fail_msg("QUORUM_WEIGHTS=%s: rc %d (%s), want %d with "
				 "'%s' and '%s'", modes[i] ? modes[i] : "",
				 rc, qerr_detail(), code, a, b ? b : "");
		assert_null(m);
	}
}

static void test_corrupt(void **state)
{
	char path[512];
	size_t n = 0;
	uint8_t *f, *p;
	model *m = NULL;
	const char *nm = "blk.1.ffn_up.weight";
	(void)state;

	assert_int_equal(tu_model(path, sizeof(path), "qwen2", "tiny",
				  GGML_TYPE_Q4_0, tu_chat_tokenizer(), 3), 0);
	assert_int_equal(model_load(path, &m), 0);
	{
		/* locate the tensor's data by its first bytes */
		gguf_file *g = m->gguf;
		const gguf_tensor *t = gguf_find_tensor(g, nm);
		assert_non_null(t);
		assert_non_null(f = (uint8_t *)tu_slurp(path, &n));
		p = memmem(f, n, t->data, 64);
		assert_non_null(p);
		model_free(&m);
	}
	/* a NaN scale in block 5 of row 2 (Q4_0 rows of 128: 4 blocks) */
	uint16_t nan16 = 0x7e00, inf16 = 0xfc00;
	memcpy(p + (2 * 4 + 1) * 18, &nan16, 2);
	spit(path, f, n);
	expect_load_error(path, QERR_FORMAT, nm, "NaN or infinite");
	memcpy(p + (2 * 4 + 1) * 18, &inf16, 2);
	spit(path, f, n);
	expect_load_error(path, QERR_FORMAT, "row 2 block 1", "Q4_0");
	/* truncated data */
	spit(path, f, n - 100);
	expect_load_error(path, QERR_FORMAT, "past the end", NULL);
	/* the type patched to Q4_K: rows of 128 are not whole blocks */
	{
		const char *an = "blk.0.attn_q.weight";
		uint8_t *h = memmem(f, n, an, strlen(an));
		uint32_t q4k = GGML_TYPE_Q4_K, iq2 = GGML_TYPE_IQ2_XXS;
		assert_non_null(h);
		/* name, n_dims u32, 2 x u64 ne, then the type */
		memcpy(h + strlen(an) + 4 + 16, &q4k, 4);
		spit(path, f, n);
		expect_load_error(path, QERR_FORMAT, an,
				  "128 elements, not whole Q4_K blocks");
		memcpy(h + strlen(an) + 4 + 16, &iq2, 4);
		spit(path, f, n);
		expect_load_error(path, QERR_UNSUPPORTED, an,
				  "weight type IQ2_XXS (16) is not supported");
		/* MXFP4 with rows of 48 (not whole 32-blocks) */
		uint32_t mx = GGML_TYPE_MXFP4;
		uint64_t ne0 = 48;
		memcpy(h + strlen(an) + 4, &ne0, 8);
		memcpy(h + strlen(an) + 4 + 16, &mx, 4);
		spit(path, f, n);
		expect_load_error(path, QERR_FORMAT, an,
				  "48 elements, not whole MXFP4 blocks");
	}
	free(f);
	unlink(path);
}

/* Where each type's f16 scales sit in its block (-1: none). */
static void scale_offsets(uint32_t t, int *d, int *m)
{
	*m = -1;
	switch (t) {
	case GGML_TYPE_Q4_1: *d = offsetof(ggml_block_q4_1, d);
		*m = offsetof(ggml_block_q4_1, m); break;
	case GGML_TYPE_Q5_1: *d = offsetof(ggml_block_q5_1, d);
		*m = offsetof(ggml_block_q5_1, m); break;
	case GGML_TYPE_Q2_K: *d = offsetof(ggml_block_q2_K, d);
		*m = offsetof(ggml_block_q2_K, dmin); break;
	case GGML_TYPE_Q3_K: *d = offsetof(ggml_block_q3_K, d); break;
	case GGML_TYPE_Q4_K: *d = offsetof(ggml_block_q4_K, d);
		*m = offsetof(ggml_block_q4_K, dmin); break;
	case GGML_TYPE_Q5_K: *d = offsetof(ggml_block_q5_K, d);
		*m = offsetof(ggml_block_q5_K, dmin); break;
	case GGML_TYPE_Q6_K: *d = offsetof(ggml_block_q6_K, d); break;
	case GGML_TYPE_MXFP4: *d = -1; break; /* E8M0: never NaN (ggml) */
	default: *d = 0; /* Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS: d first */
	}
}

/* An Inf scale (and, for types with one, a NaN minimum) in row 1 of
 * blk.0.attn_k.weight of the loaded file at path: a load error naming the
 * tensor, the row and the block. */
static void corrupt_scales(const char *path, const model *m, uint32_t t)
{
	const char *nm = "blk.0.attn_k.weight";
	const gguf_tensor *te = gguf_find_tensor(m->gguf, nm);
	int d, mo, bb = ggml_block_bytes(t), nb = 256 / ggml_block_elems(t);
	int blk = nb - 1;
	uint16_t inf16 = 0x7c00, nan16 = 0xfe00;
	char want[64];
	size_t n = 0;
	uint8_t *f, *p;

	assert_non_null(te);
	scale_offsets(t, &d, &mo);
	if (d < 0)
		return;
	assert_non_null(f = (uint8_t *)tu_slurp(path, &n));
	p = memmem(f, n, te->data, 256);
	assert_non_null(p);
	p += (size_t)(nb + blk) * bb; /* row 1 (rows of 256), last block */
	snprintf(want, sizeof(want), "row 1 block %d", blk);
	{
		uint8_t keep[2];
		memcpy(keep, p + d, 2);
		memcpy(p + d, &inf16, 2);
		spit(path, f, n);
		expect_load_error(path, QERR_FORMAT, nm, want);
		memcpy(p + d, keep, 2);
	}
	if (mo >= 0) {
		memcpy(p + mo, &nan16, 2);
		spit(path, f, n);
		expect_load_error(path, QERR_FORMAT, nm, want);
	}
	free(f);
}

/* Every type synthesizes and loads (and refuses a corrupt scale); a Q4_K_M
 * mix has llama.cpp's types. */
/* kern_pack_covers, on every ISA this CPU runs (the VNNI level emulated
 * on AVX2): it says yes exactly where kern_pack makes a copy for one
 * activation row (which the kernels then read at every row count, so a
 * loader may leave W in the file's mapping): Q8_0 on every x86 level,
 * never a K-quant (read from their file rows below 2, 4 or 6 rows), a
 * float type or the scalar level, and nothing with f32 activations. */
static void test_pack_covers(void **state)
{
	static const uint32_t ts[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_K,
				      GGML_TYPE_Q6_K, GGML_TYPE_F16};
	const int K = 512, N = 8;
	tpool *tp;

	(void)state;
	if (getenv("QUORUM_PACK"))
		skip(); /* the switch is read once, at first use */
	assert_int_equal(tpool_new(2, &tp), 0);
	for (int isa = KERN_ISA_SCALAR; isa <= iu_last_isa(); isa++) {
		if (!iu_use_isa(isa))
			continue;
		for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
			uint32_t t = ts[i];
			size_t rb = ggml_row_bytes(t, (uint64_t)K);
			uint8_t *W = xmalloc(rb * N);
			float *wf = xmalloc(sizeof(float) * K);
			kern_packed *pk = NULL;
			int covers = kern_pack_covers(t, K);

			for (int j = 0; j < N; j++) {
				for (int k = 0; k < K; k++)
					wf[k] = rndn() * 0.1f;
				if (quant_is_quant(t))
					quant_quantize_row(t, wf, W + rb * j, K);
				else
					memset(W + rb * j, 0, rb);
			}
			assert_int_equal(kern_pack(tp, W, t, K, N, 1, &pk), 0);
			if (covers != (pk != NULL))
				fail_msg("%s on %s: kern_pack_covers %d, a copy "
					 "for one row %s", ggml_type_name(t),
					 iu_isa_label(isa), covers,
					 pk ? "made" : "not made");
			assert_int_equal(covers, t == GGML_TYPE_Q8_0 &&
						 isa != KERN_ISA_SCALAR);
			kern_packed_free(&pk);
			kern_set_activations(KERN_ACT_F32);
			assert_false(kern_pack_covers(t, K));
			kern_set_activations(KERN_ACT_INT);
			free(W);
			free(wf);
		}
	}
	kern_set_isa(kern_isa_detect());
	tpool_free(&tp);
}

static void test_mkmodel_types(void **state)
{
	char path[512];
	(void)state;
	for (int ti = 0; ti < N_TYPES; ti++) {
		model *m = NULL;
		/* the vocabulary is not what is tested: the small one
		 * (quantizing GPT-2's 50,257 embedding rows per type made
		 * the ASan run of this file 65 s instead of 39 s) */
		assert_int_equal(tu_model(path, sizeof(path), "llama", "small",
					  types[ti], tu_chat_tokenizer(), 5), 0);
		if (model_load(path, &m))
			fail_msg("%s: %s", ggml_type_name(types[ti]),
				 qerr_detail());
		/* dim 256: the attention matrices are of the type itself */
		assert_int_equal(m->layers[0].wq.type, types[ti]);
		corrupt_scales(path, m, types[ti]);
		model_free(&m);
		unlink(path);
	}
	{
		const quant_ftype *ft = quant_ftype_find("q4_k_m");
		assert_non_null(ft);
		/* 28 layers: attn_v/ffn_down of layers 0-2, 25-27 and every
		 * third between get Q6_K; 896-wide rows fall back to Q5_0 */
		assert_int_equal(quant_tensor_type(ft, 1, "blk.0.attn_v.weight",
						   2, 1536, 28, 6, 1), GGML_TYPE_Q6_K);
		assert_int_equal(quant_tensor_type(ft, 1, "blk.4.attn_v.weight",
						   2, 1536, 28, 6, 1), GGML_TYPE_Q4_K);
		assert_int_equal(quant_tensor_type(ft, 1, "blk.5.ffn_down.weight",
						   2, 8960, 28, 6, 1), GGML_TYPE_Q6_K);
		assert_int_equal(quant_tensor_type(ft, 1, "blk.5.ffn_up.weight",
						   2, 896, 28, 6, 1), GGML_TYPE_Q5_0);
		assert_int_equal(quant_tensor_type(ft, 1, "token_embd.weight",
						   2, 1536, 28, 6, 1), GGML_TYPE_Q6_K);
		assert_int_equal(quant_tensor_type(ft, 1, "token_embd.weight",
						   2, 896, 24, 7, 1), GGML_TYPE_Q8_0);
		assert_int_equal(quant_tensor_type(ft, 1, "token_embd.weight",
						   2, 2048, 16, 4, 0), GGML_TYPE_Q4_K);
		assert_int_equal(quant_tensor_type(ft, 1, "blk.0.attn_norm.weight",
						   1, 1536, 28, 6, 1), GGML_TYPE_F32);
	}
	{
		/* MXFP4 is llama.cpp's MXFP4_MOE (file type 38) where there
		 * are experts: experts MXFP4, other matrices Q8_0 (output and
		 * a tied embedding too), the router F32; without experts
		 * every matrix MXFP4; F16 where rows are not 32-blocks */
		const quant_ftype *ft = quant_ftype_find("mxfp4");
		assert_non_null(ft);
		assert_ptr_equal(quant_ftype_find("MXFP4_MOE")->base, ft->base);
		assert_int_equal(ft->llama_ftype, 38);
		assert_int_equal(quant_ftype_recipe(ft, 0, 1), 1);
		assert_int_equal(quant_ftype_recipe(ft, 1, 0), 0);
		assert_int_equal(quant_ftype_recipe(quant_ftype_find("q4_0"), 0,
						    1), 0);
		assert_int_equal(quant_tensor_type(ft, 1, "blk.3.ffn_down_exps.weight",
						   3, 768, 48, 8, 0), GGML_TYPE_MXFP4);
		assert_int_equal(quant_tensor_type(ft, 1, "blk.3.ffn_gate_exps.weight",
						   3, 2048, 48, 8, 0), GGML_TYPE_MXFP4);
		assert_int_equal(quant_tensor_type(ft, 1, "blk.3.attn_q.weight",
						   2, 2048, 48, 8, 0), GGML_TYPE_Q8_0);
		assert_int_equal(quant_tensor_type(ft, 1, "output.weight",
						   2, 2048, 48, 8, 0), GGML_TYPE_Q8_0);
		assert_int_equal(quant_tensor_type(ft, 1, "token_embd.weight",
						   2, 2048, 48, 8, 1), GGML_TYPE_Q8_0);
		assert_int_equal(quant_tensor_type(ft, 1, "blk.3.ffn_gate_inp.weight",
						   2, 2048, 48, 8, 0), GGML_TYPE_F32);
		assert_int_equal(quant_tensor_type(ft, 1, "blk.3.ffn_down_exps.weight",
						   3, 48, 48, 8, 0), GGML_TYPE_F16);
		assert_int_equal(quant_tensor_type(ft, 0, "blk.3.attn_q.weight",
						   2, 2048, 48, 8, 0), GGML_TYPE_MXFP4);
		assert_int_equal(quant_tensor_type(ft, 0, "output.weight",
						   2, 2048, 48, 8, 0), GGML_TYPE_MXFP4);
		assert_int_equal(quant_tensor_type(ft, 0, "blk.0.attn_q.weight",
						   2, 100, 48, 8, 0), GGML_TYPE_F16);
		/* and so mkmodel writes a mixture of experts */
		model *m = NULL;
		assert_int_equal(tu_model(path, sizeof(path), "qwen3moe",
					  "tiny-qwen3moe", GGML_TYPE_MXFP4,
					  tu_chat_tokenizer(), 5), 0);
		if (model_load(path, &m))
			fail_msg("MXFP4 qwen3moe: %s", qerr_detail());
		assert_int_equal(m->layers[1].w_gate.type, GGML_TYPE_MXFP4);
		assert_int_equal(m->layers[1].w_up.type, GGML_TYPE_MXFP4);
		assert_int_equal(m->layers[1].w_down.type, GGML_TYPE_MXFP4);
		assert_int_equal(m->layers[1].wq.type, GGML_TYPE_Q8_0);
		assert_int_equal(m->layers[1].router.type, GGML_TYPE_F32);
		model_free(&m);
		unlink(path);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dequant_blocks),
		cmocka_unit_test(test_dequant_literal),
		cmocka_unit_test(test_mxfp4_quant),
		cmocka_unit_test(test_mxfp4_gguf_py),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_int_matmul),
		cmocka_unit_test(test_int_tiles),
		cmocka_unit_test(test_int_blocks),
		cmocka_unit_test(test_int_mxfp4_edges),
		cmocka_unit_test(test_matmul_n),
		cmocka_unit_test(test_act_q8_1),
		cmocka_unit_test(test_act_simd),
		cmocka_unit_test(test_int_nan),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_pack_covers),
		cmocka_unit_test(test_mkmodel_types),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

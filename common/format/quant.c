/*
 * quant — block formats, dequantization, quantizers and the integer form
 * (see quant.h). Scalar code only: it is the reference every SIMD kernel
 * must reproduce, and the float parts here (dequantization, the canonical
 * combination, activation quantization) run unchanged on every ISA.
 * Compiled without -ffast-math and with -ffp-contract=off (c11 default).
 */
#include "format/quant.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "format/half.h"

const int8_t quant_iq4nl_values[16] = {
	-127, -104, -83, -65, -49, -35, -22, -10,
	1, 13, 25, 38, 53, 69, 89, 113,
};

/* E2M1 code c: sign c >> 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6 (doubled) */
const int8_t quant_mxfp4_values[16] = {
	0, 1, 2, 3, 4, 6, 8, 12,
	0, -1, -2, -3, -4, -6, -8, -12,
};

float quant_e8m0_half(uint8_t e)
{
	/* 2^(e - 128): biased f32 exponent e - 1 from e = 2 on; below it
	 * the subnormals 2^-127 and 2^-128 (mantissa bits 22 and 21) */
	uint32_t bits = e >= 2 ? (uint32_t)(e - 1) << 23 : 1u << (21 + e);
	float f;

	memcpy(&f, &bits, 4);
	return f;
}

/* The float weight types, in the order quant_supported_list names them. */
static const uint32_t floats[] = {GGML_TYPE_F32, GGML_TYPE_F16,
				  GGML_TYPE_BF16};
#define N_FLOATS (int)(sizeof(floats) / sizeof(floats[0]))

/* Per quantized type (in the order quant_supported_list names them):
 * dot-product unit, byte offsets of the f16 scale (-1: MXFP4's E8M0
 * byte at offset 0) and of the f16 minimum (-1: none); names and block
 * sizes are ggml.h's. */
static const struct qtype {
	uint32_t type;
	int unit, d_off, m_off;
} qtypes[] = {
	{GGML_TYPE_Q4_0, 32, 0, -1},
	{GGML_TYPE_Q4_1, 32, 0, 2},
	{GGML_TYPE_Q5_0, 32, 0, -1},
	{GGML_TYPE_Q5_1, 32, 0, 2},
	{GGML_TYPE_Q8_0, 32, 0, -1},
	{GGML_TYPE_Q2_K, QK_K, 80, 82},
	{GGML_TYPE_Q3_K, QK_K, 108, -1},
	{GGML_TYPE_Q4_K, QK_K, 0, 2},
	{GGML_TYPE_Q5_K, QK_K, 0, 2},
	{GGML_TYPE_Q6_K, QK_K, 208, -1},
	{GGML_TYPE_IQ4_NL, 32, 0, -1},
	{GGML_TYPE_IQ4_XS, QK_K, 0, -1},
	{GGML_TYPE_MXFP4, 32, -1, -1},
};
#define N_QTYPES (int)(sizeof(qtypes) / sizeof(qtypes[0]))

static const struct qtype *qt(uint32_t type)
{
	for (int i = 0; i < N_QTYPES; i++)
		if (qtypes[i].type == type)
			return &qtypes[i];
	return NULL;
}

int quant_is_quant(uint32_t type)
{
	return qt(type) != NULL;
}

int quant_weight_ok(uint32_t type)
{
	return ggml_block_bytes(type) != 0;
}

static char supported[192];
static pthread_once_t supported_once = PTHREAD_ONCE_INIT;

/* "F32, F16, BF16, Q4_0, ...": the names of ggml.h's table. */
static void supported_fill(void)
{
	size_t n = 0;

	for (int i = 0; i < N_FLOATS + N_QTYPES; i++)
		n += (size_t)snprintf(supported + n, sizeof(supported) - n,
				      "%s%s", i ? ", " : "",
				      ggml_type_name(i < N_FLOATS ? floats[i] :
						     qtypes[i - N_FLOATS].type));
}

const char *quant_supported_list(void)
{
	pthread_once(&supported_once, supported_fill);
	return supported;
}

int quant_unit(uint32_t type)
{
	const struct qtype *t = qt(type);

	return t ? t->unit : 0;
}

int quant_type_from_name(const char *name)
{
	char up[16];
	size_t i;

	for (i = 0; name[i] && i < sizeof(up) - 1; i++)
		up[i] = (char)toupper((unsigned char)name[i]);
	if (name[i])
		return -1;
	up[i] = 0;
	for (i = 0; i < N_FLOATS; i++)
		if (!strcmp(up, ggml_type_name(floats[i])))
			return (int)floats[i];
	for (int t = 0; t < N_QTYPES; t++)
		if (!strcmp(up, ggml_type_name(qtypes[t].type)))
			return (int)qtypes[t].type;
	return -1;
}

static float h2f(uint16_t h)
{
	return half_f16_to_f32(h);
}

/* ---- scales of the K-quants ------------------------------------------- */

/* Q4_K / Q5_K: 8 six-bit scales and 8 six-bit mins in 12 bytes. */
static void k4_scales(const uint8_t *s, int j, int *sc, int *mn)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*mn = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
		*mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

static void k4_pack(uint8_t *s, const int *sc, const int *mn)
{
	memset(s, 0, 12);
	for (int j = 0; j < 8; j++) {
		if (j < 4) {
			s[j] |= (uint8_t)(sc[j] & 63);
			s[j + 4] |= (uint8_t)(mn[j] & 63);
		} else {
			s[j + 4] = (uint8_t)((sc[j] & 0xf) | ((mn[j] & 0xf) << 4));
			s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
			s[j] |= (uint8_t)((mn[j] >> 4) << 6);
		}
	}
}

/* Q3_K: 16 six-bit scales (biased by 32): low nibbles in bytes 0..7 (two
 * per byte: i and i + 8), high pairs in bytes 8..11. */
static int k3_scale(const uint8_t *s, int i)
{
	int lo = i < 8 ? s[i] & 0xf : s[i - 8] >> 4;
	int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;

	return (lo | hi << 4) - 32;
}

static void k3_pack(uint8_t *s, const int *sc)
{
	memset(s, 0, 12);
	for (int i = 0; i < 16; i++) {
		int v = sc[i] + 32;

		if (i < 8)
			s[i] |= (uint8_t)(v & 0xf);
		else
			s[i - 8] |= (uint8_t)((v & 0xf) << 4);
		s[8 + i % 4] |= (uint8_t)(((v >> 4) & 3) << (2 * (i / 4)));
	}
}

static int ixs_scale(const ggml_block_iq4_xs *b, int ib)
{
	return (((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
		(((b->scales_h >> 2 * ib) & 3) << 4)) - 32;
}

/* ---- integer form ----------------------------------------------------- */

/* Element e of a 256-block with 2-bit fields as Q2_K/Q3_K lay them out:
 * byte (e / 128) * 32 + e % 32, shift 2 * ((e % 128) / 32). */
static inline int k2_bits(const uint8_t *qs, int e)
{
	return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

static void unpack(uint32_t type, const void *row, quant_wrow *w, int n,
		   int with_q)
{
	const struct qtype *t = qt(type);
	int blck = ggml_block_elems(type), bytes = ggml_block_bytes(type);
	int nb = n / blck;

	w->unit = t->unit;
	w->has_min = t->m_off >= 0;
	for (int b = 0; b < nb; b++) {
		int8_t *q = w->q + (size_t)b * blck;
		int16_t *sc = w->sc + (size_t)b * blck / 16;
		int16_t *mn = w->mn + (size_t)b * blck / 16;
		const uint8_t *blk = (const uint8_t *)row + (size_t)b * bytes;
		uint16_t hd, hm = 0;

		if (t->d_off >= 0) {
			memcpy(&hd, blk + t->d_off, 2);
			w->d[b] = h2f(hd);
		} else {
			w->d[b] = quant_e8m0_half(blk[0]);
		}
		if (t->m_off >= 0)
			memcpy(&hm, blk + t->m_off, 2);
		if (t->m_off >= 0)
			w->dm[b] = t->unit == QK_K ? -h2f(hm) : h2f(hm);
		if (t->unit == 32)
			for (int g = 0; g < 2; g++) {
				sc[g] = 1;
				if (w->has_min)
					mn[g] = 1;
			}
		if (!with_q && t->unit == 32)
			continue;
		switch (type) {
		case GGML_TYPE_Q4_0:
		case GGML_TYPE_Q4_1:
		case GGML_TYPE_IQ4_NL:
		case GGML_TYPE_MXFP4: {
			const uint8_t *qs = blk + (type == GGML_TYPE_Q4_1 ? 4 :
						   type == GGML_TYPE_MXFP4 ? 1 : 2);
			for (int j = 0; j < 16; j++) {
				int lo = qs[j] & 0xf, hi = qs[j] >> 4;
				if (type == GGML_TYPE_IQ4_NL) {
					q[j] = quant_iq4nl_values[lo];
					q[j + 16] = quant_iq4nl_values[hi];
				} else if (type == GGML_TYPE_MXFP4) {
					q[j] = quant_mxfp4_values[lo];
					q[j + 16] = quant_mxfp4_values[hi];
				} else {
					int z = type == GGML_TYPE_Q4_0 ? 8 : 0;
					q[j] = (int8_t)(lo - z);
					q[j + 16] = (int8_t)(hi - z);
				}
			}
			break;
		}
		case GGML_TYPE_Q5_0:
		case GGML_TYPE_Q5_1: {
			int o = type == GGML_TYPE_Q5_1 ? 4 : 2, z = o == 2 ? 16 : 0;
			uint32_t qh;
			const uint8_t *qs = blk + o + 4;
			memcpy(&qh, blk + o, 4);
			for (int j = 0; j < 16; j++) {
				q[j] = (int8_t)(((qs[j] & 0xf) |
						 ((qh >> j) & 1) << 4) - z);
				q[j + 16] = (int8_t)(((qs[j] >> 4) |
						      ((qh >> (j + 16)) & 1) << 4) - z);
			}
			break;
		}
		case GGML_TYPE_Q8_0:
			memcpy(q, blk + 2, 32);
			break;
		case GGML_TYPE_Q2_K: {
			const ggml_block_q2_K *k = (const void *)blk;
			for (int g = 0; g < 16; g++) {
				sc[g] = k->scales[g] & 0xf;
				mn[g] = k->scales[g] >> 4;
			}
			for (int e = 0; e < QK_K && with_q; e++)
				q[e] = (int8_t)k2_bits(k->qs, e);
			break;
		}
		case GGML_TYPE_Q3_K: {
			const ggml_block_q3_K *k = (const void *)blk;
			for (int g = 0; g < 16; g++)
				sc[g] = (int16_t)k3_scale(k->scales, g);
			for (int e = 0; e < QK_K && with_q; e++) {
				int hb = (k->hmask[e % 32] >> (e / 32)) & 1;
				q[e] = (int8_t)(k2_bits(k->qs, e) - (hb ? 0 : 4));
			}
			break;
		}
		case GGML_TYPE_Q4_K:
		case GGML_TYPE_Q5_K: {
			int five = type == GGML_TYPE_Q5_K;
			const uint8_t *scl = blk + 4;
			const uint8_t *qh = blk + 16;
			const uint8_t *qs = blk + (five ? 48 : 16);
			for (int j = 0; j < 8; j++) {
				int s, m;
				k4_scales(scl, j, &s, &m);
				sc[2 * j] = sc[2 * j + 1] = (int16_t)s;
				mn[2 * j] = mn[2 * j + 1] = (int16_t)m;
			}
			for (int c = 0; c < 4 && with_q; c++)
				for (int l = 0; l < 32; l++) {
					int lo = qs[32 * c + l] & 0xf;
					int hi = qs[32 * c + l] >> 4;
					if (five) {
						lo |= ((qh[l] >> (2 * c)) & 1) << 4;
						hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
					}
					q[64 * c + l] = (int8_t)lo;
					q[64 * c + 32 + l] = (int8_t)hi;
				}
			break;
		}
		case GGML_TYPE_Q6_K: {
			const ggml_block_q6_K *k = (const void *)blk;
			for (int g = 0; g < 16; g++)
				sc[g] = k->scales[g];
			for (int h = 0; h < 2 && with_q; h++)
				for (int l = 0; l < 32; l++) {
					const uint8_t *ql = k->ql + 64 * h;
					int qhb = k->qh[32 * h + l];
					int8_t *o = q + 128 * h;
					o[l] = (int8_t)(((ql[l] & 0xf) |
							 ((qhb & 3) << 4)) - 32);
					o[l + 32] = (int8_t)(((ql[l + 32] & 0xf) |
							      (((qhb >> 2) & 3) << 4)) - 32);
					o[l + 64] = (int8_t)(((ql[l] >> 4) |
							      (((qhb >> 4) & 3) << 4)) - 32);
					o[l + 96] = (int8_t)(((ql[l + 32] >> 4) |
							      (((qhb >> 6) & 3) << 4)) - 32);
				}
			break;
		}
		case GGML_TYPE_IQ4_XS: {
			const ggml_block_iq4_xs *k = (const void *)blk;
			for (int ib = 0; ib < 8; ib++) {
				int s = ixs_scale(k, ib);
				sc[2 * ib] = sc[2 * ib + 1] = (int16_t)s;
				for (int j = 0; j < 16 && with_q; j++) {
					uint8_t v = k->qs[16 * ib + j];
					q[32 * ib + j] = quant_iq4nl_values[v & 0xf];
					q[32 * ib + 16 + j] = quant_iq4nl_values[v >> 4];
				}
			}
			break;
		}
		}
	}
}

void quant_unpack_row(uint32_t type, const void *row, quant_wrow *w, int n)
{
	unpack(type, row, w, n, 1);
}

void quant_unpack_scales(uint32_t type, const void *row, quant_wrow *w,
			 int n)
{
	unpack(type, row, w, n, 0);
}

void quant_dequant_row(uint32_t type, const void *row, float *out, int n)
{
	switch (type) {
	case GGML_TYPE_F32:
		memcpy(out, row, (size_t)n * 4);
		return;
	case GGML_TYPE_F16:
		for (int k = 0; k < n; k++)
			out[k] = h2f(((const uint16_t *)row)[k]);
		return;
	case GGML_TYPE_BF16:
		for (int k = 0; k < n; k++)
			out[k] = half_bf16_to_f32(((const uint16_t *)row)[k]);
		return;
	}
	/* One block at a time through the integer form: w = (d * sc) * q
	 * (+ dm * mn), the order of ggml's own dequantization. */
	int8_t q[QK_K];
	int16_t sc[QK_K / 16], mn[QK_K / 16];
	float d, dm = 0.0f;
	quant_wrow w = {q, sc, mn, &d, &dm, 0, 0};

	int blck = ggml_block_elems(type), bytes = ggml_block_bytes(type);

	for (int b = 0; b < n / blck; b++) {
		float *o = out + (size_t)b * blck;
		quant_unpack_row(type, (const uint8_t *)row + (size_t)b * bytes,
				 &w, blck);
		for (int g = 0; g < blck / 16; g++) {
			float ds = d * (float)sc[g];
			float ms = w.has_min ? dm * (float)mn[g] : 0.0f;
			for (int l = 0; l < 16; l++) {
				float v = ds * (float)q[16 * g + l];
				o[16 * g + l] = w.has_min ? v + ms : v;
			}
		}
	}
}

int64_t quant_check(uint32_t type, const void *data, int n, int64_t nrows,
		    int64_t *block)
{
	const struct qtype *t = qt(type);
	const uint8_t *p = data;
	int nb, bytes;

	/* every E8M0 byte is a finite scale as ggml reads it */
	if (!t || t->d_off < 0)
		return -1;
	nb = n / ggml_block_elems(type);
	bytes = ggml_block_bytes(type);
	for (int64_t r = 0; r < nrows; r++)
		for (int b = 0; b < nb; b++, p += bytes) {
			uint16_t d, m = 0;
			memcpy(&d, p + t->d_off, 2);
			if (t->m_off >= 0)
				memcpy(&m, p + t->m_off, 2);
			if ((d & 0x7c00) == 0x7c00 || (m & 0x7c00) == 0x7c00) {
				*block = b;
				return r;
			}
		}
	return -1;
}

/* ---- integer dot product (reference) ----------------------------------- */


size_t quant_wrow_bytes(int n)
{
	return quant_al64((size_t)n) + 2 * quant_al64((size_t)n / 16 * 2) +
	       2 * quant_al64((size_t)n / 32 * 4);
}

void quant_wrow_bind(quant_wrow *w, void *buf, int n)
{
	char *p = buf;

	w->q = (int8_t *)p;
	p += quant_al64((size_t)n);
	w->sc = (int16_t *)p;
	p += quant_al64((size_t)n / 16 * 2);
	w->mn = (int16_t *)p;
	p += quant_al64((size_t)n / 16 * 2);
	w->d = (float *)p;
	p += quant_al64((size_t)n / 32 * 4);
	w->dm = (float *)p;
}

/* As llama.cpp's CPU backend quantizes activations, so that the integer
 * path tracks it closely: per 32 (Q8_0 / Q8_1), d = amax / 127 rounded to
 * f16, q = rint(x * (127 / amax)), and Q8_1's block sum s = d * sum(q)
 * (d before its rounding) rounded to f16 (an f16 overflow keeps the f32
 * value); per 256 (Q8_K), with mx the first element of largest magnitude,
 * s = -127 / mx, q = rint(s * x), d = 1 / s. */
void quant_act_row(const float *x, int n, int unit, quant_arow *a)
{
	for (int u = 0; u < n / unit; u++) {
		const float *v = x + (size_t)u * unit;
		int8_t *q = a->q + (size_t)u * unit;
		float amax = 0.0f, mx = 0.0f, nan = 0.0f;

		for (int k = 0; k < unit; k++) {
			float m = fabsf(v[k]);
			if (m > amax) {
				amax = m;
				mx = v[k];
			}
			if (m != m)
				nan = m;
		}
		if (nan != 0.0f || amax > FLT_MAX) {
			/* NaN or Inf: the result is NaN, as in f32 */
			a->d[u] = a->s[u] = NAN;
			for (int k = 0; k < unit; k++)
				q[k] = 0;
		} else if (amax == 0.0f) {
			a->d[u] = a->s[u] = 0.0f;
			for (int k = 0; k < unit; k++)
				q[k] = 0;
		} else if (unit == 32) {
			float d = amax / 127.0f, id = 127.0f / amax, sh, sd;
			float dh = half_f16_to_f32(half_f32_to_f16(d));
			int sum = 0;
			a->d[u] = dh <= FLT_MAX ? dh : d;
			for (int k = 0; k < unit; k++) {
				q[k] = (int8_t)rintf(v[k] * id);
				sum += q[k];
			}
			/* Q8_1's block sum: d (before rounding) * sum, in f16 */
			sd = d * (float)sum;
			sh = half_f16_to_f32(half_f32_to_f16(sd));
			a->s[u] = sh <= FLT_MAX && sh >= -FLT_MAX ? sh : sd;
		} else {
			float is = -127.0f / mx;
			a->d[u] = 1.0f / is;
			a->s[u] = 0.0f; /* unused: K-quants take bsum */
			for (int k = 0; k < unit; k++) {
				float r = rintf(is * v[k]);
				q[k] = (int8_t)(r > 127.0f ? 127.0f : r);
			}
		}
		for (int g = 0; g < unit / 16; g++) {
			int s = 0;
			for (int l = 0; l < 16; l++)
				s += q[16 * g + l];
			a->bsum[(size_t)u * unit / 16 + g] = (int16_t)s;
		}
	}
}

void quant_s1_ref(const int8_t *q, const int16_t *sc, const int8_t *qa,
		  int n, int unit, int32_t *s1)
{
	for (int u = 0; u < n / unit; u++) {
		int32_t s = 0;
		for (int g = u * unit / 16; g < (u + 1) * unit / 16; g++) {
			int32_t t = 0;
			for (int l = 0; l < 16; l++)
				t += (int32_t)q[16 * g + l] * qa[16 * g + l];
			s += sc[g] * t;
		}
		s1[u] = s;
	}
}

/* The definition of the integer path's bits: S1, S2 exact, then the
 * canonical combination (quant.h). */
float quant_dot_ref(const quant_wrow *w, const quant_arow *a, int n)
{
	float acc[8] = {0};
	int unit = w->unit, gpu = unit / 16;

	for (int u = 0; u < n / unit; u++) {
		int l = u & 7;
		int32_t s1;
		quant_s1_ref(w->q + (size_t)u * unit, w->sc + (size_t)u * gpu,
			     a->q + (size_t)u * unit, unit, unit, &s1);
		acc[l] = fmaf(w->d[u] * a->d[u], (float)s1, acc[l]);
		if (w->has_min && unit == 32) {
			acc[l] = fmaf(w->dm[u], a->s[u], acc[l]);
		} else if (w->has_min) {
			int32_t s2 = 0;
			for (int g = u * gpu; g < (u + 1) * gpu; g++)
				s2 += w->mn[g] * a->bsum[g];
			acc[l] = fmaf(w->dm[u] * a->d[u], (float)s2, acc[l]);
		}
	}
	for (int h = 4; h >= 1; h >>= 1)
		for (int l = 0; l < h; l++)
			acc[l] = acc[l] + acc[l + h];
	return acc[0];
}

/* ---- quantizers -------------------------------------------------------- */

static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* Nearest integer of v clamped to [lo, hi] (v finite or not). */
static int qround(float v, int lo, int hi)
{
	if (!(v > (float)lo))
		return lo;
	if (!(v < (float)hi))
		return hi;
	return (int)lrintf(v);
}

/* The element of largest magnitude (with its sign). */
static float absmax_signed(const float *x, int n)
{
	float m = 0.0f;

	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > fabsf(m))
			m = x[i];
	return m;
}

/* Symmetric 32-element block with levels [-z, 2^bits - 1 - z]: scale from
 * the signed extreme mapped to -z (ggml's choice), returns the f16 scale
 * and writes the unsigned codes. */
static uint16_t sym_block(const float *x, int z, int top, uint8_t *code)
{
	float mx = absmax_signed(x, 32);
	float d = mx / (float)-z, id;
	uint16_t hd = half_f32_to_f16(d);

	d = h2f(hd);
	id = d != 0.0f ? 1.0f / d : 0.0f;
	for (int i = 0; i < 32; i++)
		code[i] = (uint8_t)qround(x[i] * id + (float)z, 0, top);
	return hd;
}

/* Asymmetric block: w = d * code + m, codes [0, top]. */
static void asym_block(const float *x, int top, uint16_t *hd, uint16_t *hm,
		       uint8_t *code)
{
	float mn = x[0], mx = x[0], d, id, m;

	for (int i = 1; i < 32; i++) {
		mn = x[i] < mn ? x[i] : mn;
		mx = x[i] > mx ? x[i] : mx;
	}
	*hd = half_f32_to_f16((mx - mn) / (float)top);
	*hm = half_f32_to_f16(mn);
	d = h2f(*hd);
	m = h2f(*hm);
	id = d != 0.0f ? 1.0f / d : 0.0f;
	for (int i = 0; i < 32; i++)
		code[i] = (uint8_t)qround((x[i] - m) * id, 0, top);
}

static int iq4_nearest(float v)
{
	int lo = 0, hi = 15;

	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;
		if (v < (float)quant_iq4nl_values[mid])
			hi = mid;
		else
			lo = mid;
	}
	return v - (float)quant_iq4nl_values[lo] <
		       (float)quant_iq4nl_values[hi] - v ? lo : hi;
}

/* Best scale s (x ~ s * values[idx]) for 32 elements: a few candidate
 * inverse scales, each refined by least squares; the lowest error wins. */
static float iq4_fit(const float *x, uint8_t *idx)
{
	float mx = absmax_signed(x, 32), best = 0.0f, best_err = INFINITY;
	uint8_t cur[32];

	if (mx == 0.0f) {
		memset(idx, 8, 32);
		return 0.0f;
	}
	for (int t = -4; t <= 4; t += 2) {
		float inv = ((float)t - 127.0f) / mx, sxq = 0, sqq = 0, s, err = 0;
		for (int i = 0; i < 32; i++) {
			int k = iq4_nearest(x[i] * inv);
			float v = (float)quant_iq4nl_values[k];
			cur[i] = (uint8_t)k;
			sxq += x[i] * v;
			sqq += v * v;
		}
		s = sqq > 0 ? sxq / sqq : 0.0f;
		for (int i = 0; i < 32; i++) {
			float e = x[i] - s * (float)quant_iq4nl_values[cur[i]];
			err += e * e;
		}
		if (err < best_err) {
			best_err = err;
			best = s;
			memcpy(idx, cur, 32);
		}
	}
	return best;
}

/* K-quant with minimum: sub-blocks of sub elements, codes [0, top],
 * integer scales/mins [0, smax]. Writes codes, scales and mins; returns
 * d and dmin (already f16-rounded in *hd / *hdm). */
static void kmin_fit(const float *x, int sub, int top, int smax, uint8_t *code,
		     int *sc, int *mn, uint16_t *hd, uint16_t *hdm)
{
	int ns = QK_K / sub;
	float s[16], m[16], ms = 0.0f, mm = 0.0f, d, dmin;

	for (int j = 0; j < ns; j++) {
		float lo = 0.0f, hi = x[j * sub];
		for (int i = 0; i < sub; i++) {
			float v = x[j * sub + i];
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
		s[j] = (hi - lo) / (float)top;
		m[j] = -lo;
		ms = s[j] > ms ? s[j] : ms;
		mm = m[j] > mm ? m[j] : mm;
	}
	*hd = half_f32_to_f16(ms / (float)smax);
	*hdm = half_f32_to_f16(mm / (float)smax);
	d = h2f(*hd);
	dmin = h2f(*hdm);
	for (int j = 0; j < ns; j++) {
		float ed, em, id;
		/* round the scale up so that the sub-block's range fits */
		sc[j] = d > 0 ? clampi((int)ceilf(s[j] / d), 0, smax) : 0;
		mn[j] = dmin > 0 ? qround(m[j] / dmin, 0, smax) : 0;
		ed = d * (float)sc[j];
		em = dmin * (float)mn[j];
		id = ed != 0.0f ? 1.0f / ed : 0.0f;
		for (int i = 0; i < sub; i++)
			code[j * sub + i] = (uint8_t)qround(
				(x[j * sub + i] + em) * id, 0, top);
	}
}

/* Symmetric K-quant: groups of 16, codes q in [lo, hi] (mapped from the
 * signed extreme to lo), signed integer scales in [-smax-1, smax]. */
static void ksym_fit(const float *x, int lo, int hi, int smax, int *q,
		     int *sc, uint16_t *hd)
{
	float s[16], big = 0.0f, d;

	for (int g = 0; g < 16; g++) {
		s[g] = absmax_signed(x + 16 * g, 16) / (float)lo;
		if (fabsf(s[g]) > fabsf(big))
			big = s[g];
	}
	*hd = half_f32_to_f16(big / (float)(-smax - 1));
	d = h2f(*hd);
	for (int g = 0; g < 16; g++) {
		float ed, id;
		sc[g] = d != 0.0f ? qround(s[g] / d, -smax - 1, smax) : 0;
		ed = d * (float)sc[g];
		id = ed != 0.0f ? 1.0f / ed : 0.0f;
		for (int i = 0; i < 16; i++)
			q[16 * g + i] = qround(x[16 * g + i] * id, lo, hi);
	}
}

/* MXFP4's scale byte for a block of largest magnitude amax, as ggml's
 * reference quantizer picks it: 2^(floor(log2 amax) - 2) maps amax into
 * [4, 8) of the doubled codes (6 or 12 at the top). Exponents ggml would
 * not represent (amax below 2^-125, or infinite) are clamped. */
static uint8_t mx_scale(float amax)
{
	float e;

	if (!(amax > 0.0f))
		return 0;
	e = floorf(log2f(amax)) - 2.0f + 127.0f;
	return e < 0.0f ? 0 : e > 254.0f ? 254 : (uint8_t)e;
}

/* The code whose value d * v is nearest x (the first of equals, in
 * code order, as ggml). */
static int mx_nearest(float x, float d)
{
	int best = 0;
	float err = fabsf((float)quant_mxfp4_values[0] * d - x);

	for (int c = 1; c < 16; c++) {
		float e = fabsf((float)quant_mxfp4_values[c] * d - x);
		if (e < err) {
			err = e;
			best = c;
		}
	}
	return best;
}

static void quant_block(uint32_t type, const float *x, uint8_t *blk)
{
	uint8_t code[QK_K];
	int sc[16], mn[16], q[QK_K];

	switch (type) {
	case GGML_TYPE_Q4_0: {
		ggml_block_q4_0 *b = (void *)blk;
		b->d = sym_block(x, 8, 15, code);
		for (int j = 0; j < 16; j++)
			b->qs[j] = (uint8_t)(code[j] | code[j + 16] << 4);
		break;
	}
	case GGML_TYPE_Q5_0:
	case GGML_TYPE_Q5_1: {
		uint8_t *qh, *qs;
		uint32_t h = 0;
		if (type == GGML_TYPE_Q5_0) {
			ggml_block_q5_0 *b = (void *)blk;
			b->d = sym_block(x, 16, 31, code);
			qh = b->qh;
			qs = b->qs;
		} else {
			ggml_block_q5_1 *b = (void *)blk;
			asym_block(x, 31, &b->d, &b->m, code);
			qh = b->qh;
			qs = b->qs;
		}
		for (int j = 0; j < 16; j++) {
			qs[j] = (uint8_t)((code[j] & 0xf) | (code[j + 16] & 0xf) << 4);
			h |= (uint32_t)(code[j] >> 4) << j;
			h |= (uint32_t)(code[j + 16] >> 4) << (j + 16);
		}
		memcpy(qh, &h, 4);
		break;
	}
	case GGML_TYPE_Q4_1: {
		ggml_block_q4_1 *b = (void *)blk;
		asym_block(x, 15, &b->d, &b->m, code);
		for (int j = 0; j < 16; j++)
			b->qs[j] = (uint8_t)(code[j] | code[j + 16] << 4);
		break;
	}
	case GGML_TYPE_Q8_0: {
		ggml_block_q8_0 *b = (void *)blk;
		float amax = fabsf(absmax_signed(x, 32)), d, id;
		b->d = half_f32_to_f16(amax / 127.0f);
		d = h2f(b->d);
		id = d != 0.0f ? 1.0f / d : 0.0f;
		for (int i = 0; i < 32; i++)
			b->qs[i] = (int8_t)qround(x[i] * id, -127, 127);
		break;
	}
	case GGML_TYPE_IQ4_NL: {
		ggml_block_iq4_nl *b = (void *)blk;
		b->d = half_f32_to_f16(iq4_fit(x, code));
		for (int j = 0; j < 16; j++)
			b->qs[j] = (uint8_t)(code[j] | code[j + 16] << 4);
		break;
	}
	case GGML_TYPE_MXFP4: {
		ggml_block_mxfp4 *b = (void *)blk;
		float amax = 0.0f, d;
		for (int i = 0; i < 32; i++)
			if (fabsf(x[i]) > amax)
				amax = fabsf(x[i]);
		b->e = mx_scale(amax);
		d = quant_e8m0_half(b->e);
		for (int j = 0; j < 16; j++)
			b->qs[j] = (uint8_t)(mx_nearest(x[j], d) |
					     mx_nearest(x[j + 16], d) << 4);
		break;
	}
	case GGML_TYPE_Q2_K: {
		ggml_block_q2_K *b = (void *)blk;
		kmin_fit(x, 16, 3, 15, code, sc, mn, &b->d, &b->dmin);
		for (int g = 0; g < 16; g++)
			b->scales[g] = (uint8_t)(sc[g] | mn[g] << 4);
		memset(b->qs, 0, sizeof(b->qs));
		for (int e = 0; e < QK_K; e++)
			b->qs[(e / 128) * 32 + e % 32] |=
				(uint8_t)(code[e] << (2 * ((e % 128) / 32)));
		break;
	}
	case GGML_TYPE_Q3_K: {
		ggml_block_q3_K *b = (void *)blk;
		ksym_fit(x, -4, 3, 31, q, sc, &b->d);
		k3_pack(b->scales, sc);
		memset(b->qs, 0, sizeof(b->qs));
		memset(b->hmask, 0, sizeof(b->hmask));
		for (int e = 0; e < QK_K; e++) {
			int u = q[e] + 4;
			b->qs[(e / 128) * 32 + e % 32] |=
				(uint8_t)((u & 3) << (2 * ((e % 128) / 32)));
			if (u & 4)
				b->hmask[e % 32] |= (uint8_t)(1 << (e / 32));
		}
		break;
	}
	case GGML_TYPE_Q4_K:
	case GGML_TYPE_Q5_K: {
		int five = type == GGML_TYPE_Q5_K;
		uint16_t *hd = (uint16_t *)blk, *hdm = hd + 1;
		uint8_t *qh = blk + 16, *qs = blk + (five ? 48 : 16);
		kmin_fit(x, 32, five ? 31 : 15, 63, code, sc, mn, hd, hdm);
		k4_pack(blk + 4, sc, mn);
		if (five)
			memset(qh, 0, 32);
		for (int c = 0; c < 4; c++)
			for (int l = 0; l < 32; l++) {
				int lo = code[64 * c + l], hi = code[64 * c + 32 + l];
				qs[32 * c + l] = (uint8_t)((lo & 0xf) | (hi & 0xf) << 4);
				if (five)
					qh[l] |= (uint8_t)((lo >> 4) << (2 * c) |
							   (hi >> 4) << (2 * c + 1));
			}
		break;
	}
	case GGML_TYPE_Q6_K: {
		ggml_block_q6_K *b = (void *)blk;
		ksym_fit(x, -32, 31, 127, q, sc, &b->d);
		for (int g = 0; g < 16; g++)
			b->scales[g] = (int8_t)sc[g];
		for (int h = 0; h < 2; h++)
			for (int l = 0; l < 32; l++) {
				const int *o = q + 128 * h;
				int u0 = o[l] + 32, u1 = o[l + 32] + 32;
				int u2 = o[l + 64] + 32, u3 = o[l + 96] + 32;
				b->ql[64 * h + l] = (uint8_t)((u0 & 0xf) | (u2 & 0xf) << 4);
				b->ql[64 * h + 32 + l] =
					(uint8_t)((u1 & 0xf) | (u3 & 0xf) << 4);
				b->qh[32 * h + l] = (uint8_t)((u0 >> 4) | (u1 >> 4) << 2 |
							      (u2 >> 4) << 4 | (u3 >> 4) << 6);
			}
		break;
	}
	case GGML_TYPE_IQ4_XS: {
		ggml_block_iq4_xs *b = (void *)blk;
		float s[8], big = 0.0f, d;
		for (int ib = 0; ib < 8; ib++) {
			s[ib] = iq4_fit(x + 32 * ib, code + 32 * ib);
			if (fabsf(s[ib]) > fabsf(big))
				big = s[ib];
		}
		b->d = half_f32_to_f16(big / -32.0f);
		d = h2f(b->d);
		b->scales_h = 0;
		memset(b->scales_l, 0, sizeof(b->scales_l));
		for (int ib = 0; ib < 8; ib++) {
			int ls = d != 0.0f ? qround(s[ib] / d, -32, 31) : 0;
			float ed = d * (float)ls, id = ed != 0.0f ? 1.0f / ed : 0.0f;
			b->scales_l[ib / 2] |= (uint8_t)(((ls + 32) & 0xf) << 4 * (ib % 2));
			b->scales_h |= (uint16_t)(((ls + 32) >> 4) << 2 * ib);
			for (int j = 0; j < 32; j++)
				code[32 * ib + j] = (uint8_t)iq4_nearest(
					x[32 * ib + j] * id);
			for (int j = 0; j < 16; j++)
				b->qs[16 * ib + j] = (uint8_t)(code[32 * ib + j] |
							       code[32 * ib + 16 + j] << 4);
		}
		break;
	}
	}
}

void quant_quantize_row(uint32_t type, const float *x, void *out, int n)
{
	switch (type) {
	case GGML_TYPE_F32:
		memcpy(out, x, (size_t)n * 4);
		return;
	case GGML_TYPE_F16:
		for (int k = 0; k < n; k++)
			((uint16_t *)out)[k] = half_f32_to_f16(x[k]);
		return;
	case GGML_TYPE_BF16:
		for (int k = 0; k < n; k++)
			((uint16_t *)out)[k] = half_f32_to_bf16(x[k]);
		return;
	}
	int blck = ggml_block_elems(type), bytes = ggml_block_bytes(type);

	for (int b = 0; b < n / blck; b++)
		quant_block(type, x + (size_t)b * blck,
			    (uint8_t *)out + (size_t)b * bytes);
}

/* roundf(v) as an int8 code; ggml casts it, in range for finite input */
static int8_t q8_code(float v)
{
	v = roundf(v);
	if (v >= 127.0f)
		return 127;
	if (v <= -128.0f)
		return -128;
	return v == v ? (int8_t)v : 0;
}

void quant_q8_0_ref_row(const float *x, void *out, int n)
{
	ggml_block_q8_0 *b = out;

	for (int i = 0; i < n / 32; i++, x += 32) {
		float amax = 0.0f, d, id;

		for (int j = 0; j < 32; j++)
			amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
		d = amax / 127.0f;
		id = d != 0.0f ? 1.0f / d : 0.0f;
		b[i].d = half_f32_to_f16(d);
		for (int j = 0; j < 32; j++)
			b[i].qs[j] = q8_code(x[j] * id);
	}
}

/* ---- file types and per-tensor recipes ---------------------------------- */

static const quant_ftype ftypes[] = {
	{"F32", GGML_TYPE_F32, QUANT_MIX_NONE, 0},
	{"F16", GGML_TYPE_F16, QUANT_MIX_NONE, 1},
	{"BF16", GGML_TYPE_BF16, QUANT_MIX_NONE, 32},
	{"Q4_0", GGML_TYPE_Q4_0, QUANT_MIX_NONE, 2},
	{"Q4_1", GGML_TYPE_Q4_1, QUANT_MIX_NONE, 3},
	{"Q8_0", GGML_TYPE_Q8_0, QUANT_MIX_NONE, 7},
	{"Q5_0", GGML_TYPE_Q5_0, QUANT_MIX_NONE, 8},
	{"Q5_1", GGML_TYPE_Q5_1, QUANT_MIX_NONE, 9},
	{"Q2_K", GGML_TYPE_Q2_K, QUANT_MIX_Q2_K, 10},
	{"Q3_K", GGML_TYPE_Q3_K, QUANT_MIX_NONE, 11},   /* as Q3_K_S */
	{"Q3_K_M", GGML_TYPE_Q3_K, QUANT_MIX_Q3_K_M, 12},
	{"Q4_K", GGML_TYPE_Q4_K, QUANT_MIX_NONE, 14},   /* as Q4_K_S */
	{"Q4_K_M", GGML_TYPE_Q4_K, QUANT_MIX_Q4_K_M, 15},
	{"Q5_K", GGML_TYPE_Q5_K, QUANT_MIX_NONE, 16},   /* as Q5_K_S */
	{"Q5_K_M", GGML_TYPE_Q5_K, QUANT_MIX_Q5_K_M, 17},
	{"Q6_K", GGML_TYPE_Q6_K, QUANT_MIX_NONE, 18},
	{"IQ4_NL", GGML_TYPE_IQ4_NL, QUANT_MIX_IQ4, 25},
	{"IQ4_XS", GGML_TYPE_IQ4_XS, QUANT_MIX_IQ4, 30},
	/* llama.cpp's MXFP4_MOE (38) under both names: see quant.h */
	{"MXFP4", GGML_TYPE_MXFP4, QUANT_MIX_MXFP4, 38},
	{"MXFP4_MOE", GGML_TYPE_MXFP4, QUANT_MIX_MXFP4, 38},
};

const quant_ftype *quant_ftype_find(const char *name)
{
	char up[16];
	size_t i;

	for (i = 0; name[i] && i < sizeof(up) - 1; i++)
		up[i] = (char)toupper((unsigned char)name[i]);
	if (name[i])
		return NULL;
	up[i] = 0;
	for (i = 0; i < sizeof(ftypes) / sizeof(ftypes[0]); i++)
		if (!strcmp(up, ftypes[i].name))
			return &ftypes[i];
	return NULL;
}

const char *quant_ftype_list(void)
{
	return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, "
	       "Q3_K_M, Q4_K, Q4_K_M, Q5_K, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS, "
	       "MXFP4, MXFP4_MOE";
}

/* llama.cpp's "more bits" layers: the first and last eighth, and every
 * third layer between. */
static int more_bits(int i, int n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static int ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && !strcmp(s + n - m, suf);
}

/* A type whose block does not divide the row falls back as llama.cpp's
 * quantizer does (and to F16 when even that does not fit). */
static uint32_t fallback(uint32_t t, uint64_t ne0)
{
	if (ne0 % (uint64_t)ggml_block_elems(t) == 0)
		return t;
	switch (t) {
	case GGML_TYPE_IQ4_XS: t = GGML_TYPE_IQ4_NL; break;
	case GGML_TYPE_Q2_K:
	case GGML_TYPE_Q3_K: t = GGML_TYPE_Q4_0; break;
	case GGML_TYPE_Q4_K: t = GGML_TYPE_Q5_0; break;
	case GGML_TYPE_Q5_K: t = GGML_TYPE_Q5_1; break;
	case GGML_TYPE_Q6_K: t = GGML_TYPE_Q8_0; break;
	}
	return ne0 % (uint64_t)ggml_block_elems(t) ? GGML_TYPE_F16 : t;
}

int quant_ftype_recipe(const quant_ftype *ft, int recipe, int has_experts)
{
	return ft->mix == QUANT_MIX_MXFP4 ? has_experts : recipe;
}

uint32_t quant_tensor_type(const quant_ftype *ft, int recipe,
			   const char *name, int n_dims, uint64_t ne0,
			   int n_layers, int n_gqa, int tied)
{
	uint32_t t = ft->base;
	int layer = -1, mix = recipe ? ft->mix : QUANT_MIX_NONE;

	/* llama.cpp keeps a mixture of experts' router in f32 */
	if (n_dims < 2 || !ends_with(name, ".weight") ||
	    ends_with(name, ".ffn_gate_inp.weight"))
		return GGML_TYPE_F32;
	if (!quant_is_quant(t))
		return t;
	if (mix == QUANT_MIX_MXFP4)
		return fallback(n_dims == 3 ? GGML_TYPE_MXFP4 : GGML_TYPE_Q8_0,
				ne0);
	if (sscanf(name, "blk.%d.", &layer) != 1)
		layer = -1;
	if (recipe && (!strcmp(name, "output.weight") ||
		       (tied && !strcmp(name, "token_embd.weight")))) {
		if (ne0 % QK_K)
			return GGML_TYPE_Q8_0;
		return t == GGML_TYPE_Q8_0 ? t : GGML_TYPE_Q6_K;
	}
	if (layer >= 0 && ends_with(name, ".attn_v.weight")) {
		if (mix == QUANT_MIX_Q2_K)
			t = n_gqa >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
		else if (mix == QUANT_MIX_Q3_K_M)
			t = layer < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
		else if (mix == QUANT_MIX_IQ4 && n_gqa >= 4)
			t = GGML_TYPE_Q5_K;
		else if ((mix == QUANT_MIX_Q4_K_M || mix == QUANT_MIX_Q5_K_M) &&
			 more_bits(layer, n_layers))
			t = GGML_TYPE_Q6_K;
	} else if (layer >= 0 && (ends_with(name, ".ffn_down.weight") ||
				  ends_with(name, ".ffn_down_exps.weight"))) {
		if (mix == QUANT_MIX_Q2_K)
			t = GGML_TYPE_Q3_K;
		else if (mix == QUANT_MIX_Q3_K_M)
			t = layer < n_layers / 16 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
		else if ((mix == QUANT_MIX_Q4_K_M || mix == QUANT_MIX_Q5_K_M) &&
			 more_bits(layer, n_layers))
			t = GGML_TYPE_Q6_K;
		else if (mix == QUANT_MIX_IQ4 && layer < n_layers / 8)
			t = GGML_TYPE_Q5_K;
	} else if (layer >= 0 && ends_with(name, ".attn_output.weight")) {
		if (mix == QUANT_MIX_Q2_K)
			t = GGML_TYPE_Q3_K;
		else if (mix == QUANT_MIX_Q3_K_M)
			t = GGML_TYPE_Q4_K;
	}
	return fallback(t, ne0);
}

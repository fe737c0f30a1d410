/*
 * half — f16 / bf16 <-> f32 conversions (see half.h): the scalar
 * definitions, bit for bit what F16C and the AVX-512 conversions give.
 * Integer code only, so no compiler flag can change a bit.
 */
#include "format/half.h"

#include <string.h>

static inline uint32_t f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

float half_f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0x1f) /* inf, NaN (quieted, as F16C does) */
		return u2f(s | 0x7f800000 | (m << 13) | (m ? 0x400000 : 0));
	if (e == 0) {
		if (m == 0)
			return u2f(s);
		e = 113; /* subnormal: normalize */
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		return u2f(s | (e << 23) | ((m & 0x3ff) << 13));
	}
	return u2f(s | ((e + 112) << 23) | (m << 13));
}

uint16_t half_f32_to_f16(float f)
{
	uint32_t u = f2u(f);
	uint16_t s = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffff;

	if (a > 0x7f800000) /* NaN: keep the top payload bits, quiet it */
		return s | 0x7e00 | ((a >> 13) & 0x3ff);
	if (a >= 0x477ff000) /* >= 65520 rounds to inf */
		return s | 0x7c00;
	if (a >= 0x38800000) { /* normal half */
		uint32_t r = a + 0xfff + ((a >> 13) & 1);
		return s | (uint16_t)((r - 0x38000000) >> 13);
	}
	if (a <= 0x33000000) /* <= 2^-25: rounds to zero (tie to even) */
		return s;
	uint32_t mm = (a & 0x7fffff) | 0x800000;
	int shift = 126 - (int)(a >> 23);
	uint32_t q = mm >> shift, rem = mm & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	return s | (uint16_t)q;
}

float half_bf16_to_f32(uint16_t h)
{
	return u2f((uint32_t)h << 16);
}

uint16_t half_f32_to_bf16(float f)
{
	uint32_t u = f2u(f);
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/*
 * mathf — the scalar definition of mathf_exp (see mathf.h). Must be
 * compiled without -ffast-math and with -ffp-contract=off (the default of
 * -std=c11): every fma is an explicit fmaf(), nothing else may be fused.
 */
#include "kernels/mathf.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

float mathf_exp(float x)
{
	if (x != x)
		return x + x;
	if (x < MATHF_EXP_LO)
		x = MATHF_EXP_LO;
	if (x > MATHF_EXP_HI)
		x = MATHF_EXP_HI;
	float n = rintf(x * MATHF_LOG2E);
	float r = fmaf(n, -MATHF_LN2_HI, x);
	r = fmaf(n, -MATHF_LN2_LO, r);
	float p = MATHF_EXP_C7;
	p = fmaf(p, r, MATHF_EXP_C6);
	p = fmaf(p, r, MATHF_EXP_C5);
	p = fmaf(p, r, MATHF_EXP_C4);
	p = fmaf(p, r, MATHF_EXP_C3);
	p = fmaf(p, r, MATHF_EXP_C2);
	p = fmaf(p, r, 1.0f);
	p = fmaf(p, r, 1.0f);
	int ni = (int)n;
	int n1 = (ni + 256) / 2 - 128; /* floor(ni / 2) */
	int n2 = ni - n1;
	float s1 = u2f((uint32_t)(n1 + 127) << 23);
	float s2 = u2f((uint32_t)(n2 + 127) << 23);
	return (p * s1) * s2;
}

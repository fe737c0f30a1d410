/*
 * mathf — quorum's own deterministic float math: exp, the same bits on
 * every host (libm's expf differs between versions and CPUs).
 *
 * Owns mathf_exp, its scalar definition, and the constants that define
 * it: the SIMD forms in kernels/x86/ (softmax, SiLU) perform the same
 * operations with these constants, lane for lane. Callers: the kernels
 * (kern.c, x86/), the self-consistency vote's confidence weight (sc.c)
 * and the tests. Depends on nothing else of quorum, so a program that
 * needs only exp links mathf.o without the kernel tables.
 *
 * mathf_exp(x): x is clamped to [MATHF_EXP_LO, MATHF_EXP_HI]
 * (exp(LO) rounds to 0, exp(HI) overflows), n = rint(x * log2e),
 * r = x - n*ln2 (two fmas, Cody-Waite), p(r) = Taylor polynomial of
 * degree 7 by Horner with fmas, result = (p * 2^n1) * 2^n2 with
 * n1 = floor(n/2), n2 = n - n1 (the first product is exact, the second
 * rounds once, also into the subnormals). NaN in, NaN out (x + x).
 */
#ifndef QUORUM_MATHF_H
#define QUORUM_MATHF_H

#define MATHF_EXP_LO (-104.0f)
#define MATHF_EXP_HI 89.0f
#define MATHF_LOG2E 0x1.715476p+0f
#define MATHF_LN2_HI 0x1.62e430p-1f
#define MATHF_LN2_LO (-0x1.05c610p-29f)
#define MATHF_EXP_C7 (1.0f / 5040.0f)
#define MATHF_EXP_C6 (1.0f / 720.0f)
#define MATHF_EXP_C5 (1.0f / 120.0f)
#define MATHF_EXP_C4 (1.0f / 24.0f)
#define MATHF_EXP_C3 (1.0f / 6.0f)
#define MATHF_EXP_C2 0.5f

float mathf_exp(float x);

#endif

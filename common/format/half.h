/*
 * half — the 16-bit float formats of ggml files: IEEE half (f16) and
 * bfloat16 (bf16), converted to and from f32 exactly as the hardware does.
 *
 * Owns the scalar definitions only: F16C / AVX-512 conversions in the SIMD
 * kernels (kernels/x86/) must give these bits, and the tests check that
 * they do. Used by quant.c (block scales), the kernels' scalar reference
 * and tails (kernels/), and the tests.
 *
 * f16 -> f32 and bf16 -> f32 are exact; a NaN stays a NaN, quieted (as
 * F16C does). f32 -> f16 and f32 -> bf16 round to nearest, ties to even;
 * f16 overflows to inf from 65520 up.
 */
#ifndef QUORUM_HALF_H
#define QUORUM_HALF_H

#include <stdint.h>

float half_f16_to_f32(uint16_t h);
uint16_t half_f32_to_f16(float f);
float half_bf16_to_f32(uint16_t h);
uint16_t half_f32_to_bf16(float f);

#endif

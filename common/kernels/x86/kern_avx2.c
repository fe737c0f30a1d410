/*
 * kern_avx2 — the AVX2 ops table: the float and attention kernels of
 * kern_float.c built at 8 lanes (kern_avx2_*) and the integer matmul of
 * kern_int_avx2.c built for AVX2. kern.c dispatches to it when the CPU has
 * AVX2 + FMA + F16C. No code of its own.
 */
#include "kernels/kern_impl.h"

const struct kern_ops kern_ops_avx2 = {
	.qmatmul = kern_avx2_qmatmul,
	.qact = kern_avx2_qact,
	.qact_bytes = kern_avx2_qact_bytes,
	.pack_bytes = kern_avx2_pack_bytes,
	.pack = kern_avx2_pack,
	.peak_int8 = kern_avx2_peak_int8,
	.act_row = kern_avx2_act_row,
	.att_q8 = kern_avx2_att_q8,
	KERN_FLOAT_OPS(kern_avx2_)
};

/*
 * kern_avx512 — the two AVX-512 ops tables (AVX-512 F/BW/VL/DQ, and the
 * same with VNNI): the float kernels of kern_float.c built at 16 lanes
 * and its attention kernels (kern_avx512_*, one zmm register holds the 16
 * canonical lanes), and the integer matmul of
 * kern_int_avx2.c built for AVX2 or for VNNI. kern.c dispatches to them
 * when the CPU has the sets. No code of its own.
 */
#include "kernels/kern_impl.h"

/* the float and attention kernels of both AVX-512 tables */
#define KERN_AVX512_FLOAT KERN_FLOAT_OPS(kern_avx512_)

const struct kern_ops kern_ops_avx512 = {
	/* the AVX2 integer matmul (an AVX-512 CPU has AVX2) */
	.qmatmul = kern_avx2_qmatmul,
	.qact = kern_avx2_qact,
	.qact_bytes = kern_avx2_qact_bytes,
	.pack_bytes = kern_avx2_pack_bytes,
	.pack = kern_avx2_pack,
	.peak_int8 = kern_avx2_peak_int8,
	.act_row = kern_avx2_act_row,
	.att_q8 = kern_avx2_att_q8,
	KERN_AVX512_FLOAT
};

/* The same with vpdpbusd in the integer matmul. */
const struct kern_ops kern_ops_avx512vnni = {
	.qmatmul = kern_vnni_qmatmul,
	.qact = kern_vnni_qact,
	.qact_bytes = kern_vnni_qact_bytes,
	.pack_bytes = kern_vnni_pack_bytes,
	.pack = kern_vnni_pack,
	.peak_int8 = kern_vnni_peak_int8,
	.act_row = kern_vnni_act_row,
	.att_q8 = kern_vnni_att_q8,
	KERN_AVX512_FLOAT
};

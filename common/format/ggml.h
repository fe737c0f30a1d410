/*
 * ggml — the tensor types of ggml (llama.cpp's tensor library) as GGUF
 * files store them: the type numbers, the block layouts (exactly as
 * ggml-common.h defines them), and one table of names, elements per block
 * and bytes per block.
 *
 * Owns the type table; nothing here reads a file or converts a number.
 * Users: gguf.c (tensor infos: names and row sizes), quant.c (blocks),
 * the kernels (Q8_0 blocks, row sizes), the model loader and the tools.
 * Every type has a name; only the types quorum can hold as weights
 * (F32, F16, BF16 and quant.h's quantized types) have a block size.
 * Blocks are byte arrays in a file: sizes are not multiples of 2 or 4
 * (MXFP4's is 17), so fields are read with memcpy or unaligned loads.
 */
#ifndef QUORUM_GGML_H
#define QUORUM_GGML_H

#include <stdint.h>

/* ggml.h's numbering (the values in a GGUF tensor info). */
enum ggml_type {
	GGML_TYPE_F32 = 0,
	GGML_TYPE_F16 = 1,
	GGML_TYPE_Q4_0 = 2,
	GGML_TYPE_Q4_1 = 3,
	GGML_TYPE_Q5_0 = 6,
	GGML_TYPE_Q5_1 = 7,
	GGML_TYPE_Q8_0 = 8,
	GGML_TYPE_Q8_1 = 9,
	GGML_TYPE_Q2_K = 10,
	GGML_TYPE_Q3_K = 11,
	GGML_TYPE_Q4_K = 12,
	GGML_TYPE_Q5_K = 13,
	GGML_TYPE_Q6_K = 14,
	GGML_TYPE_Q8_K = 15,
	GGML_TYPE_IQ2_XXS = 16,
	GGML_TYPE_IQ4_NL = 20,
	GGML_TYPE_IQ4_XS = 23,
	GGML_TYPE_BF16 = 30,
	GGML_TYPE_TQ1_0 = 34,
	GGML_TYPE_MXFP4 = 39,
};

/* Elements of a K-quant super-block. */
#define QK_K 256
/* Elements of a Q8_0 block. */
#define GGML_QK8_0 32

/* ---- blocks: f16 scales (d, m, dmin) as raw IEEE half bits ------------ */

typedef struct { uint16_t d; int8_t qs[GGML_QK8_0]; } ggml_block_q8_0; /* w = d * q */
typedef struct { uint16_t d; uint8_t qs[16]; } ggml_block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[16]; } ggml_block_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } ggml_block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } ggml_block_q5_1;
typedef struct { uint16_t d; uint8_t qs[16]; } ggml_block_iq4_nl;
/* OCP microscaling FP4: an E8M0 scale byte (2^(e - 127)), then 32 E2M1
 * codes (4 bits: sign, 2 exponent, 1 mantissa) packed as Q4_0's nibbles */
typedef struct { uint8_t e; uint8_t qs[16]; } ggml_block_mxfp4;
typedef struct {
	uint8_t scales[QK_K / 16]; /* low 4 bits scale, high 4 bits min */
	uint8_t qs[QK_K / 4];
	uint16_t d, dmin;
} ggml_block_q2_K;
typedef struct {
	uint8_t hmask[QK_K / 8];
	uint8_t qs[QK_K / 4];
	uint8_t scales[12];        /* 16 x 6 bits, biased by 32 */
	uint16_t d;
} ggml_block_q3_K;
typedef struct {
	uint16_t d, dmin;
	uint8_t scales[12];        /* 8 scales + 8 mins, 6 bits each */
	uint8_t qs[QK_K / 2];
} ggml_block_q4_K;
typedef struct {
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qh[QK_K / 8];
	uint8_t qs[QK_K / 2];
} ggml_block_q5_K;
typedef struct {
	uint8_t ql[QK_K / 2];
	uint8_t qh[QK_K / 4];
	int8_t scales[QK_K / 16];
	uint16_t d;
} ggml_block_q6_K;
typedef struct {
	uint16_t d;
	uint16_t scales_h;
	uint8_t scales_l[QK_K / 64];
	uint8_t qs[QK_K / 2];
} ggml_block_iq4_xs;

/* ---- the table --------------------------------------------------------- */

/* "Q4_K", ...; "unknown" for a number ggml does not define. */
const char *ggml_type_name(uint32_t type);
/* Elements per block (1 for float types) and bytes per block; 0 for a
 * type quorum cannot hold. */
int ggml_block_elems(uint32_t type);
int ggml_block_bytes(uint32_t type);
/* Bytes of n elements of a type in a row (n % block size == 0), or 0 for
 * types quorum cannot hold / bad n. */
uint64_t ggml_row_bytes(uint32_t type, uint64_t n);

#endif

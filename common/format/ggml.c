/*
 * ggml — the one table of ggml tensor types (see ggml.h): name, elements
 * and bytes per block, indexed by the type number.
 */
#include "format/ggml.h"

#include <stddef.h>

_Static_assert(sizeof(ggml_block_q4_0) == 18, "q4_0");
_Static_assert(sizeof(ggml_block_q4_1) == 20, "q4_1");
_Static_assert(sizeof(ggml_block_q5_0) == 22, "q5_0");
_Static_assert(sizeof(ggml_block_q5_1) == 24, "q5_1");
_Static_assert(sizeof(ggml_block_q8_0) == 34, "q8_0");
_Static_assert(sizeof(ggml_block_iq4_nl) == 18, "iq4_nl");
_Static_assert(sizeof(ggml_block_q2_K) == 84, "q2_K");
_Static_assert(sizeof(ggml_block_q3_K) == 110, "q3_K");
_Static_assert(sizeof(ggml_block_q4_K) == 144, "q4_K");
_Static_assert(sizeof(ggml_block_q5_K) == 176, "q5_K");
_Static_assert(sizeof(ggml_block_q6_K) == 210, "q6_K");
_Static_assert(sizeof(ggml_block_iq4_xs) == 136, "iq4_xs");
_Static_assert(sizeof(ggml_block_mxfp4) == 17, "mxfp4");

#define HELD(name, elems, block) {name, elems, (int)sizeof(block)}

static const struct ggml_type_info {
	const char *name;
	int elems, bytes; /* 0: a type quorum cannot hold */
} types[] = {
	[GGML_TYPE_F32] = HELD("F32", 1, float),
	[GGML_TYPE_F16] = HELD("F16", 1, uint16_t),
	[GGML_TYPE_Q4_0] = HELD("Q4_0", 32, ggml_block_q4_0),
	[GGML_TYPE_Q4_1] = HELD("Q4_1", 32, ggml_block_q4_1),
	[GGML_TYPE_Q5_0] = HELD("Q5_0", 32, ggml_block_q5_0),
	[GGML_TYPE_Q5_1] = HELD("Q5_1", 32, ggml_block_q5_1),
	[GGML_TYPE_Q8_0] = HELD("Q8_0", GGML_QK8_0, ggml_block_q8_0),
	[GGML_TYPE_Q8_1] = {"Q8_1", 0, 0},
	[GGML_TYPE_Q2_K] = HELD("Q2_K", QK_K, ggml_block_q2_K),
	[GGML_TYPE_Q3_K] = HELD("Q3_K", QK_K, ggml_block_q3_K),
	[GGML_TYPE_Q4_K] = HELD("Q4_K", QK_K, ggml_block_q4_K),
	[GGML_TYPE_Q5_K] = HELD("Q5_K", QK_K, ggml_block_q5_K),
	[GGML_TYPE_Q6_K] = HELD("Q6_K", QK_K, ggml_block_q6_K),
	[GGML_TYPE_Q8_K] = {"Q8_K", 0, 0},
	[GGML_TYPE_IQ2_XXS] = {"IQ2_XXS", 0, 0},
	[17] = {"IQ2_XS", 0, 0},
	[18] = {"IQ3_XXS", 0, 0},
	[19] = {"IQ1_S", 0, 0},
	[GGML_TYPE_IQ4_NL] = HELD("IQ4_NL", 32, ggml_block_iq4_nl),
	[21] = {"IQ3_S", 0, 0},
	[22] = {"IQ2_S", 0, 0},
	[GGML_TYPE_IQ4_XS] = HELD("IQ4_XS", QK_K, ggml_block_iq4_xs),
	[24] = {"I8", 0, 0},
	[25] = {"I16", 0, 0},
	[26] = {"I32", 0, 0},
	[27] = {"I64", 0, 0},
	[28] = {"F64", 0, 0},
	[29] = {"IQ1_M", 0, 0},
	[GGML_TYPE_BF16] = HELD("BF16", 1, uint16_t),
	[GGML_TYPE_TQ1_0] = {"TQ1_0", 0, 0},
	[35] = {"TQ2_0", 0, 0},
	[GGML_TYPE_MXFP4] = HELD("MXFP4", 32, ggml_block_mxfp4),
	[40] = {"NVFP4", 0, 0},
	[41] = {"Q1_0", 0, 0},
	[42] = {"Q2_0", 0, 0},
};

static const struct ggml_type_info *info(uint32_t type)
{
	return type < sizeof(types) / sizeof(types[0]) ? &types[type] : NULL;
}

const char *ggml_type_name(uint32_t type)
{
	const struct ggml_type_info *t = info(type);

	return t && t->name ? t->name : "unknown";
}

int ggml_block_elems(uint32_t type)
{
	const struct ggml_type_info *t = info(type);

	return t ? t->elems : 0;
}

int ggml_block_bytes(uint32_t type)
{
	const struct ggml_type_info *t = info(type);

	return t ? t->bytes : 0;
}

uint64_t ggml_row_bytes(uint32_t type, uint64_t n)
{
	uint64_t be = (uint64_t)ggml_block_elems(type);
	uint64_t bb = (uint64_t)ggml_block_bytes(type);

	if (be == 0 || n % be)
		return 0;
	return n / be <= UINT64_MAX / bb ? n / be * bb : 0;
}

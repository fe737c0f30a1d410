/*
 * kern — dispatch, CPU detection and the scalar reference definitions
 * (the public functions of kern.h; the per-ISA tables are in x86/).
 *
 * The scalar functions here ARE the definition of every kernel's bits; the
 * SIMD files reproduce them operation for operation. This file must be
 * compiled without -ffast-math and with -ffp-contract=off (the default of
 * -std=c11): every fma is an explicit fmaf(), nothing else may be fused.
 */
#include "kernels/kern.h"

#include <assert.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/ggml.h"
#include "format/half.h"
#include "format/hugemem.h"
#include "format/quant.h"
#include "kernels/kern_impl.h"
#include "kernels/prof.h"
#include "kernels/mathf.h"
#include "qerr.h"

/* ---- scalar reference kernels ----------------------------------------- */

static float tree16(float *acc)
{
	for (int h = 8; h >= 1; h >>= 1)
		for (int l = 0; l < h; l++)
			acc[l] = acc[l] + acc[l + h];
	return acc[0];
}

static float s_dot(const float *a, const float *b, int n)
{
	float acc[16] = {0};
	for (int k = 0; k < n; k += 16)
		for (int l = 0; l < 16 && k + l < n; l++)
			acc[l] = fmaf(a[k + l], b[k + l], acc[l]);
	return tree16(acc);
}

static float s_dot_f16(const float *a, const uint16_t *b, int n)
{
	float acc[16] = {0};
	for (int k = 0; k < n; k += 16)
		for (int l = 0; l < 16 && k + l < n; l++)
			acc[l] = fmaf(a[k + l], half_f16_to_f32(b[k + l]),
				      acc[l]);
	return tree16(acc);
}

static void s_row_f32(const void *row, uint32_t wtype, int K, float *out)
{
	switch (wtype) {
	case GGML_TYPE_F32:
		memcpy(out, row, (size_t)K * sizeof(float));
		break;
	case GGML_TYPE_F16: {
		const uint16_t *h = row;
		for (int k = 0; k < K; k++)
			out[k] = half_f16_to_f32(h[k]);
		break;
	}
	case GGML_TYPE_BF16: {
		const uint16_t *h = row;
		for (int k = 0; k < K; k++)
			out[k] = half_bf16_to_f32(h[k]);
		break;
	}
	case GGML_TYPE_Q8_0: {
		const ggml_block_q8_0 *b = row;
		for (int i = 0; i < K / GGML_QK8_0; i++) {
			float d = half_f16_to_f32(b[i].d);
			for (int l = 0; l < GGML_QK8_0; l++)
				out[i * GGML_QK8_0 + l] = d * (float)b[i].qs[l];
		}
		break;
	}
	default:
		abort(); /* kern_matmul validated the type */
	}
}

/* Reference matmul: converts 16 weights at a time and runs the canonical
 * reduction; slow but obviously right. */
static void s_matmul(const struct kern_mm *mm, int j0, int j1)
{
	float w[16];
	for (int j = j0; j < j1; j++) {
		const char *row = (const char *)mm->W + (size_t)j * mm->row_bytes;
		for (int m = 0; m < mm->M; m++) {
			const float *x = mm->x + (size_t)m * mm->ldx;
			float acc[16] = {0};
			for (int k = 0; k < mm->K; k += 16) {
				int len = mm->K - k < 16 ? mm->K - k : 16;
				switch (mm->wtype) {
				case GGML_TYPE_F32:
					memcpy(w, (const float *)row + k,
					       (size_t)len * sizeof(float));
					break;
				case GGML_TYPE_F16:
					for (int l = 0; l < len; l++)
						w[l] = half_f16_to_f32(
							((const uint16_t *)row)[k + l]);
					break;
				case GGML_TYPE_BF16:
					for (int l = 0; l < len; l++)
						w[l] = half_bf16_to_f32(
							((const uint16_t *)row)[k + l]);
					break;
				default: {
					const ggml_block_q8_0 *b =
						(const ggml_block_q8_0 *)row + k / 32;
					float d = half_f16_to_f32(b->d);
					for (int l = 0; l < 16; l++)
						w[l] = d * (float)b->qs[k % 32 + l];
				}
				}
				for (int l = 0; l < len; l++)
					acc[l] = fmaf(x[k + l], w[l], acc[l]);
			}
			float r = tree16(acc);
			if (mm->bias)
				r = r + mm->bias[j];
			mm->y[(size_t)m * mm->ldy + j] = r;
		}
	}
}

static void s_rmsnorm(const float *x, const float *w, int n, float eps,
		      float *out)
{
	float s = 1.0f / sqrtf(s_dot(x, x, n) / (float)n + eps);
	for (int i = 0; i < n; i++)
		out[i] = (x[i] * s) * w[i];
}

static void s_silu_mul(float *g, const float *u, int n)
{
	for (int i = 0; i < n; i++) {
		float v = g[i];
		g[i] = (v / (1.0f + mathf_exp(-v))) * u[i];
	}
}

static void s_softmax(float *x, int n)
{
	float mx = x[0];
	for (int i = 1; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	float acc[16] = {0};
	for (int i = 0; i < n; i++) {
		x[i] = mathf_exp(x[i] - mx);
		acc[i % 16] = acc[i % 16] + x[i];
	}
	float sum = tree16(acc);
	for (int i = 0; i < n; i++)
		x[i] = x[i] / sum;
}

static void s_axpy(float *y, float a, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] = fmaf(a, x[i], y[i]);
}

static void s_axpy_f16(float *y, float a, const uint16_t *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] = fmaf(a, half_f16_to_f32(x[i]), y[i]);
}

/* Row t of a KV run: element offset t * ld, in bytes for type kt (a Q8_0
 * row starts on a block: ld % 32 == 0). */
static const void *kv_run_row(const void *base, size_t ld, uint32_t kt,
			      int t)
{
	size_t e = (size_t)t * ld;

	if (kt == GGML_TYPE_Q8_0)
		return (const ggml_block_q8_0 *)base + e / GGML_QK8_0;
	return (const char *)base + e * (kt == GGML_TYPE_F16 ? 2 : 4);
}

/* The definition: one kern_dot_f16 (kern_dot) per (query, key) (F16 and
 * F32 keys; Q8_0 keys take s_att_q8). */
static void s_att_scores(const float *q, int ldq, int nq, const void *k,
			 size_t ldk, uint32_t kt, int nt, int n, float scale,
			 float *s, int lds)
{
	for (int i = 0; i < nq; i++)
		for (int t = 0; t < nt; t++) {
			const float *qi = q + (size_t)i * ldq;
			const void *row = kv_run_row(k, ldk, kt, t);
			float d = kt == GGML_TYPE_F16 ? s_dot_f16(qi, row, n)
						      : s_dot(qi, row, n);

			s[(size_t)i * lds + t] = d * scale;
		}
}

/* Q8_0 keys' scores, the definition (kern.h): per query (quantized by
 * kern_att_q8_prep) and key, over the blocks in order from +0, acc =
 * fmaf(da * dk, (float)S, acc), S the exact sum of the codes' products;
 * then acc * scale. */
static void s_att_q8(const char *qz, size_t qb, int nq, const void *k,
		     size_t ldk, int nt, int n, float scale, float *s, int lds)
{
	for (int i = 0; i < nq; i++) {
		quant_arow a;

		quant_arow_bind(&a, (void *)(qz + (size_t)i * qb), n, 32);
		for (int t = 0; t < nt; t++) {
			const ggml_block_q8_0 *row = kv_run_row(k, ldk,
							GGML_TYPE_Q8_0, t);
			float acc = 0.0f;

			for (int b = 0; b < n / GGML_QK8_0; b++) {
				int32_t S = 0;

				for (int e = 0; e < GGML_QK8_0; e++)
					S += (int32_t)row[b].qs[e] *
					     a.q[GGML_QK8_0 * b + e];
				acc = fmaf(a.d[b] * half_f16_to_f32(row[b].d),
					   (float)S, acc);
			}
			s[(size_t)i * lds + t] = acc * scale;
		}
	}
}

static void s_axpy_q8(float *y, float a, const ggml_block_q8_0 *x, int n)
{
	for (int i = 0; i < n; i++) {
		const ggml_block_q8_0 *b = x + i / GGML_QK8_0;

		y[i] = fmaf(a, half_f16_to_f32(b->d) *
				(float)b->qs[i % GGML_QK8_0], y[i]);
	}
}

static void s_att_values(float *out, int ldo, int nq, const float *s,
			 int lds, const void *v, size_t ldv, uint32_t kt,
			 int nt, int n)
{
	for (int i = 0; i < nq; i++)
		for (int t = 0; t < nt; t++) {
			float *y = out + (size_t)i * ldo;
			float a = s[(size_t)i * lds + t];
			const void *row = kv_run_row(v, ldv, kt, t);

			if (kt == GGML_TYPE_F16)
				s_axpy_f16(y, a, row, n);
			else if (kt == GGML_TYPE_Q8_0)
				s_axpy_q8(y, a, row, n);
			else
				s_axpy(y, a, row, n);
		}
}

static void s_f32_to_f16_row(const float *x, uint16_t *out, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = half_f32_to_f16(x[i]);
}

static void s_store(const struct kern_mm *mm, int m, int j, float r)
{
	if (mm->bias)
		r = r + mm->bias[j];
	mm->y[(size_t)m * mm->ldy + j] = r;
}

/* The reference integer matmul: each weight row unpacked once by
 * quant_unpack_row, then quant_dot_ref with every activation row. */
static void s_qmatmul(const struct kern_mm *mm, int j0, int j1)
{
	int K = mm->K, unit = quant_unit(mm->wtype);
	void *buf = malloc(quant_wrow_bytes(K));
	quant_wrow w;
	quant_arow a;

	if (!buf)
		abort(); /* a few KiB per task */
	quant_wrow_bind(&w, buf, K);
	for (int j = j0; j < j1; j++) {
		quant_unpack_row(mm->wtype, (const char *)mm->W +
				 (size_t)j * mm->row_bytes, &w, K);
		for (int m = 0; m < mm->M; m++) {
			quant_arow_bind(&a, (void *)(mm->xq + (size_t)m *
						     mm->xq_bytes), K, unit);
			s_store(mm, m, j, quant_dot_ref(&w, &a, K));
		}
	}
	free(buf);
}

const struct kern_ops kern_ops_scalar = {
	.qmatmul = s_qmatmul,
	.dot = s_dot,
	.dot_f16 = s_dot_f16,
	.matmul = s_matmul,
	.rmsnorm = s_rmsnorm,
	.silu_mul = s_silu_mul,
	.softmax = s_softmax,
	.axpy = s_axpy,
	.axpy_f16 = s_axpy_f16,
	.att_scores = s_att_scores,
	.att_values = s_att_values,
	.att_q8 = s_att_q8,
	.row_f32 = s_row_f32,
	.f32_to_f16_row = s_f32_to_f16_row,
};

/* ---- dispatch --------------------------------------------------------- */

#define OWN_OPS                                                            \
	{                                                                  \
		[KERN_ISA_SCALAR] = &kern_ops_scalar,                      \
		[KERN_ISA_AVX2] = &kern_ops_avx2,                          \
		[KERN_ISA_AVX512] = &kern_ops_avx512,                      \
		[KERN_ISA_AVX512VNNI] = &kern_ops_avx512vnni,              \
	}
static const struct kern_ops *const own_ops[] = OWN_OPS;
/* own_ops, or a test's emulation (kern_impl_install) */
static const struct kern_ops *isa_ops[] = OWN_OPS;

static _Atomic int cur_isa = -1;

#if defined(__x86_64__) || defined(__i386__)
/* cpuid, not __builtin_cpu_supports("f16c"): clang 14 does not know that
 * name, and the fuzz build compiles this file with clang. */
static int has_f16c(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* The same for AVX512_VNNI (leaf 7, ecx bit 11). */
static int has_vnni(void)
{
	unsigned a, b, c, d;

	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11));
}
#endif

int kern_isa_detect(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	int avx2 = __builtin_cpu_supports("avx2") &&
		   __builtin_cpu_supports("fma") && has_f16c();
	int avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
		     __builtin_cpu_supports("avx512bw") &&
		     __builtin_cpu_supports("avx512vl") &&
		     __builtin_cpu_supports("avx512dq");
	if (avx512 && has_vnni())
		return KERN_ISA_AVX512VNNI;
	return avx512 ? KERN_ISA_AVX512 : avx2 ? KERN_ISA_AVX2 :
						   KERN_ISA_SCALAR;
#else
	return KERN_ISA_SCALAR;
#endif
}

int kern_isa(void)
{
	int isa = atomic_load_explicit(&cur_isa, memory_order_relaxed);
	if (isa >= 0)
		return isa;
	isa = kern_isa_detect();
	const char *env = getenv("QUORUM_ISA");
	if (env) {
		/* A request the CPU cannot honour falls back to the best it
		 * has: a cluster-wide setting must not crash older hosts. A
		 * name of none is a typo, said (once: the choice is cached),
		 * not taken for the best. */
		int known = 0;

		for (int i = KERN_ISA_SCALAR; i <= KERN_ISA_LAST; i++)
			if (strcmp(env, kern_isa_name(i)) == 0) {
				known = 1;
				if (i < isa)
					isa = i;
			}
		if (!known)
			fprintf(stderr, "quorum: QUORUM_ISA=%s is none of "
				"scalar, avx2, avx512, avx512vnni: %s, the "
				"best this CPU has\n", env,
				kern_isa_name(isa));
	}
	atomic_store_explicit(&cur_isa, isa, memory_order_relaxed);
	return isa;
}

int kern_set_isa(int isa)
{
	if (isa < KERN_ISA_SCALAR || isa > KERN_ISA_LAST)
		return qerr_fail(QERR_ARG, "kern_set_isa: bad isa %d", isa);
	if (isa > kern_isa_detect())
		return qerr_fail(QERR_UNSUPPORTED,
				 "kern_set_isa: this CPU lacks %s",
				 kern_isa_name(isa));
	atomic_store_explicit(&cur_isa, isa, memory_order_relaxed);
	return QERR_OK;
}

void kern_impl_install(int isa, const struct kern_ops *o)
{
	isa_ops[isa] = o ? o : own_ops[isa];
	atomic_store_explicit(&cur_isa, isa, memory_order_relaxed);
}

const char *kern_isa_name(int isa)
{
	switch (isa) {
	case KERN_ISA_SCALAR:
		return "scalar";
	case KERN_ISA_AVX2:
		return "avx2";
	case KERN_ISA_AVX512:
		return "avx512";
	case KERN_ISA_AVX512VNNI:
		return "avx512vnni";
	}
	return "unknown";
}

static inline const struct kern_ops *ops(void)
{
	return isa_ops[kern_isa()];
}

float kern_dot(const float *a, const float *b, int n)
{
	return ops()->dot(a, b, n);
}

float kern_dot_f16(const float *a, const uint16_t *b, int n)
{
	return ops()->dot_f16(a, b, n);
}

static size_t row_bytes(uint32_t wtype, int K)
{
	return (size_t)ggml_row_bytes(wtype, (uint64_t)K);
}

static _Atomic int cur_act = -1;

int kern_activations(void)
{
	int a = atomic_load_explicit(&cur_act, memory_order_relaxed);
	if (a >= 0)
		return a;
	const char *env = getenv("QUORUM_ACTIVATIONS");
	a = env && !strcmp(env, "f32") ? KERN_ACT_F32 : KERN_ACT_INT;
	atomic_store_explicit(&cur_act, a, memory_order_relaxed);
	return a;
}

void kern_set_activations(int mode)
{
	atomic_store_explicit(&cur_act, mode == KERN_ACT_F32 ? KERN_ACT_F32 :
				       KERN_ACT_INT, memory_order_relaxed);
}

/* A matrix packed by kern_pack (below). */
struct kern_packed {
	int isa;           /* the ISA whose ops->pack laid it out */
	const void *W;     /* the rows it is a copy of */
	uint32_t wtype;
	int K, N;
	size_t bytes;
	void *data;
};

/* One matrix of a kern_matmul_n job: its kern_mm (xq may be shared with
 * other matrices of the same type) and its path. */
struct mm_mat {
	struct kern_mm mm;
	int quant; /* 0: ops->matmul; 1: ops->qmatmul; 2: dequantize + dot */
};

/* Tasks of a job: at most this many (the last takes what is left). */
#define MM_MAX_TASKS 96

struct mm_job {
	const struct kern_ops *ops;
	int n_mats;
	struct mm_mat mat[KERN_MM_MAX];
	/* The matrices' KERN_MM_COLS-column units in one sequence: matrix i
	 * holds units [ubase[i], ubase[i + 1]). Task t computes the units
	 * [bound[t], bound[t + 1]). */
	int ubase[KERN_MM_MAX + 1];
	int bound[MM_MAX_TASKS + 1];
	int n_tasks;
};

/* Quantized weights with f32 activations, columns [j0, j1): each weight
 * row is dequantized once and used for all M rows. */
static void dequant_cols(const struct kern_ops *o, const struct kern_mm *mm,
			 int j0, int j1)
{
	int K = mm->K;
	float *buf = malloc((size_t)K * sizeof(float));

	if (!buf)
		abort(); /* a few KiB per task */
	for (int j = j0; j < j1; j++) {
		quant_dequant_row(mm->wtype, (const char *)mm->W +
				  (size_t)j * mm->row_bytes, buf, K);
		for (int m = 0; m < mm->M; m++)
			s_store(mm, m, j, o->dot(mm->x + (size_t)m * mm->ldx, buf,
						 K));
	}
	free(buf);
}

static void mm_task(void *ctx, int t, int n_tasks)
{
	const struct mm_job *job = ctx;
	int g0 = job->bound[t], g1 = job->bound[t + 1];

	(void)n_tasks;
	for (int i = 0; i < job->n_mats; i++) {
		const struct mm_mat *mt = &job->mat[i];
		int u0 = g0 > job->ubase[i] ? g0 : job->ubase[i];
		int u1 = g1 < job->ubase[i + 1] ? g1 : job->ubase[i + 1];
		int j0 = (u0 - job->ubase[i]) * KERN_MM_COLS;
		int j1 = (u1 - job->ubase[i]) * KERN_MM_COLS;

		if (j1 > mt->mm.N)
			j1 = mt->mm.N;
		if (j0 >= j1)
			continue;
		if (mt->quant == 1)
			job->ops->qmatmul(&mt->mm, j0, j1);
		else if (mt->quant == 2)
			dequant_cols(job->ops, &mt->mm, j0, j1);
		else
			job->ops->matmul(&mt->mm, j0, j1);
	}
}

/* Cost of unit u of the job's sequence: the bytes of its weight rows
 * (decode streams them; with many rows the work is still proportional,
 * as every matrix of a job has the same K). cost0[i]: cost before
 * matrix i. */
static int64_t unit_cost(const struct mm_job *job, const int64_t *cost0, int u)
{
	int i = 0;

	while (u >= job->ubase[i + 1] && i + 1 < job->n_mats)
		i++;
	return cost0[i] + (int64_t)(u - job->ubase[i]) *
	       (int64_t)job->mat[i].mm.row_bytes;
}

/* The first unit at or after cost c. */
static int unit_at(const struct mm_job *job, const int64_t *cost0, int64_t c)
{
	for (int i = 0; i < job->n_mats; i++) {
		int64_t rb = (int64_t)job->mat[i].mm.row_bytes;
		if (c <= cost0[i + 1] || i + 1 == job->n_mats) {
			int64_t d = c - cost0[i];
			int64_t u = d <= 0 ? 0 : (d + rb - 1) / rb;
			return job->ubase[i] + (int)u;
		}
	}
	return job->ubase[job->n_mats];
}

/*
 * The tasks of a job on nt threads, guided: each task takes 1 / (2 nt)
 * of the work left (at least one unit), so the first tasks are large
 * and the last ones small. Tasks are claimed in order, so the threads
 * finish within about one small task of each other instead of one
 * nt-th of the matmul / 4 (the tail a memory-bound decode waits out at
 * every matmul). Which thread computes a column never changes its bits.
 */
static void mm_split(struct mm_job *job, int nt)
{
	int total = job->ubase[job->n_mats], u = 0, t = 0;
	int64_t cost0[KERN_MM_MAX + 1];

	cost0[0] = 0;
	for (int i = 0; i < job->n_mats; i++)
		cost0[i + 1] = cost0[i] + (int64_t)(job->ubase[i + 1] -
			       job->ubase[i]) * (int64_t)job->mat[i].mm.row_bytes;
	job->bound[0] = 0;
	while (u < total) {
		int next = total;
		if (nt > 1 && t + 1 < MM_MAX_TASKS) {
			int64_t c = unit_cost(job, cost0, u);
			next = unit_at(job, cost0, c + (cost0[job->n_mats] - c) /
						   (2 * nt));
			if (next <= u)
				next = u + 1;
			if (next > total)
				next = total;
		}
		job->bound[++t] = next;
		u = next;
	}
	job->n_tasks = t;
}

/* Quantizing the activation rows [M t / n, M (t + 1) / n). */
struct act_job {
	const struct kern_ops *ops;
	const float *x;
	int ldx, K, unit, M, pk;
	uint32_t wtype;
	char *xq;
	size_t xq_bytes;
};

static void act_task(void *ctx, int t, int n_tasks)
{
	const struct act_job *aj = ctx;
	int m0 = (int)((int64_t)aj->M * t / n_tasks);
	int m1 = (int)((int64_t)aj->M * (t + 1) / n_tasks);

	for (int m = m0; m < m1; m++) {
		quant_arow a;
		quant_arow_bind(&a, aj->xq + (size_t)m * aj->xq_bytes, aj->K,
				aj->unit);
		(aj->ops->act_row ? aj->ops->act_row : quant_act_row)(
			aj->x + (size_t)m * aj->ldx, aj->K, aj->unit, &a);
		if (aj->ops->qact)
			aj->ops->qact(aj->wtype, &a, aj->K, aj->M, aj->pk);
	}
}

/* The calling thread's buffers for quantized activations, one per
 * matrix of a kern_matmul_n call, kept from call to call and freed when
 * the thread ends. Allocated per call, a prefill's (megabytes) were
 * mapped and unmapped by malloc each time and their pages faulted in
 * again: 12% of the 0.5b prefill's quantizing time (AMD EPYC Zen 5). */
struct act_bufs {
	char *p[KERN_MM_MAX];
	size_t cap[KERN_MM_MAX];
};

static pthread_key_t act_key;
static pthread_once_t act_once = PTHREAD_ONCE_INIT;

static void act_bufs_free(void *v)
{
	struct act_bufs *b = v;

	for (int i = 0; i < KERN_MM_MAX; i++)
		free(b->p[i]);
	free(b);
}

static void act_key_init(void)
{
	if (pthread_key_create(&act_key, act_bufs_free))
		abort();
}

/* Slot i's buffer of at least bytes. */
static char *act_buf(int i, size_t bytes)
{
	struct act_bufs *b;

	pthread_once(&act_once, act_key_init);
	if (!(b = pthread_getspecific(act_key))) {
		if (!(b = calloc(1, sizeof(*b))) ||
		    pthread_setspecific(act_key, b))
			abort();
	}
	if (b->cap[i] < bytes) {
		free(b->p[i]);
		if (!(b->p[i] = malloc(bytes)))
			abort();
		b->cap[i] = bytes;
	}
	return b->p[i];
}

/* x's M rows quantized for weights of wtype, packed (pk) or not (each
 * row on its own: batch-invariant; rows over the threads), into slot's
 * buffer (act_buf). */
static char *quantize_act(tpool *tp, const struct kern_ops *o, uint32_t wtype,
			  int pk, int K, const float *x, int ldx, int M,
			  int slot, size_t *xq_bytes)
{
	int nt = tp ? tpool_size(tp) : 1;
	struct act_job aj = {.ops = o, .x = x, .ldx = ldx, .K = K,
			     .unit = quant_unit(wtype), .M = M, .pk = pk,
			     .wtype = wtype};

	aj.xq_bytes = *xq_bytes = o->qact_bytes ? o->qact_bytes(wtype, K, M, pk)
						: quant_arow_bytes(K, aj.unit);
	aj.xq = act_buf(slot, aj.xq_bytes * (size_t)M);
	if (nt > 1 && (int64_t)M * K >= 16384)
		tpool_run(tp, act_task, &aj, M < nt ? M : nt);
	else
		act_task(&aj, 0, 1);
	return aj.xq;
}

void kern_matmul_n(tpool *tp, const struct kern_mat *mats, int n_mats, int K,
		   const float *x, int ldx, int M)
{
	/* Programmer errors: shapes come from a validated model. */
	assert(K > 0 && M >= 0 && n_mats >= 1 && n_mats <= KERN_MM_MAX);
	if (M == 0)
		return;
	int act_int = kern_activations() == KERN_ACT_INT;
	int nt = tp ? tpool_size(tp) : 1;
	int64_t work = 0, t0 = prof_active ? prof_now() : 0, busy0 = 0;
	struct mm_job job = {.ops = ops(), .n_mats = n_mats};
	double wbytes = 0;
	int n_all = 0;

	for (int i = 0; i < n_mats; i++) {
		const struct kern_mat *w = &mats[i];
		uint32_t wt = w->wtype;
		struct mm_mat *mt = &job.mat[i];

		assert(w->N >= 0 && row_bytes(wt, K) != 0);
		mt->quant = !quant_is_quant(wt) ? 0 : act_int ? 1 :
			    wt == GGML_TYPE_Q8_0 ? 0 : 2;
		mt->mm = (struct kern_mm){.W = w->W, .wtype = wt, .K = K,
			.N = w->N, .row_bytes = row_bytes(wt, K),
			.bias = w->bias, .x = x, .ldx = ldx, .M = M, .y = w->y,
			.ldy = w->ldy};
		if (w->pk) {
			/* programmer errors: a copy of another matrix */
			assert(w->pk->W == w->W && w->pk->wtype == wt &&
			       w->pk->K == K && w->pk->N == w->N);
			if (mt->quant == 1 && w->pk->isa == kern_isa()) {
				mt->mm.pk = w->pk->data;
				mt->mm.pf = kern_prefetching();
			}
		}
		if (mt->quant == 1 && w->N > 0) {
			/* one quantized copy of x per weight type (and
			 * packing: the layout may differ) */
			for (int p = 0; p < i && !mt->mm.xq; p++)
				if (job.mat[p].quant == 1 &&
				    job.mat[p].mm.wtype == wt &&
				    !job.mat[p].mm.pk == !mt->mm.pk &&
				    job.mat[p].mm.xq) {
					mt->mm.xq = job.mat[p].mm.xq;
					mt->mm.xq_bytes = job.mat[p].mm.xq_bytes;
				}
			if (!mt->mm.xq)
				mt->mm.xq = quantize_act(tp, job.ops, wt,
					mt->mm.pk != NULL, K, x, ldx, M, i,
					&mt->mm.xq_bytes);
		}
		job.ubase[i + 1] = job.ubase[i] +
				   (w->N + KERN_MM_COLS - 1) / KERN_MM_COLS;
		work += (int64_t)M * w->N * K;
		wbytes += (double)mt->mm.row_bytes * w->N;
		n_all += w->N;
	}
	if (t0) {
		/* the quantizing above; then the job's wall and idle time */
		int64_t t1 = prof_now();

		prof_add(PROF_ACT, t1 - t0);
		t0 = t1;
		busy0 = tpool_busy_ns(tp);
	}
	/* tiny matmuls stay on one thread */
	mm_split(&job, work < 32768 ? 1 : nt);
	if (job.n_tasks == 1)
		mm_task(&job, 0, 1);
	else if (job.n_tasks > 1)
		tpool_run(tp, mm_task, &job, job.n_tasks);
	if (t0) {
		int64_t wall = prof_now() - t0;

		prof_matmul(K, n_all, mats[0].wtype, M, wall, wbytes);
		if (tp)
			prof_add(PROF_MM_IDLE, nt * wall -
				 (tpool_busy_ns(tp) - busy0) -
				 (job.n_tasks == 1 ? wall : 0));
	}
}

void kern_matmul(tpool *tp, const void *W, uint32_t wtype, int K, int N,
		 const float *bias, const float *x, int ldx, int M, float *y,
		 int ldy)
{
	struct kern_mat w = {.W = W, .wtype = wtype, .N = N, .bias = bias,
			     .y = y, .ldy = ldy};

	kern_matmul_n(tp, &w, 1, K, x, ldx, M);
}

/* ---- packed weights ----------------------------------------------- */

/* A switch that is on unless name=0 is in the environment, read at
 * first use into *cache (-1 until then, or until a kern_set_* call).
 * Any value but 0 and 1 is named on stderr (once, at that first use):
 * these switches change only the speed, so a typo must not pass for
 * the setting it meant. */
static int env_switch(_Atomic int *cache, const char *name)
{
	int on = atomic_load_explicit(cache, memory_order_relaxed);

	if (on < 0) {
		const char *env = getenv(name);

		on = !(env && !strcmp(env, "0"));
		if (env && on && strcmp(env, "1"))
			fprintf(stderr, "quorum: %s=%s is neither 0 nor 1: "
				"left on\n", name, env);
		atomic_store_explicit(cache, on, memory_order_relaxed);
	}
	return on;
}

static _Atomic int pack_on = -1;

static int packing(void)
{
	return env_switch(&pack_on, "QUORUM_PACK");
}

static _Atomic int prefetch_on = -1;

int kern_prefetching(void)
{
	return env_switch(&prefetch_on, "QUORUM_PREFETCH");
}

void kern_set_prefetch(int on)
{
	atomic_store_explicit(&prefetch_on, on != 0, memory_order_relaxed);
}

struct pack_job {
	const struct kern_ops *ops;
	struct kern_mm mm;
	void *dst;
};

/* Rows [2 P t / n, 2 P (t + 1) / n) of the P pairs (even bounds). */
static void pack_task(void *ctx, int t, int n_tasks)
{
	const struct pack_job *pj = ctx;
	/* in fours of rows: the packed layouts' units (pairs, quads) */
	int P = (pj->mm.N + 3) / 4;
	int j0 = 4 * (int)((int64_t)P * t / n_tasks);
	int j1 = 4 * (int)((int64_t)P * (t + 1) / n_tasks);

	if (j1 > pj->mm.N)
		j1 = pj->mm.N;
	if (j0 < j1)
		pj->ops->pack(&pj->mm, pj->dst, j0, j1);
}

/* The bytes kern_pack would pack an N x K matrix of wtype into for up to
 * max_rows rows as things stand (0: no copy): the one home of when it
 * packs. */
static size_t pack_size(const struct kern_ops *o, uint32_t wtype, int K,
			int N, int max_rows)
{
	if (!packing() || !o->pack_bytes || !quant_is_quant(wtype) ||
	    kern_activations() != KERN_ACT_INT || N == 0)
		return 0;
	return o->pack_bytes(wtype, K, N, max_rows);
}

int kern_pack_covers(uint32_t wtype, int K)
{
	/* the layouts' thresholds rise with the rows: a copy made for
	 * one row is read from one row up */
	return K > 0 && row_bytes(wtype, K) != 0 &&
	       pack_size(ops(), wtype, K, 1, 1) > 0;
}

int kern_pack(tpool *tp, const void *W, uint32_t wtype, int K, int N,
	      int max_rows, kern_packed **out)
{
	const struct kern_ops *o = ops();
	struct pack_job pj = {.ops = o};
	kern_packed *pk;
	size_t bytes;
	int nt = tp ? tpool_size(tp) : 1;

	*out = NULL;
	assert(K > 0 && N >= 0 && row_bytes(wtype, K) != 0);
	bytes = pack_size(o, wtype, K, N, max_rows);
	if (!bytes)
		return 0;
	pk = calloc(1, sizeof(*pk));
	if (pk)
		pk->data = hugemem_alloc(bytes);
	if (!pk || !pk->data) {
		free(pk);
		return qerr_fail(QERR_NOMEM, "packing a %d x %d matrix for "
				 "the integer kernels: out of memory for "
				 "%zu bytes (QUORUM_PACK=0 runs without)",
				 N, K, bytes);
	}
	*pk = (kern_packed){.isa = kern_isa(), .W = W, .wtype = wtype,
			    .K = K, .N = N, .bytes = bytes, .data = pk->data};
	pj.mm = (struct kern_mm){.W = W, .wtype = wtype, .K = K, .N = N,
				 .row_bytes = row_bytes(wtype, K)};
	pj.dst = pk->data;
	if (nt > 1 && N >= 64)
		tpool_run(tp, pack_task, &pj, nt);
	else
		pack_task(&pj, 0, 1);
	*out = pk;
	return 0;
}

size_t kern_packed_bytes(const kern_packed *pk)
{
	return pk ? pk->bytes : 0;
}

void kern_packed_free(kern_packed **pk)
{
	if (!pk || !*pk)
		return;
	hugemem_free((*pk)->data, (*pk)->bytes);
	free(*pk);
	*pk = NULL;
}

void kern_row_f32(const void *W, uint32_t wtype, int K, int64_t r, float *out)
{
	size_t rb = row_bytes(wtype, K);
	assert(rb != 0);
	if (quant_is_quant(wtype) && wtype != GGML_TYPE_Q8_0)
		quant_dequant_row(wtype, (const char *)W + (size_t)r * rb, out,
				  K);
	else
		ops()->row_f32((const char *)W + (size_t)r * rb, wtype, K, out);
}

void kern_rmsnorm(const float *x, const float *w, int n, float eps, float *out)
{
	ops()->rmsnorm(x, w, n, eps, out);
}

void kern_silu_mul(float *g, const float *u, int n)
{
	ops()->silu_mul(g, u, n);
}

float kern_tanhf(float x)
{
	float a = fabsf(x), t;

	if (x != x)
		return x + x;
	if (a < 0.0625f) {
		/* odd Taylor series: no cancellation near 0 */
		float a2 = a * a;

		t = a + a * a2 * (-1.0f / 3.0f + a2 * (2.0f / 15.0f +
			a2 * (-17.0f / 315.0f)));
	} else if (a > 10.0f) {
		t = 1.0f;
	} else {
		t = 1.0f - 2.0f / (mathf_exp(2.0f * a) + 1.0f);
	}
	return copysignf(t, x);
}

void kern_gelu_mul(float *g, const float *u, int n)
{
	for (int i = 0; i < n; i++) {
		float v = g[i];
		float t = kern_tanhf(0.7978845608f * v *
				     (1.0f + 0.044715f * v * v));

		g[i] = (0.5f * v * (1.0f + t)) * u[i];
	}
}

void kern_swiglu_oai(float *g, const float *u, int n, float alpha,
		     float limit)
{
	for (int i = 0; i < n; i++) {
		float x = limit < g[i] ? limit : g[i];
		float y = u[i] < -limit ? -limit : limit < u[i] ? limit : u[i];

		g[i] = x / (1.0f + mathf_exp(-(alpha * x))) * (y + 1.0f);
	}
}

void kern_softmax(float *x, int n)
{
	ops()->softmax(x, n);
}

void kern_axpy(float *y, float a, const float *x, int n)
{
	ops()->axpy(y, a, x, n);
}

void kern_axpy_f16(float *y, float a, const uint16_t *x, int n)
{
	ops()->axpy_f16(y, a, x, n);
}

size_t kern_att_q8_bytes(int n)
{
	return quant_arow_bytes(n, GGML_QK8_0);
}

void kern_att_q8_prep(const float *q, int ldq, int nq, int n, void *qz)
{
	const struct kern_ops *o = ops();
	size_t qb = kern_att_q8_bytes(n);

	assert(n > 0 && n % GGML_QK8_0 == 0);
	for (int i = 0; i < nq; i++) {
		quant_arow a;

		quant_arow_bind(&a, (char *)qz + (size_t)i * qb, n, GGML_QK8_0);
		(o->act_row ? o->act_row : quant_act_row)(
			q + (size_t)i * ldq, n, GGML_QK8_0, &a);
	}
}

void kern_att_scores_q8(const void *qz, int nq, const void *k, size_t ldk,
			int nt, int n, float scale, float *s, int lds)
{
	assert(n > 0 && n % GGML_QK8_0 == 0 && ldk % GGML_QK8_0 == 0);
	if (nq > 0 && nt > 0)
		ops()->att_q8(qz, kern_att_q8_bytes(n), nq, k, ldk, nt, n,
			      scale, s, lds);
}

void kern_att_scores(const float *q, int ldq, int nq, const void *k,
		     size_t ldk, uint32_t kt, int nt, int n, float scale,
		     float *s, int lds)
{
	assert(kt == GGML_TYPE_F16 || kt == GGML_TYPE_F32 ||
	       (kt == GGML_TYPE_Q8_0 && n % GGML_QK8_0 == 0 &&
		ldk % GGML_QK8_0 == 0));
	if (nq <= 0 || nt <= 0)
		return;
	if (kt == GGML_TYPE_Q8_0) {
		/* the queries quantized here (the engine quantizes them once
		 * per row and calls kern_att_scores_q8 per block) */
		void *qz = aligned_alloc(64, kern_att_q8_bytes(n) * (size_t)nq);

		if (!qz)
			abort(); /* nq queries' codes */
		kern_att_q8_prep(q, ldq, nq, n, qz);
		kern_att_scores_q8(qz, nq, k, ldk, nt, n, scale, s, lds);
		free(qz);
		return;
	}
	ops()->att_scores(q, ldq, nq, k, ldk, kt, nt, n, scale, s, lds);
}

void kern_att_values(float *out, int ldo, int nq, const float *s, int lds,
		     const void *v, size_t ldv, uint32_t kt, int nt, int n)
{
	assert(kt == GGML_TYPE_F16 || kt == GGML_TYPE_F32 ||
	       (kt == GGML_TYPE_Q8_0 && n % GGML_QK8_0 == 0 &&
		ldv % GGML_QK8_0 == 0));
	if (nq > 0 && nt > 0)
		ops()->att_values(out, ldo, nq, s, lds, v, ldv, kt, nt, n);
}

void kern_f32_to_f16_row(const float *x, uint16_t *out, int n)
{
	ops()->f32_to_f16_row(x, out, n);
}

/* ---- the machine's limits ----------------------------------------------- */

struct lim_job {
	const struct kern_ops *o;
	int kind;            /* 0: int8, 1: f32, 2: read */
	int64_t rounds;
	const float *buf;
	size_t n;
	uint64_t done[64];   /* per task: multiply-adds (or bytes) */
};

static void lim_task(void *ctx, int t, int n_tasks)
{
	struct lim_job *j = ctx;

	if (j->kind == 0) {
		j->done[t] = j->o->peak_int8(j->rounds);
	} else if (j->kind == 1) {
		j->done[t] = j->o->peak_f32(j->rounds);
	} else {
		size_t per = j->n / (size_t)n_tasks / 64 * 64;
		volatile float s = j->o->read_sum(j->buf + per * (size_t)t, per);

		(void)s;
		j->done[t] = per * sizeof(float);
	}
}

/* The best of three runs of kind on nt tasks, per second. */
static double lim_best(tpool *tp, struct lim_job *j)
{
	int nt = tp ? tpool_size(tp) : 1;
	double best = 0;

	if (nt > 64)
		nt = 64;
	for (int run = 0; run < 3; run++) {
		struct timespec a, b;
		uint64_t sum = 0;

		clock_gettime(CLOCK_MONOTONIC, &a);
		tpool_run(tp, lim_task, j, nt);
		clock_gettime(CLOCK_MONOTONIC, &b);
		for (int t = 0; t < nt; t++)
			sum += j->done[t];
		double s = (double)(b.tv_sec - a.tv_sec) +
			   (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
		if (s > 0 && sum / s > best)
			best = sum / s;
	}
	return best;
}

int kern_measure_limits(tpool *tp, kern_limits *out)
{
	struct lim_job j = {.o = ops(), .rounds = 4000000};
	size_t n = (size_t)64 << 20; /* 256 MiB of floats */
	float *buf;

	memset(out, 0, sizeof(*out));
	if (j.o->peak_int8)
		out->int8_macs = lim_best(tp, &j);
	j.kind = 1;
	if (j.o->peak_f32)
		out->f32_fmas = lim_best(tp, &j);
	j.kind = 2;
	if (!j.o->read_sum)
		return 0;
	if (!(buf = malloc(n * sizeof(float))))
		return qerr_fail(QERR_NOMEM, "out of memory for the bandwidth "
				 "buffer (256 MiB)");
	for (size_t i = 0; i < n; i++)
		buf[i] = 1.0f;
	j.buf = buf;
	j.n = n;
	out->read_bytes = lim_best(tp, &j);
	free(buf);
	return 0;
}

/*
 * kern and tpool: accuracy against double-precision references (max
 * relative error printed), bit identity of every kernel across all ISAs
 * this CPU has, batch/thread invariance of kern_matmul, exp special values,
 * f16/bf16 conversions, and the thread pool (correctness, dispatch cost).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/gguf.h"
#include "format/half.h"
#include "kernels/kern.h"
#include "kernels/mathf.h"
#include "qerr.h"
#include "format/quant.h"
#include "kernels/tpool.h"

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* Uniform in [-1, 1). */
static float rndf(void)
{
	return (float)((double)rnd32() / 2147483648.0 - 1.0);
}

static uint32_t f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	assert_non_null(p);
	return p;
}

static int n_isas(void)
{
	return kern_isa_detect() + 1;
}

static void use_isa(int isa)
{
	assert_int_equal(kern_set_isa(isa), QERR_OK);
}

/* Prints once which ISAs the cross-ISA tests compare. */
static void print_isas(void)
{
	static int done;
	if (done++)
		return;
	printf("[ INFO     ] comparing ISAs:");
	for (int i = 0; i < n_isas(); i++)
		printf(" %s", kern_isa_name(i));
	if (n_isas() <= KERN_ISA_LAST) {
		printf(" (not available here, NOT tested:");
		for (int i = n_isas(); i <= KERN_ISA_LAST; i++)
			printf(" %s", kern_isa_name(i));
		printf(")");
	}
	printf("\n");
}

static void assert_bits_equal(const float *a, const float *b, size_t n,
			      const char *what, int isa)
{
	for (size_t i = 0; i < n; i++) {
		if (f2u(a[i]) != f2u(b[i])) {
			print_error("%s: %s differs from scalar at %zu: "
				    "%a vs %a\n",
				    what, kern_isa_name(isa), i, a[i], b[i]);
			fail();
		}
	}
}

static size_t wrow_bytes(uint32_t wt, int K)
{
	return wt == GGML_TYPE_F32 ? (size_t)K * 4 :
	       wt == GGML_TYPE_Q8_0 ? (size_t)K / 32 * sizeof(ggml_block_q8_0) :
				      (size_t)K * 2;
}

/* Random weights: N rows of K. */
static void *make_weights(uint32_t wt, int K, int N)
{
	size_t rb = wrow_bytes(wt, K);
	char *W = xmalloc(rb * (size_t)N);
	for (int j = 0; j < N; j++) {
		char *row = W + rb * (size_t)j;
		for (int k = 0; k < (wt == GGML_TYPE_Q8_0 ? K / 32 : K); k++) {
			float v = rndf();
			switch (wt) {
			case GGML_TYPE_F32:
				((float *)row)[k] = v;
				break;
			case GGML_TYPE_F16:
				((uint16_t *)row)[k] = half_f32_to_f16(v);
				break;
			case GGML_TYPE_BF16:
				((uint16_t *)row)[k] = half_f32_to_bf16(v);
				break;
			default: {
				ggml_block_q8_0 *b = (ggml_block_q8_0 *)row + k;
				b->d = half_f32_to_f16(0.001f + 0.02f * fabsf(v));
				for (int l = 0; l < 32; l++)
					b->qs[l] = (int8_t)(rnd32() % 256 - 128);
			}
			}
		}
	}
	return W;
}

static float *make_vec(size_t n, float scale)
{
	float *v = xmalloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		v[i] = scale * rndf();
	return v;
}

/* ---- conversions ---------------------------------------------------------- */

static double f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double s = (h & 0x8000) ? -1.0 : 1.0;
	if (e == 0)
		return s * ldexp(m, -24);
	return s * ldexp(1024 + m, e - 25);
}

static void test_f16_decode(void **state)
{
	(void)state;
	uint16_t *h = xmalloc(65536 * 2);
	float *ref = xmalloc(65536 * 4), *got = xmalloc(65536 * 4);
	for (int i = 0; i < 65536; i++) {
		h[i] = (uint16_t)i;
		ref[i] = half_f16_to_f32(h[i]);
		int e = (i >> 10) & 0x1f;
		if (e != 0x1f) {
			assert_true((double)ref[i] == f16_value(h[i]));
			assert_int_equal(f2u(ref[i]) >> 31, (unsigned)i >> 15);
			/* round trip of every finite half, subnormals too */
			assert_int_equal(half_f32_to_f16(ref[i]), i);
		} else if (i & 0x3ff) {
			assert_true(isnan(ref[i]));
		} else {
			assert_true(isinf(ref[i]));
			assert_int_equal(half_f32_to_f16(ref[i]), i);
		}
	}
	print_isas();
	for (int isa = 1; isa < n_isas(); isa++) {
		use_isa(isa);
		kern_row_f32(h, GGML_TYPE_F16, 65536, 0, got);
		assert_bits_equal(ref, got, 65536, "f16 decode (incl. NaNs)", isa);
	}
	use_isa(kern_isa_detect());
	free(h);
	free(ref);
	free(got);
}

/* Nearest-even f16 of f by brute force over the neighbours. */
static uint16_t f16_ref(float f)
{
	if (isnan(f))
		return 0; /* not used */
	double a = fabs((double)f);
	uint16_t s = signbit(f) ? 0x8000 : 0;
	if (a >= 65520.0)
		return s | 0x7c00;
	/* largest half magnitude <= a */
	uint16_t lo = 0;
	for (int bit = 14; bit >= 0; bit--) {
		uint16_t t = lo | (uint16_t)(1 << bit);
		if (t <= 0x7bff && f16_value(t) <= a)
			lo = t;
	}
	if (lo == 0x7bff && a > 65504.0)
		return s | 0x7bff;
	double dl = a - f16_value(lo), dh = f16_value(lo + 1) - a;
	if (dl < dh || (dl == dh && !(lo & 1)))
		return s | lo;
	return s | (uint16_t)(lo + 1);
}

static void test_f16_encode(void **state)
{
	(void)state;
	/* Every midpoint between adjacent halves (exact ties), a float ulp
	 * either side, plus a stride walk over all floats. */
	size_t n = 0, cap = 65536 * 4 + (1u << 20) + 64;
	float *f = xmalloc(cap * 4);
	for (uint32_t h = 0; h < 0x7bff; h++) {
		float mid = (float)((f16_value((uint16_t)h) +
				     f16_value((uint16_t)(h + 1))) / 2);
		f[n++] = mid;
		f[n++] = nextafterf(mid, 0);
		f[n++] = -nextafterf(mid, INFINITY);
		f[n++] = -(float)f16_value((uint16_t)h);
	}
	for (uint64_t u = 0; u < (1ull << 32); u += 4099)
		f[n++] = u2f((uint32_t)u);
	const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, 65504.0f,
				 65519.996f, 65520.0f, 1e10f, 0x1p-25f,
				 0x1.000002p-25f, 0x1p-24f, 0x1.8p-24f,
				 0x1.4p-23f, 0x1p-30f, 0x1p-14f, 1.0f / 3.0f};
	for (size_t i = 0; i < sizeof(special) / sizeof(*special); i++)
		f[n++] = special[i];
	uint16_t *ref = xmalloc(n * 2), *got = xmalloc(n * 2);
	size_t checked = 0;
	for (size_t i = 0; i < n; i++) {
		ref[i] = half_f32_to_f16(f[i]);
		if (isnan(f[i])) {
			assert_true((ref[i] & 0x7c00) == 0x7c00 && (ref[i] & 0x3ff));
			continue;
		}
		if (fabsf(f[i]) < 70000.0f || isinf(f[i])) {
			if (ref[i] != f16_ref(f[i])) {
				print_error("f32->f16 %a: %04x, want %04x\n",
					    f[i], ref[i], f16_ref(f[i]));
				fail();
			}
			checked++;
		} else {
			assert_int_equal(ref[i] & 0x7fff, 0x7c00);
		}
	}
	printf("[ INFO     ] f32->f16: %zu values checked against nearest-even\n",
	       checked);
	/* hardware conversion (F16C) must agree bit for bit, NaNs included */
	for (int isa = 1; isa < n_isas(); isa++) {
		use_isa(isa);
		kern_f32_to_f16_row(f, got, (int)n);
		for (size_t i = 0; i < n; i++)
			if (got[i] != ref[i]) {
				print_error("%s f32->f16 %a (%08x): %04x vs %04x\n",
					    kern_isa_name(isa), f[i], f2u(f[i]),
					    got[i], ref[i]);
				fail();
			}
	}
	use_isa(kern_isa_detect());
	free(f);
	free(ref);
	free(got);
}

static void test_bf16(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = half_bf16_to_f32((uint16_t)h);
		assert_int_equal(f2u(f), h << 16);
		if (!isnan(f))
			assert_int_equal(half_f32_to_bf16(f), h);
	}
	struct {
		uint32_t in;
		uint16_t out;
	} cases[] = {
		{0x3f808000, 0x3f80}, /* tie, even stays */
		{0x3f818000, 0x3f82}, /* tie, odd rounds up */
		{0x3f808001, 0x3f81}, {0x3f807fff, 0x3f80},
		{0x7f7fffff, 0x7f80}, /* rounds to inf */
		{0x7fc00001, 0x7fc0}, {0x7f800001, 0x7fc0}, /* NaN stays NaN */
		{0x80000001, 0x8000},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		assert_int_equal(half_f32_to_bf16(u2f(cases[i].in)), cases[i].out);
}

/* ---- exp ------------------------------------------------------------------ */

/* Error of got against the exact e in units of the float ulp at e (the
 * subnormal ulp 2^-149 below the normal range). */
static double ulp_err(float got, double e)
{
	int ex;
	if (isinf(got)) /* right iff e rounds up past FLT_MAX */
		return e >= 0x1p128 - 0x1p103 ? 0 : (0x1p128 - e) / 0x1p104;
	frexp(e, &ex);
	double ulp = ldexp(1.0, (ex - 24 < -149) ? -149 : ex - 24);
	return fabs((double)got - e) / ulp;
}

static void test_expf_accuracy(void **state)
{
	(void)state;
	double maxn = 0, maxs = 0;
	float worst = 0;
	/* every float in [-104, 89] with a stride, both signs */
	for (uint32_t u = 0; u < 0x42b20000; u += 97) {
		for (int s = 0; s < 2; s++) {
			float x = s ? -u2f(u) : u2f(u);
			if (x < -104.0f)
				continue;
			double e = exp((double)x);
			float got = mathf_exp(x);
			double err = ulp_err(got, e);
			if (e >= 0x1p-126) {
				if (err > maxn) {
					maxn = err;
					worst = x;
				}
			} else if (err > maxs) {
				maxs = err;
			}
		}
	}
	printf("[ INFO     ] mathf_exp max error: %.3f ulp normal (at %a), "
	       "%.3f subnormal ulp\n", maxn, worst, maxs);
	assert_true(maxn <= 2.0);
	assert_true(maxs <= 1.0);
}

/* kern_tanhf: close to tanh everywhere (absolute error: it feeds GELU and
 * logit soft-capping, where absolute error is what counts), odd, exact
 * saturation, NaN through; kern_gelu_mul against the double formula. */
static void test_tanh_gelu(void **state)
{
	double maxa = 0, maxg = 0;

	(void)state;
	for (int i = -200000; i <= 200000; i++) {
		float x = (float)i * 1e-4f;
		float t = kern_tanhf(x);
		double e = tanh((double)x);

		maxa = fmax(maxa, fabs(t - e));
		assert_true(memcmp(&(float){-t}, &(float){kern_tanhf(-x)},
				   4) == 0);
		if (x != 0.0f)
			assert_true(fabs(t - e) <= 1e-6 * fabs(e) + 2e-7);
	}
	assert_true(kern_tanhf(30.0f) == 1.0f && kern_tanhf(-30.0f) == -1.0f);
	assert_true(isnan(kern_tanhf(NAN)));
	for (int i = -3000; i <= 3000; i++) {
		float g = (float)i * 3e-3f, u = 1.5f;
		double gd = g, want = 0.5 * gd * (1.0 + tanh(sqrt(2.0 / M_PI) *
				(gd + 0.044715 * gd * gd * gd))) * 1.5;

		kern_gelu_mul(&g, &u, 1);
		maxg = fmax(maxg, fabs(g - want));
	}
	printf("[ INFO     ] kern_tanhf max abs error %.3g; gelu %.3g\n",
	       maxa, maxg);
	assert_true(maxa <= 3e-7);
	assert_true(maxg <= 3e-6);
}

static void test_expf_special(void **state)
{
	(void)state;
	struct {
		const char *name;
		float x;
		float want; /* NAN: result must be NaN */
	} cases[] = {
		{"zero", 0.0f, 1.0f},
		{"minus zero", -0.0f, 1.0f},
		{"one", 1.0f, (float)M_E},
		{"+inf", INFINITY, INFINITY},
		{"-inf", -INFINITY, 0.0f},
		{"nan", NAN, NAN},
		{"overflow 88.73", 88.73f, INFINITY},
		{"overflow 89", 89.0f, INFINITY},
		{"overflow 1e30", 1e30f, INFINITY},
		{"below subnormal", -104.0f, 0.0f},
		{"far below", -1e30f, 0.0f},
		{"ln max", 88.7228f, (float)exp(88.7228)},
		{"ln min normal", -87.33654f, (float)exp(-87.33654)},
		{"subnormal", -100.0f, (float)exp(-100.0)},
		{"smallest", -103.2789f, 0x1p-149f},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		float got = mathf_exp(cases[i].x);
		if (isnan(cases[i].want)) {
			assert_true(isnan(got));
			continue;
		}
		double err = isinf(cases[i].want) || cases[i].want == 0.0f ?
				     (got == cases[i].want ? 0 : 99) :
				     ulp_err(got, exp((double)cases[i].x));
		if (err > 2.0) {
			print_error("expf %s (%a): %a, want %a\n", cases[i].name,
				    cases[i].x, got, cases[i].want);
			fail();
		}
	}
	/* results are >= 0 and monotone on a fine grid */
	float prev = 0;
	for (float x = -110.0f; x < 90.0f; x += 0.001f) {
		float e = mathf_exp(x);
		assert_true(e >= prev);
		prev = e;
	}
}

/* ---- element-wise and reduction kernels: accuracy + cross-ISA ------------ */

enum fn {
	F_DOT, F_DOT_F16, F_RMSNORM, F_SILU, F_SOFTMAX, F_AXPY, F_AXPY_F16,
	F_ROW_Q8, F_ROW_BF16,
};

struct vcase {
	const char *name;
	enum fn fn;
	int n;
};

static const struct vcase vcases[] = {
	{"dot n=1", F_DOT, 1},
	{"dot n=15", F_DOT, 15},
	{"dot n=16", F_DOT, 16},
	{"dot n=896", F_DOT, 896},
	{"dot n=1001", F_DOT, 1001},
	{"dot_f16 n=7", F_DOT_F16, 7},
	{"dot_f16 n=128", F_DOT_F16, 128},
	{"dot_f16 n=333", F_DOT_F16, 333},
	{"rmsnorm n=5", F_RMSNORM, 5},
	{"rmsnorm n=896", F_RMSNORM, 896},
	{"rmsnorm n=1003", F_RMSNORM, 1003},
	{"silu_mul n=3", F_SILU, 3},
	{"silu_mul n=4864", F_SILU, 4864},
	{"silu_mul n=4871", F_SILU, 4871},
	{"softmax n=1", F_SOFTMAX, 1},
	{"softmax n=9", F_SOFTMAX, 9},
	{"softmax n=100", F_SOFTMAX, 100},
	{"softmax n=151936", F_SOFTMAX, 151936},
	{"axpy n=13", F_AXPY, 13},
	{"axpy n=1000", F_AXPY, 1000},
	{"axpy_f16 n=9", F_AXPY_F16, 9},
	{"axpy_f16 n=1000", F_AXPY_F16, 1000},
	{"row_f32 q8_0 K=4864", F_ROW_Q8, 4864},
	{"row_f32 bf16 K=77", F_ROW_BF16, 77},
};

/* Runs case c on fresh copies of the inputs; out gets n (or 1) floats. */
static void run_vcase(const struct vcase *c, const float *a, const float *b,
		      const uint16_t *h, const void *q8, float *out)
{
	int n = c->n;
	switch (c->fn) {
	case F_DOT:
		out[0] = kern_dot(a, b, n);
		break;
	case F_DOT_F16:
		out[0] = kern_dot_f16(a, h, n);
		break;
	case F_RMSNORM:
		kern_rmsnorm(a, b, n, 1e-6f, out);
		break;
	case F_SILU:
		memcpy(out, a, (size_t)n * 4);
		kern_silu_mul(out, b, n);
		break;
	case F_SOFTMAX:
		memcpy(out, a, (size_t)n * 4);
		kern_softmax(out, n);
		break;
	case F_AXPY:
		memcpy(out, b, (size_t)n * 4);
		kern_axpy(out, 0.37f, a, n);
		break;
	case F_AXPY_F16:
		memcpy(out, b, (size_t)n * 4);
		kern_axpy_f16(out, -1.7f, h, n);
		break;
	case F_ROW_Q8:
		kern_row_f32(q8, GGML_TYPE_Q8_0, n, 1, out);
		break;
	case F_ROW_BF16:
		kern_row_f32(h, GGML_TYPE_BF16, n, 0, out);
		break;
	}
}

/* Double-precision reference; returns the max relative error of out
 * (relative to the magnitude of the terms involved). */
static double ref_err(const struct vcase *c, const float *a, const float *b,
		      const uint16_t *h, const void *q8, const float *out)
{
	int n = c->n;
	double maxe = 0;
	switch (c->fn) {
	case F_DOT:
	case F_DOT_F16: {
		double s = 0, mag = 0;
		for (int i = 0; i < n; i++) {
			double w = c->fn == F_DOT ? b[i] : half_f16_to_f32(h[i]);
			s += (double)a[i] * w;
			mag += fabs((double)a[i] * w);
		}
		return fabs(out[0] - s) / mag;
	}
	case F_RMSNORM: {
		double ss = 0;
		for (int i = 0; i < n; i++)
			ss += (double)a[i] * a[i];
		double s = 1.0 / sqrt(ss / n + 1e-6);
		for (int i = 0; i < n; i++) {
			double r = a[i] * s * b[i];
			double e = fabs(out[i] - r) / (fabs(r) + 1e-30);
			maxe = e > maxe ? e : maxe;
		}
		return maxe;
	}
	case F_SILU:
		for (int i = 0; i < n; i++) {
			double v = a[i];
			double r = v / (1 + exp(-v)) * b[i];
			double e = fabs(out[i] - r) / (fabs(r) + 1e-30);
			maxe = e > maxe ? e : maxe;
		}
		return maxe;
	case F_SOFTMAX: {
		double mx = a[0], s = 0;
		for (int i = 0; i < n; i++)
			mx = a[i] > mx ? a[i] : mx;
		for (int i = 0; i < n; i++)
			s += exp((double)a[i] - mx);
		for (int i = 0; i < n; i++) {
			double r = exp((double)a[i] - mx) / s;
			double e = fabs(out[i] - r) / r;
			maxe = e > maxe ? e : maxe;
		}
		return maxe;
	}
	case F_AXPY:
	case F_AXPY_F16:
		for (int i = 0; i < n; i++) {
			double r = c->fn == F_AXPY ?
					   (double)0.37f * a[i] + b[i] :
					   (double)-1.7f * half_f16_to_f32(h[i]) + b[i];
			double e = fabs(out[i] - r) / (fabs(r) + 1e-30);
			maxe = e > maxe ? e : maxe;
		}
		return maxe;
	case F_ROW_Q8: {
		const ggml_block_q8_0 *blk =
			(const ggml_block_q8_0 *)q8 + (size_t)n / 32;
		for (int i = 0; i < n; i++) {
			double r = f16_value(blk[i / 32].d) * blk[i / 32].qs[i % 32];
			if ((double)out[i] != r)
				return 1.0; /* must be exact */
		}
		return 0;
	}
	case F_ROW_BF16:
		for (int i = 0; i < n; i++)
			if (f2u(out[i]) != (uint32_t)h[i] << 16)
				return 1.0;
		return 0;
	}
	return 1.0;
}

static void test_vector_kernels(void **state)
{
	(void)state;
	print_isas();
	for (size_t ci = 0; ci < sizeof(vcases) / sizeof(*vcases); ci++) {
		const struct vcase *c = &vcases[ci];
		int n = c->n;
		float *a = make_vec((size_t)n, c->fn == F_SOFTMAX ? 12.0f : 6.0f);
		float *b = make_vec((size_t)n, 2.0f);
		uint16_t *h = xmalloc((size_t)n * 2);
		for (int i = 0; i < n; i++)
			h[i] = half_f32_to_f16(rndf());
		void *q8 = make_weights(GGML_TYPE_Q8_0, (n + 31) / 32 * 32, 2);
		float *ref = xmalloc((size_t)n * 4), *got = xmalloc((size_t)n * 4);
		int nout = c->fn == F_DOT || c->fn == F_DOT_F16 ? 1 : n;

		use_isa(KERN_ISA_SCALAR);
		run_vcase(c, a, b, h, q8, ref);
		double err = ref_err(c, a, b, h, q8, ref);
		printf("[ INFO     ] %-22s max rel err %.2e\n", c->name, err);
		/* softmax: x - max rounds (|x| <= 12, ~2^-20 absolute) and
		 * the sum of n terms rounds: both are a common scale */
		double tol = c->fn == F_SOFTMAX ? 2e-5 :
			     c->fn == F_ROW_Q8 || c->fn == F_ROW_BF16 ? 0 :
									 1e-6;
		if (err > tol) {
			print_error("%s: error %.3g > %.3g\n", c->name, err, tol);
			fail();
		}
		for (int isa = 1; isa < n_isas(); isa++) {
			use_isa(isa);
			run_vcase(c, a, b, h, q8, got);
			assert_bits_equal(ref, got, (size_t)nout, c->name, isa);
		}
		use_isa(kern_isa_detect());
		free(a);
		free(b);
		free(h);
		free(q8);
		free(ref);
		free(got);
	}
}

/* silu (hence the vector exp) on a sweep of inputs over the whole float
 * range, NaN/inf included: every ISA gives the scalar bits. */
static void test_exp_cross_isa(void **state)
{
	(void)state;
	size_t n = 0, cap = (1u << 20) + 16;
	float *x = xmalloc(cap * 4), *u = xmalloc(cap * 4);
	float *ref = xmalloc(cap * 4), *got = xmalloc(cap * 4);
	for (uint64_t v = 0; v < (1ull << 32); v += 4111)
		x[n++] = u2f((uint32_t)v);
	for (int i = 0; i < 8; i++)
		x[n++] = (float[]){NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f,
				   104.0f, -88.8f}[i];
	for (size_t i = 0; i < n; i++)
		u[i] = 1.0f;
	memcpy(ref, x, n * 4);
	use_isa(KERN_ISA_SCALAR);
	kern_silu_mul(ref, u, (int)n);
	for (int isa = 1; isa < n_isas(); isa++) {
		use_isa(isa);
		memcpy(got, x, n * 4);
		kern_silu_mul(got, u, (int)n);
		assert_bits_equal(ref, got, n, "silu sweep", isa);
	}
	/* softmax over a row with extreme spreads (subnormal exps) */
	for (size_t i = 0; i < 1000; i++)
		x[i] = -110.0f + 0.11f * (float)i;
	use_isa(KERN_ISA_SCALAR);
	memcpy(ref, x, 1000 * 4);
	kern_softmax(ref, 1000);
	for (int isa = 1; isa < n_isas(); isa++) {
		use_isa(isa);
		memcpy(got, x, 1000 * 4);
		kern_softmax(got, 1000);
		assert_bits_equal(ref, got, 1000, "softmax spread", isa);
	}
	use_isa(kern_isa_detect());
	free(x);
	free(u);
	free(ref);
	free(got);
}

/* ---- matmul --------------------------------------------------------------- */

struct mcase {
	const char *name;
	uint32_t wt;
	int K, N;
	int bias;
};

static const struct mcase mcases[] = {
	{"f32 K=333 N=70", GGML_TYPE_F32, 333, 70, 1},
	{"f32 K=7 N=19", GGML_TYPE_F32, 7, 19, 0},
	{"f16 K=333 N=70", GGML_TYPE_F16, 333, 70, 0},
	{"f16 K=519 N=33", GGML_TYPE_F16, 519, 33, 1},
	{"bf16 K=301 N=51", GGML_TYPE_BF16, 301, 51, 1},
	{"q8_0 K=544 N=70", GGML_TYPE_Q8_0, 544, 70, 1},
	{"q8_0 K=32 N=17", GGML_TYPE_Q8_0, 32, 17, 0},
	{"q8_0 K=896 N=48", GGML_TYPE_Q8_0, 896, 48, 0},
};

static void test_matmul_accuracy(void **state)
{
	(void)state;
	for (size_t ci = 0; ci < sizeof(mcases) / sizeof(*mcases); ci++) {
		const struct mcase *c = &mcases[ci];
		int K = c->K, N = c->N, M = 5;
		void *W = make_weights(c->wt, K, N);
		float *x = make_vec((size_t)M * K, 1.0f);
		float *bias = c->bias ? make_vec((size_t)N, 1.0f) : NULL;
		float *y = xmalloc((size_t)M * N * 4), *w = xmalloc((size_t)K * 4);
		for (int act = quant_is_quant(c->wt) ? KERN_ACT_INT : KERN_ACT_F32;
		     act <= KERN_ACT_F32; act++) {
		kern_set_activations(act);
		double maxe = 0;
		for (int isa = 0; isa < n_isas(); isa++) {
			use_isa(isa);
			kern_matmul(NULL, W, c->wt, K, N, bias, x, K, M, y, N);
			for (int j = 0; j < N; j++) {
				use_isa(KERN_ISA_SCALAR);
				kern_row_f32(W, c->wt, K, j, w);
				use_isa(isa);
				for (int m = 0; m < M; m++) {
					double s = 0, mag = 0;
					for (int k = 0; k < K; k++) {
						s += (double)x[m * K + k] * w[k];
						mag += fabs((double)x[m * K + k] * w[k]);
					}
					if (bias) {
						s += bias[j];
						mag += fabs(bias[j]);
					}
					double e = fabs(y[m * N + j] - s) / mag;
					maxe = e > maxe ? e : maxe;
				}
			}
		}
		printf("[ INFO     ] matmul %-18s %s max rel err %.2e\n", c->name,
		       act == KERN_ACT_INT ? "int" : "f32", maxe);
		/* quantized weights: 8-bit activations by default, the
		 * exact f32 path on request */
		assert_true(maxe < (act == KERN_ACT_INT ? 1e-2 : 1e-6));
		}
		kern_set_activations(KERN_ACT_INT);
		use_isa(kern_isa_detect());
		free(W);
		free(x);
		free(bias);
		free(y);
		free(w);
	}
}

/*
 * Batch invariance: every row's output equals, bit for bit, the scalar
 * M = 1 single-thread result for that row, whatever the batch size, the
 * row's position in the batch, the pool size and the ISA.
 */
static void test_matmul_invariance(void **state)
{
	(void)state;
	static const int Ms[] = {1, 3, 17, 64, 130};
	static const int threads[] = {1, 2, 3};
	tpool *pools[3];
	for (int t = 0; t < 3; t++)
		assert_int_equal(tpool_new(threads[t], &pools[t]), QERR_OK);
	print_isas();
	for (size_t ci = 0; ci < sizeof(mcases) / sizeof(*mcases); ci++) {
		const struct mcase *c = &mcases[ci];
		int K = c->K, N = c->N, ldx = K + 3, ldy = N + 5;
		int Mmax = 130;
		void *W = make_weights(c->wt, K, N);
		float *bias = c->bias ? make_vec((size_t)N, 1.0f) : NULL;
		/* pool of distinct rows; row r's reference is M = 1, scalar */
		float *rows = make_vec((size_t)Mmax * 2 * K, 1.0f);
		float *ref = xmalloc((size_t)Mmax * 2 * N * 4);
		use_isa(KERN_ISA_SCALAR);
		for (int r = 0; r < Mmax * 2; r++)
			kern_matmul(NULL, W, c->wt, K, N, bias, rows + (size_t)r * K,
				    K, 1, ref + (size_t)r * N, N);
		float *x = xmalloc((size_t)Mmax * ldx * 4);
		float *y = xmalloc((size_t)Mmax * ldy * 4);
		int compared = 0;
		for (int isa = 0; isa < n_isas(); isa++) {
			use_isa(isa);
			for (size_t mi = 0; mi < sizeof(Ms) / sizeof(*Ms); mi++) {
				int M = Ms[mi];
				if (isa == KERN_ISA_SCALAR && M > 17)
					continue; /* slow, and the same code */
				for (int t = 0; t < 3; t++) {
					/* a different selection and order of rows
					 * per configuration */
					int pick[130];
					int off = (int)(rnd32() % (unsigned)Mmax);
					for (int m = 0; m < M; m++) {
						pick[m] = (off + m * 7) % (Mmax * 2);
						memcpy(x + (size_t)m * ldx,
						       rows + (size_t)pick[m] * K,
						       (size_t)K * 4);
					}
					kern_matmul(pools[t], W, c->wt, K, N, bias, x,
						    ldx, M, y, ldy);
					for (int m = 0; m < M; m++) {
						for (int j = 0; j < N; j++) {
							float a = y[(size_t)m * ldy + j];
							float b = ref[(size_t)pick[m] * N + j];
							if (f2u(a) != f2u(b)) {
								print_error(
									"%s: isa %s M=%d threads=%d row %d col %d: %a vs %a\n",
									c->name, kern_isa_name(isa), M,
									threads[t], m, j, a, b);
								fail();
							}
						}
					}
					compared++;
				}
			}
		}
		printf("[ INFO     ] matmul %-18s %d configurations bit-identical\n",
		       c->name, compared);
		free(W);
		free(bias);
		free(rows);
		free(ref);
		free(x);
		free(y);
	}
	use_isa(kern_isa_detect());
	for (int t = 0; t < 3; t++)
		tpool_free(&pools[t]);
}

/* ---- attention kernels ---------------------------------------------------- */

/* kern_att_scores / kern_att_values against their definition, one
 * kern_dot_f16 (kern_dot) per score and one kern_axpy_f16 (kern_axpy) per
 * value in order, computed on the scalar ISA: bit for bit on every ISA, for
 * head sizes with and without partial 16- and 8-lane chunks (and one wider
 * than the AVX2 key buffer), 1..8 query heads, short and long key runs,
 * strided rows, an infinite key element; entries outside the outputs stay
 * untouched. */
static void test_att_kernels(void **state)
{
	(void)state;
	static const int hds[] = {8, 10, 16, 24, 40, 64, 72, 80, 96, 128, 136,
				  200, 256, 520};
	static const int nts[] = {1, 7, 8, 9, 16, 21};
	const float scale = 0.125f, sentinel = -12345.0f;
	int checked = 0;

	print_isas();
	for (int kti = 0; kti < 2; kti++)
	for (size_t hi = 0; hi < sizeof(hds) / sizeof(*hds); hi++)
	for (int G = 1; G <= 8; G++)
	for (size_t ni = 0; ni < sizeof(nts) / sizeof(*nts); ni++) {
		uint32_t kt = kti ? GGML_TYPE_F32 : GGML_TYPE_F16;
		int hd = hds[hi], nt = nts[ni];
		int ldq = hd + 3, ldo = hd + 1, lds = nt + 2;
		size_t ldk = (size_t)hd * 2 + 5, es = kti ? 4 : 2;
		float *q = make_vec((size_t)G * ldq, 1.0f);
		char *k = xmalloc(ldk * nt * es), *v = xmalloc(ldk * nt * es);
		float *o0 = make_vec((size_t)G * ldo, 1.0f);
		float *sw = make_vec((size_t)G * lds, 0.5f);
		float *sref = xmalloc((size_t)G * lds * 4);
		float *sgot = xmalloc((size_t)G * lds * 4);
		float *oref = xmalloc((size_t)G * ldo * 4);
		float *ogot = xmalloc((size_t)G * ldo * 4);

		for (size_t e = 0; e < ldk * nt; e++) {
			float a = 2.0f * rndf(), b = 2.0f * rndf();
			if (kti) {
				((float *)k)[e] = a;
				((float *)v)[e] = b;
			} else {
				((uint16_t *)k)[e] = half_f32_to_f16(a);
				((uint16_t *)v)[e] = half_f32_to_f16(b);
			}
		}
		if (nt > 7 && G > 4) { /* an inf: the sums of row 2 are inf/NaN */
			if (kti)
				((float *)k)[2 * ldk + 3] = INFINITY;
			else
				((uint16_t *)k)[2 * ldk + 3] = 0x7c00;
		}
		for (int i = 0; i < G * lds; i++)
			sref[i] = sentinel;
		memcpy(oref, o0, (size_t)G * ldo * 4);
		use_isa(KERN_ISA_SCALAR);
		for (int i = 0; i < G; i++)
			for (int t = 0; t < nt; t++) {
				const float *qi = q + (size_t)i * ldq;
				float d = kti ? kern_dot(qi, (const float *)k +
							 t * ldk, hd)
					      : kern_dot_f16(qi, (const uint16_t *)k +
							     t * ldk, hd);
				sref[i * lds + t] = d * scale;
			}
		for (int i = 0; i < G; i++)
			for (int t = 0; t < nt; t++) {
				float *y = oref + (size_t)i * ldo;
				float a = sw[i * lds + t];
				if (kti)
					kern_axpy(y, a, (const float *)v + t * ldk,
						  hd);
				else
					kern_axpy_f16(y, a, (const uint16_t *)v +
						      t * ldk, hd);
			}
		for (int isa = 0; isa < n_isas(); isa++) {
			use_isa(isa);
			for (int i = 0; i < G * lds; i++)
				sgot[i] = sentinel;
			memcpy(ogot, o0, (size_t)G * ldo * 4);
			kern_att_scores(q, ldq, G, k, ldk, kt, nt, hd, scale,
					sgot, lds);
			kern_att_values(ogot, ldo, G, sw, lds, v, ldk, kt, nt,
					hd);
			char what[96];
			snprintf(what, sizeof(what), "att_scores %s hd %d G %d nt %d",
				 kti ? "f32" : "f16", hd, G, nt);
			assert_bits_equal(sref, sgot, (size_t)G * lds, what, isa);
			snprintf(what, sizeof(what), "att_values %s hd %d G %d nt %d",
				 kti ? "f32" : "f16", hd, G, nt);
			assert_bits_equal(oref, ogot, (size_t)G * ldo, what, isa);
			checked++;
		}
		free(q);
		free(k);
		free(v);
		free(o0);
		free(sw);
		free(sref);
		free(sgot);
		free(oref);
		free(ogot);
	}
	use_isa(kern_isa_detect());
	printf("[ INFO     ] attention kernels: %d cases bit-identical\n",
	       checked);
}

/* kern.h's Q8_0 score, written out here: the query quantized per 32 by
 * quant_act_row, then per block in order acc = fmaf(da * dk, (float)S,
 * acc) from +0, S the codes' exact dot; times the scale. */
static float q8_score_ref(const float *q, const ggml_block_q8_0 *k, int n,
			  float scale)
{
	quant_arow a;
	void *buf = malloc(quant_arow_bytes(n, 32));
	float acc = 0.0f;

	assert_non_null(buf);
	quant_arow_bind(&a, buf, n, 32);
	quant_act_row(q, n, 32, &a);
	for (int b = 0; b < n / 32; b++) {
		int32_t S = 0;

		for (int e = 0; e < 32; e++)
			S += (int32_t)k[b].qs[e] * a.q[32 * b + e];
		acc = fmaf(a.d[b] * half_f16_to_f32(k[b].d), (float)S, acc);
	}
	free(buf);
	return acc * scale;
}

/* The q8_0 KV cache's attention. Scores: an integer dot of the query
 * quantized per 32 (q8_score_ref), bit for bit on every ISA, through
 * kern_att_scores and through kern_att_scores_q8 with the queries
 * quantized once (kern_att_q8_prep), 16-key tiles short and whole.
 * Values: each element its exact f32 value d * q in kern_axpy's
 * operations (computed on the scalar ISA from the dequantized rows).
 * Head sizes of 1..17 blocks, strided rows (ld a multiple of 32), 1..8
 * query heads, short and long runs, an infinite scale (inf and NaN
 * sums); entries outside the outputs stay untouched. */
static void test_att_kernels_q8(void **state)
{
	(void)state;
	static const int hds[] = {32, 64, 96, 128, 256, 544};
	static const int nts[] = {1, 7, 8, 9, 16, 17, 21, 40};
	const float scale = 0.125f, sentinel = -12345.0f;

	print_isas();
	for (size_t hi = 0; hi < sizeof(hds) / sizeof(*hds); hi++)
	for (int G = 1; G <= 9; G++)
	for (size_t ni = 0; ni < sizeof(nts) / sizeof(*nts); ni++) {
		int hd = hds[hi], nt = nts[ni];
		int ldq = hd + 3, ldo = hd + 1, lds = nt + 2;
		size_t ldk = (size_t)hd * 2 + 32, nb = ldk / 32 * nt;
		float *q = make_vec((size_t)G * ldq, 1.0f);
		ggml_block_q8_0 *k = xmalloc(nb * sizeof(*k));
		ggml_block_q8_0 *v = xmalloc(nb * sizeof(*v));
		float *kf = xmalloc(ldk * nt * 4), *vf = xmalloc(ldk * nt * 4);
		float *o0 = make_vec((size_t)G * ldo, 1.0f);
		float *sw = make_vec((size_t)G * lds, 0.5f);
		float *sref = xmalloc((size_t)G * lds * 4);
		float *sgot = xmalloc((size_t)G * lds * 4);
		float *oref = xmalloc((size_t)G * ldo * 4);
		float *ogot = xmalloc((size_t)G * ldo * 4);

		for (size_t b = 0; b < nb; b++) {
			k[b].d = half_f32_to_f16(0.01f + 0.02f * fabsf(rndf()));
			v[b].d = half_f32_to_f16(0.01f + 0.02f * fabsf(rndf()));
			for (int l = 0; l < 32; l++) {
				k[b].qs[l] = (int8_t)(rnd32() % 255 - 127);
				v[b].qs[l] = (int8_t)(rnd32() % 255 - 127);
			}
		}
		if (nt > 7 && G > 4) /* row 2's first block: scale inf */
			k[2 * ldk / 32].d = v[2 * ldk / 32].d = 0x7c00;
		for (size_t e = 0; e < ldk * nt; e++) {
			kf[e] = half_f16_to_f32(k[e / 32].d) *
				(float)k[e / 32].qs[e % 32];
			vf[e] = half_f16_to_f32(v[e / 32].d) *
				(float)v[e / 32].qs[e % 32];
		}
		for (int i = 0; i < G * lds; i++)
			sref[i] = sentinel;
		memcpy(oref, o0, (size_t)G * ldo * 4);
		use_isa(KERN_ISA_SCALAR);
		for (int i = 0; i < G; i++)
			for (int t = 0; t < nt; t++)
				sref[i * lds + t] = q8_score_ref(
					q + (size_t)i * ldq, k + t * ldk / 32, hd,
					scale);
		for (int i = 0; i < G; i++)
			for (int t = 0; t < nt; t++)
				kern_axpy(oref + (size_t)i * ldo, sw[i * lds + t],
					  vf + t * ldk, hd);
		for (int isa = 0; isa < n_isas(); isa++) {
			char what[96];

			use_isa(isa);
			for (int i = 0; i < G * lds; i++)
				sgot[i] = sentinel;
			memcpy(ogot, o0, (size_t)G * ldo * 4);
			kern_att_scores(q, ldq, G, k, ldk, GGML_TYPE_Q8_0, nt, hd,
					scale, sgot, lds);
			kern_att_values(ogot, ldo, G, sw, lds, v, ldk,
					GGML_TYPE_Q8_0, nt, hd);
			snprintf(what, sizeof(what),
				 "att_scores q8_0 hd %d G %d nt %d", hd, G, nt);
			assert_bits_equal(sref, sgot, (size_t)G * lds, what, isa);
			/* the queries quantized once, the keys in two calls */
			{
				void *qz = malloc(kern_att_q8_bytes(hd) * G + 64);
				void *qa = (void *)(((uintptr_t)qz + 63) &
						    ~(uintptr_t)63);
				int h = nt / 2;

				assert_non_null(qz);
				for (int i = 0; i < G * lds; i++)
					sgot[i] = sentinel;
				kern_att_q8_prep(q, ldq, G, hd, qa);
				kern_att_scores_q8(qa, G, k, ldk, h, hd, scale,
						   sgot, lds);
				kern_att_scores_q8(qa, G, k + h * ldk / 32, ldk,
						   nt - h, hd, scale, sgot + h,
						   lds);
				free(qz);
				snprintf(what, sizeof(what), "att_scores_q8 hd "
					 "%d G %d nt %d", hd, G, nt);
				assert_bits_equal(sref, sgot, (size_t)G * lds,
						  what, isa);
			}
			snprintf(what, sizeof(what),
				 "att_values q8_0 hd %d G %d nt %d", hd, G, nt);
			assert_bits_equal(oref, ogot, (size_t)G * ldo, what, isa);
		}
		free(q);
		free(k);
		free(v);
		free(kf);
		free(vf);
		free(o0);
		free(sw);
		free(sref);
		free(sgot);
		free(oref);
		free(ogot);
	}
	use_isa(kern_isa_detect());
}

/* ---- dispatch ------------------------------------------------------------- */

static void test_isa_select(void **state)
{
	(void)state;
	int best = kern_isa_detect();
	assert_int_equal(kern_set_isa(-1), QERR_ARG);
	assert_int_equal(kern_set_isa(KERN_ISA_LAST + 1), QERR_ARG);
	for (int i = 0; i <= KERN_ISA_LAST; i++) {
		int rc = kern_set_isa(i);
		assert_int_equal(rc, i <= best ? QERR_OK : QERR_UNSUPPORTED);
		if (rc == QERR_OK)
			assert_int_equal(kern_isa(), i);
	}
	assert_string_equal(kern_isa_name(KERN_ISA_AVX2), "avx2");
	assert_string_equal(kern_isa_name(KERN_ISA_AVX512VNNI), "avx512vnni");
	use_isa(best);
}

/* ---- tpool ---------------------------------------------------------------- */

struct tp_ctx {
	int *hits;
	int n;
};

static void tp_task(void *ctx, int i, int n)
{
	struct tp_ctx *c = ctx;
	assert_int_equal(n, c->n);
	__atomic_add_fetch(&c->hits[i], 1, __ATOMIC_RELAXED);
}

static void tp_empty(void *ctx, int i, int n)
{
	(void)ctx;
	(void)i;
	(void)n;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_tpool(void **state)
{
	(void)state;
	static const int sizes[] = {1, 2, 3, 4};
	int hits[257];
	struct tp_ctx c = {hits, 0};

	tpool_run(NULL, tp_task, &(struct tp_ctx){hits, 5}, 0);
	memset(hits, 0, sizeof(hits));
	c.n = 5;
	tpool_run(NULL, tp_task, &c, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(hits[i], 1);
	assert_int_equal(tpool_size(NULL), 1);
	tpool *bad;
	assert_int_equal(tpool_new(0, &bad), QERR_ARG);
	assert_null(bad);

	for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); s++) {
		tpool *p;
		assert_int_equal(tpool_new(sizes[s], &p), QERR_OK);
		assert_int_equal(tpool_size(p), sizes[s]);
		for (int it = 0; it < 20000; it++) {
			c.n = 1 + it % 257;
			memset(hits, 0, sizeof(int) * (size_t)c.n);
			tpool_run(p, tp_task, &c, c.n);
			for (int i = 0; i < c.n; i++)
				if (hits[i] != 1) {
					print_error("size %d iter %d: task %d ran %d times\n",
						    sizes[s], it, i, hits[i]);
					fail();
				}
		}
		/* dispatch cost: back to back, and after the workers slept */
		int reps = 100000;
		double t0 = now_s();
		for (int it = 0; it < reps; it++)
			tpool_run(p, tp_empty, NULL, sizes[s]);
		double hot = (now_s() - t0) / reps * 1e6;
		double idle[2] = {0, 0};
		for (int k = 0; k < 2; k++) {
			struct timespec nap = {0, k ? 5000000 : 100000};
			for (int it = 0; it < 20; it++) {
				nanosleep(&nap, NULL);
				t0 = now_s();
				tpool_run(p, tp_empty, NULL, sizes[s]);
				idle[k] += (now_s() - t0) / 20 * 1e6;
			}
		}
		printf("[ INFO     ] tpool %d threads: dispatch %.2f us back to "
		       "back, %.1f us after 0.1 ms idle, %.1f us after 5 ms\n",
		       sizes[s], hot, idle[0], idle[1]);
		tpool_free(&p);
		assert_null(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_isa_select),
		cmocka_unit_test(test_f16_decode),
		cmocka_unit_test(test_f16_encode),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_expf_accuracy),
		cmocka_unit_test(test_expf_special),
		cmocka_unit_test(test_tanh_gelu),
		cmocka_unit_test(test_exp_cross_isa),
		cmocka_unit_test(test_vector_kernels),
		cmocka_unit_test(test_att_kernels),
		cmocka_unit_test(test_att_kernels_q8),
		cmocka_unit_test(test_matmul_accuracy),
		cmocka_unit_test(test_matmul_invariance),
		cmocka_unit_test(test_tpool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

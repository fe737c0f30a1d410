/*
 * bench_kern — kern_matmul throughput: weights GB/s and GFLOP/s for Qwen2
 * 0.5B (and 1.5B) shapes, per ISA, weight type, batch size M and thread count, and
 * the share of the measured int8 peak (kern_measure_limits).
 *
 * Each call reads a different copy of W, cycling through >= 128 MB, so
 * weights come from DRAM as in a real decode step (a model's layers do
 * not fit in cache), not from L3.
 *
 * usage: bench_kern [-q | -k] [-p [-a]] [-r R] [-m M,M,...] [isa ...]
 *   -q  Q8_0 only (default Q8_0 and F16, on qwen2.5-0.5b's shapes)
 *   -p  the weights packed once (kern_pack), as the engine runs them,
 *       where the ISA packs the type (the "pk" column says which)
 *   -a  with -p: each call with or without the tiles' prefetch of their
 *       next block (kern_set_prefetch), alternating call by call, so the
 *       two see the same machine; a line after each row gives each's
 *       mean ms per call and off / on (above 1: the prefetch is faster)
 *   -k  Q4_K and Q6_K, on qwen2.5-1.5b's shapes (-q then: Q4_K only)
 *   -r  R timed windows of 0.1 s each, the fastest reported (default:
 *       one window of 0.3 s): on a machine shared with others, the best
 *       window is the kernel's own speed, the mean is the neighbours'
 *   -m  the activation row counts (default 1,4,8,16,32,64,200)
 *   isa avx2, avx512, ... (default every ISA of this CPU but scalar)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/gguf.h"
#include "kernels/kern.h"
#include "kernels/tpool.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t row_bytes(uint32_t wt, int K)
{
	return wt == GGML_TYPE_Q8_0 ? (size_t)K / 32 * sizeof(ggml_block_q8_0) :
	       wt == GGML_TYPE_Q4_K ? (size_t)K / QK_K * sizeof(ggml_block_q4_K) :
	       wt == GGML_TYPE_Q6_K ? (size_t)K / QK_K * sizeof(ggml_block_q6_K) :
	       wt == GGML_TYPE_F32  ? (size_t)K * 4 :
				      (size_t)K * 2;
}

static void fill(void *W, uint32_t wt, int K, int N, uint32_t seed)
{
	size_t n = row_bytes(wt, K) * (size_t)N;
	unsigned char *p = W;
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (unsigned char)(seed >> 24);
	}
	/* sane scales / halves: clear the exponent's top bit */
	if (wt == GGML_TYPE_Q8_0) {
		ggml_block_q8_0 *b = W;
		for (size_t i = 0; i < (size_t)N * (size_t)K / 32; i++)
			b[i].d &= 0x3bff;
	} else if (wt == GGML_TYPE_Q4_K) {
		ggml_block_q4_K *b = W;
		for (size_t i = 0; i < (size_t)N * (size_t)K / QK_K; i++) {
			b[i].d &= 0x3bff;
			b[i].dmin &= 0x3bff;
		}
	} else if (wt == GGML_TYPE_Q6_K) {
		ggml_block_q6_K *b = W;
		for (size_t i = 0; i < (size_t)N * (size_t)K / QK_K; i++)
			b[i].d &= 0x3bff;
	} else if (wt == GGML_TYPE_F16) {
		uint16_t *h = W;
		for (size_t i = 0; i < (size_t)N * (size_t)K; i++)
			h[i] &= 0xbbff;
	}
}

int main(int argc, char **argv)
{
	/* qwen2.5-0.5b's matrices; the k-quants' (whose rows are whole
	 * 256-blocks) are qwen2.5-1.5b's */
	static const int shapes05[][2] = {{896, 4864}, {4864, 896},
					  {896, 151936}};
	static const int shapes15[][2] = {{1536, 8960}, {8960, 1536},
					  {1536, 1536}};
	const int (*shapes)[2] = shapes05;
	static int Ms[16] = {1, 4, 8, 16, 32, 64, 200};
	int n_ms = 7;
	static const int threads[] = {1, 2};
	uint32_t types[] = {GGML_TYPE_Q8_0, GGML_TYPE_F16};
	int n_types = 2, isas[KERN_ISA_LAST + 1], n_isas = 0, pack = 0;
	int windows = 0, alt = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-q") == 0) {
			n_types = 1;
			continue;
		}
		if (strcmp(argv[i], "-p") == 0) {
			pack = 1;
			continue;
		}
		if (strcmp(argv[i], "-a") == 0) {
			alt = 1;
			continue;
		}
		if (strcmp(argv[i], "-k") == 0) {
			types[0] = GGML_TYPE_Q4_K;
			types[1] = GGML_TYPE_Q6_K;
			shapes = shapes15;
			continue;
		}
		if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
			char *e;
			long v = strtol(argv[++i], &e, 10);

			if (e == argv[i] || *e || v < 1 || v > 1000) {
				fprintf(stderr, "bench_kern: -r wants a window "
					"count 1..1000: %s\n", argv[i]);
				return 2;
			}
			windows = (int)v;
			continue;
		}
		if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
			char *e, *p = argv[++i];

			for (n_ms = 0; n_ms < 16 && *p; p = *e ? e + 1 : e) {
				long v = strtol(p, &e, 10);

				if (e == p || v < 1 || v > 200 ||
				    (*e && *e != ',')) {
					fprintf(stderr, "bench_kern: -m wants "
						"row counts 1..200: %s\n",
						argv[i]);
					return 2;
				}
				Ms[n_ms++] = (int)v;
			}
			continue;
		}
		for (int k = 0; k <= KERN_ISA_LAST; k++)
			if (strcmp(argv[i], kern_isa_name(k)) == 0 &&
			    n_isas <= KERN_ISA_LAST)
				isas[n_isas++] = k;
	}
	if (alt && !pack) {
		fprintf(stderr, "bench_kern: -a compares the packed tiles' "
			"prefetch: it needs -p\n");
		return 2;
	}
	if (n_isas == 0)
		for (int k = KERN_ISA_AVX2; k <= kern_isa_detect(); k++)
			isas[n_isas++] = k;

	tpool *pools[2];
	for (int t = 0; t < 2; t++)
		if (tpool_new(threads[t], &pools[t])) {
			fprintf(stderr, "tpool_new failed\n");
			return 1;
		}
	float *x = malloc(sizeof(float) * 200 * 8960);
	float *y = malloc(sizeof(float) * 200 * 151936);
	kern_limits lim[2];
	if (!x || !y)
		return 1;
	for (int i = 0; i < 200 * 8960; i++)
		x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
	/* the int8 peak of each thread count, for the share of it */
	for (int t = 0; t < 2; t++)
		kern_measure_limits(pools[t], &lim[t]);
	printf("int8 peak (%s): %.1f G MAC/s on 1 thread, %.1f on 2; read "
	       "%.1f / %.1f GB/s\n", kern_isa_name(kern_isa()),
	       lim[0].int8_macs / 1e9, lim[1].int8_macs / 1e9,
	       lim[0].read_bytes / 1e9, lim[1].read_bytes / 1e9);
	printf("%-10s %-5s %-13s %3s %2s %2s %9s %8s %8s %10s %7s\n", "isa",
	       "type", "K x N", "M", "T", "pk", "ms/call", "GB/s", "GFLOP/s",
	       "Mcol*row/s", "of peak");
	for (int ti = 0; ti < n_types; ti++) {
		uint32_t wt = types[ti];
		for (size_t si = 0; si < 3; si++) {
			int K = shapes[si][0], N = shapes[si][1];
			size_t wbytes = row_bytes(wt, K) * (size_t)N;
			int copies = (int)((128u << 20) / wbytes) + 1;
			char *W = malloc(wbytes * (size_t)copies);
			if (!W)
				return 1;
			for (int c = 0; c < copies; c++)
				fill(W + wbytes * (size_t)c, wt, K, N, 17u + (uint32_t)c);
			for (int ii = 0; ii < n_isas; ii++) {
				kern_packed **pks = calloc((size_t)copies,
							   sizeof(*pks));

				if (!pks)
					return 1;
				kern_set_isa(isas[ii]);
				for (int c = 0; pack && c < copies; c++)
					if (kern_pack(pools[1], W + wbytes * (size_t)c,
						      wt, K, N, 200, &pks[c]))
						return 1;
				for (int mi = 0; mi < n_ms; mi++) {
					int M = Ms[mi];
					for (int t = 0; t < 2; t++) {
						int c = 0;
						struct kern_mat km = {.W = W, .wtype = wt,
							.N = N, .y = y, .ldy = N,
							.pk = pks[0]};
						double per = 0, at[2] = {0, 0};
						int an[2] = {0, 0};

						kern_matmul_n(pools[t], &km, 1, K, x, K, M);
						for (int w = 0; w < (windows ? windows : 1); w++) {
							int calls = 0;
							double t0 = now_s(), el;

							do {
								c = (c + 1) % copies;
								km.W = W + wbytes * (size_t)c;
								km.pk = pks[c];
								if (alt) {
									int on = calls & 1;
									double a0 = now_s();

									kern_set_prefetch(on);
									kern_matmul_n(pools[t], &km, 1,
										      K, x, K, M);
									at[on] += now_s() - a0;
									an[on]++;
								} else {
									kern_matmul_n(pools[t], &km, 1,
										      K, x, K, M);
								}
								calls++;
								el = now_s() - t0;
							} while (el < (windows ? 0.1 : 0.3) ||
								 calls < 3);
							if (w == 0 || el / calls < per)
								per = el / calls;
						}
						double flop = 2.0 * M * (double)N * K;
						printf("%-10s %-5s %5d x %-6d %3d %2d %2s %9.3f %8.1f %8.1f %10.1f %6.1f%%\n",
						       kern_isa_name(isas[ii]), ggml_type_name(wt), K,
						       N, M, threads[t], pks[0] ? "y" : "-",
						       per * 1e3, wbytes / per / 1e9,
						       flop / per / 1e9,
						       (double)M * N / per / 1e6,
						       lim[t].int8_macs > 0 ? 100.0 * flop / 2 / per /
						       lim[t].int8_macs : 0.0);
						if (alt && an[0] && an[1])
							printf("%-10s   prefetch off %.3f ms, on %.3f ms per call: %.3f\n",
							       "", at[0] / an[0] * 1e3,
							       at[1] / an[1] * 1e3,
							       at[0] / an[0] / (at[1] / an[1]));
						fflush(stdout);
					}
				}
				for (int c = 0; c < copies; c++)
					kern_packed_free(&pks[c]);
				free(pks);
			}
			free(W);
		}
	}
	for (int t = 0; t < 2; t++)
		tpool_free(&pools[t]);
	free(x);
	free(y);
	return 0;
}

/* quorum bench — reset vs paged vs batched self-consistency, side by side. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format/ggml.h"
#include "format/quant.h"
#include "kernels/kern.h"
#include "kernels/prof.h"
#include "infer/model.h"
#include "text/prompt.h"
#include "qerr.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "text/tok.h"

#define BENCH_MAX_NS 16

static void help(void)
{
	printf("usage: quorum bench --model M.gguf [options]\n\n"
	       "Benchmarks one self-consistency request per (N, mode) in one\n"
	       "run: wall time, prefill time, decode tokens/s (decode time\n"
	       "only) and total tokens/s (N x new tokens / wall time), speed-up\n"
	       "over reset, and peak KV bytes held versus what N unshared\n"
	       "sequences would hold. Every sample runs to the token budget\n"
	       "(end-of-generation is ignored). An untimed warm-up (a short\n"
	       "prefill and one decode step) comes first.\n\n"
	       "options:\n"
	       "  --model FILE         GGUF model\n"
	       "  --prompt-tokens P    the question's approximate length, 16..100000\n"
	       "                       (default 200): text sized for P tokens\n"
	       "                       of a subword vocabulary, so a small one\n"
	       "                       (the shipped model's 809) makes it\n"
	       "                       longer, and the chat template and system\n"
	       "                       prompt come on top; the count run is\n"
	       "                       printed\n"
	       "  --new K              new tokens per sample (default 64)\n"
	       "  --ns LIST            sample counts, each once (default\n"
	       "                       1,3,8,16,32)\n"
	       "  --modes LIST         modes, each once (default\n"
	       "                       reset,paged,batched; not with\n"
	       "                       --roofline)\n"
	       "  --threads T          threads (default 2)\n"
	       "  --kv-type T          f16 | f32 | q8_0 (default f16)\n"
	       "  --no-free-windows    sliding-window models (gemma3, gpt-oss):\n"
	       "                       keep the windowed layers' rows a sample's\n"
	       "                       windows no longer reach (as kv.free_windows:\n"
	       "                       false); same bytes, more KV held\n"
	       "  --activations A      int | f32 for quantized weights (default\n"
	       "                       int: 8-bit activations)\n"
	       "  --roofline           instead: measure this machine's limits\n"
	       "                       (int8 and f32 multiply-adds/s, read\n"
	       "                       bandwidth), then prefill and batched\n"
	       "                       decode at each N of --ns (default 1,8,32),\n"
	       "                       each phase's share of the time (matmuls by\n"
	       "                       shape, attention, quantizing activations,\n"
	       "                       the row steps, threads idle, the serial\n"
	       "                       rest, sampling) and what it achieves\n"
	       "                       against the limits\n"
	       "  -h, --help           this help\n");
}

static int parse_list(const char *s, int *v, int max, int (*conv)(const char *))
{
	char buf[256], *save = NULL, *p;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", s);
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (n == max)
			return -1;
		if ((v[n++] = conv(p)) < 0)
			return -1;
		for (int k = 0; k < n - 1; k++)
			if (v[k] == v[n - 1])
				return -1; /* the same row twice */
	}
	return n ? n : -1;
}

static int conv_n(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	return *end || v < 1 || v > 4096 ? -1 : (int)v;
}

/* A question of about `target` tokens: a word problem padded with context
 * sentences. */
static char *make_question(int target_words)
{
	static const char *ctx[] = {
		"A bakery sells loaves of bread and boxes of muffins.",
		"Each morning the baker counts the stock twice.",
		"Deliveries arrive from three different farms each week.",
		"The shop opens at seven and closes at six in the evening.",
		"Prices have not changed since the beginning of the year.",
	};
	size_t cap = (size_t)target_words * 16 + 256, len = 0;
	char *q = malloc(cap);
	int words = 0;

	if (!q)
		return NULL;
	q[0] = '\0';
	for (int i = 0; words < target_words; i++) {
		const char *s = ctx[i % 5];

		len += (size_t)snprintf(q + len, cap - len, "%s ", s);
		for (const char *c = s; *c; c++)
			words += *c == ' ';
		words++;
	}
	snprintf(q + len, cap - len, "If the baker sells 17 loaves at 3 dollars "
		 "and 23 boxes at 5 dollars, how much money does the bakery "
		 "take in?");
	return q;
}

/* A benchmark request: the default settings (sc/params), seed 1, every
 * sample decoding all max_new tokens (no end of generation, no early
 * stopping), so each row does the same work. */
static sc_params bench_params(int n, int max_new, int mode)
{
	sc_params p = SC_PARAMS_DEFAULTS;

	p.seed = 1;
	p.n = n;
	p.max_new = max_new;
	p.mode = mode;
	p.ignore_eos = 1;
	p.stop = (stop_rule){STOP_NONE, STOP_BETA_DEFAULT, STOP_WINDOW_DEFAULT};
	return p;
}

/* One line of the roofline table: a phase's time, its share of wall,
 * and (matmuls) its rate against the limits. */
static void roof_line(const char *name, double ns, double wall_ns,
		      double macs, double bytes, double peak_macs,
		      const kern_limits *lim)
{
	printf("  %-22s %6.1f%% %9.1f", name, 100.0 * ns / wall_ns, ns / 1e6);
	if (macs > 0 && ns > 0)
		printf(" %9.1f %7.1f%% %8.1f %6.1f%%", macs / ns,
		       peak_macs > 0 ? 100.0 * macs / ns * 1e9 / peak_macs : 0,
		       bytes / ns, lim->read_bytes > 0
		       ? 100.0 * bytes / ns * 1e9 / lim->read_bytes : 0);
	printf("\n");
}

/* The table of one phase of the request (prefill, or decode: the
 * profile less the prefill's), wall_ns its wall time. */
static void roof_table(const prof_report *r, double wall_ns,
		       const kern_limits *lim, int nt)
{
	double mm_macs = 0, mm_bytes = 0, mm_ns = 0, named = 0;

	printf("  %-22s %7s %9s %9s %8s %8s %7s\n", "phase", "share", "ms",
	       "G MAC/s", "of peak", "GB/s", "of bw");
	for (int i = 0; i < r->n_shapes; i++) {
		const prof_shape *x = &r->shape[i];
		char name[64];

		if (x->calls == 0 || x->ns <= 0)
			continue;
		snprintf(name, sizeof(name), "%s %dx%d %s", x->label[0]
			 ? x->label : "matmul", x->K, x->N,
			 ggml_type_name(x->wtype));
		roof_line(name, (double)x->ns, wall_ns, x->macs, x->bytes,
			  quant_is_quant(x->wtype) ? lim->int8_macs
						   : lim->f32_fmas, lim);
		mm_macs += x->macs;
		mm_bytes += x->bytes;
		mm_ns += (double)x->ns;
	}
	roof_line("matmuls, all", mm_ns, wall_ns, mm_macs, mm_bytes,
		  lim->int8_macs, lim);
	/* idle thread time as the wall time of the pool it leaves unused */
	roof_line("  of it threads idle", (double)r->ns[PROF_MM_IDLE] / nt,
		  wall_ns, 0, 0, 0, lim);
	roof_line("quantizing act.", (double)r->ns[PROF_ACT], wall_ns, 0, 0,
		  0, lim);
	roof_line("attention", (double)r->ns[PROF_ATTENTION], wall_ns, 0, 0,
		  0, lim);
	roof_line("  of it threads idle", (double)r->ns[PROF_ATT_IDLE] / nt,
		  wall_ns, 0, 0, 0, lim);
	roof_line("rows (norms, rope, KV)", (double)r->ns[PROF_ROWS],
		  wall_ns, 0, 0, 0, lim);
	roof_line("  of it threads idle", (double)r->ns[PROF_ROWS_IDLE] / nt,
		  wall_ns, 0, 0, 0, lim);
	named = mm_ns + (double)r->ns[PROF_ACT] +
		(double)r->ns[PROF_ATTENTION] + (double)r->ns[PROF_ROWS];
	roof_line("serial (embed, tables)", (double)r->ns[PROF_FWD] - named,
		  wall_ns, 0, 0, 0, lim);
	roof_line("sampling", (double)r->ns[PROF_SAMPLING], wall_ns, 0, 0, 0,
		  lim);
	roof_line("the rest (engine)", wall_ns - (double)r->ns[PROF_FWD] -
		  (double)r->ns[PROF_SAMPLING], wall_ns, 0, 0, 0, lim);
	roof_line("the pass, end to end", wall_ns, wall_ns, mm_macs, 0,
		  lim->int8_macs, lim);
}

/* bench --roofline: the limits, then prefill and decode at each N. */
static int roofline(sc_engine *e, const int32_t *ids, size_t n_ids,
		    const int *ns, int n_ns, int max_new, int threads)
{
	kern_limits lim;
	tpool *tp = NULL;
	prof_report pre, dec;
	sc_result r;
	int rc;

	if (tpool_new(threads, &tp) || kern_measure_limits(tp, &lim)) {
		tpool_free(&tp);
		return -1;
	}
	tpool_free(&tp);
	printf("limits on %d threads (%s): int8 %.1f G multiply-adds/s, "
	       "f32 %.1f G FMA/s, read %.1f GB/s\n\n", threads,
	       kern_isa_name(kern_isa()), lim.int8_macs / 1e9,
	       lim.f32_fmas / 1e9, lim.read_bytes / 1e9);
	/* prefill alone (one sample, one token: no decode round) */
	{
		sc_params p = bench_params(1, 1, SC_BATCHED);

		prof_enable(PROF_ALL);
		rc = sc_run(e, ids, n_ids, &p, &r);
		prof_get(&pre);
		prof_enable(PROF_OFF);
		if (rc)
			return -1;
		printf("prefill, %zu tokens: %.1f ms, %.1f tok/s\n", n_ids,
		       r.stats.prefill_ms, n_ids / (r.stats.prefill_ms / 1e3));
		roof_table(&pre, r.stats.prefill_ms * 1e6, &lim, threads);
		sc_run_result_fini(&r);
	}
	for (int i = 0; i < n_ns; i++) {
		sc_params p = bench_params(ns[i], max_new, SC_BATCHED);

		prof_enable(PROF_DECODE);
		rc = sc_run(e, ids, n_ids, &p, &r);
		prof_get(&dec);
		prof_enable(PROF_OFF);
		if (rc)
			return -1;
		printf("\ndecode, N = %d, %d tokens each: %.1f ms, %.1f tok/s\n",
		       ns[i], max_new, r.stats.decode_ms,
		       (double)ns[i] * max_new / (r.stats.decode_ms / 1e3));
		roof_table(&dec, r.stats.decode_ms * 1e6, &lim, threads);
		sc_run_result_fini(&r);
		fflush(stdout);
	}
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	static const struct option opts[] = {
		{"model", required_argument, 0, 'm'},
		{"prompt-tokens", required_argument, 0, 'P'},
		{"new", required_argument, 0, 'x'},
		{"ns", required_argument, 0, 'N'},
		{"modes", required_argument, 0, 'M'},
		{"threads", required_argument, 0, 'j'},
		{"kv-type", required_argument, 0, 'K'},
		{"no-free-windows", no_argument, 0, 'W'},
		{"activations", required_argument, 0, 'A'},
		{"roofline", no_argument, 0, 'R'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	int ns[BENCH_MAX_NS] = {1, 3, 8, 16, 32}, n_ns = 5;
	int modes[3] = {SC_RESET, SC_PAGED, SC_BATCHED}, n_modes = 3;
	int modes_given = 0;
	long ptoks = 200, max_new = 64, v;
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	const char *mpath = NULL;
	model *m = NULL;
	tok *t = NULL;
	sc_engine *e = NULL;
	int32_t *ids = NULL;
	size_t n_ids = 0;
	char *question = NULL;
	int c, rc = 1, roof = 0, ns_given = 0;

	optind = 1;
	if (cli_opts("bench", argc, argv, "h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': mpath = optarg; break;
		case 'P':
			if (cli_long("bench", "--prompt-tokens", optarg, 16, 100000,
				     &ptoks))
				return 2;
			break;
		case 'x':
			if (cli_long("bench", "--new", optarg, 1, 100000, &max_new))
				return 2;
			break;
		case 'N':
			if ((n_ns = parse_list(optarg, ns, BENCH_MAX_NS, conv_n)) < 0)
				return cli_usage_error("bench", "bad --ns '%s' "
						       "(counts 1..4096, each "
						       "once)", optarg);
			ns_given = 1;
			break;
		case 'R': roof = 1; break;
		case 'M':
			if ((n_modes = parse_list(optarg, modes, 3,
						  sc_params_mode_parse)) < 0)
				return cli_usage_error("bench", "bad --modes '%s' "
						       "(reset, paged, batched, "
						       "each once)", optarg);
			modes_given = 1;
			break;
		case 'j':
			if (cli_long("bench", "--threads", optarg, 1, 256, &v))
				return 2;
			ep.n_threads = (int)v;
			break;
		case 'A':
			if (strcmp(optarg, "int") && strcmp(optarg, "f32"))
				return cli_usage_error("bench", "bad --activations");
			kern_set_activations(strcmp(optarg, "f32") ? KERN_ACT_INT
								   : KERN_ACT_F32);
			break;
		case 'K':
			if ((ep.kv_dtype = kv_dtype_from_name(optarg)) < 0)
				return cli_usage_error("bench", "unknown KV type "
						       "'%s' (f16, f32, q8_0)",
						       optarg);
			break;
		case 'W': ep.free_windows = 0; break;
		case 'h': help(); return 0;
		default: return cli_usage_error("bench", "bad option");
		}
	}
	if (!mpath || optind != argc)
		return cli_usage_error("bench", "--model is required and takes "
				       "no other arguments");
	if (roof && modes_given)
		return cli_usage_error("bench", "--roofline runs batched decode "
				       "only: --modes is not for it");
	/* ~0.75 words per token for English prose */
	if (!(question = make_question((int)(ptoks * 3 / 4)))) {
		fprintf(stderr, "quorum bench: out of memory\n");
		return 1;
	}
	if (model_load(mpath, &m) || tok_load(m->gguf, &t) ||
	    prompt_build(t, NULL, question, &ids, &n_ids) ||
	    sc_engine_new(m, t, &ep, &e)) {
		fprintf(stderr, "quorum bench: %s\n", qerr_detail());
		goto out;
	}
	printf("model %s: %s, %d layers, dim %d, vocab %d; isa %s, %d threads\n"
	       "prompt %zu tokens, %ld new tokens per sample, KV %s\n\n",
	       mpath, model_arch_name(m->cfg.arch), m->cfg.n_layers,
	       m->cfg.dim, m->cfg.vocab, kern_isa_name(kern_isa()),
	       ep.n_threads, n_ids, max_new,
	       kv_dtype_name(ep.kv_dtype));
	/* untimed warm-up (as llama-batched-bench's): a short prefill and a
	 * decode step, so that the first row does not also pay for touching
	 * the weights and buffers the first time */
	{
		sc_params p = bench_params(1, 1, SC_BATCHED);
		sc_result r;
		if (sc_run(e, ids, n_ids < 16 ? n_ids : 16, &p, &r)) {
			fprintf(stderr, "quorum bench: %s\n", qerr_detail());
			goto out;
		}
		sc_run_result_fini(&r);
	}
	if (roof) {
		static const int roof_ns[] = {1, 8, 32};

		if (!ns_given) {
			memcpy(ns, roof_ns, sizeof(roof_ns));
			n_ns = 3;
		}
		if (roofline(e, ids, n_ids, ns, n_ns, (int)max_new,
			     ep.n_threads)) {
			fprintf(stderr, "quorum bench: %s\n", qerr_detail());
			goto out;
		}
		rc = 0;
		goto out;
	}
	printf("%4s  %-8s %8s %10s %10s %9s %9s %11s %12s\n", "N", "mode",
	       "wall s", "prefill s", "decode t/s", "total t/s", "vs reset",
	       "KV held MB", "unshared MB");
	for (int i = 0; i < n_ns; i++) {
		double reset_wall = 0;

		for (int j = 0; j < n_modes; j++) {
			sc_params p = bench_params(ns[i], (int)max_new,
						   modes[j]);
			sc_result r;
			double wall;

			if (sc_run(e, ids, n_ids, &p, &r)) {
				fprintf(stderr, "quorum bench: %s\n",
					qerr_detail());
				goto out;
			}
			wall = (r.stats.prefill_ms + r.stats.decode_ms) / 1e3;
			if (modes[j] == SC_RESET)
				reset_wall = wall;
			printf("%4d  %-8s %8.2f %10.2f %10.1f %9.1f ", ns[i],
			       sc_params_mode_name(modes[j]), wall,
			       r.stats.prefill_ms / 1e3,
			       (double)ns[i] * max_new /
				       (r.stats.decode_ms / 1e3),
			       (double)ns[i] * max_new / wall);
			if (reset_wall > 0)
				printf("%8.2fx", reset_wall / wall);
			else
				printf("%9s", "-");
			printf(" %11.1f %12.1f\n", r.stats.kv_peak_bytes / 1e6,
			       r.stats.kv_unshared_bytes / 1e6);
			fflush(stdout);
			sc_run_result_fini(&r);
		}
	}
	rc = 0;
out:
	sc_engine_free(&e);
	free(ids);
	free(question);
	tok_free(&t);
	model_free(&m);
	return rc;
}

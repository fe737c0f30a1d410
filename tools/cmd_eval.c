/* quorum eval — forward pass over given tokens; top logits, raw dump. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "infer/fwd.h"
#include "kernels/kern.h"
#include "infer/kv.h"
#include "infer/model.h"
#include "qerr.h"
#include "kernels/tpool.h"

static void help(void)
{
	printf("usage: quorum eval --model M.gguf --tokens 1,2,3 [options]\n\n"
	       "Runs the forward pass over the tokens (one prefill) and prints\n"
	       "the top logits of the last position.\n\n"
	       "options:\n"
	       "  --model FILE        GGUF model\n"
	       "  --tokens LIST       comma-separated token ids\n"
	       "  --top K             how many logits to print (default 10)\n"
	       "  --dump-logits FILE  write all last-position logits as raw\n"
	       "                      little-endian f32 (vocab values)\n"
	       "  --threads T         threads (default 2)\n"
	       "  --chunk R           prefill rows per forward call (default 512)\n"
	       "  --kv-type T         KV cache f32 | f16 | q8_0 (default f32)\n"
	       "  -h, --help          this help\n");
}

static void print_top(const float *lg, int vocab, int top)
{
	int *idx = malloc((size_t)top * sizeof(int)), n = 0;

	if (!idx)
		return;
	/* insertion into a small sorted list: (logit desc, id asc) */
	for (int i = 0; i < vocab; i++) {
		int j = n < top ? n++ : top;

		if (j == top && !(lg[i] > lg[idx[top - 1]]))
			continue;
		if (j == top)
			j = top - 1;
		while (j > 0 && lg[i] > lg[idx[j - 1]]) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = i;
	}
	printf("rank  token     logit\n");
	for (int i = 0; i < n; i++)
		printf("%4d  %-8d  %.6f\n", i + 1, idx[i], lg[idx[i]]);
	free(idx);
}

int cmd_eval(int argc, char **argv)
{
	static const struct option opts[] = {
		{"model", required_argument, 0, 'm'},
		{"tokens", required_argument, 0, 't'},
		{"top", required_argument, 0, 'k'},
		{"dump-logits", required_argument, 0, 'd'},
		{"threads", required_argument, 0, 'j'},
		{"chunk", required_argument, 0, 'c'},
		{"kv-type", required_argument, 0, 'K'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *mpath = NULL, *tokstr = NULL, *dump = NULL;
	long top = 10, threads = 2, chunk = 512;
	int32_t *toks = NULL;
	int ntok = 0, c, rc = 1, kvt = KV_F32;
	model *m = NULL;
	tpool *tp = NULL;
	kv_pool *pool = NULL;
	fwd *f = NULL;
	kv_seq seq;
	float *lg = NULL;

	optind = 1;
	if (cli_opts("eval", argc, argv, "h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': mpath = optarg; break;
		case 't': tokstr = optarg; break;
		case 'd': dump = optarg; break;
		case 'k':
			if (cli_long("eval", "--top", optarg, 1, 1000000, &top))
				return 2;
			break;
		case 'j':
			if (cli_long("eval", "--threads", optarg, 1, 256,
				     &threads))
				return 2;
			break;
		case 'c':
			if (cli_long("eval", "--chunk", optarg, 1, 65536, &chunk))
				return 2;
			break;
		case 'K':
			if ((kvt = kv_dtype_from_name(optarg)) < 0)
				return cli_usage_error("eval", "unknown KV type "
						       "'%s' (f32, f16, q8_0)",
						       optarg);
			break;
		case 'h': help(); return 0;
		default: return cli_usage_error("eval", "bad option");
		}
	}
	if (optind < argc)
		return cli_usage_error("eval", "unexpected argument '%s'",
				       argv[optind]);
	if (!mpath || !tokstr)
		return cli_usage_error("eval", "--model and --tokens are "
				       "required");
	{
		size_t n = 0, cap = 0;
		/* (an argument's ids: an int's worth by far) */
		int e = cli_ids("eval", "--tokens", tokstr, &toks, &n, &cap);

		if (e) {
			free(toks);
			return e;
		}
		ntok = (int)n;
	}
	kv_seq_init(&seq);
	if (model_load(mpath, &m))
		goto fail;
	{
		kv_params kp = {
			.n_layers = m->cfg.n_layers, .kv_dim = m->cfg.kv_dim,
			.block_tokens = 16, .dtype = kvt,
			.n_blocks = (uint32_t)(ntok + 15) / 16,
		};
		if (tpool_new((int)threads, &tp) ||
		    kv_pool_new(&kp, &pool) ||
		    fwd_new(m, (int)chunk, tp, &f))
			goto fail;
	}
	lg = malloc((size_t)m->cfg.vocab * sizeof(float));
	if (!lg) {
		qerr_fail(QERR_NOMEM, "out of memory");
		goto fail;
	}
	if (fwd_prefill(f, pool, &seq, toks, ntok, lg))
		goto fail;
	printf("model %s: %s, %d layers, dim %d, vocab %d; %d tokens; isa %s; "
	       "KV %s\n", mpath, model_arch_name(m->cfg.arch),
	       m->cfg.n_layers, m->cfg.dim, m->cfg.vocab, ntok,
	       kern_isa_name(kern_isa()), kv_dtype_name(kvt));
	print_top(lg, m->cfg.vocab, (int)top);
	if (dump) {
		FILE *df = fopen(dump, "wb");

		if (!df || fwrite(lg, sizeof(float), (size_t)m->cfg.vocab, df) !=
				   (size_t)m->cfg.vocab || fclose(df)) {
			qerr_fail(QERR_IO, "%s: cannot write: %s", dump,
				  strerror(errno));
			goto fail;
		}
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "quorum eval: %s\n", qerr_detail());
out:
	free(lg);
	free(toks);
	if (pool)
		kv_seq_free(pool, &seq);
	fwd_free(&f);
	kv_pool_free(&pool);
	tpool_free(&tp);
	model_free(&m);
	return rc;
}

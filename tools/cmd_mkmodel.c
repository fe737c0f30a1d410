/* quorum mkmodel — synthesize a GGUF model (see common/infer/mkmodel.h). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "format/gguf.h"
#include "infer/mkmodel.h"
#include "qerr.h"
#include "format/quant.h"

static void help(void)
{
	printf("usage: quorum mkmodel --tokenizer FILE -o OUT.gguf [options]\n\n"
	       "Synthesize a GGUF model: real layout and tokenizer, seeded\n"
	       "pseudo-random weights (for tests, benchmarks and cluster smoke\n"
	       "tests; it answers nonsense). The same options give the same\n"
	       "bytes. The file also loads in llama.cpp.\n\n"
	       "options:\n"
	       "  --tokenizer FILE  HF tokenizer.json, or a GGUF with a vocabulary\n"
	       "  -o, --out FILE    output path\n"
	       "  --arch A          qwen2 | qwen3 | llama | gemma3 | qwen3moe |\n"
	       "                    gpt-oss (default: the shape's)\n"
	       "  --layers N        override the shape's layer count\n"
	       "  --shape S         model shape (default tiny):\n");
	for (const mkmodel_shape *s = mkmodel_shapes(); s->name; s++) {
		printf("                      %-13s %s, dim %d, %d layers, "
		       "%d/%d heads, ffn %d%s", s->name, s->arch, s->dim,
		       s->n_layers, s->n_heads, s->n_kv_heads, s->ffn_dim,
		       s->vocab ? ", vocab padded" : "");
		if (s->n_expert)
			printf(", %d experts (%d used) of ffn %d",
			       s->n_expert, s->n_expert_used, s->expert_ffn);
		if (s->swa_window)
			printf(", window %d", s->swa_window);
		if (s->yarn_factor > 0.0f)
			printf(", YaRN x%g over %d", s->yarn_factor,
			       s->yarn_orig_ctx);
		printf("\n");
	}
	printf("  --type T          weight type (default f32): %s.\n"
	       "                    A plain type is used for every matrix (rows\n"
	       "                    its block does not divide fall back as in\n"
	       "                    llama.cpp); the *_M mixes follow llama.cpp's\n"
	       "                    per-tensor recipe; MXFP4 (MXFP4_MOE): in a\n"
	       "                    shape with experts llama.cpp's MXFP4_MOE\n"
	       "                    (experts MXFP4, other matrices Q8_0), else\n"
	       "                    every matrix MXFP4\n", quant_ftype_list());
	printf("  --pre NAME        pre-tokenizer name (default: detected from\n"
	       "                    the tokenizer.json regex)\n"
	       "  --seed S          weight seed (default 1)\n"
	       "  --vocab-only      write only the tokenizer\n"
	       "  -h, --help        this help\n");
}

static int parse_type(const char *s, mkmodel_opts *o)
{
	const quant_ftype *ft = quant_ftype_find(s);

	if (!ft)
		return -1;
	o->wtype = ft->base;
	/* the _M mixes follow their recipe; a plain type is pure */
	o->ftype = strstr(ft->name, "_M") ? ft : NULL;
	return 0;
}

int cmd_mkmodel(int argc, char **argv)
{
	static const struct option opts[] = {
		{"tokenizer", required_argument, 0, 't'},
		{"out", required_argument, 0, 'o'},
		{"arch", required_argument, 0, 'a'},
		{"shape", required_argument, 0, 's'},
		{"type", required_argument, 0, 'T'},
		{"pre", required_argument, 0, 'p'},
		{"seed", required_argument, 0, 'S'},
		{"layers", required_argument, 0, 'L'},
		{"vocab-only", no_argument, 0, 'v'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	mkmodel_opts o = {.shape = "tiny", .wtype = GGML_TYPE_F32, .seed = 1};
	mkmodel_info info;
	int c;

	optind = 1;
	if (cli_opts("mkmodel", argc, argv, "o:h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 't': o.tokenizer = optarg; break;
		case 'o': o.out = optarg; break;
		case 'a': o.arch = optarg; break;
		case 's': o.shape = optarg; break;
		case 'p': o.pre = optarg; break;
		case 'v': o.vocab_only = 1; break;
		case 'T':
			if (parse_type(optarg, &o))
				return cli_usage_error("mkmodel", "unknown type "
						       "'%s' (%s)", optarg,
						       quant_ftype_list());
			break;
		case 'S':
			if (cli_u64("mkmodel", "--seed", optarg, &o.seed))
				return 2;
			break;
		case 'L': {
			uint64_t n;

			if (cli_u64("mkmodel", "--layers", optarg, &n))
				return 2;
			if (n < 1 || n > 1024)
				return cli_usage_error("mkmodel", "--layers %s "
						       "out of range [1, 1024]",
						       optarg);
			o.n_layers = (int)n;
			break;
		}
		case 'h': help(); return 0;
		default: return cli_usage_error("mkmodel", "bad option");
		}
	}
	if (optind < argc)
		return cli_usage_error("mkmodel", "unexpected argument '%s'",
				       argv[optind]);
	if (!o.tokenizer || !o.out)
		return cli_usage_error("mkmodel", "--tokenizer and -o are "
				       "required");
	if (!mkmodel_find_shape(o.shape))
		return cli_usage_error("mkmodel", "unknown shape '%s'", o.shape);
	if (mkmodel_write(&o, &info)) {
		fprintf(stderr, "quorum mkmodel: %s\n", qerr_detail());
		return 1;
	}
	fprintf(stderr, "quorum mkmodel: wrote %s (%s, %d tokens, pre-tokenizer "
		"%s, %.1f MB of weights)\n", o.out, o.vocab_only ? "vocab only"
		: o.shape, info.n_tokens, info.pre, (double)info.bytes / 1e6);
	return 0;
}

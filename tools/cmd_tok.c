/* quorum tokenize / detokenize — text <-> token ids with a model's (or a
 * vocab-only GGUF's) tokenizer. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format/gguf.h"
#include "qerr.h"
#include "text/tok.h"

static void help_tokenize(void)
{
	printf("usage: quorum tokenize --model M.gguf [--special] [--bos] "
	       "[--] TEXT\n\n"
	       "Prints the token ids of TEXT (read from stdin when TEXT is '-')\n"
	       "on one line, separated by spaces. Works on vocab-only GGUFs.\n\n"
	       "options:\n"
	       "  --model FILE  GGUF model or vocabulary\n"
	       "  --special     match special tokens written in the text\n"
	       "                (<|im_start|>, <s>, ...) as single tokens\n"
	       "  --bos         add BOS/EOS as the vocabulary asks\n"
	       "                (tokenizer.ggml.add_bos_token; llama.cpp's\n"
	       "                add_special)\n"
	       "  -h, --help    this help\n");
}

static void help_detokenize(void)
{
	printf("usage: quorum detokenize --model M.gguf [--special] "
	       "[--strip-space] ID...\n\n"
	       "Writes the exact bytes of the token ids (given as arguments,\n"
	       "each possibly a comma-separated list) to stdout, without a\n"
	       "trailing newline.\n\n"
	       "options:\n"
	       "  --model FILE   GGUF model or vocabulary\n"
	       "  --special      write the text of control tokens (<|im_end|>)\n"
	       "  --strip-space  drop the leading space a SentencePiece\n"
	       "                 vocabulary adds when encoding\n"
	       "  -h, --help     this help\n");
}

static int load(const char *cmd, const char *path, gguf_file **g, tok **t)
{
	int rc = gguf_open(path, g);

	if (!rc)
		rc = tok_load(*g, t);
	if (rc) {
		fprintf(stderr, "quorum %s: %s\n", cmd, qerr_detail());
		gguf_close(g);
	}
	return rc;
}

int cmd_tokenize(int argc, char **argv)
{
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},
		{"special", no_argument, NULL, 's'},
		{"bos", no_argument, NULL, 'b'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *model = NULL;
	int special = 0, bos = 0, c, rc = 1;
	gguf_file *g = NULL;
	tok *t = NULL;
	char *text = NULL;
	size_t len, n = 0;
	int32_t *ids = NULL;

	optind = 1;
	if (cli_opts("tokenize", argc, argv, "h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 's': special = 1; break;
		case 'b': bos = 1; break;
		case 'h': help_tokenize(); return 0;
		default: return cli_usage_error("tokenize", "bad option");
		}
	}
	if (!model)
		return cli_usage_error("tokenize", "--model is required");
	if (argc - optind != 1)
		return cli_usage_error("tokenize", "want exactly one TEXT "
				       "argument ('-' for stdin), got %d",
				       argc - optind);
	if (!strcmp(argv[optind], "-")) {
		text = cli_read_all(stdin, &len);
		if (!text) {
			fprintf(stderr, "quorum tokenize: cannot read stdin: "
				"%s\n", strerror(errno));
			return 1;
		}
	}
	if (load("tokenize", model, &g, &t))
		goto out;
	if (!text)
		len = strlen(argv[optind]);
	if (tok_encode(t, text ? text : argv[optind], len, special, bos, &ids,
		       &n)) {
		fprintf(stderr, "quorum tokenize: %s\n", qerr_detail());
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		printf(i ? " %d" : "%d", ids[i]);
	printf("\n");
	rc = fflush(stdout) ? 1 : 0;
	if (rc)
		fprintf(stderr, "quorum tokenize: write failed: %s\n",
			strerror(errno));
out:
	free(ids);
	free(text);
	tok_free(&t);
	gguf_close(&g);
	return rc;
}

int cmd_detokenize(int argc, char **argv)
{
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},
		{"special", no_argument, NULL, 's'},
		{"strip-space", no_argument, NULL, 'x'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *model = NULL;
	int flags = 0, c, rc = 1;
	gguf_file *g = NULL;
	tok *t = NULL;
	int32_t *ids = NULL;
	size_t n = 0, cap = 0, len = 0;
	char *out = NULL;

	optind = 1;
	if (cli_opts("detokenize", argc, argv, "h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 's': flags |= TOK_DECODE_SPECIAL; break;
		case 'x': flags |= TOK_DECODE_STRIP; break;
		case 'h': help_detokenize(); return 0;
		default: return cli_usage_error("detokenize", "bad option");
		}
	}
	if (!model)
		return cli_usage_error("detokenize", "--model is required");
	if (optind >= argc)
		return cli_usage_error("detokenize", "no token ids given");
	for (int i = optind; i < argc; i++) {
		int e = cli_ids("detokenize", "token id list", argv[i], &ids,
				&n, &cap);

		if (e) {
			free(ids);
			return e;
		}
	}
	if (load("detokenize", model, &g, &t))
		goto out;
	if (tok_decode(t, ids, n, flags, &out, &len)) {
		fprintf(stderr, "quorum detokenize: %s\n", qerr_detail());
		goto out;
	}
	if (fwrite(out, 1, len, stdout) != len || fflush(stdout)) {
		fprintf(stderr, "quorum detokenize: write failed: %s\n",
			strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(out);
	free(ids);
	tok_free(&t);
	gguf_close(&g);
	return rc;
}

/* quorum — command-line entry point: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "version.h" /* generated: QUORUM_VERSION, QUORUM_GIT */

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} cmds[] = {
	{"mkmodel", cmd_mkmodel, "synthesize a GGUF model (random weights, real tokenizer)"},
	{"quantize", cmd_quantize, "re-quantize an F32/F16/BF16 GGUF (Q4_K_M, Q8_0, ...)"},
	{"run", cmd_run, "answer a question by self-consistency (one process)"},
	{"eval-set", cmd_evalset, "score a problem set: accuracy vs N (in-process or cluster)"},
	{"vote", cmd_vote, "vote on samples made by any engine (JSON lines)"},
	{"ask", cmd_ask, "ask a running cluster (coordinator) a question"},
	{"serve", cmd_serve, "HTTP gateway: OpenAI-compatible API, metrics, status page"},
	{"status", cmd_status, "show a running cluster: workers, queue, counters"},
	{"keygen", cmd_keygen, "a CURVE key pair (NAME.key, NAME.pub), or an API key file"},
	{"bench", cmd_bench, "benchmark reset vs paged vs batched decoding"},
	{"eval", cmd_eval, "run the forward pass on tokens, print top logits"},
	{"tokenize", cmd_tokenize, "print the token ids of a text"},
	{"detokenize", cmd_detokenize, "write the bytes of token ids"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: quorum COMMAND [options]\n\n"
		   "Self-consistency question answering with LLMs.\n\n"
		   "commands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-11s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n'quorum COMMAND --help' describes a command;\n"
		   "'quorum --version' prints the version and git commit.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	{
		int help = !strcmp(argv[1], "--help") ||
			   !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"),
		    version = !strcmp(argv[1], "--version") ||
			      !strcmp(argv[1], "-V") ||
			      !strcmp(argv[1], "version");

		if ((help || version) && argc > 2) {
			fprintf(stderr, "quorum: %s takes no argument "
				"('%s')\n", argv[1], argv[2]);
			return 2;
		}
		if (help) {
			usage(stdout);
			return 0;
		}
		if (version) {
			printf("quorum %s (git %s)\n", QUORUM_VERSION,
			       QUORUM_GIT);
			return 0;
		}
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			/* its argv[0]: what getopt_long's own messages
			 * lead with ("quorum run: unrecognized option") */
			static char self[64];

			snprintf(self, sizeof(self), "quorum %s", cmds[i].name);
			argv[1] = self;
			return cmds[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "quorum: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

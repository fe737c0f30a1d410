/*
 * sampflags — the sampling flags of the CLI, parsed in one place for
 * `quorum run`, `quorum ask` and `quorum eval-set`: the same flag names,
 * help lines, defaults (SC_PARAMS_DEFAULTS) and, through sc/params, the
 * same limits and messages as the gateway, the coordinator and the engine.
 *
 * Owns: the flag names of the settings (--top-k for top_k, ...), their
 * getopt long options and help lines. A command says which flags it
 * takes, appends sampflags_options() to its own, hands every getopt
 * result to sampflags_opt() first and prints sampflags_help() in its
 * --help. Callers: tools/cmd_run.c, cmd_ask.c, cmd_evalset.c, and
 * tests/test_params.c (the table test).
 */
#ifndef QUORUM_SAMPFLAGS_H
#define QUORUM_SAMPFLAGS_H

#include <getopt.h>
#include <stddef.h>

#include "sc/params.h"

/* getopt's value of a sampling flag (-n is 'n'); --json-schema,
 * --regex and --choice, which set the grammar from a JSON schema, a
 * regular expression or a list of strings (text/constrain.h), follow */
#define SF_CODE(id) (0x1000 + (id))
#define SF_JSON_SCHEMA SF_CODE(SC_S_COUNT_)
#define SF_REGEX SF_CODE(SC_S_COUNT_ + 1)
#define SF_CHOICE SF_CODE(SC_S_COUNT_ + 2)

/* the flags of each command */
#define SF_RUN (SC_BIT(SC_S_N) | SC_BIT(SC_S_SEED) | \
		SC_BIT(SC_S_TEMPERATURE) | SC_BIT(SC_S_TOP_K) | \
		SC_BIT(SC_S_TOP_P) | SC_BIT(SC_S_MAX_NEW_TOKENS) | \
		SC_BIT(SC_S_MODE) | SC_BIT(SC_S_STOP) | SC_BIT(SC_S_VOTE) | \
		SC_BIT(SC_S_CONF_WINDOW) | SC_BIT(SC_S_CONF_FILTER) | \
		SC_BIT(SC_S_IGNORE_EOS) | SC_BIT(SC_S_STOP_STRINGS) | \
		SC_BIT(SC_S_LOGPROBS) | SC_BIT(SC_S_STOP_WAVES) | \
		SC_BIT(SC_S_ANSWER) | SC_BIT(SC_S_GRAMMAR) | \
		SC_BIT(SC_S_MIN_P) | SC_BIT(SC_S_PRESENCE_PENALTY) | \
		SC_BIT(SC_S_FREQUENCY_PENALTY) | SC_BIT(SC_S_LOGIT_BIAS) | \
		SC_BIT(SC_S_TOP_LOGPROBS))
/* a cluster: no engine settings (mode, confidence windows; the waves are
 * the cluster's sampling.stop_waves) */
#define SF_ASK (SF_RUN & ~(SC_BIT(SC_S_MODE) | SC_BIT(SC_S_CONF_WINDOW) | \
			   SC_BIT(SC_S_CONF_FILTER) | \
			   SC_BIT(SC_S_STOP_WAVES)))
/* -n is a list there (each count checked as n) */
#define SF_EVALSET (SF_RUN & ~(SC_BIT(SC_S_N) | SC_BIT(SC_S_MODE) | \
			       SC_BIT(SC_S_STOP_STRINGS) | \
			       SC_BIT(SC_S_LOGPROBS) | \
			       SC_BIT(SC_S_TOP_LOGPROBS)))

/* The flag of sf's given log-probability setting when the output chosen
 * cannot show it (text: only the JSON has samples[].logprobs):
 * "--top-logprobs", "--logprobs", or NULL when neither was given. */
#define SF_LOGPROBS_FLAG(sf)                                                 \
	(((sf)->given & SC_BIT(SC_S_TOP_LOGPROBS)) ? "--top-logprobs"       \
	 : ((sf)->given & SC_BIT(SC_S_LOGPROBS))   ? "--logprobs"           \
						   : NULL)

typedef struct sampflags {
	const char *cmd;       /* "run": the messages' "quorum run: " */
	unsigned take;         /* SC_BIT()s of the flags taken */
	int cluster_defaults;  /* help: a setting not given is the
				* cluster's (ask), not SC_PARAMS_DEFAULTS */
	const char *stop_default; /* help: --stop's default, in words */
	sc_params p;           /* SC_PARAMS_DEFAULTS, then the flags */
	unsigned given;        /* SC_BIT()s of the flags given */
	const char *stop_arg;  /* --stop as given; NULL: not given */
} sampflags;

/* A command line's parse begins (one at a time in a process: a
 * constraint flag's grammar is kept here until the next constraint). */
void sampflags_init(sampflags *f, const char *cmd, unsigned take);

/* Appends the long options of f->take to opts[k..] (at most cap in all);
 * returns the new count (no terminator added). */
size_t sampflags_options(const sampflags *f, struct option *opts, size_t k,
			 size_t cap);

/* getopt's result c and optarg: -1 when c is none of f's flags; 0 when
 * it was taken; 2 after printing the setting's message as a usage error
 * ("quorum CMD: top_k = -1: must be an integer in 0..16777216"). */
int sampflags_opt(sampflags *f, int c, const char *arg);

/* The help lines of f's flags ("  --top-k K   0 = off (default 40)"). */
void sampflags_help(const sampflags *f);

/* The settings `which` of p as words, in the help's order, named as the
 * flags are: "seed 0, temperature 0.7, top-k 40, top-p 0.95". */
void sampflags_describe(const sc_params *p, unsigned which, char *buf,
			size_t cap);

#endif

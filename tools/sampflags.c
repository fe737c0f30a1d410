/*
 * sampflags — the CLI's sampling flags (see sampflags.h).
 */
#include "sampflags.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <stdlib.h>

#include "cli.h"
#include "qerr.h"
#include "text/constrain.h"

/* The constraint (--grammar, --json-schema, --regex, --choice) of the
 * command line being parsed (one at a time: the CLI's): its grammar
 * text, which the settings borrow, kept until the next one; the flag
 * that gave it (one kind per command line); --choice's strings so far
 * (argv's) */
static struct {
	char *text;
	const char *flag;
	const char *choices[CONSTRAIN_CHOICES_MAX];
	size_t n_choices;
	int answer_set;   /* the answer format is the constraint's default */
} con;

static void con_free(void)
{
	free(con.text);
	con.text = NULL;
}

/* A constraint flag (code SF_CODE(SC_S_GRAMMAR), SF_JSON_SCHEMA,
 * SF_REGEX, SF_CHOICE) with its argument, made the grammar setting of
 * f->p (text/constrain.h). 0, or 2 after the usage error. */
static int constraint(sampflags *f, int code, const char *arg)
{
	const char *flag = code == SF_JSON_SCHEMA ? "json-schema"
			   : code == SF_REGEX ? "regex"
			   : code == SF_CHOICE ? "choice" : "grammar";
	constrain_kind kind = code == SF_JSON_SCHEMA ? CONSTRAIN_JSON_SCHEMA
			      : code == SF_REGEX ? CONSTRAIN_REGEX
			      : code == SF_CHOICE ? CONSTRAIN_CHOICE
						  : CONSTRAIN_GRAMMAR;
	char *text = NULL, *g = NULL;
	size_t len = 0;
	int rc = 0;

	if (con.flag && strcmp(con.flag, flag))
		return cli_usage_error(f->cmd, "--%s and --%s: give one "
				       "constraint", con.flag, flag);
	/* --choice adds a string; the others replace: said, not taken */
	if (con.flag && code != SF_CHOICE)
		return cli_usage_error(f->cmd, "--%s given twice: give one",
				       flag);
	if (code == SF_REGEX) {
		rc = constrain_regex(arg, &g);
	} else if (code == SF_CHOICE) {
		if (con.n_choices == CONSTRAIN_CHOICES_MAX)
			return cli_usage_error(f->cmd, "--choice: over %d "
					       "strings",
					       CONSTRAIN_CHOICES_MAX);
		con.choices[con.n_choices++] = arg;
		rc = constrain_choice(con.choices, con.n_choices, &g);
	} else {
		if (constrain_read_file(arg, code == SF_JSON_SCHEMA
					     ? "JSON schema" : "grammar",
					&text, &len))
			return cli_usage_error(f->cmd, "--%s %s", flag,
					       qerr_detail());
		if (code == SF_JSON_SCHEMA) {
			json_error_t je;
			json_t *js = json_loadb(text, len,
					       JSON_REJECT_DUPLICATES, &je);

			free(text);
			if (!js)
				return cli_usage_error(f->cmd, "--json-schema "
						       "%s:%d: %s", arg,
						       je.line, je.text);
			rc = constrain_gbnf(CONSTRAIN_JSON_SCHEMA, js, &g);
			json_decref(js);
		} else {
			g = text;
		}
	}
	if (rc)
		return cli_usage_error(f->cmd, "--%s %s: %s", flag, arg,
				       qerr_detail());
	if (sc_params_parse(SC_S_GRAMMAR, g, &f->p)) {
		free(g);
		return cli_usage_error(f->cmd, "--%s %s: %s", flag, arg,
				       qerr_detail());
	}
	if (!con.text)
		atexit(con_free);
	free(con.text);
	con.text = g;
	con.flag = flag;
	f->given |= SC_BIT(SC_S_GRAMMAR);
	/* what the constrained samples vote on, unless --answer says (given
	 * before this flag; one given after replaces this) */
	if ((!(f->given & SC_BIT(SC_S_ANSWER)) || con.answer_set) &&
	    constrain_answer(kind) &&
	    !sc_params_parse(SC_S_ANSWER, constrain_answer(kind), &f->p)) {
		f->given |= SC_BIT(SC_S_ANSWER);
		con.answer_set = 1;
	}
	return 0;
}

/* By setting: the flag, its argument in the help, and what it does (the
 * default is added from SC_PARAMS_DEFAULTS, or "the cluster's"). */
static const struct {
	const char *flag, *arg, *what;
} flags[SC_S_COUNT_] = {
	[SC_S_N] = {"n", "N", "samples"},
	[SC_S_SEED] = {"seed", "S", "seed; sample i uses (S, i)"},
	[SC_S_TEMPERATURE] = {"temperature", "T", "0 = greedy"},
	[SC_S_TOP_K] = {"top-k", "K", "0 = off"},
	[SC_S_TOP_P] = {"top-p", "P", "1 = off, 0 = the top token"},
	[SC_S_MAX_NEW_TOKENS] = {"max-new-tokens", "K", "per sample"},
	[SC_S_IGNORE_EOS] = {"ignore-eos", NULL, "never stop at an end "
			     "token: every sample runs --max-new-tokens "
			     "(benchmarking)"},
	[SC_S_STOP] = {"stop", "RULE", "early stopping, decided over "
		       "samples in index order: none | exact (stop once the "
		       "leader cannot be overtaken: the answer of all N) | "
		       "beta[:T] (Beta posterior >= T, default 0.95) | "
		       "window[:W] (W in a row agree, default 4)"},
	[SC_S_VOTE] = {"vote", "V", "majority (default) | confidence: each "
		       "sample weighs exp(its lowest group confidence)"},
	[SC_S_STOP_STRINGS] = {"stop-string", "S", "end a sample at the "
			       "first S, its text cut before it (up to 4; "
			       "1..64 bytes)"},
	[SC_S_LOGPROBS] = {"logprobs", NULL, "every token's log-probability "
			   "(JSON output only, --json or --file: "
			   "samples[].logprobs)"},
	[SC_S_TOP_LOGPROBS] = {"top-logprobs", "K", "with each token's "
			       "log-probability its K most likely "
			       "alternatives, 0..20 (JSON output only: "
			       "logprobs[].top_logprobs; K >= 1 implies "
			       "--logprobs)"},
	[SC_S_MODE] = {"mode", "M", "reset | paged | batched"},
	[SC_S_CONF_WINDOW] = {"conf-window", "W", "tokens per "
			      "group-confidence window"},
	[SC_S_CONF_FILTER] = {"conf-filter", "W[:P]", "DeepConf's online "
			      "filter: after samples 0..W-1, cut a later "
			      "sample once a window's mean log-probability "
			      "falls below the P-th percentile (default 10) "
			      "of theirs"},
	[SC_S_GRAMMAR] = {"grammar", "FILE", "a GBNF grammar (llama.cpp's "
			  "language) every sample's content follows (after "
			  "its reasoning, where the model reasons); or one "
			  "made from --json-schema FILE (a JSON schema), "
			  "--regex P (the whole content matches P, "
			  "ECMAScript's dialect as JSON Schema's pattern) or "
			  "--choice S (one of the strings given; repeat it)"},
	[SC_S_ANSWER] = {"answer", "F", "what an answer is and when two are "
			 "the same: auto (the answer's shape decides) | "
			 "number | math (equal values) | choice (A-J) | "
			 "yesno | text | exact (the whole text as written) "
			 "| select (a model pass picks the most consistent "
			 "response) | regex:PATTERN | json:POINTER "
			 "(docs/commands.md); with --json-schema the default "
			 "is json: (the value), with --regex or --choice "
			 "exact"},
	[SC_S_MIN_P] = {"min-p", "P", "keep tokens with p >= P x the top "
			"token's p (0 = off)"},
	[SC_S_PRESENCE_PENALTY] = {"presence-penalty", "X", "subtract X from "
				   "the logit of every token the sample has "
				   "drawn (OpenAI's; -2..2, 0 = off)"},
	[SC_S_FREQUENCY_PENALTY] = {"frequency-penalty", "X", "subtract X "
				    "times its count so far from each drawn "
				    "token's logit (OpenAI's; -2..2, 0 = off)"},
	[SC_S_LOGIT_BIAS] = {"logit-bias", "ID:B,...", "add B to token ID's "
			     "logit before every draw (B in -100..100, at "
			     "most 64 tokens)"},
	[SC_S_STOP_WAVES] = {"stop-waves", "M", "start samples in waves of M "
			     "x the fewest that could let --stop decide (1: "
			     "no token on a sample the reply drops; more: "
			     "fewer rounds); 0 = keep the rule's earliest stop "
			     "point in flight. The reply is the same"},
};

/* The order of the help (and of the long options). */
static const int order[SC_S_COUNT_] = {
	SC_S_N, SC_S_SEED, SC_S_TEMPERATURE, SC_S_TOP_K, SC_S_TOP_P,
	SC_S_MIN_P, SC_S_PRESENCE_PENALTY, SC_S_FREQUENCY_PENALTY,
	SC_S_LOGIT_BIAS,
	SC_S_MAX_NEW_TOKENS, SC_S_MODE, SC_S_ANSWER, SC_S_GRAMMAR, SC_S_STOP,
	SC_S_VOTE,
	SC_S_STOP_WAVES, SC_S_CONF_WINDOW, SC_S_CONF_FILTER, SC_S_IGNORE_EOS,
	SC_S_STOP_STRINGS, SC_S_LOGPROBS, SC_S_TOP_LOGPROBS,
};

void sampflags_init(sampflags *f, const char *cmd, unsigned take)
{
	/* a new command line: no constraint yet (the last one's grammar
	 * stays until another is given: a finished parse may still borrow
	 * it) */
	con.flag = NULL;
	con.n_choices = 0;
	memset(f, 0, sizeof(*f));
	f->cmd = cmd;
	f->take = take;
	f->p = SC_PARAMS_DEFAULTS;
}

size_t sampflags_options(const sampflags *f, struct option *opts, size_t k,
			 size_t cap)
{
	for (int i = 0; i < SC_S_COUNT_ && k < cap; i++) {
		int id = order[i];

		if ((f->take & SC_BIT(id)) && id != SC_S_N)
			opts[k++] = (struct option){
				flags[id].flag, flags[id].arg
						? required_argument
						: no_argument, 0, SF_CODE(id)};
	}
	if (f->take & SC_BIT(SC_S_GRAMMAR)) {
		static const struct option more[] = {
			{"json-schema", required_argument, 0, SF_JSON_SCHEMA},
			{"regex", required_argument, 0, SF_REGEX},
			{"choice", required_argument, 0, SF_CHOICE},
		};

		for (size_t i = 0; i < 3 && k < cap; i++)
			opts[k++] = more[i];
	}
	return k;
}

int sampflags_opt(sampflags *f, int c, const char *arg)
{
	int id = c == 'n' ? SC_S_N : c - SF_CODE(0);

	if ((c == SF_JSON_SCHEMA || c == SF_REGEX || c == SF_CHOICE ||
	     c == SF_CODE(SC_S_GRAMMAR)) && (f->take & SC_BIT(SC_S_GRAMMAR)))
		return constraint(f, c, arg) ? 2 : 0;
	if (id < 0 || id >= SC_S_COUNT_ || !(f->take & SC_BIT(id)))
		return -1;
	if (sc_params_parse(id, flags[id].arg ? arg : "true", &f->p))
		return cli_usage_error(f->cmd, "%s", qerr_detail());
	if (id == SC_S_STOP)
		f->stop_arg = arg;
	if (id == SC_S_ANSWER)
		con.answer_set = 0; /* the user's, from now on */
	/* alternatives come with the tokens' own log-probabilities */
	if (id == SC_S_TOP_LOGPROBS && f->p.top_logprobs) {
		f->p.logprobs = 1;
		f->given |= SC_BIT(SC_S_LOGPROBS);
	}
	f->given |= SC_BIT(id);
	return 0;
}

void sampflags_describe(const sc_params *p, unsigned which, char *buf,
			size_t cap)
{
	size_t k = 0;

	buf[0] = '\0';
	for (int i = 0; i < SC_S_COUNT_ && k < cap; i++) {
		int id = order[i];
		const sc_setting *x = sc_params_setting(id);
		char t[SC_VALUE_TEXT_MAX];
		sc_value v;
		int n;

		if (!(which & SC_BIT(id)))
			continue;
		sc_params_value(id, p, &v, t, sizeof(t));
		if (x->kind == SC_K_REAL)
			n = snprintf(buf + k, cap - k, "%s%s %g", k ? ", " : "",
				     flags[id].flag, v.d);
		else if (x->kind == SC_K_U64)
			n = snprintf(buf + k, cap - k, "%s%s %llu",
				     k ? ", " : "", flags[id].flag, v.u);
		else if (x->kind == SC_K_TEXT)
			n = snprintf(buf + k, cap - k, "%s%s %s", k ? ", " : "",
				     flags[id].flag, v.s);
		else if (x->kind == SC_K_BOOL)
			n = snprintf(buf + k, cap - k, "%s%s %s", k ? ", " : "",
				     flags[id].flag, v.i ? "on" : "off");
		else
			n = snprintf(buf + k, cap - k, "%s%s %lld",
				     k ? ", " : "", flags[id].flag, v.i);
		k += n > 0 ? (size_t)n : 0;
	}
}

/* "  --flag ARG   " and text wrapped at 78 columns under column 25. */
static void line(const char *flag, const char *arg, const char *text)
{
	char head[64];
	size_t col = 24;

	snprintf(head, sizeof(head), "%s%s%s%s", strlen(flag) > 1 ? "--" : "-",
		 flag, arg ? " " : "", arg ? arg : "");
	printf("  %-20s  ", head);
	while (*text) {
		size_t w = strcspn(text, " ");

		if (col > 24 && col + 1 + w > 78) {
			printf("\n%24s", "");
			col = 24;
		} else if (col > 24) {
			putchar(' ');
			col++;
		}
		printf("%.*s", (int)w, text);
		col += w;
		text += w;
		text += *text == ' ';
	}
	putchar('\n');
}

void sampflags_help(const sampflags *f)
{
	const sc_params d = SC_PARAMS_DEFAULTS;

	for (int i = 0; i < SC_S_COUNT_; i++) {
		int id = order[i];
		char text[512], def[96] = "";

		if (!(f->take & SC_BIT(id)))
			continue;
		switch (id) {
		case SC_S_N:
			snprintf(def, sizeof(def), "%d", d.n);
			break;
		case SC_S_SEED:
			snprintf(def, sizeof(def), "%llu",
				 (unsigned long long)d.seed);
			break;
		case SC_S_TEMPERATURE:
			snprintf(def, sizeof(def), "%g", d.sp.temperature);
			break;
		case SC_S_TOP_K:
			snprintf(def, sizeof(def), "%d", d.sp.top_k);
			break;
		case SC_S_TOP_P:
			snprintf(def, sizeof(def), "%g", d.sp.top_p);
			break;
		case SC_S_MAX_NEW_TOKENS:
			snprintf(def, sizeof(def), "%d", d.max_new);
			break;
		case SC_S_MODE:
			snprintf(def, sizeof(def), "%s", sc_params_mode_name(d.mode));
			break;
		case SC_S_CONF_WINDOW:
			snprintf(def, sizeof(def), "%d",
				 SC_CONF_WINDOW_DEFAULT);
			break;
		case SC_S_STOP_WAVES:
			snprintf(def, sizeof(def), "%d", d.stop_waves);
			break;
		case SC_S_STOP:
			snprintf(def, sizeof(def), "%s", f->stop_default
				 ? f->stop_default : f->cluster_defaults
				 ? "the cluster's sampling.stop, exact unless "
				   "set" : "exact");
			break;
		}
		if (!*def)
			snprintf(text, sizeof(text), "%s", flags[id].what);
		else if (id == SC_S_STOP)
			snprintf(text, sizeof(text), "%s; default: %s",
				 flags[id].what, def);
		else if (f->cluster_defaults)
			snprintf(text, sizeof(text), "%s (default: the "
				 "cluster's)", flags[id].what);
		else
			snprintf(text, sizeof(text), "%s (default %s)",
				 flags[id].what, def);
		line(flags[id].flag, flags[id].arg, text);
	}
}

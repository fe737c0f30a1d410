/*
 * params — the settings of one self-consistency request (sc_params): their
 * names, defaults and limits, and the checks every entry point runs (the
 * CLI's flags, the HTTP gateway's JSON, the coordinator's Ask, the cluster
 * config's sampling: section, the engine), so the same value is accepted
 * or refused the same way, with the same message, wherever it comes in.
 *
 * Owns: sc_params and its parts (stop strings, the run mode and vote
 * names); the settings table (sc_setting: the name users see, kind,
 * limits); the defaults (SC_PARAMS_DEFAULTS); the one message per
 * setting, "NAME = VALUE: must be WHAT" (e.g. "top_k = -1: must be an
 * integer in 0..16777216"), left by every check as its qerr detail with
 * QERR_RANGE. Policy bounds a deployment adds on top of the contract
 * (limits.max_n, the model's context) are separate checks with their own
 * messages (sc_params_n_limit, sc_params_max_new_limit).
 *
 * Callers: tools/sampflags (the CLI's flags), tools/gateway/openai (JSON),
 * coordinator/front (Ask messages), conf/cfg (sampling: section), worker/
 * (DecodeJob), sc/ (sc_run, sc_batch_decode_job, sc_batch_decode).
 */
#ifndef QUORUM_SC_PARAMS_H
#define QUORUM_SC_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "infer/samp.h"
#include "sc/answer.h"
#include "sc/stop.h"

enum sc_mode { SC_RESET = 0, SC_PAGED = 1, SC_BATCHED = 2 };
enum sc_finish { SC_FINISH_STOP = 0, SC_FINISH_LENGTH = 1,
		 SC_FINISH_FILTERED = 2, SC_FINISH_GRAMMAR = 3 };
enum sc_vote { SC_VOTE_MAJORITY = 0, SC_VOTE_CONFIDENCE = 1 };

/* Tokens per confidence window when sc_params.conf_window is 0. */
#define SC_CONF_WINDOW_DEFAULT 16
#define SC_CONF_WINDOW_MAX 4096
/* The largest N and max_new_tokens the engine takes (the contract; a
 * cluster may allow less: limits.max_n, its model's context). */
#define SC_N_MAX 65536
#define SC_MAX_NEW_MAX (1 << 20)
/* top_k: 0 (off) .. 2^24 (at least every vocabulary: off too) */
#define SC_TOP_K_MAX (1 << 24)

/* Stop strings (OpenAI's "stop"): a sample ends at the first occurrence
 * of any of them in its text, which is cut before it (finish "stop").
 * Each is 1..SC_STOP_STR_LEN bytes without NUL; at most SC_STOP_STR_MAX. */
#define SC_STOP_STR_MAX 4
#define SC_STOP_STR_LEN 64

typedef struct {
	int n;
	uint8_t len[SC_STOP_STR_MAX];
	char s[SC_STOP_STR_MAX][SC_STOP_STR_LEN];
} sc_stop_strs;

/* Adds a stop string of len bytes; QERR_RANGE (with the message of
 * setting stop_strings) when there are SC_STOP_STR_MAX already, or it is
 * empty, over SC_STOP_STR_LEN bytes or holds a NUL. */
int sc_params_stop_strs_add(sc_stop_strs *q, const char *s, size_t len);

/* logit_bias (OpenAI's): per token id, a bias added to its logit before
 * every draw; at most SC_LOGIT_BIAS_MAX tokens, each once, ids in
 * 0..SC_LOGIT_BIAS_ID_MAX (the engine also refuses ids past its model's
 * vocabulary), biases in [-100, 100]. Kept sorted by id. */
#define SC_LOGIT_BIAS_MAX 64
#define SC_LOGIT_BIAS_ID_MAX ((1 << 24) - 1)
#define SC_LOGIT_BIAS_LIM 100.0

typedef struct {
	int n;
	int32_t id[SC_LOGIT_BIAS_MAX];
	float bias[SC_LOGIT_BIAS_MAX];
} sc_logit_bias;

/* top_logprobs: at most 20 alternatives per token (OpenAI's bound). */
#define SC_TOP_LOGPROBS_MAX 20

/* presence_penalty and frequency_penalty: in [-2, 2] (OpenAI's range). */
#define SC_PENALTY_LIM 2.0

typedef struct {
	samp_params sp;       /* temperature, top_k, top_p, min_p */
	uint64_t seed;
	int n;                /* samples: the budget N */
	int max_new;          /* new tokens per sample */
	int mode;             /* enum sc_mode */
	int ignore_eos;
	stop_rule stop;       /* early stopping (zero: none; see stop.h) */
	int vote;             /* enum sc_vote (zero: majority) */
	int conf_window;      /* tokens per group-confidence window (0:
			       * SC_CONF_WINDOW_DEFAULT) */
	/* DeepConf's online filter (sc_run only; 0: off): once samples
	 * 0..filter_warmup-1 (the warm-up) have finished, the threshold is
	 * the filter_pct-th percentile (nearest rank below) of their group
	 * confidences; a later sample is cut — finish "filtered", no answer,
	 * its text ends there — as soon as a full window's mean falls below
	 * it (a sample shorter than a window: when its mean is below it at
	 * its end). Samples past the warm-up start only once the threshold
	 * is known, so whether a sample is cut, and where, depends on its
	 * own tokens and the warm-up alone. */
	int filter_warmup;
	double filter_pct;    /* in [0, 100] */
	sc_stop_strs stop_strs; /* none when n is 0 */
	int logprobs;         /* record every drawn token's log-probability
			       * (sc_sample.token_lp) */
	/* With logprobs: per drawn token also its top_logprobs most likely
	 * alternatives (samp_sample_top: the distribution its logprob is
	 * from; sc_sample.alt_*), 0..SC_TOP_LOGPROBS_MAX; 0: none. */
	int top_logprobs;
	/* Early stopping in waves (stop.h stop_horizon; batched mode): 0
	 * keeps stop_min_prefix(stop, n) samples in flight; m >= 1 starts
	 * only samples below prefix + m x the fewest that could let the
	 * rule decide (1: no token is spent on a sample the reply does not
	 * report). The reply is the same bytes for every value: only
	 * started / cancelled / tokens generated and the latency change. */
	int stop_waves;
	/* What a sample's answer is and when two are the same (answer.h):
	 * auto (zero) by default. */
	answer_format answer;
	/* A GBNF grammar every sample follows (text/gbnf.h), or NULL.
	 * BORROWED: whoever sets it keeps the NUL-terminated text alive
	 * while p (or a copy) is used; an engine job compiles it when it
	 * starts. Checked (compiled) when set by sc_setting_*. */
	const char *grammar;
	size_t grammar_len;
	/* OpenAI's penalties over the sample's own generated tokens (never
	 * the prompt's, never another sample's): before each draw, token
	 * t's logit -= presence_penalty * [c_t > 0] + frequency_penalty *
	 * c_t, c_t the times the sample has drawn t so far (0: off). */
	float presence_penalty;
	float frequency_penalty;
	sc_logit_bias logit_bias;
} sc_params;

/* The defaults of every entry point that has its own (quorum run,
 * eval-set, the cluster config's sampling: section): N 8, temperature
 * 0.7, top_k 40, top_p 0.95, 256 new tokens, seed 0, batched, early
 * stopping exact, majority vote. */
#define SC_DEFAULT_N 8
#define SC_DEFAULT_TEMPERATURE 0.7f
#define SC_DEFAULT_TOP_K 40
#define SC_DEFAULT_TOP_P 0.95f
#define SC_DEFAULT_MAX_NEW 256
#define SC_PARAMS_DEFAULTS ((sc_params){ \
	.sp = {SC_DEFAULT_TEMPERATURE, SC_DEFAULT_TOP_K, SC_DEFAULT_TOP_P, \
		0.0f}, \
	.n = SC_DEFAULT_N, .max_new = SC_DEFAULT_MAX_NEW, .mode = SC_BATCHED, \
	.stop = STOP_RULE_DEFAULT})

/* ---- the settings ------------------------------------------------------ */

/* Every setting, by the name of its SamplingParams field (proto/) where
 * it has one. */
enum sc_setting_id {
	SC_S_N, SC_S_SEED, SC_S_TEMPERATURE, SC_S_TOP_K, SC_S_TOP_P,
	SC_S_MAX_NEW_TOKENS, SC_S_IGNORE_EOS, SC_S_STOP, SC_S_VOTE,
	SC_S_STOP_STRINGS, SC_S_LOGPROBS, SC_S_MODE, SC_S_CONF_WINDOW,
	SC_S_CONF_FILTER, SC_S_STOP_WAVES, SC_S_ANSWER, SC_S_GRAMMAR,
	SC_S_MIN_P, SC_S_PRESENCE_PENALTY, SC_S_FREQUENCY_PENALTY,
	SC_S_LOGIT_BIAS, SC_S_TOP_LOGPROBS,
	SC_S_COUNT_
};

enum sc_kind {
	SC_K_INT,   /* an integer in [min, max] */
	SC_K_U64,   /* an unsigned 64-bit integer */
	SC_K_REAL,  /* a number in [min, max] ((min, max] with min_open;
		     * max HUGE_VAL: finite); also finite as a float */
	SC_K_BOOL,  /* true or false (a flag on the command line) */
	SC_K_TEXT,  /* a word or rule (stop, vote, mode, conf_filter) */
	SC_K_STRS,  /* stop strings */
};

typedef struct sc_setting {
	const char *name;  /* as users see it: "top_k" */
	int kind;          /* enum sc_kind */
	double min, max;   /* SC_K_INT, SC_K_REAL */
	int min_open;      /* SC_K_REAL: min excluded */
	const char *must;  /* what a value must be, as the messages say it */
} sc_setting;

/* The setting id (0..SC_S_COUNT_-1); NULL for another id. */
const sc_setting *sc_params_setting(int id);

/* Per-setting checks, for values that arrive one at a time (a flag, a
 * JSON field). Each returns 0, or QERR_RANGE with the setting's one
 * message as qerr detail: "NAME = VALUE: must be WHAT". */
int sc_params_check_int(int id, long long v);     /* SC_K_INT, SC_K_U64 (>= 0) */
int sc_params_check_real(int id, double v);       /* SC_K_REAL */
/* The message for a value of the wrong type or form, shown as given
 * (e.g. "abc", "\"4\""; NULL: "NAME: must be WHAT", as stop_strings
 * says it); always QERR_RANGE. */
int sc_params_check_fail(int id, const char *shown);

/* A setting's value as text (a flag's argument, a config scalar): the
 * whole string must be the value (integers in decimal). Sets it in *p;
 * 0, or QERR_RANGE with the setting's message (p unchanged). */
int sc_params_parse(int id, const char *s, sc_params *p);

/* One bit per setting, for sets of them: the settings a caller was given,
 * the ones a message carries. */
#define SC_BIT(id) (1u << (id))
#define SC_ALL_SETTINGS (SC_BIT(SC_S_COUNT_) - 1u)

/* A setting's value as a typed scalar: the door of every codec that is
 * not text (JSON, protobuf). The member of the setting's kind is used:
 * i for SC_K_INT and SC_K_BOOL (0 or 1), u for SC_K_U64, d for SC_K_REAL,
 * s for SC_K_TEXT (NUL-terminated), s and len for one string of
 * SC_K_STRS. */
typedef struct sc_value {
	long long i;
	unsigned long long u;
	double d;
	const char *s;
	size_t len;
} sc_value;

/* Sets setting id of *p from v after the setting's check (SC_K_STRS adds
 * one string). 0, or QERR_RANGE with the setting's message (p
 * unchanged). */
int sc_params_set(int id, const sc_value *v, sc_params *p);

/* Setting id of *p into *v. SC_K_TEXT: its canonical text ("beta:0.95",
 * "confidence", "8:10", "regex:..."), is written into buf (cap >=
 * SC_VALUE_TEXT_MAX) and v->s points at it; SC_K_STRS: v->i is the count
 * (the strings are p->stop_strs). */
#define SC_VALUE_TEXT_MAX (SC_LOGIT_BIAS_MAX * 24 + 8)
void sc_params_value(int id, const sc_params *p, sc_value *v, char *buf,
		      size_t cap);

/* Policy bounds on top of the contract, checked after it, each with its
 * own message: N at most the cluster's limits.max_n; max_new_tokens at
 * most the model's context. 0 or QERR_RANGE. */
int sc_params_n_limit(long long n, int max_n);
int sc_params_max_new_limit(long long max_new, int ctx_len);
/* logit_bias's token ids within the model's vocabulary of vocab tokens. */
int sc_params_vocab_limit(const sc_params *p, int vocab);

/* Every field, with the same checks and messages as above (the engine's
 * and the workers' guard). 0, or QERR_RANGE. conf_window 0 means the
 * default (SC_CONF_WINDOW_DEFAULT) and filter_warmup 0 no filter: the
 * struct's "unset", not values a user gives. */
int sc_params_check(const sc_params *p);

const char *sc_params_mode_name(int mode);
int sc_params_mode_parse(const char *s);      /* -1 when unknown */
int sc_params_vote_parse(const char *s);      /* -1 when unknown */
const char *sc_params_vote_name(int vote);

#endif

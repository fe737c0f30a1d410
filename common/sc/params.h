/*
 * params — the settings of one self-consistency request (sc_params): their
 * names, defaults and limits, and the one check every entry point runs
 * (the CLI, the HTTP gateway, the coordinator and the engine), so the
 * same value is accepted or refused the same way, with the same message,
 * wherever it comes in.
 *
 * Owns: sc_params and its parts (stop strings, the run mode and vote
 * names). Callers: tools/ (flags), tools/gateway (JSON), coordinator/
 * (Ask messages), sc/ (sc_run, sc_decode, sc_batch_decode).
 */
#ifndef QUORUM_SC_PARAMS_H
#define QUORUM_SC_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/samp.h"
#include "sc/stop.h"

enum sc_mode { SC_RESET = 0, SC_PAGED = 1, SC_BATCHED = 2 };
enum sc_finish { SC_FINISH_STOP = 0, SC_FINISH_LENGTH = 1,
		 SC_FINISH_FILTERED = 2 };
enum sc_vote { SC_VOTE_MAJORITY = 0, SC_VOTE_CONFIDENCE = 1 };

/* Tokens per confidence window when sc_params.conf_window is 0. */
#define SC_CONF_WINDOW_DEFAULT 16
#define SC_CONF_WINDOW_MAX 4096

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

/* Adds a stop string of len bytes; QERR_RANGE (with a detail naming what
 * is wrong) when there are SC_STOP_STR_MAX already, or it is empty, over
 * SC_STOP_STR_LEN bytes or holds a NUL. */
int sc_stop_strs_add(sc_stop_strs *q, const char *s, size_t len);

typedef struct {
	samp_params sp;
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
} sc_params;

/* 0 when every field is in range; else QERR_RANGE with a detail naming
 * the setting and its limits. */
int sc_params_check(const sc_params *p);

const char *sc_mode_name(int mode);
int sc_mode_parse(const char *s);      /* -1 when unknown */
int sc_vote_parse(const char *s);      /* -1 when unknown */
const char *sc_vote_name(int vote);

#endif

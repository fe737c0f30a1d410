/*
 * spwire — the sampling settings on the wire: sc_params to and from the
 * protobuf SamplingParams, for every process that sends or receives them
 * (the CLI's ask and eval-set, the HTTP gateway, the coordinator, the
 * workers). The one place a setting crosses a process boundary.
 *
 * Owns: the mapping between a setting (sc/params' table, by name) and the
 * SamplingParams field of the same name. It is made from the two tables
 * themselves (sc_params_setting and protobuf-c's field descriptors), so a new
 * setting reaches the wire by a field of the same name in
 * proto/quorum.proto and a row in sc/params — nothing here changes.
 * Settings without a field (the engine's mode, confidence windows, the
 * filter, stop waves) never travel.
 *
 * Encoding writes the settings in a set (SC_BIT()s: "what the user gave",
 * or everything a worker samples with); decoding sets, on top of what *p
 * already holds (defaults, a config), each field the message has, with
 * sc/params' check and message, and reports which it set. The checks are
 * sc/params' own, so a value the CLI refuses is refused in the same words
 * when it arrives from a peer. An empty list of stop strings is not
 * carried (a repeated field has no presence): it means none, as an
 * absent one does where nothing configures any; every other setting in
 * the set is carried and decodes to the same value (fuzz_openai checks
 * it for every request the gateway accepts).
 */
#ifndef QUORUM_SPWIRE_H
#define QUORUM_SPWIRE_H

#include <protobuf-c/protobuf-c.h>

#include "proto/quorum.pb-c.h"
#include "sc/params.h"

/* The settings SamplingParams has a field for. */
unsigned spwire_fields(void);

/* What a decode job must carry: everything a worker samples with (the
 * vote and the early-stopping rule are the coordinator's). */
#define SPWIRE_JOB (SC_BIT(SC_S_N) | SC_BIT(SC_S_SEED) | \
		    SC_BIT(SC_S_TEMPERATURE) | SC_BIT(SC_S_TOP_K) | \
		    SC_BIT(SC_S_TOP_P) | SC_BIT(SC_S_MAX_NEW_TOKENS) | \
		    SC_BIT(SC_S_IGNORE_EOS) | SC_BIT(SC_S_STOP_STRINGS) | \
		    SC_BIT(SC_S_LOGPROBS) | SC_BIT(SC_S_ANSWER) | \
		    SC_BIT(SC_S_GRAMMAR) | SC_BIT(SC_S_MIN_P) | \
		    SC_BIT(SC_S_PRESENCE_PENALTY) | \
		    SC_BIT(SC_S_FREQUENCY_PENALTY) | SC_BIT(SC_S_LOGIT_BIAS) | \
		    SC_BIT(SC_S_TOP_LOGPROBS))

/* Storage an encoded message points into (its strings); lives as long as
 * the message. */
typedef struct spwire_buf {
	ProtobufCBinaryData strs[SC_STOP_STR_MAX];
	char text[SC_S_COUNT_][SC_VALUE_TEXT_MAX];
} spwire_buf;

/* Fills *out (initialised here) with the settings of p in `which` that
 * the message has a field for; returns how many fields it set (0: the
 * message can be left out). */
int spwire_encode(const sc_params *p, unsigned which,
		  Quorum__SamplingParams *out, spwire_buf *b);

/* Sets in *p each setting *in has (NULL: none), checked as sc/params
 * checks it; *given (may be NULL) gets their SC_BIT()s. 0, or QERR_RANGE
 * with the setting's message as qerr detail (p may then hold the fields
 * before the bad one). */
int spwire_decode(const Quorum__SamplingParams *in, sc_params *p,
		  unsigned *given);

#endif

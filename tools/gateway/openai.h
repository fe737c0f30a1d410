/*
 * openai — the OpenAI-compatible JSON of the HTTP gateway: requests of
 * /v1/chat/completions and /v1/completions into an Ask, Answers into
 * responses and stream chunks, errors in OpenAI's shape. No I/O.
 *
 * Request bodies are UNTRUSTED: a malformed body, a known field of the
 * wrong type or out of range, an unknown role — a 400 naming the field
 * (`param`). Every field is honoured, ignored by a rule or refused by
 * name (openai.c's field_rules[]; inside messages[], msg_rules[], the
 * param naming the place: "messages[1].tool_calls"). The sampling
 * settings are checked by sc/params, and refused with its message (the
 * CLI's, the coordinator's): "top_k = -1: must be an integer in
 * 0..16777216"; a JSON value of the wrong type is shown as JSON.
 *
 * Mapping (README: HTTP API):
 *   messages      chat: system/developer messages (first, joined with
 *                 a blank line) become the system prompt; then user and
 *                 assistant turns alternate, from a user message to the
 *                 last one, the question: each earlier user message and
 *                 the assistant's answer to it are a turn of the
 *                 conversation (Ask.shots, rendered by the model's chat
 *                 template as prior turns, at most WIRE_SHOTS_MAX); the
 *                 samples and the vote answer the last message. Content
 *                 is a string or an array of {"type":"text"} parts; a
 *                 message's name is ignored, tool calls, refusals, audio
 *                 and non-text parts refused.
 *   prompt        completions: a string (or an array of one) — the
 *                 question, under the model's chat template like `quorum
 *                 ask`.
 *   the sampling settings: the fields of openai.c's settings table
 *                 (OpenAI's names — max_completion_tokens or max_tokens
 *                 for max_new_tokens — and quorum's extensions: the
 *                 vLLM-style ones, early_stop, vote), each read by the
 *                 setting's kind and refused in sc/params' words, as
 *                 `quorum ask` takes them.
 *   stop          a string or up to 4: a sample ends at the first
 *                 occurrence of any, its text cut before it
 *                 (finish_reason "stop"); the vote is over the cut
 *                 texts.
 *   stream        Server-Sent Events (openai_chunk).
 *   think         (extension; or chat_template_kwargs.enable_thinking as
 *                 vLLM takes it) thinking on/off for qwen3 templates, as
 *                 `quorum ask --think`; absent: the cluster's prompt.think.
 *   reasoning_effort "low", "medium" or "high" (OpenAI's field; harmony
 *                 templates, i.e. gpt-oss), as `quorum ask
 *                 --reasoning-effort`; any other value is a 400 naming the
 *                 field; absent: the cluster's default (medium).
 *   reasoning_format (extension, as llama.cpp's server) "auto" (or
 *                 "deepseek"; the default): a chat message's reasoning —
 *                 a <think> block, harmony's analysis and commentary
 *                 channels — goes to "reasoning_content", the answer
 *                 (after </think>, harmony's final channel) to "content"
 *                 (sc/reasoning.h); "none": "content" is the whole text.
 *                 Streams split the same way, delta by delta.
 *   logprobs      chat: true (with top_logprobs 0..20: alternatives);
 *                 completions: K in 0..5 — every chosen token's
 *                 log-probability and K alternatives, in OpenAI's shapes;
 *                 streamed, a live choice's deltas carry their tokens'
 *                 entries, a voted choice's finish chunk all of them
 *                 (sse.h).
 *   tools         refused unless empty (quorum calls no tools).
 *
 *   samples       (extension; or "quorum": {"samples": K}) samples voted
 *                 over; default n, else http.samples (else sampling.n).
 *   stream_samples (extension; or "quorum": {"stream_samples": true})
 *                 stream every sample live under its index.
 *   model         the served model's id or an alias (checked by
 *                 completions.c); absent: the served model.
 *   seed          any int64; a negative one is taken as its two's
 *                 complement uint64 (-1 = 18446744073709551615).
 *   temperature   0..2 here (OpenAI's range), on top of sc/params'.
 *
 * Responses: choices (n, default 1): of the samples, the chains that
 * reached the majority answer first, then the others, each group by
 * sample index; the picked ones in sample-index order, each choice's
 * "index" its position. usage counts every sample's tokens. The "quorum"
 * object: answer (the majority), votes [{answer, count, first_index}],
 * agreement (winning count / samples), samples, voters, answers (per
 * sample, null when none), choice_samples (the sample index of each
 * choice; only when the choices are not every sample), prefix
 * statistics, timings.
 */
#ifndef QUORUM_GWAPI_H
#define QUORUM_GWAPI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/quorum.pb-c.h"
#include "sc/params.h"

#define OPENAI_MAX_STOP SC_STOP_STR_MAX

/* An earlier turn of a conversation: a user message and the assistant's
 * answer (both owned, NUL-terminated, non-empty). */
typedef struct openai_turn {
	char *user, *assistant;
	size_t ulen, alen;
} openai_turn;

typedef struct openai_req {
	int chat;                  /* 1: chat.completion, 0: text_completion */
	int responses;             /* /v1/responses (chat is 1 too:
				    * responses.h) */
	json_t *echo;              /* responses: the request's fields its
				    * response object repeats (owned) */
	char *question;            /* owned, NUL-terminated */
	size_t qlen;
	openai_turn *turns;        /* chat: the turns before the question,
				    * in order (owned); n_turns of them */
	size_t n_turns;
	char *system;              /* owned; NULL: the cluster's */
	size_t slen;
	/* the sampling settings: SC_PARAMS_DEFAULTS, then those given
	 * (SC_BIT()s in given; the rest are the cluster's) */
	sc_params p;
	unsigned given;
	char *grammar_own;         /* p.grammar's text (grammar, or made
				    * from response_format), owned */
	int stream;
	char *model;               /* owned; NULL: not given */
	size_t choices;            /* n: choices returned (1 without n) */
	uint32_t samples;          /* the "samples" extension; 0: not given */
	int stream_samples;        /* extension: stream every sample live */
	int include_usage;         /* stream_options.include_usage */
	int live;                  /* a stream of every sample as it comes
				    * (completions.c decides) */
	int think;                 /* -1: the cluster's; 0 off; 1 on */
	const char *effort;        /* reasoning_effort, a static name; NULL:
				    * not given */
	int reasoning_raw;         /* reasoning_format "none": a chat
				    * message's content is the whole text */
	int logprobs;              /* the chosen tokens' log-probabilities */
	/* the request's field that gave each setting ("max_tokens" or
	 * "max_completion_tokens"; NULL: not given), for messages */
	const char *field[SC_S_COUNT_];
} openai_req;

/* n given by the request (else the cluster's) */
static inline int openai_given_n(const openai_req *r)
{
	return !!(r->given & SC_BIT(SC_S_N));
}

/* A refusal whose message leads with a setting's name, as sc/params and
 * the coordinator word it ("max_new_tokens = 100000: over the model's
 * context"), said with the request's field instead ("max_tokens = ...")
 * into out; the field (or NULL, no setting named) is returned, for the
 * error's param. r: the request (its fields), or NULL (the API's first
 * name for the setting). */
const char *openai_setting_words(const openai_req *r, const char *msg,
				 char *out, size_t cap);

/* A refusal: msg formatted, *param = p (the field, or NULL); -1. */
int openai_fail(char *msg, size_t cap, const char **param, const char *p,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A refusal's place ("messages[1].content[0].text", "input[2]"),
 * formatted into one thread-local buffer of OPENAI_PLACE_MAX bytes: it
 * outlives the body it names, as a 400's param must; each call
 * overwrites the last (copy one before formatting another from it). */
#define OPENAI_PLACE_MAX 160
const char *openai_place(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Parses a request body. 0 ok (free r with openai_req_free); else -1 with
 * msg (a sentence) and *param (the field, or NULL) set. max_n (the
 * cluster's limits.max_n): requests asking for more samples are refused
 * here (sc_params_n_limit). */
int openai_parse(int chat, const char *body, size_t len, int max_n,
		openai_req *r, char *msg, size_t cap, const char **param);
/* The body as a JSON object (the caller's), or NULL with msg: not JSON,
 * an integer past 64 bits, not an object. */
json_t *openai_load_body(const char *body, size_t len, char *msg, size_t cap,
			const char **param);
/* openai_parse of a body already loaded (o, borrowed). */
int openai_parse_json(int chat, json_t *o, int max_n, openai_req *r,
		      char *msg, size_t cap, const char **param);
/* The samples of a parsed request: the "samples" extension, else n when
 * given, else def (http.samples; 0: the cluster's sampling.n, sp.n left
 * unset). -1 with msg when n exceeds the samples. */
int openai_settle(openai_req *r, uint32_t def, char *msg, size_t cap,
		 const char **param);

/* The HTTP API's bound on temperature (OpenAI's), above sc/params'. */
#define OPENAI_TEMPERATURE_MAX 2.0
/* Completions' legacy logprobs: at most 5 alternatives (OpenAI's). */
#define OPENAI_LEGACY_LOGPROBS_MAX 5
void openai_req_free(openai_req *r);

/* {"error": {"message", "type", "param", "code"}} */
/* A field given: there and not null (OpenAI's clients send null for
 * "not given"). */
static inline int openai_present(const json_t *v)
{
	return v && !json_is_null(v);
}

json_t *openai_error(const char *message, const char *type, const char *param,
		    const char *code);

/* A finished request's choices and vote, as the coordinator sent them
 * (the workers end samples at the request's stop strings). Owns its
 * copies. */
typedef struct openai_result {
	size_t n;
	char **text;        /* (n) NUL-terminated; may hold NULs: see len */
	size_t *len;
	char **answer;      /* (n) NULL: no answer */
	const char **finish;
	uint32_t *tokens;
	uint32_t *index;
	json_t **logprobs;  /* (n) a choice's "logprobs"; NULL: not asked */
	size_t n_chosen;    /* the choices: positions into the samples */
	size_t *chosen;     /* (n_chosen) majority chains first, then the
			     * rest, each group by index; kept in index
			     * order */
	json_t *votes;      /* [{answer, count, first_index}] */
	json_t *winner;     /* string or null */
	size_t win_count, voters;
	/* the answer format asked for (answer_format), "" when the
	 * cluster's */
	char answer_format[ANSWER_PATTERN_MAX + 16];
} openai_result;

/* Copies the answer's samples and picks r->choices of them (all when
 * fewer). */
int openai_result_make(const openai_req *r, const Quorum__Answer *a,
		      openai_result *out);
void openai_result_fini(openai_result *x);

/* A choice's log-probabilities as they stream, in the request's shape
 * (chat: logprobs.content's entries; completions: the four arrays of
 * logprobs), built as a finished sample's list is:
 * - openai_lp_new: an empty list (NULL: out of memory);
 * - openai_run_append: a streamed run of a sample's tokens (the text so
 *   far: len bytes) appended, the entries a finished sample's list has
 *   for those tokens, but completions' text_offset as the token's byte
 *   offset: its character may not be whole yet; 0 or -1;
 * - openai_lp_ready (completions): the entries of wait (openai_run_append's)
 *   whose tokens start before upto moved to acc, text_offset made the
 *   index of the character in text[0, len) (whole up to upto: the index
 *   a finished sample's list gives); the others stay; 0 or -1;
 * - openai_lp_count: how many tokens it holds;
 * - openai_lp_object: the choice's "logprobs" from it (taken; alts: the
 *   request asked for alternatives, else completions' top_logprobs is
 *   null, as OpenAI's legacy API has it). */
json_t *openai_lp_new(int chat);
int openai_run_append(int chat, json_t *acc, const char *text, size_t len,
		      const Quorum__TokenRun *x);
int openai_lp_ready(json_t *acc, json_t *wait, const char *text, size_t len,
		    size_t upto);
/* Of a chat-shaped list (its first token starting at byte at of the
 * text), the entries of the tokens that start at byte from or later: a
 * new array (NULL: out of memory). The Responses API's output_text
 * carries its own tokens' entries, none of the reasoning's. */
json_t *openai_lp_from(const json_t *list, size_t at, size_t from);
size_t openai_lp_count(int chat, const json_t *acc);
json_t *openai_lp_object(int chat, json_t *acc, int alts);
/* A choice's "logprobs" (lp, as a response has it) less its first from
 * tokens: what a stream's finish chunk carries after its deltas carried
 * those. NULL: out of memory. */
json_t *openai_lp_rest(int chat, json_t *lp, size_t from);

/* usage's counts. */
typedef struct openai_usage {
	uint64_t prompt;     /* the prompt's tokens */
	uint64_t completion; /* every sample's tokens */
	uint64_t cached;     /* the prompt's tokens served from the prefix
			      * cache */
	uint64_t reasoning;  /* of completion: the samples' reasoning tokens
			      * (those before each one's answer) */
	int has_reasoning;   /* every sample counted them (a worker of an
			      * older version does not) */
} openai_usage;

void openai_usage_counts(const openai_result *x, const Quorum__Answer *a,
			 openai_usage *u);

/* The "quorum" object of a finished request. */
json_t *openai_quorum(const openai_result *x, const Quorum__Answer *a);

/* The whole (non-streamed) response. id e.g. "chatcmpl-…". */
json_t *openai_response(const openai_req *r, const openai_result *x,
		       const Quorum__Answer *a, const char *id, long created,
		       const char *model);

/* system_fingerprint: the model's fingerprint as "fp_" + 16 hex digits
 * once set (cluster.c sets it from the coordinator's status), else
 * null. */
void openai_set_fingerprint(uint64_t fp);
json_t *openai_fingerprint(void);

/* A stream chunk: choice index with a text delta (finish NULL), or its
 * finish (text NULL); role: the first chunk of a chat choice. A chat
 * delta carries reasoning (rlen bytes; NULL or 0: none) as
 * "reasoning_content" beside "content" (text; NULL: none). */
json_t *openai_chunk(const openai_req *r, const char *id, long created,
		    const char *model, uint32_t index, const char *text,
		    size_t len, const char *reasoning, size_t rlen, int role,
		    const char *finish);
/* The usage chunk (stream_options.include_usage): no choices, usage. */
json_t *openai_chunk_usage(const openai_req *r, const openai_result *x,
			  const Quorum__Answer *a, const char *id,
			  long created, const char *model);

#endif

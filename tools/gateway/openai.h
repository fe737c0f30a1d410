/*
 * gwapi — the OpenAI-compatible JSON of the HTTP gateway: requests of
 * /v1/chat/completions and /v1/completions into an Ask, Answers into
 * responses and stream chunks, errors in OpenAI's shape. No I/O.
 *
 * Request bodies are UNTRUSTED: a malformed body, a known field of the
 * wrong type or out of range, an unknown role — a 400 naming the field
 * (`param`). Unknown fields are ignored, as OpenAI does. The sampling
 * settings are checked by sc/params, and refused with its message (the
 * CLI's, the coordinator's): "top_k = -1: must be an integer in
 * 0..16777216"; a JSON value of the wrong type is shown as JSON.
 *
 * Mapping (README: HTTP API):
 *   messages      chat: system/developer messages (joined with a blank
 *                 line) become the system prompt, the one user message
 *                 (last) the question; content is a string or an array of
 *                 {"type":"text"} parts. Multi-turn (assistant turns,
 *                 several user messages) is refused: quorum answers one
 *                 question.
 *   prompt        completions: a string (or an array of one) — the
 *                 question, under the model's chat template like `quorum
 *                 ask`.
 *   n, temperature, top_p, seed, top_k (extension), max_tokens (or
 *                 max_completion_tokens), ignore_eos (extension): the
 *                 sampling parameters of `quorum ask`.
 *   stop          a string or up to 4: each returned text ends before the
 *                 first occurrence of any (finish_reason "stop"), and the
 *                 vote is taken over the cut texts. Decoding itself is
 *                 not cut short, so the kept bytes are those of the
 *                 uncut sample.
 *   stream        Server-Sent Events (gwapi_chunk).
 *   think         (extension; or chat_template_kwargs.enable_thinking as
 *                 vLLM takes it) thinking on/off for qwen3 templates, as
 *                 `quorum ask --think`; absent: the cluster's prompt.think.
 *   logprobs, tools, penalties other than 0: refused (not supported).
 *
 * Responses: choices[] in sample-index order, usage, and a "quorum"
 * object: answer (the majority), votes [{answer, count, first_index}],
 * agreement (winning count / n), samples (n), voters, answers (per
 * choice, null when none), prefix statistics, timings.
 */
#ifndef QUORUM_GWAPI_H
#define QUORUM_GWAPI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/quorum.pb-c.h"
#include "sc/params.h"

#define GWAPI_MAX_STOP SC_STOP_STR_MAX

typedef struct gwapi_req {
	int chat;                  /* 1: chat.completion, 0: text_completion */
	char *question;            /* owned, NUL-terminated */
	size_t qlen;
	char *system;              /* owned; NULL: the cluster's */
	size_t slen;
	Quorum__SamplingParams sp; /* has_* set for what was given */
	int stream;
	int think;                 /* -1: the cluster's; 0 off; 1 on */
	int logprobs;              /* the chosen tokens' log-probabilities */
	char *stop[GWAPI_MAX_STOP];
	size_t n_stop;
	/* stop as the Ask's params.stop_strings (the workers end a sample
	 * there); sp points here only while the Ask is packed */
	ProtobufCBinaryData stop_bin[GWAPI_MAX_STOP];
} gwapi_req;

/* Parses a request body. 0 ok (free r with gwapi_req_free); else -1 with
 * msg (a sentence) and *param (the field, or NULL) set. max_n (the
 * cluster's limits.max_n): requests asking for more samples are refused
 * here (sc_n_limit). */
int gwapi_parse(int chat, const char *body, size_t len, int max_n,
		gwapi_req *r, char *msg, size_t cap, const char **param);
void gwapi_req_free(gwapi_req *r);

/* {"error": {"message", "type", "param", "code"}} */
json_t *gwapi_error(const char *message, const char *type, const char *param,
		    const char *code);

/* A finished request's choices and vote, as the coordinator sent them
 * (the workers end samples at the request's stop strings). Owns its
 * copies. */
typedef struct gwapi_result {
	size_t n;
	char **text;        /* (n) NUL-terminated; may hold NULs: see len */
	size_t *len;
	char **answer;      /* (n) NULL: no answer */
	const char **finish;
	uint32_t *tokens;
	uint32_t *index;
	json_t **logprobs;  /* (n) a choice's "logprobs"; NULL: not asked */
	json_t *votes;      /* [{answer, count, first_index}] */
	json_t *winner;     /* string or null */
	size_t win_count, voters;
} gwapi_result;

int gwapi_result_make(const gwapi_req *r, const Quorum__Answer *a,
		      gwapi_result *out);
void gwapi_result_fini(gwapi_result *x);

/* The "quorum" object of a finished request. */
json_t *gwapi_quorum(const gwapi_result *x, const Quorum__Answer *a);

/* The whole (non-streamed) response. id e.g. "chatcmpl-…". */
json_t *gwapi_response(const gwapi_req *r, const gwapi_result *x,
		       const Quorum__Answer *a, const char *id, long created,
		       const char *model);

/* A stream chunk: choice index with a text delta (finish NULL), or its
 * finish (text NULL); role: the first chunk of a chat choice. */
json_t *gwapi_chunk(const gwapi_req *r, const char *id, long created,
		    const char *model, uint32_t index, const char *text,
		    size_t len, int role, const char *finish);
/* The last chunk: no choices, usage and the quorum object. */
json_t *gwapi_chunk_final(const gwapi_req *r, const gwapi_result *x,
			  const Quorum__Answer *a, const char *id,
			  long created, const char *model);

#endif

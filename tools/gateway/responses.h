/*
 * responses — OpenAI's Responses API (POST /v1/responses) on the chat
 * path: a request is turned into the chat request it means and parsed
 * by openai.c (the same settings, checks and messages), and the voted
 * answer is written as a response object and, streamed, as its events.
 * No I/O.
 *
 * Mapping (docs/http.md's table):
 *   input          a string (the question), or message items ({role,
 *                  content}, type "message"; content a string or
 *                  input_text / output_text parts) as chat's messages,
 *                  the conversation's turns included; items of type
 *                  "reasoning" (an earlier answer's, appended from a
 *                  response's output) are taken and not shown; other
 *                  item and part types are refused, named by their
 *                  place ("input[2].content[0]").
 *   instructions   the system prompt, before any system or developer
 *                  message of input (joined as chat joins them).
 *   max_output_tokens, temperature, top_p, stream, model; text.format
 *                  ({"type": "text" | "json_object" | "json_schema",
 *                  name, schema, strict, description}) as chat's
 *                  response_format; reasoning.effort as
 *                  reasoning_effort; include
 *                  ["message.output_text.logprobs"] and top_logprobs
 *                  as chat's logprobs / top_logprobs; quorum's
 *                  extensions (samples, seed, top_k, constraints, ...)
 *                  as on chat.
 *   previous_response_id, conversation, prompt: refused (quorum keeps
 *                  no responses or prompts: the conversation is sent as
 *                  input).
 *
 * The response: one output message, the voted chain (chat's first
 * choice with n = 1), after a "reasoning" item holding its reasoning
 * when it has any (sc/reasoning.h; reasoning_format "none": none, the
 * whole text in the message); status "incomplete" (reason
 * max_output_tokens) when that chain ran out of tokens; usage counts
 * every sample's tokens, as chat's; the "quorum" object as chat's.
 * Streamed: response.created and response.in_progress at once, then each
 * item's added / delta / done events and response.completed (or
 * response.incomplete) with the whole object; the deltas as the one
 * chain decodes when the request has one sample, else once the vote is
 * settled (the voted chain cannot be known before).
 */
#ifndef QUORUM_GW_RESPONSES_H
#define QUORUM_GW_RESPONSES_H

#include <jansson.h>
#include <stddef.h>

#include "openai.h"

/* Parses a /v1/responses body into r (r->responses and r->chat set):
 * as openai_parse, errors named by the Responses API's fields. */
int responses_parse(const char *body, size_t len, int max_n,
		    openai_req *r, char *msg, size_t cap, const char **param);

/* The response object of id (made for the call: "resp_" + 16 hex
 * digits): in progress (x and a NULL: no output yet), or the finished
 * request's. */
json_t *responses_object(const openai_req *r, const openai_result *x,
			 const Quorum__Answer *a, const char *id,
			 long created, const char *model);

/* A stream's events: emit takes each one's data (its "type" set; owned
 * by emit). */
typedef void (*responses_emit)(void *ctx, json_t *event);

/* The output of response id as its text comes (one chain's, split into
 * its reasoning and its answer as sc/reasoning splits it): the reasoning
 * item opens with its first reasoning bytes, and closes when the
 * answer's first bytes open the message item; each piece a delta event.
 * responses_live_end(o), with the finished object o (borrowed), closes
 * what is open with o's items whole, opens and closes what the text
 * never opened (an empty answer), and ends with response.completed (or
 * response.incomplete) and o. */
typedef struct responses_live {
	char id[48];
	int open;        /* 0 none, 1 the reasoning item, 2 the message */
	size_t k, opened; /* the open item's output_index; items opened */
	char *rtext;     /* the reasoning so far */
	size_t rlen;
	size_t lp_sent;  /* the answer's entries its deltas carried */
	responses_emit emit;
	void *ctx;
} responses_live;

void responses_live_init(responses_live *l, const char *id,
			 responses_emit emit, void *ctx);
/* A piece of reasoning (r, rn bytes) and of the answer (c, cn; lp its
 * tokens' log-probabilities, or NULL: an empty list), either empty. */
void responses_live_text(responses_live *l, const char *r, size_t rn,
			 const char *c, size_t cn, json_t *lp);
void responses_live_end(responses_live *l, json_t *o);
void responses_live_fini(responses_live *l);

/* The events of a finished response o (borrowed), not streamed live:
 * each item's text as one delta, then as responses_live_end. */
void responses_events(json_t *o, const char *id, responses_emit emit,
		      void *ctx);

#endif

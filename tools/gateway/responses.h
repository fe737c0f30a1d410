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
 * Streamed, the events come once the vote is settled (the voted chain
 * cannot be known before): response.created and response.in_progress at
 * once, then each item's added / delta / done events and
 * response.completed (or response.incomplete) with the whole object.
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

/* The events of a finished response object o (borrowed) after
 * response.in_progress: each output item's, then the final one. emit
 * takes each event's data (its "type" set; owned by emit). */
typedef void (*responses_emit)(void *ctx, json_t *event);
void responses_events(json_t *o, responses_emit emit, void *ctx);

#endif

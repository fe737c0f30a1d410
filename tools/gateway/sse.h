/*
 * sse — a streamed completion (`"stream": true`) as Server-Sent Events.
 * Live (every sample is a choice, or "stream_samples"): one chunk per
 * sample's text as the coordinator streams it, under its sample index (a
 * UTF-8 character split across parts is held back). Otherwise (fewer
 * choices than samples, e.g. no n: the one voted choice): the choices
 * whole once the vote is settled — a chain cannot be known to reach the
 * majority before then. Either way the finish chunks come once voted,
 * the last with the quorum object; with stream_options.include_usage a
 * chunk with no choices and usage; then "data: [DONE]". Every chunk
 * but that one has one choice (`chunk.choices[0]` never throws). A failure after the response began is an error event;
 * while waiting, a keep-alive comment every second notices a client that
 * left. Called by completions.c (sse_respond) and serve.c's on_done
 * (sse_detach); libmicrohttpd pulls the bytes on the connection's
 * thread.
 */
#ifndef QUORUM_GW_SSE_H
#define QUORUM_GW_SSE_H

#include <microhttpd.h>
#include <stdint.h>

#include "gateway.h"
#include "openai.h"

/* Starts the stream of the call whose first reply (not a final failure)
 * is first; deadline bounds the whole stream. Takes call, *r and first
 * whatever it returns (out of memory: a 500 error). id: the response
 * id, as made for the call. */
enum MHD_Result sse_respond(struct MHD_Connection *mc, gwconn *cn,
			    gwcall *call, openai_req *r, const char *id,
			    int64_t deadline, Quorum__ClientReply *first);

/* The request of cn (cn->st set) ended: a stream that did not reach
 * [DONE] is counted as 499 (the client went away) and its request
 * cancelled now; the stream itself is freed with its response. */
void sse_detach(gwconn *cn, enum MHD_RequestTerminationCode toe);

#endif

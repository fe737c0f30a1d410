/*
 * completions — POST /v1/chat/completions and /v1/completions: the body
 * parsed (openai.h), admission under http.max_in_flight, the Ask
 * submitted over the link, and the answer as one JSON response or, when
 * asked, handed to sse.c as a stream. A failure gets the HTTP code of
 * its reply status; no reply within limits.request_timeout_ms plus 5 s:
 * 504; a coordinator that answers nothing (not even a status query)
 * within about 2 s: 503; a client that hangs up while it waits: its
 * request cancelled. Called by serve.c's routing once the body is in,
 * and again each time the request's parked wait ends (pending.h).
 */
#ifndef QUORUM_GW_COMPLETIONS_H
#define QUORUM_GW_COMPLETIONS_H

#include <microhttpd.h>

#include "gateway.h"

enum MHD_Result completions_serve(struct MHD_Connection *mc, gwconn *cn);
/* Frees cn's job (a call not answered is cancelled); serve.c's on_done. */
void completions_free(gwconn *cn);

#endif

/*
 * gateway — the state the parts of `quorum serve` share (internal to
 * tools/gateway/; cmd_serve is the one entry point from outside).
 *
 * The parts, one file each:
 *   serve.c        cmd_serve: options, the link, the daemon, routing
 *   http.c         the reply layer: routes, request bodies, JSON and
 *                  OpenAI-style error replies, reply status -> HTTP code
 *   auth.c         API keys
 *   completions.c  POST /v1/chat/completions and /v1/completions
 *   sse.c          streamed completions (Server-Sent Events)
 *   pending.c      requests parked while they wait for the coordinator
 *   conns.c        connection records and their deadlines
 *   jscan.c        the JSON pre-scan of a body
 *   metrics.c      the bookkeeping (in flight, counters, latency, the
 *                  recent requests) and what reports it: /metrics and
 *                  the status page's JSON
 *   cluster.c      the coordinator's status: /health, /v1/models
 *   openai.c       the OpenAI JSON (no I/O)
 *   link.c         the ZeroMQ link to the coordinator
 *
 * Threads: libmicrohttpd runs event-driven on a pool of http.threads
 * threads; a connection is served by one of them at a time, so a gwconn
 * is touched by one thread at a time (its handler, its stream's reader,
 * or, while parked, by nobody: pending.c only resumes it; the stream may
 * outlive the gwconn, sse.h). gw is filled by cmd_serve before the
 * daemon starts and only read while it runs; what changes while serving
 * is metrics.c's, pending.c's and conns.c's, each under its lock, and
 * the link's (gwlink.h).
 */
#ifndef QUORUM_GATEWAY_H
#define QUORUM_GATEWAY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "conf/cfg.h"
#include "gwlink.h"

typedef struct sse_stream sse_stream;
typedef struct gwjob gwjob;
typedef struct gwstatus gwstatus;

/* The gateway: set up once by cmd_serve (serve.c), read-only after. */
typedef struct gwstate {
	cfg *c;
	gwlink *l;
	const char *endpoint;   /* the coordinator's client endpoint */
	char model_id[128];     /* the model file's name, less .gguf */
	time_t started;
} gwstate;

extern gwstate gw;

/* One HTTP request, from its first callback to on_done (serve.c), which
 * frees it. */
typedef struct gwconn {
	int ep;                 /* HTTP_EP_* (http.h) */
	int64_t t0;
	char *body;
	size_t len;
	int too_big;
	int code;               /* the HTTP status sent */
	int counted;            /* in flight (metrics_enter) */
	json_t *rec;            /* the status page's record of it */
	sse_stream *st;
	gwjob *job;             /* a completion's (completions.c) */
	gwstatus *sq;           /* a status query's (cluster.c) */
	int key;                /* auth_key's: who asked (auth.h) */
	char rid[24];           /* x-request-id: "req_" + 16 hex digits */
	char *model_arg;        /* GET /v1/models/{id}: the id (owned) */
	uint32_t retry_after_ms;/* the coordinator's retry hint (0: none):
				 * Retry-After of a 429 or 503 */
	const char *hdr[2];     /* a header the refusal names (name,
				 * value), or NULL: a 405's Allow (RFC
				 * 9110 15.5.6), a 415's Accept-Encoding
				 * for a coded body (15.5.16) */
	int close;              /* over a connection cap: "Connection:
				 * close" on the reply (conns.h) */
} gwconn;

#endif

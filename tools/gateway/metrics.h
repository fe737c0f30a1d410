/*
 * metrics — the gateway's bookkeeping and what reports it: completions
 * in flight (bounded by http.max_in_flight), HTTP replies by endpoint and
 * code, answered requests, samples and tokens, the completion latency
 * histogram, and a record of the last 32 requests; GET /metrics
 * (Prometheus text, with the coordinator's counters and per-worker
 * gauges) and GET /v1/quorum/status (the status page's JSON).
 *
 * Called by completions.c and sse.c (admission, answers, records) and
 * serve.c (routing, on_done's accounting). One lock: every call may come
 * from any connection's thread.
 */
#ifndef QUORUM_GW_METRICS_H
#define QUORUM_GW_METRICS_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdint.h>

#include "gateway.h"
#include "openai.h"

/* 0: one more completion in flight (until metrics_leave); -1: already
 * http.max_in_flight. */
int metrics_enter(void);
void metrics_leave(void);

/* The reply code of a request to endpoint ep (HTTP_EP_*). */
void metrics_count_code(int ep, int code);
/* A completion's latency, t0 (wire_now_ms) to now. */
void metrics_observe(int64_t t0);
/* Counts an answered request's samples and tokens. */
void metrics_count_answer(const Quorum__Answer *a);

/* A status-page record of a request (its "status" "running"), kept as
 * cn->rec; metrics_record_push keeps it among the recent requests (the
 * record then belongs there; cn->rec is set to NULL). */
json_t *metrics_record_new(const openai_req *r, const char *id, int stream);
void metrics_record_push(gwconn *cn);
/* Sets the record's answer, votes, voters and agreement. */
void metrics_record_answer(json_t *rec, const openai_result *x);

/* GET /metrics */
enum MHD_Result metrics_serve(struct MHD_Connection *mc, gwconn *cn);
/* GET /v1/quorum/status */
enum MHD_Result metrics_status(struct MHD_Connection *mc, gwconn *cn);

/* Drops the recent requests' records. */
void metrics_fini(void);

#endif

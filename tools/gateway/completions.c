/*
 * completions — the completion endpoints (completions.h). Owns a
 * request's job (its parsed request, its call, its parked wait): the
 * handler submits the Ask, parks the connection (pending.h) and is
 * called again when a reply, the deadline or a hang-up came; no thread
 * waits. A call with no reply after GW_PROBE_MS has the coordinator
 * probed (a status query, GW_PROBE_MS more): no answer, 503 at once
 * rather than the request timeout.
 */
#include "completions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/client.h"
#include "auth.h"
#include "cluster.h"
#include "http.h"
#include "jscan.h"
#include "metrics.h"
#include "openai.h"
#include "pending.h"
#include "responses.h"
#include "sse.h"
#include "net/spwire.h"
#include "net/wire.h"

#define GW_GRACE_MS 5000        /* past the request timeout: 504 */
#define GW_PROBE_MS 1000

/* A completion between its submission and its response. */
struct gwjob {
	openai_req r;
	gwcall *call;
	gwcall *probe;           /* the status query while probing */
	int probed;
	char id[40];
	int64_t end;             /* the reply deadline */
	pending p;
};

/* system_fingerprint: the first completion asks the coordinator for it
 * (it has just answered: fast) unless /health or /v1/models did. */
static void learn_fingerprint(void)
{
	json_t *f = openai_fingerprint();

	if (json_is_null(f)) {
		Quorum__ClientReply *st = cluster_status();

		if (st)
			quorum__client_reply__free_unpacked(st, NULL);
	}
	json_decref(f);
}

static int64_t reply_deadline(void)
{
	return wire_now_ms() + gw.c->limits.request_timeout_ms + GW_GRACE_MS;
}

static void make_id(const openai_req *r, uint64_t rid, char *id, size_t cap)
{
	if (r->responses)
		snprintf(id, cap, "resp_%016llx", (unsigned long long)rid);
	else
		snprintf(id, cap, "%s-%016llx", r->chat ? "chatcmpl" : "cmpl",
			 (unsigned long long)rid);
}

static gwcall *submit(openai_req *r, struct MHD_Connection *mc)
{
	Quorum__ClientRequest req = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__Ask ask = QUORUM__ASK__INIT;
	Quorum__SamplingParams sp;
	spwire_buf spb;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char who[GWLINK_WHO_MAX];

	/* the caller is a client of its own at the coordinator (gwlink.h) */
	ask.on_behalf_of = (char *)gwlink_who(gw.l, gw.c, auth_bearer(mc),
					      ci ? ci->client_addr : NULL,
					      who, sizeof(who));

	Quorum__Shot turn[WIRE_SHOTS_MAX], *turns[WIRE_SHOTS_MAX];

	ask.question.data = (uint8_t *)r->question;
	ask.question.len = r->qlen;
	/* the conversation's earlier turns, as the chat template's prior
	 * turns (openai.h) */
	for (size_t i = 0; i < r->n_turns; i++) {
		quorum__shot__init(&turn[i]);
		turn[i].question.data = (uint8_t *)r->turns[i].user;
		turn[i].question.len = r->turns[i].ulen;
		turn[i].answer.data = (uint8_t *)r->turns[i].assistant;
		turn[i].answer.len = r->turns[i].alen;
		turns[i] = &turn[i];
	}
	ask.n_shots = r->n_turns;
	ask.shots = r->n_turns ? turns : NULL;
	if (r->system) {
		ask.has_system = 1;
		ask.system.data = (uint8_t *)r->system;
		ask.system.len = r->slen;
	}
	/* what was given, and always the rule (early_stop, else none) */
	spwire_encode(&r->p, r->given, &sp, &spb);
	ask.params = &sp;
	if (r->stream && !r->live) {
		/* the voted answer streamed: its response begins when the
		 * coordinator takes the request (keep-alives until the
		 * vote), not when the vote is over */
		ask.has_announce = 1;
		ask.announce = 1;
	}
	if (r->live) {
		ask.has_stream = 1;
		ask.stream = 1;
	}
	if (r->think >= 0) {
		ask.has_think = 1;
		ask.think = r->think;
	}
	ask.reasoning_effort = (char *)r->effort;
	req.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	req.ask = &ask;
	return gwlink_submit(gw.l, &req);
}

/* Sends the error of a final non-OK reply (or of no reply). */
static enum MHD_Result reply_failed(struct MHD_Connection *mc, gwconn *cn,
				    const Quorum__ClientReply *r)
{
	const char *ecode, *param = NULL;
	char msg[512], said[512];
	int code;

	if (!r) {
		snprintf(msg, sizeof(msg), "no reply from the coordinator at "
			 "%s within %d ms", gw.endpoint,
			 gw.c->limits.request_timeout_ms + GW_GRACE_MS);
		return http_send_err(mc, cn, 504, msg, NULL, "timeout");
	}
	if (r->status == QUORUM__STATUS__STATUS_OK) {
		code = 500;
		ecode = "server_error";
		snprintf(msg, sizeof(msg), "malformed reply: OK without an "
			 "answer");
	} else {
		code = http_status_code(r->status, &ecode);
		if (r->has_retry_after_ms)
			cn->retry_after_ms = r->retry_after_ms;
		snprintf(msg, sizeof(msg), "%s", r->error && *r->error
			 ? r->error : client_status_name(r->status));
	}
	if (code == 400) {
		/* the coordinator names the setting ("max_new_tokens =
		 * 100000: over the model's context"): said, and named in
		 * param, as the request's field; a prompt too long for the
		 * context is the prompt's (OpenAI's param) */
		param = openai_setting_words(cn->job ? &cn->job->r : NULL, msg,
					     said, sizeof(said));
		snprintf(msg, sizeof(msg), "%s", said);
		if (!strcmp(ecode, "context_length_exceeded"))
			param = cn->ep == HTTP_EP_CHAT ? "messages"
				: cn->ep == HTTP_EP_RESP ? "input" : "prompt";
	}
	return http_send_err(mc, cn, code, msg, param, ecode);
}

void completions_free(gwconn *cn)
{
	gwjob *j = cn->job;

	if (!j)
		return;
	gwcall_release(j->probe);
	gwcall_release(j->call); /* not answered: cancelled */
	if (j->p.rep)
		quorum__client_reply__free_unpacked(j->p.rep, NULL);
	openai_req_free(&j->r);
	free(j);
	cn->job = NULL;
}

/* Parks the job on call until its reply or deadline. */
static enum MHD_Result park(gwjob *j, gwcall *call, int64_t deadline)
{
	j->p.call = call;
	j->p.deadline = deadline < j->end ? deadline : j->end;
	pending_park(&j->p);
	return MHD_YES;
}

static gwcall *submit_probe(void)
{
	Quorum__ClientRequest req = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__StatusQuery q = QUORUM__STATUS_QUERY__INIT;

	req.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	req.status = &q;
	return gwlink_submit(gw.l, &req);
}

/* Validates, admits and submits the request, then parks it. */
static enum MHD_Result start(struct MHD_Connection *mc, gwconn *cn)
{
	openai_req r;
	char msg[512];
	const char *param;
	gwjob *j;

	if (cn->too_big)
		return http_too_big(mc, cn);
	{
		size_t nv, depth;

		switch (jscan_check(cn->body ? cn->body : "", cn->len,
				    (size_t)gw.c->http.max_json_values,
				    (size_t)gw.c->http.max_json_depth, &nv,
				    &depth)) {
		case JSCAN_VALUES:
			snprintf(msg, sizeof(msg), "the body holds more than "
				 "http.max_json_values (%d) JSON values",
				 gw.c->http.max_json_values);
			return http_send_err(mc, cn, 413, msg, NULL,
					     "request_too_large");
		case JSCAN_DEPTH:
			snprintf(msg, sizeof(msg), "the body's JSON nests "
				 "deeper than http.max_json_depth (%d)",
				 gw.c->http.max_json_depth);
			return http_send_err(mc, cn, 400, msg, NULL,
					     "invalid_request_error");
		}
	}
	if (cn->ep == HTTP_EP_RESP
		    ? responses_parse(cn->body ? cn->body : "", cn->len,
				      gw.c->limits.max_n, &r, msg, sizeof(msg),
				      &param)
		    : openai_parse(cn->ep == HTTP_EP_CHAT,
				   cn->body ? cn->body : "", cn->len,
				   gw.c->limits.max_n, &r, msg, sizeof(msg),
				   &param))
		return http_send_err(mc, cn, 400, msg, param,
				     "invalid_request_error");
	if (r.model && !cluster_model_known(r.model)) {
		snprintf(msg, sizeof(msg), "The model '%.100s' does not exist "
			 "(this gateway serves '%s')", r.model, gw.model_id);
		openai_req_free(&r);
		return http_send_err(mc, cn, 404, msg, "model",
				     "model_not_found");
	}
	if (openai_settle(&r, (uint32_t)gw.c->http.samples, msg, sizeof(msg),
			 &param)) {
		openai_req_free(&r);
		return http_send_err(mc, cn, 400, msg, param,
				     "invalid_request_error");
	}
	/* a stream of every sample as it comes when every sample is a
	 * choice or the request asks; else the choices once voted (a
	 * response's one output: live when it is the one sample) */
	r.live = r.stream &&
		 (r.stream_samples ||
		  r.choices >= (uint32_t)(openai_given_n(&r)
					  ? r.p.n : gw.c->sampling.p.n));
	if (metrics_enter()) {
		openai_req_free(&r);
		snprintf(msg, sizeof(msg), "the gateway is serving "
			 "http.max_in_flight (%d) requests; try again later",
			 gw.c->http.max_in_flight);
		return http_send_err(mc, cn, 429, msg, NULL,
				     "rate_limit_exceeded");
	}
	cn->counted = 1;
	if (!(j = calloc(1, sizeof(*j)))) {
		openai_req_free(&r);
		return http_send_err(mc, cn, 500, "out of memory", NULL, NULL);
	}
	j->r = r;
	cn->job = j;
	if (!(j->call = submit(&j->r, mc)))
		return http_send_err(mc, cn, 500, "out of memory", NULL, NULL);
	make_id(&j->r, gwcall_id(j->call), j->id, sizeof(j->id));
	cn->rec = metrics_record_new(&j->r, j->id, j->r.stream);
	j->end = reply_deadline();
	pending_watch(&j->p, mc);
	return park(j, j->call, wire_now_ms() + GW_PROBE_MS);
}

/* The client left while its request waited: cancelled (by the release
 * in completions_free), the connection closed. */
static enum MHD_Result hung_up(gwconn *cn)
{
	cn->code = 499;
	if (cn->rec)
		json_object_set_new(cn->rec, "status",
				    json_string("client_closed"));
	return http_close_on_purpose();
}

/* The wait of a probe ended. */
static enum MHD_Result probe_done(struct MHD_Connection *mc, gwconn *cn)
{
	gwjob *j = cn->job;
	char msg[256];

	gwcall_release(j->probe);
	j->probe = NULL;
	if (j->p.why == PENDING_GONE)
		return hung_up(cn);
	if (j->p.why == PENDING_REPLY) {
		quorum__client_reply__free_unpacked(j->p.rep, NULL);
		j->p.rep = NULL;
		return park(j, j->call, j->end); /* it is up: wait */
	}
	snprintf(msg, sizeof(msg), "the coordinator at %s does not answer "
		 "(see /health); try again later", gw.endpoint);
	return http_send_err(mc, cn, 503, msg, NULL, "service_unavailable");
}

enum MHD_Result completions_serve(struct MHD_Connection *mc, gwconn *cn)
{
	gwjob *j = cn->job;
	Quorum__ClientReply *rep;
	enum MHD_Result ok;

	if (!j)
		return start(mc, cn);
	if (j->probe)
		return probe_done(mc, cn);
	if (j->p.why == PENDING_GONE)
		return hung_up(cn);
	rep = j->p.rep;
	j->p.rep = NULL;
	if (!rep && j->p.why == PENDING_DEADLINE && !j->probed &&
	    !gwlink_aborted(gw.l) && wire_now_ms() < j->end) {
		/* no reply yet: is the coordinator there at all? */
		j->probed = 1;
		if (!(j->probe = submit_probe()))
			return park(j, j->call, j->end);
		return park(j, j->probe, wire_now_ms() + GW_PROBE_MS);
	}
	if (!rep && j->p.why == PENDING_DEADLINE && j->probed &&
	    !gwlink_aborted(gw.l) && wire_now_ms() < j->end)
		return park(j, j->call, j->end);
	if (!rep || (gwlink_final(rep) &&
		     (rep->status != QUORUM__STATUS__STATUS_OK ||
		      rep->body_case != QUORUM__CLIENT_REPLY__BODY_ANSWER))) {
		if (!rep && gwlink_aborted(gw.l))
			ok = http_send_err(mc, cn, 503, "the gateway is "
					   "stopping", NULL,
					   "service_unavailable");
		else
			ok = reply_failed(mc, cn, rep);
		if (rep)
			quorum__client_reply__free_unpacked(rep, NULL);
		return ok;
	}
	if (j->r.stream) {
		gwcall *call = j->call;

		learn_fingerprint();
		j->call = NULL; /* the stream's now, and the request too */
		ok = sse_respond(mc, cn, call, &j->r, j->id, j->end, rep);
		memset(&j->r, 0, sizeof(j->r));
		return ok;
	}
	if (!gwlink_final(rep)) { /* partials (not asked for): skip */
		quorum__client_reply__free_unpacked(rep, NULL);
		return park(j, j->call, j->end);
	}
	gwcall_release(j->call);
	j->call = NULL;
	learn_fingerprint();
	{
		openai_result x;

		if (openai_result_make(&j->r, rep->answer, &x)) {
			ok = http_send_err(mc, cn, 500, "out of memory", NULL,
					   NULL);
		} else {
			metrics_count_answer(rep->answer);
			metrics_record_answer(cn->rec, &x);
			ok = http_send_json(mc, cn, 200, j->r.responses
				? responses_object(&j->r, &x, rep->answer,
						   j->id, (long)time(NULL),
						   gw.model_id)
				: openai_response(&j->r, &x, rep->answer,
						  j->id, (long)time(NULL),
						  gw.model_id));
			openai_result_fini(&x);
		}
	}
	quorum__client_reply__free_unpacked(rep, NULL);
	return ok;
}

/*
 * completions — the completion endpoints (completions.h). Holds no state
 * beyond the request: a handler blocks on its call's replies, bounded by
 * the request timeout.
 */
#include "completions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/client.h"
#include "auth.h"
#include "http.h"
#include "metrics.h"
#include "openai.h"
#include "sse.h"
#include "net/wire.h"

#define GW_GRACE_MS 5000        /* past the request timeout: 504 */

static int64_t reply_deadline(void)
{
	return wire_now_ms() + gw.c->limits.request_timeout_ms + GW_GRACE_MS;
}

static void make_id(const gwapi_req *r, uint64_t rid, char *id, size_t cap)
{
	snprintf(id, cap, "%s-%016llx", r->chat ? "chatcmpl" : "cmpl",
		 (unsigned long long)rid);
}

static gwcall *submit(gwapi_req *r, struct MHD_Connection *mc)
{
	Quorum__ClientRequest req = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__Ask ask = QUORUM__ASK__INIT;
	Quorum__SamplingParams sp = r->sp;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char who[GWLINK_WHO_MAX];

	/* the caller is a client of its own at the coordinator (link.h) */
	ask.on_behalf_of = (char *)gwlink_who(gw.l, gw.c, auth_bearer(mc),
					      ci ? ci->client_addr : NULL,
					      who, sizeof(who));

	ask.question.data = (uint8_t *)r->question;
	ask.question.len = r->qlen;
	if (r->system) {
		ask.has_system = 1;
		ask.system.data = (uint8_t *)r->system;
		ask.system.len = r->slen;
	}
	/* always: the rule (early_stop, else none) and the vote too */
	for (size_t i = 0; i < r->n_stop; i++) {
		r->stop_bin[i].data = (uint8_t *)r->stop[i];
		r->stop_bin[i].len = strlen(r->stop[i]);
	}
	sp.n_stop_strings = r->n_stop;
	sp.stop_strings = r->n_stop ? r->stop_bin : NULL;
	ask.params = &sp;
	if (r->stream) {
		ask.has_stream = 1;
		ask.stream = 1;
	}
	if (r->think >= 0) {
		ask.has_think = 1;
		ask.think = r->think;
	}
	req.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	req.ask = &ask;
	return gwlink_submit(gw.l, &req);
}

/* Sends the error of a final non-OK reply (or of no reply). */
static enum MHD_Result reply_failed(struct MHD_Connection *mc, gwconn *cn,
				    const Quorum__ClientReply *r)
{
	const char *ecode;
	char msg[512];
	int code;

	if (!r) {
		snprintf(msg, sizeof(msg), "no reply from the coordinator at "
			 "%s within %d ms", gw.endpoint,
			 gw.c->limits.request_timeout_ms + GW_GRACE_MS);
		return http_send_err(mc, cn, 504, msg, NULL, "TIMEOUT");
	}
	if (r->status == QUORUM__STATUS__STATUS_OK) {
		code = 500;
		ecode = "INTERNAL";
		snprintf(msg, sizeof(msg), "malformed reply: OK without an "
			 "answer");
	} else {
		code = http_status_code(r->status, &ecode);
		snprintf(msg, sizeof(msg), "%s", r->error && *r->error
			 ? r->error : client_status_name(r->status));
	}
	return http_send_err(mc, cn, code, msg, NULL, ecode);
}

enum MHD_Result completions_serve(struct MHD_Connection *mc, gwconn *cn)
{
	gwapi_req r;
	char msg[512], id[40];
	const char *param;
	gwcall *call;
	Quorum__ClientReply *rep = NULL;
	int64_t end;
	enum MHD_Result ok;

	if (cn->too_big) {
		snprintf(msg, sizeof(msg), "the body is larger than "
			 "http.max_body_bytes (%lld bytes)",
			 (long long)gw.c->http.max_body_bytes);
		return http_send_err(mc, cn, 413, msg, NULL, "TOO_LONG");
	}
	if (gwapi_parse(cn->ep == HTTP_EP_CHAT, cn->body ? cn->body : "",
			cn->len, gw.c->limits.max_n, &r, msg, sizeof(msg),
			&param))
		return http_send_err(mc, cn, 400, msg, param, "BAD_REQUEST");
	if (metrics_enter()) {
		gwapi_req_free(&r);
		snprintf(msg, sizeof(msg), "the gateway is serving "
			 "http.max_in_flight (%d) requests; try again later",
			 gw.c->http.max_in_flight);
		return http_send_err(mc, cn, 429, msg, NULL, "BUSY");
	}
	cn->counted = 1;
	if (!(call = submit(&r, mc))) {
		gwapi_req_free(&r);
		return http_send_err(mc, cn, 500, "out of memory", NULL, NULL);
	}
	make_id(&r, gwcall_id(call), id, sizeof(id));
	cn->rec = metrics_record_new(&r, id, r.stream);
	end = reply_deadline();
	/* the first reply: a failure still gets its HTTP code */
	rep = gwcall_next(call, end);
	if (!rep || (gwlink_final(rep) &&
		     (rep->status != QUORUM__STATUS__STATUS_OK ||
		      rep->body_case != QUORUM__CLIENT_REPLY__BODY_ANSWER))) {
		ok = reply_failed(mc, cn, rep);
		if (rep)
			quorum__client_reply__free_unpacked(rep, NULL);
		gwcall_release(call);
		gwapi_req_free(&r);
		return ok;
	}
	if (r.stream)
		return sse_respond(mc, cn, call, &r, id, end, rep);
	while (!gwlink_final(rep)) { /* partials (not asked for): skip */
		quorum__client_reply__free_unpacked(rep, NULL);
		if (!(rep = gwcall_next(call, end)) ||
		    (gwlink_final(rep) &&
		     (rep->status != QUORUM__STATUS__STATUS_OK ||
		      rep->body_case != QUORUM__CLIENT_REPLY__BODY_ANSWER))) {
			ok = reply_failed(mc, cn, rep);
			if (rep)
				quorum__client_reply__free_unpacked(rep, NULL);
			gwcall_release(call);
			gwapi_req_free(&r);
			return ok;
		}
	}
	gwcall_release(call);
	{
		gwapi_result x;

		if (gwapi_result_make(&r, rep->answer, &x)) {
			ok = http_send_err(mc, cn, 500, "out of memory", NULL,
					   NULL);
		} else {
			metrics_count_answer(rep->answer);
			metrics_record_answer(cn->rec, &x);
			ok = http_send_json(mc, cn, 200, gwapi_response(
				&r, &x, rep->answer, id, (long)time(NULL),
				gw.model_id));
			gwapi_result_fini(&x);
		}
	}
	quorum__client_reply__free_unpacked(rep, NULL);
	gwapi_req_free(&r);
	return ok;
}

/*
 * sse — streamed completions as Server-Sent Events (sse.h). Owns the
 * stream: its call, the text received and sent per choice, the bytes
 * not yet taken by libmicrohttpd; freed with its response.
 */
#include "sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "tools/client.h"
#include "http.h"
#include "metrics.h"
#include "pending.h"
#include "responses.h"
#include "net/wire.h"
#include "sc/reasoning.h"

#define GW_KEEPALIVE_MS 1000    /* SSE comment while a stream waits: a
				 * client that left is noticed (and its
				 * request cancelled) when it fails */

/* A streamed completion: the state of the SSE producer. */
struct sse_stream {
	gwcall *call;
	openai_req req;
	char id[40];
	long created;
	int64_t deadline;
	char *out;               /* bytes ready to send */
	size_t out_len, out_off;
	int done;                /* [DONE] is in out */
	size_t n;                /* choices */
	char **acc;              /* per choice: text received */
	size_t *acc_len, *sent;  /* ... and how much of it was sent */
	int *finished;           /* all text sent */
	const char **fin;        /* its finish_reason, sent once voted */
	int *started;            /* first chunk sent */
	json_t **lpq;            /* per choice (logprobs): its streamed
				  * tokens' entries not yet sent (openai.h's
				  * openai_lp_new, the request's shape) */
	size_t *lp_sent;         /* ... and how many were sent with its
				  * deltas (its finish carries the rest) */
	size_t *lp_at;           /* responses: bytes of the tokens before
				  * lpq's first */
	json_t **lpw;            /* completions: entries whose text_offset
				  * waits for their character to be whole
				  * (openai_lp_ready), byte offsets */
	reasoning_split *split;  /* per choice: reasoning apart from content
				  * (chat, unless reasoning_format none) */
	reasoning_out part;      /* one delta's two parts */
	Quorum__ClientReply *first; /* taken before the response started */
	gwconn *cn;
	pending p;               /* parked while no reply is there */
	int parked;              /* resumed: p.why tells why */
	uint64_t seq;            /* responses: the next event's number */
	responses_live rl;       /* responses: the output's events */
};

static void sse_put(sse_stream *st, const char *s, size_t n)
{
	char *b = realloc(st->out, st->out_len + n + 1);

	if (!b)
		return; /* the client sees a truncated stream */
	memcpy(b + st->out_len, s, n);
	st->out_len += n;
	b[st->out_len] = '\0';
	st->out = b;
}

static void sse_json(sse_stream *st, json_t *o)
{
	char *s = o ? client_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	if (!s)
		return;
	sse_put(st, "data: ", 6);
	sse_put(st, s, strlen(s));
	sse_put(st, "\n\n", 2);
	free(s);
}

/* A Responses API event e (taken): its type as the SSE event's name,
 * numbered in order. */
static void sse_event(void *ctx, json_t *e)
{
	sse_stream *st = ctx;
	const char *type = json_string_value(json_object_get(e, "type"));
	char head[96];

	if (!type) {
		json_decref(e);
		return;
	}
	snprintf(head, sizeof(head), "event: %s\n", type);
	json_object_set_new(e, "sequence_number",
			    json_integer((json_int_t)st->seq++));
	sse_put(st, head, strlen(head));
	sse_json(st, e);
}

static void sse_done(sse_stream *st)
{
	sse_put(st, "data: [DONE]\n\n", 14);
	st->done = 1;
}

/* Bytes of s[0, n) that end on a UTF-8 character boundary. */
static size_t utf8_whole(const char *s, size_t n)
{
	size_t k = n, back = 0;

	while (k > 0 && back < 4 && ((unsigned char)s[k - 1] & 0xc0) == 0x80) {
		k--;
		back++;
	}
	if (k > 0 && (unsigned char)s[k - 1] >= 0xc0) {
		unsigned c = (unsigned char)s[k - 1];
		size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

		if (back + 1 < need)
			return k - 1;
	}
	return n;
}

/* Empties a queue of entries (openai_lp_new's): chat's array, or each
 * of completions' four. */
static void lp_clear(json_t *q)
{
	const char *key;
	json_t *a;

	if (json_is_array(q)) {
		json_array_clear(q);
		return;
	}
	json_object_foreach(q, key, a)
		json_array_clear(a);
}

/* One delta of choice i: text[0, n) received after what went before
 * (done: the choice's last). A chat choice's text is split into
 * reasoning_content and content as it comes (sc/reasoning.h; the split
 * holds back a marker's possible start); the first chunk carries the
 * role, and a choice with nothing to show still gets one at its end.
 * The entries of the tokens streamed so far (lpq) go with it. */
static void sse_delta(sse_stream *st, uint32_t i, const char *text,
		      size_t n, int done)
{
	reasoning_out *o = &st->part;
	const char *c = text, *r = NULL;
	size_t cn = n, rn = 0;
	json_t *lp;

	if (st->req.chat && !st->req.reasoning_raw) {
		reasoning_out_clear(o);
		if (reasoning_feed(&st->split[i], text, n, o) ||
		    (done && reasoning_end(&st->split[i], o)))
			return; /* out of memory: the client sees a gap */
		c = o->cn ? o->c : NULL;
		cn = o->cn;
		r = o->r;
		rn = o->rn;
	}
	/* the tokens streamed so far go with this delta (an answer's,
	 * for a response), not with a chat choice's first chunk: as
	 * OpenAI's first chunk has none, the SDKs take a first chunk's list
	 * as the choice's and then add it again (a completions chunk
	 * carries its tokens' lists from the first on, as OpenAI's do) */
	lp = st->lpq && openai_lp_count(st->req.chat, st->lpq[i]) &&
	     (st->started[i] || st->req.responses || !st->req.chat) &&
	     (cn || (rn && !st->req.responses)) ? st->lpq[i] : NULL;
	if (st->req.responses) {
		/* the one chain's text, live (responses.h), with its own
		 * tokens' entries (the reasoning's dropped: its item has none) */
		json_t *own = NULL;
		size_t k;
		json_t *e;

		if (lp && st->acc[i] && st->lp_at)
			own = openai_lp_from(lp, st->lp_at[i],
					     st->req.reasoning_raw ? 0 :
					     reasoning_content_at(
						     st->acc[i], st->acc_len[i]));
		responses_live_text(&st->rl, r, rn, c, cn, own);
		json_decref(own);
		if (lp && st->lp_at)
			json_array_foreach(lp, k, e)
				st->lp_at[i] += json_array_size(
					json_object_get(e, "bytes"));
		st->started[i] = 1;
	} else if (cn || rn || (done && !st->started[i])) {
		json_t *ch = openai_chunk(&st->req, st->id, st->created,
					  gw.model_id, i, cn || rn ? c : "", cn,
					  r, rn, !st->started[i], NULL);

		/* (nothing new: a chunk only to open a choice that ends) */
		if (ch && lp)
			json_object_set_new(json_array_get(json_object_get(
				ch, "choices"), 0), "logprobs",
				openai_lp_object(st->req.chat,
						 json_deep_copy(lp),
						 st->req.p.top_logprobs > 0));
		sse_json(st, ch);
		st->started[i] = 1;
	} else {
		return;
	}
	if (lp) {
		st->lp_sent[i] += openai_lp_count(st->req.chat, lp);
		lp_clear(lp);
	}
}

/* Sends what can be sent of choice i: its text so far, holding back a
 * split UTF-8 character until done (the workers stream only text no
 * stop string can cut any more). */
static void sse_flush_choice(sse_stream *st, uint32_t i, int done,
			     const char *finish)
{
	size_t len = st->acc_len[i],
	       upto = done ? len : utf8_whole(st->acc[i], len);

	if (st->finished[i])
		return;
	/* completions: the entries of the tokens in the text sent go with
	 * it, their text_offset counted in it (a token that begins inside a
	 * split character waits with the character) */
	if (st->lpw && st->lpw[i] && st->acc[i])
		openai_lp_ready(st->lpq[i], st->lpw[i], st->acc[i], len, upto);
	if (upto > st->sent[i] || done)
		sse_delta(st, i, st->acc[i] ? st->acc[i] + st->sent[i] : "",
			  upto - st->sent[i], done);
	st->sent[i] = upto;
	if (done) {
		st->fin[i] = finish ? finish : "stop";
		st->finished[i] = 1;
	}
}

/* The finish chunks of the choices in fin (index order), once the vote
 * is settled; the last carries the quorum object q (taken). With
 * logprobs, a choice's finish chunk carries its tokens' entries (lp[k],
 * borrowed; NULL: none) past those its deltas carried (lp_sent: a live
 * chat choice's), so that a client that joins the chunks' lists (as
 * OpenAI's SDKs do) gets the response's list whole. */
static void sse_finish_all(sse_stream *st, json_t *q, json_t **lp)
{
	size_t last = st->n;

	for (size_t k = 0; k < st->n; k++)
		if (st->fin[k])
			last = k;
	for (size_t k = 0; k < st->n; k++) {
		json_t *c;

		if (!st->fin[k])
			continue;
		c = openai_chunk(&st->req, st->id, st->created, gw.model_id,
				(uint32_t)k, NULL, 0, NULL, 0, 0, st->fin[k]);
		if (c && lp && lp[k] && st->lp_sent && st->lp_sent[k]) {
			/* the deltas carried the first ones */
			json_object_set_new(json_array_get(json_object_get(
				c, "choices"), 0), "logprobs", openai_lp_rest(
				st->req.chat, lp[k], st->lp_sent[k]));
		} else if (c && lp && lp[k]) {
			json_object_set(json_array_get(json_object_get(
				c, "choices"), 0), "logprobs", lp[k]);
		}
		if (k == last && q && c) {
			json_object_set_new(c, "quorum", q);
			q = NULL;
		}
		sse_json(st, c);
	}
	json_decref(q);
}

/* Not live: the choices of x, whole, once the vote is settled. */
static void sse_voted(sse_stream *st, const openai_result *x)
{
	int all = x->n_chosen == x->n;

	for (size_t k = 0; k < x->n_chosen && k < st->n; k++) {
		size_t i = x->chosen[k];
		uint32_t c = all ? x->index[i] : (uint32_t)k;

		if (c >= st->n)
			continue;
		sse_delta(st, c, x->text[i] ? x->text[i] : "",
			  x->text[i] ? x->len[i] : 0, 1);
		st->fin[c] = x->finish[i];
	}
}

static void sse_part(sse_stream *st, const Quorum__SamplePart *p)
{
	uint32_t i = p->index;
	char *b;

	if (i >= st->n || st->finished[i])
		return;
	if (p->text.len) {
		if (!(b = realloc(st->acc[i], st->acc_len[i] + p->text.len + 1)))
			return;
		memcpy(b + st->acc_len[i], p->text.data, p->text.len);
		st->acc_len[i] += p->text.len;
		b[st->acc_len[i]] = '\0';
		st->acc[i] = b;
	}
	/* its tokens, within the text so far (the coordinator checked
	 * them): their entries wait for the next delta (completions': for
	 * their characters too) */
	if (p->tokens && st->lpq && st->acc[i]) {
		openai_run_append(st->req.chat, st->req.chat ? st->lpq[i]
							     : st->lpw[i],
				  st->acc[i], st->acc_len[i], p->tokens);
	}
	sse_flush_choice(st, i, p->done != NULL,
			 p->done && p->done->finish &&
				 !strcmp(p->done->finish, "length")
			 ? "length" : "stop");
}

/* A failure after the response began (r: the final reply, not OK;
 * NULL: none in time): an error event, counted as the failure it is. */
static void sse_failed(sse_stream *st, const Quorum__ClientReply *r)
{
	gwconn *cn = st->cn;
	const char *ecode = "timeout"; /* http.c's name of a 504 */
	int code = r ? http_status_code(r->status, &ecode) : 504;
	const char *type = http_error_type(code);
	char msg[512];

	snprintf(msg, sizeof(msg), "%s", !r
		 ? "no reply from the coordinator in time"
		 : r->error ? r->error : client_status_name(r->status));
	if (st->req.responses) {
		/* the Responses API's error event; no [DONE] follows */
		sse_event(st, json_pack("{s:s, s:s, s:o, s:n}", "type",
					"error", "code", ecode, "message",
					client_text(msg, strlen(msg)),
					"param"));
		st->done = 1;
	} else {
		sse_json(st, openai_error(msg, type, NULL, ecode));
		sse_done(st);
	}
	if (cn && cn->rec)
		json_object_set_new(cn->rec, "status", json_string(ecode));
	if (cn)
		cn->code = code; /* counted as the failure it is */
}

/* The final reply of a /v1/responses stream: the voted chain's events
 * (responses.h), then the response whole; no [DONE]. */
static void sse_final_responses(sse_stream *st, Quorum__ClientReply *r)
{
	gwconn *cn = st->cn;
	openai_result x;
	json_t *o;

	if (openai_result_make(&st->req, r->answer, &x)) {
		sse_event(st, json_pack("{s:s, s:s, s:s, s:n}", "type",
					"error", "code", "server_error",
					"message", "out of memory", "param"));
		st->done = 1;
		return;
	}
	metrics_count_answer(r->answer);
	if (cn && cn->rec)
		metrics_record_answer(cn->rec, &x);
	o = responses_object(&st->req, &x, r->answer, st->id, st->created,
			     gw.model_id);
	if (o && st->req.live)
		responses_live_end(&st->rl, o);
	else if (o)
		responses_events(o, st->id, sse_event, st);
	json_decref(o);
	openai_result_fini(&x);
	st->done = 1;
}

static void sse_final(sse_stream *st, Quorum__ClientReply *r)
{
	gwconn *cn = st->cn;
	openai_result x;

	if (!r || r->status != QUORUM__STATUS__STATUS_OK ||
	    r->body_case != QUORUM__CLIENT_REPLY__BODY_ANSWER) {
		sse_failed(st, r);
		return;
	}
	/* choices the coordinator did not stream: whole, in index order */
	for (size_t i = 0; st->req.live && i < r->answer->n_samples; i++) {
		const Quorum__Sample *s = r->answer->samples[i];
		uint32_t k = s->index;

		if (k >= st->n || st->finished[k])
			continue;
		if (!st->sent[k] && !st->acc_len[k]) {
			st->acc[k] = malloc(s->text.len + 1);
			if (st->acc[k]) {
				if (s->text.len)
					memcpy(st->acc[k], s->text.data,
					       s->text.len);
				st->acc[k][s->text.len] = '\0';
				st->acc_len[k] = s->text.len;
			}
		}
		sse_flush_choice(st, k, 1, s->finish && !strcmp(s->finish,
				 "length") ? "length" : "stop");
	}
	/* choices early stopping cancelled after some of their text went
	 * out: closed (they are not in the answer or the vote) */
	for (uint32_t k = 0; k < st->n; k++)
		if (st->started[k] && !st->finished[k]) {
			st->fin[k] = "cancelled";
			st->finished[k] = 1;
		}
	if (st->req.responses) {
		sse_final_responses(st, r);
		return;
	}
	if (!openai_result_make(&st->req, r->answer, &x)) {
		metrics_count_answer(r->answer);
		if (cn && cn->rec)
			metrics_record_answer(cn->rec, &x);
		json_t **lp = x.logprobs ? calloc(st->n, sizeof(*lp)) : NULL;
		int all = x.n_chosen == x.n;

		if (!st->req.live)
			sse_voted(st, &x);
		/* each choice's log-probabilities: live, choice k is
		 * sample k; voted, as sse_voted numbers them */
		for (size_t k = 0; lp && k < (st->req.live ? x.n
							   : x.n_chosen); k++) {
			size_t i = st->req.live ? k : x.chosen[k];
			uint32_t c = st->req.live || all ? x.index[i]
							 : (uint32_t)k;

			if (c < st->n)
				lp[c] = x.logprobs[i];
		}
		sse_finish_all(st, openai_quorum(&x, r->answer), lp);
		free(lp);
		if (st->req.include_usage)
			sse_json(st, openai_chunk_usage(&st->req, &x, r->answer,
						       st->id, st->created,
						       gw.model_id));
		openai_result_fini(&x);
	} else {
		sse_finish_all(st, NULL, NULL);
	}
	sse_done(st);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	sse_stream *st = cls;
	size_t n;

	(void)pos;
	while (st->out_off == st->out_len) {
		Quorum__ClientReply *r = NULL;

		if (st->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		st->out_len = st->out_off = 0;
		if (st->first) {
			r = st->first;
			st->first = NULL;
		} else if (st->parked) {
			st->parked = 0;
			if (st->p.why == PENDING_GONE)
				return http_stream_gone();
			r = st->p.rep;
			st->p.rep = NULL;
			if (!r && st->call && wire_now_ms() < st->deadline &&
			    !gwlink_aborted(gw.l)) {
				sse_put(st, ": keep-alive\n\n", 14);
				continue;
			}
		} else if (st->call && !(r = gwcall_next(st->call, 0)) &&
			   !gwlink_aborted(gw.l)) {
			/* nothing yet: parked (no thread waits) until a
			 * reply, a keep-alive is due, or the client left */
			int64_t wake = wire_now_ms() + GW_KEEPALIVE_MS;

			st->p.call = st->call;
			st->p.deadline = wake < st->deadline ? wake
							     : st->deadline;
			st->parked = 1;
			pending_park(&st->p);
			return 0;
		}
		if (r && r->body_case == QUORUM__CLIENT_REPLY__BODY_PARTIAL)
			sse_part(st, r->partial);
		else if (r && !gwlink_final(r))
			; /* StreamStart: the response has begun already */
		else
			sse_final(st, r);
		if (r)
			quorum__client_reply__free_unpacked(r, NULL);
	}
	n = st->out_len - st->out_off;
	if (n > max)
		n = max;
	memcpy(buf, st->out + st->out_off, n);
	st->out_off += n;
	return (ssize_t)n;
}

/* The stream's response is gone (sent, or the client went away): a
 * request not finished is cancelled by gwcall_release. */
static void sse_free(void *cls)
{
	sse_stream *st = cls;

	if (st->cn)
		st->cn->st = NULL;
	if (st->first)
		quorum__client_reply__free_unpacked(st->first, NULL);
	if (st->p.rep)
		quorum__client_reply__free_unpacked(st->p.rep, NULL);
	gwcall_release(st->call);
	for (size_t i = 0; st->acc && i < st->n; i++)
		free(st->acc[i]);
	free(st->acc);
	free(st->acc_len);
	free(st->sent);
	free(st->finished);
	free(st->fin);
	free(st->started);
	for (size_t i = 0; st->lpq && i < st->n; i++) {
		json_decref(st->lpq[i]);
		json_decref(st->lpw[i]);
	}
	free(st->lpq);
	free(st->lpw);
	free(st->lp_at);
	free(st->lp_sent);
	free(st->split);
	reasoning_out_free(&st->part);
	responses_live_fini(&st->rl);
	free(st->out);
	openai_req_free(&st->req);
	free(st);
}

enum MHD_Result sse_respond(struct MHD_Connection *mc, gwconn *cn,
			    gwcall *call, openai_req *r, const char *id,
			    int64_t deadline, Quorum__ClientReply *first)
{
	sse_stream *st = calloc(1, sizeof(*st));
	struct MHD_Response *resp;
	enum MHD_Result ok;

	if (!st) {
		quorum__client_reply__free_unpacked(first, NULL);
		gwcall_release(call);
		openai_req_free(r);
		return http_send_err(mc, cn, 500, "out of memory", NULL,
				     NULL);
	}
	st->call = call;
	st->req = *r;
	memcpy(st->id, id, sizeof(st->id));
	st->created = (long)time(NULL);
	st->deadline = deadline;
	st->first = first;
	st->cn = cn;
	pending_watch(&st->p, mc);
	st->n = (size_t)(openai_given_n(r) ? r->p.n : gw.c->sampling.p.n);
	st->acc = calloc(st->n, sizeof(*st->acc));
	st->acc_len = calloc(st->n, sizeof(*st->acc_len));
	st->sent = calloc(st->n, sizeof(*st->sent));
	st->finished = calloc(st->n, sizeof(*st->finished));
	st->started = calloc(st->n, sizeof(*st->started));
	st->fin = calloc(st->n, sizeof(*st->fin));
	if ((st->split = calloc(st->n, sizeof(*st->split))))
		for (size_t i = 0; i < st->n; i++)
			reasoning_init(&st->split[i]);
	/* the log-probabilities as the tokens stream (no memory: all of
	 * them with each choice's finish, as a voted stream has them) */
	if (r->live && r->logprobs) {
		int ok = (st->lpq = calloc(st->n, sizeof(*st->lpq))) &&
			 (st->lpw = calloc(st->n, sizeof(*st->lpw))) &&
			 (st->lp_at = calloc(st->n, sizeof(*st->lp_at))) &&
			 (st->lp_sent = calloc(st->n, sizeof(*st->lp_sent)));

		for (size_t i = 0; ok && i < st->n; i++)
			ok = (st->lpq[i] = openai_lp_new(r->chat)) != NULL &&
			     (r->chat ||
			      (st->lpw[i] = openai_lp_new(0)) != NULL);
		if (!ok) {
			for (size_t i = 0; st->lpq && i < st->n; i++) {
				json_decref(st->lpq[i]);
				json_decref(st->lpw ? st->lpw[i] : NULL);
			}
			free(st->lpq);
			free(st->lpw);
			free(st->lp_at);
			free(st->lp_sent);
			st->lpq = NULL;
			st->lpw = NULL;
			st->lp_at = NULL;
			st->lp_sent = NULL;
		}
	}
	resp = st->acc && st->acc_len && st->sent && st->finished &&
	       st->started && st->fin && st->split
		       ? MHD_create_response_from_callback(
			MHD_SIZE_UNKNOWN, 16384, sse_read, st, sse_free)
		       : NULL;
	if (!resp) {
		sse_free(st);
		return http_send_err(mc, cn, 500, "out of memory", NULL,
				     NULL);
	}
	if (st->req.responses) {
		/* begun: the response in progress, its output to come */
		json_t *o = responses_object(&st->req, NULL, NULL, st->id,
					     st->created, gw.model_id);

		sse_event(st, json_pack("{s:s, s:O}", "type",
					"response.created", "response", o));
		sse_event(st, json_pack("{s:s, s:O}", "type",
					"response.in_progress", "response", o));
		json_decref(o);
		responses_live_init(&st->rl, st->id, sse_event, st);
	}
	cn->st = st;
	cn->code = 200;
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	http_common_headers(resp, cn);
	ok = MHD_queue_response(mc, 200, resp);
	MHD_destroy_response(resp);
	return ok;
}

void sse_detach(gwconn *cn, enum MHD_RequestTerminationCode toe)
{
	/* a stream that did not reach [DONE]: the client went away
	 * (its request is cancelled when the response is freed) */
	if (!cn->st->done || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
		cn->code = 499;
		if (cn->rec)
			json_object_set_new(cn->rec, "status",
					    json_string("client_closed"));
		/* cancelled now: the response itself may be freed
		 * only when the daemon next cleans up */
		gwcall_release(cn->st->call);
		cn->st->call = NULL;
	}
	cn->st->cn = NULL; /* freed with its response, maybe later */
}

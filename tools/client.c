/*
 * client — the ZeroMQ client of a coordinator (see client.h): one DEALER
 * (CurveZMQ when keys are given), Ask with a request id and resend on
 * timeout, the reply's parts and final answer. Callers: `quorum ask`,
 * `quorum status`, `quorum eval-set --endpoint`, the gateway's link.
 */
#include "client.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "net/curve.h"
#include "net/wire.h"
#include "qerr.h"
#include "net/spwire.h"
#include "sc/answer.h"
#include "sc/vote.h"

struct client {
	void *ctx;
	void *sock;      /* DEALER */
	void *mon;       /* PAIR: the DEALER's disconnect events */
	int lost;        /* a disconnect seen since client_lost */
	char *endpoint;  /* owned */
	size_t dropped;  /* invalid messages seen */
};

int client_exit_code(int status)
{
	if (status == QUORUM__STATUS__STATUS_OK)
		return 0;
	return status == QUORUM__STATUS__STATUS_BUSY ? CLIENT_EXIT_BUSY : 1;
}

int client_open(const char *endpoint, client **out)
{
	return client_open_curve(endpoint, NULL, NULL, out);
}

int client_open_curve(const char *endpoint, const char *server_key_file,
		      const char *client_key_file, client **out)
{
	client *c;
	int zero = 0, rc;
	int64_t max = CLIENT_MAX_REPLY_BYTES;
	curve_sock k;

	if (!out || !endpoint || !*endpoint)
		return qerr_fail(QERR_ARG, "no endpoint");
	*out = NULL;
	if (!server_key_file != !client_key_file)
		return qerr_fail(QERR_ARG, "CURVE needs both the server key "
				 "and the client key");
	if (server_key_file &&
	    (rc = curve_sock_client(server_key_file, client_key_file, NULL,
				    &k)))
		return rc;
	if (!(c = calloc(1, sizeof(*c))) || !(c->endpoint = strdup(endpoint))) {
		free(c);
		if (server_key_file)
			curve_sock_wipe(&k);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	if (!(c->ctx = zmq_ctx_new()) ||
	    !(c->sock = zmq_socket(c->ctx, ZMQ_DEALER)))
		goto fail;
	/* linger 0: a client that gives up must not hang on exit waiting to
	 * deliver to a coordinator that is not there */
	if (zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &max, sizeof(max)))
		goto fail;
	if (server_key_file) {
		rc = curve_sock_apply(c->sock, &k);
		curve_sock_wipe(&k);
		if (rc) {
			client_free(&c);
			return rc;
		}
	}
	if (zmq_connect(c->sock, endpoint)) {
		qerr_fail(QERR_ARG, "cannot connect to '%s': %s", endpoint,
			  zmq_strerror(errno));
		client_free(&c);
		return QERR_ARG;
	}
	/* a dropped connection (a coordinator that stopped) ends the wait
	 * of client_recv at once */
	if (wire_monitor_open(c->ctx, c->sock, &c->mon)) {
		if (server_key_file)
			curve_sock_wipe(&k);
		client_free(&c);
		return QERR_IO;
	}
	*out = c;
	return QERR_OK;
fail:
	qerr_fail(QERR_IO, "zmq: %s", zmq_strerror(errno));
	if (server_key_file)
		curve_sock_wipe(&k);
	client_free(&c);
	return QERR_IO;
}

void client_free(client **c)
{
	if (!c || !*c)
		return;
	wire_monitor_close((*c)->sock, &(*c)->mon);
	if ((*c)->sock) {
		zmq_close((*c)->sock);
	}
	if ((*c)->ctx)
		zmq_ctx_term((*c)->ctx);
	free((*c)->endpoint);
	free(*c);
	*c = NULL;
}

const char *client_endpoint(const client *c)
{
	return c->endpoint;
}

void client_no_reply(char *buf, size_t cap, const char *endpoint,
		     double secs, int curve)
{
	snprintf(buf, cap, "no reply from %s within %gs (is the coordinator "
		 "running?)%s", endpoint, secs, curve ? "" :
		 "; a coordinator with CURVE on answers no client without "
		 "its keys (--server-key, --client-key)");
}

size_t client_dropped(const client *c)
{
	return c->dropped;
}

int client_lost(client *c)
{
	int l = c->lost;

	c->lost = 0;
	return l;
}

uint64_t client_request_id(void)
{
	uint64_t id = 0;
	struct timespec ts;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id)) {
		clock_gettime(CLOCK_REALTIME, &ts);
		id = (uint64_t)ts.tv_sec * 1000000007u ^
		     (uint64_t)ts.tv_nsec << 20 ^ (uint64_t)getpid();
		id ^= id >> 33;
		id *= 0xff51afd7ed558ccdull;
		id ^= id >> 33;
	}
	return id ? id : 1;
}

int client_send(client *c, Quorum__ClientRequest *req)
{
	size_t n;
	uint8_t *buf;
	int rc;

	req->version = QUORUM__CONSTANTS__PROTOCOL_VERSION;
	n = quorum__client_request__get_packed_size(req);
	if (!(buf = malloc(n ? n : 1)))
		return qerr_fail(QERR_NOMEM, "out of memory");
	quorum__client_request__pack(req, buf);
	/* non-blocking: a DEALER with no connection (a refused CURVE
	 * handshake tears the pipe down) would block forever */
	do
		rc = zmq_send(c->sock, buf, n, ZMQ_DONTWAIT);
	while (rc < 0 && errno == EINTR);
	free(buf);
	if (rc < 0 && errno == EAGAIN)
		return QERR_OK; /* lost like a dropped message: the wait times out */
	if (rc < 0)
		return qerr_fail(QERR_IO, "send to %s: %s", c->endpoint,
				 zmq_strerror(errno));
	return QERR_OK;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Receives one whole message without waiting. 1 got (*out may be NULL:
 * dropped as invalid), 0 nothing there, -1 socket error. */
static int recv_one(client *c, Quorum__ClientReply **out)
{
	zmq_msg_t m;
	int more = 0, frames = 0;
	size_t more_sz = sizeof(more);
	Quorum__ClientReply *r = NULL;

	*out = NULL;
	do {
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, c->sock, ZMQ_DONTWAIT) < 0) {
			int e = errno;

			zmq_msg_close(&m);
			if (frames == 0 && (e == EAGAIN || e == EINTR))
				return 0;
			if (e == EAGAIN || e == EINTR)
				continue; /* rest of a multipart is atomic */
			qerr_fail(QERR_IO, "receive from %s: %s", c->endpoint,
				  zmq_strerror(e));
			return -1;
		}
		if (frames++ == 0)
			r = quorum__client_reply__unpack(NULL, zmq_msg_size(&m),
							 zmq_msg_data(&m));
		zmq_getsockopt(c->sock, ZMQ_RCVMORE, &more, &more_sz);
		zmq_msg_close(&m);
	} while (more);
	if (!r || frames != 1) {
		if (r)
			quorum__client_reply__free_unpacked(r, NULL);
		c->dropped++;
		return 1;
	}
	*out = r;
	return 1;
}

int client_recv(client *c, int timeout_ms, Quorum__ClientReply **out)
{
	int64_t end = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);

	*out = NULL;
	for (;;) {
		zmq_pollitem_t it[2] = {{c->sock, 0, ZMQ_POLLIN, 0},
					{c->mon, 0, ZMQ_POLLIN, 0}};
		int64_t left = end - now_ms();
		int rc = recv_one(c, out);

		if (rc < 0)
			return QERR_IO;
		if (*out)
			return QERR_OK;
		if (rc > 0)
			continue; /* dropped one; look again */
		if (c->mon && wire_monitor_dropped(c->mon)) {
			/* replies sent before the drop were read above */
			c->lost = 1;
			return QERR_OK;
		}
		if (left <= 0)
			return QERR_OK;
		if (zmq_poll(it, c->mon ? 2 : 1, (long)left) < 0 &&
		    errno != EINTR)
			return qerr_fail(QERR_IO, "poll: %s",
					 zmq_strerror(errno));
	}
}

int client_call(client *c, Quorum__ClientRequest *req, int timeout_ms,
		int retries, Quorum__ClientReply **out)
{
	*out = NULL;
	for (int attempt = 0; attempt <= retries; attempt++) {
		int64_t end = now_ms() + timeout_ms;
		int rc = client_send(c, req);

		if (rc)
			return rc;
		for (;;) {
			int64_t left = end - now_ms();
			Quorum__ClientReply *r;

			if ((rc = client_recv(c, left > 0 ? (int)left : 0, &r)))
				return rc;
			if (!r)
				break; /* this attempt ran out */
			if (r->request_id == req->request_id &&
			    r->status == QUORUM__STATUS__STATUS_CANCELLED &&
			    r->has_retry_after_ms && attempt < retries) {
				/* a draining coordinator: its successor gets
				 * the same request after the hint */
				uint32_t ms = r->retry_after_ms < 5000
						      ? r->retry_after_ms
						      : 5000;

				quorum__client_reply__free_unpacked(r, NULL);
				rc = client_recv(c, (int)ms, &r);
				if (rc)
					return rc;
				if (r && r->request_id == req->request_id) {
					*out = r; /* late but ours */
					return QERR_OK;
				}
				if (r)
					quorum__client_reply__free_unpacked(r,
									    NULL);
				break;
			}
			if (r->request_id == req->request_id) {
				*out = r;
				return QERR_OK;
			}
			/* a stale reply to someone else's id: not ours */
			c->dropped++;
			quorum__client_reply__free_unpacked(r, NULL);
		}
	}
	return QERR_OK;
}

const char *client_status_name(int status)
{
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&quorum__status__descriptor,
						     status);

	return v ? v->name : "STATUS_UNKNOWN";
}

/* Token i's alternatives as [{token, logprob}], from alts' entry *at
 * (advanced past them). */
static json_t *alts_json(const client_alts *alts, size_t i, size_t *at)
{
	json_t *t = json_array();
	size_t n = alts->n_alt[i];

	for (size_t k = 0; t && k < n && *at < alts->total; k++, (*at)++) {
		const ProtobufCBinaryData *pc = &alts->piece[*at];

		if (json_array_append_new(t, json_pack(
			    "{s:o, s:f}", "token",
			    client_text(pc->data, pc->len), "logprob",
			    alts->lp[*at]))) {
			json_decref(t);
			return NULL;
		}
	}
	return t;
}

json_t *client_logprobs(const char *text, size_t len, const double *lp,
			const uint32_t *off, size_t n,
			const client_alts *alts)
{
	json_t *a = json_array();
	size_t at = 0;

	for (size_t i = 0; a && i < n; i++) {
		size_t b = off[i] < len ? off[i] : len;
		size_t e = i + 1 < n && off[i + 1] < len ? off[i + 1] : len;
		json_t *x;

		if (e < b)
			e = b;
		x = json_pack("{s:o, s:f}", "token",
			      client_text(text + b, e - b), "logprob", lp[i]);
		if (x && alts)
			json_object_set_new(x, "top_logprobs",
					    alts_json(alts, i, &at));
		if (json_array_append_new(a, x)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The alternatives of n_lp tokens from the fields a Sample and a TokenRun
 * share (x: either), when they are whole: a count per token, as many
 * values and pieces as tokens listed. */
#define ALTS_OF(x, a)                                                      \
	(!(x)->n_alt_counts || (x)->n_alt_counts != (x)->n_token_logprobs || \
	 (x)->n_alt_logprobs != (x)->n_alt_tokens ||                        \
	 (x)->n_alt_pieces != (x)->n_alt_tokens                             \
		 ? NULL                                                     \
		 : (*(a) = (client_alts){(x)->alt_counts, (x)->alt_logprobs, \
					 (x)->alt_pieces, (x)->n_alt_tokens}, \
		    (a)))

const client_alts *client_sample_alts(const Quorum__Sample *x,
				      client_alts *a)
{
	return ALTS_OF(x, a);
}

const client_alts *client_run_alts(const Quorum__TokenRun *x, client_alts *a)
{
	return ALTS_OF(x, a);
}

/* The length of the well-formed UTF-8 character at s[i] (of n bytes), 0
 * where client_text puts U+FFFD instead (one per byte): a stray or
 * truncated sequence, an overlong form, a surrogate, past U+10FFFF. */
static size_t utf8_char_at(const unsigned char *s, size_t i, size_t n)
{
	unsigned c = s[i];
	size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2
		     : c >= 0xe0 && c <= 0xef ? 3
		     : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	unsigned cp = len == 2 ? c & 31u : len == 3 ? c & 15u : c & 7u;

	if (!len || i + len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[i + k] >> 6) != 2)
			return 0;
		cp = cp << 6 | (s[i + k] & 63u);
	}
	if (len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
		return 0;
	if (len == 4 && (cp < 0x10000 || cp > 0x10ffff))
		return 0;
	return len;
}

/* The shortest text of d that strtod reads back as d, written as a
 * real, as Python's repr writes one: fixed notation for exponents -4 to
 * 15 (0.7, 100.0, 0.0001), else an exponent as jansson writes it (1e20,
 * 2.5e-300); into out (cap >= 40). */
static void shortest_real(double d, char *out, size_t cap)
{
	char e[40], dig[20], *o = out;
	int p, x, nd = 0;

	/* 15 digits round-trip whenever fewer do, and then their rounding
	 * is the shortest text padded with zeros: at most three tries */
	for (p = 15; p < 17; p++) {
		snprintf(e, sizeof(e), "%.*e", p - 1, d);
		if (strtod(e, NULL) == d)
			break;
	}
	if (p == 17)
		snprintf(e, sizeof(e), "%.16e", d);
	/* e: [-]D[.DDD]e[+-]XX, its trailing zeros not the shortest's */
	for (const char *c = e; *c && *c != 'e'; c++)
		if (*c >= '0' && *c <= '9')
			dig[nd++] = *c;
	while (nd > 1 && dig[nd - 1] == '0')
		nd--;
	dig[nd] = '\0';
	x = atoi(strchr(e, 'e') + 1);
	if (signbit(d))
		*o++ = '-';
	if (x >= -4 && x < 16) {
		if (x < 0) {
			o += snprintf(o, cap - (size_t)(o - out), "0.%.*s%s",
				      -x - 1, "0000", dig);
		} else {
			for (int i = 0; i <= x; i++)
				*o++ = i < nd ? dig[i] : '0';
			snprintf(o, cap - (size_t)(o - out), ".%s",
				 nd > x + 1 ? dig + x + 1 : "0");
		}
	} else {
		snprintf(o, cap - (size_t)(o - out), "%c%s%se%d", dig[0],
			 nd > 1 ? "." : "", dig + 1, x);
	}
}

char *client_dumps(const json_t *j, size_t flags)
{
	char *s = json_dumps(j, flags), *out, *w;
	const char *r;
	int in_str = 0;

	if (!s)
		return NULL;
	/* every number outside strings; a real (a '.' or an exponent) of
	 * more than 15 significant digits rewritten: at least 17 bytes
	 * (16 digits and a '.' or an 'e') become at most 24 (a sign, 17
	 * digits, a '.', "e-308"), so the text grows by half at most */
	if (!(out = malloc(strlen(s) * 3 / 2 + 25))) {
		free(s);
		return NULL;
	}
	for (r = s, w = out; *r;) {
		if (in_str) {
			if (*r == '\\' && r[1])
				*w++ = *r++;
			else if (*r == '"')
				in_str = 0;
			*w++ = *r++;
			continue;
		}
		if (*r == '"') {
			in_str = 1;
			*w++ = *r++;
			continue;
		}
		if (*r == '-' || (*r >= '0' && *r <= '9')) {
			size_t n = strspn(r, "-+0123456789.eE");
			char num[40];
			int real = memchr(r, '.', n) || memchr(r, 'e', n) ||
				   memchr(r, 'E', n);
			char *end;
			double d;

			/* jansson's %.17g with at most 15 significant
			 * digits is the shortest already: as it is */
			size_t sig = 0, lead = 1;

			for (size_t q = 0; q < n && r[q] != 'e' && r[q] != 'E';
			     q++) {
				if (r[q] >= '1' && r[q] <= '9')
					lead = 0;
				sig += !lead && r[q] >= '0' && r[q] <= '9';
			}
			if (real && n < sizeof(num) && sig > 15) {
				memcpy(num, r, n);
				num[n] = '\0';
				d = strtod(num, &end);
				if (end == num + n && isfinite(d)) {
					shortest_real(d, w, 40);
					w += strlen(w);
					r += n;
					continue;
				}
			}
			memcpy(w, r, n);
			w += n;
			r += n;
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
	free(s);
	return out;
}

json_t *client_text(const void *p, size_t n)
{
	const unsigned char *s = p;
	char *o = malloc(n * 3 + 1);
	size_t j = 0;
	json_t *r;

	if (!o)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t len = utf8_char_at(s, i, n);

		if (!len) {
			memcpy(o + j, "\xef\xbf\xbd", 3);
			j += 3;
			i++;
			continue;
		}
		memcpy(o + j, s + i, len);
		j += len;
		i += len;
	}
	r = json_stringn(o, j);
	free(o);
	return r;
}

size_t client_text_index(const void *p, size_t n, size_t b)
{
	const unsigned char *s = p;
	size_t chars = 0;

	for (size_t i = 0; i < n && i < b; chars++) {
		size_t len = utf8_char_at(s, i, n);

		if (i + (len ? len : 1) > b)
			break; /* b is inside this character */
		i += len ? len : 1;
	}
	return chars;
}

static json_t *opt_bytes(int has, ProtobufCBinaryData b)
{
	return has ? client_text(b.data, b.len) : json_null();
}

static json_t *opt_str(const char *s)
{
	return s ? client_text(s, strlen(s)) : json_null();
}

static json_t *opt_real(int has, double v)
{
	return has ? json_real(v) : json_null();
}

static json_t *opt_int(int has, uint64_t v)
{
	return has ? json_integer((json_int_t)v) : json_null();
}

json_t *client_vote_json(const char *answer, size_t len, uint64_t count,
			 uint64_t first_index, int has_weight, double weight)
{
	json_t *v = json_pack("{s:o, s:I, s:I}", "answer",
			      client_text(answer, len), "count",
			      (json_int_t)count, "first_index",
			      (json_int_t)first_index);

	if (v && has_weight)
		json_object_set_new(v, "weight", json_real(weight));
	return v;
}

json_t *client_votes_json(const Quorum__Answer *a)
{
	json_t *votes = json_array();

	for (size_t i = 0; votes && a && i < a->n_votes; i++) {
		const Quorum__Vote *v = a->votes[i];
		json_t *e = client_vote_json((const char *)v->answer.data,
					     v->answer.len, v->count,
					     v->first_index, v->has_weight,
					     v->weight);

		if (!e || json_array_append_new(votes, e)) {
			json_decref(votes);
			return NULL;
		}
	}
	return votes;
}

/* A setting's float as the shortest decimal that reads back as the same
 * float: 0.7, not 0.699999988079071. */
static json_t *short_real(double d)
{
	char b[32];

	for (int prec = 1; prec <= 9; prec++) {
		snprintf(b, sizeof(b), "%.*g", prec, d);
		if ((float)strtod(b, NULL) == (float)d)
			break;
	}
	return json_real(strtod(b, NULL));
}

void client_params_json(json_t *o, const sc_params *p, unsigned given,
			unsigned which)
{
	for (int id = 0; id < SC_S_COUNT_; id++) {
		const sc_setting *x = sc_params_setting(id);
		char buf[SC_VALUE_TEXT_MAX];
		json_t *j;
		sc_value v;

		if (!(which & SC_BIT(id)))
			continue;
		if (!(given & SC_BIT(id))) {
			json_object_set_new(o, x->name, json_null());
			continue;
		}
		sc_params_value(id, p, &v, buf, sizeof(buf));
		switch (x->kind) {
		case SC_K_INT: j = json_integer(v.i); break;
		case SC_K_U64: j = json_integer((json_int_t)v.u); break;
		case SC_K_REAL: j = short_real(v.d); break;
		case SC_K_BOOL: j = json_boolean(v.i); break;
		case SC_K_TEXT: /* a grammar may be none; any text's bytes */
			j = v.s ? client_text(v.s, strlen(v.s)) : json_null();
			break;
		default:
			j = json_array();
			for (int i = 0; j && i < p->stop_strs.n; i++)
				json_array_append_new(j, client_text(
					p->stop_strs.s[i],
					p->stop_strs.len[i]));
			break;
		}
		json_object_set_new(o, x->name, j);
	}
}

bool client_answer_shown(const Quorum__Answer *a, char *out, size_t cap)
{
	char key[VOTE_ANSWER_MAX];
	const Quorum__Sample *first = NULL;

	if (!cap || !a || !a->has_answer || !a->n_votes ||
	    a->answer.len >= sizeof(key))
		return false;
	if (a->has_answer_text) {
		/* the coordinator's */
		size_t n = a->answer_text.len < cap - 1 ? a->answer_text.len
							 : cap - 1;

		memcpy(out, a->answer_text.data, n);
		out[n] = '\0';
		return true;
	}
	memcpy(key, a->answer.data, a->answer.len);
	key[a->answer.len] = '\0';
	/* the winner's first voter */
	for (size_t i = 0; i < a->n_samples; i++)
		if (a->samples[i]->index == a->votes[0]->first_index)
			first = a->samples[i];
	answer_shown(key, first ? (const char *)first->text.data : NULL,
		     first ? first->text.len : 0, out, cap);
	return true;
}

bool client_answer_params(const Quorum__Answer *a, sc_params *p,
			  unsigned *given)
{
	*p = SC_PARAMS_DEFAULTS;
	*given = 0;
	return a && a->params && !spwire_decode(a->params, p, given);
}

void client_answer_json(json_t *o, const Quorum__Answer *a)
{
	json_t *votes = client_votes_json(a), *smp = json_array();
	const Quorum__Timings *t = a ? a->timings : NULL;
	const Quorum__PrefixStats *p = a ? a->prefix : NULL;
	size_t voters = 0;
	double dec_s;
	sc_params ran;
	unsigned given;
	/* the format the samples were read with, where the reply says */
	const answer_format *fmt = client_answer_params(a, &ran, &given) &&
					   (given & SC_BIT(SC_S_ANSWER))
				   ? &ran.answer : NULL;

	for (size_t i = 0; a && i < a->n_samples; i++) {
		const Quorum__Sample *x = a->samples[i];

		json_t *js = json_pack(
			"{s:I, s:o, s:I, s:o, s:o, s:o}", "index",
			(json_int_t)x->index, "answer",
			opt_bytes(x->has_answer, x->answer), "tokens",
			(json_int_t)x->tokens, "finish", opt_str(x->finish),
			"text", client_text(x->text.data, x->text.len),
			"worker", opt_str(x->worker));

		voters += x->has_answer;
		if (x->has_reasoning_tokens)
			json_object_set_new(js, "reasoning_tokens",
					    json_integer(x->reasoning_tokens));
		if (x->has_mean_logprob)
			json_object_set_new(js, "mean_logprob",
					    json_real(x->mean_logprob));
		if (x->has_group_confidence)
			json_object_set_new(js, "group_confidence",
					    json_real(x->group_confidence));
		if (x->n_token_logprobs &&
		    x->n_token_logprobs == x->n_token_offsets) {
			client_alts cb;
			const client_alts *ca = client_sample_alts(x, &cb);

			json_object_set_new(js, "logprobs", client_logprobs(
				(const char *)x->text.data, x->text.len,
				x->token_logprobs, x->token_offsets,
				x->n_token_logprobs, ca));
		}
		if (!x->has_answer)
			json_object_set_new(js, "no_answer", json_string(
				answer_no_answer_reason(
					fmt, (const char *)x->text.data,
					x->text.len)));
		json_array_append_new(smp, js);
	}
	json_object_set_new(o, "answer",
			    a ? opt_bytes(a->has_answer, a->answer)
			      : json_null());
	{
		char shown[VOTE_ANSWER_MAX];

		json_object_set_new(o, "answer_text",
				    client_answer_shown(a, shown,
							sizeof(shown))
					    ? client_text(shown, strlen(shown))
					    : json_null());
	}
	json_object_set_new(o, "votes", votes);
	json_object_set_new(o, "n", a ? json_integer(a->n) : json_null());
	json_object_set_new(o, "voters", json_integer((json_int_t)voters));
	json_object_set_new(o, "prompt_tokens",
			    p ? opt_int(p->has_prompt_tokens, p->prompt_tokens)
			      : json_null());
	json_object_set_new(o, "samples", smp);
	if (a && a->select)
		json_object_set_new(o, "usc", json_pack(
			"{s:o, s:I, s:o}", "chosen",
			a->select->has_chosen && a->select->chosen >= 0
				? json_integer(a->select->chosen) : json_null(),
			"tokens", (json_int_t)a->select->tokens, "reply",
			a->select->has_reply
				? client_text(a->select->reply.data,
					      a->select->reply.len)
				: json_null()));
	if (a && a->stop) {
		const Quorum__StopReport *x = a->stop;
		json_t *so = json_pack(
			"{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
			"s:I, s:I}", "rule", x->rule, "stopped_early",
			x->stopped_early, "budget", (json_int_t)x->budget,
			"reported", (json_int_t)x->reported, "started",
			(json_int_t)x->started, "finished",
			(json_int_t)x->finished, "cancelled",
			(json_int_t)x->cancelled, "tokens_generated",
			(json_int_t)x->tokens_generated, "tokens_reported",
			(json_int_t)x->tokens_reported, "tokens_saved_est",
			(json_int_t)x->tokens_saved_est, "leader_count",
			(json_int_t)x->leader_count, "second_count",
			(json_int_t)x->second_count);

		if (so && x->has_posterior)
			json_object_set_new(so, "posterior",
					    json_real(x->posterior));
		if (so && x->has_agreeing_run)
			json_object_set_new(so, "agreeing_run", json_integer(
				x->agreeing_run));
		json_object_set_new(o, "stop", so ? so : json_null());
	}
	dec_s = t && t->has_decode_ms ? t->decode_ms / 1e3 : 0;
	json_object_set_new(o, "timings", !t ? json_null() : json_pack(
		"{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
		"queue_ms", opt_real(t->has_queue_ms, t->queue_ms),
		"prefill_ms", opt_real(t->has_prefill_ms, t->prefill_ms),
		"decode_ms", opt_real(t->has_decode_ms, t->decode_ms),
		"total_ms", opt_real(t->has_total_ms, t->total_ms),
		"first_sample_ms", opt_real(t->has_first_sample_ms,
					    t->first_sample_ms),
		"prefills", p ? opt_int(p->has_prefills, p->prefills)
			      : json_null(),
		"generated_tokens",
		opt_int(t->has_generated_tokens, t->generated_tokens),
		"tokens_per_s", opt_real(t->has_generated_tokens && dec_s > 0,
					 t->generated_tokens / (dec_s > 0 ? dec_s : 1)),
		"messages", opt_int(t->has_messages, t->messages)));
	json_object_set_new(o, "prefix", !p ? json_null() : json_pack(
		"{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
		"prefill_worker", opt_str(p->prefill_worker),
		"prompt_tokens_reused",
		opt_int(p->has_prompt_tokens_reused, p->prompt_tokens_reused),
		"prompt_tokens_prefilled",
		opt_int(p->has_prompt_tokens_prefilled,
			p->prompt_tokens_prefilled),
		"cache_hit", p->has_cache_hit ? json_boolean(p->cache_hit)
					      : json_null(),
		"prompt_tokens", opt_int(p->has_prompt_tokens, p->prompt_tokens),
		"prefix_blocks", opt_int(p->has_prefix_blocks, p->prefix_blocks),
		"blocks_mapped", opt_int(p->has_blocks_mapped, p->blocks_mapped),
		"blocks_copied", opt_int(p->has_blocks_copied, p->blocks_copied),
		"blocks_transferred",
		opt_int(p->has_blocks_transferred, p->blocks_transferred),
		"bytes_transferred",
		opt_int(p->has_bytes_transferred, p->bytes_transferred)));
}

void client_cluster_json(json_t *o, const Quorum__ClusterStatus *s)
{
	json_t *w = json_array();

	for (size_t i = 0; i < s->n_workers; i++) {
		const Quorum__WorkerStatus *x = s->workers[i];

		json_array_append_new(w, json_pack(
			"{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
			"id", opt_str(x->id), "host", opt_str(x->host),
			"pid", opt_int(x->has_pid, x->pid),
			"slots", opt_int(x->has_slots, x->slots),
			"busy", opt_int(x->has_busy, x->busy),
			"blocks_used", opt_int(x->has_blocks_used, x->blocks_used),
			"blocks_free", opt_int(x->has_blocks_free, x->blocks_free),
			"roots", opt_int(x->has_roots, x->roots),
			"heartbeat_age_ms",
			opt_int(x->has_heartbeat_age_ms, x->heartbeat_age_ms)));
	}
	json_object_set_new(o, "cluster", opt_str(s->cluster));
	json_object_set_new(o, "workers", w);
	json_object_set_new(o, "queue_depth",
			    opt_int(s->has_queue_depth, s->queue_depth));
	json_object_set_new(o, "in_flight",
			    opt_int(s->has_in_flight, s->in_flight));
	json_object_set_new(o, "requests_served",
			    opt_int(s->has_requests_served, s->requests_served));
	json_object_set_new(o, "requests_failed",
			    opt_int(s->has_requests_failed, s->requests_failed));
	json_object_set_new(o, "tokens_per_s",
			    opt_real(s->has_tokens_per_s, s->tokens_per_s));
	json_object_set_new(o, "tokens_saved",
			    opt_int(s->has_tokens_saved, s->tokens_saved));
	json_object_set_new(o, "prefix_hits",
			    opt_int(s->has_prefix_hits, s->prefix_hits));
	json_object_set_new(o, "prefix_misses",
			    opt_int(s->has_prefix_misses, s->prefix_misses));
	json_object_set_new(o, "prefix_partial_hits",
			    opt_int(s->has_prefix_partial_hits,
				    s->prefix_partial_hits));
	json_object_set_new(o, "prompt_tokens_reused",
			    opt_int(s->has_prompt_tokens_reused,
				    s->prompt_tokens_reused));
	json_object_set_new(o, "prompt_tokens_prefilled",
			    opt_int(s->has_prompt_tokens_prefilled,
				    s->prompt_tokens_prefilled));
	json_object_set_new(o, "replies_unroutable",
			    opt_int(s->has_replies_unroutable,
				    s->replies_unroutable));
}

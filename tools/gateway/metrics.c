/*
 * metrics — the gateway's bookkeeping, /metrics and the status page's
 * JSON (metrics.h). Owns the counters, the latency histogram and the
 * ring of recent requests' records, all under one lock so that a report
 * is one consistent snapshot.
 */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/client.h"
#include "cluster.h"
#include "conns.h"
#include "auth.h"
#include "http.h"
#include "net/wire.h"

#define GW_RECENT 32            /* requests kept for the status page */
#define GW_QUESTION_SHOWN 240   /* bytes of a question on the page */

static const double lat_bounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
				    30, 60, 120, 300};
#define N_BUCKETS (sizeof(lat_bounds) / sizeof(lat_bounds[0]))

typedef struct counters {
	pthread_mutex_t mu;     /* everything below */
	int in_flight;
	uint64_t by_code[HTTP_N_EP][600];
	uint64_t samples, tokens, prompt_tokens, saved_tokens, answered;
	uint64_t reasoning_tokens; /* of the returned samples' tokens */
	uint64_t hist[N_BUCKETS + 1], lat_count;
	double lat_sum;
	json_t *recent[GW_RECENT]; /* ring, newest at recent_next - 1 */
	int recent_key[GW_RECENT]; /* whose (auth_key's number) */
	size_t recent_next;
} counters;

static counters M = {.mu = PTHREAD_MUTEX_INITIALIZER};

int metrics_enter(void)
{
	int busy;

	pthread_mutex_lock(&M.mu);
	busy = M.in_flight >= gw.c->http.max_in_flight;
	if (!busy)
		M.in_flight++;
	pthread_mutex_unlock(&M.mu);
	return busy ? -1 : 0;
}

void metrics_leave(void)
{
	pthread_mutex_lock(&M.mu);
	M.in_flight--;
	pthread_mutex_unlock(&M.mu);
}

void metrics_count_code(int ep, int code)
{
	pthread_mutex_lock(&M.mu);
	if (code >= 100 && code < 600)
		M.by_code[ep][code]++;
	pthread_mutex_unlock(&M.mu);
}

void metrics_observe(int64_t t0)
{
	double s = (wire_now_ms() - t0) / 1e3;
	size_t b = 0;

	while (b < N_BUCKETS && s > lat_bounds[b])
		b++;
	pthread_mutex_lock(&M.mu);
	M.hist[b]++;
	M.lat_sum += s;
	M.lat_count++;
	pthread_mutex_unlock(&M.mu);
}

/* Counts an answered request's samples and tokens. */
void metrics_count_answer(const Quorum__Answer *a)
{
	uint64_t p = a->prefix ? a->prefix->prompt_tokens : 0;
	uint64_t pf = a->prefix ? a->prefix->prefills : 1;

	pthread_mutex_lock(&M.mu);
	M.answered++;
	M.samples += a->n_samples;
	M.tokens += a->timings ? a->timings->generated_tokens : 0;
	for (size_t i = 0; i < a->n_samples; i++)
		M.reasoning_tokens += a->samples[i]->reasoning_tokens;
	M.prompt_tokens += p;
	/* prompt tokens not prefilled again: forks and prefix-cache hits */
	M.saved_tokens += a->n > pf ? p * (a->n - pf) : 0;
	pthread_mutex_unlock(&M.mu);
}

/* A record for the status page (kept when the request ends). */
json_t *metrics_record_new(const openai_req *r, const char *id, int stream)
{
	size_t ql = r->qlen > GW_QUESTION_SHOWN ? GW_QUESTION_SHOWN : r->qlen;
	char fn[SC_VALUE_TEXT_MAX];

	/* the answer format the request votes with (its own, else the
	 * cluster's) */
	answer_format_name(r->given & SC_BIT(SC_S_ANSWER)
				   ? &r->p.answer : &gw.c->sampling.p.answer,
			   fn, sizeof(fn));
	return json_pack("{s:s, s:I, s:o, s:I, s:b, s:s, s:s}", "id", id,
			 "time", (json_int_t)time(NULL), "question",
			 client_text(r->question, ql), "n",
			 (json_int_t)(openai_given_n(r) ? (uint32_t)r->p.n
						  : (uint32_t)gw.c->sampling.p.n),
			 "stream", stream, "status", "running",
			 "answer_format", fn);
}

void metrics_record_push(gwconn *cn)
{
	if (!cn->rec)
		return;
	json_object_set_new(cn->rec, "latency_ms",
			    json_integer(wire_now_ms() - cn->t0));
	pthread_mutex_lock(&M.mu);
	json_decref(M.recent[M.recent_next % GW_RECENT]);
	M.recent_key[M.recent_next % GW_RECENT] = cn->key;
	M.recent[M.recent_next++ % GW_RECENT] = cn->rec;
	pthread_mutex_unlock(&M.mu);
	cn->rec = NULL;
}

void metrics_record_answer(json_t *rec, const openai_result *x)
{
	json_t *v = json_array();

	for (size_t i = 0; i < json_array_size(x->votes) && i < 12; i++)
		json_array_append(v, json_array_get(x->votes, i));
	json_object_set_new(rec, "status", json_string("ok"));
	json_object_set(rec, "answer", x->winner);
	json_object_set_new(rec, "votes", v);
	json_object_set_new(rec, "voters", json_integer((json_int_t)x->voters));
	json_object_set_new(rec, "agreement",
			    json_real(x->n ? (double)x->win_count / x->n : 0));
}

/* Appends printf output to a growing buffer. */
typedef struct sbuf {
	char *s;
	size_t n, cap;
	int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int k;

	for (int pass = 0; pass < 2 && !b->oom; pass++) {
		va_start(ap, fmt);
		k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0,
			      fmt, ap);
		va_end(ap);
		if (k < 0) {
			b->oom = 1;
			return;
		}
		if (b->s && b->n + (size_t)k < b->cap) {
			b->n += (size_t)k;
			return;
		}
		{
			size_t nc = (b->cap + (size_t)k + 1) * 2;
			char *ns = realloc(b->s, nc);

			if (!ns) {
				b->oom = 1;
				return;
			}
			b->s = ns;
			b->cap = nc;
		}
	}
}

/* A Prometheus label value: \, " and newline escaped. */
static const char *lv(const char *s, char *buf, size_t cap)
{
	size_t o = 0;

	for (; s && *s && o + 3 < cap; s++) {
		if (*s == '\\' || *s == '"') {
			buf[o++] = '\\';
			buf[o++] = *s;
		} else if (*s == '\n') {
			buf[o++] = '\\';
			buf[o++] = 'n';
		} else {
			buf[o++] = *s;
		}
	}
	buf[o] = '\0';
	return buf;
}

/* One metric's HELP and TYPE lines. */
static void metric_head(sbuf *b, const char *name, const char *type,
			const char *help)
{
	sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A metric with one unlabelled sample. */
static void metric(sbuf *b, const char *name, const char *type,
		   const char *help, unsigned long long v)
{
	metric_head(b, name, type, help);
	sb_printf(b, "%s %llu\n", name, v);
}

/* The per-worker gauges of /metrics, one series per worker. */
static const struct {
	const char *name, *help;
	size_t off; /* of a uint32_t in Quorum__WorkerStatus */
} worker_gauges[] = {
	{"quorum_worker_kv_blocks_used", "KV-cache blocks in use, per worker.",
	 offsetof(Quorum__WorkerStatus, blocks_used)},
	{"quorum_worker_kv_blocks_free", "KV-cache blocks free, per worker.",
	 offsetof(Quorum__WorkerStatus, blocks_free)},
	{"quorum_worker_busy_slots", "Decode slots in use, per worker.",
	 offsetof(Quorum__WorkerStatus, busy)},
	{"quorum_worker_slots", "Decode slots, per worker.",
	 offsetof(Quorum__WorkerStatus, slots)},
};

enum MHD_Result metrics_serve(struct MHD_Connection *mc, gwconn *cn)
{
	Quorum__ClientReply *r;
	const Quorum__ClusterStatus *s;
	sbuf b = {0};
	char l1[256];
	enum MHD_Result ok;
	uint64_t cum = 0;
	counters g;

	if (!cluster_status_wait(mc, cn, &r))
		return MHD_YES;
	s = r ? r->cluster : NULL;
	pthread_mutex_lock(&M.mu);
	memcpy(g.by_code, M.by_code, sizeof(g.by_code));
	memcpy(g.hist, M.hist, sizeof(g.hist));
	g.samples = M.samples;
	g.tokens = M.tokens;
	g.prompt_tokens = M.prompt_tokens;
	g.saved_tokens = M.saved_tokens;
	g.reasoning_tokens = M.reasoning_tokens;
	g.answered = M.answered;
	g.lat_count = M.lat_count;
	g.lat_sum = M.lat_sum;
	g.in_flight = M.in_flight;
	pthread_mutex_unlock(&M.mu);

	metric_head(&b, "quorum_http_requests_total", "counter",
		    "HTTP requests answered, by endpoint and status code.");
	for (int e = 0; e < HTTP_N_EP; e++)
		for (int c = 100; c < 600; c++)
			if (g.by_code[e][c])
				sb_printf(&b, "quorum_http_requests_total{"
					  "endpoint=\"%s\",code=\"%d\"} %llu\n",
					  http_ep_name[e], c,
					  (unsigned long long)g.by_code[e][c]);
	metric_head(&b, "quorum_http_connections_refused_total", "counter",
		    "Connections over a cap, answered in words (429 per "
		    "address, 503 in all) and closed.");
	sb_printf(&b, "quorum_http_connections_refused_total{cap="
		  "\"max_connections_per_ip\"} %llu\n"
		  "quorum_http_connections_refused_total{cap="
		  "\"max_connections\"} %llu\n",
		  (unsigned long long)conns_refused(CONNS_OVER_IP),
		  (unsigned long long)conns_refused(CONNS_OVER_ALL));
	metric(&b, "quorum_http_connections_open", "gauge",
	       "Connections open and admitted (under the caps) now.",
	       (unsigned long long)conns_admitted());
	metric(&b, "quorum_http_connections_timed_out_total", "counter",
	       "Connections closed at the header or body deadline.",
	       (unsigned long long)conns_dropped());
	metric(&b, "quorum_http_in_flight", "gauge",
	       "Completions this gateway is serving now.",
	       (unsigned long long)g.in_flight);
	metric(&b, "quorum_requests_answered_total", "counter",
	       "Completions answered with a vote.", g.answered);
	metric(&b, "quorum_samples_total", "counter",
	       "Samples (reasoning chains) returned.", g.samples);
	metric(&b, "quorum_tokens_generated_total", "counter",
	       "Tokens generated by the samples.", g.tokens);
	metric(&b, "quorum_reasoning_tokens_total", "counter",
	       "Tokens the returned samples spent reasoning (before each "
	       "one's answer).", g.reasoning_tokens);
	metric(&b, "quorum_prompt_tokens_total", "counter",
	       "Prompt tokens of the answered requests.", g.prompt_tokens);
	metric(&b, "quorum_tokens_saved_total", "counter",
	       "Prompt tokens not prefilled again: samples fork one prefilled "
	       "prompt, prefix-cache hits reuse it.", g.saved_tokens);
	metric_head(&b, "quorum_request_duration_seconds", "histogram",
		    "Completion latency, request received to response ready.");
	for (size_t i = 0; i <= N_BUCKETS; i++) {
		cum += g.hist[i];
		if (i < N_BUCKETS)
			sb_printf(&b, "quorum_request_duration_seconds_bucket{"
				  "le=\"%g\"} %llu\n", lat_bounds[i],
				  (unsigned long long)cum);
		else
			sb_printf(&b, "quorum_request_duration_seconds_bucket{"
				  "le=\"+Inf\"} %llu\n",
				  (unsigned long long)cum);
	}
	sb_printf(&b, "quorum_request_duration_seconds_sum %.6f\n"
		  "quorum_request_duration_seconds_count %llu\n", g.lat_sum,
		  (unsigned long long)g.lat_count);
	metric(&b, "quorum_coordinator_up", "gauge",
	       "1 when the coordinator answered the status query.", s != NULL);
	if (s) {
		metric(&b, "quorum_workers_alive", "gauge",
		       "Workers registered with the coordinator.", s->n_workers);
		metric(&b, "quorum_queue_depth", "gauge",
		       "Requests queued at the coordinator.", s->queue_depth);
		metric(&b, "quorum_in_flight", "gauge",
		       "Requests being served by the coordinator.",
		       s->in_flight);
		metric_head(&b, "quorum_coordinator_requests_total", "counter",
			    "Requests the coordinator finished, by outcome.");
		sb_printf(&b, "quorum_coordinator_requests_total{outcome="
			  "\"served\"} %llu\n",
			  (unsigned long long)s->requests_served);
		sb_printf(&b, "quorum_coordinator_requests_total{outcome="
			  "\"failed\"} %llu\n",
			  (unsigned long long)s->requests_failed);
		metric(&b, "quorum_prefix_cache_hits_total", "counter",
		       "Prompts whose prefilled root was reused.",
		       s->prefix_hits);
		metric(&b, "quorum_prefix_cache_misses_total", "counter",
		       "Prompts prefilled (whole, or after a cached prefix).",
		       s->prefix_misses);
		metric(&b, "quorum_prefix_cache_partial_hits_total", "counter",
		       "Prompts prefilled after a cached prefix they share.",
		       s->prefix_partial_hits);
		metric(&b, "quorum_prompt_tokens_reused_total", "counter",
		       "Prompt tokens of served requests taken from the "
		       "prefix cache.", s->prompt_tokens_reused);
		metric(&b, "quorum_prompt_tokens_prefilled_total", "counter",
		       "Prompt tokens prefilled for served requests.",
		       s->prompt_tokens_prefilled);
		for (size_t k = 0; k < sizeof(worker_gauges) /
				       sizeof(worker_gauges[0]); k++) {
			metric_head(&b, worker_gauges[k].name, "gauge",
				    worker_gauges[k].help);
			for (size_t i = 0; i < s->n_workers; i++) {
				uint32_t v;

				memcpy(&v, (const char *)s->workers[i] +
				       worker_gauges[k].off, sizeof(v));
				sb_printf(&b, "%s{worker=\"%s\"} %u\n",
					  worker_gauges[k].name,
					  lv(s->workers[i]->id, l1,
					     sizeof(l1)), v);
			}
		}
	}
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	if (b.oom) {
		free(b.s);
		return http_send_err(mc, cn, 500, "out of memory", NULL, NULL);
	}
	ok = http_send_body(mc, cn, 200,
			    "text/plain; version=0.0.4; charset=utf-8",
			    b.s ? b.s : "", b.n);
	free(b.s);
	return ok;
}

enum MHD_Result metrics_status(struct MHD_Connection *mc, gwconn *cn)
{
	Quorum__ClientReply *r;
	json_t *o, *rec, *cl;

	if (!cluster_status_wait(mc, cn, &r))
		return MHD_YES;
	o = json_object();
	rec = json_array();
	cl = json_object();
	if (r)
		client_cluster_json(cl, r->cluster);
	pthread_mutex_lock(&M.mu);
	for (size_t k = 0; k < GW_RECENT && k < M.recent_next; k++) {
		size_t i = (M.recent_next - 1 - k) % GW_RECENT;

		/* a key sees its own requests, an admin key all; keyless:
		 * all, without what was asked unless show_questions */
		if (cn->key == AUTH_NO_KEYS && !gw.c->http.show_questions) {
			json_t *c = json_deep_copy(M.recent[i]);

			json_object_del(c, "question");
			json_object_del(c, "answer");
			json_object_del(c, "votes");
			json_object_del(c, "error");
			json_array_append_new(rec, c);
		} else if (cn->key == AUTH_NO_KEYS || auth_admin(cn->key) ||
			   M.recent_key[i] == cn->key) {
			json_array_append(rec, M.recent[i]);
		}
	}
	json_object_set_new(o, "gateway", json_pack(
		"{s:s, s:s, s:i, s:I, s:I}", "model", gw.model_id, "endpoint",
		gw.endpoint, "in_flight", M.in_flight, "answered",
		(json_int_t)M.answered, "started", (json_int_t)gw.started));
	pthread_mutex_unlock(&M.mu);
	json_object_set_new(o, "coordinator_up", json_boolean(r != NULL));
	json_object_set_new(o, "cluster", r ? cl : json_null());
	if (!r)
		json_decref(cl);
	json_object_set_new(o, "recent", rec);
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	return http_send_json(mc, cn, 200, o);
}

void metrics_fini(void)
{
	pthread_mutex_lock(&M.mu);
	for (size_t i = 0; i < GW_RECENT; i++) {
		json_decref(M.recent[i]);
		M.recent[i] = NULL;
	}
	M.recent_next = 0;
	pthread_mutex_unlock(&M.mu);
}

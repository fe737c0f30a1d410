/*
 * quorum serve — the HTTP gateway: an OpenAI-compatible API in front of a
 * running cluster, plus /health, /metrics (Prometheus) and a live status
 * page. It is a normal ZeroMQ client of the coordinator (gwlink.h); the
 * JSON is gwapi.h's. libmicrohttpd, one thread per connection: a
 * handler blocks on its reply (bounded by the request timeout).
 *
 * Every accepted HTTP request gets exactly one response: an answer, an
 * OpenAI-style error with its HTTP code, or (streams) an error event.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net/cfg.h"
#include "tools/cli.h"
#include "tools/client.h"
#include "openai.h"
#include "link.h"
#include "gateway_page.h"
#include "qerr.h"
#include "net/wire.h"

#define GW_MAX_KEYS 1024
#define GW_KEY_MAX 256
#define GW_RECENT 32            /* requests kept for the status page */
#define GW_STATUS_TIMEOUT_MS 2000
#define GW_GRACE_MS 5000        /* past the request timeout: 504 */
#define GW_QUESTION_SHOWN 240   /* bytes of a question on the page */
#define GW_KEEPALIVE_MS 1000    /* SSE comment while a stream waits: a
				 * client that left is noticed (and its
				 * request cancelled) when it fails */

enum { EP_CHAT, EP_COMPL, EP_MODELS, EP_HEALTH, EP_METRICS, EP_PAGE,
       EP_STATUS, EP_OTHER, N_EP };
static const char *const ep_name[N_EP] = {
	"/v1/chat/completions", "/v1/completions", "/v1/models", "/health",
	"/metrics", "/", "/v1/quorum/status", "other"};

static const double lat_bounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
				    30, 60, 120, 300};
#define N_BUCKETS (sizeof(lat_bounds) / sizeof(lat_bounds[0]))

typedef struct gw {
	cfg *c;
	gwlink *l;
	const char *endpoint;
	char model_id[128];
	char **keys;
	size_t n_keys;
	time_t started;
	pthread_mutex_t mu;     /* everything below */
	int in_flight;
	uint64_t by_code[N_EP][600];
	uint64_t samples, tokens, prompt_tokens, saved_tokens, answered;
	uint64_t hist[N_BUCKETS + 1], lat_count;
	double lat_sum;
	json_t *recent[GW_RECENT]; /* ring, newest at recent_next - 1 */
	size_t recent_next;
} gw;

static gw G;
static volatile sig_atomic_t stop_flag;

typedef struct conn conn;

/* A streamed completion: the state of the SSE producer. */
typedef struct stream {
	gwcall *call;
	gwapi_req req;
	char id[40];
	long created;
	int64_t deadline;
	char *out;               /* bytes ready to send */
	size_t out_len, out_off;
	int done;                /* [DONE] is in out */
	size_t n;                /* choices */
	char **acc;              /* per choice: text received */
	size_t *acc_len, *sent;  /* ... and how much of it was sent */
	int *finished;           /* finish chunk sent */
	int *started;            /* first chunk sent */
	Quorum__ClientReply *first; /* taken before the response started */
	conn *cn;
} stream;

struct conn {
	int ep;
	int64_t t0;
	char *body;
	size_t len;
	int too_big;
	int code;               /* the HTTP status sent */
	int counted;            /* in G.in_flight */
	json_t *rec;            /* the status page's record of it */
	stream *st;
};

/* ---- bookkeeping -------------------------------------------------------- */

static void count_code(int ep, int code)
{
	pthread_mutex_lock(&G.mu);
	if (code >= 100 && code < 600)
		G.by_code[ep][code]++;
	pthread_mutex_unlock(&G.mu);
}

static void observe(int64_t t0)
{
	double s = (wire_now_ms() - t0) / 1e3;
	size_t b = 0;

	while (b < N_BUCKETS && s > lat_bounds[b])
		b++;
	pthread_mutex_lock(&G.mu);
	G.hist[b]++;
	G.lat_sum += s;
	G.lat_count++;
	pthread_mutex_unlock(&G.mu);
}

/* Counts an answered request's samples and tokens. */
static void count_answer(const Quorum__Answer *a)
{
	uint64_t p = a->prefix ? a->prefix->prompt_tokens : 0;
	uint64_t pf = a->prefix ? a->prefix->prefills : 1;

	pthread_mutex_lock(&G.mu);
	G.answered++;
	G.samples += a->n_samples;
	G.tokens += a->timings ? a->timings->generated_tokens : 0;
	G.prompt_tokens += p;
	/* prompt tokens not prefilled again: forks and prefix-cache hits */
	G.saved_tokens += a->n > pf ? p * (a->n - pf) : 0;
	pthread_mutex_unlock(&G.mu);
}

/* A record for the status page (kept when the request ends). */
static json_t *record_new(const gwapi_req *r, const char *id, int stream)
{
	size_t ql = r->qlen > GW_QUESTION_SHOWN ? GW_QUESTION_SHOWN : r->qlen;

	return json_pack("{s:s, s:I, s:o, s:I, s:b, s:s}", "id", id, "time",
			 (json_int_t)time(NULL), "question",
			 client_text(r->question, ql), "n",
			 (json_int_t)(r->sp.has_n ? r->sp.n
						  : (uint32_t)G.c->sampling.n),
			 "stream", stream, "status", "running");
}

static void record_push(conn *cn)
{
	if (!cn->rec)
		return;
	json_object_set_new(cn->rec, "latency_ms",
			    json_integer(wire_now_ms() - cn->t0));
	pthread_mutex_lock(&G.mu);
	json_decref(G.recent[G.recent_next % GW_RECENT]);
	G.recent[G.recent_next++ % GW_RECENT] = cn->rec;
	pthread_mutex_unlock(&G.mu);
	cn->rec = NULL;
}

static void record_answer(json_t *rec, const gwapi_result *x)
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

/* ---- responses ---------------------------------------------------------- */

static enum MHD_Result send_body(struct MHD_Connection *mc, conn *cn,
				 int code, const char *type, const char *body,
				 size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ok;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	if (code == 401)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
	ok = MHD_queue_response(mc, (unsigned)code, r);
	MHD_destroy_response(r);
	cn->code = code;
	return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *mc, conn *cn,
				 int code, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	enum MHD_Result ok;

	json_decref(o);
	static const char oom[] = "{\"error\":{\"message\":\"out of memory\","
				  "\"type\":\"server_error\",\"param\":null,"
				  "\"code\":null}}";

	if (!s)
		return send_body(mc, cn, 500, "application/json", oom,
				 sizeof(oom) - 1);
	ok = send_body(mc, cn, code, "application/json", s, strlen(s));
	free(s);
	return ok;
}

static enum MHD_Result send_err(struct MHD_Connection *mc, conn *cn,
				int code, const char *msg, const char *param,
				const char *ecode)
{
	const char *type = code == 401 ? "authentication_error"
			   : code == 429 ? "rate_limit_error"
			   : code >= 500 ? "server_error"
					 : "invalid_request_error";

	if (cn->rec) {
		json_object_set_new(cn->rec, "status", json_string(
			ecode ? ecode : "error"));
		json_object_set_new(cn->rec, "error", json_string(msg));
	}
	return send_json(mc, cn, code, gwapi_error(msg, type, param, ecode));
}

/* HTTP code and error code of a reply status. */
static int status_http(int st, const char **ecode)
{
	static const struct { int st, http; const char *code; } map[] = {
		{QUORUM__STATUS__STATUS_BAD_REQUEST, 400, "BAD_REQUEST"},
		{QUORUM__STATUS__STATUS_TOO_LONG, 413, "TOO_LONG"},
		{QUORUM__STATUS__STATUS_BUSY, 429, "BUSY"},
		{QUORUM__STATUS__STATUS_NO_CAPACITY, 503, "NO_CAPACITY"},
		{QUORUM__STATUS__STATUS_WORKER_LOST, 503, "WORKER_LOST"},
		{QUORUM__STATUS__STATUS_INTERNAL, 500, "INTERNAL"},
		{QUORUM__STATUS__STATUS_VERSION_MISMATCH, 502,
		 "VERSION_MISMATCH"},
		{QUORUM__STATUS__STATUS_TIMEOUT, 504, "TIMEOUT"},
		{QUORUM__STATUS__STATUS_CANCELLED, 503, "CANCELLED"},
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].st == st) {
			*ecode = map[i].code;
			return map[i].http;
		}
	*ecode = "INTERNAL";
	return 500;
}

/* ---- auth --------------------------------------------------------------- */

static int auth_ok(struct MHD_Connection *mc)
{
	const char *h;
	size_t hl;
	int ok = 0;

	if (!G.keys)
		return 1;
	h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7))
		return 0;
	h += 7;
	while (*h == ' ')
		h++;
	hl = strlen(h);
	for (size_t i = 0; i < G.n_keys; i++) {
		const char *k = G.keys[i];
		size_t kl = strlen(k);
		unsigned char d = kl != hl;

		/* every key compared in full: no early exit on a mismatch */
		for (size_t j = 0; j < kl; j++)
			d |= (unsigned char)(k[j] ^ (j < hl ? h[j] : 0));
		ok |= !d;
	}
	return ok;
}

/* Reads the API key file: mode 0600 (no group/other bits), one key per
 * line, '#' comments. */
static int load_keys(const char *path)
{
	FILE *f;
	struct stat st;
	char line[GW_KEY_MAX + 8];
	long ln = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "quorum serve: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077)) {
		fprintf(stderr, "quorum serve: %s: API key file must be a "
			"regular file of mode 0600 (no group/other access; "
			"chmod 600 %s)\n", path, path);
		close(fd);
		return -1;
	}
	if (!(f = fdopen(fd, "r")) ||
	    !(G.keys = calloc(GW_MAX_KEYS, sizeof(*G.keys)))) {
		fprintf(stderr, "quorum serve: %s: cannot read\n", path);
		if (f)
			fclose(f);
		else
			close(fd);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line), b = 0;

		ln++;
		if (n && line[n - 1] != '\n' && !feof(f)) {
			fprintf(stderr, "quorum serve: %s:%ld: key longer than "
				"%d bytes\n", path, ln, GW_KEY_MAX);
			fclose(f);
			return -1;
		}
		while (n && strchr(" \t\r\n", line[n - 1]))
			line[--n] = '\0';
		while (line[b] == ' ' || line[b] == '\t')
			b++;
		if (!line[b] || line[b] == '#')
			continue;
		for (size_t i = b; i < n; i++)
			if ((unsigned char)line[i] <= 0x20 ||
			    (unsigned char)line[i] >= 0x7f) {
				fprintf(stderr, "quorum serve: %s:%ld: a key is "
					"printable ASCII without spaces\n",
					path, ln);
				fclose(f);
				return -1;
			}
		if (G.n_keys == GW_MAX_KEYS) {
			fprintf(stderr, "quorum serve: %s: more than %d keys\n",
				path, GW_MAX_KEYS);
			fclose(f);
			return -1;
		}
		G.keys[G.n_keys++] = strdup(line + b);
	}
	fclose(f);
	if (!G.n_keys) {
		fprintf(stderr, "quorum serve: %s: no keys (an empty key file "
			"would lock everyone out)\n", path);
		return -1;
	}
	return 0;
}

/* ---- the cluster status ------------------------------------------------- */

/* The coordinator's ClusterStatus, or NULL (not reachable in time). */
static Quorum__ClientReply *cluster_status(void)
{
	Quorum__ClientRequest req = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__StatusQuery q = QUORUM__STATUS_QUERY__INIT;
	Quorum__ClientReply *r;

	req.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	req.status = &q;
	r = gwlink_call(G.l, &req, GW_STATUS_TIMEOUT_MS);
	if (r && (r->status != QUORUM__STATUS__STATUS_OK ||
		  r->body_case != QUORUM__CLIENT_REPLY__BODY_CLUSTER)) {
		quorum__client_reply__free_unpacked(r, NULL);
		r = NULL;
	}
	return r;
}

static enum MHD_Result do_health(struct MHD_Connection *mc, conn *cn)
{
	Quorum__ClientReply *r = cluster_status();
	size_t n = r ? r->cluster->n_workers : 0;
	json_t *o = json_pack("{s:s, s:b, s:I}", "status",
			      n ? "ok" : "unavailable", "coordinator", r != NULL,
			      "workers", (json_int_t)n);

	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	return send_json(mc, cn, n ? 200 : 503, o);
}

static enum MHD_Result do_models(struct MHD_Connection *mc, conn *cn)
{
	Quorum__ClientReply *r = cluster_status();
	const Quorum__ClusterStatus *s = r ? r->cluster : NULL;
	char fp[24];
	json_t *m;

	if (s && s->has_model_fingerprint)
		snprintf(fp, sizeof(fp), "%016llx",
			 (unsigned long long)s->model_fingerprint);
	m = json_pack("{s:s, s:s, s:I, s:s, s:{s:s, s:s, s:o, s:o}}", "id",
		      G.model_id, "object", "model", "created",
		      (json_int_t)G.started, "owned_by", "quorum", "quorum",
		      "cluster", G.c->cluster.name, "path", G.c->model.path,
		      "fingerprint", s && s->has_model_fingerprint
				     ? json_string(fp) : json_null(),
		      "workers", s ? json_integer((json_int_t)s->n_workers)
				   : json_null());
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	return send_json(mc, cn, 200, json_pack("{s:s, s:[o]}", "object",
						"list", "data", m));
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

static enum MHD_Result do_metrics(struct MHD_Connection *mc, conn *cn)
{
	Quorum__ClientReply *r = cluster_status();
	const Quorum__ClusterStatus *s = r ? r->cluster : NULL;
	sbuf b = {0};
	char l1[256];
	enum MHD_Result ok;
	uint64_t cum = 0;
	gw g;

	pthread_mutex_lock(&G.mu);
	memcpy(g.by_code, G.by_code, sizeof(g.by_code));
	memcpy(g.hist, G.hist, sizeof(g.hist));
	g.samples = G.samples;
	g.tokens = G.tokens;
	g.prompt_tokens = G.prompt_tokens;
	g.saved_tokens = G.saved_tokens;
	g.answered = G.answered;
	g.lat_count = G.lat_count;
	g.lat_sum = G.lat_sum;
	g.in_flight = G.in_flight;
	pthread_mutex_unlock(&G.mu);

	metric_head(&b, "quorum_http_requests_total", "counter",
		    "HTTP requests answered, by endpoint and status code.");
	for (int e = 0; e < N_EP; e++)
		for (int c = 100; c < 600; c++)
			if (g.by_code[e][c])
				sb_printf(&b, "quorum_http_requests_total{"
					  "endpoint=\"%s\",code=\"%d\"} %llu\n",
					  ep_name[e], c,
					  (unsigned long long)g.by_code[e][c]);
	metric(&b, "quorum_http_in_flight", "gauge",
	       "Completions this gateway is serving now.",
	       (unsigned long long)g.in_flight);
	metric(&b, "quorum_requests_answered_total", "counter",
	       "Completions answered with a vote.", g.answered);
	metric(&b, "quorum_samples_total", "counter",
	       "Samples (reasoning chains) returned.", g.samples);
	metric(&b, "quorum_tokens_generated_total", "counter",
	       "Tokens generated by the samples.", g.tokens);
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
		return send_err(mc, cn, 500, "out of memory", NULL, NULL);
	}
	ok = send_body(mc, cn, 200, "text/plain; version=0.0.4; charset=utf-8",
		       b.s ? b.s : "", b.n);
	free(b.s);
	return ok;
}

static enum MHD_Result do_status(struct MHD_Connection *mc, conn *cn)
{
	Quorum__ClientReply *r = cluster_status();
	json_t *o = json_object(), *rec = json_array(), *cl = json_object();

	if (r)
		client_cluster_json(cl, r->cluster);
	pthread_mutex_lock(&G.mu);
	for (size_t k = 0; k < GW_RECENT && k < G.recent_next; k++)
		json_array_append(rec, G.recent[(G.recent_next - 1 - k) %
						GW_RECENT]);
	json_object_set_new(o, "gateway", json_pack(
		"{s:s, s:s, s:i, s:I, s:I}", "model", G.model_id, "endpoint",
		G.endpoint, "in_flight", G.in_flight, "answered",
		(json_int_t)G.answered, "started", (json_int_t)G.started));
	pthread_mutex_unlock(&G.mu);
	json_object_set_new(o, "coordinator_up", json_boolean(r != NULL));
	json_object_set_new(o, "cluster", r ? cl : json_null());
	if (!r)
		json_decref(cl);
	json_object_set_new(o, "recent", rec);
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	return send_json(mc, cn, 200, o);
}

/* ---- completions -------------------------------------------------------- */

static int64_t reply_deadline(void)
{
	return wire_now_ms() + G.c->limits.request_timeout_ms + GW_GRACE_MS;
}

static void make_id(const gwapi_req *r, uint64_t rid, char *id, size_t cap)
{
	snprintf(id, cap, "%s-%016llx", r->chat ? "chatcmpl" : "cmpl",
		 (unsigned long long)rid);
}

static gwcall *submit(gwapi_req *r)
{
	Quorum__ClientRequest req = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__Ask ask = QUORUM__ASK__INIT;
	Quorum__SamplingParams sp = r->sp;

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
	return gwlink_submit(G.l, &req);
}

/* Sends the error of a final non-OK reply (or of no reply). */
static enum MHD_Result reply_failed(struct MHD_Connection *mc, conn *cn,
				    const Quorum__ClientReply *r)
{
	const char *ecode;
	char msg[512];
	int code;

	if (!r) {
		snprintf(msg, sizeof(msg), "no reply from the coordinator at "
			 "%s within %d ms", G.endpoint,
			 G.c->limits.request_timeout_ms + GW_GRACE_MS);
		return send_err(mc, cn, 504, msg, NULL, "TIMEOUT");
	}
	if (r->status == QUORUM__STATUS__STATUS_OK) {
		code = 500;
		ecode = "INTERNAL";
		snprintf(msg, sizeof(msg), "malformed reply: OK without an "
			 "answer");
	} else {
		code = status_http(r->status, &ecode);
		snprintf(msg, sizeof(msg), "%s", r->error && *r->error
			 ? r->error : client_status_name(r->status));
	}
	return send_err(mc, cn, code, msg, NULL, ecode);
}

static void sse_free(void *cls);
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max);

static enum MHD_Result do_completion(struct MHD_Connection *mc, conn *cn)
{
	gwapi_req r;
	char msg[512], id[40];
	const char *param;
	gwcall *call;
	Quorum__ClientReply *rep = NULL;
	int64_t end;
	enum MHD_Result ok;
	int busy;

	if (cn->too_big) {
		snprintf(msg, sizeof(msg), "the body is larger than "
			 "http.max_body_bytes (%lld bytes)",
			 (long long)G.c->http.max_body_bytes);
		return send_err(mc, cn, 413, msg, NULL, "TOO_LONG");
	}
	if (gwapi_parse(cn->ep == EP_CHAT, cn->body ? cn->body : "", cn->len,
			G.c->limits.max_n, &r, msg, sizeof(msg), &param))
		return send_err(mc, cn, 400, msg, param, "BAD_REQUEST");
	pthread_mutex_lock(&G.mu);
	busy = G.in_flight >= G.c->http.max_in_flight;
	if (!busy)
		G.in_flight++;
	pthread_mutex_unlock(&G.mu);
	if (busy) {
		gwapi_req_free(&r);
		snprintf(msg, sizeof(msg), "the gateway is serving "
			 "http.max_in_flight (%d) requests; try again later",
			 G.c->http.max_in_flight);
		return send_err(mc, cn, 429, msg, NULL, "BUSY");
	}
	cn->counted = 1;
	if (!(call = submit(&r))) {
		gwapi_req_free(&r);
		return send_err(mc, cn, 500, "out of memory", NULL, NULL);
	}
	make_id(&r, gwcall_id(call), id, sizeof(id));
	cn->rec = record_new(&r, id, r.stream);
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
	if (r.stream) {
		stream *st = calloc(1, sizeof(*st));
		struct MHD_Response *resp;

		if (!st) {
			quorum__client_reply__free_unpacked(rep, NULL);
			gwcall_release(call);
			gwapi_req_free(&r);
			return send_err(mc, cn, 500, "out of memory", NULL,
					NULL);
		}
		st->call = call;
		st->req = r;
		memcpy(st->id, id, sizeof(id));
		st->created = (long)time(NULL);
		st->deadline = end;
		st->first = rep;
		st->cn = cn;
		st->n = r.sp.has_n ? r.sp.n : (size_t)G.c->sampling.n;
		st->acc = calloc(st->n, sizeof(*st->acc));
		st->acc_len = calloc(st->n, sizeof(*st->acc_len));
		st->sent = calloc(st->n, sizeof(*st->sent));
		st->finished = calloc(st->n, sizeof(*st->finished));
		st->started = calloc(st->n, sizeof(*st->started));
		resp = st->acc && st->acc_len && st->sent && st->finished &&
		       st->started ? MHD_create_response_from_callback(
				MHD_SIZE_UNKNOWN, 16384, sse_read, st, sse_free)
			       : NULL;
		if (!resp) {
			sse_free(st);
			return send_err(mc, cn, 500, "out of memory", NULL,
					NULL);
		}
		cn->st = st;
		MHD_add_response_header(resp, "Content-Type",
					"text/event-stream");
		MHD_add_response_header(resp, "Cache-Control", "no-store");
		ok = MHD_queue_response(mc, 200, resp);
		MHD_destroy_response(resp);
		cn->code = 200;
		return ok;
	}
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
			ok = send_err(mc, cn, 500, "out of memory", NULL, NULL);
		} else {
			count_answer(rep->answer);
			record_answer(cn->rec, &x);
			ok = send_json(mc, cn, 200, gwapi_response(
				&r, &x, rep->answer, id, (long)time(NULL),
				G.model_id));
			gwapi_result_fini(&x);
		}
	}
	quorum__client_reply__free_unpacked(rep, NULL);
	gwapi_req_free(&r);
	return ok;
}

/* ---- streaming ---------------------------------------------------------- */

static void sse_put(stream *st, const char *s, size_t n)
{
	char *b = realloc(st->out, st->out_len + n + 1);

	if (!b)
		return; /* the client sees a truncated stream */
	memcpy(b + st->out_len, s, n);
	st->out_len += n;
	b[st->out_len] = '\0';
	st->out = b;
}

static void sse_json(stream *st, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	if (!s)
		return;
	sse_put(st, "data: ", 6);
	sse_put(st, s, strlen(s));
	sse_put(st, "\n\n", 2);
	free(s);
}

static void sse_done(stream *st)
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

/* Sends what can be sent of choice i: its text so far, holding back a
 * split UTF-8 character until done (the workers stream only text no
 * stop string can cut any more). */
static void sse_flush_choice(stream *st, uint32_t i, int done,
			     const char *finish)
{
	size_t len = st->acc_len[i],
	       upto = done ? len : utf8_whole(st->acc[i], len);

	if (st->finished[i])
		return;
	if (upto > st->sent[i] || (done && !st->started[i])) {
		sse_json(st, gwapi_chunk(&st->req, st->id, st->created,
					 G.model_id, i,
					 st->acc[i] ? st->acc[i] + st->sent[i]
						    : "",
					 upto - st->sent[i], !st->started[i],
					 NULL));
		st->started[i] = 1;
		st->sent[i] = upto;
	}
	if (done) {
		sse_json(st, gwapi_chunk(&st->req, st->id, st->created,
					 G.model_id, i, NULL, 0, 0,
					 finish ? finish : "stop"));
		st->finished[i] = 1;
	}
}

static void sse_part(stream *st, const Quorum__SamplePart *p)
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
	sse_flush_choice(st, i, p->done != NULL,
			 p->done && p->done->finish &&
				 !strcmp(p->done->finish, "length")
			 ? "length" : "stop");
}

static void sse_final(stream *st, Quorum__ClientReply *r)
{
	conn *cn = st->cn;
	gwapi_result x;

	if (!r || r->status != QUORUM__STATUS__STATUS_OK ||
	    r->body_case != QUORUM__CLIENT_REPLY__BODY_ANSWER) {
		const char *ecode = "TIMEOUT";
		int code = r ? status_http(r->status, &ecode) : 504;
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", !r
			 ? "no reply from the coordinator in time"
			 : r->error ? r->error : client_status_name(r->status));
		sse_json(st, gwapi_error(msg, code >= 500 ? "server_error"
					 : "invalid_request_error", NULL, ecode));
		if (cn->rec)
			json_object_set_new(cn->rec, "status",
					    json_string(ecode));
		cn->code = code; /* counted as the failure it is */
		sse_done(st);
		return;
	}
	/* choices the coordinator did not stream: whole, in index order */
	for (size_t i = 0; i < r->answer->n_samples; i++) {
		const Quorum__Sample *s = r->answer->samples[i];
		uint32_t k = s->index;

		if (k >= st->n || st->finished[k])
			continue;
		if (!st->sent[k] && !st->acc_len[k]) {
			st->acc[k] = malloc(s->text.len + 1);
			if (st->acc[k]) {
				memcpy(st->acc[k], s->text.data, s->text.len);
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
			sse_json(st, gwapi_chunk(&st->req, st->id, st->created,
						 G.model_id, k, NULL, 0, 0,
						 "cancelled"));
			st->finished[k] = 1;
		}
	if (!gwapi_result_make(&st->req, r->answer, &x)) {
		count_answer(r->answer);
		if (cn->rec)
			record_answer(cn->rec, &x);
		sse_json(st, gwapi_chunk_final(&st->req, &x, r->answer, st->id,
					       st->created, G.model_id));
		gwapi_result_fini(&x);
	}
	sse_done(st);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	stream *st = cls;
	size_t n;

	(void)pos;
	while (st->out_off == st->out_len) {
		Quorum__ClientReply *r;

		if (st->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		st->out_len = st->out_off = 0;
		if (st->first) {
			r = st->first;
			st->first = NULL;
		} else {
			int64_t now = wire_now_ms(),
				wake = now + GW_KEEPALIVE_MS < st->deadline
					       ? now + GW_KEEPALIVE_MS
					       : st->deadline;

			r = st->call ? gwcall_next(st->call, wake) : NULL;
			if (!r && st->call && wire_now_ms() < st->deadline &&
			    !gwlink_aborted(G.l)) {
				sse_put(st, ": keep-alive\n\n", 14);
				continue;
			}
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
	stream *st = cls;

	if (st->cn)
		st->cn->st = NULL;
	if (st->first)
		quorum__client_reply__free_unpacked(st->first, NULL);
	gwcall_release(st->call);
	for (size_t i = 0; st->acc && i < st->n; i++)
		free(st->acc[i]);
	free(st->acc);
	free(st->acc_len);
	free(st->sent);
	free(st->finished);
	free(st->started);
	free(st->out);
	gwapi_req_free(&st->req);
	free(st);
}

/* ---- the daemon --------------------------------------------------------- */

static int route(const char *url, const char *method, int *post)
{
	static const struct { const char *url; int ep, post; } r[] = {
		{"/v1/chat/completions", EP_CHAT, 1},
		{"/v1/completions", EP_COMPL, 1},
		{"/v1/models", EP_MODELS, 0},
		{"/health", EP_HEALTH, 0},
		{"/metrics", EP_METRICS, 0},
		{"/", EP_PAGE, 0},
		{"/v1/quorum/status", EP_STATUS, 0},
	};

	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		if (!strcmp(url, r[i].url)) {
			*post = r[i].post;
			return (*post ? !strcmp(method, "POST")
				      : !strcmp(method, "GET") ||
					!strcmp(method, "HEAD"))
				       ? r[i].ep : -1 - r[i].ep;
		}
	return EP_OTHER;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	conn *cn = *con_cls;
	int post = 0;

	(void)cls;
	(void)version;
	if (!cn) {
		const char *cl;
		int ep;

		if (!(cn = calloc(1, sizeof(*cn))))
			return MHD_NO;
		*con_cls = cn;
		cn->t0 = wire_now_ms();
		ep = route(url, method, &post);
		cn->ep = ep < 0 ? -1 - ep : ep;
		if (ep < 0) {
			char msg[128];

			snprintf(msg, sizeof(msg), "%s needs %s", ep_name[cn->ep],
				 post ? "POST" : "GET");
			return send_err(mc, cn, 405, msg, NULL,
					"METHOD_NOT_ALLOWED");
		}
		if (ep == EP_OTHER)
			return send_err(mc, cn, 404, "unknown URL (see "
					"/v1/chat/completions, /v1/completions, "
					"/v1/models, /health, /metrics, /)",
					NULL, "NOT_FOUND");
		if ((post || ep == EP_MODELS || ep == EP_STATUS) &&
		    !auth_ok(mc))
			return send_err(mc, cn, 401,
					"missing or wrong API key (send "
					"'Authorization: Bearer KEY')", NULL,
					"UNAUTHORIZED");
		cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						 "Content-Length");
		if (post && cl && strtoull(cl, NULL, 10) >
				  (unsigned long long)G.c->http.max_body_bytes) {
			char msg[160];

			snprintf(msg, sizeof(msg), "the body (%s bytes) is "
				 "larger than http.max_body_bytes (%lld bytes)",
				 cl, (long long)G.c->http.max_body_bytes);
			return send_err(mc, cn, 413, msg, NULL, "TOO_LONG");
		}
		return MHD_YES;
	}
	if (cn->code)
		return MHD_YES; /* answered already: the rest is discarded */
	if (*upload_size) {
		if (!cn->too_big &&
		    cn->len + *upload_size <= (size_t)G.c->http.max_body_bytes) {
			char *b = realloc(cn->body, cn->len + *upload_size + 1);

			if (!b)
				return MHD_NO;
			memcpy(b + cn->len, upload, *upload_size);
			cn->len += *upload_size;
			b[cn->len] = '\0';
			cn->body = b;
		} else {
			cn->too_big = 1;
			free(cn->body);
			cn->body = NULL;
			cn->len = 0;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	switch (cn->ep) {
	case EP_CHAT:
	case EP_COMPL:
		return do_completion(mc, cn);
	case EP_MODELS:
		return do_models(mc, cn);
	case EP_HEALTH:
		return do_health(mc, cn);
	case EP_METRICS:
		return do_metrics(mc, cn);
	case EP_STATUS:
		return do_status(mc, cn);
	case EP_PAGE:
		return send_body(mc, cn, 200, "text/html; charset=utf-8",
				 gwpage_html, strlen(gwpage_html));
	}
	return MHD_NO;
}

static void on_done(void *cls, struct MHD_Connection *mc, void **con_cls,
		    enum MHD_RequestTerminationCode toe)
{
	conn *cn = *con_cls;

	(void)cls;
	(void)mc;
	if (!cn)
		return;
	if (cn->st) {
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
	if (cn->code)
		count_code(cn->ep, cn->code);
	if (cn->ep == EP_CHAT || cn->ep == EP_COMPL)
		observe(cn->t0);
	record_push(cn);
	if (cn->counted) {
		pthread_mutex_lock(&G.mu);
		G.in_flight--;
		pthread_mutex_unlock(&G.mu);
	}
	free(cn->body);
	free(cn);
	*con_cls = NULL;
}

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void help(void)
{
	printf("usage: quorum serve --config cluster.yaml [options]\n\n"
	       "The HTTP gateway: serves an OpenAI-compatible API in front of\n"
	       "a running cluster (its coordinator, as a ZeroMQ client), with\n"
	       "the vote of every request in a \"quorum\" object.\n\n"
	       "  POST /v1/chat/completions, /v1/completions  (stream: true\n"
	       "       gives Server-Sent Events)\n"
	       "  GET  /v1/models     the model and its fingerprint\n"
	       "  GET  /health        200 when a worker is registered, else 503\n"
	       "  GET  /metrics       Prometheus text format\n"
	       "  GET  /              the live status page\n"
	       "  GET  /v1/quorum/status  the page's JSON\n\n"
	       "Settings come from the config's http: section (listen,\n"
	       "api_keys_file, client_key_file, max_body_bytes,\n"
	       "max_connections, max_in_flight) and limits/sampling/security.\n"
	       "TLS is left to a reverse proxy.\n\n"
	       "options:\n"
	       "  --config FILE    cluster configuration (required)\n"
	       "  --listen H:P     overrides http.listen (port 0: any free one)\n"
	       "  --endpoint E     the coordinator's client endpoint (default:\n"
	       "                   coordinator.client_endpoint)\n"
	       "  -h, --help       this help\n\n"
	       "It prints \"quorum serve: listening on http://H:P\" once\n"
	       "ready and runs until SIGINT/SIGTERM. Exit status: 0 stopped,\n"
	       "1 cannot start, 2 usage.\n");
}

/* Binds the listen address (sa filled). */
static int parse_listen(const char *s, struct sockaddr_storage *sa,
			socklen_t *len)
{
	char host[CFG_LISTEN_MAX + 1];
	const char *colon = strrchr(s, ':');
	long port;

	memset(sa, 0, sizeof(*sa));
	if (!colon || strlen(s) > CFG_LISTEN_MAX)
		return -1;
	port = strtol(colon + 1, NULL, 10);
	if (s[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)sa;

		snprintf(host, sizeof(host), "%.*s", (int)(colon - s - 2), s + 1);
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a);
		return inet_pton(AF_INET6, host, &a->sin6_addr) == 1 ? 0 : -1;
	}
	{
		struct sockaddr_in *a = (struct sockaddr_in *)sa;

		snprintf(host, sizeof(host), "%.*s", (int)(colon - s), s);
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		*len = sizeof(*a);
		return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
	}
}

static void model_name(const char *path, char *out, size_t cap)
{
	const char *b = strrchr(path, '/');
	size_t n;

	b = b ? b + 1 : path;
	n = strlen(b);
	if (n > 5 && !strcmp(b + n - 5, ".gguf"))
		n -= 5;
	snprintf(out, cap, "%.*s", (int)n, b);
}

int cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, 0, 'c'},
		{"listen", required_argument, 0, 'l'},
		{"endpoint", required_argument, 0, 'e'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *config = NULL, *listen_at = NULL, *endpoint = NULL;
	struct sockaddr_storage sa;
	socklen_t salen;
	struct MHD_Daemon *d = NULL;
	const union MHD_DaemonInfo *di;
	struct sigaction act;
	sigset_t mask, old;
	char shown[96], host[64];
	int ch, rc = 1, port = 0;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': config = optarg; break;
		case 'l': listen_at = optarg; break;
		case 'e': endpoint = optarg; break;
		case 'h': help(); return 0;
		default: return cli_usage_error("serve", "bad option");
		}
	}
	if (!config || optind != argc)
		return cli_usage_error("serve", "give --config FILE (and no "
				       "other arguments)");
	memset(&G, 0, sizeof(G));
	pthread_mutex_init(&G.mu, NULL);
	if (cfg_load(config, &G.c)) {
		fprintf(stderr, "quorum serve: %s\n", qerr_detail());
		return 1;
	}
	if (listen_at) {
		if (strlen(listen_at) > CFG_LISTEN_MAX) {
			cfg_free(&G.c);
			return cli_usage_error("serve", "--listen too long");
		}
		strcpy(G.c->http.listen, listen_at);
	}
	if (parse_listen(G.c->http.listen, &sa, &salen)) {
		fprintf(stderr, "quorum serve: listen address '%s' is not "
			"HOST:PORT\n", G.c->http.listen);
		goto out;
	}
	G.endpoint = endpoint ? endpoint : G.c->coordinator.client_endpoint;
	model_name(G.c->model.path, G.model_id, sizeof(G.model_id));
	G.started = time(NULL);
	if (G.c->http.api_keys_file && load_keys(G.c->http.api_keys_file))
		goto out;
	if (G.c->security.curve && !G.c->http.client_key_file) {
		fprintf(stderr, "quorum serve: %s: security.curve is true but "
			"http.client_key_file is not set (the gateway's CURVE "
			"secret key; its .pub must be on security.client_keys)\n",
			config);
		goto out;
	}
	if (gwlink_open(G.endpoint,
			G.c->security.curve
				? G.c->security.server_public_key_file : NULL,
			G.c->security.curve ? G.c->http.client_key_file : NULL,
			&G.l)) {
		fprintf(stderr, "quorum serve: %s\n", qerr_detail());
		goto out;
	}
	/* the daemon's threads inherit a mask without SIGINT/SIGTERM */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	signal(SIGPIPE, SIG_IGN);
	d = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			MHD_USE_ERROR_LOG |
			(sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
		0, NULL, NULL, on_request, NULL,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
		MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)G.c->http.max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
		MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
		MHD_OPTION_END);
	if (!d) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		fprintf(stderr, "quorum serve: cannot listen on %s (in use, or "
			"not an address of this host)\n", G.c->http.listen);
		goto out;
	}
	di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
	if (di) {
		struct sockaddr_storage b;
		socklen_t bl = sizeof(b);

		if (!getsockname(di->listen_fd, (struct sockaddr *)&b, &bl))
			port = b.ss_family == AF_INET6
				       ? ntohs(((struct sockaddr_in6 *)&b)->sin6_port)
				       : ntohs(((struct sockaddr_in *)&b)->sin_port);
	}
	snprintf(host, sizeof(host), "%.*s",
		 (int)(strrchr(G.c->http.listen, ':') - G.c->http.listen),
		 G.c->http.listen);
	snprintf(shown, sizeof(shown), "http://%s:%d", host, port);
	printf("quorum serve: listening on %s (coordinator %s, model %s%s)\n",
	       shown, G.endpoint, G.model_id,
	       G.keys ? ", API keys required" : "");
	fflush(stdout);
	memset(&act, 0, sizeof(act));
	act.sa_handler = on_signal;
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	{
		sigset_t wait = old;

		sigdelset(&wait, SIGINT);
		sigdelset(&wait, SIGTERM);
		while (!stop_flag)
			sigsuspend(&wait);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	rc = 0;
out:
	if (d) {
		/* waiting handlers give up now (503), then the threads end */
		gwlink_abort(G.l);
		MHD_stop_daemon(d);
	}
	gwlink_free(&G.l);
	for (size_t i = 0; i < G.n_keys; i++)
		free(G.keys[i]);
	free(G.keys);
	for (size_t i = 0; i < GW_RECENT; i++)
		json_decref(G.recent[i]);
	cfg_free(&G.c);
	return rc;
}

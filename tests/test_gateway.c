/*
 * test_gateway — `quorum serve` end to end: a loopback cluster
 * (coordinator + 2 workers), the gateway in front of it with API keys,
 * and plain HTTP/1.0 requests over TCP sockets from this test.
 *
 * Checked: chat and text completions return the bytes of `quorum ask`
 * with the same parameters (and its vote); stop strings cut texts and
 * retake the vote; streams (SSE) reassemble to the same texts and end
 * with the quorum object and [DONE]; /metrics parses (a Prometheus text
 * parser written here) and its counters move; /health, /v1/models; the
 * bad-input table (each its code, message and param; the gateway keeps
 * serving); API keys; a client leaving mid-stream cancels its request at
 * the coordinator; 50 concurrent clients x 10 requests each answered
 * once, no connection left open; abuse: 256
 * slow-header connections beside good requests, a slow body, 16
 * concurrent hostile 1 MB bodies (the gateway's peak RSS), a plain
 * request's client hanging up (cancelled), a coordinator that is not
 * there (503, the probe's words), a stream failed after it began (a
 * stand-in coordinator: the error as its last event); privacy (a key sees its own requests on the status page, an
 * admin key all, a keyless gateway no questions); the status page's HTML
 * and JSON, and its DOM rendered by headless Chromium.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <zmq.h>

#include "clusterutil.h"
#include "proto/quorum.pb-c.h"

#define MAX_N 16
#define HEADER_TIMEOUT_MS 3000
#define BODY_TIMEOUT_MS 3000
#define SLOW_CONNS 256
#define HOSTILE_BODIES 16
#define LOAD_CLIENTS 50
#define LOAD_REQUESTS 10 /* 2 with QUORUM_TEST_QUICK: the sanitizer run
			  * keeps the 50-way concurrency, not the volume */

static char model_path[PATH_MAX];
static cu_cluster cl;
static pid_t gw_pid;
static int gw_port;
static char gw_log[PATH_MAX + 32];
static const char *KEY = "sk-test-0123456789";
static const char *ADMIN_KEY = "sk-admin-0123456789";

/* ---- HTTP over a socket ------------------------------------------------- */

typedef struct hresp {
	int code;        /* -1: no response */
	char *head;      /* status line and headers */
	char *body;
	size_t blen;
} hresp;

static void hresp_free(hresp *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* A connection to the gateway on port; -1 if refused. Its reads give
 * up after CU_WAIT_MS (a hang guard, never a speed: a reply that never
 * comes fails the case instead of hanging it). */
static int connect_port(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct timeval tv = {.tv_sec = CU_WAIT_MS / 1000};
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0)
		return -1;
	if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    connect(s, (struct sockaddr *)&a, sizeof(a))) {
		close(s);
		return -1;
	}
	return s;
}

static int send_all(int s, const void *p, size_t n)
{
	const char *b = p;

	while (n) {
		ssize_t k = send(s, b, n, MSG_NOSIGNAL);

		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Reads until the server closes; splits head and body. */
static void read_resp(int s, hresp *r)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap), *sep;
	ssize_t k;

	r->code = -1;
	while ((k = recv(s, b + n, cap - n - 1, 0)) > 0) {
		n += (size_t)k;
		if (n + 1 == cap)
			b = realloc(b, cap *= 2);
	}
	b[n] = '\0';
	sep = strstr(b, "\r\n\r\n");
	if (!sep || sscanf(b, "HTTP/1.%*d %d", &r->code) != 1) {
		r->head = b;
		r->body = strdup("");
		return;
	}
	*sep = '\0';
	r->head = strdup(b);
	r->blen = n - (size_t)(sep + 4 - b);
	r->body = malloc(r->blen + 1);
	memcpy(r->body, sep + 4, r->blen + 1);
	free(b);
}

/* One request (HTTP/1.0: the server closes after the response; the
 * socket stays open both ways until then: a client that half-closes is
 * taken as gone). key NULL: no Authorization header. */
static hresp http(const char *method, const char *path, const char *key,
		  const char *body, size_t blen)
{
	hresp r = {.code = -1};
	char head[1024];
	int s = connect_port(gw_port), n;

	if (s < 0) {
		r.head = strdup("");
		r.body = strdup("");
		return r;
	}
	n = snprintf(head, sizeof(head), "%s %s HTTP/1.0\r\nHost: x\r\n%s%s%s"
		     "Content-Type: application/json\r\nContent-Length: %zu"
		     "\r\n\r\n", method, path, key ? "Authorization: Bearer " : "",
		     key ? key : "", key ? "\r\n" : "", body ? blen : 0);
	if (!send_all(s, head, (size_t)n) && body)
		send_all(s, body, blen);
	read_resp(s, &r);
	close(s);
	return r;
}

static hresp post(const char *path, const char *body)
{
	return http("POST", path, KEY, body, strlen(body));
}

static hresp get(const char *path)
{
	return http("GET", path, KEY, NULL, 0);
}

static json_t *body_json(const hresp *r)
{
	json_error_t e;
	json_t *o = json_loadb(r->body, r->blen, 0, &e);

	if (!o)
		fail_msg("not JSON (%s): %.400s", e.text, r->body);
	return o;
}

/* ---- the gateway process -------------------------------------------- */

static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(s, (struct sockaddr *)&a, &len))
		return -1;
	port = ntohs(a.sin_port);
	close(s);
	return port;
}

/* Starts `quorum serve` on a free port; 0 once it accepts connections. */
static int gw_start(void)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		char listen_at[64];
		char *argv[] = {cu_bin("quorum"), "serve", "--config", cl.config,
				"--listen", listen_at, NULL};
		posix_spawn_file_actions_t fa;
		int64_t end = wire_now_ms() + CU_WAIT_MS;

		gw_port = free_port();
		snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%d", gw_port);
		snprintf(gw_log, sizeof(gw_log), "%s/gateway.log", cu_tmpdir);
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 1, gw_log,
						 O_WRONLY | O_CREAT | O_TRUNC,
						 0644);
		posix_spawn_file_actions_adddup2(&fa, 1, 2);
		if (posix_spawn(&gw_pid, argv[0], &fa, NULL, argv, environ))
			gw_pid = 0;
		posix_spawn_file_actions_destroy(&fa);
		while (gw_pid > 0 && wire_now_ms() < end) {
			int s = connect_port(gw_port);

			if (s >= 0) {
				close(s);
				return 0;
			}
			if (waitpid(gw_pid, NULL, WNOHANG) == gw_pid) {
				gw_pid = 0; /* port taken: try another */
				break;
			}
			usleep(20000);
		}
	}
	return -1;
}

/* A loopback cluster (coordinator + 2 workers) on a model synthesized
 * with tokenizer's vocabulary and chat template, the gateway in front. */
static int gw_setup(const char *tokenizer, uint64_t seed)
{
	cu_cfg k;
	char keys[PATH_MAX + 16], admin[PATH_MAX + 16];
	FILE *f;

	if (cu_setup_paths("gateway") ||
	    cu_model_tok(model_path, seed, tokenizer))
		return -1;
	k = cu_cfg_defaults(model_path);
	k.max_n = MAX_N;
	k.queue_depth = 256;
	k.cache_entries = 16;
	/* worker liveness is not what this test is about: a loaded machine
	 * must not expire the workers mid-test (10 s) */
	k.liveness = 50;
	/* nor is the deadline: 500 requests queue on a loaded machine */
	k.request_timeout_ms = 600000;
	/* the cluster's default rule (exact): a request without early_stop
	 * must still get its n choices (the gateway asks for none) */
	k.stop = NULL;
	if (cu_start(&cl, &k))
		return -1;
	snprintf(keys, sizeof(keys), "%s/api-keys", cu_tmpdir);
	if (!(f = fopen(keys, "w")))
		return -1;
	fprintf(f, "# test keys\n%s\n\nsk-other-key\n", KEY);
	fclose(f);
	chmod(keys, 0600);
	snprintf(admin, sizeof(admin), "%s/admin-keys", cu_tmpdir);
	if (!(f = fopen(admin, "w")))
		return -1;
	fprintf(f, "%s\n", ADMIN_KEY);
	fclose(f);
	chmod(admin, 0600);
	/* the gateway's section, in the same file */
	if (!(f = fopen(cl.config, "a")))
		return -1;
	/* model "x": the name the requests here give; 50 load clients
	 * from one address */
	/* the default body cap (1 MiB): test_hostile_bodies' bodies are
	 * read in full and refused by the JSON pre-scan; 3 s header and
	 * body deadlines for test_slow_headers and test_slow_body */
	fprintf(f, "http:\n  api_keys_file: %s\n  max_body_bytes: 1048576\n"
		"  max_in_flight: 128\n  model_aliases: x\n"
		"  max_connections_per_ip: 128\n  header_timeout_ms: %d\n"
		"  body_timeout_ms: %d\n  admin_keys_file: %s\n", keys,
		HEADER_TIMEOUT_MS, BODY_TIMEOUT_MS, admin);
	fclose(f);
	if (cu_worker(&cl, "w0", "h0") <= 0 || cu_worker(&cl, "w1", "h0") <= 0 ||
	    cu_wait_workers(&cl, 2, CU_WAIT_MS) < 0) {
		fprintf(stderr, "setup: the workers did not register\n");
		return -1;
	}
	if (gw_start()) {
		fprintf(stderr, "setup: the gateway did not start\n");
		return -1;
	}
	return 0;
}

static int gw_teardown(void **state)
{
	char path[PATH_MAX + 16];

	(void)state;
	cu_kill_wait(gw_pid);
	gw_pid = 0;
	cu_stop(&cl);
	snprintf(path, sizeof(path), "%s/api-keys", cu_tmpdir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/admin-keys", cu_tmpdir);
	unlink(path);
	unlink(gw_log);
	unlink(model_path);
	rmdir(cu_tmpdir);
	return 0;
}

/* Every case but test_think: the shipped model's 809-token vocabulary and
 * ChatML template (the gateway's code is the same as with Qwen's 151,669
 * tokens; the tiny model's LM head, most of its work per token, is 190
 * times smaller). */
static int group_setup(void **state)
{
	(void)state;
	return gw_setup(tu_chat_tokenizer(), 21);
}

/* test_think and test_text_offset: Qwen's tokenizer, for its qwen3
 * thinking template and its multi-byte character tokens. */
static int think_setup(void **state)
{
	(void)state;
	return gw_setup(tu_data("data/tokenizers/qwen2/tokenizer.json"), 21);
}

/* test_effort: the o200k vocabulary with its harmony template (gpt-oss). */
static int harmony_setup(void **state)
{
	(void)state;
	return gw_setup(tu_data("data/tokenizers/o200k/tokenizer.json"), 21);
}

/* ---- `quorum ask` as the reference ------------------------------------ */

static json_t *ask_json_x(const char *q, int n, uint64_t seed, double temp,
			  int max_new, const char *extra)
{
	char cmd[3 * PATH_MAX + 512], out[PATH_MAX + 32];
	json_error_t e;
	json_t *o;

	snprintf(out, sizeof(out), "%s/ask.json", cu_tmpdir);
	snprintf(cmd, sizeof(cmd), "%s ask --endpoint %s -n %d --seed %llu "
		 "--temperature %g --max-new-tokens %d %s --json '%s' > %s",
		 cu_bin("quorum"), cl.client_ep, n, (unsigned long long)seed,
		 temp, max_new, extra, q, out);
	assert_int_equal(system(cmd), 0);
	o = json_load_file(out, 0, &e);
	unlink(out);
	if (!o)
		fail_msg("quorum ask --json: %s", e.text);
	return o;
}

static json_t *ask_json(const char *q, int n, uint64_t seed, double temp,
			int max_new)
{
	/* what the gateway asks for when a request names no early_stop */
	return ask_json_x(q, n, seed, temp, max_new, "--stop none");
}

static const char *Q1 = "What is 17 + 25? Give the number.";

static void assert_json_eq(json_t *a, json_t *b, const char *what)
{
	if (!json_equal(a, b)) {
		char *x = json_dumps(a, JSON_ENCODE_ANY),
		     *y = json_dumps(b, JSON_ENCODE_ANY);

		fail_msg("%s differ:\n%s\n%s", what, x, y);
	}
}

/* logprobs: every chosen token's log-probability, in OpenAI's shapes;
 * the tokens spell the returned text, the values are those `quorum ask
 * --logprobs` reports. */
/* Code points in s[0, n) of valid UTF-8 (what JSON text is). */
static size_t utf8_count(const char *s, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += ((unsigned char)s[i] & 0xc0) != 0x80;
	return k;
}

/* U+FFFDs in s[0, n). */
static size_t fffd_count(const char *s, size_t n)
{
	size_t k = 0;

	for (const char *p = s; (p = memmem(p, n - (size_t)(p - s),
					     "\xef\xbf\xbd", 3)); p += 3)
		k++;
	return k;
}

/* A completions choice's legacy logprobs: one offset and one logprob per
 * token; a token whose text is whole (no U+FFFD of a character the
 * tokens split) sits in the text at its offset, counted in code points,
 * and the next token's offset follows it. Returns whether a token so
 * checked comes after a well-formed character of more than one byte
 * (where its offset in the sample's bytes and in code points differ). */
static int check_text_offsets(json_t *c)
{
	json_t *lp = json_object_get(c, "logprobs");
	json_t *toks = json_object_get(lp, "tokens");
	json_t *offs = json_object_get(lp, "text_offset");
	const char *text = json_string_value(json_object_get(c, "text"));
	size_t n = json_array_size(toks), len, chars, at = 0;
	int wide = 0;

	assert_non_null(text);
	len = strlen(text);
	chars = utf8_count(text, len);
	assert_true(n > 0);
	assert_int_equal(n, json_array_size(json_object_get(lp,
							    "token_logprobs")));
	assert_int_equal(json_array_size(offs), n);
	for (size_t k = 0; k < n; k++) {
		const char *tk = json_string_value(json_array_get(toks, k));
		json_int_t off = json_integer_value(json_array_get(offs, k));
		size_t tl = strlen(tk);

		assert_true(off >= 0 && (size_t)off < chars);
		if (k == 0)
			assert_int_equal(off, 0);
		/* at: the byte where the text's code point `off` starts */
		for (at = 0; at < len && (utf8_count(text, at) < (size_t)off ||
					  ((unsigned char)text[at] & 0xc0) == 0x80);)
			at++;
		if (strstr(tk, "\xef\xbf\xbd") && !strstr(text + at, tk))
			continue; /* a character split between tokens */
		assert_true(at + tl <= len);
		assert_memory_equal(text + at, tk, tl);
		/* the bytes before it in the sample's own text: a U+FFFD of
		 * the reply was one stray byte there */
		wide |= at - 2 * fffd_count(text, at) != (size_t)off;
		if (k + 1 < n)
			assert_int_equal(json_integer_value(json_array_get(
				offs, k + 1)), off + (json_int_t)utf8_count(tk, tl));
	}
	return wide;
}

static void test_logprobs(void **state)
{
	json_t *ref = ask_json_x(Q1, 2, 5, 0.9, 16, "--stop none --logprobs");
	json_t *smp = json_object_get(ref, "samples"), *o, *ch;
	hresp r;

	(void)state;
	r = post("/v1/chat/completions",
		 "{\"messages\":[{\"role\":\"user\",\"content\":"
		 "\"What is 17 + 25? Give the number.\"}],\"n\":2,\"seed\":5,"
		 "\"temperature\":0.9,\"max_tokens\":16,\"logprobs\":true}");
	assert_int_equal(r.code, 200);
	o = body_json(&r);
	ch = json_object_get(o, "choices");
	assert_int_equal(json_array_size(ch), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *c = json_array_get(ch, i);
		const char *text = json_string_value(json_object_get(
			json_object_get(c, "message"), "content"));
		json_t *content = json_object_get(json_object_get(c, "logprobs"),
						  "content");
		json_t *want = json_object_get(json_array_get(smp, i),
					       "logprobs");
		char spelled[4096] = "";
		size_t k, used = 0;

		assert_true(json_array_size(content) > 0);
		/* ask's list also has the end token (empty, at the end) */
		assert_true(json_array_size(want) >= json_array_size(content));
		for (k = 0; k < json_array_size(content); k++) {
			json_t *e = json_array_get(content, k);
			const char *tk = json_string_value(json_object_get(e,
								   "token"));

			assert_true(json_real_value(json_object_get(
				e, "logprob")) <= 0);
			assert_true(json_real_value(json_object_get(e,
				"logprob")) == json_real_value(json_object_get(
					json_array_get(want, k), "logprob")));
			assert_int_equal(json_array_size(json_object_get(
				e, "top_logprobs")), 0);
			used += (size_t)snprintf(spelled + used,
						 sizeof(spelled) - used, "%s",
						 tk);
		}
		assert_string_equal(spelled, text);
	}
	json_decref(o);
	hresp_free(&r);
	/* completions: logprobs 0, the legacy shape (seed 16: the test
	 * model, whose end token is frequent, writes 4 whole tokens);
	 * test_text_offset has characters of several bytes */
	r = post("/v1/completions", "{\"prompt\":\"Count apples.\",\"n\":1,"
		 "\"seed\":16,\"max_tokens\":12,\"logprobs\":0}");
	assert_int_equal(r.code, 200);
	o = body_json(&r);
	check_text_offsets(json_array_get(json_object_get(o, "choices"), 0));
	json_decref(o);
	hresp_free(&r);
	json_decref(ref);
}

/* A chat reply to Q1 (n samples, seed 5, 16 tokens) with extra fields. */
static json_t *chat_q1(int n, const char *extra)
{
	char body[512];
	hresp r;
	json_t *o;

	snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\","
		 "\"content\":\"%s\"}],\"n\":%d,\"seed\":5,\"temperature\":"
		 "0.9,\"max_tokens\":16,\"logprobs\":true%s}", Q1, n, extra);
	r = post("/v1/chat/completions", body);
	if (r.code != 200)
		fail_msg("%s: HTTP %d %s", body, r.code, r.body);
	o = body_json(&r);
	hresp_free(&r);
	return o;
}

static json_t *content_of(json_t *o, size_t i)
{
	return json_object_get(json_object_get(json_array_get(
		json_object_get(o, "choices"), i), "logprobs"), "content");
}

/* top_logprobs: each chosen token's alternatives in OpenAI's shapes
 * (chat: [{token, logprob, bytes}]; completions' logprobs K: {token:
 * logprob} per position), the values `quorum ask --top-logprobs` reports
 * through the cluster; asking for them changes no chosen token's value,
 * the chosen token is among them with its own value whenever it ranks
 * above the last, and sample i's lists are the same with n = 3 as with
 * n = 2 (the samples split over the two workers otherwise). */
static void test_top_logprobs(void **state)
{
	json_t *ref = ask_json_x(Q1, 2, 5, 0.9, 16, "--stop none "
				 "--top-logprobs 3");
	json_t *smp = json_object_get(ref, "samples");
	json_t *k0 = chat_q1(2, ""), *k3 = chat_q1(2, ",\"top_logprobs\":3"),
	       *n3 = chat_q1(3, ",\"top_logprobs\":3"), *o, *ch;
	int ranked = 0;
	hresp r;

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		json_t *c0 = content_of(k0, i), *c3 = content_of(k3, i);
		json_t *want = json_object_get(json_array_get(smp, i),
					       "logprobs");

		assert_int_equal(json_array_size(c0), json_array_size(c3));
		assert_true(json_array_size(c3) > 0);
		assert_json_eq(c3, content_of(n3, i), "n = 3's alternatives");
		for (size_t k = 0; k < json_array_size(c3); k++) {
			json_t *e = json_array_get(c3, k);
			json_t *top = json_object_get(e, "top_logprobs");
			json_t *wt = json_object_get(json_array_get(want, k),
						     "top_logprobs");
			double lp = json_real_value(json_object_get(e,
								    "logprob"));
			size_t nt = json_array_size(top);
			int seen = 0;

			/* K changes no chosen token's value */
			assert_true(lp == json_real_value(json_object_get(
				json_array_get(c0, k), "logprob")));
			assert_true(nt >= 1 && nt <= 3);
			assert_int_equal(nt, json_array_size(wt));
			for (size_t j = 0; j < nt; j++) {
				json_t *a = json_array_get(top, j);
				const char *tk = json_string_value(
					json_object_get(a, "token"));
				double v = json_real_value(json_object_get(
					a, "logprob"));
				json_t *by = json_object_get(a, "bytes");

				assert_string_equal(tk, json_string_value(
					json_object_get(json_array_get(wt, j),
							"token")));
				assert_true(v == json_real_value(json_object_get(
					json_array_get(wt, j), "logprob")));
				assert_true(v <= 0);
				if (j)
					assert_true(v <= json_real_value(
						json_object_get(json_array_get(
							top, j - 1), "logprob")));
				/* a whole token's bytes spell its text */
				if (!strstr(tk, "\xef\xbf\xbd")) {
					assert_int_equal(json_array_size(by),
							 strlen(tk));
					for (size_t b = 0; b < strlen(tk); b++)
						assert_int_equal(
							json_integer_value(
								json_array_get(
									by, b)),
							(unsigned char)tk[b]);
				}
				seen |= v == lp;
			}
			if (lp > json_real_value(json_object_get(
				    json_array_get(top, nt - 1), "logprob"))) {
				assert_true(seen);
				ranked++;
			}
		}
	}
	assert_true(ranked > 0);
	/* completions: logprobs 2, the legacy {token: logprob} per position
	 * (the first two of chat's three: one list, cut) */
	r = post("/v1/completions", "{\"prompt\":\"What is 17 + 25? Give the "
		 "number.\",\"n\":2,\"seed\":5,\"temperature\":0.9,"
		 "\"max_tokens\":16,\"logprobs\":2}");
	assert_int_equal(r.code, 200);
	o = body_json(&r);
	ch = json_object_get(o, "choices");
	for (size_t i = 0; i < 2; i++) {
		json_t *lp = json_object_get(json_array_get(ch, i), "logprobs");
		json_t *tops = json_object_get(lp, "top_logprobs");
		json_t *c3 = content_of(k3, i);

		assert_int_equal(json_array_size(tops), json_array_size(
			json_object_get(lp, "tokens")));
		assert_int_equal(json_array_size(tops), json_array_size(c3));
		for (size_t k = 0; k < json_array_size(tops); k++) {
			json_t *t = json_array_get(tops, k);
			json_t *w = json_object_get(json_array_get(c3, k),
						    "top_logprobs");

			assert_true(json_object_size(t) >= 1 &&
				    json_object_size(t) <= 2);
			for (size_t j = 0; j < 2 && j < json_array_size(w);
			     j++) {
				json_t *a = json_array_get(w, j);
				json_t *v = json_object_get(t, json_string_value(
					json_object_get(a, "token")));

				assert_non_null(v);
				if (j == 0)
					assert_true(json_real_value(v) ==
						    json_real_value(json_object_get(
							    a, "logprob")));
			}
		}
	}
	json_decref(o);
	hresp_free(&r);
	/* without alternatives the legacy top_logprobs stays null */
	r = post("/v1/completions", "{\"prompt\":\"Count apples.\",\"n\":1,"
		 "\"max_tokens\":4,\"logprobs\":0}");
	assert_int_equal(r.code, 200);
	o = body_json(&r);
	assert_true(json_is_null(json_object_get(json_object_get(
		json_array_get(json_object_get(o, "choices"), 0), "logprobs"),
		"top_logprobs")));
	json_decref(o);
	hresp_free(&r);
	json_decref(k0);
	json_decref(k3);
	json_decref(n3);
	json_decref(ref);
}

/* A Server-Sent Events response's choices, reassembled. */
#define SSE_MAX 16
typedef struct {
	char *text[SSE_MAX];       /* NULL: the choice never appeared */
	char finish[SSE_MAX][16];  /* its finish_reason ("": none came) */
	int pieces[SSE_MAX];       /* non-empty text deltas */
	int chunks, done;
	json_t *last;              /* the last data chunk */
	json_t *quorum;            /* the quorum object (once, on the last
				    * finish chunk) */
	int empty;                 /* chunks without a choice */
	json_t *lp[SSE_MAX];       /* chat logprobs.content lists, joined as
				    * OpenAI's SDKs join them */
	int lp_deltas[SSE_MAX];    /* chunks with text and log-probabilities
				    * before the finish */
	int chunks_of[SSE_MAX];    /* chunks per choice */
	int lp_first[SSE_MAX];     /* its first chunk had log-probabilities
				    * (OpenAI's never has: the SDKs would
				    * count them twice) */
} sse_got;

/* Parses body (modified) as OpenAI chunks of object kind: one finish per
 * choice, nothing after it, data: [DONE] last. */
static void sse_parse(char *body, const char *kind, sse_got *g)
{
	char *line, *save = NULL;

	memset(g, 0, sizeof(*g));
	for (line = strtok_r(body, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *o, *ch;

		if (line[0] == ':')
			continue; /* keep-alive comment */
		assert_true(!strncmp(line, "data: ", 6));
		assert_false(g->done);
		if (!strcmp(line + 6, "[DONE]")) {
			g->done = 1;
			continue;
		}
		o = json_loads(line + 6, 0, NULL);
		assert_non_null(o);
		assert_string_equal(json_string_value(json_object_get(o,
				    "object")), kind);
		ch = json_object_get(o, "choices");
		g->chunks++;
		g->empty += !json_array_size(ch);
		if (json_object_get(o, "quorum")) {
			assert_null(g->quorum);
			assert_true(json_array_size(ch) == 1);
			g->quorum = json_incref(json_object_get(o, "quorum"));
		}
		for (size_t i = 0; i < json_array_size(ch); i++) {
			json_t *c = json_array_get(ch, i);
			json_int_t k = json_integer_value(json_object_get(c,
							 "index"));
			json_t *d = json_object_get(c, "delta"),
			       *fr = json_object_get(c, "finish_reason");
			const char *piece = json_string_value(
				d ? json_object_get(d, "content")
				  : json_object_get(c, "text"));
			size_t ol;

			assert_true(k >= 0 && k < SSE_MAX);
			assert_string_equal(g->finish[k], ""); /* none yet */
			g->chunks_of[k]++;
			ol = g->text[k] ? strlen(g->text[k]) : 0;
			piece = piece ? piece : "";
			g->pieces[k] += *piece != '\0';
			g->text[k] = realloc(g->text[k], ol + strlen(piece) + 1);
			strcpy(g->text[k] + ol, piece);
			if (json_is_string(fr))
				snprintf(g->finish[k], sizeof(g->finish[k]),
					 "%s", json_string_value(fr));
			if (json_is_array(json_object_get(json_object_get(c,
					"logprobs"), "content"))) {
				g->lp_first[k] |= g->chunks_of[k] == 1;
				g->lp_deltas[k] += !json_is_string(fr) &&
						   *piece != '\0';
				if (!g->lp[k])
					g->lp[k] = json_array();
				json_array_extend(g->lp[k], json_object_get(
					json_object_get(c, "logprobs"),
					"content"));
			} else if (json_is_object(json_object_get(c,
					"logprobs"))) {
				/* completions: four lists, each joined (a
				 * top_logprobs null stays null) */
				json_t *l = json_object_get(c, "logprobs"), *v;
				const char *key;

				g->lp_first[k] |= g->chunks_of[k] == 1;
				g->lp_deltas[k] += !json_is_string(fr) &&
						   *piece != '\0';
				if (!g->lp[k])
					g->lp[k] = json_object();
				json_object_foreach(l, key, v) {
					json_t *have = json_object_get(g->lp[k],
								       key);

					if (!json_is_array(v))
						json_object_set(g->lp[k], key,
								v);
					else if (have)
						json_array_extend(have, v);
					else
						json_object_set_new(g->lp[k],
							key, json_copy(v));
				}
			}
		}
		json_decref(g->last);
		g->last = o;
	}
	assert_true(g->done);
}

static void sse_got_free(sse_got *g)
{
	for (int k = 0; k < SSE_MAX; k++) {
		free(g->text[k]);
		json_decref(g->lp[k]);
	}
	json_decref(g->last);
	json_decref(g->quorum);
}

/* The extensions early_stop and vote: the samples, vote (with weights)
 * and stop report of `quorum ask --stop --vote`; a bad rule is a 400. */
static void test_early_stop(void **state)
{
	json_t *ref = ask_json_x(Q1, 12, 77, 0.9, 24,
				 "--stop window:2 --vote confidence");
	json_t *smp = json_object_get(ref, "samples"), *o, *ch, *qo;
	size_t k = json_array_size(smp);
	char body[512];
	hresp r;

	(void)state;
	if (!json_object_get(ref, "stop")) {
		char *d = json_dumps(ref, 0);

		fail_msg("quorum ask --json has no stop report: %.600s", d);
	}
	snprintf(body, sizeof(body), "{\"prompt\":\"%s\",\"n\":12,\"seed\":77,"
		 "\"temperature\":0.9,\"max_tokens\":24,"
		 "\"early_stop\":\"window:2\",\"vote\":\"confidence\"}", Q1);
	r = post("/v1/completions", body);
	assert_int_equal(r.code, 200);
	o = body_json(&r);
	ch = json_object_get(o, "choices");
	qo = json_object_get(o, "quorum");
	/* the reported samples 0..k-1 only, each with its confidence */
	assert_int_equal(json_array_size(ch), k);
	assert_true(k >= 2 && k <= 12);
	for (size_t i = 0; i < k; i++) {
		json_t *s = json_array_get(smp, i);

		assert_json_eq(json_object_get(json_array_get(ch, i), "text"),
			       json_object_get(s, "text"), "texts");
		assert_json_eq(json_array_get(json_object_get(qo,
				"group_confidence"), i),
			       json_object_get(s, "group_confidence"),
			       "group confidences");
	}
	assert_json_eq(json_object_get(qo, "answer"),
		       json_object_get(ref, "answer"), "answers");
	assert_json_eq(json_object_get(qo, "votes"),
		       json_object_get(ref, "votes"), "weighted votes");
	assert_json_eq(json_object_get(qo, "early_stop"),
		       json_object_get(ref, "stop"), "stop reports");
	json_decref(o);
	hresp_free(&r);
	/* streamed: the reported choices as quorum ask's; a sample early
	 * stopping cancelled after some of its text went out ends
	 * "cancelled" (this test's random model gives no answers, so its
	 * rule never stops early: that case is only checked when one did) */
	snprintf(body, sizeof(body), "{\"prompt\":\"%s\",\"n\":12,\"seed\":77,"
		 "\"temperature\":0.9,\"max_tokens\":24,\"stream\":true,"
		 "\"early_stop\":\"window:2\",\"vote\":\"confidence\"}", Q1);
	r = post("/v1/completions", body);
	assert_int_equal(r.code, 200);
	{
		sse_got g;
		int n_cancelled = 0;

		sse_parse(r.body, "text_completion", &g);
		for (size_t i = 0; i < 12; i++) {
			json_t *s = json_array_get(smp, i);

			if (i < k) {
				assert_non_null(g.text[i]);
				assert_string_equal(g.text[i], json_string_value(
					json_object_get(s, "text")));
				assert_string_equal(g.finish[i], json_string_value(
					json_object_get(s, "finish")));
			} else if (g.text[i]) {
				assert_string_equal(g.finish[i], "cancelled");
				n_cancelled++;
			}
		}
		printf("  streamed early stop: %zu of 12 reported, %d "
		       "cancelled after streaming text\n", k, n_cancelled);
		assert_json_eq(json_object_get(g.quorum, "votes"),
			       json_object_get(ref, "votes"),
			       "streamed weighted votes");
		assert_json_eq(json_object_get(g.quorum, "early_stop"),
			       json_object_get(ref, "stop"),
			       "streamed stop reports");
		sse_got_free(&g);
	}
	hresp_free(&r);
	json_decref(ref);

	r = post("/v1/completions", "{\"prompt\":\"x\",\"early_stop\":\"soon\"}");
	assert_int_equal(r.code, 400);
	o = body_json(&r);
	assert_string_equal(json_string_value(json_object_get(json_object_get(
		o, "error"), "param")), "early_stop");
	json_decref(o);
	hresp_free(&r);
	r = post("/v1/completions", "{\"prompt\":\"x\",\"vote\":3}");
	assert_int_equal(r.code, 400);
	hresp_free(&r);
}

/* Chat and text completions: the samples of `quorum ask`, byte for byte
 * (both sides print the bytes as JSON strings the same way), with its
 * vote. */
static void test_matches_ask(void **state)
{
	json_t *ref = ask_json(Q1, 6, 4242, 0.9, 24);
	json_t *smp = json_object_get(ref, "samples");
	char body[512];

	(void)state;
	assert_int_equal(json_array_size(smp), 6);
	for (int chat = 1; chat >= 0; chat--) {
		hresp r;
		json_t *o, *ch, *qo;

		if (chat)
			snprintf(body, sizeof(body), "{\"model\":\"x\",\"messages\":"
				 "[{\"role\":\"user\",\"content\":\"%s\"}],\"n\":6,"
				 "\"seed\":4242,\"temperature\":0.9,"
				 "\"max_tokens\":24}", Q1);
		else
			snprintf(body, sizeof(body), "{\"prompt\":\"%s\",\"n\":6,"
				 "\"seed\":4242,\"temperature\":0.9,"
				 "\"max_tokens\":24}", Q1);
		r = post(chat ? "/v1/chat/completions" : "/v1/completions", body);
		assert_int_equal(r.code, 200);
		assert_non_null(strstr(r.head, "application/json"));
		o = body_json(&r);
		assert_string_equal(json_string_value(json_object_get(o, "object")),
				    chat ? "chat.completion" : "text_completion");
		ch = json_object_get(o, "choices");
		assert_int_equal(json_array_size(ch), 6);
		for (size_t i = 0; i < 6; i++) {
			json_t *c = json_array_get(ch, i), *s = json_array_get(smp, i);
			json_t *t = chat ? json_object_get(json_object_get(c,
					"message"), "content")
					 : json_object_get(c, "text");

			assert_int_equal(json_integer_value(json_object_get(c,
					 "index")), (json_int_t)i);
			assert_json_eq(t, json_object_get(s, "text"), "texts");
			assert_string_equal(json_string_value(json_object_get(
				c, "finish_reason")), json_string_value(
				json_object_get(s, "finish")));
		}
		qo = json_object_get(o, "quorum");
		assert_json_eq(json_object_get(qo, "answer"),
			       json_object_get(ref, "answer"), "majorities");
		assert_json_eq(json_object_get(qo, "votes"),
			       json_object_get(ref, "votes"), "votes");
		assert_int_equal(json_integer_value(json_object_get(qo,
				 "samples")), 6);
		assert_int_equal(json_integer_value(json_object_get(
			json_object_get(o, "usage"), "prompt_tokens")),
			json_integer_value(json_object_get(ref,
						"prompt_tokens")));
		assert_non_null(json_object_get(json_object_get(qo, "prefix"),
						"prefill_worker"));
		json_decref(o);
		hresp_free(&r);
	}
	json_decref(ref);
}

static void check_error(const hresp *r, int code, const char *param,
			const char *msg, const char *name);

/* A conversation: its earlier user and assistant turns are the prompt's
 * prior turns, as `quorum ask --shots` renders a few-shot file of them,
 * and the samples answer its last message: the same texts, votes and
 * prompt as that command's. */
static void test_conversation(void **state)
{
	static const char *const u[] = {"What is 2 + 2?", "And 3 + 5?"};
	static const char *const a[] = {"2 + 2 = 4. The answer is 4.",
					"3 + 5 = 8. The answer is 8."};
	char shots[PATH_MAX + 16], extra[PATH_MAX + 64], body[1024];
	json_t *ref, *one, *o, *ch, *smp;
	FILE *f;
	hresp r;

	(void)state;
	snprintf(shots, sizeof(shots), "%s/turns.jsonl", cu_tmpdir);
	f = fopen(shots, "w");
	assert_non_null(f);
	for (int i = 0; i < 2; i++)
		fprintf(f, "{\"question\": \"%s\", \"solution\": \"%s\"}\n",
			u[i], a[i]);
	fclose(f);
	snprintf(extra, sizeof(extra), "--stop none --shots %s", shots);
	ref = ask_json_x(Q1, 6, 4242, 0.9, 24, extra);
	one = ask_json(Q1, 6, 4242, 0.9, 24);
	snprintf(body, sizeof(body), "{\"messages\":["
		 "{\"role\":\"user\",\"content\":\"%s\"},"
		 /* as a reply's message comes: its reasoning and refusal
		  * are taken and not shown (the same bytes as --shots) */
		 "{\"role\":\"assistant\",\"content\":\"%s\","
		 "\"refusal\":null,\"reasoning_content\":\"Two twos.\"},"
		 "{\"role\":\"user\",\"content\":[{\"type\":\"text\","
		 "\"text\":\"%s\"}]},"
		 "{\"role\":\"assistant\",\"content\":\"%s\"},"
		 "{\"role\":\"user\",\"content\":\"%s\"}],\"n\":6,"
		 "\"seed\":4242,\"temperature\":0.9,\"max_tokens\":24}",
		 u[0], a[0], u[1], a[1], Q1);
	r = post("/v1/chat/completions", body);
	assert_int_equal(r.code, 200);
	o = body_json(&r);
	ch = json_object_get(o, "choices");
	smp = json_object_get(ref, "samples");
	assert_int_equal(json_array_size(ch), 6);
	for (size_t i = 0; i < 6; i++)
		assert_json_eq(json_object_get(json_object_get(
			json_array_get(ch, i), "message"), "content"),
			json_object_get(json_array_get(smp, i), "text"),
			"texts");
	assert_json_eq(json_object_get(json_object_get(o, "quorum"), "votes"),
		       json_object_get(ref, "votes"), "votes");
	assert_int_equal(json_integer_value(json_object_get(
		json_object_get(o, "usage"), "prompt_tokens")),
		json_integer_value(json_object_get(ref, "prompt_tokens")));
	/* the turns are in the prompt */
	assert_true(json_integer_value(json_object_get(ref, "prompt_tokens")) >
		    json_integer_value(json_object_get(one, "prompt_tokens")));
	json_decref(o);
	hresp_free(&r);
	/* at most 64 turns before the question (the wire's bound) */
	{
		char *big = malloc(65 * 64 + 128), *w = big;

		assert_non_null(big);
		w += sprintf(w, "{\"messages\":[");
		for (int i = 0; i < 65; i++)
			w += sprintf(w, "{\"role\":\"user\",\"content\":\"q\"},"
				     "{\"role\":\"assistant\",\"content\":"
				     "\"a\"},");
		sprintf(w, "{\"role\":\"user\",\"content\":\"q\"}]}");
		r = post("/v1/chat/completions", big);
		check_error(&r, 400, "messages", "more than 64 earlier turns",
			    "65 turns");
		hresp_free(&r);
		free(big);
	}
	json_decref(ref);
	json_decref(one);
	unlink(shots);
}

/* One /v1/responses request (body) against the chat request it means
 * (cbody): the voted chain's text, its status, the vote, the usage and
 * the log-probabilities are chat's first choice's; *text gets the text
 * (owned) and *items the response's output (owned). */
static void resp_vs_chat(const char *body, const char *cbody, char **text,
			 json_t **items)
{
	hresp r = post("/v1/responses", body), c = post("/v1/chat/completions",
							  cbody);
	json_t *o, *co, *out, *msg, *part, *ch0, *u, *cu;

	if (r.code != 200)
		fail_msg("/v1/responses %d: %.400s", r.code, r.body);
	assert_int_equal(c.code, 200);
	o = body_json(&r);
	co = body_json(&c);
	assert_string_equal(json_string_value(json_object_get(o, "object")),
			    "response");
	assert_true(!strncmp(json_string_value(json_object_get(o, "id")),
			     "resp_", 5));
	out = json_object_get(o, "output");
	msg = json_array_get(out, json_array_size(out) - 1);
	assert_string_equal(json_string_value(json_object_get(msg, "type")),
			    "message");
	part = json_array_get(json_object_get(msg, "content"), 0);
	assert_string_equal(json_string_value(json_object_get(part, "type")),
			    "output_text");
	ch0 = json_array_get(json_object_get(co, "choices"), 0);
	assert_json_eq(json_object_get(part, "text"), json_object_get(
		json_object_get(ch0, "message"), "content"), "text");
	/* (neither asked: neither has any) */
	if (json_object_get(part, "logprobs") ||
	    json_object_get(json_object_get(ch0, "logprobs"), "content"))
		assert_json_eq(json_object_get(part, "logprobs"),
			       json_object_get(json_object_get(ch0, "logprobs"),
					       "content"), "logprobs");
	assert_string_equal(json_string_value(json_object_get(o, "status")),
			    !strcmp(json_string_value(json_object_get(
				    ch0, "finish_reason")), "length")
			    ? "incomplete" : "completed");
	assert_json_eq(json_object_get(json_object_get(o, "quorum"), "votes"),
		       json_object_get(json_object_get(co, "quorum"), "votes"),
		       "votes");
	u = json_object_get(o, "usage");
	cu = json_object_get(co, "usage");
	assert_json_eq(json_object_get(u, "input_tokens"),
		       json_object_get(cu, "prompt_tokens"), "input_tokens");
	assert_json_eq(json_object_get(u, "output_tokens"),
		       json_object_get(cu, "completion_tokens"),
		       "output_tokens");
	*text = strdup(json_string_value(json_object_get(part, "text")));
	*items = json_incref(out);
	json_decref(o);
	json_decref(co);
	hresp_free(&r);
	hresp_free(&c);
}

/* A /v1/responses stream (body): its events named and numbered from 0,
 * in the order of an output message (live: its text in one or more
 * deltas as it decodes; else one), their deltas joined the text (and,
 * asked for, their log-probabilities the start of the part's list,
 * which output_text.done carries whole: live, the last tokens wait for
 * the sample's end; voted, all of it), the last
 * the response whole with the text part of items (a non-streamed
 * response's output; the ids are each response's own). */
static void resp_stream_check(const char *body, const char *text,
			      json_t *items, int live)
{
	static const char *const want[] = {
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done",
	};
	hresp r = post("/v1/responses", body);
	char *line, *save = NULL, *joined = strdup("");
	const char *ev = NULL;
	json_t *last = NULL, *out, *resp, *lps = json_array(), *part;
	size_t seq = 0, w = 0, deltas = 0;

	assert_int_equal(r.code, 200);
	for (line = strtok_r(r.body, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *e;

		if (line[0] == ':')
			continue; /* keep-alive */
		if (!strncmp(line, "event: ", 7)) {
			ev = line + 7;
			continue;
		}
		assert_true(!strncmp(line, "data: ", 6));
		assert_non_null(ev);
		e = json_loads(line + 6, 0, NULL);
		assert_non_null(e);
		assert_string_equal(json_string_value(json_object_get(
			e, "type")), ev);
		assert_int_equal(json_integer_value(json_object_get(
			e, "sequence_number")), seq);
		seq++;
		if (!strcmp(ev, "response.output_text.delta")) {
			const char *d = json_string_value(json_object_get(
				e, "delta"));

			joined = realloc(joined, strlen(joined) + strlen(d) + 1);
			strcat(joined, d);
			json_array_extend(lps, json_object_get(e, "logprobs"));
			if (deltas++)
				w--; /* more deltas: the same step */
		}
		if (w < sizeof(want) / sizeof(*want))
			assert_string_equal(ev, want[w]);
		w++;
		ev = NULL;
		json_decref(last);
		last = e;
	}
	assert_string_equal(joined, text);
	assert_int_equal(w, sizeof(want) / sizeof(*want) + 1);
	/* the voted text comes in one delta; live, the sample's as it
	 * decodes (its parts: at least one) */
	if (!live)
		assert_int_equal(deltas, 1);
	assert_true(deltas >= 1);
	assert_non_null(last);
	assert_true(!strcmp(json_string_value(json_object_get(last, "type")),
			    "response.completed") ||
		    !strcmp(json_string_value(json_object_get(last, "type")),
			    "response.incomplete"));
	resp = json_object_get(last, "response");
	out = json_object_get(resp, "output");
	assert_int_equal(json_array_size(out), json_array_size(items));
	part = json_array_get(json_object_get(json_array_get(out,
		json_array_size(out) - 1), "content"), 0);
	assert_json_eq(part, json_array_get(json_object_get(json_array_get(
		items, json_array_size(items) - 1), "content"), 0),
		"the streamed response's text part");
	if (json_object_get(part, "logprobs")) {
		json_t *all = json_object_get(part, "logprobs");

		assert_true(json_array_size(lps) > 0);
		assert_true(json_array_size(lps) <= json_array_size(all));
		if (!live)
			assert_int_equal(json_array_size(lps),
					 json_array_size(all));
		for (size_t t = 0; t < json_array_size(lps); t++)
			assert_json_eq(json_array_get(lps, t),
				       json_array_get(all, t),
				       "a delta's log-probability");
	}
	json_decref(lps);
	json_decref(last);
	free(joined);
	hresp_free(&r);
}

/* /v1/responses (responses.c): the chat path's answer in the Responses
 * API's shape. Instructions are the system message; a response's output
 * appended to the next input (message and reasoning items, ids and all)
 * is the conversation's earlier turn; streamed, the events come in
 * order, numbered from 0, the deltas' text the response's and the last
 * event the response whole. */
static void test_responses(void **state)
{
	char body[1024], cbody[1024], *text, *t2;
	json_t *items, *items2, *o, *in;

	(void)state;
	snprintf(body, sizeof(body), "{\"input\":\"%s\",\"instructions\":"
		 "\"Be brief.\",\"samples\":6,\"seed\":4242,\"temperature\":"
		 "0.9,\"max_output_tokens\":24,\"include\":"
		 "[\"message.output_text.logprobs\"],\"top_logprobs\":2}", Q1);
	snprintf(cbody, sizeof(cbody), "{\"messages\":[{\"role\":\"system\","
		 "\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
		 "\"%s\"}],\"samples\":6,\"seed\":4242,\"temperature\":0.9,"
		 "\"max_tokens\":24,\"logprobs\":true,\"top_logprobs\":2}", Q1);
	resp_vs_chat(body, cbody, &text, &items);
	/* the next turn: the output appended as it came */
	o = json_object();
	in = json_array();
	json_array_append_new(in, json_pack("{s:s, s:s}", "role", "user",
					    "content", Q1));
	json_array_extend(in, items);
	json_array_append_new(in, json_pack("{s:s, s:[{s:s, s:s}]}", "role",
		"user", "content", "type", "input_text", "text",
		"And 3 + 5?"));
	json_object_set_new(o, "input", in);
	json_object_set_new(o, "samples", json_integer(6));
	json_object_set_new(o, "seed", json_integer(4242));
	json_object_set_new(o, "max_output_tokens", json_integer(24));
	{
		char *b = json_dumps(o, JSON_COMPACT);
		json_t *co = json_pack("{s:[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}],"
				       " s:i, s:i, s:i}", "messages", "role",
				       "user", "content", Q1, "role",
				       "assistant", "content", text, "role",
				       "user", "content", "And 3 + 5?",
				       "samples", 6, "seed", 4242,
				       "max_tokens", 24);
		char *cb = json_dumps(co, JSON_COMPACT);

		assert_non_null(b);
		assert_non_null(cb);
		resp_vs_chat(b, cb, &t2, &items2);
		free(b);
		free(cb);
		json_decref(co);
		json_decref(items2);
		free(t2);
	}
	json_decref(o);
	/* streamed, the vote first: the events */
	snprintf(body + strlen(body) - 1, sizeof(body) - strlen(body) + 1,
		 ",\"stream\":true}");
	resp_stream_check(body, text, items, 0);
	json_decref(items);
	free(text);
	/* one sample: its text live, in deltas as it decodes */
	snprintf(body, sizeof(body), "{\"input\":\"%s\",\"samples\":1,"
		 "\"seed\":9,\"max_output_tokens\":40,\"include\":"
		 "[\"message.output_text.logprobs\"]}", Q1);
	snprintf(cbody, sizeof(cbody), "{\"messages\":[{\"role\":\"user\","
		 "\"content\":\"%s\"}],\"samples\":1,\"seed\":9,"
		 "\"max_tokens\":40,\"logprobs\":true}", Q1);
	resp_vs_chat(body, cbody, &text, &items);
	snprintf(body + strlen(body) - 1, sizeof(body) - strlen(body) + 1,
		 ",\"stream\":true}");
	resp_stream_check(body, text, items, 1);
	json_decref(items);
	free(text);
}

/* Completions' text_offset counts code points of the returned text, not
 * the sample's bytes: over seeds until a token after a character of
 * several bytes has been checked (Qwen's vocabulary, unlike the 809-token
 * one of the other cases, has whole multi-byte characters as tokens). */
static void test_text_offset(void **state)
{
	int seen = 0, seed;

	(void)state;
	for (seed = 1; seed <= 32 && !seen; seed++) {
		char body[256];
		hresp r;
		json_t *o;

		snprintf(body, sizeof(body), "{\"prompt\":\"Count apples.\","
			 "\"n\":1,\"seed\":%d,\"max_tokens\":16,"
			 "\"logprobs\":0}", seed);
		r = post("/v1/completions", body);
		assert_int_equal(r.code, 200);
		o = body_json(&r);
		seen = check_text_offsets(json_array_get(json_object_get(
			o, "choices"), 0));
		json_decref(o);
		hresp_free(&r);
	}
	if (!seen)
		fail_msg("no completion of seeds 1..32 had a token after a "
			 "character of several bytes");
}

/* reasoning_effort (harmony templates) reaches the prompt: the texts and
 * first log-probabilities of `quorum ask --reasoning-effort E`, through
 * both endpoints. low and high are other prompts, so the log-probability
 * of the first token differs (a tiny random model may still draw the
 * same tokens). */
static double first_logprob(json_t *ref, size_t i)
{
	return json_real_value(json_object_get(json_array_get(json_object_get(
		json_array_get(json_object_get(ref, "samples"), i),
		"logprobs"), 0), "logprob"));
}

static void test_effort(void **state)
{
	static const char *const eff[] = {"low", "high"};
	json_t *ref[2];
	char body[512], extra[64];
	hresp r;
	json_t *o;

	(void)state;
	for (int k = 0; k < 2; k++) {
		snprintf(extra, sizeof(extra),
			 "--stop none --logprobs --reasoning-effort %s", eff[k]);
		ref[k] = ask_json_x(Q1, 2, 11, 0.9, 12, extra);
	}
	assert_true(first_logprob(ref[0], 0) != first_logprob(ref[1], 0));
	for (int k = 0; k < 4; k++) {
		int chat = k < 2;
		json_t *want = ref[k % 2];

		snprintf(body, sizeof(body), "{%s\"%s\"%s,\"n\":2,\"seed\":11,"
			 "\"temperature\":0.9,\"max_tokens\":12,\"logprobs\":%s,"
			 "\"reasoning_effort\":\"%s\"}",
			 chat ? "\"messages\":[{\"role\":\"user\",\"content\":"
			      : "\"prompt\":", Q1, chat ? "}]" : "",
			 chat ? "true" : "0", eff[k % 2]);
		r = post(chat ? "/v1/chat/completions" : "/v1/completions",
			 body);
		assert_int_equal(r.code, 200);
		o = body_json(&r);
		for (size_t i = 0; i < 2; i++) {
			json_t *c = json_array_get(json_object_get(o, "choices"),
						   i);
			json_t *lp = json_object_get(c, "logprobs");

			assert_json_eq(chat ? json_object_get(json_object_get(
						      c, "message"), "content")
					    : json_object_get(c, "text"),
				json_object_get(json_array_get(json_object_get(
					want, "samples"), i), "text"),
				"effort texts");
			assert_true(json_real_value(chat
				? json_object_get(json_array_get(json_object_get(
					  lp, "content"), 0), "logprob")
				: json_array_get(json_object_get(
					  lp, "token_logprobs"), 0)) ==
				first_logprob(want, i));
		}
		json_decref(o);
		hresp_free(&r);
	}
	json_decref(ref[0]);
	json_decref(ref[1]);
}

/* think (qwen3 templates) reaches the prompt: `quorum ask --think off`'s
 * bytes, which differ from the default (thinking on). */
static void test_think(void **state)
{
	json_t *off = ask_json_x(Q1, 2, 11, 0.9, 12, "--stop none --think off");
	json_t *on = ask_json_x(Q1, 2, 11, 0.9, 12, "--stop none --think on");
	char body[512];
	hresp r;
	json_t *o;

	(void)state;
	assert_false(json_equal(json_object_get(off, "prompt_tokens"),
				json_object_get(on, "prompt_tokens")));
	for (int k = 0; k < 2; k++) {
		json_t *ref = k ? on : off;

		snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\","
			 "\"content\":\"%s\"}],\"n\":2,\"seed\":11,"
			 "\"temperature\":0.9,\"max_tokens\":12,%s}", Q1,
			 k ? "\"think\":true"
			   : "\"chat_template_kwargs\":{\"enable_thinking\":"
			     "false}");
		r = post("/v1/chat/completions", body);
		assert_int_equal(r.code, 200);
		o = body_json(&r);
		assert_int_equal(json_integer_value(json_object_get(
			json_object_get(o, "usage"), "prompt_tokens")),
			json_integer_value(json_object_get(ref,
							"prompt_tokens")));
		for (size_t i = 0; i < 2; i++)
			assert_json_eq(json_object_get(json_object_get(
				json_array_get(json_object_get(o, "choices"), i),
				"message"), "content"),
				json_object_get(json_array_get(json_object_get(
					ref, "samples"), i), "text"),
				"think texts");
		json_decref(o);
		hresp_free(&r);
	}
	json_decref(off);
	json_decref(on);
}

/* A stop string: texts end before it (finish "stop"), the rest intact.
 * Seed 36: sample 0 runs to max_tokens (83 bytes) on the test model,
 * whose end token is frequent (most seeds end it within 6 bytes). */
static void test_stop(void **state)
{
	hresp r = post("/v1/completions", "{\"prompt\":\"Count apples.\",\"n\":3,"
		       "\"seed\":36,\"max_tokens\":20}");
	json_t *o = body_json(&r), *full = json_object_get(o, "choices");
	const char *t0 = json_string_value(json_object_get(json_array_get(
		full, 0), "text"));
	char stop[16], body[256], *esc;
	json_t *so, *sc;
	size_t cut;

	(void)state;
	assert_int_equal(r.code, 200);
	assert_true(strlen(t0) > 6);
	/* a stop string from inside sample 0: 3 bytes at byte 4, whole
	 * characters (the text is JSON-decoded UTF-8) */
	cut = 4;
	while (((unsigned char)t0[cut] & 0xc0) == 0x80)
		cut++;
	snprintf(stop, sizeof(stop), "%.1s", t0 + cut);
	{
		size_t k = cut + 1;

		while (((unsigned char)t0[k] & 0xc0) == 0x80)
			k++;
		snprintf(stop, sizeof(stop), "%.*s", (int)(k - cut), t0 + cut);
	}
	{
		json_t *js = json_string(stop);

		esc = json_dumps(js, JSON_ENCODE_ANY);
		json_decref(js);
	}
	snprintf(body, sizeof(body), "{\"prompt\":\"Count apples.\",\"n\":3,"
		 "\"seed\":36,\"max_tokens\":20,\"stop\":[%s]}", esc);
	free(esc);
	hresp_free(&r);
	r = post("/v1/completions", body);
	assert_int_equal(r.code, 200);
	so = body_json(&r);
	sc = json_object_get(so, "choices");
	for (size_t i = 0; i < 3; i++) {
		const char *a = json_string_value(json_object_get(
			json_array_get(full, i), "text"));
		const char *b = json_string_value(json_object_get(
			json_array_get(sc, i), "text"));
		const char *at = strstr(a, stop);

		if (at) {
			assert_int_equal(strlen(b), (size_t)(at - a));
			assert_memory_equal(a, b, strlen(b));
			assert_string_equal(json_string_value(json_object_get(
				json_array_get(sc, i), "finish_reason")), "stop");
		} else {
			assert_string_equal(a, b);
		}
	}
	assert_true(strlen(json_string_value(json_object_get(
		json_array_get(sc, 0), "text"))) <= cut);
	/* the workers ended the cut samples there: fewer tokens decoded */
	assert_true(json_integer_value(json_object_get(json_object_get(
			    so, "usage"), "completion_tokens")) <
		    json_integer_value(json_object_get(json_object_get(
			    o, "usage"), "completion_tokens")));
	json_decref(so);
	json_decref(o);
	hresp_free(&r);
}

/* SSE: chunks with their choice index reassemble to the texts of the
 * non-streamed response; the last data chunk has the quorum object;
 * then [DONE]. */
static void test_stream(void **state)
{
	const char *b = "{\"messages\":[{\"role\":\"system\",\"content\":\"Be "
			"brief.\"},{\"role\":\"user\",\"content\":\"Name a "
			"prime.\"}],\"n\":4,\"seed\":77,\"max_tokens\":24,"
			"\"ignore_eos\":true%s}";
	char body[512];
	hresp plain, st;
	json_t *po;
	sse_got g;

	(void)state;
	snprintf(body, sizeof(body), b, "");
	plain = post("/v1/chat/completions", body);
	assert_int_equal(plain.code, 200);
	po = body_json(&plain);
	snprintf(body, sizeof(body), b, ",\"stream\":true");
	st = post("/v1/chat/completions", body);
	assert_int_equal(st.code, 200);
	assert_non_null(strstr(st.head, "text/event-stream"));
	sse_parse(st.body, "chat.completion.chunk", &g);
	assert_true(g.chunks >= 5);
	for (int k = 0; k < SSE_MAX; k++) {
		json_t *c = json_array_get(json_object_get(po, "choices"),
					   (size_t)k);

		if (k >= 4) {
			assert_null(g.text[k]);
			continue;
		}
		assert_string_equal(g.finish[k], "length");
		assert_non_null(g.text[k]);
		/* token-level: the worker sends new text every 4 rounds, so
		 * 24 tokens arrive in several pieces, not one at the end */
		if (g.pieces[k] < 3)
			fail_msg("choice %d came in %d piece(s)", k, g.pieces[k]);
		assert_string_equal(g.text[k], json_string_value(json_object_get(
			json_object_get(c, "message"), "content")));
	}
	assert_json_eq(json_object_get(g.quorum, "votes"),
		       json_object_get(json_object_get(po, "quorum"), "votes"),
		       "streamed votes");
	/* no chunk without a choice unless include_usage asks (OpenAI's
	 * loop reads chunk.choices[0]) */
	assert_int_equal(g.empty, 0);
	assert_null(json_object_get(g.last, "usage"));
	sse_got_free(&g);
	hresp_free(&st);
	snprintf(body, sizeof(body), b, ",\"stream\":true,\"stream_options\":"
		 "{\"include_usage\":true}");
	st = post("/v1/chat/completions", body);
	assert_int_equal(st.code, 200);
	sse_parse(st.body, "chat.completion.chunk", &g);
	/* the usage chunk last: no choices, every sample's tokens; the
	 * chunks before it have usage null (OpenAI's) */
	assert_non_null(strstr(st.body, "\"usage\":null"));
	assert_int_equal(g.empty, 1);
	assert_int_equal(json_array_size(json_object_get(g.last, "choices")), 0);
	assert_json_eq(json_object_get(json_object_get(g.last, "usage"),
				       "completion_tokens"),
		       json_object_get(json_object_get(po, "usage"),
				       "completion_tokens"), "streamed usage");
	sse_got_free(&g);
	json_decref(po);
	hresp_free(&plain);
	hresp_free(&st);
}

/* A /v1/completions request of 2 choices, plain and streamed: each
 * choice's four lists, joined from the stream's deltas (every choice's
 * deltas carrying some), are the plain response's, text_offset first,
 * and its text the same; top 1: top_logprobs lists, 0: null. The plain
 * response (the caller's). */
static json_t *completions_vs_stream(const char *plain_body,
				     const char *stream_body, int top)
{
	hresp plain = post("/v1/completions", plain_body), st;
	json_t *po, *ch;
	sse_got g;

	assert_int_equal(plain.code, 200);
	po = body_json(&plain);
	ch = json_object_get(po, "choices");
	assert_int_equal(json_array_size(ch), 2);
	st = post("/v1/completions", stream_body);
	assert_int_equal(st.code, 200);
	sse_parse(st.body, "text_completion", &g);
	for (size_t k = 0; k < 2; k++) {
		json_t *want = json_object_get(json_array_get(ch, k),
					       "logprobs");

		assert_true(json_array_size(json_object_get(want, "tokens")) >
			    0);
		assert_non_null(g.lp[k]);
		assert_json_eq(json_object_get(g.lp[k], "text_offset"),
			       json_object_get(want, "text_offset"),
			       "streamed text_offset");
		assert_json_eq(g.lp[k], want, "streamed logprobs");
		if (g.lp_deltas[k] == 0)
			fail_msg("completions choice %zu: no delta carried "
				 "log-probabilities", k);
		assert_true(top ? json_is_array(json_object_get(
					  g.lp[k], "top_logprobs"))
				: json_is_null(json_object_get(
					  g.lp[k], "top_logprobs")));
		assert_string_equal(g.text[k], json_string_value(
			json_object_get(json_array_get(ch, k), "text")));
	}
	sse_got_free(&g);
	hresp_free(&plain);
	hresp_free(&st);
	return po;
}

/* logprobs in a stream: the chunks' lists, joined, are the plain
 * response's, for a stream of every sample (n = samples: each delta
 * carries the entries of its tokens as they decode, the finish the
 * rest) and for the voted choice (samples 4, one choice: all with its
 * finish). */
static void test_stream_logprobs(void **state)
{
	static const char *const extra[] = {"", ",\"samples\":4,\"n\":1"};
	char body[512];

	(void)state;
	for (int v = 0; v < 2; v++) {
		const char *b = "{\"messages\":[{\"role\":\"user\","
				"\"content\":\"%s\"}],\"seed\":5,\"temperature\":"
				"0.9,\"max_tokens\":16,\"logprobs\":true,"
				"\"top_logprobs\":2%s%s%s}";
		json_t *po, *ch;
		hresp plain, st;
		sse_got g;
		size_t n;

		snprintf(body, sizeof(body), b, Q1, v ? "" : ",\"n\":2",
			 extra[v], "");
		plain = post("/v1/chat/completions", body);
		assert_int_equal(plain.code, 200);
		po = body_json(&plain);
		ch = json_object_get(po, "choices");
		n = json_array_size(ch);
		assert_int_equal(n, v ? 1 : 2);
		snprintf(body, sizeof(body), b, Q1, v ? "" : ",\"n\":2",
			 extra[v], ",\"stream\":true");
		st = post("/v1/chat/completions", body);
		assert_int_equal(st.code, 200);
		sse_parse(st.body, "chat.completion.chunk", &g);
		for (size_t k = 0; k < n; k++) {
			json_t *want = json_object_get(json_object_get(
				json_array_get(ch, k), "logprobs"), "content");

			assert_true(json_array_size(want) > 0);
			assert_non_null(g.lp[k]);
			assert_json_eq(g.lp[k], want, "streamed logprobs");
			/* live, each delta carries its tokens' entries; the
			 * voted choice's come whole with its finish */
			if (v == 0 && g.lp_deltas[k] == 0)
				fail_msg("choice %zu: no delta carried "
					 "log-probabilities", k);
			if (v == 1)
				assert_int_equal(g.lp_deltas[k], 0);
			assert_false(g.lp_first[k]);
			assert_string_equal(g.text[k], json_string_value(
				json_object_get(json_object_get(json_array_get(
					ch, k), "message"), "content")));
		}
		sse_got_free(&g);
		json_decref(po);
		hresp_free(&plain);
		hresp_free(&st);
	}
	/* completions: the four lists on every delta, from the first chunk
	 * on (OpenAI's do), joined the plain response's; with K = 0 their
	 * top_logprobs null, as the plain one's */
	for (int k0 = 0; k0 < 2; k0++) {
		const char *b = "{\"prompt\":\"%s\",\"seed\":5,"
				"\"temperature\":0.9,\"max_tokens\":16,"
				"\"n\":2,\"logprobs\":%d%s}";
		char sbody[512];

		snprintf(body, sizeof(body), b, Q1, k0 ? 2 : 0, "");
		snprintf(sbody, sizeof(sbody), b, Q1, k0 ? 2 : 0,
			 ",\"stream\":true");
		json_decref(completions_vs_stream(body, sbody, k0));
	}
	/* characters of 2, 3 and 4 bytes, each written as byte tokens by
	 * the shipped vocabulary, so deltas end inside them: a token that
	 * begins inside one points at that character, streamed or not; cut
	 * by max_tokens inside the last ones too (their bytes then each a
	 * character of their own, as the plain response counts them: 11
	 * byte tokens, 1 to 3 digits, 2 for the ü and 21 in all end inside
	 * the second emoji) */
	for (int cut = 0; cut < 2; cut++) {
		const char *b = "{\"prompt\":\"%s\",\"seed\":5,"
				"\"temperature\":0.9,\"max_tokens\":%d,"
				"\"n\":2,\"logprobs\":1,\"grammar\":"
				"\"root ::= \\\"\u00e9\u20ac\U0001f600 x\\\" "
				"[0-9]{1,3} \\\"\u00fc\U0001f600\U0001f600"
				"\U0001f600\\\"\"%s}";
		char sbody[512];
		json_t *po;

		snprintf(body, sizeof(body), b, Q1, cut ? 21 : 40, "");
		snprintf(sbody, sizeof(sbody), b, Q1, cut ? 21 : 40,
			 ",\"stream\":true");
		po = completions_vs_stream(body, sbody, 1);
		/* the text did end inside a character when cut */
		if (cut)
			assert_non_null(strstr(json_string_value(json_object_get(
				json_array_get(json_object_get(po, "choices"),
					       0), "text")), "\xef\xbf\xbd"));
		json_decref(po);
	}
}

/* ---- /metrics, parsed here ---------------------------------------------- */

typedef struct metric {
	char name[128];
	char labels[256];
	double v;
} metric;

/* Prometheus text format 0.0.4: "# HELP"/"# TYPE" lines, and samples
 * NAME[{l="v",...}] VALUE. Returns the samples; fails on a bad line or
 * a sample whose family has no TYPE line before it. */
static metric *prom_parse(const char *text, size_t *n_out)
{
	char *copy = strdup(text), *save = NULL, *line;
	char typed[64][128];
	size_t n_typed = 0, n = 0, cap = 64;
	metric *m = malloc(cap * sizeof(*m));

	for (line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char name[128], *p = line, *end;
		size_t k = 0, base;
		int ok = 0;

		if (!strncmp(line, "# TYPE ", 7)) {
			char t[32];

			if (sscanf(line + 7, "%127s %31s", typed[n_typed], t) != 2)
				fail_msg("bad TYPE line: %s", line);
			assert_true(!strcmp(t, "counter") || !strcmp(t, "gauge") ||
				    !strcmp(t, "histogram"));
			n_typed++;
			continue;
		}
		if (!strncmp(line, "# HELP ", 7))
			continue;
		assert_true(line[0] != '#');
		while (*p && (isalnum((unsigned char)*p) || *p == '_' ||
			      *p == ':') && k < sizeof(name) - 1)
			name[k++] = *p++;
		name[k] = '\0';
		if (!k || isdigit((unsigned char)name[0]))
			fail_msg("bad metric name: %s", line);
		if (n == cap)
			m = realloc(m, (cap *= 2) * sizeof(*m));
		memcpy(m[n].name, name, k + 1);
		m[n].labels[0] = '\0';
		if (*p == '{') {
			char *close = p + 1;
			int inq = 0;

			for (; *close && (inq || *close != '}'); close++) {
				if (inq && *close == '\\' && close[1])
					close++;
				else if (*close == '"')
					inq = !inq;
			}
			if (*close != '}')
				fail_msg("unclosed labels: %s", line);
			snprintf(m[n].labels, sizeof(m[n].labels), "%.*s",
				 (int)(close - p - 1), p + 1);
			p = close + 1;
		}
		if (*p != ' ')
			fail_msg("no value: %s", line);
		m[n].v = strtod(p + 1, &end);
		if (end == p + 1 || *end)
			fail_msg("bad value: %s", line);
		/* the family: the name, or a histogram's base name */
		base = strlen(name);
		for (size_t i = 0; i < n_typed && !ok; i++) {
			size_t tl = strlen(typed[i]);

			ok = !strcmp(typed[i], name) ||
			     (tl < base && !strncmp(typed[i], name, tl) &&
			      (!strcmp(name + tl, "_bucket") ||
			       !strcmp(name + tl, "_sum") ||
			       !strcmp(name + tl, "_count")));
		}
		if (!ok)
			fail_msg("sample without a TYPE: %s", line);
		n++;
	}
	free(copy);
	*n_out = n;
	return m;
}

/* The value of name{labels} (labels "" for none); NAN when absent. */
static double prom_get(const metric *m, size_t n, const char *name,
		       const char *labels)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(m[i].name, name) && !strcmp(m[i].labels, labels))
			return m[i].v;
	return NAN;
}

static metric *scrape(size_t *n)
{
	hresp r = http("GET", "/metrics", NULL, NULL, 0); /* no key needed */
	metric *m;

	assert_int_equal(r.code, 200);
	assert_non_null(strstr(r.head, "text/plain; version=0.0.4"));
	m = prom_parse(r.body, n);
	hresp_free(&r);
	return m;
}

static double zero_nan(double v)
{
	return isnan(v) ? 0 : v;
}

static void test_metrics(void **state)
{
	static const char *ok200 =
		"endpoint=\"/v1/chat/completions\",code=\"200\"";
	size_t n0, n1;
	metric *a = scrape(&n0), *b;
	hresp r;

	(void)state;
	assert_int_equal(prom_get(a, n0, "quorum_workers_alive", ""), 2);
	assert_int_equal(prom_get(a, n0, "quorum_coordinator_up", ""), 1);
	assert_false(isnan(prom_get(a, n0, "quorum_worker_kv_blocks_free",
				    "worker=\"w0\"")));
	r = post("/v1/chat/completions", "{\"messages\":[{\"role\":\"user\","
		 "\"content\":\"Metrics?\"}],\"n\":3,\"max_tokens\":5}");
	assert_int_equal(r.code, 200);
	hresp_free(&r);
	b = scrape(&n1);
	assert_int_equal(zero_nan(prom_get(b, n1, "quorum_http_requests_total",
					   ok200)),
			 zero_nan(prom_get(a, n0, "quorum_http_requests_total",
					   ok200)) + 1);
	assert_int_equal(prom_get(b, n1, "quorum_samples_total", ""),
			 prom_get(a, n0, "quorum_samples_total", "") + 3);
	assert_true(prom_get(b, n1, "quorum_tokens_generated_total", "") >=
		    prom_get(a, n0, "quorum_tokens_generated_total", "") + 3);
	assert_true(prom_get(b, n1, "quorum_tokens_saved_total", "") >
		    prom_get(a, n0, "quorum_tokens_saved_total", ""));
	assert_int_equal(prom_get(b, n1, "quorum_request_duration_seconds_count",
				  ""),
			 prom_get(a, n0, "quorum_request_duration_seconds_count",
				  "") + 1);
	assert_int_equal(prom_get(b, n1, "quorum_request_duration_seconds_bucket",
				  "le=\"+Inf\""),
			 prom_get(b, n1, "quorum_request_duration_seconds_count",
				  ""));
	assert_true(prom_get(b, n1, "quorum_prefix_cache_hits_total", "") +
		    prom_get(b, n1, "quorum_prefix_cache_misses_total", "") >
		    prom_get(a, n0, "quorum_prefix_cache_hits_total", "") +
		    prom_get(a, n0, "quorum_prefix_cache_misses_total", ""));
	free(a);
	free(b);
}

static void test_health_models(void **state)
{
	hresp r = http("GET", "/health", NULL, NULL, 0);
	json_t *o = body_json(&r), *d;
	char fp[32];

	(void)state;
	assert_int_equal(r.code, 200);
	assert_string_equal(json_string_value(json_object_get(o, "status")),
			    "ok");
	assert_int_equal(json_integer_value(json_object_get(o, "workers")), 2);
	json_decref(o);
	hresp_free(&r);
	r = get("/v1/models");
	assert_int_equal(r.code, 200);
	o = body_json(&r);
	d = json_array_get(json_object_get(o, "data"), 0);
	assert_string_equal(json_string_value(json_object_get(d, "object")),
			    "model");
	assert_non_null(strstr(model_path, json_string_value(json_object_get(
		d, "id"))));
	snprintf(fp, sizeof(fp), "%s", json_string_value(json_object_get(
		json_object_get(d, "quorum"), "fingerprint")));
	assert_int_equal(strlen(fp), 16);
	json_decref(o);
	hresp_free(&r);
}

/* ---- bad input ---------------------------------------------------------- */

static const struct bad_case {
	const char *name, *path, *body;
	int code;
	const char *param;   /* NULL: null */
	const char *msg;     /* in the message */
} bad_cases[] = {
	{"malformed", "/v1/chat/completions", "{\"messages\": [", 400, NULL,
	 "not valid JSON"},
	{"not_object", "/v1/completions", "[1,2]", 400, NULL,
	 "must be a JSON object"},
	{"no_messages", "/v1/chat/completions", "{}", 400, "messages",
	 "'messages' is required"},
	/* whitespace alone is no question (it had been answered) */
	{"blank_question", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"  \\n \"}]}", 400,
	 "messages", "the question is empty (or only whitespace)"},
	{"blank_prompt", "/v1/completions", "{\"prompt\":\"\\t \"}", 400,
	 "prompt", "the question is empty (or only whitespace)"},
	{"unknown_role", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}", 400,
	 "messages", "unknown role 'wizard'"},
	{"content_type", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":7}]}", 400, "messages",
	 "content must be a string"},
	/* a conversation: user and assistant alternate from a user
	 * message to the last one (test_conversation takes one) */
	{"turn_assistant_first", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\"},"
	 "{\"role\":\"user\",\"content\":\"b\"}]}", 400, "messages",
	 "messages[0]: an assistant message first where a user message "
	 "belongs"},
	{"turn_two_users", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
	 "{\"role\":\"user\",\"content\":\"b\"}]}", 400, "messages",
	 "messages[1]: two user messages in a row"},
	{"turn_two_assistants", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
	 "{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":"
	 "\"assistant\",\"content\":\"c\"},{\"role\":\"user\",\"content\":"
	 "\"d\"}]}", 400, "messages", "messages[2]: two assistant messages "
	 "in a row"},
	{"turn_empty_answer", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
	 "{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"user\","
	 "\"content\":\"c\"}]}", 400, "messages",
	 "messages[1]: an empty assistant message"},
	{"turn_system_late", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
	 "{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":"
	 "\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":"
	 "\"c\"}]}", 400, "messages", "messages[2]: a system message after "
	 "the conversation began"},
	{"turn_reasoning_not_string", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
	 "{\"role\":\"assistant\",\"content\":\"b\",\"reasoning_content\""
	 ":7},{\"role\":\"user\",\"content\":\"c\"}]}", 400,
	 "messages[1].reasoning_content",
	 "messages[1].reasoning_content must be a string"},
	{"turn_reasoning_on_user", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"a\","
	 "\"reasoning_content\":\"r\"}]}", 400,
	 "messages[0].reasoning_content",
	 "messages[0].reasoning_content: not a field of a user message"},
	{"turn_tool_role", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
	 "{\"role\":\"tool\",\"content\":\"4\"}]}", 400, "messages",
	 "messages[1]: role 'tool': quorum calls no tools"},
	/* the sampling settings: sc/params' messages (tests/test_params.c
	 * holds the table over every entry point) */
	{"n_zero", "/v1/completions", "{\"prompt\":\"q\",\"n\":0}", 400, "n",
	 "n = 0: must be an integer in 1..65536"},
	{"n_over", "/v1/completions", "{\"prompt\":\"q\",\"n\":17}", 400, "n",
	 "n = 17: over this cluster's limits.max_n (16)"},
	{"n_string", "/v1/completions", "{\"prompt\":\"q\",\"n\":\"4\"}", 400,
	 "n", "n = \"4\": must be an integer in 1..65536"},
	{"max_tokens_negative", "/v1/completions",
	 "{\"prompt\":\"q\",\"max_tokens\":-5}", 400, "max_tokens",
	 "max_tokens = -5: must be an integer in 1..1048576"},
	{"temperature_negative", "/v1/completions",
	 "{\"prompt\":\"q\",\"temperature\":-1}", 400, "temperature",
	 "temperature = -1: must be a finite number >= 0"},
	/* the model's context (4096 tokens), said with the request's
	 * field: the setting alone, then with the prompt (the prompt's
	 * param, as OpenAI's context_length_exceeded) */
	{"max_tokens_over_context", "/v1/completions",
	 "{\"prompt\":\"q\",\"max_tokens\":5000}", 400, "max_tokens",
	 "max_tokens = 5000: over the model's context (4096 tokens)"},
	{"prompt_and_max_tokens_over_context", "/v1/completions",
	 "{\"prompt\":\"q\",\"max_completion_tokens\":4095}", 400, "prompt",
	 "max_completion_tokens = 4095: with the prompt's "},
	{"top_p_negative", "/v1/completions",
	 "{\"prompt\":\"q\",\"top_p\":-0.1}", 400, "top_p",
	 "top_p = -0.1: must be a number in [0, 1]"},
	/* the HTTP API's range (OpenAI's); a negative seed is taken */
	{"temperature_over_2", "/v1/completions",
	 "{\"prompt\":\"q\",\"temperature\":2.5}", 400, "temperature",
	 "temperature = 2.5: must be a number in [0, 2]"},
	{"n_over_samples", "/v1/completions",
	 "{\"prompt\":\"q\",\"n\":4,\"samples\":2}", 400, "n",
	 "n = 4: must be at most the samples (2)"},
	{"samples_zero", "/v1/completions",
	 "{\"prompt\":\"q\",\"quorum\":{\"samples\":0}}", 400, "samples",
	 "samples = 0: must be an integer in 1..65536"},
	{"stream_options_alone", "/v1/completions",
	 "{\"prompt\":\"q\",\"stream_options\":{\"include_usage\":true}}",
	 400, "stream_options", "only allowed with 'stream': true"},
	{"model_unknown", "/v1/completions",
	 "{\"prompt\":\"q\",\"model\":\"gpt-4o\"}", 404, "model",
	 "The model 'gpt-4o' does not exist"},
	{"json_deep", "/v1/completions",
	 "{\"prompt\":\"q\",\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]"
	 "]]]]]]]]]]]]]]]]]]]]}", 400, NULL, "deeper than http.max_json_depth"},
	{"stop_too_many", "/v1/completions",
	 "{\"prompt\":\"q\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400,
	 "stop", "stop: must be at most 4 strings of 1..64 bytes "
	 "without NUL"},
	{"stop_too_long", "/v1/completions",
	 "{\"prompt\":\"q\",\"stop\":[\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"]}", 400,
	 "stop", "stop: must be at most 4 strings of 1..64 bytes "
	 "without NUL"},
	{"logprobs_bool", "/v1/completions",
	 "{\"prompt\":\"q\",\"logprobs\":true}", 400, "logprobs",
	 "logprobs = true: must be an integer in 0..5"},
	{"logprobs_over_5", "/v1/completions",
	 "{\"prompt\":\"q\",\"logprobs\":6}", 400, "logprobs",
	 "logprobs = 6: must be an integer in 0..5"},
	{"top_logprobs_over_20", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
	 "\"logprobs\":true,\"top_logprobs\":21}", 400, "top_logprobs",
	 "top_logprobs = 21: must be an integer in 0..20"},
	{"top_logprobs_alone", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
	 "\"top_logprobs\":3}", 400, "top_logprobs",
	 "'top_logprobs' needs 'logprobs': true"},
	{"two_prompts", "/v1/completions", "{\"prompt\":[\"a\",\"b\"]}", 400,
	 "prompt", "one question per request"},
	{"empty_prompt", "/v1/completions", "{\"prompt\":\"\"}", 400,
	 "prompt", "empty"},
	{"prompt_too_long", "/v1/completions", NULL /* built below */, 400,
	 "prompt", "max_prompt_tokens"},
	{"think_type", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
	 "\"chat_template_kwargs\":{\"enable_thinking\":1}}", 400, "think",
	 "must be a boolean"},
	{"effort_name", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
	 "\"reasoning_effort\":\"extreme\"}", 400, "reasoning_effort",
	 "must be one of low, medium, high"},
	{"bad_reasoning_format", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
	 "\"reasoning_format\":\"raw\"}", 400, "reasoning_format",
	 "must be one of auto, deepseek, none"},
	{"effort_type", "/v1/completions",
	 "{\"prompt\":\"q\",\"reasoning_effort\":2}", 400,
	 "reasoning_effort", "must be one of low, medium, high"},
	{"stream_type", "/v1/completions",
	 "{\"prompt\":\"q\",\"stream\":\"yes\"}", 400, "stream",
	 "'stream' must be a boolean"},
	/* /v1/responses: its own fields, and chat's checks said in its
	 * words and places (responses.c) */
	{"resp_no_input", "/v1/responses", "{}", 400, "input",
	 "'input' is required"},
	{"resp_chat_field", "/v1/responses",
	 "{\"input\":\"q\",\"messages\":[]}", 400, "messages",
	 "unknown field 'messages' for /v1/responses"},
	{"resp_n", "/v1/responses", "{\"input\":\"q\",\"n\":2}", 400, "n",
	 "unknown field 'n' for /v1/responses"},
	{"resp_previous", "/v1/responses",
	 "{\"input\":\"q\",\"previous_response_id\":\"resp_1\"}", 400,
	 "previous_response_id", "it keeps no responses"},
	{"resp_truncation", "/v1/responses",
	 "{\"input\":\"q\",\"truncation\":\"auto\"}", 400, "truncation",
	 "only \"disabled\""},
	{"resp_max_output_tokens", "/v1/responses",
	 "{\"input\":\"q\",\"max_output_tokens\":0}", 400,
	 "max_output_tokens", "max_output_tokens = 0: must be an integer in"},
	{"resp_over_context", "/v1/responses",
	 "{\"input\":\"q\",\"max_output_tokens\":5000}", 400,
	 "max_output_tokens", "max_output_tokens = 5000: over the model's "
	 "context"},
	{"resp_two_users", "/v1/responses",
	 "{\"input\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":"
	 "\"user\",\"content\":\"b\"}]}", 400, "input",
	 "input[1]: two user messages in a row"},
	{"resp_first_assistant", "/v1/responses",
	 "{\"instructions\":\"s\",\"input\":[{\"type\":\"reasoning\","
	 "\"id\":\"rs_1\",\"summary\":[]},{\"role\":\"assistant\","
	 "\"content\":\"a\"},{\"role\":\"user\",\"content\":\"q\"}]}",
	 400, "input", "input[1]: an assistant message first"},
	{"resp_function_call", "/v1/responses",
	 "{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}",
	 400, "input[0]", "items of type 'function_call' are not supported"},
	{"resp_image", "/v1/responses",
	 "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
	 "\"input_image\",\"image_url\":\"x\"}]}]}", 400,
	 "input[0].content[0]", "its models read text"},
	{"resp_item_field", "/v1/responses",
	 "{\"input\":[{\"role\":\"user\",\"content\":\"q\",\"foo\":1}]}",
	 400, "input[0].foo", "input[0].foo: unknown field of a message"},
	{"resp_schema", "/v1/responses",
	 "{\"input\":\"q\",\"text\":{\"format\":{\"type\":\"json_schema\","
	 "\"name\":\"x\",\"schema\":{\"type\":\"frob\"}}}}", 400,
	 "text.format", "not a JSON schema type"},
	{"resp_format_type", "/v1/responses",
	 "{\"input\":\"q\",\"text\":{\"format\":{\"type\":\"xml\"}}}",
	 400, "text.format.type", "must be one of text, json_object, "
	 "json_schema"},
	{"resp_effort", "/v1/responses",
	 "{\"input\":\"q\",\"reasoning\":{\"effort\":\"minimal\"}}", 400,
	 "reasoning.effort", "'reasoning.effort' must be one of low, "
	 "medium, high"},
	{"resp_include", "/v1/responses",
	 "{\"input\":\"q\",\"include\":[\"file_search_call.results\"]}",
	 400, "include[0]", "include[0] is not supported"},
	{"resp_stream_samples", "/v1/responses",
	 "{\"input\":\"q\",\"quorum\":{\"stream_samples\":true}}", 400,
	 "quorum.stream_samples", "one output is the voted chain"},
};

/* The fields inside messages[] (openai.c's msg_rules[], docs/http.md's
 * table): each refused one a 400 naming it by its place. */
#define U "{\"role\":\"user\",\"content\":\"q\"}"
static const struct bad_case msg_cases[] = {
	{"msg_unknown", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\",\"foo\":1}]}",
	 400, "messages[0].foo", "messages[0].foo: unknown field of a message"},
	{"msg_tool_calls", "/v1/chat/completions",
	 "{\"messages\":[" U ",{\"role\":\"assistant\",\"content\":null,"
	 "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
	 "{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}", 400,
	 "messages[1].tool_calls", "messages[1].tool_calls: not supported by "
	 "quorum (it calls no tools)"},
	{"msg_tool_call_id", "/v1/chat/completions",
	 "{\"messages\":[" U ",{\"role\":\"tool\",\"content\":\"4\","
	 "\"tool_call_id\":\"c1\"}]}", 400, "messages[1].tool_call_id",
	 "not supported by quorum (it calls no tools)"},
	{"msg_function_call", "/v1/chat/completions",
	 "{\"messages\":[" U ",{\"role\":\"assistant\",\"function_call\":"
	 "{\"name\":\"f\",\"arguments\":\"{}\"}}]}", 400,
	 "messages[1].function_call", "it calls no functions"},
	{"msg_refusal", "/v1/chat/completions",
	 "{\"messages\":[" U ",{\"role\":\"assistant\",\"refusal\":\"no\"}]}",
	 400, "messages[1].refusal", "no place for a refusal"},
	{"msg_audio", "/v1/chat/completions",
	 "{\"messages\":[" U ",{\"role\":\"assistant\",\"audio\":"
	 "{\"id\":\"a1\"}}]}", 400, "messages[1].audio",
	 "it reads and writes text"},
	{"msg_field_of_other_role", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\","
	 "\"tool_call_id\":\"c1\"}]}", 400, "messages[0].tool_call_id",
	 "messages[0].tool_call_id: not a field of a user message"},
	{"msg_name_type", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\",\"name\":5}]}",
	 400, "messages[0].name", "messages[0].name must be a string"},
	{"msg_assistant_turn", "/v1/chat/completions",
	 "{\"messages\":[" U ",{\"role\":\"assistant\",\"content\":\"b\","
	 "\"name\":\"bot\"}]}", 400, "messages", "the last message must be "
	 "the user's"},
	{"part_image", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
	 "\"text\":\"q\"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
	 "\"http://x/a.png\"}}]}]}", 400, "messages[0].content[1]",
	 "messages[0].content[1]: 'image_url' parts are not supported by "
	 "quorum (its models read text)"},
	{"part_input_audio", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
	 "\"input_audio\",\"input_audio\":{\"data\":\"AA==\",\"format\":"
	 "\"wav\"}}]}]}", 400, "messages[0].content[0]",
	 "'input_audio' parts are not supported"},
	{"part_file", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\","
	 "\"file\":{\"file_id\":\"f1\"}}]}]}", 400, "messages[0].content[0]",
	 "'file' parts are not supported"},
	{"part_refusal", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
	 "\"refusal\",\"refusal\":\"no\"}]}]}", 400, "messages[0].content[0]",
	 "'refusal' parts are not supported"},
	{"part_unknown_type", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
	 "\"video\"}]}]}", 400, "messages[0].content[0]",
	 "unknown part type 'video'"},
	{"part_unknown_field", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\","
	 "\"text\":\"s\",\"cache_control\":{}}]}," U "]}", 400,
	 "messages[0].content[0].cache_control",
	 "messages[0].content[0].cache_control: unknown field of a text part"},
	{"part_text_type", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
	 "\"text\":5}]}]}", 400, "messages[0].content[0].text",
	 "messages[0].content[0].text must be a string"},
	{"part_no_text", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\""
	 "}]}]}", 400, "messages[0].content[0].text", "must be a string"},
	{"part_not_object", "/v1/chat/completions",
	 "{\"messages\":[{\"role\":\"user\",\"content\":[\"q\"]}]}", 400,
	 "messages[0].content[0]", "must be a content part"},
};
#undef U

static void check_error(const hresp *r, int code, const char *param,
			const char *msg, const char *name)
{
	json_t *o, *e;

	if (r->code != code)
		fail_msg("%s: HTTP %d (want %d): %s", name, r->code, code,
			 r->body);
	o = body_json(r);
	e = json_object_get(o, "error");
	assert_true(json_is_object(e));
	assert_true(json_is_string(json_object_get(e, "type")));
	if (!strstr(json_string_value(json_object_get(e, "message")), msg))
		fail_msg("%s: message '%s' lacks '%s'", name,
			 json_string_value(json_object_get(e, "message")), msg);
	if (param)
		assert_string_equal(json_string_value(json_object_get(e,
				    "param")), param);
	else
		assert_true(json_is_null(json_object_get(e, "param")));
	json_decref(o);
}

static void test_bad_input(void **state)
{
	char *longq = malloc(4000);
	char *body;
	hresp r;

	(void)state;
	/* 200 prompt tokens is the test cluster's limit */
	for (int i = 0; i < 3990; i += 5)
		memcpy(longq + i, "word ", 5);
	longq[3990] = '\0';
	assert_true(asprintf(&body, "{\"prompt\":\"%s\"}", longq) > 0);
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];
		const char *b = c->body ? c->body : body;

		r = post(c->path, b);
		check_error(&r, c->code, c->param, c->msg, c->name);
		hresp_free(&r);
	}
	for (size_t i = 0; i < sizeof(msg_cases) / sizeof(*msg_cases); i++) {
		const struct bad_case *c = &msg_cases[i];

		r = post(c->path, c->body);
		check_error(&r, c->code, c->param, c->msg, c->name);
		hresp_free(&r);
	}
	/* honoured inside messages[]: text parts read as one text (the
	 * reply's bytes are those of the string), a participant's name
	 * ignored, a refused field null (not given) taken */
	{
		static const char *const b[] = {
			"{\"messages\":[{\"role\":\"system\",\"content\":"
			"\"Be brief.\"},{\"role\":\"user\",\"content\":"
			"\"Name a prime.\"}],\"n\":2,\"seed\":3,\"max_tokens\":8}",
			"{\"messages\":[{\"role\":\"system\",\"name\":\"rules\","
			"\"content\":[{\"type\":\"text\",\"text\":\"Be \"},"
			"{\"type\":\"text\",\"text\":\"brief.\"}]},{\"role\":"
			"\"user\",\"name\":\"ann\",\"tool_calls\":null,"
			"\"content\":[{\"type\":\"text\",\"text\":\"Name a "
			"prime.\"}]}],\"n\":2,\"seed\":3,\"max_tokens\":8}",
		};
		json_t *o[2];

		for (int k = 0; k < 2; k++) {
			r = post("/v1/chat/completions", b[k]);
			assert_int_equal(r.code, 200);
			o[k] = body_json(&r);
			hresp_free(&r);
		}
		assert_json_eq(json_object_get(o[0], "choices"),
			       json_object_get(o[1], "choices"),
			       "parts and names");
		json_decref(o[0]);
		json_decref(o[1]);
	}
	free(body);
	free(longq);
	/* over http.max_body_bytes (1 MiB): refused from the headers,
	 * before any of the body is sent */
	{
		char head[256];
		int s = connect_port(gw_port), n;

		assert_true(s >= 0);
		n = snprintf(head, sizeof(head), "POST /v1/completions HTTP/1.0"
			     "\r\nAuthorization: Bearer %s\r\nContent-Length: "
			     "200000000\r\n\r\n", KEY);
		assert_int_equal(send_all(s, head, (size_t)n), 0);
		read_resp(s, &r);
		close(s);
		check_error(&r, 413, NULL, "max_body_bytes", "huge_body");
		hresp_free(&r);
	}
	/* no silent drops: fields that cannot change the output are
	 * ignored (user, metadata, store), a no-op value is taken, and an
	 * unknown field, one of the other endpoint or one quorum does not
	 * do is a 400 naming it */
	r = post("/v1/completions", "{\"prompt\":\"Ignore?\",\"max_tokens\":2,"
		 "\"n\":1,\"user\":\"me\",\"metadata\":{\"a\":\"b\"},"
		 "\"store\":false,\"echo\":false,\"best_of\":1}");
	assert_int_equal(r.code, 200);
	hresp_free(&r);
	r = post("/v1/completions", "{\"prompt\":\"Ignore?\",\"max_tokens\":2,"
		 "\"n\":1,\"frobnicate\":{\"x\":[1]}}");
	check_error(&r, 400, "frobnicate", "unknown field 'frobnicate'",
		    "unknown_field");
	hresp_free(&r);
	r = post("/v1/completions", "{\"prompt\":\"Echo?\",\"echo\":true}");
	check_error(&r, 400, "echo", "'echo' is not supported by quorum",
		    "echo_true");
	hresp_free(&r);
	r = post("/v1/completions", "{\"prompt\":\"x\",\"messages\":[]}");
	check_error(&r, 400, "messages", "unknown field 'messages' for "
		    "/v1/completions", "other_endpoint");
	hresp_free(&r);
	r = post("/v1/chat/completions", "{\"messages\":[{\"role\":\"user\","
		 "\"content\":\"x\"}],\"audio\":{\"voice\":\"alloy\"}}");
	check_error(&r, 400, "audio", "'audio' is not supported", "audio");
	hresp_free(&r);
	r = http("GET", "/v1/chat/completions", KEY, NULL, 0);
	check_error(&r, 405, NULL, "needs POST", "get_on_post");
	/* RFC 9110: a 405 says which method the URL takes */
	if (!strcasestr(r.head, "\r\nAllow: POST\r\n"))
		fail_msg("405 without Allow: POST: %s", r.head);
	hresp_free(&r);
	r = get("/v1/nothing");
	check_error(&r, 404, NULL, "unknown URL", "not_found");
	hresp_free(&r);
	/* the body's headers: JSON only (no cross-site simple request: a
	 * form or text/plain), one Content-Length */
	{
		static const struct { const char *name, *head; int code;
				      const char *msg, *ecode; } raw[] = {
			{"text_plain", "Content-Type: text/plain\r\n"
			 "Content-Length: 13\r\n", 415,
			 "Content-Type: application/json",
			 "unsupported_media_type"},
			{"form", "Content-Type: application/x-www-form-"
			 "urlencoded\r\nContent-Length: 13\r\n", 415,
			 "Content-Type: application/json",
			 "unsupported_media_type"},
			{"no_type", "Content-Length: 13\r\n", 415,
			 "Content-Type: application/json",
			 "unsupported_media_type"},
			{"two_lengths", "Content-Type: application/json\r\n"
			 "Content-Length: 13\r\nContent-Length: 14\r\n",
			 400, "conflicting Content-Length",
			 "invalid_request_error"},
		};

		for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
			char head[512];
			int s = connect_port(gw_port), n;
			json_t *o;

			assert_true(s >= 0);
			n = snprintf(head, sizeof(head), "POST /v1/completions "
				     "HTTP/1.0\r\nAuthorization: Bearer %s\r\n"
				     "%s\r\n{\"prompt\":\"q\"}", KEY,
				     raw[i].head);
			assert_int_equal(send_all(s, head, (size_t)n), 0);
			shutdown(s, SHUT_WR);
			read_resp(s, &r);
			close(s);
			check_error(&r, raw[i].code, NULL, raw[i].msg,
				    raw[i].name);
			o = body_json(&r);
			assert_string_equal(json_string_value(json_object_get(
				json_object_get(o, "error"), "code")),
				raw[i].ecode);
			assert_non_null(strstr(r.head, "x-request-id: req_"));
			json_decref(o);
			hresp_free(&r);
		}
	}
	/* still serving */
	r = http("GET", "/health", NULL, NULL, 0);
	assert_int_equal(r.code, 200);
	hresp_free(&r);
}

static void test_auth(void **state)
{
	const char *b = "{\"prompt\":\"Auth?\",\"max_tokens\":2,\"n\":1}";
	hresp r;

	(void)state;
	r = http("POST", "/v1/completions", NULL, b, strlen(b));
	check_error(&r, 401, NULL, "API key", "no_key");
	assert_non_null(strstr(r.head, "WWW-Authenticate: Bearer"));
	hresp_free(&r);
	r = http("POST", "/v1/completions", "sk-test-012345678", b, strlen(b));
	check_error(&r, 401, NULL, "API key", "wrong_key_prefix");
	hresp_free(&r);
	r = http("POST", "/v1/completions", "sk-test-01234567890", b, strlen(b));
	check_error(&r, 401, NULL, "API key", "wrong_key_longer");
	hresp_free(&r);
	r = http("GET", "/v1/models", NULL, NULL, 0);
	check_error(&r, 401, NULL, "API key", "models_no_key");
	hresp_free(&r);
	r = http("POST", "/v1/completions", "sk-other-key", b, strlen(b));
	assert_int_equal(r.code, 200);
	hresp_free(&r);
}

/* A client that leaves mid-stream: its request is cancelled at the
 * coordinator (failed there, never served). */
static void test_cancel_on_disconnect(void **state)
{
	const char *b = "{\"prompt\":\"Go on forever.\",\"n\":2,\"stream\":true,"
			"\"max_tokens\":1500,\"ignore_eos\":true}";
	char head[512], buf[4096];
	void *zs = cu_client(&cl);
	Quorum__ClientReply *st = cu_status(zs);
	uint64_t served0, failed0;
	int64_t end = wire_now_ms() + CU_WAIT_MS * 4;
	int s, n, got = 0;

	(void)state;
	assert_non_null(st);
	served0 = st->cluster->requests_served;
	failed0 = st->cluster->requests_failed;
	quorum__client_reply__free_unpacked(st, NULL);
	s = connect_port(gw_port);
	assert_true(s >= 0);
	n = snprintf(head, sizeof(head), "POST /v1/completions HTTP/1.0\r\n"
		     "Authorization: Bearer %s\r\nContent-Type: application/json"
		     "\r\nContent-Length: %zu\r\n\r\n"
		     "%s", KEY, strlen(b), b);
	assert_int_equal(send_all(s, head, (size_t)n), 0);
	/* the headers (then keep-alive comments) come once it is accepted */
	while (!strstr(buf, "\r\n\r\n") && got < (int)sizeof(buf) - 1) {
		ssize_t k = recv(s, buf + got, sizeof(buf) - 1 - (size_t)got, 0);

		assert_true(k > 0);
		got += (int)k;
		buf[got] = '\0';
	}
	assert_non_null(strstr(buf, "200 OK"));
	close(s);
	for (;;) {
		st = cu_status(zs);
		if (st && st->cluster->requests_failed > failed0)
			break;
		if (st && st->cluster->requests_served != served0)
			fail_msg("served %llu -> %llu (failed %llu -> %llu)",
				 (unsigned long long)served0,
				 (unsigned long long)st->cluster->requests_served,
				 (unsigned long long)failed0,
				 (unsigned long long)st->cluster->requests_failed);
		if (st)
			quorum__client_reply__free_unpacked(st, NULL);
		if (wire_now_ms() > end)
			fail_msg("the request was not cancelled");
		usleep(50000);
	}
	assert_int_equal(st->cluster->requests_served, served0);
	assert_int_equal(st->cluster->in_flight, 0);
	quorum__client_reply__free_unpacked(st, NULL);
	zmq_close(zs);
}

/* ---- load --------------------------------------------------------------- */

static int load_codes[LOAD_CLIENTS][LOAD_REQUESTS];
static int load_ids_ok[LOAD_CLIENTS][LOAD_REQUESTS];

static int load_requests(void)
{
	return tu_quick() ? 2 : LOAD_REQUESTS;
}

static void *load_client(void *arg)
{
	int c = (int)(intptr_t)arg;

	for (int i = 0; i < load_requests(); i++) {
		char body[256];
		hresp r;

		snprintf(body, sizeof(body), "{\"prompt\":\"Load %d.\",\"n\":2,"
			 "\"seed\":%d,\"max_tokens\":3}", i, c);
		r = http("POST", "/v1/completions", KEY, body, strlen(body));
		load_codes[c][i] = r.code;
		/* exactly one response: one JSON object, nothing after it */
		if (r.code == 200) {
			json_error_t e;
			json_t *o = json_loadb(r.body, r.blen, 0, &e);

			load_ids_ok[c][i] = o && json_array_size(
				json_object_get(o, "choices")) == 2;
			json_decref(o);
		}
		hresp_free(&r);
	}
	return NULL;
}

static int open_fds(pid_t pid)
{
	char p[64];
	DIR *d;
	struct dirent *de;
	int n = 0;

	snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
	if (!(d = opendir(p)))
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static void test_load(void **state)
{
	pthread_t th[LOAD_CLIENTS];
	int fds0 = open_fds(gw_pid), fds1;
	int64_t end;
	size_t nm;
	metric *m;

	(void)state;
	assert_true(fds0 > 0);
	for (int c = 0; c < LOAD_CLIENTS; c++)
		assert_int_equal(pthread_create(&th[c], NULL, load_client,
						(void *)(intptr_t)c), 0);
	for (int c = 0; c < LOAD_CLIENTS; c++)
		pthread_join(th[c], NULL);
	for (int c = 0; c < LOAD_CLIENTS; c++)
		for (int i = 0; i < load_requests(); i++) {
			if (load_codes[c][i] != 200)
				fail_msg("client %d request %d: HTTP %d", c, i,
					 load_codes[c][i]);
			assert_true(load_ids_ok[c][i]);
		}
	/* every connection closed: the gateway's descriptors come back to
	 * where they were (its threads close them as they finish) */
	end = wire_now_ms() + CU_WAIT_MS;
	while ((fds1 = open_fds(gw_pid)) > fds0 && wire_now_ms() < end)
		usleep(20000);
	/* (fewer is fine: a connection of an earlier case may have been
	 * open at the first count) */
	if (fds1 > fds0)
		fail_msg("%d descriptors open after the load, %d before",
			 fds1, fds0);
	m = scrape(&nm);
	assert_int_equal(prom_get(m, nm, "quorum_http_in_flight", ""), 0);
	free(m);
}

/* The standard-library Python example (clients/python/http_example.py),
 * plain and streamed: the same texts (repr), the same vote line. Seed
 * 14: choice 2 runs to --max-tokens on the test model. */
static void test_python_example(void **state)
{
	char cmd[PATH_MAX * 3], out[2][PATH_MAX + 32];
	char *text[2];

	(void)state;
	for (int k = 0; k < 2; k++) {
		FILE *f;
		long len;

		snprintf(out[k], sizeof(out[k]), "%s/py-%d.out", cu_tmpdir, k);
		snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/clients/python/"
			 "http_example.py --base-url http://127.0.0.1:%d/v1 "
			 "--key %s -n 3 --seed 14 --max-tokens 12 %s "
			 "'What is 3*4?' > %s", tu_root(), gw_port, KEY,
			 k ? "--stream" : "", out[k]);
		assert_int_equal(system(cmd), 0);
		f = fopen(out[k], "r");
		assert_non_null(f);
		fseek(f, 0, SEEK_END);
		len = ftell(f);
		fseek(f, 0, SEEK_SET);
		text[k] = calloc(1, (size_t)len + 1);
		assert_int_equal(fread(text[k], 1, (size_t)len, f), (size_t)len);
		fclose(f);
		unlink(out[k]);
		assert_non_null(strstr(text[k], "answer: "));
		assert_non_null(strstr(text[k], "--- choice 2 (length): "));
	}
	assert_string_equal(text[0], text[1]);
	free(text[0]);
	free(text[1]);
	/* a refused request: its error line and exit status 1 */
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/clients/python/"
		 "http_example.py --base-url http://127.0.0.1:%d/v1 --key bad "
		 "'x' 2>&1 | grep -q 'HTTP 401 invalid_api_key'", tu_root(),
		 gw_port);
	assert_int_equal(system(cmd), 0);
}

/* ---- abuse ------------------------------------------------------------- */

/* A process's /proc status field in kB (VmRSS, VmHWM), -1 if unknown. */
static long proc_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)) &&
		    line[strlen(field)] == ':')
			v = strtol(line + strlen(field) + 1, NULL, 10);
	fclose(f);
	return v;
}

static volatile int slow_stop;

/* Keeps the slow connections trickling: one header line each every
 * 500 ms (never the blank line that ends the headers). */
static void *slow_trickle(void *arg)
{
	int *socks = arg;

	while (!slow_stop) {
		for (int i = 0; i < SLOW_CONNS; i++)
			if (socks[i] >= 0)
				send(socks[i], "X-Slow: 1\r\n", 11,
				     MSG_NOSIGNAL | MSG_DONTWAIT);
		usleep(500000);
	}
	return NULL;
}

static pid_t spawn_gateway(const char *config, const char *endpoint,
			   const char *logname, int *port);
static void stop_gateway(pid_t pid);

/* SLOW_CONNS connections from another address (127.0.0.2) to the
 * gateway on port, each sending a request's first header lines; socks[i]
 * -1 where the connection could not be made. The count made. */
static int slow_open(int port, int *socks)
{
	static const char slow_head[] = "POST /v1/chat/completions HTTP/1.1"
					"\r\nHost: x\r\n";
	int open_n = 0;

	for (int i = 0; i < SLOW_CONNS; i++) {
		struct sockaddr_in a = {.sin_family = AF_INET}, me = a;
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		me.sin_addr.s_addr = htonl(0x7f000002);
		a.sin_port = htons((uint16_t)port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		socks[i] = -1;
		if (s < 0)
			continue;
		if (bind(s, (struct sockaddr *)&me, sizeof(me)) ||
		    connect(s, (struct sockaddr *)&a, sizeof(a)) ||
		    send(s, slow_head, strlen(slow_head), MSG_NOSIGNAL) !=
			    (ssize_t)strlen(slow_head)) {
			close(s);
			continue;
		}
		socks[i] = s;
		open_n++;
	}
	return open_n;
}

/* Closes (and sets to -1) every one of socks the gateway has closed, a
 * reply (e.g. a 4xx) read through to its end; the count closed. */
static int slow_reap(int *socks)
{
	int closed = 0;

	for (int i = 0; i < SLOW_CONNS; i++) {
		char c[512];
		ssize_t k;

		if (socks[i] < 0) {
			closed++;
			continue;
		}
		while ((k = recv(socks[i], c, sizeof(c), MSG_DONTWAIT)) > 0)
			;
		if (k == 0 ||
		    (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			close(socks[i]);
			socks[i] = -1;
			closed++;
		}
	}
	return closed;
}

/* A copy of the cluster's configuration at path with the gateway's
 * header deadline set to ms; 0 once written. */
static int config_header_deadline(const char *path, int ms)
{
	char *c = tu_slurp(cl.config, NULL), *at;
	const char *key = "header_timeout_ms: ";
	FILE *f;
	int rc = -1;

	if (c && (at = strstr(c, key)) && (f = fopen(path, "w"))) {
		at += strlen(key);
		fprintf(f, "%.*s%d%s", (int)(at - c), c, ms,
			at + strspn(at, "0123456789"));
		rc = fclose(f) ? -1 : 0;
	}
	free(c);
	return rc;
}

/* SLOW_CONNS connections from another address (127.0.0.2) send their
 * headers one line every 500 ms, never the blank line that ends them.
 * - Beside them, good requests (from 127.0.0.1) are answered: shown on
 *   a second gateway whose header deadline is longer than any wait
 *   here, so the slow connections it holds are all still open when the
 *   good replies have come (a gateway that served them one at a time
 *   would never answer, and the hang guard would fail the case);
 * - every slow connection is closed: by the header deadline, never
 *   before it (those over http.max_connections_per_ip, whose 429 waits
 *   for their headers, too), or at once by libmicrohttpd's backstop
 *   above the caps (CONNS_BACKSTOP). */
static void test_slow_headers(void **state)
{
	char patient[PATH_MAX + 32];
	int socks[SLOW_CONNS], open_n, held = 0, saved = gw_port, port;
	pthread_t th;
	int64_t t0, end;
	pid_t pid;

	(void)state;
	/* a gateway that would wait for these headers for 10 minutes */
	snprintf(patient, sizeof(patient), "%s/patient.yaml", cu_tmpdir);
	assert_int_equal(config_header_deadline(patient, 600000), 0);
	pid = spawn_gateway(patient, NULL, "gateway-patient.log", &port);
	assert_true(pid > 0);
	open_n = slow_open(port, socks);
	assert_true(open_n > 0);
	slow_stop = 0;
	assert_int_equal(pthread_create(&th, NULL, slow_trickle, socks), 0);
	gw_port = port;
	for (int k = 0; k < 4; k++) {
		hresp r = post("/v1/completions", "{\"prompt\":\"Slow?\","
			       "\"n\":2,\"max_tokens\":3}");

		assert_int_equal(r.code, 200);
		hresp_free(&r);
	}
	gw_port = saved;
	held = SLOW_CONNS - slow_reap(socks);
	printf("  4 good requests answered while %d of %d slow connections "
	       "were held open\n", held, open_n);
	assert_true(held > 0);
	slow_stop = 1;
	pthread_join(th, NULL);
	for (int i = 0; i < SLOW_CONNS; i++)
		if (socks[i] >= 0)
			close(socks[i]);
	stop_gateway(pid);

	/* the test's gateway: its 3 s deadline closes them all */
	t0 = wire_now_ms();
	open_n = slow_open(gw_port, socks);
	assert_true(open_n > 0);
	slow_stop = 0;
	assert_int_equal(pthread_create(&th, NULL, slow_trickle, socks), 0);
	held = SLOW_CONNS - slow_reap(socks);
	for (end = wire_now_ms() + CU_WAIT_MS; /* a hang guard */
	     slow_reap(socks) < SLOW_CONNS && wire_now_ms() < end;)
		usleep(100000);
	slow_stop = 1;
	pthread_join(th, NULL);
	printf("  slow connections closed %lld ms after they began\n",
	       (long long)(wire_now_ms() - t0));
	for (int i = 0; i < SLOW_CONNS; i++)
		if (socks[i] >= 0)
			close(socks[i]);
	assert_int_equal(slow_reap(socks), SLOW_CONNS);
	assert_true(held > 0);
	assert_true(wire_now_ms() - t0 >= HEADER_TIMEOUT_MS - 100);
}

/* A body sent one byte every 200 ms: the connection is closed by the
 * body deadline, well before the body would be complete. */
static void test_slow_body(void **state)
{
	char head[512];
	int s = connect_port(gw_port), n, gone = 0;
	int64_t t0 = wire_now_ms(), end = t0 + CU_WAIT_MS; /* a hang guard */

	(void)state;
	assert_true(s >= 0);
	n = snprintf(head, sizeof(head), "POST /v1/completions HTTP/1.1\r\n"
		     "Host: x\r\nAuthorization: Bearer %s\r\nContent-Type: "
		     "application/json\r\nContent-Length: 1000\r\n\r\n{", KEY);
	assert_int_equal(send_all(s, head, (size_t)n), 0);
	while (!gone && wire_now_ms() < end) {
		char c[512];
		ssize_t k;

		if (send(s, " ", 1, MSG_NOSIGNAL) != 1)
			gone = 1;
		while ((k = recv(s, c, sizeof(c), MSG_DONTWAIT)) > 0)
			;
		if (k == 0 || (k < 0 && errno != EAGAIN &&
			       errno != EWOULDBLOCK))
			gone = 1;
		usleep(200000);
	}
	close(s);
	printf("  a slow body: closed after %lld ms\n",
	       (long long)(wire_now_ms() - t0));
	assert_true(gone);
	assert_true(wire_now_ms() - t0 >= BODY_TIMEOUT_MS - 100);
}

/* Waits until the gateway holds no connection but the scrape's own
 * (the slow clients of the cases before are closed by its deadlines,
 * later under a sanitizer): the next case's connections are then all
 * under http.max_connections_per_ip, not refused beside leftovers. */
static void wait_connections_closed(void)
{
	int64_t end = wire_now_ms() + CU_WAIT_MS;
	double open = NAN;

	while (wire_now_ms() < end) {
		size_t n;
		metric *m = scrape(&n);

		open = prom_get(m, n, "quorum_http_connections_open", "");
		free(m);
		if (open <= 1)
			return;
		usleep(100000);
	}
	fail_msg("the gateway still holds %.0f connections", open);
}

static size_t hostile_len;
static char *hostile;
static int hostile_code[HOSTILE_BODIES];

static void *hostile_client(void *arg)
{
	int i = (int)(intptr_t)arg;
	hresp r = http("POST", "/v1/chat/completions", KEY, hostile,
		       hostile_len);

	hostile_code[i] = r.code;
	hresp_free(&r);
	return NULL;
}

/* raw bytes sent as they are on one connection, its reply read until the
 * server closes it (or the hang guard) */
static hresp raw_http(const char *req)
{
	hresp r = {.code = -1};
	int s = connect_port(gw_port);

	if (s < 0) {
		r.head = strdup("");
		r.body = strdup("");
		return r;
	}
	send_all(s, req, strlen(req));
	read_resp(s, &r);
	close(s);
	return r;
}

/* POST /v1/completions with the key and a JSON Content-Type, then the
 * framing headers given (CRLF-terminated each) and the body as it is. */
static hresp raw_post(const char *headers, const char *body)
{
	char req[1024];

	snprintf(req, sizeof(req), "POST /v1/completions HTTP/1.1\r\nHost: x"
		 "\r\nAuthorization: Bearer %s\r\nContent-Type: "
		 "application/json\r\n%s\r\n%s", KEY, headers, body);
	return raw_http(req);
}

/* A request whose body's framing the gateway cannot trust gets one reply
 * and the connection closed (RFC 9112 6.3, 5.1): a Transfer-Encoding
 * other than chunked (it had hung until the timeout, no reply), both
 * Transfer-Encoding and Content-Length, and a header name with a space
 * ("Content-Length : N", whose length the framing ignored, so that the
 * body, a second request, was answered too: smuggled); a key with
 * trailing whitespace is the key; a target in absolute form is its path;
 * a 405 of a GET endpoint allows HEAD too; a body in a Content-Encoding
 * is refused by the coding's name. */
static void test_body_framing(void **state)
{
	char smuggled[128], req[512];
	hresp r;

	(void)state;
	r = raw_http("GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
		     "gzip\r\n\r\n");
	assert_int_equal(r.code, 501);
	assert_non_null(strstr(r.body, "Transfer-Encoding 'gzip' is not "
				       "supported"));
	assert_non_null(strcasestr(r.head, "Connection: close"));
	hresp_free(&r);
	r = raw_post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		     "0\r\n\r\n");
	assert_int_equal(r.code, 400);
	assert_non_null(strstr(r.body, "both Transfer-Encoding and "
				       "Content-Length"));
	hresp_free(&r);
	snprintf(smuggled, sizeof(smuggled), "GET /v1/models HTTP/1.1\r\nHost: "
		 "x\r\nAuthorization: Bearer %s\r\n\r\n", KEY);
	snprintf(req, sizeof(req), "Content-Length : %zu\r\n",
		 strlen(smuggled));
	r = raw_post(req, smuggled);
	assert_int_equal(r.code, 400);
	assert_non_null(strstr(r.body, "a header name holds whitespace"));
	/* one reply: the smuggled request's never came */
	assert_null(strstr(r.body, "HTTP/1.1"));
	assert_null(strstr(r.body, "\"object\":\"list\""));
	hresp_free(&r);
	/* the key's trailing whitespace is no part of it (RFC 9110 5.5) */
	snprintf(req, sizeof(req), "GET /v1/models HTTP/1.1\r\nHost: x\r\n"
		 "Authorization: Bearer %s  \r\nConnection: close\r\n\r\n",
		 KEY);
	r = raw_http(req);
	assert_int_equal(r.code, 200);
	hresp_free(&r);
	/* a request target in absolute form is its path (RFC 9112 3.2.2:
	 * it had been a 404) */
	r = raw_http("GET http://x/health HTTP/1.1\r\nHost: x\r\nConnection: "
		     "close\r\n\r\n");
	assert_int_equal(r.code, 200);
	hresp_free(&r);
	/* a GET endpoint's 405 names HEAD too, which it serves */
	r = raw_http("POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0"
		     "\r\nConnection: close\r\n\r\n");
	assert_int_equal(r.code, 405);
	assert_non_null(strcasestr(r.head, "Allow: GET, HEAD"));
	hresp_free(&r);
	/* a compressed body is refused by its coding's name, not parsed
	 * as malformed JSON (it had been a 400 "invalid JSON") */
	r = raw_post("Content-Encoding: gzip\r\nContent-Length: 4\r\n"
		     "Connection: close\r\n", "\x1f\x8b\x08\x01");
	assert_int_equal(r.code, 415);
	assert_non_null(strstr(r.body, "Content-Encoding 'gzip' is not "
				       "supported"));
	assert_non_null(strcasestr(r.head, "Accept-Encoding: identity"));
	hresp_free(&r);
	/* identity is no coding at all */
	r = raw_post("Content-Encoding: identity\r\nContent-Length: 2\r\n"
		     "Connection: close\r\n", "{}");
	assert_int_equal(r.code, 400);
	assert_non_null(strstr(r.body, "prompt"));
	hresp_free(&r);
}

/* 16 concurrent 1 MB bodies of {"junk":[{},{},...]}: each refused by
 * the JSON pre-scan (413) before jansson builds anything; the gateway's
 * peak RSS stays under 200 MB and its RSS returns near its idle size. */
static void test_hostile_bodies(void **state)
{
	pthread_t th[HOSTILE_BODIES];
	long rss0 = proc_kb(gw_pid, "VmRSS"), rss1, hwm;
	size_t n = 0;
	int cut = 0;
	double t0;

	(void)state;
	assert_true(rss0 > 0);
	wait_connections_closed();
	{
		size_t nm;
		metric *m = scrape(&nm);

		t0 = prom_get(m, nm, "quorum_http_connections_timed_out_total",
			      "");
		free(m);
	}
	hostile = malloc(1048576);
	n += (size_t)sprintf(hostile, "{\"junk\":[{}");
	while (n + 8 < 1048576 - 4)
		n += (size_t)sprintf(hostile + n, ",{}");
	n += (size_t)sprintf(hostile + n, "]}");
	hostile_len = n;
	for (int i = 0; i < HOSTILE_BODIES; i++)
		assert_int_equal(pthread_create(&th[i], NULL, hostile_client,
						(void *)(intptr_t)i), 0);
	for (int i = 0; i < HOSTILE_BODIES; i++) {
		pthread_join(th[i], NULL);
#if defined(__SANITIZE_ADDRESS__)
		/* a sanitizer's gateway may take longer than the body
		 * deadline (3 s here) to read 16 MB at once: such a
		 * connection is closed and counted, never answered wrong */
		if (hostile_code[i] == -1) {
			cut++;
			continue;
		}
#endif
		assert_int_equal(hostile_code[i], 413);
	}
	if (cut) {
		size_t nm;
		metric *m = scrape(&nm);
		double t1 = prom_get(m, nm,
				     "quorum_http_connections_timed_out_total",
				     "");

		free(m);
		printf("  %d of them cut at the body deadline\n", cut);
		assert_true(cut < HOSTILE_BODIES);
		assert_true(t1 - t0 >= cut);
	}
	free(hostile);
	rss1 = proc_kb(gw_pid, "VmRSS");
	hwm = proc_kb(gw_pid, "VmHWM");
	printf("  16 hostile 1 MB bodies: RSS %ld -> %ld kB, peak %ld kB\n",
	       rss0, rss1, hwm);
#if defined(__SANITIZE_ADDRESS__)
	/* AddressSanitizer keeps freed memory in quarantine (256 MB by
	 * default) and adds its own: the bound is the real allocator's,
	 * asserted in the plain build; here every body was still refused */
	(void)hwm;
	(void)rss1;
#else
	assert_true(hwm > 0 && hwm < 200 * 1024);
	assert_true(rss1 < rss0 + 32 * 1024);
#endif
}

/* A socket that has sent POST /v1/completions with body b (its reply
 * left for the caller to read, or not). */
static int raw_completion(const char *b)
{
	char head[512];
	int s = connect_port(gw_port), n;

	assert_true(s >= 0);
	n = snprintf(head, sizeof(head), "POST /v1/completions HTTP/1.1\r\n"
		     "Host: x\r\nAuthorization: Bearer %s\r\nContent-Type: "
		     "application/json\r\nContent-Length: %zu\r\n\r\n%s", KEY,
		     strlen(b), b);
	assert_true(n > 0 && (size_t)n < sizeof(head));
	assert_int_equal(send_all(s, head, (size_t)n), 0);
	return s;
}

/* The coordinator's status once it has requests in flight (busy) or
 * none (!busy), and more than failed requests failed; a hang guard of
 * CU_WAIT_MS fails with why. The caller frees it. */
static Quorum__ClientReply *wait_status(void *zs, int busy, uint64_t failed,
					const char *why)
{
	for (int64_t end = wire_now_ms() + CU_WAIT_MS;;) {
		Quorum__ClientReply *st = cu_status(zs);

		if (st && (busy ? st->cluster->in_flight > 0
				: st->cluster->in_flight == 0) &&
		    st->cluster->requests_failed >= failed)
			return st;
		if (st)
			quorum__client_reply__free_unpacked(st, NULL);
		if (wire_now_ms() > end)
			fail_msg("%s", why);
		usleep(20000);
	}
}

/* A client that hangs up on a plain (not streamed) request: its request
 * is cancelled at the coordinator (counted failed, not served). */
static void test_cancel_plain(void **state)
{
	const char *b = "{\"prompt\":\"Go on forever.\",\"n\":2,"
			"\"max_tokens\":1500,\"ignore_eos\":true}";
	void *zs = cu_client(&cl);
	Quorum__ClientReply *st = cu_status(zs);
	uint64_t served0, failed0;
	int s;

	(void)state;
	assert_non_null(st);
	served0 = st->cluster->requests_served;
	failed0 = st->cluster->requests_failed;
	quorum__client_reply__free_unpacked(st, NULL);
	s = raw_completion(b);
	/* in flight at the coordinator, then the client leaves */
	st = wait_status(zs, 1, 0, "the request never started");
	quorum__client_reply__free_unpacked(st, NULL);
	close(s);
	st = wait_status(zs, 0, failed0 + 1, "the request was not cancelled");
	assert_int_equal(st->cluster->requests_served, served0);
	quorum__client_reply__free_unpacked(st, NULL);
	zmq_close(zs);
	/* a client leaving is no internal error: libmicrohttpd's line for
	 * the connection closed on purpose is left out of the log */
	{
		char *log = tu_slurp(gw_log, NULL);

		assert_non_null(log);
		const char *bad = strstr(log, "Application reported internal "
					       "error");

		if (!bad)
			bad = strstr(log, "application reported error "
					  "generating data");
		/* (a chunked stream's, libmicrohttpd 0.9.75) */
		if (!bad)
			bad = strstr(log, "application error generating "
					  "response");
		if (!bad)
			bad = strstr(log, "is not the first option");

		if (bad) {
			const char *l = bad;

			while (l > log && l[-1] != '\n')
				l--;
			fail_msg("the gateway's log says: %.200s", l);
		}
		free(log);
	}
}

/* A stream of the voted answer (no n: one choice over several samples)
 * begins when the coordinator takes the request, keep-alives until the
 * vote: its headers arrive while the request is still in flight (they
 * had waited for the whole vote, a proxy's idle timeout cutting long
 * ones). */
static void test_stream_voted_begins(void **state)
{
	const char *b = "{\"prompt\":\"Go on forever.\",\"samples\":2,"
			"\"max_tokens\":1500,\"ignore_eos\":true,"
			"\"stream\":true}";
	char got[2048];
	void *zs = cu_client(&cl);
	Quorum__ClientReply *st;
	size_t n = 0;
	int s;

	(void)state;
	s = raw_completion(b);
	/* the headers (the socket blocks until they come) */
	while (n + 1 < sizeof(got)) {
		ssize_t r = recv(s, got + n, sizeof(got) - 1 - n, 0);

		if (r <= 0)
			break;
		n += (size_t)r;
		got[n] = '\0';
		if (strstr(got, "\r\n\r\n"))
			break;
	}
	got[n] = '\0';
	assert_non_null(strstr(got, "HTTP/1.1 200"));
	assert_non_null(strstr(got, "text/event-stream"));
	/* ... while its samples are still being decoded */
	st = cu_status(zs);
	assert_non_null(st);
	if (st->cluster->in_flight < 1)
		fail_msg("the stream began only after the vote");
	quorum__client_reply__free_unpacked(st, NULL);
	close(s);
	/* the client left: cancelled, nothing left in flight */
	st = wait_status(zs, 0, 0, "the request was not cancelled");
	quorum__client_reply__free_unpacked(st, NULL);
	zmq_close(zs);
}

/* A gateway whose coordinator does not answer: a plain and a streamed
 * request each get 503 (with Retry-After) within a few seconds, as
 * /health says 503. */
/* Starts another gateway (config; endpoint NULL: the config's) on a free
 * port; its pid, or 0. */
static pid_t spawn_gateway(const char *config, const char *endpoint,
			   const char *logname, int *port)
{
	char listen_at[64], log[PATH_MAX + 32];
	char *argv[] = {cu_bin("quorum"), "serve", "--config", (char *)config,
			"--listen", listen_at, endpoint ? "--endpoint" : NULL,
			(char *)endpoint, NULL};
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int64_t end = wire_now_ms() + CU_WAIT_MS;

	*port = free_port();
	snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%d", *port);
	snprintf(log, sizeof(log), "%s/%s", cu_tmpdir, logname);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log,
					 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ))
		pid = 0;
	posix_spawn_file_actions_destroy(&fa);
	while (pid > 0 && wire_now_ms() < end) {
		int s = connect_port(*port);

		if (s >= 0) {
			close(s);
			return pid;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return 0;
		usleep(20000);
	}
	return 0;
}

static void stop_gateway(pid_t pid)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/* A gateway whose coordinator does not answer: a plain and a streamed
 * request each get 503 (with Retry-After) within a few seconds, as
 * /health says 503. */
static void test_coordinator_down(void **state)
{
	char ep[64];
	int saved = gw_port, port;
	pid_t pid;

	(void)state;
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", free_port());
	pid = spawn_gateway(cl.config, ep, "gateway-down.log", &port);
	assert_true(pid > 0);
	gw_port = port;
	for (int stream = 0; stream < 2; stream++) {
		int64_t t0 = wire_now_ms();
		hresp r = post("/v1/chat/completions", stream
			? "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
			  "\"stream\":true}"
			: "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
		int64_t ms = wire_now_ms() - t0;

		printf("  coordinator down: %s request answered %d in %lld "
		       "ms\n", stream ? "streamed" : "plain", r.code,
		       (long long)ms);
		assert_int_equal(r.code, 503);
		assert_non_null(strstr(r.head, "Retry-After: "));
		assert_non_null(strstr(r.body, "service_unavailable"));
		/* the probe's answer (about 2 s, printed above), not the
		 * request's timeout (a 504) */
		assert_non_null(strstr(r.body, "does not answer"));
		hresp_free(&r);
	}
	{
		hresp r = http("GET", "/health", NULL, NULL, 0);

		assert_int_equal(r.code, 503);
		hresp_free(&r);
	}
	gw_port = saved;
	stop_gateway(pid);
}

/* The data lines of an SSE body in order, each parsed (a line that is
 * not JSON, e.g. [DONE], as a JSON string). */
static json_t *sse_datas(const hresp *r)
{
	json_t *a = json_array();
	const char *p = r->body;

	while ((p = strstr(p, "data: "))) {
		const char *e = strchr(p += 6, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		json_t *o = json_loadb(p, n, 0, NULL);

		json_array_append_new(a, o ? o : json_stringn(p, n));
		p += n;
	}
	return a;
}

/* body posted to chat completions: 200, its reply (to free with
 * json_decref and hresp_free) and its choices, n of them. */
static json_t *chat_choices(const char *body, size_t n, hresp *r,
			    json_t **ch)
{
	json_t *o;

	*r = post("/v1/chat/completions", body);
	assert_int_equal(r->code, 200);
	o = body_json(r);
	*ch = json_object_get(o, "choices");
	assert_int_equal(json_array_size(*ch), n);
	return o;
}

/* A JSON schema over a model that reasons: the reasoning first, free,
 * and the schema's JSON after it. Steered by logit_bias (this
 * vocabulary's <think> 151667 +30, </think> 151668 +100: the first token
 * may be the schema's or <think>, then nothing is masked until
 * </think>). Shown whole (reasoning_format none) the text opens with
 * the think block; split (the default), the content is the JSON alone,
 * and the vote reads it as JSON. */
static void test_schema_after_reasoning(void **state)
{
	(void)state;
	for (int whole = 0; whole < 2; whole++) {
		char body[768];
		hresp r;
		json_t *o, *ch;

		snprintf(body, sizeof(body), "{\"messages\":[{\"role\":"
			 "\"user\",\"content\":\"Give a.\"}],\"n\":3,"
			 "\"seed\":5,\"max_tokens\":40,\"logit_bias\":"
			 "{\"151667\":30,\"151668\":100},\"response_format\":"
			 "{\"type\":\"json_schema\",\"json_schema\":{"
			 "\"name\":\"a\",\"schema\":{\"type\":\"object\","
			 "\"properties\":{\"a\":{\"type\":\"integer\"}},"
			 "\"required\":[\"a\"]}}}%s}",
			 whole ? ",\"reasoning_format\":\"none\"" : "");
		o = chat_choices(body, 3, &r, &ch);
		for (size_t i = 0; i < 3; i++) {
			const char *text = json_string_value(json_object_get(
				json_object_get(json_array_get(ch, i),
						"message"), "content"));
			json_t *v;

			assert_non_null(text);
			if (whole) {
				if (strncmp(text, "<think></think>", 15))
					fail_msg("choice %zu: \"%s\"", i, text);
				text += 15;
			}
			v = json_loads(text, 0, NULL);
			if (!json_is_integer(json_object_get(v, "a")))
				fail_msg("choice %zu: \"%s\" is not the "
					 "schema's", i, text);
			json_decref(v);
		}
		assert_string_equal(json_string_value(json_object_get(
			json_object_get(o, "quorum"), "answer_format")), "json:");
		json_decref(o);
		hresp_free(&r);
	}
}

/* usage's reasoning tokens: texts held by a grammar to a <think> block
 * and an answer, the whole text shown (reasoning_format none) with its
 * tokens' bytes (logprobs): each sample's reasoning tokens are those
 * whose pieces start before the answer's first byte (after </think> and
 * the blank line), counted here from the tokens' own bytes; usage has
 * their sum, chat's and the Responses API's the same. */
static void test_reasoning_tokens(void **state)
{
	static const char gram[] =
		"root ::= \"<think>\" [a-z] [a-z]? [a-z]? [a-z]? \"</think>\" "
		"\"\\n\\n\" [0-9] [0-9]?";
	char body[1024];
	json_t *g = json_string(gram), *o, *ch;
	char *gj = json_dumps(g, JSON_ENCODE_ANY);
	json_int_t want = 0, total = 0;
	hresp r;

	size_t n0, n1;
	metric *m0, *m1;

	(void)state;
	m0 = scrape(&n0);
	snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\","
		 "\"content\":\"Think, then a number.\"}],\"n\":3,\"seed\":5,"
		 "\"max_tokens\":40,\"grammar\":%s,\"reasoning_format\":"
		 "\"none\",\"logprobs\":true}", gj);
	o = chat_choices(body, 3, &r, &ch);
	for (size_t i = 0; i < 3; i++) {
		json_t *c = json_array_get(ch, i);
		const char *text = json_string_value(json_object_get(
			json_object_get(c, "message"), "content"));
		json_t *lp = json_object_get(json_object_get(c, "logprobs"),
					     "content");
		const char *end = strstr(text, "</think>");
		size_t at, start = 0;
		json_int_t n = 0;

		assert_non_null(end);
		at = (size_t)(end - text) + 8;
		while (text[at] == '\n')
			at++;
		assert_true(text[at] >= '0' && text[at] <= '9');
		/* the tokens whose pieces start before the answer */
		for (size_t k = 0; k < json_array_size(lp); k++) {
			if (start < at)
				n++;
			start += json_array_size(json_object_get(
				json_array_get(lp, k), "bytes"));
		}
		assert_true(n >= 3); /* <think>, a letter, </think> at least */
		want += n;
		total += (json_int_t)json_array_size(lp);
	}
	{
		json_t *u = json_object_get(o, "usage");

		assert_int_equal(json_integer_value(json_object_get(
			json_object_get(u, "completion_tokens_details"),
			"reasoning_tokens")), want);
		/* and the answers' tokens besides (an end token drawn is in
		 * the lists, not in completion_tokens; a grammar that ended
		 * draws none) */
		assert_true(json_integer_value(json_object_get(
			u, "completion_tokens")) > want);
		assert_true(json_integer_value(json_object_get(
			u, "completion_tokens")) >= total - 3);
		assert_true(json_integer_value(json_object_get(
			u, "completion_tokens")) <= total);
	}
	json_decref(o);
	hresp_free(&r);
	/* and /metrics counted them (counted before the reply is sent) */
	m1 = scrape(&n1);
	assert_int_equal(prom_get(m1, n1, "quorum_reasoning_tokens_total", ""),
			 zero_nan(prom_get(m0, n0,
					   "quorum_reasoning_tokens_total", "")) +
				 (double)want);
	free(m0);
	free(m1);

	/* the Responses API's place for them, one sample; its output_text
	 * carries its own tokens' log-probabilities, none of the
	 * reasoning's, streamed (the deltas' lists joined, and the done
	 * event's) as not */
	snprintf(body, sizeof(body), "{\"input\":\"Think, then a number.\","
		 "\"samples\":1,\"seed\":5,\"max_output_tokens\":40,"
		 "\"include\":[\"message.output_text.logprobs\"],"
		 "\"grammar\":%s}", gj);
	r = post("/v1/responses", body);
	assert_int_equal(r.code, 200);
	o = body_json(&r);
	{
		json_t *u = json_object_get(o, "usage"), *out, *part, *lp, *d;
		json_int_t rt = json_integer_value(json_object_get(
			json_object_get(u, "output_tokens_details"),
			"reasoning_tokens"));
		json_t *joined = json_array(), *done = NULL;
		const char *t;
		char bytes[64];
		size_t nb = 0, k;
		hresp sr;

		assert_true(rt >= 3);
		assert_true(json_integer_value(json_object_get(
			u, "output_tokens")) > rt);
		out = json_object_get(o, "output");
		part = json_array_get(json_object_get(json_array_get(out,
			json_array_size(out) - 1), "content"), 0);
		t = json_string_value(json_object_get(part, "text"));
		lp = json_object_get(part, "logprobs");
		assert_true(json_array_size(lp) >= 1);
		json_array_foreach(lp, k, d) {
			json_t *bv;
			size_t j;

			json_array_foreach(json_object_get(d, "bytes"), j, bv)
				if (nb < sizeof(bytes) - 1)
					bytes[nb++] = (char)json_integer_value(
						bv);
		}
		bytes[nb] = '\0';
		assert_string_equal(bytes, t);
		snprintf(body + strlen(body) - 1,
			 sizeof(body) - strlen(body) + 1, ",\"stream\":true}");
		sr = post("/v1/responses", body);
		assert_int_equal(sr.code, 200);
		d = sse_datas(&sr);
		json_array_foreach(d, k, u) {
			const char *ty = json_string_value(json_object_get(
				u, "type"));

			if (ty && !strcmp(ty, "response.output_text.delta"))
				json_array_extend(joined, json_object_get(
					u, "logprobs"));
			if (ty && !strcmp(ty, "response.output_text.done"))
				done = json_object_get(u, "logprobs");
		}
		assert_non_null(done);
		assert_json_eq(done, lp, "streamed output_text logprobs");
		assert_json_eq(joined, lp, "output_text deltas' logprobs");
		json_decref(joined);
		json_decref(d);
		hresp_free(&sr);
	}
	json_decref(o);
	hresp_free(&r);
	free(gj);
	json_decref(g);
}

/* ---- a coordinator that fails a stream after it began -------------- */

/* A ROUTER socket standing in for the coordinator: a status query gets
 * an empty cluster; an Ask gets its stream's start, one part of sample
 * 0's text ("Twelve", 6 bytes), then the final reply: every worker lost
 * (STATUS_WORKER_LOST), as when a cluster's last worker dies mid-stream.
 * A cancel gets nothing. */
typedef struct failer {
	void *ctx, *sock;
	char ep[64];
	pthread_t th;
	volatile int stop;
	int asks;
} failer;

static void failer_send(failer *f, const zmq_msg_t *id, uint64_t rid,
			int status, const char *err, int body)
{
	Quorum__ClientReply r = QUORUM__CLIENT_REPLY__INIT;
	Quorum__StreamStart st = QUORUM__STREAM_START__INIT;
	Quorum__SamplePart part = QUORUM__SAMPLE_PART__INIT;
	Quorum__ClusterStatus cs = QUORUM__CLUSTER_STATUS__INIT;
	uint8_t buf[512];
	size_t n;

	r.version = QUORUM__CONSTANTS__PROTOCOL_VERSION;
	r.request_id = rid;
	r.status = status;
	r.error = (char *)err;
	r.body_case = body;
	if (body == QUORUM__CLIENT_REPLY__BODY_STARTED) {
		st.has_prompt_tokens = 1;
		st.prompt_tokens = 5;
		r.started = &st;
	} else if (body == QUORUM__CLIENT_REPLY__BODY_PARTIAL) {
		part.text.data = (uint8_t *)"Twelve";
		part.text.len = 6;
		r.partial = &part;
	} else if (body == QUORUM__CLIENT_REPLY__BODY_CLUSTER) {
		cs.cluster = "failer";
		r.cluster = &cs;
	}
	n = quorum__client_reply__get_packed_size(&r);
	assert_true(n <= sizeof(buf));
	quorum__client_reply__pack(&r, buf);
	zmq_send(f->sock, zmq_msg_data((zmq_msg_t *)id),
		 zmq_msg_size((zmq_msg_t *)id), ZMQ_SNDMORE);
	zmq_send(f->sock, buf, n, 0);
}

static void *failer_main(void *arg)
{
	failer *f = arg;

	while (!f->stop) {
		zmq_pollitem_t it = {f->sock, 0, ZMQ_POLLIN, 0};
		zmq_msg_t id, m;
		Quorum__ClientRequest *q;

		if (zmq_poll(&it, 1, 50) <= 0)
			continue;
		zmq_msg_init(&id);
		zmq_msg_init(&m);
		if (zmq_msg_recv(&id, f->sock, 0) < 0 ||
		    !zmq_msg_more(&id) || zmq_msg_recv(&m, f->sock, 0) < 0) {
			zmq_msg_close(&id);
			zmq_msg_close(&m);
			continue;
		}
		q = quorum__client_request__unpack(NULL, zmq_msg_size(&m),
						   zmq_msg_data(&m));
		if (q && q->body_case == QUORUM__CLIENT_REQUEST__BODY_STATUS) {
			failer_send(f, &id, q->request_id,
				    QUORUM__STATUS__STATUS_OK, NULL,
				    QUORUM__CLIENT_REPLY__BODY_CLUSTER);
		} else if (q &&
			   q->body_case == QUORUM__CLIENT_REQUEST__BODY_ASK) {
			f->asks++;
			failer_send(f, &id, q->request_id,
				    QUORUM__STATUS__STATUS_OK, NULL,
				    QUORUM__CLIENT_REPLY__BODY_STARTED);
			failer_send(f, &id, q->request_id,
				    QUORUM__STATUS__STATUS_OK, NULL,
				    QUORUM__CLIENT_REPLY__BODY_PARTIAL);
			failer_send(f, &id, q->request_id,
				    QUORUM__STATUS__STATUS_WORKER_LOST,
				    "every worker was lost; retry budget "
				    "exhausted", 0);
		}
		if (q)
			quorum__client_request__free_unpacked(q, NULL);
		zmq_msg_close(&id);
		zmq_msg_close(&m);
	}
	return NULL;
}

/* A stream the coordinator fails after it began (its last worker lost):
 * the response is already a 200, so the failure comes as the stream's
 * last event, with the coordinator's words and the HTTP status's code
 * (503, worker_lost): a chat stream's error chunk and then [DONE], a
 * Responses stream's "error" event and nothing after it (no
 * response.completed); the text streamed before it stays. */
static void test_stream_fails_midway(void **state)
{
	failer f = {0};
	size_t len = sizeof(f.ep);
	int saved = gw_port, port;
	pid_t pid;
	hresp r;
	json_t *d, *e;
	size_t n;

	(void)state;
	f.ctx = zmq_ctx_new();
	f.sock = zmq_socket(f.ctx, ZMQ_ROUTER);
	assert_int_equal(zmq_bind(f.sock, "tcp://127.0.0.1:*"), 0);
	assert_int_equal(zmq_getsockopt(f.sock, ZMQ_LAST_ENDPOINT, f.ep,
					&len), 0);
	assert_int_equal(pthread_create(&f.th, NULL, failer_main, &f), 0);
	pid = spawn_gateway(cl.config, f.ep, "gateway-failer.log", &port);
	assert_true(pid > 0);
	gw_port = port;

	r = post("/v1/chat/completions",
		 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
		 "\"stream\":true,\"samples\":1}");
	assert_int_equal(r.code, 200);
	d = sse_datas(&r);
	n = json_array_size(d);
	assert_true(n >= 3);
	/* the streamed text, then the error, then [DONE] */
	assert_non_null(strstr(r.body, "\"content\":\"Twelve\""));
	e = json_object_get(json_array_get(d, n - 2), "error");
	assert_non_null(e);
	assert_string_equal(json_string_value(json_object_get(e, "code")),
			    "worker_lost");
	assert_string_equal(json_string_value(json_object_get(e, "type")),
			    "server_error");
	assert_string_equal(json_string_value(json_object_get(e, "message")),
			    "every worker was lost; retry budget exhausted");
	assert_string_equal(json_string_value(json_array_get(d, n - 1)),
			    "[DONE]");
	/* no choice finished: the error is the stream's end */
	assert_null(strstr(r.body, "\"finish_reason\":\"stop\""));
	json_decref(d);
	hresp_free(&r);

	r = post("/v1/responses", "{\"input\":\"q\",\"stream\":true,"
		 "\"samples\":1}");
	assert_int_equal(r.code, 200);
	d = sse_datas(&r);
	n = json_array_size(d);
	assert_true(n >= 3);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(d, 0), "type")),
			    "response.created");
	assert_non_null(strstr(r.body, "\"delta\":\"Twelve\""));
	e = json_array_get(d, n - 1);
	assert_string_equal(json_string_value(json_object_get(e, "type")),
			    "error");
	assert_string_equal(json_string_value(json_object_get(e, "code")),
			    "worker_lost");
	assert_string_equal(json_string_value(json_object_get(e, "message")),
			    "every worker was lost; retry budget exhausted");
	assert_null(strstr(r.body, "response.completed"));
	assert_null(strstr(r.body, "[DONE]"));
	json_decref(d);
	hresp_free(&r);

	assert_int_equal(f.asks, 2);
	/* each counted once, as the failure it is (503), once it ended */
	for (int64_t end = wire_now_ms() + CU_WAIT_MS;;) {
		size_t nm;
		metric *m = scrape(&nm);
		double chat = zero_nan(prom_get(m, nm,
			"quorum_http_requests_total", "endpoint=\"/v1/chat/"
			"completions\",code=\"503\"")),
		       resp = zero_nan(prom_get(m, nm,
			"quorum_http_requests_total", "endpoint=\"/v1/"
			"responses\",code=\"503\""));
		double ok = zero_nan(prom_get(m, nm,
			"quorum_http_requests_total", "endpoint=\"/v1/chat/"
			"completions\",code=\"200\""));

		free(m);
		if (chat + resp < 2 && wire_now_ms() < end) {
			usleep(20000);
			continue;
		}
		assert_true(chat == 1 && resp == 1 && ok == 0);
		break;
	}
	gw_port = saved;
	stop_gateway(pid);
	f.stop = 1;
	pthread_join(f.th, NULL);
	zmq_close(f.sock);
	zmq_ctx_term(f.ctx);
}

/* The status page's JSON as key sees it (NULL: no key). */
static char *status_as(const char *key)
{
	hresp r = http("GET", "/v1/quorum/status", key, NULL, 0);
	char *b;

	assert_int_equal(r.code, 200);
	b = r.body;
	r.body = NULL;
	hresp_free(&r);
	return b;
}

/* Privacy: a key sees its own requests on the status page, an admin key
 * every request; a gateway without keys shows none of the questions
 * (http.show_questions false). */
static void test_privacy(void **state)
{
	const char *mine = "{\"prompt\":\"Mine only 17?\",\"max_tokens\":2}",
		   *other = "{\"prompt\":\"Other one 23?\",\"max_tokens\":2}";
	char *b, conf[PATH_MAX + 32], line[512];
	FILE *in, *out;
	hresp r;
	int saved = gw_port, port;
	pid_t pid;

	(void)state;
	r = http("POST", "/v1/completions", KEY, mine, strlen(mine));
	assert_int_equal(r.code, 200);
	hresp_free(&r);
	r = http("POST", "/v1/completions", "sk-other-key", other,
		 strlen(other));
	assert_int_equal(r.code, 200);
	hresp_free(&r);
	b = status_as(KEY);
	assert_non_null(strstr(b, "Mine only 17?"));
	assert_null(strstr(b, "Other one 23?"));
	free(b);
	b = status_as("sk-other-key");
	assert_null(strstr(b, "Mine only 17?"));
	assert_non_null(strstr(b, "Other one 23?"));
	free(b);
	b = status_as(ADMIN_KEY);
	assert_non_null(strstr(b, "Mine only 17?"));
	assert_non_null(strstr(b, "Other one 23?"));
	free(b);
	/* the same cluster behind a gateway without keys */
	snprintf(conf, sizeof(conf), "%s/keyless.yaml", cu_tmpdir);
	in = fopen(cl.config, "r");
	out = fopen(conf, "w");
	assert_non_null(in);
	assert_non_null(out);
	while (fgets(line, sizeof(line), in) && strcmp(line, "http:\n"))
		fputs(line, out);
	fputs("http:\n  model_aliases: x\n", out);
	fclose(in);
	fclose(out);
	pid = spawn_gateway(conf, NULL, "gateway-keyless.log", &port);
	assert_true(pid > 0);
	gw_port = port;
	r = http("POST", "/v1/completions", NULL, mine, strlen(mine));
	assert_int_equal(r.code, 200);
	hresp_free(&r);
	b = status_as(NULL);
	assert_non_null(strstr(b, "\"recent\":[{"));
	assert_null(strstr(b, "Mine only 17?"));
	assert_null(strstr(b, "\"question\""));
	free(b);
	gw_port = saved;
	stop_gateway(pid);
}

/* ---- the status page ---------------------------------------------------- */

static void test_status_page(void **state)
{
	hresp r = http("GET", "/", NULL, NULL, 0);
	json_t *o, *rec, *w;
	char cmd[PATH_MAX * 3], out[PATH_MAX + 32];
	FILE *f;
	char *dom;
	long len;

	(void)state;
	assert_int_equal(r.code, 200);
	assert_non_null(strstr(r.head, "text/html"));
	assert_non_null(strstr(r.body, "<tbody id=\"workers\">"));
	assert_null(strstr(r.body, "http://")); /* no external assets */
	assert_null(strstr(r.body, "https://"));
	hresp_free(&r);
	r = http("GET", "/v1/quorum/status", NULL, NULL, 0);
	check_error(&r, 401, NULL, "API key", "status_no_key");
	hresp_free(&r);
	r = get("/v1/quorum/status");
	assert_int_equal(r.code, 200);
	o = body_json(&r);
	w = json_object_get(json_object_get(o, "cluster"), "workers");
	assert_int_equal(json_array_size(w), 2);
	rec = json_object_get(o, "recent");
	assert_true(json_array_size(rec) > 0);
	json_decref(o);
	hresp_free(&r);

	/* a finished request with a vote of our own, then the browser */
	r = post("/v1/completions", "{\"prompt\":\"Browser check.\",\"n\":5,"
		 "\"seed\":3,\"max_tokens\":8}");
	assert_int_equal(r.code, 200);
	hresp_free(&r);
	snprintf(out, sizeof(out), "%s/dom.html", cu_tmpdir);
	snprintf(cmd, sizeof(cmd), "chromium --headless --no-sandbox "
		 "--disable-gpu --disable-dev-shm-usage --user-data-dir=%s/chr "
		 "--virtual-time-budget=5000 --dump-dom "
		 "'http://127.0.0.1:%d/#key=%s' > %s 2>/dev/null", cu_tmpdir,
		 gw_port, KEY, out);
	assert_int_equal(system(cmd), 0);
	f = fopen(out, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	dom = calloc(1, (size_t)len + 1);
	assert_int_equal(fread(dom, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	unlink(out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/chr'", cu_tmpdir);
	assert_int_equal(system(cmd), 0);
	/* rendered by the page's script from live data */
	if (!strstr(dom, "data-ready=\"1\""))
		fail_msg("the page did not load its data:\n%.2000s", dom);
	assert_non_null(strstr(dom, "<tr class=\"worker\" data-id=\"w0\">"));
	assert_non_null(strstr(dom, "<tr class=\"worker\" data-id=\"w1\">"));
	assert_non_null(strstr(dom, "Browser check."));
	assert_non_null(strstr(dom, "class=\"req"));
	/* its vote: bars whose counts add up to its 5 samples (answers,
	 * and "no answer" for samples without one) */
	{
		char *p = strstr(dom, "Browser check."), *end, *c;
		long sum = 0;

		assert_non_null(p);
		end = strstr(p, "class=\"req");
		if (!end)
			end = p + strlen(p);
		for (c = p; (c = strstr(c, "<span class=\"c\">")) && c < end;
		     c++)
			sum += strtol(c + 16, NULL, 10);
		assert_int_equal(sum, 5);
	}
	free(dom);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_health_models),
		cmocka_unit_test(test_matches_ask),
		cmocka_unit_test(test_conversation),
		cmocka_unit_test(test_responses),
		cmocka_unit_test(test_early_stop),
		cmocka_unit_test(test_logprobs),
		cmocka_unit_test(test_top_logprobs),
		cmocka_unit_test(test_stop),
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_stream_logprobs),
		cmocka_unit_test(test_metrics),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_auth),
		cmocka_unit_test(test_cancel_on_disconnect),
		cmocka_unit_test(test_stream_voted_begins),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_slow_headers),
		cmocka_unit_test(test_slow_body),
		cmocka_unit_test(test_hostile_bodies),
		cmocka_unit_test(test_body_framing),
		cmocka_unit_test(test_cancel_plain),
		cmocka_unit_test(test_coordinator_down),
		cmocka_unit_test(test_stream_fails_midway),
		cmocka_unit_test(test_privacy),
		cmocka_unit_test(test_python_example),
		cmocka_unit_test(test_status_page),
	};

	const struct CMUnitTest think[] = {
		cmocka_unit_test(test_think),
		cmocka_unit_test(test_text_offset),
		cmocka_unit_test(test_reasoning_tokens),
		cmocka_unit_test(test_schema_after_reasoning),
	};
	const struct CMUnitTest harmony[] = {
		cmocka_unit_test(test_effort),
	};
	int failed;

	signal(SIGPIPE, SIG_IGN);
	cu_zctx = zmq_ctx_new();
	failed = cmocka_run_group_tests_name("gateway", tests, group_setup,
					     gw_teardown);
	failed += cmocka_run_group_tests_name("gateway_think", think,
					      think_setup, gw_teardown);
	failed += cmocka_run_group_tests_name("gateway_harmony", harmony,
					      harmony_setup, gw_teardown);
	zmq_ctx_shutdown(cu_zctx);
	return failed;
}

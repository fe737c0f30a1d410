/*
 * test_params — one contract for the sampling settings (issue 23): every
 * entry point accepts or refuses a value the same way, with the same
 * message, the one sc/params words.
 *
 * (The gateway says the setting by the request's field that gave it:
 * "max_tokens = 0: ...", not "max_new_tokens = 0: ...".)
 *
 * The table: per setting, bad values (and good ones at the limits) given
 *   - to the CLI's shared flag parser (tools/sampflags, as `quorum run`,
 *     `ask` and `eval-set` parse them; stderr captured),
 *   - to the gateway's request parser (openai_parse, in-process),
 *   - to the coordinator (an Ask through sched_on_client, in-process: a
 *     valid one is refused only for want of workers),
 *   - to the engine's check (sc_params_check),
 *   - to the cluster config's sampling: section (cfg_parse),
 * where the value can be written at all (a float field never holds
 * 1e39, a uint32 no -1). Then the policy bounds a cluster adds
 * (limits.max_n, the model's context), the HTTP API's own (OpenAI's
 * ranges: temperature 0..2, any int64 seed; such rows are checked
 * there, not against the gateway in the table), and a wrong type.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>

#include "coordinator/sched_int.h"
#include "conf/cfg.h"
#include "net/spwire.h"
#include "sc/params.h"
#include "testutil.h"
#include "text/constrain.h"
#include "text/jschema.h"
#include "text/prompt.h"
#include "text/tok.h"
#include "tools/gateway/openai.h"
#include "tools/sampflags.h"

enum { E_CLI = 1, E_GW = 2, E_CO = 4, E_ENG = 8, E_CFG = 16 };

/* How each entry point names a setting (NULL: not taken there). */
static const struct {
	const char *json;  /* the gateway's field */
	int quote;         /* a JSON string */
	const char *yaml;  /* sampling.KEY of the config */
} names[SC_S_COUNT_] = {
	[SC_S_N] = {"n", 0, "n"},
	[SC_S_SEED] = {"seed", 0, "seed"},
	[SC_S_TEMPERATURE] = {"temperature", 0, "temperature"},
	[SC_S_TOP_K] = {"top_k", 0, "top_k"},
	[SC_S_TOP_P] = {"top_p", 0, "top_p"},
	[SC_S_MAX_NEW_TOKENS] = {"max_tokens", 0, "max_new_tokens"},
	[SC_S_STOP] = {"early_stop", 1, "stop"},
	[SC_S_VOTE] = {"vote", 1, NULL},
	[SC_S_STOP_STRINGS] = {"stop", 1, NULL},
	[SC_S_MODE] = {NULL, 0, NULL},
	[SC_S_CONF_WINDOW] = {NULL, 0, NULL},
	[SC_S_CONF_FILTER] = {NULL, 0, NULL},
	[SC_S_STOP_WAVES] = {NULL, 0, "stop_waves"},
	[SC_S_MIN_P] = {"min_p", 0, "min_p"},
	[SC_S_PRESENCE_PENALTY] = {"presence_penalty", 0, "presence_penalty"},
	[SC_S_FREQUENCY_PENALTY] = {"frequency_penalty", 0,
				    "frequency_penalty"},
	/* the gateway's is a JSON object: logit_bias_json */
	[SC_S_LOGIT_BIAS] = {NULL, 0, "logit_bias"},
};

#define BIAS_MUST "must be at most 64 pairs ID:BIAS, comma-separated, each " \
		  "token id in 0..16777215 once and each bias in [-100, 100]"

/* 65 bytes; + 1: 64 */
#define LONG65 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
	       "xxxxxxx"

static const struct row {
	int id;
	const char *value; /* as text: a flag's argument, a JSON literal */
	const char *msg;   /* NULL: accepted */
} rows[] = {
	{SC_S_N, "0", "n = 0: must be an integer in 1..65536"},
	{SC_S_N, "-1", "n = -1: must be an integer in 1..65536"},
	{SC_S_N, "65537", "n = 65537: must be an integer in 1..65536"},
	{SC_S_N, "1", NULL},
	{SC_S_STOP_WAVES, "-1", "stop_waves = -1: must be an integer in 0..64"},
	{SC_S_STOP_WAVES, "65", "stop_waves = 65: must be an integer in 0..64"},
	{SC_S_STOP_WAVES, "0", NULL},
	{SC_S_STOP_WAVES, "64", NULL},
	{SC_S_N, "65536", NULL},
	{SC_S_SEED, "-3", "seed = -3: must be an integer in "
	 "0..18446744073709551615"},
	{SC_S_SEED, "0", NULL},
	{SC_S_SEED, "9223372036854775807", NULL},
	{SC_S_TEMPERATURE, "-1", "temperature = -1: must be a finite number "
	 ">= 0"},
	{SC_S_TEMPERATURE, "-0.1", "temperature = -0.1: must be a finite "
	 "number >= 0"},
	{SC_S_TEMPERATURE, "1e39", "temperature = 1e+39: must be a finite "
	 "number >= 0"},
	{SC_S_TEMPERATURE, "0", NULL},
	{SC_S_TEMPERATURE, "1000000", NULL},
	{SC_S_TOP_K, "-1", "top_k = -1: must be an integer in 0..16777216"},
	{SC_S_TOP_K, "16777217", "top_k = 16777217: must be an integer in "
	 "0..16777216"},
	{SC_S_TOP_K, "0", NULL},
	{SC_S_TOP_K, "16777216", NULL},
	{SC_S_TOP_P, "0", NULL}, /* the top token only (OpenAI's 0) */
	{SC_S_TOP_P, "1.01", "top_p = 1.01: must be a number in [0, 1]"},
	{SC_S_TOP_P, "-0.5", "top_p = -0.5: must be a number in [0, 1]"},
	{SC_S_TOP_P, "-1e-50", "top_p = -1e-50: must be a number in [0, 1]"},
	{SC_S_TOP_P, "1e-50", NULL}, /* 0 as a float: the same token */
	{SC_S_TOP_P, "1e-10", NULL},
	{SC_S_TOP_P, "1", NULL},
	/* shown as given, not as the bound it passes (%g made it "1") */
	{SC_S_TOP_P, "1.0000001", "top_p = 1.0000001: must be a number in "
	 "[0, 1]"},
	/* a number is the whole string: no space before it either, a real
	 * in decimal */
	{SC_S_SEED, " 5", "seed =  5: must be an integer in "
	 "0..18446744073709551615"},
	{SC_S_TOP_K, " 3", "top_k =  3: must be an integer in 0..16777216"},
	{SC_S_TEMPERATURE, "0x1p-1", "temperature = 0x1p-1: must be a finite "
	 "number >= 0"},
	{SC_S_TEMPERATURE, " 0.5", "temperature =  0.5: must be a finite "
	 "number >= 0"},
	{SC_S_MAX_NEW_TOKENS, "0", "max_new_tokens = 0: must be an integer "
	 "in 1..1048576"},
	{SC_S_MAX_NEW_TOKENS, "1048577", "max_new_tokens = 1048577: must be "
	 "an integer in 1..1048576"},
	{SC_S_MAX_NEW_TOKENS, "1", NULL},
	{SC_S_MAX_NEW_TOKENS, "1048576", NULL},
	{SC_S_STOP, "median", "stop = median: must be none, exact, beta[:T] "
	 "with T in (0.5, 1) or window[:W] with W in 1..65536"},
	{SC_S_STOP, "window:0", "stop = window:0: must be none, exact, "
	 "beta[:T] with T in (0.5, 1) or window[:W] with W in 1..65536"},
	{SC_S_STOP, "beta:1", "stop = beta:1: must be none, exact, beta[:T] "
	 "with T in (0.5, 1) or window[:W] with W in 1..65536"},
	{SC_S_STOP, "exact:3", "stop = exact:3: must be none, exact, "
	 "beta[:T] with T in (0.5, 1) or window[:W] with W in 1..65536"},
	{SC_S_STOP, "window:65536", NULL},
	{SC_S_STOP, "beta:0.9", NULL},
	{SC_S_STOP, "none", NULL},
	{SC_S_VOTE, "plurality", "vote = plurality: must be majority or "
	 "confidence"},
	{SC_S_VOTE, "confidence", NULL},
	{SC_S_STOP_STRINGS, "", "stop_strings: must be at most 4 strings of "
	 "1..64 bytes without NUL"},
	{SC_S_STOP_STRINGS, LONG65, "stop_strings: must be at most 4 strings "
	 "of 1..64 bytes without NUL"},
	{SC_S_STOP_STRINGS, &LONG65[1], NULL},
	{SC_S_MODE, "turbo", "mode = turbo: must be reset, paged or batched"},
	{SC_S_MODE, "paged", NULL},
	{SC_S_CONF_WINDOW, "0", "conf_window = 0: must be an integer in "
	 "1..4096"},
	{SC_S_CONF_WINDOW, "4097", "conf_window = 4097: must be an integer "
	 "in 1..4096"},
	{SC_S_CONF_WINDOW, "4096", NULL},
	{SC_S_CONF_FILTER, "0", "conf_filter = 0: must be W[:P] with warm-up "
	 "W in 1..65536 and percentile P in [0, 100]"},
	{SC_S_CONF_FILTER, "4:101", "conf_filter = 4:101: must be W[:P] with "
	 "warm-up W in 1..65536 and percentile P in [0, 100]"},
	{SC_S_CONF_FILTER, "4:50", NULL},
	{SC_S_MIN_P, "-0.1", "min_p = -0.1: must be a number in [0, 1]"},
	{SC_S_MIN_P, "1.5", "min_p = 1.5: must be a number in [0, 1]"},
	{SC_S_MIN_P, "0", NULL},
	{SC_S_MIN_P, "1", NULL},
	{SC_S_PRESENCE_PENALTY, "2.5", "presence_penalty = 2.5: must be a "
	 "number in [-2, 2]"},
	{SC_S_PRESENCE_PENALTY, "-2", NULL},
	{SC_S_PRESENCE_PENALTY, "2", NULL},
	{SC_S_FREQUENCY_PENALTY, "-3", "frequency_penalty = -3: must be a "
	 "number in [-2, 2]"},
	{SC_S_FREQUENCY_PENALTY, "0.5", NULL},
	{SC_S_LOGIT_BIAS, "15:101", "logit_bias = 15:101: " BIAS_MUST},
	{SC_S_LOGIT_BIAS, "15", "logit_bias = 15: " BIAS_MUST},
	{SC_S_LOGIT_BIAS, "1:1,1:2", "logit_bias = 1:1,1:2: " BIAS_MUST},
	{SC_S_LOGIT_BIAS, "-1:5", "logit_bias = -1:5: " BIAS_MUST},
	{SC_S_LOGIT_BIAS, "16777216:5", "logit_bias = 16777216:5: "
	 BIAS_MUST},
	{SC_S_LOGIT_BIAS, "15:-100,3:2.5", NULL},
	{SC_S_TOP_LOGPROBS, "-1", "top_logprobs = -1: must be an integer in "
	 "0..20"},
	{SC_S_TOP_LOGPROBS, "21", "top_logprobs = 21: must be an integer in "
	 "0..20"},
	{SC_S_TOP_LOGPROBS, "0", NULL},
	{SC_S_TOP_LOGPROBS, "20", NULL},
};

/* ---- text into typed values ---------------------------------------------- */

/* (A value a typed door cannot hold as written: a space before it, a
 * hex real; only the text doors see those.) */
static int as_ll(const char *s, long long *v)
{
	char *end;

	if (isspace((unsigned char)s[0]))
		return 0;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return !errno && end != s && !*end;
}

/* d, when a float holds it as the messages show it (%g) */
static int as_float(const char *s, float *f)
{
	char a[40], b[40], *end;
	double d = strtod(s, &end);

	if (end == s || *end || isspace((unsigned char)s[0]) ||
	    strpbrk(s, "xX"))
		return 0;
	*f = (float)d;
	snprintf(a, sizeof(a), "%g", d);
	snprintf(b, sizeof(b), "%g", (double)*f);
	return !strcmp(a, b);
}

/* ---- the CLI ------------------------------------------------------------- */

/* sampflags_opt as `quorum run` calls it: the first line of its stderr
 * (or "" when it took the value). */
static void cli(int id, const char *value, char *out, size_t cap)
{
	sampflags f;
	FILE *tmp = tmpfile();
	int saved = dup(2), rc;
	size_t n;

	assert_non_null(tmp);
	sampflags_init(&f, "run", SF_RUN);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	rc = sampflags_opt(&f, id == SC_S_N ? 'n' : SF_CODE(id), value);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, cap - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	out[strcspn(out, "\n")] = '\0';
	assert_int_equal(rc, *out ? 2 : 0);
}

/* ---- the gateway --------------------------------------------------------- */

/* openai_parse of a completion with field = value: 0, or -1 with msg */
static int gw(const char *field, const char *json, int max_n, char *msg,
	      size_t cap, const char **param)
{
	char body[512];
	openai_req r;
	int rc;

	snprintf(body, sizeof(body), "{\"prompt\":\"q\",\"%s\":%s}", field,
		 json);
	rc = openai_parse(0, body, strlen(body), max_n, &r, msg, cap, param);
	if (!rc)
		openai_req_free(&r);
	return rc;
}

/* ---- the coordinator ----------------------------------------------------- */

static uint8_t *reply_buf;
static size_t reply_len;
static int64_t clock_ms;
static tok *vocab;

static int io_send(void *arg, int to_worker, const unsigned char *id,
		   size_t id_len, const ProtobufCMessage *m)
{
	(void)arg;
	(void)id;
	(void)id_len;
	if (to_worker)
		return 0;
	free(reply_buf);
	reply_len = protobuf_c_message_get_packed_size(m);
	reply_buf = malloc(reply_len + 1);
	protobuf_c_message_pack(m, reply_buf);
	return 0;
}

static int64_t io_now(void *arg)
{
	(void)arg;
	return clock_ms;
}

static sched *new_sched(cfg **c, int max_n, int ctx_len)
{
	char text[512];
	sched_opts o = {0};
	sched *s = NULL;

	snprintf(text, sizeof(text), "model: {path: /nonexistent.gguf}\n"
		 "cluster: {name: t}\nsampling: {n: 1}\n"
		 "limits: {max_n: %d}\n", max_n);
	if (cfg_parse("t.yaml", text, strlen(text), c))
		fail_msg("config: %s", qerr_detail());
	o.c = *c;
	o.t = vocab;
	o.prompt_family = PROMPT_PLAIN;
	o.ctx_len = ctx_len;
	o.io.send = io_send;
	o.io.now_ms = io_now;
	clock_ms = 1000000;
	assert_int_equal(sched_new(&o, &s), 0);
	/* past the grace for workers: a valid Ask is refused NO_CAPACITY */
	clock_ms += 3600 * 1000;
	return s;
}

/* An Ask with p through the scheduler: its reply's error, "" when the
 * fields passed (refused only as no worker is registered). */
static void co(sched *s, const Quorum__SamplingParams *p, char *out,
	       size_t cap)
{
	static uint64_t rid;
	Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__Ask a = QUORUM__ASK__INIT;
	Quorum__ClientReply *r;
	wire_msg in = {0};
	uint8_t *b;
	size_t n;

	a.question.data = (uint8_t *)"What is 2 + 2?";
	a.question.len = strlen("What is 2 + 2?");
	a.params = (Quorum__SamplingParams *)p;
	q.version = WIRE_VERSION;
	q.request_id = ++rid;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	q.ask = &a;
	n = quorum__client_request__get_packed_size(&q);
	b = malloc(n + 1);
	quorum__client_request__pack(&q, b);
	in.id_len = 2;
	memcpy(in.id, "cl", 2);
	in.data = b;
	in.len = n;
	free(reply_buf);
	reply_buf = NULL;
	sched_on_client(s, 0, &in);
	free(b);
	assert_non_null(reply_buf);
	r = quorum__client_reply__unpack(NULL, reply_len, reply_buf);
	assert_non_null(r);
	assert_int_equal(r->request_id, rid);
	if (r->status == QUORUM__STATUS__STATUS_NO_CAPACITY &&
	    !strcmp(r->error, "no worker is registered")) {
		*out = '\0';
	} else {
		if (r->status != QUORUM__STATUS__STATUS_BAD_REQUEST)
			fail_msg("status %s: %s", wire_status_name(r->status),
				 r->error ? r->error : "");
		snprintf(out, cap, "%s", r->error ? r->error : "");
	}
	quorum__client_reply__free_unpacked(r, NULL);
}

/* The Ask's params with setting id = value; 0 when the field's type
 * cannot hold it. */
static int co_params(int id, const char *value, Quorum__SamplingParams *p,
		     ProtobufCBinaryData *bin)
{
	long long v;

	quorum__sampling_params__init(p);
	switch (id) {
	case SC_S_N:
		if (!as_ll(value, &v) || v < 0 || v > UINT32_MAX)
			return 0;
		p->has_n = 1;
		p->n = (uint32_t)v;
		return 1;
	case SC_S_SEED:
		if (!as_ll(value, &v) || v < 0)
			return 0;
		p->has_seed = 1;
		p->seed = (uint64_t)v;
		return 1;
	case SC_S_TEMPERATURE:
		p->has_temperature = 1;
		return as_float(value, &p->temperature);
	case SC_S_TOP_P:
		p->has_top_p = 1;
		return as_float(value, &p->top_p);
	case SC_S_TOP_K:
		if (!as_ll(value, &v) || v < INT32_MIN || v > INT32_MAX)
			return 0;
		p->has_top_k = 1;
		p->top_k = (int32_t)v;
		return 1;
	case SC_S_MAX_NEW_TOKENS:
		if (!as_ll(value, &v) || v < 0 || v > UINT32_MAX)
			return 0;
		p->has_max_new_tokens = 1;
		p->max_new_tokens = (uint32_t)v;
		return 1;
	case SC_S_MIN_P:
		p->has_min_p = 1;
		return as_float(value, &p->min_p);
	case SC_S_PRESENCE_PENALTY:
		p->has_presence_penalty = 1;
		return as_float(value, &p->presence_penalty);
	case SC_S_FREQUENCY_PENALTY:
		p->has_frequency_penalty = 1;
		return as_float(value, &p->frequency_penalty);
	case SC_S_LOGIT_BIAS:
		p->logit_bias = (char *)value;
		return 1;
	case SC_S_TOP_LOGPROBS:
		if (!as_ll(value, &v) || v < 0 || v > UINT32_MAX)
			return 0;
		p->has_top_logprobs = 1;
		p->top_logprobs = (uint32_t)v;
		return 1;
	case SC_S_STOP:
		p->stop = (char *)value;
		return 1;
	case SC_S_VOTE:
		p->vote = (char *)value;
		return 1;
	case SC_S_STOP_STRINGS:
		bin->data = (uint8_t *)value;
		bin->len = strlen(value);
		p->stop_strings = bin;
		p->n_stop_strings = 1;
		return 1;
	default:
		return 0;
	}
}

/* ---- the engine ---------------------------------------------------------- */

/* sc_params_check of the defaults with setting id = value: "" or the
 * message; 0 when the struct's field cannot hold it. */
static int eng(int id, const char *value, char *out, size_t cap)
{
	sc_params p = SC_PARAMS_DEFAULTS;
	long long v;

	switch (id) {
	case SC_S_N:
	case SC_S_TOP_K:
	case SC_S_MAX_NEW_TOKENS:
	case SC_S_CONF_WINDOW:
	case SC_S_TOP_LOGPROBS:
		if (!as_ll(value, &v) || v < INT_MIN || v > INT_MAX ||
		    (id == SC_S_CONF_WINDOW && v == 0)) /* 0: the default */
			return 0;
		*(id == SC_S_N ? &p.n : id == SC_S_TOP_K ? &p.sp.top_k
			: id == SC_S_MAX_NEW_TOKENS ? &p.max_new
			: id == SC_S_TOP_LOGPROBS ? &p.top_logprobs
						    : &p.conf_window) = (int)v;
		break;
	case SC_S_TEMPERATURE:
		if (!as_float(value, &p.sp.temperature))
			return 0;
		break;
	case SC_S_TOP_P:
		if (!as_float(value, &p.sp.top_p))
			return 0;
		break;
	case SC_S_MIN_P:
		if (!as_float(value, &p.sp.min_p))
			return 0;
		break;
	case SC_S_PRESENCE_PENALTY:
		if (!as_float(value, &p.presence_penalty))
			return 0;
		break;
	case SC_S_FREQUENCY_PENALTY:
		if (!as_float(value, &p.frequency_penalty))
			return 0;
		break;
	default:
		return 0;
	}
	if (sc_params_check(&p)) {
		snprintf(out, cap, "%s", qerr_detail());
		return 1;
	}
	*out = '\0';
	return 1;
}

/* ---- the config ---------------------------------------------------------- */

/* cfg_parse with sampling.KEY: value: "" or the message after
 * "t.yaml:L:C: sampling."; 0 when the config cannot hold the value. */
static int conf(const char *key, const char *value, int max_n, char *out,
		size_t cap)
{
	char text[512];
	const char *d, *m = NULL;
	cfg *c = NULL;
	long long v;

	char *end;

	/* a number YAML reads otherwise than written (" 0.5", hex) */
	strtod(value, &end);
	if (end != value && !*end &&
	    (isspace((unsigned char)value[0]) || strpbrk(value, "xX")))
		return 0;
	if (!strcmp(key, "seed") && !as_ll(value, &v))
		return 0;
	if ((!strcmp(key, "n") || !strcmp(key, "top_k") ||
	     !strcmp(key, "max_new_tokens")) && !as_ll(value, &v))
		return 0;
	snprintf(text, sizeof(text), "model: {path: m.gguf}\ncluster: {name: "
		 "c}\nlimits: {max_n: %d}\nsampling:\n  %s%s: %s\n", max_n,
		 strcmp(key, "n") ? "n: 1\n  " : "", key, value);
	if (!cfg_parse("t.yaml", text, strlen(text), &c)) {
		cfg_free(&c);
		*out = '\0';
		return 1;
	}
	d = qerr_detail();
	if (strncmp(d, "t.yaml:", 7) || !(m = strstr(d, ": sampling.")))
		fail_msg("config message '%s'", d);
	snprintf(out, cap, "%s", m + strlen(": sampling."));
	return 1;
}

/* ---- the table ----------------------------------------------------------- */

/* 1 when the HTTP API's own range decides the row at the gateway (see
 * policy): a negative seed (taken), a temperature over 2 (refused). */
static int gw_policy(const struct row *r)
{
	return (r->id == SC_S_SEED && r->value[0] == '-') ||
	       (r->id == SC_S_TEMPERATURE && strtod(r->value, NULL) >
						     OPENAI_TEMPERATURE_MAX);
}

static void check(const char *where, const struct row *r, const char *got)
{
	if (r->msg ? strcmp(got, r->msg) : *got != '\0')
		fail_msg("%s: %s = '%s': got '%s', want %s%s%s", where,
			 sc_params_setting(r->id)->name, r->value, got,
			 r->msg ? "'" : "", r->msg ? r->msg : "accepted",
			 r->msg ? "'" : "");
}

static void table(void **state)
{
	cfg *c = NULL;
	sched *s = new_sched(&c, SC_N_MAX, SC_MAX_NEW_MAX);
	int seen[5] = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		Quorum__SamplingParams p;
		ProtobufCBinaryData bin;
		char got[512], json[256], want[600];
		const char *param;

		/* the CLI: the first line of the usage error */
		cli(r->id, r->value, got, sizeof(got));
		snprintf(want, sizeof(want), "quorum run: ");
		if (*got && strncmp(got, want, strlen(want)))
			fail_msg("cli: '%s'", got);
		check("cli", r, *got ? got + strlen(want) : got);
		seen[0]++;
		/* (JSON holds no number as written with a space before it
		 * or in hex: the text doors alone see those) */
		if (names[r->id].json && !gw_policy(r) &&
		    (names[r->id].quote || (!isspace((unsigned char)r->value[0]) &&
					    !strpbrk(r->value, "xX")))) {
			snprintf(json, sizeof(json), names[r->id].quote
				 ? "\"%s\"" : "%s", r->value);
			if (gw(names[r->id].json, json, SC_N_MAX, got,
			       sizeof(got), &param)) {
				assert_string_equal(param, names[r->id].json);
			} else {
				*got = '\0';
			}
			{
				/* the one message, its setting said as the
				 * request's field ("max_tokens = 0: ...") */
				struct row g = *r;
				char said[512];
				size_t k = strlen(sc_params_setting(r->id)->name);

				if (r->msg && !strncmp(r->msg, sc_params_setting(
					r->id)->name, k)) {
					snprintf(said, sizeof(said), "%s%s",
						 names[r->id].json, r->msg + k);
					g.msg = said;
				}
				check("gateway", &g, got);
			}
			seen[1]++;
		}
		if (co_params(r->id, r->value, &p, &bin)) {
			co(s, &p, got, sizeof(got));
			check("coordinator", r, got);
			seen[2]++;
		}
		if (eng(r->id, r->value, got, sizeof(got))) {
			check("engine", r, got);
			seen[3]++;
		}
		if (names[r->id].yaml &&
		    conf(names[r->id].yaml, r->value, SC_N_MAX, got,
			 sizeof(got))) {
			/* "t.yaml:L:C: sampling." + the message */
			check("config", r, got);
			seen[4]++;
		}
	}
	/* every entry point was asked */
	for (int i = 0; i < 5; i++)
		assert_true(seen[i] > 10);
	sched_free(&s);
	cfg_free(&c);
}

/* The policy bounds of a cluster, on top of the contract: the same
 * message from the gateway, the coordinator and the config. */
static void policy(void **state)
{
	static const char over_n[] = "n = 17: over this cluster's "
				     "limits.max_n (16)";
	cfg *c = NULL;
	sched *s = new_sched(&c, 16, 4096);
	Quorum__SamplingParams p;
	ProtobufCBinaryData bin;
	char got[512];
	const char *param;

	(void)state;
	assert_int_equal(gw("n", "17", 16, got, sizeof(got), &param), -1);
	assert_string_equal(got, over_n);
	assert_string_equal(param, "n");
	assert_int_equal(gw("n", "16", 16, got, sizeof(got), &param), 0);
	/* the contract comes first */
	assert_int_equal(gw("n", "0", 16, got, sizeof(got), &param), -1);
	assert_string_equal(got, "n = 0: must be an integer in 1..65536");
	co_params(SC_S_N, "17", &p, &bin);
	co(s, &p, got, sizeof(got));
	assert_string_equal(got, over_n);
	co_params(SC_S_N, "16", &p, &bin);
	co(s, &p, got, sizeof(got));
	assert_string_equal(got, "");
	assert_int_equal(conf("n", "17", 16, got, sizeof(got)), 1);
	assert_string_equal(got, over_n + 0);
	/* the model's context (the coordinator's; 4096 here) */
	co_params(SC_S_MAX_NEW_TOKENS, "4097", &p, &bin);
	co(s, &p, got, sizeof(got));
	assert_string_equal(got, "max_new_tokens = 4097: over the model's "
			    "context (4096 tokens)");
	co_params(SC_S_MAX_NEW_TOKENS, "4096", &p, &bin);
	co(s, &p, got, sizeof(got));
	assert_string_equal(got, "");
	/* the HTTP API: OpenAI's ranges, in sc/params' words */
	assert_int_equal(gw("temperature", "1000000", 16, got, sizeof(got),
			    &param), -1);
	assert_string_equal(got, "temperature = 1e+06: must be a number in "
			    "[0, 2] (the HTTP API's range)");
	assert_string_equal(param, "temperature");
	assert_int_equal(gw("temperature", "2", 16, got, sizeof(got), &param),
			 0);
	{
		static const char body[] = "{\"prompt\":\"q\",\"seed\":-1}";
		openai_req r;

		/* any int64: its two's complement, the same every time */
		assert_int_equal(openai_parse(0, body, strlen(body), 16, &r, got,
					     sizeof(got), &param), 0);
		assert_true((r.given & SC_BIT(SC_S_SEED)) && r.p.seed == UINT64_MAX);
		openai_req_free(&r);
	}
	assert_int_equal(gw("seed", "-9223372036854775808", 16, got,
			    sizeof(got), &param), 0);
	sched_free(&s);
	cfg_free(&c);
}

/* A value of the wrong form: the setting's message, the value shown as
 * given (text on the command line, JSON in the gateway). */
static void wrong_type(void **state)
{
	char got[512];
	const char *param;

	(void)state;
	cli(SC_S_TOP_K, "abc", got, sizeof(got));
	assert_string_equal(got, "quorum run: top_k = abc: must be an "
			    "integer in 0..16777216");
	assert_int_equal(gw("top_k", "\"abc\"", 64, got, sizeof(got), &param),
			 -1);
	assert_string_equal(got, "top_k = \"abc\": must be an integer in "
			    "0..16777216");
	cli(SC_S_N, "2.5", got, sizeof(got));
	assert_string_equal(got, "quorum run: n = 2.5: must be an integer in "
			    "1..65536");
	assert_int_equal(gw("n", "2.5", 64, got, sizeof(got), &param), -1);
	assert_string_equal(got, "n = 2.5: must be an integer in 1..65536");
	/* decimal only, as the config and the gateway read it */
	cli(SC_S_SEED, "0x10", got, sizeof(got));
	assert_string_equal(got, "quorum run: seed = 0x10: must be an integer "
			    "in 0..18446744073709551615");
	assert_int_equal(gw("ignore_eos", "1", 64, got, sizeof(got), &param),
			 -1);
	assert_string_equal(got, "ignore_eos = 1: must be true or false");
	/* five stop strings: the setting stop_strings, said as the field */
	assert_int_equal(gw("stop", "[\"a\",\"b\",\"c\",\"d\",\"e\"]", 64, got,
			    sizeof(got), &param), -1);
	assert_string_equal(got, "stop: must be at most 4 strings of "
			    "1..64 bytes without NUL");
	{
		sampflags f;
		const char *five[] = {"a", "b", "c", "d", "e"};
		int saved = dup(2), null = open("/dev/null", O_WRONLY);

		sampflags_init(&f, "ask", SF_ASK);
		fflush(stderr);
		dup2(null, 2);
		for (int i = 0; i < 4; i++)
			assert_int_equal(sampflags_opt(&f, SF_CODE(
				SC_S_STOP_STRINGS), five[i]), 0);
		assert_int_equal(sampflags_opt(&f, SF_CODE(SC_S_STOP_STRINGS),
					       five[4]), 2);
		dup2(saved, 2);
		close(saved);
		close(null);
		assert_string_equal(qerr_detail(), "stop_strings: must be at "
				    "most 4 strings of 1..64 bytes without "
				    "NUL");
		/* a flag ask does not take */
		assert_int_equal(sampflags_opt(&f, SF_CODE(SC_S_MODE), "reset"),
				 -1);
	}
}

/* The defaults: SC_PARAMS_DEFAULTS, the CLI's and the config's. */
static void defaults(void **state)
{
	const sc_params d = SC_PARAMS_DEFAULTS;
	sampflags f;
	cfg *c = NULL;
	const char *text = "model: {path: m.gguf}\ncluster: {name: c}\n";

	(void)state;
	assert_int_equal(d.n, 8);
	assert_true(d.sp.temperature == 0.7f);
	assert_int_equal(d.sp.top_k, 40);
	assert_true(d.sp.top_p == 0.95f);
	assert_int_equal(d.max_new, 256);
	assert_true(d.seed == 0);
	assert_int_equal(d.mode, SC_BATCHED);
	assert_int_equal(d.stop.kind, STOP_EXACT);
	assert_int_equal(d.vote, SC_VOTE_MAJORITY);
	assert_int_equal(sc_params_check(&d), 0);
	sampflags_init(&f, "run", SF_RUN);
	assert_int_equal(f.p.n, d.n);
	assert_true(f.p.sp.temperature == d.sp.temperature);
	assert_int_equal(f.p.sp.top_k, d.sp.top_k);
	assert_true(f.p.sp.top_p == d.sp.top_p);
	assert_int_equal(f.p.max_new, d.max_new);
	assert_int_equal(f.p.stop.kind, d.stop.kind);
	assert_int_equal(cfg_parse("t.yaml", text, strlen(text), &c), 0);
	assert_int_equal(c->sampling.p.n, d.n);
	assert_true(c->sampling.p.sp.temperature == d.sp.temperature);
	assert_int_equal(c->sampling.p.sp.top_k, d.sp.top_k);
	assert_true(c->sampling.p.sp.top_p == d.sp.top_p);
	assert_int_equal(c->sampling.p.max_new, d.max_new);
	assert_true(c->sampling.p.seed == d.seed);
	cfg_free(&c);
}

/* The gateway's logit_bias: OpenAI's object of token ids (as strings)
 * to biases, into the setting; a bad one refused in its words, shown as
 * given; an id past the model's vocabulary by the coordinator. */
static void logit_bias_json(void **state)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{"{\"15\": -100, \"3\": 2.5}", NULL},
		{"{}", NULL},
		{"{\"15\": 101}", "logit_bias = {\"15\":101}: " BIAS_MUST},
		{"{\"x\": 1}", "logit_bias = {\"x\":1}: " BIAS_MUST},
		{"{\"-1\": 1}", "logit_bias = {\"-1\":1}: " BIAS_MUST},
		{"{\"1\": \"5\"}", "logit_bias = {\"1\":\"5\"}: " BIAS_MUST},
		{"[1, 2]", "logit_bias = [1,2]: " BIAS_MUST},
	};
	char msg[512], body[256];
	const char *param;
	openai_req r;
	cfg *c = NULL;
	sched *s;
	sc_params p = SC_PARAMS_DEFAULTS;
	Quorum__SamplingParams m;
	spwire_buf buf;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		int rc = gw("logit_bias", cases[i].json, SC_N_MAX, msg,
			    sizeof(msg), &param);

		if (cases[i].msg) {
			assert_int_equal(rc, -1);
			assert_string_equal(param, "logit_bias");
			assert_string_equal(msg, cases[i].msg);
		} else {
			assert_int_equal(rc, 0);
		}
	}
	snprintf(body, sizeof(body), "{\"prompt\":\"q\",\"logit_bias\":"
		 "{\"15\": -100, \"3\": 2.5}}");
	assert_int_equal(openai_parse(0, body, strlen(body), 8, &r, msg,
				      sizeof(msg), &param), 0);
	assert_true(r.given & SC_BIT(SC_S_LOGIT_BIAS));
	assert_int_equal(r.p.logit_bias.n, 2);
	assert_int_equal(r.p.logit_bias.id[0], 3);
	assert_true(r.p.logit_bias.bias[0] == 2.5f);
	assert_int_equal(r.p.logit_bias.id[1], 15);
	assert_true(r.p.logit_bias.bias[1] == -100.0f);
	openai_req_free(&r);
	/* the coordinator: ids within its model's vocabulary */
	s = new_sched(&c, SC_N_MAX, SC_MAX_NEW_MAX);
	assert_int_equal(sc_params_parse(SC_S_LOGIT_BIAS, "3:1,16777215:-5",
					 &p), 0);
	spwire_encode(&p, SC_BIT(SC_S_LOGIT_BIAS), &m, &buf);
	co(s, &m, msg, sizeof(msg));
	assert_non_null(strstr(msg, "logit_bias: token 16777215 is not in "
			       "the model's vocabulary"));
	sched_free(&s);
	cfg_free(&c);
}

/* top_logprobs through its doors beside the table's: the chat field
 * (sc/params' words, and only with logprobs: true, as OpenAI), the
 * completions' legacy logprobs K (0..5, the HTTP API's range), and the
 * CLI's --top-logprobs, which brings --logprobs with it. */
static void top_logprobs_doors(void **state)
{
	static const struct {
		int chat;
		const char *fields, *param, *msg;
		int top;
	} cases[] = {
		{1, "\"logprobs\":true,\"top_logprobs\":3", NULL, NULL, 3},
		{1, "\"logprobs\":true,\"top_logprobs\":0", NULL, NULL, 0},
		{1, "\"logprobs\":true,\"top_logprobs\":21", "top_logprobs",
		 "top_logprobs = 21: must be an integer in 0..20", 0},
		{1, "\"logprobs\":true,\"top_logprobs\":\"3\"",
		 "top_logprobs", "top_logprobs = \"3\": must be an integer in "
		 "0..20", 0},
		{1, "\"top_logprobs\":2", "top_logprobs",
		 "'top_logprobs' needs 'logprobs': true", 0},
		{1, "\"logprobs\":false,\"top_logprobs\":2", "top_logprobs",
		 "'top_logprobs' needs 'logprobs': true", 0},
		{0, "\"logprobs\":5", NULL, NULL, 5},
		{0, "\"logprobs\":0", NULL, NULL, 0},
		{0, "\"logprobs\":6", "logprobs", "logprobs = 6: must be an "
		 "integer in 0..5 (the completions API's range: alternatives "
		 "per token)", 0},
		{0, "\"logprobs\":true", "logprobs", "logprobs = true: must be "
		 "an integer in 0..5 (the completions API's range: "
		 "alternatives per token)", 0},
		{0, "\"logprobs\":2,\"top_logprobs\":2", "top_logprobs",
		 "unknown field 'top_logprobs' for /v1/completions", 0},
	};
	char body[256], msg[512];
	const char *param;
	openai_req r;
	sampflags f;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		int rc;

		snprintf(body, sizeof(body), cases[i].chat
			 ? "{\"messages\":[{\"role\":\"user\",\"content\":"
			   "\"q\"}],%s}" : "{\"prompt\":\"q\",%s}",
			 cases[i].fields);
		rc = openai_parse(cases[i].chat, body, strlen(body), 16, &r,
				  msg, sizeof(msg), &param);
		if (cases[i].msg) {
			if (!rc || strncmp(msg, cases[i].msg, strlen(cases[i].msg)))
				fail_msg("%s: got %d '%s'", body, rc, rc ? msg : "");
			assert_string_equal(param, cases[i].param);
			continue;
		}
		if (rc)
			fail_msg("%s: %s", body, msg);
		assert_int_equal(r.logprobs, 1);
		assert_int_equal(r.p.top_logprobs, cases[i].top);
		assert_int_equal(!!(r.given & SC_BIT(SC_S_TOP_LOGPROBS)),
				 cases[i].top > 0);
		openai_req_free(&r);
	}
	/* the coordinator: a sample's alternatives must fit its message */
	{
		cfg *c = NULL;
		sched *s = new_sched(&c, SC_N_MAX, SC_MAX_NEW_MAX);
		Quorum__SamplingParams m;
		sc_params p = SC_PARAMS_DEFAULTS;
		spwire_buf buf;

		p.logprobs = 1;
		p.top_logprobs = 20;
		p.max_new = 4096;
		spwire_encode(&p, SC_BIT(SC_S_LOGPROBS) |
			      SC_BIT(SC_S_TOP_LOGPROBS) |
			      SC_BIT(SC_S_MAX_NEW_TOKENS), &m, &buf);
		co(s, &m, msg, sizeof(msg));
		assert_string_equal(msg, "");
		p.max_new = 1 << 20;
		spwire_encode(&p, SC_BIT(SC_S_LOGPROBS) |
			      SC_BIT(SC_S_TOP_LOGPROBS) |
			      SC_BIT(SC_S_MAX_NEW_TOKENS), &m, &buf);
		co(s, &m, msg, sizeof(msg));
		assert_non_null(strstr(msg, "top_logprobs = 20 with "
				       "max_new_tokens = 1048576: a sample's "
				       "result could take "));
		assert_non_null(strstr(msg, "over "
				       "limits.max_message_bytes (16777216)"));
		sched_free(&s);
		cfg_free(&c);
	}
	sampflags_init(&f, "ask", SF_ASK);
	assert_int_equal(sampflags_opt(&f, SF_CODE(SC_S_TOP_LOGPROBS), "4"), 0);
	assert_int_equal(f.p.top_logprobs, 4);
	assert_int_equal(f.p.logprobs, 1);
	assert_true(f.given & SC_BIT(SC_S_LOGPROBS));
	/* eval-set reports no tokens: no flag */
	sampflags_init(&f, "eval-set", SF_EVALSET);
	assert_int_equal(sampflags_opt(&f, SF_CODE(SC_S_TOP_LOGPROBS), "4"),
			 -1);
}

/* The wire codec (net/spwire): every field of SamplingParams is a
 * setting of the same name (a new field without one would never be
 * read), and each setting crosses a packed message unchanged; a field a
 * peer sends out of range is refused in sc/params' words. */
static void wire(void **state)
{
	const ProtobufCMessageDescriptor *md =
		&quorum__sampling_params__descriptor;
	unsigned want = SC_BIT(SC_S_N) | SC_BIT(SC_S_SEED) |
			SC_BIT(SC_S_TEMPERATURE) | SC_BIT(SC_S_TOP_K) |
			SC_BIT(SC_S_TOP_P) | SC_BIT(SC_S_MAX_NEW_TOKENS) |
			SC_BIT(SC_S_IGNORE_EOS) | SC_BIT(SC_S_STOP) |
			SC_BIT(SC_S_VOTE) | SC_BIT(SC_S_STOP_STRINGS) |
			SC_BIT(SC_S_LOGPROBS) | SC_BIT(SC_S_ANSWER) |
			SC_BIT(SC_S_GRAMMAR) | SC_BIT(SC_S_MIN_P) |
			SC_BIT(SC_S_PRESENCE_PENALTY) |
			SC_BIT(SC_S_FREQUENCY_PENALTY) |
			SC_BIT(SC_S_LOGIT_BIAS) | SC_BIT(SC_S_TOP_LOGPROBS);
	sc_params a = SC_PARAMS_DEFAULTS, b = SC_PARAMS_DEFAULTS;
	Quorum__SamplingParams m, *u;
	spwire_buf buf;
	unsigned given = 0;
	uint8_t packed[1024];
	size_t n;

	(void)state;
	assert_int_equal(spwire_fields(), want);
	/* a decode job carries every setting the sampler reads */
	assert_int_equal(SPWIRE_JOB & want, SPWIRE_JOB);
	assert_int_equal(want & ~SPWIRE_JOB,
			 SC_BIT(SC_S_STOP) | SC_BIT(SC_S_VOTE));
	assert_int_equal(md->n_fields, __builtin_popcount(want));
	/* nothing given: no field, the message can be left out */
	assert_int_equal(spwire_encode(&a, 0, &m, &buf), 0);
	a.n = 65536;
	a.seed = UINT64_MAX;
	a.sp.temperature = 1.3f;
	a.sp.top_k = 0;
	a.sp.top_p = 1e-10f;
	a.max_new = 1048576;
	a.ignore_eos = 1;
	a.logprobs = 1;
	a.top_logprobs = 20;
	a.vote = SC_VOTE_CONFIDENCE;
	a.sp.min_p = 0.05f;
	a.presence_penalty = -1.25f;
	a.frequency_penalty = 0.1f;
	assert_int_equal(sc_params_parse(SC_S_LOGIT_BIAS, "7:0.1,3:-100", &a),
			 0);
	assert_int_equal(sc_params_parse(SC_S_STOP, "beta:0.9", &a), 0);
	assert_int_equal(sc_params_parse(SC_S_ANSWER, "choice:A=1|B=2", &a),
			 0);
	assert_int_equal(sc_params_parse(SC_S_GRAMMAR, "root ::= [0-9]+\n",
					 &a), 0);
	assert_int_equal(sc_params_stop_strs_add(&a.stop_strs, "\n\n", 2), 0);
	assert_int_equal(sc_params_stop_strs_add(&a.stop_strs, "x\xff", 2), 0);
	assert_int_equal(spwire_encode(&a, SC_ALL_SETTINGS, &m, &buf), 18);
	n = quorum__sampling_params__get_packed_size(&m);
	assert_true(n < sizeof(packed));
	quorum__sampling_params__pack(&m, packed);
	u = quorum__sampling_params__unpack(NULL, n, packed);
	assert_non_null(u);
	assert_int_equal(spwire_decode(u, &b, &given), 0);
	assert_int_equal(given, want);
	assert_int_equal(b.n, a.n);
	assert_true(b.seed == a.seed);
	assert_true(b.sp.temperature == a.sp.temperature);
	assert_int_equal(b.sp.top_k, a.sp.top_k);
	assert_true(b.sp.top_p == a.sp.top_p);
	assert_int_equal(b.max_new, a.max_new);
	assert_int_equal(b.ignore_eos, 1);
	assert_int_equal(b.logprobs, 1);
	assert_int_equal(b.top_logprobs, 20);
	assert_true(b.sp.min_p == a.sp.min_p);
	assert_true(b.presence_penalty == a.presence_penalty);
	assert_true(b.frequency_penalty == a.frequency_penalty);
	/* sorted by id; 0.1 as the same float */
	assert_int_equal(b.logit_bias.n, 2);
	assert_int_equal(b.logit_bias.id[0], 3);
	assert_int_equal(b.logit_bias.id[1], 7);
	assert_true(b.logit_bias.bias[0] == -100.0f);
	assert_true(b.logit_bias.bias[1] == 0.1f);
	assert_int_equal(b.vote, SC_VOTE_CONFIDENCE);
	assert_int_equal(b.stop.kind, STOP_BETA);
	assert_true(b.stop.threshold == 0.9);
	assert_int_equal(b.stop_strs.n, 2);
	assert_memory_equal(b.stop_strs.s[1], "x\xff", 2);
	assert_int_equal(b.answer.kind, ANSWER_CHOICE);
	assert_string_equal(b.answer.pattern, "A=1|B=2");
	/* the grammar's text borrowed from the message (decode's caller
	 * copies it): compare before it goes */
	assert_string_equal(b.grammar, "root ::= [0-9]+\n");
	quorum__sampling_params__free_unpacked(u, NULL);
	/* the engine's settings never travel: b keeps its own */
	assert_int_equal(b.mode, SC_BATCHED);
	/* a peer's bad value: the setting's one message */
	quorum__sampling_params__init(&m);
	m.has_top_k = 1;
	m.top_k = -1;
	b = (sc_params)SC_PARAMS_DEFAULTS;
	assert_int_equal(spwire_decode(&m, &b, &given), QERR_RANGE);
	assert_string_equal(qerr_detail(),
			    "top_k = -1: must be an integer in 0..16777216");
	quorum__sampling_params__init(&m);
	m.vote = "plurality";
	assert_int_equal(spwire_decode(&m, &b, NULL), QERR_RANGE);
	assert_string_equal(qerr_detail(), "vote = plurality: must be "
			    "majority or confidence");
	/* an empty grammar is none of a peer's to give: leaving it out
	 * keeps the cluster's (the encoder never sends one) */
	quorum__sampling_params__init(&m);
	m.grammar = "";
	b = (sc_params)SC_PARAMS_DEFAULTS;
	assert_int_equal(spwire_decode(&m, &b, NULL), QERR_RANGE);
	assert_string_equal(qerr_detail(), "grammar = \"\": must be a GBNF "
			    "grammar (llama.cpp's)");
}

static int group_setup(void **state)
{
	gguf_file *g = NULL;

	(void)state;
	if (gguf_open(tu_data("data/tokenizer-vectors/ggml-vocab-gpt-2.gguf"),
		      &g) ||
	    tok_load(g, &vocab)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		gguf_close(&g);
		return -1;
	}
	gguf_close(&g);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	tok_free(&vocab);
	free(reply_buf);
	return 0;
}

/* The constraints (text/constrain.h) through both doors: the CLI's flags
 * and the HTTP fields make the same grammar text as the one home does,
 * one constraint per request, errors naming the field. */
static void constraints(void **state)
{
	static const char *const yn[] = {"yes", "no"};
	char *want = NULL, got[512];
	const char *param;
	sampflags f;
	openai_req r;
	int rc;

	(void)state;
	/* the CLI: --regex, --choice (repeated) */
	assert_int_equal(constrain_regex("[0-9]+ apples", &want), 0);
	sampflags_init(&f, "run", SF_RUN);
	assert_int_equal(sampflags_opt(&f, SF_REGEX, "[0-9]+ apples"), 0);
	assert_true(f.given & SC_BIT(SC_S_GRAMMAR));
	assert_string_equal(f.p.grammar, want);
	free(want);
	assert_int_equal(constrain_choice(yn, 2, &want), 0);
	sampflags_init(&f, "run", SF_RUN);
	assert_int_equal(sampflags_opt(&f, SF_CHOICE, "yes"), 0);
	assert_int_equal(sampflags_opt(&f, SF_CHOICE, "no"), 0);
	assert_string_equal(f.p.grammar, want);
	/* the gateway: vLLM's guided_choice, the same text */
	{
		static const char body[] = "{\"prompt\":\"q\",\"guided_choice\":"
					   "[\"yes\",\"no\"]}";

		assert_int_equal(openai_parse(0, body, strlen(body), 16, &r, got,
					     sizeof(got), &param), 0);
		assert_string_equal(r.p.grammar, want);
		openai_req_free(&r);
	}
	free(want);
	/* regex and guided_regex; response_format text is no constraint */
	assert_int_equal(constrain_regex("a|b", &want), 0);
	assert_int_equal(gw("regex", "\"a|b\"", 16, got, sizeof(got), &param),
			 0);
	{
		static const char body[] = "{\"prompt\":\"q\",\"guided_regex\":"
					   "\"a|b\",\"response_format\":{\"type\""
					   ":\"text\"}}";

		assert_int_equal(openai_parse(0, body, strlen(body), 16, &r, got,
					     sizeof(got), &param), 0);
		assert_string_equal(r.p.grammar, want);
		openai_req_free(&r);
	}
	free(want);
	/* llama.cpp's json_schema and vLLM's guided_json (also as text) */
	{
		json_t *js = json_loads("{\"type\":\"integer\"}", 0, NULL);
		static const char *const bodies[] = {
			"{\"prompt\":\"q\",\"json_schema\":{\"type\":\"integer\"}}",
			"{\"prompt\":\"q\",\"guided_json\":\"{\\\"type\\\":"
			"\\\"integer\\\"}\"}",
			"{\"prompt\":\"q\",\"response_format\":{\"type\":"
			"\"json_schema\",\"json_schema\":{\"name\":\"n\","
			"\"schema\":{\"type\":\"integer\"}}}}",
		};

		assert_int_equal(jschema_to_gbnf(js, &want), 0);
		for (size_t i = 0; i < 3; i++) {
			assert_int_equal(openai_parse(0, bodies[i],
						     strlen(bodies[i]), 16, &r,
						     got, sizeof(got), &param),
					 0);
			assert_string_equal(r.p.grammar, want);
			openai_req_free(&r);
		}
		free(want);
		json_decref(js);
	}
	/* refusals, each naming its field */
	assert_int_equal(gw("regex", "\"(a\"", 16, got, sizeof(got), &param),
			 -1);
	assert_string_equal(param, "regex");
	assert_string_equal(got, "regex: pattern: unclosed '(' (at offset 2)");
	assert_int_equal(gw("guided_choice", "[]", 16, got, sizeof(got),
			    &param), -1);
	assert_string_equal(param, "guided_choice");
	assert_string_equal(got, "guided_choice: choice: 1..256 strings "
			    "expected (got 0)");
	assert_int_equal(gw("json_schema", "{\"type\":\"wood\"}", 16, got,
			    sizeof(got), &param), -1);
	assert_string_equal(param, "json_schema");
	assert_string_equal(got, "json_schema: schema.type: \"wood\": not a "
			    "JSON schema type");
	/* a GBNF text is whole: empty is no grammar (as an empty grammar
	 * file), a NUL would have cut it short */
	assert_int_equal(gw("grammar", "\"\"", 16, got, sizeof(got), &param),
			 -1);
	assert_string_equal(param, "grammar");
	assert_string_equal(got, "grammar: grammar = \"\": must be a GBNF "
			    "grammar (llama.cpp's)");
	{
		/* (jansson refuses \u0000 in a body; a caller's own JSON
		 * value may hold one) */
		json_t *nul = json_stringn("root ::= \"a\"\0x", 15);
		char *g = NULL;

		assert_int_equal(constrain_gbnf(CONSTRAIN_GRAMMAR, nul, &g),
				 QERR_FORMAT);
		assert_null(g);
		assert_string_equal(qerr_detail(), "grammar: a string of GBNF "
				    "without NUL bytes expected");
		json_decref(nul);
	}
	{
		static const char body[] = "{\"prompt\":\"q\",\"grammar\":"
					   "\"root ::= \\\"a\\\"\",\"regex\":"
					   "\"a\"}";

		rc = openai_parse(0, body, strlen(body), 16, &r, got,
				  sizeof(got), &param);
		assert_int_equal(rc, -1);
		assert_string_equal(param, "regex");
		assert_string_equal(got, "give one of 'grammar' and 'regex' "
				    "(one constraint)");
	}
	/* the CLI: one kind per command line */
	sampflags_init(&f, "run", SF_RUN);
	assert_int_equal(sampflags_opt(&f, SF_REGEX, "a"), 0);
	{
		FILE *tmp = tmpfile();
		int saved = dup(2);
		size_t n;

		fflush(stderr);
		dup2(fileno(tmp), 2);
		rc = sampflags_opt(&f, SF_CHOICE, "b");
		fflush(stderr);
		dup2(saved, 2);
		close(saved);
		rewind(tmp);
		n = fread(got, 1, sizeof(got) - 1, tmp);
		got[n] = '\0';
		fclose(tmp);
		assert_int_equal(rc, 2);
		assert_non_null(strstr(got, "quorum run: --regex and --choice: "
				       "give one constraint"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table),
		cmocka_unit_test(policy),
		cmocka_unit_test(wrong_type),
		cmocka_unit_test(defaults),
		cmocka_unit_test(wire),
		cmocka_unit_test(logit_bias_json),
		cmocka_unit_test(top_logprobs_doors),
		cmocka_unit_test(constraints),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

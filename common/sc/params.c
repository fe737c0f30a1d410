/*
 * params — the settings table, checks and names of sc_params (see
 * params.h): the one place their limits and messages are written.
 */
#include "sc/params.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"
#include "text/gbnf.h"

static const sc_setting settings[SC_S_COUNT_] = {
	[SC_S_N] = {"n", SC_K_INT, 1, SC_N_MAX, 0, NULL},
	[SC_S_SEED] = {"seed", SC_K_U64, 0, 0, 0,
		       "an integer in 0..18446744073709551615"},
	[SC_S_TEMPERATURE] = {"temperature", SC_K_REAL, 0, HUGE_VAL, 0, NULL},
	[SC_S_TOP_K] = {"top_k", SC_K_INT, 0, SC_TOP_K_MAX, 0, NULL},
	[SC_S_TOP_P] = {"top_p", SC_K_REAL, 0, 1, 0, NULL},
	[SC_S_MAX_NEW_TOKENS] = {"max_new_tokens", SC_K_INT, 1, SC_MAX_NEW_MAX,
				 0, NULL},
	[SC_S_IGNORE_EOS] = {"ignore_eos", SC_K_BOOL, 0, 0, 0,
			     "true or false"},
	[SC_S_STOP] = {"stop", SC_K_TEXT, 0, 0, 0,
		       "none, exact, beta[:T] with T in (0.5, 1) or "
		       "window[:W] with W in 1..65536"},
	[SC_S_VOTE] = {"vote", SC_K_TEXT, 0, 0, 0, "majority or confidence"},
	[SC_S_STOP_STRINGS] = {"stop_strings", SC_K_STRS, 0, 0, 0,
			       "at most 4 strings of 1..64 bytes without NUL"},
	[SC_S_LOGPROBS] = {"logprobs", SC_K_BOOL, 0, 0, 0, "true or false"},
	[SC_S_MODE] = {"mode", SC_K_TEXT, 0, 0, 0, "reset, paged or batched"},
	[SC_S_CONF_WINDOW] = {"conf_window", SC_K_INT, 1, SC_CONF_WINDOW_MAX,
			      0, NULL},
	[SC_S_CONF_FILTER] = {"conf_filter", SC_K_TEXT, 0, 0, 0,
			      "W[:P] with warm-up W in 1..65536 and "
			      "percentile P in [0, 100]"},
	[SC_S_STOP_WAVES] = {"stop_waves", SC_K_INT, 0, STOP_WAVES_MAX, 0,
			     NULL},
	[SC_S_ANSWER] = {"answer", SC_K_TEXT, 0, 0, 0, ANSWER_LIST},
	[SC_S_GRAMMAR] = {"grammar", SC_K_TEXT, 0, 0, 0,
			  "a GBNF grammar (llama.cpp's)"},
	[SC_S_MIN_P] = {"min_p", SC_K_REAL, 0, 1, 0, NULL},
	[SC_S_PRESENCE_PENALTY] = {"presence_penalty", SC_K_REAL,
				   -SC_PENALTY_LIM, SC_PENALTY_LIM, 0, NULL},
	[SC_S_FREQUENCY_PENALTY] = {"frequency_penalty", SC_K_REAL,
				    -SC_PENALTY_LIM, SC_PENALTY_LIM, 0, NULL},
	[SC_S_LOGIT_BIAS] = {"logit_bias", SC_K_TEXT, 0, 0, 0,
			     "at most 64 pairs ID:BIAS, comma-separated, "
			     "each token id in 0..16777215 once and each "
			     "bias in [-100, 100]"},
	[SC_S_TOP_LOGPROBS] = {"top_logprobs", SC_K_INT, 0,
			       SC_TOP_LOGPROBS_MAX, 0, NULL},
};

_Static_assert(SC_VALUE_TEXT_MAX >= ANSWER_PATTERN_MAX + 8,
	       "an answer format's name fits a value's text");
_Static_assert(SC_S_COUNT_ <= 32, "a set of settings fits an unsigned");

const sc_setting *sc_params_setting(int id)
{
	return id >= 0 && id < SC_S_COUNT_ ? &settings[id] : NULL;
}

/* What a value of setting x must be, in words. */
static const char *must(const sc_setting *x, char *buf, size_t cap)
{
	if (x->must)
		return x->must;
	if (x->kind == SC_K_INT)
		snprintf(buf, cap, "an integer in %.0f..%.0f", x->min, x->max);
	else if (x->max == HUGE_VAL)
		snprintf(buf, cap, "a finite number >= %g", x->min);
	else
		snprintf(buf, cap, "a number in %s%g, %g]",
			 x->min_open ? "(" : "[", x->min, x->max);
	return buf;
}

int sc_params_check_fail(int id, const char *shown)
{
	const sc_setting *x = sc_params_setting(id);
	char b[64];

	if (!x)
		return qerr_fail(QERR_ARG, "unknown setting %d", id);
	if (!shown)
		return qerr_fail(QERR_RANGE, "%s: must be %s", x->name,
				 must(x, b, sizeof(b)));
	return qerr_fail(QERR_RANGE, "%s = %.80s: must be %s", x->name, shown,
			 must(x, b, sizeof(b)));
}

int sc_params_check_int(int id, long long v)
{
	const sc_setting *x = sc_params_setting(id);
	char shown[32];

	if (!x || (x->kind != SC_K_INT && x->kind != SC_K_U64))
		return qerr_fail(QERR_ARG, "setting %d is not an integer", id);
	if (x->kind == SC_K_U64 ? v >= 0
				: (double)v >= x->min && (double)v <= x->max)
		return 0;
	snprintf(shown, sizeof(shown), "%lld", v);
	return sc_params_check_fail(id, shown);
}

int sc_params_check_real(int id, double v)
{
	const sc_setting *x = sc_params_setting(id);
	char shown[40];

	if (!x || x->kind != SC_K_REAL)
		return qerr_fail(QERR_ARG, "setting %d is not a number", id);
	/* kept as a float: finite there too */
	if (isfinite(v) && isfinite((float)v) &&
	    (x->min_open ? v > x->min && (float)v > (float)x->min
			 : v >= x->min) &&
	    v <= x->max)
		return 0;
	/* the shortest that reads back as v (as a float where v is one: a
	 * setting off the wire): 1.0000001 is not shown as the bound it
	 * passes (1), nor -0.1f as -0.10000000149011612 */
	for (int prec = 6; prec <= 17; prec++) {
		double r;

		snprintf(shown, sizeof(shown), "%.*g", prec, v);
		r = strtod(shown, NULL);
		if (r == v || ((double)(float)v == v && (float)r == (float)v))
			break;
	}
	return sc_params_check_fail(id, shown);
}

/* The float holding real setting id of p. */
static float *real_of(int id, sc_params *p)
{
	switch (id) {
	case SC_S_TEMPERATURE: return &p->sp.temperature;
	case SC_S_TOP_P: return &p->sp.top_p;
	case SC_S_MIN_P: return &p->sp.min_p;
	case SC_S_PRESENCE_PENALTY: return &p->presence_penalty;
	default: return &p->frequency_penalty;
	}
}

static int bias_cmp(const void *a, const void *b)
{
	const int32_t *x = a, *y = b;

	return (x[0] > y[0]) - (x[0] < y[0]);
}

/* "ID:BIAS[,ID:BIAS...]" of logit_bias, sorted by id into *lb ("" or
 * "none": no bias). */
static int parse_bias(const char *s, sc_logit_bias *lb)
{
	int32_t pair[SC_LOGIT_BIAS_MAX][2]; /* id, index into bias[] */
	float bias[SC_LOGIT_BIAS_MAX];
	const char *c = s;
	int n = 0;

	if (!*s || !strcmp(s, "none")) {
		lb->n = 0;
		return 0;
	}
	for (;;) {
		char *end;
		long long id;
		double b;

		errno = 0;
		id = strtoll(c, &end, 10);
		if (errno || end == c || *c == '-' || *c == '+' || *c == ' ' ||
		    id > SC_LOGIT_BIAS_ID_MAX || *end != ':' ||
		    n == SC_LOGIT_BIAS_MAX)
			return sc_params_check_fail(SC_S_LOGIT_BIAS, s);
		c = end + 1;
		b = strtod(c, &end);
		if (end == c || *c == ' ' || !(b >= -SC_LOGIT_BIAS_LIM &&
						b <= SC_LOGIT_BIAS_LIM) ||
		    (*end && *end != ','))
			return sc_params_check_fail(SC_S_LOGIT_BIAS, s);
		pair[n][0] = (int32_t)id;
		pair[n][1] = n;
		bias[n++] = (float)b;
		if (!*end)
			break;
		c = end + 1;
	}
	qsort(pair, (size_t)n, sizeof(pair[0]), bias_cmp);
	for (int i = 1; i < n; i++)
		if (pair[i][0] == pair[i - 1][0])
			return sc_params_check_fail(SC_S_LOGIT_BIAS, s);
	lb->n = n;
	for (int i = 0; i < n; i++) {
		lb->id[i] = pair[i][0];
		lb->bias[i] = bias[pair[i][1]];
	}
	return 0;
}

/* logit_bias's canonical text ("none" for none): ids ascending, each
 * bias as the shortest %g that reads back as the same float. */
static const char *bias_name(const sc_logit_bias *lb, char *buf, size_t cap)
{
	size_t k = 0;

	if (!lb->n)
		snprintf(buf, cap, "none");
	for (int i = 0; i < lb->n && k < cap; i++) {
		char v[24];
		int prec = 6;

		do
			snprintf(v, sizeof(v), "%.*g", prec, lb->bias[i]);
		while ((float)strtod(v, NULL) != lb->bias[i] && ++prec < 10);
		k += (size_t)snprintf(buf + k, cap - k, "%s%d:%s",
				      i ? "," : "", lb->id[i], v);
	}
	return buf;
}

/* "W[:P]" of conf_filter */
static int parse_filter(const char *s, int *warm, double *pct)
{
	char *end;
	long w;
	double p = 10.0;

	errno = 0;
	w = strtol(s, &end, 10);
	if (end == s || errno || w < 1 || w > SC_N_MAX ||
	    (*end && *end != ':'))
		return sc_params_check_fail(SC_S_CONF_FILTER, s);
	if (*end == ':') {
		const char *ps = end + 1;

		p = strtod(ps, &end);
		if (end == ps || *end || !(p >= 0 && p <= 100))
			return sc_params_check_fail(SC_S_CONF_FILTER, s);
	}
	*warm = (int)w;
	*pct = p;
	return 0;
}

int sc_params_parse(int id, const char *s, sc_params *p)
{
	const sc_setting *x = sc_params_setting(id);
	char *end;
	long long iv = 0;
	unsigned long long uv;
	double d;
	int rc, m;

	if (!x || !s || !p)
		return qerr_fail(QERR_ARG, "sc_params_parse: bad argument");
	/* a number is the whole string: no space before it (strtoll and
	 * strtod would skip one, as no space after it is taken), a real in
	 * decimal (strtod would read "0x1p-1" too) */
	if ((x->kind == SC_K_INT || x->kind == SC_K_U64 ||
	     x->kind == SC_K_REAL) && (isspace((unsigned char)s[0]) ||
				       (x->kind == SC_K_REAL &&
					strpbrk(s, "xX"))))
		return sc_params_check_fail(id, s);
	switch (x->kind) {
	case SC_K_INT:
		errno = 0;
		iv = strtoll(s, &end, 10);
		if (errno || end == s || *end)
			return sc_params_check_fail(id, s);
		if ((rc = sc_params_check_int(id, iv)))
			return rc;
		break;
	case SC_K_U64:
		errno = 0;
		uv = strtoull(s, &end, 10);
		if (errno || end == s || *end || strchr(s, '-'))
			return sc_params_check_fail(id, s);
		p->seed = uv;
		return 0;
	case SC_K_REAL:
		errno = 0;
		d = strtod(s, &end);
		if (end == s || *end)
			return sc_params_check_fail(id, s);
		if ((rc = sc_params_check_real(id, d)))
			return rc;
		*real_of(id, p) = (float)d;
		return 0;
	case SC_K_BOOL:
		if (!strcmp(s, "true"))
			iv = 1;
		else if (strcmp(s, "false"))
			return sc_params_check_fail(id, s);
		if (id == SC_S_IGNORE_EOS)
			p->ignore_eos = (int)iv;
		else
			p->logprobs = (int)iv;
		return 0;
	case SC_K_STRS:
		return sc_params_stop_strs_add(&p->stop_strs, s, strlen(s));
	default:
		break;
	}
	switch (id) {
	case SC_S_N: p->n = (int)iv; return 0;
	case SC_S_TOP_K: p->sp.top_k = (int)iv; return 0;
	case SC_S_MAX_NEW_TOKENS: p->max_new = (int)iv; return 0;
	case SC_S_CONF_WINDOW: p->conf_window = (int)iv; return 0;
	case SC_S_STOP_WAVES: p->stop_waves = (int)iv; return 0;
	case SC_S_TOP_LOGPROBS: p->top_logprobs = (int)iv; return 0;
	case SC_S_STOP:
		if (stop_parse(s, &p->stop))
			return sc_params_check_fail(id, s);
		return 0;
	case SC_S_VOTE:
		if ((m = sc_params_vote_parse(s)) < 0)
			return sc_params_check_fail(id, s);
		p->vote = m;
		return 0;
	case SC_S_MODE:
		if ((m = sc_params_mode_parse(s)) < 0)
			return sc_params_check_fail(id, s);
		p->mode = m;
		return 0;
	case SC_S_CONF_FILTER:
		return parse_filter(s, &p->filter_warmup, &p->filter_pct);
	case SC_S_LOGIT_BIAS:
		return parse_bias(s, &p->logit_bias);
	case SC_S_GRAMMAR: {
		/* compiled once to check it: its own words say what is
		 * wrong ("grammar:3:7: undefined rule 'x'") */
		gbnf *g = NULL;
		size_t n = strlen(s);

		/* empty is no grammar: a request or peer that wants none
		 * leaves the setting out (and so keeps the cluster's), as an
		 * empty grammar file is refused, not taken as none */
		if (!n)
			return sc_params_check_fail(SC_S_GRAMMAR, "\"\"");
		if (gbnf_parse(s, n, &g)) {
			char why[300];

			snprintf(why, sizeof(why), "%s", qerr_detail());
			return qerr_fail(QERR_RANGE, "%s", why);
		}
		gbnf_free(&g);
		p->grammar = s;
		p->grammar_len = n;
		return 0;
	}
	case SC_S_ANSWER: {
		const char *why = NULL;
		answer_format f;

		if (answer_format_parse(s, &f, &why)) {
			/* a pattern PCRE2 refuses, bad options: their own
			 * words */
			if ((!strncmp(s, "regex:", 6) ||
			     !strncmp(s, "choice:", 7)) && why)
				return qerr_fail(QERR_RANGE, "answer = %.80s: %s",
						 s, why);
			return sc_params_check_fail(id, s);
		}
		p->answer = f;
		return 0;
	}
	default:
		return qerr_fail(QERR_ARG, "sc_params_parse: setting %d", id);
	}
}

int sc_params_set(int id, const sc_value *v, sc_params *p)
{
	const sc_setting *x = sc_params_setting(id);
	char b[48];

	if (!x || !v || !p)
		return qerr_fail(QERR_ARG, "sc_params_set: bad argument");
	switch (x->kind) {
	case SC_K_INT:
		snprintf(b, sizeof(b), "%lld", v->i);
		break;
	case SC_K_U64:
		p->seed = v->u;
		return 0;
	case SC_K_REAL:
		if (sc_params_check_real(id, v->d))
			return QERR_RANGE;
		*real_of(id, p) = (float)v->d;
		return 0;
	case SC_K_BOOL:
		snprintf(b, sizeof(b), "%s", v->i ? "true" : "false");
		break;
	case SC_K_STRS:
		return sc_params_stop_strs_add(&p->stop_strs, v->s, v->len);
	default:
		if (!v->s)
			return sc_params_check_fail(id, NULL);
		return sc_params_parse(id, v->s, p);
	}
	return sc_params_parse(id, b, p);
}

void sc_params_value(int id, const sc_params *p, sc_value *v, char *buf,
		      size_t cap)
{
	memset(v, 0, sizeof(*v));
	switch (id) {
	case SC_S_N: v->i = p->n; break;
	case SC_S_SEED: v->u = p->seed; break;
	case SC_S_TEMPERATURE: v->d = p->sp.temperature; break;
	case SC_S_TOP_K: v->i = p->sp.top_k; break;
	case SC_S_TOP_P: v->d = p->sp.top_p; break;
	case SC_S_MIN_P: v->d = p->sp.min_p; break;
	case SC_S_PRESENCE_PENALTY: v->d = p->presence_penalty; break;
	case SC_S_FREQUENCY_PENALTY: v->d = p->frequency_penalty; break;
	case SC_S_LOGIT_BIAS:
		v->s = bias_name(&p->logit_bias, buf, cap);
		break;
	case SC_S_MAX_NEW_TOKENS: v->i = p->max_new; break;
	case SC_S_IGNORE_EOS: v->i = !!p->ignore_eos; break;
	case SC_S_LOGPROBS: v->i = !!p->logprobs; break;
	case SC_S_TOP_LOGPROBS: v->i = p->top_logprobs; break;
	case SC_S_STOP_STRINGS: v->i = p->stop_strs.n; break;
	case SC_S_CONF_WINDOW: v->i = p->conf_window; break;
	case SC_S_STOP_WAVES: v->i = p->stop_waves; break;
	case SC_S_STOP:
		v->s = stop_name(&p->stop, buf, cap);
		break;
	case SC_S_VOTE:
		snprintf(buf, cap, "%s", sc_params_vote_name(p->vote));
		v->s = buf;
		break;
	case SC_S_MODE:
		snprintf(buf, cap, "%s", sc_params_mode_name(p->mode));
		v->s = buf;
		break;
	case SC_S_CONF_FILTER:
		snprintf(buf, cap, "%d:%g", p->filter_warmup, p->filter_pct);
		v->s = buf;
		break;
	case SC_S_ANSWER:
		v->s = answer_format_name(&p->answer, buf, cap);
		break;
	case SC_S_GRAMMAR:
		/* the text itself, borrowed (not buf: it is long) */
		v->s = p->grammar;
		v->len = p->grammar_len;
		break;
	default:
		break;
	}
}

int sc_params_n_limit(long long n, int max_n)
{
	if (n <= max_n)
		return 0;
	return qerr_fail(QERR_RANGE, "n = %lld: over this cluster's "
			 "limits.max_n (%d)", n, max_n);
}

int sc_params_max_new_limit(long long max_new, int ctx_len)
{
	if (max_new <= ctx_len)
		return 0;
	return qerr_fail(QERR_RANGE, "max_new_tokens = %lld: over the model's "
			 "context (%d tokens)", max_new, ctx_len);
}

int sc_params_vocab_limit(const sc_params *p, int vocab)
{
	for (int i = 0; i < p->logit_bias.n; i++)
		if (p->logit_bias.id[i] >= vocab)
			return qerr_fail(QERR_RANGE, "logit_bias: token %d is "
					 "not in the model's vocabulary (%d "
					 "tokens)", (int)p->logit_bias.id[i],
					 vocab);
	return 0;
}

const char *sc_params_mode_name(int mode)
{
	switch (mode) {
	case SC_RESET: return "reset";
	case SC_PAGED: return "paged";
	case SC_BATCHED: return "batched";
	default: return "unknown";
	}
}

int sc_params_mode_parse(const char *s)
{
	for (int m = SC_RESET; m <= SC_BATCHED; m++)
		if (!strcmp(s, sc_params_mode_name(m)))
			return m;
	return -1;
}

int sc_params_vote_parse(const char *s)
{
	if (!strcmp(s, "majority"))
		return SC_VOTE_MAJORITY;
	if (!strcmp(s, "confidence"))
		return SC_VOTE_CONFIDENCE;
	return -1;
}

const char *sc_params_vote_name(int vote)
{
	return vote == SC_VOTE_CONFIDENCE ? "confidence" : "majority";
}

int sc_params_stop_strs_add(sc_stop_strs *q, const char *s, size_t len)
{
	if (q->n < 0 || q->n >= SC_STOP_STR_MAX || len < 1 ||
	    len > SC_STOP_STR_LEN || memchr(s, 0, len))
		return sc_params_check_fail(SC_S_STOP_STRINGS, NULL);
	memcpy(q->s[q->n], s, len);
	q->len[q->n++] = (uint8_t)len;
	return 0;
}

int sc_params_check(const sc_params *p)
{
	char b[STOP_NAME_MAX + 40];
	int rc;

	if (!p)
		return qerr_fail(QERR_ARG, "sc_params is NULL");
	if ((rc = sc_params_check_int(SC_S_N, p->n)) ||
	    (rc = sc_params_check_real(SC_S_TEMPERATURE, p->sp.temperature)) ||
	    (rc = sc_params_check_int(SC_S_TOP_K, p->sp.top_k)) ||
	    (rc = sc_params_check_real(SC_S_TOP_P, p->sp.top_p)) ||
	    (rc = sc_params_check_real(SC_S_MIN_P, p->sp.min_p)) ||
	    (rc = sc_params_check_real(SC_S_PRESENCE_PENALTY,
				       p->presence_penalty)) ||
	    (rc = sc_params_check_real(SC_S_FREQUENCY_PENALTY,
				       p->frequency_penalty)) ||
	    (rc = sc_params_check_int(SC_S_MAX_NEW_TOKENS, p->max_new)))
		return rc;
	if (p->stop_strs.n < 0 || p->stop_strs.n > SC_STOP_STR_MAX)
		return sc_params_check_fail(SC_S_STOP_STRINGS, NULL);
	if (p->logit_bias.n < 0 || p->logit_bias.n > SC_LOGIT_BIAS_MAX)
		return sc_params_check_fail(SC_S_LOGIT_BIAS, NULL);
	for (int i = 0; i < p->logit_bias.n; i++)
		if (p->logit_bias.id[i] < 0 ||
		    p->logit_bias.id[i] > SC_LOGIT_BIAS_ID_MAX ||
		    (i && p->logit_bias.id[i] <= p->logit_bias.id[i - 1]) ||
		    !(p->logit_bias.bias[i] >= -SC_LOGIT_BIAS_LIM &&
		      p->logit_bias.bias[i] <= SC_LOGIT_BIAS_LIM))
			return sc_params_check_fail(SC_S_LOGIT_BIAS, NULL);
	for (int i = 0; i < p->stop_strs.n; i++)
		if (p->stop_strs.len[i] < 1 ||
		    p->stop_strs.len[i] > SC_STOP_STR_LEN ||
		    memchr(p->stop_strs.s[i], 0, p->stop_strs.len[i]))
			return sc_params_check_fail(SC_S_STOP_STRINGS, NULL);
	if (p->mode < SC_RESET || p->mode > SC_BATCHED) {
		snprintf(b, sizeof(b), "%d", p->mode);
		return sc_params_check_fail(SC_S_MODE, b);
	}
	if (p->vote != SC_VOTE_MAJORITY && p->vote != SC_VOTE_CONFIDENCE) {
		snprintf(b, sizeof(b), "%d", p->vote);
		return sc_params_check_fail(SC_S_VOTE, b);
	}
	if (p->filter_warmup < 0 || p->filter_warmup > SC_N_MAX ||
	    !(p->filter_pct >= 0 && p->filter_pct <= 100)) {
		snprintf(b, sizeof(b), "%d:%g", p->filter_warmup,
			 p->filter_pct);
		return sc_params_check_fail(SC_S_CONF_FILTER, b);
	}
	if (p->conf_window && (rc = sc_params_check_int(SC_S_CONF_WINDOW,
						 p->conf_window)))
		return rc;
	if ((rc = sc_params_check_int(SC_S_STOP_WAVES, p->stop_waves)) ||
	    (rc = sc_params_check_int(SC_S_TOP_LOGPROBS, p->top_logprobs)))
		return rc;
	if (p->answer.kind < 0 || p->answer.kind >= ANSWER_KINDS_ ||
	    (p->answer.kind == ANSWER_REGEX && !p->answer.pattern[0])) {
		snprintf(b, sizeof(b), "%d", p->answer.kind);
		return sc_params_check_fail(SC_S_ANSWER, b);
	}
	if (stop_rule_check(&p->stop)) {
		if (p->stop.kind == STOP_BETA)
			snprintf(b, sizeof(b), "beta:%g", p->stop.threshold);
		else if (p->stop.kind == STOP_WINDOW)
			snprintf(b, sizeof(b), "window:%d", p->stop.window);
		else
			snprintf(b, sizeof(b), "%d", p->stop.kind);
		return sc_params_check_fail(SC_S_STOP, b);
	}
	return 0;
}

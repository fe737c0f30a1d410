/*
 * stop — the early-stopping rules (see stop.h): parsing and naming them,
 * the incremental decision over answers pushed in index order (exact
 * counts, the Beta posterior, a run of agreeing samples), and the
 * smallest prefix each rule can decide at. Callers: sc/ (sc_run), the
 * coordinator (each request's decision), tools/, tests.
 */
#include "sc/stop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"

#define STOP_NIL UINT32_MAX

int stop_rule_check(const stop_rule *r)
{
	if (!r)
		return qerr_fail(QERR_ARG, "stop rule is NULL");
	switch (r->kind) {
	case STOP_NONE:
	case STOP_EXACT:
		return QERR_OK;
	case STOP_BETA:
		if (!(r->threshold > 0.5 && r->threshold < 1.0))
			return qerr_fail(QERR_RANGE, "stop rule beta: threshold "
					 "%g must be in (0.5, 1)", r->threshold);
		return QERR_OK;
	case STOP_WINDOW:
		if (r->window < 1 || r->window > 65536)
			return qerr_fail(QERR_RANGE, "stop rule window: %d must "
					 "be in 1..65536", r->window);
		return QERR_OK;
	default:
		return qerr_fail(QERR_RANGE, "unknown stop rule %d", r->kind);
	}
}

int stop_parse(const char *s, stop_rule *out)
{
	stop_rule r = STOP_RULE_DEFAULT;
	const char *arg = s ? strchr(s, ':') : NULL;
	size_t nl = arg ? (size_t)(arg - s) : (s ? strlen(s) : 0);
	char *end;

	if (!s || !out)
		return qerr_fail(QERR_ARG, "stop rule is NULL");
	if (nl == 4 && !strncmp(s, "none", 4))
		r.kind = STOP_NONE;
	else if (nl == 5 && !strncmp(s, "exact", 5))
		r.kind = STOP_EXACT;
	else if (nl == 4 && !strncmp(s, "beta", 4))
		r.kind = STOP_BETA;
	else if (nl == 6 && !strncmp(s, "window", 6))
		r.kind = STOP_WINDOW;
	else
		return qerr_fail(QERR_RANGE, "unknown stop rule '%s' (%s)", s,
				 STOP_RULE_LIST);
	if (arg) {
		arg++;
		if (r.kind == STOP_NONE || r.kind == STOP_EXACT)
			return qerr_fail(QERR_RANGE, "stop rule '%s' takes no "
					 "argument", s);
		if (!*arg)
			return qerr_fail(QERR_RANGE, "stop rule '%s': empty "
					 "argument", s);
		if (r.kind == STOP_BETA) {
			r.threshold = strtod(arg, &end);
		} else {
			long w = strtol(arg, &end, 10);

			r.window = w < 0 || w > 1 << 20 ? -1 : (int)w;
		}
		if (*end)
			return qerr_fail(QERR_RANGE, "stop rule '%s': '%s' is "
					 "not a number", s, arg);
	}
	if (stop_rule_check(&r))
		return QERR_RANGE;
	*out = r;
	return QERR_OK;
}

const char *stop_name(const stop_rule *r, char *buf, size_t cap)
{
	switch (r->kind) {
	case STOP_NONE: snprintf(buf, cap, "none"); break;
	case STOP_EXACT: snprintf(buf, cap, "exact"); break;
	case STOP_BETA: snprintf(buf, cap, "beta:%g", r->threshold); break;
	case STOP_WINDOW: snprintf(buf, cap, "window:%d", r->window); break;
	default: snprintf(buf, cap, "?"); break;
	}
	return buf;
}

/*
 * Sum of C(m, j) for j <= a over the sum for all j, m = a + b + 1. Terms
 * by the recurrence t_{j+1} = t_j (m - j) / (j + 1); when they grow past
 * 2^900 everything is scaled by 2^-900 (exact, a power of two). Plain IEEE
 * double operations in a fixed order (the build has no fp contraction):
 * the same bits on every host.
 */
double stop_beta_posterior(uint32_t a, uint32_t b)
{
	uint64_t m = (uint64_t)a + b + 1;
	double t = 1.0, lo = 0.0, all = 0.0;

	for (uint64_t j = 0; j <= m; j++) {
		if (j <= a)
			lo += t;
		all += t;
		t = t * (double)(m - j) / (double)(j + 1);
		if (t > 0x1p900) {
			t *= 0x1p-900;
			lo *= 0x1p-900;
			all *= 0x1p-900;
		}
	}
	return lo / all;
}

int stop_min_prefix(const stop_rule *r, int n)
{
	int k;

	switch (r->kind) {
	case STOP_EXACT:
		return (n + 1) / 2; /* a = k >= r = n - k */
	case STOP_BETA:
		for (k = 1; k < n; k++)
			if (stop_beta_posterior((uint32_t)k, 0) >= r->threshold)
				return k;
		return n;
	case STOP_WINDOW:
		return r->window < n ? r->window : n;
	default:
		return n;
	}
}

int stop_init(stop_state *s, const stop_rule *r, int n)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->leader = s->second = s->last = -1;
	if ((rc = stop_rule_check(r)))
		return rc;
	if (n < 1)
		return qerr_fail(QERR_RANGE, "stop: budget %d < 1", n);
	s->rule = *r;
	s->n = n;
	s->unit = 1;
	/* a power of two >= n / 2 buckets (at most n distinct answers) */
	s->n_head = 16;
	while (s->n_head < (uint32_t)n / 2 && s->n_head < 1u << 16)
		s->n_head *= 2;
	if (!(s->head = malloc(s->n_head * sizeof(*s->head))))
		return qerr_fail(QERR_NOMEM, "stop: out of memory");
	for (uint32_t i = 0; i < s->n_head; i++)
		s->head[i] = STOP_NIL;
	return QERR_OK;
}

int stop_init_weighted(stop_state *s, const stop_rule *r, int n)
{
	int rc = stop_init(s, r, n);

	if (!rc)
		s->unit = STOP_WEIGHT_ONE;
	return rc;
}

void stop_fini(stop_state *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_e; i++)
		free(s->e[i].answer);
	free(s->e);
	free(s->head);
	memset(s, 0, sizeof(*s));
	s->leader = s->second = s->last = -1;
}

static uint32_t hash(const char *a)
{
	uint32_t h = 2166136261u;

	for (; *a; a++)
		h = (h ^ (uint8_t)*a) * 16777619u;
	return h;
}

/* The entry of answer a, created (count 0, first = s->k) if new. */
static int32_t entry_of(stop_state *s, const char *a)
{
	uint32_t h = hash(a) & (s->n_head - 1), i;
	stop_entry *e;

	for (i = s->head[h]; i != STOP_NIL; i = s->e[i].next)
		if (!strcmp(s->e[i].answer, a))
			return (int32_t)i;
	if (s->n_e == s->cap_e) {
		uint32_t nc = s->cap_e ? s->cap_e * 2 : 16;
		stop_entry *ne = realloc(s->e, nc * sizeof(*ne));

		if (!ne)
			return -1;
		s->e = ne;
		s->cap_e = nc;
	}
	e = &s->e[s->n_e];
	if (!(e->answer = strdup(a)))
		return -1;
	e->count = 0;
	e->mass = 0;
	e->first = (uint32_t)s->k;
	e->next = s->head[h];
	s->head[h] = s->n_e;
	return (int32_t)s->n_e++;
}

/* Entry x ranks before y in the vote's order (mass desc, first asc;
 * mass is the count for vote_tally). */
static int stronger(const stop_state *s, int32_t x, int32_t y)
{
	const stop_entry *a = &s->e[x], *b = &s->e[y];

	return a->mass > b->mass ||
	       (a->mass == b->mass && a->first < b->first);
}

/* Masses stay below n * 2^32 <= 2^49: no sum here overflows. */
static int exact_safe(const stop_state *s)
{
	uint64_t r = (uint64_t)(s->n - s->k) * s->unit, a;
	const stop_entry *l, *c;

	if (r == 0)
		return 1;
	if (s->leader < 0)
		return 0;
	l = &s->e[s->leader];
	a = l->mass;
	if (a < r || a == 0)
		return 0; /* an unseen answer could take all r (a tie loses) */
	if (s->second < 0)
		return 1;
	c = &s->e[s->second];
	return a > c->mass + r || (a == c->mass + r && l->first < c->first);
}

int stop_push(stop_state *s, const char *answer)
{
	return stop_push_w(s, answer, 1);
}

int stop_push_w(stop_state *s, const char *answer, uint64_t weight)
{
	int32_t x = -1;

	if (s->fired || s->k >= s->n)
		return -qerr_fail(QERR_ARG, "stop: push past the decision");
	if (weight > s->unit)
		return -qerr_fail(QERR_ARG, "stop: weight above the unit");
	if (answer && *answer) {
		if ((x = entry_of(s, answer)) < 0)
			return -qerr_fail(QERR_NOMEM, "stop: out of memory");
		s->e[x].count++;
		s->e[x].mass += s->unit == 1 ? 1 : weight;
		/* keep leader and runner-up: only x grew */
		if (x != s->leader) {
			if (s->leader < 0 || stronger(s, x, s->leader)) {
				s->second = s->leader;
				s->leader = x;
			} else if (s->second < 0 || x == s->second ||
				   stronger(s, x, s->second)) {
				s->second = x;
			}
		}
	}
	s->run = x >= 0 && x == s->last ? s->run + 1 : (x >= 0);
	s->last = x;
	s->k++;
	if (s->k == s->n) {
		/* the budget is spent: decided, but nothing was stopped */
		if (s->rule.kind == STOP_BETA)
			s->posterior = stop_beta_posterior(
				stop_leader_count(s), stop_second_count(s));
		return 1;
	}
	switch (s->rule.kind) {
	case STOP_EXACT:
		s->fired = exact_safe(s);
		break;
	case STOP_BETA:
		s->posterior = stop_beta_posterior(stop_leader_count(s),
						   stop_second_count(s));
		s->fired = stop_leader_count(s) > stop_second_count(s) &&
			   s->posterior >= s->rule.threshold;
		break;
	case STOP_WINDOW:
		s->fired = s->run >= s->rule.window;
		break;
	default:
		break;
	}
	return s->fired;
}

uint32_t stop_leader_count(const stop_state *s)
{
	return s->leader < 0 ? 0 : s->e[s->leader].count;
}

uint32_t stop_second_count(const stop_state *s)
{
	return s->second < 0 ? 0 : s->e[s->second].count;
}

const char *stop_leader(const stop_state *s)
{
	return s->leader < 0 ? "" : s->e[s->leader].answer;
}

/* ---- waves -------------------------------------------------------------- */

/* Exact: could the leader (or a new answer, when none) be safe at prefix
 * k + m with every one of the m samples giving it a full unit? */
static int exact_after(const stop_state *s, int m)
{
	uint64_t r = (uint64_t)(s->n - s->k - m) * s->unit;
	uint64_t a = (uint64_t)m * s->unit;
	const stop_entry *l, *c;

	if (r == 0)
		return 1;
	if (s->leader < 0)
		return a >= r; /* a new answer, alone */
	l = &s->e[s->leader];
	a += l->mass;
	if (a < r)
		return 0;
	if (s->second < 0)
		return 1;
	c = &s->e[s->second];
	return a > c->mass + r || (a == c->mass + r && l->first < c->first);
}

/* Beta: after m samples agreeing on entry x (-1: an answer not seen yet,
 * first index k), does the leader's count beat the runner-up's with the
 * posterior at the threshold? The new leader and runner-up are among x,
 * the leader and the runner-up (every other entry ranks below those). */
static int beta_after(const stop_state *s, int32_t x, int m)
{
	uint64_t mass[3], add = (uint64_t)m * s->unit;
	uint32_t cnt[3], first[3];
	int32_t who[3] = {x, s->leader, s->second};
	int nc = 0, top = -1, sec = -1;

	for (int i = 0; i < 3; i++) {
		int dup = 0;

		for (int j = 0; j < nc; j++)
			dup |= who[i] >= 0 && who[j] == who[i];
		if (dup || (i > 0 && who[i] < 0))
			continue;
		if (who[i] < 0) {
			mass[nc] = add;
			cnt[nc] = (uint32_t)m;
			first[nc] = (uint32_t)s->k;
		} else {
			const stop_entry *e = &s->e[who[i]];

			mass[nc] = e->mass + (i == 0 ? add : 0);
			cnt[nc] = e->count + (i == 0 ? (uint32_t)m : 0);
			first[nc] = e->first;
		}
		who[nc++] = who[i];
	}
	for (int i = 0; i < nc; i++) {
		if (top < 0 || mass[i] > mass[top] ||
		    (mass[i] == mass[top] && first[i] < first[top])) {
			sec = top;
			top = i;
		} else if (sec < 0 || mass[i] > mass[sec] ||
			   (mass[i] == mass[sec] && first[i] < first[sec])) {
			sec = i;
		}
	}
	{
		uint32_t a = cnt[top], b = sec < 0 ? 0 : cnt[sec];

		return a > b && stop_beta_posterior(a, b) >= s->rule.threshold;
	}
}

int stop_wave(const stop_state *s)
{
	int r = s->n - s->k;

	if (s->fired || r <= 0)
		return 0;
	switch (s->rule.kind) {
	case STOP_EXACT:
		for (int m = 1; m < r; m++)
			if (exact_after(s, m))
				return m;
		return r;
	case STOP_BETA:
		for (int m = 1; m < r; m++) {
			/* a majority vote: agreeing with the leader is the
			 * fastest; weighted, any answer may take the lead */
			if (beta_after(s, s->leader, m))
				return m;
			if (s->unit == 1)
				continue;
			for (uint32_t x = 0; x < s->n_e; x++)
				if ((int32_t)x != s->leader &&
				    beta_after(s, (int32_t)x, m))
					return m;
			if (beta_after(s, -1, m))
				return m;
		}
		return r;
	case STOP_WINDOW: {
		int m = s->rule.window - (s->last >= 0 ? s->run : 0);

		return m < r ? m : r;
	}
	default:
		return r;
	}
}

int stop_horizon(const stop_state *s, int mult)
{
	int64_t h;

	if (mult <= 0)
		return s->n;
	h = (int64_t)s->k + (int64_t)mult * stop_wave(s);
	return h < s->n ? (int)h : s->n;
}

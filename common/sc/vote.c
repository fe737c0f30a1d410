/*
 * vote — answer extraction and the tally (see vote.h for the rules): the
 * scanner for \boxed{...} and numbers in canonical form, the think-block
 * handling, the majority and confidence-weighted tallies, and a sample's
 * confidence weight. Callers: sc/, the coordinator, tools/ (scoring),
 * tests.
 */
#include "sc/vote.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/mathf.h"
#include "qerr.h"
#include "sc/stop.h"

typedef unsigned char uchar;

static inline int is_digit(uchar c)
{
	return c >= '0' && c <= '9';
}

static inline int is_alpha_(uchar c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static inline int is_alnum_(uchar c)
{
	return is_alpha_(c) || is_digit(c);
}

static inline int is_space(uchar c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

/* A minus sign of three UTF-8 bytes at t[i], within n: U+2212 MINUS
 * SIGN (e2 88 92) and the dashes models write for it, U+2012 figure
 * dash and U+2013 en dash (e2 80 92, e2 80 93), U+FE63 small and U+FF0D
 * fullwidth hyphen-minus (ef b9 a3, ef bc 8d). */
static inline int is_uminus(const uchar *t, size_t n, size_t i)
{
	if (i + 2 >= n)
		return 0;
	if (t[i] == 0xe2)
		return (t[i + 1] == 0x88 && t[i + 2] == 0x92) ||
		       (t[i + 1] == 0x80 &&
			(t[i + 2] == 0x92 || t[i + 2] == 0x93));
	return t[i] == 0xef && ((t[i + 1] == 0xb9 && t[i + 2] == 0xa3) ||
				(t[i + 1] == 0xbc && t[i + 2] == 0x8d));
}

/* +1 for a grouping '{', -1 for a grouping '}', 0 otherwise; a brace
 * preceded by an odd run of backslashes is literal. */
static int brace_delta(const uchar *t, size_t i)
{
	size_t bs = 0;

	if (t[i] != '{' && t[i] != '}')
		return 0;
	while (bs < i && t[i - 1 - bs] == '\\')
		bs++;
	if (bs & 1)
		return 0;
	return t[i] == '{' ? 1 : -1;
}

/* ---- numbers ------------------------------------------------------------ */

/*
 * End of the number that starts at t[i] (sign, digit or '.'), reading no
 * byte at or past n; i itself when there is none. Left context is the
 * caller's business.
 */
static size_t match_number(const uchar *t, size_t n, size_t i)
{
	size_t j = i, k;

	if (j < n && (t[j] == '+' || t[j] == '-'))
		j++;
	else if (is_uminus(t, n, j))
		j += 3;
	if (j < n && is_digit(t[j])) {
		for (k = j; k < n && is_digit(t[k]); k++)
			;
		if (k - j <= 3) {
			/* ",ddd" not followed by a digit */
			while (k + 3 < n && t[k] == ',' && is_digit(t[k + 1]) &&
			       is_digit(t[k + 2]) && is_digit(t[k + 3]) &&
			       (k + 4 >= n || !is_digit(t[k + 4])))
				k += 4;
		}
		if (k + 1 < n && t[k] == '.' && is_digit(t[k + 1]))
			for (k += 1; k < n && is_digit(t[k]); k++)
				;
		return k;
	}
	if (j + 1 < n && t[j] == '.' && is_digit(t[j + 1])) {
		for (k = j + 1; k < n && is_digit(t[k]); k++)
			;
		return k;
	}
	return i;
}

/* Canonical form of the number t[s, e) (as matched above, possibly with a
 * trailing '.') into out; false if it does not fit in cap. */
static bool canon_number(const uchar *t, size_t s, size_t e, char *out,
			 size_t cap)
{
	size_t j = s, i0, i1, f0 = e, f1 = e, ilen = 0, flen, need, o = 0;
	int neg = 0, zero;

	if (t[j] == '+') {
		j++;
	} else if (t[j] == '-') {
		neg = 1;
		j++;
	} else if (is_uminus(t, e, j)) {
		neg = 1;
		j += 3;
	}
	while (j < e && (t[j] == '0' || t[j] == ','))
		j++; /* leading zeros (a separator never leads) */
	i0 = j;
	while (j < e && (is_digit(t[j]) || t[j] == ','))
		ilen += t[j++] != ',';
	i1 = j;
	if (j < e && t[j] == '.') {
		f0 = j + 1;
		f1 = e;
		while (f1 > f0 && t[f1 - 1] == '0')
			f1--;
	}
	flen = f1 - f0;
	zero = ilen == 0 && flen == 0;
	need = (size_t)(neg && !zero) + (ilen ? ilen : 1) +
	       (flen ? 1 + flen : 0);
	if (need >= cap)
		return false;
	if (neg && !zero)
		out[o++] = '-';
	if (!ilen)
		out[o++] = '0';
	for (j = i0; j < i1; j++)
		if (t[j] != ',')
			out[o++] = (char)t[j];
	if (flen) {
		out[o++] = '.';
		memcpy(out + o, t + f0, flen);
		o += flen;
	}
	out[o] = '\0';
	return true;
}

/* [*s, *e) = the last number of t[0, n) under the rules in vote.h. */
static bool last_number(const uchar *t, size_t n, size_t *s, size_t *e)
{
	bool found = false;
	size_t i = 0;

	while (i < n) {
		uchar c = t[i];
		int start = is_digit(c) || c == '.' || c == '+' || c == '-' ||
			    is_uminus(t, n, i);

		if (is_alpha_(c)) {
			while (i < n && is_alnum_(t[i]))
				i++; /* identifier, digits included */
			continue;
		}
		if (start && i > 0 && is_alnum_(t[i - 1]))
			start = 0; /* "3-5", "1.2.3" at the second '.' */
		if (start && is_digit(c) && i >= 2 && t[i - 1] == '.' &&
		    is_alnum_(t[i - 2]))
			start = 0; /* "v1.2", "1.2.3" at the "3" */
		if (start) {
			size_t end = match_number(t, n, i);

			if (end > i) {
				*s = i;
				*e = end;
				found = true;
				i = end;
				continue;
			}
		} else if (is_digit(c)) {
			while (i < n && is_digit(t[i]))
				i++;
			continue;
		}
		i++;
	}
	return found;
}

/* ---- boxes -------------------------------------------------------------- */

/*
 * Trimmed content [*a, *b) of the last closed, non-empty \boxed{...}.
 * Backward scan with prefix depths D(i) = sum of brace_delta over [0, i):
 * the '{' at i is closed iff min_{j > i} D(j) <= D(i). O(len), no memory.
 */
static bool last_box(const uchar *t, size_t n, size_t *a, size_t *b)
{
	long long d = 0, m;

	for (size_t i = 0; i < n; i++)
		d += brace_delta(t, i);
	m = d; /* min of D(j) for j >= i + 1; d = D(i + 1) */
	for (size_t i = n; i-- > 0;) {
		int dl = brace_delta(t, i);
		long long di = d - dl;

		if (dl == 1 && m <= di && i >= 6 &&
		    memcmp(t + i - 6, "\\boxed", 6) == 0) {
			size_t q = i + 1, x, y;
			long long depth = 1;

			for (;; q++) {
				depth += brace_delta(t, q);
				if (depth == 0)
					break;
			}
			for (x = i + 1; x < q && is_space(t[x]); x++)
				;
			for (y = q; y > x && is_space(t[y - 1]); y--)
				;
			if (y > x) {
				*a = x;
				*b = y;
				return true;
			}
		}
		if (di < m)
			m = di;
		d = di;
	}
	return false;
}

/* Last occurrence of needle (n bytes) in t[0, len), or len. */
static size_t last_of(const uchar *t, size_t len, const char *needle,
		      size_t n)
{
	for (size_t i = len; i >= n; i--)
		if (!memcmp(t + i - n, needle, n))
			return i - n;
	return len;
}

int vote_think_state(const char *text, size_t len, size_t *start)
{
	const uchar *t = (const uchar *)text;
	size_t close = last_of(t, len, "</think>", 8);
	size_t open = last_of(t, len, "<think>", 7);

	*start = 0;
	if (close < len) {
		/* an open after the last close starts a new, unclosed block */
		if (open < len && open > close)
			return VOTE_THINK_UNCLOSED;
		*start = close + 8;
		return VOTE_THINK_CLOSED;
	}
	return open < len ? VOTE_THINK_UNCLOSED : VOTE_THINK_NONE;
}

/* First occurrence of needle (n bytes) in t[from, len), or len. */
static size_t first_of(const uchar *t, size_t len, size_t from,
		       const char *needle, size_t n)
{
	const uchar *p;

	if (from >= len)
		return len;
	p = memmem(t + from, len - from, needle, n);
	return p ? (size_t)(p - t) : len;
}

#define H_CHANNEL "<|channel|>"
#define H_MESSAGE "<|message|>"

int vote_harmony_final(const char *text, size_t len, size_t *a, size_t *b)
{
	static const char *const ends[] = {"<|end|>", "<|start|>",
					   "<|return|>", "<|call|>",
					   H_CHANNEL};
	const uchar *t = (const uchar *)text;
	size_t at = first_of(t, len, 0, H_CHANNEL, 11), body = len;

	if (at == len)
		return VOTE_HARMONY_NONE;
	/* the last complete header <|channel|>final[ ...]<|message|> */
	for (; at < len; at = first_of(t, len, at + 11, H_CHANNEL, 11)) {
		size_t name = at + 11, msg = first_of(t, len, name, H_MESSAGE,
						      11), e = name;

		if (msg == len)
			break;
		/* a header ends at the next <|channel|>, as reasoning.c
		 * reads it: "<|channel|>final<|channel|>analysis<|message|>"
		 * is an analysis message */
		if (first_of(t, len, name, H_CHANNEL, 11) < msg)
			continue;
		while (e < msg && t[e] != ' ' && t[e] != '<')
			e++;
		if (e - name == 5 && !memcmp(t + name, "final", 5))
			body = msg + 11;
	}
	if (body == len)
		return VOTE_HARMONY_NO_FINAL;
	*a = body;
	*b = len;
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
		size_t e = first_of(t, len, body, ends[i], strlen(ends[i]));

		if (e < *b)
			*b = e;
	}
	return VOTE_HARMONY_FINAL;
}

const char *vote_no_answer_reason(const char *text, size_t len)
{
	size_t start, a, b;

	if (!text)
		return "no boxed answer or number";
	switch (vote_harmony_final(text, len, &a, &b)) {
	case VOTE_HARMONY_NO_FINAL:
		return "no final channel (harmony: no <|channel|>final)";
	case VOTE_HARMONY_FINAL:
		return "no boxed answer or number in the final channel";
	}
	if (vote_think_state(text, len, &start) == VOTE_THINK_UNCLOSED)
		return "thinking never ended (no </think>)";
	return "no boxed answer or number";
}

bool vote_answer_region(const char *text, size_t len, size_t *start,
			size_t *end)
{
	size_t a, b;

	*start = 0;
	*end = len;
	if (!text)
		return false;
	switch (vote_harmony_final(text, len, &a, &b)) {
	case VOTE_HARMONY_NO_FINAL:
		return false;
	case VOTE_HARMONY_FINAL:
		*start = a;
		*end = b;
		return true;
	default:
		return vote_think_state(text, len, start) !=
		       VOTE_THINK_UNCLOSED;
	}
}

bool vote_last_box(const char *t, size_t n, size_t *a, size_t *b)
{
	return last_box((const uchar *)t, n, a, b);
}

bool vote_last_number(const char *t, size_t n, char *out, size_t cap)
{
	size_t a, e;

	if (!cap)
		return false;
	out[0] = '\0';
	return last_number((const uchar *)t, n, &a, &e) &&
	       canon_number((const uchar *)t, a, e, out, cap);
}

bool vote_extract(const char *text, size_t len, char *out, size_t cap)
{
	const uchar *t = (const uchar *)text;
	size_t a, b, e, start;

	if (!out || cap == 0)
		return false;
	out[0] = '\0';
	if (!vote_answer_region(text, len, &start, &e))
		return false;
	t += start;
	len = e - start;
	if (last_box(t, len, &a, &b)) {
		if (memchr(t + a, '\0', b - a))
			return false;
		e = match_number(t, b, a);
		if (e > a && (e == b || (e + 1 == b && t[e] == '.')))
			return canon_number(t, a, e, out, cap);
		if (b - a >= cap)
			return false;
		memcpy(out, t + a, b - a);
		out[b - a] = '\0';
		return true;
	}
	if (last_number(t, len, &a, &e))
		return canon_number(t, a, e, out, cap);
	return false;
}

/* ---- tally -------------------------------------------------------------- */

struct vote_item {
	const char *s;
	size_t i;
};

static int item_cmp(const void *pa, const void *pb)
{
	const struct vote_item *a = pa, *b = pb;
	int c = strcmp(a->s, b->s);

	if (c)
		return c;
	return (a->i > b->i) - (a->i < b->i);
}

static int entry_cmp(const void *pa, const void *pb)
{
	const vote_entry *a = pa, *b = pb;

	/* the weight is the count when unweighted */
	if (a->weight != b->weight)
		return a->weight > b->weight ? -1 : 1;
	return (a->first_index > b->first_index) -
	       (a->first_index < b->first_index);
}

int vote_tally(const char *const *answers, size_t n, vote_result *out)
{
	return vote_tally_weighted(answers, NULL, n, out);
}

int vote_tally_weighted(const char *const *answers, const uint64_t *weights,
			size_t n, vote_result *out)
{
	struct vote_item *it = NULL;
	size_t m = 0, g = 0, pool = 0, off = 0;
	char *strs = NULL;

	if (!out)
		return qerr_fail(QERR_ARG, "vote_tally: out is NULL");
	*out = (vote_result){NULL, 0, 0, VOTE_NONE};
	if (!answers && n)
		return qerr_fail(QERR_ARG, "vote_tally: answers is NULL");
	for (size_t i = 0; i < n; i++)
		m += answers[i] && answers[i][0];
	if (!m)
		return QERR_OK;
	it = malloc(m * sizeof(*it));
	if (!it)
		goto nomem;
	m = 0;
	for (size_t i = 0; i < n; i++)
		if (answers[i] && answers[i][0])
			it[m++] = (struct vote_item){answers[i], i};
	/* by answer, then index: each run is one answer, its head the first
	 * occurrence */
	qsort(it, m, sizeof(*it), item_cmp);
	for (size_t i = 0; i < m; i++) {
		if (i == 0 || strcmp(it[i].s, it[i - 1].s) != 0) {
			g++;
			pool += strlen(it[i].s) + 1;
		}
	}
	/* one block: the entries, then the strings they point to */
	out->entries = malloc(g * sizeof(*out->entries) + pool);
	if (!out->entries)
		goto nomem;
	strs = (char *)(out->entries + g);
	g = 0;
	for (size_t i = 0; i < m; i++) {
		if (i == 0 || strcmp(it[i].s, it[i - 1].s) != 0) {
			size_t l = strlen(it[i].s) + 1;

			memcpy(strs + off, it[i].s, l);
			out->entries[g++] = (vote_entry){strs + off, 0,
							 it[i].i, 0};
			off += l;
		}
		out->entries[g - 1].count++;
		out->entries[g - 1].weight += weights ? weights[it[i].i] : 1;
	}
	qsort(out->entries, g, sizeof(*out->entries), entry_cmp);
	out->n_entries = g;
	out->n_voters = m;
	out->winner = 0;
	free(it);
	return QERR_OK;
nomem:
	free(it);
	*out = (vote_result){NULL, 0, 0, VOTE_NONE};
	return qerr_fail(QERR_NOMEM, "vote_tally: %zu answers", m);
}

void vote_result_fini(vote_result *r)
{
	if (!r)
		return;
	free(r->entries); /* strings live in the same block */
	*r = (vote_result){NULL, 0, 0, VOTE_NONE};
}

uint64_t vote_conf_weight(double g)
{
	uint64_t w;

	if (!(g <= 0)) /* NaN or positive: log-probabilities never are */
		g = 0;
	w = (uint64_t)(mathf_exp((float)g) * 0x1p32f);
	return w > STOP_WEIGHT_ONE ? STOP_WEIGHT_ONE : w;
}

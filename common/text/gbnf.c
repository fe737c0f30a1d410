/*
 * gbnf — GBNF grammars (see gbnf.h): the parser into a flat element
 * array, the checks (undefined rules, left recursion), and the matcher:
 * parse stacks interned as states, byte steps cached, and the allowed
 * tokens found by walking a byte trie of the vocabulary. Callers: the
 * sampler's grammar state (sc/fork.c), jschema.c's tests, fuzz_gbnf.
 */
#include "text/gbnf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"

/* ---- the compiled grammar ----------------------------------------------- */

enum { E_END = 0, E_CHAR = 1, E_REF = 2 };

typedef struct {
	uint8_t type;
	uint8_t neg;    /* E_CHAR: a negated class */
	int32_t a, b;   /* E_CHAR: ranges [a, a + b); E_REF: rule a */
} elem;

typedef struct {
	uint32_t lo, hi;
} crange;

struct gbnf {
	elem *e;          /* alternatives, each ended by E_END */
	int n_e;
	crange *r;
	int n_r;
	int *alt;         /* alternative starts, by rule */
	int *alt_off, *alt_n;
	int n_rules;
	int root;
};

/* ---- parsing ------------------------------------------------------------ */

typedef struct {
	elem *e;
	int n, cap;
} seq;

typedef struct {
	char *name;
	int defined;
	int line, col;   /* first mention */
	seq *alts;
	int n_alts, cap;
} prule;

typedef struct {
	const char *text;   /* the whole grammar */
	const char *s, *end;
	const char *line_start;
	int line;
	prule *rules;
	int n_rules, cap_rules;
	crange *r;
	int n_r, cap_r;
	int n_elems;
	int err;
} pstate;

static int perr(pstate *p, const char *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int perr(pstate *p, const char *at, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	int line = 1;
	const char *ls = p->text;

	if (p->err)
		return -1;
	/* the line and column of at, counted from the start */
	for (const char *q = p->text; q < at && q < p->end; q++)
		if (*q == '\n') {
			line++;
			ls = q + 1;
		}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->err = 1;
	qerr_fail(QERR_FORMAT, "grammar:%d:%d: %s", line,
		  (int)(at - ls) + 1, msg);
	return -1;
}

static int grow(void **v, int *cap, int need, size_t size)
{
	void *n;
	int nc;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap * 2 : 8;
	while (nc < need)
		nc *= 2;
	if (!(n = realloc(*v, (size_t)nc * size)))
		return -1;
	*v = n;
	*cap = nc;
	return 0;
}

static int seq_push(pstate *p, seq *s, elem e)
{
	if (++p->n_elems > GBNF_ELEMS_MAX)
		return perr(p, p->s, "the grammar has over %d elements",
			    GBNF_ELEMS_MAX);
	if (grow((void **)&s->e, &s->cap, s->n + 1, sizeof(elem)))
		return perr(p, p->s, "out of memory");
	s->e[s->n++] = e;
	return 0;
}

static int rule_id(pstate *p, const char *name, size_t n, const char *at)
{
	for (int i = 0; i < p->n_rules; i++)
		if (strlen(p->rules[i].name) == n &&
		    !memcmp(p->rules[i].name, name, n))
			return i;
	if (grow((void **)&p->rules, &p->cap_rules, p->n_rules + 1,
		 sizeof(prule)))
		return perr(p, at, "out of memory");
	memset(&p->rules[p->n_rules], 0, sizeof(prule));
	if (!(p->rules[p->n_rules].name = strndup(name, n)))
		return perr(p, at, "out of memory");
	{
		int line = p->line;
		const char *ls = p->line_start;

		for (const char *q = ls; q < at; q++)
			if (*q == '\n') {
				line++;
				ls = q + 1;
			}
		p->rules[p->n_rules].line = line;
		p->rules[p->n_rules].col = (int)(at - ls) + 1;
	}
	return p->n_rules++;
}

/* A synthetic rule (a group, a repetition): a name no user can write. */
static int new_rule(pstate *p)
{
	char name[32];

	snprintf(name, sizeof(name), "-%d", p->n_rules);
	return rule_id(p, name, strlen(name), p->s);
}

static seq *new_alt(pstate *p, int r)
{
	prule *x = &p->rules[r];

	if (grow((void **)&x->alts, &x->cap, x->n_alts + 1, sizeof(seq))) {
		perr(p, p->s, "out of memory");
		return NULL;
	}
	memset(&x->alts[x->n_alts], 0, sizeof(seq));
	return &x->alts[x->n_alts++];
}

static int is_word(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips spaces, tabs, comments and (newline_ok) line ends. */
static void space(pstate *p, int newline_ok)
{
	while (p->s < p->end) {
		char c = *p->s;

		if (c == ' ' || c == '\t' || c == '\r') {
			p->s++;
		} else if (c == '#') {
			while (p->s < p->end && *p->s != '\n')
				p->s++;
		} else if (c == '\n' && newline_ok) {
			p->s++;
			p->line++;
			p->line_start = p->s;
		} else {
			break;
		}
	}
}

/* One UTF-8 character at p->s (decoded), advancing; -1 when invalid. */
static long utf8_char(pstate *p)
{
	const unsigned char *u = (const unsigned char *)p->s;
	size_t rest = (size_t)(p->end - p->s);
	long c;
	int n;

	if (!rest)
		return -1;
	if (u[0] < 0x80) {
		p->s++;
		return u[0];
	}
	n = (u[0] & 0xe0) == 0xc0 ? 2 : (u[0] & 0xf0) == 0xe0 ? 3
	    : (u[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (!n || (size_t)n > rest)
		return -1;
	c = u[0] & (0x7f >> n);
	for (int i = 1; i < n; i++) {
		if ((u[i] & 0xc0) != 0x80)
			return -1;
		c = (c << 6) | (u[i] & 0x3f);
	}
	p->s += n;
	return c;
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f'
	       ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A character of a literal or class, escapes decoded; -1 on error. */
static long char_at(pstate *p)
{
	const char *at = p->s;

	if (p->s >= p->end)
		return perr(p, at, "unexpected end of the grammar");
	if (*p->s == '\\') {
		int k = 0;
		long v = 0;

		p->s++;
		if (p->s >= p->end)
			return perr(p, at, "unexpected end after '\\'");
		switch (*p->s++) {
		case 'n': return '\n';
		case 'r': return '\r';
		case 't': return '\t';
		case '\\': return '\\';
		case '"': return '"';
		case '\'': return '\'';
		case '[': return '[';
		case ']': return ']';
		case '-': return '-';
		case '^': return '^';
		case '/': return '/';
		case 'x': k = 2; break;
		case 'u': k = 4; break;
		case 'U': k = 8; break;
		default:
			return perr(p, at, "unknown escape '%.2s'", at);
		}
		for (int i = 0; i < k; i++) {
			int h = p->s < p->end ? hexval(*p->s) : -1;

			if (h < 0)
				return perr(p, at, "bad escape '%.*s'", k + 2,
					    at);
			v = v * 16 + h;
			p->s++;
		}
		if (v > 0x10ffff)
			return perr(p, at, "escape beyond U+10FFFF");
		/* no UTF-8 writes one (it had become a broken byte) */
		if (v >= 0xd800 && v <= 0xdfff)
			return perr(p, at, "escape '%.*s' is a surrogate code "
				    "point (no character)", k + 2, at);
		return v;
	}
	{
		long c = utf8_char(p);

		if (c < 0)
			return perr(p, at, "invalid UTF-8");
		return c;
	}
}

static int add_range(pstate *p, uint32_t lo, uint32_t hi)
{
	if (grow((void **)&p->r, &p->cap_r, p->n_r + 1, sizeof(crange)))
		return perr(p, p->s, "out of memory");
	p->r[p->n_r++] = (crange){lo, hi};
	return 0;
}

static int parse_alternates(pstate *p, int r, int nested);

/* The repetition of s's last element (from index last), with min and max
 * (-1: unbounded). */
static int repeat(pstate *p, seq *s, int last, long min, long max)
{
	elem x;
	int rr;

	if (last < 0 || last >= s->n)
		return perr(p, p->s, "a repetition without an element");
	/* the element as one thing: groups are already a rule reference */
	x = s->e[last];
	if (s->n - last != 1) {
		/* a literal of several characters repeats as a whole */
		int g = new_rule(p);
		seq *a;

		if (g < 0 || !(a = new_alt(p, g)))
			return -1;
		p->rules[g].defined = 1;
		for (int i = last; i < s->n; i++)
			if (seq_push(p, a, s->e[i]))
				return -1;
		x = (elem){E_REF, 0, g, 0};
	}
	s->n = last;
	for (long i = 0; i < min; i++)
		if (seq_push(p, s, x))
			return -1;
	if (max < 0) {
		/* x* : r ::= x r | () */
		seq *a;

		if ((rr = new_rule(p)) < 0 || !(a = new_alt(p, rr)) ||
		    seq_push(p, a, x) ||
		    seq_push(p, a, (elem){E_REF, 0, rr, 0}) ||
		    !new_alt(p, rr))
			return -1;
		p->rules[rr].defined = 1;
		return seq_push(p, s, (elem){E_REF, 0, rr, 0});
	}
	if (max > min) {
		/* nested optionals: o1 ::= x o2 | (), ..., ok ::= x | () */
		int next = -1;

		for (long i = 0; i < max - min; i++) {
			seq *a;

			if ((rr = new_rule(p)) < 0 || !(a = new_alt(p, rr)) ||
			    seq_push(p, a, x) ||
			    (next >= 0 &&
			     seq_push(p, a, (elem){E_REF, 0, next, 0})) ||
			    !new_alt(p, rr))
				return -1;
			p->rules[rr].defined = 1;
			next = rr;
		}
		return seq_push(p, s, (elem){E_REF, 0, next, 0});
	}
	return 0;
}

static long number(pstate *p)
{
	long v = 0;
	const char *at = p->s;

	if (p->s >= p->end || *p->s < '0' || *p->s > '9')
		return perr(p, at, "expected a number");
	while (p->s < p->end && *p->s >= '0' && *p->s <= '9') {
		v = v * 10 + (*p->s++ - '0');
		if (v > 4096)
			return perr(p, at, "a repetition count over 4096");
	}
	return v;
}

/* A sequence of elements into s, to the end of the alternative. */
static int parse_sequence(pstate *p, seq *s, int nested)
{
	int last = -1;

	while (!p->err && p->s < p->end) {
		const char *at = p->s;
		char c = *p->s;

		if (c == '"') {
			p->s++;
			last = s->n;
			while (p->s < p->end && *p->s != '"') {
				long ch = char_at(p);

				if (ch < 0 || add_range(p, (uint32_t)ch,
							(uint32_t)ch) ||
				    seq_push(p, s, (elem){E_CHAR, 0, p->n_r - 1,
							  1}))
					return -1;
			}
			if (p->s >= p->end)
				return perr(p, at, "unterminated literal");
			p->s++;
			if (s->n == last)
				last = -1; /* "" */
		} else if (c == '[') {
			int neg = 0, first = p->n_r;

			p->s++;
			if (p->s < p->end && *p->s == '^') {
				neg = 1;
				p->s++;
			}
			while (p->s < p->end && *p->s != ']') {
				long lo = char_at(p), hi = lo;

				if (lo < 0)
					return -1;
				if (p->s + 1 < p->end && *p->s == '-' &&
				    p->s[1] != ']') {
					p->s++;
					if ((hi = char_at(p)) < 0)
						return -1;
					if (hi < lo)
						return perr(p, at, "a range "
							    "backwards");
				}
				if (add_range(p, (uint32_t)lo, (uint32_t)hi))
					return -1;
			}
			if (p->s >= p->end)
				return perr(p, at, "unterminated class");
			p->s++;
			last = s->n;
			if (seq_push(p, s, (elem){E_CHAR, (uint8_t)neg, first,
						  p->n_r - first}))
				return -1;
		} else if (c == '.') {
			p->s++;
			last = s->n;
			if (seq_push(p, s, (elem){E_CHAR, 1, p->n_r, 0}))
				return -1;
		} else if (c == '(') {
			int g;

			p->s++;
			if ((g = new_rule(p)) < 0)
				return -1;
			p->rules[g].defined = 1;
			space(p, 1);
			if (parse_alternates(p, g, 1))
				return -1;
			if (p->s >= p->end || *p->s != ')')
				return perr(p, at, "unclosed '('");
			p->s++;
			last = s->n;
			if (seq_push(p, s, (elem){E_REF, 0, g, 0}))
				return -1;
		} else if (is_word((unsigned char)c)) {
			const char *w = p->s;
			int r;

			while (p->s < p->end && is_word((unsigned char)*p->s))
				p->s++;
			/* the next rule's definition ends this one */
			{
				const char *q = p->s;

				while (q < p->end && (*q == ' ' || *q == '\t'))
					q++;
				if (!nested && q + 2 < p->end &&
				    !memcmp(q, "::=", 3)) {
					p->s = w;
					return 0;
				}
			}
			if ((r = rule_id(p, w, (size_t)(p->s - w), w)) < 0)
				return -1;
			last = s->n;
			if (seq_push(p, s, (elem){E_REF, 0, r, 0}))
				return -1;
		} else if (c == '*' || c == '+' || c == '?') {
			p->s++;
			if (repeat(p, s, last, c == '+', c == '?' ? 1 : -1))
				return -1;
			last = -1;
		} else if (c == '{') {
			long min, max;

			p->s++;
			space(p, 0);
			if ((min = number(p)) < 0)
				return -1;
			space(p, 0);
			max = min;
			if (p->s < p->end && *p->s == ',') {
				p->s++;
				space(p, 0);
				max = -1;
				if (p->s < p->end && *p->s != '}' &&
				    (max = number(p)) < 0)
					return -1;
				space(p, 0);
			}
			if (p->s >= p->end || *p->s != '}')
				return perr(p, at, "expected '}'");
			p->s++;
			if (max >= 0 && max < min)
				return perr(p, at, "{%ld,%ld}: max below min",
					    min, max);
			if (repeat(p, s, last, min, max))
				return -1;
			last = -1;
		} else {
			break;
		}
		space(p, nested);
	}
	return p->err ? -1 : 0;
}

static int parse_alternates(pstate *p, int r, int nested)
{
	for (;;) {
		seq *a = new_alt(p, r);

		if (!a || parse_sequence(p, a, nested))
			return -1;
		if (p->s < p->end && *p->s == '|') {
			p->s++;
			space(p, 1);
			continue;
		}
		return 0;
	}
}

static int parse_all(pstate *p)
{
	space(p, 1);
	while (!p->err && p->s < p->end) {
		const char *w = p->s;
		int r;

		while (p->s < p->end && is_word((unsigned char)*p->s))
			p->s++;
		if (p->s == w)
			return perr(p, w, "expected a rule name");
		if ((r = rule_id(p, w, (size_t)(p->s - w), w)) < 0)
			return -1;
		if (p->rules[r].defined)
			return perr(p, w, "rule '%s' defined twice",
				    p->rules[r].name);
		p->rules[r].defined = 1;
		space(p, 0);
		if (p->s + 3 > p->end || memcmp(p->s, "::=", 3))
			return perr(p, p->s, "expected '::='");
		p->s += 3;
		space(p, 1);
		if (parse_alternates(p, r, 0))
			return -1;
		if (p->s < p->end && *p->s != '\n' &&
		    !is_word((unsigned char)*p->s))
			return perr(p, p->s, "unexpected '%c'", *p->s);
		space(p, 1);
	}
	return p->err ? -1 : 0;
}

/* nullable[r]: rule r can match the empty text */
static void nullables(const pstate *p, char *nl)
{
	int changed = 1;

	memset(nl, 0, (size_t)p->n_rules);
	while (changed) {
		changed = 0;
		for (int r = 0; r < p->n_rules; r++) {
			if (nl[r])
				continue;
			for (int a = 0; a < p->rules[r].n_alts && !nl[r]; a++) {
				const seq *s = &p->rules[r].alts[a];
				int all = 1;

				for (int i = 0; i < s->n && all; i++)
					all = s->e[i].type == E_REF &&
					      nl[s->e[i].a];
				if (all) {
					nl[r] = 1;
					changed = 1;
				}
			}
		}
	}
}

/* Left recursion: r reaches itself through first elements. */
static int left_rec(const pstate *p, const char *nl, int r, char *mark,
		    int depth)
{
	if (mark[r] == 1)
		return r;
	if (mark[r] == 2 || depth > 10000)
		return -1;
	mark[r] = 1;
	for (int a = 0; a < p->rules[r].n_alts; a++) {
		const seq *s = &p->rules[r].alts[a];

		for (int i = 0; i < s->n && s->e[i].type == E_REF; i++) {
			int c = left_rec(p, nl, s->e[i].a, mark, depth + 1);

			if (c >= 0)
				return c;
			if (!nl[s->e[i].a])
				break;
		}
	}
	mark[r] = 2;
	return -1;
}

static void pfree(pstate *p)
{
	for (int r = 0; r < p->n_rules; r++) {
		for (int a = 0; a < p->rules[r].n_alts; a++)
			free(p->rules[r].alts[a].e);
		free(p->rules[r].alts);
		free(p->rules[r].name);
	}
	free(p->rules);
	free(p->r);
}

static int start_over(const gbnf *g);

int gbnf_parse(const char *text, size_t len, gbnf **out)
{
	pstate p = {0};
	gbnf *g = NULL;
	char *nl = NULL, *mark = NULL;
	int root, rc = QERR_FORMAT, k = 0, ka = 0;

	*out = NULL;
	if (!text || len > GBNF_TEXT_MAX)
		return qerr_fail(QERR_FORMAT, "grammar: over %u bytes",
				 GBNF_TEXT_MAX);
	if (memchr(text, 0, len))
		return qerr_fail(QERR_FORMAT, "grammar: holds a NUL byte");
	p.text = p.s = p.line_start = text;
	p.end = text + len;
	p.line = 1;
	if (parse_all(&p))
		goto out;
	root = -1;
	for (int r = 0; r < p.n_rules; r++) {
		if (!p.rules[r].defined) {
			qerr_fail(QERR_FORMAT, "grammar:%d:%d: undefined rule "
				  "'%s'", p.rules[r].line, p.rules[r].col,
				  p.rules[r].name);
			goto out;
		}
		if (!strcmp(p.rules[r].name, "root"))
			root = r;
	}
	if (root < 0) {
		qerr_fail(QERR_FORMAT, "grammar: no 'root' rule");
		goto out;
	}
	if (!(nl = malloc((size_t)p.n_rules + 1)) ||
	    !(mark = calloc((size_t)p.n_rules + 1, 1))) {
		rc = qerr_fail(QERR_NOMEM, "out of memory");
		goto out;
	}
	nullables(&p, nl);
	for (int r = 0; r < p.n_rules; r++) {
		int c = left_rec(&p, nl, r, mark, 0);

		if (c >= 0) {
			const prule *x = &p.rules[c];

			qerr_fail(QERR_FORMAT, "grammar:%d:%d: rule '%s' is "
				  "left-recursive", x->line, x->col,
				  x->name[0] == '-' ? "(a group)" : x->name);
			goto out;
		}
	}
	/* flatten */
	if (!(g = calloc(1, sizeof(*g))))
		goto nomem;
	for (int r = 0; r < p.n_rules; r++) {
		ka += p.rules[r].n_alts;
		for (int a = 0; a < p.rules[r].n_alts; a++)
			k += p.rules[r].alts[a].n + 1;
	}
	g->e = malloc(((size_t)k + 1) * sizeof(elem));
	g->alt = malloc(((size_t)ka + 1) * sizeof(int));
	g->alt_off = malloc(((size_t)p.n_rules + 1) * sizeof(int));
	g->alt_n = malloc(((size_t)p.n_rules + 1) * sizeof(int));
	if (!g->e || !g->alt || !g->alt_off || !g->alt_n)
		goto nomem;
	k = ka = 0;
	for (int r = 0; r < p.n_rules; r++) {
		g->alt_off[r] = ka;
		g->alt_n[r] = p.rules[r].n_alts;
		for (int a = 0; a < p.rules[r].n_alts; a++) {
			g->alt[ka++] = k;
			for (int i = 0; i < p.rules[r].alts[a].n; i++)
				g->e[k++] = p.rules[r].alts[a].e[i];
			g->e[k++] = (elem){E_END, 0, 0, 0};
		}
	}
	g->n_e = k;
	g->n_rules = p.n_rules;
	g->root = root;
	g->r = p.r;
	g->n_r = p.n_r;
	p.r = NULL;
	/* a start past the matcher's bounds would allow no token: every
	 * sample empty (refused here, where a request can hear it) */
	if (start_over(g)) {
		rc = qerr_fail(QERR_RANGE, "grammar: its start takes over %d "
			       "parse stacks (too ambiguous: over %d "
			       "alternatives at once, or optional parts "
			       "repeated)", GBNF_STACKS_MAX, GBNF_STACKS_MAX);
		goto out;
	}
	*out = g;
	g = NULL;
	rc = QERR_OK;
	goto out;
nomem:
	rc = qerr_fail(QERR_NOMEM, "out of memory");
out:
	gbnf_free(&g);
	free(nl);
	free(mark);
	pfree(&p);
	return rc;
}

void gbnf_free(gbnf **gp)
{
	gbnf *g = gp ? *gp : NULL;

	if (!g)
		return;
	free(g->e);
	free(g->r);
	free(g->alt);
	free(g->alt_off);
	free(g->alt_n);
	free(g);
	*gp = NULL;
}

/* ---- stacks and states --------------------------------------------------- */

/* A set of stacks under construction: stacks flattened as
 * [len, e0, e1, ..., top] in one int array. */
typedef struct {
	int32_t *v;
	int n, cap;
	int count;     /* distinct stacks */
	int over;      /* a bound was hit */
	long visits;   /* expand's calls (GBNF_EXPAND_MAX) */
	int32_t *ht;   /* the stacks' offsets + 1 by hash (0: empty), at
			* most half full: ht_cap slots, a power of two */
	size_t ht_cap;
} sset;

static void sset_free(sset *s)
{
	free(s->v);
	free(s->ht);
}

/* expand's calls for one set: the paths to its stacks, which ambiguity
 * (a?){n} multiplies though the stacks are few */
#define GBNF_EXPAND_MAX (1L << 17)

static uint64_t stack_hash(const int32_t *st, int len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)len;

	for (int i = 0; i < len; i++)
		h = (h ^ (uint32_t)st[i]) * 0x100000001b3ull;
	return h;
}

/* s's table with room for one more stack: made (16 slots) or doubled,
 * the stacks rehashed from v; -1 out of memory. A set holds a few stacks
 * mostly (one a byte step of the masks' trie walk), so it starts small. */
static int sset_room(sset *s)
{
	size_t cap = s->ht_cap ? s->ht_cap * 2 : 16;
	int32_t *ht;

	if ((size_t)(s->count + 1) * 2 <= s->ht_cap)
		return 0;
	if (!(ht = calloc(cap, sizeof(*ht))))
		return -1;
	for (int o = 0; o < s->n; o += s->v[o] + 1) {
		size_t i = stack_hash(s->v + o + 1, s->v[o]) & (cap - 1);

		while (ht[i])
			i = (i + 1) & (cap - 1);
		ht[i] = o + 1;
	}
	free(s->ht);
	s->ht = ht;
	s->ht_cap = cap;
	return 0;
}

/* Adds stack st unless the set holds it: GBNF_STACKS_MAX bounds the
 * distinct stacks (a duplicate, reached by another path, had counted
 * too, so (a?){45}b lost its a's at the bound). */
static void sset_add(sset *s, const int32_t *st, int len)
{
	size_t mask, i;

	if (s->over)
		return;
	if (sset_room(s)) {
		s->over = 1;
		return;
	}
	mask = s->ht_cap - 1;
	for (i = stack_hash(st, len) & mask; s->ht[i]; i = (i + 1) & mask) {
		const int32_t *o = s->v + s->ht[i] - 1;

		if (o[0] == len && !memcmp(o + 1, st,
					   (size_t)len * sizeof(int32_t)))
			return;
	}
	if (s->count >= GBNF_STACKS_MAX ||
	    grow((void **)&s->v, &s->cap, s->n + len + 1, sizeof(int32_t))) {
		s->over = 1;
		return;
	}
	s->ht[i] = s->n + 1;
	s->v[s->n++] = len;
	memcpy(s->v + s->n, st, (size_t)len * sizeof(int32_t));
	s->n += len;
	s->count++;
}

/* Expands the stack st (its top a rule reference) until every stack's
 * top is a character class, or the stack is empty (the grammar is done). */
static void expand(const gbnf *g, int32_t *st, int len, sset *out,
		   int depth)
{
	int32_t top;

	if (out->over)
		return;
	if (depth > 4096 || len > 100000 || ++out->visits > GBNF_EXPAND_MAX) {
		out->over = 1;
		return;
	}
	if (!len || g->e[st[len - 1]].type == E_CHAR) {
		sset_add(out, st, len);
		return;
	}
	top = st[len - 1];
	{
		const elem *x = &g->e[top];
		int r = x->a, base = len - 1;
		int32_t *ns = malloc(((size_t)len + 2) * sizeof(int32_t));

		if (!ns) {
			out->over = 1;
			return;
		}
		memcpy(ns, st, (size_t)base * sizeof(int32_t));
		if (g->e[top + 1].type != E_END)
			ns[base++] = top + 1;
		for (int a = 0; a < g->alt_n[r]; a++) {
			int start = g->alt[g->alt_off[r] + a], n = base;

			if (g->e[start].type != E_END)
				ns[n++] = start;
			expand(g, ns, n, out, depth + 1);
		}
		free(ns);
	}
}

/* The stacks of the root rule's alternatives, expanded into out: the
 * start state's (gbnf_start), or past a bound (out->over). */
static void start_set(const gbnf *g, sset *out)
{
	int32_t st[1];

	for (int a = 0; a < g->alt_n[g->root] && !out->over; a++) {
		int start = g->alt[g->alt_off[g->root] + a];

		st[0] = start;
		expand(g, st, g->e[start].type != E_END, out, 0);
	}
}

/* Whether the root's expansion passes a bound (gbnf_start's state would
 * be dead). */
static int start_over(const gbnf *g)
{
	sset out = {0};
	int over;

	start_set(g, &out);
	over = out.over;
	sset_free(&out);
	return over;
}

static int class_has(const gbnf *g, const elem *x, uint32_t c)
{
	int in = 0;

	for (int i = 0; i < x->b && !in; i++)
		in = c >= g->r[x->a + i].lo && c <= g->r[x->a + i].hi;
	return in != x->neg;
}

/* Whether class x can take some character in [lo, hi] (a partial UTF-8
 * sequence's possible completions). */
static int class_meets(const gbnf *g, const elem *x, uint32_t lo,
		       uint32_t hi)
{
	if (x->neg) {
		/* unless the ranges cover [lo, hi] whole */
		uint32_t c = lo;

		for (int moved = 1; moved && c <= hi;) {
			moved = 0;
			for (int i = 0; i < x->b; i++)
				if (c >= g->r[x->a + i].lo &&
				    c <= g->r[x->a + i].hi) {
					if (g->r[x->a + i].hi >= hi)
						return 0;
					c = g->r[x->a + i].hi + 1;
					moved = 1;
				}
		}
		return 1;
	}
	for (int i = 0; i < x->b; i++)
		if (g->r[x->a + i].lo <= hi && g->r[x->a + i].hi >= lo)
			return 1;
	return 0;
}

/* ---- the matcher ------------------------------------------------------- */

typedef struct {
	int32_t *v;        /* the stack set, flattened */
	int n;
	uint32_t partial;  /* a UTF-8 character begun: its bits so far, and
			    * its length in bytes << 24 */
	uint8_t need;      /* continuation bytes still to come (0: none) */
	uint8_t accepting; /* an empty stack is in the set */
	uint64_t hash;
} gstate;

typedef struct {
	int32_t node;      /* first child in kids[], or -1 */
	int32_t n_kids;
	int32_t tok0, n_tok; /* tokens ending here: toks[tok0 .. + n_tok) */
} tnode;

struct gbnf_vocab {
	uint32_t vocab;
	tnode *tn;
	int n_tn;
	int32_t *kid_node; /* children: node ids, by byte */
	uint8_t *kid_byte;
	int32_t *toks;
};

struct gbnf_matcher {
	const gbnf *g;
	const gbnf_vocab *tv_;
	uint32_t vocab;
	gstate *st;
	int n_st, cap_st;
	int32_t *ht;       /* state hash table: ids, -1 empty */
	size_t ht_cap;
	uint64_t *tk;      /* step cache keys: state << 8 | byte, + 1 */
	int32_t *tv;       /* ... values */
	size_t t_cap, t_n;
	/* masks kept: state -> bitset, least recently used replaced */
	int32_t mask_state[GBNF_MASKS_KEPT];
	uint64_t mask_used[GBNF_MASKS_KEPT];
	uint64_t *masks;
	uint64_t clock;
	gbnf_stats stats;
};

static uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static uint64_t state_hash(const int32_t *v, int n, uint32_t partial,
			   uint8_t need)
{
	uint64_t h = mix64(((uint64_t)partial << 8) | need);

	for (int i = 0; i < n; i++)
		h = mix64(h ^ (uint32_t)v[i]);
	return h;
}

static int stack_cmp(const int32_t *a, const int32_t *b)
{
	int n = a[0] < b[0] ? a[0] : b[0];

	for (int i = 1; i <= n; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return a[0] - b[0];
}

static int ptr_cmp(const void *x, const void *y)
{
	return stack_cmp(*(int32_t *const *)x, *(int32_t *const *)y);
}

/* The set's stacks sorted and without duplicates, into a fresh array. */
static int32_t *canon(const sset *s, int *n_out, int *accepting)
{
	int32_t **p = malloc(((size_t)s->count + 1) * sizeof(*p)), *out;
	int k = 0, n = 0, u = 0;

	*accepting = 0;
	if (!p)
		return NULL;
	for (int i = 0; i < s->n; i += s->v[i] + 1)
		p[k++] = &s->v[i];
	qsort(p, (size_t)k, sizeof(*p), ptr_cmp);
	for (int i = 0; i < k; i++)
		if (!u || stack_cmp(p[u - 1], p[i]))
			p[u++] = p[i];
	for (int i = 0; i < u; i++)
		n += p[i][0] + 1;
	if (!(out = malloc(((size_t)n + 1) * sizeof(int32_t)))) {
		free(p);
		return NULL;
	}
	n = 0;
	for (int i = 0; i < u; i++) {
		memcpy(out + n, p[i], ((size_t)p[i][0] + 1) * sizeof(int32_t));
		n += p[i][0] + 1;
		*accepting |= p[i][0] == 0;
	}
	free(p);
	*n_out = n;
	return out;
}

/* The state id of set s with a partial character, interned. */
static int intern(gbnf_matcher *m, sset *s, uint32_t partial, uint8_t need)
{
	int n, acc;
	int32_t *v;
	uint64_t h;
	size_t i;

	if (s->over || !s->count)
		return GBNF_DEAD;
	if (!(v = canon(s, &n, &acc)))
		return GBNF_DEAD;
	h = state_hash(v, n, partial, need);
	if ((size_t)m->n_st * 2 >= m->ht_cap) {
		size_t nc = m->ht_cap ? m->ht_cap * 2 : 1024;
		int32_t *nt = malloc(nc * sizeof(int32_t));

		if (!nt) {
			free(v);
			return GBNF_DEAD;
		}
		memset(nt, 0xff, nc * sizeof(int32_t));
		for (int k = 0; k < m->n_st; k++) {
			size_t j = m->st[k].hash & (nc - 1);

			while (nt[j] >= 0)
				j = (j + 1) & (nc - 1);
			nt[j] = k;
		}
		free(m->ht);
		m->ht = nt;
		m->ht_cap = nc;
	}
	for (i = h & (m->ht_cap - 1); m->ht[i] >= 0; i = (i + 1) & (m->ht_cap - 1)) {
		const gstate *x = &m->st[m->ht[i]];

		if (x->hash == h && x->n == n && x->partial == partial &&
		    x->need == need && !memcmp(x->v, v, (size_t)n * sizeof(int32_t))) {
			free(v);
			return m->ht[i];
		}
	}
	if (m->n_st >= GBNF_STATES_MAX ||
	    grow((void **)&m->st, &m->cap_st, m->n_st + 1, sizeof(gstate))) {
		free(v);
		return GBNF_DEAD;
	}
	m->st[m->n_st] = (gstate){v, n, partial, need, (uint8_t)acc, h};
	m->ht[i] = m->n_st;
	m->stats.states++;
	return m->n_st++;
}

/* The stacks of state x that take character c, advanced and expanded. */
static void take(const gbnf *g, const gstate *x, uint32_t c, sset *out)
{
	for (int i = 0; i < x->n; i += x->v[i] + 1) {
		int len = x->v[i];
		const int32_t *st = &x->v[i + 1];
		int32_t top;

		if (!len)
			continue;
		top = st[len - 1];
		if (!class_has(g, &g->e[top], c))
			continue;
		{
			int32_t *ns = malloc(((size_t)len + 1) * sizeof(int32_t));
			int n = len - 1;

			if (!ns) {
				out->over = 1;
				return;
			}
			memcpy(ns, st, (size_t)n * sizeof(int32_t));
			if (g->e[top + 1].type != E_END)
				ns[n++] = top + 1;
			expand(g, ns, n, out, 0);
			free(ns);
		}
	}
}

/* One byte from state s, uncached. */
static int step_byte(gbnf_matcher *m, int s, uint8_t b)
{
	static const uint32_t cmin[5] = {0, 0, 0x80, 0x800, 0x10000},
			      cmax[5] = {0, 0x7f, 0x7ff, 0xffff, 0x10ffff};
	const gstate *x = &m->st[s];
	sset out = {0};
	uint32_t bits = x->partial & 0xffffff, total = x->partial >> 24, lo, hi;
	uint8_t need = x->need;
	int id;

	if (need) {
		if ((b & 0xc0) != 0x80)
			return GBNF_DEAD;
		bits = (bits << 6) | (b & 0x3f);
		need--;
	} else if (b < 0x80) {
		bits = b;
		total = 1;
	} else if ((b & 0xe0) == 0xc0 && b >= 0xc2) {
		bits = b & 0x1f;
		need = 1;
		total = 2;
	} else if ((b & 0xf0) == 0xe0) {
		bits = b & 0x0f;
		need = 2;
		total = 3;
	} else if ((b & 0xf8) == 0xf0 && b <= 0xf4) {
		bits = b & 0x07;
		need = 3;
		total = 4;
	} else {
		return GBNF_DEAD;
	}
	/* the characters this prefix can still become (no overlong forms,
	 * no surrogates, none past U+10FFFF) */
	lo = bits << (6 * need);
	hi = lo | ((1u << (6 * need)) - 1);
	if (lo < cmin[total])
		lo = cmin[total];
	if (hi > cmax[total])
		hi = cmax[total];
	if (lo > hi || (lo >= 0xd800 && hi <= 0xdfff))
		return GBNF_DEAD;
	if (!need) {
		take(m->g, x, bits, &out);
		id = intern(m, &out, 0, 0);
		sset_free(&out);
		return id;
	}
	for (int i = 0; i < x->n; i += x->v[i] + 1) {
		int len = x->v[i];

		if (len && class_meets(m->g, &m->g->e[x->v[i + len]], lo, hi))
			sset_add(&out, &x->v[i + 1], len);
	}
	id = intern(m, &out, bits | total << 24, need);
	sset_free(&out);
	return id;
}

/* step_byte through the cache */
static int step(gbnf_matcher *m, int s, uint8_t b)
{
	uint64_t key = (((uint64_t)(uint32_t)s << 8) | b) + 1;
	size_t i;
	int v;

	if (m->t_n * 2 >= m->t_cap) {
		size_t nc = m->t_cap ? m->t_cap * 2 : 4096;
		uint64_t *nk = calloc(nc, sizeof(uint64_t));
		int32_t *nv = malloc(nc * sizeof(int32_t));

		if (!nk || !nv) {
			free(nk);
			free(nv);
			return step_byte(m, s, b);
		}
		for (size_t k = 0; k < m->t_cap; k++)
			if (m->tk[k]) {
				size_t j = mix64(m->tk[k]) & (nc - 1);

				while (nk[j])
					j = (j + 1) & (nc - 1);
				nk[j] = m->tk[k];
				nv[j] = m->tv[k];
			}
		free(m->tk);
		free(m->tv);
		m->tk = nk;
		m->tv = nv;
		m->t_cap = nc;
	}
	for (i = mix64(key) & (m->t_cap - 1); m->tk[i]; i = (i + 1) & (m->t_cap - 1))
		if (m->tk[i] == key) {
			m->stats.steps_cached++;
			return m->tv[i];
		}
	v = step_byte(m, s, b);
	m->stats.steps++;
	m->tk[i] = key;
	m->tv[i] = v;
	m->t_n++;
	return v;
}

int gbnf_start(gbnf_matcher *m)
{
	sset out = {0};
	int id;

	start_set(m->g, &out);
	id = intern(m, &out, 0, 0);
	sset_free(&out);
	return id;
}

int gbnf_step(gbnf_matcher *m, int s, const char *b, size_t n)
{
	for (size_t i = 0; i < n && s != GBNF_DEAD; i++)
		s = step(m, s, (uint8_t)b[i]);
	return s;
}

int gbnf_accepting(gbnf_matcher *m, int s)
{
	return s >= 0 && s < m->n_st && !m->st[s].need && m->st[s].accepting;
}

/* ---- the vocabulary trie ------------------------------------------------- */

typedef struct {
	int32_t id;
	const char *p;
	size_t n;
} piece;

static int piece_cmp(const void *a, const void *b)
{
	const piece *x = a, *y = b;
	size_t n = x->n < y->n ? x->n : y->n;
	int c = memcmp(x->p, y->p, n);

	if (c)
		return c;
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return x->id - y->id;
}

/* Builds the trie from the sorted pieces [lo, hi), all sharing their
 * first d bytes, into node k (whose fields are filled). */
static int build(gbnf_vocab *m, const piece *ps, int lo, int hi, size_t d,
		 int k, int *n_kids)
{
	int i = lo, first;

	m->tn[k].tok0 = -1;
	m->tn[k].n_tok = 0;
	while (i < hi && ps[i].n == d) {
		if (m->tn[k].tok0 < 0)
			m->tn[k].tok0 = (int32_t)(&ps[i] - ps);
		m->tn[k].n_tok++;
		i++;
	}
	/* children: runs of equal byte d */
	first = *n_kids;
	m->tn[k].node = first;
	m->tn[k].n_kids = 0;
	for (int j = i; j < hi;) {
		int e = j;

		while (e < hi && (uint8_t)ps[e].p[d] == (uint8_t)ps[j].p[d])
			e++;
		m->kid_byte[*n_kids] = (uint8_t)ps[j].p[d];
		m->kid_node[*n_kids] = m->n_tn++;
		(*n_kids)++;
		m->tn[k].n_kids++;
		j = e;
	}
	for (int c = 0, j = i; c < m->tn[k].n_kids; c++) {
		int e = j;

		while (e < hi && (uint8_t)ps[e].p[d] == (uint8_t)ps[j].p[d])
			e++;
		if (build(m, ps, j, e, d + 1, m->kid_node[first + c], n_kids))
			return -1;
		j = e;
	}
	return 0;
}

int gbnf_vocab_new(const tok *t, gbnf_vocab **out)
{
	gbnf_vocab *m = calloc(1, sizeof(*m));
	uint32_t V = tok_vocab_size(t);
	piece *ps = NULL;
	size_t nodes = 1;
	int np = 0, kids = 0;

	*out = NULL;
	if (!m)
		return qerr_fail(QERR_NOMEM, "out of memory");
	m->vocab = V;
	if (!(ps = malloc(((size_t)V + 1) * sizeof(*ps))))
		goto nomem;
	for (uint32_t id = 0; id < V; id++) {
		size_t n;
		const char *p = tok_piece(t, (int32_t)id, 0, &n);

		if (!p || !n || tok_is_control(t, (int32_t)id))
			continue;
		ps[np++] = (piece){(int32_t)id, p, n};
		nodes += n;
	}
	qsort(ps, (size_t)np, sizeof(*ps), piece_cmp);
	/* at most one node per byte of every piece, plus the root */
	m->tn = malloc(nodes * sizeof(tnode));
	m->kid_node = malloc(nodes * sizeof(int32_t));
	m->kid_byte = malloc(nodes);
	m->toks = malloc(((size_t)np + 1) * sizeof(int32_t));
	if (!m->tn || !m->kid_node || !m->kid_byte || !m->toks)
		goto nomem;
	for (int i = 0; i < np; i++)
		m->toks[i] = ps[i].id;
	m->n_tn = 1;
	if (build(m, ps, 0, np, 0, 0, &kids))
		goto nomem;
	free(ps);
	*out = m;
	return QERR_OK;
nomem:
	free(ps);
	gbnf_vocab_free(&m);
	return qerr_fail(QERR_NOMEM, "out of memory for the vocabulary trie");
}

void gbnf_vocab_free(gbnf_vocab **vp)
{
	gbnf_vocab *v = vp ? *vp : NULL;

	if (!v)
		return;
	free(v->tn);
	free(v->kid_node);
	free(v->kid_byte);
	free(v->toks);
	free(v);
	*vp = NULL;
}

int gbnf_matcher_new(const gbnf *g, const gbnf_vocab *v, gbnf_matcher **out)
{
	gbnf_matcher *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return qerr_fail(QERR_NOMEM, "out of memory");
	m->g = g;
	m->tv_ = v;
	m->vocab = v->vocab;
	m->masks = malloc((size_t)GBNF_MASKS_KEPT * ((v->vocab + 63) / 64) *
			  sizeof(uint64_t));
	if (!m->masks) {
		free(m);
		return qerr_fail(QERR_NOMEM, "out of memory for the grammar");
	}
	for (int i = 0; i < GBNF_MASKS_KEPT; i++)
		m->mask_state[i] = -1;
	*out = m;
	return QERR_OK;
}

void gbnf_matcher_free(gbnf_matcher **mp)
{
	gbnf_matcher *m = mp ? *mp : NULL;

	if (!m)
		return;
	for (int i = 0; i < m->n_st; i++)
		free(m->st[i].v);
	free(m->st);
	free(m->ht);
	free(m->tk);
	free(m->tv);
	free(m->masks);
	free(m);
	*mp = NULL;
}

const uint64_t *gbnf_allowed(gbnf_matcher *m, int s)
{
	size_t words = (m->vocab + 63) / 64;
	int slot = 0;
	uint64_t *mask;
	struct frame {
		int32_t node, state;
	} *stk;
	int sp = 0, cap = 1024;

	if (s < 0 || s >= m->n_st)
		return NULL;
	m->clock++;
	for (int i = 0; i < GBNF_MASKS_KEPT; i++) {
		if (m->mask_state[i] == s) {
			m->mask_used[i] = m->clock;
			m->stats.masks_cached++;
			return m->masks + (size_t)i * words;
		}
		if (m->mask_used[i] < m->mask_used[slot])
			slot = i;
	}
	mask = m->masks + (size_t)slot * words;
	memset(mask, 0, words * sizeof(uint64_t));
	m->mask_state[slot] = -1;
	if (!(stk = malloc((size_t)cap * sizeof(*stk))))
		return NULL;
	stk[sp++] = (struct frame){0, s};
	while (sp) {
		struct frame f = stk[--sp];
		const gbnf_vocab *tv = m->tv_;
		const tnode *nd = &tv->tn[f.node];

		for (int c = 0; c < nd->n_kids; c++) {
			int32_t kid = tv->kid_node[nd->node + c];
			int ns = step(m, f.state, tv->kid_byte[nd->node + c]);
			const tnode *kn = &tv->tn[kid];

			if (ns == GBNF_DEAD)
				continue;
			for (int k = 0; k < kn->n_tok; k++) {
				int32_t id = tv->toks[kn->tok0 + k];

				mask[id >> 6] |= 1ull << (id & 63);
			}
			if (kn->n_kids) {
				if (sp == cap) {
					struct frame *n2 = realloc(
						stk, (size_t)cap * 2 *
							     sizeof(*stk));

					if (!n2) {
						free(stk);
						return NULL;
					}
					stk = n2;
					cap *= 2;
				}
				stk[sp++] = (struct frame){kid, ns};
			}
		}
	}
	free(stk);
	m->mask_state[slot] = s;
	m->mask_used[slot] = m->clock;
	m->stats.masks_built++;
	return mask;
}

void gbnf_get_stats(const gbnf_matcher *m, gbnf_stats *st)
{
	*st = m->stats;
}

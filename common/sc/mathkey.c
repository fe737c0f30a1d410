/*
 * mathkey — math answers to keys (see mathkey.h): a cleaning pass, a
 * lexer, a recursive-descent parser into a small node pool, evaluation
 * over exact rationals falling back to IEEE double, and the key writer.
 * Callers: answer.c (the `math` format), the tests and fuzz_mathkey.
 */
#include "sc/mathkey.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned char uchar;

/* ---- cleaning ----------------------------------------------------------- */

/* A growing output of at most MATHKEY_INPUT_MAX * 2 bytes. */
typedef struct {
	char b[MATHKEY_INPUT_MAX * 2 + 8];
	size_t n;
	int full;
} sbuf;

static void put(sbuf *o, const char *s, size_t n)
{
	if (o->n + n >= sizeof(o->b)) {
		o->full = 1;
		return;
	}
	memcpy(o->b + o->n, s, n);
	o->n += n;
	o->b[o->n] = '\0';
}

static int is_letter(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_dig(int c)
{
	return c >= '0' && c <= '9';
}

/* The command name at s[i] ('\\' then letters): its length (letters), 0
 * when s[i + 1] is not a letter. */
static size_t cmd_len(const char *s, size_t n, size_t i)
{
	size_t k = i + 1;

	while (k < n && is_letter((uchar)s[k]))
		k++;
	return k - i - 1;
}

static int cmd_is(const char *s, size_t n, size_t i, const char *name)
{
	size_t l = strlen(name);

	return cmd_len(s, n, i) == l && !memcmp(s + i + 1, name, l);
}

/* End of the balanced {...} group opening at s[i] (the index after its
 * '}'), or 0 when it is not closed. */
static size_t group_end(const char *s, size_t n, size_t i)
{
	int d = 0;

	for (size_t k = i; k < n; k++) {
		if (s[k] == '\\' && k + 1 < n) {
			k++;
			continue;
		}
		if (s[k] == '{')
			d++;
		else if (s[k] == '}' && --d == 0)
			return k + 1;
	}
	return 0;
}

/* Unicode signs models write, and what the parse reads instead */
static const struct {
	const char *utf8, *as;
} UNI[] = {
	{"\xe2\x88\x92", "-"},         /* U+2212 minus */
	{"\xe2\x88\x9e", "\\infty "}, /* U+221E infinity */
	{"\xe2\x88\x9a", "\\sqrt "},  /* U+221A square root */
	{"\xc3\x97", "*"},              /* U+00D7 times */
	{"\xc3\xb7", "/"},              /* U+00F7 division */
	{"\xc2\xb7", "*"},              /* U+00B7 middle dot */
	{"\xcf\x80", "\\pi "},         /* U+03C0 pi */
	{"\xc2\xb0", ""},               /* U+00B0 degree */
};

static const char *const SPACING[] = {",", ";", ":", "!", " ", "quad", "qquad",
				      "displaystyle", "textstyle", "left",
				      "right", "big", "Big", "bigl", "bigr",
				      "Bigl", "Bigr", "limits"};
/* Commands whose group may hold a unit (\text{ cm}); the font commands
 * after them hold a variable or a name (\mathbf{i}, \operatorname{lcm})
 * and never a unit: their content is kept. */
static const char *const TEXTCMD[] = {"text", "mathrm", "textbf", "textrm",
				      "mbox", "mathbf", "textit", "mathit",
				      "operatorname", "boldsymbol", "mathsf",
				      "texttt", "emph"};
#define UNITCMDS 5

/* Minus signs other than '-' and U+2212 that models write (U+2012 figure
 * dash, U+2013 en dash, U+FE63 small and U+FF0D fullwidth hyphen-minus):
 * a minus where a sign may stand (clean), else left to fail the parse. */
static const char *const DASH[] = {"\xe2\x80\x92", "\xe2\x80\x93",
				   "\xef\xb9\xa3", "\xef\xbc\x8d"};

/* The last byte of o that is not a space, or 0. */
static int last_put(const sbuf *o)
{
	size_t k = o->n;

	while (k > 0 && o->b[k - 1] == ' ')
		k--;
	return k ? (uchar)o->b[k - 1] : 0;
}

/* A value ends where o ends: a digit, a letter, a point or a closing
 * bracket (what a unit follows; what makes a dash after it no sign). */
static int after_value(const sbuf *o)
{
	int c = last_put(o);

	return c && (is_dig(c) || is_letter(c) || c >= 0x80 ||
		     strchr(".)]}!", c));
}

/* s[a, b) is the word "or" or "and" alone, spaces around it: it joins
 * two answers as a comma does ("3\text{ or }5" is 3, 5; not 35). */
static int joiner(const char *s, size_t a, size_t b)
{
	while (a < b && s[a] == ' ')
		a++;
	while (b > a && s[b - 1] == ' ')
		b--;
	return (b - a == 2 && !memcmp(s + a, "or", 2)) ||
	       (b - a == 3 && !memcmp(s + a, "and", 3));
}

/* s[a, b) reads as a unit: words of letters (or of other scripts: "°C",
 * "µm"), a word of one letter only an SI letter, joined by spaces, '/',
 * '*', '.', '-' or a power ("m/s^2", "square meters"); not "e" or "i",
 * not a digit (the caller's). */
static int unit_text(const char *s, size_t a, size_t b)
{
	int words = 0;

	for (size_t i = a; i < b;) {
		uchar c = (uchar)s[i];
		size_t w = i;

		if (!is_letter(c) && c < 0x80) {
			if (!strchr(" /*.-^{}", c))
				return 0;
			i++;
			continue;
		}
		while (w < b && (is_letter((uchar)s[w]) || (uchar)s[w] >= 0x80))
			w++;
		if (w - i == 1 && !strchr("msghlLNJWVAK", c))
			return 0;
		words++;
		i = w;
	}
	return words > 0;
}

/* What follows a unit at s[i] lets it be one: the end, an operator, a
 * separator or a closing bracket, past spacing; not a value it would be
 * part of ("1\text{ hour }30" is neither 1 nor 130). */
static int unit_end(const char *s, size_t n, size_t i)
{
	for (;;) {
		size_t l;

		while (i < n && (s[i] == ' ' || s[i] == '$'))
			i++;
		if (i == n)
			return 1;
		if (s[i] != '\\')
			return !is_dig((uchar)s[i]) && !is_letter((uchar)s[i]) &&
			       (uchar)s[i] < 0x80 && s[i] != '(' && s[i] != '{';
		if (!(l = cmd_len(s, n, i)))
			return 1; /* \, \) \} ... */
		if (!cmd_is(s, n, i, "quad") && !cmd_is(s, n, i, "qquad"))
			return cmd_is(s, n, i, "cdot") ||
			       cmd_is(s, n, i, "times") ||
			       cmd_is(s, n, i, "div") ||
			       cmd_is(s, n, i, "text") ||
			       cmd_is(s, n, i, "right");
		i += 1 + l;
	}
}

/*
 * The cleaning pass: Unicode signs to ASCII or commands, $ and %
 * dropped, spacing commands, \left / \right and the math delimiters \( \)
 * \[ \] dropped, \dfrac and \tfrac as \frac, degrees dropped; a
 * \text{..} (TEXTCMD) group that is a unit after a value (unit_text,
 * unit_end) dropped with its power, "or" / "and" (in a group or not) a
 * comma, any other group's content kept. The same pass makes the parse's
 * text and the fallback's spelling.
 */
static void clean(const char *s, size_t n, sbuf *o)
{
	for (size_t i = 0; i < n && !o->full;) {
		const uchar *u = (const uchar *)s + i;
		size_t rest = n - i;

		size_t k, ul = 0;

		/* a dash as a minus sign where a sign may stand ("–3",
		 * "2^{–1}"); after a value ("3–5", a range) it stays, and
		 * the parse fails */
		for (k = 0; k < sizeof(DASH) / sizeof(*DASH); k++)
			if (rest >= 3 && !memcmp(u, DASH[k], 3))
				break;
		if (k < sizeof(DASH) / sizeof(*DASH)) {
			if (after_value(o))
				put(o, s + i, 3);
			else
				put(o, "-", 1);
			i += 3;
			continue;
		}
		/* Unicode signs as ASCII or commands */
		for (k = 0; k < sizeof(UNI) / sizeof(*UNI); k++) {
			ul = strlen(UNI[k].utf8);
			if (rest >= ul && !memcmp(u, UNI[k].utf8, ul))
				break;
		}
		if (k < sizeof(UNI) / sizeof(*UNI)) {
			put(o, UNI[k].as, strlen(UNI[k].as));
			i += ul;
		} else if (rest >= 3 && u[0] == '{' && u[1] == ',' &&
			   u[2] == '}') {
			put(o, ",", 1); /* 1{,}000 */
			i += 3;
		} else if (u[0] == '$' || u[0] == '%') {
			i++;
		} else if (u[0] == '\\' && rest >= 2 &&
			   (u[1] == '$' || u[1] == '%')) {
			i += 2;
		} else if (u[0] == '\\' && rest >= 2 && strchr("()[]", u[1]) &&
			   u[1]) {
			i += 2; /* \( x \), \[ x \]: the math's delimiters */
		} else if (u[0] == '^' && rest >= 6 &&
			   !memcmp(u, "^\\circ", 6)) {
			i += 6;
		} else if (u[0] == '^' && rest >= 8 &&
			   !memcmp(u, "^{\\circ}", 8)) {
			i += 8;
		} else if (u[0] == '\\') {
			size_t l = cmd_len(s, n, i), k;
			int done = 0;

			if (!l && rest >= 2) {
				/* \, \; \: \! "\ " */
				for (k = 0; k < 5; k++)
					if (u[1] == SPACING[k][0]) {
						i += 2;
						done = 1;
						break;
					}
				if (!done) {
					put(o, s + i, 2);
					i += 2;
				}
				continue;
			}
			for (k = 5; k < sizeof(SPACING) / sizeof(*SPACING); k++)
				if (cmd_is(s, n, i, SPACING[k])) {
					/* a space between two equations
					 * separates them: "x = 2 \quad y = 3"
					 * is no 3 */
					if (k <= 6 && memchr(o->b, '=', o->n) &&
					    memchr(s + i, '=', n - i))
						put(o, " , ", 3);
					i += 1 + l;
					if (i < n && s[i] == '.')
						i++; /* \left. \right. */
					done = 1;
					break;
				}
			if (done)
				continue;
			if (cmd_is(s, n, i, "dfrac") || cmd_is(s, n, i, "tfrac")) {
				put(o, "\\frac", 5);
				i += 6;
				continue;
			}
			if (cmd_is(s, n, i, "circ")) {
				i += 5;
				continue;
			}
			if (cmd_is(s, n, i, "boxed")) {
				i += 6; /* its braces stay: a group */
				continue;
			}
			for (k = 0; k < sizeof(TEXTCMD) / sizeof(*TEXTCMD); k++)
				if (cmd_is(s, n, i, TEXTCMD[k]))
					break;
			if (k < sizeof(TEXTCMD) / sizeof(*TEXTCMD)) {
				size_t g = i + 1 + l, e, d, q;
				int digit = 0;

				while (g < n && s[g] == ' ')
					g++;
				if (g < n && s[g] == '{' &&
				    (e = group_end(s, n, g))) {
					for (d = g + 1; d + 1 < e; d++)
						digit |= is_dig((uchar)s[d]);
					/* a unit's power goes with it:
					 * \text{ m/s}^2, \text{m}^{-1} */
					q = e;
					if (q + 1 < n && s[q] == '^') {
						size_t p = q + 1, pe;

						if (s[p] == '{' &&
						    (pe = group_end(s, n, p)))
							q = pe;
						else if (is_dig((uchar)s[p]) ||
							 (s[p] == '-' && p + 1 < n &&
							  is_dig((uchar)s[p + 1]))) {
							for (p += s[p] == '-';
							     p < n && is_dig((uchar)s[p]);)
								p++;
							q = p;
						}
					}
					if (!digit && joiner(s, g + 1, e - 1)) {
						put(o, " , ", 3);
						i = e;
					} else if (!digit && k < UNITCMDS &&
						   after_value(o) &&
						   unit_text(s, g + 1, e - 1) &&
						   unit_end(s, n, q)) {
						i = q; /* "12\text{ cm}": 12 */
					} else {
						/* \text{5}, \mathbf{i}, a
						 * \text{ hour } between
						 * values: its content */
						clean(s + g + 1, e - g - 2, o);
						i = e;
					}
					continue;
				}
			}
			put(o, s + i, 1 + l);
			i += 1 + l;
		} else if (is_letter(u[0])) {
			/* a word; "or" and "and" join two answers as a comma
			 * does ("x = 2 or x = 3" is not 3), spaced so that
			 * "2 or 300" is no 2,300 */
			size_t w = i;

			while (w < n && is_letter((uchar)s[w]))
				w++;
			if (joiner(s, i, w))
				put(o, " , ", 3);
			else
				put(o, s + i, w - i);
			i = w;
		} else {
			put(o, s + i, 1);
			i++;
		}
	}
}

/* ---- lexer -------------------------------------------------------------- */

enum tk { T_END, T_NUM, T_VAR, T_CMD, T_OP, T_SETL, T_SETR };

typedef struct {
	int kind;
	const char *s;  /* its text */
	size_t len;
	int space;      /* whitespace before it */
} token;

#define MAX_TOKENS 512

typedef struct {
	token t[MAX_TOKENS + 1];
	int n, at;
	int err;
	/* nodes */
	struct node *pool;
	int n_nodes;
	int depth;
	/* variables seen (names as tokens) */
	const char *var[8];
	size_t var_len[8];
	int n_vars;
	int rank[8];    /* a variable's place in name order */
} parser;

/* A number at s[i]: digits with thousands groups (1-3 digits then
 * ",ddd" groups, not followed by a digit) and a fraction, or ".digits".
 * Returns its end (i when none). */
static size_t lex_number(const char *s, size_t n, size_t i)
{
	size_t j = i, k;

	if (j < n && is_dig((uchar)s[j])) {
		for (k = j; k < n && is_dig((uchar)s[k]); k++)
			;
		if (k - j <= 3 && k < n && (s[k] == ',' || s[k] == ' ')) {
			/* "1,000" and the SI's "1 000": one separator
			 * throughout, each group three digits */
			size_t g = k;
			char sep = s[k];

			while (g + 3 < n && s[g] == sep &&
			       is_dig((uchar)s[g + 1]) &&
			       is_dig((uchar)s[g + 2]) &&
			       is_dig((uchar)s[g + 3]) &&
			       (g + 4 >= n || !is_dig((uchar)s[g + 4])))
				g += 4;
			k = g;
		}
		j = k;
	}
	if (j + 1 < n && s[j] == '.' && is_dig((uchar)s[j + 1])) {
		j++;
		while (j < n && is_dig((uchar)s[j]))
			j++;
	} else if (j > i && j + 1 == n && s[j] == '.') {
		j++; /* "\boxed{3.}": the number's own point, at the end */
	}
	/* an exponent: 1e5, 2.5E-3 (digits, not followed by a letter) */
	if (j > i && j + 1 < n && (s[j] == 'e' || s[j] == 'E')) {
		size_t k = j + 1;

		if (k < n && (s[k] == '-' || s[k] == '+'))
			k++;
		if (k < n && is_dig((uchar)s[k])) {
			while (k < n && is_dig((uchar)s[k]))
				k++;
			if (k >= n || !is_letter((uchar)s[k]))
				j = k;
		}
	}
	return j;
}

static void lex(parser *p, const char *s, size_t n)
{
	size_t i = 0;
	int space = 0;

	p->n = 0;
	while (i < n) {
		token *t = &p->t[p->n];
		uchar c = (uchar)s[i];
		size_t e;

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			space = 1;
			i++;
			continue;
		}
		if (p->n == MAX_TOKENS) {
			p->err = 1;
			return;
		}
		t->s = s + i;
		t->space = space;
		space = 0;
		if ((e = lex_number(s, n, i)) > i) {
			t->kind = T_NUM;
			t->len = e - i;
			i = e;
		} else if (is_letter(c)) {
			t->kind = T_VAR;
			for (e = i; e < n && is_letter((uchar)s[e]); e++)
				;
			t->len = e - i; /* a word; the parser splits it */
			i = e;
		} else if (c == '\\' && i + 1 < n &&
			   (s[i + 1] == '{' || s[i + 1] == '}')) {
			t->kind = s[i + 1] == '{' ? T_SETL : T_SETR;
			t->len = 2;
			i += 2;
		} else if (c == '\\' && cmd_len(s, n, i)) {
			t->kind = T_CMD;
			t->len = 1 + cmd_len(s, n, i);
			i += t->len;
		} else if (strchr("+-*/^()[]{},=_!<>|'.", c)) {
			t->kind = T_OP;
			t->len = 1;
			i++;
		} else {
			p->err = 1; /* anything else: not math we read */
			return;
		}
		p->n++;
	}
	p->t[p->n].kind = T_END;
	p->t[p->n].s = s + n;
	p->t[p->n].len = 0;
	p->t[p->n].space = space;
}

/* ---- nodes -------------------------------------------------------------- */

enum nk { N_NUM, N_VAR, N_PI, N_INF, N_NEG, N_ADD, N_SUB, N_MUL, N_DIV,
	  N_POW, N_ROOT };

typedef struct node {
	int kind;
	int a, b;       /* children (N_ROOT: b is the degree node, -1: 2) */
	int var;        /* N_VAR */
	int64_t n, d;   /* N_NUM exact value */
	double x;       /* N_NUM when not exact */
	int exact;
} node;

static int mk(parser *p, int kind, int a, int b)
{
	node *x;

	if (p->n_nodes >= MATHKEY_NODES) {
		p->err = 1;
		return -1;
	}
	x = &p->pool[p->n_nodes];
	memset(x, 0, sizeof(*x));
	x->kind = kind;
	x->a = a;
	x->b = b;
	return p->n_nodes++;
}

static token *peek(parser *p)
{
	return &p->t[p->at];
}

static int is_op(const token *t, char c)
{
	return t->kind == T_OP && t->s[0] == c;
}

static int is_cmd(const token *t, const char *name)
{
	size_t l = strlen(name);

	return t->kind == T_CMD && t->len == l + 1 && !memcmp(t->s + 1, name, l);
}

/* gcd(|a|, |b|), the magnitudes unsigned (|INT64_MIN| is 2^63); every
 * caller has one of them a denominator (>= 1), so the result fits. */
static int64_t gcd64(int64_t a, int64_t b)
{
	uint64_t x = a < 0 ? -(uint64_t)a : (uint64_t)a;
	uint64_t y = b < 0 ? -(uint64_t)b : (uint64_t)b;

	while (y) {
		uint64_t t = x % y;

		x = y;
		y = t;
	}
	return (int64_t)x;
}

/* A number token's text [s, s+len) as a node: exact when its digits fit
 * int64 (so every decimal key the writer below makes reads back exact),
 * else a double. */
static int num_node(parser *p, const char *s, size_t len)
{
	int id = mk(p, N_NUM, -1, -1);
	char digits[64];
	size_t nd = 0, frac = 0;
	int dot = 0;
	node *x;

	if (id < 0)
		return -1;
	x = &p->pool[id];
	int64_t ex = 0;
	const char *e = memchr(s, 'e', len);

	if (!e)
		e = memchr(s, 'E', len);
	if (e) {
		/* 2.5e-3: the mantissa's digits, then the exponent */
		size_t k = (size_t)(e - s) + 1;
		int neg = 0;

		if (s[k] == '-' || s[k] == '+')
			neg = s[k++] == '-';
		for (; k < len && ex < 100000; k++)
			ex = ex * 10 + (s[k] - '0');
		if (neg)
			ex = -ex;
		len = (size_t)(e - s);
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] == ',' || s[i] == ' ')
			continue;
		if (s[i] == '.') {
			dot = 1;
			continue;
		}
		if (nd + 1 >= sizeof(digits)) {
			p->err = 1;
			return -1;
		}
		digits[nd++] = s[i];
		frac += dot;
	}
	digits[nd] = '\0';
	if (ex > 64 || ex < -64 || (int64_t)frac - ex > 18) {
		/* far out of exact range: a double, scaled step by step */
		x->x = 0;
		for (size_t i = 0; i < nd; i++)
			x->x = x->x * 10 + (digits[i] - '0');
		for (int64_t i = (int64_t)frac - ex; i > 0; i--)
			x->x /= 10;
		for (int64_t i = ex - (int64_t)frac; i > 0 && x->x < INFINITY;
		     i--)
			x->x *= 10;
		/* past a double's range (1e-400 is no 0, 1e400 no
		 * infinity): undefined, so the spelling keys it */
		if (x->x != 0 ? !(x->x >= DBL_MIN && x->x <= DBL_MAX)
			      : strspn(digits, "0") < nd)
			x->x = NAN;
		return id;
	}
	while (ex > 0 && frac > 0) {
		ex--;
		frac--;
	}
	while (ex < 0) {
		ex++;
		frac++;
	}
	while (ex > 0 && nd + 1 < sizeof(digits)) {
		digits[nd++] = '0';
		ex--;
	}
	digits[nd] = '\0';
	int64_t v = 0, d = 1;
	int fits = 1;

	for (size_t i = 0; i < nd && fits; i++)
		fits = !__builtin_mul_overflow(v, 10, &v) &&
		       !__builtin_add_overflow(v, digits[i] - '0', &v);
	if (fits) {
		/* frac <= 18 here (checked above): 10^frac fits too */
		for (size_t i = 0; i < frac; i++)
			d *= 10;
		x->exact = 1;
		x->n = v / gcd64(v, d);
		x->d = d / gcd64(v, d);
		if (!v) {
			x->n = 0;
			x->d = 1;
		}
	} else {
		x->x = 0;
		for (size_t i = 0; i < nd; i++)
			x->x = x->x * 10 + (digits[i] - '0');
		for (size_t i = 0; i < frac; i++)
			x->x /= 10;
	}
	return id;
}

static int var_node(parser *p, const char *name, size_t len)
{
	int id, v;

	for (v = 0; v < p->n_vars; v++)
		if (p->var_len[v] == len && !memcmp(p->var[v], name, len))
			break;
	if (v == p->n_vars) {
		if (v == 8) {
			p->err = 1;
			return -1;
		}
		p->var[v] = name;
		p->var_len[v] = len;
		p->n_vars++;
	}
	if ((id = mk(p, N_VAR, -1, -1)) >= 0)
		p->pool[id].var = v;
	return id;
}

static const char *const GREEK[] = {
	"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta",
	"eta", "theta", "vartheta", "iota", "kappa", "lambda", "mu", "nu",
	"xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi",
	"omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi",
	"Psi", "Omega"};

static int expr(parser *p);
static int unary(parser *p);

/* An argument of \frac or \sqrt: a {group}, or one character (the first
 * digit of a number token: "\frac12"), or one command or letter. */
static int argument(parser *p)
{
	token *t = peek(p);

	if (is_op(t, '{')) {
		int e;

		p->at++;
		if (++p->depth > MATHKEY_DEPTH) {
			p->err = 1;
			return -1;
		}
		e = expr(p);
		p->depth--;
		if (!is_op(peek(p), '}')) {
			p->err = 1;
			return -1;
		}
		p->at++;
		return e;
	}
	if (t->kind == T_NUM) {
		int id;

		if (t->len == 1 || !is_dig((uchar)t->s[1])) {
			p->at++;
			return num_node(p, t->s, t->len);
		}
		/* one digit of it; the rest stays the next token */
		id = num_node(p, t->s, 1);
		t->s++;
		t->len--;
		t->space = 0;
		return id;
	}
	if (t->kind == T_VAR) {
		int id = var_node(p, t->s, 1);

		if (t->len == 1)
			p->at++;
		else {
			t->s++;
			t->len--;
			t->space = 0;
		}
		return id;
	}
	if (t->kind == T_CMD)
		return unary(p);
	p->err = 1;
	return -1;
}

/* "(" expr ")" and the other groups; close is the closing character. */
static int group(parser *p, char close)
{
	int e;

	p->at++;
	if (++p->depth > MATHKEY_DEPTH) {
		p->err = 1;
		return -1;
	}
	e = expr(p);
	p->depth--;
	if (!is_op(peek(p), close)) {
		p->err = 1;
		return -1;
	}
	p->at++;
	return e;
}

/* A mixed number after the integer node i: "2\frac{1}{2}" or "2 1/2"
 * (all digits). Returns the node of i + fraction, or i. */
static int mixed(parser *p, int i, const token *it)
{
	token *t = peek(p);

	if (memchr(it->s, '.', it->len) || memchr(it->s, ',', it->len) ||
	    memchr(it->s, ' ', it->len))
		return i;
	if (is_cmd(t, "frac")) {
		/* "2\frac{1}{2}" and "2 \frac{1}{2}" alike: 2 1/2 */
		int save = p->at, a, b;

		p->at++;
		a = argument(p);
		b = p->err ? -1 : argument(p);
		if (!p->err && a >= 0 && b >= 0 &&
		    p->pool[a].kind == N_NUM && p->pool[b].kind == N_NUM &&
		    p->pool[a].exact && p->pool[b].exact &&
		    p->pool[a].d == 1 && p->pool[b].d == 1)
			return mk(p, N_ADD, i, mk(p, N_DIV, a, b));
		p->at = save; /* not a mixed number: implicit product */
		p->err = 0;
		return i;
	}
	if (t->kind == T_NUM && t->space && p->at + 2 < p->n &&
	    is_op(&p->t[p->at + 1], '/') &&
	    p->t[p->at + 2].kind == T_NUM &&
	    !memchr(t->s, '.', t->len) &&
	    !memchr(p->t[p->at + 2].s, '.', p->t[p->at + 2].len)) {
		int a = num_node(p, t->s, t->len), b;

		p->at += 2;
		b = num_node(p, peek(p)->s, peek(p)->len);
		p->at++;
		return mk(p, N_ADD, i, mk(p, N_DIV, a, b));
	}
	return i;
}

static int atom(parser *p)
{
	token *t = peek(p);

	if (p->err)
		return -1;
	if (t->kind == T_NUM) {
		token it = *t;
		int id;

		p->at++;
		id = num_node(p, it.s, it.len);
		return id < 0 ? -1 : mixed(p, id, &it);
	}
	if (t->kind == T_VAR) {
		/* words: pi, sqrt, inf(inity); a word of other letters is a
		 * product of one-letter variables */
		if (t->len == 2 && !memcmp(t->s, "pi", 2)) {
			p->at++;
			return mk(p, N_PI, -1, -1);
		}
		if ((t->len == 3 && !memcmp(t->s, "inf", 3)) ||
		    (t->len == 8 && !memcmp(t->s, "infinity", 8))) {
			p->at++;
			return mk(p, N_INF, -1, -1);
		}
		if (t->len == 4 && !memcmp(t->s, "sqrt", 4)) {
			p->at++;
			if (!is_op(peek(p), '(')) {
				p->err = 1;
				return -1;
			}
			return mk(p, N_ROOT, group(p, ')'), -1);
		}
		if (t->len >= 3) {
			p->err = 1; /* a word: text, not math */
			return -1;
		}
		return argument(p);
	}
	if (t->kind == T_CMD) {
		size_t k;

		if (is_cmd(t, "frac")) {
			int a, b;

			p->at++;
			a = argument(p);
			b = p->err ? -1 : argument(p);
			return mk(p, N_DIV, a, b);
		}
		if (is_cmd(t, "sqrt")) {
			int deg = -1, a;

			p->at++;
			if (is_op(peek(p), '[')) {
				deg = group(p, ']');
				if (p->err)
					return -1;
			}
			a = argument(p);
			return mk(p, N_ROOT, a, deg);
		}
		if (is_cmd(t, "pi")) {
			p->at++;
			return mk(p, N_PI, -1, -1);
		}
		if (is_cmd(t, "infty")) {
			p->at++;
			return mk(p, N_INF, -1, -1);
		}
		for (k = 0; k < sizeof(GREEK) / sizeof(*GREEK); k++)
			if (is_cmd(t, GREEK[k])) {
				p->at++;
				return var_node(p, t->s, t->len);
			}
		p->err = 1; /* \sin, \log, ...: not read */
		return -1;
	}
	if (is_op(t, '('))
		return group(p, ')');
	if (is_op(t, '['))
		return group(p, ']');
	if (is_op(t, '{'))
		return group(p, '}');
	p->err = 1;
	return -1;
}

/* atom [^ exponent] (right-associative); x_1 subscripts are part of the
 * variable's name only as far as the key goes: refused. */
static int power(parser *p)
{
	int b = atom(p);

	if (p->err)
		return -1;
	if (is_op(peek(p), '^')) {
		int e;

		p->at++;
		if (++p->depth > MATHKEY_DEPTH) {
			p->err = 1;
			return -1;
		}
		if (is_op(peek(p), '-') || is_op(peek(p), '+')) {
			int neg = is_op(peek(p), '-');

			p->at++;
			e = power(p);
			if (neg)
				e = mk(p, N_NEG, e, -1);
		} else if (is_op(peek(p), '{')) {
			e = argument(p);
		} else {
			/* a number whole: "2^10" is 1024 as plain text writes
			 * it, not LaTeX's 2^1 times 0 (\frac12 splits its
			 * digits, a power does not) */
			if (peek(p)->kind == T_NUM) {
				token *t = peek(p);

				p->at++;
				e = num_node(p, t->s, t->len);
			} else {
				e = argument(p);
			}
			if (!p->err && is_op(peek(p), '^'))
				e = mk(p, N_POW, e, (p->at++, power(p)));
		}
		p->depth--;
		return mk(p, N_POW, b, e);
	}
	return b;
}

static int unary(parser *p)
{
	if (is_op(peek(p), '-')) {
		p->at++;
		if (++p->depth > MATHKEY_DEPTH) {
			p->err = 1;
			return -1;
		}
		int a = unary(p);

		p->depth--;
		return mk(p, N_NEG, a, -1);
	}
	if (is_op(peek(p), '+')) {
		p->at++;
		return unary(p);
	}
	return power(p);
}

/* Whether t can start an implicit factor (2x, x(x+1), 2\sqrt3). */
static int starts_factor(const token *t)
{
	return t->kind == T_NUM || t->kind == T_VAR ||
	       (t->kind == T_CMD && !(t->len == 5 && !memcmp(t->s, "\\cdot", 5)) &&
		!(t->len == 6 && !memcmp(t->s, "\\times", 6)) &&
		!(t->len == 4 && !memcmp(t->s, "\\div", 4))) ||
	       (t->kind == T_OP && (t->s[0] == '(' || t->s[0] == '{'));
}

static int term(parser *p)
{
	int a = unary(p);

	while (!p->err) {
		token *t = peek(p);

		if (is_op(t, '*') || is_cmd(t, "cdot") || is_cmd(t, "times")) {
			p->at++;
			a = mk(p, N_MUL, a, unary(p));
		} else if (is_op(t, '/') || is_cmd(t, "div")) {
			p->at++;
			a = mk(p, N_DIV, a, unary(p));
		} else if (t->kind == T_NUM && p->at > 0 &&
			   p->t[p->at - 1].kind == T_NUM) {
			/* "2 3", "12 34": two numbers side by side are no
			 * product (the SI's thousands groups are one number,
			 * lex_number) */
			p->err = 1;
		} else if (starts_factor(t)) {
			a = mk(p, N_MUL, a, power(p));
		} else {
			break;
		}
	}
	return a;
}

static int expr(parser *p)
{
	int a = term(p);

	while (!p->err) {
		if (is_op(peek(p), '+')) {
			p->at++;
			a = mk(p, N_ADD, a, term(p));
		} else if (is_op(peek(p), '-')) {
			p->at++;
			a = mk(p, N_SUB, a, term(p));
		} else {
			break;
		}
	}
	return a;
}

/* ---- values ------------------------------------------------------------- */

typedef struct {
	int exact;     /* n/d, reduced, d > 0 */
	int64_t n, d;
	double x;      /* when not exact (may be +-inf) */
	int bad;       /* undefined (0/0, a root of a negative, ...) */
} val;

static double as_d(val v)
{
	return v.exact ? (double)v.n / (double)v.d : v.x;
}

static val vq(int64_t n, int64_t d)
{
	val v = {1, 0, 1, 0, 0};
	int64_t g;

	if (d < 0) {
		if (n == INT64_MIN || d == INT64_MIN) {
			v.exact = 0;
			v.x = (double)n / (double)d;
			return v;
		}
		n = -n;
		d = -d;
	}
	g = gcd64(n, d);
	if (g > 1) {
		n /= g;
		d /= g;
	}
	v.n = n;
	v.d = d;
	return v;
}

static val vd(double x)
{
	val v = {0, 0, 1, x, 0};

	if (x != x)
		v.bad = 1;
	return v;
}

/* x, the double result of an operation on a and b that are finite and
 * not 0: undefined where it left a double's range (2^{2000} is no
 * infinity, 2^{-2000} no 0: either would share a key with a value it is
 * not; the sample falls back to its spelling). */
static val vd_of(double x, val a, val b)
{
	double m = fabs(x);

	if (!(m <= DBL_MAX) && isfinite(as_d(a)) && isfinite(as_d(b)))
		return (val){.bad = 1};
	if (m < DBL_MIN && as_d(a) != 0 && as_d(b) != 0 &&
	    isfinite(as_d(a)) && isfinite(as_d(b)))
		return (val){.bad = 1};
	return vd(x);
}

static val v_add(val a, val b, int sub)
{
	if (a.bad || b.bad)
		return (val){.bad = 1};
	if (a.exact && b.exact) {
		int64_t x, y, n, d;

		if (!__builtin_mul_overflow(a.n, b.d, &x) &&
		    !__builtin_mul_overflow(b.n, a.d, &y) &&
		    !(sub ? __builtin_sub_overflow(x, y, &n)
			  : __builtin_add_overflow(x, y, &n)) &&
		    !__builtin_mul_overflow(a.d, b.d, &d))
			return vq(n, d);
	}
	{
		double x = as_d(a), y = as_d(b), r = sub ? x - y : x + y,
		       big = fabs(x) > fabs(y) ? fabs(x) : fabs(y);

		/* the rounding left of a difference that is 0 (\sqrt{2}
		 * \sqrt{8} - 4): 0, where a sum's own size is kept */
		if (fabs(r) <= 1e-12 * big && isfinite(big))
			return vq(0, 1);
		if (!(fabs(r) <= DBL_MAX) && isfinite(x) && isfinite(y))
			return (val){.bad = 1};
		return vd(r);
	}
}

static val v_mul(val a, val b)
{
	if (a.bad || b.bad)
		return (val){.bad = 1};
	if (a.exact && b.exact) {
		int64_t g1 = gcd64(a.n, b.d), g2 = gcd64(b.n, a.d), n, d;

		if (!g1)
			g1 = 1;
		if (!g2)
			g2 = 1;
		if (!__builtin_mul_overflow(a.n / g1, b.n / g2, &n) &&
		    !__builtin_mul_overflow(a.d / g2, b.d / g1, &d))
			return vq(n, d);
	}
	return vd_of(as_d(a) * as_d(b), a, b);
}

static val v_div(val a, val b)
{
	if (a.bad || b.bad || (b.exact && b.n == 0) ||
	    (!b.exact && b.x == 0))
		return (val){.bad = 1};
	if (b.exact) {
		val r = b;

		if (b.n == INT64_MIN)
			return vd_of(as_d(a) / as_d(b), a, b);
		r.n = b.d;
		r.d = b.n;
		return v_mul(a, vq(r.n, r.d));
	}
	return vd_of(as_d(a) / as_d(b), a, b);
}

/* floor(x^(1/k)) for x >= 0, exact over integers. */
static int64_t iroot(int64_t x, int k)
{
	int64_t lo = 0, hi = x < 2 ? x : (x < 3037000499 || k > 2 ? x : 3037000499);

	if (k >= 2 && hi > 3037000499)
		hi = 3037000499;
	while (lo < hi) {
		int64_t m = lo + (hi - lo + 1) / 2, pw = 1;
		int over = 0;

		for (int i = 0; i < k && !over; i++)
			over = __builtin_mul_overflow(pw, m, &pw) || pw > x;
		if (over)
			hi = m - 1;
		else
			lo = m;
	}
	return lo;
}

/* x^(1/k) in double: Newton from a power of two at or above the root, a
 * fixed number of steps (+, *, /, and ldexp/frexp, which are exact). */
static double droot(double x, int k)
{
	int e;
	double y;

	if (k == 2)
		return sqrt(x); /* IEEE: correctly rounded everywhere */
	if (x == 0 || x != x || x == INFINITY)
		return x;
	frexp(x, &e);
	y = ldexp(1.0, e / k + 1);
	for (int i = 0; i < 200; i++) {
		double pw = 1;

		for (int j = 0; j < k - 1; j++)
			pw *= y;
		y = ((k - 1) * y + x / pw) / k;
	}
	return y;
}

static val v_root(val a, int k)
{
	if (a.bad || k < 1 || k > 16)
		return (val){.bad = 1};
	if (k == 1)
		return a;
	if (as_d(a) < 0 && !(k & 1))
		return (val){.bad = 1};
	if (a.exact) {
		int neg = a.n < 0;
		int64_t n = neg ? -a.n : a.n, rn = iroot(n, k),
			rd = iroot(a.d, k), pn = 1, pd = 1;

		for (int i = 0; i < k; i++) {
			pn *= rn;
			pd *= rd;
		}
		if (pn == n && pd == a.d)
			return vq(neg ? -rn : rn, rd);
	}
	{
		double x = as_d(a);

		return vd(x < 0 ? -droot(-x, k) : droot(x, k));
	}
}

static val v_pow(val a, val b)
{
	if (a.bad || b.bad)
		return (val){.bad = 1};
	/* the range first: converting a double outside int64's is undefined */
	if (!b.exact && b.x >= -1e6 && b.x <= 1e6 &&
	    b.x == (double)(int64_t)b.x)
		b = vq((int64_t)b.x, 1);
	if (!b.exact)
		return (val){.bad = 1}; /* no libm pow */
	if (b.d != 1) {
		/* a^(p/q): the q-th root, then the p-th power */
		if (b.d > 16)
			return (val){.bad = 1};
		return v_pow(v_root(a, (int)b.d), vq(b.n, 1));
	}
	if (b.n < -64 || b.n > 64) {
		/* by squaring in double; a finite base whose power leaves a
		 * double's range is undefined (vd_of) */
		double x = as_d(a), m = fabs(x), r = 1, sq = x;
		uint64_t e = b.n < 0 ? (uint64_t)0 - (uint64_t)b.n
				     : (uint64_t)b.n;

		if (m == 0)
			return b.n < 0 ? (val){.bad = 1} : vq(0, 1);
		if (m == 1 || !isfinite(x)) {
			double p = (e & 1) && x < 0 ? -m : m;

			return vd(b.n < 0 ? 1 / p : p);
		}
		for (;;) {
			if (e & 1)
				r *= sq;
			e >>= 1;
			if (!e)
				break;
			sq *= sq;
			if (!(fabs(sq) <= DBL_MAX) || fabs(sq) < DBL_MIN)
				return (val){.bad = 1};
		}
		if (!(fabs(r) <= DBL_MAX) || fabs(r) < DBL_MIN)
			return (val){.bad = 1};
		return vd_of(b.n < 0 ? 1 / r : r, vd(1), vd(r));
	}
	{
		val r = vq(1, 1), base = a;
		int64_t e = b.n < 0 ? -b.n : b.n;

		if (a.exact && a.n == 0 && b.n < 0)
			return (val){.bad = 1};
		while (e) {
			if (e & 1)
				r = v_mul(r, base);
			base = v_mul(base, base);
			e >>= 1;
		}
		return b.n < 0 ? v_div(vq(1, 1), r) : r;
	}
}

#define N_POINTS 3

static val eval(const parser *p, int id, int point)
{
	const node *x;

	if (id < 0)
		return (val){.bad = 1};
	x = &p->pool[id];
	switch (x->kind) {
	case N_NUM:
		return x->exact ? vq(x->n, x->d) : vd(x->x);
	case N_VAR:
		/* a fixed non-integer point per (variable in name order,
		 * point) */
		return vq(11 + 7 * point + 13 * p->rank[x->var], 5 + point);
	case N_PI:
		return vd(3.141592653589793);
	case N_INF:
		return vd(INFINITY);
	case N_NEG: {
		val a = eval(p, x->a, point);

		if (a.exact && a.n != INT64_MIN)
			return vq(-a.n, a.d);
		return a.bad ? a : vd(-as_d(a));
	}
	case N_ADD:
		return v_add(eval(p, x->a, point), eval(p, x->b, point), 0);
	case N_SUB:
		return v_add(eval(p, x->a, point), eval(p, x->b, point), 1);
	case N_MUL:
		return v_mul(eval(p, x->a, point), eval(p, x->b, point));
	case N_DIV:
		return v_div(eval(p, x->a, point), eval(p, x->b, point));
	case N_POW:
		return v_pow(eval(p, x->a, point), eval(p, x->b, point));
	case N_ROOT: {
		val k = x->b < 0 ? vq(2, 1) : eval(p, x->b, point);

		if (!k.exact || k.d != 1 || k.n < 1 || k.n > 16)
			return (val){.bad = 1};
		return v_root(eval(p, x->a, point), (int)k.n);
	}
	}
	return (val){.bad = 1};
}

/* ---- keys --------------------------------------------------------------- */

/* A double close to a fraction p/q, q <= 1000, is that fraction: within
 * 1e-9 of its size (2^{-70} is no 0; a difference's rounding near 0 is
 * v_add's). */
static val snap(val v)
{
	double x, a, h0 = 0, h1 = 1, k0 = 1, k1 = 0, r;

	if (v.exact || v.bad || !(v.x > -1e15 && v.x < 1e15))
		return v;
	x = v.x;
	r = x;
	for (int i = 0; i < 40; i++) {
		double h2, k2;

		a = floor(r);
		h2 = a * h1 + h0;
		k2 = a * k1 + k0;
		if (k2 > 1000)
			break;
		h0 = h1;
		h1 = h2;
		k0 = k1;
		k1 = k2;
		if (fabs(x - h1 / k1) <= 1e-9 * fabs(x))
			return vq((int64_t)h1, (int64_t)k1);
		if (r - a == 0)
			break;
		r = 1 / (r - a);
	}
	return v;
}

/* The key of one value into o. false when undefined. */
static int key_val(val v, sbuf *o)
{
	char b[96];

	v = snap(v);
	if (v.bad)
		return 0;
	if (!v.exact) {
		if (v.x == INFINITY)
			put(o, "inf", 3);
		else if (v.x == -INFINITY)
			put(o, "-inf", 4);
		else {
			snprintf(b, sizeof(b), "~%.12g", v.x == 0 ? 0.0 : v.x);
			put(o, b, strlen(b));
		}
		return 1;
	}
	{
		int64_t d = v.d, t2 = 0, t5 = 0;

		while (d % 2 == 0) {
			d /= 2;
			t2++;
		}
		while (d % 5 == 0) {
			d /= 5;
			t5++;
		}
		if (d == 1 && t2 <= 18 && t5 <= 18) {
			/* a decimal that ends: n * (10^s / d) / 10^s (10^s
			 * within int64: s <= 18; longer ones stay p/q) */
			int s = (int)(t2 > t5 ? t2 : t5);
			int64_t m = 1, mul, num;
			__int128 q;

			for (int i = 0; i < s; i++)
				m *= 10;
			mul = m / v.d;
			if (!__builtin_mul_overflow(v.n, mul, &num)) {
				/* |num| up to 2^63: the integer part unsigned */
				unsigned long long ip;
				int64_t fp;
				int neg = num < 0;

				q = num;
				if (neg)
					q = -q;
				ip = (unsigned long long)(q / m);
				fp = (int64_t)(q % m);
				if (!s || !fp)
					snprintf(b, sizeof(b), "%s%llu",
						 neg ? "-" : "", ip);
				else {
					int w = s;

					while (fp % 10 == 0) {
						fp /= 10;
						w--;
					}
					snprintf(b, sizeof(b), "%s%llu.%0*lld",
						 neg ? "-" : "", ip, w,
						 (long long)fp);
				}
				put(o, b, strlen(b));
				return 1;
			}
		}
		snprintf(b, sizeof(b), "%lld/%lld", (long long)v.n,
			 (long long)v.d);
		put(o, b, strlen(b));
		return 1;
	}
}

static int var_cmp(const void *a, const void *b)
{
	const char *const *x = a, *const *y = b;

	return strcmp(*x, *y);
}

/* The key of one expression node (variables at the fixed points). */
static int key_expr(parser *p, int id, sbuf *o)
{
	if (id < 0)
		return 0;
	if (p->n_vars) {
		char names[8][40];
		const char *sorted[8];

		for (int v = 0; v < p->n_vars; v++) {
			snprintf(names[v], sizeof(names[v]), "%.*s",
				 (int)p->var_len[v], p->var[v]);
			sorted[v] = names[v];
		}
		qsort(sorted, (size_t)p->n_vars, sizeof(*sorted), var_cmp);
		put(o, "f[", 2);
		for (int v = 0; v < p->n_vars; v++) {
			if (v)
				put(o, ",", 1);
			put(o, sorted[v], strlen(sorted[v]));
		}
		put(o, "]", 1);
		for (int v = 0; v < p->n_vars; v++) {
			p->rank[v] = 0;
			for (int w = 0; w < p->n_vars; w++)
				p->rank[v] += strcmp(names[w], names[v]) < 0;
		}
		for (int pt = 0; pt < N_POINTS; pt++) {
			put(o, pt ? ";" : ":", 1);
			if (!key_val(eval(p, id, pt), o))
				return 0;
		}
		return 1;
	}
	return key_val(eval(p, id, 0), o);
}

/* +1 for an opening bracket token, -1 for a closing one, else 0 */
static int bracket(const token *t)
{
	if (t->kind == T_SETL)
		return 1;
	if (t->kind == T_SETR)
		return -1;
	if (t->kind != T_OP)
		return 0;
	return strchr("([{", t->s[0]) ? 1 : strchr(")]}", t->s[0]) ? -1 : 0;
}

static int str_cmp(const void *a, const void *b)
{
	const char *const *x = a, *const *y = b;

	return strcmp(*x, *y);
}

/* Parses the tokens [from, to) of p as a top-level answer into o: a list
 * when bracketed with top-level commas (or bare commas), else one
 * expression. */
static int parse_top(parser *p, int from, int to, sbuf *o)
{
	int commas = 0, depth = 0, open = -1, close = -1;
	char lb = 0, rb = 0;

	/* brackets around the whole thing? */
	if (to - from >= 2) {
		token *a = &p->t[from], *z = &p->t[to - 1];

		if ((is_op(a, '(') || is_op(a, '[') || a->kind == T_SETL) &&
		    (is_op(z, ')') || is_op(z, ']') || z->kind == T_SETR)) {
			int d = 0, whole = 1;

			for (int i = from; i < to; i++) {
				token *t = &p->t[i];

				d += bracket(t);
				if (d == 0 && i < to - 1)
					whole = 0;
				if (d == 1 && is_op(t, ','))
					commas++;
			}
			if (whole && (commas || a->kind == T_SETL)) {
				open = from;
				close = to - 1;
				lb = a->kind == T_SETL ? '{' : a->s[0];
				rb = z->kind == T_SETR ? '}' : z->s[0];
				if ((lb == '{') != (rb == '}'))
					return 0;
			}
		}
	}
	if (open < 0) {
		for (int i = from; i < to; i++) {
			token *t = &p->t[i];

			depth += bracket(t);
			if (depth == 0 && is_op(t, ','))
				commas++;
		}
	}
	if (open < 0 && !commas) {
		int id;
		token end = p->t[to];

		p->t[to].kind = T_END;
		p->at = from;
		id = expr(p);
		if (p->err || p->at != to) {
			p->t[to] = end;
			return 0;
		}
		p->t[to] = end;
		return key_expr(p, id, o);
	}
	{
		/* a list: each element keyed alone */
		int s = open >= 0 ? open + 1 : from, e = open >= 0 ? close : to;
		char keys[16][128];
		const char *sorted[16];
		int n = 0, d = 0, start = s;

		for (int i = s; i <= e; i++) {
			token *t = &p->t[i];

			if (i < e)
				d += bracket(t);
			if (i == e || (d == 0 && is_op(t, ','))) {
				parser q = *p;
				sbuf ko = {.n = 0};

				/* an element must be less than the whole (with
				 * unbalanced brackets the bare-comma split can
				 * find none), and lists nest MATHKEY_DEPTH deep
				 * at most */
				if (n == 16 || i == start ||
				    (start == from && i == to) ||
				    p->depth >= MATHKEY_DEPTH)
					return 0;
				q.depth = p->depth + 1;
				q.n_vars = 0;
				q.n_nodes = 0;
				q.err = 0;
				if (!parse_top(&q, start, i, &ko) || ko.full ||
				    ko.n >= sizeof(keys[n]))
					return 0;
				memcpy(keys[n], ko.b, ko.n + 1);
				sorted[n] = keys[n];
				n++;
				start = i + 1;
			}
		}
		if (lb == '{') {
			int u = 0;

			qsort(sorted, (size_t)n, sizeof(*sorted), str_cmp);
			for (int i = 0; i < n; i++)
				if (!u || strcmp(sorted[u - 1], sorted[i]))
					sorted[u++] = sorted[i];
			n = u;
		}
		if (lb)
			put(o, &lb, 1);
		for (int i = 0; i < n; i++) {
			if (i)
				put(o, ",", 1);
			put(o, sorted[i], strlen(sorted[i]));
		}
		if (rb)
			put(o, &rb, 1);
		return 1;
	}
}

/* Whether token t is a unit's name: a word ("cm", "apples"; not "pi"),
 * or one of the letters that name SI units when written apart ("5 m",
 * "3 h", "5 m/s"; "2 x" stays 2x). */
static int unit_word(const token *t)
{
	if (t->kind != T_VAR)
		return 0;
	if (t->len >= 2)
		return !(t->len == 2 && !memcmp(t->s, "pi", 2));
	return t->len == 1 && strchr("msghlLNJWVAK", t->s[0]);
}

/* The end of the value in tokens [from, to) without the unit after it:
 * a number, a space, then unit words joined by '/', '*', \cdot or
 * nothing, each with a power at most ("5 km/h", "9.8 m/s^2", "7 cm^2",
 * "12 apples", "3 square meters"); to where there is none. */
static int unit_tail(const parser *p, int from, int to)
{
	int k = to, start = -1;

	for (;;) {
		int u = k;

		/* the unit's power: ^2, ^-1 */
		if (u - 2 >= from && p->t[u - 1].kind == T_NUM &&
		    is_op(&p->t[u - 2], '^'))
			u -= 2;
		else if (u - 3 >= from && p->t[u - 1].kind == T_NUM &&
			 is_op(&p->t[u - 2], '-') && is_op(&p->t[u - 3], '^'))
			u -= 3;
		if (u - 1 < from || !unit_word(&p->t[u - 1]))
			break;
		start = k = u - 1;
		/* joined to a unit before it: an operator (the unit before
		 * it checked next) or a space between two words */
		if (k - 1 >= from &&
		    (is_op(&p->t[k - 1], '/') || is_op(&p->t[k - 1], '*') ||
		     (p->t[k - 1].kind == T_CMD && p->t[k - 1].len == 5 &&
		      !memcmp(p->t[k - 1].s, "\\cdot", 5))))
			k--;
		else if (!(p->t[k].space && k - 1 >= from &&
			   unit_word(&p->t[k - 1])))
			break;
	}
	/* after a number, apart from it */
	if (start > from && p->t[start].space &&
	    p->t[start - 1].kind == T_NUM)
		return start;
	return to;
}

/* A list of equations, each a variable = a value ("x = 2, y = 3"), over
 * the tokens [0, p->n) into o: "x=2,y=3", each value keyed as an answer
 * is and the variables in name order ("y = 3, x = \frac{4}{2}" is the
 * same); a variable twice is a set of its values, the roots of an
 * equation ("x = 3 or x = 2" is "x=2,x=3"). 0 where it is not one (a
 * part without its variable, '=' and a value; over 8 parts). */
static int equations(parser *p, sbuf *o)
{
	char keys[8][160];
	const char *sorted[8];
	int n = 0, d = 0, start = 0;

	for (int i = 0; i <= p->n; i++) {
		token *t = &p->t[i];

		if (i < p->n)
			d += bracket(t);
		if (i == p->n || (d == 0 && is_op(t, ','))) {
			parser q = *p;
			sbuf ko = {.n = 0};
			token *v = &p->t[start];
			int m;

			if (n == 8 || i - start < 3 || v->kind != T_VAR ||
			    !is_op(&p->t[start + 1], '='))
				return 0;
			q.n_vars = 0;
			q.n_nodes = 0;
			q.err = 0;
			q.depth = p->depth + 1;
			m = snprintf(keys[n], sizeof(keys[n]), "%.*s=",
				     (int)v->len, v->s);
			if (m <= 0 || (size_t)m >= sizeof(keys[n]) ||
			    !parse_top(&q, start + 2, i, &ko) || ko.full ||
			    (size_t)m + ko.n >= sizeof(keys[n]))
				return 0;
			memcpy(keys[n] + m, ko.b, ko.n + 1);
			sorted[n] = keys[n];
			n++;
			start = i + 1;
		}
	}
	qsort(sorted, (size_t)n, sizeof(*sorted), str_cmp);
	for (int i = 0; i < n; i++) {
		if (i)
			put(o, ",", 1);
		put(o, sorted[i], strlen(sorted[i]));
	}
	return 1;
}

/* The fallback: a normalized spelling. */
static void fallback(const char *s, size_t n, sbuf *o)
{
	sbuf c = {.n = 0};

	clean(s, n, &c);
	put(o, "s:", 2);
	for (size_t i = 0; i < c.n; i++) {
		char ch = c.b[i];

		if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
			continue;
		/* ^{2} -> ^2, _{1} -> _1 */
		if ((ch == '^' || ch == '_') && i + 3 < c.n + 1 &&
		    c.b[i + 1] == '{' && i + 3 <= c.n && c.b[i + 3] == '}') {
			put(o, &ch, 1);
			put(o, &c.b[i + 2], 1);
			i += 3;
			continue;
		}
		put(o, &ch, 1);
	}
	if (c.full)
		o->full = 1;
}

/*
 * A plain number of more than 18 digits, alone (a sign at most before
 * it): its digits as they are, canonical as the number rule writes them
 * (vote.h), where the parse would round it to a double and two different
 * numbers would share a key. Computed values (2^{64}) stay doubles.
 */
static int long_literal(const parser *p, int from, int to, sbuf *o)
{
	const token *t = &p->t[to - 1];
	int neg = 0, nd = 0, zero = 1;
	size_t i0, e, f1;
	const char *s;

	if (to - from == 2 && (is_op(&p->t[from], '-') ||
			       is_op(&p->t[from], '+')))
		neg = is_op(&p->t[from], '-');
	else if (to - from != 1)
		return 0;
	if (t->kind != T_NUM || memchr(t->s, 'e', t->len) ||
	    memchr(t->s, 'E', t->len))
		return 0;
	s = t->s;
	e = t->len;
	for (size_t i = 0; i < e; i++)
		nd += is_dig((uchar)s[i]);
	if (nd <= 18)
		return 0;
	/* leading zeros off; a fraction's trailing zeros (and dot) off */
	for (i0 = 0; i0 < e && (s[i0] == '0' || s[i0] == ',' ||
				s[i0] == ' ');)
		i0++;
	f1 = e;
	if (memchr(s, '.', e)) {
		while (f1 > i0 && s[f1 - 1] == '0')
			f1--;
		if (f1 > i0 && s[f1 - 1] == '.')
			f1--;
	}
	for (size_t i = i0; i < f1; i++)
		zero &= !is_dig((uchar)s[i]) || s[i] == '0';
	if (zero) {
		put(o, "0", 1);
		return 1;
	}
	if (neg)
		put(o, "-", 1);
	if (i0 < f1 && s[i0] == '.')
		put(o, "0", 1);
	for (size_t i = i0; i < f1; i++)
		if (s[i] != ',' && s[i] != ' ')
			put(o, s + i, 1);
	return 1;
}

/* s[0, n) is one \text{...} (or \mathrm, ...: TEXTCMD) and nothing
 * else: its content at [*a, *b). */
static int text_only(const char *s, size_t n, size_t *a, size_t *b)
{
	size_t i = 0, e = n, l, g, k;

	while (i < e && (s[i] == ' ' || s[i] == '$'))
		i++;
	while (e > i && (s[e - 1] == ' ' || s[e - 1] == '$' ||
			 s[e - 1] == '.'))
		e--;
	if (i >= e || s[i] != '\\' || !(l = cmd_len(s, e, i)))
		return 0;
	for (k = 0; k < sizeof(TEXTCMD) / sizeof(*TEXTCMD); k++)
		if (cmd_is(s, e, i, TEXTCMD[k]))
			break;
	if (k == sizeof(TEXTCMD) / sizeof(*TEXTCMD))
		return 0;
	for (g = i + 1 + l; g < e && s[g] == ' '; g++)
		;
	if (g >= e || s[g] != '{' || group_end(s, e, g) != e || e - g < 3)
		return 0;
	*a = g + 1;
	*b = e - 1;
	return 1;
}

bool mathkey(const char *s, size_t len, char *out, size_t cap, bool *parsed)
{
	static __thread node pool[MATHKEY_NODES];
	sbuf c = {.n = 0}, o = {.n = 0};
	parser *p;
	int ok = 0, from = 0, to, depth = 0;

	if (parsed)
		*parsed = false;
	if (!out || !cap)
		return false;
	out[0] = '\0';
	if (!s || !len || len > MATHKEY_INPUT_MAX || memchr(s, 0, len))
		return false;
	if (!(p = calloc(1, sizeof(*p))))
		return false;
	p->pool = pool;
	clean(s, len, &c);
	if (!c.full)
		lex(p, c.b, c.n);
	if (!c.full && !p->err && p->n) {
		int comma = 0;

		/* the part after the last top-level '=', unless a top-level
		 * comma comes before it: "x = 1, 2" is 1, 2, but "x = 2,
		 * y = 3" is a list of equations, not 3 */
		for (int i = 0; i < p->n; i++) {
			token *t = &p->t[i];

			depth += bracket(t);
			if (depth == 0 && is_op(t, ','))
				comma = 1;
			if (depth == 0 && is_op(t, '='))
				from = comma ? -1 : i + 1;
		}
		to = p->n;
		if (from < 0) {
			/* a list of equations, keyed as one; else the
			 * spelling */
			to = from = 0;
			ok = equations(p, &o) && !o.full;
			if (!ok)
				o.n = o.full = 0;
		}
		to = unit_tail(p, from, to);
		if (from < to && long_literal(p, from, to, &o))
			ok = !o.full;
		else if (from < to)
			ok = parse_top(p, from, to, &o) && !o.full;
	}
	if (ok && parsed)
		*parsed = true;
	if (!ok) {
		o.n = 0;
		o.full = 0;
		fallback(s, len, &o);
		if (!o.full && o.n <= 2) {
			/* nothing but \text{even}: the words are the answer */
			size_t a, b;

			o.n = 0;
			if (text_only(s, len, &a, &b))
				fallback(s + a, b - a, &o);
		}
		if (o.full || o.n <= 2)
			ok = 0;
		else
			ok = 1;
	}
	free(p);
	if (!ok || o.n >= cap)
		return false;
	memcpy(out, o.b, o.n + 1);
	return true;
}

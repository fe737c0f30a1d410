/*
 * rxgbnf — regular expressions as GBNF (see rxgbnf.h). One recursive
 * descent over the pattern; every character set (a literal, a class, .,
 * \d and the rest) goes through set(), which in JSON mode splits it into
 * the characters JSON writes as they are and those it escapes.
 */
#include "text/rxgbnf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"

#define RX_RANGES 128  /* ranges in one class */
#define RX_REPEAT 256  /* the largest {m,n} */
#define RX_DEPTH 32    /* nested groups */

typedef struct {
	long lo, hi;
} rng;

typedef struct {
	const char *s, *start;
	int json;
	int err;
	int code;  /* the error's qerr code */
} rx;

static int rfail(rx *r, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int rfail(rx *r, int code, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	if (r->err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->err = 1;
	r->code = code;
	qerr_fail(code, "pattern: %s (at offset %d)", msg,
		  (int)(r->s - r->start));
	return -1;
}

/* A UTF-8 character at *p, advanced past it; -1 when invalid. */
static long utf8(const char **p)
{
	const unsigned char *s = (const unsigned char *)*p;
	long c = s[0];
	int k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0
		? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
	static const long least[] = {0, 0x80, 0x800, 0x10000};

	if (k < 0)
		return -1;
	c &= k ? 0x3f >> k : 0x7f;
	for (int i = 1; i <= k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < least[k] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return -1;
	*p += k + 1;
	return c;
}

static void put_utf8(strbuf *b, long c)
{
	char u[4];
	int n;

	if (c < 0x80) {
		u[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		u[0] = (char)(0xc0 | (c >> 6));
		u[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		u[0] = (char)(0xe0 | (c >> 12));
		u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (c >> 18));
		u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	strbuf_add(b, u, (size_t)n);
}

static int plain_ascii(long c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == ' ' || c == '_';
}

/* A character inside a GBNF class. */
static void class_char(strbuf *b, long c)
{
	if (c >= 0x80)
		put_utf8(b, c);
	else if (plain_ascii(c))
		strbuf_add(b, (const char *)&(char){(char)c}, 1);
	else
		strbuf_printf(b, "\\x%02X", (unsigned)c);
}

/* A character inside a GBNF string literal. */
static void lit_char(strbuf *b, long c)
{
	if (c == '"' || c == '\\')
		strbuf_printf(b, "\\%c", (char)c);
	else if (c < 0x20 || c == 0x7f)
		strbuf_printf(b, "\\x%02X", (unsigned)c);
	else
		put_utf8(b, c);
}

/* JSON writes these escaped: the controls, the quote, the backslash. */
static int json_special(long c)
{
	return c < 0x20 || c == '"' || c == '\\';
}

static int in_ranges(const rng *v, int n, long c)
{
	for (int i = 0; i < n; i++)
		if (c >= v[i].lo && c <= v[i].hi)
			return 1;
	return 0;
}

/* The class [v] (negated: [^v]) of GBNF, the JSON specials left out when
 * drop_specials; 0 when it is empty (nothing written). */
static int class_of(strbuf *b, const rng *v, int n, int neg,
		    int drop_specials)
{
	strbuf tmp = {0};
	int any = 0;

	for (int i = 0; i < n; i++) {
		long lo = v[i].lo, hi = v[i].hi;

		while (lo <= hi) {
			long e = hi;

			if (drop_specials) {
				/* the run of lo..hi up to the next special */
				if (json_special(lo)) {
					lo++;
					continue;
				}
				for (long c = lo; c <= hi && c < 0x80; c++)
					if (json_special(c)) {
						e = c - 1;
						break;
					}
			}
			class_char(&tmp, lo);
			if (e > lo) {
				strbuf_puts(&tmp, "-");
				class_char(&tmp, e);
			}
			any = 1;
			lo = e + 1;
		}
	}
	if (neg) {
		strbuf_puts(b, "[^");
		if (tmp.b)
			strbuf_puts(b, tmp.b);
		if (drop_specials)
			strbuf_puts(b, "\\x00-\\x1F\\x22\\x5C");
		strbuf_puts(b, "]");
		any = 1;
	} else if (any) {
		strbuf_puts(b, "[");
		strbuf_puts(b, tmp.b);
		strbuf_puts(b, "]");
	}
	if (tmp.oom)
		b->oom = 1;
	strbuf_free(&tmp);
	return any;
}

/* A set of characters as one GBNF element. Raw: a literal or a class. JSON:
 * the characters written as they are, or (an alternation) the escapes of
 * the specials in the set: \" \\ \b \f \n \r \t and \u00XX in either
 * case. */
static int set(rx *r, strbuf *b, const rng *v, int n, int neg)
{
	static const char shorts[] = "\b\f\n\r\t", short_names[] = "bfnrt";
	int member[0x20 + 1], n_alt = 0, n_short = 0, n_u[2] = {0, 0};
	strbuf alt = {0};
	char sh[8];

	if (!neg && n == 1 && v[0].lo == v[0].hi &&
	    !(r->json && json_special(v[0].lo))) {
		strbuf_puts(b, "\"");
		lit_char(b, v[0].lo);
		strbuf_puts(b, "\"");
		return 0;
	}
	if (!r->json) {
		if (!class_of(b, v, n, neg, 0))
			return rfail(r, QERR_FORMAT, "an empty class");
		return 0;
	}
	strbuf_puts(&alt, "(");
	if (class_of(&alt, v, n, neg, 1))
		n_alt++;
	for (long c = 0; c < 0x20; c++)
		member[c] = in_ranges(v, n, c) != neg;
	if (in_ranges(v, n, '"') != neg) {
		strbuf_puts(&alt, n_alt++ ? " | \"\\\\\\\"\"" : "\"\\\\\\\"\"");
	}
	if (in_ranges(v, n, '\\') != neg) {
		strbuf_puts(&alt, n_alt++ ? " | \"\\\\\\\\\""
					  : "\"\\\\\\\\\"");
	}
	for (int i = 0; shorts[i]; i++)
		if (member[(int)shorts[i]])
			sh[n_short++] = short_names[i];
	if (n_short) {
		strbuf_printf(&alt, "%s\"\\\\\" [%.*s]", n_alt++ ? " | " : "",
			      n_short, sh);
	}
	for (long c = 0; c < 0x20; c++)
		n_u[c >> 4] += member[c];
	for (int hi = 0; hi < 2; hi++) {
		if (!n_u[hi])
			continue;
		strbuf_printf(&alt, "%s\"\\\\u00%d\" [", n_alt++ ? " | " : "",
			      hi);
		for (int lo = 0; lo < 16; lo++) {
			if (!member[hi * 16 + lo])
				continue;
			if (lo < 10)
				strbuf_printf(&alt, "%d", lo);
			else
				strbuf_printf(&alt, "%c%c", 'a' + lo - 10,
					      'A' + lo - 10);
		}
		strbuf_puts(&alt, "]");
	}
	strbuf_puts(&alt, ")");
	if (!n_alt) {
		strbuf_free(&alt);
		return rfail(r, QERR_FORMAT, "a class no character matches");
	}
	if (alt.oom)
		b->oom = 1;
	else
		strbuf_puts(b, alt.b);
	strbuf_free(&alt);
	return 0;
}

/* The ranges of \d \w \s (lower case) added to v, as ECMAScript (JSON
 * Schema's dialect) has them: \d and \w ASCII, \s the white space and
 * line terminators; ctl 0 leaves out the control characters (in a JSON
 * class: they are written escaped, never as themselves). */
static int add_class(rx *r, char k, rng *v, int *n, int ctl)
{
	static const rng d[] = {{'0', '9'}};
	static const rng w[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'},
				{'a', 'z'}};
	static const rng s[] = {{'\t', '\r'}, {' ', ' '}, {0xa0, 0xa0},
				{0x1680, 0x1680}, {0x2000, 0x200a},
				{0x2028, 0x2029}, {0x202f, 0x202f},
				{0x205f, 0x205f}, {0x3000, 0x3000},
				{0xfeff, 0xfeff}};
	const rng *src = k == 'd' ? d : k == 'w' ? w : s + !ctl;
	int m = k == 'd' ? 1 : k == 'w' ? 4 : 10 - !ctl;

	if (*n + m > RX_RANGES)
		return rfail(r, QERR_UNSUPPORTED, "a class of over %d ranges",
			     RX_RANGES);
	memcpy(v + *n, src, (size_t)m * sizeof(*v));
	*n += m;
	return 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f'
	       ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The character of an escape \X at r->s (past the backslash), advanced;
 * -1 when it is no single character (after the error). */
static long escape_char(rx *r)
{
	char e = *r->s;
	long v = 0;
	int k = 0;

	switch (e) {
	case 'n': r->s++; return '\n';
	case 'r': r->s++; return '\r';
	case 't': r->s++; return '\t';
	case 'f': r->s++; return '\f';
	case 'v': r->s++; return '\v';
	case 'x': k = 2; break;
	case 'u': k = 4; break;
	case '\0':
		return rfail(r, QERR_FORMAT, "a '\\' at the end");
	default:
		if (e > 0x20 && e < 0x7f && !plain_ascii(e)) {
			r->s++;
			return e; /* an escaped punctuation mark: itself */
		}
		if (e >= '1' && e <= '9')
			return rfail(r, QERR_UNSUPPORTED, "back-reference "
				     "'\\%c' (no grammar can write one)", e);
		if (e == 'b' || e == 'B')
			return rfail(r, QERR_UNSUPPORTED, "word boundary "
				     "'\\%c'", e);
		return rfail(r, QERR_UNSUPPORTED, "escape '\\%c'", e);
	}
	r->s++;
	for (int i = 0; i < k; i++) {
		int h = hexval(*r->s);

		if (h < 0)
			return rfail(r, QERR_FORMAT, "'\\%c' wants %d hex "
				     "digits", e, k);
		v = v * 16 + h;
		r->s++;
	}
	if (v >= 0xd800 && v <= 0xdfff)
		return rfail(r, QERR_UNSUPPORTED, "a surrogate escape");
	return v;
}

/* One character of a class at r->s (a literal or an escape); -1 on
 * error. */
static long class_cp(rx *r)
{
	long c;

	if (*r->s == '\\') {
		r->s++;
		return escape_char(r);
	}
	if ((c = utf8(&r->s)) < 0)
		return rfail(r, QERR_FORMAT, "invalid UTF-8");
	return c;
}

/* A class [..] at r->s (on the '['). */
static int klass(rx *r, strbuf *b)
{
	rng v[RX_RANGES];
	int n = 0, neg = 0, first = 1;

	r->s++;
	if (*r->s == '^') {
		neg = 1;
		r->s++;
	}
	while (*r->s && (*r->s != ']' || first)) {
		long lo, hi;

		first = 0;
		if (*r->s == '\\' && r->s[1] && strchr("dwsDWS", r->s[1])) {
			char k = r->s[1];

			if (k < 'a')
				return rfail(r, QERR_UNSUPPORTED, "'\\%c' "
					     "inside [..]", k);
			/* in JSON, \s inside a class is no control
			 * character (those are written escaped) */
			if (add_class(r, k, v, &n, !r->json))
				return -1;
			r->s += 2;
			continue;
		}
		if ((lo = class_cp(r)) < 0)
			return -1;
		hi = lo;
		if (*r->s == '-' && r->s[1] && r->s[1] != ']') {
			r->s++;
			if ((hi = class_cp(r)) < 0)
				return -1;
			if (hi < lo)
				return rfail(r, QERR_FORMAT, "a range from "
					     "U+%04lX down to U+%04lX", lo, hi);
		}
		if (n == RX_RANGES)
			return rfail(r, QERR_UNSUPPORTED, "a class of over %d "
				     "ranges", RX_RANGES);
		v[n++] = (rng){lo, hi};
	}
	if (*r->s != ']')
		return rfail(r, QERR_FORMAT, "unclosed '['");
	r->s++;
	return set(r, b, v, n, neg);
}

static int alternation(rx *r, strbuf *b, int depth, int *nullable);

/* A quantifier after an element, if any, written after it. *nullable
 * says whether the element can match the empty string, and becomes
 * whether the quantified element can. An element that can match nothing
 * cannot be repeated: a grammar's repetition of it would be
 * left-recursive (and "(a?)*" is "a*" written so that it cannot end). */
static int quantifier(rx *r, strbuf *b, int *nullable)
{
	char q = *r->s;
	const char *at = r->s;
	int many = 0, empty = *nullable; /* the element's, before q */

	if (q == '*' || q == '+' || q == '?') {
		many = q != '?';
		*nullable |= q != '+';
		strbuf_add(b, &q, 1);
		r->s++;
	} else if (q == '{') {
		long m = -1, n;
		char *e = NULL;

		r->s++;
		if (*r->s >= '0' && *r->s <= '9')
			m = strtol(r->s, &e, 10);
		if (m < 0 || m > RX_REPEAT)
			return rfail(r, QERR_UNSUPPORTED, "'{' wants {m}, {m,} "
				     "or {m,n} with n up to %d", RX_REPEAT);
		r->s = e;
		n = m;
		if (*r->s == ',') {
			r->s++;
			n = -1;
			if (*r->s >= '0' && *r->s <= '9') {
				n = strtol(r->s, &e, 10);
				r->s = e;
				if (n > RX_REPEAT || n < m)
					return rfail(r, QERR_UNSUPPORTED,
						     "{%ld,%ld}: n must be %ld.."
						     "%d", m, n, m, RX_REPEAT);
			}
		}
		if (*r->s != '}')
			return rfail(r, QERR_FORMAT, "unclosed '{'");
		r->s++;
		many = n < 0; /* {m,n} unrolls: no repetition rule */
		*nullable |= m == 0;
		if (n < 0)
			strbuf_printf(b, "{%ld,}", m);
		else
			strbuf_printf(b, "{%ld,%ld}", m, n);
	} else {
		return 0;
	}
	if (many && empty) {
		r->s = at;
		return rfail(r, QERR_UNSUPPORTED, "'%c' repeats a part that can "
			     "match the empty string (write the part so that it "
			     "cannot)", q);
	}
	if (*r->s == '?')
		r->s++; /* lazy: the same text */
	else if (*r->s == '+')
		/* possessive: "a*+a" matches nothing, no grammar of ours
		 * says that */
		return rfail(r, QERR_UNSUPPORTED, "a possessive quantifier "
			     "('%c+')", q == '{' ? '}' : q);
	return 0;
}

/* One element at r->s into b; *nullable: whether it can match the
 * empty string. */
static int element(rx *r, strbuf *b, int depth, int *nullable)
{
	char ch = *r->s;
	rng v[RX_RANGES];
	int n = 0;

	if (ch == '(') {
		r->s++;
		if (r->s[0] == '?' && r->s[1] == ':')
			r->s += 2;
		else if (r->s[0] == '?')
			return rfail(r, QERR_UNSUPPORTED, "'(?%c': %s",
				     r->s[1],
				     strchr("=!<", r->s[1]) && r->s[1]
				     ? "look-around and named groups"
				     : "inline flags and other group "
				       "modifiers (only '(?:' is supported)");
		if (alternation(r, b, depth + 1, nullable))
			return -1;
		if (*r->s != ')')
			return rfail(r, QERR_FORMAT, "unclosed '('");
		r->s++;
		return 0;
	}
	if (ch == '[')
		return klass(r, b);
	if (ch == '.') {
		/* any character but a line terminator (ECMAScript's) */
		r->s++;
		v[0] = (rng){'\n', '\n'};
		v[1] = (rng){'\r', '\r'};
		v[2] = (rng){0x2028, 0x2029};
		return set(r, b, v, 3, 1);
	}
	if (ch == '\\' && r->s[1] && strchr("dwsDWS", r->s[1])) {
		char k = r->s[1];

		r->s += 2;
		if (add_class(r, (char)(k | 0x20), v, &n, 1))
			return -1;
		return set(r, b, v, n, k < 'a');
	}
	if (ch == '\\') {
		long c;

		r->s++;
		if ((c = escape_char(r)) < 0)
			return -1;
		v[0] = (rng){c, c};
		return set(r, b, v, 1, 0);
	}
	if (ch == '^' || ch == '$')
		return rfail(r, QERR_UNSUPPORTED, "the anchor '%c' inside the "
			     "pattern (only ^ at its start and $ at its end)",
			     ch);
	if (strchr("*+?{", ch))
		return rfail(r, QERR_FORMAT, "'%c' without an element", ch);
	{
		long c = utf8(&r->s);

		if (c < 0)
			return rfail(r, QERR_FORMAT, "invalid UTF-8");
		v[0] = (rng){c, c};
		return set(r, b, v, 1, 0);
	}
}

/* Alternatives up to ')' or the end, as one group; *nullable: whether
 * one of them can match the empty string. */
static int alternation(rx *r, strbuf *b, int depth, int *nullable)
{
	if (depth > RX_DEPTH)
		return rfail(r, QERR_UNSUPPORTED, "groups nested over %d deep",
			     RX_DEPTH);
	*nullable = 0;
	strbuf_puts(b, "(");
	for (;;) {
		int all = 1; /* every element so far can match nothing */

		strbuf_puts(b, "(\"\"");
		while (*r->s && *r->s != '|' && *r->s != ')') {
			int el = 0;

			strbuf_puts(b, " ");
			if (element(r, b, depth, &el) || quantifier(r, b, &el))
				return -1;
			all &= el;
		}
		*nullable |= all;
		strbuf_puts(b, ")");
		if (*r->s != '|')
			break;
		r->s++;
		strbuf_puts(b, " | ");
	}
	strbuf_puts(b, ")");
	return 0;
}

/* Any JSON string characters (an unanchored pattern's either side). */
static const char JSON_ANY[] =
	"([^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
	"[0-9a-fA-F]{4}))*";

int rxgbnf(const char *pattern, int mode, strbuf *b)
{
	size_t n = strlen(pattern), bs = 0;
	int head = 0, tail = 0, nul;
	char *body;
	rx r = {0};

	if (n && pattern[0] == '^')
		head = 1;
	/* a final '$' that is not escaped (an even run of backslashes) */
	while (n > (size_t)head + 1 + bs && pattern[n - 2 - bs] == '\\')
		bs++;
	if (n > (size_t)head && pattern[n - 1] == '$' && bs % 2 == 0)
		tail = 1;
	if (!(body = strndup(pattern + head, n - (size_t)head - (size_t)tail)))
		return qerr_fail(QERR_NOMEM, "out of memory");
	r.s = r.start = body;
	r.json = mode == RX_JSON;
	strbuf_puts(b, "(");
	if (r.json && !head)
		strbuf_printf(b, "%s ", JSON_ANY);
	if (alternation(&r, b, 0, &nul) == 0 && *r.s)
		rfail(&r, QERR_FORMAT, "unmatched ')'");
	if (r.json && !tail)
		strbuf_printf(b, " %s", JSON_ANY);
	strbuf_puts(b, ")");
	free(body);
	if (r.err)
		return r.code;
	if (b->oom)
		return qerr_fail(QERR_NOMEM, "out of memory");
	return 0;
}

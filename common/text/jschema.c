/*
 * jschema — JSON schemas to GBNF (see jschema.h): one rule per schema
 * node, the shared JSON rules, integer ranges digit by digit, and
 * patterns through rxgbnf.c. Callers:
 * tools/ (--json-schema), the gateway (response_format), the tests.
 */
#include "text/jschema.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"
#include "text/rxgbnf.h"
#include "text/strbuf.h"

/* The shared rules every schema grammar may use. */
static const char COMMON[] =
	"ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
	/* one character: a surrogate pair's two escapes are one (as JSON
	 * Schema counts lengths), a lone surrogate none */
	"jchar ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | "
	"\"u\" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | "
	"[dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}))\n"
	"jstring ::= \"\\\"\" jchar* \"\\\"\"\n"
	"jint ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
	"jnumber ::= jint (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n"
	"jbool ::= \"true\" | \"false\"\n"
	"jnull ::= \"null\"\n"
	"jvalue ::= jobject | jarray | jstring | jnumber | jbool | jnull\n"
	"jobject ::= \"{\" ws (jstring ws \":\" ws jvalue (ws \",\" ws "
	"jstring ws \":\" ws jvalue)*)? ws \"}\"\n"
	"jarray ::= \"[\" ws (jvalue (ws \",\" ws jvalue)*)? ws \"]\"\n";

typedef struct {
	strbuf out;            /* the rules */
	const json_t *root; /* for $ref */
	const json_t *seen[256]; /* schemas with a rule: refs, by index */
	int n_seen;
	json_t *keep;      /* the schemas made here (a list of types' single
			    * types): seen[] holds their pointers, so they
			    * live until the grammar is written */
	int n_rules;
	int err;
	int code;          /* the error's qerr code */
	strbuf path;       /* the place in the schema, "schema.items" */
	int depth;
} ctx;

static int fail(ctx *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(ctx *c, int code, const char *fmt, ...)
{
	char msg[300];
	va_list ap;

	if (c->err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->err = 1;
	c->code = code;
	/* a deep place's path shortened in its middle, so that the
	 * message's reason always fits */
	if (c->path.oom)
		qerr_fail(code, "%s", msg);
	else if (c->path.n > 200)
		qerr_fail(code, "%.60s...%s: %s", c->path.b,
			  c->path.b + c->path.n - 137, msg);
	else
		qerr_fail(code, "%s: %s", c->path.b, msg);
	return -1;
}

/* path push/pop */
static size_t push(ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static size_t push(ctx *c, const char *fmt, ...)
{
	size_t at = c->path.n;
	char step[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(step, sizeof(step), fmt, ap);
	va_end(ap);
	strbuf_puts(&c->path, step);
	return at;
}

static void pop(ctx *c, size_t at)
{
	if (!c->path.oom && at < c->path.n) {
		c->path.n = at;
		c->path.b[at] = '\0';
	}
}

/* A GBNF literal of bytes s[0, n) (JSON text as the model writes it). */
static void lit(strbuf *b, const char *s, size_t n)
{
	strbuf_puts(b, "\"");
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			strbuf_printf(b, "\\%c", ch);
		else if (ch == '\n')
			strbuf_puts(b, "\\n");
		else if (ch == '\r')
			strbuf_puts(b, "\\r");
		else if (ch == '\t')
			strbuf_puts(b, "\\t");
		else if (ch < 0x20 || ch == 0x7f)
			strbuf_printf(b, "\\x%02X", ch);
		else
			strbuf_add(b, (const char *)&ch, 1);
	}
	strbuf_puts(b, "\"");
}

/* A JSON value as the literal of its compact text. */
static int lit_json(ctx *c, strbuf *b, const json_t *v)
{
	char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

	if (!s)
		return fail(c, QERR_NOMEM, "out of memory");
	lit(b, s, strlen(s));
	free(s);
	return 0;
}

static int rule(ctx *c, const json_t *s);

static const char *const IGNORED[] = {
	"title", "description", "$schema", "$id", "$comment", "examples",
	"default", "deprecated", "readOnly", "writeOnly", "strict",
	"$defs", "definitions"};

/* Refuses a keyword of s that is not in the allowed list (nor ignored). */
static int only(ctx *c, const json_t *s, const char *const *ok, size_t n)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)s, k, v) {
		size_t i;

		(void)v;
		for (i = 0; i < n && strcmp(k, ok[i]); i++)
			;
		if (i < n)
			continue;
		for (i = 0; i < sizeof(IGNORED) / sizeof(*IGNORED) &&
			    strcmp(k, IGNORED[i]); i++)
			;
		if (i < sizeof(IGNORED) / sizeof(*IGNORED))
			continue;
		{
			size_t at = push(c, ".%s", k);

			fail(c, QERR_UNSUPPORTED, "not supported here (the "
			     "supported subset: docs/http.md)");
			pop(c, at);
			return -1;
		}
	}
	return 0;
}

/* Refuses keyword kw of a schema for its sibling other: each is taken
 * alone, and the grammar could not enforce both. */
static int refuse_with(ctx *c, const char *kw, const char *other)
{
	size_t at = push(c, ".%s", kw);

	fail(c, QERR_UNSUPPORTED, "not supported together with %s (the "
	     "supported subset: docs/http.md)", other);
	pop(c, at);
	return -1;
}

static int get_count(ctx *c, const json_t *s, const char *key, long dflt,
		     long *out)
{
	json_t *v = json_object_get(s, key);

	*out = dflt;
	if (!v)
		return 0;
	/* 3.0 is an integer too (JSON Schema: by value) */
	if (!json_is_number(v) || json_number_value(v) < 0 ||
	    json_number_value(v) > 256 ||
	    json_number_value(v) != floor(json_number_value(v))) {
		size_t at = push(c, ".%s", key);

		fail(c, QERR_UNSUPPORTED, "must be an integer in 0..256");
		pop(c, at);
		return -1;
	}
	*out = (long)json_number_value(v);
	return 0;
}

/* ---- integers in a range, digit by digit ------------------------------- */

/* Numbers of exactly the digits of lo..hi (same length strings). A
 * free tail (lo's rest all 0, hi's all 9) is one class: the two sides
 * below recurse into such tails at every digit, so without it the rule
 * doubled with each digit (minimum 22, no maximum: 1.3 MB, over gbnf's
 * limit). With it each side recurses once: a rule linear in digits. */
static void digits_range(strbuf *b, const char *lo, const char *hi)
{
	size_t n = strlen(lo), p = 0, q;

	while (p < n && lo[p] == hi[p])
		p++;
	if (p == n) {
		lit(b, lo, n);
		return;
	}
	for (q = p; q < n && lo[q] == '0' && hi[q] == '9'; q++)
		;
	if (q == n) {
		strbuf_puts(b, "(");
		if (p)
			lit(b, lo, p);
		strbuf_printf(b, " [0-9]{%zu})", n - p);
		return;
	}
	strbuf_puts(b, "(");
	if (p)
		lit(b, lo, p);
	strbuf_puts(b, "(");
	if (p + 1 == n) {
		strbuf_printf(b, "[%c-%c]", lo[p], hi[p]);
	} else {
		char *nines = malloc(n + 1), *zeros = malloc(n + 1);
		int first = 1;

		if (!nines || !zeros) {
			free(nines);
			free(zeros);
			b->oom = 1;
			return;
		}
		memset(nines, '9', n);
		memset(zeros, '0', n);
		nines[n] = zeros[n] = '\0';
		/* lo[p] then lo's rest .. 99..9 */
		strbuf_printf(b, "\"%c\" ", lo[p]);
		digits_range(b, lo + p + 1, nines + p + 1);
		first = 0;
		if (hi[p] - lo[p] > 1) {
			strbuf_printf(b, " | [%c-%c] [0-9]{%zu}", lo[p] + 1,
				hi[p] - 1, n - p - 1);
		}
		strbuf_printf(b, "%s\"%c\" ", first ? "" : " | ", hi[p]);
		digits_range(b, zeros + p + 1, hi + p + 1);
		free(nines);
		free(zeros);
	}
	strbuf_puts(b, "))");
}

/* Non-negative integers lo..hi (no leading zeros). */
static void nonneg_range(strbuf *b, long long lo, long long hi)
{
	char a[24], z[24];
	int first = 1;

	strbuf_puts(b, "(");
	for (int len = 1; len <= 18; len++) {
		long long pmin = len == 1 ? 0 : 1, pmax = 9;

		for (int i = 1; i < len; i++) {
			pmin *= 10;
			pmax = pmax * 10 + 9;
		}
		if (pmin > hi || pmax < lo)
			continue;
		snprintf(a, sizeof(a), "%lld", lo > pmin ? lo : pmin);
		snprintf(z, sizeof(z), "%lld", hi < pmax ? hi : pmax);
		if (!first)
			strbuf_puts(b, " | ");
		first = 0;
		digits_range(b, a, z);
	}
	strbuf_puts(b, ")");
}

#define RANGE_MAX 999999999999999LL

static int int_range(ctx *c, const json_t *s, strbuf *b)
{
	long long lo = -RANGE_MAX, hi = RANGE_MAX;
	int has = 0;
	const char *keys[] = {"minimum", "maximum", "exclusiveMinimum",
			      "exclusiveMaximum"};

	for (int k = 0; k < 4; k++) {
		json_t *v = json_object_get(s, keys[k]);
		double d;
		long long x;

		if (!v)
			continue;
		if (!json_is_number(v)) {
			size_t at = push(c, ".%s", keys[k]);

			fail(c, QERR_FORMAT, "must be a number");
			pop(c, at);
			return -1;
		}
		d = json_number_value(v);
		if (d < -RANGE_MAX || d > RANGE_MAX) {
			size_t at = push(c, ".%s", keys[k]);

			fail(c, QERR_UNSUPPORTED, "beyond +-%lld", RANGE_MAX);
			pop(c, at);
			return -1;
		}
		has = 1;
		x = (long long)d;
		switch (k) {
		case 0: if ((double)x < d) x++; if (x > lo) lo = x; break;
		case 1: if ((double)x > d) x--; if (x < hi) hi = x; break;
		case 2: if ((double)x <= d) x++; if (x > lo) lo = x; break;
		default: if ((double)x >= d) x--; if (x < hi) hi = x; break;
		}
	}
	if (!has) {
		strbuf_puts(b, "jint");
		return 0;
	}
	if (lo > hi)
		return fail(c, QERR_FORMAT, "no integer is in the range");
	strbuf_puts(b, "(");
	if (lo < 0) {
		strbuf_puts(b, "\"-\" ");
		nonneg_range(b, hi < 0 ? -hi : 1, -lo);
		if (hi >= 0)
			strbuf_puts(b, " | ");
	}
	if (hi >= 0)
		nonneg_range(b, lo > 0 ? lo : 0, hi);
	strbuf_puts(b, ")");
	return 0;
}

/* ---- schemas --------------------------------------------------------------- */

static int type_is(const json_t *t, const char *name)
{
	size_t i;
	json_t *x;

	if (json_is_string(t))
		return !strcmp(json_string_value(t), name);
	json_array_foreach(t, i, x)
		if (json_is_string(x) && !strcmp(json_string_value(x), name))
			return 1;
	return 0;
}

/* The keywords that apply to some types only, and those types (JSON
 * Schema's: "minimum" is for numbers; on a string it is no constraint). */
static const struct {
	const char *kw, *types[2];
} KW_TYPES[] = {
	{"properties", {"object"}}, {"required", {"object"}},
	{"additionalProperties", {"object"}},
	{"items", {"array"}}, {"prefixItems", {"array"}},
	{"minItems", {"array"}}, {"maxItems", {"array"}},
	{"minLength", {"string"}}, {"maxLength", {"string"}},
	{"pattern", {"string"}}, {"format", {"string"}},
	{"minimum", {"integer", "number"}}, {"maximum", {"integer", "number"}},
	{"exclusiveMinimum", {"integer", "number"}},
	{"exclusiveMaximum", {"integer", "number"}},
};

/* Whether keyword kw is one of some types' only and t (a type, or a list
 * of them) names none of them: the single-type schema of a list drops
 * the keywords of its list's other types ({"type": ["array", "null"],
 * "items": ...}: the null has no items). A keyword no type of the list
 * takes stays, and is refused as on a single type. */
static int kw_not_for(const char *kw, const json_t *t)
{
	for (size_t i = 0; i < sizeof(KW_TYPES) / sizeof(*KW_TYPES); i++) {
		if (strcmp(kw, KW_TYPES[i].kw))
			continue;
		for (int j = 0; j < 2 && KW_TYPES[i].types[j]; j++)
			if (type_is(t, KW_TYPES[i].types[j]))
				return 0;
		return 1;
	}
	return 0;
}

/* The types schema s's keywords are for, as a list (new reference; NULL
 * out of memory): a schema without "type" is taken as the types its
 * keywords constrain ({"prefixItems": ...} an array, {"maxItems": 1,
 * "maxLength": 2} an array or a string), each with its own keywords (a
 * number's minimum is then refused as with "type": "number"). */
static json_t *kw_types(const json_t *s)
{
	json_t *l = json_array();

	for (size_t i = 0; l && i < sizeof(KW_TYPES) / sizeof(*KW_TYPES);
	     i++) {
		/* a number's keywords name "integer" first: "number"
		 * takes both */
		const char *ty = KW_TYPES[i].types[1] ? KW_TYPES[i].types[1]
						      : KW_TYPES[i].types[0];

		if (json_object_get(s, KW_TYPES[i].kw) && !type_is(l, ty) &&
		    json_array_append_new(l, json_string(ty))) {
			json_decref(l);
			return NULL;
		}
	}
	if (l && json_array_size(l) == 1) {
		json_t *one = json_incref(json_array_get(l, 0));

		json_decref(l);
		return one;
	}
	return l;
}

/* The formats date, time and date-time, values that can be (RFC 3339):
 * months 01-12, days within their month (February's 29th in leap years
 * only: the years divisible by 4 and not by 100, or by 400; RFC 3339's
 * appendix C), hours 00-23, minutes 00-59, seconds 00-59, or the
 * leap second 23:59:60 at offset Z or 00:00 (a leap second elsewhere is
 * valid only where the offset brings it to 23:59 UTC, which validators
 * check: left out, a subset every validator takes), offsets 00:00-23:59; time is RFC 3339's full-time (JSON
 * Schema's), its offset required as date-time's. A leap year's last two
 * digits are a multiple of 4 other than 00 (even tens and 0, 4 or 8;
 * odd tens and 2 or 6), or they are 00 and its first two are. */
#define F_LEAP2 "([02468] [048] | [13579] [26])"
#define F_DATE "([0-9]{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" " \
	"(\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | (\"0\" [469] | \"11\") " \
	"\"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | " \
	"\"1\" [0-9] | \"2\" [0-8])) | ([0-9] [0-9] ([02468] [48] | " \
	"[2468] \"0\" | [13579] [26]) | " F_LEAP2 " \"00\") \"-02-29\")"
#define F_HOUR "([01] [0-9] | \"2\" [0-3])"
#define F_OFFSET "(\"Z\" | [+-] " F_HOUR " \":\" [0-5] [0-9])"
/* a time with its offset: seconds 00-59 at any offset, or the leap
 * second 23:59:60 at UTC's own offset */
#define F_TIME "(" F_HOUR " \":\" [0-5] [0-9] \":\" [0-5] [0-9] " \
	"(\".\" [0-9]{1,6})? " F_OFFSET " | \"23:59:60\" " \
	"(\".\" [0-9]{1,6})? (\"Z\" | [+-] \"00:00\"))"

static const char *const TYPES[] = {
	"object", "array", "string", "integer", "number", "boolean", "null"};

/* Whether the JSON value v is of the schema type t (a name, or a list of
 * them): 1 or 0; -1, failed, where t names no type. An enum's and a
 * const's values are filtered by the type beside them. */
static int of_type(ctx *c, const json_t *v, const json_t *t)
{
	size_t i, k;
	json_t *x;
	int in = 0;

	if (!t)
		return 1;
	for (i = 0; i < (json_is_array(t) ? json_array_size(t) : 1); i++) {
		const char *n;

		x = json_is_array(t) ? json_array_get(t, i) : (json_t *)t;
		n = json_string_value(x);
		for (k = 0; n && k < sizeof(TYPES) / sizeof(*TYPES) &&
			    strcmp(n, TYPES[k]); k++)
			;
		if (!n || k == sizeof(TYPES) / sizeof(*TYPES)) {
			char *shown = json_dumps(x, JSON_ENCODE_ANY |
						 JSON_COMPACT);
			size_t at = push(c, ".type");

			fail(c, QERR_UNSUPPORTED, "%s: not a JSON schema type",
			     shown ? shown : "?");
			pop(c, at);
			free(shown);
			return -1;
		}
		switch (k) {
		case 0: in |= json_is_object(v); break;
		case 1: in |= json_is_array(v); break;
		case 2: in |= json_is_string(v); break;
		case 3:
			/* 2.0 is an integer too (JSON Schema: by value) */
			in |= json_is_integer(v) ||
			      (json_is_real(v) && isfinite(json_real_value(v))
			       && json_real_value(v) ==
					floor(json_real_value(v)));
			break;
		case 4: in |= json_is_number(v); break;
		case 5: in |= json_is_boolean(v); break;
		default: in |= json_is_null(v); break;
		}
	}
	return in;
}

/* The schema $ref r points to (#, #/$defs/NAME, #/definitions/NAME;
 * NAME's JSON Pointer escapes ~0 ~1 read), or NULL. */
static const json_t *ref_target(const ctx *c, const char *r)
{
	const char *name;
	const json_t *defs;
	char key[256];
	size_t k = 0;

	if (!r)
		return NULL;
	if (!strcmp(r, "#"))
		return c->root;
	if (!strncmp(r, "#/$defs/", 8)) {
		name = r + 8;
		defs = json_object_get(c->root, "$defs");
	} else if (!strncmp(r, "#/definitions/", 14)) {
		name = r + 14;
		defs = json_object_get(c->root, "definitions");
	} else {
		return NULL;
	}
	for (; *name && k + 1 < sizeof(key); name++) {
		if (*name == '/')
			return NULL; /* a pointer deeper than one name */
		if (name[0] == '~' && (name[1] == '0' || name[1] == '1')) {
			key[k++] = name[1] == '0' ? '~' : '/';
			name++;
		} else {
			key[k++] = *name;
		}
	}
	if (*name)
		return NULL;
	key[k] = '\0';
	return json_object_get(defs, key);
}

/* The JSON kinds schema s admits, as bits (1 object, 2 array, 4 string,
 * 8 number, 16 boolean, 32 null; integer is a number): from its type,
 * its const or enum, the keywords it has (kw_types); all where it says
 * nothing or cannot be read ($ref followed, at most 8 deep). */
static unsigned kinds(const ctx *c, const json_t *s, int hops)
{
	static const char *const names[] = {"object", "array", "string",
					    "number", "boolean", "null"};
	const json_t *t, *v;
	unsigned k = 0;

	if (!json_is_object(s) || hops > 8)
		return 63;
	if ((v = json_object_get(s, "$ref")))
		return kinds(c, ref_target(c, json_string_value(v)), hops + 1);
	if ((v = json_object_get(s, "const")) || (v = json_object_get(s, "enum"))) {
		size_t i, n = json_is_array(v) && !json_object_get(s, "const")
				      ? json_array_size(v) : 1;

		for (i = 0; i < n; i++) {
			const json_t *e = json_object_get(s, "const")
						  ? v : json_array_get(v, i);

			k |= json_is_object(e) ? 1 : json_is_array(e) ? 2
			     : json_is_string(e) ? 4 : json_is_number(e) ? 8
			     : json_is_boolean(e) ? 16 : 32;
		}
		return k;
	}
	t = json_object_get(s, "type");
	if (!t) {
		json_t *l = kw_types(s);

		if (!l || (json_is_array(l) && !json_array_size(l))) {
			json_decref(l);
			return 63;
		}
		{
			json_t *typed = json_pack("{sO}", "type", l);

			k = typed ? kinds(c, typed, hops + 1) : 63;
			json_decref(typed);
		}
		json_decref(l);
		return k;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (type_is(t, names[i]) || (i == 3 && type_is(t, "integer")))
			k |= 1u << i;
	return k ? k : 63;
}

/* Whether schemas a and b admit no value in common, as far as is read
 * here: different kinds; consts or enums with no value in common;
 * integers with ranges apart; objects that both require a property whose
 * const or enum values differ (a tagged union). 0 where they may meet. */
/* JSON Schema's equality: numbers by value (1 and 1.0 are one value),
 * arrays and objects member by member; json_equal keeps an integer and
 * a real apart. */
static int value_equal(const json_t *a, const json_t *b)
{
	if (json_is_number(a) && json_is_number(b)) {
		if (json_is_integer(a) && json_is_integer(b))
			return json_integer_value(a) == json_integer_value(b);
		return json_number_value(a) == json_number_value(b);
	}
	if (json_is_array(a) && json_is_array(b)) {
		size_t n = json_array_size(a);

		if (n != json_array_size(b))
			return 0;
		for (size_t i = 0; i < n; i++)
			if (!value_equal(json_array_get(a, i),
					 json_array_get(b, i)))
				return 0;
		return 1;
	}
	if (json_is_object(a) && json_is_object(b)) {
		const char *k;
		json_t *v;

		if (json_object_size(a) != json_object_size(b))
			return 0;
		json_object_foreach((json_t *)a, k, v)
			if (!value_equal(v, json_object_get(b, k)))
				return 0;
		return 1;
	}
	return json_equal(a, b);
}

static int apart(const ctx *c, const json_t *a, const json_t *b, int hops)
{
	const json_t *x, *y, *va, *vb;

	if (json_is_object(a) && (x = json_object_get(a, "$ref")) && hops < 8)
		return apart(c, ref_target(c, json_string_value(x)), b,
			     hops + 1);
	if (json_is_object(b) && (y = json_object_get(b, "$ref")) && hops < 8)
		return apart(c, a, ref_target(c, json_string_value(y)),
			     hops + 1);
	if (!json_is_object(a) || !json_is_object(b))
		return 0;
	if (!(kinds(c, a, 0) & kinds(c, b, 0)))
		return 1;
	/* values listed on both sides: none shared */
	va = json_object_get(a, "const") ? json_pack("[O]",
		json_object_get(a, "const")) : json_incref(json_object_get(a,
								   "enum"));
	vb = json_object_get(b, "const") ? json_pack("[O]",
		json_object_get(b, "const")) : json_incref(json_object_get(b,
								   "enum"));
	if (json_is_array(va) && json_is_array(vb)) {
		size_t i, j;
		json_t *e, *f;
		int shared = 0;

		json_array_foreach(va, i, e)
			json_array_foreach(vb, j, f)
				shared |= value_equal(e, f);
		json_decref((json_t *)va);
		json_decref((json_t *)vb);
		return !shared;
	}
	json_decref((json_t *)va);
	json_decref((json_t *)vb);
	/* integers in ranges that do not meet */
	if (type_is(json_object_get(a, "type"), "integer") &&
	    type_is(json_object_get(b, "type"), "integer") &&
	    json_is_string(json_object_get(a, "type")) &&
	    json_is_string(json_object_get(b, "type"))) {
		const json_t *amax = json_object_get(a, "maximum"),
			     *amin = json_object_get(a, "minimum"),
			     *bmax = json_object_get(b, "maximum"),
			     *bmin = json_object_get(b, "minimum");

		if ((json_is_number(amax) && json_is_number(bmin) &&
		     json_number_value(amax) < json_number_value(bmin)) ||
		    (json_is_number(bmax) && json_is_number(amin) &&
		     json_number_value(bmax) < json_number_value(amin)))
			return 1;
	}
	/* objects both requiring a property whose values differ */
	if ((x = json_object_get(a, "required")) &&
	    (y = json_object_get(b, "required")) && json_is_array(x) &&
	    json_is_array(y)) {
		size_t i, j;
		json_t *e, *f;

		json_array_foreach(x, i, e)
			json_array_foreach(y, j, f) {
				const char *k = json_string_value(e);
				const json_t *pa, *pb;

				if (!k || !json_equal(e, f))
					continue;
				pa = json_object_get(json_object_get(
					a, "properties"), k);
				pb = json_object_get(json_object_get(
					b, "properties"), k);
				if (pa && pb && (json_object_get(pa, "const") ||
						 json_object_get(pa, "enum")) &&
				    (json_object_get(pb, "const") ||
				     json_object_get(pb, "enum")) &&
				    apart(c, pa, pb, hops + 1))
					return 1;
			}
	}
	return 0;
}

/* The next code point of UTF-8 text at *p (advanced), -1 when
 * malformed. */
static long next_cp(const unsigned char **p)
{
	const unsigned char *s = *p;
	long c = s[0];
	int k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0
		? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;

	if (k < 0)
		return -1;
	if (k)
		c &= 0x3f >> k;
	for (int i = 1; i <= k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		c = c << 6 | (s[i] & 0x3f);
	}
	*p = s + k + 1;
	return c;
}

/* The rule name of an additional member's key for an object rule base:
 * a JSON string none of whose characters is escaped and which is none of
 * the n declared names (an extra member named as a declared one would
 * take the additional schema, not its own). The names, as code points,
 * make a trie; each node's rule ends the string where no name ends,
 * follows a child's character, or takes any other character and then
 * any tail. At most 4096 nodes. 0, or -1 on failure. */
static int extra_key(ctx *c, int base, const char *const *names, int n,
		     char *key, size_t cap)
{
	enum { MAXN = 4096 };
	/* node k: its character, parent, whether a name ends there */
	struct node {
		long ch;
		int parent, ends;
	} *tr = malloc(MAXN * sizeof(*tr));
	int nodes = 1, rc = 0;
	strbuf *o = &c->out;

	if (!tr)
		return fail(c, QERR_NOMEM, "out of memory");
	tr[0].ends = 0;
	for (int i = 0; i < n; i++) {
		const unsigned char *p = (const unsigned char *)names[i];
		int at = 0, ok = 1;

		/* a name that needs an escape is never written unescaped */
		for (const unsigned char *q = p; *q; q++)
			ok &= *q >= 0x20 && *q != 0x7f && *q != '"' &&
			      *q != '\\';
		while (ok && *p) {
			long cp = next_cp(&p);
			int k;

			if (cp < 0) {
				ok = 0;
				break;
			}
			for (k = 1; k < nodes; k++)
				if (tr[k].parent == at && tr[k].ch == cp)
					break;
			if (k == nodes) {
				if (nodes == MAXN) {
					rc = fail(c, QERR_UNSUPPORTED, "over "
						  "%d characters of property "
						  "names beside "
						  "additionalProperties",
						  MAXN);
					goto out;
				}
				tr[k].ch = cp;
				tr[k].parent = at;
				tr[k].ends = 0;
				nodes++;
			}
			at = k;
		}
		if (ok)
			tr[at].ends = 1;
	}
	strbuf_printf(o, "k%d_any ::= [^\"\\\\\\x7F\\x00-\\x1F]\n", base);
	for (int t = 0; t < nodes; t++) {
		int alt = 0;

		strbuf_printf(o, "k%d_%d ::= ", base, t);
		if (!tr[t].ends) {
			strbuf_puts(o, "\"\\\"\"");
			alt = 1;
		}
		for (int k = 1; k < nodes; k++)
			if (tr[k].parent == t) {
				strbuf_printf(o, "%s\"\\U%08lX\" k%d_%d",
					      alt ? " | " : "", tr[k].ch, base, k);
				alt = 1;
			}
		/* another character: any tail */
		strbuf_printf(o, "%s[^\"\\\\\\x7F\\x00-\\x1F", alt ? " | " : "");
		for (int k = 1; k < nodes; k++)
			if (tr[k].parent == t)
				strbuf_printf(o, "\\U%08lX", tr[k].ch);
		strbuf_printf(o, "] k%d_any* \"\\\"\"\n", base);
	}
	snprintf(key, cap, "\"\\\"\" k%d_0", base);
out:
	free(tr);
	return rc;
}

/* The body of the rule of schema s into b. */
static int body(ctx *c, const json_t *s, strbuf *b)
{
	json_t *t, *v;

	if (json_is_true(s) || (json_is_object(s) && !json_object_size(s))) {
		strbuf_puts(b, "jvalue");
		return 0;
	}
	if (!json_is_object(s))
		return fail(c, QERR_FORMAT, "a schema must be an object or "
			    "true");
	if ((v = json_object_get(s, "$ref"))) {
		const char *r = json_string_value(v);
		const json_t *target = ref_target(c, r);

		if (only(c, s, (const char *const[]){"$ref"}, 1))
			return -1;
		if (!target && r && r[0] != '#')
			return fail(c, QERR_UNSUPPORTED, "$ref %s: only "
				    "references inside the schema are "
				    "supported (#, #/$defs/NAME, "
				    "#/definitions/NAME)", r);
		if (!target)
			return fail(c, QERR_FORMAT, "$ref %s: not found", r ? r
				    : "(not a string)");
		{
			int id = rule(c, target);

			if (id < 0)
				return -1;
			strbuf_printf(b, "r%d", id);
		}
		return 0;
	}
	if ((v = json_object_get(s, "const"))) {
		int in;

		if (only(c, s, (const char *const[]){"const", "type"}, 2) ||
		    (in = of_type(c, v, json_object_get(s, "type"))) < 0)
			return -1;
		if (!in) {
			size_t at = push(c, ".const");

			fail(c, QERR_FORMAT, "not of the schema's type");
			pop(c, at);
			return -1;
		}
		return lit_json(c, b, v);
	}
	if ((v = json_object_get(s, "enum"))) {
		size_t i, n = 0;
		json_t *e;

		if (only(c, s, (const char *const[]){"enum", "type"}, 2))
			return -1;
		if (!json_is_array(v) || !json_array_size(v))
			return fail(c, QERR_FORMAT, "enum must be a non-empty "
				    "array");
		strbuf_puts(b, "(");
		json_array_foreach(v, i, e) {
			int in = of_type(c, e, json_object_get(s, "type"));

			if (in < 0)
				return -1;
			if (!in)
				continue;
			if (n++)
				strbuf_puts(b, " | ");
			if (lit_json(c, b, e))
				return -1;
		}
		strbuf_puts(b, ")");
		if (!n) {
			size_t at = push(c, ".enum");

			fail(c, QERR_FORMAT, "no value is of the schema's "
			     "type");
			pop(c, at);
			return -1;
		}
		return 0;
	}
	if ((v = json_object_get(s, "anyOf")) ||
	    (v = json_object_get(s, "oneOf")) ||
	    (v = json_object_get(s, "allOf"))) {
		const char *kw = json_object_get(s, "anyOf") ? "anyOf"
				 : json_object_get(s, "oneOf") ? "oneOf"
							       : "allOf";
		size_t i;
		json_t *e;

		if (only(c, s, (const char *const[]){kw}, 1))
			return -1;
		if (!json_is_array(v) || !json_array_size(v) ||
		    (!strcmp(kw, "allOf") && json_array_size(v) != 1)) {
			size_t at = push(c, ".%s", kw);

			fail(c, QERR_UNSUPPORTED, "%s", strcmp(kw, "allOf")
			     ? "must be a non-empty array"
			     : "only an allOf of one schema is supported");
			pop(c, at);
			return -1;
		}
		/* oneOf is anyOf only where no value meets two branches: the
		 * grammar cannot say "not both" */
		for (size_t x = 0; !strcmp(kw, "oneOf") &&
				   x < json_array_size(v); x++)
			for (size_t y = x + 1; y < json_array_size(v); y++)
				if (!apart(c, json_array_get(v, x),
					   json_array_get(v, y), 0)) {
					size_t at = push(c, ".oneOf");

					fail(c, QERR_UNSUPPORTED, "branches %zu "
					     "and %zu may both hold a value, "
					     "which the grammar cannot refuse "
					     "(oneOf is supported where the "
					     "branches are apart: other types, "
					     "other values, integer ranges "
					     "apart, a required property's "
					     "other const; else use anyOf)",
					     x, y);
					pop(c, at);
					return -1;
				}
		strbuf_puts(b, "(");
		json_array_foreach(v, i, e) {
			size_t at = push(c, ".%s[%zu]", kw, i);
			int id = rule(c, e);

			pop(c, at);
			if (id < 0)
				return -1;
			strbuf_printf(b, "%sr%d", i ? " | " : "", id);
		}
		strbuf_puts(b, ")");
		return 0;
	}
	t = json_object_get(s, "type");
	if (!t) {
		/* no type: the types its keywords are for */
		if (!(t = kw_types(s)))
			return fail(c, QERR_NOMEM, "out of memory");
		if (json_is_array(t) && !json_array_size(t)) {
			json_decref(t);
			if (only(c, s, NULL, 0))
				return -1;
			strbuf_puts(b, "jvalue");
			return 0;
		}
	} else {
		json_incref(t);
	}
	if (json_is_array(t) && json_array_size(t) > 1) {
		/* a list of types: each one as its own schema */
		size_t i;
		json_t *e;

		if (!c->keep && !(c->keep = json_array())) {
			json_decref(t);
			return fail(c, QERR_NOMEM, "out of memory");
		}
		strbuf_puts(b, "(");
		json_array_foreach(t, i, e) {
			json_t *one = json_deep_copy(s);
			int id;

			/* Kept alive, not freed after its rule: rule()
			 * knows a schema by its address, and a later copy
			 * at a freed one's address took that one's rule
			 * ({"type": ["boolean", "null"]} wrote integers). */
			if (!one || json_array_append_new(c->keep, one) ||
			    json_object_set(one, "type", e)) {
				json_decref(t);
				return fail(c, QERR_NOMEM, "out of memory");
			}
			{
				const char *k;
				json_t *x;
				void *tmp;

				json_object_foreach_safe(one, tmp, k, x)
					if (kw_not_for(k, e) &&
					    !kw_not_for(k, t))
						json_object_del(one, k);
			}
			id = rule(c, one);
			if (id < 0) {
				json_decref(t);
				return -1;
			}
			strbuf_printf(b, "%sr%d", i ? " | " : "", id);
		}
		strbuf_puts(b, ")");
		json_decref(t);
		return 0;
	}
	if (type_is(t, "object")) {
		static const char *const ok[] = {
			"type", "properties", "required",
			"additionalProperties"};
		json_t *props = json_object_get(s, "properties"),
		       *req = json_object_get(s, "required"),
		       *add = json_object_get(s, "additionalProperties");
		const char *k, *names[64];
		int ids[64], required[64], n = 0, add_id = -1;
		json_t *ps;

		json_decref(t);
		if (only(c, s, ok, 4))
			return -1;
		if (props && !json_is_object(props))
			return fail(c, QERR_FORMAT, "properties must be an "
				    "object");
		json_object_foreach(props, k, ps) {
			size_t at = push(c, ".properties.%s", k);

			if (n == 64) {
				fail(c, QERR_UNSUPPORTED, "over 64 properties");
				pop(c, at);
				return -1;
			}
			names[n] = k;
			required[n] = 0;
			ids[n] = rule(c, ps);
			pop(c, at);
			if (ids[n] < 0)
				return -1;
			n++;
		}
		if (req) {
			size_t i;
			json_t *e;

			if (!json_is_array(req))
				return fail(c, QERR_FORMAT, "required must be "
					    "an array");
			json_array_foreach(req, i, e) {
				int j;

				for (j = 0; j < n && (!json_is_string(e) ||
						     strcmp(names[j],
							    json_string_value(e)));
				     j++)
					;
				if (j == n) {
					size_t at = push(c, ".required[%zu]",
							 i);

					fail(c, QERR_FORMAT, "not a property "
					     "of the schema");
					pop(c, at);
					return -1;
				}
				required[j] = 1;
			}
		}
		if (add && !json_is_false(add)) {
			size_t at = push(c, ".additionalProperties");

			add_id = json_is_true(add) ? -2 : rule(c, add);
			pop(c, at);
			if (add_id == -1)
				return -1;
		}
		/* "{" then the properties from i on, with or without a
		 * comma before the next: rules o<id>_<i>_<first> */
		{
			int base = c->n_rules++;
			strbuf *o = &c->out;
			char xk[48] = "jstring";

			if (add_id != -1 && n &&
			    extra_key(c, base, names, n, xk, sizeof(xk)))
				return -1;

			strbuf_printf(b, "\"{\" ws o%d_0_1 ws \"}\"", base);
			for (int i = n; i >= 0; i--)
				for (int first = 0; first < 2; first++) {
					const char *sep = first ? ""
						: "ws \",\" ws ";

					strbuf_printf(o, "o%d_%d_%d ::= ", base, i,
						first);
					if (i == n) {
						if (add_id == -1) {
							strbuf_puts(o, "\"\"\n");
							continue;
						}
						char v[24];

						if (add_id == -2)
							snprintf(v, sizeof(v),
								 "jvalue");
						else
							snprintf(v, sizeof(v),
								 "r%d", add_id);
						strbuf_printf(o, "(%s %s ws \":\" "
							"ws %s (ws \",\" ws "
							"%s ws \":\" ws "
							"%s)*)?\n", sep, xk, v,
							xk, v);
						continue;
					}
					strbuf_printf(o, "%s", sep);
					{
						/* the key as JSON text */
						json_t *ks = json_string(names[i]);

						if (!ks || lit_json(c, o, ks)) {
							json_decref(ks);
							return -1;
						}
						json_decref(ks);
					}
					strbuf_printf(o, " ws \":\" ws r%d o%d_%d_0",
						ids[i], base, i + 1);
					if (!required[i])
						strbuf_printf(o, " | o%d_%d_%d", base,
							i + 1, first);
					strbuf_puts(o, "\n");
				}
		}
		return 0;
	}
	if (type_is(t, "array")) {
		static const char *const ok[] = {"type", "items", "minItems",
						 "maxItems", "prefixItems"};
		json_t *items = json_object_get(s, "items"),
		       *pre = json_object_get(s, "prefixItems");
		long lo, hi;
		int id;

		json_decref(t);
		if (only(c, s, ok, 5) || get_count(c, s, "minItems", 0, &lo) ||
		    get_count(c, s, "maxItems", -1, &hi))
			return -1;
		if (hi >= 0 && hi < lo)
			return fail(c, QERR_FORMAT, "maxItems below minItems");
		if (pre) {
			size_t i;
			long len;
			json_t *e;

			if (!json_is_array(pre) || (items && !json_is_false(items)))
				return fail(c, QERR_UNSUPPORTED, "prefixItems "
					    "with items other than false");
			/* One length, within minItems..maxItems: every
			 * prefix item (where JSON Schema would allow fewer),
			 * cut to maxItems, and past them as many of any
			 * value as minItems wants (none with items false). */
			len = (long)json_array_size(pre);
			if (hi >= 0 && hi < len)
				len = hi;
			if (len < lo) {
				size_t at;

				if (items) {
					at = push(c, ".minItems");
					fail(c, QERR_FORMAT, "above the "
					     "prefixItems' count with items "
					     "false");
					pop(c, at);
					return -1;
				}
				len = lo;
			}
			strbuf_puts(b, "\"[\" ws ");
			json_array_foreach(pre, i, e) {
				size_t at = push(c, ".prefixItems[%zu]", i);

				id = rule(c, e);
				pop(c, at);
				if (id < 0)
					return -1;
				if ((long)i < len)
					strbuf_printf(b, "%sr%d ",
						i ? "ws \",\" ws " : "", id);
			}
			for (i = json_array_size(pre); (long)i < len; i++)
				strbuf_printf(b, "%sjvalue ",
					i ? "ws \",\" ws " : "");
			strbuf_puts(b, "ws \"]\"");
			return 0;
		}
		if (json_is_false(items)) {
			/* no item may be: the empty array */
			if (lo > 0) {
				size_t at = push(c, ".minItems");

				fail(c, QERR_FORMAT, "above 0 with items "
				     "false");
				pop(c, at);
				return -1;
			}
			strbuf_puts(b, "\"[\" ws \"]\"");
			return 0;
		}
		{
			size_t at = push(c, ".items");

			id = items ? rule(c, items) : -2;
			pop(c, at);
			if (id == -1)
				return -1;
		}
		{
			char item[32];

			if (id == -2)
				snprintf(item, sizeof(item), "jvalue");
			else
				snprintf(item, sizeof(item), "r%d", id);
			/* maxItems 0: no item at all (the optional item
			 * below is one at least) */
			if (hi == 0) {
				strbuf_puts(b, "\"[\" ws \"]\"");
				return 0;
			}
			strbuf_puts(b, "\"[\" ws ");
			if (lo == 0)
				strbuf_puts(b, "(");
			strbuf_printf(b, "%s", item);
			if (hi < 0)
				strbuf_printf(b, " (ws \",\" ws %s){%ld,}", item,
					lo ? lo - 1 : 0);
			else if (hi > 1 || lo > 1)
				strbuf_printf(b, " (ws \",\" ws %s){%ld,%ld}", item,
					lo ? lo - 1 : 0, hi - 1);
			if (lo == 0)
				strbuf_puts(b, ")?");
			strbuf_puts(b, " ws \"]\"");
		}
		return 0;
	}
	if (type_is(t, "string")) {
		static const char *const ok[] = {"type", "minLength",
						 "maxLength", "pattern",
						 "format"};
		json_t *pat = json_object_get(s, "pattern"),
		       *fmt = json_object_get(s, "format");
		long lo, hi;

		json_decref(t);
		if (only(c, s, ok, 5) || get_count(c, s, "minLength", 0, &lo) ||
		    get_count(c, s, "maxLength", -1, &hi))
			return -1;
		/* a pattern or format is its own grammar: the lengths, or
		 * the other one, would have been dropped */
		if (pat && fmt)
			return refuse_with(c, "format", "pattern");
		if ((pat || fmt) && json_object_get(s, "minLength"))
			return refuse_with(c, "minLength", pat ? "pattern"
					   : "format");
		if ((pat || fmt) && json_object_get(s, "maxLength"))
			return refuse_with(c, "maxLength", pat ? "pattern"
					   : "format");
		if (pat) {
			const char *p = json_string_value(pat);
			int rc;

			if (!p)
				return fail(c, QERR_FORMAT, "pattern must be a "
					    "string");
			strbuf_puts(b, "\"\\\"\" ");
			if ((rc = rxgbnf(p, RX_JSON, b)))
				return fail(c, rc, "%s", qerr_detail());
			strbuf_puts(b, " \"\\\"\"");
			return 0;
		}
		if (fmt) {
			const char *f = json_string_value(fmt);
			const char *g =
				!f ? NULL
				: !strcmp(f, "date") ? F_DATE
				: !strcmp(f, "time") ? F_TIME
				: !strcmp(f, "date-time")
				? F_DATE " \"T\" " F_TIME
				: !strcmp(f, "uuid")
				? "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" "
				  "[0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" "
				  "[0-9a-f]{12}"
				: NULL;

			if (!g) {
				size_t at = push(c, ".format");

				fail(c, QERR_UNSUPPORTED, "%s: not supported "
				     "(date, time, date-time, uuid)",
				     f ? f : "(not a string)");
				pop(c, at);
				return -1;
			}
			strbuf_printf(b, "\"\\\"\" %s \"\\\"\"", g);
			return 0;
		}
		if (hi >= 0 && hi < lo)
			return fail(c, QERR_FORMAT, "maxLength below "
				    "minLength");
		if (!lo && hi < 0)
			strbuf_puts(b, "jstring");
		else if (hi < 0)
			strbuf_printf(b, "\"\\\"\" jchar{%ld,} \"\\\"\"", lo);
		else
			strbuf_printf(b, "\"\\\"\" jchar{%ld,%ld} \"\\\"\"", lo, hi);
		return 0;
	}
	if (type_is(t, "integer")) {
		static const char *const ok[] = {"type", "minimum", "maximum",
						 "exclusiveMinimum",
						 "exclusiveMaximum"};

		json_decref(t);
		if (only(c, s, ok, 5))
			return -1;
		return int_range(c, s, b);
	}
	if (type_is(t, "number")) {
		json_decref(t);
		if (only(c, s, (const char *const[]){"type"}, 1))
			return -1;
		strbuf_puts(b, "jnumber");
		return 0;
	}
	if (type_is(t, "boolean") || type_is(t, "null")) {
		int bo = type_is(t, "boolean");

		json_decref(t);
		if (only(c, s, (const char *const[]){"type"}, 1))
			return -1;
		strbuf_puts(b, bo ? "jbool" : "jnull");
		return 0;
	}
	{
		char *shown = json_dumps(t, JSON_ENCODE_ANY | JSON_COMPACT);
		size_t at = push(c, ".type");

		fail(c, QERR_UNSUPPORTED, "%s: not a JSON schema type",
		     shown ? shown : "?");
		pop(c, at);
		free(shown);
		json_decref(t);
		return -1;
	}
}

/* The rule of schema s: its id (a schema reached twice, as by $ref, has
 * one rule); -1 on error. */
static int rule(ctx *c, const json_t *s)
{
	strbuf b = {0};
	int id;

	for (int i = 0; i < c->n_seen; i++)
		if (c->seen[i] == s)
			return i;
	if (c->n_seen == 256)
		return fail(c, QERR_UNSUPPORTED, "over 256 schemas");
	if (c->depth == 64)
		return fail(c, QERR_UNSUPPORTED, "nested over 64 levels");
	id = c->n_seen;
	c->seen[c->n_seen++] = s;
	c->depth++;
	if (body(c, s, &b)) {
		free(b.b);
		return -1;
	}
	c->depth--;
	if (b.oom) {
		free(b.b);
		return fail(c, QERR_NOMEM, "out of memory");
	}
	strbuf_printf(&c->out, "r%d ::= %s\n", id, b.b ? b.b : "\"\"");
	free(b.b);
	return id;
}

int jschema_to_gbnf(const json_t *schema, char **out)
{
	ctx c = {0};
	int id;

	*out = NULL;
	strbuf_puts(&c.path, "schema");
	c.root = schema;
	c.n_rules = 0;
	id = rule(&c, schema);
	json_decref(c.keep);
	strbuf_free(&c.path);
	if (id < 0) {
		free(c.out.b);
		return c.code ? c.code : QERR_FORMAT;
	}
	strbuf_printf(&c.out, "root ::= r%d\n", id);
	strbuf_puts(&c.out, COMMON);
	if (c.out.oom) {
		free(c.out.b);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	*out = c.out.b;
	return 0;
}

int jschema_any(char **out)
{
	strbuf b = {0};

	strbuf_puts(&b, "root ::= jobject\n");
	strbuf_puts(&b, COMMON);
	if (b.oom) {
		free(b.b);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	*out = b.b;
	return 0;
}

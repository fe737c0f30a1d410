/*
 * test_grammar — constrained sampling: GBNF grammars (text/gbnf) and
 * JSON schemas (text/jschema), regular expressions (text/rxgbnf, raw and
 * inside a schema's JSON string) and choices (text/constrain) as tables
 * of named cases — every refused
 * grammar or schema with its message naming the place, texts the grammar
 * takes whole, takes as a prefix, or refuses — the allowed-token masks
 * against a brute-force check over the vocabulary, and sampling under a
 * grammar on the shipped model: every sample's text is in the grammar,
 * and its bytes are the same whatever N, the thread count or the batch
 * it shares.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/mkmodel.h"
#include "infer/model.h"
#include "format/gguf.h"
#include "qerr.h"
#include "sc/answer.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "testutil.h"
#include "text/constrain.h"
#include "text/gbnf.h"
#include "text/jschema.h"
#include "text/prompt.h"
#include "text/strbuf.h"
#include "text/tok.h"

static tok *gpt2;
static gbnf_vocab *gv;
static model *arith;
static tok *at;

/* Grammars written for this test (llama.cpp's language). */
static const char ARITH[] =
	"root  ::= expr\n"
	"expr  ::= term ([-+*/] term)*\n"
	"term  ::= num | \"(\" ws expr ws \")\"\n"
	"num   ::= [0-9]+\n"
	"ws    ::= [ ]*\n";
static const char JSONISH[] =
	"# a JSON value, small\n"
	"root ::= object\n"
	"value ::= object | array | string | number | (\"true\" | \"false\" |\n"
	"          \"null\")\n"
	"object ::= \"{\" ( string \":\" value (\",\" string \":\" value)* )? "
	"\"}\"\n"
	"array ::= \"[\" ( value (\",\" value)* )? \"]\"\n"
	"string ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [\"\\\\nt] )* \"\\\"\"\n"
	"number ::= \"-\"? [0-9]+ (\".\" [0-9]+)?\n";

static const struct {
	const char *name, *grammar, *msg;
} bad[] = {
	{"undefined", "root ::= a b\na ::= \"x\"\n",
	 "grammar:1:12: undefined rule 'b'"},
	{"no_root", "a ::= \"x\"\n", "grammar: no 'root' rule"},
	{"left_rec", "root ::= root \"x\" | \"y\"\n",
	 "grammar:1:1: rule 'root' is left-recursive"},
	{"left_rec_nullable", "root ::= a root \"x\" | \"y\"\na ::= \"z\"?\n",
	 "grammar:1:1: rule 'root' is left-recursive"},
	{"unclosed_group", "root ::= (\"x\"\n",
	 "grammar:1:10: unclosed '('"},
	{"unclosed_class", "root ::= [abc\n",
	 "grammar:1:10: unterminated class"},
	{"unclosed_literal", "root ::= \"abc\n",
	 "grammar:1:10: unterminated literal"},
	{"bad_escape", "root ::= \"\\q\"\n",
	 "grammar:1:11: unknown escape '\\q'"},
	{"bad_repeat", "root ::= \"x\"{3,1}\n",
	 "grammar:1:13: {3,1}: max below min"},
	{"no_assign", "root \"x\"\n", "grammar:1:6: expected '::='"},
	{"twice", "root ::= \"x\"\nroot ::= \"y\"\n",
	 "grammar:2:1: rule 'root' defined twice"},
	{"backwards", "root ::= [z-a]\n", "grammar:1:10: a range backwards"},
	/* (it had been taken, and written as a broken byte) */
	{"surrogate", "root ::= \"x\\ud800y\"\n",
	 "grammar:1:12: escape '\\ud800' is a surrogate code point (no "
	 "character)"},
};

static void parse_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		gbnf *g = NULL;
		int rc = gbnf_parse(bad[i].grammar, strlen(bad[i].grammar), &g);

		if (rc != QERR_FORMAT || strcmp(qerr_detail(), bad[i].msg))
			fail_msg("%s: rc %d, \"%s\", want \"%s\"", bad[i].name,
				 rc, qerr_detail(), bad[i].msg);
		assert_null(g);
	}
}

enum { WHOLE, PREFIX, NO };

/* Whether text is taken whole (accepting), as a prefix, or not at all. */
static int verdict(const char *grammar, const char *text)
{
	gbnf *g = NULL;
	gbnf_matcher *m = NULL;
	int s, v;

	if (gbnf_parse(grammar, strlen(grammar), &g))
		fail_msg("parse: %s", qerr_detail());
	assert_int_equal(gbnf_matcher_new(g, gv, &m), 0);
	s = gbnf_step(m, gbnf_start(m), text, strlen(text));
	v = s == GBNF_DEAD ? NO : gbnf_accepting(m, s) ? WHOLE : PREFIX;
	gbnf_matcher_free(&m);
	gbnf_free(&g);
	return v;
}

static const struct {
	const char *grammar, *text;
	int want;
} texts[] = {
	{ARITH, "1+2", WHOLE}, {ARITH, "(1+2)*30", WHOLE},
	{ARITH, "(1+", PREFIX}, {ARITH, "1+", PREFIX}, {ARITH, "+1", NO},
	{ARITH, "1 + 2", NO}, {ARITH, "((3))", WHOLE},
	{JSONISH, "{}", WHOLE}, {JSONISH, "{\"a\":1}", WHOLE},
	{JSONISH, "{\"a\":[1,2.5,{\"b\":null}]}", WHOLE},
	{JSONISH, "{\"a\"", PREFIX}, {JSONISH, "{\"a\" :1}", NO},
	{JSONISH, "[1]", NO}, {JSONISH, "{\"\\u\"}", NO},
	{JSONISH, "{\"caf\xc3\xa9\":true}", WHOLE},
	{JSONISH, "{\"caf\xc3", PREFIX},
	/* an overlong encoding and a lone continuation byte: never */
	{JSONISH, "{\"\xc0\xaf", NO}, {JSONISH, "{\"\x80", NO},
	{"root ::= \"a\"{2,3}\n", "aa", WHOLE},
	{"root ::= \"a\"{2,3}\n", "aaa", WHOLE},
	{"root ::= \"a\"{2,3}\n", "aaaa", NO},
	{"root ::= \"a\"{2,3}\n", "a", PREFIX},
	{"root ::= \"ab\"+ \"c\"?\n", "ababc", WHOLE},
	{"root ::= \"ab\"+ \"c\"?\n", "abac", NO},
	{"root ::= [^x]* \"x\"\n", "hello x", WHOLE},
	{"root ::= .\n", "\xe2\x82\xac", WHOLE},
	{"root ::= [\\u00e9-\\u00ea]\n", "\xc3\xa9", WHOLE},
	{"root ::= [\\u00e9-\\u00ea]\n", "\xc3\xab", NO},
	{"root ::= (\"yes\" | \"no\") \"\\n\"\n", "no\n", WHOLE},
	/* optional parts repeated: a stack reached by many paths counts
	 * once (each path had counted toward the bound, so that only "b"
	 * was left: the a's never allowed) */
	{"root ::= (\"a\"?){45} \"b\"\n", "aab", WHOLE},
	{"root ::= (\"a\"?){45} \"b\"\n", "b", WHOLE},
	{"root ::= ([0-9]?){50} \"x\"\n", "123x", WHOLE},
};

/* A grammar whose start passes the matcher's bounds is refused when it
 * is parsed, in words (it had given every sample an empty text): here
 * GBNF_STACKS_MAX + 1 alternatives; GBNF_STACKS_MAX of them are taken. */
static void start_bound(void **state)
{
	size_t cap = (GBNF_STACKS_MAX + 2) * 12 + 32, o;
	char *t = malloc(cap);
	gbnf *g = NULL;

	(void)state;
	assert_non_null(t);
	for (int n = GBNF_STACKS_MAX; n <= GBNF_STACKS_MAX + 1; n++) {
		o = (size_t)snprintf(t, cap, "root ::= ");
		for (int i = 0; i < n; i++)
			o += (size_t)snprintf(t + o, cap - o, "%s\"w%05d\"",
					      i ? " | " : "", i);
		snprintf(t + o, cap - o, "\n");
		if (n == GBNF_STACKS_MAX) {
			if (gbnf_parse(t, strlen(t), &g))
				fail_msg("%d alternatives: %s", n,
					 qerr_detail());
			gbnf_free(&g);
		} else {
			assert_int_equal(gbnf_parse(t, strlen(t), &g),
					 QERR_RANGE);
			assert_non_null(strstr(qerr_detail(), "its start takes "
					       "over"));
			assert_null(g);
		}
	}
	free(t);
}

static void matching(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(*texts); i++) {
		int v = verdict(texts[i].grammar, texts[i].text);

		if (v != texts[i].want)
			fail_msg("case %zu \"%s\": %d, want %d", i,
				 texts[i].text, v, texts[i].want);
	}
}

/* The mask of a state is exactly the tokens whose bytes keep it alive. */
static void masks(void **state)
{
	gbnf *g = NULL;
	gbnf_matcher *m = NULL;
	const char *prefixes[] = {"", "{", "{\"a", "{\"a\":", "{\"a\":[1,",
				  "{\"caf\xc3"};

	(void)state;
	assert_int_equal(gbnf_parse(JSONISH, strlen(JSONISH), &g), 0);
	assert_int_equal(gbnf_matcher_new(g, gv, &m), 0);
	for (size_t k = 0; k < sizeof(prefixes) / sizeof(*prefixes); k++) {
		int s = gbnf_step(m, gbnf_start(m), prefixes[k],
				  strlen(prefixes[k]));
		const uint64_t *mk;
		uint64_t *copy;
		uint32_t V = tok_vocab_size(gpt2), n_ok = 0;

		assert_true(s >= 0);
		mk = gbnf_allowed(m, s);
		assert_non_null(mk);
		copy = malloc((V + 63) / 64 * 8);
		memcpy(copy, mk, (V + 63) / 64 * 8);
		for (uint32_t id = 0; id < V; id++) {
			size_t n;
			const char *p = tok_piece(gpt2, (int32_t)id, 0, &n);
			int alive = p && n && !tok_is_control(gpt2, (int32_t)id) &&
				    gbnf_step(m, s, p, n) != GBNF_DEAD;
			int bit = (int)((copy[id >> 6] >> (id & 63)) & 1);

			if (alive != bit)
				fail_msg("prefix \"%s\" token %u: mask %d, "
					 "step %d", prefixes[k], id, bit,
					 alive);
			n_ok += bit;
		}
		assert_true(n_ok > 0);
		free(copy);
	}
	gbnf_matcher_free(&m);
	gbnf_free(&g);
}

static const struct {
	const char *schema, *text;
	int want;
} jtexts[] = {
	{"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
	 "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150}},"
	 "\"required\":[\"name\",\"age\"]}", "{\"name\": \"Bo\", \"age\": 42}",
	 WHOLE},
	{"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
	 "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150}},"
	 "\"required\":[\"name\",\"age\"]}", "{\"name\":\"Bo\",\"age\":151}",
	 NO},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
	 "\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"]}", "{\"b\": 1}",
	 WHOLE},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
	 "\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"]}",
	 "{\"a\": 1, \"b\": 2}", WHOLE},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
	 "\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"]}", "{\"a\": 1",
	 PREFIX},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
	 "\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"]}", "{\"a\": 1}",
	 NO},
	{"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,"
	 "\"maxItems\":3}", "[true, false]", WHOLE},
	{"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,"
	 "\"maxItems\":3}", "[true]", NO},
	{"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,"
	 "\"maxItems\":3}", "[true,", PREFIX},
	{"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,"
	 "\"maxItems\":3}", "[true,true,true,true]", NO},
	/* prefixItems within minItems..maxItems: cut to maxItems, and
	 * any values past them up to minItems (items absent) */
#define PRE3 "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"}," \
	"{\"type\":\"string\"},{\"type\":\"null\"}],"
	{PRE3 "\"maxItems\":2}", "[1,\"a\"]", WHOLE},
	{PRE3 "\"maxItems\":2}", "[1,\"a\",", NO},
	{PRE3 "\"maxItems\":0}", "[]", WHOLE},
	{PRE3 "\"maxItems\":0}", "[1", NO},
	{PRE3 "\"minItems\":1,\"maxItems\":5}", "[1,\"a\",null]", WHOLE},
#undef PRE3
#define PRE1 "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"}],"
	{PRE1 "\"minItems\":3}", "[1,true,\"x\"]", WHOLE},
	{PRE1 "\"minItems\":3}", "[true", NO},
	{PRE1 "\"minItems\":3}", "[1,true", PREFIX},
	{PRE1 "\"minItems\":3}", "[1,true]", NO},
	{PRE1 "\"minItems\":3}", "[1,true,2,", NO},
#undef PRE1
	/* an extra member is never named as a declared one (it took the
	 * additional schema: {"a": 1} where a is null); its name is written
	 * without escapes */
#define XP "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":" \
	"\"null\"},\"ab\":{\"type\":\"null\"}},\"additionalProperties\":" \
	"{\"type\":\"integer\"}}"
	{XP, "{}", WHOLE}, {XP, "{\"x\":1}", WHOLE},
	{XP, "{\"a\":null,\"x\":1}", WHOLE},
	{XP, "{\"a\":null,\"ab\":null,\"abc\":1,\"b\":2,\"\":3}", WHOLE},
	{XP, "{\"a\":1}", NO}, {XP, "{\"ab\":1}", NO},
	{XP, "{\"a\":null,\"a\":1}", NO},
	{XP, "{\"a\":null,\"ab\":null,\"ab\":2}", NO},
	{XP, "{\"x\\u0061\":1}", NO},
#undef XP
	{"{\"type\":\"object\",\"properties\":{\"\":{\"type\":\"null\"}},"
	 "\"additionalProperties\":{\"type\":\"integer\"}}", "{\"\":5}", NO},
	{"{\"type\":\"object\",\"properties\":{\"\":{\"type\":\"null\"}},"
	 "\"additionalProperties\":true}", "{\"\":null,\"q\":[1]}", WHOLE},
	{"{\"type\":\"object\",\"properties\":{\"\xc3\xa9\":{\"type\":"
	 "\"null\"}},\"additionalProperties\":true}", "{\"\xc3\xa9\":1}", NO},
	{"{\"type\":\"object\",\"properties\":{\"\xc3\xa9\":{\"type\":"
	 "\"null\"}},\"additionalProperties\":true}", "{\"\xc3\xa9" "e\":1}", WHOLE},
	/* items false: the empty array; counts written 3.0 are integers */
	{"{\"type\":\"array\",\"items\":false}", "[]", WHOLE},
	{"{\"type\":\"array\",\"items\":false}", "[1]", NO},
	{"{\"type\":\"array\",\"maxItems\":1.0}", "[1]", WHOLE},
	{"{\"type\":\"array\",\"maxItems\":1.0}", "[1,2]", NO},
	/* a surrogate pair's two escapes are one character; a lone
	 * surrogate is none (it had counted two, and a lone one passed) */
	{"{\"type\":\"string\",\"minLength\":2,\"maxLength\":2}",
	 "\"\\ud83d\\ude00\"", NO},
	{"{\"type\":\"string\",\"minLength\":2,\"maxLength\":2}",
	 "\"\\ud83d\\ude00a\"", WHOLE},
	{"{\"type\":\"string\"}", "\"\\ud800\"", NO},
	{"{\"type\":\"string\"}", "\"\\udc00\\ud800\"", NO},
	{"{\"type\":\"string\"}", "\"\\u00e9\\uFFFD\"", WHOLE},
	/* oneOf where the branches are apart: other types, other values,
	 * integer ranges apart, a tagged union */
	{"{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}",
	 "\"a\"", WHOLE},
	{"{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "7",
	 WHOLE},
	{"{\"oneOf\":[{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},"
	 "{\"type\":\"integer\",\"minimum\":10,\"maximum\":20}]}", "15", WHOLE},
	{"{\"oneOf\":[{\"enum\":[1,2]},{\"enum\":[3,\"a\"]}]}", "3", WHOLE},
#define TAGGED "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":" \
	"{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},\"required\":[\"k\"," \
	"\"x\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"}," \
	"\"y\":{\"type\":\"string\"}},\"required\":[\"k\",\"y\"]}]}"
	{TAGGED, "{\"k\":\"a\",\"x\":1}", WHOLE},
	{TAGGED, "{\"k\":\"b\",\"y\":\"s\"}", WHOLE},
	{TAGGED, "{\"k\":\"a\",\"y\":\"s\"}", NO},
#undef TAGGED
	/* $ref names with JSON Pointer escapes */
	{"{\"$defs\":{\"a/b\":{\"type\":\"integer\"}},\"$ref\":"
	 "\"#/$defs/a~1b\"}", "5", WHOLE},
	{"{\"$defs\":{\"a~b\":{\"type\":\"integer\"}},\"$ref\":"
	 "\"#/$defs/a~0b\"}", "\"5\"", NO},
	/* no type: the types its keywords are for */
	{"{\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}",
	 "[1,\"a\"]", WHOLE},
	{"{\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}",
	 "[\"a\",1]", NO},
	{"{\"prefixItems\":[{\"type\":\"integer\"}]}", "7", NO},
	{"{\"maxItems\":1}", "[3]", WHOLE},
	{"{\"maxItems\":1}", "[3,4]", NO},
	{"{\"required\":[\"a\"],\"properties\":{\"a\":{}}}", "{}", NO},
	{"{\"maxLength\":2}", "\"ab\"", WHOLE},
	{"{\"maxLength\":2}", "\"abc\"", NO},
	{"{\"format\":\"date\"}", "\"2024-02-29\"", WHOLE},
	{"{\"format\":\"date\"}", "\"2024-02-30\"", NO},
	{"{\"maxItems\":1,\"maxLength\":1}", "\"a\"", WHOLE},
	{"{\"maxItems\":1,\"maxLength\":1}", "\"ab\"", NO},
	{"{\"maxItems\":1,\"maxLength\":1}", "[5]", WHOLE},
	{"{\"maxItems\":1,\"maxLength\":1}", "[5,6]", NO},
	{"{\"maxItems\":1,\"maxLength\":1}", "5", NO},
	{"{\"description\":\"any\"}", "[{\"x\":null}]", WHOLE},
	/* maxItems 0: [] alone */
	{"{\"type\":\"array\",\"maxItems\":0}", "[]", WHOLE},
	{"{\"type\":\"array\",\"maxItems\":0}", "[ ]", WHOLE},
	{"{\"type\":\"array\",\"maxItems\":0}", "[3", NO},
	{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},"
	 "\"maxItems\":0}", "[3333]", NO},
	{"{\"type\":\"array\",\"maxItems\":1}", "[3]", WHOLE},
	{"{\"type\":\"array\",\"maxItems\":1}", "[]", WHOLE},
	{"{\"type\":\"array\",\"maxItems\":1}", "[3,", NO},
	/* an enum's and a const's values of the type beside them */
	{"{\"type\":\"string\",\"enum\":[\"five\",5]}", "\"five\"", WHOLE},
	{"{\"type\":\"string\",\"enum\":[\"five\",5]}", "5", NO},
	{"{\"type\":[\"integer\",\"null\"],\"enum\":[\"a\",5,2.0,2.5,"
	 "null]}", "5", WHOLE},
	{"{\"type\":[\"integer\",\"null\"],\"enum\":[\"a\",5,2.0,2.5,"
	 "null]}", "null", WHOLE},
	{"{\"type\":[\"integer\",\"null\"],\"enum\":[\"a\",5,2.0,2.5,"
	 "null]}", "2.0", WHOLE},
	{"{\"type\":[\"integer\",\"null\"],\"enum\":[\"a\",5,2.0,2.5,"
	 "null]}", "2.5", NO},
	{"{\"type\":[\"integer\",\"null\"],\"enum\":[\"a\",5,2.0,2.5,"
	 "null]}", "\"a\"", NO},
	{"{\"type\":\"number\",\"enum\":[2.5,1,true]}", "2.5", WHOLE},
	{"{\"type\":\"number\",\"enum\":[2.5,1,true]}", "1", WHOLE},
	{"{\"type\":\"number\",\"enum\":[2.5,1,true]}", "true", NO},
	{"{\"type\":\"object\",\"const\":{\"a\":[1]}}", "{\"a\":[1]}",
	 WHOLE},
	{"{\"enum\":[\"red\",2,null]}", "\"red\"", WHOLE},
	{"{\"enum\":[\"red\",2,null]}", "2", WHOLE},
	{"{\"enum\":[\"red\",2,null]}", "3", NO},
	{"{\"type\":\"string\",\"pattern\":\"^[A-D]$\"}", "\"C\"", WHOLE},
	{"{\"type\":\"string\",\"pattern\":\"^[A-D]$\"}", "\"CC\"", NO},
	{"{\"type\":\"string\",\"pattern\":\"^\\\\d{3}-\\\\d{4}$\"}",
	 "\"555-1234\"", WHOLE},
	{"{\"type\":\"integer\",\"minimum\":-20,\"maximum\":305}", "-20",
	 WHOLE},
	{"{\"type\":\"integer\",\"minimum\":-20,\"maximum\":305}", "-21", NO},
	{"{\"type\":\"integer\",\"exclusiveMinimum\":0,\"maximum\":9}", "0",
	 NO},
	/* a bound on one side only: up to 15 digits on the other (the
	 * grammar grew as 2^digits and passed gbnf's size limit, fuzz_gbnf) */
	{"{\"type\":\"integer\",\"minimum\":22}", "22", WHOLE},
	{"{\"type\":\"integer\",\"minimum\":22}", "21", PREFIX},
	{"{\"type\":\"integer\",\"minimum\":22}", "0", NO},
	{"{\"type\":\"integer\",\"minimum\":22}", "100", WHOLE},
	{"{\"type\":\"integer\",\"minimum\":22}", "999999999999999", WHOLE},
	{"{\"type\":\"integer\",\"minimum\":22}", "1000000000000000", NO},
	{"{\"type\":\"integer\",\"maximum\":-7}", "-8", WHOLE},
	{"{\"type\":\"integer\",\"maximum\":-7}", "-6", PREFIX},
	{"{\"type\":\"integer\",\"maximum\":-7}", "-0", NO},
	{"{\"type\":\"integer\",\"maximum\":-7}", "-99999", WHOLE},
	{"{\"type\":\"integer\",\"minimum\":1090,\"maximum\":1909}",
	 "1099", WHOLE},
	{"{\"type\":\"integer\",\"minimum\":1090,\"maximum\":1909}",
	 "1089", NO},
	{"{\"type\":\"integer\",\"minimum\":1090,\"maximum\":1909}",
	 "1910", NO},
	{"{\"type\":\"integer\",\"minimum\":1090,\"maximum\":1909}",
	 "1500", WHOLE},
	{"{\"type\":\"integer\",\"exclusiveMinimum\":0,\"maximum\":9}", "9",
	 WHOLE},
	{"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}", "null",
	 WHOLE},
	{"{\"type\":[\"string\",\"null\"]}", "7", NO},
	/* a list of types with its types' keywords: each type takes its
	 * own, the others are no constraint on it */
	{"{\"type\":[\"array\",\"null\"],\"items\":{\"type\":\"integer\"},"
	 "\"maxItems\":2}", "[1,2]", WHOLE},
	{"{\"type\":[\"array\",\"null\"],\"items\":{\"type\":\"integer\"},"
	 "\"maxItems\":2}", "null", WHOLE},
	{"{\"type\":[\"array\",\"null\"],\"items\":{\"type\":\"integer\"},"
	 "\"maxItems\":2}", "[true]", NO},
	{"{\"type\":[\"array\",\"null\"],\"items\":{\"type\":\"integer\"},"
	 "\"maxItems\":2}", "[1,2,3]", NO},
	{"{\"type\":[\"object\",\"null\"],\"properties\":{\"a\":{\"type\":"
	 "\"integer\"}},\"required\":[\"a\"]}", "{\"a\":1}", WHOLE},
	{"{\"type\":[\"object\",\"null\"],\"properties\":{\"a\":{\"type\":"
	 "\"integer\"}},\"required\":[\"a\"]}", "null", WHOLE},
	{"{\"type\":[\"object\",\"null\"],\"properties\":{\"a\":{\"type\":"
	 "\"integer\"}},\"required\":[\"a\"]}", "{}", NO},
	{"{\"type\":[\"string\",\"null\"],\"maxLength\":2}", "\"ab\"", WHOLE},
	{"{\"type\":[\"string\",\"null\"],\"maxLength\":2}", "\"abc\"", NO},
	{"{\"type\":[\"string\",\"null\"],\"maxLength\":2}", "null", WHOLE},
	{"{\"type\":[\"integer\",\"null\"],\"minimum\":3,\"maximum\":9}",
	 "3", WHOLE},
	{"{\"type\":[\"integer\",\"null\"],\"minimum\":3,\"maximum\":9}",
	 "2", NO},
	{"{\"type\":[\"integer\",\"null\"],\"minimum\":3,\"maximum\":9}",
	 "null", WHOLE},
	{"{\"type\":[\"integer\",\"string\"],\"minimum\":3,"
	 "\"maxLength\":1}", "\"a\"", WHOLE},
	{"{\"type\":[\"integer\",\"string\"],\"minimum\":3,"
	 "\"maxLength\":1}", "\"ab\"", NO},
	{"{\"type\":[\"integer\",\"string\"],\"minimum\":3,"
	 "\"maxLength\":1}", "-2", NO},
	{"{\"type\":\"string\",\"format\":\"date\"}", "\"2026-12-05\"", WHOLE},
	/* dates and times that can be: RFC 3339's ranges */
#define FMT(f) "{\"type\":\"string\",\"format\":\"" f "\"}"
	{FMT("date"), "\"2024-13-01\"", NO},
	{FMT("date"), "\"2024-00-10\"", NO},
	{FMT("date"), "\"2024-01-00\"", NO},
	{FMT("date"), "\"2024-01-32\"", NO},
	{FMT("date"), "\"2024-04-31\"", NO},
	{FMT("date"), "\"2024-02-30\"", NO},
	{FMT("date"), "\"2024-02-29\"", WHOLE},
	/* February's 29th in leap years only */
	{FMT("date"), "\"2023-02-29\"", NO},
	{FMT("date"), "\"2023-02-28\"", WHOLE},
	{FMT("date"), "\"1900-02-29\"", NO},
	{FMT("date"), "\"2100-02-29\"", NO},
	{FMT("date"), "\"2000-02-29\"", WHOLE},
	{FMT("date"), "\"1600-02-29\"", WHOLE},
	{FMT("date"), "\"0000-02-29\"", WHOLE},
	{FMT("date"), "\"1996-02-29\"", WHOLE},
	{FMT("date"), "\"2012-02-29\"", WHOLE},
	{FMT("date"), "\"2040-02-29\"", WHOLE},
	{FMT("date"), "\"2042-02-29\"", NO},
	{FMT("date"), "\"2026-02-29\"", NO},
	{FMT("date-time"), "\"2023-02-29T10:00:00Z\"", NO},
	{FMT("date-time"), "\"2028-02-29T10:00:00Z\"", WHOLE},
	{FMT("date"), "\"2024-01-31\"", WHOLE},
	{FMT("date"), "\"2024-11-30\"", WHOLE},
	{FMT("date"), "\"0000-10-09\"", WHOLE},
	{FMT("time"), "\"25:00:00\"", NO},
	{FMT("time"), "\"24:00:00\"", NO},
	{FMT("time"), "\"23:60:00\"", NO},
	{FMT("time"), "\"23:59:61\"", NO},
	{FMT("time"), "\"23:59:60Z\"", WHOLE},
	{FMT("time"), "\"23:59:60+00:00\"", WHOLE},
	/* a leap second away from 23:59 UTC: no (JSON Schema's test suite;
	 * they had been taken at any minute) */
	{FMT("time"), "\"22:59:60Z\"", NO},
	{FMT("time"), "\"23:58:60Z\"", NO},
	{FMT("time"), "\"23:59:60+01:00\"", NO},
	{FMT("time"), "\"00:00:00.5Z\"", WHOLE},
	/* JSON Schema's time is RFC 3339's full-time: the offset too */
	{FMT("time"), "\"12:00:00\"", NO},
	{FMT("time"), "\"12:00:00+24:00\"", NO},
	{FMT("time"), "\"12:00:00-05:60\"", NO},
	{FMT("time"), "\"12:00:00+23:59\"", WHOLE},
	{FMT("date-time"), "\"2024-06-30T23:59:59.5Z\"", WHOLE},
	{FMT("date-time"), "\"2024-06-31T00:00:00Z\"", NO},
	{FMT("date-time"), "\"2024-06-30T24:00:00Z\"", NO},
	{FMT("date-time"), "\"2024-19-30T10:00:00Z\"", NO},
	{FMT("date-time"), "\"2024-12-01T10:00:00+01:00\"", WHOLE},
	{FMT("date-time"), "\"2024-12-01T10:00:00+31:00\"", NO},
#undef FMT
	{"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":"
	 "{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},"
	 "{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},"
	 "\"$ref\":\"#/$defs/n\"}",
	 "{\"v\": 1, \"next\": {\"v\": 2, \"next\": null}}", WHOLE},
};

static void schemas(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(jtexts) / sizeof(*jtexts); i++) {
		json_t *s = json_loads(jtexts[i].schema, 0, NULL);
		char *g = NULL;
		int v;

		assert_non_null(s);
		if (jschema_to_gbnf(s, &g))
			fail_msg("schema %zu: %s", i, qerr_detail());
		v = verdict(g, jtexts[i].text);
		if (v != jtexts[i].want)
			fail_msg("schema %zu, \"%s\": %d, want %d", i,
				 jtexts[i].text, v, jtexts[i].want);
		free(g);
		json_decref(s);
	}
}

/* Integer ranges taken exactly: every integer from -1,300 to 13,000 is
 * whole under the range's grammar iff it lies in it (digit by digit:
 * lengths, shared prefixes, 0..9 and 9..0 tails, one-sided bounds). */
static void int_ranges(void **state)
{
	static const long long r[][2] = {
		{0, 9}, {1, 10}, {19, 91}, {100, 999}, {1090, 1909},
		{7, 12345}, {-300, -5}, {-45, 67}, {22, 999999999999999LL},
		{-999999999999999LL, -7}, {0, 0}, {-1, 1}, {999, 1000},
		{2000, 2999}, {1203, 11999},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(r) / sizeof(*r); i++) {
		char js[128], t[32], *g = NULL;
		json_t *s;
		gbnf *gr = NULL;
		gbnf_matcher *m = NULL;

		snprintf(js, sizeof(js),
			 "{\"type\":\"integer\",\"minimum\":%lld,"
			 "\"maximum\":%lld}", r[i][0], r[i][1]);
		assert_non_null(s = json_loads(js, 0, NULL));
		if (jschema_to_gbnf(s, &g))
			fail_msg("%s: %s", js, qerr_detail());
		if (gbnf_parse(g, strlen(g), &gr))
			fail_msg("%s: parse: %s", js, qerr_detail());
		assert_int_equal(gbnf_matcher_new(gr, gv, &m), 0);
		for (long long n = -1300; n <= 13000; n++) {
			int st, in = n >= r[i][0] && n <= r[i][1];

			snprintf(t, sizeof(t), "%lld", n);
			st = gbnf_step(m, gbnf_start(m), t, strlen(t));
			if ((st != GBNF_DEAD && gbnf_accepting(m, st)) != in)
				fail_msg("%s: %lld %s", js, n,
					 in ? "refused" : "taken");
		}
		gbnf_matcher_free(&m);
		gbnf_free(&gr);
		free(g);
		json_decref(s);
	}
}

/* k arrays nested, each with two empty schemas beside the next, around
 * an integer: k + 1 levels of schemas. */
static char *nested(int k)
{
	strbuf b = {0};

	for (int i = 0; i < k; i++)
		strbuf_puts(&b, "{\"type\":\"array\",\"prefixItems\":[{},{},");
	strbuf_puts(&b, "{\"type\":\"integer\"}");
	for (int i = 0; i < k; i++)
		strbuf_puts(&b, "]}");
	assert_false(b.oom);
	return b.b;
}

/* Schemas nest 64 levels at most, however many empty schemas stand
 * beside them: each empty one had taken a level off the count, so
 * {"prefixItems": [{}, {}, ...]} nested without bound. */
static void nesting(void **state)
{
	(void)state;
	for (int k = 62; k <= 70; k++) {
		char *js = nested(k), *g = NULL;
		json_t *s = json_loads(js, 0, NULL);
		int rc;

		assert_non_null(s);
		rc = jschema_to_gbnf(s, &g);
		if (k + 1 <= 64) {
			if (rc)
				fail_msg("%d levels: %s", k + 1, qerr_detail());
		} else {
			if (!rc)
				fail_msg("%d levels taken", k + 1);
			/* the reason kept, the path's middle left out */
			if (!strstr(qerr_detail(), "...") ||
			    !strstr(qerr_detail(), ".prefixItems[0]: nested "
				    "over 64 levels"))
				fail_msg("%d levels: %s", k + 1, qerr_detail());
			assert_non_null(strstr(qerr_detail(),
					       "nested over 64 levels"));
		}
		free(g);
		json_decref(s);
		free(js);
	}
}

/* Lists of types: each item takes exactly its types. Each type of a list
 * is its own schema, a copy; the copies were freed after their rules
 * while rules were known by address, so a later copy at a freed one's
 * address took its rule ({"type": ["boolean", "null"]} wrote integers). */
static void type_lists(void **state)
{
	static const char *const lists[][2] = {
		{"integer", "null"}, {"string", "null"}, {"boolean", "null"},
		{"null", "integer"}, {"boolean", "string"},
		{"integer", "boolean"}, {"string", "integer"},
		{"null", "boolean"},
	};
	/* a value of each type, by name */
	static const char *const vals[][2] = {
		{"integer", "12"}, {"string", "\"s\""}, {"boolean", "true"},
		{"null", "null"},
	};
	enum { N = sizeof(lists) / sizeof(*lists) };
	strbuf js = {0};
	json_t *s;
	char *g = NULL;

	(void)state;
	strbuf_puts(&js, "{\"type\":\"array\",\"prefixItems\":[");
	for (int i = 0; i < N; i++)
		strbuf_printf(&js, "%s{\"type\":[\"%s\",\"%s\"]}",
			      i ? "," : "", lists[i][0], lists[i][1]);
	strbuf_puts(&js, "]}");
	assert_non_null(s = json_loads(js.b, 0, NULL));
	if (jschema_to_gbnf(s, &g))
		fail_msg("%s: %s", js.b, qerr_detail());
	/* item i as each value, the others their first type's value */
	for (int i = 0; i < N; i++)
		for (size_t v = 0; v < sizeof(vals) / sizeof(*vals); v++) {
			strbuf t = {0};
			int in = !strcmp(vals[v][0], lists[i][0]) ||
				 !strcmp(vals[v][0], lists[i][1]), got;

			strbuf_puts(&t, "[");
			for (int j = 0; j < N; j++) {
				size_t k = 0;

				while (strcmp(vals[k][0], lists[j][0]))
					k++;
				strbuf_printf(&t, "%s%s", j ? "," : "",
					      vals[j == i ? v : k][1]);
			}
			strbuf_puts(&t, "]");
			got = verdict(g, t.b);
			if ((got == WHOLE) != in)
				fail_msg("%s: %s %s\n%s", js.b, t.b,
					 in ? "refused" : "taken", g);
			free(t.b);
		}
	free(g);
	json_decref(s);
	free(js.b);
	assert_non_null(s = json_loads(
		"{\"type\":\"object\",\"properties\":{"
		"\"age\":{\"type\":[\"integer\",\"null\"]},"
		"\"name\":{\"type\":[\"string\",\"null\"]},"
		"\"ok\":{\"type\":[\"boolean\",\"null\"]}},"
		"\"required\":[\"age\",\"name\",\"ok\"]}", 0, NULL));
	if (jschema_to_gbnf(s, &g))
		fail_msg("object: %s", qerr_detail());
	{
		static const struct {
			const char *text;
			int want;
		} rows[] = {
			{"{\"age\":3,\"name\":\"a\",\"ok\":true}", WHOLE},
			{"{\"age\":null,\"name\":null,\"ok\":null}", WHOLE},
			{"{\"age\":true,", NO},
			{"{\"age\":\"a\",", NO},
			{"{\"age\":3,\"name\":4,", NO},
			{"{\"age\":3,\"name\":true,", NO},
			{"{\"age\":3,\"name\":\"a\",\"ok\":1", NO},
			{"{\"age\":3,\"name\":\"a\",\"ok\":\"", NO},
		};

		for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++)
			if (verdict(g, rows[i].text) != rows[i].want)
				fail_msg("object: %s: %d, want %d\n%s",
					 rows[i].text, verdict(g, rows[i].text),
					 rows[i].want, g);
	}
	free(g);
	json_decref(s);
}

static void schema_errors(void **state)
{
	static const struct {
		const char *schema, *msg;
	} rows[] = {
		{"{\"type\":\"number\",\"minimum\":3}",
		 "schema.minimum: not supported here (the supported subset: "
		 "docs/http.md)"},
		{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
		 "\"string\",\"format\":\"email\"}}}",
		 "schema.properties.a.format: email: not supported (date, "
		 "time, date-time, uuid)"},
		{"{\"type\":\"object\",\"properties\":{},\"required\":[\"x\"]}",
		 "schema.required[0]: not a property of the schema"},
		{"{\"type\":\"wood\"}",
		 "schema.type: \"wood\": not a JSON schema type"},
		{"{\"$ref\":\"#/$defs/none\"}",
		 "schema: $ref #/$defs/none: not found"},
		/* another document: said as unsupported, not as missing */
		{"{\"$ref\":\"https://example.com/s.json\"}",
		 "schema: $ref https://example.com/s.json: only references "
		 "inside the schema are supported (#, #/$defs/NAME, "
		 "#/definitions/NAME)"},
		{"{\"type\":\"array\",\"maxItems\":1000}",
		 "schema.maxItems: must be an integer in 0..256"},
		{"{\"allOf\":[{},{}]}",
		 "schema.allOf: only an allOf of one schema is supported"},
		{"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}",
		 "schema: no integer is in the range"},
		{"{\"type\":\"array\",\"prefixItems\":[{\"type\":"
		 "\"integer\"}],\"items\":false,\"minItems\":2}",
		 "schema.minItems: above the prefixItems' count with items "
		 "false"},
		{"{\"type\":\"string\",\"enum\":[1,null]}",
		 "schema.enum: no value is of the schema's type"},
		{"{\"type\":\"string\",\"const\":1}",
		 "schema.const: not of the schema's type"},
		{"{\"type\":[\"string\",\"wood\"],\"const\":\"a\"}",
		 "schema.type: \"wood\": not a JSON schema type"},
		/* a pattern or format with lengths or each other: not
		 * enforced together, so refused */
		{"{\"type\":\"string\",\"pattern\":\"^a+$\",\"maxLength\":3}",
		 "schema.maxLength: not supported together with pattern (the "
		 "supported subset: docs/http.md)"},
		{"{\"type\":\"string\",\"pattern\":\"^a+$\",\"minLength\":3}",
		 "schema.minLength: not supported together with pattern (the "
		 "supported subset: docs/http.md)"},
		{"{\"type\":\"string\",\"format\":\"uuid\",\"maxLength\":3}",
		 "schema.maxLength: not supported together with format (the "
		 "supported subset: docs/http.md)"},
		{"{\"type\":\"string\",\"format\":\"date\",\"pattern\":"
		 "\"^1\"}",
		 "schema.format: not supported together with pattern (the "
		 "supported subset: docs/http.md)"},
		/* a keyword none of the list's types takes, or one that a
		 * type takes but not here: refused as on a single type */
		{"{\"type\":[\"string\",\"null\"],\"minimum\":3}",
		 "schema.minimum: not supported here (the supported subset: "
		 "docs/http.md)"},
		{"{\"type\":[\"number\",\"null\"],\"minimum\":3}",
		 "schema.minimum: not supported here (the supported subset: "
		 "docs/http.md)"},
		{"{\"type\":\"array\",\"items\":false,\"minItems\":1}",
		 "schema.minItems: above 0 with items false"},
		{"{\"type\":\"array\",\"maxItems\":1.5}",
		 "schema.maxItems: must be an integer in 0..256"},
		/* oneOf whose branches may both hold a value: the grammar
		 * cannot refuse that (it was taken as anyOf: "12" for two
		 * ranges that both hold it) */
		{"{\"oneOf\":[{\"type\":\"integer\",\"minimum\":0,"
		 "\"maximum\":20},{\"type\":\"integer\",\"minimum\":10,"
		 "\"maximum\":30}]}",
		 "schema.oneOf: branches 0 and 1 may both hold a value, which "
		 "the grammar cannot refuse (oneOf is supported where the "
		 "branches are apart: other types, other values, integer "
		 "ranges apart, a required property's other const; else use "
		 "anyOf)"},
		{"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}",
		 "schema.oneOf: branches 0 and 1 may both hold a value, which "
		 "the grammar cannot refuse (oneOf is supported where the "
		 "branches are apart: other types, other values, integer "
		 "ranges apart, a required property's other const; else use "
		 "anyOf)"},
		/* 1 and 1.0 are one JSON value (they had been taken apart,
		 * and every "1" written broke the oneOf) */
		{"{\"oneOf\":[{\"const\":1},{\"const\":1.0}]}",
		 "schema.oneOf: branches 0 and 1 may both hold a value, which "
		 "the grammar cannot refuse (oneOf is supported where the "
		 "branches are apart: other types, other values, integer "
		 "ranges apart, a required property's other const; else use "
		 "anyOf)"},
		/* no type: a number's minimum, as with "type": "number" */
		{"{\"minimum\":3}",
		 "schema.minimum: not supported here (the supported subset: "
		 "docs/http.md)"},
		{"{\"type\":[\"array\",\"null\"],\"uniqueItems\":true}",
		 "schema.uniqueItems: not supported here (the supported "
		 "subset: docs/http.md)"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		json_t *s = json_loads(rows[i].schema, 0, NULL);
		char *g = NULL;

		assert_non_null(s);
		assert_int_not_equal(jschema_to_gbnf(s, &g), 0);
		assert_null(g);
		if (strcmp(qerr_detail(), rows[i].msg))
			fail_msg("schema %zu: \"%s\", want \"%s\"", i,
				 qerr_detail(), rows[i].msg);
		json_decref(s);
	}
}

/* ---- sampling under a grammar on the shipped model --------------------- */

/* Regular expressions, whole (a regex constraint), and the same inside a
 * schema's string (JSON: escapes written as JSON writes them; ends
 * without anchors open). */
static const struct {
	const char *re, *text;
	int want;
} rtexts[] = {
	{"[0-9]+ (apples|pears)", "12 apples", WHOLE},
	/* parts that can match nothing: repeated only when bounded */
	{"^(ab?)*$", "abaab", WHOLE}, {"^a*(b|c?)$", "aa", WHOLE},
	{"^(a?){2,3}$", "aa", WHOLE}, {"^(a?){2,3}$", "aaaa", NO},
	{"[0-9]+ (apples|pears)", "12 plums", NO},
	{"[0-9]+ (apples|pears)", "12 app", PREFIX},
	{"^\\d{3}-\\d{4}$", "555-1234", WHOLE},
	{"^\\d{3}-\\d{4}$", "555-12345", NO},
	{"a.c", "a\"c", WHOLE}, {"a.c", "a\nc", NO},
	{"\\w+@\\w+\\.com", "bo@x.com", WHOLE},
	{"\\w+@\\w+\\.com", "bo@x,com", NO},
	{"[^a-c]+", "xyz", WHOLE}, {"[^a-c]+", "xbz", NO},
	/* ECMAScript's classes (JSON Schema's dialect): . is no line
	 * terminator, U+2028/U+2029 included; \s holds the Unicode white
	 * space, so \S does not (both had been ASCII) */
	{"^a.c$", "a\xe2\x80\xa8" "c", NO}, {"^a.c$", "a\xe2\x80\xa9" "c", NO},
	{"^a.c$", "a\xc3\xa9" "c", WHOLE},
	{"^a\\Sc$", "a\xe2\x80\xa8" "c", NO}, {"^a\\Sc$", "a\xc2\xa0" "c", NO},
	{"^a\\sc$", "a\xc2\xa0" "c", WHOLE}, {"^a\\sc$", "a\xe3\x80\x80" "c", WHOLE},
	{"^a[\\s]c$", "a\xef\xbb\xbf" "c", WHOLE},
	{"^\\W+$", "\xc3\xa9", WHOLE}, /* \w is ASCII, as ECMAScript's */
	{"(?:ab){2,}", "abababab", WHOLE}, {"(?:ab){2,}", "ab", PREFIX},
	{"x*?y", "xxy", WHOLE},
	{"\\x41\\u00e9\\.", "A\xc3\xa9.", WHOLE},
	{"[\\u00e0-\\u00ff]", "\xc3\xa9", WHOLE},
	{"\\S+\\s\\S+", "a\tb", WHOLE}, {"\\S+\\s\\S+", "a  b", NO},
	{"\\D", "7", NO}, {"\\W", "_", NO}, {"\\W", "-", WHOLE},
};

static const struct {
	const char *re, *json; /* the value as JSON writes it, quoted */
	int want;
} rjson[] = {
	{"^a.c$", "\"a\\\"c\"", WHOLE},    /* a quote is \" */
	{"^a.c$", "\"a\"c\"", NO},         /* never bare */
	{"^a.c$", "\"a\\nc\"", NO},        /* . is no line break */
	{"^a\\sc$", "\"a\\nc\"", WHOLE},   /* \s may be one */
	{"^a\\sc$", "\"a c\"", WHOLE},
	{"^[^x]$", "\"\\\\\"", WHOLE},     /* a backslash is \\ */
	{"^[^x]$", "\"\\u001f\"", WHOLE},  /* a control as \u00XX */
	{"^[^x]$", "\"\\u001F\"", WHOLE},
	{"^[^x]$", "\"x\"", NO},
	{"^q\"$", "\"q\\\"\"", WHOLE},
	{"^\\n$", "\"\\n\"", WHOLE},
	{"^\\n$", "\"\\u000a\"", WHOLE},
	{"b", "\"abc\"", WHOLE},           /* unanchored: anywhere */
	{"^b", "\"abc\"", NO},
	{"^a", "\"abc\"", WHOLE},
	{"c$", "\"abc\"", WHOLE},
	{"^[a\"]+$", "\"a\\\"a\"", WHOLE},
	/* in a JSON string \s is a space or one of the Unicode spaces
	 * (the control ones are written escaped) */
	{"^a[\\s]c$", "\"a\xc2\xa0" "c\"", WHOLE},
	{"^a[\\s]c$", "\"a c\"", WHOLE},
	{"^a\\Sc$", "\"a\xe2\x80\xa8" "c\"", NO},
};

static void regexes(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rtexts) / sizeof(*rtexts); i++) {
		char *g = NULL;
		int v;

		if (constrain_regex(rtexts[i].re, &g))
			fail_msg("regex %s: %s", rtexts[i].re, qerr_detail());
		v = verdict(g, rtexts[i].text);
		if (v != rtexts[i].want)
			fail_msg("regex %s, \"%s\": %d, want %d\n%s",
				 rtexts[i].re, rtexts[i].text, v,
				 rtexts[i].want, g);
		free(g);
	}
	for (size_t i = 0; i < sizeof(rjson) / sizeof(*rjson); i++) {
		json_t *s = json_pack("{s:s, s:s}", "type", "string",
				      "pattern", rjson[i].re);
		char *g = NULL;
		int v;

		assert_non_null(s);
		if (jschema_to_gbnf(s, &g))
			fail_msg("pattern %s: %s", rjson[i].re, qerr_detail());
		v = verdict(g, rjson[i].json);
		if (v != rjson[i].want)
			fail_msg("pattern %s, %s: %d, want %d\n%s", rjson[i].re,
				 rjson[i].json, v, rjson[i].want, g);
		/* and what it takes is JSON whose string matches */
		if (v == WHOLE) {
			json_t *d = json_loads(rjson[i].json, JSON_DECODE_ANY,
					       NULL);

			if (!json_is_string(d))
				fail_msg("pattern %s: %s is not a JSON string",
					 rjson[i].re, rjson[i].json);
			json_decref(d);
		}
		free(g);
		json_decref(s);
	}
}

static void rx_errors(void **state)
{
	static const struct {
		const char *re, *msg;
	} rows[] = {
		{"a$b", "pattern: the anchor '$' inside the pattern (only ^ at "
			"its start and $ at its end) (at offset 1)"},
		{"(a", "pattern: unclosed '(' (at offset 2)"},
		{"a)", "pattern: unmatched ')' (at offset 1)"},
		{"[a", "pattern: unclosed '[' (at offset 2)"},
		{"[z-a]", "pattern: a range from U+007A down to U+0061 (at "
			  "offset 4)"},
		{"(a)\\1", "pattern: back-reference '\\1' (no grammar can "
			   "write one) (at offset 4)"},
		{"(?i)abc", "pattern: '(?i': inline flags and other group "
		 "modifiers (only '(?:' is supported) (at offset 1)"},
		{"a(?=b)", "pattern: '(?=': look-around and named groups (at "
			   "offset 2)"},
		{"a{1,999}", "pattern: {1,999}: n must be 1..256 (at offset "
			     "7)"},
		{"*a", "pattern: '*' without an element (at offset 0)"},
		/* "a*+a" matches nothing: no longer taken as "a*a" */
		{"a*+a", "pattern: a possessive quantifier ('*+') (at offset "
			 "2)"},
		{"a{2}+", "pattern: a possessive quantifier ('}+') (at offset "
			  "4)"},
		{"(?:)*?8\x01", "pattern: '*' repeats a part that can match "
		 "the empty string (write the part so that it cannot) (at "
		 "offset 4)"},
		{"(a|b?)+", "pattern: '+' repeats a part that can match the "
		 "empty string (write the part so that it cannot) (at offset "
		 "6)"},
		{"((a?)b?){2,}", "pattern: '{' repeats a part that can match "
		 "the empty string (write the part so that it cannot) (at "
		 "offset 8)"},
		{"\\bx", "pattern: word boundary '\\b' (at offset 1)"},
		{"[\\D]", "pattern: '\\D' inside [..] (at offset 1)"},
		{"\xff", "pattern: invalid UTF-8 (at offset 0)"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		char *g = NULL;

		if (!constrain_regex(rows[i].re, &g))
			fail_msg("regex %s: taken, want \"%s\"", rows[i].re,
				 rows[i].msg);
		assert_null(g);
		if (strcmp(qerr_detail(), rows[i].msg))
			fail_msg("regex %s: \"%s\", want \"%s\"", rows[i].re,
				 qerr_detail(), rows[i].msg);
	}
}

static void choices(void **state)
{
	const char *opts[] = {"yes", "no", "say \"maybe\"\\"};
	json_t *bad_arr = json_pack("[s, i]", "a", 2), *empty = json_array();
	char *g = NULL;

	(void)state;
	assert_int_equal(constrain_choice(opts, 3, &g), 0);
	assert_int_equal(verdict(g, "yes"), WHOLE);
	assert_int_equal(verdict(g, "no"), WHOLE);
	assert_int_equal(verdict(g, "say \"maybe\"\\"), WHOLE);
	assert_int_equal(verdict(g, "n"), PREFIX);
	assert_int_equal(verdict(g, "yesno"), NO);
	free(g);
	assert_int_not_equal(constrain_gbnf(CONSTRAIN_CHOICE, bad_arr, &g), 0);
	assert_string_equal(qerr_detail(), "choice[1]: a string without NUL "
			    "bytes expected");
	assert_int_not_equal(constrain_gbnf(CONSTRAIN_CHOICE, empty, &g), 0);
	assert_string_equal(qerr_detail(), "choice: 1..256 strings expected "
			    "(got 0)");
	opts[1] = "";
	assert_int_not_equal(constrain_choice(opts, 2, &g), 0);
	assert_string_equal(qerr_detail(), "choice[1]: 1..1024 bytes expected "
			    "(got 0)");
	json_decref(bad_arr);
	json_decref(empty);
}

static const char ANSWER_G[] =
	"root ::= \"The answer is \" [1-9] [0-9]{0,2} \".\"\n";

static void run_g(const char *grammar, int n, int threads, sc_result *r);

static void run(int n, int threads, sc_result *r)
{
	run_g(ANSWER_G, n, threads, r);
}

static void run_g(const char *grammar, int n, int threads, sc_result *r)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = SC_PARAMS_DEFAULTS;
	sc_engine *e = NULL;
	int32_t *ids = NULL;
	size_t n_ids = 0;

	ep.n_threads = threads;
	p.n = n;
	p.max_new = 24;
	p.sp.temperature = 1.0f;
	p.stop = (stop_rule){STOP_NONE, 0.95, 4};
	assert_int_equal(sc_params_parse(SC_S_GRAMMAR, grammar, &p), 0);
	assert_int_equal(prompt_build(at, NULL, "Tom has 12 apples and buys "
				      "30 more. How many apples does he have?",
				      &ids, &n_ids), 0);
	assert_int_equal(sc_engine_new(arith, at, &ep, &e), 0);
	assert_int_equal(sc_run(e, ids, n_ids, &p, r), 0);
	sc_engine_free(&e);
	free(ids);
}

/* A sample its grammar cannot continue (here: past "The answer is"
 * the next state would take 5,000 stacks, over the bound) ends with
 * finish grammar and no answer: its text is outside the constraint (it
 * had voted "answer is"). */
static void dead_end(void **state)
{
	size_t cap = 5000 * 10 + 64, o;
	char *g = malloc(cap);
	sc_result r = {0};

	(void)state;
	assert_non_null(g);
	o = (size_t)snprintf(g, cap, "root ::= \"The answer is 7\" tail\n"
			     "tail ::= ");
	for (int i = 0; i < 5000; i++)
		o += (size_t)snprintf(g + o, cap - o, "%s\"a%04d\"",
				      i ? " | " : "", i);
	snprintf(g + o, cap - o, "\n");
	run_g(g, 2, 1, &r);
	assert_int_equal(r.n, 2);
	for (int i = 0; i < r.n; i++) {
		assert_int_equal(r.samples[i].finish, SC_FINISH_GRAMMAR);
		assert_false(r.samples[i].has_answer);
	}
	sc_run_result_fini(&r);
	free(g);
}

/* reasoning_first's settings: n samples of max_new tokens at
 * temperature 1, no early stop, under grammar, answers by answer (NULL:
 * the default), <think> and </think> (ids a < b of t) biased by ba, bb
 * (0: not). */
static void think_params(sc_params *p, const tok *t, int n, int max_new,
			 const char *grammar, const char *answer, float ba,
			 float bb)
{
	int32_t a = tok_find(t, "<think>"), b = tok_find(t, "</think>");

	*p = (sc_params)SC_PARAMS_DEFAULTS;
	p->n = n;
	p->max_new = max_new;
	p->sp.temperature = 1.0f;
	p->stop = (stop_rule){STOP_NONE, 0.95, 4};
	assert_int_equal(sc_params_parse(SC_S_GRAMMAR, grammar, p), 0);
	if (answer)
		assert_int_equal(sc_params_parse(SC_S_ANSWER, answer, p), 0);
	assert_true(a >= 0 && a < b);
	if (ba) {
		p->logit_bias.id[p->logit_bias.n] = a;
		p->logit_bias.bias[p->logit_bias.n++] = ba;
	}
	if (bb) {
		p->logit_bias.id[p->logit_bias.n] = b;
		p->logit_bias.bias[p->logit_bias.n++] = bb;
	}
}

/* A model that reasons (its template thinks: Qwen3's tokenizer, random
 * weights) writes its reasoning first and the grammar shapes what comes
 * after </think>, the content the vote reads; applied from the first
 * token, it had left no room to reason. Steered by logit_bias: <think>
 * +90, </think> +100, "\n\n" +70, "yes" +50. The first token may be
 * the grammar's or <think> (not </think>): <think>; then nothing is
 * masked: </think>; then the grammar's start or one whitespace token:
 * "\n\n", and no second one: "yes"; then only an end token. Without
 * the markers' bias the grammar's "yes" comes first, as before. */
static void reasoning_first(void **state)
{
	char path[600];
	mkmodel_opts o = {0};
	mkmodel_info info;
	model *m = NULL;
	tok *t = NULL;
	int32_t *ids = NULL;
	size_t n_ids = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/grammar-think-%d.gguf", tu_tmpdir(),
		 (int)getpid());
	o.shape = "tiny";
	o.wtype = GGML_TYPE_F32;
	o.tokenizer = tu_data("data/tokenizers/qwen2/tokenizer.json");
	o.seed = 7;
	o.out = path;
	if (mkmodel_write(&o, &info) || model_load(path, &m) ||
	    tok_load(m->gguf, &t))
		fail_msg("%s", qerr_detail());
	assert_int_equal(prompt_family(t), PROMPT_QWEN3);
	assert_int_equal(prompt_build(t, NULL, "Is it?", &ids, &n_ids), 0);
	for (int steer = 0; steer < 2; steer++) {
		sc_engine_params ep = SC_ENGINE_DEFAULTS;
		sc_params p;
		sc_engine *e = NULL;
		sc_result r = {0};
		const char *want = steer ? "<think></think>\n\nyes" : "yes";
		struct {
			int32_t id;
			float b;
		} bias[2] = {{tok_find(t, "yes"), 50.0f},
			     {tok_find(t, "\u010a\u010a"), 70.0f}};

		think_params(&p, t, 4, 16, "root ::= \"yes\" | \"no\"\n",
			     "exact", steer ? 90.0f : 0, steer ? 100.0f : 0);
		/* sorted by id, as sc_params keeps them */
		for (int i = 0; i < (steer ? 2 : 1); i++) {
			int k = p.logit_bias.n++;

			assert_true(bias[i].id >= 0);
			for (; k > 0 && p.logit_bias.id[k - 1] > bias[i].id;
			     k--) {
				p.logit_bias.id[k] = p.logit_bias.id[k - 1];
				p.logit_bias.bias[k] = p.logit_bias.bias[k - 1];
			}
			p.logit_bias.id[k] = bias[i].id;
			p.logit_bias.bias[k] = bias[i].b;
		}
		assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
		assert_int_equal(sc_run(e, ids, n_ids, &p, &r), 0);
		assert_int_equal(r.n, 4);
		for (int i = 0; i < r.n; i++) {
			const sc_sample *x = &r.samples[i];

			if (strcmp(x->text, want) || x->finish != SC_FINISH_STOP)
				fail_msg("steer %d, sample %d: \"%s\" (finish "
					 "%d), want \"%s\"", steer, i, x->text,
					 x->finish, want);
			assert_true(x->has_answer);
			assert_string_equal(x->answer, "yes");
		}
		sc_run_result_fini(&r);
		sc_engine_free(&e);
	}
	/* Its content holds no marker, though the grammar's bytes take
	 * one: under [a-z] [a-z<>/]* (whose start takes no <think>: it
	 * waits), </think> at +100 would have been written again and again
	 * after the first letter, and the vote (after the last </think>)
	 * had read nothing. */
	{
		sc_engine_params ep = SC_ENGINE_DEFAULTS;
		sc_params p;
		sc_engine *e = NULL;
		sc_result r = {0};

		think_params(&p, t, 2, 8, "root ::= [a-z] [a-z<>/]*\n", "exact",
			     90.0f, 100.0f);
		assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
		assert_int_equal(sc_run(e, ids, n_ids, &p, &r), 0);
		for (int i = 0; i < r.n; i++) {
			const sc_sample *x = &r.samples[i];

			if (strncmp(x->text, "<think></think>", 15) ||
			    strstr(x->text + 15, "</think>") ||
			    strstr(x->text + 15, "<think>") || !x->has_answer)
				fail_msg("sample %d: \"%s\" (answer %d)", i,
					 x->text, x->has_answer);
		}
		sc_run_result_fini(&r);
		sc_engine_free(&e);
	}
	/* The waiting grammar keeps the contract: lightly steered (<think>
	 * +7, </think> +16), samples that reason and samples that do not
	 * have the same bytes at N = 3 and 6 and on 1 and 2 threads. */
	{
		sc_result r[3] = {{0}};
		static const int ns[3] = {6, 6, 3}, th[3] = {2, 1, 2};
		int reasoned = 0;

		for (int k = 0; k < 3; k++) {
			sc_engine_params ep = SC_ENGINE_DEFAULTS;
			sc_params p;
			sc_engine *e = NULL;

			ep.n_threads = th[k];
			think_params(&p, t, ns[k], 24,
				     "root ::= \"yes\" | \"no\"\n", NULL, 7.0f,
				     16.0f);
			assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
			assert_int_equal(sc_run(e, ids, n_ids, &p, &r[k]), 0);
			sc_engine_free(&e);
		}
		for (int i = 0; i < r[0].n; i++) {
			reasoned += !strncmp(r[0].samples[i].text, "<think>", 7);
			assert_string_equal(r[0].samples[i].text,
					    r[1].samples[i].text);
			if (i < r[2].n)
				assert_string_equal(r[0].samples[i].text,
						    r[2].samples[i].text);
		}
		if (!reasoned || reasoned == r[0].n)
			fail_msg("%d of %d samples reasoned: the steer should "
				 "give both kinds", reasoned, r[0].n);
		for (int k = 0; k < 3; k++)
			sc_run_result_fini(&r[k]);
	}
	free(ids);
	tok_free(&t);
	model_free(&m);
	unlink(path);
}

static void sampling(void **state)
{
	sc_result a = {0}, b = {0}, c = {0};

	(void)state;
	run(8, 2, &a);
	run(3, 1, &b);
	run(8, 1, &c);
	for (int i = 0; i < a.n; i++) {
		const sc_sample *x = &a.samples[i];

		/* in the grammar, whole: "The answer is N." */
		if (strncmp(x->text, "The answer is ", 14) ||
		    x->text[x->len - 1] != '.' ||
		    (x->finish != SC_FINISH_STOP &&
		     x->finish != SC_FINISH_LENGTH))
			fail_msg("sample %d: \"%s\" (finish %d)", i, x->text,
				 x->finish);
		assert_true(x->has_answer);
		/* the same bytes at N = 3 and with one thread */
		if (i < b.n)
			assert_string_equal(x->text, b.samples[i].text);
		assert_string_equal(x->text, c.samples[i].text);
	}
	sc_run_result_fini(&a);
	sc_run_result_fini(&b);
	sc_run_result_fini(&c);
}

static int setup(void **state)
{
	gguf_file *g = NULL;

	(void)state;
	if (gguf_open(tu_data("data/tokenizer-vectors/ggml-vocab-gpt-2.gguf"),
		      &g) ||
	    tok_load(g, &gpt2) || gbnf_vocab_new(gpt2, &gv) ||
	    model_load(tu_data("models/arith.gguf"), &arith) ||
	    tok_load(arith->gguf, &at)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		gguf_close(&g);
		return -1;
	}
	gguf_close(&g);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gbnf_vocab_free(&gv);
	tok_free(&gpt2);
	tok_free(&at);
	model_free(&arith);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_errors),
		cmocka_unit_test(matching),
		cmocka_unit_test(start_bound),
		cmocka_unit_test(dead_end),
		cmocka_unit_test(masks),
		cmocka_unit_test(schemas),
		cmocka_unit_test(int_ranges),
		cmocka_unit_test(type_lists),
		cmocka_unit_test(nesting),
		cmocka_unit_test(schema_errors),
		cmocka_unit_test(regexes),
		cmocka_unit_test(rx_errors),
		cmocka_unit_test(choices),
		cmocka_unit_test(sampling),
		cmocka_unit_test(reasoning_first),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

/* vote: answer extraction and the majority vote, as tables of named cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"
#include "sc/reasoning.h"
#include "sc/vote.h"

/* ---- extraction --------------------------------------------------------- */

struct xcase {
	const char *name;
	const char *text;
	size_t len;         /* 0: strlen(text) */
	const char *expect; /* NULL: no answer */
};

#define X(n, t, e) {n, t, 0, e}
#define XL(n, t, e) {n, t, sizeof(t) - 1, e}

static const struct xcase xcases[] = {
	/* the last number */
	X("sentence_end", "The answer is 42.", "42"),
	X("several_numbers", "First 3 apples, then 5, finally 17 pears", "17"),
	X("negative", "so x = -12", "-12"),
	X("unicode_minus", "so x = \xe2\x88\x92" "7 degrees", "-7"),
	/* the dashes models write for a minus (a review: "\u20133" had
	 * voted with 3); after a digit, a range's dash, no sign */
	X("en_dash_minus", "The answer is \xe2\x80\x93" "3.", "-3"),
	X("figure_dash_minus", "x = \xe2\x80\x92" "3", "-3"),
	X("small_minus", "x = \xef\xb9\xa3" "3", "-3"),
	X("fullwidth_minus", "x = \xef\xbc\x8d" "3", "-3"),
	X("en_dash_range", "pages 10\xe2\x80\x93" "20", "20"),
	X("en_dash_box", "\\boxed{\xe2\x80\x93" "3}", "-3"),
	X("plus_sign", "delta is +8", "8"),
	X("decimal", "about 3.14159 radians", "3.14159"),
	X("decimal_trailing_zero", "it costs 42.50", "42.5"),
	X("decimal_zero_frac", "we get 42.0", "42"),
	X("leading_zeros", "code 042", "42"),
	X("leading_dot", "probability .5", "0.5"),
	X("neg_leading_dot", "shift -.25", "-0.25"),
	X("minus_zero", "limit is -0.0", "0"),
	X("zero", "nothing: 0", "0"),
	X("thousands", "total 1,234 dollars", "1234"),
	X("thousands_many", "population 12,345,678.", "12345678"),
	X("thousands_decimal", "price 1,234.50", "1234.5"),
	X("list_spaces", "the roots are 1, 2, 3", "3"),
	X("list_tight", "the set 1,2,3", "3"),
	X("comma_four_digits", "pair 1,2345", "2345"),
	X("comma_after_long_group", "pair 1234,567", "567"),
	X("hyphen_range", "pages 10-20", "20"),
	X("minus_operator", "x-2", "2"),
	X("minus_operator_digits", "3-5", "5"),
	X("word_digits_x2", "let x2 be", NULL),
	X("word_digits_mp3", "an mp3 file", NULL),
	X("word_digits_then_number", "H2O has 3 atoms, not x9", "3"),
	X("version_dotted", "use v1.2 now", NULL),
	X("version_triple", "release 1.2.3", "1.2"),
	X("letters_after", "the 5th try", "5"),
	X("units_after", "run 10km", "10"),
	X("no_exponent", "about 1e5", "1"),
	X("no_number", "I do not know.", NULL),
	/* think blocks (rule 0) */
	X("think_numbers_inside_only", "<think>2+2 is 4, or 5?</think>"
	  "I am not sure.", NULL),
	X("think_boxed_after", "<think>maybe \\boxed{3}... 7</think>\n\n"
	  "So \\boxed{12}.", "12"),
	X("think_number_after", "<think>try 8, 9</think> The answer is 10",
	  "10"),
	X("think_unclosed", "<think>so x = \\boxed{4} and 5", NULL),
	X("think_unclosed_after_close", "<think>a</think>7 <think>now 9",
	  NULL),
	X("think_two_blocks", "<think>1</think>2<think>3</think>answer 4",
	  "4"),
	X("think_close_only", "opened by the prompt: 6</think>answer: 8",
	  "8"),
	X("think_empty_off", "<think>\n\n</think>\n\n\\boxed{5}", "5"),
	X("think_tag_partial", "<thin 3 </thin", "3"),
	/* harmony transcripts (gpt-oss): the final channel only */
	X("harmony_final", "<|channel|>analysis<|message|>2+2 is 4, not 5"
	  "<|end|><|start|>assistant<|channel|>final<|message|>It is 4.",
	  "4"),
	X("harmony_final_boxed", "<|channel|>analysis<|message|>7?<|end|>"
	  "<|start|>assistant<|channel|>final<|message|>\\boxed{8}", "8"),
	X("harmony_no_final", "<|channel|>analysis<|message|>so x = "
	  "\\boxed{4} and 5", NULL),
	X("harmony_commentary_only", "<|channel|>commentary<|message|>6"
	  "<|end|>", NULL),
	X("harmony_final_header_cut", "<|channel|>analysis<|message|>3<|end|>"
	  "<|start|>assistant<|channel|>final", NULL),
	X("harmony_final_constrain", "<|channel|>final <|constrain|>text"
	  "<|message|>12", "12"),
	X("harmony_finalize_is_not_final", "<|channel|>finalize<|message|>9",
	  NULL),
	/* a header ends at the next <|channel|>, as reasoning.h reads it:
	 * this is an analysis message (it had voted 8) */
	X("harmony_header_restarted", "<|channel|>final<|channel|>analysis"
	  "<|message|>8", NULL),
	X("harmony_final_ends_at_end", "<|channel|>final<|message|>10<|end|>"
	  "<|start|>assistant<|channel|>analysis<|message|>or 11", "10"),
	X("harmony_last_final_wins", "<|channel|>final<|message|>1<|end|>"
	  "<|start|>assistant<|channel|>final<|message|>2", "2"),
	X("harmony_final_empty", "<|channel|>analysis<|message|>5<|end|>"
	  "<|channel|>final<|message|>", NULL),
	X("harmony_think_ignored", "<|channel|>final<|message|><think> 13",
	  "13"),
	X("empty", "", NULL),
	X("dollar", "It costs $1,000.", "1000"),
	X("percent", "rate 7.5%", "7.5"),
	X("non_utf8", "\xff\xfe 12 \xc3\x28 \x80", "12"),
	XL("bytes_beyond_nul", "answer 5\0 later 7", "7"),
	{"len_stops_before", "answer 5 later 7", 8, "5"},
	{"len_cuts_number", "value 123456", 9, "123"},
	{"len_cuts_box", "\\boxed{12}", 9, "12"}, /* unterminated in len */
	/* boxes */
	X("boxed", "so \\boxed{42}", "42"),
	X("boxed_wins_over_later_number", "\\boxed{7} and then 9", "7"),
	X("boxed_nested_frac", "$\\boxed{\\frac{1}{2}}$", "\\frac{1}{2}"),
	X("boxed_deep", "\\boxed{a^{b^{c}}}", "a^{b^{c}}"),
	X("boxed_last_of_many", "\\boxed{1} or \\boxed{2} or \\boxed{3}.",
	  "3"),
	X("boxed_unterminated", "\\boxed{4} then \\boxed{5", "4"),
	X("boxed_unterminated_only", "try \\boxed{5 + 6", "6"),
	X("boxed_unterminated_outer", "\\boxed{x \\boxed{8}", "8"),
	X("boxed_nested_boxes", "\\boxed{\\boxed{9}}", "9"),
	X("boxed_spaces", "\\boxed{  42 \n}", "42"),
	X("boxed_number_forms", "\\boxed{+042.50}", "42.5"),
	X("boxed_trailing_dot", "\\boxed{42.}", "42"),
	X("boxed_thousands", "\\boxed{1,234}", "1234"),
	X("boxed_list", "\\boxed{1,2}", "1,2"),
	X("boxed_negative", "\\boxed{-3}", "-3"),
	X("boxed_text", "\\boxed{ x = 5 }", "x = 5"),
	X("boxed_empty_skipped", "\\boxed{3} \\boxed{ }", "3"),
	X("boxed_empty_falls_back", "so 11 \\boxed{}", "11"),
	X("boxed_escaped_brace", "\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
	X("boxed_escaped_open", "\\boxed{\\{}", "\\{"),
	X("boxed_stray_close_before", "} } \\boxed{5}", "5"),
	X("boxed_not_a_box", "\\boxedx{5} 6", "6"),
	XL("boxed_with_nul", "\\boxed{4\0 2} 9", NULL),
};

static void run_xcase(void **state)
{
	const struct xcase *c = *state;
	char out[VOTE_ANSWER_MAX];
	size_t len = c->len ? c->len : strlen(c->text);
	bool found = vote_extract(c->text, len, out, sizeof(out));

	if (!c->expect) {
		if (found)
			fail_msg("%s: expected no answer, got \"%s\"", c->name,
				 out);
		assert_string_equal(out, "");
	} else {
		if (!found)
			fail_msg("%s: expected \"%s\", got none", c->name,
				 c->expect);
		assert_string_equal(out, c->expect);
	}
}

/* A long text: the answer is at the very end, after 1 MB of noise with
 * numbers and half-open boxes (and linear time: many unterminated boxes). */
/* Why a sample has no answer, as people read it. */
static void no_answer_reasons(void **state)
{
	static const struct {
		const char *text, *reason;
	} c[] = {
		{"<|channel|>analysis<|message|>4", "no final channel"},
		{"<|channel|>final<|message|>none", "in the final channel"},
		{"<think>5", "thinking never ended"},
		{"none", "no boxed answer or number"},
	};
	size_t a, b;

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		assert_non_null(strstr(vote_no_answer_reason(c[i].text,
							     strlen(c[i].text)),
				       c[i].reason));
	assert_int_equal(vote_harmony_final("x<|channel|>final<|message|>ab"
					    "<|return|>", 40, &a, &b),
			 VOTE_HARMONY_FINAL);
	assert_int_equal(a, 28);
	assert_int_equal(b, 30);
	assert_int_equal(vote_harmony_final("plain 4", 7, &a, &b),
			 VOTE_HARMONY_NONE);
}

static void long_text(void **state)
{
	size_t n = 1 << 20, i = 0;
	char *t = malloc(n + 64), out[VOTE_ANSWER_MAX];
	const char *pat = "\\boxed{ 12, 3 x7 {";

	(void)state;
	assert_non_null(t);
	while (i + strlen(pat) < n) {
		memcpy(t + i, pat, strlen(pat));
		i += strlen(pat);
	}
	i += (size_t)sprintf(t + i, " final 99");
	assert_true(vote_extract(t, i, out, sizeof(out)));
	assert_string_equal(out, "99");
	free(t);
}

/* Bounded output: too long for cap is no answer, never an overflow. */
static void bounded_output(void **state)
{
	char out[8];

	(void)state;
	memset(out, 'Z', sizeof(out));
	assert_true(vote_extract("x 1234567", 9, out, 8));
	assert_string_equal(out, "1234567");
	assert_false(vote_extract("x 12345678", 10, out, 8));
	assert_string_equal(out, "");
	assert_false(vote_extract("\\boxed{abcdefgh}", 16, out, 8));
	assert_string_equal(out, "");
	assert_true(vote_extract("\\boxed{abcdefg}", 15, out, 8));
	assert_string_equal(out, "abcdefg");
	assert_false(vote_extract("7", 1, out, 1)); /* only room for NUL */
	assert_string_equal(out, "");
	assert_false(vote_extract("7", 1, out, 0));
	assert_false(vote_extract(NULL, 0, out, 8));
	/* the canonical form may be longer than the source: ".5" */
	assert_false(vote_extract(".5", 2, out, 3));
	assert_true(vote_extract(".5", 2, out, 4));
	assert_string_equal(out, "0.5");
}

/* ---- tally -------------------------------------------------------------- */

struct tcase {
	const char *name;
	size_t n;
	const char *answers[8];
	size_t winner;          /* expected winner's first_index, or VOTE_NONE */
	const char *table;      /* "answer:count:first;..." in table order */
	size_t voters;
};

static const struct tcase tcases[] = {
	{"clear_majority", 5, {"3", "4", "3", "3", "4"}, 0, "3:3:0;4:2:1;", 5},
	{"tie_first_occurrence", 4, {"4", "3", "3", "4"}, 0, "4:2:0;3:2:1;", 4},
	{"tie_absent_first", 4, {NULL, "b", "a", "a"}, 2, "a:2:2;b:1:1;", 3},
	{"tie_three_way", 3, {"z", "y", "x"}, 0, "z:1:0;y:1:1;x:1:2;", 3},
	{"none_answered", 3, {NULL, "", NULL}, VOTE_NONE, "", 0},
	{"zero_samples", 0, {NULL}, VOTE_NONE, "", 0},
	{"single", 1, {"7"}, 0, "7:1:0;", 1},
	{"minority_first", 6, {"1", "2", "2", NULL, "1", "2"}, 1,
	 "2:3:1;1:2:0;", 5},
	{"tie_later_table_order", 6, {"c", "a", "b", "b", "a", "c"}, 0,
	 "c:2:0;a:2:1;b:2:2;", 6},
};

static void run_tcase(void **state)
{
	const struct tcase *c = *state;
	vote_result r;
	char buf[512] = "";
	size_t o = 0;

	assert_int_equal(vote_tally(c->answers, c->n, &r), QERR_OK);
	for (size_t i = 0; i < r.n_entries; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s:%zu:%zu;",
				      r.entries[i].answer, r.entries[i].count,
				      r.entries[i].first_index);
	if (strcmp(buf, c->table) != 0)
		fail_msg("%s: table \"%s\", expected \"%s\"", c->name, buf,
			 c->table);
	assert_int_equal(r.n_voters, c->voters);
	if (c->winner == VOTE_NONE) {
		assert_int_equal(r.winner, VOTE_NONE);
	} else {
		assert_int_equal(r.winner, 0);
		assert_int_equal(r.entries[r.winner].first_index, c->winner);
	}
	vote_result_fini(&r);
	assert_null(r.entries);
	assert_int_equal(r.winner, VOTE_NONE);
	vote_result_fini(&r); /* idempotent */
}

static void tally_args(void **state)
{
	vote_result r;

	(void)state;
	assert_int_equal(vote_tally(NULL, 1, &r), QERR_ARG);
	assert_int_equal(vote_tally(NULL, 0, NULL), QERR_ARG);
	assert_int_equal(vote_tally(NULL, 0, &r), QERR_OK);
	assert_int_equal(r.winner, VOTE_NONE);
	vote_result_fini(&r);
}

/* End to end: texts -> answers -> tally; the tally copies the strings. */
static void extract_then_tally(void **state)
{
	static const char *texts[] = {
		"... so \\boxed{42}", "I get 42.0.", "Answer: +042",
		"\\boxed{41}",        "no idea",     "\\boxed{41.00}",
		"thus 42",
	};
	enum { N = sizeof(texts) / sizeof(texts[0]) };
	char buf[N][VOTE_ANSWER_MAX];
	const char *ans[N];
	vote_result r;

	(void)state;
	for (size_t i = 0; i < N; i++)
		ans[i] = vote_extract(texts[i], strlen(texts[i]), buf[i],
				      sizeof(buf[i]))
				 ? buf[i]
				 : NULL;
	assert_int_equal(vote_tally(ans, N, &r), QERR_OK);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(r.n_voters, 6);
	assert_int_equal(r.n_entries, 2);
	assert_string_equal(r.entries[0].answer, "42");
	assert_int_equal(r.entries[0].count, 4);
	assert_string_equal(r.entries[1].answer, "41");
	assert_int_equal(r.entries[1].first_index, 3);
	vote_result_fini(&r);
}


/* ---- reasoning apart from content (sc/reasoning.h) ---------------------- */

struct rcase {
	const char *name, *text, *reasoning, *content;
};

static const struct rcase rcases[] = {
	{"plain", "The answer is 42.", "", "The answer is 42."},
	{"plain_lt", "a <b and 3 < 4 <|end|>", "", "a <b and 3 < 4 <|end|>"},
	{"think", "<think>\n6 times 7\n</think>\n\nIt is 42.",
	 "\n6 times 7\n", "It is 42."},
	{"think_unclosed", "<think>6 times", "6 times", ""},
	{"think_partial_close", "<think>a </thin", "a </thin", ""},
	{"think_later_is_content", "<think>r</think>c <think>x</think>",
	 "r", "c <think>x</think>"},
	{"think_not_first", " <think>r</think>c", "", " <think>r</think>c"},
	{"partial_open", "<thi", "", "<thi"},
	{"harmony",
	 "<|channel|>analysis<|message|>6*7=42<|end|><|start|>assistant"
	 "<|channel|>final<|message|>\\boxed{42}<|return|>",
	 "6*7=42", "\\boxed{42}"},
	{"harmony_no_final",
	 "<|channel|>analysis<|message|>thinking on", "thinking on", ""},
	{"harmony_two_analysis",
	 "<|channel|>analysis<|message|>a<|end|><|start|>assistant"
	 "<|channel|>commentary to=f <|constrain|>json<|message|>b<|call|>"
	 "<|start|>assistant<|channel|>final<|message|>c",
	 "ab", "c"},
	{"harmony_header_restart",
	 "<|channel|>analysis<|channel|>final<|message|>7<|end|>", "", "7"},
	{"harmony_final_prefix_name",
	 "<|channel|>finale<|message|>x<|end|>", "x", ""},
	{"harmony_lt_in_body",
	 "<|channel|>final<|message|>3 <| 4 <|en<|end|>", "", "3 <| 4 <|en"},
};

/* The two parts of text fed in pieces of `step` bytes (0: byte by byte
 * from a rotating size), checked against the whole. */
static size_t split_in(const char *text, size_t len, size_t step,
		       reasoning_out *o)
{
	reasoning_split s;
	size_t at = 0, k = 1;

	reasoning_init(&s);
	while (at < len) {
		size_t n = step ? step : k++ % 7 + 1;

		if (n > len - at)
			n = len - at;
		assert_int_equal(reasoning_feed(&s, text + at, n, o), 0);
		at += n;
	}
	assert_int_equal(reasoning_end(&s, o), 0);
	return s.content_at;
}

static void run_rcase(void **state)
{
	const struct rcase *c = *state;
	size_t len = strlen(c->text);

	size_t at = reasoning_content_at(c->text, len);

	/* where the content begins: its first byte, or none */
	if (*c->content)
		assert_true(at < len && c->text[at] == c->content[0]);
	else
		assert_true(at == REASONING_NO_CONTENT);
	for (size_t step = 0; step <= len; step++) {
		reasoning_out o = {0};

		/* the same from every split */
		assert_true(split_in(c->text, len, step ? step : 0, &o) == at);
		assert_memory_equal(o.rn ? o.r : "", c->reasoning,
				    strlen(c->reasoning) + 1);
		assert_int_equal(o.rn, strlen(c->reasoning));
		assert_int_equal(o.cn, strlen(c->content));
		assert_memory_equal(o.cn ? o.c : "", c->content,
				    strlen(c->content) + 1);
		reasoning_out_free(&o);
	}
}

/* Where the content begins, byte for byte: the whitespace after
 * </think> is not content, nor is harmony's markup. */
static void reasoning_content_offsets(void **state)
{
	static const struct {
		const char *text;
		size_t at;
	} c[] = {
		{"42", 0},
		{"<b>x", 0},
		{"  <think>x</think>y", 0},
		{"<think>ab</think>\n\n42", 19},
		{"<think>ab</think>42", 17},
		{"<think>ab</think> \n ", REASONING_NO_CONTENT},
		{"<think>ab", REASONING_NO_CONTENT},
		{"<thi", 0},
		{"", REASONING_NO_CONTENT},
		{"<|channel|>analysis<|message|>x<|end|><|start|>assistant"
		 "<|channel|>final<|message|>42<|return|>", 83},
		{"<|channel|>analysis<|message|>x<|end|>",
		 REASONING_NO_CONTENT},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		size_t at = reasoning_content_at(c[i].text, strlen(c[i].text));

		if (at != c[i].at)
			fail_msg("\"%s\": content at %zu, not %zu", c[i].text,
				 at, c[i].at);
	}
}

/* Where a constraint that waits for the reasoning takes over (fork.c):
 * fed piece by piece (NULL: the pieces' ends), reasoning_content_next
 * after each: right after </think>, at harmony's final body, never
 * before a marker is whole nor in other channels. */
static void reasoning_content_next_at(void **state)
{
	static const struct {
		const char *pieces[12];
		int next[12];
	} c[] = {
		{{"<think>", "ab", "</thi", "nk>", "\n\n", NULL},
		 {REASONING_NOT_YET, REASONING_NOT_YET, REASONING_NOT_YET,
		  REASONING_AFTER_THINK, REASONING_AFTER_THINK}},
		{{"<|channel|>", "analysis", "<|message|>", "x", "<|end|>",
		  "<|start|>", "assistant", "<|channel|>", "final",
		  "<|message|>", NULL},
		 {REASONING_NOT_YET, REASONING_NOT_YET, REASONING_NOT_YET,
		  REASONING_NOT_YET, REASONING_NOT_YET, REASONING_NOT_YET,
		  REASONING_NOT_YET, REASONING_NOT_YET, REASONING_NOT_YET,
		  REASONING_FINAL_BODY}},
		/* a commentary message is no content */
		{{"<|channel|>", "commentary", "<|message|>", NULL},
		 {REASONING_NOT_YET, REASONING_NOT_YET, REASONING_NOT_YET}},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		reasoning_split s;

		reasoning_init(&s);
		for (int k = 0; c[i].pieces[k]; k++) {
			int got;

			assert_int_equal(reasoning_feed(&s, c[i].pieces[k],
							strlen(c[i].pieces[k]),
							NULL), 0);
			got = reasoning_content_next(&s);
			if (got != c[i].next[k])
				fail_msg("case %zu, after \"%s\": %d, not %d",
					 i, c[i].pieces[k], got, c[i].next[k]);
		}
	}
}

/* A token that ends the reasoning may carry content: fed up to it, the
 * rest of the piece is the content's (the grammar's, in fork.c). */
static void reasoning_feed_to_content_rest(void **state)
{
	static const struct {
		const char *pieces[10]; /* the last one ends the reasoning */
		int at;
		const char *rest;
	} c[] = {
		{{"<think>", "</", "think", ">x"}, REASONING_AFTER_THINK, "x"},
		{{"<think>", "a", "</think>\n\n{"}, REASONING_AFTER_THINK,
		 "\n\n{"},
		{{"<think>", "</think>"}, REASONING_AFTER_THINK, ""},
		/* harmony: a '<' held back as a possible marker is content */
		{{"<|channel|>", "final", "<", "|", "message", "|", "><"},
		 REASONING_FINAL_BODY, "<"},
		{{"<|channel|>", "final", "<|message|>yes"},
		 REASONING_FINAL_BODY, "yes"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		reasoning_split s;
		int k = 0, at = REASONING_NOT_YET;
		size_t used = 0, n = 0;

		reasoning_init(&s);
		for (; c[i].pieces[k]; k++) {
			n = strlen(c[i].pieces[k]);
			used = reasoning_feed_to_content(&s, c[i].pieces[k], n,
							 &at);
			if (c[i].pieces[k + 1] && (at != REASONING_NOT_YET ||
						   used != n))
				fail_msg("case %zu: content at piece %d", i, k);
		}
		assert_int_equal(at, c[i].at);
		assert_string_equal(c[i].pieces[k - 1] + used, c[i].rest);
	}
}

/* Held back means never sent twice nor moved: after each byte the parts
 * only grow, and a harmony text's content is the span the vote reads. */
static void reasoning_prefix_stable(void **state)
{
	static const char t[] =
		"<|channel|>analysis<|message|>Half of 84 is 42 <|en"
		"d or not<|end|><|start|>assistant<|channel|>final<|message|>"
		"The answer is \\boxed{42}.<|return|>";
	size_t len = sizeof(t) - 1, a, b;
	reasoning_split s;
	reasoning_out o = {0}, whole = {0};
	size_t rn = 0, cn = 0;

	(void)state;
	split_in(t, len, len, &whole);
	reasoning_init(&s);
	for (size_t i = 0; i < len; i++) {
		assert_int_equal(reasoning_feed(&s, t + i, 1, &o), 0);
		assert_true(o.rn >= rn && o.cn >= cn);
		assert_true(o.rn <= whole.rn && o.cn <= whole.cn);
		if (o.rn)
			assert_memory_equal(o.r, whole.r, o.rn);
		if (o.cn)
			assert_memory_equal(o.c, whole.c, o.cn);
		rn = o.rn;
		cn = o.cn;
	}
	assert_int_equal(reasoning_end(&s, &o), 0);
	assert_int_equal(vote_harmony_final(t, len, &a, &b),
			 VOTE_HARMONY_FINAL);
	assert_int_equal(whole.cn, b - a);
	assert_memory_equal(whole.c, t + a, b - a);
	reasoning_out_clear(&o);
	assert_int_equal(o.rn + o.cn, 0);
	reasoning_out_free(&o);
	reasoning_out_free(&whole);
}

#define NX (sizeof(xcases) / sizeof(xcases[0]))
#define NT (sizeof(tcases) / sizeof(tcases[0]))
#define NR (sizeof(rcases) / sizeof(rcases[0]))

#define N_FIXED(a) (sizeof(a) / sizeof((a)[0]))

int main(void)
{
	static const struct CMUnitTest fixed1[] = {
		cmocka_unit_test(long_text),
		cmocka_unit_test(no_answer_reasons),
		cmocka_unit_test(bounded_output),
	};
	static const struct CMUnitTest fixed2[] = {
		cmocka_unit_test(tally_args),
		cmocka_unit_test(extract_then_tally),
	};
	static const struct CMUnitTest fixed3[] = {
		cmocka_unit_test(reasoning_prefix_stable),
		cmocka_unit_test(reasoning_content_offsets),
		cmocka_unit_test(reasoning_content_next_at),
		cmocka_unit_test(reasoning_feed_to_content_rest),
	};
	struct CMUnitTest t[NX + NT + NR + N_FIXED(fixed1) + N_FIXED(fixed2) +
			   N_FIXED(fixed3)];
	size_t n = 0;

	for (size_t i = 0; i < NX; i++)
		t[n++] = (struct CMUnitTest){.name = xcases[i].name,
					     .test_func = run_xcase,
					     .initial_state = (void *)&xcases[i]};
	for (size_t i = 0; i < N_FIXED(fixed1); i++)
		t[n++] = fixed1[i];
	for (size_t i = 0; i < NT; i++)
		t[n++] = (struct CMUnitTest){.name = tcases[i].name,
					     .test_func = run_tcase,
					     .initial_state = (void *)&tcases[i]};
	for (size_t i = 0; i < N_FIXED(fixed2); i++)
		t[n++] = fixed2[i];
	for (size_t i = 0; i < NR; i++)
		t[n++] = (struct CMUnitTest){.name = rcases[i].name,
					     .test_func = run_rcase,
					     .initial_state = (void *)&rcases[i]};
	for (size_t i = 0; i < N_FIXED(fixed3); i++)
		t[n++] = fixed3[i];
	/* one group: tests/run.sh counts the last summary line per binary */
	return _cmocka_run_group_tests("vote", t, n, NULL, NULL);
}

/*
 * answer — what a sample's final answer is, per answer format: the key
 * the vote compares (equal keys vote together) and the key of an expected
 * answer when a set is scored. The formats, one per request (sc_params'
 * `answer` setting; `--answer`, `sampling.answer`, `answer_format`):
 *
 *   number   vote.h's rules, unchanged: the last \boxed{...} (a number in
 *            it canonical, anything else byte for byte), else the last
 *            number. "\boxed{42.0}" and "42" vote together.
 *   math     the answer's span (below), keyed by mathkey.h: equal values
 *            vote together — \frac12, 1/2, 0.5 and \dfrac{2}{4}; x^2+1 and
 *            1+x^2; \{1,2\} and \{2,1\}; (1,2) and [1,2] do not.
 *   choice   a letter A-J: "(B)", "B)", "B.", "B", "Answer: B", "answer
 *            is B", "\boxed{B}", "**B**", "option B", "\text{(B)}",
 *            "\textbf{B}"; a small letter where a bracket marks it, "(b)",
 *            "b)", is its capital; after a cue or in a box followed by
 *            anything ("the answer is B because ...", "B, since"; the
 *            pronoun in "I think B" is no option I unless the options are
 *            known and include I: the next letter is read); a last line
 *            that leads with its marked letter ("B) 17", "B. 17"). An
 *            answer that is an option's text or value ("the answer is 15")
 *            is that option's letter when the options are known: the
 *            question lists them ("A) 12  B) 15", "(A) 12 (B) 15", "(a) 12
 *            (b) 15", one per line "A. 12"; answer_choice_options reads
 *            them where the question is known, so they travel with the
 *            format as "choice:A=12|B=15"), or the format names them that
 *            way; the answer and an option's text are compared as text
 *            ("paris" is "Paris", "2 m" is "2 m"), else as math keys
 *            ("0.5" is "1/2") where one option alone has the answer's
 *            value (a math key has no units: "2 m" is not "2 cm").
 *   yesno    yes, no, true, false (true is yes, false is no), any case and
 *            punctuation, from the box, the answer's span, the word the
 *            last line leads with ("Yes, because the claim is false." is
 *            yes), or the last of them in the final sentence.
 *   text     the box or the span after "the answer is" (without a
 *            \text{..} around all of it: "\boxed{\text{Paris}}"), normalised as
 *            SQuAD does: lower case (ASCII, Latin-1, Latin Extended-A,
 *            Greek, Cyrillic capitals), punctuation and the articles a, an,
 *            the removed, whitespace collapsed; a point between digits
 *            stays ("3.5" is not "35"), a comma there goes ("1,000").
 *   regex:P  PCRE2 pattern P over the text (after rule 0): the last match;
 *            its first capture group when it has one that matched, else
 *            the whole match; trimmed.
 *   select   universal self-consistency (sc/usc.h): each sample keyed as
 *            `text` keys it, and after the vote one greedy pass of the
 *            model picks the response most consistent with the others;
 *            its answer is the request's.
 *   json:PTR the text is JSON (as a JSON schema grammar makes it; else
 *            the span from its first '{' to its last '}'); PTR is a JSON
 *            pointer (RFC 6901: "/answer", "/steps/2/value", "" the whole
 *            value) to the field voted on, keyed by its type: numbers as
 *            `math` keys them (42 and 42.0 agree), strings as `text`,
 *            true/false, objects and arrays as compact JSON with sorted
 *            keys; null and a missing field are no answer.
 *   auto     (the default) from the final answer's shape: a box whose
 *            content parses as math is `math`, and so is the span after
 *            "the answer is" when it reads as a value without variables
 *            ("1/2", "\frac{3}{4}", "about 7", "\frac12 (or 0.5)") or as
 *            math with variables ("x + 1"), and as `text` when it holds
 *            no digit and is short ("the answer is Paris", and so a box:
 *            "\boxed{\text{Paris}}"); an option letter (boxed or after
 *            "the answer is"), alone, marked and followed by text ("(B)
 *            Paris", "B: Paris", "B, because") or before a reason ("B
 *            because ...", not "A prime"), is `choice`; yes/no alone or
 *            leading the span ("yes, because 7 is prime") is `yesno`;
 *            anything else is `number`. A plain
 *            number therefore keys exactly as `number` does. A whole
 *            text of one line of up to ANSWER_LINE_MAX bytes and
 *            ANSWER_LINE_WORDS words, with no control character or
 *            U+FFFD (as a choice constraint writes it: "B", "yes",
 *            "Paris", "1/2"), is read the same way, and keyed as `text`
 *            keys it when it holds no number. A longer text whose last
 *            line is a value ("$$\frac{1}{2}$$" under a "Final Answer"
 *            heading) is that value; else its last number; with none, a
 *            last line that leads with yes/no ("No, because the number
 *            is odd.").
 *
 * THE SPAN (math, choice, yesno, text; after vote.h's rule 0: the text
 * after </think>, a harmony transcript's final message): the content of
 * the last closed \boxed{...}; else what follows the last cue, any case:
 * "answer:" ("Final Answer:", "**Answer:**"), or "answer is" / "answer
 * would be" / "option is" / "choice is" where the answer is stated ("the
 * answer is", "my final answer is", "The correct option is", a sentence
 * that starts with it; not "this answer is right", not "answer isn't");
 * a cue that ends its line, or a heading line "### Final Answer", reads
 * the next non-empty line. The span runs to the end of its line or
 * sentence (". " / ".\n" / end; not an abbreviation's dot: "St. Louis",
 * "approx. 5", "i.e.", "No. 5" after other words, but not "no." that
 * leads the span: "The answer is no. 9 is composite." is no); a math
 * block that opens it ("\(", "\[", "$$") runs to its close, over lines
 * and dots; it is read without markup around it ("**", "$", "\( \)",
 * "\[ \]"); else, for math, the last number (the number rule); for
 * choice, yesno and text, the last non-empty line. math reads the span's
 * value without a comment after it (", i.e. ...", " (or 0.5)", a reason:
 * "6 because 2 times 3 is 6").
 *
 * Keys are at most cap-1 bytes (VOTE_ANSWER_MAX); no answer is false.
 */
#ifndef QUORUM_ANSWER_H
#define QUORUM_ANSWER_H

#include <stdbool.h>
#include <stddef.h>

enum answer_kind {
	ANSWER_AUTO = 0, ANSWER_NUMBER, ANSWER_MATH, ANSWER_CHOICE,
	ANSWER_YESNO, ANSWER_TEXT, ANSWER_REGEX, ANSWER_JSON, ANSWER_SELECT,
	ANSWER_EXACT,
	ANSWER_KINDS_
};

/* a format's pattern: a regex, a JSON pointer, a choice's options (an
 * MMLU question's four, long ones included) */
#define ANSWER_PATTERN_MAX 1024
/* auto: a whole answer on one short line */
#define ANSWER_LINE_MAX 64
#define ANSWER_LINE_WORDS 5
#define ANSWER_LIST "auto, number, math, choice, yesno, text, exact, " \
	"select, regex:PATTERN, json:POINTER"

typedef struct answer_format {
	int kind;                        /* enum answer_kind */
	/* regex: the pattern; choice: the options' keys "A=12|B=15" (empty:
	 * not known); json: the pointer */
	char pattern[ANSWER_PATTERN_MAX];
} answer_format;

/* "math", "regex:(\d+) apples", "choice:A=12|B=15", ... into *f. 0, or -1
 * (unknown name, an empty or too long pattern, a pattern PCRE2 refuses,
 * options not of the form L=VALUE|...: *why says so). */
int answer_format_parse(const char *s, answer_format *f, const char **why);

/* The format's name as it is parsed ("regex:P" with its pattern). */
const char *answer_format_name(const answer_format *f, char *buf,
			       size_t cap);

/* Why a sample's text has no answer under format f, in words for a
 * person: the model's channel or thinking left unfinished (vote.h's
 * vote_no_answer_reason), else what f looks for and did not find ("no
 * yes/no/true/false"); f NULL (a cluster's default, not known here):
 * "no answer its format reads". A static string. */
const char *answer_no_answer_reason(const answer_format *f, const char *text,
				    size_t len);

/* The answer as a person reads it, for a key that is the format's own
 * notation: a math key of an expression with variables ("f[x]:...") or
 * a spelling ("s:..."). Into out: key itself where it reads as it is
 * (numbers, letters, yes/no, words); else the text the key came from in
 * the sample text (its box, the span after its cue, or its last line,
 * within the answer's region: after thinking, in a final channel),
 * trimmed, on one line, cut to cap. */
void answer_shown(const char *key, const char *text, size_t len, char *out,
		  size_t cap);

/* The key of a sample's text under format f into out. */
bool answer_extract(const answer_format *f, const char *text, size_t len,
		    char *out, size_t cap);

/* The key of an expected answer (a set's "answer" field), as a sample
 * that gave exactly it would key: "\frac{1}{2}" under math is "0.5", "B"
 * under choice is "B", "Yes" under yesno is "yes", "Paris" under auto
 * "paris". A string that has no key under f keys as itself, trimmed. */
void answer_expected_key(const answer_format *f, const char *s, size_t len,
			 char *out, size_t cap);

/* The text of a JSON number as its writer meant it: the shortest
 * decimal that reads back as v ("0.1", not "0.10000000000000001"). */
void answer_number_text(double v, char *out, size_t cap);

/* choice without options named: the options question[0, qlen) lists,
 * into f, all of them or none: none when one cannot be kept (a '|' in
 * it; together over ANSWER_PATTERN_MAX - 1 bytes as "A=..|B=.."), since
 * a list cut short would let the answers that are a kept option's text
 * vote and those that are a dropped one's not; nothing for another
 * format or a question without options. */
void answer_choice_options(answer_format *f, const char *question,
			   size_t qlen);

#endif

/*
 * vote — final-answer extraction and the self-consistency majority vote.
 *
 * implements: vote_extract() (one chain's text -> a canonical answer
 * string) and vote_tally() (answers of N samples -> counts and a winner).
 *
 * EXTRACTION RULES (vote_extract):
 * 0. Thinking. Reasoning models (Qwen3, ...) think inside
 *    "<think>" ... "</think>" before they answer. Only the text after the
 *    LAST "</think>" counts (a template may open the block in the prompt,
 *    so a close without an open counts too). A text with "<think>" and no
 *    "</think>" after it never finished thinking: NO answer, whatever
 *    numbers it holds (vote_think_state tells this case apart).
 *    Harmony (gpt-oss). A text holding "<|channel|>" is a harmony
 *    transcript: <|channel|>NAME[ ...]<|message|>TEXT per message. Only
 *    the TEXT of the last message whose channel NAME is "final" counts
 *    (up to the next <|end|>, <|start|>, <|return|>, <|call|> or
 *    <|channel|>); the analysis and commentary channels never vote. A
 *    transcript without a final message has NO answer (no guess from
 *    its reasoning). Rule 0's think blocks do not apply to it.
 * 1. Box. The answer is the content of the last "\boxed{" (by position)
 *    whose brace is closed, braces balanced inside; a brace preceded by an
 *    odd number of backslashes ("\{", "\}") is literal and not counted.
 *    Unterminated boxes and boxes empty after trimming are skipped (an
 *    earlier box or the number rule applies). Nested boxes therefore yield
 *    the innermost-last one: "\boxed{\boxed{5}}" -> "5".
 *    The content, trimmed of ASCII whitespace, is canonicalized as a
 *    number when ALL of it is one (grammar below, with a sign allowed and
 *    a trailing '.' tolerated: "\boxed{ +1,234.50 }" -> "1234.5");
 *    otherwise it is kept byte for byte ("\frac{1}{2}").
 *    If that last box cannot be used (content longer than cap-1 bytes or
 *    containing a NUL byte) there is NO answer: no fallback to numbers.
 * 2. Otherwise the last number in the text. A number is
 *       [sign] digits [',' ddd]... ['.' digits]   or   [sign] '.' digits
 *    with these decisions:
 *    - thousands separators: ',' + exactly 3 digits not followed by a
 *      digit, and only after a leading group of 1-3 digits: "1,234" and
 *      "12,345,678" are one number; "1, 2, 3", "1,2,3", "1,2345" and
 *      "1234,567" are lists.
 *    - a '.' must be followed by a digit to belong to the number: "3." at
 *      the end of a sentence is 3; ".5" is 0.5 (unless the '.' follows an
 *      alphanumeric, see below).
 *    - sign: '-', '+' or a Unicode minus (U+2212, and the dashes models
 *      write for it: U+2012, U+2013 en dash, U+FE63, U+FF0D) directly
 *      before the digits, and only if not itself preceded by
 *      [A-Za-z0-9_]: "x-2", "3-5" and "3–5" end with 2 and 5 (a
 *      hyphen/minus operator or a range, not a sign).
 *    - numbers inside words do not count: a digit run preceded by
 *      [A-Za-z_] belongs to an identifier ("x2", "mp3", "H2O", "v1.2"
 *      give nothing); neither does a digit run right after "X." where X is
 *      alphanumeric ("1.2.3" ends with 1.2; "v1.2" gives nothing). Letters
 *      AFTER a number are allowed: "5th", "10km", "2x" give 5, 10, 2.
 *    - no exponents: "1e5" gives 1. Bytes >= 0x80 are neither letters nor
 *      digits.
 * 3. Canonical number: '+' dropped, separators dropped, leading zeros
 *    dropped ("042" -> "42", ".5" -> "0.5"), trailing fractional zeros and
 *    a bare '.' dropped ("42.50" -> "42.5", "42.0" -> "42"), and a zero
 *    value loses its sign ("-0.0" -> "0"). So 42, 42.0, +42, 042 and
 *    \boxed{42} all vote together; 1/2 and 0.5 do not.
 * The text is arbitrary bytes of length len (NUL is an ordinary byte; no
 * byte at or past len is read). Linear time in len, no allocation.
 *
 * VOTE (vote_tally): equal answers are equal C strings. Entries are sorted
 * by count descending, then by first occurrence (lowest sample index)
 * ascending; the winner is entries[0]: among the answers with the top
 * count, the one that appeared first in sample-index order.
 */
#ifndef QUORUM_VOTE_H
#define QUORUM_VOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A good cap for vote_extract (answers longer than cap-1 are dropped). */
#define VOTE_ANSWER_MAX 256

/*
 * Extracts the canonical answer of text[0, len) into out (NUL-terminated,
 * at most cap-1 bytes). Returns true if an answer was found; otherwise
 * out is "" (when cap >= 1) and the sample must not vote.
 */
bool vote_extract(const char *text, size_t len, char *out, size_t cap);

enum vote_think {
	VOTE_THINK_NONE = 0,     /* no think block */
	VOTE_THINK_CLOSED = 1,   /* answer after the last </think> */
	VOTE_THINK_UNCLOSED = 2, /* <think> never closed: no answer */
};
/* Rule 0 alone: the state of text's think block and, unless UNCLOSED,
 * *start = where the answer part begins (0, or after the last
 * "</think>"). */
int vote_think_state(const char *text, size_t len, size_t *start);
enum vote_harmony {
	VOTE_HARMONY_NONE = 0,     /* not a harmony transcript */
	VOTE_HARMONY_FINAL = 1,    /* [*a, *b) is the final message's text */
	VOTE_HARMONY_NO_FINAL = 2, /* harmony without a final message */
};
/* The harmony rule alone (see rule 0). */
int vote_harmony_final(const char *text, size_t len, size_t *a, size_t *b);
/* Rule 0 whole: the part of text[0, len) an answer may come from,
 * [*start, *end); false when there can be none (thinking never ended, a
 * harmony transcript without a final message). */
bool vote_answer_region(const char *text, size_t len, size_t *start,
			size_t *end);
/* Rule 1's box: the trimmed content [*a, *b) of the last closed,
 * non-empty \boxed{...} of t[0, n); false when there is none. */
bool vote_last_box(const char *t, size_t n, size_t *a, size_t *b);
/* Rules 2-3 on t[0, n): the last number, canonical, into out. */
bool vote_last_number(const char *t, size_t n, char *out, size_t cap);

/* Why a text that vote_extract found no answer in has none, for people:
 * "thinking never ended (no </think>)", "no final channel (harmony: ...)"
 * or "no boxed answer or number[ in the final channel]". */
const char *vote_no_answer_reason(const char *text, size_t len);

#define VOTE_NONE ((size_t)-1)

typedef struct vote_entry {
	const char *answer; /* owned by the vote_result */
	size_t count;       /* samples that gave it */
	size_t first_index; /* lowest sample index that gave it */
	uint64_t weight;    /* sum of its samples' weights (count unweighted) */
} vote_entry;

typedef struct vote_result {
	vote_entry *entries; /* (n_entries), count desc, first_index asc */
	size_t n_entries;    /* distinct answers */
	size_t n_voters;     /* samples with an answer */
	size_t winner;       /* 0, or VOTE_NONE when no sample answered */
} vote_result;

/*
 * Tallies answers[0, n) given in sample-index order; answers[i] NULL or ""
 * means sample i has no answer. Copies the strings (answers is borrowed).
 * *out is overwritten (not freed first); release it with vote_result_fini.
 * QERR_OK, QERR_ARG (out NULL, or answers NULL with n > 0), QERR_NOMEM
 * (then *out is empty and safe to fini).
 */
int vote_tally(const char *const *answers, size_t n, vote_result *out);

/*
 * The confidence-weighted vote: as vote_tally, each answer scoring the sum
 * of its samples' weights (integers, e.g. fixed point: sums are exact and
 * order-free). Entries are sorted by weight descending, then first index
 * ascending (the count does not rank); the winner is entries[0]. A sample
 * with weight 0 and an answer is a voter of weight 0.
 */
int vote_tally_weighted(const char *const *answers, const uint64_t *weights,
			size_t n, vote_result *out);

/* Frees what vote_tally allocated and zeroes *r (winner = VOTE_NONE). */
void vote_result_fini(vote_result *r);

/* A sample's weight in a confidence vote from its group confidence:
 * exp(g) (the deterministic mathf_exp, in float) in units of 2^-32, in
 * [0, STOP_WEIGHT_ONE] — the same bits wherever it is computed (workers
 * and the coordinator). */
uint64_t vote_conf_weight(double group_conf);

#endif

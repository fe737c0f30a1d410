/*
 * answer — the answer formats (see answer.h): the span a final answer is
 * read from, each format's key, expected answers keyed the same way, and
 * option text mapped to letters. Callers: sc/fork.c (every sample),
 * the coordinator and sc_run (answer_resolve), tools/ (scoring, `quorum
 * vote`), the tests.
 */
#include "sc/answer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fnv.h"
#include "sc/compose.h"
#include "sc/mathkey.h"
#include "sc/vote.h"

typedef unsigned char uchar;

_Static_assert(ANSWER_PATTERN_MAX == 1024,
	       "the messages of answer_format_parse name the limit");

static const char *const NAMES[ANSWER_KINDS_] = {
	"auto", "number", "math", "choice", "yesno", "text", "regex", "json",
	"select", "exact"};

static int lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_';
}

static int space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

/* ---- regex patterns (one compiled pattern kept per thread) ------------- */

static __thread pcre2_code *re_code;
static __thread char re_src[ANSWER_PATTERN_MAX];

static pcre2_code *compile(const char *pat, const char **why)
{
	static __thread char msg[240];
	int err;
	PCRE2_SIZE off;
	pcre2_code *c;

	if (re_code && !strcmp(re_src, pat))
		return re_code;
	c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF,
			  &err, &off, NULL);
	if (!c) {
		char e[120];

		pcre2_get_error_message(err, (PCRE2_UCHAR *)e, sizeof(e));
		snprintf(msg, sizeof(msg), "regex:%.40s: %s at offset %zu",
			 pat, e, (size_t)off);
		if (why)
			*why = msg;
		return NULL;
	}
	pcre2_code_free(re_code);
	re_code = c;
	snprintf(re_src, sizeof(re_src), "%s", pat);
	return c;
}

int answer_format_parse(const char *s, answer_format *f, const char **why)
{
	const char *w = NULL;

	memset(f, 0, sizeof(*f));
	if (!s)
		s = "";
	if (!strncmp(s, "choice:", 7)) {
		/* L=KEY|L=KEY: each letter A-J once, a key without '|' */
		const char *q = s + 7;
		size_t n = strlen(q);
		int ok = n > 0 && n < ANSWER_PATTERN_MAX;
		unsigned seen = 0;

		while (ok && *q) {
			const char *bar = strchr(q, '|');
			size_t k = bar ? (size_t)(bar - q) : strlen(q);

			ok = k >= 3 && q[0] >= 'A' && q[0] <= 'J' && q[1] == '=';
			if (ok && (seen & (1u << (q[0] - 'A')))) {
				static __thread char twice[48];

				snprintf(twice, sizeof(twice), "choice: option "
					 "%c is given twice", q[0]);
				w = twice;
				ok = 0;
				break;
			}
			if (ok)
				seen |= 1u << (q[0] - 'A');
			q += k + (bar != NULL);
			if (bar && !*q)
				ok = 0;
		}
		if (ok) {
			f->kind = ANSWER_CHOICE;
			memcpy(f->pattern, s + 7, n + 1);
			return 0;
		}
		if (!w)
			w = "choice: options must be L=VALUE|L=VALUE with "
			    "letters A-J";
	} else if (!strncmp(s, "json:", 5)) {
		size_t n = strlen(s + 5);

		if (n >= ANSWER_PATTERN_MAX || (n && s[5] != '/'))
			w = "json: the pointer must be empty or start with '/' "
			    "(RFC 6901), at most 1023 bytes";
		else {
			f->kind = ANSWER_JSON;
			memcpy(f->pattern, s + 5, n + 1);
			return 0;
		}
	} else if (!strncmp(s, "regex:", 6)) {
		size_t n = strlen(s + 6);

		if (!n || n >= ANSWER_PATTERN_MAX)
			w = "regex: the pattern must be 1..1023 bytes";
		else if (compile(s + 6, &w)) {
			f->kind = ANSWER_REGEX;
			memcpy(f->pattern, s + 6, n + 1);
			return 0;
		}
	} else {
		for (int k = 0; k < ANSWER_KINDS_; k++)
			if (k != ANSWER_REGEX && k != ANSWER_JSON &&
			    !strcmp(s, NAMES[k])) {
				f->kind = k;
				return 0;
			}
	}
	if (why)
		*why = w ? w : "must be " ANSWER_LIST;
	return -1;
}

const char *answer_format_name(const answer_format *f, char *buf, size_t cap)
{
	if (f->kind == ANSWER_REGEX)
		snprintf(buf, cap, "regex:%s", f->pattern);
	else if (f->kind == ANSWER_JSON)
		snprintf(buf, cap, "json:%s", f->pattern);
	else if (f->kind == ANSWER_CHOICE && f->pattern[0])
		snprintf(buf, cap, "choice:%s", f->pattern);
	else
		snprintf(buf, cap, "%s", f->kind >= 0 && f->kind < ANSWER_KINDS_
					       ? NAMES[f->kind] : "?");
	return buf;
}

/* ---- the span ----------------------------------------------------------- */

/* [*a, *b) trimmed of whitespace (and of t's edges) */
static void trim(const char *t, size_t *a, size_t *b)
{
	while (*a < *b && space((uchar)t[*a]))
		(*a)++;
	while (*b > *a && space((uchar)t[*b - 1]))
		(*b)--;
}

/* t[i, i + m) is word w (any case) standing alone: no letter or digit
 * before or after it. */
static bool word_at(const char *t, size_t n, size_t i, const char *w)
{
	size_t m = strlen(w);

	if (i + m > n || (i > 0 && alnum((uchar)t[i - 1])))
		return false;
	for (size_t k = 0; k < m; k++)
		if (lower((uchar)t[i + k]) != w[k])
			return false;
	return i + m == n || !alnum((uchar)t[i + m]);
}

/* The word before t[i] (spaces, '*' and '#' skipped) is one that makes
 * "... answer is" a statement of the answer ("the", "final", "my",
 * "correct"...), or there is none on its line or sentence. */
static bool cue_lead(const char *t, size_t i)
{
	static const char *const lead[] = {"the", "final", "my", "correct",
					   "right", "our", "best", "true"};
	size_t e = i, s;

	while (e > 0 && (t[e - 1] == ' ' || t[e - 1] == '\t' ||
			 t[e - 1] == '*' || t[e - 1] == '#'))
		e--;
	if (e == 0 || strchr("\n.!?:(", t[e - 1]))
		return true;
	for (s = e; s > 0 && alnum((uchar)t[s - 1]);)
		s--;
	for (size_t k = 0; k < sizeof(lead) / sizeof(*lead); k++)
		if (e - s == strlen(lead[k]) && word_at(t, e, s, lead[k]))
			return true;
	return false;
}

/* The end of the verb that states an answer at t[j] ("is", "would be",
 * ...), or 0. */
static size_t cue_verb(const char *t, size_t n, size_t j)
{
	static const char *const verb[] = {"is", "would be", "should be",
					   "will be"};

	for (size_t v = 0; v < sizeof(verb) / sizeof(*verb); v++)
		if (word_at(t, n, j, verb[v]))
			return j + strlen(verb[v]);
	return 0;
}

/* After "answer" at t[j]: "to" or "for" and a few words, then the verb
 * ("the answer to the question is", "the final answer for part (a)
 * is"), within the clause; the verb's end, or 0. */
static size_t cue_verb_after_to(const char *t, size_t n, size_t j)
{
	size_t k = j, e = 0;

	if (!word_at(t, n, k, "to") && !word_at(t, n, k, "for"))
		return 0;
	for (int words = 0; words < 8 && !e; words++) {
		while (k < n && !space((uchar)t[k]) && !strchr(".!?:;\n", t[k]))
			k++;
		while (k < n && space((uchar)t[k]) && t[k] != '\n')
			k++;
		if (k >= n || strchr(".!?:;\n", t[k]))
			return 0;
		e = cue_verb(t, n, k);
	}
	return e;
}

/*
 * The end of the last cue of the answer in t[0, n), or 0: "answer:" (any
 * words before it: "Final Answer:", "**Answer:**"), and "answer is",
 * "answer would be", "option is", "choice is" where the answer is being
 * stated ("the answer is", "my final answer is", a sentence that starts
 * with it; not "this answer is right", not "answer isn't"); "answer to
 * ... is" with a few words between ("the answer to the question is").
 * A colon after the cue is part of it.
 */
static size_t answer_cue(const char *t, size_t n)
{
	static const char *const noun[] = {"answer", "option", "choice"};
	size_t best = 0;

	for (size_t i = 0; i < n; i++) {
		for (size_t w = 0; w < sizeof(noun) / sizeof(*noun); w++) {
			size_t j = i + strlen(noun[w]), e = 0;

			if (!word_at(t, n, i, noun[w]))
				continue;
			while (j < n && t[j] == ' ')
				j++;
			if (j < n && t[j] == ':' && w == 0) {
				e = j + 1;
			} else if (cue_lead(t, i)) {
				e = cue_verb(t, n, j);
				if (!e && w == 0)
					e = cue_verb_after_to(t, n, j);
			}
			if (!e)
				continue;
			while (e < n && (t[e] == ' ' || t[e] == '*'))
				e++;
			if (e < n && t[e] == ':')
				e++;
			if (e > best)
				best = e;
		}
	}
	return best;
}

/* An abbreviation's dot at t[d] ("St. Louis", "approx. 5", "i.e. one
 * half"), which does not end the answer's sentence. */
static bool abbrev_dot(const char *t, size_t a, size_t d)
{
	static const char *const ab[] = {"st", "mr", "mrs", "ms", "dr",
					 "prof", "jr", "sr", "mt", "ft", "vs",
					 "approx", "ca", "cf", "no", "vol",
					 "fig", "eq"};
	size_t s = d;

	while (s > a && ((t[s - 1] >= 'a' && t[s - 1] <= 'z') ||
			 (t[s - 1] >= 'A' && t[s - 1] <= 'Z')))
		s--;
	if (d - s == 1 && s >= a + 2 && t[s - 1] == '.' &&
	    alnum((uchar)t[s - 2]))
		return true; /* the second dot of "i.e." or "e.g." */
	for (size_t k = 0; k < sizeof(ab) / sizeof(*ab); k++)
		if (d - s == strlen(ab[k]) && word_at(t, d, s, ab[k]))
			/* "no" that leads the span is the answer ("The
			 * answer is no. 9 is composite."); "No. 5" after
			 * other words is a number's */
			return strcmp(ab[k], "no") || s > a;
	return false;
}

/* The end of a math block that opens at t[a] ("\(", "\[", "$$") and
 * closes within t[0, n), past its closing delimiter; 0 when none. */
static size_t math_block(const char *t, size_t a, size_t n)
{
	const char *close;

	if (a + 2 > n)
		return 0;
	close = !memcmp(t + a, "\\(", 2) ? "\\)" : !memcmp(t + a, "\\[", 2)
		? "\\]" : !memcmp(t + a, "$$", 2) ? "$$" : NULL;
	for (size_t i = a + 2; close && i + 2 <= n; i++)
		if (!memcmp(t + i, close, 2))
			return i + 2;
	return 0;
}

/* The span after the last cue (answer_cue), to the end of its line or
 * sentence; a cue that ends its line ("Final Answer:", a heading) reads
 * the next non-empty line. false when there is none. */
static bool answer_is(const char *t, size_t n, size_t *a, size_t *b)
{
	size_t best = answer_cue(t, n);

	if (!best) {
		/* a heading line "### Final Answer" (no colon): the next
		 * line */
		for (size_t i = 0; i < n; i++) {
			size_t e = i;

			if (i && t[i - 1] != '\n')
				continue;
			while (e < n && (t[e] == '#' || t[e] == '*' ||
					 t[e] == ' '))
				e++;
			if (word_at(t, n, e, "final"))
				e += 5;
			while (e < n && t[e] == ' ')
				e++;
			if (!word_at(t, n, e, "answer"))
				continue;
			e += 6;
			while (e < n && (t[e] == '*' || t[e] == ' ' ||
					 t[e] == ':' || t[e] == '#'))
				e++;
			if (e == n || t[e] == '\n' || t[e] == '\r')
				best = e;
		}
		if (!best)
			return false;
	}
	*a = best;
	/* the rest of the cue's line blank: the next non-empty line */
	{
		size_t k = best;

		while (k < n && (t[k] == ' ' || t[k] == '\t' || t[k] == '\r'))
			k++;
		if (k < n && t[k] == '\n') {
			while (k < n && space((uchar)t[k]))
				k++;
			*a = k;
		}
	}
	/* a math block that opens the span runs to its close, over lines
	 * and points ("Answer:\n\[ \frac{1}{2} \]" over three lines,
	 * "\( 1.5 \)") */
	if (!(*b = math_block(t, *a, n))) {
		*b = *a;
		while (*b < n && t[*b] != '\n' &&
		       !(t[*b] == '.' && (*b + 1 == n ||
					  space((uchar)t[*b + 1])) &&
			 !abbrev_dot(t, *a, *b)))
			(*b)++;
	}
	trim(t, a, b);
	/* "**B**", "** 12", "$5$", "$$\frac12$$", "\(\frac12\)", "\[ 7 \]":
	 * the markup around it */
	for (;;) {
		size_t a0 = *a, b0 = *b;

		while (*a < *b && (t[*a] == '*' || t[*a] == '_'))
			(*a)++;
		while (*b > *a && (t[*b - 1] == '*' || t[*b - 1] == '_'))
			(*b)--;
		if (*b - *a >= 2 && t[*a] == '$' && t[*b - 1] == '$') {
			(*a)++;
			(*b)--;
		}
		if (*b - *a >= 4 && t[*a] == '\\' && t[*b - 2] == '\\' &&
		    ((t[*a + 1] == '(' && t[*b - 1] == ')') ||
		     (t[*a + 1] == '[' && t[*b - 1] == ']'))) {
			*a += 2;
			*b -= 2;
		}
		trim(t, a, b);
		if (*a == a0 && *b == b0)
			break;
	}
	return *b > *a;
}

/* The last non-empty line of t[0, n). */
static bool last_line(const char *t, size_t n, size_t *a, size_t *b)
{
	size_t e = n;

	while (e > 0) {
		size_t s = e;

		while (s > 0 && t[s - 1] != '\n')
			s--;
		*a = s;
		*b = e;
		trim(t, a, b);
		if (*b > *a)
			return true;
		e = s ? s - 1 : 0;
	}
	return false;
}

/* ---- per format --------------------------------------------------------- */

static bool put(char *out, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	return n > 0;
}

/* t[*a, *b) without the text commands wrapped around all of it, as a
 * box holds a word: "\text{Paris}", "\textbf{B}", "\mathrm{B}". */
static void unwrap_text(const char *t, size_t *a, size_t *b)
{
	static const char *const cmd[] = {"text", "textbf", "textit",
					  "textrm", "textsf", "texttt",
					  "mathrm", "mathbf", "mathit",
					  "mathsf", "mbox", "emph",
					  "boldsymbol"};

	for (;;) {
		size_t o = 0;

		trim(t, a, b);
		for (size_t k = 0; k < sizeof(cmd) / sizeof(*cmd) && !o; k++) {
			size_t m = strlen(cmd[k]);

			if (*b - *a > m + 2 && t[*a] == '\\' &&
			    !memcmp(t + *a + 1, cmd[k], m) &&
			    t[*a + 1 + m] == '{')
				o = *a + 1 + m;
		}
		if (!o || t[*b - 1] != '}')
			break;
		/* its group closes at the end, not before:
		 * "\text{a}+\text{b}" */
		for (size_t i = o, d = 0; i < *b; i++) {
			d += t[i] == '{';
			if (t[i] == '}' && --d == 0 && i + 1 < *b)
				return;
		}
		*a = o + 1;
		(*b)--;
	}
}

/* t[i, b) opens with a word that gives a reason for what comes before
 * it ("B because ...", "yes since ..."). */
static bool reason_at(const char *t, size_t b, size_t i)
{
	return word_at(t, b, i, "because") || word_at(t, b, i, "since") ||
	       word_at(t, b, i, "as");
}

/* A lone letter A-J in t[a, b), with its usual wrappings: "B", "(B)",
 * "B)", "B.", "**B**", "\text{(B)}", "\textbf{B}", "option B"; a small
 * letter where a bracket marks it, "(b)", "b)" (alone, "a" is a word).
 * The letter in upper case, or 0. text_after 1: also marked and followed
 * by text, "B) 15", "B: 15" (a line that leads with its option); 2
 * (after a cue, in a box): followed by anything past a space, ',' or ';'
 * too ("the answer is B because ...", "B, since"); 3 (auto, after a
 * cue, in a box or alone: the letter must be an option's), as 2, but a
 * space after a bare letter only before a reason ("B because ...", not
 * "A prime", "I think"). */
static int letter_of(const char *t, size_t a, size_t b, int text_after)
{
	size_t i;
	int up;

	trim(t, &a, &b);
	unwrap_text(t, &a, &b);
	if (b - a >= 7 && !strncasecmp(t + a, "option ", 7))
		a += 7;
	size_t a0 = a;

	while (b > a && (t[a] == '*' || t[a] == '(' || t[a] == '[' ||
			 t[a] == '$'))
		a++;
	if (a >= b)
		return 0;
	up = t[a] >= 'a' && t[a] <= 'j' ? t[a] - 32 : t[a];
	if (up < 'A' || up > 'J')
		return 0;
	i = a + 1;
	if (i < b && alnum((uchar)t[i]))
		return 0; /* a word */
	if (up != t[a] && !(a > a0 && strchr("([", t[a - 1])) &&
	    !(i < b && t[i] == ')'))
		return 0; /* a small letter only marked: "(b)", "b)" */
	while (i < b && strchr(")].*:$", t[i]))
		i++;
	/* "B" alone, or "B) 15", "B: 15" (the letter leads, marked); not
	 * "I think" on a line of its own */
	if (i < b && i == a + 1 && text_after >= 2) {
		size_t w = i;

		while (w < b && space((uchar)t[w]))
			w++;
		if (t[i] == ',' || t[i] == ';' ||
		    (w > i && (text_after == 2 || reason_at(t, b, w))))
			return up;
	}
	if (i < b && (i == a + 1 || !space((uchar)t[i]) || !text_after))
		return 0;
	/* a line's "(A) is wrong, (C) is right": the last of them
	 * (last_letter), not the first */
	if (i < b && text_after == 1 && memchr(t + a0, '(', a - a0))
		return 0;
	return up;
}

/* The last standalone letter of the choice patterns in t[0, n): "(B)",
 * "(b)" or "option B", in upper case. */
static int last_letter(const char *t, size_t n)
{
	for (size_t i = n; i-- > 0;) {
		int up = t[i] >= 'a' && t[i] <= 'j' ? t[i] - 32 : t[i];

		if (up < 'A' || up > 'J')
			continue;
		if (i > 0 && t[i - 1] == '(' && i + 1 < n && t[i + 1] == ')')
			return up;
		if (i >= 7 && !strncasecmp(t + i - 7, "option ", 7) &&
		    (i + 1 == n || !alnum((uchar)t[i + 1])))
			return up;
	}
	return 0;
}

/* The word before t[i] within t[a, i) (spaces, quotes and '*' between)
 * negates it: "not", "never", or a word ending "n't" ("isn't yes",
 * "is not true", "wasn’t false"). */
static bool negated(const char *t, size_t a, size_t i)
{
	size_t e = i;

	while (e > a && (t[e - 1] == ' ' || t[e - 1] == '"' ||
			 t[e - 1] == '*' || t[e - 1] == '\''))
		e--;
	if (e - a >= 3 && word_at(t, e, e - 3, "not"))
		return true;
	if (e - a >= 5 && word_at(t, e, e - 5, "never"))
		return true;
	if (e - a >= 3 && (t[e - 1] == 't' || t[e - 1] == 'T') &&
	    (t[e - 2] == '\'') && (t[e - 3] == 'n' || t[e - 3] == 'N'))
		return true;
	/* the apostrophe U+2019 */
	return e - a >= 5 && (t[e - 1] == 't' || t[e - 1] == 'T') &&
	       !memcmp(t + e - 4, "\xe2\x80\x99", 3) &&
	       (t[e - 5] == 'n' || t[e - 5] == 'N');
}

/* yes / no of t[a, b): the word alone (any case, punctuation around it),
 * else the last of yes/no/true/false standing as a word in it; a word
 * after a negation is its opposite ("The answer isn't yes." is no). */
/* The words yesno reads: even indices yes, odd no. */
static const char *const YESNO_WORDS[4] = {"yes", "no", "true", "false"};

static int yesno_of(const char *t, size_t a, size_t b, int last)
{
	const char *const *w = YESNO_WORDS;
	int found = 0;

	for (size_t i = a; i < b; i++) {
		if (i > a && alnum((uchar)t[i - 1]))
			continue;
		for (int k = 0; k < 4; k++) {
			size_t m = strlen(w[k]), j = 0;

			while (j < m && i + j < b && lower((uchar)t[i + j]) == w[k][j])
				j++;
			if (j == m && (i + m == b || !alnum((uchar)t[i + m]))) {
				found = (k == 0 || k == 2) != negated(t, a, i)
					? 'y' : 'n';
				if (!last)
					return found;
			}
		}
	}
	return found;
}

/* The lower case of a letter of U+0080..U+07FF (Latin-1, Latin
 * Extended-A, Greek, Cyrillic: the capitals a text answer holds most),
 * else cp itself. The result stays in that range (two UTF-8 bytes). */
static unsigned fold_lower(unsigned cp)
{
	if ((cp >= 0xc0 && cp <= 0xde && cp != 0xd7) ||
	    (cp >= 0x391 && cp <= 0x3ab && cp != 0x3a2) ||
	    (cp >= 0x410 && cp <= 0x42f))
		return cp + 0x20;
	if (cp >= 0x400 && cp <= 0x40f)
		return cp + 0x50;
	if (cp == 0x178)
		return 0xff;
	if (((cp >= 0x100 && cp <= 0x137) || (cp >= 0x14a && cp <= 0x177)) &&
	    !(cp & 1) && cp != 0x130)
		return cp + 1;
	if (((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e)) &&
	    (cp & 1))
		return cp + 1;
	return cp;
}

/* Word w[0, wn) at out + *o, a space before it unless first; false
 * when it does not fit cap. */
static bool put_word(char *out, size_t cap, size_t *o, const char *w,
		     size_t wn)
{
	if (*o && *o + 1 < cap)
		out[(*o)++] = ' ';
	if (*o + wn >= cap)
		return false;
	memcpy(out + *o, w, wn);
	*o += wn;
	return true;
}

/* The code point of the UTF-8 sequence of 1 or 2 bytes ending at
 * o[n - 1], and its length (*len), or -1 when o does not end in one. */
static long last_cp(const char *o, size_t n, size_t *len)
{
	if (n && (uchar)o[n - 1] < 0x80) {
		*len = 1;
		return (uchar)o[n - 1];
	}
	if (n >= 2 && ((uchar)o[n - 2] & 0xe0) == 0xc0 &&
	    ((uchar)o[n - 1] & 0xc0) == 0x80) {
		*len = 2;
		return ((long)((uchar)o[n - 2] & 0x1f) << 6) |
		       ((uchar)o[n - 1] & 0x3f);
	}
	return -1;
}

/* base + mark as one character (sc/compose.h), or -1. */
static long composed(long base, long mark)
{
	size_t lo = 0, hi = sizeof(COMPOSE) / sizeof(*COMPOSE);

	while (lo < hi) {
		size_t m = (lo + hi) / 2;

		if (COMPOSE[m][0] < base ||
		    (COMPOSE[m][0] == base && COMPOSE[m][1] < mark))
			lo = m + 1;
		else
			hi = m;
	}
	return lo < sizeof(COMPOSE) / sizeof(*COMPOSE) &&
			       COMPOSE[lo][0] == base && COMPOSE[lo][1] == mark
		       ? COMPOSE[lo][2] : -1;
}

/* t[a, b) with each combining mark of U+0300..U+036F that Unicode
 * composes with the letter before it composed into it, into o (b - a
 * bytes at most: a composition never grows the text): "Cafe" + U+0301
 * is "Café", as NFC writes it. The length written. */
static size_t compose_marks(const char *t, size_t a, size_t b, char *o)
{
	size_t n = 0;

	for (size_t i = a; i < b; i++) {
		if (i + 1 < b && ((uchar)t[i] == 0xcc ||
				  ((uchar)t[i] == 0xcd && (uchar)t[i + 1] < 0xb0)) &&
		    ((uchar)t[i + 1] & 0xc0) == 0x80) {
			long mark = ((long)((uchar)t[i] & 0x1f) << 6) |
				    ((uchar)t[i + 1] & 0x3f), base, c;
			size_t bl;

			if ((base = last_cp(o, n, &bl)) >= 0 &&
			    (c = composed(base, mark)) >= 0) {
				n -= bl;
				if (c < 0x80) {
					o[n++] = (char)c;
				} else {
					o[n++] = (char)(0xc0 | (c >> 6));
					o[n++] = (char)(0x80 | (c & 0x3f));
				}
				i++;
				continue;
			}
		}
		o[n++] = t[i];
	}
	return n;
}

static bool norm_words(const char *t, size_t a, size_t b, char *out,
		       size_t cap);

/* SQuAD's normalisation of t[a, b) into out, its letters and marks
 * composed first (compose_marks) where it has marks. */
static bool norm_text(const char *t, size_t a, size_t b, char *out,
		      size_t cap)
{
	char *c;
	size_t n;
	bool ok;

	if (!memchr(t + a, 0xcc, b - a) && !memchr(t + a, 0xcd, b - a))
		return norm_words(t, a, b, out, cap);
	if (!(c = malloc(b - a + 1)))
		return false;
	n = compose_marks(t, a, b, c);
	ok = norm_words(c, 0, n, out, cap);
	free(c);
	return ok;
}

/* SQuAD's normalisation of t[a, b) into out: lower case, articles and
 * punctuation out, one space between words. */
static bool norm_words(const char *t, size_t a, size_t b, char *out,
		       size_t cap)
{
	char w[64];
	size_t o = 0, wn = 0;
	int spilled = 0; /* the word's head already in out (a long word) */

	int next = -1; /* a folded letter's second byte */

	for (size_t i = a; i <= b; i++) {
		int c = next >= 0 ? next : i < b ? lower((uchar)t[i]) : ' ';

		if (next < 0 && c >= 0xc2 && c <= 0xdf && i + 1 < b &&
		    ((uchar)t[i + 1] & 0xc0) == 0x80) {
			/* a two-byte letter: its lower case ("CAFÉ" is
			 * "café", "ZÜRICH" "zürich") */
			unsigned cp = fold_lower(((unsigned)(c & 0x1f) << 6) |
						 ((uchar)t[i + 1] & 0x3f));

			c = 0xc0 | (int)(cp >> 6);
			next = 0x80 | (int)(cp & 0x3f);
		} else {
			next = -1;
		}
		/* between digits a point stays ("3.5" is not "35") and a
		 * separator goes ("1,000" is "1000") */
		int num = (c == '.' || c == ',') && i > a && i + 1 < b &&
			  t[i - 1] >= '0' && t[i - 1] <= '9' &&
			  t[i + 1] >= '0' && t[i + 1] <= '9';

		if (num && c == ',')
			continue;
		if (alnum(c) || c >= 0x80 || num) {
			if (wn + 1 < sizeof(w) && !spilled) {
				w[wn++] = (char)c;
				continue;
			}
			if (!spilled) {
				/* a long word: out from here on, whole */
				if (!put_word(out, cap, &o, w, wn))
					return false;
				spilled = 1;
			}
			if (o + 1 >= cap)
				return false;
			out[o++] = (char)c;
			continue;
		}
		if (spilled) {
			spilled = 0;
			wn = 0;
		}
		if (!strchr(" \t\n\r\v\f", c) && c != '-' && c != '/')
			continue; /* punctuation goes */
		if (wn && !((wn == 1 && w[0] == 'a') ||
			    (wn == 2 && !memcmp(w, "an", 2)) ||
			    (wn == 3 && !memcmp(w, "the", 3))) &&
		    !put_word(out, cap, &o, w, wn))
			return false;
		wn = 0;
	}
	out[o] = '\0';
	return o > 0;
}

/* The span: box, else "the answer is", else (fallback_line) the last
 * line. */
static bool span(const char *t, size_t n, int fallback_line, size_t *a,
		 size_t *b, int *boxed)
{
	*boxed = 0;
	if (vote_last_box(t, n, a, b)) {
		*boxed = 1;
		return true;
	}
	if (answer_is(t, n, a, b))
		return true;
	return fallback_line && last_line(t, n, a, b);
}

/* Words that lead an answer's value without being part of it: "the
 * answer is about 7", "... is therefore 12", "... equal to 5". */
static const char *const FILLER[] = {"about", "approximately", "approx.",
				     "approx", "roughly", "around", "exactly",
				     "just", "therefore", "thus", "so", "then",
				     "now", "simply", "equal to", "equals",
				     "is", "=", "\approx", "~"};

/* t[a, b) holds a word of two letters or more (not a command's name). */
static bool has_word(const char *t, size_t a, size_t b)
{
	for (size_t i = a, run = 0; i < b; i++) {
		int letter = (t[i] >= 'a' && t[i] <= 'z') ||
			     (t[i] >= 'A' && t[i] <= 'Z');

		run = letter ? run + 1 : 0;
		if (run == 2 && !(i >= a + 2 && t[i - 2] == '\\'))
			return true;
	}
	return false;
}

/*
 * The math key of the span t[a, b) as a value: the span itself when it
 * parses; else without its leading filler words, and cut before a
 * comment (", i.e. ...", " (or 0.5)", "; ..."), when that parses ("The
 * answer is about 7", "$\frac12$ (or 0.5)", "0.5, i.e. one half").
 * *parsed says whether the key is a parse (else the span's spelling).
 */
static bool span_math(const char *t, size_t a, size_t b, char *out,
		      size_t cap, bool *parsed)
{
	const size_t a0 = a, b0 = b;
	size_t e;

	bool whole = mathkey(t + a, b - a, out, cap, parsed);

	/* a value; or with variables ("x + 1"), unless a comment's words
	 * made them ("\frac12 (or 0.5)": o and r), tried below */
	if (whole && *parsed && strncmp(out, "f[", 2))
		return true;
	for (int again = 1; again;) {
		again = 0;
		for (size_t k = 0; k < sizeof(FILLER) / sizeof(*FILLER); k++) {
			size_t m = strlen(FILLER[k]);

			if (b - a > m && !strncasecmp(t + a, FILLER[k], m) &&
			    (space((uchar)t[a + m]) || !alnum((uchar)t[a]))) {
				a += m;
				trim(t, &a, &b);
				again = 1;
			}
		}
	}
	/* the comment: ", " or "; " or " (" before words ("or", "i.e.",
	 * "since"; not a list's next element "y = 3"), or a reason ("6
	 * because 2 times 3 is 6", "6 apples since ...") */
	for (e = a; e < b; e++)
		if (((((t[e] == ',' || t[e] == ';') && e + 1 < b &&
		       space((uchar)t[e + 1])) ||
		      (t[e] == '(' && e > a && space((uchar)t[e - 1]))) &&
		     has_word(t, e, b)) ||
		    (e > a && space((uchar)t[e]) && reason_at(t, b, e + 1)))
			break;
	for (int cut = 0; cut < 2; cut++) {
		size_t x = a, y = cut ? e : b;
		char k[VOTE_ANSWER_MAX];
		bool p;

		trim(t, &x, &y);
		if ((cut || a != a0) && y > x && (!cut || e < b) &&
		    mathkey(t + x, y - x, k, sizeof(k), &p) && p &&
		    (strncmp(k, "f[", 2) || !*parsed) && strlen(k) < cap) {
			strcpy(out, k);
			*parsed = true;
			return true;
		}
	}
	/* the whole span's key: its variables or its spelling */
	return whole && mathkey(t + a0, b0 - a0, out, cap, parsed);
}

static bool key_math(const char *t, size_t n, char *out, size_t cap)
{
	size_t a, b;
	int boxed;
	char num[128];

	bool parsed;

	if (span(t, n, 0, &a, &b, &boxed)) {
		/* "the answer is 42 apples" -> 42; a span with an '=' keeps
		 * its right-hand side (mathkey) */
		if (boxed ? mathkey(t + a, b - a, out, cap, NULL)
			  : span_math(t, a, b, out, cap, &parsed))
			return true;
	}
	/* a last line that is all math: "\frac{1}{2}", "x = 3/4" */
	if (last_line(t, n, &a, &b) &&
	    mathkey(t + a, b - a, out, cap, &parsed) && parsed)
		return true;
	if (!vote_last_number(t, n, num, sizeof(num)))
		return false;
	{
		/* a plain fraction at the end: "so it is 3/4" */
		size_t e = n, s0, s1;

		while (e > 0 && !(t[e - 1] >= '0' && t[e - 1] <= '9'))
			e--;
		s1 = e;
		while (s1 > 0 && t[s1 - 1] >= '0' && t[s1 - 1] <= '9')
			s1--;
		s0 = s1;
		if (s1 > 1 && t[s1 - 1] == '/' && t[s1 - 2] >= '0' &&
		    t[s1 - 2] <= '9') {
			s0 = s1 - 1;
			while (s0 > 0 && t[s0 - 1] >= '0' && t[s0 - 1] <= '9')
				s0--;
			if ((s0 == 0 || !alnum((uchar)t[s0 - 1])) &&
			    mathkey(t + s0, e - s0, out, cap, NULL))
				return true;
		}
	}
	return mathkey(num, strlen(num), out, cap, NULL);
}

static bool norm_text(const char *t, size_t a, size_t b, char *out,
		      size_t cap);

/* The letter of the option in "A=12|B=1/2|C=Paris" that the answer
 * t[a, b) gives: the same words (SQuAD's normalisation: "paris" is C,
 * "2 m" is "2 m"), else the same value (math keys: "0.5" is B) when one
 * option alone has it (units are no part of a math key: "2 m" is not
 * "2 cm", nor is "2 meters" either of them); or 0. */
static int option_letter(const char *opts, const char *t, size_t a,
			 size_t b)
{
	char k[256], kt[256], ok[256];
	bool hk = mathkey(t + a, b - a, k, sizeof(k), NULL);
	bool ht = norm_text(t, a, b, kt, sizeof(kt));
	int by_value = 0;

	for (const char *q = opts; *q;) {
		const char *bar = strchr(q, '|');
		size_t len = bar ? (size_t)(bar - q) : strlen(q);

		if (len > 2 && ht && norm_text(q, 2, len, ok, sizeof(ok)) &&
		    !strcmp(ok, kt))
			return q[0];
		if (len > 2 && hk && mathkey(q + 2, len - 2, ok, sizeof(ok),
					     NULL) && !strcmp(ok, k))
			by_value = by_value ? -1 : q[0];
		q += len + (bar != NULL);
	}
	return by_value > 0 ? by_value : 0;
}

/* Whether the options "A=12|B=15" name letter L. */
static bool has_option(const char *opts, int L)
{
	for (const char *q = opts; *q; q++)
		if (q[0] == L && q[1] == '=' && (q == opts || q[-1] == '|'))
			return true;
	return false;
}

/* The letter of the span t[a, b) after a cue or in a box (letter_of,
 * 2). The pronoun "I" that leads it ("I would pick B", "I think B") is
 * no option I unless the options are known and include I: the letter is
 * then the next one standing alone in the span's first ANSWER_LINE_MAX
 * bytes (a bound on the work for a long span). */
static int span_letter(const char *opts, const char *t, size_t a, size_t b)
{
	int c = letter_of(t, a, b, 2);
	const size_t end = b - a > ANSWER_LINE_MAX ? a + ANSWER_LINE_MAX : b;

	while (c == 'I' && !has_option(opts, 'I')) {
		size_t i = a;

		while (i < b && (space((uchar)t[i]) || t[i] == '*'))
			i++;
		/* "I " then a word in lower case, not a reason ("I
		 * because ...") */
		if (i + 2 >= b || t[i] != 'I' || t[i + 1] != ' ' ||
		    t[i + 2] < 'a' || t[i + 2] > 'z' || reason_at(t, b, i + 2))
			break;
		c = 0;
		for (a = i + 2; a < end && !c; a++)
			if (space((uchar)t[a - 1]))
				c = letter_of(t, a, b, 2);
		a--;
	}
	return c;
}

static bool key_choice(const answer_format *f, const char *t, size_t n,
		       char *out, size_t cap)
{
	size_t a, b;
	int boxed, c;

	if (span(t, n, 1, &a, &b, &boxed)) {
		size_t x, y;
		/* "C) 7" or "C because" after "the answer is" or in a
		 * box; a last line that leads with its marked letter */
		int cue = boxed || answer_is(t, n, &x, &y);

		if ((c = cue ? span_letter(f->pattern, t, a, b)
			     : letter_of(t, a, b, 1))) {
			out[0] = (char)c;
			out[1] = '\0';
			return cap > 1;
		}
		if (boxed || answer_is(t, n, &a, &b)) {
			/* an option's text or value: its letter when the
			 * options are known */
			unwrap_text(t, &a, &b);
			if (!(c = option_letter(f->pattern, t, a, b)))
				return false;
			out[0] = (char)c;
			out[1] = '\0';
			return cap > 1;
		}
	}
	if ((c = last_letter(t, n)) ||
	    /* a last line that is an option's value or text ("15" when B
	     * is 15), with the options known */
	    (last_line(t, n, &a, &b) &&
	     (c = option_letter(f->pattern, t, a, b)))) {
		out[0] = (char)c;
		out[1] = '\0';
		return cap > 1;
	}
	return false;
}

static bool key_yesno(const char *t, size_t n, char *out, size_t cap)
{
	size_t a, b;
	int boxed, y = 0;

	if (span(t, n, 0, &a, &b, &boxed))
		y = yesno_of(t, a, b, 0);
	if (!y && last_line(t, n, &a, &b)) {
		/* the last line's leading word ("Yes, because the claim is
		 * false." is yes; "No. The claim is true." no), else the
		 * final sentence of the last line */
		size_t s = b, w = a;

		while (w < b && (t[w] == '*' || t[w] == '(' || t[w] == '"'))
			w++;
		y = word_at(t, b, w, "yes") || word_at(t, b, w, "true") ? 'y'
		    : word_at(t, b, w, "no") || word_at(t, b, w, "false") ? 'n'
		    : 0;
		if (y)
			return put(out, cap, y == 'y' ? "yes" : "no",
				   y == 'y' ? 3 : 2);

		while (s > a && !(t[s - 1] == '.' && s < b - 1) &&
		       t[s - 1] != '!' && t[s - 1] != '?')
			s--;
		y = yesno_of(t, s, b, 1);
		if (!y)
			y = yesno_of(t, a, b, 1);
	}
	if (!y)
		return false;
	return put(out, cap, y == 'y' ? "yes" : "no", y == 'y' ? 3 : 2);
}

static bool key_text(const char *t, size_t n, char *out, size_t cap)
{
	size_t a, b;
	int boxed;

	if (!span(t, n, 1, &a, &b, &boxed))
		return false;
	unwrap_text(t, &a, &b); /* \boxed{\text{Paris}} */
	while (b > a && t[b - 1] == '.')
		b--;
	return norm_text(t, a, b, out, cap);
}

/* exact: the answer's whole text as written, trimmed (a choice
 * constraint's option: "a" and "A", "3 apples" and "3 pears" apart). A
 * text longer than a key holds is its head, cut at a character, and the
 * FNV-1a of the whole: two texts stay apart. */
static bool key_exact(const char *t, size_t n, char *out, size_t cap)
{
	size_t a = 0, b = n, head;

	trim(t, &a, &b);
	if (b == a || cap < 32)
		return false;
	if (b - a < cap)
		return put(out, cap, t + a, b - a);
	head = cap - 20;
	while (head && ((uchar)t[a + head] & 0xc0) == 0x80)
		head--;
	memcpy(out, t + a, head);
	snprintf(out + head, cap - head, "#%016llx",
		 (unsigned long long)fnv1a(FNV_BASIS, t + a, b - a));
	return true;
}

static bool key_regex(const answer_format *f, const char *t, size_t n,
		      char *out, size_t cap)
{
	pcre2_code *c = compile(f->pattern, NULL);
	pcre2_match_data *md;
	PCRE2_SIZE at = 0, ga = 0, gb = 0;
	bool found = false;

	if (!c || !(md = pcre2_match_data_create_from_pattern(c, NULL)))
		return false;
	while (at <= n && pcre2_match(c, (PCRE2_SPTR)t, n, at,
				      PCRE2_NO_UTF_CHECK * 0, md, NULL) > 0) {
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		uint32_t groups = pcre2_get_ovector_count(md);

		found = true;
		ga = ov[0];
		gb = ov[1];
		if (groups > 1 && ov[2] != PCRE2_UNSET) {
			ga = ov[2];
			gb = ov[3];
		}
		at = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
	}
	pcre2_match_data_free(md);
	if (!found)
		return false;
	{
		size_t a = ga, b = gb;

		trim(t, &a, &b);
		return put(out, cap, t + a, b - a);
	}
}

/* RFC 6901: the value at pointer ptr in v, or NULL. */
static json_t *pointer(json_t *v, const char *ptr)
{
	char tok[ANSWER_PATTERN_MAX];

	while (*ptr == '/' && v) {
		size_t k = 0;

		ptr++;
		while (*ptr && *ptr != '/' && k + 1 < sizeof(tok)) {
			if (*ptr == '~' && (ptr[1] == '0' || ptr[1] == '1')) {
				tok[k++] = ptr[1] == '0' ? '~' : '/';
				ptr += 2;
			} else {
				tok[k++] = *ptr++;
			}
		}
		tok[k] = '\0';
		if (json_is_object(v)) {
			v = json_object_get(v, tok);
		} else if (json_is_array(v)) {
			char *end;
			long i = strtol(tok, &end, 10);

			v = k && *end == '\0' && i >= 0 &&
					(tok[0] != '0' || k == 1)
				    ? json_array_get(v, (size_t)i) : NULL;
		} else {
			v = NULL;
		}
	}
	return v;
}

static bool key_json(const answer_format *f, const char *t, size_t n,
		     char *out, size_t cap)
{
	json_t *doc, *v;
	bool ok = false;
	size_t a = 0, b = n;

	trim(t, &a, &b);
	if (!(doc = json_loadb(t + a, b - a, JSON_DECODE_ANY, NULL))) {
		/* the object inside the text */
		const char *l = memchr(t, '{', n), *r = NULL;

		for (size_t i = n; i > 0 && !r; i--)
			if (t[i - 1] == '}')
				r = t + i - 1;
		if (!l || !r || r < l ||
		    !(doc = json_loadb(l, (size_t)(r - l + 1), 0, NULL)))
			return false;
	}
	v = pointer(doc, f->pattern);
	if (json_is_integer(v) || json_is_real(v)) {
		char num[64];

		if (json_is_integer(v))
			snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
				 json_integer_value(v));
		else
			answer_number_text(json_real_value(v), num,
					   sizeof(num));
		ok = mathkey(num, strlen(num), out, cap, NULL);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);

		ok = norm_text(s, 0, json_string_length(v), out, cap);
	} else if (json_is_boolean(v)) {
		ok = put(out, cap, json_is_true(v) ? "true" : "false",
			 json_is_true(v) ? 4 : 5);
	} else if (json_is_object(v) || json_is_array(v)) {
		char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);

		ok = s && put(out, cap, s, strlen(s));
		free(s);
	}
	json_decref(doc);
	return ok;
}

/* t[a, b) reads as a short answer: up to ANSWER_LINE_MAX bytes and
 * ANSWER_LINE_WORDS words on one line, no control character and no
 * U+FFFD (a model's broken bytes are not an answer). */
static bool short_answer(const char *t, size_t a, size_t b)
{
	int words = 0, in = 0;

	if (b <= a || b - a > ANSWER_LINE_MAX)
		return false;
	for (size_t i = a; i < b; i++) {
		uchar c = (uchar)t[i];
		int k = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1
			: c >= 0xe0 && c <= 0xef ? 2
			: c >= 0xf0 && c <= 0xf4 ? 3 : -1;

		if (c < 0x20 || c == 0x7f || k < 0 || i + (size_t)k >= b ||
		    (c == 0xef && (uchar)t[i + 1] == 0xbf &&
		     (uchar)t[i + 2] == 0xbd))
			return false;
		/* whole UTF-8 sequences only */
		for (int j = 1; j <= k; j++)
			if (((uchar)t[i + (size_t)j] & 0xc0) != 0x80)
				return false;
		i += (size_t)k;
		if (c == ' ')
			in = 0;
		else if (!in && ++words > ANSWER_LINE_WORDS)
			return false;
		else
			in = 1;
	}
	return true;
}

/* t[a, b) is written as math: a digit, an operator or a command. */
static bool math_marks(const char *t, size_t a, size_t b)
{
	for (size_t i = a; i < b; i++)
		if ((t[i] >= '0' && t[i] <= '9') || strchr("+-*/^=\\", t[i]))
			return true;
	return false;
}

static bool has_digit(const char *t, size_t a, size_t b)
{
	for (size_t i = a; i < b; i++)
		if (t[i] >= '0' && t[i] <= '9')
			return true;
	return false;
}

/* The span t[a, b) as a value (span_math): without free variables, or
 * (vars) with them where it is written as math ("x + 1", not "Paris"). */
static bool auto_value(const char *t, size_t a, size_t b, char *out,
		       size_t cap, int vars)
{
	bool parsed;

	if (!span_math(t, a, b, out, cap, &parsed) || !parsed)
		return false;
	return strncmp(out, "f[", 2) || (vars && math_marks(t, a, b));
}

/* yes / no as the word t[a, b) leads with, followed by nothing, a
 * point or a comma ("yes, because 7 is prime", "No. 9 is composite") or
 * a reason ("yes because ..."): 'y', 'n' or 0. */
static int lead_yesno(const char *t, size_t a, size_t b)
{
	const char *const *w = YESNO_WORDS;

	while (a < b && (space((uchar)t[a]) || t[a] == '*' || t[a] == '"'))
		a++;
	for (int k = 0; k < 4; k++) {
		size_t e = a + strlen(w[k]);

		if (!word_at(t, b, a, w[k]))
			continue;
		while (e < b && (t[e] == '*' || t[e] == '"'))
			e++;
		if (e == b || strchr(",.;:!", t[e]) ||
		    (space((uchar)t[e]) && reason_at(t, b, e + 1)))
			return k % 2 ? 'n' : 'y';
	}
	return 0;
}

/* An option's letter (letter_of, 3) or yes/no (alone, or leading the
 * span: lead_yesno) in t[a, b), keyed into out; -1 when neither. */
static int auto_word(const char *t, size_t n, size_t a, size_t b, char *out,
		     size_t cap)
{
	int c;

	if ((c = letter_of(t, a, b, 3))) {
		out[0] = (char)c;
		out[1] = '\0';
		return cap > 1;
	}
	if (b - a <= 6 && yesno_of(t, a, b, 0))
		return key_yesno(t, n, out, cap);
	if ((c = lead_yesno(t, a, b)))
		return put(out, cap, c == 'y' ? "yes" : "no", c == 'y' ? 3 : 2);
	return -1;
}

static bool key_auto(const char *t, size_t n, char *out, size_t cap)
{
	size_t a, b;
	int w;
	bool parsed;

	if (vote_last_box(t, n, &a, &b)) {
		if ((w = auto_word(t, n, a, b, out, cap)) >= 0)
			return w;
		if (mathkey(t + a, b - a, out, cap, &parsed) && parsed)
			return true;
		/* a word's box ("\boxed{\text{Paris}}") as the same words
		 * after a cue key; else, as the number rule keeps it, byte
		 * for byte */
		unwrap_text(t, &a, &b);
		if (!has_digit(t, a, b) && short_answer(t, a, b) &&
		    norm_text(t, a, b, out, cap))
			return true;
		return vote_extract(t, n, out, cap);
	}
	if (answer_is(t, n, &a, &b)) {
		if ((w = auto_word(t, n, a, b, out, cap)) >= 0)
			return w;
		/* "the answer is 1/2": math when it reads as a value, or
		 * as math with variables ("x + 1"); a plain number keys as
		 * the number rule would */
		if (auto_value(t, a, b, out, cap, 1))
			return true;
		/* "the answer is Paris": its words, as the short line
		 * "Paris" keys */
		unwrap_text(t, &a, &b);
		if (!has_digit(t, a, b) && short_answer(t, a, b))
			return norm_text(t, a, b, out, cap);
		return vote_extract(t, n, out, cap);
	}
	/* a whole text of one short line ("yes", "B", "Paris", "1/2":
	 * what a choice constraint writes) is its own answer */
	a = 0;
	b = n;
	trim(t, &a, &b);
	if (short_answer(t, a, b)) {
		if ((w = auto_word(t, n, a, b, out, cap)) >= 0)
			return w;
		if (has_digit(t, a, b) && auto_value(t, a, b, out, cap, 1))
			return true;
		return vote_extract(t, n, out, cap) ||
		       norm_text(t, a, b, out, cap);
	}
	/* a last line that is a value ("$$\frac{1}{2}$$" under a heading),
	 * else the last number; with none, a last line that leads with
	 * yes/no ("No, because the number is odd.") */
	if (last_line(t, n, &a, &b) && has_digit(t, a, b) &&
	    auto_value(t, a, b, out, cap, 0))
		return true;
	if (vote_extract(t, n, out, cap))
		return true;
	if (last_line(t, n, &a, &b) && (w = lead_yesno(t, a, b)))
		return put(out, cap, w == 'y' ? "yes" : "no", w == 'y' ? 3 : 2);
	return false;
}

/* The text of a JSON number as its writer meant it: the shortest
 * decimal that reads back as the same double ("0.1", not
 * "0.10000000000000001"), integers without a point. */
void answer_number_text(double v, char *out, size_t cap)
{
	for (int p = 1; p <= 17; p++) {
		snprintf(out, cap, "%.*g", p, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

const char *answer_no_answer_reason(const answer_format *f, const char *text,
				    size_t len)
{
	static const char *const why[ANSWER_KINDS_] = {
		[ANSWER_AUTO] = "no boxed answer, stated answer or number",
		[ANSWER_NUMBER] = "no boxed answer or number",
		[ANSWER_MATH] = "no boxed answer, stated answer or math",
		[ANSWER_CHOICE] = "no option letter (A-J) or option",
		[ANSWER_YESNO] = "no yes/no/true/false",
		[ANSWER_TEXT] = "no boxed answer, stated answer or last line",
		[ANSWER_REGEX] = "no match of the pattern",
		[ANSWER_JSON] = "no JSON value at the pointer",
		[ANSWER_SELECT] = "no answer its format reads",
		[ANSWER_EXACT] = "no text",
	};
	const char *v = vote_no_answer_reason(text, len);

	/* the channel's or the thinking's diagnosis comes first */
	if (text && strcmp(v, vote_no_answer_reason(NULL, 0)))
		return v;
	if (!f || f->kind < 0 || f->kind >= ANSWER_KINDS_)
		return "no answer its format reads";
	return why[f->kind];
}

void answer_shown(const char *key, const char *text, size_t len, char *out,
		  size_t cap)
{
	size_t s, e, a, b, o = 0;
	int boxed;

	if (!cap)
		return;
	out[0] = '\0';
	if (!key)
		return;
	if (strncmp(key, "f[", 2) && strncmp(key, "s:", 2)) {
		snprintf(out, cap, "%s", key);
		return;
	}
	if (!text || !vote_answer_region(text, len, &s, &e) ||
	    !span(text + s, e - s, 1, &a, &b, &boxed)) {
		snprintf(out, cap, "%s", key);
		return;
	}
	text += s;
	/* one line: its line breaks and tabs as spaces, runs as one */
	for (size_t i = a; i < b && o + 1 < cap; i++) {
		char ch = space((uchar)text[i]) ? ' ' : text[i];

		if (ch == ' ' && (!o || out[o - 1] == ' '))
			continue;
		out[o++] = ch;
	}
	while (o && out[o - 1] == ' ')
		o--;
	/* a cut inside a UTF-8 character: back to its start */
	if (o + 1 >= cap)
		while (o && ((uchar)out[o - 1] & 0xc0) == 0x80)
			o--;
	if (o && o + 1 >= cap && ((uchar)out[o - 1] & 0xc0) == 0xc0)
		o--;
	out[o] = '\0';
	if (!o)
		snprintf(out, cap, "%s", key);
}

bool answer_extract(const answer_format *f, const char *text, size_t len,
		    char *out, size_t cap)
{
	size_t s, e;

	if (!out || !cap)
		return false;
	out[0] = '\0';
	if (!f || f->kind == ANSWER_NUMBER)
		return vote_extract(text, len, out, cap);
	if (!vote_answer_region(text, len, &s, &e))
		return false;
	text += s;
	len = e - s;
	switch (f->kind) {
	case ANSWER_MATH: return key_math(text, len, out, cap);
	case ANSWER_CHOICE: return key_choice(f, text, len, out, cap);
	case ANSWER_YESNO: return key_yesno(text, len, out, cap);
	case ANSWER_TEXT:
	case ANSWER_SELECT: return key_text(text, len, out, cap);
	case ANSWER_REGEX: return key_regex(f, text, len, out, cap);
	case ANSWER_JSON: return key_json(f, text, len, out, cap);
	case ANSWER_EXACT: return key_exact(text, len, out, cap);
	default: return key_auto(text, len, out, cap);
	}
}

void answer_expected_key(const answer_format *f, const char *s, size_t len,
			 char *out, size_t cap)
{
	size_t a = 0, b = len;
	char *boxed;

	if (!cap)
		return;
	trim(s, &a, &b);
	/* as a sample that gave exactly it, boxed (so a number, a letter,
	 * yes, a math expression read as the answer itself) */
	if ((boxed = malloc(b - a + 16))) {
		int k = f ? f->kind : ANSWER_NUMBER;

		if (k == ANSWER_AUTO && answer_extract(f, s + a, b - a, out,
						       cap)) {
			/* auto keys by the answer's shape: the expected
			 * answer as a sample that wrote exactly it ("Paris"
			 * is "paris", "1/2" 0.5), else boxed below */
			free(boxed);
			return;
		}
		if (k == ANSWER_JSON) {
			/* the field's value as written: a number keys as
			 * math, anything else as text */
			bool parsed;

			if ((mathkey(s + a, b - a, out, cap, &parsed) &&
			     parsed && out[0] != 's' && out[0] != 'f') ||
			    norm_text(s, a, b, out, cap)) {
				free(boxed);
				return;
			}
		} else if (k == ANSWER_EXACT) {
			if (key_exact(s + a, b - a, out, cap)) {
				free(boxed);
				return;
			}
		} else if (k == ANSWER_REGEX || k == ANSWER_TEXT ||
			   k == ANSWER_SELECT) {
			/* as a sample is read ("\boxed{11}" is 11, "The
			 * answer is Paris." paris), else the words as they
			 * are (a regex's value itself) */
			if (answer_extract(f, s + a, b - a, out, cap) ||
			    (k != ANSWER_REGEX &&
			     norm_text(s, a, b, out, cap)) ||
			    (k == ANSWER_REGEX && put(out, cap, s + a, b - a))) {
				free(boxed);
				return;
			}
		} else {
			/* a choice's letter in either case ("b", "(b)") */
			if (k == ANSWER_CHOICE) {
				size_t x = a, y = b;

				if (y > x && s[y - 1] == '.')
					y--;
				if (y - x == 3 && s[x] == '(' && s[y - 1] == ')')
					x++, y--;
				else if (y - x == 2 && s[y - 1] == ')')
					y--;
				if (y - x == 1 && s[x] >= 'a' && s[x] <= 'j') {
					out[0] = (char)(s[x] - 'a' + 'A');
					if (cap > 1) {
						out[1] = '\0';
						free(boxed);
						return;
					}
				}
			}
			memcpy(boxed, "\\boxed{", 7);
			memcpy(boxed + 7, s + a, b - a);
			boxed[7 + b - a] = '}';
			if (answer_extract(f, boxed, b - a + 8, out, cap)) {
				free(boxed);
				return;
			}
		}
		free(boxed);
	}
	if (b - a >= cap)
		b = a + cap - 1;
	memcpy(out, s + a, b - a);
	out[b - a] = '\0';
}

/* The option letter at q[i] as 0-9: A-J, or a-j where a bracket marks
 * it ("(a) London", "a) London"; "e.g." is no option E); else -1. */
static int option_at(const char *q, size_t n, size_t i)
{
	if (q[i] >= 'A' && q[i] <= 'J')
		return q[i] - 'A';
	if (q[i] >= 'a' && q[i] <= 'j' && i + 1 < n && q[i + 1] == ')')
		return q[i] - 'a';
	return -1;
}

/* The options a question lists: letter -> its text (option_letter keys
 * it). "A) 12 B) 15", "(A) 12 (B) 15", "A. 12" on its own line; in small
 * letters "(a) 12 (b) 15", "a) 12". How many; -1 when one cannot be kept
 * (a '|' in it, or ANSWER_PATTERN_MAX bytes or more). */
static int options(const char *q, size_t n,
		   char keys[10][ANSWER_PATTERN_MAX])
{
	int found = 0;

	for (int L = 0; L < 10; L++)
		keys[L][0] = '\0';
	for (size_t i = 0; i + 1 < n; i++) {
		int L = option_at(q, n, i);
		size_t s, e;

		if (L < 0 || L > 9 || (i > 0 && alnum((uchar)q[i - 1])))
			continue;
		if (i > 0 && q[i - 1] == '(' && q[i + 1] == ')')
			s = i + 2;
		else if ((q[i + 1] == ')' || q[i + 1] == '.' ||
			  q[i + 1] == ':') &&
			 (i == 0 || q[i - 1] == '\n' || q[i - 1] == ' '))
			s = i + 2;
		else
			continue;
		/* to the next option or the line's end */
		for (e = s; e < n && q[e] != '\n'; e++) {
			int M = option_at(q, n, e);

			if (M > L && e + 1 < n &&
			    (q[e + 1] == ')' || q[e + 1] == '.') &&
			    (q[e - 1] == ' ' || q[e - 1] == '('))
				break;
		}
		{
			size_t a = s, b = e;

			while (b > a && (q[b - 1] == '(' || space((uchar)q[b - 1])))
				b--;
			trim(q, &a, &b);
			if (b > a && (b - a >= ANSWER_PATTERN_MAX ||
				      memchr(q + a, '|', b - a)))
				return -1;
			if (b > a) {
				memcpy(keys[L], q + a, b - a);
				keys[L][b - a] = '\0';
				found++;
			}
		}
	}
	return found;
}

void answer_choice_options(answer_format *f, const char *question,
			   size_t qlen)
{
	char opt[10][ANSWER_PATTERN_MAX], keys[ANSWER_PATTERN_MAX];
	size_t o = 0;

	if (!f || f->kind != ANSWER_CHOICE || f->pattern[0] || !question ||
	    options(question, qlen, opt) <= 0)
		return;
	for (int L = 0; L < 10; L++) {
		size_t k = strlen(opt[L]);

		if (!k)
			continue;
		/* all of them or none: a list cut short would give the
		 * answers that are the kept options' text a vote that the
		 * dropped ones' lack */
		if (o + k + 4 > sizeof(keys))
			return;
		o += (size_t)snprintf(keys + o, sizeof(keys) - o, "%s%c=%s",
				      o ? "|" : "", 'A' + L, opt[L]);
	}
	memcpy(f->pattern, keys, o + 1);
}

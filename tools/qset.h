/*
 * qset — question sets: JSON-lines files of problems with expected
 * answers, shared by `quorum ask --file` and `quorum eval-set`.
 *
 * implements: reading a file (one object per line: "question" string,
 * optional expected "answer" string or number, optional "answer_format"
 * (sc/answer.h; the run's --answer otherwise), optional "id"; blank lines
 * skipped; a malformed line is reported with its line number and skipped),
 * comparing an expected answer with the vote's winner under the answer
 * format (number: 42, 42.0, +42, 042 and \boxed{42} agree, so do 1,234 and
 * 1234; math: \frac12 and 0.5; choice: "(B)" and "B"), and the progress
 * bar both commands draw on a terminal.
 */
#ifndef QUORUM_QSET_H
#define QUORUM_QSET_H

#include <jansson.h>
#include <stddef.h>

#include "sc/answer.h"
#include "text/prompt.h"

typedef struct qset_item {
	long line;            /* 1-based line in the input */
	const char *question; /* borrowed from obj */
	size_t qlen;
	char *expected;       /* owned; NULL: no expected answer */
	int has_format;       /* "answer_format" given on the line */
	answer_format format; /* ... its value */
	json_t *obj;          /* the parsed line (owns question, id) */
} qset_item;

/* Reads fname ('-' = stdin) into *out (input order). Messages name cmd
 * ("quorum CMD: FILE:LINE: why (skipped)"). -1 when the file cannot be
 * opened or read (a directory); *n_bad counts malformed lines. */
int qset_read(const char *cmd, const char *fname, qset_item **out,
	      size_t *n_out, size_t *n_bad);
/* The same, reading no further than the first limit questions (lines
 * past them, malformed or not, are not read). */
int qset_read_upto(const char *cmd, const char *fname, size_t limit,
		   qset_item **out, size_t *n_out, size_t *n_bad);
void qset_free(qset_item *items, size_t n);

/* Whether the given answer got[0, glen) — a key the vote compared under
 * format f (NULL: number), or an answer written otherwise, keyed first —
 * is the expected one. */
int qset_match(const answer_format *f, const char *expected, const char *got,
	       size_t glen);

/* A few-shot file: JSON lines {"question": Q, "solution": S} ("answer"
 * is taken when there is no "solution"), blank lines skipped, in order.
 * Any bad line is an error (message naming FILE:LINE on stderr, -1): the
 * examples are part of every prompt. Free with qset_shots_free. */
int qset_read_shots(const char *cmd, const char *fname, prompt_shot **out,
		    size_t *n_out);
void qset_shots_free(prompt_shot *v, size_t n);

/* "\r[####......] done/total done, failed failed" on stderr. */
void qset_progress(size_t done, size_t total, size_t failed);

#endif

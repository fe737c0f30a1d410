/*
 * qset — question sets for `quorum ask --file` and `quorum eval-set`
 * (see qset.h): the JSON-lines reader, the expected-answer comparison and
 * the progress bar.
 */
#include "qset.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc/vote.h"

/* Canonical form of an answer for comparison: the vote_extract form of
 * "\boxed{TEXT}" (a number canonicalized, anything else trimmed byte for
 * byte), or of TEXT itself when it has its own box; the trimmed text when
 * extraction finds nothing. */
static void canon(const char *s, size_t n, char *out, size_t cap)
{
	char *b;

	while (n && strchr(" \t\r\n\v\f", s[0]) && s[0])
		s++, n--;
	while (n && strchr(" \t\r\n\v\f", s[n - 1]) && s[n - 1])
		n--;
	if (memmem(s, n, "\\boxed{", 7) && vote_extract(s, n, out, cap))
		return;
	if ((b = malloc(n + 8))) {
		memcpy(b, "\\boxed{", 7);
		memcpy(b + 7, s, n);
		b[n + 7] = '}';
		if (vote_extract(b, n + 8, out, cap)) {
			free(b);
			return;
		}
		free(b);
	}
	if (n >= cap)
		n = cap - 1;
	memcpy(out, s, n);
	out[n] = '\0';
}

int qset_match(const answer_format *f, const char *exp, const char *got,
	       size_t glen)
{
	char a[VOTE_ANSWER_MAX], b[VOTE_ANSWER_MAX];

	if (f && f->kind != ANSWER_NUMBER) {
		/* got is a key of f when quorum's vote made it: the expected
		 * answer keyed as a sample that gave exactly it. A winner
		 * written otherwise (another engine, an older worker: "+042")
		 * is keyed the same way first. */
		answer_expected_key(f, exp, strlen(exp), a, sizeof(a));
		if (strlen(a) == glen && !memcmp(a, got, glen))
			return 1;
		answer_expected_key(f, got, glen, b, sizeof(b));
		return a[0] != '\0' && !strcmp(a, b);
	}
	canon(exp, strlen(exp), a, sizeof(a));
	canon(got, glen, b, sizeof(b));
	return !strcmp(a, b);
}

/* Parses one line into *it. 0 ok; -1 malformed (reason printed). */
static int parse_line(const char *cmd, const char *fname, long lineno,
		      const char *s, size_t n, qset_item *it)
{
	json_error_t err;
	json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &err), *q, *a, *fm;
	const char *why = NULL, *fwhy = NULL;
	char num[64];

	memset(it, 0, sizeof(*it));
	if (!o) {
		fprintf(stderr, "quorum %s: %s:%ld: not JSON: %s (skipped)\n",
			cmd, fname, lineno, err.text);
		return -1;
	}
	q = json_object_get(o, "question");
	a = json_object_get(o, "answer");
	fm = json_object_get(o, "answer_format");
	if (!json_is_object(o))
		why = "not a JSON object";
	else if (!q)
		why = "no \"question\"";
	else if (!json_is_string(q))
		why = "\"question\" is not a string";
	else if (json_string_length(q) == 0)
		why = "\"question\" is empty";
	else if (a && !json_is_null(a) && !json_is_string(a) &&
		 !json_is_number(a))
		why = "\"answer\" is not a string or a number";
	else if (json_is_string(a) && json_string_length(a) == 0)
		why = "\"answer\" is empty";
	else if (fm && !json_is_null(fm) &&
		 (!json_is_string(fm) ||
		  answer_format_parse(json_string_value(fm), &it->format,
				      &fwhy)))
		why = fwhy ? fwhy : "\"answer_format\" is not a string";
	if (why) {
		fprintf(stderr, "quorum %s: %s:%ld: %s (skipped)\n", cmd,
			fname, lineno, why);
		json_decref(o);
		return -1;
	}
	it->line = lineno;
	it->obj = o;
	it->has_format = fm && !json_is_null(fm);
	it->question = json_string_value(q);
	it->qlen = json_string_length(q);
	if (json_is_string(a))
		it->expected = strndup(json_string_value(a),
				       json_string_length(a));
	else if (json_is_integer(a))
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(a));
	else if (json_is_real(a))
		answer_number_text(json_real_value(a), num, sizeof(num));
	if (json_is_number(a))
		it->expected = strdup(num);
	return 0;
}

/* Reads the whole input; items in input order. Returns -1 if the file
 * cannot be opened or read; *n_bad counts malformed lines. */
int qset_read(const char *cmd, const char *fname, qset_item **out,
	      size_t *n_out, size_t *n_bad)
{
	return qset_read_upto(cmd, fname, (size_t)-1, out, n_out, n_bad);
}

int qset_read_upto(const char *cmd, const char *fname, size_t limit,
		   qset_item **out, size_t *n_out, size_t *n_bad)
{
	FILE *f = strcmp(fname, "-") ? fopen(fname, "r") : stdin;
	char *line = NULL;
	size_t cap = 0, n = 0, icap = 0;
	ssize_t len;
	long lineno = 0;
	qset_item *items = NULL, *ni;

	*n_bad = 0;
	if (!f) {
		fprintf(stderr, "quorum %s: cannot open %s: %m\n", cmd, fname);
		return -1;
	}
	while (n < limit && (len = getline(&line, &cap, f)) >= 0) {
		size_t k = 0;

		lineno++;
		while (k < (size_t)len && strchr(" \t\r\n", line[k]) && line[k])
			k++;
		if (k == (size_t)len)
			continue; /* blank lines are not questions */
		if (n == icap) {
			icap = icap ? icap * 2 : 64;
			if (!(ni = realloc(items, icap * sizeof(*items)))) {
				fprintf(stderr, "quorum %s: out of memory\n", cmd);
				break;
			}
			items = ni;
		}
		if (parse_line(cmd, fname, lineno, line, (size_t)len,
			       &items[n]))
			(*n_bad)++;
		else
			n++;
	}
	if (ferror(f)) {
		/* a directory, an I/O error: no set, not an empty one (it
		 * had exited 0 with no results) */
		fprintf(stderr, "quorum %s: reading %s: %m\n", cmd, fname);
		free(line);
		if (f != stdin)
			fclose(f);
		qset_free(items, n);
		*out = NULL;
		*n_out = 0;
		return -1;
	}
	free(line);
	if (f != stdin)
		fclose(f);
	*out = items;
	*n_out = n;
	return 0;
}

void qset_progress(size_t done, size_t total, size_t failed)
{
	enum { W = 30 };
	char bar[W + 1];
	size_t k = total ? done * W / total : W;

	for (size_t i = 0; i < W; i++)
		bar[i] = i < k ? '#' : '.';
	bar[W] = '\0';
	fprintf(stderr, "\r[%s] %zu/%zu done, %zu failed", bar, done, total,
		failed);
	fflush(stderr);
}

void qset_free(qset_item *items, size_t n)
{
	for (size_t i = 0; items && i < n; i++) {
		free(items[i].expected);
		json_decref(items[i].obj);
	}
}

/* ---- few-shot files --------------------------------------------------- */

static char *shot_text(json_t *o, const char *k1, const char *k2)
{
	json_t *v = json_object_get(o, k1);

	if (!v && k2)
		v = json_object_get(o, k2);
	if (!json_is_string(v) || !json_string_length(v) ||
	    memchr(json_string_value(v), 0, json_string_length(v)))
		return NULL;
	return strdup(json_string_value(v));
}

int qset_read_shots(const char *cmd, const char *fname, prompt_shot **out,
		    size_t *n_out)
{
	FILE *f = fopen(fname, "r");
	char *line = NULL;
	size_t cap = 0, n = 0, have = 0;
	ssize_t len;
	long lineno = 0;
	prompt_shot *v = NULL;
	int rc = 0;

	*out = NULL;
	*n_out = 0;
	if (!f) {
		fprintf(stderr, "quorum %s: %s: %s\n", cmd, fname,
			strerror(errno));
		return -1;
	}
	while (!rc && (len = getline(&line, &cap, f)) >= 0) {
		json_error_t err;
		json_t *o;
		size_t i = 0;

		lineno++;
		while (i < (size_t)len && strchr(" \t\r\n", line[i]))
			i++;
		if (i == (size_t)len)
			continue;
		if (!(o = json_loadb(line, (size_t)len, JSON_REJECT_DUPLICATES,
				     &err)) || !json_is_object(o)) {
			fprintf(stderr, "quorum %s: %s:%ld: not a JSON object%s"
				"%s\n", cmd, fname, lineno, o ? "" : ": ",
				o ? "" : err.text);
			json_decref(o);
			rc = -1;
			break;
		}
		if (n == have) {
			size_t nc = have ? 2 * have : 8;
			prompt_shot *nv = realloc(v, nc * sizeof(*nv));

			if (!nv) {
				json_decref(o);
				rc = -1;
				break;
			}
			v = nv;
			have = nc;
		}
		v[n].question = shot_text(o, "question", NULL);
		v[n].answer = shot_text(o, "solution", "answer");
		json_decref(o);
		if (!v[n].question || !v[n].answer) {
			fprintf(stderr, "quorum %s: %s:%ld: a few-shot example "
				"needs a non-empty \"question\" and \"solution\" "
				"(or \"answer\") string without NUL bytes\n",
				cmd, fname, lineno);
			free((char *)v[n].question);
			free((char *)v[n].answer);
			rc = -1;
			break;
		}
		n++;
	}
	free(line);
	fclose(f);
	if (!rc && !n) {
		fprintf(stderr, "quorum %s: %s: no few-shot examples\n", cmd,
			fname);
		rc = -1;
	}
	if (rc) {
		qset_shots_free(v, n);
		return -1;
	}
	*out = v;
	*n_out = n;
	return 0;
}

void qset_shots_free(prompt_shot *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free((char *)v[i].question);
		free((char *)v[i].answer);
	}
	free(v);
}

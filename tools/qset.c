#include "qset.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vote.h"

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

int qset_match(const char *exp, const char *got, size_t glen)
{
	char a[VOTE_ANSWER_MAX], b[VOTE_ANSWER_MAX];

	canon(exp, strlen(exp), a, sizeof(a));
	canon(got, glen, b, sizeof(b));
	return !strcmp(a, b);
}

/* Parses one line into *it. 0 ok; -1 malformed (reason printed). */
static int parse_line(const char *cmd, const char *fname, long lineno,
		      const char *s, size_t n, qset_item *it)
{
	json_error_t err;
	json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &err), *q, *a;
	const char *why = NULL;
	char num[64];

	memset(it, 0, sizeof(*it));
	if (!o) {
		fprintf(stderr, "quorum %s: %s:%ld: not JSON: %s (skipped)\n",
			cmd, fname, lineno, err.text);
		return -1;
	}
	q = json_object_get(o, "question");
	a = json_object_get(o, "answer");
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
	if (why) {
		fprintf(stderr, "quorum %s: %s:%ld: %s (skipped)\n", cmd,
			fname, lineno, why);
		json_decref(o);
		return -1;
	}
	it->line = lineno;
	it->obj = o;
	it->question = json_string_value(q);
	it->qlen = json_string_length(q);
	if (json_is_string(a))
		it->expected = strndup(json_string_value(a),
				       json_string_length(a));
	else if (json_is_integer(a))
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(a));
	else if (json_is_real(a))
		snprintf(num, sizeof(num), "%.17g", json_real_value(a));
	if (json_is_number(a))
		it->expected = strdup(num);
	return 0;
}

/* Reads the whole input; items in input order. Returns -1 if the file
 * cannot be read; *n_bad counts malformed lines. */
int qset_read(const char *cmd, const char *fname, qset_item **out,
	      size_t *n_out, size_t *n_bad)
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
	while ((len = getline(&line, &cap, f)) >= 0) {
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
	if (ferror(f))
		fprintf(stderr, "quorum %s: reading %s: %m\n", cmd, fname);
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

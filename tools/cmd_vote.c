/*
 * cmd_vote — `quorum vote`: quorum's vote over samples made anywhere (vLLM,
 * llama.cpp, an API): JSON lines in, one JSON object per line out, a
 * summary at the end. Each sample's answer is keyed under the line's
 * answer format (sc/answer.h) and tallied as the cluster tallies
 * (sc/vote.h: the highest count wins, ties to the lowest sample index).
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "qset.h"
#include "sc/answer.h"
#include "sc/vote.h"

static void help(void)
{
	printf("usage: quorum vote [--file F] [--answer FORMAT] [--json]\n\n"
	       "Votes on samples made by any engine, with quorum's answer\n"
	       "formats. Input: JSON lines (--file, default '-': stdin), one\n"
	       "question a line:\n"
	       "  {\"samples\": [\"text\", ...], \"answer_format\": \"math\",\n"
	       "   \"expected\": \"...\", \"question\": \"...\", \"id\": ...}\n"
	       "(samples required; the others optional, and no other key;\n"
	       "answer_format defaults to --answer; question lets `choice`\n"
	       "map an answer given as an option's text to its letter).\n"
	       "Output: one JSON object per line\n"
	       "with answer (the winner's key, or null), votes (the winner's\n"
	       "count), groups (every answer with its count and sample\n"
	       "indices), correct (when expected is given); then a summary line\n"
	       "on stderr, or with --json a last object {\"summary\": ...} on\n"
	       "stdout.\n\n"
	       "options:\n"
	       "  --file F          input ('-' = stdin, the default)\n"
	       "  --answer FORMAT   auto, number, math, choice, yesno, text,\n"
	       "                    exact, regex:PATTERN, json:POINTER (default\n"
	       "                    auto; docs/commands.md; select needs the\n"
	       "                    model: quorum run)\n"
	       "  --json            the summary as JSON on stdout\n"
	       "  -h, --help        this help\n\n"
	       "exit status: 0 all lines voted, 1 a line was refused, 2 usage.\n");
}

typedef struct {
	size_t lines, refused, answered, with_expected, correct, samples;
} totals;

/* select's pass runs the model; this command has none (it would only
 * key the samples as text, silently) */
#define VOTE_NO_SELECT "its selection pass needs the model (quorum run or " \
	"ask); here --answer text keys the samples as select does before it"

/* An answered sample: its key and index (the groups' listing). */
struct keyed {
	const char *key;
	size_t i;
};

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* One input line: its vote as a JSON object, or NULL with *why. */
static json_t *vote_line(const answer_format *dflt, json_t *in,
			 const char **why, totals *t)
{
	json_t *smp = json_object_get(in, "samples"), *fm, *exp, *q, *out,
	       *groups, *id;
	answer_format f = *dflt;
	const char **keys = NULL;
	char (*buf)[VOTE_ANSWER_MAX] = NULL;
	char expbuf[64];
	vote_result vr = {0};
	struct keyed *byk = NULL;
	size_t n, nk = 0;

	if (!json_is_object(in)) {
		*why = "not a JSON object";
		return NULL;
	}
	{
		/* the keys a line has, and no other: a misspelt one
		 * ("answerformat") had been ignored */
		static const char *const known[] = {
			"samples", "answer_format", "expected", "question",
			"id"};
		static char said[160];
		const char *k;
		json_t *v;

		json_object_foreach(in, k, v) {
			size_t i = 0;

			while (i < sizeof(known) / sizeof(*known) &&
			       strcmp(k, known[i]))
				i++;
			if (i == sizeof(known) / sizeof(*known)) {
				snprintf(said, sizeof(said), "unknown key "
					 "\"%.60s\" (a line has samples, "
					 "answer_format, expected, question, "
					 "id)", k);
				*why = said;
				return NULL;
			}
		}
	}
	if (!json_is_array(smp)) {
		*why = "\"samples\" must be an array of strings";
		return NULL;
	}
	fm = json_object_get(in, "answer_format");
	if (fm && !json_is_null(fm) &&
	    (!json_is_string(fm) ||
	     answer_format_parse(json_string_value(fm), &f, why))) {
		static char said[ANSWER_PATTERN_MAX + 96];

		if (!json_is_string(fm)) {
			*why = "\"answer_format\" must be a string";
		} else {
			/* the field named, as the other refusals name it */
			snprintf(said, sizeof(said), "\"answer_format\": %s",
				 *why);
			*why = said;
		}
		return NULL;
	}
	if (f.kind == ANSWER_SELECT) {
		*why = "\"answer_format\": select: " VOTE_NO_SELECT;
		return NULL;
	}
	q = json_object_get(in, "question");
	if (q && !json_is_null(q) && !json_is_string(q)) {
		*why = "\"question\" must be a string";
		return NULL;
	}
	if (json_is_string(q))
		answer_choice_options(&f, json_string_value(q),
				      json_string_length(q));
	exp = json_object_get(in, "expected");
	if (exp && !json_is_null(exp) && !json_is_string(exp) &&
	    !json_is_number(exp)) {
		*why = "\"expected\" must be a string or a number";
		return NULL;
	}
	n = json_array_size(smp);
	keys = calloc(n + 1, sizeof(*keys));
	buf = calloc(n + 1, sizeof(*buf));
	if (!keys || !buf) {
		*why = "out of memory";
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(smp, i);

		if (!json_is_string(s)) {
			*why = "\"samples\" must be an array of strings";
			goto fail;
		}
		if (answer_extract(&f, json_string_value(s),
				   json_string_length(s), buf[i],
				   sizeof(buf[i])))
			keys[i] = buf[i];
	}
	if (vote_tally(keys, n, &vr)) {
		*why = "out of memory";
		goto fail;
	}
	out = json_object();
	if ((id = json_object_get(in, "id")))
		json_object_set(out, "id", id);
	json_object_set_new(out, "answer", vr.winner == VOTE_NONE
			    ? json_null()
			    : client_text(vr.entries[0].answer,
					  strlen(vr.entries[0].answer)));
	if (vr.winner == VOTE_NONE) {
		json_object_set_new(out, "answer_text", json_null());
	} else {
		/* as its first voter wrote it */
		json_t *t = json_array_get(smp, vr.entries[0].first_index);
		char shown[VOTE_ANSWER_MAX];

		answer_shown(vr.entries[0].answer, json_string_value(t),
			     json_string_length(t), shown, sizeof(shown));
		json_object_set_new(out, "answer_text",
				    client_text(shown, strlen(shown)));
	}
	json_object_set_new(out, "votes", json_integer(
		vr.winner == VOTE_NONE ? 0 : (json_int_t)vr.entries[0].count));
	groups = json_array();
	/* each group's samples: the answered ones sorted by key (then
	 * index), each group's run found by bisection, O(n log n) where a
	 * scan of every sample per group was O(n x groups) */
	byk = malloc((n + 1) * sizeof(*byk));
	if (!byk) {
		*why = "out of memory";
		json_decref(groups);
		json_decref(out);
		vote_result_fini(&vr);
		goto fail;
	}
	for (size_t i = 0; i < n; i++)
		if (keys[i])
			byk[nk++] = (struct keyed){keys[i], i};
	qsort(byk, nk, sizeof(*byk), keyed_cmp);
	for (size_t g = 0; g < vr.n_entries; g++) {
		const char *a = vr.entries[g].answer;
		json_t *e = client_vote_json(a, strlen(a), vr.entries[g].count,
					     vr.entries[g].first_index, 0, 0),
		       *idx = json_array();
		size_t lo = 0, hi = nk;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (strcmp(byk[mid].key, a) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < nk && !strcmp(byk[lo].key, a); lo++)
			json_array_append_new(idx, json_integer(
				(json_int_t)byk[lo].i));
		json_object_set_new(e, "samples", idx);
		json_array_append_new(groups, e);
	}
	free(byk);
	json_object_set_new(out, "groups", groups);
	json_object_set_new(out, "samples", json_integer((json_int_t)n));
	json_object_set_new(out, "voters",
			    json_integer((json_int_t)vr.n_voters));
	{
		char fn[ANSWER_PATTERN_MAX + 16];

		json_object_set_new(out, "answer_format", json_string(
			answer_format_name(&f, fn, sizeof(fn))));
	}
	t->samples += n;
	t->answered += vr.winner != VOTE_NONE;
	if (exp && !json_is_null(exp)) {
		const char *es = expbuf;
		int ok;

		if (json_is_string(exp))
			es = json_string_value(exp);
		else if (json_is_integer(exp))
			snprintf(expbuf, sizeof(expbuf), "%" JSON_INTEGER_FORMAT,
				 json_integer_value(exp));
		else
			answer_number_text(json_real_value(exp), expbuf,
					   sizeof(expbuf));
		ok = vr.winner != VOTE_NONE &&
		     qset_match(&f, es, vr.entries[0].answer,
				strlen(vr.entries[0].answer));
		json_object_set_new(out, "correct", json_boolean(ok));
		t->with_expected++;
		t->correct += ok;
	}
	vote_result_fini(&vr);
	free(keys);
	free(buf);
	return out;
fail:
	free(keys);
	free(buf);
	return NULL;
}

int cmd_vote(int argc, char **argv)
{
	static const struct option opts[] = {
		{"file", required_argument, 0, 'f'},
		{"answer", required_argument, 0, 'a'},
		{"json", no_argument, 0, 'j'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *file = "-", *why = NULL;
	answer_format dflt = {0};
	int json = 0, c, rc = 0;
	totals t = {0};
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	FILE *in;

	optind = 1;
	if (cli_opts("vote", argc, argv, "h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			file = optarg;
			break;
		case 'a':
			if (answer_format_parse(optarg, &dflt, &why))
				return cli_usage_error("vote", "--answer %s: %s",
						       optarg, why);
			if (dflt.kind == ANSWER_SELECT)
				return cli_usage_error("vote", "--answer select: "
						       "%s", VOTE_NO_SELECT);
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			help();
			return 0;
		default:
			return cli_usage_error("vote", "see quorum vote --help");
		}
	}
	if (optind != argc)
		return cli_usage_error("vote", "unexpected argument '%s'",
				       argv[optind]);
	if (!(in = strcmp(file, "-") ? fopen(file, "r") : stdin)) {
		fprintf(stderr, "quorum vote: cannot open %s: %m\n", file);
		return 1;
	}
	while ((len = getline(&line, &cap, in)) >= 0) {
		json_error_t je;
		json_t *o, *r;
		size_t k = 0;

		lineno++;
		while (k < (size_t)len && strchr(" \t\r\n", line[k]))
			k++;
		if (k == (size_t)len)
			continue;
		t.lines++;
		o = json_loadb(line, (size_t)len, JSON_REJECT_DUPLICATES, &je);
		why = o ? NULL : je.text;
		r = o ? vote_line(&dflt, o, &why, &t) : NULL;
		if (!r) {
			fprintf(stderr, "quorum vote: %s:%ld: %s\n", file,
				lineno, why ? why : "refused");
			t.refused++;
			rc = 1;
		} else {
			char *s = client_dumps(r, JSON_COMPACT |
						JSON_PRESERVE_ORDER);

			if (s)
				printf("%s\n", s);
			free(s);
			json_decref(r);
		}
		json_decref(o);
	}
	if (ferror(in)) {
		/* a directory, an I/O error: said, and no success */
		fprintf(stderr, "quorum vote: reading %s: %m\n", file);
		rc = 1;
	}
	free(line);
	if (in != stdin)
		fclose(in);
	if (json) {
		json_t *s = json_pack(
			"{s:{s:I, s:I, s:I, s:I, s:I, s:I, s:o}}", "summary",
			"lines", (json_int_t)t.lines, "refused",
			(json_int_t)t.refused, "samples", (json_int_t)t.samples,
			"answered", (json_int_t)t.answered, "with_expected",
			(json_int_t)t.with_expected, "correct",
			(json_int_t)t.correct, "accuracy",
			t.with_expected ? json_real(100.0 * (double)t.correct /
						    (double)t.with_expected)
					: json_null());
		char *d = client_dumps(s, JSON_COMPACT | JSON_PRESERVE_ORDER);

		if (d)
			printf("%s\n", d);
		free(d);
		json_decref(s);
	} else {
		fprintf(stderr, "vote: %zu lines (%zu refused), %zu samples, "
			"%zu answered", t.lines, t.refused, t.samples,
			t.answered);
		if (t.with_expected)
			fprintf(stderr, ", %zu/%zu correct (%.1f%%)", t.correct,
				t.with_expected,
				100.0 * (double)t.correct /
					(double)t.with_expected);
		fputc('\n', stderr);
	}
	return rc;
}

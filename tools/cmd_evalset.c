/* quorum eval-set — score a JSON-lines problem set by self-consistency at
 * several sample counts, in one process or against a running cluster. */
#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sampflags.h"
#include "client.h"
#include "evstats.h"
#include "infer/model.h"
#include "text/prompt.h"
#include "net/spwire.h"
#include "qerr.h"
#include "qset.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "text/tok.h"
#include "sc/vote.h"

#define EVS_MAX_NS 16
#define EVS_DEFAULT_ENDPOINT "tcp://127.0.0.1:7700"

static void help(const sampflags *f)
{
	printf("usage: quorum eval-set --model M.gguf --file SET.jsonl [options]\n"
	       "       quorum eval-set --endpoint E --file SET.jsonl [options]\n\n"
	       "Answers every problem of a JSON-lines set (\"question\" and\n"
	       "expected \"answer\" per line, as `quorum ask --file`) by\n"
	       "self-consistency for each sample count N and prints, per N: the\n"
	       "accuracy of the majority answer, the accuracy of a single sample\n"
	       "(the reported samples' answers scored on their own: all N with\n"
	       "--prefix or --stop none; under the default exact rule only the\n"
	       "samples it decided over, so easy problems weigh less), the share\n"
	       "of samples with no answer, the tokens generated and the wall\n"
	       "time; then each N after the first against the first, problem by\n"
	       "problem: how many its majority gets right that the first N's\n"
	       "gets wrong (gained), the reverse (lost), and McNemar's exact\n"
	       "p-value of that split. With\n"
	       "--model it runs in this process; with --endpoint it asks a\n"
	       "running cluster (one request per problem and N), which gives the\n"
	       "same samples. A progress bar is drawn when stderr is a terminal.\n\n"
	       "options:\n"
	       "  --model FILE          GGUF model (in-process)\n"
	       "  --endpoint E          a cluster's client endpoint instead\n"
	       "                        (e.g. " EVS_DEFAULT_ENDPOINT ")\n"
	       "  --server-key FILE     CURVE: the coordinator's public key file\n"
	       "  --client-key FILE     CURVE: this client's secret key file\n"
	       "  --timeout SEC         cluster: wait per request (default 300)\n"
	       "  --file F              the problem set (required)\n"
	       "  -n LIST               sample counts, comma-separated\n"
	       "                        (default 1,3,8,16,32)\n"
	       "  --prefix              decode only the largest N and score each\n"
	       "                        smaller N on its first N samples: the\n"
	       "                        same numbers, since a sample's bytes never\n"
	       "                        depend on N (wall times are then shared;\n"
	       "                        needs --stop none, its default; the\n"
	       "                        filter cuts a sample whatever N is)\n"
	       "  --limit K             only the first K problems\n");
	sampflags_help(f);
	printf("  --system TEXT         system prompt (default: quorum's)\n"
	       "  --shots FILE          few-shot examples: JSON lines {\"question\":\n"
	       "                        Q, \"solution\": S}, shown as prior turns\n"
	       "                        of the chat before every problem\n"
	       "  --no-prefix-cache     prefill every prompt whole (default: a\n"
	       "                        problem forks the system prompt and\n"
	       "                        examples cached from earlier ones, in\n"
	       "                        process or on the cluster: same samples)\n"
	       "  --threads T           in-process threads (default 2)\n"
	       "  --kv-type T           f16 | f32 | q8_0 (default f16)\n"
	       "  --out FILE            per-problem results, JSON lines\n"
	       "  --json                the summary as one JSON object (with\n"
	       "                        every sampling setting; null: the\n"
	       "                        cluster's, not given to --endpoint)\n"
	       "  -h, --help            this help\n\n"
	       "exit status: 0 scored, 1 failure, 2 usage.\n");
}

/* What one request gave: the winner and each sample's answer. */
typedef struct {
	int n;
	char winner[VOTE_ANSWER_MAX]; /* "" = no answer */
	int has_winner;
	char (*answers)[VOTE_ANSWER_MAX]; /* (n); "" = none */
	uint32_t *ntok;                   /* (n) tokens of each sample */
	uint8_t *ended;                   /* (n) 1: stopped by an end token */
	uint64_t *weight;                 /* (n) confidence-vote weights */
	uint64_t tokens;
	uint64_t generated; /* sampled: + end tokens + cancelled samples */
} outcome;

typedef struct {
	int n;
	size_t problems, maj_correct, samples, sample_correct, no_answer;
	uint8_t *ok; /* per problem: the majority right */
	uint64_t tokens, generated;
	double wall_s;
} row;

typedef struct {
	/* in-process */
	const char *mpath;
	model *m;
	tok *t;
	sc_engine *e;
	sc_engine_params ep;
	/* cluster */
	const char *endpoint, *server_key, *client_key;
	client *c;
	int timeout_ms;
	/* both */
	sc_params p;
	unsigned given;          /* the settings' flags given (sampflags) */
	const char *system;
	const char *stop_sent;   /* cluster: the rule asked for (NULL: the
				  * cluster's default) */
	char stop_buf[STOP_NAME_MAX];
	prompt_shot *shots;      /* --shots */
	size_t n_shots;
	Quorum__Shot *shot_msgs, **shot_ptrs; /* cluster: as sent */
	int no_cache;            /* --no-prefix-cache */
	/* prompt tokens over every request: from the prefix cache, and
	 * prefilled (in reset mode: once per sample) */
	uint64_t p_reused, p_prefilled;
} evs;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int outcome_alloc(outcome *o, int n)
{
	memset(o, 0, sizeof(*o));
	o->n = n;
	o->answers = calloc((size_t)n, sizeof(*o->answers));
	o->ntok = calloc((size_t)n, sizeof(*o->ntok));
	o->ended = calloc((size_t)n, 1);
	o->weight = calloc((size_t)n, sizeof(*o->weight));
	if (o->answers && o->ntok && o->ended && o->weight)
		return 0;
	free(o->answers);
	free(o->ntok);
	free(o->ended);
	free(o->weight);
	o->weight = NULL;
	o->answers = NULL;
	o->ntok = NULL;
	o->ended = NULL;
	return qerr_fail(QERR_NOMEM, "out of memory");
}

static int solve_local(evs *v, const qset_item *q, int n, outcome *o)
{
	sc_params p = v->p;
	sc_result r = {0};
	int32_t *ids = NULL;
	size_t n_ids = 0;
	char *qs = strndup(q->question, q->qlen);
	int rc;

	p.n = n;
	if (q->has_format)
		p.answer = q->format;
	answer_choice_options(&p.answer, q->question, q->qlen);
	if (!qs)
		return qerr_fail(QERR_NOMEM, "out of memory");
	rc = prompt_build_shots(v->t, prompt_family(v->t), PROMPT_THINK_DEFAULT,
				v->system, v->shots, v->n_shots, qs, &ids,
				&n_ids);
	free(qs);
	if (rc || (rc = sc_run(v->e, ids, n_ids, &p, &r)) ||
	    (rc = outcome_alloc(o, r.n)))
		goto out;
	v->p_reused += (uint64_t)r.stats.n_reused;
	v->p_prefilled += (uint64_t)r.stats.n_prefills * n_ids -
			  (uint64_t)r.stats.n_reused;
	o->generated = r.stats.gen_tokens;
	if (r.vote.winner != VOTE_NONE) {
		o->has_winner = 1;
		snprintf(o->winner, sizeof(o->winner), "%s",
			 r.vote.entries[0].answer);
	}
	for (int i = 0; i < r.n; i++) {
		if (r.samples[i].has_answer)
			memcpy(o->answers[i], r.samples[i].answer,
			       sizeof(o->answers[i]));
		o->ntok[i] = (uint32_t)r.samples[i].n_tokens;
		o->ended[i] = r.samples[i].finish == SC_FINISH_STOP;
		o->weight[i] = r.samples[i].weight;
		o->tokens += o->ntok[i];
	}
out:
	sc_run_result_fini(&r);
	free(ids);
	return rc;
}

static void copy_bytes(char *dst, size_t cap, const uint8_t *s, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

static int solve_cluster(evs *v, const qset_item *q, int n, outcome *o)
{
	Quorum__Ask ask;
	Quorum__ClientRequest req;
	Quorum__SamplingParams sp;
	spwire_buf spb;
	Quorum__ClientReply *r = NULL;
	const Quorum__Answer *a;
	sc_params p = v->p;
	/* every setting the run fixes, every one given (a constraint, a
	 * penalty, min_p, a bias: they had stayed home, the cluster sampling
	 * without them), and the answer format it scores with (the
	 * cluster's own default would key what this run scores otherwise);
	 * the rule only when one is sent, the vote only when not the
	 * cluster's majority */
	unsigned which = SC_BIT(SC_S_N) | SC_BIT(SC_S_SEED) |
			 SC_BIT(SC_S_TEMPERATURE) | SC_BIT(SC_S_TOP_K) |
			 SC_BIT(SC_S_TOP_P) | SC_BIT(SC_S_MAX_NEW_TOKENS) |
			 SC_BIT(SC_S_ANSWER) | (v->given & spwire_fields() &
						~SC_BIT(SC_S_STOP));
	int rc;

	quorum__ask__init(&ask);
	quorum__client_request__init(&req);
	ask.question.data = (uint8_t *)q->question;
	ask.question.len = q->qlen;
	if (v->system) {
		ask.has_system = 1;
		ask.system.data = (uint8_t *)v->system;
		ask.system.len = strlen(v->system);
	}
	ask.n_shots = v->n_shots;
	ask.shots = v->shot_ptrs;
	if (v->no_cache) {
		ask.has_prefix_cache = 1;
		ask.prefix_cache = 0;
	}
	p.n = n;
	if (q->has_format)
		p.answer = q->format;
	if (p.ignore_eos)
		which |= SC_BIT(SC_S_IGNORE_EOS);
	if (v->stop_sent)
		which |= SC_BIT(SC_S_STOP);
	if (p.vote == SC_VOTE_CONFIDENCE)
		which |= SC_BIT(SC_S_VOTE);
	spwire_encode(&p, which, &sp, &spb);
	ask.params = &sp;
	req.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	req.ask = &ask;
	req.request_id = client_request_id();
	if ((rc = client_call(v->c, &req, v->timeout_ms, 1, &r)))
		return rc;
	if (!r)
		return qerr_fail(QERR_IO, "no reply from %s within %gs",
				 v->endpoint, v->timeout_ms / 1e3);
	if (r->status != QUORUM__STATUS__STATUS_OK ||
	    r->body_case != QUORUM__CLIENT_REPLY__BODY_ANSWER) {
		rc = qerr_fail(QERR_IO, "the cluster answered %s: %s",
			       protobuf_c_enum_descriptor_get_value(
				       &quorum__status__descriptor,
				       r->status)
				       ? protobuf_c_enum_descriptor_get_value(
						 &quorum__status__descriptor,
						 r->status)->name
				       : "?",
			       r->error ? r->error : "(no detail)");
		goto out;
	}
	a = r->answer;
	if (a->prefix) {
		v->p_reused += a->prefix->prompt_tokens_reused;
		v->p_prefilled += a->prefix->prompt_tokens_prefilled;
	}
	/* all n, or the prefix its stop rule decided over */
	if (a->n_samples != (size_t)n &&
	    !(a->stop && a->stop->stopped_early && a->n_samples >= 1 &&
	      a->n_samples < (size_t)n && a->stop->reported == a->n_samples)) {
		rc = qerr_fail(QERR_FORMAT, "the cluster sent %zu samples for "
			       "n = %d", a->n_samples, n);
		goto out;
	}
	if ((rc = outcome_alloc(o, (int)a->n_samples)))
		goto out;
	if (a->has_answer) {
		o->has_winner = 1;
		copy_bytes(o->winner, sizeof(o->winner), a->answer.data,
			   a->answer.len);
	}
	for (size_t i = 0; i < a->n_samples; i++) {
		const Quorum__Sample *s = a->samples[i];

		if (s->index >= (uint32_t)a->n_samples) {
			rc = qerr_fail(QERR_FORMAT, "sample index %u out of "
				       "range", s->index);
			goto out;
		}
		if (s->has_answer)
			copy_bytes(o->answers[s->index],
				   sizeof(o->answers[0]), s->answer.data,
				   s->answer.len);
		o->ntok[s->index] = s->tokens;
		o->ended[s->index] = s->finish && !strcmp(s->finish, "stop");
		o->weight[s->index] = vote_conf_weight(s->has_group_confidence
						     ? s->group_confidence : 0.0);
		o->tokens += s->tokens;
		o->generated += s->tokens + o->ended[s->index];
	}
	if (a->timings && a->timings->has_generated_tokens)
		o->generated = a->timings->generated_tokens;
out:
	quorum__client_reply__free_unpacked(r, NULL);
	return rc;
}

/* The outcome of the first k samples of o (the vote recounted: weighted
 * with confidence). */
static int prefix_of(const outcome *o, int k, int confidence, outcome *out)
{
	const char **ans = calloc((size_t)k, sizeof(*ans));
	vote_result vr = {0};
	int rc;

	if (!ans)
		return qerr_fail(QERR_NOMEM, "out of memory");
	for (int i = 0; i < k; i++)
		ans[i] = o->answers[i];
	rc = vote_tally_weighted(ans, confidence ? o->weight : NULL, (size_t)k,
				 &vr);
	free(ans);
	if (rc || (rc = outcome_alloc(out, k))) {
		vote_result_fini(&vr);
		return rc;
	}
	if (vr.winner != VOTE_NONE) {
		out->has_winner = 1;
		snprintf(out->winner, sizeof(out->winner), "%s",
			 vr.entries[0].answer);
	}
	memcpy(out->answers, o->answers, (size_t)k * sizeof(*o->answers));
	for (int i = 0; i < k; i++) {
		out->ntok[i] = o->ntok[i];
		out->ended[i] = o->ended[i];
		out->weight[i] = o->weight[i];
		out->tokens += o->ntok[i];
		out->generated += o->ntok[i] + o->ended[i];
	}
	vote_result_fini(&vr);
	return 0;
}

/* Problem q of the set (items + q) scored into rw: its majority's
 * verdict kept in rw->ok[q]. */
static void score(const answer_format *run, row *rw, const qset_item *items,
		  size_t q, const outcome *o, json_t *res)
{
	const qset_item *iq = items + q;
	answer_format fq = iq->has_format ? iq->format : *run;
	const answer_format *f = (answer_choice_options(&fq, iq->question,
							 iq->qlen), &fq);
	int maj = iq->expected && o->has_winner &&
		  qset_match(f, iq->expected, o->winner, strlen(o->winner));
	int ok = 0, none = 0;

	rw->problems++;
	rw->maj_correct += maj;
	rw->ok[q] = (uint8_t)maj;
	for (int i = 0; i < o->n; i++) {
		const char *a = o->answers[i];

		if (!*a)
			none++;
		else if (iq->expected && qset_match(f, iq->expected, a, strlen(a)))
			ok++;
	}
	rw->samples += (size_t)o->n;
	rw->sample_correct += (size_t)ok;
	rw->no_answer += (size_t)none;
	rw->tokens += o->tokens;
	rw->generated += o->generated;
	if (res) {
		json_t *r = json_object();

		json_object_set_new(r, "n", json_integer(rw->n));
		json_object_set_new(r, "samples", json_integer(o->n));
		json_object_set_new(r, "answer", o->has_winner ? client_text(
			o->winner, strlen(o->winner)) : json_null());
		json_object_set_new(r, "correct", json_boolean(maj));
		json_object_set_new(r, "samples_correct", json_integer(ok));
		json_object_set_new(r, "samples_no_answer", json_integer(none));
		json_array_append_new(res, r);
	}
}

static void outcome_fini(outcome *o)
{
	free(o->answers);
	free(o->ntok);
	free(o->ended);
	free(o->weight);
	o->answers = NULL;
	o->ntok = NULL;
	o->ended = NULL;
	o->weight = NULL;
}

/* A float option as the user wrote it (0.7, not 0.699999988). */
static double pct(size_t a, size_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

struct ns_list {
	int *ns, *k;
};

static int one_n(const char *item, void *arg)
{
	struct ns_list *l = arg;
	sc_params p = SC_PARAMS_DEFAULTS;

	if (*l->k == EVS_MAX_NS)
		return cli_usage_error("eval-set", "at most %d sample counts",
				       EVS_MAX_NS);
	if (sc_params_parse(SC_S_N, item, &p))
		return cli_usage_error("eval-set", "%s", qerr_detail());
	for (int i = 0; i < *l->k; i++)
		if (l->ns[i] == p.n)
			/* a row twice is the same row */
			return cli_usage_error("eval-set", "-n: %d is given "
					       "twice", p.n);
	l->ns[(*l->k)++] = p.n;
	return 0;
}

/* -n's counts, by cli_list's rule (no empty entry: "1,,2" was read as
 * 1,2 here while detokenize refused it) */
static int parse_ns(const char *s, int *ns, int *k)
{
	struct ns_list l = {ns, k};

	*k = 0;
	return cli_list("eval-set", "-n", s, one_n, &l);
}

/* The settings a run fixes, echoed in its summary. */
#define RUN_SETTINGS (SC_BIT(SC_S_SEED) | SC_BIT(SC_S_TEMPERATURE) | \
		      SC_BIT(SC_S_TOP_K) | SC_BIT(SC_S_TOP_P) | \
		      SC_BIT(SC_S_MAX_NEW_TOKENS) | SC_BIT(SC_S_IGNORE_EOS) | \
		      SC_BIT(SC_S_ANSWER))
/* ... and the rest that shape the samples, shown too */
#define RUN_OPTIONAL (SC_BIT(SC_S_MIN_P) | SC_BIT(SC_S_PRESENCE_PENALTY) | \
		      SC_BIT(SC_S_FREQUENCY_PENALTY) | \
		      SC_BIT(SC_S_LOGIT_BIAS) | SC_BIT(SC_S_STOP_STRINGS) | \
		      SC_BIT(SC_S_GRAMMAR))

/* Row r against row f (the first N), problem by problem: the problems
 * only r's majority gets right, those only f's gets right, and McNemar's
 * exact p-value of that split. */
typedef struct {
	size_t gained, lost;
	double p;
} paired;

static paired pair_rows(const row *f, const row *r)
{
	paired x = {0, 0, 1.0};

	for (size_t q = 0; q < r->problems && q < f->problems; q++) {
		x.gained += r->ok[q] && !f->ok[q];
		x.lost += f->ok[q] && !r->ok[q];
	}
	x.p = evstats_mcnemar(x.gained, x.lost);
	return x;
}

static void print_summary(const evs *v, const char *file, const row *rows,
			  int k, int json)
{
	char sname[STOP_NAME_MAX], desc[256];

	if (json) {
		json_t *o = json_object(), *a = json_array();

		for (int i = 0; i < k; i++) {
			double lo, hi;

			evstats_wilson95(rows[i].maj_correct, rows[i].problems, &lo,
				 &hi);
			json_array_append_new(a, json_pack(
				"{s:i, s:I, s:f, s:f, s:[f, f], s:f, s:f, s:I, "
				"s:I, s:f}",
				"n", rows[i].n, "problems",
				(json_int_t)rows[i].problems, "mean_samples",
				rows[i].problems ? (double)rows[i].samples /
					(double)rows[i].problems : 0.0,
				"majority_accuracy",
				pct(rows[i].maj_correct, rows[i].problems),
				"majority_accuracy_ci95", lo, hi,
				"single_sample_accuracy",
				pct(rows[i].sample_correct, rows[i].samples),
				"no_answer_share",
				pct(rows[i].no_answer, rows[i].samples),
				"tokens", (json_int_t)rows[i].tokens,
				"generated_tokens",
				(json_int_t)rows[i].generated,
				"wall_s", rows[i].wall_s));
			if (i) {
				paired x = pair_rows(&rows[0], &rows[i]);

				json_object_set_new(json_array_get(a, (size_t)i),
					"paired", json_pack("{s:i, s:I, s:I, s:f}",
					"against_n", rows[0].n, "gained",
					(json_int_t)x.gained, "lost",
					(json_int_t)x.lost, "p_value", x.p));
			}
		}
		json_object_set_new(o, "set", client_text(file, strlen(file)));
		json_object_set_new(o, "model", v->mpath ? client_text(
			v->mpath, strlen(v->mpath)) : json_null());
		json_object_set_new(o, "endpoint", v->endpoint ? json_string(
			v->endpoint) : json_null());
		/* the run's own settings, then those it may be given: a
		 * cluster's default (null) where an endpoint samples and
		 * they were not given */
		client_params_json(o, &v->p, RUN_SETTINGS |
				   (v->endpoint ? v->given : RUN_OPTIONAL),
				   RUN_SETTINGS | RUN_OPTIONAL);
		json_object_set_new(o, "stop", v->endpoint && !v->stop_sent
				    ? json_null() : json_string(stop_name(
					    &v->p.stop, sname, sizeof(sname))));
		json_object_set_new(o, "vote", json_string(
			v->p.vote == SC_VOTE_CONFIDENCE ? "confidence"
							: "majority"));
		json_object_set_new(o, "shots", json_integer(
			(json_int_t)v->n_shots));
		json_object_set_new(o, "prompt_tokens_reused", json_integer(
			(json_int_t)v->p_reused));
		json_object_set_new(o, "prompt_tokens_prefilled", json_integer(
			(json_int_t)v->p_prefilled));
		json_object_set_new(o, "results", a);
		char *s = client_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

		if (s)
			printf("%s\n", s);
		free(s);
		json_decref(o);
		return;
	}
	sampflags_describe(&v->p, RUN_SETTINGS & ~SC_BIT(SC_S_IGNORE_EOS),
			   desc, sizeof(desc));
	printf("set %s: %zu problems; %s; %s, stop %s, vote %s\n", file,
	       k ? rows[0].problems : 0, v->mpath ? v->mpath : v->endpoint,
	       desc,
	       v->endpoint && !v->stop_sent ? "(the cluster's)"
		       : stop_name(&v->p.stop, sname, sizeof(sname)),
	       v->p.vote == SC_VOTE_CONFIDENCE ? "confidence" : "majority");
	printf("%6s  %9s  %14s  %9s  %9s  %8s  %10s  %10s  %8s\n", "N",
	       "majority", "(95% interval)", "single", "no answer", "samples",
	       "tokens", "generated", "wall s");
	for (int i = 0; i < k; i++) {
		const row *r = &rows[i];
		char ci[32];
		double lo, hi;

		evstats_wilson95(r->maj_correct, r->problems, &lo, &hi);
		snprintf(ci, sizeof(ci), "[%.1f, %.1f]", lo, hi);
		printf("%6d  %8.1f%%  %14s  %8.1f%%  %8.1f%%  %8.2f  %10llu  "
		       "%10llu  %8.1f\n", r->n,
		       pct(r->maj_correct, r->problems), ci,
		       pct(r->sample_correct, r->samples),
		       pct(r->no_answer, r->samples),
		       r->problems ? (double)r->samples / (double)r->problems
				   : 0.0,
		       (unsigned long long)r->tokens,
		       (unsigned long long)r->generated, r->wall_s);
	}
	if (k > 1) {
		printf("paired with N = %d on the same problems (McNemar's "
		       "exact test):\n%6s  %8s  %8s  %8s\n", rows[0].n, "N",
		       "gained", "lost", "p");
		for (int i = 1; i < k; i++) {
			paired x = pair_rows(&rows[0], &rows[i]);

			printf("%6d  %8zu  %8zu  %8.3g\n", rows[i].n, x.gained,
			       x.lost, x.p);
		}
	}
	printf("prompt tokens: %llu prefilled, %llu reused from the prefix "
	       "cache; %zu few-shot example(s)\n",
	       (unsigned long long)v->p_prefilled,
	       (unsigned long long)v->p_reused, v->n_shots);
}

int cmd_evalset(int argc, char **argv)
{
	static const struct option own[] = {
		{"model", required_argument, 0, 'm'},
		{"endpoint", required_argument, 0, 'e'},
		{"server-key", required_argument, 0, 'K'},
		{"client-key", required_argument, 0, 'C'},
		{"timeout", required_argument, 0, 'W'},
		{"file", required_argument, 0, 'f'},
		{"prefix", no_argument, 0, 'P'},
		{"limit", required_argument, 0, 'l'},
		{"system", required_argument, 0, 's'},
		{"shots", required_argument, 0, 'G'},
		{"no-prefix-cache", no_argument, 0, 'N'},
		{"threads", required_argument, 0, 'j'},
		{"kv-type", required_argument, 0, 'Y'},
		{"out", required_argument, 0, 'o'},
		{"json", no_argument, 0, 'J'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	evs v = {.ep = SC_ENGINE_DEFAULTS, .timeout_ms = 300000};
	struct option opts[48];
	sampflags sf;
	const char *stop_arg;
	int ns[EVS_MAX_NS] = {1, 3, 8, 16, 32}, k = 5, json = 0, prefix = 0;
	int kv_given = 0, threads_given = 0, timeout_given = 0;
	int c, rc = 1, tty = isatty(2), sk;
	const char *file = NULL, *outpath = NULL, *shots_file = NULL;
	long lv, limit = -1;
	qset_item *items = NULL;
	size_t n_items = 0, n_bad = 0, failed = 0;
	row rows[EVS_MAX_NS] = {0};
	FILE *out = NULL;
	json_t **per = NULL;

	sampflags_init(&sf, "eval-set", SF_EVALSET);
	sf.stop_default = "exact in-process, the cluster's with --endpoint, "
			  "none with --prefix";
	sk = (int)sampflags_options(&sf, opts, 0, sizeof(opts) /
				    sizeof(opts[0]) - sizeof(own) /
				    sizeof(own[0]));
	memcpy(opts + sk, own, sizeof(own));
	optind = 1;
	if (cli_opts("eval-set", argc, argv, "n:h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
		if ((sk = sampflags_opt(&sf, c, optarg)) != -1) {
			if (sk)
				return 2;
			continue;
		}
		switch (c) {
		case 'm': v.mpath = optarg; break;
		case 'e': v.endpoint = optarg; break;
		case 'K': v.server_key = optarg; break;
		case 'C': v.client_key = optarg; break;
		case 'f': file = optarg; break;
		case 'P': prefix = 1; break;
		case 's': v.system = optarg; break;
		case 'G': shots_file = optarg; break;
		case 'N': v.no_cache = 1; break;
		case 'o': outpath = optarg; break;
		case 'J': json = 1; break;
		case 'n':
			if ((sk = parse_ns(optarg, ns, &k)))
				return sk;
			break;
		case 'W':
			if (cli_long("eval-set", "--timeout", optarg, 1, 86400,
				     &lv))
				return 2;
			v.timeout_ms = (int)lv * 1000;
			timeout_given = 1;
			break;
		case 'l':
			if (cli_long("eval-set", "--limit", optarg, 1,
				     1L << 30, &limit))
				return 2;
			break;
		case 'j':
			if (cli_long("eval-set", "--threads", optarg, 1, 256,
				     &lv))
				return 2;
			v.ep.n_threads = (int)lv;
			threads_given = 1;
			break;
		case 'Y':
			if ((v.ep.kv_dtype = kv_dtype_from_name(optarg)) < 0)
				return cli_usage_error("eval-set", "unknown KV "
						       "type '%s' (f16, f32, "
						       "q8_0)", optarg);
			kv_given = 1;
			break;
		case 'h': help(&sf); return 0;
		default: return cli_usage_error("eval-set", "bad option");
		}
	}
	v.p = sf.p;
	v.given = sf.given;
	v.p.n = 1;
	stop_arg = sf.stop_arg;
	if (optind != argc)
		return cli_usage_error("eval-set", "unexpected argument '%s'",
				       argv[optind]);
	if (!file)
		return cli_usage_error("eval-set", "--file is required");
	if (!v.mpath == !v.endpoint)
		return cli_usage_error("eval-set", "give exactly one of --model "
				       "and --endpoint");
	if (!stop_arg)
		v.p.stop = prefix ? (stop_rule){STOP_NONE, 0, 0}
				  : STOP_RULE_DEFAULT;
	v.stop_sent = stop_arg || prefix ? stop_name(&v.p.stop, v.stop_buf,
						     sizeof(v.stop_buf))
					 : NULL;
	if (prefix && v.p.stop.kind != STOP_NONE)
		return cli_usage_error("eval-set", "--prefix scores smaller N on "
				       "the first samples of the largest: it "
				       "needs --stop none");
	if (v.endpoint && v.p.filter_warmup)
		return cli_usage_error("eval-set", "--conf-filter runs "
				       "in-process only (not with --endpoint)");
	/* an option of the other mode is refused, not dropped: a run of
	 * another KV type, or keys never read, would pass for the one
	 * asked */
	if (v.endpoint && (kv_given || threads_given))
		return cli_usage_error("eval-set", "%s runs in-process only "
				       "(with --endpoint the cluster's config "
				       "decides)", kv_given ? "--kv-type"
							    : "--threads");
	if (v.mpath && (timeout_given || v.server_key || v.client_key))
		return cli_usage_error("eval-set", "%s is for --endpoint (not "
				       "with --model)", timeout_given
				       ? "--timeout" : v.server_key
				       ? "--server-key" : "--client-key");
	/* the first --limit problems: a malformed line past them is no
	 * part of the set scored (it had refused the run) */
	if (qset_read_upto("eval-set", file,
			   limit >= 0 ? (size_t)limit : (size_t)-1, &items,
			   &n_items, &n_bad))
		return 1;
	if (n_bad) {
		fprintf(stderr, "quorum eval-set: %s: %zu malformed line(s); "
			"refusing to score a partial set\n", file, n_bad);
		goto out;
	}
	/* nothing to score is no score: 0% would read as a real result */
	if (!n_items) {
		fprintf(stderr, "quorum eval-set: %s: no problems\n", file);
		goto out;
	}
	for (size_t i = 0; i < n_items; i++)
		if (!items[i].expected) {
			fprintf(stderr, "quorum eval-set: %s:%ld: no expected "
				"\"answer\"\n", file, items[i].line);
			goto out;
		}
	if (outpath && !(out = fopen(outpath, "w"))) {
		fprintf(stderr, "quorum eval-set: cannot create %s: %m\n",
			outpath);
		goto out;
	}
	if (shots_file) {
		if (qset_read_shots("eval-set", shots_file, &v.shots,
				    &v.n_shots))
			goto out;
		if (!(v.shot_msgs = calloc(v.n_shots, sizeof(*v.shot_msgs))) ||
		    !(v.shot_ptrs = calloc(v.n_shots, sizeof(*v.shot_ptrs))))
			goto out;
		for (size_t i = 0; i < v.n_shots; i++) {
			Quorum__Shot *x = &v.shot_msgs[i];

			quorum__shot__init(x);
			x->question.data = (uint8_t *)v.shots[i].question;
			x->question.len = strlen(v.shots[i].question);
			x->answer.data = (uint8_t *)v.shots[i].answer;
			x->answer.len = strlen(v.shots[i].answer);
			v.shot_ptrs[i] = x;
		}
	}
	/* in-process: the problems share the system prompt and the
	 * few-shot examples; the engine keeps recent prompts' roots */
	if (!v.no_cache)
		v.ep.prefix_cache = 16;
	if (v.mpath) {
		if (model_load(v.mpath, &v.m) || tok_load(v.m->gguf, &v.t) ||
		    sc_engine_new(v.m, v.t, &v.ep, &v.e)) {
			fprintf(stderr, "quorum eval-set: %s\n", qerr_detail());
			goto out;
		}
	} else if (client_open_curve(v.endpoint, v.server_key, v.client_key,
				     &v.c)) {
		fprintf(stderr, "quorum eval-set: %s\n", qerr_detail());
		goto out;
	}
	if (out && !(per = calloc(n_items, sizeof(*per))))
		goto out;
	for (int i = 0; i < k; i++) {
		rows[i].n = ns[i];
		if (!(rows[i].ok = calloc(n_items, 1))) {
			fprintf(stderr, "quorum eval-set: out of memory\n");
			goto out;
		}
	}

	/* --prefix: one pass at the largest N; otherwise one pass per N */
	int maxn = 0;

	for (int i = 0; i < k; i++)
		if (ns[i] > maxn)
			maxn = ns[i];
	for (int pass = 0; pass < (prefix ? 1 : k); pass++) {
		int n = prefix ? maxn : ns[pass];
		double t0 = now_s();

		for (size_t q = 0; q < n_items; q++) {
			outcome o;
			int e = v.e ? solve_local(&v, &items[q], n, &o)
				    : solve_cluster(&v, &items[q], n, &o);

			if (e) {
				fprintf(stderr, "%squorum eval-set: %s:%ld: %s\n",
					tty ? "\n" : "", file, items[q].line,
					qerr_detail());
				failed++;
				goto out;
			}
			if (per && !per[q])
				per[q] = json_array();
			for (int i = 0; i < k; i++) {
				outcome sub;

				if (!prefix) {
					if (i == pass)
						score(&v.p.answer, &rows[i], items, q,
						      &o, per ? per[q] : NULL);
					continue;
				}
				if (ns[i] == n) {
					score(&v.p.answer, &rows[i], items, q,
					      &o, per ? per[q] : NULL);
				} else if (!prefix_of(&o, ns[i],
						      v.p.vote ==
							      SC_VOTE_CONFIDENCE,
						      &sub)) {
					score(&v.p.answer, &rows[i], items, q,
					      &sub, per ? per[q] : NULL);
					outcome_fini(&sub);
				}
			}
			outcome_fini(&o);
			if (tty)
				qset_progress(pass * n_items + q + 1,
					      (prefix ? 1 : (size_t)k) * n_items,
					      failed);
		}
		for (int i = 0; i < k; i++)
			if (prefix || i == pass)
				rows[i].wall_s = now_s() - t0;
	}
	if (tty)
		fprintf(stderr, "\n");
	for (size_t q = 0; out && q < n_items; q++) {
		json_t *o = json_object();
		json_t *id = json_object_get(items[q].obj, "id");
		char *s;

		json_object_set_new(o, "line", json_integer(items[q].line));
		if (id)
			json_object_set(o, "id", id);
		json_object_set_new(o, "question", client_text(
			items[q].question, items[q].qlen));
		json_object_set_new(o, "expected", client_text(
			items[q].expected, strlen(items[q].expected)));
		json_object_set(o, "by_n", per[q]);
		if ((s = client_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)))
			fprintf(out, "%s\n", s);
		free(s);
		json_decref(o);
	}
	print_summary(&v, file, rows, k, json);
	rc = 0;
out:
	if (per)
		for (size_t q = 0; q < n_items; q++)
			json_decref(per[q]);
	free(per);
	for (int i = 0; i < k; i++)
		free(rows[i].ok);
	if (out)
		fclose(out);
	qset_free(items, n_items);
	free(items);
	free(v.shot_ptrs);
	free(v.shot_msgs);
	qset_shots_free(v.shots, v.n_shots);
	sc_engine_free(&v.e);
	tok_free(&v.t);
	model_free(&v.m);
	client_free(&v.c);
	return rc;
}

/* quorum run — self-consistency in one process (see common/sc/run.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "sampflags.h"
#include "client.h"
#include "kernels/kern.h"
#include "infer/model.h"
#include "text/prompt.h"
#include "qset.h"
#include "net/wire.h"
#include "qerr.h"
#include "qset.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "sc/usc.h"
#include "sc/fork.h"
#include "text/tok.h"

static void help(const sampflags *f)
{
	printf("usage: quorum run --model M.gguf [options] \"question\"\n"
	       "       quorum run --model M.gguf [options] --file Q.jsonl\n\n"
	       "Answers a question by self-consistency: the prompt is prefilled\n"
	       "once, forked N times, the forks are decoded together, each\n"
	       "sample's final answer is extracted and the majority wins.\n"
	       "The question is read from stdin when it is '-' (its trailing\n"
	       "newlines dropped).\n\n"
	       "With --file, every line {\"question\": ..., \"id\"?: ...,\n"
	       "\"answer\"?: expected} is a question, and the forks of all the\n"
	       "questions in flight share each decode round (continuous\n"
	       "batching; every result is the one the question gets alone).\n"
	       "Output: one JSON line per question, in file order (the --json\n"
	       "object plus \"line\", \"id\", and \"expected\", \"correct\"\n"
	       "compared as `quorum ask --file` does, null without an answer;\n"
	       "or {\"line\", \"error\"}: first for a question whose prompt\n"
	       "cannot be built, in its place for one that fails while it\n"
	       "runs, such as a prompt over the context); malformed lines\n"
	       "are reported on stderr and skipped; a summary goes to stderr.\n"
	       "Exit status 1 when any line failed.\n\n"
	       "options:\n"
	       "  --model FILE          GGUF model (qwen2, qwen3, llama, gemma3,\n"
	       "                        qwen3moe, gpt-oss)\n");
	sampflags_help(f);
	printf("  --shots FILE          few-shot examples: JSON lines {\"question\":\n"
	       "                        Q, \"solution\": S}, shown as prior turns\n"
	       "                        of the chat before the question\n"
	       "  --system TEXT         system prompt (default: step by step,\n"
	       "                        final answer in \\boxed{}; '' for none)\n"
	       "  --template NAME       chat template instead of the one the\n"
	       "                        model's tokenizer.chat_template names:\n"
	       "                        " PROMPT_FAMILY_LIST "\n"
	       "  --think on|off        thinking (qwen3 templates; default: the\n"
	       "                        template's, on for qwen3). Answers are\n"
	       "                        taken after </think>; a sample that\n"
	       "                        never closes <think> has none\n"
	       "  --reasoning-effort E  low | medium | high: harmony (gpt-oss)\n"
	       "                        templates' reasoning (default medium;\n"
	       "                        not with --think).\n"
	       "                        Answers come from the final channel; a\n"
	       "                        sample with channels but no final one\n"
	       "                        has none\n"
	       "  --threads T           threads (default 2)\n"
	       "  --kv-type T           f16 | f32 | q8_0 (default f16)\n"
	       "  --activations A       int | f32: quantized weights multiply\n"
	       "                        8-bit activations (default) or exact\n"
	       "                        f32 ones (slower; for checking)\n"
	       "  --block-tokens B      KV block size (default 16)\n"
	       "  --json                one JSON object (fields in\n"
	       "                        docs/commands.md)\n"
	       "  --file FILE           questions, one JSON object a line ('-':\n"
	       "                        stdin); batched mode\n"
	       "  --max-live F          --file: forks decoded per round at most,\n"
	       "                        over all questions (default 64)\n"
	       "  --prefill-tokens T    --file: prompt tokens prefilled per round\n"
	       "                        between decode rounds (default 256,\n"
	       "                        at most 4096)\n"
	       "  -h, --help            this help\n");
}

/* The winner as a person reads it (answer_shown over its first
 * voter's text). */
static void winner_shown(const sc_result *r, char *out, size_t cap)
{
	const vote_entry *w = &r->vote.entries[0];
	const sc_sample *x = w->first_index < (size_t)r->n
				     ? &r->samples[w->first_index] : NULL;

	answer_shown(w->answer, x ? x->text : NULL, x ? x->len : 0, out, cap);
}

static const char *no_answer_why(const sc_params *p, const sc_sample *x)
{
	return answer_no_answer_reason(&p->answer, x->text, x->len);
}

/* What early stopping did, as JSON (README: `quorum run --json`). */
static json_t *stop_json(const sc_result *r)
{
	const sc_stop_stats *x = &r->stop;
	char name[STOP_NAME_MAX];
	json_t *o = json_object();

	json_object_set_new(o, "rule", json_string(stop_name(&x->rule, name,
							      sizeof(name))));
	json_object_set_new(o, "stopped_early", json_boolean(x->fired));
	json_object_set_new(o, "budget", json_integer(x->budget));
	json_object_set_new(o, "reported", json_integer(x->reported));
	json_object_set_new(o, "started", json_integer(x->started));
	json_object_set_new(o, "finished", json_integer(x->finished));
	json_object_set_new(o, "cancelled", json_integer(x->cancelled));
	json_object_set_new(o, "tokens_generated",
			    json_integer((json_int_t)r->stats.gen_tokens));
	json_object_set_new(o, "tokens_reported",
			    json_integer((json_int_t)x->tokens_reported));
	json_object_set_new(o, "tokens_saved_est",
			    json_integer((json_int_t)x->tokens_saved));
	json_object_set_new(o, "filtered", json_integer(x->filtered));
	if (x->filter_threshold != 0.0)
		json_object_set_new(o, "filter_threshold",
				    json_real(x->filter_threshold));
	json_object_set_new(o, "leader_count", json_integer(x->leader));
	json_object_set_new(o, "second_count", json_integer(x->second));
	if (x->rule.kind == STOP_BETA)
		json_object_set_new(o, "posterior", json_real(x->posterior));
	if (x->rule.kind == STOP_WINDOW)
		json_object_set_new(o, "agreeing_run", json_integer(x->run));
	return o;
}

/* One line on what early stopping did. */
static void print_stop(const sc_result *r)
{
	const sc_stop_stats *x = &r->stop;
	char name[STOP_NAME_MAX];

	stop_name(&x->rule, name, sizeof(name));
	if (!x->fired) {
		printf("stop: %s: all %d samples ran\n", name, x->budget);
		return;
	}
	printf("stop: %s fired after %d of %d samples (leader %u, runner-up "
	       "%u", name, x->reported, x->budget, x->leader, x->second);
	if (x->rule.kind == STOP_BETA)
		printf(", posterior %.6f", x->posterior);
	if (x->rule.kind == STOP_WINDOW)
		printf(", last %d agree", x->run);
	printf("); %d started, %d cancelled, %d never started; ~%llu tokens "
	       "saved\n", x->started, x->cancelled, x->budget - x->started,
	       (unsigned long long)x->tokens_saved);
}

/* answer select (universal self-consistency): the selection pass of a
 * single question's run, reported with its result */
static struct {
	int done;         /* a pass ran */
	int chosen;       /* the response it named; -1: none (the vote's
			   * winner stands) */
	int tokens;
	char reply[512];
} usc;

/* The selection pass over r's samples, and r's vote with the chosen
 * response's answer first. */
static int usc_select(sc_engine *e, const tok *t, const prompt_style *ps,
		      const char *question, sc_result *r)
{
	const char **texts = calloc((size_t)r->n + 1, sizeof(*texts));
	size_t *lens = calloc((size_t)r->n + 1, sizeof(*lens));
	char *q = NULL;
	int32_t *ids = NULL;
	size_t n_ids = 0;
	sc_params up = SC_PARAMS_DEFAULTS;
	sc_result u = {0};
	int rc = QERR_NOMEM;

	if (!texts || !lens)
		goto out;
	for (int i = 0; i < r->n; i++) {
		texts[i] = r->samples[i].text;
		lens[i] = r->samples[i].len;
	}
	if (!(q = usc_prompt(question, strlen(question), texts, lens, r->n)))
		goto out;
	up.n = 1;
	up.sp.temperature = 0.0f;
	up.max_new = USC_MAX_NEW;
	up.stop = (stop_rule){STOP_NONE, STOP_BETA_DEFAULT,
			      STOP_WINDOW_DEFAULT};
	up.answer.kind = ANSWER_TEXT;
	if ((rc = prompt_build_shots(t, ps->family, ps->think, "", NULL, 0, q,
				     &ids, &n_ids)) ||
	    (rc = sc_run(e, ids, n_ids, &up, &u)))
		goto out;
	usc.done = 1;
	usc.tokens = u.samples[0].n_tokens;
	snprintf(usc.reply, sizeof(usc.reply), "%.*s",
		 (int)u.samples[0].len, u.samples[0].text);
	usc.chosen = usc_pick(u.samples[0].text, u.samples[0].len, r->n);
	if (usc.chosen >= 0 && r->samples[usc.chosen].has_answer) {
		const char *want = r->samples[usc.chosen].answer;

		for (size_t k = 0; k < r->vote.n_entries; k++)
			if (!strcmp(r->vote.entries[k].answer, want)) {
				vote_entry x = r->vote.entries[k];

				memmove(&r->vote.entries[1], &r->vote.entries[0],
					k * sizeof(x));
				r->vote.entries[0] = x;
				r->vote.winner = 0;
				break;
			}
	}
	rc = 0;
out:
	sc_run_result_fini(&u);
	free(ids);
	free(q);
	free(texts);
	free(lens);
	return rc;
}

/* The result as the JSON object of `quorum run --json` (README). */
static json_t *run_json(const model *m, const tok *t, const char *mpath,
			const prompt_style *ps, const sc_params *p,
			const sc_result *r)
{
	json_t *o = json_object(), *votes = json_array(), *smp = json_array();
	const sc_stats *st = &r->stats;
	double dec_s = st->decode_ms / 1e3;

	for (size_t i = 0; i < r->vote.n_entries; i++) {
		const vote_entry *v = &r->vote.entries[i];

		json_array_append_new(votes, client_vote_json(
			v->answer, strlen(v->answer), v->count,
			v->first_index, p->vote == SC_VOTE_CONFIDENCE,
			(double)v->weight / 0x1p32));
	}
	for (int i = 0; i < r->n; i++) {
		const sc_sample *x = &r->samples[i];

		json_t *js = json_pack(
			"{s:i, s:o, s:i, s:s, s:o}", "index", x->index,
			"answer", x->has_answer ? client_text(x->answer,
							    strlen(x->answer))
						: json_null(),
			"tokens", x->n_tokens, "finish",
			sc_fork_finish_name(x->finish), "text",
			client_text(x->text, x->len));

		if (!x->has_answer)
			json_object_set_new(js, "no_answer",
					    json_string(no_answer_why(p, x)));
		json_object_set_new(js, "reasoning_tokens",
				    json_integer(x->reasoning_tokens));
		json_object_set_new(js, "mean_logprob",
				    json_real(x->mean_logprob));
		json_object_set_new(js, "group_confidence",
				    json_real(x->group_conf));
		if (x->n_token_lp) {
			ProtobufCBinaryData *pc = x->n_alt
				? calloc(x->n_alt, sizeof(*pc)) : NULL;
			client_alts ca = {x->alt_n, x->alt_lp, pc,
					  pc ? x->n_alt : 0};

			/* each alternative's bytes (an end token's text) */
			for (size_t k = 0; pc && k < x->n_alt; k++) {
				int32_t id = (int32_t)x->alt_id[k];
				const char *b = tok_piece(t, id, 1, &pc[k].len);

				pc[k].data = (uint8_t *)(b ? b : "");
			}
			json_object_set_new(js, "logprobs", client_logprobs(
				x->text, x->len, x->token_lp, x->token_off,
				(size_t)x->n_token_lp, x->alt_n ? &ca : NULL));
			free(pc);
		}
		json_array_append_new(smp, js);
	}
	json_object_set_new(o, "answer",
			    r->vote.winner == VOTE_NONE
				    ? json_null()
				    : client_text(r->vote.entries[0].answer,
						strlen(r->vote.entries[0].answer)));
	if (r->vote.winner == VOTE_NONE) {
		json_object_set_new(o, "answer_text", json_null());
	} else {
		char shown[VOTE_ANSWER_MAX];

		winner_shown(r, shown, sizeof(shown));
		json_object_set_new(o, "answer_text",
				    client_text(shown, strlen(shown)));
	}
	json_object_set_new(o, "votes", votes);
	json_object_set_new(o, "n", json_integer(p->n));
	json_object_set_new(o, "voters", json_integer((json_int_t)r->vote.n_voters));
	json_object_set_new(o, "model", client_text(mpath, strlen(mpath)));
	json_object_set_new(o, "arch", json_string(model_arch_name(m->cfg.arch)));
	json_object_set_new(o, "prompt_format",
			    json_string(prompt_family_name(ps->family)));
	if (ps->family == PROMPT_HARMONY)
		json_object_set_new(o, "reasoning_effort",
				    json_string(prompt_effort_name(ps->think)));
	else
		json_object_set_new(o, "thinking", json_boolean(ps->think));
	json_object_set_new(o, "prompt_tokens", json_integer(st->n_prompt));
	json_object_set_new(o, "mode", json_string(sc_params_mode_name(p->mode)));
	json_object_set_new(o, "stop", stop_json(r));
	client_params_json(o, p, SC_BIT(SC_S_VOTE), SC_BIT(SC_S_VOTE));
	json_object_set_new(o, "conf_window", json_integer(
		p->conf_window ? p->conf_window : SC_CONF_WINDOW_DEFAULT));
	client_params_json(o, p, CLIENT_ECHO_SETTINGS, CLIENT_ECHO_SETTINGS);
	json_object_set_new(o, "samples", smp);
	if (usc.done)
		json_object_set_new(o, "usc", json_pack(
			"{s:o, s:i, s:o}", "chosen", usc.chosen >= 0
			? json_integer(usc.chosen) : json_null(), "tokens",
			usc.tokens, "reply", client_text(usc.reply,
							 strlen(usc.reply))));
	json_object_set_new(o, "timings", json_pack(
		"{s:f, s:f, s:i, s:I, s:f}", "prefill_ms", st->prefill_ms,
		"decode_ms", st->decode_ms, "prefills", st->n_prefills,
		"generated_tokens", (json_int_t)st->gen_tokens,
		"tokens_per_s", dec_s > 0 ? st->gen_tokens / dec_s : 0.0));
	json_object_set_new(o, "kv", json_pack(
		"{s:I, s:I, s:I}", "peak_bytes", (json_int_t)st->kv_peak_bytes,
		"unshared_bytes", (json_int_t)st->kv_unshared_bytes,
		"cow_blocks", (json_int_t)st->cow_blocks));
	return o;
}

static void print_json(const model *m, const tok *t, const char *mpath,
		       const prompt_style *ps, const sc_params *p,
		       const sc_result *r)
{
	json_t *o = run_json(m, t, mpath, ps, p, r);
	char *s = client_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(o);
}

/* ---- --file: many questions in merged rounds ------------------------- */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A question of the file and its prompt. */
typedef struct {
	const qset_item *it;
	int32_t *ids;
	size_t n_ids;
	char *err;          /* why it is not run (or failed), or NULL */
	sc_params p;        /* the run's settings; the line's answer format,
			     * a choice's options */
} file_q;

typedef struct {
	const model *m;
	const tok *t;
	const char *mpath;
	const prompt_style *ps;
	const sc_params *p;
	file_q *fq;
	int *map;           /* question index -> fq index */
	int n_errors, n_expected, n_correct;
	uint64_t tokens;
} file_run;

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);

	if (d)
		memcpy(d, s, n);
	return d;
}

static void emit_line(json_t *o)
{
	char *s = client_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (s)
		printf("%s\n", s);
	free(s);
	fflush(stdout);
	json_decref(o);
}

static void emit_error(const file_q *q)
{
	json_t *o = json_object(), *id = json_object_get(q->it->obj, "id");

	json_object_set_new(o, "line", json_integer(q->it->line));
	if (id)
		json_object_set(o, "id", id);
	json_object_set_new(o, "error", json_string(q->err ? q->err : ""));
	emit_line(o);
}

/* sc_run_many's results, in question order: one JSON line each. */
static int on_file_result(void *ctx, int q, int rc, const char *err,
			  sc_result *r)
{
	file_run *fr = ctx;
	file_q *x = &fr->fq[fr->map[q]];
	json_t *o, *out = json_object(), *id, *v;
	const char *k;

	if (rc) {
		x->err = dup_str(err ? err : qerr_detail());
		fr->n_errors++;
		emit_error(x);
		json_decref(out);
		sc_run_result_fini(r);
		return 0;
	}
	o = run_json(fr->m, fr->t, fr->mpath, fr->ps, &x->p, r);
	json_object_set_new(out, "line", json_integer(x->it->line));
	if ((id = json_object_get(x->it->obj, "id")))
		json_object_set(out, "id", id);
	if (x->it->expected) {
		/* compared as `quorum ask --file` does (qset_match) */
		int ok = r->vote.winner != VOTE_NONE &&
			 qset_match(&x->p.answer, x->it->expected,
				    r->vote.entries[0].answer,
				    strlen(r->vote.entries[0].answer));

		json_object_set_new(out, "expected",
				    client_text(x->it->expected,
						strlen(x->it->expected)));
		json_object_set_new(out, "correct", json_boolean(ok));
		fr->n_expected++;
		fr->n_correct += ok;
	} else {
		/* null, as `quorum ask --file` prints them: every line has
		 * the same keys */
		json_object_set_new(out, "expected", json_null());
		json_object_set_new(out, "correct", json_null());
	}
	json_object_foreach(o, k, v)
		json_object_set(out, k, v);
	json_decref(o);
	fr->tokens += r->stats.gen_tokens;
	emit_line(out);
	sc_run_result_fini(r);
	return 0;
}

/* Every usable line is a question of one sc_run_many: the forks of all
 * questions in flight share each round's forward. Lines that are not a
 * question (qset_read: reported on stderr) are skipped; a question whose
 * prompt cannot be built or run gets an error line. */
static int run_file(const model *m, const tok *t, const char *mpath,
		    const prompt_style *ps, const char *system,
		    const prompt_shot *shots, size_t n_shots, const char *path,
		    sc_engine *e, const sc_params *p, int max_live,
		    int prefill_tokens)
{
	file_run fr = {m, t, mpath, ps, p, NULL, NULL, 0, 0, 0, 0};
	qset_item *items = NULL;
	size_t n = 0, n_bad = 0;
	sc_question *qs = NULL;
	int nq = 0, rc;
	double t0 = now_ms(), dt;

	if (qset_read("run", path, &items, &n, &n_bad))
		return 1;
	qs = calloc(n + 1, sizeof(*qs));
	fr.map = calloc(n + 1, sizeof(*fr.map));
	fr.fq = calloc(n + 1, sizeof(*fr.fq));
	if (!qs || !fr.map || !fr.fq) {
		fprintf(stderr, "quorum run: out of memory\n");
		rc = 1;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		file_q *x = &fr.fq[i];

		x->it = &items[i];
		if (prompt_build_shots(t, ps->family, ps->think, system, shots,
				       n_shots, items[i].question, &x->ids,
				       &x->n_ids)) {
			x->err = dup_str(qerr_detail());
			fr.n_errors++;
			emit_error(x); /* before the results */
			continue;
		}
		x->p = *p;
		if (items[i].has_format)
			x->p.answer = items[i].format;
		answer_choice_options(&x->p.answer, items[i].question,
				      items[i].qlen);
		qs[nq] = (sc_question){x->ids, x->n_ids, &x->p};
		fr.map[nq++] = (int)i;
	}
	rc = sc_run_many(e, qs, nq, max_live, prefill_tokens, on_file_result,
			 &fr);
	dt = (now_ms() - t0) / 1e3;
	if (rc)
		fprintf(stderr, "quorum run: %s\n", qerr_detail());
	fprintf(stderr, "quorum run: %zu questions, %d errors, %zu malformed "
		"lines", n, fr.n_errors, n_bad);
	if (fr.n_expected)
		fprintf(stderr, ", %d of %d correct", fr.n_correct,
			fr.n_expected);
	fprintf(stderr, "; %llu tokens in %.1f s (%.1f tokens/s), up to %d "
		"forks per round\n", (unsigned long long)fr.tokens, dt,
		dt > 0 ? fr.tokens / dt : 0.0, max_live);
	rc = rc || fr.n_errors || n_bad ? 1 : 0;
out:
	for (size_t i = 0; fr.fq && i < n; i++) {
		free(fr.fq[i].ids);
		free(fr.fq[i].err);
	}
	free(fr.fq);
	free(qs);
	free(fr.map);
	qset_free(items, n);
	free(items);
	return rc;
}

static void print_text(const model *m, const prompt_style *ps,
		       const sc_params *p, const sc_result *r)
{
	const sc_stats *st = &r->stats;
	double dec_s = st->decode_ms / 1e3;

	printf("model: %s, %d layers, dim %d; prompt format %s, %d tokens\n",
	       model_arch_name(m->cfg.arch), m->cfg.n_layers, m->cfg.dim,
	       ps->note, st->n_prompt);
	if (r->vote.winner == VOTE_NONE) {
		printf("answer: (none: no sample gave an answer)\n");
	} else {
		char shown[VOTE_ANSWER_MAX];

		winner_shown(r, shown, sizeof(shown));
		printf("answer: %s  (%zu of %d votes)\n", shown,
		       r->vote.entries[0].count, r->n);
	}
	print_stop(r);
	printf("votes%s:\n", p->vote == SC_VOTE_CONFIDENCE
				       ? " (count, confidence weight)" : "");
	for (size_t i = 0; i < r->vote.n_entries; i++) {
		printf("  %6zu  ", r->vote.entries[i].count);
		if (p->vote == SC_VOTE_CONFIDENCE)
			printf("%8.4f  ",
			       (double)r->vote.entries[i].weight / 0x1p32);
		printf("%s\n", r->vote.entries[i].answer);
	}
	if (r->vote.n_voters < (size_t)r->n)
		printf("  %6zu  (no answer)\n", (size_t)r->n - r->vote.n_voters);
	printf("samples:\n");
	for (int i = 0; i < r->n; i++) {
		const sc_sample *x = &r->samples[i];
		char rt[32] = "";

		if (x->reasoning_tokens) /* of them, those spent reasoning */
			snprintf(rt, sizeof(rt), " (%d reasoning)",
				 x->reasoning_tokens);
		if (x->has_answer)
			printf("--- sample %d: answer %s, %d tokens%s, finish "
			       "%s, mean logprob %.4f, group confidence %.4f\n",
			       x->index, x->answer, x->n_tokens, rt,
			       sc_fork_finish_name(x->finish), x->mean_logprob,
			       x->group_conf);
		else
			printf("--- sample %d: no answer (%s), %d tokens%s, "
			       "finish %s, mean logprob %.4f, group confidence "
			       "%.4f\n", x->index, no_answer_why(p, x),
			       x->n_tokens, rt, sc_fork_finish_name(x->finish),
			       x->mean_logprob, x->group_conf);
		fwrite(x->text, 1, x->len, stdout);
		printf("\n");
	}
	printf("--- %s mode: %d prefill(s) %.1f ms, decode %.1f ms, %llu tokens "
	       "(%.1f tokens/s); KV peak %.2f MB (unshared: %.2f MB)\n",
	       sc_params_mode_name(p->mode), st->n_prefills, st->prefill_ms,
	       st->decode_ms, (unsigned long long)st->gen_tokens,
	       dec_s > 0 ? st->gen_tokens / dec_s : 0.0,
	       st->kv_peak_bytes / 1e6, st->kv_unshared_bytes / 1e6);
}

/* The few-shot file (if any), the model, its tokenizer and prompt style,
 * the style reported on stderr; 0, or -1 after saying what failed. */
static int load_inputs(const char *shots_file, prompt_shot **shots,
		       size_t *n_shots, const char *mpath, model **m, tok **t,
		       const char *tmpl, int think, prompt_style *ps)
{
	if (shots_file && qset_read_shots("run", shots_file, shots, n_shots))
		return -1;
	if (model_load(mpath, m) || tok_load((*m)->gguf, t) ||
	    prompt_style_resolve(*t, tmpl, think, ps)) {
		fprintf(stderr, "quorum run: %s\n", qerr_detail());
		return -1;
	}
	fprintf(stderr, "quorum run: template %s\n", ps->note);
	if (ps->warning[0])
		fprintf(stderr, "quorum run: warning: %s\n", ps->warning);
	return 0;
}

int cmd_run(int argc, char **argv)
{
	static const struct option own[] = {
		{"model", required_argument, 0, 'm'},
		{"system", required_argument, 0, 's'},
		{"shots", required_argument, 0, 'f'},
		{"template", required_argument, 0, 't'},
		{"think", required_argument, 0, 'H'},
		{"reasoning-effort", required_argument, 0, 'E'},
		{"threads", required_argument, 0, 'j'},
		{"kv-type", required_argument, 0, 'K'},
		{"activations", required_argument, 0, 'A'},
		{"block-tokens", required_argument, 0, 'B'},
		{"json", no_argument, 0, 'J'},
		{"file", required_argument, 0, 'G'},
		{"max-live", required_argument, 0, 'X'},
		{"prefill-tokens", required_argument, 0, 'R'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	struct option opts[48];
	sampflags sf;
	sc_params p;
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	const char *mpath = NULL, *system = NULL, *tmpl = NULL, *file = NULL;
	const char *shots_file = NULL;
	prompt_shot *shots = NULL;
	size_t n_shots = 0;
	char *question = NULL, *stdin_buf = NULL;
	int max_live = 64, prefill_tokens = 256;
	int json = 0, c, rc = 1, think = PROMPT_THINK_DEFAULT, k;
	int think_set = 0, effort_set = 0, batch_set = 0;
	prompt_style ps;
	long v;
	model *m = NULL;
	tok *t = NULL;
	sc_engine *e = NULL;
	int32_t *ids = NULL;
	size_t n_ids = 0;
	sc_result r = {0};

	sampflags_init(&sf, "run", SF_RUN);
	k = (int)sampflags_options(&sf, opts, 0, sizeof(opts) / sizeof(opts[0])
				   - sizeof(own) / sizeof(own[0]));
	memcpy(opts + k, own, sizeof(own));
	optind = 1;
	if (cli_opts("run", argc, argv, "n:h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
		if ((k = sampflags_opt(&sf, c, optarg)) != -1) {
			if (k)
				return 2;
			continue;
		}
		switch (c) {
		case 'm': mpath = optarg; break;
		case 's': system = optarg; break;
		case 'f': shots_file = optarg; break;
		case 'G': file = optarg; break;
		case 't':
			if (prompt_family_from_name(optarg) < 0)
				return cli_usage_error("run", "unknown template "
						       "'%s' (%s)", optarg,
						       PROMPT_FAMILY_LIST);
			tmpl = optarg;
			break;
		case 'H':
			if (!strcmp(optarg, "on"))
				think = PROMPT_THINK_ON;
			else if (!strcmp(optarg, "off"))
				think = PROMPT_THINK_OFF;
			else
				return cli_usage_error("run", "--think takes on "
						       "or off, not '%s'",
						       optarg);
			think_set = 1;
			break;
		case 'E':
			if ((think = prompt_effort_from_name(optarg)) < 0)
				return cli_usage_error("run", "--reasoning-effort "
						       "takes %s, not '%s'",
						       PROMPT_EFFORT_LIST,
						       optarg);
			effort_set = 1;
			break;
		case 'J': json = 1; break;
		case 'X':
			if (cli_long("run", "--max-live", optarg, 1, 65536, &v))
				return 2;
			max_live = (int)v;
			batch_set = 'X';
			break;
		case 'R':
			if (cli_long("run", "--prefill-tokens", optarg, 1,
				     4096, &v))
				return 2;
			prefill_tokens = (int)v;
			batch_set = 'R';
			break;
		case 'j':
			if (cli_long("run", "--threads", optarg, 1, 256, &v))
				return 2;
			ep.n_threads = (int)v;
			break;
		case 'B':
			if (cli_long("run", "--block-tokens", optarg, 1, 4096,
				     &v))
				return 2;
			ep.block_tokens = (int)v;
			break;
		case 'A':
			if (strcmp(optarg, "int") && strcmp(optarg, "f32"))
				return cli_usage_error("run", "unknown activations "
						       "'%s' (int, f32)", optarg);
			kern_set_activations(strcmp(optarg, "f32") ? KERN_ACT_INT
								   : KERN_ACT_F32);
			break;
		case 'K':
			if ((ep.kv_dtype = kv_dtype_from_name(optarg)) < 0)
				return cli_usage_error("run", "unknown KV type "
						       "'%s' (f16, f32, q8_0)",
						       optarg);
			break;
		case 'h': help(&sf); return 0;
		default: return cli_usage_error("run", "bad option");
		}
	}
	p = sf.p;
	if (!mpath)
		return cli_usage_error("run", "--model is required");
	/* both set one variable: the later flag silently won */
	if (think_set && effort_set)
		return cli_usage_error("run", "--reasoning-effort: not "
				       "together with --think ("
				       PROMPT_THINK_EFFORT_CLASH ")");
	if (file && optind != argc)
		return cli_usage_error("run", "--file takes the questions from "
				       "the file: give no question argument");
	if (file && p.mode != SC_BATCHED)
		return cli_usage_error("run", "--file runs in batched mode");
	/* flags that would change nothing: accepted, they read as if they
	 * had (the text shows no log-probabilities; one question is not
	 * scheduled by --file's batching) */
	if (!file && !json && SF_LOGPROBS_FLAG(&sf))
		return cli_usage_error("run", "%s shows only in the JSON "
				       "output: add --json (or use --file)",
				       SF_LOGPROBS_FLAG(&sf));
	if (!file && batch_set)
		return cli_usage_error("run", "%s goes with --file",
				       batch_set == 'X' ? "--max-live"
							: "--prefill-tokens");
	if (file) {
		if (load_inputs(shots_file, &shots, &n_shots, mpath, &m, &t,
				tmpl, think, &ps))
			goto out;
		/* rows per forward: the merged round's forks and the
		 * prefill chunk */
		if (ep.max_batch < max_live)
			ep.max_batch = max_live < 256 ? max_live : 256;
		if (ep.prefill_chunk < prefill_tokens)
			ep.prefill_chunk = prefill_tokens;
		if (sc_engine_new(m, t, &ep, &e)) {
			fprintf(stderr, "quorum run: %s\n", qerr_detail());
			goto out;
		}
		rc = run_file(m, t, mpath, &ps, system, shots, n_shots, file, e,
			      &p, max_live, prefill_tokens);
		goto out;
	}
	if (optind + 1 != argc)
		return cli_usage_error("run", "give exactly one question "
				       "('-' reads stdin)");
	question = argv[optind];
	if (!strcmp(question, "-")) {
		size_t qn;

		if (!(question = stdin_buf = cli_read_question(&qn))) {
			fprintf(stderr, "quorum run: cannot read stdin\n");
			return 1;
		}
	}
	if (wire_question_blank(question, strlen(question))) {
		rc = cli_usage_error("run", "the question is empty (or only "
				     "whitespace)");
		goto out;
	}
	if (load_inputs(shots_file, &shots, &n_shots, mpath, &m, &t, tmpl,
			think, &ps))
		goto out;
	answer_choice_options(&p.answer, question, strlen(question));
	if (prompt_build_shots(t, ps.family, ps.think, system, shots, n_shots,
			       question, &ids, &n_ids) ||
	    sc_engine_new(m, t, &ep, &e) || sc_run(e, ids, n_ids, &p, &r) ||
	    (p.answer.kind == ANSWER_SELECT &&
	     usc_select(e, t, &ps, question, &r))) {
		fprintf(stderr, "quorum run: %s\n", qerr_detail());
		goto out;
	}
	if (usc.done && !json)
		printf("selection pass (answer select): %s, %d tokens: %s\n",
		       usc.chosen >= 0 ? "chose a response"
				       : "named none (the vote stands)",
		       usc.tokens, usc.reply);
	if (json)
		print_json(m, t, mpath, &ps, &p, &r);
	else
		print_text(m, &ps, &p, &r);
	rc = 0;
out:
	sc_run_result_fini(&r);
	sc_engine_free(&e);
	free(ids);
	qset_shots_free(shots, n_shots);
	tok_free(&t);
	model_free(&m);
	free(stdin_buf);
	return rc;
}

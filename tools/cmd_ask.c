/* quorum ask — ask a running cluster (the coordinator's client endpoint). */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sampflags.h"
#include "client.h"
#include "net/spwire.h"
#include "net/wire.h"
#include "qerr.h"
#include "sc/params.h"
#include "sc/stop.h"
#include "qset.h"
#include "sc/vote.h"
#include "text/prompt.h"

#define ASK_DEFAULT_ENDPOINT "tcp://127.0.0.1:7700"
#define ASK_MAX_CONCURRENCY 1024
#define ASK_BUSY_BACKOFF_MS 250 /* doubles per BUSY retry */

/* Client-side outcome when no reply came (not a protocol status). */
#define ASK_NO_REPLY "NO_REPLY"

static void help(const sampflags *f)
{
	printf("usage: quorum ask [options] \"question\"\n"
	       "       quorum ask --file questions.jsonl [options]\n\n"
	       "Asks a running quorum cluster (see `coordinator --config`) to\n"
	       "answer a question by self-consistency and prints the answer,\n"
	       "the vote and every sample, like `quorum run`. The question is\n"
	       "read from stdin when it is '-' (its trailing newlines dropped).\n\n"
	       "With --file, asks every question of a JSON-lines file (one\n"
	       "object per line: \"question\", optional expected \"answer\",\n"
	       "optional \"id\"), up to --concurrency at a time, and writes one\n"
	       "JSON result per line in input order. Expected and given answers\n"
	       "are compared by the answer format (--answer, or the line's\n"
	       "\"answer_format\"): under the default auto 42, 42.0 and +42\n"
	       "agree, so do 1,234 and 1234, and 1/2 and 0.5. Malformed lines are\n"
	       "reported with their line number and skipped.\n"
	       "The summary (counts, accuracy) goes to stdout with --out, else\n"
	       "to stderr; a progress bar is drawn when stderr is a terminal.\n\n"
	       "options:\n"
	       "  --endpoint E          coordinator client endpoint\n"
	       "                        (default " ASK_DEFAULT_ENDPOINT ")\n");
	sampflags_help(f);
	printf("  --system TEXT         system prompt (default: the cluster's)\n"
	       "  --think on|off        thinking of qwen3 templates (default:\n"
	       "                        the cluster's prompt.think)\n"
	       "  --reasoning-effort E  low | medium | high: harmony (gpt-oss)\n"
	       "                        templates' reasoning (default medium;\n"
	       "                        not with --think)\n"
	       "  --shots FILE          few-shot examples: JSON lines {\"question\":\n"
	       "                        Q, \"solution\": S}, shown as prior turns\n"
	       "                        of the chat before each question\n"
	       "  --no-prefix-cache     neither reuse cached prompt prefixes nor\n"
	       "                        leave this prompt's for later requests\n"
	       "  --server-key FILE     CURVE: the coordinator's public key file\n"
	       "  --client-key FILE     CURVE: this client's secret key file (from\n"
	       "                        'quorum keygen'; its .pub on client_keys)\n"
	       "  --timeout SEC         wait per attempt (default 60)\n"
	       "  --retries R           resend the same request R more times when\n"
	       "                        no reply came (default 2)\n"
	       "  --json                one JSON object: `quorum run --json`'s\n"
	       "                        shapes plus status, error, request_id,\n"
	       "                        endpoint, prefix (docs/commands.md)\n"
	       "  --file F              questions, JSON lines ('-' = stdin)\n"
	       "  --concurrency C       requests in flight with --file (default 8)\n"
	       "  --out F               results with --file (default stdout)\n"
	       "  -h, --help            this help\n\n"
	       "exit status: 0 answered, 1 failed (no reply, error reply), 2 usage,\n"
	       "3 the cluster is busy (STATUS_BUSY: try again later). With --file:\n"
	       "0 when every line was a question and got an OK reply, otherwise 1\n"
	       "(as quorum run --file).\n");
}

typedef struct ask_opts {
	const char *endpoint;
	const char *server_key, *client_key; /* CURVE key files or NULL */
	/* the settings given (the cluster's defaults for the rest), as
	 * they travel */
	Quorum__SamplingParams sp;
	spwire_buf spb;
	int n_params;              /* fields set in sp */
	const sampflags *f;        /* the flags: their values and bits */
	const char *system;
	int think;                 /* -1: the cluster's; 0 off; 1 on */
	const char *effort;        /* --reasoning-effort, or NULL */
	int no_cache;              /* Ask.prefix_cache = false */
	Quorum__Shot **shots;      /* --shots, as sent */
	size_t n_shots;
	int timeout_ms;
	int retries;
	int json;
	const char *file;
	const char *out;
	int concurrency;
} ask_opts;

static void ask_init(Quorum__Ask *ask, Quorum__ClientRequest *req,
		     const ask_opts *o, const char *q, size_t qlen)
{
	quorum__ask__init(ask);
	quorum__client_request__init(req);
	ask->question.data = (uint8_t *)q;
	ask->question.len = qlen;
	if (o->system) {
		ask->has_system = 1;
		ask->system.data = (uint8_t *)o->system;
		ask->system.len = strlen(o->system);
	}
	if (o->think >= 0) {
		ask->has_think = 1;
		ask->think = o->think;
	}
	ask->reasoning_effort = (char *)o->effort;
	if (o->no_cache) {
		ask->has_prefix_cache = 1;
		ask->prefix_cache = 0;
	}
	ask->n_shots = o->n_shots;
	ask->shots = o->shots;
	if (o->n_params)
		ask->params = (Quorum__SamplingParams *)&o->sp;
	req->body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	req->ask = ask;
}

/* ---- one question ---------------------------------------------------- */

static void print_text(const Quorum__Answer *a)
{
	const Quorum__Timings *t = a->timings;
	const Quorum__PrefixStats *p = a->prefix;
	size_t voters = 0;
	sc_params ran;
	unsigned given;
	const answer_format *fmt = client_answer_params(a, &ran, &given) &&
					   (given & SC_BIT(SC_S_ANSWER))
				   ? &ran.answer : NULL;

	if (!a->has_answer) {
		printf("answer: (none: no sample gave an answer)\n");
	} else {
		/* as its first voter wrote it; of the samples voted over
		 * (reported), as quorum run */
		char shown[VOTE_ANSWER_MAX];

		client_answer_shown(a, shown, sizeof(shown));
		printf("answer: %s  (%u of %zu votes)\n", shown,
		       a->n_votes ? a->votes[0]->count : 0, a->n_samples);
	}
	printf("votes:\n");
	for (size_t i = 0; i < a->n_votes; i++) {
		printf("  %6u  %.*s\n", a->votes[i]->count,
		       (int)a->votes[i]->answer.len,
		       (const char *)a->votes[i]->answer.data);
		voters += a->votes[i]->count;
	}
	if (voters < a->n_samples)
		printf("  %6zu  (no answer)\n", a->n_samples - voters);
	if (a->stop && a->stop->stopped_early) {
		const Quorum__StopReport *x = a->stop;

		printf("stop: %s fired after %u of %u samples (leader %u, "
		       "runner-up %u", x->rule, x->reported, x->budget,
		       x->leader_count, x->second_count);
		if (x->has_posterior)
			printf(", posterior %.6f", x->posterior);
		if (x->has_agreeing_run)
			printf(", last %u agree", x->agreeing_run);
		printf("); %u started, %u cancelled, %u never started; ~%llu "
		       "tokens saved\n", x->started, x->cancelled,
		       x->budget - x->started,
		       (unsigned long long)x->tokens_saved_est);
	} else if (a->stop) {
		printf("stop: %s: all %u samples ran\n", a->stop->rule, a->n);
	}
	printf("samples:\n");
	for (size_t i = 0; i < a->n_samples; i++) {
		const Quorum__Sample *x = a->samples[i];

		if (x->has_answer)
			printf("--- sample %u: answer %.*s", x->index,
			       (int)x->answer.len,
			       (const char *)x->answer.data);
		else
			printf("--- sample %u: no answer (%s)", x->index,
			       answer_no_answer_reason(
				       fmt, (const char *)x->text.data,
				       x->text.len));
		printf(", %u tokens", x->tokens);
		if (x->reasoning_tokens) /* of them, those spent reasoning */
			printf(" (%u reasoning)", x->reasoning_tokens);
		printf(", finish %s%s%s\n", x->finish ? x->finish : "?",
		       x->worker ? ", worker " : "", x->worker ? x->worker : "");
		fwrite(x->text.data, 1, x->text.len, stdout);
		printf("\n");
	}
	if (t) {
		double dec_s = t->has_decode_ms ? t->decode_ms / 1e3 : 0;

		printf("--- cluster: queue %.1f ms, prefill %.1f ms, decode "
		       "%.1f ms, total %.1f ms; %llu tokens (%.1f tokens/s); "
		       "%u messages\n",
		       t->queue_ms, t->prefill_ms, t->decode_ms, t->total_ms,
		       (unsigned long long)t->generated_tokens,
		       dec_s > 0 ? t->generated_tokens / dec_s : 0.0,
		       t->messages);
	}
	if (p)
		printf("--- prefix: %u prompt tokens (%u reused, %u prefilled), "
		       "%u block(s), prefill on %s "
		       "(%s, %u prefill(s)); blocks mapped %u, copied %u, "
		       "transferred %u (%llu bytes)\n",
		       p->prompt_tokens, p->prompt_tokens_reused,
		       p->prompt_tokens_prefilled, p->prefix_blocks,
		       p->prefill_worker ? p->prefill_worker : "?",
		       !p->has_cache_hit ? "cache ?"
		       : p->cache_hit ? "cache hit" : "cache miss",
		       p->prefills, p->blocks_mapped, p->blocks_copied,
		       p->blocks_transferred,
		       (unsigned long long)p->bytes_transferred);
}

/* The sampling parameters the request ran with, as the reply says
 * (with a coordinator that does not say: those asked, null for the
 * cluster's defaults). */
static void params_json(json_t *o, const ask_opts *a,
			const Quorum__Answer *ans)
{
	sc_params ran;
	unsigned given;

	json_object_set_new(o, "mode", json_string("cluster"));
	if (client_answer_params(ans, &ran, &given))
		client_params_json(o, &ran, given, CLIENT_ECHO_SETTINGS);
	else
		client_params_json(o, &a->f->p, a->f->given,
				   CLIENT_ECHO_SETTINGS);
}

static void print_json(const ask_opts *a, uint64_t id, const char *status,
		       const char *error, const Quorum__Answer *ans)
{
	json_t *o = json_object();
	char *s, idhex[17];

	json_object_set_new(o, "status", json_string(status));
	json_object_set_new(o, "error", error ? client_text(error, strlen(error))
					      : json_null());
	snprintf(idhex, sizeof(idhex), "%016llx", (unsigned long long)id);
	json_object_set_new(o, "request_id", json_string(idhex));
	json_object_set_new(o, "endpoint", json_string(a->endpoint));
	client_answer_json(o, ans);
	params_json(o, a, ans);
	s = client_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(o);
}

static int ask_one(const ask_opts *o, const char *q, size_t qlen)
{
	Quorum__Ask ask;
	Quorum__ClientRequest req;
	Quorum__ClientReply *r = NULL;
	client *c = NULL;
	int rc = 1;
	const char *sname;
	char msg[512];

	ask_init(&ask, &req, o, q, qlen);
	req.request_id = client_request_id();
	if (client_open_curve(o->endpoint, o->server_key, o->client_key,
				      &c) ||
	    client_call(c, &req, o->timeout_ms, o->retries, &r)) {
		fprintf(stderr, "quorum ask: %s\n", qerr_detail());
		goto out;
	}
	if (!r) {
		client_no_reply(msg, sizeof(msg), o->endpoint,
				o->timeout_ms * (o->retries + 1) / 1e3,
				o->server_key != NULL);
		fprintf(stderr, "quorum ask: %s\n", msg);
		if (o->json)
			print_json(o, req.request_id, ASK_NO_REPLY, msg, NULL);
		goto out;
	}
	if (r->version != QUORUM__CONSTANTS__PROTOCOL_VERSION &&
	    r->status == QUORUM__STATUS__STATUS_OK)
		r->status = QUORUM__STATUS__STATUS_VERSION_MISMATCH;
	sname = client_status_name(r->status);
	if (r->status != QUORUM__STATUS__STATUS_OK) {
		snprintf(msg, sizeof(msg), "%s", r->error ? r->error
			 : r->version != QUORUM__CONSTANTS__PROTOCOL_VERSION
			 ? "the coordinator speaks another protocol version"
			 : "(no message)");
		fprintf(stderr, "quorum ask: %s: %s\n", sname, msg);
		if (o->json)
			print_json(o, req.request_id, sname, msg, NULL);
		rc = client_exit_code(r->status);
		goto out;
	}
	if (r->body_case != QUORUM__CLIENT_REPLY__BODY_ANSWER || !r->answer) {
		fprintf(stderr, "quorum ask: malformed reply: OK without an "
			"answer\n");
		goto out;
	}
	if (o->json)
		print_json(o, req.request_id, sname, NULL, r->answer);
	else
		print_text(r->answer);
	rc = 0;
out:
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	client_free(&c);
	return rc;
}

/* ---- a file of questions --------------------------------------------- */

typedef struct item {
	qset_item q;          /* line, question, expected */
	json_t *result;       /* the output object once done */
	int ok;               /* got an OK reply */
	int answered;         /* ... with an answer */
	int correct;
} item;

typedef struct slot {
	size_t item;          /* index into items */
	uint64_t id;
	int attempts;         /* sends of this id */
	int busy_retries;
	int64_t deadline;     /* ms: resend or give up at */
	int64_t send_at;      /* ms: 0 = sent; else send then (BUSY backoff) */
} slot;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Fills it->result from a reply (r NULL: no reply; status/err then say
 * why). */
static void finish_item(const answer_format *run, item *it,
			const Quorum__ClientReply *r, const char *status,
			const char *err)
{
	const Quorum__Answer *a = NULL;
	json_t *o = json_object(), *tmp, *id;

	if (r && r->status == QUORUM__STATUS__STATUS_OK &&
	    r->body_case == QUORUM__CLIENT_REPLY__BODY_ANSWER)
		a = r->answer;
	if (r && r->status == QUORUM__STATUS__STATUS_OK && !a) {
		status = "STATUS_INTERNAL";
		err = "malformed reply: OK without an answer";
	}
	it->ok = a != NULL;
	it->answered = a && a->has_answer;
	{
		answer_format f = it->q.has_format ? it->q.format : *run;

		answer_choice_options(&f, it->q.question, it->q.qlen);
		it->correct = it->answered && it->q.expected &&
			      qset_match(&f, it->q.expected,
					 (const char *)a->answer.data,
					 a->answer.len);
	}
	json_object_set_new(o, "line", json_integer(it->q.line));
	if ((id = json_object_get(it->q.obj, "id")))
		json_object_set(o, "id", id);
	json_object_set_new(o, "question", client_text(it->q.question,
						       it->q.qlen));
	json_object_set_new(o, "expected", it->q.expected ? client_text(
		it->q.expected, strlen(it->q.expected)) : json_null());
	tmp = json_object();
	client_answer_json(tmp, a);
	json_object_set(o, "answer", json_object_get(tmp, "answer"));
	json_object_set_new(o, "correct", it->q.expected ? json_boolean(
		it->correct) : json_null());
	json_object_set(o, "votes", json_object_get(tmp, "votes"));
	json_object_set(o, "n", json_object_get(tmp, "n"));
	json_object_set(o, "voters", json_object_get(tmp, "voters"));
	json_object_set_new(o, "status", json_string(status));
	json_object_set_new(o, "error", err ? client_text(err, strlen(err))
					    : json_null());
	json_object_set(o, "timings", json_object_get(tmp, "timings"));
	{
		/* the rest of `quorum ask --json`'s answer: the samples
		 * (their logprobs when asked), the stop report... (as
		 * quorum run --file writes its --json object) */
		const char *k;
		json_t *v;

		json_object_foreach(tmp, k, v)
			if (!json_object_get(o, k))
				json_object_set(o, k, v);
	}
	json_decref(tmp);
	it->result = o;
}

static int send_slot(client *c, const ask_opts *o, item *it, slot *s)
{
	Quorum__Ask ask;
	Quorum__ClientRequest req;
	Quorum__SamplingParams sp;
	spwire_buf b;
	sc_params p;

	ask_init(&ask, &req, o, it->q.question, it->q.qlen);
	if (it->q.has_format) {
		/* the line's own answer format */
		p = o->f->p;
		p.answer = it->q.format;
		spwire_encode(&p, o->f->given | SC_BIT(SC_S_ANSWER), &sp, &b);
		ask.params = &sp;
	}
	req.request_id = s->id;
	s->attempts++;
	s->send_at = 0;
	s->deadline = now_ms() + o->timeout_ms;
	return client_send(c, &req);
}

static int ask_file(const ask_opts *o)
{
	item *items = NULL;
	slot *slots = NULL;
	size_t n = 0, n_bad = 0, next = 0, n_slots = 0, done = 0, written = 0;
	size_t failed = 0, with_exp = 0, answered = 0, correct = 0, replies = 0;
	client *c = NULL;
	FILE *out = stdout;
	FILE *sum;
	int rc = 1, tty = isatty(2), dead = 0;
	char msg[512];

	qset_item *qs = NULL;

	if (qset_read("ask", o->file, &qs, &n, &n_bad))
		return 1;
	if (n && !(items = calloc(n, sizeof(*items)))) {
		fprintf(stderr, "quorum ask: out of memory\n");
		qset_free(qs, n);
		free(qs);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		items[i].q = qs[i];
	free(qs);
	if (o->out && !(out = fopen(o->out, "w"))) {
		fprintf(stderr, "quorum ask: cannot create %s: %m\n", o->out);
		goto cleanup;
	}
	sum = o->out ? stdout : stderr;
	if (!(slots = calloc((size_t)o->concurrency, sizeof(*slots))) ||
	    client_open_curve(o->endpoint, o->server_key, o->client_key,
				      &c)) {
		fprintf(stderr, "quorum ask: %s\n", slots ? qerr_detail()
			: "out of memory");
		goto cleanup;
	}
	client_no_reply(msg, sizeof(msg), o->endpoint,
			o->timeout_ms * (o->retries + 1) / 1e3,
			o->server_key != NULL);
	if (tty && n)
		qset_progress(0, n, 0);
	for (;;) {
		int64_t now = now_ms(), wake = now + 1000;
		Quorum__ClientReply *r = NULL;

		/* fill free slots in input order */
		while (!dead && n_slots < (size_t)o->concurrency && next < n) {
			slot *s = &slots[n_slots++];

			memset(s, 0, sizeof(*s));
			s->item = next++;
			s->id = client_request_id();
			if (send_slot(c, o, &items[s->item], s))
				goto io_fail;
		}
		/* resends, BUSY backoffs, and give-ups that are due */
		for (size_t i = 0; i < n_slots; i++) {
			slot *s = &slots[i];
			item *it = &items[s->item];
			int64_t due = s->send_at ? s->send_at : s->deadline;

			if (due <= now && s->send_at) {
				if (send_slot(c, o, it, s))
					goto io_fail;
			} else if (due <= now && !dead &&
				   s->attempts <= o->retries) {
				if (send_slot(c, o, it, s))
					goto io_fail;
			} else if (due <= now || dead) {
				/* the same message every time: a
				 * coordinator that never answered is down */
				if (!replies && !dead) {
					fprintf(stderr, "%squorum ask: %s\n",
						tty ? "\n" : "", msg);
					dead = 1;
				}
				finish_item(&o->f->p.answer, it, NULL, ASK_NO_REPLY, msg);
				failed++;
				done++;
				slots[i--] = slots[--n_slots];
				continue;
			}
			due = s->send_at ? s->send_at : s->deadline;
			if (due < wake)
				wake = due;
		}
		if (dead) { /* what was never sent fails the same way */
			char unsent[600];

			snprintf(unsent, sizeof(unsent), "not sent: %s", msg);
			while (next < n) {
				finish_item(&o->f->p.answer, &items[next++], NULL, ASK_NO_REPLY,
					    unsent);
				failed++;
				done++;
			}
		}
		/* write what is complete, in input order */
		while (written < n && items[written].result) {
			char *s = client_dumps(items[written].result,
					     JSON_COMPACT | JSON_PRESERVE_ORDER);

			if (s)
				fprintf(out, "%s\n", s);
			free(s);
			json_decref(items[written].result);
			items[written].result = json_null();
			written++;
		}
		fflush(out);
		if (tty)
			qset_progress(done, n, failed);
		if (done == n)
			break;
		now = now_ms();
		if (client_recv(c, wake > now ? (int)(wake - now) : 0, &r))
			goto io_fail;
		if (!r && client_lost(c)) {
			/* the coordinator went away: what was waiting for
			 * a reply goes again at once, the same ids (it waits
			 * in the socket for the successor) */
			for (size_t i = 0; i < n_slots; i++)
				if (!slots[i].send_at &&
				    slots[i].attempts <= o->retries)
					slots[i].send_at = now_ms();
			continue;
		}
		if (!r)
			continue;
		replies++;
		for (size_t i = 0; i < n_slots; i++) {
			slot *s = &slots[i];
			item *it = &items[s->item];

			if (s->id != r->request_id || s->send_at)
				continue;
			if ((r->status == QUORUM__STATUS__STATUS_BUSY ||
			     (r->status == QUORUM__STATUS__STATUS_CANCELLED &&
			      r->has_retry_after_ms)) &&
			    s->busy_retries < o->retries) {
				/* refused, not queued (or cancelled by a
				 * draining coordinator): a fresh id later,
				 * after the coordinator's hint when given */
				s->send_at = now_ms() +
					     (r->has_retry_after_ms
						      ? (int64_t)r->retry_after_ms
						      : (ASK_BUSY_BACKOFF_MS
							 << s->busy_retries));
				s->busy_retries++;
				s->id = client_request_id();
				s->attempts = 0;
				break;
			}
			if (r->version != QUORUM__CONSTANTS__PROTOCOL_VERSION &&
			    r->status == QUORUM__STATUS__STATUS_OK)
				r->status = QUORUM__STATUS__STATUS_VERSION_MISMATCH;
			finish_item(&o->f->p.answer, it, r, client_status_name(r->status),
				    r->error);
			failed += !it->ok;
			done++;
			slots[i] = slots[--n_slots];
			break;
		}
		quorum__client_reply__free_unpacked(r, NULL);
	}
	if (tty && n)
		fprintf(stderr, "\n");
	for (size_t i = 0; i < n; i++) {
		with_exp += items[i].q.expected != NULL;
		answered += items[i].q.expected && items[i].answered;
		correct += items[i].correct;
	}
	fprintf(sum, "quorum ask: %zu question(s), %zu failed, %zu malformed "
		"line(s) skipped\n", n, failed, n_bad);
	if (with_exp && answered)
		fprintf(sum, "accuracy: %zu/%zu answered (%.1f%%), %zu/%zu "
			"total (%.1f%%)\n", correct, answered,
			100.0 * correct / answered, correct, with_exp,
			100.0 * correct / with_exp);
	else if (with_exp)
		/* no share of none */
		fprintf(sum, "accuracy: none answered, %zu/%zu total (%.1f%%)\n",
			correct, with_exp, 100.0 * correct / with_exp);
	/* a malformed line is a failure, as quorum run --file counts it */
	rc = failed || n_bad ? 1 : 0;
	goto cleanup;
io_fail:
	fprintf(stderr, "%squorum ask: %s\n", tty ? "\n" : "", qerr_detail());
cleanup:
	if (out && out != stdout && fclose(out)) {
		fprintf(stderr, "quorum ask: writing %s: %m\n", o->out);
		rc = 1;
	}
	for (size_t i = 0; i < n; i++) {
		qset_free(&items[i].q, 1);
		json_decref(items[i].result);
	}
	free(items);
	free(slots);
	client_free(&c);
	return rc;
}

/* The Ask's params: the flags given (the cluster's defaults for the
 * rest); they point into f and o. */
static void ask_params(ask_opts *o, const sampflags *f)
{
	o->f = f;
	o->n_params = spwire_encode(&f->p, f->given, &o->sp, &o->spb);
}

int cmd_ask(int argc, char **argv)
{
	static const struct option own[] = {
		{"endpoint", required_argument, 0, 'e'},
		{"system", required_argument, 0, 's'},
		{"think", required_argument, 0, 'H'},
		{"reasoning-effort", required_argument, 0, 'E'},
		{"no-prefix-cache", no_argument, 0, 'P'},
		{"shots", required_argument, 0, 'F'},
		{"server-key", required_argument, 0, 'K'},
		{"client-key", required_argument, 0, 'C'},
		{"timeout", required_argument, 0, 't'},
		{"retries", required_argument, 0, 'r'},
		{"json", no_argument, 0, 'J'},
		{"file", required_argument, 0, 'f'},
		{"concurrency", required_argument, 0, 'c'},
		{"out", required_argument, 0, 'o'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	ask_opts o = {.endpoint = ASK_DEFAULT_ENDPOINT, .timeout_ms = 60000,
		      .retries = 2, .concurrency = 8, .think = -1};
	struct option opts[48];
	sampflags sf;
	int c, rc, conc_given = 0, k;
	long v;
	float f;
	char *stdin_buf = NULL;
	const char *q, *shots_file = NULL;
	size_t qlen, n_shots = 0;
	prompt_shot *shots = NULL;
	Quorum__Shot *msgs = NULL;

	sampflags_init(&sf, "ask", SF_ASK);
	sf.cluster_defaults = 1;
	k = (int)sampflags_options(&sf, opts, 0, sizeof(opts) / sizeof(opts[0])
				   - sizeof(own) / sizeof(own[0]));
	memcpy(opts + k, own, sizeof(own));
	optind = 1;
	if (cli_opts("ask", argc, argv, "n:h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
		if ((k = sampflags_opt(&sf, c, optarg)) != -1) {
			if (k)
				return 2;
			continue;
		}
		switch (c) {
		case 'e': o.endpoint = optarg; break;
		case 's': o.system = optarg; break;
		case 'H':
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				return cli_usage_error("ask", "--think takes on "
						       "or off, not '%s'",
						       optarg);
			o.think = !strcmp(optarg, "on");
			break;
		case 'E':
			if (prompt_effort_from_name(optarg) < 0)
				return cli_usage_error("ask", "--reasoning-effort "
						       "takes %s, not '%s'",
						       PROMPT_EFFORT_LIST,
						       optarg);
			o.effort = optarg;
			break;
		case 'J': o.json = 1; break;
		case 'P': o.no_cache = 1; break;
		case 'F': shots_file = optarg; break;
		case 'K': o.server_key = optarg; break;
		case 'C': o.client_key = optarg; break;
		case 'f': o.file = optarg; break;
		case 'o': o.out = optarg; break;
		case 't':
			if (cli_float("ask", "--timeout", optarg, 0.001, 86400,
				      &f))
				return 2;
			o.timeout_ms = (int)ceilf(f * 1000);
			break;
		case 'r':
			if (cli_long("ask", "--retries", optarg, 0, 100, &v))
				return 2;
			o.retries = (int)v;
			break;
		case 'c':
			if (cli_long("ask", "--concurrency", optarg, 1,
				     ASK_MAX_CONCURRENCY, &v))
				return 2;
			o.concurrency = (int)v;
			conc_given = 1;
			break;
		case 'h': help(&sf); return 0;
		default: return cli_usage_error("ask", "bad option");
		}
	}
	ask_params(&o, &sf);
	if (!*o.endpoint)
		return cli_usage_error("ask", "--endpoint is empty");
	/* the cluster would take the effort and drop --think unsaid */
	if (o.think >= 0 && o.effort)
		return cli_usage_error("ask", "--reasoning-effort: not "
				       "together with --think ("
				       PROMPT_THINK_EFFORT_CLASH ")");
	if (shots_file) {
		if (qset_read_shots("ask", shots_file, &shots, &n_shots))
			return 1;
		if (!(o.shots = calloc(n_shots, sizeof(*o.shots))) ||
		    !(msgs = calloc(n_shots, sizeof(*msgs)))) {
			fprintf(stderr, "quorum ask: out of memory\n");
			rc = 1;
			goto done;
		}
		for (size_t i = 0; i < n_shots; i++) {
			quorum__shot__init(&msgs[i]);
			msgs[i].question.data = (uint8_t *)shots[i].question;
			msgs[i].question.len = strlen(shots[i].question);
			msgs[i].answer.data = (uint8_t *)shots[i].answer;
			msgs[i].answer.len = strlen(shots[i].answer);
			o.shots[i] = &msgs[i];
		}
		o.n_shots = n_shots;
	}
	if (!o.server_key != !o.client_key)
		return cli_usage_error("ask", "--server-key and --client-key "
				       "go together");
	if (o.file) {
		if (optind != argc)
			rc = cli_usage_error("ask", "give either --file or "
					     "a question, not both");
		else if (o.json)
			rc = cli_usage_error("ask", "--json is implied by "
					     "--file (results are JSON "
					     "lines)");
		else
			rc = ask_file(&o);
		goto done;
	}
	if (conc_given || o.out) {
		rc = cli_usage_error("ask", "--concurrency and --out go with "
				     "--file");
		goto done;
	}
	/* the text shows no log-probabilities: asked for, then dropped */
	if (!o.json && SF_LOGPROBS_FLAG(&sf)) {
		rc = cli_usage_error("ask", "%s shows only in the JSON output: "
				     "add --json (or use --file)",
				     SF_LOGPROBS_FLAG(&sf));
		goto done;
	}
	if (optind + 1 != argc) {
		rc = cli_usage_error("ask", "give exactly one question "
				     "('-' reads stdin)");
		goto done;
	}
	q = argv[optind];
	qlen = strlen(q);
	if (!strcmp(q, "-")) {
		if (!(q = stdin_buf = cli_read_question(&qlen))) {
			fprintf(stderr, "quorum ask: cannot read stdin\n");
			rc = 1;
			goto done;
		}
	}
	if (wire_question_blank(q, qlen)) {
		rc = cli_usage_error("ask", "the question is empty (or only "
				     "whitespace)");
		goto done;
	}
	rc = ask_one(&o, q, qlen);
done:
	free(stdin_buf);
	free(o.shots);
	free(msgs);
	qset_shots_free(shots, n_shots);
	return rc;
}

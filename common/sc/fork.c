/*
 * fork — one sample being decoded (a fork of the root): drawing its
 * tokens and keeping its books.
 *
 * Owns: a fork's step (sc_fork_step: end-of-generation masking, the
 * logits shaped by logit_bias and the penalties of its own tokens, the
 * draw, the text, per-token log-probabilities and their alternatives
 * (top_logprobs), the stop-string cut, the
 * settled length), its confidence (the sums DeepConf's group confidence
 * and the vote weight come from), its end (answer extraction), the online
 * confidence filter (the warm-up's threshold and the cut), and sc_run's
 * early stopping over finished samples in index order (sc_stopper: feeds
 * stop.h's decision, arms the filter). stop.c stays the rules alone,
 * shared with the coordinator; this is the engine's side of them.
 *
 * Callers: batch.c (every round's draw, a sample's end, the stopper as
 * samples finish) and run.c (the paged and reset modes' stopper), through
 * sc_int.h; sc_fork_sample_fini and sc_fork_finish_name are public.
 */
#include "sc/fork.h"

#include "sc/reasoning.h"
#include "sc/sc_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"
#include "text/prompt.h"

const char *sc_fork_finish_name(int finish)
{
	return finish == SC_FINISH_STOP ? "stop"
	       : finish == SC_FINISH_FILTERED ? "filtered"
	       : finish == SC_FINISH_GRAMMAR ? "grammar" : "length";
}

/* The longest stop string, in bytes (0: none). */
static size_t stop_strs_longest(const sc_stop_strs *q)
{
	size_t m = 0;

	for (int i = 0; i < q->n; i++)
		if (q->len[i] > m)
			m = q->len[i];
	return m;
}

static int append_text(fork_state *f, const char *piece, size_t n)
{
	sc_sample *s = f->out;

	if (s->len + n + 1 > f->text_cap) {
		size_t nc = (s->len + n + 1) * 2;
		char *nt = realloc(s->text, nc);

		if (!nt)
			return qerr_fail(QERR_NOMEM, "out of memory for text");
		s->text = nt;
		f->text_cap = nc;
	}
	memcpy(s->text + s->len, piece, n);
	s->len += n;
	s->text[s->len] = '\0';
	return 0;
}

/* A log-probability as the sample reports it: rounded toward 0 to a
 * multiple of 2^-32, as conf_add sums it. */
static double lp_round(double lp)
{
	return (double)(int64_t)(lp * 0x1p32) / 0x1p32;
}

/* Grows *a (cap elements of size sz) to hold need; 0 or -1. */
static int grow(void *a, size_t sz, size_t *cap, size_t need)
{
	size_t nc = *cap ? *cap : 16;
	void *na;

	if (need <= *cap)
		return 0;
	while (nc < need)
		nc *= 2;
	if (!(na = realloc(*(void **)a, nc * sz)))
		return -1;
	*(void **)a = na;
	*cap = nc;
	return 0;
}

/* Records a drawn token's log-probability (rounded as conf_add sums it),
 * where its piece will start in the text and, when asked (alt not NULL),
 * its n_alt alternatives. */
static int token_lp_add(sc_sample *s, double lp, const samp_alt *alt,
			int n_alt)
{
	int n = s->n_token_lp;

	if (!(n & (n - 1))) { /* 0, 1, 2, 4, ...: grow to the next power */
		size_t cap = n ? 2 * (size_t)n : 1;
		double *a = realloc(s->token_lp, cap * sizeof(*a));
		uint32_t *b;

		if (!a)
			goto nomem;
		s->token_lp = a;
		if (!(b = realloc(s->token_off, cap * sizeof(*b))))
			goto nomem;
		s->token_off = b;
		if (alt && !(b = realloc(s->alt_n, cap * sizeof(*b))))
			goto nomem;
		if (alt)
			s->alt_n = b;
	}
	if (alt) {
		/* both grow alike from cap_alt */
		size_t c = s->cap_alt, need = s->n_alt + (size_t)n_alt;

		if (grow(&s->alt_id, sizeof(*s->alt_id), &c, need) ||
		    grow(&s->alt_lp, sizeof(*s->alt_lp), &s->cap_alt, need))
			goto nomem;
		for (int i = 0; i < n_alt; i++) {
			s->alt_id[s->n_alt] = (uint32_t)alt[i].id;
			s->alt_lp[s->n_alt++] = lp_round(alt[i].logprob);
		}
		s->alt_n[n] = (uint32_t)n_alt;
	}
	s->token_lp[n] = lp_round(lp);
	s->token_off[n] = s->len > UINT32_MAX ? UINT32_MAX : (uint32_t)s->len;
	s->n_token_lp = n + 1;
	return 0;
nomem:
	return qerr_fail(QERR_NOMEM, "out of memory for log-probabilities");
}

/* Records where the token about to be appended starts in the text. */
static int start_add(fork_state *f)
{
	const sc_sample *s = f->out;
	int n = s->n_tokens;

	if (grow(&f->starts, sizeof(*f->starts), &f->cap_starts,
		 (size_t)n + 1))
		return qerr_fail(QERR_NOMEM, "out of memory for a sample's "
				 "tokens");
	f->starts[n] = s->len > UINT32_MAX ? UINT32_MAX : (uint32_t)s->len;
	return 0;
}

/* Its tokens whose pieces start before the content (the starts rise). */
static int reasoning_count(const fork_state *f)
{
	const sc_sample *s = f->out;
	size_t at = reasoning_content_at(s->text, s->len);
	int n = 0;

	while (n < s->n_tokens && f->starts[n] < at)
		n++;
	return n;
}

/* After s's text grew by its last added bytes: cuts it before the first
 * stop string that now occurs (none did before, so a new one ends in the
 * added bytes); 1 when it did. */
static int stop_strs_cut(const sc_stop_strs *q, sc_sample *s, size_t added)
{
	size_t longest = stop_strs_longest(q), from, cut = SIZE_MAX;

	from = s->len - added;
	from = from > longest - 1 ? from - (longest - 1) : 0;
	for (int i = 0; i < q->n; i++) {
		const char *hit = memmem(s->text + from, s->len - from,
					 q->s[i], q->len[i]);

		if (hit && (size_t)(hit - s->text) < cut)
			cut = (size_t)(hit - s->text);
	}
	if (cut == SIZE_MAX)
		return 0;
	s->len = cut;
	s->text[cut] = '\0';
	for (int i = 0; i < s->n_token_lp; i++)
		if (s->token_off[i] > cut)
			s->token_off[i] = (uint32_t)cut;
	return 1;
}

int sc_fork_conf_window(const sc_params *p)
{
	return p->conf_window > 0 ? p->conf_window : SC_CONF_WINDOW_DEFAULT;
}

/* Records one drawn token's log-probability (ring allocated at start). */
static void conf_add(fork_state *f, int w, double lp)
{
	int64_t x = (int64_t)(lp * 0x1p32); /* toward 0: exact scaling */
	int slot = f->n_drawn % w;

	f->lp_sum += x;
	f->win_sum += x - (f->n_drawn >= w ? f->ring[slot] : 0);
	f->ring[slot] = x;
	f->n_drawn++;
	if (f->n_drawn >= w && f->win_sum < f->win_min)
		f->win_min = f->win_sum;
}

/* The sample's confidence fields from its fork's sums. */
static void conf_finish(const fork_state *f, int w, sc_sample *s)
{
	int n = f->n_drawn;
	double g;

	s->mean_logprob = n ? (double)f->lp_sum / 0x1p32 / n : 0.0;
	g = n >= w ? (double)f->win_min / 0x1p32 / w : s->mean_logprob;
	s->group_conf = g;
	s->weight = vote_conf_weight(g);
}

static int penalized(const sc_params *p)
{
	return p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

/* The logits a fork draws from, shaped by its settings: lg (the model's,
 * or buf already holding the masked ones) with logit_bias added and the
 * penalties of the fork's own drawn tokens taken off, in buf (vocab
 * floats) when anything changes. Each value depends only on the setting
 * and this fork's tokens; -inf (masked) stays -inf. */
static const float *shape(const sc_engine *e, const sc_params *p,
			  const fork_state *f, const float *lg, float *buf)
{
	const sc_logit_bias *lb = &p->logit_bias;

	if (!lb->n && !(penalized(p) && f->n_seen))
		return lg;
	if (lg != buf)
		memcpy(buf, lg, (size_t)e->m->cfg.vocab * sizeof(float));
	for (int i = 0; i < lb->n; i++)
		buf[lb->id[i]] += lb->bias[i];
	for (int i = 0, c; penalized(p) && i < f->n_seen; i += c) {
		for (c = 1; i + c < f->n_seen && f->seen[i + c] == f->seen[i];
		     c++)
			;
		buf[f->seen[i]] -= p->presence_penalty +
				   p->frequency_penalty * (float)c;
	}
	return buf;
}

/* Adds drawn token t to f's sorted list for the penalties. */
static int seen_add(fork_state *f, int32_t t)
{
	int i = f->n_seen;

	if (grow(&f->seen, sizeof(*f->seen), &f->cap_seen,
		 (size_t)f->n_seen + 1))
		return qerr_fail(QERR_NOMEM, "out of memory for the "
				 "penalties");
	while (i > 0 && f->seen[i - 1] > t) {
		f->seen[i] = f->seen[i - 1];
		i--;
	}
	f->seen[i] = t;
	f->n_seen++;
	return 0;
}

/* The logits lg with the end-of-generation tokens masked when p ignores
 * them (in f's own row when lg is it, else a copy in buf, vocab
 * floats), else lg itself. */
static const float *eos_off(const sc_engine *e, const sc_params *p,
			    const fork_state *f, const float *lg, float *buf)
{
	if (!p->ignore_eos)
		return lg;
	if (lg == f->lg_own) {
		/* the fork's own row (masking again changes nothing): no
		 * copy of the vocabulary a draw */
		buf = f->lg_own;
	} else {
		memcpy(buf, lg, (size_t)e->m->cfg.vocab * sizeof(float));
	}
	for (int i = 0; i < e->n_eog; i++)
		buf[e->eog[i]] = -INFINITY;
	return buf;
}

/*
 * A constraint and a model that reasons. A grammar (JSON schema, regex,
 * choice, GBNF) shapes the answer, not the thinking before it: applied
 * from the first token, it left a reasoning model (Qwen3, gpt-oss) no
 * room to reason at all. Where the model's family reasons, a fork's
 * grammar waits (gwait):
 *   GW_OPEN    the first token: the grammar's tokens, or the one that
 *              opens the reasoning (<think>, <|channel|>);
 *   GW_REASON  reasoning (and harmony's markup between messages): no
 *              mask; reasoning.h's books say when it ends;
 *   GW_LEAD    after </think>: the grammar's first tokens, or one token
 *              of whitespace (reasoning.h drops it before the content;
 *              one, so that it cannot run on to max_tokens);
 *   GW_BODY    the content begins (past that whitespace, or harmony's
 *              final message's body): the grammar's first tokens;
 *              content in the token that ends the reasoning (">x" of
 *              "</" "think" ">x") is stepped through the grammar too;
 *   GW_NONE    the grammar governs every token (from the first, where
 *              the model does not reason or did not open its reasoning).
 * Outside the reasoning such a fork draws no token that holds one of
 * its markers (gmarks; reasoning_has_marker), whatever the grammar's
 * bytes allow: the vote would read it as reasoning or markup. So the
 * content (vote.h's rule 0: what the vote reads) is a sentence of
 * the grammar, and everything is still a function of the sample's text:
 * the same bytes on any thread, batch or host. A model whose family does
 * not reason (rmark -1), and a grammar that spells the reasoning itself
 * (its start takes the marker: "<think>" ... "</think>" answer), are
 * constrained from the first token, as before.
 */
enum { GW_NONE, GW_OPEN, GW_REASON, GW_LEAD, GW_BODY };

/* A piece all of reasoning.h's whitespace (the content drops it). */
static int ws_piece(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!reasoning_space(p[i]))
			return 0;
	return n > 0;
}

int sc_grammar_vocab(sc_engine *e)
{
	int V = e->m->cfg.vocab, fam = prompt_family(e->t), rc;
	const char *mk = fam == PROMPT_HARMONY		? "<|channel|>"
			 : prompt_family_thinks(fam)	? "<think>"
							: NULL;
	size_t n;
	const char *pc;

	if ((rc = gbnf_vocab_new(e->t, &e->gv)))
		return rc;
	free(e->ws_toks);
	if (!(e->ws_toks = calloc(((size_t)V + 63) / 64, sizeof(uint64_t)))) {
		gbnf_vocab_free(&e->gv);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	free(e->mark_toks);
	e->mark_toks = NULL;
	e->n_mark_toks = 0;
	for (int i = 0; i < V; i++) {
		if (!(pc = tok_piece(e->t, i, 0, &n)))
			continue;
		if (ws_piece(pc, n))
			e->ws_toks[i >> 6] |= 1ull << (i & 63);
		if (reasoning_has_marker(pc, n)) {
			int32_t *nm = realloc(e->mark_toks,
					      (size_t)(e->n_mark_toks + 1) *
						      sizeof(int32_t));

			if (!nm) {
				gbnf_vocab_free(&e->gv);
				return qerr_fail(QERR_NOMEM, "out of memory");
			}
			e->mark_toks = nm;
			e->mark_toks[e->n_mark_toks++] = i;
		}
	}
	/* only a marker the text shows (a control token writes nothing, and
	 * the reasoning's end could not be read) */
	e->rmark = mk ? tok_find(e->t, mk) : -1;
	if (e->rmark >= 0 &&
	    (!(pc = tok_piece(e->t, e->rmark, 0, &n)) || n != strlen(mk) ||
	     memcmp(pc, mk, n)))
		e->rmark = -1;
	return 0;
}

int sc_grammar_waits(const sc_engine *e, sc_job *j)
{
	const uint64_t *ok;

	j->g_wait = 0;
	if (!j->gm || e->rmark < 0)
		return 0;
	if (!(ok = gbnf_allowed(j->gm, j->g0)))
		return qerr_fail(QERR_NOMEM, "out of memory for the grammar");
	/* a grammar whose start takes the marker spells the reasoning
	 * itself: it governs from the first token */
	j->g_wait = !((ok[e->rmark >> 6] >> (e->rmark & 63)) & 1);
	return 0;
}

void sc_fork_grammar_init(fork_state *f)
{
	f->gwait = f->job && f->job->g_wait ? GW_OPEN : GW_NONE;
	f->gmarks = f->gwait == GW_OPEN;
	reasoning_init(&f->grs);
}

/* The grammar's books after token tokid (its piece p, n bytes). */
static void grammar_advance(const sc_engine *e, fork_state *f, int tokid,
			    const char *p, size_t n)
{
	gbnf_matcher *gm = f->job->gm;

	switch (f->gwait) {
	case GW_NONE:
		f->gstate = gbnf_step(gm, f->gstate, p, n);
		return;
	case GW_OPEN:
		if (tokid != e->rmark)
			break;
		f->gwait = GW_REASON; /* the marker opens the books */
		__attribute__((fallthrough));
	case GW_REASON:
	{
		/* content in the token that ends the reasoning is the
		 * grammar's too */
		int at;
		size_t k = reasoning_feed_to_content(&f->grs, p, n, &at);

		if (at == REASONING_NOT_YET)
			return;
		p += k;
		n -= k;
		if (at == REASONING_AFTER_THINK) {
			size_t w = 0;

			while (w < n && reasoning_space(p[w]))
				w++;
			if (w == n) { /* whitespace: its one token */
				f->gwait = w ? GW_BODY : GW_LEAD;
				return;
			}
			p += w;
			n -= w;
		} else if (!n) {
			f->gwait = GW_BODY;
			return;
		}
		break;
	}
	case GW_LEAD:
		if (ws_piece(p, n)) { /* one: whitespace cannot run on */
			f->gwait = GW_BODY;
			return;
		}
		break;
	}
	/* the content's first token: the grammar from its start */
	f->gwait = GW_NONE;
	f->gstate = gbnf_step(gm, f->job->g0, p, n);
}

/* Draws the next token of f and records it; marks f done on a stop. */
int sc_fork_step(sc_engine *e, const sc_params *p, fork_state *f)
{
	const float *lg = f->logits;
	const char *piece;
	size_t plen;
	int tokid, rc;
	double lp;

	if (f->drawn) {
		/* drawn ahead (sc_fork_draw): the same token and draw */
		f->drawn = 0;
		tokid = f->drawn_tok;
		lp = f->drawn_lp;
		goto drawn;
	}
	lg = eos_off(e, p, f, lg, e->masked);
	if (f->job && f->job->gm && f->gwait != GW_REASON) {
		/* a grammar: only the tokens that keep the text in it, and
		 * the end tokens only where it may end (waiting for the
		 * reasoning: its start, and what else may come first) */
		gbnf_matcher *gm = f->job->gm;
		int gs = f->gwait == GW_NONE ? f->gstate : f->job->g0;
		const uint64_t *ok = gs >= 0 ? gbnf_allowed(gm, gs) : NULL;
		const uint64_t *ws = f->gwait == GW_LEAD ? e->ws_toks : NULL;
		int mark = f->gwait == GW_OPEN ? e->rmark : -1;
		int acc = gs >= 0 && gbnf_accepting(gm, gs);
		int any = 0, V = e->m->cfg.vocab;

		if (gs >= 0 && !ok)
			return qerr_fail(QERR_NOMEM, "out of memory for the "
					 "grammar");
		if (lg != e->masked)
			memcpy(e->masked, lg, (size_t)V * sizeof(float));
		for (int i = 0; i < V; i++) {
			if (ok && (ok[i >> 6] >> (i & 63)) & 1)
				any++;
			else
				e->masked[i] = -INFINITY;
		}
		/* a waiting grammar's content holds no marker (the vote
		 * would read it as reasoning or markup: cut, or none) */
		for (int k = 0; f->gmarks && ok && k < e->n_mark_toks; k++) {
			int32_t id = e->mark_toks[k];

			if ((ok[id >> 6] >> (id & 63)) & 1) {
				e->masked[id] = -INFINITY;
				any--;
			}
		}
		/* what may come before the content (neither is an end
		 * token, so its logit is the fork's own) */
		for (int i = 0; ws && i < V; i++)
			if ((ws[i >> 6] >> (i & 63)) & 1) {
				e->masked[i] = f->logits[i];
				any++;
			}
		if (mark >= 0) {
			e->masked[mark] = f->logits[mark];
			any++;
		}
		for (int i = 0; i < e->n_eog && acc && !p->ignore_eos; i++)
			e->masked[e->eog[i]] = f->logits[e->eog[i]];
		if (!any && !(acc && !p->ignore_eos)) {
			/* nowhere to go: no token keeps the text in the
			 * grammar (or it must end and end tokens are off) */
			f->out->finish = acc ? SC_FINISH_STOP
					     : SC_FINISH_GRAMMAR;
			f->out->end_step = 1;
			f->done = 1;
			f->out->settled = f->out->len;
			return 0;
		}
		lg = e->masked;
	}
	lg = shape(e, p, f, lg, e->masked);
	if ((rc = samp_sample_top(e->sampler, &p->sp, lg, &f->rng, &tokid,
				  &lp, f->alt, f->alt ? p->top_logprobs : 0,
				  &f->n_alt)))
		return rc;
drawn:
	conf_add(f, sc_fork_conf_window(p), lp);
	if (p->logprobs &&
	    (rc = token_lp_add(f->out, lp, f->alt, f->n_alt)))
		return rc;
	if (tok_is_eog(e->t, tokid)) {
		f->out->finish = SC_FINISH_STOP;
		f->out->end_step = 1;
		f->done = 1;
		return 0;
	}
	if (penalized(p) && (rc = seen_add(f, tokid)))
		return rc;
	piece = tok_piece(e->t, tokid, 0, &plen);
	if ((rc = start_add(f)))
		return rc;
	if (f->job && f->job->gm)
		grammar_advance(e, f, tokid, piece ? piece : "", plen);
	if ((rc = append_text(f, piece ? piece : "", plen)))
		return rc;
	f->out->n_tokens++;
	if (p->stop_strs.n && stop_strs_cut(&p->stop_strs, f->out, plen)) {
		f->out->finish = SC_FINISH_STOP;
		f->done = 1;
	} else if (f->out->n_tokens >= p->max_new) {
		f->out->finish = SC_FINISH_LENGTH;
		f->done = 1;
	}
	/* what a stop string could still cut: its length less one */
	if (f->done)
		f->out->settled = f->out->len;
	else {
		size_t hold = p->stop_strs.n
				      ? stop_strs_longest(&p->stop_strs) - 1
				      : 0;

		f->out->settled = f->out->len > hold ? f->out->len - hold : 0;
	}
	f->next = tokid;
	return 0;
}

/* A round's draws ahead, one task per thread of the pool (sc_fork_draw):
 * the forks d->f[t], d->f[t + n_tasks], ... with task t's scratch. */
struct draw_job {
	sc_engine *e;
	fork_state **f;
	int n;
};

static void draw_task(void *ctx, int t, int n_tasks)
{
	const struct draw_job *d = ctx;
	sc_engine *e = d->e;

	for (int i = t; i < d->n; i += n_tasks) {
		fork_state *f = d->f[i];
		const sc_params *p = &f->job->p;
		const float *lg = f->logits;
		samp_rng keep = f->rng;

		lg = eos_off(e, p, f, lg, e->task_masked[t]);
		lg = shape(e, p, f, lg, e->task_masked[t]);
		if (samp_sample_top(e->task_samp[t], &p->sp, lg, &f->rng,
				    &f->drawn_tok, &f->drawn_lp, f->alt,
				    f->alt ? p->top_logprobs : 0,
				    &f->n_alt)) {
			/* the error is drawn again in sc_fork_step, on the
			 * caller's thread (its message is thread-local) */
			f->rng = keep;
			continue;
		}
		f->drawn = 1;
	}
}

void sc_fork_draw(sc_engine *e, fork_state **act, int n)
{
	int nt = e->p.n_threads, k = 0;
	fork_state **f;

	if (nt < 2 || n < 2 || !(f = malloc((size_t)n * sizeof(*f))))
		return; /* each draws in sc_fork_step */
	for (int i = 0; i < n; i++)
		/* a grammar's matcher is its job's, one thread at a time */
		if (act[i]->job && !act[i]->job->rc && !act[i]->job->gm &&
		    !act[i]->done)
			f[k++] = act[i];
	if (k >= 2)
		tpool_run(e->tp, draw_task, &(struct draw_job){e, f, k},
			  k < nt ? k : nt);
	free(f);
}

/* Marks a finished sample: extracts its answer and reports it. A sample
 * the filter cut has none, nor one its grammar could not continue (its
 * text is outside the constraint: it had voted). */
int sc_fork_finish(fork_state *f, int w, sc_sample_cb cb, void *ctx)
{
	sc_sample *s = f->out;

	conf_finish(f, w, s);
	if (!s->text && !(s->text = calloc(1, 1)))
		return qerr_fail(QERR_NOMEM, "out of memory for text");
	s->settled = s->len;
	s->reasoning_tokens = reasoning_count(f);
	s->has_answer = s->finish != SC_FINISH_FILTERED &&
			s->finish != SC_FINISH_GRAMMAR &&
			answer_extract(f->job ? &f->job->p.answer : NULL,
				       s->text, s->len, s->answer,
				       sizeof(s->answer));
	return cb ? cb(ctx, s) : 0;
}

void sc_fork_sample_fini(sc_sample *s)
{
	free(s->text);
	free(s->token_lp);
	free(s->token_off);
	free(s->alt_n);
	free(s->alt_id);
	free(s->alt_lp);
	s->text = NULL;
	s->token_lp = NULL;
	s->token_off = NULL;
	s->n_token_lp = 0;
	s->alt_n = s->alt_id = NULL;
	s->alt_lp = NULL;
	s->n_alt = s->cap_alt = 0;
}

/* ---- the online confidence filter -------------------------------------- */

/* The filter's verdict on f after a drawn token: cut it (finish
 * "filtered") when past the warm-up its full-window mean fell below the
 * threshold, or, shorter than a window, it ended with its mean below. */
void sc_fork_filter_check(const sc_filter *flt, fork_state *f, int w)
{
	double g;

	if (!flt || !flt->armed || f->index < flt->warm)
		return;
	if (f->n_drawn >= w)
		g = (double)f->win_min / 0x1p32 / w;
	else if (f->done)
		g = (double)f->lp_sum / 0x1p32 / f->n_drawn;
	else
		return;
	if (g < flt->thr) {
		f->out->finish = SC_FINISH_FILTERED;
		f->done = 1;
	}
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Arms the filter once samples 0..warm-1 (out, in sample order) are in:
 * the pct-th percentile of their group confidences, nearest rank below. */
int sc_fork_filter_arm(sc_filter *flt, const sc_sample *out, int prefix)
{
	double *v;
	int k;

	if (!flt->warm || flt->armed || prefix < flt->warm)
		return 0;
	if (!(v = malloc((size_t)flt->warm * sizeof(*v))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	for (int i = 0; i < flt->warm; i++)
		v[i] = out[i].group_conf;
	qsort(v, (size_t)flt->warm, sizeof(*v), dbl_cmp);
	k = (int)(flt->pct / 100.0 * (double)(flt->warm - 1));
	flt->thr = v[k < 0 ? 0 : k >= flt->warm ? flt->warm - 1 : k];
	flt->armed = 1;
	free(v);
	return 0;
}

/* ---- sc_run's early stopping (sc_stopper) ------------------------------ */

/* Pushes one finished sample to the decision (its weight when the vote
 * is weighted); 0 or an error. */
int sc_fork_stopper_push(sc_stopper *st, const sc_sample *x)
{
	int d = stop_push_w(&st->ss, x->has_answer ? x->answer : NULL,
			    st->ss.unit == 1 ? 1 : x->weight);

	if (d < 0)
		return -d;
	st->prefix++;
	st->decided = d;
	st->horizon = stop_horizon(&st->ss, st->waves);
	return 0;
}

/* Pushes the finished samples that extend the prefix; 0 or an error. */
int sc_fork_stopper_advance(sc_stopper *st, const sc_sample *out, int n,
		       const int *done)
{
	int rc = 0;

	while (!rc && !st->decided && st->prefix < n && done[st->prefix])
		rc = sc_fork_stopper_push(st, &out[st->prefix]);
	return rc ? rc : sc_fork_filter_arm(&st->flt, out, st->prefix);
}

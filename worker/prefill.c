/* prefill — Prefill into the merged loop: the prompt, or its rest after a cached base root, prefilled and the root kept (wk_int.h). */
#include "wk_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- Prefill --------------------------------------------------------- */

/* The merged loop finished a prompt: the root is kept and described to
 * the coordinator. */
static int prefill_ready(void *ctx, uint32_t job, uint32_t root)
{
	wk_prefill *x = ctx;
	wk *w = x->w;
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__PrefixReady r = QUORUM__PREFIX_READY__INIT;
	sc_root_desc d;
	int rc;

	(void)job;
	if ((rc = wk_track_root(w, root)))
		return qerr_fail(rc, "out of memory tracking a root");
	if ((rc = sc_root_get(w->e, root, &d))) {
		wk_untrack_root(w, root);
		return rc;
	}
	r.request_id = x->rid;
	r.attempt = x->attempt;
	r.root_id = root;
	r.n_tokens = d.n_tokens;
	r.n_blocks = d.n_blocks;
	r.blocks = (uint32_t *)d.blocks;
	r.logits.data = (uint8_t *)d.logits;
	r.logits.len = (size_t)w->m->cfg.vocab * sizeof(float);
	r.pool_name = w->pool_name;
	r.has_prefill_ms = 1;
	r.prefill_ms = (double)(wire_now_ms() - x->t0);
	r.has_reused_tokens = x->reused > 0;
	r.reused_tokens = x->reused;
	m.body_case = QUORUM__WORKER_MSG__BODY_PREFIX_READY;
	m.prefix_ready = &r;
	wk_send_msg(w, &m);
	return 0;
}

static void prefill_done(void *ctx, uint32_t job, int rc,
			 const sc_job_stats *st)
{
	wk_prefill *x = ctx;

	(void)job;
	(void)st;
	if (rc)
		wk_send_error(x->w, x->rid, x->attempt, wire_status_of_qerr(rc),
			   qerr_detail());
	free(x);
}

/* The prompt joins the merged loop: prefilled workers.prefill_tokens per
 * round between decode rounds, so the samples running here keep their
 * pace and heartbeats and commands are served meanwhile. */
void wk_on_prefill(wk *w, const Quorum__Prefill *p)
{
	sc_job_cbs cb = {NULL, NULL, prefill_ready, prefill_done, NULL};
	wk_prefill *x;
	int32_t *ids = NULL;
	int rc;

	if (p->n_tokens < 1 || p->n_tokens > (size_t)w->m->cfg.ctx_len) {
		wk_send_error(w, p->request_id, p->attempt,
			   QUORUM__STATUS__STATUS_TOO_LONG,
			   "prompt length out of range");
		return;
	}
	if (!(ids = malloc(p->n_tokens * sizeof(*ids))) ||
	    !(x = calloc(1, sizeof(*x)))) {
		free(ids);
		wk_send_error(w, p->request_id, p->attempt,
			   QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	for (size_t i = 0; i < p->n_tokens; i++) {
		if (p->tokens[i] >= (uint32_t)w->m->cfg.vocab) {
			wk_send_error(w, p->request_id, p->attempt,
				   QUORUM__STATUS__STATUS_BAD_REQUEST,
				   "token id out of the vocabulary");
			free(ids);
			free(x);
			return;
		}
		ids[i] = (int32_t)p->tokens[i];
	}
	x->w = w;
	x->rid = p->request_id;
	x->attempt = p->attempt;
	x->t0 = wire_now_ms();
	cb.ctx = x;
	if (p->has_base_root_id) {
		/* a root of ours sharing the prompt's first base_tokens: the
		 * engine checks the tokens and the range */
		if (!p->has_base_tokens || !wk_tracked_root(w, p->base_root_id))
			rc = qerr_fail(QERR_ARG, "prefill base root %u is not "
				       "held", p->base_root_id);
		else
			rc = sc_batch_prefill_from(w->b, p->base_root_id,
						   p->base_tokens, ids,
						   p->n_tokens, &cb, NULL);
		x->reused = p->base_tokens;
		if (rc == QERR_ARG || rc == QERR_RANGE || rc == QERR_MISSING) {
			/* the coordinator's view of our roots is wrong, not
			 * the request: it retries without this base */
			wk_send_error(w, p->request_id, p->attempt,
				   QUORUM__STATUS__STATUS_INTERNAL,
				   qerr_detail());
			free(ids);
			free(x);
			return;
		}
	} else {
		rc = sc_batch_prefill(w->b, ids, p->n_tokens, &cb, NULL);
	}
	free(ids);
	if (rc) {
		wk_send_error(w, p->request_id, p->attempt, wire_status_of_qerr(rc),
			   qerr_detail());
		free(x);
	}
}

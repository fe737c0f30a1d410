/* transfer — roots across hosts: ExportRoot (rows, or the next chunk of whole blocks) and import_root (wk_int.h). */
#include "wk_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- roots across hosts ---------------------------------------------- */

/* The rows of root x->root_id from x->from_tokens to send in one
 * RootData: all the rest when it fits one message, else — the
 * coordinator asked for chunks (chunk_bytes) — as many whole blocks as
 * fit (quorum.proto ExportRoot). 0 with *to set, or an error sent. */
static int export_range(wk *w, const Quorum__ExportRoot *x,
			const sc_root_desc *d, uint32_t *to)
{
	uint64_t from = x->has_from_tokens ? x->from_tokens : 0;
	uint64_t tb = sc_engine_token_kv_bytes(w->e);
	uint64_t bt = (uint64_t)w->c->kv.block_tokens, n;
	/* our own frame limit (wire.h); the coordinator's chunk_bytes
	 * (wire_root_chunk_bytes) is within its own */
	int64_t fit = w->c->limits.max_message_bytes -
		      (int64_t)w->m->cfg.vocab * 4 - WIRE_ROOT_HEADROOM;
	char why[160];

	if (from >= d->n_tokens) {
		snprintf(why, sizeof(why), "export of root %u from token %llu: "
			 "it has %u", x->root_id, (unsigned long long)from,
			 d->n_tokens);
		wk_send_error(w, x->request_id, x->attempt,
			   QUORUM__STATUS__STATUS_BAD_REQUEST, why);
		return -1;
	}
	if (x->has_chunk_bytes && x->chunk_bytes < (uint64_t)INT64_MAX &&
	    (int64_t)x->chunk_bytes < fit)
		fit = (int64_t)x->chunk_bytes;
	if (fit < 0)
		fit = 0;
	if ((d->n_tokens - from) * tb <= (uint64_t)fit) {
		*to = d->n_tokens;
		return 0;
	}
	/* whole blocks, ending on a block boundary */
	n = (from + (uint64_t)fit / tb) / bt * bt;
	if (!x->has_chunk_bytes || n <= from) {
		/* the coordinator would drop the connection on such a frame */
		snprintf(why, sizeof(why), "root too large for one message "
			 "(limits.max_message_bytes): %s of %llu bytes",
			 x->has_chunk_bytes ? "a KV block" : "its K/V rows",
			 (unsigned long long)(x->has_chunk_bytes
					      ? bt * tb
					      : (d->n_tokens - from) * tb));
		wk_send_error(w, x->request_id, x->attempt,
			   QUORUM__STATUS__STATUS_NO_CAPACITY, why);
		return -1;
	}
	*to = (uint32_t)n;
	return 0;
}

void wk_on_export(wk *w, const Quorum__ExportRoot *x)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__RootData d = QUORUM__ROOT_DATA__INIT;
	uint32_t from = x->has_from_tokens ? x->from_tokens : 0, to;
	sc_root_desc desc;
	void *bytes = NULL;
	size_t len = 0;
	int rc;

	if ((rc = sc_root_get(w->e, x->root_id, &desc))) {
		wk_send_error(w, x->request_id, x->attempt, wire_status_of_qerr(rc),
			   qerr_detail());
		return;
	}
	if (export_range(w, x, &desc, &to))
		return;
	if ((rc = sc_root_export_rows(w->e, x->root_id, from, to, &bytes,
				      &len))) {
		wk_send_error(w, x->request_id, x->attempt, wire_status_of_qerr(rc),
			   qerr_detail());
		return;
	}
	d.request_id = x->request_id;
	d.attempt = x->attempt;
	d.n_tokens = to;
	d.kv.data = bytes;
	d.kv.len = len;
	d.has_from_tokens = x->has_from_tokens;
	d.from_tokens = x->from_tokens;
	if (to < desc.n_tokens) {
		d.has_partial = d.partial = 1; /* no logits yet */
	} else {
		d.logits.data = (uint8_t *)desc.logits;
		d.logits.len = (size_t)w->m->cfg.vocab * sizeof(float);
	}
	m.body_case = QUORUM__WORKER_MSG__BODY_ROOT_DATA;
	m.root_data = &d;
	wk_send_msg(w, &m);
	free(bytes);
}

/* A root (or, partial, a chunk of one: the base of the next chunk, with
 * no logits of its own — zeros) from another host's rows. */
void wk_on_import(wk *w, const Quorum__RootData *x)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__ImportedRoot r = QUORUM__IMPORTED_ROOT__INIT;
	int partial = x->has_partial && x->partial;
	float *logits = NULL;
	sc_root_desc d;
	uint32_t root = 0; /* set by the import when rc is 0 */
	int rc;

	if (partial ? x->logits.len != 0 ||
			      !(logits = calloc((size_t)w->m->cfg.vocab,
						sizeof(float)))
		    : !(logits = wk_logits_copy(w, &x->logits))) {
		wk_send_error(w, x->request_id, x->attempt,
			   QUORUM__STATUS__STATUS_BAD_REQUEST,
			   partial ? "bad partial root chunk (logits)"
				   : "bad logits");
		return;
	}
	if (x->has_from_tokens && x->from_tokens &&
	    (!x->has_base_root_id || !wk_tracked_root(w, x->base_root_id)))
		rc = qerr_fail(QERR_MISSING, "import base root %u is not held",
			       x->base_root_id);
	else
		rc = sc_root_import_from(w->e, x->base_root_id,
					 x->has_from_tokens ? x->from_tokens
							    : 0,
					 x->n_tokens, x->kv.data, x->kv.len,
					 logits, &root);
	free(logits);
	if (wk_keep_root(w, x->request_id, x->attempt, rc, root, &d))
		return;
	r.request_id = x->request_id;
	r.attempt = x->attempt;
	r.root_id = root;
	r.n_tokens = d.n_tokens;
	r.n_blocks = d.n_blocks;
	r.blocks = (uint32_t *)d.blocks;
	r.pool_name = w->pool_name;
	m.body_case = QUORUM__WORKER_MSG__BODY_IMPORTED;
	m.imported = &r;
	wk_send_msg(w, &m);
}

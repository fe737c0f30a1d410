/*
 * wk_int — the worker's shared state and the calls between its parts
 * (internal to worker/; wk.h is the public face).
 *
 * The parts, one file each:
 *   wk.c        the connection: register, heartbeats, reconnects, the
 *               serving loop and the command switch, messages out, the
 *               roots handed to the coordinator, the stale-pool sweep
 *   prefill.c   Prefill: a prompt (or its rest after a cached base root)
 *               into the merged loop, the root kept and described
 *   decode.c    DecodeJob: its check, its place in the merged decode loop
 *               (or the queue when merging is off), samples and streamed
 *               text out, JobDone, cancels
 *   transfer.c  roots across hosts: export of rows or chunks of whole
 *               blocks, import of a chunk onto the previous one
 *
 * Everything runs on the worker's one thread (the engine's own threads do
 * the arithmetic).
 */
#ifndef QUORUM_WK_INT_H
#define QUORUM_WK_INT_H

#include "infer/kv.h"
#include "infer/model.h"
#include "proto/quorum.pb-c.h"
#include "qerr.h"
#include "sc/batch.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/fork.h"
#include "text/tok.h"
#include "net/wire.h"
#include "net/poolname.h"
#include "net/spwire.h"
#include "worker/wk.h"

#define WK_TEXT_ROUNDS 4    /* streamed jobs: new text every this many rounds */
#define WK_MAX_INDICES 65536

struct wk;

/* A DecodeJob in the merged decode loop (or waiting for it when merging
 * is off). */
typedef struct wk_job {
	struct wk_job *next;
	struct wk *w;
	uint32_t id;         /* in the batch; 0: not added yet */
	uint64_t rid;
	uint32_t attempt;
	int n;               /* its samples */
	int left;            /* ... not finished yet */
	int *idx;            /* (n) */
	int stream;          /* DecodeJob.stream: send SampleText */
	uint32_t rounds;
	uint32_t *sent;      /* (n) bytes of each sample sent so far */
	uint32_t *sent_tok;  /* (n) with logprobs: its tokens sent so far */
	size_t *sent_alt;    /* (n) ... and their alternatives */
	char *pool;          /* the pool its root is in */
	char *grammar;       /* p.grammar's text, owned */
	/* merging off: what to add once the batch is free */
	sc_params p;
	sc_root_ref ref;
	uint32_t *blocks;
	float *logits;
} wk_job;

/* A Prefill in the merged loop. */
typedef struct {
	struct wk *w;
	uint64_t rid;
	uint32_t attempt;
	int64_t t0;
	uint32_t reused;    /* tokens forked from the base root (0: none) */
} wk_prefill;

typedef struct wk {
	const wk_opts *o;
	const cfg *c;
	model *m;
	tok *t;
	sc_engine *e;
	sc_batch *b;        /* the merged decode loop */
	char pool_name[WIRE_POOL_NAME_MAX];
	void *ctx, *sock;
	int64_t hb_at;      /* next heartbeat to send */
	int64_t expiry;     /* coordinator presumed dead after this */
	int64_t backoff_ms; /* next reconnect delay */
	uint32_t *roots;    /* root ids handed to the coordinator */
	int n_roots, cap_roots;
	int rejected;
	uint32_t busy;      /* samples of the jobs in the batch, unfinished */
	wk_job *jobs;       /* in the batch */
	wk_job *waiting, *waiting_tail; /* merging off: jobs not started */
	uint64_t cancels[32]; /* recent Cancel ids: jobs to refuse */
	uint32_t cancel_att[32]; /* ... and the attempt (0: every job) */
	unsigned n_cancels;
} wk;

/* ---- the parts' calls (wk.c: messages, roots; prefill.c; decode.c;
 * transfer.c) ----------------------------------------------------------- */

/* wk.c: one WorkerMsg to the coordinator (version and id filled in) */
int wk_send_msg(wk *w, Quorum__WorkerMsg *m);
void wk_send_heartbeat(wk *w);
/* a WorkerError for (rid, attempt) */
void wk_send_error(wk *w, uint64_t rid, uint32_t attempt, int status,
		   const char *err);
/* the roots handed to the coordinator (released on a reconnect) */
int wk_track_root(wk *w, uint32_t id);
int wk_tracked_root(const wk *w, uint32_t id);
int wk_untrack_root(wk *w, uint32_t id);
void wk_release_all_roots(wk *w);
/* Keeps a root just made (rc: how making it went): tracked, so a
 * reconnect releases it, and described into d. Otherwise sends the error
 * for (rid, attempt) and returns nonzero. */
int wk_keep_root(wk *w, uint64_t rid, uint32_t attempt, int rc,
		 uint32_t root, sc_root_desc *d);
/* Logits of the wire (vocab x f32) into an aligned copy, or NULL. */
float *wk_logits_copy(wk *w, const ProtobufCBinaryData *b);

/* prefill.c: a Prefill into the merged loop */
void wk_on_prefill(wk *w, const Quorum__Prefill *p);

/* decode.c: a DecodeJob into the merged loop (or the queue, merging off);
 * the jobs waiting started once the loop is free; jobs taken out of the
 * loop (all, those of (rid, attempt), or those reading pool) */
void wk_on_decode(wk *w, const Quorum__DecodeJob *j);
void wk_start_waiting(wk *w);
void wk_cancel_jobs(wk *w, int all, uint64_t rid, uint32_t attempt,
		    const char *pool);
/* a pool name of this cluster (ours or a same-host peer's) */
int wk_pool_name_ok(const wk *w, const char *name);

/* transfer.c: roots across hosts — ExportRoot (rows of a root, or the
 * next chunk of whole blocks) and import_root (a chunk onto the previous
 * one) */
void wk_on_export(wk *w, const Quorum__ExportRoot *x);
void wk_on_import(wk *w, const Quorum__RootData *x);

#endif

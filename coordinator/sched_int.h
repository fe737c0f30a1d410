/*
 * sched_int — the scheduler's shared state and the calls between its
 * parts (internal to coordinator/; scheduler.h is the public face).
 *
 * The parts, one file each:
 *   sched.c     lifecycle, timers, the worker-message switch, I/O hooks
 *   members.c   worker membership: registration, heartbeats, removal
 *   roots.c     roots and the prefix cache (placement of prefills,
 *               cross-host copies)
 *   front.c     the client front: validation, prompts, replies, status
 *   dispatch.c  requests and jobs: sample split, requeue, deadlines
 *
 * Everything runs on the coordinator's one thread. Time comes from
 * sched_now() (the I/O hooks' clock), never from the system directly, so
 * tests drive it.
 */
#ifndef QUORUM_SCHED_INT_H
#define QUORUM_SCHED_INT_H

#include <stddef.h>
#include <stdint.h>

#include "fnv.h"
#include "proto/quorum.pb-c.h"
#include "sc/params.h"
#include "coordinator/scheduler.h"
#include "sc/stop.h"

#define MAX_WORKERS 1024
/* ids remembered with the key they registered with (members.c): room
 * for every live worker and as many gone; past it the oldest of the
 * ids not registered now is forgotten */
#define BINDINGS_MAX (4 * MAX_WORKERS)
#define ID_MAX WIRE_WORKER_ID_MAX
#define HOST_MAX WIRE_HOST_MAX
#define POOL_MAX WIRE_POOL_NAME_MAX
#define MAX_FAILURES 4    /* failed jobs/prefills before a request gives up */
#define MAX_SAMPLE_LOSSES 3 /* workers lost while decoding one sample */
/* capacity refusals of workers a request sits out before NO_CAPACITY
 * (never charged to MAX_FAILURES) */
#define MAX_CAPACITY_WAITS 64
#define KEY_MAX 48        /* a CURVE public key in Z85 (40) + NUL */
/* A client's identity: 'c' + its connection's routing id, or 'g' + the
 * user a trusted gateway asks for (Ask.on_behalf_of, <= WHO_NAME_MAX). */
#define WHO_NAME_MAX 64
#define WHO_MAX (WIRE_ID_MAX + 1)
#define BUCKETS_MAX 4096  /* clients with a tokens-per-minute debt */
#define RETRY_MS 1000     /* retry hint of a full queue or a share */
#define DRAIN_RETRY_MS 500 /* retry hint of a draining coordinator */

enum { J_WAIT_ROOT = 0, J_SENT };
enum { E_PREFILL = 0, E_READY, E_DEAD };
enum { R_EXPORT = 0, R_IMPORT, R_READY, R_FAILED };
/* Q_SELECT: every sample in, waiting for its selection pass (answer
 * select: an internal child request, usc.h) */
enum { Q_QUEUED = 0, Q_ROOT, Q_DECODE, Q_SELECT };
enum { S_PENDING = 0, S_ASSIGNED, S_DONE };

typedef struct {
	int used, dead;
	unsigned char ident[WIRE_ID_MAX];
	size_t ident_len;
	char id[ID_MAX], host[HOST_MAX], pool[POOL_MAX];
	uint32_t pid, slots, threads;
	uint32_t busy;          /* samples assigned, unfinished */
	uint32_t ops;           /* prefill/export/import outstanding */
	uint32_t blocks_used, blocks_free, roots; /* as last reported */
	uint32_t pool_blocks;   /* its pool's size (Register) */
	int64_t last_seen;
} worker;

/* A decode job cancelled because the pool it read (a removed worker's)
 * may be reused: that pool's owner gets no work until the decoder
 * confirms the job ended (JobDone) or is removed itself. */
typedef struct zombie {
	struct zombie *next;
	int worker;             /* the decoder */
	uint64_t rid;
	uint32_t attempt;
	char pool[POOL_MAX];    /* the pool it may still read */
} zombie;

/* The CURVE key a worker id first registered with (kept for the
 * coordinator's lifetime: an id cannot move to another key). */
typedef struct binding {
	struct binding *next;
	char id[ID_MAX];
	char key[KEY_MAX];
} binding;

/* A copy of a root on another host label, made in chunks (quorum.proto
 * ExportRoot): R_EXPORT (a chunk asked of the holder) and R_IMPORT (sent
 * to the importer) alternate until the last chunk is in (R_READY). */
typedef struct {
	char host[HOST_MAX];
	int state;              /* R_* */
	int worker;             /* importer (chosen with the first chunk),
				 * else -1 */
	uint32_t op;
	/* the transfer so far: the importer holds a partial root (part_root,
	 * has_part) of the first at tokens; the chunk in flight ends at
	 * chunk_end (R_IMPORT) */
	uint32_t at, chunk_end, part_root;
	int has_part;
	int64_t step_at;        /* when the step under way (R_EXPORT or
				 * R_IMPORT) was asked for */
	uint64_t for_rid;       /* request whose stats get the transfer */
	uint32_t root_id, n_blocks;
	uint32_t *blocks;
	/* a delta copy: the importer (base_worker) holds a root (base_root,
	 * of entry base, a ref held until the import ends) sharing the first
	 * from tokens; only the rows after them travel */
	struct entry *base;
	int base_worker;
	uint32_t base_root, from;
} replica;

typedef struct entry {
	struct entry *next;
	uint64_t id;
	uint64_t hash;
	int32_t *tokens;
	size_t n_tokens;
	int state;              /* E_* */
	int worker;             /* holder */
	uint32_t op;
	uint32_t root_id, n_blocks;
	uint32_t *blocks;
	uint8_t *logits;        /* (vocab) f32 as received */
	size_t logits_len;
	replica *reps;
	int n_reps;
	uint32_t rep_gen;       /* bumped whenever reps change */
	int refs;               /* requests using it, and its E_PREFILL
				 * children (entries forked from it) */
	int no_room;            /* died of a capacity refusal: not charged */
	int64_t last_used;
	double prefill_ms;
	/* prefix reuse: the root this one was forked from while it is
	 * E_PREFILL (a ref held), and the tokens taken from it */
	struct entry *base;
	uint32_t base_tokens;
	int indexed;            /* in s->index (pfx) */
	int private_;           /* a bypassing request's: never shared */
	int no_base;            /* a prefill based on it failed: not again */
	char key[KEY_MAX];      /* creator's client key ("" with CURVE off) */
} entry;

typedef struct job {
	struct job *next;
	uint32_t attempt;
	int worker;
	int state;              /* J_* */
	uint32_t *idx;
	int n, n_done;
	int src;                /* J_SENT: the worker whose pool it reads */
	/* J_SENT: the entry decoded from, held (a ref) until the job ends,
	 * so a requeue never releases blocks a worker still reads */
	struct entry *root;
	/* J_WAIT_ROOT: the root's rep_gen when last tried (tried: once) —
	 * it is tried again only when the root's replicas changed */
	uint32_t tried_gen;
	int tried;
} job;

/* A client's tokens-per-minute bucket (limits.tokens_per_minute): level
 * refills at limit / 60000 per ms up to limit; a request that ends takes
 * its generated tokens (the level may go below 0: the client's asks get
 * BUSY until it is back above 0). Only clients under the limit have one
 * (at most BUCKETS_MAX; a full bucket is dropped). */
typedef struct bucket {
	struct bucket *next;
	unsigned char who[WHO_MAX];
	size_t who_len;
	double level;
	int64_t at;             /* level as of then */
} bucket;

typedef struct req {
	struct req *next;
	uint64_t rid;           /* ours: names jobs on the wire */
	uint64_t client_rid;
	uint64_t ask_hash;      /* fnv1a of its ClientRequest as protobuf-c
				 * packs it (front.c) */
	unsigned char cid[WIRE_ID_MAX];
	size_t cid_len;
	unsigned char who[WHO_MAX]; /* its client (fair share, limits) */
	size_t who_len;
	int state;              /* Q_* */
	int32_t *tokens;
	size_t n_tokens;
	uint64_t hash;
	/* its settings (the one home of each): the cluster's sampling:
	 * section, then the Ask's (net/spwire). The coordinator reads n,
	 * max_new, the early-stopping rule (decided over samples in index
	 * order), the vote and logprobs; a decode job carries what a worker
	 * samples with (SPWIRE_JOB). */
	sc_params p;
	char *grammar;          /* p.grammar's text, owned (the Ask's copy) */
	/* answer select (universal self-consistency, usc.h): the question
	 * (kept for the selection prompt), the child request of the pass
	 * while it runs; in a child, its parent (NULL once the parent is
	 * gone: an orphan, its result dropped) */
	char *question;
	size_t qlen;
	struct req *usc_child, *usc_parent;
	int usc_child_of;       /* this is a selection pass */
	int usc_done;           /* the pass is over (its outcome below) */
	int usc_chosen;         /* the response named, -1: none */
	uint32_t usc_tokens;
	char *usc_reply;        /* the pass's text, or why it failed */
	int stream;             /* Ask.stream: forward samples as they come */
	int announce;           /* Ask.announce: a StreamStart, no partials */
	int gone;               /* its client is gone: no reply is sent */
	stop_state ss;          /* initialized when the request is queued */
	uint32_t prefix;        /* samples 0..prefix-1 pushed to ss */
	int decided;            /* the reply holds samples 0..prefix-1 */
	uint32_t width;         /* samples in flight at most */
	uint8_t *begun;         /* (n) ever assigned */
	uint32_t started;       /* indices ever assigned */
	uint32_t *fwd;          /* (n) streamed: text bytes forwarded */
	uint64_t *fwd_hash;     /* (n) streamed: fnv1a of those bytes */
	uint32_t *fwd_tok;      /* (n) streamed with logprobs: tokens
				 * forwarded (TokenRun), */
	uint64_t *fwd_tok_hash; /* (n) ... and their hash (token_hash) */
	entry *root;
	uint8_t *st;            /* (n) S_* */
	uint8_t *lost;          /* (n) workers lost while decoding index i */
	Quorum__WorkerMsg **res;/* (n) the SampleResult of each index */
	uint32_t n_done;
	job *jobs;
	uint32_t next_attempt;
	int failures;
	int capacity_waits;     /* capacity refusals sat out */
	uint64_t tried;         /* the pump round that last tried to start it */
	int64_t t_accept, t_start, deadline;
	int64_t t_first;        /* the first sample's result came (0: none) */
	/* reply stats */
	double prefill_ms, decode_ms;
	uint64_t gen_tokens;
	uint32_t messages, blocks_mapped, blocks_copied, blocks_transferred;
	uint64_t bytes_transferred;
	int cache_hit, prefills;
	int no_cache;           /* Ask.prefix_cache false: bypass */
	char key[KEY_MAX];      /* its client's CURVE key ("" when off) */
	uint32_t reused;        /* prompt tokens the root took from the cache */
	uint64_t prefilled;     /* prompt tokens prefilled for it */
	char prefill_worker[ID_MAX];
} req;

struct sched {
	sched_opts o;
	const cfg *c;
	uint32_t vocab;
	uint32_t piece_max;     /* the vocabulary's longest token, in bytes */
	worker *w;              /* (MAX_WORKERS) */
	int n_workers;
	uint64_t fingerprint;
	int have_fingerprint;
	const curve_zap *zap; /* NULL: CURVE off (sched_opts.zap) */
	req *reqs, *reqs_tail;
	int n_reqs;
	entry *entries;
	struct pfx *index;      /* full blocks of cached prompts (roots.c) */
	zombie *zombies;
	uint64_t pump_gen;
	binding *bindings;      /* newest first; ids registered with a
				 * CURVE key, BINDINGS_MAX at most */
	int n_bindings;
	uint64_t next_id;
	int64_t hb_at;
	/* status counters */
	uint64_t served, failed, hits, misses, gen_tokens, tokens_saved;
	uint64_t partial_hits, tokens_reused, tokens_prefilled;
	uint64_t unroutable;    /* requests whose reply found no client */
	double decode_s;
	int64_t t_started;      /* sched_new */
	int64_t no_worker_since;/* 0: some worker is alive */
	bucket *buckets;        /* (n_buckets) tokens-per-minute debts */
	int n_buckets;
	int draining;           /* sched_shutdown: asks get CANCELLED */
	uint64_t displaced;     /* queued requests given up for a newcomer */
	/* sched_log_drop: lines in the second since drop_log_at, and
	 * those held back */
	int64_t drop_log_at;
	int drop_logs;
	uint64_t drop_quiet;
};


/* ---- sched.c: I/O and shared arithmetic ---- */
int64_t sched_now(const sched *s);
uint32_t sched_blocks_for(const sched *s, uint64_t n_tokens);
/* Worst-case private blocks of one sample of r: its copy of the root's
 * partly filled tail block plus max_new tokens. */
uint32_t sched_tail_blocks(const sched *s, const req *r);
/* A request's one reply (or a refusal) to its client; when the client is
 * gone it is counted (replies_unroutable) and logged. */
void sched_send_client(sched *s, const unsigned char *cid, size_t cid_len,
		       Quorum__ClientReply *r);
/* As sched_send_client, silent: nonzero when the client is gone (or its
 * queue is full); the caller decides (front_send_part). */
int sched_try_client(sched *s, const unsigned char *cid, size_t cid_len,
		     Quorum__ClientReply *r);
/* 0, or -1 when the worker is gone (it is then marked dead). */
int sched_send_worker(sched *s, int wi, Quorum__CoordMsg *m);
void sched_send_release(sched *s, int wi, uint32_t root_id);
/* One message to the peer id of either ROUTER; nonzero when it is gone. */
int sched_send_raw(sched *s, int to_worker, const unsigned char *id,
		   size_t id_len, const ProtobufCMessage *m);

/* A line about a worker's message dropped: a peer may send them as fast
 * as it likes, so at most SCHED_DROP_LOGS a second; those held back are
 * counted in the next line that goes out. */
#define SCHED_DROP_LOGS 10
void sched_log_drop(sched *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A worker's message (what) for no job of ours: logged (sched_log_drop)
 * when it names a job never sent — an id or attempt not issued yet,
 * attempts issued up to max_attempt — and dropped quietly when it is a
 * late one of a job that ended (cancelled, its request over). */
void sched_stray(sched *s, int wi, const char *what, uint64_t id,
		 uint64_t attempt, uint64_t max_attempt);

/* ---- members.c ---- */
int members_find(const sched *s, const wire_msg *m);
void members_reject(sched *s, const wire_msg *m, int status, const char *why);
int members_alive(const sched *s);
/* Alive and not fenced: may be given work (prefill, decode, import). */
int members_usable(const sched *s, int wi);
/* The decoder wi reported job (rid, attempt) ended: a zombie it was? */
int members_zombie_done(sched *s, int wi, uint64_t rid, uint32_t attempt);
/* No worker alive and none expected soon (the grace passed). */
int members_none_expected(const sched *s);
void members_on_register(sched *s, const wire_msg *m,
			 const Quorum__WorkerMsg *wm);
void members_remove(sched *s, int wi, const char *why);
/* Heartbeats due, expired workers. */
void members_tick(sched *s);

/* ---- roots.c ---- */
void roots_unref(sched *s, entry *e);
entry *roots_by_id(const sched *s, uint64_t id);
/* Finds or starts the root of r; r moves to Q_ROOT or Q_DECODE. */
void roots_start(sched *s, req *r);
/* Fills the root a worker decodes from and returns the worker whose pool
 * holds it; -1 when a transfer is needed. */
int roots_ref_for(const sched *s, const entry *e, const worker *w,
		  Quorum__RootRef *ref);
void roots_want_replica(sched *s, req *r, entry *e, const char *host);
int roots_transfer_failed(const entry *e, const char *host);
/* Worker wi is gone: its roots and replicas with it. */
void roots_forget_worker(sched *s, int wi);
void roots_on_prefix_ready(sched *s, int wi, const Quorum__PrefixReady *p);
void roots_on_root_data(sched *s, int wi, Quorum__RootData *d);
void roots_on_imported(sched *s, int wi, const Quorum__ImportedRoot *x);
void roots_on_error(sched *s, int wi, const Quorum__WorkerError *x);
void roots_free_all(sched *s);
/* Fails the cross-host copies whose step under way has waited longer
 * than limits.copy_step_timeout_ms (the timer). */
void roots_tick(sched *s);
/* Blocks of wi's pool committed: roots held or being made there (the
 * distinct block ids of its ready roots and replicas: roots forked from
 * one another share blocks), and the worst-case tails of the samples
 * assigned to it. */
uint64_t roots_committed(const sched *s, int wi);
/* For every worker i of the table: free_blocks[i] (NULL: not wanted),
 * its pool less roots_committed, and room[i], those plus the blocks only
 * unused cached roots hold there (evicting them frees those). One pass
 * over the roots, one sort of their block ids and one pass over the jobs:
 * a placement decision asks for all workers at once. */
void roots_room_all(const sched *s, uint64_t *free_blocks, uint64_t *room);
/* Evicts unused cached roots with a copy on wi (least recently used
 * first, never one in use) until need blocks are free there; 1 when they
 * are. */
int roots_make_room(sched *s, int wi, uint64_t need);
/* The largest pool among usable workers (0: none). */
uint32_t roots_largest_pool(const sched *s);

/* ---- front.c ---- */
void front_reply_error(sched *s, const unsigned char *cid, size_t cid_len,
		       uint64_t rid, int status, const char *err);
/* As front_reply_error, with ClientReply.retry_after_ms (0: none). */
void front_reply_retry(sched *s, const unsigned char *cid, size_t cid_len,
		       uint64_t rid, int status, const char *err,
		       uint32_t retry_ms);
/* 1 when a and b are requests of the same client (fair share). */
int front_same_client(const req *a, const req *b);
/* The client no longer wants r (CancelAsk, or its stream found it
 * gone): its jobs are cancelled, it ends CANCELLED (why). */
void front_cancel(sched *s, req *r, const char *why);
/* A part of r's stream (StreamStart, SamplePart) to its client. When it
 * cannot be sent, r is cancelled (front_cancel, no reply: one is counted
 * lost). 0, or -1 when r is gone (freed). */
int front_send_part(sched *s, req *r, Quorum__ClientReply *rep);
/* r ends: its client's tokens-per-minute bucket takes its tokens. */
void front_charge(sched *s, const req *r);
void front_buckets_free(sched *s);
/* The request's sample count N (its settings' n). */
static inline uint32_t req_n(const req *r)
{
	return (uint32_t)r->p.n;
}

/* All samples of r are in: vote, reply, free r. */
void front_finish(sched *s, req *r);

/* ---- dispatch.c ---- */
void dispatch_job_drop(sched *s, req *r, job *j);
void dispatch_req_free(sched *s, req *r);
/* Frees r's memory only (a request never queued, or after unlinking). */
void dispatch_req_release(req *r);
void dispatch_req_fail(sched *s, req *r, int status, const char *err);
/* As dispatch_req_fail, the reply with retry_after_ms. */
void dispatch_req_fail_retry(sched *s, req *r, int status, const char *err,
			     uint32_t retry_ms);
req *dispatch_req_by_rid(const sched *s, uint64_t rid);
/* Worker wi is gone: its jobs' unfinished indices go back to pending. */
void dispatch_forget_worker(sched *s, int wi);
/* Starts queued requests, requeues those whose root died, splits
 * pending samples over free slots, finishes complete requests. */
void dispatch_pump(sched *s);
/* Returns 1 when it kept wm. */
int dispatch_on_sample(sched *s, int wi, Quorum__WorkerMsg *wm);
void dispatch_on_job_done(sched *s, int wi, const Quorum__JobDone *x);
/* Partial texts of a streamed job, forwarded to its client. */
void dispatch_on_text(sched *s, int wi, const Quorum__SampleText *x);
void dispatch_deadlines(sched *s);

#endif

/*
 * fakeworker — simulated workers for driving the coordinator's scheduler
 * in-process: no model, no sockets, no processes. A fake worker answers
 * the scheduler's messages the way a worker's protocol does (Register,
 * Heartbeat, Prefill -> PrefixReady, DecodeJob -> SampleResult... ->
 * JobDone, ExportRoot -> RootData chunks, ImportRoot -> ImportedRoot,
 * Release, WorkerError) and keeps its KV pool's block ids like the
 * engine: a fork from a base root or a delta import shares the base's
 * first blocks.
 *
 * Used by tests/test_sched.c (the scheduler's cases, with pools small
 * enough to fill, failures injected through the fields below) and
 * bench/sched_sim.c (thousands of workers whose pools never fill; what
 * it measures is the scheduler's own time).
 *
 * Two pool models:
 *   counted  (blocks <= FW_COUNTED_MAX): every block refcounted; a
 *            prefill or import that does not fit, or a decode whose
 *            tails do not, is refused with NO_CAPACITY, as the engine
 *            does; Release frees a root's blocks.
 *   endless  (larger pools): block ids handed out in sequence, wrapping
 *            at the pool's size, nothing counted; never refuses.
 *
 * Ownership: an fw_env is the caller's (usually a static); the workers
 * are the caller's structs, linked into their env by fw_init, which
 * allocates their roots and refcounts; fw_env_reset frees those of every
 * worker linked (all must still be alive) and unlinks them. The strings
 * given to fw_init are borrowed and must outlive the worker.
 * Single-threaded.
 */
#ifndef QUORUM_FAKEWORKER_H
#define QUORUM_FAKEWORKER_H

#include <stddef.h>
#include <stdint.h>

#include "coordinator/scheduler.h"
#include "proto/quorum.pb-c.h"
#include "text/tok.h"
#include "net/wire.h"

/* the largest pool kept block by block (refcounts of 16 bits each) */
#define FW_COUNTED_MAX 65536u

typedef struct fw fw;

/* What a sample a fake worker decodes says (filled by fw_env.sample). */
typedef struct {
	char text[256];
	char answer[32];
	uint32_t tokens;
	int has_logprobs;
	double mean_logprob, group_confidence;
} fw_sample;

typedef struct fw_env {
	const tok *vocab;      /* borrowed: the logits' size, Register.vocab */
	uint32_t block_tokens; /* tokens per KV block (the config's) */
	uint32_t token_bytes;  /* the fake engine's K/V bytes per token */
	/* Hands the scheduler a worker message; NULL: sched_on_worker. */
	void (*deliver)(void *arg, sched *s, wire_msg *in);
	/* The next message the scheduler sent w, unpacked, or NULL; the
	 * caller of fw_serve frees it. NULL: w's inbox (fw_post). */
	Quorum__CoordMsg *(*next)(void *arg, fw *w);
	/* The sample of index i (mark: fw_decode's); NULL: text
	 * "<mark or s><i>", answer "42", 1 token, no log-probabilities. */
	void (*sample)(void *arg, const fw *w, uint32_t i, const char *mark,
		       fw_sample *out);
	/* A message breaks the protocol (what: the broken expectation);
	 * must not return. NULL: print it and abort. */
	void (*fail)(void *arg, const char *what, const char *file, int line);
	void *arg;
	uint64_t results;      /* samples sent by all the workers */
	fw *all;               /* workers linked by fw_init */
} fw_env;

typedef struct fw_root_rec {
	uint32_t id, nb, n_tokens;
	uint32_t *blk;           /* nb block ids */
} fw_root_rec;

typedef struct fw_msg {
	uint8_t *buf;
	size_t len;
	struct fw_msg *next;
} fw_msg;

struct fw {
	fw_env *env;
	fw *link;            /* next in env->all */
	const char *ident;   /* its connection (routing id); NULL: silent */
	const char *id, *host;
	char pool[128];
	char key[48];        /* ZAP User-Id it connects with */
	uint32_t blocks;     /* pool size it registers */
	uint32_t real;       /* blocks it really has (0: = blocks) */
	uint32_t used;       /* blocks referenced (ref > 0; counted pools) */
	uint32_t slots;
	uint32_t kv_dtype;   /* Register.kv_dtype (0 f32, 1 f16, 2 q8_0) */
	uint32_t hb_interval_ms; /* Register.heartbeat_interval_ms, 0: absent */
	uint64_t fp;         /* Register.model_fingerprint */
	uint32_t next_root;
	uint32_t next_block; /* endless pools: the next block id */
	uint16_t *ref;       /* counted pools: refcount by block id */
	fw_root_rec *roots;  /* the roots it holds */
	int n_roots, cap_roots;
	int based;           /* prefills from a base root */
	uint32_t reused;     /* tokens those took from their bases */
	int hold;            /* DecodeJobs are kept, not served */
	Quorum__CoordMsg *held[16];
	int n_held;
	int releases, cancels, prefills, decodes;
	/* root copies: exports served, chunks of them short of the root's
	 * end, imports; bad_chunk: the holder garbles its bad_chunk-th
	 * chunk (bad_how: 1 off a block boundary, 2 past the root's end,
	 * 3 starting elsewhere, 4 partial with logits) */
	int exports, partials, imports, bad_chunk, bad_how;
	/* mute_copies: ExportRoot and ImportRoot are swallowed unanswered
	 * (muted counts them) while heartbeats and decodes go on */
	int mute_copies, muted;
	fw_msg *head, *tail; /* inbox (fw_post), in order */
};

/* A worker of env with a pool of blocks and slots decode slots; its pool
 * name from (cluster, id, rnd) as poolname_make; fingerprint and
 * kv_dtype zero. Re-initialising a linked worker frees its state first.
 * Returns 0, or -1 when out of memory or the name does not fit. */
int fw_init(fw_env *env, fw *w, const char *ident, const char *id,
	    const char *host, const char *cluster, const unsigned char *rnd,
	    uint32_t blocks, uint32_t slots);

/* Frees every linked worker's state and unlinks them all. */
void fw_env_reset(fw_env *env);

/* Unlinks every worker without touching them (they may be gone, e.g.
 * after a failed test case): their state is not freed. */
void fw_env_forget(fw_env *env);

/* A message from the scheduler for w, packed into its inbox. */
int fw_post(fw *w, const ProtobufCMessage *m);

/* m from w to the scheduler (version, worker id, connection and ZAP
 * key filled in), through env->deliver. */
void fw_send(sched *s, const fw *w, Quorum__WorkerMsg *m);

/* Worker messages to the scheduler. fw_register: the worker forgets
 * every root it held, as a restarted worker. */
void fw_register(sched *s, fw *w);
void fw_heartbeat(sched *s, fw *w);
void fw_error(sched *s, fw *w, uint64_t rid, uint32_t attempt, int status);

/* The answers to the scheduler's messages (fw_serve calls them; a test
 * holding a message calls them itself). mark: see fw_env.sample. */
void fw_prefill(sched *s, fw *w, const Quorum__Prefill *p);
void fw_decode(sched *s, fw *w, const Quorum__DecodeJob *d,
	       const char *mark);
void fw_release(fw *w, uint32_t root);
void fw_export(sched *s, fw *w, const Quorum__ExportRoot *x);
void fw_import(sched *s, fw *w, const Quorum__RootData *d);

/* The index in w->roots of root id, or -1. */
int fw_root(const fw *w, uint32_t id);

/* Serves what the scheduler sent w (DecodeJobs kept when w->hold);
 * returns the messages handled. */
int fw_serve(sched *s, fw *w);

#endif

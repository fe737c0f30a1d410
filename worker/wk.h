/*
 * wk — the worker's serving loop: one DEALER to the coordinator, one
 * engine, one zmq_poll loop (zguide ppworker: heartbeats both ways,
 * reconnect with a doubling backoff when the coordinator goes silent).
 *
 * implements: Register / Heartbeat, and the coordinator's commands:
 *   Prefill      -> sc_root_prefill, PrefixReady (root kept); with a base
 *                   root (a cached prompt sharing its first blocks),
 *                   sc_root_prefill_from: only the rest is prefilled
 *   DecodeJob    -> sc_batch_decode_job from the job's root (own pool, or a pool of
 *                   another worker on this host mapped read-only by name),
 *                   one SampleResult per finished sample, then JobDone
 *   Release      -> sc_root_release
 *   ExportRoot   -> sc_root_export_rows, RootData: the rest of a root
 *                   from from_tokens, or (chunk_bytes) the next chunk of
 *                   whole blocks that fits one message
 *   import_root  -> sc_root_import_from, ImportedRoot: a root of its own
 *                   (a partial chunk's: the base of the next chunk)
 *   Cancel       -> stops the running decode (checked every round)
 *   ForgetPool   -> sc_root_unlink_pool: a same-host peer is gone (handled
 *                   between jobs; a mapping stays valid while in use)
 *   reject       -> the loop ends with QERR_REJECTED
 * Commands are untrusted: every field is checked before use; a bad one
 * gets a WorkerError (or a failed JobDone) and the worker keeps serving.
 *
 * Threads: the loop runs on the caller's thread; the engine's own pool of
 * threads does the arithmetic. During a decode (per round) and a prefill
 * (every 64 rows) a callback sends heartbeats that fall due and reads the
 * socket: Cancel and heartbeats are handled at once, other commands are
 * queued in order. A decode stops when the coordinator has been silent
 * past its liveness (it forgot the job; the worker reconnects).
 */
#ifndef QUORUM_WK_H
#define QUORUM_WK_H

#include <signal.h>
#include <stdint.h>

#include "conf/cfg.h"
#include "net/curve.h"

#define WK_ID_MAX 64
#define WK_HOST_MAX 128

typedef struct {
	const cfg *c;             /* borrowed */
	const char *id;           /* [A-Za-z0-9_.-]{1,64} */
	const char *host;         /* host label */
	const char *endpoint;     /* coordinator's worker endpoint */
	const curve_sock *curve;  /* CURVE client options; NULL: plaintext */
	int threads;
	volatile sig_atomic_t *stop; /* set by a signal handler */
	int *model_bad;           /* set to 1 when the model file cannot be
				   * served (WIRE_WORKER_EXIT_MODEL); may
				   * be NULL */
} wk_opts;

/* Loads the model, creates the engine and its named pool, serves until
 * *stop (returns QERR_OK) or a reject (returns QERR_REJECTED); other
 * failures return a qerr code with qerr_detail(). Everything is freed
 * (the pool's shm name unlinked) before it returns. */
int wk_run(const wk_opts *o);

/* Valid worker ids and host labels: [A-Za-z0-9_.-]{1,max-1}. */

#endif

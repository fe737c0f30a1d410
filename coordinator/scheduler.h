/*
 * sched — the coordinator's state: workers, requests, prefix roots, and
 * the decisions between them (placement, sample split, votes).
 *
 * implements: the issue-5 flow on top of two ROUTER sockets it borrows:
 *   client Ask -> validate (typed error replies) -> bounded queue
 *   -> root: the LRU prefix cache (hash of the prompt tokens) or a Prefill
 *      on the least loaded worker -> PrefixReady
 *   -> the N sample indices split over the workers' free decode slots, one
 *      DecodeJob per worker. A worker on the root holder's host label maps
 *      the holder's pool; a worker on another host label decodes from a
 *      copy imported once per (root, host): ExportRoot to the holder,
 *      RootData forwarded as import_root to one worker there, in chunks
 *      of whole blocks that fit one message, one in flight per copy.
 *   -> SampleResult per sample -> all N in -> vote_tally -> ClientReply
 *   -> the root is released, or kept in the prefix cache (evictions are
 *      Released).
 * Workers are tracked Paranoid-Pirate style (heartbeats both ways, expiry
 * after liveness x interval; a send to a closed connection fails at once
 * under ZMQ_ROUTER_MANDATORY); a worker that expires or fails is removed
 * and the unfinished sample indices of its jobs are dispatched again —
 * the bytes of sample i depend only on (prompt, params, seed, i), so a
 * re-dispatch never changes a reply. A root whose holder is lost is
 * prefilled again elsewhere; same-host workers get ForgetPool for the
 * lost worker's pool. Every message names (request, attempt); one that
 * matches no live job is dropped: quietly when it is late (its job
 * ended), with a log line when it names a job never sent, comes from an
 * unregistered peer or is malformed (at most SCHED_DROP_LOGS lines a
 * second: a flood is counted, not written).
 *
 * Failure budget: a request fails with WORKER_LOST when one of its
 * samples was being decoded by MAX_SAMPLE_LOSSES (3) workers that were
 * lost, or after MAX_FAILURES failed jobs/prefills. With no worker alive
 * for longer than liveness x interval + reconnect_min_ms (since the start
 * or since the last one went) asks and queued requests get NO_CAPACITY;
 * past limits.queue_depth requests, BUSY. An Ask repeating the request id
 * of one in flight from the same client connection is that request (one
 * reply) when its bytes are the same; another Ask under that id gets
 * BAD_REQUEST. A reply to a client that is gone is counted (status
 * replies_unroutable, one per request). A streamed request whose client
 * is found gone (a part of its stream cannot be sent) is cancelled then,
 * as its CancelAsk would (one log line); any other request of a client
 * that went away ends at its deadline, which cancels the workers' jobs.
 *
 * Clients and fairness: a client is a connection, or — when a gateway
 * asks on behalf of its users (Ask.on_behalf_of: "key:<hash of an API
 * key>", "ip:<address>") — that user. Trust: the field is taken only
 * from a connection trusted as a gateway: with CURVE on, one whose
 * client key is on security.gateway_keys; with CURVE off (no peer is
 * authenticated at all), a loopback or ipc:// connection while
 * security.loopback_gateway is true — any local process may then name a
 * user, and so spend that user's share or tokens, but no more than it
 * could already take by opening connections. Any other connection
 * naming a user gets BAD_REQUEST (never silently ignored: a
 * misconfigured gateway would make all its users one client). The
 * queue is work conserving (one client may fill it); when it is full, a
 * client under its fair share (queue_depth / clients with requests)
 * displaces the newest still-queued request of the client holding the
 * most (BUSY with retry_after_ms); limits.per_client_in_flight and
 * limits.tokens_per_minute cap each client (BUSY with retry_after_ms).
 *
 * Every accepted client request gets exactly one reply (answer, typed
 * error, timeout, or CANCELLED with retry_after_ms at shutdown: asks
 * read while draining get that too).
 *
 * Threads: single-threaded, driven by the coordinator's zmq_poll loop.
 * The parts (membership, roots, client front, dispatch) are listed in
 * sched_int.h; all I/O and time go through sched_opts.io, so tests drive
 * the scheduler in-process (tests/test_sched.c).
 */
#ifndef QUORUM_SCHED_H
#define QUORUM_SCHED_H

#include <stdint.h>

#include "conf/cfg.h"
#include "text/tok.h"
#include "net/wire.h"

typedef struct sched sched;

/* How the scheduler reaches the world. Left zero: wire_send on the two
 * ROUTERs below and wire_now_ms. Tests and the simulator plug in their
 * own (fake workers, a clock they move). */
typedef struct {
	/* Sends m to the peer id on the worker (to_worker) or client
	 * ROUTER; nonzero when the peer is gone. */
	int (*send)(void *arg, int to_worker, const unsigned char *id,
		    size_t id_len, const ProtobufCMessage *m);
	int64_t (*now_ms)(void *arg); /* monotonic milliseconds */
	void *arg;
} sched_io;

typedef struct {
	const cfg *c;        /* borrowed, outlives the sched */
	const tok *t;        /* borrowed: prompts are tokenized here */
	int prompt_family;   /* enum prompt_family, resolved at start */
	int ctx_len;         /* the model's context length */
	void *clients;       /* ROUTER bound to the client endpoint */
	void *workers;       /* ROUTER bound to the worker endpoint */
	/* the model's fingerprint (model_fingerprint_file of the
	 * coordinator's own model.path): workers must match it */
	uint64_t fingerprint;
	int has_fingerprint;
	/* CURVE on: the allowlists (borrowed), for the worker ids each
	 * worker key may register; NULL when CURVE is off */
	const curve_zap *zap;
	/* CURVE on: the client keys (Z85, borrowed) trusted as gateways
	 * (security.gateway_keys, resolved) */
	const char (*gateway_keys)[CURVE_Z85_LEN + 1];
	size_t n_gateway_keys;
	sched_io io;
} sched_opts;

int sched_new(const sched_opts *o, sched **out);
void sched_free(sched **s);

/* One message read from the client / worker ROUTER (rc is wire_recv's:
 * a malformed message of a client still gets an error reply). */
void sched_on_client(sched *s, int rc, const wire_msg *m);
void sched_on_worker(sched *s, int rc, const wire_msg *m);

/* Timers: heartbeats due, expired workers, request deadlines, queued
 * work. Call after every poll. */
void sched_tick(sched *s);
/* Milliseconds until the next timer (for zmq_poll), >= 0. */
long sched_timeout_ms(const sched *s);

/* Drains: replies CANCELLED with retry_after_ms to every request in
 * flight, and to every ask from now on (coordinator exiting). */
void sched_shutdown(sched *s);

/* Workers registered now. */
int sched_n_workers(const sched *s);
/* The KV pool name worker id registered with, or NULL (not registered,
 * or no pool). */
const char *sched_worker_pool(const sched *s, const char *id);

#endif

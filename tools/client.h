/*
 * client — the client side of the quorum wire protocol, shared by
 * `quorum ask` and `quorum status` (tools only; the server side lives in
 * coordinator/ and common/).
 *
 * implements: one DEALER socket connected to the coordinator's client
 * endpoint; send a ClientRequest, receive ClientReplies (one protobuf
 * frame each, see proto/quorum.proto); a blocking call with bounded
 * retries that resends the SAME request id (the coordinator may
 * deduplicate); JSON renderings of an Answer and a ClusterStatus with the
 * field names of `quorum run --json`.
 *
 * Replies are untrusted: a message that is not exactly one frame, does
 * not unpack, or carries an unknown request id is dropped and the wait
 * goes on (a late reply to an earlier attempt of the same id is accepted:
 * it is the same request). Nothing here exits or prints, except through
 * qerr_detail().
 */
#ifndef QUORUM_CLIENT_H
#define QUORUM_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/quorum.pb-c.h"
#include "sc/params.h"

/* Replies larger than this are refused by the socket (ZMQ_MAXMSGSIZE). */
#define CLIENT_MAX_REPLY_BYTES (256LL << 20)

/* Process exit status for a reply status: OK 0, BUSY 3, others 1. */
#define CLIENT_EXIT_BUSY 3
int client_exit_code(int status);

typedef struct client client;

/* Opens a ZeroMQ context and a DEALER socket connected to endpoint
 * (tcp://, ipc://). Connecting never waits for the peer. QERR_OK and
 * *out set, or QERR_ARG / QERR_IO / QERR_NOMEM with qerr_detail(). */
int client_open(const char *endpoint, client **out);

/* As client_open, as a CURVE client (curve.h) when server_key_file (the
 * coordinator's public key file) and client_key_file (this client's
 * secret key file; its public key is derived) are given: both or neither.
 * A key file that is missing or malformed is an error before anything
 * connects. */
int client_open_curve(const char *endpoint, const char *server_key_file,
		      const char *client_key_file, client **out);

/* Closes the socket (unsent messages are dropped) and the context; sets
 * *c to NULL; NULL ok. */
void client_free(client **c);

const char *client_endpoint(const client *c);

/* The words of a call that got no reply: "no reply from ENDPOINT within
 * SECSs (is the coordinator running?)", and without CURVE keys (curve 0)
 * that a coordinator with CURVE on answers no client without them (it
 * stays silent, docs/security.md); into buf. */
void client_no_reply(char *buf, size_t cap, const char *endpoint,
		     double secs, int curve);

/* A random non-zero 64-bit request id (getrandom; time and pid mix in
 * when that fails). */
uint64_t client_request_id(void);

/* Packs and queues req (version is set to PROTOCOL_VERSION here). When
 * no connection can take it now (none up, e.g. the coordinator refused
 * our CURVE key), it is dropped like a lost message: QERR_OK, and the
 * reply wait runs out. Never blocks. */
int client_send(client *c, Quorum__ClientRequest *req);

/* Waits up to timeout_ms (>= 0) for the next valid reply. QERR_OK with
 * *out a reply the caller frees with quorum__client_reply__free_unpacked,
 * or QERR_OK with *out NULL when the time ran out; QERR_IO on a socket
 * error. Invalid messages are dropped (counted in client_dropped). */
int client_recv(client *c, int timeout_ms, Quorum__ClientReply **out);

/* Messages dropped so far as invalid. */
size_t client_dropped(const client *c);

/* 1 when the connection dropped (the coordinator stopped or restarted)
 * since the last call; clears it. client_recv returns at once (no
 * reply) when it sees a drop: a request without its reply then was lost
 * with the connection and is worth sending again at once (it waits in
 * the socket until a coordinator is back). */
int client_lost(client *c);

/* Sends req and waits up to timeout_ms per attempt for the reply with its
 * request id, resending the same request up to `retries` more times (an
 * attempt also ends when the connection drops: the resend goes to the
 * coordinator's successor) —
 * also after a CANCELLED reply with retry_after_ms (a draining
 * coordinator: the request goes to its successor after that delay, at
 * most 5 s). QERR_OK with *out the reply, or QERR_OK with *out NULL after
 * the last attempt ran out; QERR_IO on a socket error. */
int client_call(client *c, Quorum__ClientRequest *req, int timeout_ms,
		int retries, Quorum__ClientReply **out);

/* "STATUS_OK", "STATUS_BUSY", ... ("STATUS_UNKNOWN" otherwise). */
const char *client_status_name(int status);

/* A JSON string of bytes s[0, n): invalid UTF-8 bytes become U+FFFD and
 * NUL bytes are kept as \u0000. Never NULL unless out of memory. */
json_t *client_text(const void *s, size_t n);

/* json_dumps(j, flags) (malloc'ed; NULL on failure) with every real
 * number written as the shortest text that reads back as the same
 * double, as a real still, in Python's repr's notation (0.7, 100.0,
 * 1e20): jansson writes 17 digits, "temperature": 0.69999999999999996
 * for 0.7. The same values, so the same JSON to every parser. Every
 * JSON text quorum's commands and gateway print goes through it. */
char *client_dumps(const json_t *j, size_t flags);

/* Where byte b of s[0, n) lands in client_text(s, n), counted in Unicode
 * code points (what Python's str indexes): the index of the character
 * that holds byte b, so a token that begins inside a character points at
 * that character; n (or more) gives the text's length in code points. */
size_t client_text_index(const void *s, size_t n, size_t b);

/* A sample's alternatives (top_logprobs) beside its n tokens: token i
 * has n_alt[i] of them, the next ones of lp and piece (their bytes). */
typedef struct client_alts {
	const uint32_t *n_alt;
	const double *lp;
	const ProtobufCBinaryData *piece;
	size_t total;            /* entries of lp and piece */
} client_alts;

/* A sample's per-token log-probabilities as `[{token, logprob}]`: token
 * is the text from off[i] to the next token's offset (the text's end for
 * the last; "" for an end token or one a stop string cut away), as
 * client_text. n values; text of len bytes. With alts (NULL: none) each
 * entry also has `top_logprobs: [{token, logprob}]`; counts that overrun
 * alts->total end the lists there. */
json_t *client_logprobs(const char *text, size_t len, const double *lp,
			const uint32_t *off, size_t n,
			const client_alts *alts);
/* The alternatives of a Sample, or of a streamed TokenRun (the same
 * fields; NULL when it has none), into *a. */
const client_alts *client_sample_alts(const Quorum__Sample *x,
				      client_alts *a);
const client_alts *client_run_alts(const Quorum__TokenRun *x, client_alts *a);

/* One entry of the vote as every JSON reply writes it (quorum run, ask,
 * the gateway's "quorum" object): {"answer", "count", "first_index"}
 * and, for a weighted vote, "weight". The one writer of that shape. */
json_t *client_vote_json(const char *answer, size_t len, uint64_t count,
			 uint64_t first_index, int has_weight, double weight);

/* The vote of an Answer: its entries in order, as client_vote_json. */
json_t *client_votes_json(const Quorum__Answer *a);

/* The settings `which` (SC_BIT()s) of p into o, each under its name
 * (sc/params' table): numbers, booleans, the rule and vote as text, the
 * stop strings as an array; those not in `given` are null (the cluster's
 * default). Floats are written as the shortest decimal that reads back
 * as the same float (0.7). The one writer of settings in JSON replies. */
#define CLIENT_ECHO_SETTINGS (SC_BIT(SC_S_SEED) | \
			      SC_BIT(SC_S_TEMPERATURE) | \
			      SC_BIT(SC_S_TOP_K) | SC_BIT(SC_S_TOP_P) | \
			      SC_BIT(SC_S_MAX_NEW_TOKENS))
void client_params_json(json_t *o, const sc_params *p, unsigned given,
			unsigned which);

/* The winning answer as a person reads it (sc/answer.h's answer_shown
 * over the winner's first voter's text) into out: false when no sample
 * answered. */
bool client_answer_shown(const Quorum__Answer *a, char *out, size_t cap);

/* The settings an Answer ran with (its params, on the defaults) into *p,
 * the ones it carried as SC_BIT()s in *given: false where it has none (a
 * coordinator before them) or they do not read back. */
bool client_answer_params(const Quorum__Answer *a, sc_params *p,
			  unsigned *given);

/* Adds the fields of an Answer to o, named as `quorum run --json` names
 * them (answer, votes, n, voters, prompt_tokens, samples, timings) plus
 * "prefix" (prefill worker, cache hit, block counts). a may be NULL (a
 * failed request): answer null, votes/samples empty. */
void client_answer_json(json_t *o, const Quorum__Answer *a);

/* Adds the fields of a ClusterStatus to o (cluster, workers[], queue
 * depth, in flight, served/failed, tokens_per_s, prefix hits/misses). */
void client_cluster_json(json_t *o, const Quorum__ClusterStatus *s);

#endif

/*
 * gwlink — the HTTP gateway's link to the coordinator: one ZeroMQ DEALER
 * socket (CURVE when keys are given) owned by one thread, shared by any
 * number of HTTP threads.
 *
 * implements: submit a ClientRequest from any thread (a call), wait for
 * its replies with a deadline, release it. The link thread packs nothing:
 * requests are packed by the submitter and queued; it sends them, reads
 * replies, and hands each to the call with its request id (replies for
 * calls already released are dropped and counted).
 *
 * A call receives replies in arrival order; the last one is final (an
 * answer, a typed error, a cluster status). Partial replies (streamed
 * samples) come before it. Requests the socket cannot take yet (no
 * connection up) stay queued and are retried; the caller's deadline
 * bounds the wait.
 *
 * Restarts: an Ask answered CANCELLED with retry_after_ms (a draining
 * coordinator) before any other reply of it is sent again once, after
 * that delay, with the same request id (the bytes of an answer depend on
 * the request only). When the connection drops (a socket monitor sees
 * it), every Ask without a reply yet is sent again once at once (it
 * waits in the socket until the successor binds); every other call still
 * open gets a final CANCELLED (retry_after_ms set) at once instead of
 * its deadline.
 *
 * Users: gwlink_who names the end user of a request (Ask.on_behalf_of)
 * when the coordinator trusts this link as a gateway (security.
 * gateway_keys holds its CURVE key, or CURVE off, security.
 * loopback_gateway and a loopback/ipc endpoint), so each API key (a
 * keyless gateway: each client address) is a client of its own there.
 *
 * Thread safety: every function may be called from any thread, except
 * that one call is waited on by one thread at a time.
 */
#ifndef QUORUM_GWLINK_H
#define QUORUM_GWLINK_H

#include <stdint.h>
#include <sys/socket.h>

#include "conf/cfg.h"
#include "proto/quorum.pb-c.h"

#define GWLINK_WHO_MAX 72 /* "key:" + 16 hex, "ip:" + an address, NUL */

typedef struct gwlink gwlink;
typedef struct gwcall gwcall;

/* Opens the link to endpoint and starts its thread. server_key_file and
 * client_key_file: CURVE (both) or plaintext (both NULL), as
 * client_open_curve. QERR_* with qerr_detail(). */
int gwlink_open(const char *endpoint, const char *server_key_file,
		const char *client_key_file, gwlink **out);
/* Stops the thread, drops what is queued, closes the socket; NULL ok. */
void gwlink_free(gwlink **l);

/* Submits req (its request_id and version are set here) and returns the
 * call, or NULL when out of memory. */
gwcall *gwlink_submit(gwlink *l, Quorum__ClientRequest *req);
uint64_t gwcall_id(const gwcall *c);
/* The next reply of c, waiting until deadline (wire_now_ms() clock);
 * NULL when the deadline passed first, or after the final reply was
 * returned. The caller frees it (quorum__client_reply__free_unpacked). */
Quorum__ClientReply *gwcall_next(gwcall *c, int64_t deadline);
/* 1 when the reply is the last of its call. */
int gwlink_final(const Quorum__ClientReply *r);
/* Forgets c (late replies are dropped). When its final reply has not
 * come, the coordinator is told to cancel the request. NULL ok. */
void gwcall_release(gwcall *c);

/* Ends every wait now and from now on (gwcall_next returns NULL at
 * once): the gateway is stopping. */
void gwlink_abort(gwlink *l);
int gwlink_aborted(gwlink *l);

/* Replies dropped: unknown request id or malformed. */
uint64_t gwlink_dropped(gwlink *l);
/* Asks sent again (drain replies, a dropped connection). */
uint64_t gwlink_resent(gwlink *l);

/* The user a request is made for, into buf (cap >= GWLINK_WHO_MAX):
 * "key:" + the first 16 hex digits of SHA-256(api_key) when the gateway
 * has API keys (api_key: the caller's, already accepted), else "ip:" +
 * the caller's address (addr; NULL: none). Returns buf, or NULL when the
 * coordinator does not trust this link as a gateway (c's security
 * section) or there is no identity: send no on_behalf_of then. */
const char *gwlink_who(gwlink *l, const cfg *c, const char *api_key,
		       const struct sockaddr *addr, char *buf, size_t cap);

/* One call: submit, the final reply (NULL on timeout), release. */
Quorum__ClientReply *gwlink_call(gwlink *l, Quorum__ClientRequest *req,
				 int timeout_ms);

#endif

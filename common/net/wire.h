/*
 * wire — one protobuf message in one ZeroMQ frame, shared by the
 * coordinator, the worker and the clients.
 *
 * implements: socket setup (bind/connect with the limits below), send of
 * one packed message (ROUTER side: identity frame first), receive of one
 * whole ZeroMQ message with a cap on its frames, the protocol version
 * check and the Status name table.
 *
 * Framing contract (proto/quorum.proto): a DEALER peer sends exactly one
 * frame; a ROUTER sees [identity][payload]. wire_recv() always drains the
 * whole multipart message, so a peer sending too many frames cannot
 * desynchronise the socket: the message is reported as QERR_FORMAT and
 * the identity (when there is one) is still returned so the caller can
 * answer with an error.
 *
 * Frame size: bound sockets get ZMQ_MAXMSGSIZE (libzmq drops the peer's
 * connection on a larger frame); a payload is also checked on receive:
 * over wire_recv's max_bytes it is QERR_FORMAT with its size and first
 * bytes kept (wire_msg.too_big, head), so a server whose socket cap is
 * larger than its limit can answer it with an error.
 * Payloads are UNTRUSTED: unpack them with the generated *__unpack and
 * free them with *__free_unpacked.
 */
#ifndef QUORUM_WIRE_H
#define QUORUM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>
#include <zmq.h>

#include "net/curve.h"

#define WIRE_VERSION 1u          /* quorum.Constants.PROTOCOL_VERSION */
#define WIRE_MAX_FRAMES 2        /* identity + payload */
#define WIRE_ID_MAX 255          /* ZeroMQ routing ids are 1..255 bytes */
#define WIRE_DEFAULT_MAX_BYTES (16 * 1024 * 1024)

/* Limits both ends of the protocol enforce (one home for each):
 * worker ids, host labels: wire_name_ok with these maxima (NUL included);
 * client fields: the question and the system prompt in bytes; a sample's
 * text: at most WIRE_TOKEN_BYTES_MAX bytes per generated token (no
 * vocabulary entry of a supported model is longer) plus a margin. */
#define WIRE_WORKER_ID_MAX 64
/* A worker's exit status when its model file cannot be served (malformed,
 * unsupported, missing what the architecture needs): restarting it cannot
 * help, so a coordinator that started it stops (coordinator/proc.c). */
#define WIRE_WORKER_EXIT_MODEL 4
#define WIRE_HOST_MAX 128
#define WIRE_POOL_NAME_MAX 256
#define WIRE_QUESTION_MAX (1u << 20)
#define WIRE_SYSTEM_MAX (64u * 1024)

/* 1 when a question q[0, n) holds nothing but ASCII whitespace (or
 * nothing): no question, refused as empty by every entry point (the
 * coordinator, the gateway, run and ask). */
static inline int wire_question_blank(const char *q, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (q[i] != ' ' && q[i] != '\t' && q[i] != '\n' &&
		    q[i] != '\r' && q[i] != '\v' && q[i] != '\f')
			return 0;
	return 1;
}
/* An Ask's few-shot examples (earlier turns), at most; their text at
 * most WIRE_QUESTION_MAX in all */
#define WIRE_SHOTS_MAX 64
#define WIRE_TOKEN_BYTES_MAX 256u
#define WIRE_SAMPLE_TEXT_MAX(max_new) \
	((size_t)(max_new) * WIRE_TOKEN_BYTES_MAX + 1024)
/* At most the bytes, its token's bytes aside, of one alternative on the
 * wire (Sample.alt_*: the id's varint, <= 4 bytes for ids < 2^24, the
 * double, the piece's tag and length) and of one token's own log-
 * probability, offset and count (the double, two varints). */
#define WIRE_ALT_BYTES 20u

/* A root copied across hosts travels in chunks (quorum.proto ExportRoot).
 * The K/V bytes of a RootData leave room in limits.max_message_bytes for
 * the logits (vocab x f32, the last chunk's) and WIRE_ROOT_HEADROOM for
 * its other fields; the coordinator asks for chunks of at most
 * wire_root_chunk_bytes: that room, and at most WIRE_ROOT_CHUNK_MAX, so
 * one chunk holds a link (and the heartbeats queued behind it) only
 * briefly. 0: not even the logits fit. */
#define WIRE_ROOT_HEADROOM 4096
#define WIRE_ROOT_CHUNK_MAX ((int64_t)4 << 20)
static inline int64_t wire_root_chunk_bytes(int64_t max_message_bytes,
					    uint32_t vocab)
{
	int64_t b = max_message_bytes - (int64_t)vocab * 4 - WIRE_ROOT_HEADROOM;

	return b < 0 ? 0 : b > WIRE_ROOT_CHUNK_MAX ? WIRE_ROOT_CHUNK_MAX : b;
}

/* One received message. data points into frame;
 * release with wire_msg_close. */
typedef struct {
	unsigned char id[WIRE_ID_MAX];
	size_t id_len;               /* 0 on a DEALER socket */
	const uint8_t *data;
	size_t len;
	int frames;                  /* frames received (identity included) */
	char user[48];               /* ZAP User-Id (the peer's CURVE public
				      * key in Z85) or "" */
	char peer[64];               /* ZeroMQ's Peer-Address: the peer's IP
				      * (tcp), ":uid:gid:pid" (ipc), or "" */
	/* QERR_FORMAT for a payload over max_bytes: its size, and its first
	 * bytes (enough for a ClientRequest's version and request id) */
	size_t too_big;
	uint8_t head[24];
	size_t head_len;
	zmq_msg_t frame;             /* holds the payload */
	int has_frame;
} wire_msg;

/* Creates a socket of type (ZMQ_ROUTER, ZMQ_DEALER) on ctx and binds it
 * to endpoint. ROUTER sockets get ZMQ_ROUTER_MANDATORY; every socket gets
 * ZMQ_LINGER 0 and ZMQ_MAXMSGSIZE max_bytes (0: WIRE_DEFAULT_MAX_BYTES).
 * QERR_IO with a detail naming the endpoint (errno EADDRINUSE is left in
 * errno). */
int wire_bind(void *ctx, int type, const char *endpoint, int64_t max_bytes,
	      void **out);
/* As wire_bind, connecting instead. */
int wire_connect(void *ctx, int type, const char *endpoint,
		 int64_t max_bytes, void **out);
/* As wire_bind / wire_connect, with the CURVE options k (curve.h) set
 * before the bind/connect; k NULL: plaintext, as above. */
int wire_bind_curve(void *ctx, int type, const char *endpoint,
		    int64_t max_bytes, const curve_sock *k, void **out);
int wire_connect_curve(void *ctx, int type, const char *endpoint,
		       int64_t max_bytes, const curve_sock *k, void **out);
void wire_close(void **sock);

/* Watches sock's connection for drops (a peer that stopped): a PAIR
 * socket of ctx receiving sock's ZMQ_EVENT_DISCONNECTED events, for a
 * zmq_poll beside sock. QERR_IO (with the detail) on failure. Not thread
 * safe: the thread that owns sock owns the monitor. */
int wire_monitor_open(void *ctx, void *sock, void **mon);
/* Reads every event waiting on mon; 1 when one was a disconnect. */
int wire_monitor_dropped(void *mon);
/* Stops watching sock and closes *mon (NULL ok); before sock closes. */
void wire_monitor_close(void *sock, void **mon);

/* Packs m and sends it; with id (id_len > 0) an identity frame first.
 * Non-blocking on ROUTER sockets (ZMQ_DONTWAIT): QERR_IO when the peer is
 * gone (EHOSTUNREACH) or its queue is full. */
int wire_send(void *sock, const void *id, size_t id_len,
	      const ProtobufCMessage *m);

/* Receives one whole message (non-blocking when dontwait). router: the
 * socket prefixes an identity frame; out->user is the User-Id the ZAP
 * handler gave the connection (CURVE on), else "". QERR_OK with out filled;
 * QERR_FULL when nothing is waiting (dontwait); QERR_FORMAT when the
 * frame count or size is wrong (out->id still valid, the payload empty);
 * QERR_IO on a socket error (EINTR included). */
int wire_recv(void *sock, int router, int dontwait, size_t max_bytes,
	      wire_msg *out);
void wire_msg_close(wire_msg *m);

/* "OK", "BAD_REQUEST", ... for quorum.Status values; "UNKNOWN" else. */
const char *wire_status_name(int status);

/* The quorum.Status a qerr code is reported as on the wire:
 * QERR_FULL NO_CAPACITY, QERR_TOOLONG TOO_LONG, QERR_CANCELLED
 * CANCELLED, argument/range/format/missing BAD_REQUEST, else INTERNAL. */
int wire_status_of_qerr(int qerr);

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t wire_now_ms(void);

/* 1 when s is a worker/host name: 1..max-1 chars of [A-Za-z0-9_.-]. */
int wire_name_ok(const char *s, size_t max);

#endif

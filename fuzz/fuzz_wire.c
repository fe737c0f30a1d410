/*
 * fuzz_wire — libFuzzer target: the peer-message path of the coordinator
 * and the worker. Arbitrary frames are sent over real ZeroMQ inproc
 * sockets set up by wire_bind/wire_connect, received with wire_recv (the
 * multipart envelope and frame-count checks) and the payload unpacked as
 * the message type that side unpacks:
 *   kind 0  ClientRequest  client DEALER -> coordinator ROUTER
 *   kind 1  WorkerMsg      worker DEALER -> coordinator ROUTER
 *   kind 2  CoordMsg       coordinator ROUTER -> worker DEALER
 *
 * Input: byte 0 = kind (mod 3) | 0x80 when wire_recv gets a 64-byte cap;
 * byte 1 = frames - 1 (mod 4); then frames-1 times { len u8, len bytes };
 * the last frame is the rest of the input.
 *
 * Properties checked beyond "no crash, no leak, no UB": one frame gives
 * QERR_OK and exactly the bytes sent (unless over the cap: QERR_FORMAT);
 * any other count gives QERR_FORMAT with the whole message drained (the
 * next message on the socket is read intact) and, on a ROUTER, the
 * sender's identity; an unpacked message re-packs, and its oneof body
 * matches its case.
 * Seeds: fuzz/corpus/wire/ (written by fuzz/mkseeds.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "proto/quorum.pb-c.h"
#include "qerr.h"
#include "net/wire.h"

#define CAP 64

static void *ctx, *rt, *dl;          /* ROUTER, DEALER connected to it */
static unsigned char dl_id[WIRE_ID_MAX];
static size_t dl_id_len;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_wire: %s (%s)\n", what, qerr_detail());
	abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	wire_msg m;

	(void)argc;
	(void)argv;
	if (!(ctx = zmq_ctx_new()) ||
	    wire_bind(ctx, ZMQ_ROUTER, "inproc://fuzz-wire", 0, &rt) ||
	    wire_connect(ctx, ZMQ_DEALER, "inproc://fuzz-wire", 0, &dl))
		die("socket setup");
	/* learn the DEALER's identity, as the coordinator does */
	if (zmq_send(dl, "hello", 5, 0) != 5 || wire_recv(rt, 1, 0, 0, &m))
		die("hello");
	memcpy(dl_id, m.id, m.id_len);
	dl_id_len = m.id_len;
	wire_msg_close(&m);
	return 0;
}

static void send_frame(void *s, const void *p, size_t n, int more)
{
	if (zmq_send(s, p, n, more ? ZMQ_SNDMORE : 0) != (int)n)
		die("zmq_send");
}

/* Unpacks as kind, checks the oneof and re-packs; 1 when decodable. */
static int unpack(int kind, const uint8_t *p, size_t n)
{
	ProtobufCMessage *m;
	int ok = 1;

	switch (kind) {
	case 0: {
		Quorum__ClientRequest *r =
			quorum__client_request__unpack(NULL, n, p);
		if (r && r->body_case == QUORUM__CLIENT_REQUEST__BODY_ASK)
			ok = r->ask && r->ask->question.len <= n &&
			     (r->ask->question.len == 0 || r->ask->question.data);
		else if (r && r->body_case == QUORUM__CLIENT_REQUEST__BODY_STATUS)
			ok = r->status != NULL;
		m = (ProtobufCMessage *)r;
		break;
	}
	case 1: {
		Quorum__WorkerMsg *w = quorum__worker_msg__unpack(NULL, n, p);
		/* the oneof members share one pointer (a union) */
		if (w)
			ok = w->worker_id != NULL &&
			     (w->body_case == 0 || w->register_ != NULL);
		m = (ProtobufCMessage *)w;
		break;
	}
	default: {
		Quorum__CoordMsg *c = quorum__coord_msg__unpack(NULL, n, p);
		if (c)
			ok = c->body_case == 0 || c->heartbeat != NULL;
		m = (ProtobufCMessage *)c;
		break;
	}
	}
	if (!m)
		return 0;
	if (!ok)
		die("oneof case without its body");
	{
		size_t sz = protobuf_c_message_get_packed_size(m);
		uint8_t *buf = malloc(sz ? sz : 1);

		if (!buf || protobuf_c_message_pack(m, buf) != sz)
			die("re-pack");
		free(buf);
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int kind, frames, router, rc;
	size_t cap, off = 2, last_len = 0;
	const uint8_t *last = NULL;
	void *tx, *rx;
	wire_msg m;

	if (size < 2)
		return 0;
	kind = (data[0] & 0x7f) % 3;
	cap = data[0] & 0x80 ? CAP : 0;
	frames = 1 + data[1] % 4;
	router = kind != 2;
	tx = router ? dl : rt;
	rx = router ? rt : dl;
	if (!router)
		send_frame(tx, dl_id, dl_id_len, 1);
	for (int f = 0; f < frames; f++) {
		const uint8_t *p;
		size_t n;

		if (f < frames - 1) {
			n = off < size ? data[off++] : 0;
			if (n > size - off)
				n = size - off;
		} else {
			n = size - off;
		}
		p = data + off;
		off += n;
		send_frame(tx, p, n, f < frames - 1);
		last = p;
		last_len = n;
	}
	rc = wire_recv(rx, router, 0, cap, &m);
	if (frames != 1 || (cap && last_len > cap)) {
		if (rc != QERR_FORMAT || m.data || m.len)
			die("a bad message not refused");
	} else if (rc != QERR_OK || m.len != last_len ||
		   (last_len && memcmp(m.data, last, last_len))) {
		die("a good message not received intact");
	}
	if (router && (m.id_len != dl_id_len || memcmp(m.id, dl_id, dl_id_len)))
		die("identity lost");
	if (rc == QERR_OK)
		unpack(kind, m.data, m.len);
	wire_msg_close(&m);

	/* the socket is in step: a probe frame comes through alone */
	if (!router)
		send_frame(tx, dl_id, dl_id_len, 1);
	send_frame(tx, "probe", 5, 0);
	if (wire_recv(rx, router, 0, 0, &m) || m.len != 5 ||
	    memcmp(m.data, "probe", 5))
		die("socket out of step after a message");
	wire_msg_close(&m);
	return 0;
}

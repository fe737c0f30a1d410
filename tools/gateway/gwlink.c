/* gwlink — the gateway's link to the coordinator (gwlink.h): one DEALER
 * owned by the link thread, calls handed between HTTP threads and it,
 * resends across coordinator restarts, and the users' identities.
 * Callers: the gateway's serve.c (open/free) and its endpoints. */
#include "gwlink.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "tools/client.h"
#include "net/curve.h"
#include "qerr.h"
#include "net/wire.h"

#define GWLINK_RETRY_MS 50 /* resend period while no connection is up */
#define GWLINK_RESEND_MAX_MS 5000 /* a retry hint is followed up to this */
#define GWLINK_LOST_RETRY_MS 500  /* the hint of a call cut by a drop */

typedef struct out_msg {
	struct out_msg *next;
	size_t len;
	uint8_t data[];
} out_msg;

typedef struct rep_node {
	struct rep_node *next;
	Quorum__ClientReply *r;
} rep_node;

struct gwcall {
	gwcall *next, *prev;    /* in l->calls */
	gwlink *l;
	uint64_t id;
	rep_node *head, *tail;  /* replies not taken yet */
	int final_in;           /* the final reply arrived */
	int final_out;          /* ... and was taken */
	int n_in;               /* replies delivered */
	out_msg *again;         /* an Ask: its packed request, for a resend */
	int retried;            /* sent again already (once at most) */
	int64_t resend_at;      /* a resend due then (0: none) */
	pthread_cond_t cv;
};

struct gwlink {
	pthread_mutex_t mu;
	pthread_t th;
	int th_started;
	int stop;
	int aborted;            /* gwlink_abort: no more waiting */
	int efd;                /* wakes the thread: something to send */
	void *ctx, *sock;
	char *endpoint;
	out_msg *out_head, *out_tail;
	gwcall *calls;
	uint64_t dropped, resent;
	void *mon;              /* PAIR: the DEALER's disconnect events */
	char pub[CURVE_Z85_LEN + 1]; /* its CURVE public key ("" off) */
	int trust;              /* gwlink_who: -1 not judged yet, 0, 1 */
};

int gwlink_final(const Quorum__ClientReply *r)
{
	return r->body_case != QUORUM__CLIENT_REPLY__BODY_PARTIAL &&
	       r->body_case != QUORUM__CLIENT_REPLY__BODY_STARTED;
}

static void queue_out(gwlink *l, out_msg *m)
{
	uint64_t one = 1;

	m->next = NULL;
	if (l->out_tail)
		l->out_tail->next = m;
	else
		l->out_head = m;
	l->out_tail = m;
	if (write(l->efd, &one, sizeof(one)) < 0) {
		/* the counter cannot overflow at these rates; nothing to do */
	}
}

static out_msg *pack(Quorum__ClientRequest *req)
{
	size_t n;
	out_msg *m;

	req->version = QUORUM__CONSTANTS__PROTOCOL_VERSION;
	n = quorum__client_request__get_packed_size(req);
	if (!(m = malloc(sizeof(*m) + (n ? n : 1))))
		return NULL;
	m->len = quorum__client_request__pack(req, m->data);
	return m;
}

/* Under l->mu: the call of id. */
static gwcall *find(gwlink *l, uint64_t id)
{
	for (gwcall *c = l->calls; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

static void deliver(gwlink *l, Quorum__ClientReply *r)
{
	gwcall *c;
	rep_node *n;

	pthread_mutex_lock(&l->mu);
	c = find(l, r->request_id);
	if (c && !c->final_in && c->again && !c->retried && !c->n_in &&
	    r->status == QUORUM__STATUS__STATUS_CANCELLED &&
	    r->has_retry_after_ms) {
		/* a draining coordinator: the same request once more, to
		 * its successor, after the hint */
		uint32_t ms = r->retry_after_ms < GWLINK_RESEND_MAX_MS
				      ? r->retry_after_ms
				      : GWLINK_RESEND_MAX_MS;

		c->retried = 1;
		c->resend_at = wire_now_ms() + ms;
		pthread_mutex_unlock(&l->mu);
		quorum__client_reply__free_unpacked(r, NULL);
		return;
	}
	if (!c || c->final_in || !(n = malloc(sizeof(*n)))) {
		l->dropped++;
		pthread_mutex_unlock(&l->mu);
		quorum__client_reply__free_unpacked(r, NULL);
		return;
	}
	n->r = r;
	n->next = NULL;
	if (c->tail)
		c->tail->next = n;
	else
		c->head = n;
	c->tail = n;
	c->n_in++;
	c->final_in = gwlink_final(r);
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&l->mu);
}

/* Reads every whole message waiting on the socket. */
static void drain_in(gwlink *l)
{
	for (;;) {
		zmq_msg_t m;
		int more = 0, frames = 0;
		size_t more_sz = sizeof(more);
		Quorum__ClientReply *r = NULL;

		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, l->sock, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return;
		}
		for (;;) {
			if (frames++ == 0)
				r = quorum__client_reply__unpack(
					NULL, zmq_msg_size(&m), zmq_msg_data(&m));
			zmq_getsockopt(l->sock, ZMQ_RCVMORE, &more, &more_sz);
			zmq_msg_close(&m);
			if (!more)
				break;
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, l->sock, 0) < 0) {
				zmq_msg_close(&m);
				break;
			}
		}
		if (!r || frames != 1 ||
		    r->version != QUORUM__CONSTANTS__PROTOCOL_VERSION) {
			if (r && frames == 1 &&
			    r->status == QUORUM__STATUS__STATUS_VERSION_MISMATCH) {
				deliver(l, r); /* the caller reports it */
				continue;
			}
			if (r)
				quorum__client_reply__free_unpacked(r, NULL);
			pthread_mutex_lock(&l->mu);
			l->dropped++;
			pthread_mutex_unlock(&l->mu);
			continue;
		}
		deliver(l, r);
	}
}

/* Sends what is queued; 1 when something is left (no connection yet). */
static int drain_out(gwlink *l)
{
	for (;;) {
		out_msg *m;
		int rc;

		pthread_mutex_lock(&l->mu);
		m = l->out_head;
		pthread_mutex_unlock(&l->mu);
		if (!m)
			return 0;
		do
			rc = zmq_send(l->sock, m->data, m->len, ZMQ_DONTWAIT);
		while (rc < 0 && errno == EINTR);
		if (rc < 0 && errno == EAGAIN)
			return 1;
		/* sent, or refused for good (then the caller's deadline
		 * reports it) */
		pthread_mutex_lock(&l->mu);
		l->out_head = m->next;
		if (!l->out_head)
			l->out_tail = NULL;
		pthread_mutex_unlock(&l->mu);
		free(m);
	}
}

static out_msg *copy_msg(const out_msg *m)
{
	out_msg *c = malloc(sizeof(*c) + (m->len ? m->len : 1));

	if (c) {
		c->len = m->len;
		memcpy(c->data, m->data, m->len);
	}
	return c;
}

/* Under l->mu: a final reply made here (the connection dropped). */
static void give_up(gwcall *c)
{
	Quorum__ClientReply *r = calloc(1, sizeof(*r));
	rep_node *n = malloc(sizeof(*n));

	if (!r || !n) {
		free(r);
		free(n);
		return; /* the caller's deadline ends the wait */
	}
	quorum__client_reply__init(r);
	r->version = QUORUM__CONSTANTS__PROTOCOL_VERSION;
	r->request_id = c->id;
	r->status = QUORUM__STATUS__STATUS_CANCELLED;
	/* freed by quorum__client_reply__free_unpacked: protobuf-c's
	 * default allocator is malloc/free */
	r->error = strdup("the connection to the coordinator was lost");
	r->has_retry_after_ms = 1;
	r->retry_after_ms = GWLINK_LOST_RETRY_MS;
	n->r = r;
	n->next = NULL;
	if (c->tail)
		c->tail->next = n;
	else
		c->head = n;
	c->tail = n;
	c->n_in++;
	c->final_in = 1;
	pthread_cond_signal(&c->cv);
}

/* The connection dropped: Asks with no reply yet go again (queued in the
 * socket until a coordinator is back), the other open calls end. */
static void on_disconnect(gwlink *l)
{
	pthread_mutex_lock(&l->mu);
	for (gwcall *c = l->calls; c; c = c->next) {
		out_msg *m;

		if (c->final_in)
			continue;
		if (c->resend_at) {
			/* drained, its resend waiting for the hint: the
			 * coordinator is gone now, so at once (it waits in
			 * the socket for the successor) */
			c->resend_at = wire_now_ms();
			continue;
		}
		if (c->again && !c->retried && !c->n_in &&
		    (m = copy_msg(c->again))) {
			c->retried = 1;
			c->resend_at = 0;
			l->resent++;
			queue_out(l, m);
		} else {
			give_up(c);
		}
	}
	pthread_mutex_unlock(&l->mu);
}

/* Queues the resends that are due; returns ms to the next one (-1). */
static long resends_due(gwlink *l)
{
	int64_t now = wire_now_ms(), next = -1;

	pthread_mutex_lock(&l->mu);
	for (gwcall *c = l->calls; c; c = c->next) {
		out_msg *m;

		if (!c->resend_at || c->final_in)
			continue;
		if (c->resend_at <= now && (m = copy_msg(c->again))) {
			c->resend_at = 0;
			l->resent++;
			queue_out(l, m);
		} else if (next < 0 || c->resend_at - now < next) {
			next = c->resend_at > now ? c->resend_at - now : 1;
		}
	}
	pthread_mutex_unlock(&l->mu);
	return (long)next;
}

static void *run(void *arg)
{
	gwlink *l = arg;
	int pending = 0;

	for (;;) {
		zmq_pollitem_t it[3] = {{l->sock, 0, ZMQ_POLLIN, 0},
					{NULL, l->efd, ZMQ_POLLIN, 0},
					{l->mon, 0, ZMQ_POLLIN, 0}};
		uint64_t v;
		int stop;
		long wait = resends_due(l);

		pthread_mutex_lock(&l->mu);
		stop = l->stop;
		pthread_mutex_unlock(&l->mu);
		if (stop)
			break;
		if (pending && (wait < 0 || wait > GWLINK_RETRY_MS))
			wait = GWLINK_RETRY_MS;
		if (zmq_poll(it, l->mon ? 3 : 2, wait) < 0 && errno != EINTR)
			break;
		if (it[1].revents & ZMQ_POLLIN &&
		    read(l->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			break;
		/* replies first: those sent before a drop are delivered,
		 * not resent */
		drain_in(l);
		if (l->mon && (it[2].revents & ZMQ_POLLIN) && wire_monitor_dropped(l->mon))
			on_disconnect(l);
		pending = drain_out(l);
	}
	return NULL;
}

int gwlink_open(const char *endpoint, const char *server_key_file,
		const char *client_key_file, gwlink **out)
{
	gwlink *l;
	curve_sock k, *kp = NULL;
	int rc;

	*out = NULL;
	if (!server_key_file != !client_key_file)
		return qerr_fail(QERR_ARG, "CURVE needs both the server key "
				 "and the client key");
	if (server_key_file) {
		if ((rc = curve_sock_client(server_key_file, client_key_file,
					    NULL, &k)))
			return rc;
		kp = &k;
	}
	if (!(l = calloc(1, sizeof(*l))) || !(l->endpoint = strdup(endpoint))) {
		free(l);
		if (kp)
			curve_sock_wipe(kp);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	pthread_mutex_init(&l->mu, NULL);
	l->trust = -1;
	if (kp)
		snprintf(l->pub, sizeof(l->pub), "%s", kp->public_);
	l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->efd < 0 || !(l->ctx = zmq_ctx_new())) {
		rc = qerr_fail(QERR_IO, "gateway link: %s", strerror(errno));
		goto fail;
	}
	rc = wire_connect_curve(l->ctx, ZMQ_DEALER, endpoint,
				CLIENT_MAX_REPLY_BYTES, kp, &l->sock);
	if (kp)
		curve_sock_wipe(kp);
	kp = NULL;
	if (rc)
		goto fail;
	if ((rc = wire_monitor_open(l->ctx, l->sock, &l->mon)))
		goto fail;
	if (pthread_create(&l->th, NULL, run, l)) {
		rc = qerr_fail(QERR_IO, "gateway link: cannot start a thread");
		goto fail;
	}
	l->th_started = 1;
	*out = l;
	return QERR_OK;
fail:
	if (kp)
		curve_sock_wipe(kp);
	gwlink_free(&l);
	return rc;
}

void gwlink_free(gwlink **lp)
{
	gwlink *l;
	uint64_t one = 1;

	if (!lp || !*lp)
		return;
	l = *lp;
	if (l->th_started) {
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_mutex_unlock(&l->mu);
		if (write(l->efd, &one, sizeof(one)) < 0) {
			/* the thread also wakes on its retry timer */
		}
		pthread_join(l->th, NULL);
	}
	while (l->out_head) {
		out_msg *m = l->out_head;

		l->out_head = m->next;
		free(m);
	}
	/* calls still registered belong to their threads; detach them */
	for (gwcall *c = l->calls; c; c = c->next)
		c->l = NULL;
	wire_monitor_close(l->sock, &l->mon);
	wire_close(&l->sock);
	if (l->ctx)
		zmq_ctx_term(l->ctx);
	if (l->efd >= 0)
		close(l->efd);
	pthread_mutex_destroy(&l->mu);
	free(l->endpoint);
	free(l);
	*lp = NULL;
}

gwcall *gwlink_submit(gwlink *l, Quorum__ClientRequest *req)
{
	gwcall *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;
	out_msg *m;

	if (!c)
		return NULL;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->l = l;
	pthread_mutex_lock(&l->mu);
	do
		req->request_id = client_request_id();
	while (find(l, req->request_id));
	c->id = req->request_id;
	if (!(m = pack(req))) {
		pthread_mutex_unlock(&l->mu);
		pthread_cond_destroy(&c->cv);
		free(c);
		return NULL;
	}
	if (req->body_case == QUORUM__CLIENT_REQUEST__BODY_ASK)
		c->again = copy_msg(m); /* NULL: no resend, nothing else */
	c->next = l->calls;
	if (l->calls)
		l->calls->prev = c;
	l->calls = c;
	queue_out(l, m);
	pthread_mutex_unlock(&l->mu);
	return c;
}

uint64_t gwcall_id(const gwcall *c)
{
	return c->id;
}

Quorum__ClientReply *gwcall_next(gwcall *c, int64_t deadline)
{
	gwlink *l = c->l;
	Quorum__ClientReply *r = NULL;

	if (!l)
		return NULL;
	pthread_mutex_lock(&l->mu);
	while (!c->head && !c->final_out && !l->aborted) {
		int64_t left = deadline - wire_now_ms();
		struct timespec ts;

		if (left <= 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += left / 1000;
		ts.tv_nsec += (left % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&c->cv, &l->mu, &ts);
	}
	if (c->head) {
		rep_node *n = c->head;

		c->head = n->next;
		if (!c->head)
			c->tail = NULL;
		r = n->r;
		free(n);
		if (gwlink_final(r))
			c->final_out = 1;
	}
	pthread_mutex_unlock(&l->mu);
	return r;
}

void gwcall_release(gwcall *c)
{
	gwlink *l;

	if (!c)
		return;
	if ((l = c->l)) {
		pthread_mutex_lock(&l->mu);
		if (c->prev)
			c->prev->next = c->next;
		else
			l->calls = c->next;
		if (c->next)
			c->next->prev = c->prev;
		if (!c->final_in) {
			/* the answer is no longer wanted: stop the work */
			Quorum__ClientRequest req = QUORUM__CLIENT_REQUEST__INIT;
			Quorum__CancelAsk ca = QUORUM__CANCEL_ASK__INIT;
			out_msg *m;

			req.request_id = c->id;
			req.body_case = QUORUM__CLIENT_REQUEST__BODY_CANCEL;
			req.cancel = &ca;
			if ((m = pack(&req)))
				queue_out(l, m);
		}
		pthread_mutex_unlock(&l->mu);
	}
	while (c->head) {
		rep_node *n = c->head;

		c->head = n->next;
		quorum__client_reply__free_unpacked(n->r, NULL);
		free(n);
	}
	pthread_cond_destroy(&c->cv);
	free(c->again);
	free(c);
}

void gwlink_abort(gwlink *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->aborted = 1;
	for (gwcall *c = l->calls; c; c = c->next)
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&l->mu);
}

int gwlink_aborted(gwlink *l)
{
	int a;

	pthread_mutex_lock(&l->mu);
	a = l->aborted;
	pthread_mutex_unlock(&l->mu);
	return a;
}

uint64_t gwlink_dropped(gwlink *l)
{
	uint64_t n;

	pthread_mutex_lock(&l->mu);
	n = l->dropped;
	pthread_mutex_unlock(&l->mu);
	return n;
}

uint64_t gwlink_resent(gwlink *l)
{
	uint64_t n;

	pthread_mutex_lock(&l->mu);
	n = l->resent;
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* ---- users ------------------------------------------------------------ */

/* SHA-256 (FIPS 180-4) of a short string: the API key never leaves the
 * gateway, only a prefix of its hash does. */
static void sha256(const uint8_t *msg, size_t len, uint8_t out[32])
{
	static const uint32_t k[64] = {
		0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b,
		0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
		0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7,
		0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
		0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152,
		0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
		0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
		0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
		0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
		0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
		0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
		0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
		0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
	uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	size_t total = ((len + 8) / 64 + 1) * 64;

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
	for (size_t off = 0; off < total; off += 64) {
		uint32_t w[64], a[8];

		for (int i = 0; i < 64; i++) {
			size_t p = off + (size_t)i;
			uint8_t b = p < len ? msg[p] : p == len ? 0x80 : 0;

			/* the bit length in the last 8 bytes */
			if (p >= total - 8)
				b = (uint8_t)((uint64_t)len * 8 >>
					      (8 * (total - 1 - p)));
			if (i % 4 == 0)
				w[i / 4] = 0;
			w[i / 4] |= (uint32_t)b << (24 - 8 * (i % 4));
		}
		for (int i = 16; i < 64; i++) {
			uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^
				      (w[i - 15] >> 3);
			uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^
				      (w[i - 2] >> 10);

			w[i] = w[i - 16] + s0 + w[i - 7] + s1;
		}
		memcpy(a, h, sizeof(a));
		for (int i = 0; i < 64; i++) {
			uint32_t t1 = a[7] +
				      (ROR(a[4], 6) ^ ROR(a[4], 11) ^
				       ROR(a[4], 25)) +
				      ((a[4] & a[5]) ^ (~a[4] & a[6])) + k[i] +
				      w[i];
			uint32_t t2 = (ROR(a[0], 2) ^ ROR(a[0], 13) ^
				       ROR(a[0], 22)) +
				      ((a[0] & a[1]) ^ (a[0] & a[2]) ^
				       (a[1] & a[2]));

			memmove(a + 1, a, 7 * sizeof(a[0]));
			a[4] += t1;
			a[0] = t1 + t2;
		}
		for (int i = 0; i < 8; i++)
			h[i] += a[i];
	}
#undef ROR
	for (int i = 0; i < 32; i++)
		out[i] = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
}

/* An endpoint on this machine: ipc://, inproc://, or tcp:// to a
 * loopback address. */
static int endpoint_local(const char *ep)
{
	return !strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9) ||
	       !strncmp(ep, "tcp://127.", 10) ||
	       !strncmp(ep, "tcp://localhost:", 16) ||
	       !strncmp(ep, "tcp://[::1]:", 12);
}

/* Does the coordinator of c trust this link as a gateway? (its rule:
 * coordinator/scheduler.h) */
static int judge_trust(const gwlink *l, const cfg *c)
{
	const curve_security *sec = &c->security;

	if (!sec->curve)
		return sec->loopback_gateway && endpoint_local(l->endpoint);
	for (size_t i = 0; l->pub[0] && i < sec->n_gateway_keys; i++) {
		char z85[CURVE_Z85_LEN + 1];
		const curve_key *k = &sec->gateway_keys[i];

		if (k->path ? !curve_key_load(k->path, CURVE_PUBLIC, z85) &&
				      !strcmp(z85, l->pub)
			    : !strcmp(k->z85, l->pub))
			return 1;
	}
	return 0;
}

const char *gwlink_who(gwlink *l, const cfg *c, const char *api_key,
		       const struct sockaddr *addr, char *buf, size_t cap)
{
	int trust;

	if (!l || !c || cap < GWLINK_WHO_MAX)
		return NULL;
	pthread_mutex_lock(&l->mu);
	if (l->trust < 0)
		l->trust = judge_trust(l, c);
	trust = l->trust;
	pthread_mutex_unlock(&l->mu);
	if (!trust)
		return NULL;
	if (api_key) {
		uint8_t d[32];

		sha256((const uint8_t *)api_key, strlen(api_key), d);
		snprintf(buf, cap, "key:");
		for (int i = 0; i < 8; i++)
			snprintf(buf + 4 + 2 * i, cap - 4 - 2 * (size_t)i,
				 "%02x", d[i]);
		return buf;
	}
	if (addr && addr->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)addr;

		memcpy(buf, "ip:", 3);
		if (inet_ntop(AF_INET, &a->sin_addr, buf + 3,
			      (socklen_t)(cap - 3)))
			return buf;
	} else if (addr && addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)addr;

		memcpy(buf, "ip:", 3);
		if (inet_ntop(AF_INET6, &a->sin6_addr, buf + 3,
			      (socklen_t)(cap - 3)))
			return buf;
	}
	return NULL;
}

Quorum__ClientReply *gwlink_call(gwlink *l, Quorum__ClientRequest *req,
				 int timeout_ms)
{
	gwcall *c = gwlink_submit(l, req);
	int64_t end = wire_now_ms() + timeout_ms;
	Quorum__ClientReply *r = NULL;

	if (!c)
		return NULL;
	while ((r = gwcall_next(c, end)) && !gwlink_final(r))
		quorum__client_reply__free_unpacked(r, NULL);
	gwcall_release(c);
	return r;
}

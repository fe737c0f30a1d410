/* gwlink — see gwlink.h. */
#include "link.h"

#include <errno.h>
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
	uint64_t dropped;
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

static void *run(void *arg)
{
	gwlink *l = arg;
	int pending = 0;

	for (;;) {
		zmq_pollitem_t it[2] = {{l->sock, 0, ZMQ_POLLIN, 0},
					{NULL, l->efd, ZMQ_POLLIN, 0}};
		uint64_t v;
		int stop;

		pthread_mutex_lock(&l->mu);
		stop = l->stop;
		pthread_mutex_unlock(&l->mu);
		if (stop)
			break;
		if (zmq_poll(it, 2, pending ? GWLINK_RETRY_MS : -1) < 0 &&
		    errno != EINTR)
			break;
		if (it[1].revents & ZMQ_POLLIN &&
		    read(l->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			break;
		drain_in(l);
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
	if (l->sock)
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

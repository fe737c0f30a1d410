/*
 * wire — the cluster's transport (see wire.h): ZeroMQ socket set-up with
 * the message limits, one packed protobuf message per frame (a ROUTER's
 * identity frame first), whole-message receive with a frame cap, the
 * protocol version check and the names of the Status codes. Callers:
 * coordinator/, worker/, tools/ (clients), the gateway, tests.
 */
#include "net/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "proto/quorum.pb-c.h"
#include "qerr.h"

_Static_assert(WIRE_VERSION == QUORUM__CONSTANTS__PROTOCOL_VERSION,
	       "wire.h and quorum.proto disagree on the protocol version");

static int setup(void *s, int type, int64_t max_bytes)
{
	int zero = 0, one = 1;

	if (max_bytes <= 0)
		max_bytes = WIRE_DEFAULT_MAX_BYTES;
	if (zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_bytes, sizeof(max_bytes)))
		return -1;
	if (type == ZMQ_ROUTER &&
	    zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof(one)))
		return -1;
	return 0;
}

/* The ipc:// paths this process has claimed (ipc_claim); their lock
 * files stay open, and locked, until it ends. */
static pthread_mutex_t claim_mu = PTHREAD_MUTEX_INITIALIZER;
static char **claimed;
static size_t n_claimed;
static pid_t claimer; /* the process the list is of (not a fork's child) */

/* An ipc:// endpoint's path made this process's to bind. ZeroMQ's bind
 * takes a socket file's path over from a live listener (which goes on
 * running, unreachable), where a tcp port in use is refused: so a lock
 * beside the path (PATH.lock, flock, held until the process ends) says
 * who has it, and another process's bind of a held path fails as a tcp
 * port in use does (EADDRINUSE). Rebinding a path this process holds is
 * its own business; an abstract name ("ipc://@name") has no file. */
static int ipc_claim(const char *endpoint)
{
	const char *path = endpoint + 6;
	char lock[PATH_MAX + 8], **grown;
	int fd, err, rc = 0;

	if (!*path || *path == '@')
		return 0;
	if (snprintf(lock, sizeof(lock), "%s.lock", path) >= (int)sizeof(lock))
		return qerr_fail(QERR_ARG, "bind %s: path too long", endpoint);
	pthread_mutex_lock(&claim_mu);
	if (claimer != getpid()) {
		/* a forked child holds none of its parent's paths (their
		 * locks are the parent's open files) */
		claimer = getpid();
		n_claimed = 0;
	}
	for (size_t i = 0; i < n_claimed; i++)
		if (!strcmp(claimed[i], path))
			goto out;
	if ((fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		err = errno;
		rc = qerr_fail(QERR_IO, "bind %s: cannot open %s: %s",
			       endpoint, lock, strerror(err));
		errno = err;
		goto out;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		err = errno == EWOULDBLOCK ? EADDRINUSE : errno;
		close(fd);
		rc = qerr_fail(QERR_IO, "bind %s: %s (another process holds "
			       "%s)", endpoint, strerror(err), lock);
		errno = err;
		goto out;
	}
	if (!(grown = realloc(claimed, (n_claimed + 1) * sizeof(*claimed))) ||
	    !(grown[n_claimed] = strdup(path))) {
		if (grown)
			claimed = grown;
		close(fd);
		rc = qerr_fail(QERR_NOMEM, "bind %s: out of memory", endpoint);
		errno = ENOMEM;
		goto out;
	}
	claimed = grown;
	n_claimed++;
	/* fd stays open: the lock is the process's until it ends */
out:
	pthread_mutex_unlock(&claim_mu);
	return rc;
}

static int open_sock(void *ctx, int type, const char *endpoint,
		     int64_t max_bytes, int bind, const curve_sock *k,
		     void **out)
{
	void *s;
	int err;

	*out = NULL;
	if (!ctx || !endpoint)
		return qerr_fail(QERR_ARG, "wire: no context or endpoint");
	if (bind && !strncmp(endpoint, "ipc://", 6) &&
	    (err = ipc_claim(endpoint)))
		return err; /* errno: EADDRINUSE when another has it */
	if (!(s = zmq_socket(ctx, type)))
		return qerr_fail(QERR_IO, "zmq_socket: %s",
				 zmq_strerror(zmq_errno()));
	if (curve_sock_apply(s, k)) {
		zmq_close(s);
		return QERR_IO;
	}
	if (setup(s, type, max_bytes) ||
	    (bind ? zmq_bind(s, endpoint) : zmq_connect(s, endpoint))) {
		err = zmq_errno();
		zmq_close(s);
		errno = err;
		return qerr_fail(QERR_IO, "%s %s: %s", bind ? "bind" : "connect",
				 endpoint, zmq_strerror(err));
	}
	*out = s;
	return QERR_OK;
}

int wire_bind(void *ctx, int type, const char *endpoint, int64_t max_bytes,
	      void **out)
{
	return open_sock(ctx, type, endpoint, max_bytes, 1, NULL, out);
}

int wire_bind_curve(void *ctx, int type, const char *endpoint,
		    int64_t max_bytes, const curve_sock *k, void **out)
{
	return open_sock(ctx, type, endpoint, max_bytes, 1, k, out);
}

int wire_connect(void *ctx, int type, const char *endpoint,
		 int64_t max_bytes, void **out)
{
	return open_sock(ctx, type, endpoint, max_bytes, 0, NULL, out);
}

int wire_connect_curve(void *ctx, int type, const char *endpoint,
		       int64_t max_bytes, const curve_sock *k, void **out)
{
	return open_sock(ctx, type, endpoint, max_bytes, 0, k, out);
}

void wire_close(void **sock)
{
	if (sock && *sock) {
		zmq_close(*sock);
		*sock = NULL;
	}
}

int wire_monitor_open(void *ctx, void *sock, void **mon)
{
	char ep[64];
	int zero = 0;

	/* an inproc name of this socket's own */
	snprintf(ep, sizeof(ep), "inproc://wire-mon-%p", sock);
	*mon = NULL;
	if (zmq_socket_monitor(sock, ep, ZMQ_EVENT_DISCONNECTED) ||
	    !(*mon = zmq_socket(ctx, ZMQ_PAIR)) ||
	    zmq_setsockopt(*mon, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_connect(*mon, ep)) {
		int rc = qerr_fail(QERR_IO, "zmq monitor: %s",
				   zmq_strerror(zmq_errno()));

		wire_monitor_close(sock, mon);
		return rc;
	}
	return QERR_OK;
}

int wire_monitor_dropped(void *mon)
{
	int dropped = 0;

	for (;;) {
		zmq_msg_t m;
		int more = 0;
		uint16_t ev = 0;
		size_t more_sz = sizeof(more);

		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, mon, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return dropped;
		}
		/* an event is [16-bit event, 32-bit value][endpoint] */
		if (zmq_msg_size(&m) >= 2)
			memcpy(&ev, zmq_msg_data(&m), 2);
		dropped |= ev == ZMQ_EVENT_DISCONNECTED;
		for (;;) {
			zmq_getsockopt(mon, ZMQ_RCVMORE, &more, &more_sz);
			zmq_msg_close(&m);
			if (!more)
				break;
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, mon, 0) < 0) {
				zmq_msg_close(&m);
				break;
			}
		}
	}
}

void wire_monitor_close(void *sock, void **mon)
{
	if (mon && *mon) {
		zmq_close(*mon);
		*mon = NULL;
	}
	if (sock)
		zmq_socket_monitor(sock, NULL, 0);
}

static void free_buf(void *data, void *hint)
{
	(void)hint;
	free(data);
}

int wire_send(void *sock, const void *id, size_t id_len,
	      const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n ? n : 1);
	zmq_msg_t msg;
	int flags = id_len ? ZMQ_DONTWAIT : 0;

	if (!buf)
		return qerr_fail(QERR_NOMEM, "wire: %zu bytes", n);
	protobuf_c_message_pack(m, buf);
	if (id_len && zmq_send(sock, id, id_len, ZMQ_SNDMORE | flags) < 0) {
		free(buf);
		return qerr_fail(QERR_IO, "wire send: %s",
				 zmq_strerror(zmq_errno()));
	}
	if (zmq_msg_init_data(&msg, buf, n, free_buf, NULL)) {
		free(buf);
		return qerr_fail(QERR_NOMEM, "wire: zmq_msg_init_data");
	}
	if (zmq_msg_send(&msg, sock, flags) < 0) {
		int err = zmq_errno();

		zmq_msg_close(&msg);
		return qerr_fail(QERR_IO, "wire send: %s", zmq_strerror(err));
	}
	return QERR_OK;
}

void wire_msg_close(wire_msg *m)
{
	if (m && m->has_frame) {
		zmq_msg_close(&m->frame);
		m->has_frame = 0;
	}
	if (m) {
		m->data = NULL;
		m->len = 0;
	}
}

int wire_recv(void *sock, int router, int dontwait, size_t max_bytes,
	      wire_msg *out)
{
	int more = 1, bad = 0;

	out->id_len = 0;
	out->data = NULL;
	out->len = 0;
	out->frames = 0;
	out->has_frame = 0;
	out->user[0] = '\0';
	out->peer[0] = '\0';
	out->too_big = 0;
	out->head_len = 0;
	while (more) {
		zmq_msg_t f;
		int first = out->frames == 0;

		zmq_msg_init(&f);
		if (zmq_msg_recv(&f, sock,
				 first && dontwait ? ZMQ_DONTWAIT : 0) < 0) {
			int err = zmq_errno();

			zmq_msg_close(&f);
			if (first && err == EAGAIN)
				return QERR_FULL;
			wire_msg_close(out);
			return qerr_fail(QERR_IO, "wire recv: %s",
					 zmq_strerror(err));
		}
		more = zmq_msg_more(&f);
		out->frames++;
		if (router && first) {
			size_t n = zmq_msg_size(&f);

			if (n > WIRE_ID_MAX)
				n = WIRE_ID_MAX;
			memcpy(out->id, zmq_msg_data(&f), n);
			out->id_len = n;
			zmq_msg_close(&f);
		} else if (!out->has_frame && !bad &&
			   out->frames <= WIRE_MAX_FRAMES) {
			out->frame = f;
			out->has_frame = 1;
		} else {
			bad = 1;
			zmq_msg_close(&f);
		}
	}
	if (bad || !out->has_frame || out->frames != (router ? 2 : 1)) {
		wire_msg_close(out);
		return qerr_fail(QERR_FORMAT, "message of %d frames refused",
				 out->frames);
	}
	out->data = zmq_msg_data(&out->frame);
	out->len = zmq_msg_size(&out->frame);
	{
		const char *u = zmq_msg_gets(&out->frame, "User-Id");

		if (u && strlen(u) < sizeof(out->user))
			strcpy(out->user, u);
		u = zmq_msg_gets(&out->frame, "Peer-Address");
		if (u && strlen(u) < sizeof(out->peer))
			strcpy(out->peer, u);
	}
	if (max_bytes && out->len > max_bytes) {
		size_t n = out->len;

		out->too_big = n;
		out->head_len = n < sizeof(out->head) ? n : sizeof(out->head);
		memcpy(out->head, out->data, out->head_len);
		wire_msg_close(out);
		return qerr_fail(QERR_FORMAT, "frame of %zu bytes refused", n);
	}
	return QERR_OK;
}

const char *wire_status_name(int status)
{
	static const char *const names[] = {
		"OK", "BAD_REQUEST", "TOO_LONG", "BUSY", "NO_CAPACITY",
		"WORKER_LOST", "INTERNAL", "VERSION_MISMATCH", "TIMEOUT",
		"CANCELLED",
	};
	_Static_assert(sizeof(names) / sizeof(names[0]) ==
			       QUORUM__STATUS__STATUS_CANCELLED + 1,
		       "a Status without a name");

	if (status < 0 || (size_t)status >= sizeof(names) / sizeof(names[0]))
		return "UNKNOWN";
	return names[status];
}

int wire_status_of_qerr(int qerr)
{
	switch (qerr) {
	case QERR_OK: return QUORUM__STATUS__STATUS_OK;
	case QERR_FULL: return QUORUM__STATUS__STATUS_NO_CAPACITY;
	case QERR_TOOLONG: return QUORUM__STATUS__STATUS_TOO_LONG;
	case QERR_CANCELLED: return QUORUM__STATUS__STATUS_CANCELLED;
	case QERR_ARG:
	case QERR_RANGE:
	case QERR_FORMAT:
	case QERR_MISSING: return QUORUM__STATUS__STATUS_BAD_REQUEST;
	default: return QUORUM__STATUS__STATUS_INTERNAL;
	}
}

int64_t wire_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int wire_name_ok(const char *s, size_t max)
{
	size_t n = 0;

	if (!s)
		return 0;
	for (; s[n]; n++) {
		char ch = s[n];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' ||
		      ch == '.'))
			return 0;
	}
	return n >= 1 && n < max;
}

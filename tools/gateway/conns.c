/*
 * conns — connection records and the deadline sweeper (conns.h). Owns
 * the records (a list under one lock) and the sweeper thread.
 */
#include "conns.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "net/wire.h"

enum { PHASE_HEADERS, PHASE_BODY, PHASE_SERVING };

typedef struct conn_rec {
	struct conn_rec *next, *prev;
	int fd;
	int phase;
	int64_t since;           /* the phase's start (wire_now_ms) */
	int closed;              /* shut down by the sweeper */
	int over;                /* CONNS_OVER_*: refused in words */
	int family;              /* the client's address (no port) */
	unsigned char addr[16];
} conn_rec;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static conn_rec *recs;
static int stopping, started, hdr_ms, body_ms, cap_all, cap_ip;
static int admitted;             /* connections open and not over */
static uint64_t dropped, refused[3];
static pthread_t th;

/* The client's address of mc into c (family 0: unknown). */
static void client_addr(struct MHD_Connection *mc, conn_rec *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	if (sa && sa->sa_family == AF_INET) {
		c->family = AF_INET;
		memcpy(c->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		c->family = AF_INET6;
		memcpy(c->addr, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		       16);
	}
}

/* Whether c, new, goes over a cap (under mu). */
static int over_cap(const conn_rec *c)
{
	int same = 0;

	if (admitted >= cap_all)
		return CONNS_OVER_ALL;
	if (!c->family)
		return CONNS_OK;
	for (const conn_rec *o = recs; o; o = o->next)
		if (!o->over && o->family == c->family &&
		    !memcmp(o->addr, c->addr, sizeof(o->addr)))
			same++;
	return same >= cap_ip ? CONNS_OVER_IP : CONNS_OK;
}

void conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
		  enum MHD_ConnectionNotificationCode code)
{
	conn_rec *c = *socket_context;

	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			mc, MHD_CONNECTION_INFO_CONNECTION_FD);

		if (!ci || !(c = calloc(1, sizeof(*c))))
			return; /* no deadline for it: out of memory */
		c->fd = ci->connect_fd;
		c->since = wire_now_ms();
		client_addr(mc, c);
		pthread_mutex_lock(&mu);
		if (cap_all && (c->over = over_cap(c)))
			refused[c->over]++;
		else
			admitted++;
		c->next = recs;
		if (recs)
			recs->prev = c;
		recs = c;
		pthread_mutex_unlock(&mu);
		*socket_context = c;
		return;
	}
	if (!c)
		return;
	pthread_mutex_lock(&mu);
	if (!c->over)
		admitted--;
	if (c->prev)
		c->prev->next = c->next;
	else
		recs = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&mu);
	free(c);
	*socket_context = NULL;
}

static void set_phase(struct MHD_Connection *mc, int phase)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	conn_rec *c = ci ? ci->socket_context : NULL;

	if (!c)
		return;
	pthread_mutex_lock(&mu);
	c->phase = phase;
	c->since = wire_now_ms();
	pthread_mutex_unlock(&mu);
}

int conns_over(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	const conn_rec *c = ci ? ci->socket_context : NULL;

	/* set once at the start, before any request: no lock needed */
	return c ? c->over : CONNS_OK;
}

void conns_over_served(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	const conn_rec *c = ci ? ci->socket_context : NULL;

	if (!c || !c->over)
		return;
	pthread_mutex_lock(&mu);
	refused[c->over]--;
	pthread_mutex_unlock(&mu);
}

void conns_headers_in(struct MHD_Connection *mc)
{
	set_phase(mc, PHASE_BODY);
}

void conns_body_in(struct MHD_Connection *mc)
{
	set_phase(mc, PHASE_SERVING);
}

void conns_request_done(struct MHD_Connection *mc)
{
	set_phase(mc, PHASE_HEADERS);
}

static void *run(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (!stopping) {
		struct timespec ts;
		int64_t now = wire_now_ms();

		for (conn_rec *c = recs; c; c = c->next) {
			int64_t lim = c->phase == PHASE_HEADERS ? hdr_ms
				      : c->phase == PHASE_BODY ? body_ms : 0;

			if (lim && !c->closed && now - c->since > lim) {
				shutdown(c->fd, SHUT_RDWR);
				c->closed = 1;
				dropped++;
			}
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += CONNS_TICK_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&cv, &mu, &ts);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

int conns_start(int header_timeout_ms, int body_timeout_ms,
		int max_connections, int max_per_ip)
{
	hdr_ms = header_timeout_ms;
	body_ms = body_timeout_ms;
	cap_all = max_connections;
	cap_ip = max_per_ip;
	stopping = 0;
	if (pthread_create(&th, NULL, run, NULL))
		return -1;
	started = 1;
	return 0;
}

void conns_stop(void)
{
	if (!started)
		return;
	pthread_mutex_lock(&mu);
	stopping = 1;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
	started = 0;
}

uint64_t conns_dropped(void)
{
	uint64_t n;

	pthread_mutex_lock(&mu);
	n = dropped;
	pthread_mutex_unlock(&mu);
	return n;
}

uint64_t conns_refused(int why)
{
	uint64_t n;

	if (why != CONNS_OVER_IP && why != CONNS_OVER_ALL)
		return 0;
	pthread_mutex_lock(&mu);
	n = refused[why];
	pthread_mutex_unlock(&mu);
	return n;
}

int conns_admitted(void)
{
	int n;

	pthread_mutex_lock(&mu);
	n = admitted;
	pthread_mutex_unlock(&mu);
	return n;
}

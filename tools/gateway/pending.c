/*
 * pending — parked requests and the thread that resumes them
 * (pending.h). Owns the list of parked waits (under its lock); a wait
 * itself belongs to its request.
 */
#include "pending.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "gateway.h"
#include "net/wire.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER; /* something parked */
static pending *parked;
static size_t n_parked;
static int stopping, started;
static pthread_t th;

void pending_watch(pending *p, struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);

	p->mc = mc;
	p->fd = ci ? ci->connect_fd : -1;
}

void pending_park(pending *p)
{
	MHD_suspend_connection(p->mc);
	p->why = PENDING_WAITING;
	p->rep = NULL;
	pthread_mutex_lock(&mu);
	if (stopping) {
		pthread_mutex_unlock(&mu);
		p->why = PENDING_DEADLINE;
		MHD_resume_connection(p->mc);
		return;
	}
	p->next = parked;
	parked = p;
	if (!n_parked++)
		pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

/* Under mu: unlinks p and puts it on *done. */
static void settle(pending **link, pending *p, int why, pending **done)
{
	*link = p->next;
	n_parked--;
	p->why = why;
	p->next = *done;
	*done = p;
}

/* 1 when the client of fd left (see pending.h). */
static int gone(const struct pollfd *f)
{
	char c;

	if (f->revents & (POLLHUP | POLLERR | POLLNVAL))
		return 1;
	if (!(f->revents & POLLRDHUP))
		return 0;
	/* pipelined bytes may come before the end of file */
	return recv(f->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static void *run(void *arg)
{
	struct pollfd *fds = NULL;
	pending **who = NULL;
	size_t cap = 0;

	(void)arg;
	for (;;) {
		pending *done = NULL, **link, *p;
		size_t n = 0;
		int64_t now = wire_now_ms();
		int stop;

		pthread_mutex_lock(&mu);
		while (!n_parked && !stopping) /* idle: no ticking */
			pthread_cond_wait(&cv, &mu);
		now = wire_now_ms();
		stop = stopping;
		for (link = &parked; (p = *link);) {
			Quorum__ClientReply *r =
				stop ? NULL : gwcall_next(p->call, 0);

			if (r) {
				p->rep = r;
				settle(link, p, PENDING_REPLY, &done);
			} else if (stop || now >= p->deadline ||
				   gwlink_aborted(gw.l)) {
				settle(link, p, PENDING_DEADLINE, &done);
			} else {
				link = &p->next;
			}
		}
		if (n_parked > cap) {
			size_t nc = n_parked * 2;
			struct pollfd *f = realloc(fds, nc * sizeof(*f));
			pending **w = f ? realloc(who, nc * sizeof(*w)) : NULL;

			if (f)
				fds = f;
			if (w) {
				who = w;
				cap = nc;
			}
		}
		for (p = parked; p && n < cap; p = p->next)
			if (p->fd >= 0) {
				fds[n].fd = p->fd;
				fds[n].events = POLLRDHUP;
				fds[n].revents = 0;
				who[n++] = p;
			}
		pthread_mutex_unlock(&mu);
		/* resumed outside the lock: the handler may park again */
		while ((p = done)) {
			done = p->next;
			MHD_resume_connection(p->mc);
		}
		if (stop)
			break;
		if (poll(fds, n, PENDING_TICK_MS) <= 0)
			continue;
		pthread_mutex_lock(&mu);
		for (size_t i = 0; i < n; i++) {
			if (!gone(&fds[i]))
				continue;
			/* still parked? (a reply may have resumed it) */
			for (link = &parked; (p = *link); link = &p->next)
				if (p == who[i]) {
					settle(link, p, PENDING_GONE, &done);
					break;
				}
		}
		pthread_mutex_unlock(&mu);
		while ((p = done)) {
			done = p->next;
			MHD_resume_connection(p->mc);
		}
	}
	free(fds);
	free(who);
	return NULL;
}

int pending_start(void)
{
	stopping = 0;
	if (pthread_create(&th, NULL, run, NULL))
		return -1;
	started = 1;
	return 0;
}

void pending_stop(void)
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

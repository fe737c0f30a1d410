/*
 * pending — requests parked while they wait for the coordinator, so that
 * a waiting request holds no thread of the daemon's pool: the handler
 * suspends its connection (MHD_suspend_connection) and parks the call
 * here; one thread (started by cmd_serve) takes each call's next reply
 * as it comes, notices the deadline, the gateway stopping, and a client
 * that hung up, and resumes the connection, whose handler then reads
 * why. Called by completions.c (a reply awaited) and sse.c (a stream
 * waiting for its next part).
 *
 * The link (gwlink.h) has no readiness callback, so the thread checks the
 * parked calls every PENDING_TICK_MS while any is parked (a poll(2) on
 * the parked sockets is its sleep: a hang-up wakes it at once; with none
 * parked it sleeps until one is); a reply waits at most that long. A hang-up: the socket's error, hang-up or end of file — a client
 * that half-closes its socket after its request is taken as gone (as
 * nginx takes it: 499), and libmicrohttpd itself ends such a request
 * once it reads that end of file.
 */
#ifndef QUORUM_GW_PENDING_H
#define QUORUM_GW_PENDING_H

#include <microhttpd.h>
#include <stdint.h>

#include "gwlink.h"

#define PENDING_TICK_MS 2

enum { PENDING_WAITING, PENDING_REPLY, PENDING_DEADLINE, PENDING_GONE };

/* One parked wait; embedded in its request's state. */
typedef struct pending {
	struct pending *next;
	struct MHD_Connection *mc;
	gwcall *call;
	int64_t deadline;        /* wire_now_ms() clock */
	int fd;                  /* the client's socket; -1: not watched */
	int why;                 /* PENDING_*: why it was resumed */
	Quorum__ClientReply *rep; /* PENDING_REPLY: taken by the handler */
} pending;

/* Starts / stops the thread (stop: every parked wait resumed with
 * PENDING_DEADLINE first). 0 or -1. */
int pending_start(void);
void pending_stop(void);

/* Suspends mc and parks p (its call, deadline, fd set by the caller)
 * until a reply, the deadline or a hang-up. Call from the daemon's
 * access handler or content reader only, then return (MHD_YES or 0). */
void pending_park(pending *p);

/* Watches mc's socket while p is parked. */
void pending_watch(pending *p, struct MHD_Connection *mc);

#endif

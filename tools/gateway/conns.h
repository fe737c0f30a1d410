/*
 * conns — the gateway's connections and their deadlines: a record per
 * connection (libmicrohttpd's notify-connection callback makes and frees
 * it), and one thread that closes a connection whose request line and
 * headers have not all arrived http.header_timeout_ms after its accept
 * (or after its previous request ended: an idle keep-alive connection
 * counts as waiting for headers), or whose body has not arrived
 * http.body_timeout_ms after its headers. libmicrohttpd's own
 * connection timeout is an idle timeout: a client sending a byte now and
 * then would hold its slot forever. Called by serve.c (the callbacks,
 * start and stop).
 *
 * Closing: shutdown(2) of the socket from the sweeper, under the lock
 * the close notification takes, so the socket is still the
 * connection's; the daemon then sees it end and cleans it up.
 *
 * Caps: a connection that arrives while http.max_connections admitted
 * connections are open, or http.max_connections_per_ip from its address,
 * is marked over (conns_over); its request gets a reply in words (serve.c:
 * 503 or 429 with Retry-After, then the connection is closed) instead of
 * the silent close libmicrohttpd's own limits give, which serve.c keeps
 * as a backstop above the caps (CONNS_BACKSTOP) so that a flood cannot
 * exhaust the process's descriptors. A probe or a scrape is answered
 * past them all the same (serve.c), on a connection then closed.
 */
#ifndef QUORUM_GW_CONNS_H
#define QUORUM_GW_CONNS_H

#include <microhttpd.h>
#include <stdint.h>

#define CONNS_TICK_MS 100

enum { CONNS_OK = 0, CONNS_OVER_IP, CONNS_OVER_ALL };

/* libmicrohttpd's limit above a cap of cap connections: room for the
 * connections refused in words while they are answered. */
#define CONNS_BACKSTOP(cap) ((cap) + (cap) / 4 + 64)

/* MHD_OPTION_NOTIFY_CONNECTION's callback. */
void conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
		  enum MHD_ConnectionNotificationCode code);
/* A request's headers are in (its body deadline starts). */
void conns_headers_in(struct MHD_Connection *mc);
/* Its body is in (no deadline until the request ends). */
void conns_body_in(struct MHD_Connection *mc);
/* The request ended (the connection waits for the next one's headers). */
void conns_request_done(struct MHD_Connection *mc);

/* CONNS_OK, or why the connection is over a cap (from its start). */
int conns_over(struct MHD_Connection *mc);
/* The connection, over a cap, has its one request served after all (a
 * probe or a scrape: serve.c) and closed: not counted as refused. */
void conns_over_served(struct MHD_Connection *mc);

/* Starts / stops the sweeper; the caps. 0 or -1. */
int conns_start(int header_timeout_ms, int body_timeout_ms,
		int max_connections, int max_per_ip);
void conns_stop(void);
/* Connections closed for a deadline so far. */
uint64_t conns_dropped(void);
/* Connections open and admitted (not over a cap) now. */
int conns_admitted(void);
/* Connections refused (answered in words) for a cap so far: per address
 * (CONNS_OVER_IP) or in all (CONNS_OVER_ALL). */
uint64_t conns_refused(int why);

#endif

/*
 * proc — the worker processes a coordinator starts on its own host
 * (workers.local) and keeps alive.
 *
 * implements: posix_spawn of `worker --config C --id local-I --host H`
 * (the worker binary next to the coordinator's own executable), reaping
 * with waitpid(WNOHANG) from the poll loop, restarts with a doubling
 * backoff (heartbeat.reconnect_min_ms .. reconnect_max_ms), and a stop
 * that sends SIGTERM, waits, then SIGKILLs what is left.
 * posix_spawn, not fork: the coordinator's ZeroMQ context is never
 * duplicated into a child.
 */
#ifndef QUORUM_PROC_H
#define QUORUM_PROC_H

typedef struct proc_set proc_set;

/* n workers (0 is fine: nothing to supervise). Strings are copied. */
int proc_new(const char *worker_path, const char *config, const char *host,
	     int n, int backoff_min_ms, int backoff_max_ms, proc_set **out);
/* Reaps children that exited and (re)starts those that are due, except
 * one that exited with WIRE_WORKER_EXIT_MODEL (its message on stderr:
 * the model file cannot be served, so restarting cannot help). -1 when
 * every one of them has so exited, else 0. */
int proc_tick(proc_set *p);
/* SIGTERM to all, wait up to wait_ms, then SIGKILL and reap; killed (may
 * be NULL) is told each worker id killed so (its pool left behind). */
void proc_stop_all(proc_set *p, int wait_ms,
		   void (*killed)(void *ctx, const char *id), void *ctx);
void proc_free(proc_set **p);

#endif

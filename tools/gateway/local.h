/*
 * local — the cluster `quorum serve --model FILE` starts on this machine:
 * a coordinator (the program beside this one) with a generated config
 * and its local workers, stopped with the gateway, nothing left behind
 * (processes, shared-memory pools, the private directory).
 */
#ifndef QUORUM_GW_LOCAL_H
#define QUORUM_GW_LOCAL_H

typedef struct gw_local gw_local;

/* Writes the config (model, workers local workers of threads threads
 * each, the gateway at listen) into a private directory and starts the
 * coordinator with it. QERR_OK and *out; else a qerr code with
 * qerr_detail() (nothing left running). */
int local_start(const char *model, int workers, int threads,
		const char *listen, gw_local **out);

/* The generated config's path (the gateway reads it too). */
const char *local_config(const gw_local *l);

/* 1 while the coordinator runs (reaps it once it ended). */
int local_alive(gw_local *l);

/* Waits until the coordinator listens on its client endpoint (it took
 * the config and the model) or ends: 0, or QERR_IO saying how it ended
 * (its own message is on stderr). */
int local_wait_ready(gw_local *l);

/* How it ended ("exit status 1", "killed by signal 9"; "running"); a
 * static buffer. */
const char *local_status(const gw_local *l);

/* SIGTERM to the coordinator (SIGKILL after 30 s), waited for; the
 * directory removed; *l freed and NULL. NULL ok. */
void local_stop(gw_local **l);

#endif

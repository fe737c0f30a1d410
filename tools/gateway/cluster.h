/*
 * cluster — what the gateway asks the coordinator about the cluster: the
 * ClusterStatus query (over the link, bounded by a 2 s timeout) and the
 * endpoints answered from it: GET /health (200 when a worker is
 * registered, else 503), GET /v1/models (the model, its fingerprint;
 * not its path) and GET /v1/models/{id} (the model by its id or an
 * alias, else 404 model_not_found); which model names are served.
 * Called by serve.c's routing; metrics.c asks for the status too,
 * completions.c for the names.
 */
#ifndef QUORUM_GW_CLUSTER_H
#define QUORUM_GW_CLUSTER_H

#include <microhttpd.h>

#include "gateway.h"

/* The coordinator's ClusterStatus (an OK reply with its cluster body;
 * the caller frees it), or NULL (not reachable in time). Blocks up to
 * 2 s: for a handler, cluster_status_wait. */
Quorum__ClientReply *cluster_status(void);
/* The same for the handler of cn without holding a thread: 0 when the
 * request was parked (return MHD_YES: the handler is called again once
 * the reply came or 2 s passed), 1 with *out (the reply or NULL). */
int cluster_status_wait(struct MHD_Connection *mc, gwconn *cn,
			Quorum__ClientReply **out);
/* Frees cn's status query (serve.c's on_done). */
void cluster_free(gwconn *cn);

enum MHD_Result cluster_health(struct MHD_Connection *mc, gwconn *cn);
/* GET /v1/models, or /v1/models/{cn->model_arg} */
enum MHD_Result cluster_models(struct MHD_Connection *mc, gwconn *cn);

/* 1 when name is the served model's id or one of http.model_aliases. */
int cluster_model_known(const char *name);

#endif

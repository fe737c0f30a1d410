/*
 * cluster — what the gateway asks the coordinator about the cluster: the
 * ClusterStatus query (over the link, bounded by a 2 s timeout) and the
 * endpoints answered from it: GET /health (200 when a worker is
 * registered, else 503) and GET /v1/models (the model, its fingerprint).
 * Called by serve.c's routing; metrics.c asks for the status too.
 */
#ifndef QUORUM_GW_CLUSTER_H
#define QUORUM_GW_CLUSTER_H

#include <microhttpd.h>

#include "gateway.h"

/* The coordinator's ClusterStatus (an OK reply with its cluster body;
 * the caller frees it), or NULL (not reachable in time). */
Quorum__ClientReply *cluster_status(void);

enum MHD_Result cluster_health(struct MHD_Connection *mc, gwconn *cn);
enum MHD_Result cluster_models(struct MHD_Connection *mc, gwconn *cn);

#endif

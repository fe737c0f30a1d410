/*
 * cluster — the coordinator's status and the endpoints answered from it
 * (cluster.h). Holds no state beyond a request's parked status query
 * (owned by its gwconn).
 */
#include "cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "openai.h"
#include "pending.h"
#include "net/wire.h"

#define GW_STATUS_TIMEOUT_MS 2000

/* An OK reply with its cluster body (its fingerprint noted), else NULL
 * (r freed). */
static Quorum__ClientReply *status_ok(Quorum__ClientReply *r)
{
	if (r && (r->status != QUORUM__STATUS__STATUS_OK ||
		  r->body_case != QUORUM__CLIENT_REPLY__BODY_CLUSTER)) {
		quorum__client_reply__free_unpacked(r, NULL);
		r = NULL;
	}
	if (r && r->cluster->has_model_fingerprint)
		openai_set_fingerprint(r->cluster->model_fingerprint);
	return r;
}

Quorum__ClientReply *cluster_status(void)
{
	Quorum__ClientRequest req = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__StatusQuery q = QUORUM__STATUS_QUERY__INIT;
	Quorum__ClientReply *r;

	req.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	req.status = &q;
	r = gwlink_call(gw.l, &req, GW_STATUS_TIMEOUT_MS);
	return status_ok(r);
}

/* A status query of a request, parked while the coordinator answers. */
struct gwstatus {
	gwcall *call;
	pending p;
};

int cluster_status_wait(struct MHD_Connection *mc, gwconn *cn,
			Quorum__ClientReply **out)
{
	struct gwstatus *q = cn->sq;

	if (!q) {
		Quorum__ClientRequest req = QUORUM__CLIENT_REQUEST__INIT;
		Quorum__StatusQuery sq = QUORUM__STATUS_QUERY__INIT;

		req.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
		req.status = &sq;
		if (!(q = calloc(1, sizeof(*q))) ||
		    !(q->call = gwlink_submit(gw.l, &req))) {
			free(q);
			*out = NULL;
			return 1;
		}
		cn->sq = q;
		pending_watch(&q->p, mc);
		q->p.call = q->call;
		q->p.deadline = wire_now_ms() + GW_STATUS_TIMEOUT_MS;
		pending_park(&q->p);
		return 0;
	}
	*out = status_ok(q->p.rep);
	q->p.rep = NULL;
	gwcall_release(q->call);
	q->call = NULL;
	return 1;
}

void cluster_free(gwconn *cn)
{
	struct gwstatus *q = cn->sq;

	if (!q)
		return;
	gwcall_release(q->call);
	if (q->p.rep)
		quorum__client_reply__free_unpacked(q->p.rep, NULL);
	free(q);
	cn->sq = NULL;
}

int cluster_model_known(const char *name)
{
	const char *a = gw.c->http.model_aliases;
	size_t n = strlen(name);

	if (!strcmp(name, gw.model_id))
		return 1;
	while (a && *a) {
		size_t k;

		a += strspn(a, ", \t");
		k = strcspn(a, ", \t");
		if (k && k == n && !memcmp(a, name, n))
			return 1;
		a += k;
	}
	return 0;
}

enum MHD_Result cluster_health(struct MHD_Connection *mc, gwconn *cn)
{
	Quorum__ClientReply *r;
	size_t n;
	json_t *o;

	if (!cluster_status_wait(mc, cn, &r))
		return MHD_YES;
	n = r ? r->cluster->n_workers : 0;
	o = json_pack("{s:s, s:b, s:I}", "status", n ? "ok" : "unavailable",
		      "coordinator", r != NULL, "workers", (json_int_t)n);
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	return http_send_json(mc, cn, n ? 200 : 503, o);
}

enum MHD_Result cluster_models(struct MHD_Connection *mc, gwconn *cn)
{
	Quorum__ClientReply *r;
	const Quorum__ClusterStatus *s;
	char fp[24];
	json_t *m;

	if (cn->model_arg && !cluster_model_known(cn->model_arg)) {
		char msg[200];

		snprintf(msg, sizeof(msg), "The model '%.100s' does not exist",
			 cn->model_arg);
		return http_send_err(mc, cn, 404, msg, "model",
				     "model_not_found");
	}
	if (!cluster_status_wait(mc, cn, &r))
		return MHD_YES;
	s = r ? r->cluster : NULL;

	if (s && s->has_model_fingerprint)
		snprintf(fp, sizeof(fp), "%016llx",
			 (unsigned long long)s->model_fingerprint);
	/* not the model's path: a file system's layout is nobody's business */
	m = json_pack("{s:s, s:s, s:I, s:s, s:{s:s, s:o, s:o}}", "id",
		      cn->model_arg ? cn->model_arg : gw.model_id, "object",
		      "model", "created", (json_int_t)gw.started, "owned_by",
		      "quorum", "quorum", "cluster", gw.c->cluster.name,
		      "fingerprint", s && s->has_model_fingerprint
				     ? json_string(fp) : json_null(),
		      "workers", s ? json_integer((json_int_t)s->n_workers)
				   : json_null());
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	if (cn->model_arg)
		return http_send_json(mc, cn, 200, m);
	return http_send_json(mc, cn, 200, json_pack("{s:s, s:[o]}", "object",
						     "list", "data", m));
}

/*
 * cluster — the coordinator's status and the endpoints answered from it
 * (cluster.h). Holds no state.
 */
#include "cluster.h"

#include <stdio.h>
#include <string.h>

#include "openai.h"

#include "http.h"

#define GW_STATUS_TIMEOUT_MS 2000

Quorum__ClientReply *cluster_status(void)
{
	Quorum__ClientRequest req = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__StatusQuery q = QUORUM__STATUS_QUERY__INIT;
	Quorum__ClientReply *r;

	req.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	req.status = &q;
	r = gwlink_call(gw.l, &req, GW_STATUS_TIMEOUT_MS);
	if (r && (r->status != QUORUM__STATUS__STATUS_OK ||
		  r->body_case != QUORUM__CLIENT_REPLY__BODY_CLUSTER)) {
		quorum__client_reply__free_unpacked(r, NULL);
		r = NULL;
	}
	if (r && r->cluster->has_model_fingerprint)
		gwapi_set_fingerprint(r->cluster->model_fingerprint);
	return r;
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
	Quorum__ClientReply *r = cluster_status();
	size_t n = r ? r->cluster->n_workers : 0;
	json_t *o = json_pack("{s:s, s:b, s:I}", "status",
			      n ? "ok" : "unavailable", "coordinator", r != NULL,
			      "workers", (json_int_t)n);

	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	return http_send_json(mc, cn, n ? 200 : 503, o);
}

enum MHD_Result cluster_models(struct MHD_Connection *mc, gwconn *cn)
{
	Quorum__ClientReply *r = cluster_status();
	const Quorum__ClusterStatus *s = r ? r->cluster : NULL;
	char fp[24];
	json_t *m;

	if (cn->model_arg && !cluster_model_known(cn->model_arg)) {
		char msg[200];

		snprintf(msg, sizeof(msg), "The model '%.100s' does not exist",
			 cn->model_arg);
		return http_send_err(mc, cn, 404, msg, "model",
				     "model_not_found");
	}

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

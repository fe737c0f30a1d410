/* quorum status — the cluster at a glance (the coordinator's view). */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "qerr.h"

#define STATUS_DEFAULT_ENDPOINT "tcp://127.0.0.1:7700"

static void help(void)
{
	printf("usage: quorum status [options]\n\n"
	       "Asks the coordinator for the state of the cluster: its workers\n"
	       "(id, host, pid, decode slots and how many are busy, KV blocks\n"
	       "used/free, cached prefix roots, age of the last heartbeat),\n"
	       "queue depth, requests in flight, requests served and failed,\n"
	       "decode tokens/s and prefix-cache hits/misses.\n\n"
	       "options:\n"
	       "  --endpoint E     coordinator client endpoint\n"
	       "                   (default " STATUS_DEFAULT_ENDPOINT ")\n"
	       "  --server-key FILE\n"
	       "                   CURVE: the coordinator's public key file\n"
	       "  --client-key FILE\n"
	       "                   CURVE: this client's secret key file\n"
	       "  --timeout SEC    wait per attempt (default 3)\n"
	       "  --retries R      resend R more times when no reply came\n"
	       "                   (default 1)\n"
	       "  --json           one JSON object\n"
	       "  -h, --help       this help\n\n"
	       "exit status: 0 the coordinator answered, 1 no reply or an error\n"
	       "reply, 2 usage. Scripts wait for a cluster with it:\n"
	       "  until quorum status >/dev/null 2>&1; do sleep 0.2; done\n");
}

static void print_text(const char *endpoint, const Quorum__ClusterStatus *s)
{
	printf("cluster %s at %s: %zu worker(s)\n", s->cluster ? s->cluster : "?",
	       endpoint, s->n_workers);
	if (s->n_workers)
		printf("  %-16s %-12s %7s %5s %5s %16s %5s %9s\n", "ID", "HOST",
		       "PID", "SLOTS", "BUSY", "BLOCKS USED/FREE", "ROOTS",
		       "HEARTBEAT");
	for (size_t i = 0; i < s->n_workers; i++) {
		const Quorum__WorkerStatus *w = s->workers[i];
		char blocks[32], age[32];

		snprintf(blocks, sizeof(blocks), "%u/%u", w->blocks_used,
			 w->blocks_free);
		if (w->has_heartbeat_age_ms)
			snprintf(age, sizeof(age), "%.1fs ago",
				 w->heartbeat_age_ms / 1e3);
		else
			snprintf(age, sizeof(age), "?");
		printf("  %-16s %-12s %7u %5u %5u %16s %5u %9s\n", w->id,
		       w->host ? w->host : "?", w->pid, w->slots, w->busy,
		       blocks, w->roots, age);
	}
	printf("queue depth %u, in flight %u; requests served %llu, failed "
	       "%llu; %.1f tokens/s; prefix cache %llu hit(s), %llu miss(es)\n",
	       s->queue_depth, s->in_flight,
	       (unsigned long long)s->requests_served,
	       (unsigned long long)s->requests_failed, s->tokens_per_s,
	       (unsigned long long)s->prefix_hits,
	       (unsigned long long)s->prefix_misses);
	if (s->has_prompt_tokens_reused)
		printf("prompt tokens: %llu reused from the prefix cache (%llu "
		       "partial hit(s)), %llu prefilled\n",
		       (unsigned long long)s->prompt_tokens_reused,
		       (unsigned long long)s->prefix_partial_hits,
		       (unsigned long long)s->prompt_tokens_prefilled);
	if (s->has_tokens_saved && s->tokens_saved)
		printf("early stopping saved ~%llu tokens\n",
		       (unsigned long long)s->tokens_saved);
	if (s->has_replies_unroutable && s->replies_unroutable)
		printf("replies to clients that were gone: %llu\n",
		       (unsigned long long)s->replies_unroutable);
}

static void print_json(const char *endpoint, const char *status,
		       const char *error, const Quorum__ClusterStatus *s)
{
	json_t *o = json_object();
	char *d;

	json_object_set_new(o, "status", json_string(status));
	json_object_set_new(o, "error", error ? client_text(error, strlen(error))
					      : json_null());
	json_object_set_new(o, "endpoint", json_string(endpoint));
	if (s)
		client_cluster_json(o, s);
	d = client_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (d)
		printf("%s\n", d);
	free(d);
	json_decref(o);
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{"endpoint", required_argument, 0, 'e'},
		{"timeout", required_argument, 0, 't'},
		{"retries", required_argument, 0, 'r'},
		{"json", no_argument, 0, 'J'},
		{"server-key", required_argument, 0, 'K'},
		{"client-key", required_argument, 0, 'C'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *endpoint = STATUS_DEFAULT_ENDPOINT, *sname;
	const char *server_key = NULL, *client_key = NULL;
	int json = 0, c, timeout_ms = 3000, retries = 1, rc = 1;
	long v;
	float f;
	Quorum__StatusQuery q;
	Quorum__ClientRequest req;
	Quorum__ClientReply *r = NULL;
	client *cl = NULL;
	char msg[512];

	optind = 1;
	if (cli_opts("status", argc, argv, "h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'e': endpoint = optarg; break;
		case 'J': json = 1; break;
		case 'K': server_key = optarg; break;
		case 'C': client_key = optarg; break;
		case 't':
			if (cli_float("status", "--timeout", optarg, 0.001,
				      86400, &f))
				return 2;
			timeout_ms = (int)ceilf(f * 1000);
			break;
		case 'r':
			if (cli_long("status", "--retries", optarg, 0, 100, &v))
				return 2;
			retries = (int)v;
			break;
		case 'h': help(); return 0;
		default: return cli_usage_error("status", "bad option");
		}
	}
	if (optind != argc)
		return cli_usage_error("status", "unexpected argument '%s'",
				       argv[optind]);
	if (!*endpoint)
		return cli_usage_error("status", "--endpoint is empty");
	if (!server_key != !client_key)
		return cli_usage_error("status", "--server-key and --client-key "
				       "go together");
	quorum__status_query__init(&q);
	quorum__client_request__init(&req);
	req.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	req.status = &q;
	req.request_id = client_request_id();
	if (client_open_curve(endpoint, server_key, client_key, &cl) ||
	    client_call(cl, &req, timeout_ms, retries, &r)) {
		fprintf(stderr, "quorum status: %s\n", qerr_detail());
		goto out;
	}
	if (!r) {
		client_no_reply(msg, sizeof(msg), endpoint,
				timeout_ms * (retries + 1) / 1e3,
				server_key != NULL);
		fprintf(stderr, "quorum status: %s\n", msg);
		if (json)
			print_json(endpoint, "NO_REPLY", msg, NULL);
		goto out;
	}
	if (r->version != QUORUM__CONSTANTS__PROTOCOL_VERSION &&
	    r->status == QUORUM__STATUS__STATUS_OK)
		r->status = QUORUM__STATUS__STATUS_VERSION_MISMATCH;
	sname = client_status_name(r->status);
	if (r->status == QUORUM__STATUS__STATUS_OK &&
	    (r->body_case != QUORUM__CLIENT_REPLY__BODY_CLUSTER || !r->cluster)) {
		r->status = QUORUM__STATUS__STATUS_INTERNAL;
		sname = "malformed reply";
		snprintf(msg, sizeof(msg), "OK without a cluster status");
	} else {
		snprintf(msg, sizeof(msg), "%s", r->error ? r->error
			 : "(no message)");
	}
	if (r->status != QUORUM__STATUS__STATUS_OK) {
		fprintf(stderr, "quorum status: %s: %s\n", sname, msg);
		if (json)
			print_json(endpoint, client_status_name(r->status), msg,
				   NULL);
		goto out;
	}
	if (json)
		print_json(endpoint, sname, NULL, r->cluster);
	else
		print_text(endpoint, r->cluster);
	rc = 0;
out:
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	client_free(&cl);
	return rc;
}

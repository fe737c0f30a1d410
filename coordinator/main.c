/* coordinator — the quorum cluster's front: clients ask, workers decode. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/cfg.h"
#include "conf/opts.h"
#include "net/curve.h"
#include "format/gguf.h"
#include "proc.h"
#include "text/prompt.h"
#include "qerr.h"
#include "coordinator/scheduler.h"
#include "text/tok.h"
#include "net/wire.h"

static volatile sig_atomic_t stop_flag;
static int64_t s_max_bytes; /* limits.max_message_bytes */

/* After the drain replies: asks still arriving are read and answered
 * CANCELLED (retry hint) until the clients are quiet this long, at most
 * DRAIN_READ_MAX_MS; then the client socket closes (its peers see the
 * disconnect and go to the successor). */
#define DRAIN_QUIET_MS 100
#define DRAIN_READ_MAX_MS 1000

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: coordinator --config cluster.yaml [--check-config]\n\n"
		"Serves clients on coordinator.client_endpoint and workers on\n"
		"coordinator.worker_endpoint; starts workers.local workers.\n\n"
		"options:\n"
		"  --config FILE     cluster configuration (required)\n"
		"  --check-config    validate the config and the model's\n"
		"                    tokenizer (and the sampling defaults against\n"
		"                    the model: max_new_tokens within its context,\n"
		"                    logit_bias ids within its vocabulary), print\n"
		"                    the effective config, exit\n"
		"  -h, --help        this help\n");
}

/* The tokenizer, context length and fingerprint of the model, without
 * its weights. */
static int load_vocab(const char *path, tok **t, int *ctx_len,
		      uint64_t *fp)
{
	gguf_file *g = NULL;
	gguf_str arch;
	char key[128];
	uint32_t ctx = 0;
	int rc;

	if ((rc = gguf_open(path, &g)))
		return rc;
	if ((rc = gguf_get_str(g, "general.architecture", &arch)) ||
	    arch.len > 64) {
		gguf_close(&g);
		return rc ? rc : qerr_fail(QERR_FORMAT, "%s: bad architecture",
					   path);
	}
	snprintf(key, sizeof(key), "%.*s.context_length", (int)arch.len,
		 arch.ptr);
	if ((rc = gguf_get_u32(g, key, &ctx)) || (rc = tok_load(g, t))) {
		gguf_close(&g);
		return rc;
	}
	/* the loader's bound (the workers refuse what passes it) */
	if (ctx < 1 || ctx > GGUF_MAX_CONTEXT) {
		gguf_close(&g);
		tok_free(t);
		return qerr_fail(QERR_RANGE, "%s: %s = %u is out of range "
				 "[1, %d]", path, key, ctx, GGUF_MAX_CONTEXT);
	}
	*ctx_len = (int)ctx;
	*fp = gguf_fingerprint(g);
	gguf_close(&g);
	return QERR_OK;
}

/* A local worker killed at shutdown (it did not stop in time) could not
 * unlink its KV pool: the pool it registered with goes here, or it stays
 * in /dev/shm until a worker of its id starts again. It is dead (killed
 * and reaped), so the name is nobody's. */
static void unlink_killed_pool(void *ctx, const char *id)
{
	const char *pool = sched_worker_pool(ctx, id);

	if (pool && !shm_unlink(pool))
		fprintf(stderr, "coordinator: worker %s killed; removed its "
			"pool %s\n", id, pool);
}

static int worker_path(char *buf, size_t cap)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n < 0)
		return qerr_fail(QERR_IO, "/proc/self/exe: %s", strerror(errno));
	exe[n] = '\0';
	if ((size_t)snprintf(buf, cap, "%s/worker", dirname(exe)) >= cap)
		return qerr_fail(QERR_RANGE, "worker path too long");
	return QERR_OK;
}

/* CURVE on: the server key pair and both allowlists load, and the local
 * workers' public key is on the worker allowlist (else they could never
 * register). Nothing is bound yet. */
static int load_security(const cfg *c, curve_sock *ck, curve_sock *wk,
			 curve_zap **zap)
{
	char z85[CURVE_Z85_LEN + 1];
	uint8_t key[CURVE_KEY_BYTES];
	int rc;

	if ((rc = curve_sock_server(&c->security, CURVE_DOMAIN_CLIENTS, ck)) ||
	    (rc = curve_zap_new(&c->security, zap)))
		return rc;
	*wk = *ck;
	wk->domain = CURVE_DOMAIN_WORKERS;
	if (c->workers.local <= 0)
		return QERR_OK;
	if ((rc = curve_key_load(c->security.worker_public_key_file,
				 CURVE_PUBLIC, z85)))
		return rc;
	if (!zmq_z85_decode(key, z85) ||
	    !curve_zap_allowed(*zap, CURVE_DOMAIN_WORKERS, key))
		return qerr_fail(QERR_RANGE, "%s: the local workers' public key "
				 "is not on security.worker_keys",
				 c->security.worker_public_key_file);
	for (int i = 0; i < c->workers.local; i++) {
		char id[32];

		snprintf(id, sizeof(id), "local-%d", i);
		if (!curve_zap_id_allowed(*zap, z85, id))
			return qerr_fail(QERR_RANGE, "%s: the local workers' "
					 "public key may not register id %s "
					 "(security.worker_keys ids)",
					 c->security.worker_public_key_file,
					 id);
	}
	return QERR_OK;
}

/* The client ROUTER's frame cap: frames up to it are read (those over
 * limits.max_message_bytes get a TOO_LONG reply, wire_recv's too_big);
 * only larger ones drop the connection, in libzmq (ZMQ_MAXMSGSIZE). */
static int64_t client_hard_cap(const cfg *c)
{
	return c->limits.max_message_bytes * 2;
}

/* CURVE on: security.gateway_keys as Z85 (files read), each on the
 * client allowlist too (a gateway connects as a client). */
static int load_gateway_keys(const cfg *c, const curve_zap *zap,
			     char (**out)[CURVE_Z85_LEN + 1])
{
	const curve_security *sec = &c->security;
	char (*k)[CURVE_Z85_LEN + 1];
	int rc;

	*out = NULL;
	if (!sec->n_gateway_keys)
		return QERR_OK;
	if (!(k = calloc(sec->n_gateway_keys, sizeof(*k))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	for (size_t i = 0; i < sec->n_gateway_keys; i++) {
		uint8_t key[CURVE_KEY_BYTES];
		const curve_key *g = &sec->gateway_keys[i];

		if (g->path) {
			if ((rc = curve_key_load(g->path, CURVE_PUBLIC, k[i]))) {
				free(k);
				return rc;
			}
		} else {
			snprintf(k[i], sizeof(k[i]), "%s", g->z85);
		}
		if (!zmq_z85_decode(key, k[i]) ||
		    !curve_zap_allowed(zap, CURVE_DOMAIN_CLIENTS, key)) {
			rc = qerr_fail(QERR_RANGE, "security.gateway_keys: "
				       "%s is not on security.client_keys",
				       k[i]);
			free(k);
			return rc;
		}
	}
	*out = k;
	return QERR_OK;
}

static void drain(sched *s, void *sock, int clients)
{
	/* bounded: neither side can starve the other or the timers; client
	 * work stops as soon as a heartbeat falls due (it goes out, and the
	 * workers' messages are read, before more client work) */
	for (int k = 0; k < 256; k++) {
		if (clients && k && sched_timeout_ms(s) == 0)
			return;
		wire_msg m;
		int rc = wire_recv(sock, 1, 1,
				   clients ? (size_t)s_max_bytes : 0, &m);

		if (rc == QERR_FULL || rc == QERR_IO)
			return;
		if (clients)
			sched_on_client(s, rc, &m);
		else
			sched_on_worker(s, rc, &m);
		wire_msg_close(&m);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, 0, 'c'},
		{"check-config", no_argument, 0, 'k'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *config = NULL;
	int check = 0, ch, rc = 1, ctx_len = 0;
	char wpath[PATH_MAX], host[128], cpath[PATH_MAX];
	cfg *c = NULL;
	tok *t = NULL;
	void *zctx = NULL, *clients = NULL, *workers = NULL;
	sched *s = NULL;
	proc_set *ps = NULL;
	int served = 0; /* a worker has registered since the start */
	sched_opts so = {0};
	prompt_style pst;
	struct sigaction sa;
	curve_sock ck, wk; /* CURVE options of the two ROUTERs */
	curve_zap *zap = NULL;  /* non-NULL when security.curve is on */
	char (*gw_keys)[CURVE_Z85_LEN + 1] = NULL;

	if (opts_whole(argc, argv, "h", opts)) {
		fprintf(stderr, "coordinator: %s\n", qerr_detail());
		usage(stderr);
		return 2;
	}
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': config = optarg; break;
		case 'k': check = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!config || optind != argc) {
		if (!config)
			fprintf(stderr, "coordinator: --config FILE is "
				"required\n");
		else
			fprintf(stderr, "coordinator: unexpected argument "
				"'%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (cfg_load(config, &c)) {
		fprintf(stderr, "coordinator: %s\n", qerr_detail());
		goto out;
	}
	/* the model the config names: its key said (a relative path is
	 * the config's directory's, as cfg_load resolved it) */
	if (load_vocab(c->model.path, &t, &ctx_len, &so.fingerprint)) {
		fprintf(stderr, "coordinator: %s: model.path: %s\n", config,
			qerr_detail());
		goto out;
	}
	if (prompt_style_resolve(t, c->prompt.template_name, c->prompt.think,
				 &pst)) {
		fprintf(stderr, "coordinator: %s\n", qerr_detail());
		goto out;
	}
	/* the sampling defaults against this model: else every request
	 * without its own value is refused for one its client never sent */
	if (cfg_check_model(c, ctx_len, (int)tok_vocab_size(t))) {
		fprintf(stderr, "coordinator: %s\n", qerr_detail());
		goto out;
	}
	fprintf(stderr, "coordinator: template %s\n", pst.note);
	if (pst.warning[0])
		fprintf(stderr, "coordinator: warning: %s\n", pst.warning);
	memset(&ck, 0, sizeof(ck));
	memset(&wk, 0, sizeof(wk));
	/* before anything is bound or spawned: no allowlist, no start */
	if (c->security.curve && (load_security(c, &ck, &wk, &zap) ||
				  load_gateway_keys(c, zap, &gw_keys))) {
		fprintf(stderr, "coordinator: security: %s; not starting\n",
			qerr_detail());
		goto out;
	}
	if (check) {
		cfg_dump(c, stdout);
		rc = 0;
		goto out;
	}
	if (!realpath(config, cpath) || worker_path(wpath, sizeof(wpath))) {
		fprintf(stderr, "coordinator: %s\n",
			qerr_detail()[0] ? qerr_detail() : strerror(errno));
		goto out;
	}
	if (gethostname(host, sizeof(host)))
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* the ZAP handler is bound before the CURVE servers (RFC 27) */
	if (!(zctx = zmq_ctx_new()) || (zap && curve_zap_bind(zap, zctx)) ||
	    wire_bind_curve(zctx, ZMQ_ROUTER, c->coordinator.client_endpoint,
			    client_hard_cap(c), zap ? &ck : NULL,
			    &clients) ||
	    wire_bind_curve(zctx, ZMQ_ROUTER, c->coordinator.worker_endpoint,
			    c->limits.max_message_bytes, zap ? &wk : NULL,
			    &workers)) {
		fprintf(stderr, "coordinator: %s\n", qerr_detail());
		rc = errno == EADDRINUSE ? 4 : 1;
		goto out;
	}
	so.c = c;
	so.t = t;
	so.prompt_family = pst.family;
	so.ctx_len = ctx_len;
	so.has_fingerprint = 1;
	so.zap = zap;
	so.gateway_keys = (const char (*)[CURVE_Z85_LEN + 1])gw_keys;
	so.n_gateway_keys = gw_keys ? c->security.n_gateway_keys : 0;
	s_max_bytes = c->limits.max_message_bytes;
	so.clients = clients;
	so.workers = workers;
	if (sched_new(&so, &s) ||
	    proc_new(wpath, cpath, host, c->workers.local,
		     c->heartbeat.reconnect_min_ms,
		     c->heartbeat.reconnect_max_ms, &ps)) {
		fprintf(stderr, "coordinator: %s\n", qerr_detail());
		goto out;
	}
	fprintf(stderr, "coordinator: cluster %s, clients %s, workers %s, "
		"%d local worker(s), CURVE %s\n", c->cluster.name,
		c->coordinator.client_endpoint, c->coordinator.worker_endpoint,
		c->workers.local, zap ? "on" : "off");
	while (!stop_flag) {
		zmq_pollitem_t it[3] = {{clients, 0, ZMQ_POLLIN, 0},
					{workers, 0, ZMQ_POLLIN, 0},
					{curve_zap_socket(zap), 0, ZMQ_POLLIN, 0}};

		if (zmq_poll(it, zap ? 3 : 2, sched_timeout_ms(s)) < 0) {
			if (zmq_errno() == EINTR)
				continue;
			fprintf(stderr, "coordinator: zmq_poll: %s\n",
				zmq_strerror(zmq_errno()));
			break;
		}
		if (zap && (it[2].revents & ZMQ_POLLIN))
			curve_zap_serve(zap);
		/* workers first, then the timers (heartbeats out, expiries
		 * judged on fresh news), then clients */
		drain(s, workers, 0);
		sched_tick(s);
		if (it[0].revents & ZMQ_POLLIN)
			drain(s, clients, 1);
		/* no local worker can load the model and no other worker
		 * has served: a restart loop behind NO_CAPACITY helps
		 * nobody (a worker of another host, with its own file, once
		 * registered, keeps the coordinator running) */
		served |= sched_n_workers(s) > 0;
		if (proc_tick(ps) && !served) {
			fprintf(stderr, "coordinator: model.path %s cannot be "
				"served by its local workers and no other "
				"worker is registered: stopping\n",
				c->model.path);
			break;
		}
	}
	fprintf(stderr, "coordinator: draining\n");
	/* every request read gets its answer: CANCELLED with a retry hint
	 * (the successor computes the same bytes); asks still coming in get
	 * the same until the clients are quiet; then the socket closes —
	 * before the local workers are stopped, so that clients see the
	 * disconnect (and reconnect to a successor) at once */
	sched_shutdown(s);
	{
		int64_t t0 = wire_now_ms(), quiet = t0;
		int linger = 2000;

		while (wire_now_ms() - quiet < DRAIN_QUIET_MS &&
		       wire_now_ms() - t0 < DRAIN_READ_MAX_MS) {
			zmq_pollitem_t it = {clients, 0, ZMQ_POLLIN, 0};

			if (zmq_poll(&it, 1, DRAIN_QUIET_MS / 4) > 0 &&
			    (it.revents & ZMQ_POLLIN)) {
				drain(s, clients, 1);
				quiet = wire_now_ms();
			}
		}
		/* the replies queued reach their clients before the socket
		 * goes (LINGER was 0) */
		zmq_setsockopt(clients, ZMQ_LINGER, &linger, sizeof(linger));
		wire_close(&clients);
		fprintf(stderr, "coordinator: client socket closed after "
			"%lld ms of drain\n", (long long)(wire_now_ms() - t0));
	}
	proc_stop_all(ps, 5000, unlink_killed_pool, s);
	rc = stop_flag ? 0 : 1;
out:
	sched_free(&s);
	proc_free(&ps);
	wire_close(&clients);
	wire_close(&workers);
	curve_zap_free(&zap);
	free(gw_keys);
	curve_sock_wipe(&ck);
	curve_sock_wipe(&wk);
	if (zctx)
		zmq_ctx_term(zctx);
	tok_free(&t);
	cfg_free(&c);
	return rc;
}

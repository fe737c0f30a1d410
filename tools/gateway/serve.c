/*
 * quorum serve — the HTTP gateway: an OpenAI-compatible API in front of a
 * running cluster, plus /health, /metrics (Prometheus) and a live status
 * page. It is a normal ZeroMQ client of the coordinator (gwlink.h); the
 * JSON is openai.h's. libmicrohttpd event-driven (epoll) with a pool of
 * http.threads threads: no handler blocks — a request waiting for the
 * coordinator is suspended and parked (pending.h), a stream waiting for
 * its next part too; per-IP connection cap; connection deadlines for the
 * headers and the body (conns.h).
 *
 * Every accepted HTTP request gets exactly one response: an answer, an
 * OpenAI-style error with its HTTP code, or (streams) an error event.
 *
 * This file: cmd_serve (options, the config, the keys, the link, the
 * daemon, the signals that stop it) and the daemon's callbacks, which
 * route each request to its part and account for it when it ends (the
 * parts: gateway.h). Owns gw and the status page (page.html, embedded).
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conf/cfg.h"
#include "tools/cli.h"
#include "gateway.h"
#include "auth.h"
#include "cluster.h"
#include "completions.h"
#include "conns.h"
#include "http.h"
#include "metrics.h"
#include "pending.h"
#include "sse.h"
#include "gateway_page.h"
#include "local.h"
#include "qerr.h"
#include "net/wire.h"

gwstate gw;
static volatile sig_atomic_t stop_flag;
static volatile sig_atomic_t child_flag; /* --model: a child changed state */
static uint64_t rid_next;       /* request ids: a counter from a random
				 * start (set by cmd_serve) */

/* Counts the request's Content-Length headers and whether they differ. */
struct cl_count {
	int n;
	const char *first;
	int differ;
};

static enum MHD_Result count_cl(void *cls, enum MHD_ValueKind kind,
				const char *key, const char *value)
{
	struct cl_count *c = cls;

	(void)kind;
	if (strcasecmp(key, "Content-Length"))
		return MHD_YES;
	if (c->n++ && strcmp(c->first, value ? value : ""))
		c->differ = 1;
	if (c->n == 1)
		c->first = value ? value : "";
	return MHD_YES;
}

/* A header name with whitespace in it ("Content-Length : 5"), which
 * libmicrohttpd keeps as another header, so that its framing ignored
 * the length and the body ran as the next request (RFC 9112 5.1: a
 * request to refuse). */
static enum MHD_Result spaced_key(void *cls, enum MHD_ValueKind kind,
				  const char *key, const char *value)
{
	(void)kind;
	(void)value;
	if (key && strpbrk(key, " \t")) {
		*(int *)cls = 1;
		return MHD_NO;
	}
	return MHD_YES;
}

/* 1 when the Content-Type is application/json (parameters such as
 * charset allowed). */
static int body_is_json(struct MHD_Connection *mc)
{
	const char *t = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						    "Content-Type");
	size_t n = strlen("application/json");

	return t && !strncasecmp(t, "application/json", n) &&
	       (t[n] == '\0' || t[n] == ';' || t[n] == ' ');
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	gwconn *cn = *con_cls;
	int post = 0;

	(void)cls;
	url = http_origin_form(url);
	(void)version;
	if (!cn) {
		const char *cl;
		int ep, over;

		if (!(cn = calloc(1, sizeof(*cn))))
			return MHD_NO;
		*con_cls = cn;
		cn->key = AUTH_NONE;
		cn->t0 = wire_now_ms();
		conns_headers_in(mc);
		snprintf(cn->rid, sizeof(cn->rid), "req_%016llx",
			 (unsigned long long)__atomic_fetch_add(
				 &rid_next, 1, __ATOMIC_RELAXED));
		ep = http_route(url, method, &post);
		cn->ep = ep < 0 ? -1 - ep : ep;
		{
			/* a body framed otherwise than by Content-Length or
			 * chunked would never end: refused, the connection
			 * closed (RFC 9112 6.3; it had hung until the
			 * timeout); both at once are a smuggler's framing */
			const char *te = MHD_lookup_connection_value(
				mc, MHD_HEADER_KIND, "Transfer-Encoding");

			if (te && strcasecmp(te, "chunked")) {
				char msg[160];

				cn->close = 1;
				snprintf(msg, sizeof(msg), "Transfer-Encoding "
					 "'%.60s' is not supported (only "
					 "chunked)", te);
				return http_send_err(mc, cn, 501, msg, NULL,
						     "not_implemented");
			}
			if (te && MHD_lookup_connection_value(
				    mc, MHD_HEADER_KIND, "Content-Length")) {
				cn->close = 1;
				return http_send_err(mc, cn, 400, "both "
						     "Transfer-Encoding and "
						     "Content-Length", NULL,
						     "invalid_request_error");
			}
		}
		{
			int spaced = 0;

			MHD_get_connection_values(mc, MHD_HEADER_KIND,
						  spaced_key, &spaced);
			if (spaced) {
				cn->close = 1;
				return http_send_err(mc, cn, 400, "a header "
						     "name holds whitespace",
						     NULL,
						     "invalid_request_error");
			}
		}
		over = conns_over(mc);
		/* past a cap, a scrape of /metrics is answered (an overloaded
		 * gateway is when it matters), and so is a probe of /health
		 * past the per-address cap (one address's connections say
		 * nothing of the gateway's health; past the cap in all, its
		 * 503 is the truth: full); the connection then closes */
		if ((over && ep == HTTP_EP_METRICS) ||
		    (over == CONNS_OVER_IP && ep == HTTP_EP_HEALTH)) {
			conns_over_served(mc);
			cn->close = 1;
			over = CONNS_OK;
		}
		switch (over) {
		case CONNS_OVER_IP: {
			char msg[160];

			cn->close = 1;
			snprintf(msg, sizeof(msg), "this address has "
				 "http.max_connections_per_ip (%d) connections "
				 "open; try again later",
				 gw.c->http.max_connections_per_ip);
			return http_send_err(mc, cn, 429, msg, NULL,
					     "rate_limit_exceeded");
		}
		case CONNS_OVER_ALL: {
			char msg[160];

			cn->close = 1;
			snprintf(msg, sizeof(msg), "the gateway has "
				 "http.max_connections (%d) connections open; "
				 "try again later",
				 gw.c->http.max_connections);
			return http_send_err(mc, cn, 503, msg, NULL,
					     "server_busy");
		}
		}
		if (ep < 0) {
			char msg[128];

			snprintf(msg, sizeof(msg), "%s needs %s",
				 http_ep_name[cn->ep], post ? "POST" : "GET");
			cn->hdr[0] = "Allow";
			cn->hdr[1] = post ? "POST" : "GET, HEAD";
			return http_send_err(mc, cn, 405, msg, NULL,
					     "method_not_allowed");
		}
		if (ep == HTTP_EP_OTHER)
			return http_send_err(mc, cn, 404, "unknown URL (see "
					     "/v1/chat/completions, "
					     "/v1/completions, /v1/responses, "
					     "/v1/models, "
					     "/health, /metrics, /)",
					     NULL, "unknown_url");
		if (ep == HTTP_EP_MODELS && strcmp(url, "/v1/models") &&
		    !(cn->model_arg = strdup(url + 11)))
			return MHD_NO;
		cn->key = auth_key(mc);
		if ((post || ep == HTTP_EP_MODELS || ep == HTTP_EP_STATUS) &&
		    cn->key == AUTH_NONE)
			return http_send_err(mc, cn, 401,
					     "missing or wrong API key (send "
					     "'Authorization: Bearer KEY')",
					     NULL, "invalid_api_key");
		cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						 "Content-Length");
		if (post && cl && strtoull(cl, NULL, 10) >
				  (unsigned long long)gw.c->http.max_body_bytes) {
			char msg[160];

			snprintf(msg, sizeof(msg), "the body (%s bytes) is "
				 "larger than http.max_body_bytes (%lld bytes)",
				 cl, (long long)gw.c->http.max_body_bytes);
			return http_send_err(mc, cn, 413, msg, NULL,
					     "request_too_large");
		}
		if (post) {
			struct cl_count c = {0};

			MHD_get_connection_values(mc, MHD_HEADER_KIND,
						  count_cl, &c);
			if (c.differ)
				return http_send_err(
					mc, cn, 400, "conflicting "
					"Content-Length headers", NULL,
					"invalid_request_error");
			/* no simple cross-site request (a form, text/plain)
			 * reaches a completion */
			if (!body_is_json(mc))
				return http_send_err(
					mc, cn, 415, "the body must be JSON, "
					"sent with 'Content-Type: "
					"application/json'", NULL,
					"unsupported_media_type");
			{
				/* a compressed body would reach the JSON
				 * parser as bytes and be called malformed:
				 * the coding is named instead (RFC 9110
				 * 8.4, 15.5.16) */
				const char *ce = MHD_lookup_connection_value(
					mc, MHD_HEADER_KIND,
					"Content-Encoding");

				if (ce && strcasecmp(ce, "identity")) {
					char msg[160];

					snprintf(msg, sizeof(msg),
						 "Content-Encoding '%.60s' "
						 "is not supported: send the "
						 "body uncompressed", ce);
					cn->hdr[0] = "Accept-Encoding";
					cn->hdr[1] = "identity";
					return http_send_err(
						mc, cn, 415, msg, NULL,
						"unsupported_media_type");
				}
			}
		}
		return MHD_YES;
	}
	if (cn->code)
		return MHD_YES; /* answered already: the rest is discarded */
	if (*upload_size)
		return http_take_body(cn, upload, upload_size);
	conns_body_in(mc);
	switch (cn->ep) {
	case HTTP_EP_CHAT:
	case HTTP_EP_COMPL:
	case HTTP_EP_RESP:
		return completions_serve(mc, cn);
	case HTTP_EP_MODELS:
		return cluster_models(mc, cn);
	case HTTP_EP_HEALTH:
		return cluster_health(mc, cn);
	case HTTP_EP_METRICS:
		return metrics_serve(mc, cn);
	case HTTP_EP_STATUS:
		return metrics_status(mc, cn);
	case HTTP_EP_PAGE:
		return http_send_body(mc, cn, 200, "text/html; charset=utf-8",
				      gwpage_html, strlen(gwpage_html));
	}
	return MHD_NO;
}

static void on_done(void *cls, struct MHD_Connection *mc, void **con_cls,
		    enum MHD_RequestTerminationCode toe)
{
	gwconn *cn = *con_cls;

	(void)cls;
	conns_request_done(mc);
	if (!cn)
		return;
	if (cn->st)
		sse_detach(cn, toe);
	completions_free(cn);
	cluster_free(cn);
	if (cn->code)
		metrics_count_code(cn->ep, cn->code);
	/* the log: every completion and every error, by request id (the
	 * client's x-request-id); probes that succeed are not logged */
	if (cn->code >= 400 || HTTP_EP_ASKS(cn->ep))
		fprintf(stderr, "quorum serve: %s %s %d %lld ms%s\n", cn->rid,
			http_ep_name[cn->ep], cn->code,
			(long long)(wire_now_ms() - cn->t0),
			toe == MHD_REQUEST_TERMINATED_COMPLETED_OK
				? "" : " (ended early)");
	if (HTTP_EP_ASKS(cn->ep))
		metrics_observe(cn->t0);
	metrics_record_push(cn);
	if (cn->counted)
		metrics_leave();
	if (cn->len >= 65536) {
		/* a large body's pages go back to the system: glibc keeps
		 * freed heap (and raises its mmap threshold after a large
		 * free), which 16 hostile bodies at once would pin */
		free(cn->body);
		cn->body = NULL;
		malloc_trim(0);
	}
	free(cn->body);
	free(cn->model_arg);
	free(cn);
	*con_cls = NULL;
}

static void on_signal(int sig)
{
	if (sig == SIGCHLD)
		child_flag = 1;
	else
		stop_flag = 1;
}

static void help(void)
{
	printf("usage: quorum serve --model FILE.gguf [--workers K] [options]\n"
	       "       quorum serve --config cluster.yaml [options]\n\n"
	       "The HTTP gateway: serves an OpenAI-compatible API in front of\n"
	       "a cluster (its coordinator, as a ZeroMQ client), with the vote\n"
	       "of every request in a \"quorum\" object. With --model it\n"
	       "starts the cluster itself: a coordinator and K local workers\n"
	       "on this machine (a private config, ipc:// endpoints), stopped\n"
	       "with it on SIGINT/SIGTERM, nothing left behind; with --config\n"
	       "it joins a running one.\n\n"
	       "  POST /v1/chat/completions, /v1/completions  (stream: true\n"
	       "       gives Server-Sent Events)\n"
	       "  POST /v1/responses  OpenAI's Responses API: the voted chain\n"
	       "       as its one output (stream: true, its events; live\n"
	       "       with samples: 1)\n"
	       "  GET  /v1/models     the model and its fingerprint\n"
	       "  GET  /v1/models/ID  the model by its id or an alias\n"
	       "  GET  /health        200 when a worker is registered, else 503\n"
	       "  GET  /metrics       Prometheus text format\n"
	       "  GET  /              the live status page\n"
	       "  GET  /v1/quorum/status  the page's JSON\n\n"
	       "A request without n gets one choice: a chain that reached the\n"
	       "majority answer over http.samples samples (0: sampling.n; the\n"
	       "request's \"samples\" overrides it); n = how many choices.\n"
	       "Errors carry OpenAI's codes; every response x-request-id.\n\n"
	       "Settings come from the config's http: section (listen,\n"
	       "api_keys_file, admin_keys_file, show_questions,\n"
	       "client_key_file, max_body_bytes, max_json_values,\n"
	       "max_json_depth, max_connections, max_connections_per_ip,\n"
	       "header_timeout_ms, body_timeout_ms, threads, max_in_flight,\n"
	       "samples, model_aliases) and limits/sampling/security.\n"
	       "TLS is left to a reverse proxy.\n\n"
	       "options:\n"
	       "  --model FILE     serve this GGUF model with a cluster of its\n"
	       "                   own (on 127.0.0.1:8080 unless --listen)\n"
	       "  --workers K      with --model: local workers (default 1)\n"
	       "  --threads T      with --model: threads per worker (default 2)\n"
	       "  --config FILE    cluster configuration (a running cluster)\n"
	       "  --listen H:P     overrides http.listen (port 0: any free one)\n"
	       "  --endpoint E     with --config: the coordinator's client\n"
	       "                   endpoint (default: coordinator.client_endpoint)\n"
	       "  -h, --help       this help\n\n"
	       "It prints \"quorum serve: listening on http://H:P\" once\n"
	       "ready (with --model: its coordinator took the model) and runs\n"
	       "until SIGINT/SIGTERM. Exit status: 0 stopped, 1 cannot start\n"
	       "(an address in use is said before anything starts), 2 usage.\n");
}

/* Binds the listen address (sa filled). */
static int parse_listen(const char *s, struct sockaddr_storage *sa,
			socklen_t *len)
{
	char host[CFG_LISTEN_MAX + 1];
	const char *colon = strrchr(s, ':');
	long port;

	char *end;

	memset(sa, 0, sizeof(*sa));
	if (!colon || strlen(s) > CFG_LISTEN_MAX || colon[1] < '0' ||
	    colon[1] > '9')
		return -1;
	port = strtol(colon + 1, &end, 10);
	if (*end || port > 65535)
		return -1;
	if (s[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)sa;

		snprintf(host, sizeof(host), "%.*s", (int)(colon - s - 2), s + 1);
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a);
		return inet_pton(AF_INET6, host, &a->sin6_addr) == 1 ? 0 : -1;
	}
	{
		struct sockaddr_in *a = (struct sockaddr_in *)sa;

		snprintf(host, sizeof(host), "%.*s", (int)(colon - s), s);
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		*len = sizeof(*a);
		return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
	}
}

/* A socket bound to sa and listening, for the daemon (which then opens
 * none of its own): bound before anything else starts, so that an address
 * in use is said at once, in words. -1 with the reason in errno. */
static int listen_fd(const struct sockaddr_storage *sa, socklen_t len)
{
	int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) ||
	    (sa->ss_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on))) ||
	    bind(fd, (const struct sockaddr *)sa, len) || listen(fd, 512)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static void model_name(const char *path, char *out, size_t cap)
{
	const char *b = strrchr(path, '/');
	size_t n;

	b = b ? b + 1 : path;
	n = strlen(b);
	if (n > 5 && !strcmp(b + n - 5, ".gguf"))
		n -= 5;
	snprintf(out, cap, "%.*s", (int)n, b);
}

int cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, 0, 'c'},
		{"model", required_argument, 0, 'm'},
		{"workers", required_argument, 0, 'w'},
		{"threads", required_argument, 0, 't'},
		{"listen", required_argument, 0, 'l'},
		{"endpoint", required_argument, 0, 'e'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *config = NULL, *listen_at = NULL, *endpoint = NULL;
	const char *model = NULL;
	long workers = 1, threads = 2;
	gw_local *local = NULL;
	char *end;
	struct sockaddr_storage sa;
	socklen_t salen;
	struct MHD_Daemon *d = NULL;
	const union MHD_DaemonInfo *di;
	struct sigaction act;
	sigset_t mask, old;
	char shown[96], host[64];
	int ch, rc = 1, port = 0, workers_given = 0, threads_given = 0;
	int lfd = -1;

	optind = 1;
	if (cli_opts("serve", argc, argv, "h", opts))
		return 2;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': config = optarg; break;
		case 'm': model = optarg; break;
		case 'w':
			workers_given = 1;
			workers = strtol(optarg, &end, 10);
			if (*end || workers < 1 || workers > 256)
				return cli_usage_error("serve", "--workers %s: "
						       "must be 1..256", optarg);
			break;
		case 't':
			threads_given = 1;
			threads = strtol(optarg, &end, 10);
			if (*end || threads < 1 || threads > 1024)
				return cli_usage_error("serve", "--threads %s: "
						       "must be 1..1024", optarg);
			break;
		case 'l': listen_at = optarg; break;
		case 'e': endpoint = optarg; break;
		case 'h': help(); return 0;
		default: return cli_usage_error("serve", "bad option");
		}
	}
	if (!config == !model || optind != argc)
		return cli_usage_error("serve", "give --model FILE or --config "
				       "FILE (one of them, and no other "
				       "arguments)");
	if (config && (workers_given || threads_given))
		/* the config's workers: section says them; silently
		 * dropping the flag would run another cluster than asked */
		return cli_usage_error("serve", "--%s goes with --model (with "
				       "--config, workers.local and "
				       "workers.threads say it)",
				       workers_given ? "workers" : "threads");
	if (model && endpoint)
		/* its own cluster's endpoint is a private one */
		return cli_usage_error("serve", "--endpoint goes with --config "
				       "(with --model the gateway talks to the "
				       "cluster it starts)");
	/* the config's rule (its check had refused what this one took:
	 * "127.0.0.1:08080", under a private config the user never wrote) */
	if (listen_at && (cfg_listen_check("--listen", listen_at) ||
			  parse_listen(listen_at, &sa, &salen)))
		return cli_usage_error("serve", "--listen %s: not HOST:PORT (an "
				       "IPv4 address or [IPv6] one, a port "
				       "0..65535)", listen_at);
	if (model) {
		/* the address first: in use, nothing is started */
		if (!listen_at)
			parse_listen("127.0.0.1:8080", &sa, &salen);
		if ((lfd = listen_fd(&sa, salen)) < 0) {
			fprintf(stderr, "quorum serve: cannot listen on %s: "
				"%s\n", listen_at ? listen_at
						   : "127.0.0.1:8080",
				strerror(errno));
			return 1;
		}
		/* a cluster of its own: coordinator and workers started here */
		if (local_start(model, (int)workers, (int)threads,
				listen_at ? listen_at : "127.0.0.1:8080",
				&local)) {
			fprintf(stderr, "quorum serve: %s\n", qerr_detail());
			close(lfd);
			return 1;
		}
		config = local_config(local);
	}
	memset(&gw, 0, sizeof(gw));
	if (cfg_load(config, &gw.c)) {
		fprintf(stderr, "quorum serve: %s\n", qerr_detail());
		local_stop(&local);
		if (lfd >= 0)
			close(lfd);
		return 1;
	}
	if (listen_at) {
		if (strlen(listen_at) > CFG_LISTEN_MAX) {
			cfg_free(&gw.c);
			local_stop(&local);
			return cli_usage_error("serve", "--listen too long");
		}
		strcpy(gw.c->http.listen, listen_at);
	}
	if (parse_listen(gw.c->http.listen, &sa, &salen)) {
		fprintf(stderr, "quorum serve: listen address '%s' is not "
			"HOST:PORT\n", gw.c->http.listen);
		goto out;
	}
	if (lfd < 0 && (lfd = listen_fd(&sa, salen)) < 0) {
		fprintf(stderr, "quorum serve: cannot listen on %s: %s\n",
			gw.c->http.listen, strerror(errno));
		goto out;
	}
	gw.endpoint = endpoint ? endpoint : gw.c->coordinator.client_endpoint;
	model_name(gw.c->model.path, gw.model_id, sizeof(gw.model_id));
	gw.started = time(NULL);
	rid_next = ((uint64_t)gw.started << 24) ^ ((uint64_t)getpid() << 8);
	if (gw.c->http.admin_keys_file &&
	    auth_load_admin(gw.c->http.admin_keys_file))
		goto out;
	if (gw.c->http.api_keys_file && auth_load(gw.c->http.api_keys_file))
		goto out;
	if (gw.c->security.curve && !gw.c->http.client_key_file) {
		fprintf(stderr, "quorum serve: %s: security.curve is true but "
			"http.client_key_file is not set (the gateway's CURVE "
			"secret key; its .pub must be on security.client_keys)\n",
			config);
		goto out;
	}
	/* Every thread started from here on (the link's, ZeroMQ's I/O
	 * thread, the daemon's) inherits a mask blocking SIGINT, SIGTERM
	 * and SIGCHLD, so that only the main thread's sigsuspend takes
	 * them: a SIGCHLD that arrived while the main thread was between
	 * its check and sigsuspend went to ZeroMQ's thread instead (the
	 * link was opened before this block), and the gateway waited on a
	 * coordinator that had already ended (serve_local_e2e under load).
	 * Not before local_start: its coordinator would inherit it. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	if (gwlink_open(gw.endpoint,
			gw.c->security.curve
				? gw.c->security.server_public_key_file : NULL,
			gw.c->security.curve ? gw.c->http.client_key_file : NULL,
			&gw.l)) {
		fprintf(stderr, "quorum serve: %s\n", qerr_detail());
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);
	if (pending_start() || conns_start(gw.c->http.header_timeout_ms,
					   gw.c->http.body_timeout_ms,
					   gw.c->http.max_connections,
					   gw.c->http.max_connections_per_ip)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		fprintf(stderr, "quorum serve: cannot start a thread\n");
		goto out;
	}
	/* event-driven: a pool of threads, none held by a waiting request
	 * (suspended); the idle timeout is a backstop behind conns.h's
	 * deadlines */
	d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
			(sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
		0, NULL, NULL, on_request, NULL,
		/* first: the options after it log through it */
		MHD_OPTION_EXTERNAL_LOGGER, http_log, NULL,
		MHD_OPTION_LISTEN_SOCKET, lfd,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned)gw.c->http.threads,
		/* the caps are answered in words (conns.h); these close
		 * silently only a flood past them */
		MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)CONNS_BACKSTOP(gw.c->http.max_connections),
		MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned)CONNS_BACKSTOP(gw.c->http.max_connections_per_ip),
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
		MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, conns_notify, NULL,
		MHD_OPTION_END);
	if (!d) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		fprintf(stderr, "quorum serve: cannot serve on %s\n",
			gw.c->http.listen);
		goto out;
	}
	lfd = -1; /* the daemon's now */
	/* with a cluster of its own, ready means its coordinator took the
	 * model and listens: a bad model ends here, before the line that
	 * says ready */
	if (local && local_wait_ready(local)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		fprintf(stderr, "quorum serve: %s\n", qerr_detail());
		goto out;
	}
	di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
	if (di) {
		struct sockaddr_storage b;
		socklen_t bl = sizeof(b);

		if (!getsockname(di->listen_fd, (struct sockaddr *)&b, &bl))
			port = b.ss_family == AF_INET6
				       ? ntohs(((struct sockaddr_in6 *)&b)->sin6_port)
				       : ntohs(((struct sockaddr_in *)&b)->sin_port);
	}
	snprintf(host, sizeof(host), "%.*s",
		 (int)(strrchr(gw.c->http.listen, ':') - gw.c->http.listen),
		 gw.c->http.listen);
	snprintf(shown, sizeof(shown), "http://%s:%d", host, port);
	printf("quorum serve: listening on %s (coordinator %s, model %s%s)\n",
	       shown, gw.endpoint, gw.model_id,
	       auth_required() ? ", API keys required" : "");
	fflush(stdout);
	memset(&act, 0, sizeof(act));
	act.sa_handler = on_signal;
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGCHLD, &act, NULL);
	{
		sigset_t wait = old;

		sigdelset(&wait, SIGINT);
		sigdelset(&wait, SIGTERM);
		sigdelset(&wait, SIGCHLD);
		while (!stop_flag) {
			if (local && !local_alive(local))
				break;
			sigsuspend(&wait);
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (local && !stop_flag) {
		/* its own cluster ended under it: no request can be served */
		fprintf(stderr, "quorum serve: the coordinator (%s) ended: "
			"%s\n", local_config(local), local_status(local));
		rc = 1;
	} else {
		rc = 0;
	}
out:
	if (d) {
		/* waiting handlers give up now (503), every parked one is
		 * resumed, then the threads end */
		gwlink_abort(gw.l);
		pending_stop();
		conns_stop();
		MHD_stop_daemon(d);
	}
	pending_stop();
	conns_stop();
	gwlink_free(&gw.l);
	auth_free();
	metrics_fini();
	cfg_free(&gw.c);
	local_stop(&local);
	if (lfd >= 0)
		close(lfd);
	return rc;
}

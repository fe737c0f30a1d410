/*
 * http — the gateway's HTTP layer (http.h): routing, request bodies and
 * replies. Owns the endpoint table; holds no state of its own.
 */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "openai.h"
#include "tools/client.h"

const char *const http_ep_name[HTTP_N_EP] = {
	"/v1/chat/completions", "/v1/completions", "/v1/responses",
	"/v1/models", "/health",
	"/metrics", "/", "/v1/quorum/status", "other"};

const char *http_origin_form(const char *url)
{
	const char *p;

	if (strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8))
		return url;
	p = strchr(url + (url[4] == ':' ? 7 : 8), '/');
	return p ? p : "/";
}

int http_route(const char *url, const char *method, int *post)
{
	static const struct { const char *url; int ep, post; } r[] = {
		{"/v1/chat/completions", HTTP_EP_CHAT, 1},
		{"/v1/completions", HTTP_EP_COMPL, 1},
		{"/v1/responses", HTTP_EP_RESP, 1},
		{"/v1/models", HTTP_EP_MODELS, 0},
		{"/health", HTTP_EP_HEALTH, 0},
		{"/metrics", HTTP_EP_METRICS, 0},
		{"/", HTTP_EP_PAGE, 0},
		{"/v1/quorum/status", HTTP_EP_STATUS, 0},
	};

	/* GET /v1/models/{id}: counted with /v1/models */
	if (!strncmp(url, "/v1/models/", 11) && url[11]) {
		*post = 0;
		return !strcmp(method, "GET") || !strcmp(method, "HEAD")
			       ? HTTP_EP_MODELS : -1 - HTTP_EP_MODELS;
	}

	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		if (!strcmp(url, r[i].url)) {
			*post = r[i].post;
			return (*post ? !strcmp(method, "POST")
				      : !strcmp(method, "GET") ||
					!strcmp(method, "HEAD"))
				       ? r[i].ep : -1 - r[i].ep;
		}
	return HTTP_EP_OTHER;
}

/* set by http_close_on_purpose and http_stream_gone, taken by the log
 * line the close causes (in this thread, right after) */
static __thread int closing_on_purpose;

enum MHD_Result http_close_on_purpose(void)
{
	closing_on_purpose = 1;
	return MHD_NO;
}

ssize_t http_stream_gone(void)
{
	closing_on_purpose = 1;
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

void http_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (closing_on_purpose &&
	    (strstr(line, "Application reported internal error") ||
	     strstr(line, "application reported error generating data") ||
	     /* a chunked (HTTP/1.1) stream's, libmicrohttpd 0.9.75 */
	     strstr(line, "application error generating response"))) {
		closing_on_purpose = 0;
		return;
	}
	closing_on_purpose = 0;
	fprintf(stderr, "quorum serve: libmicrohttpd: %s%s", line,
		line[0] && line[strlen(line) - 1] == '\n' ? "" : "\n");
}

enum MHD_Result http_too_big(struct MHD_Connection *mc, gwconn *cn)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "the body is larger than "
		 "http.max_body_bytes (%lld bytes)",
		 (long long)gw.c->http.max_body_bytes);
	return http_send_err(mc, cn, 413, msg, NULL, "request_too_large");
}

enum MHD_Result http_take_body(gwconn *cn, const char *upload,
			       size_t *upload_size)
{
	if (!cn->too_big &&
	    cn->len + *upload_size <= (size_t)gw.c->http.max_body_bytes) {
		char *b = realloc(cn->body, cn->len + *upload_size + 1);

		if (!b)
			return MHD_NO;
		memcpy(b + cn->len, upload, *upload_size);
		cn->len += *upload_size;
		b[cn->len] = '\0';
		cn->body = b;
	} else {
		cn->too_big = 1;
		free(cn->body);
		cn->body = NULL;
		cn->len = 0;
	}
	*upload_size = 0;
	return MHD_YES;
}

void http_common_headers(struct MHD_Response *r, const gwconn *cn)
{
	if (cn->rid[0])
		MHD_add_response_header(r, "x-request-id", cn->rid);
	if (cn->close)
		MHD_add_response_header(r, "Connection", "close");
	if (cn->code == 429 || cn->code == 503) {
		char secs[16];

		/* whole seconds, rounded up: the coordinator's hint when it
		 * gave one, else 1 s (busy) or 2 s (unavailable) */
		snprintf(secs, sizeof(secs), "%u",
			 cn->retry_after_ms ? (cn->retry_after_ms + 999) / 1000
			 : cn->code == 429 ? 1u : 2u);
		MHD_add_response_header(r, "Retry-After", secs);
	}
}

enum MHD_Result http_send_body(struct MHD_Connection *mc, gwconn *cn,
			       int code, const char *type, const char *body,
			       size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ok;

	if (!r)
		return MHD_NO;
	cn->code = code;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	if (code == 401)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
	if (cn->hdr[0])
		MHD_add_response_header(r, cn->hdr[0], cn->hdr[1]);
	http_common_headers(r, cn);
	ok = MHD_queue_response(mc, (unsigned)code, r);
	MHD_destroy_response(r);
	return ok;
}

enum MHD_Result http_send_json(struct MHD_Connection *mc, gwconn *cn,
			       int code, json_t *o)
{
	char *s = o ? client_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	enum MHD_Result ok;

	json_decref(o);
	static const char oom[] = "{\"error\":{\"message\":\"out of memory\","
				  "\"type\":\"server_error\",\"param\":null,"
				  "\"code\":null}}";

	if (!s)
		return http_send_body(mc, cn, 500, "application/json", oom,
				      sizeof(oom) - 1);
	ok = http_send_body(mc, cn, code, "application/json", s, strlen(s));
	free(s);
	return ok;
}

const char *http_error_type(int code)
{
	return code == 401 ? "authentication_error"
	       : code == 429 ? "rate_limit_error"
	       : code >= 500 ? "server_error" : "invalid_request_error";
}

enum MHD_Result http_send_err(struct MHD_Connection *mc, gwconn *cn,
			      int code, const char *msg, const char *param,
			      const char *ecode)
{
	const char *type = http_error_type(code);

	if (!ecode && code < 500)
		ecode = "invalid_request_error";

	if (cn->rec) {
		json_object_set_new(cn->rec, "status", json_string(
			ecode ? ecode : "error"));
		json_object_set_new(cn->rec, "error", json_string(msg));
	}
	return http_send_json(mc, cn, code,
			      openai_error(msg, type, param, ecode));
}

int http_status_code(int st, const char **ecode)
{
	static const struct { int st, http; const char *code; } map[] = {
		{QUORUM__STATUS__STATUS_BAD_REQUEST, 400,
		 "invalid_request_error"},
		/* the prompt (and max_tokens) over the model's context:
		 * OpenAI's 400 */
		{QUORUM__STATUS__STATUS_TOO_LONG, 400,
		 "context_length_exceeded"},
		{QUORUM__STATUS__STATUS_BUSY, 429, "rate_limit_exceeded"},
		{QUORUM__STATUS__STATUS_NO_CAPACITY, 503, "no_capacity"},
		{QUORUM__STATUS__STATUS_WORKER_LOST, 503, "worker_lost"},
		{QUORUM__STATUS__STATUS_INTERNAL, 500, "server_error"},
		{QUORUM__STATUS__STATUS_VERSION_MISMATCH, 502,
		 "version_mismatch"},
		{QUORUM__STATUS__STATUS_TIMEOUT, 504, "timeout"},
		{QUORUM__STATUS__STATUS_CANCELLED, 503, "cancelled"},
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].st == st) {
			*ecode = map[i].code;
			return map[i].http;
		}
	*ecode = "server_error";
	return 500;
}

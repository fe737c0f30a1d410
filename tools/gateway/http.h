/*
 * http — the gateway's HTTP layer over libmicrohttpd: the endpoint table
 * and its routing, a request body taken in up to http.max_body_bytes,
 * and the replies (a body, JSON, an OpenAI-style error) with the status
 * recorded on the connection. Called by every part that answers a
 * request (serve.c routes; cluster.c, metrics.c, completions.c and
 * sse.c reply).
 *
 * Every reply sets cn->code, the status on_done counts; an error reply
 * also marks the request's status-page record.
 */
#ifndef QUORUM_GW_HTTP_H
#define QUORUM_GW_HTTP_H

#include <jansson.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <stddef.h>
#include <sys/types.h>

#include "gateway.h"

enum { HTTP_EP_CHAT, HTTP_EP_COMPL, HTTP_EP_RESP, HTTP_EP_MODELS,
       HTTP_EP_HEALTH, HTTP_EP_METRICS, HTTP_EP_PAGE, HTTP_EP_STATUS,
       HTTP_EP_OTHER, HTTP_N_EP };
/* The endpoints that answer questions (completions.c). */
#define HTTP_EP_ASKS(ep) \
	((ep) == HTTP_EP_CHAT || (ep) == HTTP_EP_COMPL || (ep) == HTTP_EP_RESP)
/* The endpoints' URLs (HTTP_EP_OTHER: "other"), as /metrics labels
 * them. */
extern const char *const http_ep_name[HTTP_N_EP];

/* A request target in absolute form ("http://host/health", RFC 9112
 * 3.2.2, which a server must accept) as its path ("/health"); any other
 * as it is. */
const char *http_origin_form(const char *url);
/* The endpoint of url: HTTP_EP_*, HTTP_EP_OTHER when unknown, or
 * -1 - HTTP_EP_* when the method is not the endpoint's. *post: the
 * endpoint takes POST (else GET or HEAD). */
int http_route(const char *url, const char *method, int *post);

/* A connection this thread closes on purpose, its client gone: the
 * handler returns MHD_NO (http_close_on_purpose) or a stream's reader
 * ends with an error (http_stream_gone). libmicrohttpd then logs the
 * close as the application's error; http_log (the daemon's logger, the
 * first option) leaves that one line out and writes every other message
 * of the library, prefixed. */
enum MHD_Result http_close_on_purpose(void);
ssize_t http_stream_gone(void);
void http_log(void *cls, const char *fmt, va_list ap);

/* The 413 of a body over http.max_body_bytes (its one wording). */
enum MHD_Result http_too_big(struct MHD_Connection *mc, gwconn *cn);
/* Appends an upload chunk to cn's body (*upload_size set to 0). A body
 * over http.max_body_bytes is dropped and cn->too_big set; MHD_NO only
 * when out of memory. */
enum MHD_Result http_take_body(gwconn *cn, const char *upload,
			       size_t *upload_size);

/* The headers of every response: x-request-id, and Retry-After on a
 * 429 (1 s) or 503 (2 s); cn->code set first. */
void http_common_headers(struct MHD_Response *r, const gwconn *cn);

/* Queues a response of len bytes of body (copied). */
enum MHD_Result http_send_body(struct MHD_Connection *mc, gwconn *cn,
			       int code, const char *type, const char *body,
			       size_t len);
/* Queues o as compact JSON and frees it; NULL (out of memory): a 500. */
enum MHD_Result http_send_json(struct MHD_Connection *mc, gwconn *cn,
			       int code, json_t *o);
/* OpenAI's error "type" for an HTTP status code (authentication_error,
 * rate_limit_error, server_error, invalid_request_error): the one
 * mapping, for a reply and for a stream's error event. */
const char *http_error_type(int code);
/* An OpenAI-style error; its type follows from code (http_error_type).
 * param: NULL for none; ecode: OpenAI's code (NULL:
 * invalid_request_error below 500, null from 500). */
enum MHD_Result http_send_err(struct MHD_Connection *mc, gwconn *cn,
			      int code, const char *msg, const char *param,
			      const char *ecode);

/* HTTP code and error code (OpenAI's where it has one, else ours in
 * its style: lowercase) of a reply status. */
int http_status_code(int st, const char **ecode);

#endif

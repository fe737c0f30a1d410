/*
 * auth — the gateway's API keys: the key file (http.api_keys_file) read
 * once at start by cmd_serve, and the Bearer check on_request makes of
 * the POST endpoints, /v1/models and /v1/quorum/status.
 *
 * The file: a regular file of mode 0600 (no group/other bits), one key
 * per line (printable ASCII without spaces, at most 256 bytes), '#'
 * comments and blank lines skipped, at least one key. No key file: every
 * request passes.
 *
 * Admin keys (http.admin_keys_file, same format, read first) are API
 * keys too, and see every request on the status page; another key sees
 * its own requests only (metrics.c filters by the key's number).
 */
#ifndef QUORUM_GW_AUTH_H
#define QUORUM_GW_AUTH_H

#include <microhttpd.h>

/* Reads the keys of path. 0, or -1 with the reason on stderr. */
int auth_load(const char *path);
enum { AUTH_NONE = -1, AUTH_NO_KEYS = -2 };

/* The number (>= 0) of the key the request's "Authorization: Bearer KEY"
 * names, AUTH_NO_KEYS when no keys were loaded, else AUTH_NONE. Every
 * key is compared in full (no early exit). */
int auth_key(struct MHD_Connection *mc);
/* auth_key(mc) != AUTH_NONE */
int auth_ok(struct MHD_Connection *mc);
/* 1 when key (auth_key's) is an admin key. */
int auth_admin(int key);
/* Reads the admin keys of path (before auth_load). 0 or -1 (stderr). */
int auth_load_admin(const char *path);
/* The request's Bearer key when keys were loaded (call it after auth_ok
 * passed: then it is one of them), else NULL. Borrowed from mc. */
const char *auth_bearer(struct MHD_Connection *mc);
/* 1 when keys were loaded (requests need one). */
int auth_required(void);
/* Forgets the keys. */
void auth_free(void);

#endif

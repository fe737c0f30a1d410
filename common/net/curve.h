/*
 * curve — CurveZMQ for the cluster: key files, socket options, and the
 * coordinator's ZAP allowlist.
 *
 * implements: the key file format below (load, and create with O_EXCL for
 * `quorum keygen`), CURVE server/client options on a socket before it
 * binds/connects, and a ZAP handler (ZeroMQ RFC 27) serving two domains
 * from the allowlists of cfg.security.
 *
 * KEY FILE FORMAT (NAME.pub / NAME.key as `quorum keygen -o NAME` writes):
 *   1. text, at most CURVE_FILE_MAX bytes, lines ending in "\n" ("\r\n"
 *      is accepted);
 *   2. lines whose first character is '#' are comments, blank lines are
 *      ignored, spaces/tabs at the ends of a line are ignored;
 *   3. exactly one other line: a 32-byte CURVE key in Z85, 40 characters
 *      of the Z85 alphabet that decode (each 5-character group < 2^32).
 * keygen starts each file with a comment naming its kind (a line that
 * begins with CURVE_PUBLIC_TAG / CURVE_SECRET_TAG); a file carrying the
 * tag of the other kind is refused ("this is a secret key, the allowlist takes public
 * keys"), so a secret key listed by mistake is caught. Secret key files
 * must not be readable by others (mode & 0007 == 0), like ssh keys.
 *
 * ZAP (coordinator only): a REP socket bound at CURVE_ZAP_ENDPOINT in the
 * coordinator's context BEFORE its ROUTER sockets bind; libzmq sends it one
 * request per CURVE handshake on a socket with a ZAP domain. The reply is
 * 200 when the mechanism is CURVE and the client's public key is on the
 * allowlist of that domain (CURVE_DOMAIN_CLIENTS -> security.client_keys,
 * CURVE_DOMAIN_WORKERS -> security.worker_keys), 400 otherwise (a
 * malformed request gets 500). A refused peer's connection carries no
 * message to the ROUTER: it sees nothing at all. Served from the caller's
 * zmq_poll loop (curve_zap_socket + curve_zap_serve): no thread, no lock.
 *
 * Errors: QERR_IO (open/read/write, an existing file for keygen),
 * QERR_FORMAT (not the format above, wrong kind), QERR_RANGE (secret key
 * readable by others, file too large), QERR_MISSING (no key line),
 * QERR_UNSUPPORTED (libzmq built without CURVE), QERR_ARG; every one with
 * a qerr_detail() naming the file.
 */
#ifndef QUORUM_CURVE_H
#define QUORUM_CURVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CURVE_Z85_LEN 40      /* a 32-byte key in Z85 */
#define CURVE_KEY_BYTES 32    /* a key in binary */
#define CURVE_FILE_MAX 4096   /* larger key files are refused */
#define CURVE_ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define CURVE_DOMAIN_CLIENTS "clients"
#define CURVE_DOMAIN_WORKERS "workers"
#define CURVE_PUBLIC_TAG "# quorum CURVE public key"
#define CURVE_SECRET_TAG "# quorum CURVE secret key"

typedef enum curve_kind { CURVE_PUBLIC = 0, CURVE_SECRET = 1 } curve_kind;

/* The security policy (the config's security: section, which holds one;
 * conf/cfg.h reads it from YAML). */
/* One allowlist entry: an inline key or the (resolved) path of a file
 * that holds one. Exactly one of the two is set. A worker_keys entry may
 * be written {key: K, ids: [ID, ...]}: that key may register only those
 * worker ids; a bare key may register any id not bound to another key. */
typedef struct curve_key {
	char z85[CURVE_Z85_LEN + 1]; /* "" when path is set */
	char *path;                    /* owned; NULL for an inline key */
	char **ids;                    /* owned (n_ids); NULL: any id */
	size_t n_ids;
} curve_key;

typedef struct curve_security {
	bool curve;                   /* false */
	/* When curve is true, all four below are REQUIRED (non-empty lists):
	 * the coordinator refuses to start without an allowlist. */
	char *server_public_key_file; /* NULL; resolved path */
	char *server_secret_key_file; /* NULL; resolved path */
	curve_key *client_keys;         /* (n_client_keys) NULL when empty */
	size_t n_client_keys;
	curve_key *worker_keys;         /* (n_worker_keys) */
	size_t n_worker_keys;
	/* A worker's own key pair (read by the worker, not the coordinator);
	 * REQUIRED when curve is true and workers.local > 0. */
	char *worker_public_key_file; /* NULL; resolved path */
	char *worker_secret_key_file; /* NULL; resolved path */
	/* Gateways (quorum serve) that may ask on behalf of their users
	 * (Ask.on_behalf_of): with curve on, the connections whose client
	 * key is one of these (each must also be on client_keys); empty:
	 * none. */
	curve_key *gateway_keys;        /* (n_gateway_keys) NULL when empty */
	size_t n_gateway_keys;
	/* With curve off: a loopback (127.0.0.0/8, ::1) or ipc:// client
	 * connection may ask on behalf of its users (true). */
	bool loopback_gateway;
} curve_security;


/* 1 when s is exactly CURVE_Z85_LEN characters of valid Z85, else 0. */
int curve_z85_ok(const char *s);

/* Reads the key file at path (format above) into z85 (NUL-terminated). */
int curve_key_load(const char *path, curve_kind kind,
		   char z85[CURVE_Z85_LEN + 1]);

/* Same from memory (text[0, len), name for messages); no mode check. */
int curve_key_parse(const char *name, const char *text, size_t len,
		    curve_kind kind, char z85[CURVE_Z85_LEN + 1]);

/* The public key of a secret key (both Z85). */
int curve_public_of(const char *secret, char pub[CURVE_Z85_LEN + 1]);

/* `quorum keygen`: a new key pair into base.key (secret, mode 0600) and
 * base.pub (public, mode 0644), both created with O_EXCL: an existing
 * file is never overwritten (QERR_IO, nothing written). On a failure
 * after the first file was created it is removed. pub (may be NULL)
 * receives the public key. */
int curve_keygen(const char *base, char pub[CURVE_Z85_LEN + 1]);

/* The CURVE options of one socket. Server side (bind): secret + domain.
 * Client side (connect): secret, public (its own) and server. */
typedef struct curve_sock {
	int server;
	char secret[CURVE_Z85_LEN + 1];
	char public_[CURVE_Z85_LEN + 1];  /* client side only */
	char server_key[CURVE_Z85_LEN + 1]; /* client side only */
	const char *domain;               /* server side only (static) */
} curve_sock;

/* Server options from security.server_{public,secret}_key_file: checks
 * the two files hold one key pair (else clients holding the public key
 * could never connect). */
int curve_sock_server(const curve_security *s, const char *domain,
		      curve_sock *out);

/* Client options: the server's public key file, and the client's own
 * secret key file, plus optionally its public key file (checked against
 * the secret; NULL: derived). */
int curve_sock_client(const char *server_pub_file, const char *secret_file,
		      const char *public_file, curve_sock *out);

/* Applies k to a socket that has not bound/connected yet (NULL k: no-op). */
int curve_sock_apply(void *sock, const curve_sock *k);

/* Wipes the keys of k (explicit_bzero). */
void curve_sock_wipe(curve_sock *k);

typedef struct curve_zap curve_zap;

/* Loads both allowlists of s (inline keys and key files; an empty list is
 * refused: no allowlist, no start). Binds nothing. s must outlive the
 * zap (the worker ids of its entries are read, not copied). */
int curve_zap_new(const curve_security *s, curve_zap **out);
/* Binds the ZAP REP socket at CURVE_ZAP_ENDPOINT in ctx: call it before
 * any CURVE server socket of ctx binds. */
int curve_zap_bind(curve_zap *z, void *ctx);
/* Closes the socket (before zmq_ctx_term) and frees; NULL ok. */
void curve_zap_free(curve_zap **z);

/* The REP socket to poll for ZMQ_POLLIN (NULL before curve_zap_bind). */
void *curve_zap_socket(const curve_zap *z);

/* Answers every waiting ZAP request (non-blocking). Returns the number
 * answered. */
int curve_zap_serve(curve_zap *z);

/* 1 when key (CURVE_KEY_BYTES) is on the allowlist of domain, else 0. */
int curve_zap_allowed(const curve_zap *z, const char *domain,
		      const uint8_t *key);

/* 1 when the worker key user (Z85, the ZAP User-Id a CURVE peer is
 * authenticated as) may register worker id: its security.worker_keys
 * entry has no ids, or lists id. */
int curve_zap_id_allowed(const curve_zap *z, const char *user,
			 const char *id);

/* Counters for logs and tests: requests allowed and refused. */
void curve_zap_counts(const curve_zap *z, uint64_t *allowed,
		      uint64_t *refused);

#endif

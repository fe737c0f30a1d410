/*
 * cfg — the cluster configuration (cluster.yaml): parse, validate, dump.
 *
 * implements: a strict reader of one YAML file into a plain struct cfg,
 * libyaml's event API underneath; config/cluster.yaml is the commented
 * example, tests/test_cfg.c pins every error below.
 *
 * The file is UNTRUSTED input. Reading happens in two layers:
 *   1. YAML (the event stream → a small node tree). Refused, with the
 *      position of the offending byte: files over CFG_MAX_BYTES (before
 *      parsing), non-UTF-8 or control characters, YAML syntax errors, tabs
 *      used for indentation, aliases and anchors (no billion laughs),
 *      explicit tags (!!str ...), more than one document, collections
 *      nested deeper than CFG_MAX_DEPTH, more than CFG_MAX_NODES nodes,
 *      mapping keys that are not scalars, an empty file.
 *   2. Schema (the tree → struct cfg). Refused: unknown keys (the message
 *      lists the valid ones), duplicate keys, wrong types, out-of-range
 *      values, missing required keys, and the cross-field rules listed
 *      with the struct below.
 *
 * ERRORS. Every function returns QERR_OK or a qerr code, and on failure
 * qerr_detail() is one line:
 *     <name>:<line>:<column>: <message>
 * with <name> the path as the caller gave it and 1-based line and column
 * (libyaml's marks; columns count characters). Only open/stat/read
 * failures (QERR_IO) have no position: "<name>: <message>".
 *   QERR_IO          cannot open/stat/read, not a regular file
 *   QERR_RANGE       file too large, too many nodes, a number out of its
 *                    range (overflow included), a value not in its set
 *                    (dtype), a cross-field rule broken
 *   QERR_FORMAT      YAML syntax, tabs, bad UTF-8, several documents, too
 *                    deep, unknown/duplicate key, wrong type, a malformed
 *                    string value (cluster name, endpoint, Z85 key)
 *   QERR_UNSUPPORTED aliases, anchors, explicit tags
 *   QERR_MISSING     empty file, a required key absent (reported at the
 *                    mapping that lacks it), CURVE on without allowlists
 *                    (or without the worker key pair when workers.local
 *                    > 0)
 *   QERR_NOMEM       out of memory
 *   QERR_ARG         NULL arguments
 *
 * VALUE SYNTAX (YAML 1.1's implicit typing is deliberately NOT followed):
 *   integer  a plain (unquoted) scalar of decimal digits with an optional
 *            sign; no leading zeros (YAML 1.1 would read 010 as octal), no
 *            0x/0o, no '_'; overflow is QERR_RANGE.
 *   float    a plain scalar of [0-9+-.eE] read by strtod in full; must be
 *            finite. Integers are accepted.
 *   boolean  true/false/yes/no, case-insensitive, unquoted.
 *   string   any scalar, plain or quoted; a plain empty value, '~' or
 *            'null' is "no value" (allowed only where the default is NULL).
 *   A section left empty ("kv:" with nothing under it) keeps its defaults;
 *   so does an empty key list.
 *
 * PATHS (model.path, the key files, key-list entries that are files):
 * relative paths are resolved against the directory of the config file
 * (cfg_load: the file's real directory, so the result is absolute;
 * cfg_parse: the directory part of <name>, lexically, "." left out). They
 * are not opened here: whoever reads them reports their errors.
 *
 * Z85 KEYS (security.client_keys / worker_keys entries): a string of
 * exactly 40 characters from the Z85 alphabet is a CURVE public key and
 * must decode (each 5-character group < 2^32); any other string is the
 * path of a file holding one, except a string of 30..50 Z85 characters
 * with at least two of :+=^!*?&<>()[]{}@%$# (rare in file names, nearly
 * certain in keys), which is refused as a mistyped key. A path that is
 * itself 40 Z85 characters long must be written at another length ("./"
 * in front, or a doubled '/').
 *
 * ENCODING: UTF-8 only; a leading UTF-8 BOM is skipped (and not counted
 * in columns); UTF-16 is refused.
 */
#ifndef QUORUM_CFG_H
#define QUORUM_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "net/curve.h"
#include "sc/params.h"

#define CFG_MAX_BYTES (1u << 20) /* larger files are refused unread */
#define CFG_MAX_DEPTH 16         /* nested collections, the root is 1 */
#define CFG_MAX_NODES 65536      /* YAML nodes (scalars + collections) */
#define CFG_NAME_MAX 32          /* cluster.name: [A-Za-z0-9_-]{1,32} */
#define CFG_ENDPOINT_MAX 255     /* tcp://, ipc:// or inproc:// */
/* What an endpoint may be, as its errors say it. */
#define CFG_ENDPOINT_RULE "tcp://HOST:PORT with PORT 1..65535, ipc:// or " \
	"inproc://, at most 255 characters, no spaces"

/* The values are enum kv_dtype's and the wire's (Register.kv_dtype). */
typedef enum cfg_dtype {
	CFG_DTYPE_F32 = 0,
	CFG_DTYPE_F16 = 1,
	CFG_DTYPE_Q8_0 = 2,
} cfg_dtype;


/*
 * The effective configuration. Defaults (cfg_defaults) on the right;
 * ranges are inclusive. Strings in fixed arrays are always NUL-terminated;
 * char * members are owned by the cfg and NULL when not set.
 */
typedef struct cfg_model {
	char *path;           /* REQUIRED; resolved (see PATHS) */
} cfg_model;

typedef struct cfg_cluster {
	char name[CFG_NAME_MAX + 1]; /* REQUIRED; [A-Za-z0-9_-]{1,32} (shm names) */
} cfg_cluster;

typedef struct cfg_coordinator {
	/* "tcp://127.0.0.1:7700" / "tcp://127.0.0.1:7701"; scheme tcp://
	 * (HOST:PORT, PORT 1..65535 in decimal), ipc:// or inproc://, no
	 * whitespace; the two must differ. */
	char client_endpoint[CFG_ENDPOINT_MAX + 1];
	char worker_endpoint[CFG_ENDPOINT_MAX + 1];
} cfg_coordinator;


typedef struct cfg_kv {
	int block_tokens;    /* 16; 1..4096 tokens per KV block */
	int blocks;          /* 4096; 1..KV_MAX_BLOCKS (16,777,216) blocks
			      * in a worker's pool */
	cfg_dtype dtype;     /* f16; "f16", "f32" or "q8_0" (half the
			      * bytes of f16 per block) */
	bool free_windows;   /* true; sliding-window models: samples
			      * release windowed layers' rows no window
			      * reaches (sc_engine_params.free_windows) */
} cfg_kv;

/* The defaults and limits of these are sc/params' (SC_PARAMS_DEFAULTS,
 * sc_params_setting), and so are the messages refusing them. */
typedef struct cfg_sampling {
	/* SC_PARAMS_DEFAULTS, then the section's keys (cfg.c's table; n
	 * also <= limits.max_n, stop from stop_name, stop_waves applied to
	 * every request by the coordinator's dispatch). A request starts
	 * from these. */
	sc_params p;
	char *stop_name;     /* "stop:" as written; NULL = the default */
	/* a constraint every request without one follows (text/constrain):
	 * a GBNF file or a JSON schema file (resolved paths; one at most),
	 * and the grammar text made of it, which p.grammar borrows */
	char *grammar_file, *json_schema_file;
	char *grammar;
} cfg_sampling;

typedef struct cfg_prompt {
	char *system;        /* NULL = the built-in default (prompt_build);
			      * "" = no system prompt */
	char *template_name; /* "template:": NULL = from the model's
			      * tokenizer.chat_template, else a family
			      * name (PROMPT_FAMILY_LIST) */
	char *think_name;    /* "think:" as written: on | off | NULL */
	char *effort_name;   /* "reasoning_effort:" as written: low |
			      * medium | high | NULL (harmony templates;
			      * not together with think:) */
	int think;           /* from them: enum prompt_think;
			      * PROMPT_THINK_DEFAULT (-1) when absent */
} cfg_prompt;

typedef struct cfg_limits {
	int max_n;               /* 64; >= 1 samples per request */
	int max_prompt_tokens;   /* 4096; >= 1 */
	int queue_depth;         /* 64; >= 1 queued requests */
	int request_timeout_ms;  /* 120000; >= 1 */
	int copy_step_timeout_ms; /* 60000; >= 1: a step of a cross-host KV
				   * copy (a chunk asked of the holder, or
				   * sent to the importer) unanswered this
				   * long fails the copy */
	int64_t max_message_bytes; /* 16 MiB; 1 KiB..1 GiB */
	/* Per client (a connection, or a gateway's user: Ask.on_behalf_of):
	 * requests held at most (0: only the fair share of queue_depth), and
	 * tokens generated per minute (0: no limit; a token bucket of this
	 * size refilled continuously; over it, BUSY with retry_after_ms). */
	int per_client_in_flight;  /* 0; 0..INT_MAX */
	int64_t tokens_per_minute; /* 0; 0..2^40 */
} cfg_limits;

typedef struct cfg_heartbeat {
	int interval_ms;      /* 1000; >= 1 */
	int liveness;         /* 3; >= 1 missed heartbeats before a peer is dead */
	int reconnect_min_ms; /* 1000; >= 1 */
	int reconnect_max_ms; /* 32000; >= reconnect_min_ms */
} cfg_heartbeat;

typedef struct cfg_workers {
	int local;           /* 0; 0..256 workers the coordinator spawns */
	int threads;         /* 1; 1..1024 threads per local worker */
	int slots;           /* 32; 1..4096 decode slots per worker: forks
			      * live in one merged decode round at most */
	int prefill_tokens;  /* 64; 1..65536 prompt tokens a worker prefills
			      * per decode round */
	bool merge;          /* true: jobs of all requests share rounds;
			      * false: one decode job at a time */
} cfg_workers;

typedef struct cfg_prefix_cache {
	int entries;         /* 16; 0..1048576; 0 = off */
	/* false: with CURVE on, a request reuses only prefixes its own
	 * client key cached (cache statistics would tell one client what
	 * another asked); true: every client's. CURVE off: no client
	 * identities, always shared. */
	int share_across_clients;
} cfg_prefix_cache;

/* The HTTP gateway (`quorum serve`, docs/http.md). */
#define CFG_LISTEN_MAX 63
typedef struct cfg_http {
	/* "127.0.0.1:8080"; HOST:PORT with HOST an IPv4 address or a
	 * bracketed IPv6 one ("[::1]:8080"), PORT 0..65535 (0: any free
	 * port, printed at start). */
	char listen[CFG_LISTEN_MAX + 1];
	/* NULL: no API keys (anyone who reaches the port may ask). Else a
	 * file, mode 0600 (no group/other bits), one key per line ('#'
	 * comments, blank lines ignored); requests need
	 * "Authorization: Bearer KEY". Resolved path. */
	char *api_keys_file;
	/* The gateway's own CURVE secret key file (`quorum keygen`; its .pub
	 * must be on security.client_keys). REQUIRED when security.curve is
	 * true and the gateway runs; checked by the gateway. */
	char *client_key_file;
	int64_t max_body_bytes;  /* 1 MiB; 1 KiB..256 MiB: larger bodies get
				  * 413 before they are read in full */
	int max_connections;     /* 512; 1..65536 HTTP connections at once */
	int max_in_flight;       /* 128; 1..65536 completions at once; more
				  * get 429 */
	/* The JSON of a body, pre-scanned before it is parsed: more values
	 * (objects, arrays, strings, numbers, literals) get 413, deeper
	 * nesting 400. */
	int max_json_values;     /* 4096; 16..1048576 */
	int max_json_depth;      /* 32; 2..1024 */
	/* Samples voted over for a request without n (and without the
	 * "samples" extension); 0: sampling.n. 0..65536 */
	int samples;
	/* Model names taken as the served one besides its id (the file's
	 * name less .gguf): names separated by commas or spaces; NULL:
	 * none (another name gets 404 model_not_found). */
	char *model_aliases;
	/* Connection deadlines, from the connection's accept: the request
	 * line and headers complete, then the body; a connection past one
	 * is closed (slow clients). ms, 100..3600000. */
	int header_timeout_ms;   /* 10000 */
	int body_timeout_ms;     /* 30000 */
	int max_connections_per_ip; /* 128; 1..65536 */
	int threads;             /* 4; 1..256: the daemon's thread pool */
	/* Admin keys (a file as api_keys_file, which must be set too; each
	 * also an API key) that see every request on the status page; NULL:
	 * none. Other keys see their own requests only. */
	char *admin_keys_file;
	/* false: a gateway without API keys shows no questions or answers
	 * on its status page (anyone could read them); true: all. */
	bool show_questions;
} cfg_http;

typedef struct cfg {
	cfg_model model;
	cfg_cluster cluster;
	cfg_coordinator coordinator;
	curve_security security;
	cfg_kv kv;
	cfg_sampling sampling;
	cfg_prompt prompt;
	cfg_limits limits;
	cfg_heartbeat heartbeat;
	cfg_workers workers;
	cfg_prefix_cache prefix_cache;
	cfg_http http;
	/* where the file set its keys (cfg_where): the name it was read
	 * by, and per key of cfg.c's table its value's line and column
	 * ({0, 0}: not in the file); NULL in a cfg not read from a file */
	char *name;
	int (*marks)[2];
} cfg;

/* Sets every field to its default; model.path and cluster.name are empty
 * (NULL / ""), as are all owned pointers. Does not free anything. */
void cfg_defaults(cfg *c);

/* Reads and validates the file at path (refused unread when larger than
 * CFG_MAX_BYTES). On success *out is a new cfg the caller frees with
 * cfg_free(); on failure *out is NULL and qerr_detail() says where. */
int cfg_load(const char *path, cfg **out);

/* Same from memory: text[0 .. len) (need not be NUL-terminated; may hold
 * NULs, which are refused); name is used in messages and for resolving
 * relative paths. Thread-safe; fine for fuzzing. */
int cfg_parse(const char *name, const char *text, size_t len, cfg **out);

/* Where key sect.key of c was written, for a message about its value:
 * "<name>:<line>:<column>", or "<name>" when the file leaves the key to
 * its default, "" for a cfg not read from a file; into buf (cap bytes),
 * returned. */
const char *cfg_where(const cfg *c, const char *sect, const char *key,
		      char *buf, size_t cap);

/* The sampling defaults against the model (its context length and
 * vocabulary size), which the file alone cannot tell: QERR_RANGE naming
 * the file, the key's place (cfg_where), the key, its value and the
 * model's limit when sampling.max_new_tokens
 * is over the context or a sampling.logit_bias token is outside the
 * vocabulary (every request relying on the default would be refused).
 * The coordinator checks this at start, --check-config included. */
int cfg_check_model(const cfg *c, int ctx_len, int vocab);

/* Frees a cfg from cfg_load/cfg_parse and sets *c to NULL; NULL ok. */
void cfg_free(cfg **c);

/* Prints the effective configuration as YAML that cfg_parse() accepts
 * (every key, defaults included; strings double-quoted and escaped). */
void cfg_dump(const cfg *c, FILE *f);

/* The config's rule on an endpoint (CFG_ENDPOINT_RULE) for one given
 * elsewhere (worker --connect): QERR_FORMAT with a detail naming what and
 * ep when ep breaks it. */
int cfg_endpoint_check(const char *what, const char *ep);
/* The config's rule on http.listen (HOST:PORT, an IPv4 address or [IPv6],
 * the port in decimal without leading zeros) for one given elsewhere
 * (serve --listen): QERR_FORMAT naming what and s when s breaks it. */
int cfg_listen_check(const char *what, const char *s);

/* "f32" / "f16" ("?" otherwise). */
const char *cfg_dtype_name(cfg_dtype t);

#endif

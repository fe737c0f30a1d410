/*
 * cfg — reads cluster.yaml into struct cfg (see cfg.h for the rules):
 * libyaml's events into a small node tree with positions, then a table of
 * known keys per section, each value parsed and range-checked, every
 * error reported as file:line:column. Callers: coordinator/, worker/,
 * `quorum serve`, tests and the cfg fuzzer.
 */
#include "conf/cfg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "infer/kv.h"
#include "text/constrain.h"
#include "text/prompt.h"
#include "qerr.h"
#include "sc/params.h"
#include "net/wire.h"

/* ---- the node tree (layer 1) -------------------------------------------- */

enum nkind { N_SCALAR, N_MAP, N_SEQ };

typedef struct node node;
struct node {
	enum nkind kind;
	int line, col;      /* 1-based start mark */
	char *s;            /* scalar value (NUL-terminated, may hold NULs) */
	size_t len;
	bool plain;         /* unquoted scalar */
	node **kids;        /* map: key, value, key, value...; seq: items */
	size_t n, cap;
};

typedef struct ctx {
	const char *name;   /* as given, for messages */
	const char *text;
	size_t len;
	const char *basedir; /* NULL: leave relative paths as they are */
	yaml_parser_t p;
	size_t nodes;
	cfg *c;
	const node **set;   /* (N_FIELDS) value node of each field, or NULL */
	const node *root;
} ctx;

static int perr(const ctx *x, int line, int col, int code, const char *fmt,
		...) __attribute__((format(printf, 5, 6)));

static int perr(const ctx *x, int line, int col, int code, const char *fmt,
		...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return qerr_fail(code, "%s:%d:%d: %s", x->name, line, col, msg);
}

static int nerr(const ctx *x, const node *n, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int nerr(const ctx *x, const node *n, int code, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return perr(x, n->line, n->col, code, "%s", msg);
}

static void node_free(node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		node_free(n->kids[i]);
	free(n->kids);
	free(n->s);
	free(n);
}

static int node_add(node *parent, node *kid)
{
	if (parent->n == parent->cap) {
		size_t cap = parent->cap ? parent->cap * 2 : 8;
		node **k = realloc(parent->kids, cap * sizeof(*k));

		if (!k)
			return QERR_NOMEM;
		parent->kids = k;
		parent->cap = cap;
	}
	parent->kids[parent->n++] = kid;
	return QERR_OK;
}

/* Line and column (1-based, columns in characters) of a byte offset; for
 * reader errors, which libyaml reports as an offset only. */
static void offset_mark(const ctx *x, size_t off, int *line, int *col)
{
	int l = 1, c = 1;

	if (off > x->len)
		off = x->len;
	for (size_t i = 0; i < off; i++) {
		unsigned char b = (unsigned char)x->text[i];

		if (b == '\n') {
			l++;
			c = 1;
		} else if ((b & 0xc0) != 0x80) {
			c++;
		}
	}
	*line = l;
	*col = c;
}

/* Turns libyaml's error state into our message. */
static int yaml_err(ctx *x)
{
	yaml_parser_t *p = &x->p;
	int line, col;

	if (p->error == YAML_MEMORY_ERROR)
		return qerr_fail(QERR_NOMEM, "%s: out of memory parsing YAML",
				 x->name);
	if (p->error == YAML_READER_ERROR) {
		offset_mark(x, p->problem_offset, &line, &col);
		if (p->problem && strstr(p->problem, "UTF-8"))
			return perr(x, line, col, QERR_FORMAT,
				    "not valid UTF-8: %s (byte 0x%02x)",
				    p->problem, p->problem_value & 0xff);
		return perr(x, line, col, QERR_FORMAT, "invalid character: %s",
			    p->problem ? p->problem : "unreadable input");
	}
	line = (int)p->problem_mark.line + 1;
	col = (int)p->problem_mark.column + 1;
	if ((p->problem_mark.index < x->len &&
	     x->text[p->problem_mark.index] == '\t') ||
	    (p->problem && strstr(p->problem, "tab")))
		return perr(x, line, col, QERR_FORMAT,
			    "tab character used for indentation (YAML indents "
			    "with spaces only)");
	if (p->context)
		return perr(x, line, col, QERR_FORMAT,
			    "YAML syntax error: %s (%s started at %d:%d)",
			    p->problem ? p->problem : "invalid YAML", p->context,
			    (int)p->context_mark.line + 1,
			    (int)p->context_mark.column + 1);
	return perr(x, line, col, QERR_FORMAT, "YAML syntax error: %s",
		    p->problem ? p->problem : "invalid YAML");
}

static int next_event(ctx *x, yaml_event_t *e)
{
	if (!yaml_parser_parse(&x->p, e))
		return yaml_err(x);
	return QERR_OK;
}

static int ev_line(const yaml_event_t *e)
{
	return (int)e->start_mark.line + 1;
}

static int ev_col(const yaml_event_t *e)
{
	return (int)e->start_mark.column + 1;
}

/* Refuses what the safe subset excludes; e is a node-starting event. */
static int check_node_event(ctx *x, const yaml_event_t *e, int depth)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;

	switch (e->type) {
	case YAML_ALIAS_EVENT:
		return perr(x, ev_line(e), ev_col(e), QERR_UNSUPPORTED,
			    "aliases ('*%s') are not allowed in the "
			    "configuration", (const char *)e->data.alias.anchor);
	case YAML_SCALAR_EVENT:
		anchor = e->data.scalar.anchor;
		tag = e->data.scalar.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = e->data.mapping_start.anchor;
		tag = e->data.mapping_start.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = e->data.sequence_start.anchor;
		tag = e->data.sequence_start.tag;
		break;
	default:
		return perr(x, ev_line(e), ev_col(e), QERR_FORMAT,
			    "unexpected YAML event");
	}
	if (anchor)
		return perr(x, ev_line(e), ev_col(e), QERR_UNSUPPORTED,
			    "anchors ('&%s') are not allowed in the "
			    "configuration", (const char *)anchor);
	if (tag)
		return perr(x, ev_line(e), ev_col(e), QERR_UNSUPPORTED,
			    "explicit tags ('%s') are not allowed in the "
			    "configuration", (const char *)tag);
	if (e->type != YAML_SCALAR_EVENT && depth > CFG_MAX_DEPTH)
		return perr(x, ev_line(e), ev_col(e), QERR_FORMAT,
			    "nesting deeper than %d levels", CFG_MAX_DEPTH);
	if (++x->nodes > CFG_MAX_NODES)
		return perr(x, ev_line(e), ev_col(e), QERR_RANGE,
			    "more than %d YAML nodes", CFG_MAX_NODES);
	return QERR_OK;
}

/* Builds the node starting with event *e (consumed); depth counts the
 * collections this node sits in, plus one. */
static int build(ctx *x, yaml_event_t *e, int depth, node **out)
{
	yaml_event_t k;
	yaml_event_type_t end;
	node *n;
	int rc;

	*out = NULL;
	rc = check_node_event(x, e, depth);
	if (rc)
		goto done;
	n = calloc(1, sizeof(*n));
	if (!n) {
		rc = qerr_fail(QERR_NOMEM, "%s: out of memory", x->name);
		goto done;
	}
	n->line = ev_line(e);
	n->col = ev_col(e);
	if (e->type == YAML_SCALAR_EVENT) {
		n->kind = N_SCALAR;
		n->len = e->data.scalar.length;
		n->plain = e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		n->s = malloc(n->len + 1);
		if (!n->s) {
			node_free(n);
			rc = qerr_fail(QERR_NOMEM, "%s: out of memory", x->name);
			goto done;
		}
		memcpy(n->s, e->data.scalar.value, n->len);
		n->s[n->len] = '\0';
		*out = n;
		goto done;
	}
	n->kind = e->type == YAML_MAPPING_START_EVENT ? N_MAP : N_SEQ;
	end = n->kind == N_MAP ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
	for (;;) {
		node *kid;

		rc = next_event(x, &k);
		if (rc)
			break;
		if (k.type == end) {
			yaml_event_delete(&k);
			break;
		}
		if (n->kind == N_MAP && n->n % 2 == 0 &&
		    k.type != YAML_SCALAR_EVENT && k.type != YAML_ALIAS_EVENT) {
			rc = perr(x, ev_line(&k), ev_col(&k), QERR_FORMAT,
				  "mapping keys must be scalars, not %s",
				  k.type == YAML_MAPPING_START_EVENT
					  ? "mappings" : "sequences");
			yaml_event_delete(&k);
			break;
		}
		rc = build(x, &k, depth + 1, &kid);
		if (rc)
			break;
		if (node_add(n, kid)) {
			node_free(kid);
			rc = qerr_fail(QERR_NOMEM, "%s: out of memory", x->name);
			break;
		}
	}
	if (rc)
		node_free(n);
	else
		*out = n;
done:
	yaml_event_delete(e);
	return rc;
}

/* The whole stream → the root node (NULL for an empty document). */
static int read_tree(ctx *x, node **root)
{
	yaml_event_t e;
	int rc;

	*root = NULL;
	rc = next_event(x, &e); /* STREAM-START */
	if (rc)
		return rc;
	yaml_event_delete(&e);
	rc = next_event(x, &e);
	if (rc)
		return rc;
	if (e.type == YAML_STREAM_END_EVENT) {
		yaml_event_delete(&e);
		return QERR_OK;
	}
	yaml_event_delete(&e); /* DOCUMENT-START */
	rc = next_event(x, &e);
	if (rc)
		return rc;
	rc = build(x, &e, 1, root);
	if (rc)
		return rc;
	rc = next_event(x, &e); /* DOCUMENT-END */
	if (rc)
		goto fail;
	yaml_event_delete(&e);
	rc = next_event(x, &e);
	if (rc)
		goto fail;
	if (e.type != YAML_STREAM_END_EVENT) {
		rc = perr(x, ev_line(&e), ev_col(&e), QERR_FORMAT,
			  "a second YAML document; the configuration must be "
			  "a single document");
		yaml_event_delete(&e);
		goto fail;
	}
	yaml_event_delete(&e);
	return QERR_OK;
fail:
	node_free(*root);
	*root = NULL;
	return rc;
}

/* ---- the schema (layer 2) ----------------------------------------------- */

enum ftype {
	F_PATH,     /* char *, resolved; nullable */
	F_STR,      /* char *; nullable */
	F_NAME,     /* char[CFG_NAME_MAX + 1] */
	F_ENDPOINT, /* char[CFG_ENDPOINT_MAX + 1] */
	F_BOOL,     /* bool */
	F_INT,      /* int in [min, max] */
	F_I64,      /* int64_t in [min, max] */
	F_U64,      /* uint64_t, any */
	F_SC,       /* a sampling setting (sc/params: its limits and
		     * message), its id in min: int, float or uint64_t */
	F_DTYPE,    /* cfg_dtype */
	F_KEYS,     /* curve_key * + size_t count right after it */
	F_LISTEN,   /* char[CFG_LISTEN_MAX + 1]: HOST:PORT */
};

enum { F_REQ = 1 };

typedef struct field {
	const char *sect;
	const char *key;
	enum ftype t;
	size_t off;
	int64_t min, max;
	int flags;
} field;

#define OFF(m) offsetof(cfg, m)
#define FI(s, k, lo, hi) {#s, #k, F_INT, OFF(s.k), lo, hi, 0}
#define FS(k, m, id) {"sampling", #k, F_SC, OFF(sampling.p.m), id, 0, 0}

static const field fields[] = {
	{"model", "path", F_PATH, OFF(model.path), 0, 0, F_REQ},
	{"cluster", "name", F_NAME, OFF(cluster.name), 0, 0, F_REQ},
	{"coordinator", "client_endpoint", F_ENDPOINT,
	 OFF(coordinator.client_endpoint), 0, 0, 0},
	{"coordinator", "worker_endpoint", F_ENDPOINT,
	 OFF(coordinator.worker_endpoint), 0, 0, 0},
	{"security", "curve", F_BOOL, OFF(security.curve), 0, 0, 0},
	{"security", "server_public_key_file", F_PATH,
	 OFF(security.server_public_key_file), 0, 0, 0},
	{"security", "server_secret_key_file", F_PATH,
	 OFF(security.server_secret_key_file), 0, 0, 0},
	/* F_KEYS: min is the offset of the entry count */
	{"security", "client_keys", F_KEYS, OFF(security.client_keys),
	 OFF(security.n_client_keys), 0, 0},
	{"security", "worker_keys", F_KEYS, OFF(security.worker_keys),
	 OFF(security.n_worker_keys), 0, 0},
	{"security", "gateway_keys", F_KEYS, OFF(security.gateway_keys),
	 OFF(security.n_gateway_keys), 0, 0},
	{"security", "loopback_gateway", F_BOOL,
	 OFF(security.loopback_gateway), 0, 0, 0},
	{"security", "worker_public_key_file", F_PATH,
	 OFF(security.worker_public_key_file), 0, 0, 0},
	{"security", "worker_secret_key_file", F_PATH,
	 OFF(security.worker_secret_key_file), 0, 0, 0},
	FI(kv, block_tokens, 1, 4096),
	/* a pool's block ids are 24 bits: more would start every worker
	 * only to have it refuse the pool */
	FI(kv, blocks, 1, KV_MAX_BLOCKS),
	{"kv", "dtype", F_DTYPE, OFF(kv.dtype), 0, 0, 0},
	{"kv", "free_windows", F_BOOL, OFF(kv.free_windows), 0, 0, 0},
	FS(n, n, SC_S_N),
	FS(temperature, sp.temperature, SC_S_TEMPERATURE),
	FS(top_k, sp.top_k, SC_S_TOP_K),
	FS(top_p, sp.top_p, SC_S_TOP_P),
	FS(max_new_tokens, max_new, SC_S_MAX_NEW_TOKENS),
	FS(seed, seed, SC_S_SEED),
	{"sampling", "stop", F_STR, OFF(sampling.stop_name), 0, 0, 0},
	{"sampling", "grammar_file", F_PATH, OFF(sampling.grammar_file), 0, 0,
	 0},
	{"sampling", "json_schema_file", F_PATH, OFF(sampling.json_schema_file),
	 0, 0, 0},
	FS(stop_waves, stop_waves, SC_S_STOP_WAVES),
	FS(answer, answer, SC_S_ANSWER),
	FS(min_p, sp.min_p, SC_S_MIN_P),
	FS(presence_penalty, presence_penalty, SC_S_PRESENCE_PENALTY),
	FS(frequency_penalty, frequency_penalty, SC_S_FREQUENCY_PENALTY),
	FS(logit_bias, logit_bias, SC_S_LOGIT_BIAS),
	{"prompt", "system", F_STR, OFF(prompt.system), 0, 0, 0},
	{"prompt", "template", F_STR, OFF(prompt.template_name), 0, 0, 0},
	{"prompt", "think", F_STR, OFF(prompt.think_name), 0, 0, 0},
	{"prompt", "reasoning_effort", F_STR, OFF(prompt.effort_name), 0, 0,
	 0},
	FI(limits, max_n, 1, INT_MAX),
	FI(limits, max_prompt_tokens, 1, INT_MAX),
	FI(limits, queue_depth, 1, INT_MAX),
	FI(limits, request_timeout_ms, 1, INT_MAX),
	FI(limits, copy_step_timeout_ms, 1, INT_MAX),
	{"limits", "max_message_bytes", F_I64, OFF(limits.max_message_bytes),
	 1024, (int64_t)1 << 30, 0},
	FI(limits, per_client_in_flight, 0, INT_MAX),
	{"limits", "tokens_per_minute", F_I64, OFF(limits.tokens_per_minute),
	 0, (int64_t)1 << 40, 0},
	FI(heartbeat, interval_ms, 1, INT_MAX),
	FI(heartbeat, liveness, 1, INT_MAX),
	FI(heartbeat, reconnect_min_ms, 1, INT_MAX),
	FI(heartbeat, reconnect_max_ms, 1, INT_MAX),
	FI(workers, local, 0, 256),
	FI(workers, threads, 1, 1024),
	FI(workers, slots, 1, 4096),
	FI(workers, prefill_tokens, 1, 4096),
	{"workers", "merge", F_BOOL, OFF(workers.merge), 0, 0, 0},
	FI(prefix_cache, entries, 0, 1 << 20),
	{"prefix_cache", "share_across_clients", F_BOOL,
	 OFF(prefix_cache.share_across_clients), 0, 0, 0},
	{"http", "listen", F_LISTEN, OFF(http.listen), 0, 0, 0},
	{"http", "api_keys_file", F_PATH, OFF(http.api_keys_file), 0, 0, 0},
	{"http", "client_key_file", F_PATH, OFF(http.client_key_file), 0, 0, 0},
	{"http", "max_body_bytes", F_I64, OFF(http.max_body_bytes), 1024,
	 (int64_t)256 << 20, 0},
	FI(http, max_connections, 1, 65536),
	FI(http, max_in_flight, 1, 65536),
	FI(http, max_json_values, 16, 1 << 20),
	FI(http, max_json_depth, 2, 1024),
	FI(http, samples, 0, 65536),
	{"http", "model_aliases", F_STR, OFF(http.model_aliases), 0, 0, 0},
	FI(http, header_timeout_ms, 100, 3600000),
	FI(http, body_timeout_ms, 100, 3600000),
	FI(http, max_connections_per_ip, 1, 65536),
	FI(http, threads, 1, 256),
	{"http", "admin_keys_file", F_PATH, OFF(http.admin_keys_file), 0, 0, 0},
	{"http", "show_questions", F_BOOL, OFF(http.show_questions), 0, 0, 0},
};

#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

/* Top-level keys in file order; model and cluster are required. */
static const char *const sections[] = {
	"model", "cluster", "coordinator", "security", "kv", "sampling",
	"prompt", "limits", "heartbeat", "workers", "prefix_cache", "http",
};

#define N_SECTIONS (sizeof(sections) / sizeof(sections[0]))

static bool sect_required(const char *s)
{
	return !strcmp(s, "model") || !strcmp(s, "cluster");
}

static int field_index(const char *sect, const char *key)
{
	for (size_t i = 0; i < N_FIELDS; i++)
		if (!strcmp(fields[i].sect, sect) && !strcmp(fields[i].key, key))
			return (int)i;
	return -1;
}

/* A short printable rendering of a scalar for messages. */
static const char *show(const node *n, char *buf, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n->len && o + 4 < cap; i++) {
		unsigned char b = (unsigned char)n->s[i];

		if (i == 40) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		buf[o++] = (b >= 0x20 && b < 0x7f) ? (char)b : '?';
	}
	buf[o] = '\0';
	return buf;
}

static const char *kind_name(const node *n)
{
	return n->kind == N_MAP ? "a mapping" : "a sequence";
}

static bool is_null(const node *n)
{
	return n->kind == N_SCALAR && n->plain &&
	       (n->len == 0 || !strcmp(n->s, "~") || !strcmp(n->s, "null") ||
		!strcmp(n->s, "Null") || !strcmp(n->s, "NULL"));
}

/* "got 'abc'" / "got a quoted string" / "got a mapping" / ... */
static const char *got(const node *n, char *buf, size_t cap)
{
	char v[64];

	if (n->kind != N_SCALAR)
		snprintf(buf, cap, "got %s", kind_name(n));
	else if (is_null(n))
		snprintf(buf, cap, "got an empty value");
	else if (!n->plain)
		snprintf(buf, cap, "got a quoted string \"%s\"",
			 show(n, v, sizeof(v)));
	else
		snprintf(buf, cap, "got '%s'", show(n, v, sizeof(v)));
	return buf;
}

/* Decimal integer: [+-]?(0|[1-9][0-9]*). Sets *neg and *mag. Returns 0,
 * -1 (not an integer) or -2 (overflows uint64). */
static int parse_dec(const char *s, size_t len, bool *neg, uint64_t *mag)
{
	size_t i = 0;
	uint64_t v = 0;

	*neg = false;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		*neg = s[i++] == '-';
	if (i == len)
		return -1;
	if (s[i] == '0' && i + 1 < len)
		return -1;
	for (; i < len; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return -1;
		d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -2;
		v = v * 10 + d;
	}
	*mag = v;
	return 0;
}

static bool looks_float(const node *n)
{
	bool digit = false;

	if (!n->plain || n->len == 0)
		return false;
	for (size_t i = 0; i < n->len; i++) {
		char ch = n->s[i];

		if (ch >= '0' && ch <= '9')
			digit = true;
		else if (!strchr("+-.eE", ch) || ch == '\0')
			return false;
	}
	return digit;
}

/* A plain scalar that strtod reads in full as a finite or infinite number
 * (decimal digits, sign, point, exponent only: no hex, nan or inf). */
static bool full_float(const node *v, double *d)
{
	char *end;

	if (!looks_float(v))
		return false;
	*d = strtod(v->s, &end);
	return end == v->s + v->len;
}

static int want_int(ctx *x, const field *f, const node *v, int64_t min,
		    int64_t max, int64_t *out)
{
	char g[120];
	bool neg;
	uint64_t mag;
	double d;
	int r;

	if (v->kind != N_SCALAR || !v->plain || is_null(v))
		return nerr(x, v, QERR_FORMAT, "%s.%s: expected an integer, %s",
			    f->sect, f->key, got(v, g, sizeof(g)));
	r = parse_dec(v->s, v->len, &neg, &mag);
	if (r == -1 && full_float(v, &d) && strpbrk(v->s, ".eE"))
		return nerr(x, v, QERR_FORMAT,
			    "%s.%s: expected an integer, got a float '%s'",
			    f->sect, f->key, show(v, g, sizeof(g)));
	if (r == -1)
		return nerr(x, v, QERR_FORMAT,
			    "%s.%s: expected a decimal integer%s, %s", f->sect,
			    f->key, full_float(v, &d)
					    ? " without leading zeros" : "",
			    got(v, g, sizeof(g)));
	if (r == -2 || (!neg && mag > INT64_MAX) ||
	    (neg && mag > (uint64_t)INT64_MAX + 1))
		return nerr(x, v, QERR_RANGE,
			    "%s.%s: integer '%s' overflows", f->sect, f->key,
			    show(v, g, sizeof(g)));
	*out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	if (*out < min || *out > max) {
		if (*out < min && max >= INT_MAX)
			return nerr(x, v, QERR_RANGE,
				    "%s.%s: must be >= %lld, got %lld", f->sect,
				    f->key, (long long)min, (long long)*out);
		return nerr(x, v, QERR_RANGE,
			    "%s.%s: must be in %lld..%lld, got %lld", f->sect,
			    f->key, (long long)min, (long long)max,
			    (long long)*out);
	}
	return QERR_OK;
}

static int want_u64(ctx *x, const field *f, const node *v, uint64_t *out)
{
	char g[120];
	bool neg;
	int r;

	if (v->kind != N_SCALAR || !v->plain || is_null(v))
		return nerr(x, v, QERR_FORMAT, "%s.%s: expected an integer, %s",
			    f->sect, f->key, got(v, g, sizeof(g)));
	r = parse_dec(v->s, v->len, &neg, out);
	if (r == -1)
		return nerr(x, v, QERR_FORMAT,
			    "%s.%s: expected a decimal integer, %s", f->sect,
			    f->key, got(v, g, sizeof(g)));
	if (r == -2)
		return nerr(x, v, QERR_RANGE,
			    "%s.%s: integer '%s' overflows (max %llu)", f->sect,
			    f->key, show(v, g, sizeof(g)),
			    (unsigned long long)UINT64_MAX);
	if (neg && *out && f->t == F_SC) {
		sc_params_check_fail((int)f->min, show(v, g, sizeof(g)));
		return nerr(x, v, QERR_RANGE, "%s.%s", f->sect, qerr_detail());
	}
	if (neg && *out)
		return nerr(x, v, QERR_RANGE, "%s.%s: must be >= 0, got '%s'",
			    f->sect, f->key, show(v, g, sizeof(g)));
	return QERR_OK;
}

/* A sampling setting: typed as YAML here, its limits and message are
 * sc/params' (the CLI's, the gateway's, the coordinator's): "t.yaml:5:10:
 * sampling.top_k = -1: must be an integer in 0..16777216". */
static int want_sc(ctx *x, const field *f, const node *v, void *out)
{
	const sc_setting *st = sc_params_setting((int)f->min);
	char g[120];
	int64_t i64;
	double d;
	int rc;

	switch (st->kind) {
	case SC_K_U64:
		return want_u64(x, f, v, (uint64_t *)out);
	case SC_K_TEXT:
		/* a word or rule of the sampling: section, parsed into it */
		if (v->kind != N_SCALAR || is_null(v))
			return nerr(x, v, QERR_FORMAT, "%s.%s: expected a "
				    "string, %s", f->sect, f->key,
				    got(v, g, sizeof(g)));
		/* parsed as a C string: "auto\0junk" would be read as
		 * "auto", the rest dropped unsaid */
		if (memchr(v->s, '\0', v->len))
			return nerr(x, v, QERR_FORMAT, "%s.%s: string "
				    "contains a NUL character", f->sect,
				    f->key);
		if (sc_params_parse((int)f->min, v->s, &x->c->sampling.p))
			break;
		return QERR_OK;
	case SC_K_INT:
		if ((rc = want_int(x, f, v, INT64_MIN, INT64_MAX, &i64)))
			return rc;
		if (sc_params_check_int((int)f->min, i64))
			break;
		*(int *)out = (int)i64;
		return QERR_OK;
	default:
		if (v->kind != N_SCALAR || !v->plain || is_null(v) ||
		    !full_float(v, &d))
			return nerr(x, v, QERR_FORMAT,
				    "%s.%s: expected a number, %s", f->sect,
				    f->key, got(v, g, sizeof(g)));
		if (sc_params_check_real((int)f->min, d))
			break;
		*(float *)out = (float)d;
		return QERR_OK;
	}
	return nerr(x, v, QERR_RANGE, "%s.%s", f->sect, qerr_detail());
}

static int want_bool(ctx *x, const field *f, const node *v, bool *out)
{
	static const char *const t[] = {"true", "yes"}, *const fa[] = {"false",
								       "no"};
	char g[120];

	if (v->kind == N_SCALAR && v->plain) {
		for (int i = 0; i < 2; i++) {
			if (!strcasecmp(v->s, t[i]) && strlen(v->s) == v->len) {
				*out = true;
				return QERR_OK;
			}
			if (!strcasecmp(v->s, fa[i]) && strlen(v->s) == v->len) {
				*out = false;
				return QERR_OK;
			}
		}
	}
	return nerr(x, v, QERR_FORMAT,
		    "%s.%s: expected a boolean (true, false, yes, no), %s",
		    f->sect, f->key, got(v, g, sizeof(g)));
}

/* A string value; *s NULL when v is a null and nullable. */
static int want_str(ctx *x, const field *f, const node *v, bool nullable,
		    const char **s)
{
	char g[120];

	*s = NULL;
	if (v->kind == N_SCALAR && is_null(v)) {
		if (nullable)
			return QERR_OK;
		return nerr(x, v, QERR_FORMAT,
			    "%s.%s: expected a string, got an empty value",
			    f->sect, f->key);
	}
	if (v->kind != N_SCALAR)
		return nerr(x, v, QERR_FORMAT, "%s.%s: expected a string, %s",
			    f->sect, f->key, got(v, g, sizeof(g)));
	if (memchr(v->s, '\0', v->len))
		return nerr(x, v, QERR_FORMAT,
			    "%s.%s: string contains a NUL character", f->sect,
			    f->key);
	*s = v->s;
	return QERR_OK;
}

/* Relative paths against the config directory; a new string. */
static int resolve(ctx *x, const node *v, const char *path, char **out)
{
	size_t bl, pl = strlen(path);

	if (pl == 0)
		return nerr(x, v, QERR_FORMAT, "path must not be empty");
	if (path[0] == '/' || !x->basedir) {
		*out = strdup(path);
	} else {
		bl = strlen(x->basedir);
		*out = malloc(bl + 1 + pl + 1);
		if (*out) {
			memcpy(*out, x->basedir, bl);
			(*out)[bl] = '/';
			memcpy(*out + bl + 1, path, pl + 1);
		}
	}
	if (!*out)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", x->name);
	return QERR_OK;
}

static const char z85_chars[] =
	"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	".-:+=^!/*?&<>()[]{}@%$#";

/* 1 when s is all Z85 alphabet; *odd counts the characters of it that
 * are rare in file names. */
static bool z85_alpha(const char *s, size_t len, size_t *odd)
{
	*odd = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\0' || !strchr(z85_chars, s[i]))
			return false;
		if (strchr(":+=^!*?&<>()[]{}@%$#", s[i]))
			++*odd;
	}
	return true;
}

/* Each 5-character group must encode a value < 2^32. */
static bool z85_decodes(const char *s)
{
	for (int g = 0; g < CURVE_Z85_LEN; g += 5) {
		uint64_t v = 0;

		for (int i = 0; i < 5; i++)
			v = v * 85 + (uint64_t)(strchr(z85_chars, s[g + i]) -
						z85_chars);
		if (v > UINT32_MAX)
			return false;
	}
	return true;
}

/* One key (Z85 or a file path) of an allowlist entry, at index i. */
static int want_key(ctx *x, const field *f, const node *e, size_t i,
		    curve_key *k)
{
	char g[120];
	const char *s;
	size_t odd;
	int rc;

	if (e->kind != N_SCALAR || is_null(e) || e->len == 0)
		return nerr(x, e, QERR_FORMAT,
			    "%s.%s[%zu]: expected a Z85 key or a key "
			    "file path, %s", f->sect, f->key, i,
			    e->len == 0 && e->kind == N_SCALAR
				    ? "got an empty string"
				    : got(e, g, sizeof(g)));
	rc = want_str(x, f, e, false, &s);
	if (rc)
		return rc;
	if (z85_alpha(s, e->len, &odd) && e->len == CURVE_Z85_LEN) {
		if (!z85_decodes(s))
			return nerr(x, e, QERR_FORMAT,
				    "%s.%s[%zu]: not a valid Z85 key "
				    "(a 5-character group exceeds 2^32)",
				    f->sect, f->key, i);
		memcpy(k->z85, s, CURVE_Z85_LEN + 1);
		return QERR_OK;
	}
	if (z85_alpha(s, e->len, &odd) && odd >= 2 && e->len >= 30 &&
	    e->len <= 50)
		return nerr(x, e, QERR_FORMAT,
			    "%s.%s[%zu]: looks like a Z85 key but has "
			    "%zu characters (Z85 keys have %d)",
			    f->sect, f->key, i, e->len, CURVE_Z85_LEN);
	return resolve(x, e, s, &k->path);
}

static const node *earlier_key(const node *m, size_t i);

/* A worker_keys entry written as {key: K, ids: [id, ...]}: the worker ids
 * that key may register. */
static int want_key_ids(ctx *x, const field *f, const node *e, size_t i,
			curve_key *k)
{
	const node *key = NULL, *ids = NULL;
	char g[120];

	for (size_t j = 0; j + 1 < e->n; j += 2) {
		const node *kn = e->kids[j];
		const node *dup = kn->kind == N_SCALAR ? earlier_key(e, j)
						       : NULL;

		/* the last would win unsaid, as in a section */
		if (dup)
			return nerr(x, kn, QERR_FORMAT,
				    "%s.%s[%zu]: duplicate key '%s' (first at "
				    "%d:%d)", f->sect, f->key, i,
				    show(kn, g, sizeof(g)), dup->line,
				    dup->col);
		if (kn->kind == N_SCALAR && !strcmp(kn->s, "key"))
			key = e->kids[j + 1];
		else if (kn->kind == N_SCALAR && !strcmp(kn->s, "ids"))
			ids = e->kids[j + 1];
		else
			return nerr(x, kn, QERR_FORMAT,
				    "%s.%s[%zu]: unknown field '%.40s' (an "
				    "entry is a key, or {key: K, ids: [ID, "
				    "...]})", f->sect, f->key, i,
				    kn->kind == N_SCALAR ? kn->s : "?");
	}
	if (!key || !ids)
		return nerr(x, e, QERR_FORMAT,
			    "%s.%s[%zu]: a mapping entry needs both key and "
			    "ids", f->sect, f->key, i);
	if (ids->kind != N_SEQ || ids->n == 0)
		return nerr(x, ids, QERR_FORMAT,
			    "%s.%s[%zu].ids: expected a non-empty list of "
			    "worker ids, %s", f->sect, f->key, i,
			    ids->kind == N_SEQ ? "got an empty list"
					       : got(ids, g, sizeof(g)));
	if (!(k->ids = calloc(ids->n, sizeof(*k->ids))))
		return qerr_fail(QERR_NOMEM, "%s: out of memory", x->name);
	for (size_t j = 0; j < ids->n; j++) {
		const node *d = ids->kids[j];

		if (d->kind != N_SCALAR || strlen(d->s) != d->len ||
		    !wire_name_ok(d->s, WIRE_WORKER_ID_MAX))
			return nerr(x, d, QERR_FORMAT,
				    "%s.%s[%zu].ids[%zu]: a worker id is 1..%d "
				    "of [A-Za-z0-9_.-], %s", f->sect, f->key,
				    i, j, WIRE_WORKER_ID_MAX - 1,
				    got(d, g, sizeof(g)));
		if (!(k->ids[j] = strdup(d->s)))
			return qerr_fail(QERR_NOMEM, "%s: out of memory",
					 x->name);
		k->n_ids = j + 1;
	}
	return want_key(x, f, key, i, k);
}

static int want_keys(ctx *x, const field *f, const node *v, curve_key **keys,
		     size_t *nkeys)
{
	bool workers = !strcmp(f->key, "worker_keys");
	char g[120];
	curve_key *k;

	if (is_null(v))
		return QERR_OK;
	if (v->kind != N_SEQ)
		return nerr(x, v, QERR_FORMAT,
			    "%s.%s: expected a list of Z85 keys or key files, %s",
			    f->sect, f->key, got(v, g, sizeof(g)));
	if (v->n == 0)
		return QERR_OK;
	k = calloc(v->n, sizeof(*k));
	if (!k)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", x->name);
	*keys = k;
	for (size_t i = 0; i < v->n; i++) {
		const node *e = v->kids[i];
		int rc;

		/* counted first: a half-parsed entry is freed with the rest */
		*nkeys = i + 1;
		rc = workers && e->kind == N_MAP
			     ? want_key_ids(x, f, e, i, &k[i])
			     : want_key(x, f, e, i, &k[i]);
		if (rc)
			return rc;
	}
	return QERR_OK;
}

static bool name_ok(const char *s, size_t len)
{
	if (len < 1 || len > CFG_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

/* The one rule on a port, for endpoints and listen addresses: [p, end)
 * is min..65535 in decimal, digits only, without leading zeros. */
static bool port_ok(const char *p, const char *end, long min)
{
	long port = 0;

	if (p >= end || (*p == '0' && p + 1 < end))
		return false;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9' || port > 65535)
			return false;
		port = port * 10 + (*p - '0');
	}
	return port >= min && port <= 65535;
}

/* tcp://HOST:PORT (PORT 1..65535: zmq would take -5 as 65531, 99999 as
 * 34463 and 0 as a random port the log cannot name), ipc://PATH or
 * inproc://NAME; no whitespace or control characters. */
static bool endpoint_ok(const char *s, size_t len)
{
	static const char *const schemes[] = {"tcp://", "ipc://", "inproc://"};
	bool scheme = false;

	if (len > CFG_ENDPOINT_MAX)
		return false;
	for (size_t i = 0; i < 3; i++) {
		size_t l = strlen(schemes[i]);

		if (len > l && !strncmp(s, schemes[i], l))
			scheme = true;
	}
	if (!scheme)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f)
			return false;
	if (!strncmp(s, "tcp://", 6)) {
		const char *colon = memrchr(s + 6, ':', len - 6);

		if (!colon || colon == s + 6 ||
		    !port_ok(colon + 1, s + len, 1))
			return false;
	}
	return true;
}

int cfg_endpoint_check(const char *what, const char *ep)
{
	if (!ep || !endpoint_ok(ep, strlen(ep)))
		return qerr_fail(QERR_FORMAT, "%s: '%.*s' is not an endpoint "
				 "(%s)", what, 80, ep ? ep : "(null)",
				 CFG_ENDPOINT_RULE);
	return QERR_OK;
}

/* HOST of a tcp:// endpoint (n bytes) that binds every address. */
static bool any_address(const char *h, size_t n)
{
	return (n == 1 && h[0] == '*') || (n == 7 && !memcmp(h, "0.0.0.0", 7)) ||
	       (n == 4 && !memcmp(h, "[::]", 4));
}

/* Two tcp:// endpoints one port cannot serve: the same port on the same
 * host, or on any host where one binds every address, which the second
 * bind finds in use. */
static bool tcp_same_port(const char *a, const char *b)
{
	const char *ca, *cb;

	if (strncmp(a, "tcp://", 6) || strncmp(b, "tcp://", 6))
		return false;
	a += 6;
	b += 6;
	if (!(ca = strrchr(a, ':')) || !(cb = strrchr(b, ':')) ||
	    strcmp(ca, cb))
		return false;
	return any_address(a, (size_t)(ca - a)) ||
	       any_address(b, (size_t)(cb - b)) ||
	       (ca - a == cb - b && !memcmp(a, b, (size_t)(ca - a)));
}

/* HOST:PORT, HOST an IPv4 address or [IPv6], PORT 0..65535 in decimal. */
static bool listen_ok(const char *s, size_t len)
{
	char host[CFG_LISTEN_MAX + 1];
	unsigned char addr[16];
	const char *colon = memrchr(s, ':', len);
	size_t hl;

	if (len > CFG_LISTEN_MAX || !colon || colon == s ||
	    !port_ok(colon + 1, s + len, 0))
		return false;
	hl = (size_t)(colon - s);
	if (s[0] == '[') {
		if (hl < 3 || s[hl - 1] != ']')
			return false;
		memcpy(host, s + 1, hl - 2);
		host[hl - 2] = '\0';
		return inet_pton(AF_INET6, host, addr) == 1;
	}
	memcpy(host, s, hl);
	host[hl] = '\0';
	return inet_pton(AF_INET, host, addr) == 1;
}

int cfg_listen_check(const char *what, const char *s)
{
	if (!s || !listen_ok(s, strlen(s)))
		return qerr_fail(QERR_FORMAT, "%s: '%.*s' is not HOST:PORT (an "
				 "IPv4 address or [IPv6], port 0..65535)",
				 what, 80, s ? s : "(null)");
	return QERR_OK;
}

/* Parses value v of field f into the cfg. */
static int set_field(ctx *x, const field *f, const node *v)
{
	char *base = (char *)x->c + f->off;
	char g[120];
	const char *s;
	int64_t i64;
	int rc = QERR_OK;

	switch (f->t) {
	case F_PATH:
	case F_STR:
		rc = want_str(x, f, v, !(f->flags & F_REQ), &s);
		if (rc || !s)
			return rc;
		if (f->t == F_PATH && v->len == 0)
			return nerr(x, v, QERR_FORMAT,
				    "%s.%s: path must not be empty", f->sect,
				    f->key);
		free(*(char **)base);
		*(char **)base = NULL;
		if (f->t == F_PATH)
			return resolve(x, v, s, (char **)base);
		*(char **)base = strdup(s);
		if (!*(char **)base)
			return qerr_fail(QERR_NOMEM, "%s: out of memory",
					 x->name);
		return QERR_OK;
	case F_NAME:
		rc = want_str(x, f, v, false, &s);
		if (rc)
			return rc;
		if (!name_ok(s, v->len))
			return nerr(x, v, QERR_FORMAT,
				    "%s.%s: '%s' must be 1..%d characters from "
				    "[A-Za-z0-9_-]", f->sect, f->key,
				    show(v, g, sizeof(g)), CFG_NAME_MAX);
		memcpy(base, s, v->len + 1);
		return QERR_OK;
	case F_ENDPOINT:
		rc = want_str(x, f, v, false, &s);
		if (rc)
			return rc;
		if (!endpoint_ok(s, v->len))
			return nerr(x, v, QERR_FORMAT,
				    "%s.%s: '%s' is not an endpoint (%s)",
				    f->sect, f->key, show(v, g, sizeof(g)),
				    CFG_ENDPOINT_RULE);
		memcpy(base, s, v->len + 1);
		return QERR_OK;
	case F_LISTEN:
		rc = want_str(x, f, v, false, &s);
		if (rc)
			return rc;
		if (!listen_ok(s, v->len))
			return nerr(x, v, QERR_FORMAT,
				    "%s.%s: '%s' is not HOST:PORT (an IPv4 "
				    "address or [IPv6], port 0..65535)",
				    f->sect, f->key, show(v, g, sizeof(g)));
		memcpy(base, s, v->len + 1);
		return QERR_OK;
	case F_BOOL:
		return want_bool(x, f, v, (bool *)base);
	case F_INT:
		rc = want_int(x, f, v, f->min, f->max, &i64);
		if (!rc)
			*(int *)base = (int)i64;
		return rc;
	case F_I64:
		return want_int(x, f, v, f->min, f->max, (int64_t *)base);
	case F_U64:
		return want_u64(x, f, v, (uint64_t *)base);
	case F_SC:
		return want_sc(x, f, v, base);
	case F_DTYPE:
		rc = want_str(x, f, v, false, &s);
		if (rc)
			return rc;
		if (!strcmp(s, "f32") && v->len == 3)
			*(cfg_dtype *)base = CFG_DTYPE_F32;
		else if (!strcmp(s, "f16") && v->len == 3)
			*(cfg_dtype *)base = CFG_DTYPE_F16;
		else if (!strcmp(s, "q8_0") && v->len == 4)
			*(cfg_dtype *)base = CFG_DTYPE_Q8_0;
		else
			return nerr(x, v, QERR_RANGE,
				    "%s.%s: '%s' is not a KV dtype (expected: "
				    "f16, f32, q8_0)", f->sect, f->key,
				    show(v, g, sizeof(g)));
		return QERR_OK;
	case F_KEYS:
		return want_keys(x, f, v, (curve_key **)base,
				 (size_t *)((char *)x->c + f->min));
	}
	return QERR_OK;
}

/* The expected-keys list of a section (or the top level when sect NULL). */
static void expected(const char *sect, char *buf, size_t cap)
{
	size_t o = 0;

	buf[0] = '\0';
	if (!sect) {
		for (size_t i = 0; i < N_SECTIONS && o < cap; i++)
			o += (size_t)snprintf(buf + o, cap - o, "%s%s",
					      i ? ", " : "", sections[i]);
		return;
	}
	for (size_t i = 0; i < N_FIELDS && o < cap; i++)
		if (!strcmp(fields[i].sect, sect))
			o += (size_t)snprintf(buf + o, cap - o, "%s%s",
					      o ? ", " : "", fields[i].key);
}

/* Finds a duplicate of key kids[i] among the earlier keys of m. */
static const node *earlier_key(const node *m, size_t i)
{
	const node *k = m->kids[i];

	for (size_t j = 0; j < i; j += 2) {
		const node *p = m->kids[j];

		if (p->len == k->len && !memcmp(p->s, k->s, k->len))
			return p;
	}
	return NULL;
}

/* Section sect from value v (key node k, for null sections). */
static int walk_section(ctx *x, const char *sect, const node *k,
			const node *v)
{
	char g[120], ex[300];

	if (is_null(v)) {
		for (size_t i = 0; i < N_FIELDS; i++)
			if (!strcmp(fields[i].sect, sect) &&
			    (fields[i].flags & F_REQ))
				return nerr(x, k, QERR_MISSING,
					    "missing required key '%s' in '%s'",
					    fields[i].key, sect);
		return QERR_OK;
	}
	if (v->kind != N_MAP)
		return nerr(x, v, QERR_FORMAT, "'%s' must be a mapping, %s",
			    sect, got(v, g, sizeof(g)));
	for (size_t i = 0; i < v->n; i += 2) {
		const node *key = v->kids[i], *dup;
		int fi;
		int rc;

		fi = memchr(key->s, '\0', key->len) ? -1
						    : field_index(sect, key->s);
		if (fi < 0) {
			expected(sect, ex, sizeof(ex));
			return nerr(x, key, QERR_FORMAT,
				    "unknown key '%s' in '%s' (expected: %s)",
				    show(key, g, sizeof(g)), sect, ex);
		}
		dup = earlier_key(v, i);
		if (dup)
			return nerr(x, key, QERR_FORMAT,
				    "duplicate key '%s' in '%s' (first at "
				    "%d:%d)", fields[fi].key, sect, dup->line,
				    dup->col);
		rc = set_field(x, &fields[fi], v->kids[i + 1]);
		if (rc)
			return rc;
		x->set[fi] = v->kids[i + 1];
	}
	for (size_t i = 0; i < N_FIELDS; i++)
		if (!strcmp(fields[i].sect, sect) && (fields[i].flags & F_REQ) &&
		    !x->set[i])
			return nerr(x, v, QERR_MISSING,
				    "missing required key '%s' in '%s'",
				    fields[i].key, sect);
	return QERR_OK;
}

/* Where to report a cross-field error about field (sect, key). */
static const node *at(const ctx *x, const char *sect, const char *key)
{
	int fi = field_index(sect, key);

	return fi >= 0 && x->set[fi] ? x->set[fi] : x->root;
}

/* sampling.grammar_file / json_schema_file: the file's text made the
 * grammar every request without a constraint follows. */
static int sampling_grammar(ctx *x)
{
	cfg_sampling *sp = &x->c->sampling;
	const char *key = sp->json_schema_file ? "json_schema_file"
					       : "grammar_file";
	const char *path = sp->json_schema_file ? sp->json_schema_file
						: sp->grammar_file;
	const node *n = at(x, "sampling", key);
	char *text = NULL, *g = NULL;
	size_t len = 0;
	int rc;

	if (!path)
		return 0;
	if (sp->json_schema_file && sp->grammar_file)
		return nerr(x, n, QERR_FORMAT, "sampling: give grammar_file or "
			    "json_schema_file, not both");
	if ((rc = constrain_read_file(path, sp->json_schema_file
						    ? "JSON schema" : "grammar",
				      &text, &len)))
		return nerr(x, n, rc, "sampling.%s: %s", key, qerr_detail());
	if (sp->json_schema_file) {
		json_error_t je;
		json_t *js = json_loadb(text, len,
					       JSON_REJECT_DUPLICATES, &je);

		free(text);
		if (!js)
			return nerr(x, n, QERR_FORMAT, "sampling.%s: %s:%d: %s",
				    key, path, je.line, je.text);
		rc = constrain_gbnf(CONSTRAIN_JSON_SCHEMA, js, &g);
		json_decref(js);
		if (rc)
			return nerr(x, n, rc, "sampling.%s: %s: %s", key, path,
				    qerr_detail());
	} else {
		g = text;
	}
	if (sc_params_parse(SC_S_GRAMMAR, g, &sp->p)) {
		free(g);
		return nerr(x, n, QERR_FORMAT, "sampling.%s: %s: %s", key,
			    path, qerr_detail());
	}
	free(sp->grammar);
	sp->grammar = g;
	/* its samples vote on the JSON value unless sampling.answer says */
	if (sp->json_schema_file && at(x, "sampling", "answer") == x->root &&
	    sc_params_parse(SC_S_ANSWER,
			    constrain_answer(CONSTRAIN_JSON_SCHEMA), &sp->p))
		return nerr(x, n, QERR_FORMAT, "sampling.%s: %s", key,
			    qerr_detail());
	return 0;
}

static int cross_checks(ctx *x)
{
	const cfg *c = x->c;
	const curve_security *s = &c->security;
	int rc;

	if (sc_params_n_limit(c->sampling.p.n, c->limits.max_n)) {
		const node *n = at(x, "sampling", "n");

		if (n == x->root)
			n = at(x, "limits", "max_n");
		return nerr(x, n, QERR_RANGE, "sampling.%s", qerr_detail());
	}
	/* the gateway's n for a request without one: over max_n, every such
	 * request would be refused for a value its client never sent */
	if (sc_params_n_limit(c->http.samples, c->limits.max_n)) {
		const node *n = at(x, "http", "samples");

		if (n == x->root)
			n = at(x, "limits", "max_n");
		return nerr(x, n, QERR_RANGE, "http.samples = %d: over this "
			    "cluster's limits.max_n (%d)", c->http.samples,
			    c->limits.max_n);
	}
	/* admin keys are API keys with more rights: without api keys
	 * nobody is told apart, so the gateway could not honour them */
	if (c->http.admin_keys_file && !c->http.api_keys_file)
		return nerr(x, at(x, "http", "admin_keys_file"), QERR_FORMAT,
			    "http.admin_keys_file needs http.api_keys_file "
			    "(without keys nobody is told apart)");
	if (c->prompt.template_name &&
	    prompt_family_from_name(c->prompt.template_name) < 0)
		return nerr(x, at(x, "prompt", "template"), QERR_FORMAT,
			    "prompt.template: unknown template '%.64s' (known: "
			    PROMPT_FAMILY_LIST ")", c->prompt.template_name);
	if ((rc = sampling_grammar(x)))
		return rc;
	if (c->sampling.stop_name) {
		sc_params tmp = SC_PARAMS_DEFAULTS;

		if (sc_params_parse(SC_S_STOP, c->sampling.stop_name, &tmp))
			return nerr(x, at(x, "sampling", "stop"), QERR_FORMAT,
				    "sampling.%s", qerr_detail());
		x->c->sampling.p.stop = tmp.stop;
	}
	if (c->prompt.think_name) {
		if (!strcmp(c->prompt.think_name, "on"))
			x->c->prompt.think = PROMPT_THINK_ON;
		else if (!strcmp(c->prompt.think_name, "off"))
			x->c->prompt.think = PROMPT_THINK_OFF;
		else
			return nerr(x, at(x, "prompt", "think"), QERR_FORMAT,
				    "prompt.think: expected on or off, got "
				    "'%.64s'", c->prompt.think_name);
	}
	if (c->prompt.effort_name) {
		int e = prompt_effort_from_name(c->prompt.effort_name);

		if (e < 0)
			return nerr(x, at(x, "prompt", "reasoning_effort"),
				    QERR_FORMAT, "prompt.reasoning_effort: "
				    "expected " PROMPT_EFFORT_LIST ", got "
				    "'%.64s'", c->prompt.effort_name);
		/* one template, one reasoning setting */
		if (c->prompt.think_name)
			return nerr(x, at(x, "prompt", "reasoning_effort"),
				    QERR_FORMAT, "prompt.reasoning_effort: "
				    "not together with prompt.think ("
				    PROMPT_THINK_EFFORT_CLASH ")");
		x->c->prompt.think = e;
	}
	if (c->heartbeat.reconnect_min_ms > c->heartbeat.reconnect_max_ms) {
		const node *n = at(x, "heartbeat", "reconnect_max_ms");

		if (n == x->root)
			n = at(x, "heartbeat", "reconnect_min_ms");
		return nerr(x, n, QERR_RANGE,
			    "heartbeat.reconnect_max_ms (%d) is below "
			    "reconnect_min_ms (%d)",
			    c->heartbeat.reconnect_max_ms,
			    c->heartbeat.reconnect_min_ms);
	}
	if (!strcmp(c->coordinator.client_endpoint,
		    c->coordinator.worker_endpoint) ||
	    tcp_same_port(c->coordinator.client_endpoint,
			  c->coordinator.worker_endpoint)) {
		const node *n = at(x, "coordinator", "worker_endpoint");

		if (n == x->root)
			n = at(x, "coordinator", "client_endpoint");
		return nerr(x, n, QERR_RANGE,
			    "coordinator.worker_endpoint must differ from "
			    "client_endpoint ('%s'; a port bound on every "
			    "address, 0.0.0.0 or *, is each address's)",
			    c->coordinator.client_endpoint);
	}
	if (s->curve) {
		const node *n = at(x, "security", "curve");
		const char *miss = !s->server_public_key_file
					   ? "server_public_key_file"
				   : !s->server_secret_key_file
					   ? "server_secret_key_file"
				   : !s->n_client_keys ? "client_keys"
				   : !s->n_worker_keys ? "worker_keys"
						       : NULL;

		if (miss && strstr(miss, "_file"))
			return nerr(x, n, QERR_MISSING,
				    "security.curve is true but security.%s "
				    "is not set", miss);
		if (miss)
			return nerr(x, n, QERR_MISSING,
				    "security.curve is true but security.%s "
				    "is empty: refusing to start without an "
				    "allowlist", miss);
		miss = c->workers.local <= 0 ? NULL
		       : !s->worker_public_key_file ? "worker_public_key_file"
		       : !s->worker_secret_key_file ? "worker_secret_key_file"
						    : NULL;
		if (miss)
			return nerr(x, n, QERR_MISSING,
				    "security.curve is true and workers.local "
				    "is %d but security.%s is not set (the "
				    "local workers' key pair)",
				    c->workers.local, miss);
	}
	return QERR_OK;
}

static int walk(ctx *x, const node *root)
{
	char g[120], ex[300];
	bool seen[N_SECTIONS] = {0};
	int rc;

	if (!root || is_null(root))
		return perr(x, 1, 1, QERR_MISSING,
			    "empty configuration (expected a mapping with at "
			    "least 'model' and 'cluster')");
	if (root->kind != N_MAP)
		return nerr(x, root, QERR_FORMAT,
			    "the configuration must be a mapping, %s",
			    got(root, g, sizeof(g)));
	x->root = root;
	for (size_t i = 0; i < root->n; i += 2) {
		const node *key = root->kids[i], *dup;
		size_t si = N_SECTIONS;

		for (size_t j = 0; j < N_SECTIONS; j++)
			if (strlen(sections[j]) == key->len &&
			    !memcmp(sections[j], key->s, key->len))
				si = j;
		if (si == N_SECTIONS) {
			expected(NULL, ex, sizeof(ex));
			return nerr(x, key, QERR_FORMAT,
				    "unknown key '%s' at top level (expected: "
				    "%s)", show(key, g, sizeof(g)), ex);
		}
		dup = earlier_key(root, i);
		if (dup)
			return nerr(x, key, QERR_FORMAT,
				    "duplicate key '%s' at top level (first at "
				    "%d:%d)", sections[si], dup->line, dup->col);
		seen[si] = true;
		rc = walk_section(x, sections[si], key, root->kids[i + 1]);
		if (rc)
			return rc;
	}
	for (size_t j = 0; j < N_SECTIONS; j++)
		if (!seen[j] && sect_required(sections[j]))
			return nerr(x, root, QERR_MISSING,
				    "missing required key '%s' at top level",
				    sections[j]);
	return cross_checks(x);
}

/* ---- API ---------------------------------------------------------------- */

const char *cfg_where(const cfg *c, const char *sect, const char *key,
		      char *buf, size_t cap)
{
	int fi = field_index(sect, key);

	if (!cap)
		return buf;
	if (!c->name)
		buf[0] = '\0';
	else if (fi >= 0 && c->marks && c->marks[fi][0])
		snprintf(buf, cap, "%s:%d:%d", c->name, c->marks[fi][0],
			 c->marks[fi][1]);
	else
		snprintf(buf, cap, "%s", c->name);
	return buf;
}

int cfg_check_model(const cfg *c, int ctx_len, int vocab)
{
	/* the same rules a request's own values meet (front.c), so the
	 * words are those a client would have been refused with */
	char msg[400], where[PATH_MAX + 32];
	const char *key;

	if (sc_params_max_new_limit(c->sampling.p.max_new, ctx_len))
		key = "max_new_tokens";
	else if (sc_params_vocab_limit(&c->sampling.p, vocab))
		key = "logit_bias";
	else
		return QERR_OK;
	/* copied out: qerr_fail writes the buffer qerr_detail() reads */
	snprintf(msg, sizeof(msg), "%s", qerr_detail());
	cfg_where(c, "sampling", key, where, sizeof(where));
	return qerr_fail(QERR_RANGE, "%s%ssampling.%s", where,
			 where[0] ? ": " : "", msg);
}

void cfg_defaults(cfg *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->coordinator.client_endpoint, "tcp://127.0.0.1:7700");
	strcpy(c->coordinator.worker_endpoint, "tcp://127.0.0.1:7701");
	c->security.loopback_gateway = true;
	c->kv.block_tokens = 16;
	c->kv.blocks = 4096;
	c->kv.dtype = CFG_DTYPE_F16;
	c->kv.free_windows = true;
	c->sampling.p = SC_PARAMS_DEFAULTS;
	c->prompt.think = PROMPT_THINK_DEFAULT;
	c->limits.max_n = 64;
	c->limits.max_prompt_tokens = 4096;
	c->limits.queue_depth = 128; /* http.max_in_flight: one address's 128 all queued */
	c->limits.request_timeout_ms = 120000;
	c->limits.copy_step_timeout_ms = 60000;
	c->limits.max_message_bytes = (int64_t)16 << 20;
	c->heartbeat.interval_ms = 1000;
	c->heartbeat.liveness = 3;
	c->heartbeat.reconnect_min_ms = 1000;
	c->heartbeat.reconnect_max_ms = 32000;
	c->workers.local = 0;
	c->workers.threads = 1;
	c->workers.slots = 32;
	c->workers.prefill_tokens = 64;
	c->workers.merge = true;
	c->prefix_cache.entries = 16;
	strcpy(c->http.listen, "127.0.0.1:8080");
	c->http.max_body_bytes = (int64_t)1 << 20;
	c->http.max_connections = 512;
	c->http.max_in_flight = 128;
	c->http.max_json_values = 4096;
	c->http.max_json_depth = 32;
	c->http.header_timeout_ms = 10000;
	c->http.body_timeout_ms = 30000;
	c->http.max_connections_per_ip = 128;
	c->http.threads = 4;
}

static void keys_free(curve_key *k, size_t n)
{
	if (!k)
		return;
	for (size_t i = 0; i < n; i++) {
		free(k[i].path);
		for (size_t j = 0; j < k[i].n_ids; j++)
			free(k[i].ids[j]);
		free(k[i].ids);
	}
	free(k);
}

void cfg_free(cfg **pc)
{
	cfg *c;

	if (!pc || !*pc)
		return;
	c = *pc;
	free(c->name);
	free(c->marks);
	free(c->model.path);
	free(c->security.server_public_key_file);
	free(c->security.server_secret_key_file);
	free(c->security.worker_public_key_file);
	free(c->security.worker_secret_key_file);
	/* paths of entries past n_*_keys were never set (calloc'ed) */
	keys_free(c->security.client_keys, c->security.n_client_keys);
	keys_free(c->security.gateway_keys, c->security.n_gateway_keys);
	keys_free(c->security.worker_keys, c->security.n_worker_keys);
	free(c->prompt.system);
	free(c->prompt.template_name);
	free(c->prompt.think_name);
	free(c->prompt.effort_name);
	free(c->sampling.stop_name);
	free(c->sampling.grammar_file);
	free(c->sampling.json_schema_file);
	free(c->sampling.grammar);
	free(c->http.api_keys_file);
	free(c->http.client_key_file);
	free(c->http.model_aliases);
	free(c->http.admin_keys_file);
	free(c);
	*pc = NULL;
}

static int parse_in(const char *name, const char *basedir, const char *text,
		    size_t len, cfg **out)
{
	ctx x = {0};
	const node *set[N_FIELDS] = {0};
	node *root = NULL;
	int rc;

	if (!out)
		return qerr_fail(QERR_ARG, "cfg_parse: NULL out");
	*out = NULL;
	if (!name || (!text && len))
		return qerr_fail(QERR_ARG, "cfg_parse: NULL argument");
	x.name = name;
	x.text = text ? text : "";
	x.len = len;
	x.basedir = basedir;
	x.set = set;
	if (len > CFG_MAX_BYTES)
		return perr(&x, 1, 1, QERR_RANGE,
			    "file is %zu bytes, larger than the %u-byte (1 MiB) "
			    "limit", len, CFG_MAX_BYTES);
	x.c = calloc(1, sizeof(*x.c));
	if (!x.c)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", name);
	cfg_defaults(x.c);
	if (!yaml_parser_initialize(&x.p)) {
		free(x.c);
		return qerr_fail(QERR_NOMEM, "%s: out of memory", name);
	}
	/* UTF-8 only (libyaml would otherwise decode UTF-16 after a BOM); a
	 * UTF-8 BOM is skipped, as editors do not show it in columns. */
	if (len >= 3 && !memcmp(x.text, "\xef\xbb\xbf", 3)) {
		x.text += 3;
		x.len -= 3;
	}
	yaml_parser_set_encoding(&x.p, YAML_UTF8_ENCODING);
	yaml_parser_set_input_string(&x.p, (const unsigned char *)x.text,
				     x.len);
	rc = read_tree(&x, &root);
	yaml_parser_delete(&x.p);
	if (!rc)
		rc = walk(&x, root);
	/* the keys' places, before their nodes go */
	if (!rc && (!(x.c->name = strdup(name)) ||
		    !(x.c->marks = calloc(N_FIELDS, sizeof(*x.c->marks)))))
		rc = qerr_fail(QERR_NOMEM, "%s: out of memory", name);
	for (size_t i = 0; !rc && i < N_FIELDS; i++)
		if (set[i]) {
			x.c->marks[i][0] = set[i]->line;
			x.c->marks[i][1] = set[i]->col;
		}
	node_free(root);
	if (rc) {
		cfg_free(&x.c);
		return rc;
	}
	*out = x.c;
	return QERR_OK;
}

/* Directory part of a path, lexically; NULL for "." (no prefix). */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return NULL;
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

int cfg_parse(const char *name, const char *text, size_t len, cfg **out)
{
	char *dir;
	int rc;

	if (!out)
		return qerr_fail(QERR_ARG, "cfg_parse: NULL out");
	*out = NULL;
	if (!name)
		return qerr_fail(QERR_ARG, "cfg_parse: NULL name");
	dir = dir_of(name);
	if (strrchr(name, '/') && !dir)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", name);
	rc = parse_in(name, dir && strcmp(dir, ".") ? dir : NULL, text, len,
		      out);
	free(dir);
	return rc;
}

int cfg_load(const char *path, cfg **out)
{
	struct stat st;
	char *buf = NULL, *real = NULL, *dir = NULL;
	size_t got = 0;
	int fd = -1, rc;

	if (!out)
		return qerr_fail(QERR_ARG, "cfg_load: NULL out");
	*out = NULL;
	if (!path)
		return qerr_fail(QERR_ARG, "cfg_load: NULL path");
	/* O_NONBLOCK: a FIFO given as the config must fail the S_ISREG
	 * check below, not block open() until a writer shows up (as
	 * gguf_open; no effect on a regular file's reads) */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return qerr_fail(QERR_IO, "%s: cannot open: %s", path,
				 strerror(errno));
	if (fstat(fd, &st)) {
		rc = qerr_fail(QERR_IO, "%s: cannot stat: %s", path,
			       strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = qerr_fail(QERR_IO, "%s: not a regular file", path);
		goto fail;
	}
	if (st.st_size > (off_t)CFG_MAX_BYTES) {
		rc = qerr_fail(QERR_RANGE,
			       "%s:1:1: file is %lld bytes, larger than the "
			       "%u-byte (1 MiB) limit", path,
			       (long long)st.st_size, CFG_MAX_BYTES);
		goto fail;
	}
	/* One byte more than the limit, to notice a file that grew. */
	buf = malloc(CFG_MAX_BYTES + 1);
	if (!buf) {
		rc = qerr_fail(QERR_NOMEM, "%s: out of memory", path);
		goto fail;
	}
	for (;;) {
		ssize_t r = read(fd, buf + got, CFG_MAX_BYTES + 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = qerr_fail(QERR_IO, "%s: cannot read: %s", path,
				       strerror(errno));
			goto fail;
		}
		if (r == 0 || (got += (size_t)r) == CFG_MAX_BYTES + 1)
			break;
	}
	close(fd);
	fd = -1;
	real = realpath(path, NULL);
	dir = dir_of(real ? real : path);
	rc = parse_in(path, dir, buf, got, out);
	free(dir);
	free(real);
	free(buf);
	return rc;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

const char *cfg_dtype_name(cfg_dtype t)
{
	return t == CFG_DTYPE_F32 ? "f32" : t == CFG_DTYPE_F16 ? "f16"
	       : t == CFG_DTYPE_Q8_0 ? "q8_0" : "?";
}

/* A double-quoted YAML string, or ~ for NULL. */
static void dump_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("~", f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		unsigned char b = (unsigned char)*s;

		if (b == '"' || b == '\\')
			fprintf(f, "\\%c", b);
		else if (b == '\n')
			fputs("\\n", f);
		else if (b == '\t')
			fputs("\\t", f);
		else if (b < 0x20 || b == 0x7f)
			fprintf(f, "\\x%02x", b);
		/* C1 controls, U+2028 and U+2029 escaped too: raw, a reader
		 * folds NEL and the separators as line breaks */
		else if (b == 0xc2 && (unsigned char)s[1] >= 0x80 &&
			 (unsigned char)s[1] <= 0x9f)
			fprintf(f, "\\u%04x", (unsigned char)*++s);
		else if (b == 0xe2 && (unsigned char)s[1] == 0x80 &&
			 ((unsigned char)s[2] == 0xa8 ||
			  (unsigned char)s[2] == 0xa9)) {
			fprintf(f, "\\u%04x", 0x2000 | (s[2] & 0x3f));
			s += 2;
		} else
			fputc(b, f);
	}
	fputc('"', f);
}

/* The shortest %g that reads back as the same float. */
static void dump_float(FILE *f, float v)
{
	char buf[40];

	for (int p = 1; p <= 9; p++) {
		snprintf(buf, sizeof(buf), "%.*g", p, (double)v);
		if ((float)strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, f);
}

static void dump_keys(FILE *f, const char *name, const curve_key *k, size_t n)
{
	fprintf(f, "  %s:", name);
	if (!n) {
		fputs(" []\n", f);
		return;
	}
	fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		fputs(k[i].n_ids ? "    - key: " : "    - ", f);
		dump_str(f, k[i].path ? k[i].path : k[i].z85);
		if (k[i].n_ids) {
			fputs("\n      ids: [", f);
			for (size_t j = 0; j < k[i].n_ids; j++) {
				if (j)
					fputs(", ", f);
				dump_str(f, k[i].ids[j]);
			}
			fputc(']', f);
		}
		fputc('\n', f);
	}
}

void cfg_dump(const cfg *c, FILE *f)
{
	const curve_security *s = &c->security;

	fputs("model:\n  path: ", f);
	dump_str(f, c->model.path);
	fputs("\ncluster:\n  name: ", f);
	dump_str(f, c->cluster.name);
	fputs("\ncoordinator:\n  client_endpoint: ", f);
	dump_str(f, c->coordinator.client_endpoint);
	fputs("\n  worker_endpoint: ", f);
	dump_str(f, c->coordinator.worker_endpoint);
	fprintf(f, "\nsecurity:\n  curve: %s\n  server_public_key_file: ",
		s->curve ? "true" : "false");
	dump_str(f, s->server_public_key_file);
	fputs("\n  server_secret_key_file: ", f);
	dump_str(f, s->server_secret_key_file);
	fputc('\n', f);
	dump_keys(f, "client_keys", s->client_keys, s->n_client_keys);
	dump_keys(f, "worker_keys", s->worker_keys, s->n_worker_keys);
	dump_keys(f, "gateway_keys", s->gateway_keys, s->n_gateway_keys);
	fprintf(f, "  loopback_gateway: %s\n",
		s->loopback_gateway ? "true" : "false");
	fputs("  worker_public_key_file: ", f);
	dump_str(f, s->worker_public_key_file);
	fputs("\n  worker_secret_key_file: ", f);
	dump_str(f, s->worker_secret_key_file);
	fputc('\n', f);
	fprintf(f, "kv:\n  block_tokens: %d\n  blocks: %d\n  dtype: %s\n"
		"  free_windows: %s\n", c->kv.block_tokens, c->kv.blocks,
		cfg_dtype_name(c->kv.dtype),
		c->kv.free_windows ? "true" : "false");
	fprintf(f, "sampling:\n  n: %d\n  temperature: ", c->sampling.p.n);
	dump_float(f, c->sampling.p.sp.temperature);
	fprintf(f, "\n  top_k: %d\n  top_p: ", c->sampling.p.sp.top_k);
	dump_float(f, c->sampling.p.sp.top_p);
	fprintf(f, "\n  max_new_tokens: %d\n  seed: %llu\n  stop: ",
		c->sampling.p.max_new,
		(unsigned long long)c->sampling.p.seed);
	dump_str(f, c->sampling.stop_name);
	fputs("\n  grammar_file: ", f);
	dump_str(f, c->sampling.grammar_file);
	fputs("\n  json_schema_file: ", f);
	dump_str(f, c->sampling.json_schema_file);
	fprintf(f, "\n  stop_waves: %d\n  answer: ", c->sampling.p.stop_waves);
	{
		char an[SC_VALUE_TEXT_MAX];

		dump_str(f, answer_format_name(&c->sampling.p.answer, an,
					       sizeof(an)));
	}
	{
		static const int more[] = {SC_S_MIN_P, SC_S_PRESENCE_PENALTY,
					   SC_S_FREQUENCY_PENALTY,
					   SC_S_LOGIT_BIAS};
		char t[SC_VALUE_TEXT_MAX];

		for (size_t i = 0; i < sizeof(more) / sizeof(*more); i++) {
			sc_value v;

			sc_params_value(more[i], &c->sampling.p, &v, t,
					sizeof(t));
			fprintf(f, "\n  %s: ", sc_params_setting(more[i])->name);
			if (v.s)
				dump_str(f, v.s);
			else
				dump_float(f, (float)v.d);
		}
	}
	fputc('\n', f);
	fputs("prompt:\n  system: ", f);
	dump_str(f, c->prompt.system);
	fputs("\n  template: ", f);
	dump_str(f, c->prompt.template_name);
	fputs("\n  think: ", f);
	dump_str(f, c->prompt.think_name);
	fputs("\n  reasoning_effort: ", f);
	dump_str(f, c->prompt.effort_name);
	fprintf(f,
		"\nlimits:\n  max_n: %d\n  max_prompt_tokens: %d\n"
		"  queue_depth: %d\n  request_timeout_ms: %d\n"
		"  copy_step_timeout_ms: %d\n  max_message_bytes: %lld\n"
		"  per_client_in_flight: %d\n  tokens_per_minute: %lld\n",
		c->limits.max_n, c->limits.max_prompt_tokens,
		c->limits.queue_depth, c->limits.request_timeout_ms,
		c->limits.copy_step_timeout_ms,
		(long long)c->limits.max_message_bytes,
		c->limits.per_client_in_flight,
		(long long)c->limits.tokens_per_minute);
	fprintf(f,
		"heartbeat:\n  interval_ms: %d\n  liveness: %d\n"
		"  reconnect_min_ms: %d\n  reconnect_max_ms: %d\n",
		c->heartbeat.interval_ms, c->heartbeat.liveness,
		c->heartbeat.reconnect_min_ms, c->heartbeat.reconnect_max_ms);
	fprintf(f, "workers:\n  local: %d\n  threads: %d\n  slots: %d\n"
		"  prefill_tokens: %d\n  merge: %s\n",
		c->workers.local, c->workers.threads, c->workers.slots,
		c->workers.prefill_tokens, c->workers.merge ? "true" : "false");
	fprintf(f, "prefix_cache:\n  entries: %d\n  share_across_clients: %s\n",
		c->prefix_cache.entries,
		c->prefix_cache.share_across_clients ? "true" : "false");
	fputs("http:\n  listen: ", f);
	dump_str(f, c->http.listen);
	fputs("\n  api_keys_file: ", f);
	dump_str(f, c->http.api_keys_file);
	fputs("\n  client_key_file: ", f);
	dump_str(f, c->http.client_key_file);
	fprintf(f, "\n  max_body_bytes: %lld\n  max_connections: %d\n"
		"  max_in_flight: %d\n", (long long)c->http.max_body_bytes,
		c->http.max_connections, c->http.max_in_flight);
	fprintf(f, "  max_json_values: %d\n  max_json_depth: %d\n"
		"  samples: %d\n  model_aliases: ", c->http.max_json_values,
		c->http.max_json_depth, c->http.samples);
	dump_str(f, c->http.model_aliases);
	fprintf(f, "\n  header_timeout_ms: %d\n  body_timeout_ms: %d\n"
		"  max_connections_per_ip: %d\n  threads: %d\n"
		"  admin_keys_file: ", c->http.header_timeout_ms,
		c->http.body_timeout_ms, c->http.max_connections_per_ip,
		c->http.threads);
	dump_str(f, c->http.admin_keys_file);
	fprintf(f, "\n  show_questions: %s\n",
		c->http.show_questions ? "true" : "false");
}

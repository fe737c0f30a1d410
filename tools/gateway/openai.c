/*
 * openai — the OpenAI-compatible JSON of the gateway (see openai.h):
 * parsing and checking a completion request into an Ask, and writing
 * replies, stream chunks and errors in the schema the SDKs expect.
 */
#include "openai.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/client.h"
#include "net/wire.h"
#include "qerr.h"
#include "sc/params.h"
#include "sc/reasoning.h"
#include "sc/stop.h"
#include "text/constrain.h"
#include "text/prompt.h"

int openai_fail(char *msg, size_t cap, const char **param, const char *p,
		const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, cap, fmt, ap);
	va_end(ap);
	*param = p;
	return -1;
}

/* the short name this file's many refusals use */
#define bad openai_fail

const char *openai_place(const char *fmt, ...)
{
	static _Thread_local char where[OPENAI_PLACE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(where, sizeof(where), fmt, ap);
	va_end(ap);
	return where;
}

void openai_req_free(openai_req *r)
{
	for (size_t i = 0; i < r->n_turns; i++) {
		free(r->turns[i].user);
		free(r->turns[i].assistant);
	}
	free(r->turns);
	free(r->question);
	free(r->system);
	free(r->model);
	free(r->grammar_own);
	json_decref(r->echo);
	memset(r, 0, sizeof(*r));
}

/* Appends s[0, n) to a growing buffer (with sep before it when not
 * empty). 0 ok, -1 out of memory. */
static int append(char **buf, size_t *len, const char *sep, const char *s,
		  size_t n)
{
	size_t sl = *buf && sep ? strlen(sep) : 0;
	char *b = realloc(*buf, *len + sl + n + 1);

	if (!b)
		return -1;
	memcpy(b + *len, sep ? sep : "", sl);
	memcpy(b + *len + sl, s, n);
	*len += sl + n;
	b[*len] = '\0';
	*buf = b;
	return 0;
}

/*
 * An object field of the request (obj, named name) whose keys must be
 * among keys[0, n): an unknown key ("quorum": {"sample": 4}, a typo) is a
 * 400 naming it, as an unknown top-level field is; not an object, a 400
 * too. 0, or -1 with msg and param set.
 */
static int known_keys(json_t *obj, const char *name,
		      const char *const *keys, size_t n, char *msg,
		      size_t cap, const char **param)
{
	const char *k;
	json_t *v;

	if (!openai_present(obj))
		return 0;
	if (!json_is_object(obj))
		return bad(msg, cap, param, name, "'%s' must be an object",
			   name);
	json_object_foreach(obj, k, v) {
		size_t i = 0;

		while (i < n && strcmp(k, keys[i]))
			i++;
		if (i == n) {
			char list[160];
			size_t o = 0;

			for (i = 0; i < n && o < sizeof(list); i++)
				o += (size_t)snprintf(list + o, sizeof(list) - o,
						      "%s%s", i ? ", " : "",
						      keys[i]);
			return bad(msg, cap, param, name,
				   "'%s.%.64s' is not a field this API reads "
				   "(%s reads: %s)", name, k, name, list);
		}
	}
	return 0;
}

/* A setting given at the top level and under its object too ("samples"
 * and "quorum.samples"): a 400, not one of them silently. */
static int given_twice(json_t *o, json_t *ext, const char *key,
		       const char *where, char *msg, size_t cap,
		       const char **param)
{
	if (openai_present(json_object_get(o, key)) &&
	    openai_present(json_object_get(ext, key)))
		return bad(msg, cap, param, key, "'%s' and '%s.%s' are both "
			   "given: give one", key, where, key);
	return 0;
}

/* What the gateway does with a field (the request's, field_rules[];
 * a message's, msg_rules[]): READ fields are honoured; IGNORED ones
 * cannot change the output; NOOP ones are taken only with a value that
 * asks for nothing; REFUSED ones are a 400 naming them whenever given
 * (not null). */
enum { FIELD_READ, FIELD_IGNORED, FIELD_NOOP, FIELD_REFUSED };

/* The roles of OpenAI's chat messages, as bits. */
enum {
	ROLE_SYSTEM = 1, ROLE_DEVELOPER = 2, ROLE_USER = 4,
	ROLE_ASSISTANT = 8, ROLE_TOOL = 16, ROLE_FUNCTION = 32,
	ROLES_ALL = 63
};

static const struct {
	const char *name;
	unsigned bit;
} roles[] = {
	{"system", ROLE_SYSTEM}, {"developer", ROLE_DEVELOPER},
	{"user", ROLE_USER}, {"assistant", ROLE_ASSISTANT},
	{"tool", ROLE_TOOL}, {"function", ROLE_FUNCTION},
};

/*
 * Every field of a message of messages[] and of a content part, and what
 * the gateway does with it (docs/http.md's table, its messages[] rows).
 * A row of a part type (part set) with key NULL is the type as a whole.
 * roles: the messages OpenAI has the field (or part) in; given on
 * another, it is a 400 naming it, as is a field of no row. A READ or
 * IGNORED field with a type other than JSON_NULL must have that type.
 * Tool and function messages are refused as a whole after their fields
 * (quorum calls no tools), so their own fields are refused with the
 * reason that matters to the client; assistant messages are a
 * conversation's answers (parse_messages).
 */
static const struct msg_rule {
	const char *part;  /* NULL: a message's own field */
	const char *key;
	int what;          /* FIELD_READ, FIELD_IGNORED or FIELD_REFUSED */
	unsigned roles;
	json_type type;    /* JSON_NULL: checked where it is read */
	const char *why;   /* REFUSED: why, in words */
} msg_rules[] = {
	{NULL, "role", FIELD_READ, ROLES_ALL, JSON_NULL, NULL},
	{NULL, "content", FIELD_READ, ROLES_ALL, JSON_NULL, NULL},
	/* the chat templates quorum renders have no place for it */
	{NULL, "name", FIELD_IGNORED, ROLES_ALL & ~ROLE_TOOL, JSON_STRING,
	 NULL},
	/* an earlier answer's reasoning, as quorum's own replies carry it
	 * (a client appends the reply's message whole): an earlier answer
	 * is shown without it, as Qwen3's and gpt-oss's own templates show
	 * one (the other families' have no place for it) */
	{NULL, "reasoning_content", FIELD_IGNORED, ROLE_ASSISTANT,
	 JSON_STRING, NULL},
	{NULL, "tool_calls", FIELD_REFUSED, ROLE_ASSISTANT, JSON_NULL,
	 "it calls no tools"},
	{NULL, "function_call", FIELD_REFUSED, ROLE_ASSISTANT, JSON_NULL,
	 "it calls no functions"},
	{NULL, "tool_call_id", FIELD_REFUSED, ROLE_TOOL, JSON_NULL,
	 "it calls no tools"},
	{NULL, "refusal", FIELD_REFUSED, ROLE_ASSISTANT, JSON_NULL,
	 "the chat templates have no place for a refusal: give its text "
	 "as the content"},
	{NULL, "audio", FIELD_REFUSED, ROLE_ASSISTANT, JSON_NULL,
	 "it reads and writes text"},
	{"text", "type", FIELD_READ, ROLES_ALL, JSON_NULL, NULL},
	{"text", "text", FIELD_READ, ROLES_ALL, JSON_STRING, NULL},
	{"image_url", NULL, FIELD_REFUSED, ROLE_USER, JSON_NULL,
	 "its models read text"},
	{"input_audio", NULL, FIELD_REFUSED, ROLE_USER, JSON_NULL,
	 "its models read text"},
	{"file", NULL, FIELD_REFUSED, ROLE_USER, JSON_NULL,
	 "its models read text"},
	{"refusal", NULL, FIELD_REFUSED, ROLE_ASSISTANT, JSON_NULL,
	 "the chat templates have no place for a refusal: give its text "
	 "as a text part"},
};

/* The row of field key (NULL: the part type itself) of part type part
 * (NULL: a message's own field), or NULL. */
static const struct msg_rule *msg_rule(const char *part, const char *key)
{
	for (size_t i = 0; i < sizeof(msg_rules) / sizeof(*msg_rules); i++) {
		const struct msg_rule *f = &msg_rules[i];

		if ((part ? f->part && !strcmp(f->part, part) : !f->part) &&
		    (key ? f->key && !strcmp(f->key, key) : !f->key))
			return f;
	}
	return NULL;
}

/* Every field of object o (a message, or a part of type part) under its
 * rule, o being messages[i] (k: its content part k; SIZE_MAX: none) of
 * role bit role named rname: 0, or -1 with the 400 naming the first one
 * refused. */
static int msg_fields(json_t *o, const char *part, size_t i, size_t k,
		      unsigned role, const char *rname, char *msg, size_t cap,
		      const char **param)
{
	const char *key, *msg_where; /* the place of a refused field of a
				       * message ("messages[1].tool_calls") */
	json_t *v;

	json_object_foreach(o, key, v) {
		const struct msg_rule *f = msg_rule(part, key);

		if (k == SIZE_MAX)
			msg_where = openai_place(
				 "messages[%zu].%.60s", i, key);
		else
			msg_where = openai_place(
				 "messages[%zu].content[%zu].%.60s", i, k, key);
		if (!f)
			return bad(msg, cap, param, msg_where, "%s: unknown "
				   "field of a %s%s (docs/http.md lists the "
				   "fields quorum reads and ignores)",
				   msg_where, part ? part : "message",
				   part ? " part" : "");
		if (!openai_present(v))
			continue;
		if (!(f->roles & role))
			return bad(msg, cap, param, msg_where, "%s: not a "
				   "field of a%s %s message", msg_where,
				   rname[0] == 'a' ? "n" : "", rname);
		if (f->what == FIELD_REFUSED)
			return bad(msg, cap, param, msg_where, "%s: not "
				   "supported by quorum (%s)", msg_where,
				   f->why);
		/* JSON_STRING: the one type the table checks */
		if (f->type != JSON_NULL && json_typeof(v) != f->type)
			return bad(msg, cap, param, msg_where, "%s must be a "
				   "string", msg_where);
	}
	return 0;
}

/* Part k of messages[i]'s content, checked by msg_rules[]: its text (a
 * text part's) in *t, or -1 with the 400 naming the part or its field. */
static int content_part(json_t *part, size_t i, size_t k, unsigned role,
			const char *rname, json_t **t, char *msg, size_t cap,
			const char **param)
{
	json_t *type = json_object_get(part, "type");
	const struct msg_rule *f;
	const char *msg_where;

	msg_where = openai_place("messages[%zu].content[%zu]",
		 i, k);
	if (!json_is_object(part) || !json_is_string(type))
		return bad(msg, cap, param, msg_where, "%s must be a content "
			   "part: an object with a string 'type' ({\"type\": "
			   "\"text\", \"text\": \"...\"})", msg_where);
	if (!msg_rule(json_string_value(type), "type") &&
	    !msg_rule(json_string_value(type), NULL))
		return bad(msg, cap, param, msg_where, "%s: unknown part type "
			   "'%.40s' (only text parts are read)", msg_where,
			   json_string_value(type));
	if ((f = msg_rule(json_string_value(type), NULL)) &&
	    f->what == FIELD_REFUSED)
		return bad(msg, cap, param, msg_where, "%s: '%s' parts are not "
			   "supported by quorum (%s)", msg_where, f->part,
			   f->why);
	if (msg_fields(part, json_string_value(type), i, k, role, rname, msg,
		       cap, param))
		return -1;
	*t = json_object_get(part, "text");
	if (!json_is_string(*t)) {
		msg_where = openai_place(
			 "messages[%zu].content[%zu].text", i, k);
		return bad(msg, cap, param, msg_where, "%s must be a string",
			   msg_where);
	}
	return 0;
}

/* The text of a message's content: a string, or text parts. */
static int content_text(json_t *c, size_t i, unsigned role,
			const char *rname, char **out, size_t *len, char *msg,
			size_t cap, const char **param)
{
	size_t k;
	json_t *part, *x = NULL;

	*out = NULL;
	*len = 0;
	if (json_is_string(c))
		return append(out, len, NULL, json_string_value(c),
			      json_string_length(c)) ? bad(msg, cap, param,
			      "messages", "out of memory") : 0;
	if (!json_is_array(c))
		return bad(msg, cap, param, "messages",
			   "messages[%zu].content must be a string or an array "
			   "of text parts", i);
	json_array_foreach(c, k, part) {
		if (content_part(part, i, k, role, rname, &x, msg, cap,
				 param)) {
			free(*out);
			*out = NULL;
			return -1;
		}
		if (append(out, len, NULL, json_string_value(x),
			   json_string_length(x))) {
			free(*out);
			*out = NULL;
			return bad(msg, cap, param, "messages", "out of memory");
		}
	}
	return 0;
}

/* The conversation of messages m into r: the system prompt, the earlier
 * turns and the question (see openai.h). */
static int parse_messages(json_t *m, openai_req *r, char *msg, size_t cap,
			  const char **param)
{
	size_t i, n_user = 0;
	char *pending = NULL; /* a user message not yet answered */
	size_t plen = 0;
	unsigned last = 0;    /* the role of the last turn's message */
	json_t *e;

	if (!m)
		return bad(msg, cap, param, "messages",
			   "'messages' is required");
	if (!json_is_array(m) || json_array_size(m) == 0)
		return bad(msg, cap, param, "messages",
			   "'messages' must be a non-empty array");
	json_array_foreach(m, i, e) {
		json_t *role = json_object_get(e, "role");
		const char *rs;
		unsigned bit = 0;
		char *text;
		size_t len;

		if (!json_is_object(e))
			goto refuse_obj;
		if (!json_is_string(role)) {
			free(pending);
			return bad(msg, cap, param, "messages",
				   "messages[%zu].role must be a string", i);
		}
		rs = json_string_value(role);
		for (size_t k = 0; k < sizeof(roles) / sizeof(*roles); k++)
			if (!strcmp(rs, roles[k].name))
				bit = roles[k].bit;
		if (!bit) {
			free(pending);
			return bad(msg, cap, param, "messages",
				   "messages[%zu].role: unknown role '%.40s' "
				   "(expected system, developer, user or "
				   "assistant)", i, rs);
		}
		if (msg_fields(e, NULL, i, SIZE_MAX, bit, rs, msg, cap,
			       param)) {
			free(pending);
			return -1;
		}
		if (bit & (ROLE_TOOL | ROLE_FUNCTION)) {
			free(pending);
			return bad(msg, cap, param, "messages",
				   "messages[%zu]: role '%s': quorum calls no "
				   "tools", i, rs);
		}
		if (content_text(json_object_get(e, "content"), i, bit, rs,
				 &text, &len, msg, cap, param)) {
			free(pending);
			return -1;
		}
		if (!(bit & (ROLE_USER | ROLE_ASSISTANT))) {
			/* system and developer: the system prompt, before
			 * the conversation */
			if (last) {
				free(text);
				free(pending);
				return bad(msg, cap, param, "messages",
					   "messages[%zu]: a %s message after "
					   "the conversation began (system "
					   "and developer messages come "
					   "first)", i, rs);
			}
			if (append(&r->system, &r->slen, "\n\n",
				   text ? text : "", len)) {
				free(text);
				return bad(msg, cap, param, "messages",
					   "out of memory");
			}
			free(text);
			continue;
		}
		/* user and assistant alternate, from a user message */
		if (bit == last || (!last && bit == ROLE_ASSISTANT)) {
			free(text);
			free(pending);
			return bad(msg, cap, param, "messages",
				   "messages[%zu]: %s where a%s message "
				   "belongs (user and assistant messages "
				   "alternate, from a user message to the "
				   "last one, the question)", i,
				   bit == ROLE_USER ? "two user messages in "
						      "a row" :
				   last ? "two assistant messages in a row"
					: "an assistant message first",
				   bit == ROLE_USER ? "n assistant" : " user");
		}
		last = bit;
		if (bit == ROLE_USER) {
			n_user++;
			pending = text;
			plen = len;
			continue;
		}
		/* an answer: the pending question and it are a turn */
		if (!len) {
			free(text);
			free(pending);
			return bad(msg, cap, param, "messages",
				   "messages[%zu]: an empty assistant "
				   "message (an earlier turn needs its "
				   "answer's text)", i);
		}
		if (!plen) {
			free(text);
			free(pending);
			return bad(msg, cap, param, "messages",
				   "messages[%zu]: an empty user message "
				   "before the assistant's", i - 1);
		}
		if (r->n_turns == WIRE_SHOTS_MAX) {
			free(text);
			free(pending);
			return bad(msg, cap, param, "messages",
				   "more than %d earlier turns (user and "
				   "assistant message pairs) before the "
				   "question", WIRE_SHOTS_MAX);
		}
		{
			openai_turn *t = realloc(r->turns, (r->n_turns + 1) *
							    sizeof(*t));

			if (!t) {
				free(text);
				free(pending);
				return bad(msg, cap, param, "messages",
					   "out of memory");
			}
			r->turns = t;
			t[r->n_turns++] = (openai_turn){pending, text, plen,
							len};
			pending = NULL;
		}
	}
	if (!n_user)
		return bad(msg, cap, param, "messages",
			   "'messages' has no user message");
	if (last != ROLE_USER)
		return bad(msg, cap, param, "messages",
			   "the last message must be the user's (the "
			   "question the samples answer)");
	r->question = pending;
	r->qlen = plen;
	return 0;
refuse_obj:
	free(pending);
	return bad(msg, cap, param, "messages",
		   "messages[%zu] must be an object", i);
}

static int parse_prompt(json_t *p, openai_req *r, char *msg, size_t cap,
			const char **param)
{
	if (json_is_array(p) && json_array_size(p) == 1)
		p = json_array_get(p, 0);
	else if (json_is_array(p))
		return bad(msg, cap, param, "prompt",
			   "'prompt' must be a string or an array of exactly "
			   "one string (one question per request)");
	if (!p)
		return bad(msg, cap, param, "prompt", "'prompt' is required");
	if (!json_is_string(p))
		return bad(msg, cap, param, "prompt",
			   "'prompt' must be a string");
	r->question = strndup(json_string_value(p), json_string_length(p));
	r->qlen = json_string_length(p);
	if (!r->question)
		return bad(msg, cap, param, "prompt", "out of memory");
	return 0;
}

/* A JSON number that is an integer (1 and 1.0 both). */
static int get_int(json_t *v, long long *out)
{
	double d;

	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 1;
	}
	if (!json_is_real(v))
		return 0;
	d = json_real_value(v);
	if (d != floor(d) || fabs(d) > 9e15)
		return 0;
	*out = (long long)d;
	return 1;
}


/* A sampling setting refused by sc/params (its qerr detail: the message
 * every entry point gives), as the 400 of field p. */
/* Bytes of the setting's name a message of sc/params (or of the
 * coordinator) leads with: "max_new_tokens = 0: ..." -> 14. */
static size_t setting_name_len(const char *m)
{
	size_t n = 0;

	while (m[n] == '_' || (m[n] >= 'a' && m[n] <= 'z'))
		n++;
	return n;
}

/* sc/params' message, the setting said as the field p that gave it
 * ("early_stop = bogus: must be ...", not "stop = ..."). */
static int bad_setting(char *msg, size_t cap, const char **param,
		       const char *p)
{
	const char *d = qerr_detail();
	size_t n = setting_name_len(d);

	if (n && (d[n] == ' ' || d[n] == ':') &&
	    (strlen(p) != n || strncmp(d, p, n)))
		return bad(msg, cap, param, p, "%s%s", p, d + n);
	return bad(msg, cap, param, p, "%s", d);
}

/* Setting id's message for a JSON value of the wrong type, v shown as
 * JSON; as the 400 of field p. */
static int bad_type(char *msg, size_t cap, const char **param,
		    const char *p, int id, json_t *v)
{
	char *s = client_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

	sc_params_check_fail(id, s ? s : "?");
	free(s);
	return bad_setting(msg, cap, param, p);
}

/* The sampling settings of the HTTP API, by JSON field (OpenAI's names
 * where OpenAI has the setting; quorum's extensions otherwise): each read
 * by json_setting, checked and refused in sc/params' words. n is read
 * here too (it is both the choices and, without "samples", the samples:
 * openai_parse and openai_settle). */
static const struct {
	const char *key;
	int id;
} settings[] = {
	{"n", SC_S_N},
	{"temperature", SC_S_TEMPERATURE},
	{"top_p", SC_S_TOP_P},
	{"top_k", SC_S_TOP_K},                 /* extension (vLLM's) */
	{"max_completion_tokens", SC_S_MAX_NEW_TOKENS},
	{"max_tokens", SC_S_MAX_NEW_TOKENS},   /* the older name */
	{"seed", SC_S_SEED},
	{"ignore_eos", SC_S_IGNORE_EOS},       /* extension (vLLM's) */
	{"early_stop", SC_S_STOP},             /* extension */
	{"vote", SC_S_VOTE},                   /* extension */
	{"answer_format", SC_S_ANSWER},        /* extension */
	{"stop", SC_S_STOP_STRINGS},
	{"presence_penalty", SC_S_PRESENCE_PENALTY},
	{"frequency_penalty", SC_S_FREQUENCY_PENALTY},
	{"logit_bias", SC_S_LOGIT_BIAS},        /* {"ID": BIAS, ...} */
	{"min_p", SC_S_MIN_P},                 /* extension (vLLM's) */
	/* the grammar setting: constraints[] below */
};

/* logit_bias's JSON object ({"token id": bias}) as the setting's text
 * into *p; QERR_RANGE with its message showing the object. */
static int json_logit_bias(json_t *v, sc_params *p)
{
	char text[SC_VALUE_TEXT_MAX * 2];
	size_t k = 0;
	const char *key;
	json_t *b;
	int bad = !json_is_object(v) ||
		  json_object_size(v) > SC_LOGIT_BIAS_MAX;

	text[0] = '\0';
	json_object_foreach(bad ? NULL : v, key, b) {
		const char *c = key;

		while (*c >= '0' && *c <= '9')
			c++;
		if (!json_is_number(b) || c == key || *c ||
		    c - key > 9 || k >= sizeof(text) - 40) {
			bad = 1;
			break;
		}
		k += (size_t)snprintf(text + k, sizeof(text) - k, "%s%s:%.17g",
				      k ? "," : "", key, json_number_value(b));
	}
	if (!bad && !k)
		return 0; /* {}: no bias */
	if (bad || sc_params_parse(SC_S_LOGIT_BIAS, text, p)) {
		char *shown = client_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT |
					    JSON_SORT_KEYS);

		sc_params_check_fail(SC_S_LOGIT_BIAS, shown ? shown : "?");
		free(shown);
		return QERR_RANGE;
	}
	return 0;
}

static int json_setting(json_t *v, int id, sc_params *p)
{
	const sc_setting *x = sc_params_setting(id);
	sc_value sv = {0};
	long long iv;

	if (id == SC_S_LOGIT_BIAS)
		return json_logit_bias(v, p);
	switch (x->kind) {
	case SC_K_INT:
		if (!get_int(v, &iv))
			goto type;
		sv.i = iv;
		break;
	case SC_K_U64:
		/* OpenAI takes any int64: a negative seed is its two's
		 * complement (-1 = 2^64 - 1), the same seed every time */
		if (!json_is_integer(v)) {
			/* said in this API's range, not the CLI's 0..2^64-1 */
			char *shown = client_dumps(v, JSON_ENCODE_ANY |
						 JSON_COMPACT);

			qerr_fail(QERR_RANGE, "%s = %.80s: must be an integer "
				  "in -9223372036854775808..9223372036854775807 "
				  "(the HTTP API's range)", x->name,
				  shown ? shown : "?");
			free(shown);
			return QERR_RANGE;
		}
		sv.u = (uint64_t)json_integer_value(v);
		break;
	case SC_K_REAL:
		if (!json_is_number(v))
			goto type;
		sv.d = json_number_value(v);
		break;
	case SC_K_BOOL:
		if (!json_is_boolean(v))
			goto type;
		sv.i = json_is_true(v);
		break;
	case SC_K_TEXT:
		if (!json_is_string(v))
			goto type;
		sv.s = json_string_value(v);
		break;
	default: {
		/* strings: one, or an array of them */
		sc_params tmp = *p;
		size_t i, n = json_is_array(v) ? json_array_size(v) : 1;

		tmp.stop_strs.n = 0;
		for (i = 0; i < n; i++) {
			json_t *e = json_is_array(v) ? json_array_get(v, i) : v;

			if (!json_is_string(e))
				return sc_params_check_fail(id, NULL);
			sv.s = json_string_value(e);
			sv.len = json_string_length(e);
			if (sc_params_set(id, &sv, &tmp))
				return QERR_RANGE;
		}
		p->stop_strs = tmp.stop_strs;
		return 0;
	}
	}
	return sc_params_set(id, &sv, p);
type: {
		char *shown = client_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

		sc_params_check_fail(id, shown ? shown : "?");
		free(shown);
		return QERR_RANGE;
	}
}

/* Every field of the settings table o has, into r->p (r->given). A field
 * and its older name (max_tokens) are one setting: both given with
 * different values is a 400 naming both (one would be dropped in
 * silence); the same value is that value. -1 with the field's 400. */
static int json_settings(json_t *o, openai_req *r, char *msg, size_t cap,
			 const char **param)
{
	uint64_t here = 0; /* the settings o gave */

	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		json_t *v = json_object_get(o, settings[i].key);
		int id = settings[i].id;

		if (openai_present(v) && (here & SC_BIT(id)) &&
		    !json_equal(v, json_object_get(o, r->field[id]))) {
			return bad(msg, cap, param, settings[i].key,
				   "'%s' and '%s' are both given, with "
				   "different values: give one", r->field[id],
				   settings[i].key);
		}
		if (!openai_present(v) || (r->given & SC_BIT(id)))
			continue;
		here |= SC_BIT(id);
		r->field[id] = settings[i].key;
		if (json_setting(v, id, &r->p))
			return bad_setting(msg, cap, param, settings[i].key);
		r->given |= SC_BIT(id);
	}
	return 0;
}

const char *openai_setting_words(const openai_req *r, const char *msg,
				 char *out, size_t cap)
{
	size_t n = setting_name_len(msg);

	for (int id = 0; n && id < SC_S_COUNT_; id++) {
		const sc_setting *x = sc_params_setting(id);
		const char *f = r ? r->field[id] : NULL;

		if (!x || strlen(x->name) != n || strncmp(msg, x->name, n))
			continue;
		for (size_t i = 0; !f && i < sizeof(settings) /
					      sizeof(settings[0]); i++)
			if (settings[i].id == id)
				f = settings[i].key;
		if (!f)
			break;
		snprintf(out, cap, "%s%s", f, msg + n);
		return f;
	}
	snprintf(out, cap, "%s", msg);
	return NULL;
}

/* The fields that constrain the text (text/constrain.h), each made the
 * request's grammar: response_format (OpenAI's; type text, json_object or
 * json_schema), llama.cpp's server's grammar and json_schema, SGLang's
 * regex, vLLM's guided_*. One of them at most. */
static const struct {
	const char *key;
	constrain_kind kind;
} constraints[] = {
	{"response_format", CONSTRAIN_JSON_SCHEMA}, /* kind by its type */
	{"grammar", CONSTRAIN_GRAMMAR},
	{"json_schema", CONSTRAIN_JSON_SCHEMA},
	{"regex", CONSTRAIN_REGEX},
	{"guided_grammar", CONSTRAIN_GRAMMAR},
	{"guided_json", CONSTRAIN_JSON_SCHEMA},
	{"guided_regex", CONSTRAIN_REGEX},
	{"guided_choice", CONSTRAIN_CHOICE},
};

/* response_format's constraint: 0 with *v and *kind set, 1 for type
 * text (no constraint), -1 with the 400. */
static int response_format(json_t **v, constrain_kind *kind, char *msg,
			   size_t cap, const char **param)
{
	json_t *js;
	const char *type = json_string_value(json_object_get(*v, "type"));

	if (!json_is_object(*v) || !type)
		return bad(msg, cap, param, "response_format", "'response_format' "
			   "must be an object with a string 'type'");
	if (!strcmp(type, "text")) {
		static const char *const tkeys[] = {"type"};

		/* a schema beside type text had been dropped in silence */
		return known_keys(*v, "response_format", tkeys, 1, msg, cap,
				  param) ? -1 : 1;
	}
	if (!strcmp(type, "json_object")) {
		/* llama.cpp's server reads a schema here: so do we (it had
		 * been dropped: any object taken) */
		static const char *const okeys[] = {"type", "schema"};
		json_t *sc = json_object_get(*v, "schema");

		if (known_keys(*v, "response_format", okeys, 2, msg, cap,
			       param))
			return -1;
		if (openai_present(sc)) {
			*v = sc;
			*kind = CONSTRAIN_JSON_SCHEMA;
		} else {
			*kind = CONSTRAIN_JSON_OBJECT;
		}
		return 0;
	}
	if (strcmp(type, "json_schema"))
		return bad(msg, cap, param, "response_format", "'response_format."
			   "type' must be text, json_object or json_schema");
	{
		static const char *const rkeys[] = {"type", "json_schema"};

		if (known_keys(*v, "response_format", rkeys, 2, msg, cap,
			       param))
			return -1;
	}
	js = json_object_get(*v, "json_schema");
	if (!json_is_object(js) || !json_object_get(js, "schema"))
		return bad(msg, cap, param, "response_format",
			   "'response_format.json_schema' must be an object "
			   "with a 'schema'");
	{
		/* OpenAI's: a name (its identifier), strict a boolean (the
		 * schema is enforced either way: every token is masked) */
		static const char *const jkeys[] = {"name", "schema", "strict",
						    "description"};
		json_t *nm = json_object_get(js, "name"),
		       *st = json_object_get(js, "strict");

		if (known_keys(js, "response_format.json_schema", jkeys, 4,
			       msg, cap, param))
			return -1;
		if (!json_is_string(nm) || !json_string_length(nm) ||
		    (openai_present(st) && !json_is_boolean(st)))
			return bad(msg, cap, param, "response_format",
				   "'response_format.json_schema' needs a "
				   "string 'name', and 'strict' is a boolean");
		/* OpenAI's identifier: 1 to 64 of a-z, A-Z, 0-9, _ and - */
		if (json_string_length(nm) > 64 ||
		    strspn(json_string_value(nm),
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			   "0123456789_-") != json_string_length(nm))
			return bad(msg, cap, param, "response_format",
				   "'response_format.json_schema.name' is 1 to "
				   "64 of a-z, A-Z, 0-9, '_' and '-'");
	}
	*v = json_object_get(js, "schema");
	*kind = CONSTRAIN_JSON_SCHEMA;
	return 0;
}

/* The one constraint o gives, as r's grammar (owned by r). -1 with the
 * field's 400. */
static int constraint(json_t *o, openai_req *r, char *msg, size_t cap,
		      const char **param)
{
	const char *key = NULL;
	constrain_kind kind = CONSTRAIN_GRAMMAR;
	json_t *v = NULL;
	char *g = NULL;
	int rc;

	for (size_t i = 0; i < sizeof(constraints) / sizeof(*constraints);
	     i++) {
		json_t *x = json_object_get(o, constraints[i].key);
		const char *type = json_string_value(json_object_get(x,
								     "type"));

		/* response_format text: no constraint (its keys checked) */
		if (!openai_present(x))
			continue;
		if (!i && type && !strcmp(type, "text")) {
			json_t *t = x;
			constrain_kind k;

			if (response_format(&t, &k, msg, cap, param) < 0)
				return -1;
			continue;
		}
		if (key)
			return bad(msg, cap, param, constraints[i].key, "give "
				   "one of '%s' and '%s' (one constraint)",
				   key, constraints[i].key);
		key = constraints[i].key;
		kind = constraints[i].kind;
		v = x;
	}
	if (!key)
		return 0;
	if (!strcmp(key, "response_format") &&
	    (rc = response_format(&v, &kind, msg, cap, param)))
		return rc < 0 ? -1 : 0;
	if ((rc = constrain_gbnf(kind, v, &g)))
		return bad(msg, cap, param, key, "%s: %s", key, qerr_detail());
	if (sc_params_parse(SC_S_GRAMMAR, g, &r->p)) {
		free(g);
		return bad(msg, cap, param, key, "%s: %s", key, qerr_detail());
	}
	r->grammar_own = g;
	r->given |= SC_BIT(SC_S_GRAMMAR);
	/* what the constrained samples vote on, unless the request says
	 * (json_settings read answer_format before this) */
	if (!(r->given & SC_BIT(SC_S_ANSWER)) && constrain_answer(kind)) {
		if (sc_params_parse(SC_S_ANSWER, constrain_answer(kind), &r->p))
			return bad(msg, cap, param, key, "%s", qerr_detail());
		r->given |= SC_BIT(SC_S_ANSWER);
	}
	return 0;
}

/*
 * Every top-level field of a request and what the gateway does with it:
 * no field is dropped in silence (docs/http.md's table). READ fields are
 * honoured by openai_parse (the settings[] and constraints[] tables, and
 * the fields read by name); IGNORED ones cannot change the output (who
 * asks, how OpenAI would store or bill it); NOOP ones are accepted only
 * with a value that asks for nothing (noop: JSON literals, '|' between
 * them) and refused otherwise; REFUSED ones are a 400 naming them
 * whenever given (not null). A field of the other endpoint, or none of
 * these, is a 400 naming it.
 */
enum { FOR_BOTH, FOR_CHAT, FOR_COMPLETIONS };

static const struct field_rule {
	const char *key;
	int what;   /* FIELD_* */
	int where;  /* FOR_* */
	const char *noop;
} field_rules[] = {
	{"messages", FIELD_READ, FOR_CHAT, NULL},
	{"prompt", FIELD_READ, FOR_COMPLETIONS, NULL},
	{"model", FIELD_READ, FOR_BOTH, NULL},
	{"quorum", FIELD_READ, FOR_BOTH, NULL},
	{"samples", FIELD_READ, FOR_BOTH, NULL},
	{"stream_samples", FIELD_READ, FOR_BOTH, NULL},
	{"stream", FIELD_READ, FOR_BOTH, NULL},
	{"stream_options", FIELD_READ, FOR_BOTH, NULL},
	{"think", FIELD_READ, FOR_BOTH, NULL},
	{"chat_template_kwargs", FIELD_READ, FOR_BOTH, NULL},
	{"reasoning_effort", FIELD_READ, FOR_BOTH, NULL},
	{"reasoning_format", FIELD_READ, FOR_BOTH, NULL},
	{"logprobs", FIELD_READ, FOR_BOTH, NULL},
	{"top_logprobs", FIELD_READ, FOR_CHAT, NULL},
	{"tools", FIELD_READ, FOR_CHAT, NULL},
	/* who asks and how it is kept or billed: never the text */
	{"user", FIELD_IGNORED, FOR_BOTH, NULL},
	{"metadata", FIELD_IGNORED, FOR_BOTH, NULL},
	{"store", FIELD_IGNORED, FOR_BOTH, NULL},
	{"service_tier", FIELD_IGNORED, FOR_BOTH, NULL},
	{"safety_identifier", FIELD_IGNORED, FOR_BOTH, NULL},
	{"prompt_cache_key", FIELD_IGNORED, FOR_BOTH, NULL},
	{"parallel_tool_calls", FIELD_IGNORED, FOR_CHAT, NULL},
	/* accepted asking for nothing */
	{"tool_choice", FIELD_NOOP, FOR_CHAT, "\"none\"|\"auto\""},
	{"modalities", FIELD_NOOP, FOR_CHAT, "[\"text\"]"},
	{"echo", FIELD_NOOP, FOR_COMPLETIONS, "false"},
	{"best_of", FIELD_NOOP, FOR_COMPLETIONS, "1"},
	{"suffix", FIELD_NOOP, FOR_COMPLETIONS, "\"\""},
	/* what quorum does not do */
	{"functions", FIELD_REFUSED, FOR_CHAT, NULL},
	{"function_call", FIELD_REFUSED, FOR_CHAT, NULL},
	{"audio", FIELD_REFUSED, FOR_CHAT, NULL},
	{"prediction", FIELD_REFUSED, FOR_CHAT, NULL},
	{"web_search_options", FIELD_REFUSED, FOR_CHAT, NULL},
	{"verbosity", FIELD_REFUSED, FOR_CHAT, NULL},
};

/* The rule of field key on this endpoint, or NULL. */
static const struct field_rule *field_rule(const char *key)
{
	static const struct field_rule read = {NULL, FIELD_READ, FOR_BOTH,
					       NULL};

	for (size_t i = 0; i < sizeof(field_rules) / sizeof(*field_rules);
	     i++)
		if (!strcmp(field_rules[i].key, key))
			return &field_rules[i];
	for (size_t i = 0; i < sizeof(settings) / sizeof(*settings); i++)
		if (!strcmp(settings[i].key, key))
			return &read;
	for (size_t i = 0; i < sizeof(constraints) / sizeof(*constraints);
	     i++)
		if (!strcmp(constraints[i].key, key))
			return &read;
	return NULL;
}

/* v is one of the JSON literals of noop ('|' between them). */
static int is_noop(json_t *v, const char *noop)
{
	char one[64];

	while (*noop) {
		size_t n = strcspn(noop, "|");
		json_t *x;
		int same;

		snprintf(one, sizeof(one), "%.*s", (int)n, noop);
		x = json_loads(one, JSON_DECODE_ANY, NULL);
		same = x && json_equal(x, v);
		json_decref(x);
		if (same)
			return 1;
		noop += n + (noop[n] == '|');
	}
	return 0;
}

/* Every field of o under its rule: 0, or -1 with the 400 naming the
 * first one refused (its name kept in thread-local storage: the body
 * goes before the caller reads param). */
static int field_check(int chat, json_t *o, char *msg, size_t cap,
		       const char **param)
{
	const char *key, *name;
	json_t *v;

	json_object_foreach(o, key, v) {
		const struct field_rule *f = field_rule(key);
		const char *ep = chat ? "/v1/chat/completions"
				      : "/v1/completions";

		name = openai_place("%.63s", key);
		if (!f || (f->where == FOR_CHAT && !chat) ||
		    (f->where == FOR_COMPLETIONS && chat))
			return bad(msg, cap, param, name, "unknown field "
				   "'%.63s' for %s (docs/http.md lists the "
				   "fields quorum reads and ignores)", name, ep);
		if (!openai_present(v))
			continue;
		if (f->what == FIELD_REFUSED ||
		    (f->what == FIELD_NOOP && !is_noop(v, f->noop)))
			return bad(msg, cap, param, name, "'%s' is not "
				   "supported by quorum%s%s", name,
				   f->what == FIELD_NOOP ? " (only " : "",
				   f->what == FIELD_NOOP ? "the default)" : "");
	}
	return 0;
}

json_t *openai_load_body(const char *body, size_t len, char *msg, size_t cap,
			const char **param)
{
	json_error_t je;
	json_t *o;

	*param = NULL;
	o = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!o && strstr(je.text, "too big integer"))
		/* valid JSON, but a number this API reads as a 64-bit integer
		 * (seed, max_tokens, n, ...) past its range */
		bad(msg, cap, param, NULL,
		    "the body has an integer outside the 64-bit range "
		    "(line %d, column %d): the integer fields (seed, "
		    "max_tokens, n, ...) are 64-bit", je.line, je.column);
	else if (!o)
		bad(msg, cap, param, NULL, "the body is not valid JSON: %s "
		    "(line %d, column %d)", je.text, je.line, je.column);
	else if (!json_is_object(o)) {
		bad(msg, cap, param, NULL, "the body must be a JSON object");
		json_decref(o);
		o = NULL;
	}
	return o;
}

int openai_parse(int chat, const char *body, size_t len, int max_n,
		openai_req *r, char *msg, size_t cap, const char **param)
{
	json_t *o = openai_load_body(body, len, msg, cap, param);
	int rc;

	memset(r, 0, sizeof(*r));
	if (!o)
		return -1;
	rc = openai_parse_json(chat, o, max_n, r, msg, cap, param);
	json_decref(o);
	return rc;
}

int openai_parse_json(int chat, json_t *o, int max_n, openai_req *r,
		      char *msg, size_t cap, const char **param)
{
	json_t *v;
	long long iv;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	r->p = SC_PARAMS_DEFAULTS;
	r->chat = chat;
	r->think = -1;
	*param = NULL;
	if (field_check(chat, o, msg, cap, param))
		goto out;
	if (chat ? parse_messages(json_object_get(o, "messages"), r, msg, cap,
				  param)
		 : parse_prompt(json_object_get(o, "prompt"), r, msg, cap,
				param))
		goto out;
	if (wire_question_blank(r->question, r->qlen)) {
		bad(msg, cap, param, chat ? "messages" : "prompt",
		    "the question is empty (or only whitespace)");
		goto out;
	}
	r->choices = 1;
	if (openai_present(v = json_object_get(o, "model"))) {
		if (!json_is_string(v)) {
			bad(msg, cap, param, "model",
			    "'model' must be a string");
			goto out;
		}
		if (!(r->model = strdup(json_string_value(v)))) {
			bad(msg, cap, param, "model", "out of memory");
			goto out;
		}
	}
	if (openai_present(v = json_object_get(o, "n"))) {
		sc_params tmp = SC_PARAMS_DEFAULTS;

		/* the contract, then the cluster's limits.max_n */
		if (json_setting(v, SC_S_N, &tmp) || sc_params_n_limit(tmp.n, max_n)) {
			bad_setting(msg, cap, param, "n");
			goto out;
		}
		r->choices = (size_t)tmp.n;
	}
	{
		static const char *const qkeys[] = {"samples",
						    "stream_samples"};
		json_t *ext = json_object_get(o, "quorum");

		if (known_keys(ext, "quorum", qkeys, 2, msg, cap, param) ||
		    given_twice(o, ext, "samples", "quorum", msg, cap, param) ||
		    given_twice(o, ext, "stream_samples", "quorum", msg, cap,
				param))
			goto out;
		v = json_object_get(o, "samples");
		if (!openai_present(v))
			v = json_object_get(ext, "samples");
		if (openai_present(v)) {
			if (!get_int(v, &iv)) {
				bad_type(msg, cap, param, "samples", SC_S_N, v);
				goto out;
			}
			if (sc_params_check_int(SC_S_N, iv) || sc_params_n_limit(iv, max_n)) {
				bad_setting(msg, cap, param, "samples");
				goto out;
			}
			r->samples = (uint32_t)iv;
		}
		v = json_object_get(o, "stream_samples");
		if (!openai_present(v))
			v = json_object_get(ext, "stream_samples");
		if (openai_present(v)) {
			if (!json_is_boolean(v)) {
				bad(msg, cap, param, "stream_samples",
				    "'stream_samples' must be a boolean");
				goto out;
			}
			r->stream_samples = json_is_true(v);
		}
	}
	if (openai_present(v = json_object_get(o, "stream_options"))) {
		/* include_obfuscation: OpenAI's padding of stream events
		 * against size side channels; quorum pads nothing, so true
		 * and false read the same (a boolean all the same) */
		static const char *const skeys[] = {"include_usage",
						    "include_obfuscation"};
		json_t *u = json_object_get(v, "include_usage"),
		       *ob = json_object_get(v, "include_obfuscation");

		if (known_keys(v, "stream_options", skeys, 2, msg, cap, param))
			goto out;
		if (!json_is_object(v) || (openai_present(u) && !json_is_boolean(u)) ||
		    (openai_present(ob) && !json_is_boolean(ob))) {
			bad(msg, cap, param, "stream_options",
			    "'stream_options' must be an object with boolean "
			    "'include_usage' and 'include_obfuscation'");
			goto out;
		}
		r->include_usage = json_is_true(u);
	}
	if (json_settings(o, r, msg, cap, param) ||
	    constraint(o, r, msg, cap, param))
		goto out;
	/* the HTTP API's policy on top of sc/params: OpenAI's temperature
	 * range (the CLI keeps sc/params' own), said as sc/params says a
	 * range */
	if ((r->given & SC_BIT(SC_S_TEMPERATURE)) &&
	    r->p.sp.temperature > OPENAI_TEMPERATURE_MAX) {
		bad(msg, cap, param, "temperature",
		    "temperature = %g: must be a number in [0, %g] (the HTTP "
		    "API's range)", json_number_value(json_object_get(
					    o, "temperature")),
		    OPENAI_TEMPERATURE_MAX);
		goto out;
	}
	/* OpenAI's n: n choices, whatever the cluster's early stopping */
	if (!(r->given & SC_BIT(SC_S_STOP))) {
		r->p.stop = (stop_rule){STOP_NONE, STOP_BETA_DEFAULT,
					STOP_WINDOW_DEFAULT};
		r->given |= SC_BIT(SC_S_STOP);
	}
	if (openai_present(v = json_object_get(o, "stream"))) {
		if (!json_is_boolean(v)) {
			bad(msg, cap, param, "stream",
			    "'stream' must be a boolean");
			goto out;
		}
		r->stream = json_is_true(v);
	}
	{
		static const char *const tkeys[] = {"enable_thinking"};
		json_t *kw = json_object_get(o, "chat_template_kwargs");

		if (known_keys(kw, "chat_template_kwargs", tkeys, 1, msg, cap,
			       param))
			goto out;
		if (openai_present(json_object_get(o, "think")) &&
		    openai_present(json_object_get(kw, "enable_thinking"))) {
			bad(msg, cap, param, "think", "'think' and "
			    "'chat_template_kwargs.enable_thinking' are both "
			    "given: give one");
			goto out;
		}
	}
	v = json_object_get(o, "think");
	if (!openai_present(v))
		v = json_object_get(json_object_get(o, "chat_template_kwargs"),
				    "enable_thinking");
	if (openai_present(v)) {
		if (!json_is_boolean(v)) {
			bad(msg, cap, param, "think",
			    "'think' (chat_template_kwargs.enable_thinking) "
			    "must be a boolean");
			goto out;
		}
		r->think = json_is_true(v);
	}
	if (openai_present(v = json_object_get(o, "reasoning_effort"))) {
		int e = prompt_effort_from_name(json_string_value(v));

		if (e < 0) {
			bad(msg, cap, param, "reasoning_effort",
			    "'reasoning_effort' must be one of "
			    PROMPT_EFFORT_LIST);
			goto out;
		}
		r->effort = prompt_effort_name(e);
		/* the cluster refuses the pair; said here as the fields */
		if (r->think >= 0) {
			bad(msg, cap, param, "reasoning_effort",
			    "'reasoning_effort' and 'think' "
			    "(chat_template_kwargs.enable_thinking) are both "
			    "given (" PROMPT_THINK_EFFORT_CLASH "): give one");
			goto out;
		}
	}
	if (openai_present(v = json_object_get(o, "reasoning_format"))) {
		const char *f = json_string_value(v);

		if (!f || (strcmp(f, "auto") && strcmp(f, "deepseek") &&
			   strcmp(f, "none"))) {
			bad(msg, cap, param, "reasoning_format",
			    "'reasoning_format' must be one of auto, deepseek, "
			    "none");
			goto out;
		}
		r->reasoning_raw = !strcmp(f, "none");
	}
	/* the chosen tokens' log-probabilities and their alternatives:
	 * chat's logprobs: true with top_logprobs K (sc/params' 0..20),
	 * completions' logprobs: K in OpenAI's legacy 0..5 */
	if (openai_present(v = json_object_get(o, "logprobs"))) {
		if (chat && !json_is_boolean(v)) {
			bad_type(msg, cap, param, "logprobs", SC_S_LOGPROBS, v);
			goto out;
		}
		if (!chat && (!get_int(v, &iv) || iv < 0 ||
			      iv > OPENAI_LEGACY_LOGPROBS_MAX)) {
			char *shown = client_dumps(v, JSON_ENCODE_ANY |
						    JSON_COMPACT);

			bad(msg, cap, param, "logprobs", "logprobs = %.40s: "
			    "must be an integer in 0..%d (the completions "
			    "API's range: alternatives per token)",
			    shown ? shown : "?", OPENAI_LEGACY_LOGPROBS_MAX);
			free(shown);
			goto out;
		}
		r->logprobs = !chat || json_is_true(v);
		if (!chat && iv) {
			r->p.top_logprobs = (int)iv;
			r->given |= SC_BIT(SC_S_TOP_LOGPROBS);
		}
	}
	if (chat && openai_present(v = json_object_get(o, "top_logprobs"))) {
		if (json_setting(v, SC_S_TOP_LOGPROBS, &r->p)) {
			bad_setting(msg, cap, param, "top_logprobs");
			goto out;
		}
		/* as OpenAI: alternatives come with the tokens' own */
		if (r->p.top_logprobs && !r->logprobs) {
			bad(msg, cap, param, "top_logprobs", "'top_logprobs' "
			    "needs 'logprobs': true");
			goto out;
		}
		if (r->p.top_logprobs)
			r->given |= SC_BIT(SC_S_TOP_LOGPROBS);
	}
	if (r->include_usage && !r->stream) {
		bad(msg, cap, param, "stream_options",
		    "'stream_options' is only allowed with 'stream': true");
		goto out;
	}
	if (r->logprobs) {
		r->p.logprobs = 1;
		r->given |= SC_BIT(SC_S_LOGPROBS);
	}
	if (openai_present(v = json_object_get(o, "tools")) &&
	    !(json_is_array(v) && !json_array_size(v))) {
		bad(msg, cap, param, "tools", "'tools' is not supported by "
		    "quorum");
		goto out;
	}
	rc = 0;
out:
	if (rc)
		openai_req_free(r);
	return rc;
}

int openai_settle(openai_req *r, uint32_t def, char *msg, size_t cap,
		 const char **param)
{
	uint32_t k = r->samples ? r->samples
				: openai_given_n(r) ? (uint32_t)r->p.n : def;

	if (k) {
		r->given |= SC_BIT(SC_S_N);
		r->p.n = (int)k;
	}
	if (k && r->choices > k)
		return bad(msg, cap, param, "n",
			   "n = %zu: must be at most the samples (%u)",
			   r->choices, k);
	return 0;
}

json_t *openai_error(const char *message, const char *type, const char *param,
		    const char *code)
{
	return json_pack("{s:{s:o, s:s, s:o, s:o}}", "error", "message",
			 client_text(message, strlen(message)), "type", type,
			 "param", param ? json_string(param) : json_null(),
			 "code", code ? json_string(code) : json_null());
}

void openai_result_fini(openai_result *x)
{
	for (size_t i = 0; i < x->n; i++) {
		if (x->text)
			free(x->text[i]);
		if (x->answer)
			free(x->answer[i]);
		if (x->logprobs)
			json_decref(x->logprobs[i]);
	}
	free(x->logprobs);
	free(x->text);
	free(x->len);
	free(x->answer);
	free(x->finish);
	free(x->tokens);
	free(x->index);
	free(x->chosen);
	json_decref(x->votes);
	json_decref(x->winner);
	memset(x, 0, sizeof(*x));
}

/* A choice's "logprobs" in OpenAI's shape (chat: {content: [{token,
 * logprob, bytes, top_logprobs}]}; completions: {tokens, token_logprobs,
 * text_offset, top_logprobs}) from the tokens that start inside the
 * returned text (len bytes): the end token and any a stop string cut are
 * not part of it. text_offset counts code points of the text as the
 * client reads it (a stray byte is one U+FFFD there), not bytes. */
/* Bytes s[0, n) as a JSON array of integers (OpenAI's "bytes"). */
static json_t *bytes_json(const void *s, size_t n)
{
	json_t *by = json_array();

	for (size_t k = 0; by && k < n; k++)
		json_array_append_new(by, json_integer(
			((const unsigned char *)s)[k]));
	return by ? by : json_null();
}

/* Token i's alternatives (n of them from entry at of ca) in OpenAI's
 * shape: chat [{token, logprob, bytes}], completions {token: logprob}
 * (a token's text met twice keeps its first, likelier value); an empty
 * list when none were asked. */
static json_t *alts_json(int chat, const client_alts *ca, size_t at,
			 size_t n)
{
	json_t *t = chat ? json_array() : json_object();

	for (size_t k = 0; t && ca && k < n && at + k < ca->total; k++) {
		const ProtobufCBinaryData *pc = &ca->piece[at + k];
		double lp = ca->lp[at + k];
		json_t *tx = client_text(pc->data, pc->len);

		if (chat) {
			json_array_append_new(t, json_pack(
				"{s:o, s:f, s:o}", "token", tx, "logprob", lp,
				"bytes", bytes_json(pc->data, pc->len)));
		} else {
			if (tx && !json_object_get(t, json_string_value(tx)))
				json_object_set_new(t, json_string_value(tx),
						    json_real(lp));
			json_decref(tx);
		}
	}
	return t;
}

/* A token's chat entry: its piece text[b, e), its value, its n
 * alternatives from entry at of ca. */
static json_t *chat_lp_entry(const char *text, size_t b, size_t e, double lp,
			     const client_alts *ca, size_t at, size_t n)
{
	return json_pack("{s:o, s:f, s:o, s:o}", "token",
			 client_text(text + b, e - b), "logprob", lp, "bytes",
			 bytes_json(text + b, e - b), "top_logprobs",
			 alts_json(1, ca, at, n));
}

/* A new list of log-probabilities in the request's shape, empty: chat's
 * array of entries, completions' object of four arrays. */
json_t *openai_lp_new(int chat)
{
	if (chat)
		return json_array();
	return json_pack("{s:[], s:[], s:[], s:[]}", "tokens",
			 "token_logprobs", "text_offset", "top_logprobs");
}

size_t openai_lp_count(int chat, const json_t *acc)
{
	return json_array_size(chat ? acc : json_object_get(acc, "tokens"));
}

/* n tokens' entries appended to acc (openai_lp_new's, of the same chat):
 * token i's piece starts at offs[i] and ends where the next one starts,
 * the last one's at end, within the text text[0, len) so far; a token
 * starting at its end or past it is no part of it (the end token, or
 * one a stop string cut); ca: their alternatives (NULL: none asked).
 * raw: completions' text_offset is the token's byte offset (a streamed
 * run's, made a character index by openai_lp_ready), else the index of
 * its character in text. 0, or -1 out of memory. */
static int lp_append(int chat, json_t *acc, const char *text, size_t len,
		     size_t n, const uint32_t *offs, size_t end,
		     const double *lps, const client_alts *ca, int raw)
{
	json_t *toks = chat ? acc : json_object_get(acc, "tokens"),
	       *vals = json_object_get(acc, "token_logprobs"),
	       *where = json_object_get(acc, "text_offset"),
	       *tops = json_object_get(acc, "top_logprobs");
	size_t at = 0;

	if (!toks || (!chat && (!vals || !where || !tops)))
		return -1;
	for (size_t i = 0; i < n; i++) {
		size_t b = offs[i], e = i + 1 < n ? offs[i + 1] : end,
		       na = ca ? ca->n_alt[i] : 0, a0 = at;

		at += na;
		if (b >= len)
			continue;
		if (e > len)
			e = len;
		if (e < b)
			e = b;
		if (chat) {
			if (json_array_append_new(toks, chat_lp_entry(
				    text, b, e, lps[i], ca, a0, na)))
				return -1;
			continue;
		}
		if (json_array_append_new(toks, client_text(text + b, e - b)) ||
		    json_array_append_new(vals, json_real(lps[i])) ||
		    json_array_append_new(where, json_integer((json_int_t)(
			    raw ? b : client_text_index(text, len, b)))) ||
		    json_array_append_new(tops, alts_json(0, ca, a0, na)))
			return -1;
	}
	return 0;
}

int openai_run_append(int chat, json_t *acc, const char *text, size_t len,
		      const Quorum__TokenRun *x)
{
	client_alts cab;
	const client_alts *ca = client_run_alts(x, &cab);
	size_t n = x->n_token_logprobs == x->n_token_offsets
			   ? x->n_token_logprobs : 0;

	return lp_append(chat, acc, text, len, n, x->token_offsets, x->end,
			 x->token_logprobs, ca, !chat);
}

int openai_lp_ready(json_t *acc, json_t *wait, const char *text, size_t len,
		    size_t upto)
{
	static const char *const keys[] = {"tokens", "token_logprobs",
					    "text_offset", "top_logprobs"};
	json_t *where = json_object_get(wait, "text_offset");
	size_t n = json_array_size(where), k = 0;

	while (k < n && (size_t)json_integer_value(json_array_get(where, k)) <
				upto)
		k++;
	for (size_t j = 0; j < 4; j++) {
		json_t *from = json_object_get(wait, keys[j]),
		       *to = json_object_get(acc, keys[j]), *rest;

		if (!from || !to)
			return -1;
		for (size_t i = 0; i < k; i++) {
			json_t *v = json_array_get(from, i);

			if (j == 2)
				v = json_integer((json_int_t)client_text_index(
					text, len,
					(size_t)json_integer_value(v)));
			else
				json_incref(v);
			if (json_array_append_new(to, v))
				return -1;
		}
		/* the rest wait */
		if (!(rest = json_array()))
			return -1;
		for (size_t i = k; i < json_array_size(from); i++)
			if (json_array_append(rest, json_array_get(from, i))) {
				json_decref(rest);
				return -1;
			}
		if (json_object_set_new(wait, keys[j], rest))
			return -1;
	}
	return 0;
}

json_t *openai_lp_from(const json_t *list, size_t at, size_t from)
{
	json_t *out = json_array(), *e;
	size_t k;

	if (!out)
		return NULL;
	json_array_foreach(list, k, e) {
		size_t b = at;

		at += json_array_size(json_object_get(e, "bytes"));
		if (b >= from && json_array_append(out, e)) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

json_t *openai_lp_object(int chat, json_t *acc, int alts)
{
	if (!acc)
		return NULL;
	if (chat)
		return json_pack("{s:o, s:n}", "content", acc, "refusal");
	/* legacy completions: null without alternatives */
	if (!alts)
		json_object_set_new(acc, "top_logprobs", json_null());
	return acc;
}

/* Elements [from, ...) of array a, a new array (a not an array: a's
 * reference again, e.g. a null). */
static json_t *tail(json_t *a, size_t from)
{
	json_t *t;

	if (!json_is_array(a))
		return json_incref(a);
	if (!(t = json_array()))
		return NULL;
	for (size_t k = from; k < json_array_size(a); k++)
		json_array_append(t, json_array_get(a, k));
	return t;
}

json_t *openai_lp_rest(int chat, json_t *lp, size_t from)
{
	if (chat)
		return json_pack("{s:o, s:n}", "content",
				 tail(json_object_get(lp, "content"), from),
				 "refusal");
	return json_pack("{s:o, s:o, s:o, s:o}", "tokens",
			 tail(json_object_get(lp, "tokens"), from),
			 "token_logprobs",
			 tail(json_object_get(lp, "token_logprobs"), from),
			 "text_offset",
			 tail(json_object_get(lp, "text_offset"), from),
			 "top_logprobs",
			 tail(json_object_get(lp, "top_logprobs"), from));
}

static json_t *choice_logprobs(int chat, const char *text, size_t len,
			       const Quorum__Sample *s)
{
	json_t *acc = openai_lp_new(chat);
	size_t n = s->n_token_logprobs == s->n_token_offsets
			   ? s->n_token_logprobs : 0;
	client_alts cab;
	const client_alts *ca = client_sample_alts(s, &cab);

	if (!acc || lp_append(chat, acc, text, len, n, s->token_offsets, len,
			      s->token_logprobs, ca, 0)) {
		json_decref(acc);
		return NULL;
	}
	return openai_lp_object(chat, acc, ca != NULL);
}

int openai_result_make(const openai_req *r, const Quorum__Answer *a,
		      openai_result *x)
{
	size_t n = a->n_samples;

	memset(x, 0, sizeof(*x));
	x->n = n;
	x->text = calloc(n + 1, sizeof(*x->text));
	x->len = calloc(n + 1, sizeof(*x->len));
	x->answer = calloc(n + 1, sizeof(*x->answer));
	x->finish = calloc(n + 1, sizeof(*x->finish));
	x->tokens = calloc(n + 1, sizeof(*x->tokens));
	x->index = calloc(n + 1, sizeof(*x->index));
	if (r->given & SC_BIT(SC_S_ANSWER))
		answer_format_name(&r->p.answer, x->answer_format,
				   sizeof(x->answer_format));
	if (!x->text || !x->len || !x->answer || !x->finish || !x->tokens ||
	    !x->index)
		goto nomem;
	if (r->logprobs && !(x->logprobs = calloc(n + 1, sizeof(*x->logprobs))))
		goto nomem;
	/* the workers ended every sample at its stop string (the text
	 * before it, finish "stop"), extracted its answer, and the
	 * coordinator voted: the reply is taken as it is */
	for (size_t i = 0; i < n; i++) {
		const Quorum__Sample *s = a->samples[i];
		size_t len = s->text.len;

		if (!(x->text[i] = malloc(len + 1)))
			goto nomem;
		if (len) /* an empty text may have no data */
			memcpy(x->text[i], s->text.data, len);
		x->text[i][len] = '\0';
		x->len[i] = len;
		x->tokens[i] = s->tokens;
		x->index[i] = s->index;
		if (x->logprobs &&
		    !(x->logprobs[i] = choice_logprobs(r->chat, x->text[i], len,
						       s)))
			goto nomem;
		x->finish[i] = s->finish && !strcmp(s->finish, "length")
				       ? "length" : "stop";
		if (s->has_answer && s->answer.len) {
			if (!(x->answer[i] = strndup((const char *)s->answer.data,
						     s->answer.len)))
				goto nomem;
			x->voters++;
		}
	}
	if (!(x->votes = client_votes_json(a)))
		goto nomem;
	for (size_t i = 0; i < a->n_votes; i++) {
		const Quorum__Vote *v = a->votes[i];

		if (a->has_answer && v->answer.len == a->answer.len &&
		    !memcmp(v->answer.data, a->answer.data, a->answer.len))
			x->win_count = v->count;
	}
	x->winner = a->has_answer
			    ? client_text((const char *)a->answer.data,
					  a->answer.len)
			    : json_null();
	if (!x->winner)
		goto nomem;
	/* the choices: majority chains first, then the rest */
	x->n_chosen = r->choices && r->choices < n ? r->choices : n;
	if (!(x->chosen = calloc(n + 1, sizeof(*x->chosen))))
		goto nomem;
	{
		size_t k = 0;
		char *pick = calloc(n + 1, 1);

		if (!pick)
			goto nomem;
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < n && k < x->n_chosen; i++) {
				int maj = a->has_answer && x->answer[i] &&
					  strlen(x->answer[i]) ==
						  a->answer.len &&
					  !memcmp(x->answer[i], a->answer.data,
						  a->answer.len);

				if (!pick[i] && (pass || maj)) {
					pick[i] = 1;
					k++;
				}
			}
		k = 0;
		for (size_t i = 0; i < n; i++) /* in sample-index order */
			if (pick[i])
				x->chosen[k++] = i;
		free(pick);
	}
	return 0;
nomem:
	openai_result_fini(x);
	return -1;
}

json_t *openai_quorum(const openai_result *x, const Quorum__Answer *a)
{
	json_t *q = json_object(), *tmp = json_object(), *ans = json_array();

	for (size_t i = 0; i < x->n; i++)
		json_array_append_new(ans, x->answer[i]
			? client_text(x->answer[i], strlen(x->answer[i]))
			: json_null());
	client_answer_json(tmp, a);
	json_object_set(q, "answer", x->winner);
	json_object_set(q, "answer_text", json_object_get(tmp, "answer_text"));
	json_object_set(q, "votes", x->votes);
	json_object_set_new(q, "agreement",
			    json_real(x->n ? (double)x->win_count / x->n : 0));
	json_object_set_new(q, "samples", json_integer((json_int_t)x->n));
	json_object_set_new(q, "voters", json_integer((json_int_t)x->voters));
	json_object_set_new(q, "answers", ans);
	json_object_set_new(q, "answer_format", x->answer_format[0]
			    ? json_string(x->answer_format) : json_null());
	if (x->n_chosen < x->n) {
		json_t *cs = json_array();

		for (size_t k = 0; k < x->n_chosen; k++)
			json_array_append_new(cs, json_integer(
				x->index[x->chosen[k]]));
		json_object_set_new(q, "choice_samples", cs);
	}
	json_object_set(q, "prefix", json_object_get(tmp, "prefix"));
	if (json_object_get(tmp, "usc"))
		json_object_set(q, "usc", json_object_get(tmp, "usc"));
	json_object_set(q, "timings", json_object_get(tmp, "timings"));
	/* early stopping's report (absent: the request ran all N) */
	if (json_object_get(tmp, "stop"))
		json_object_set(q, "early_stop", json_object_get(tmp, "stop"));
	/* per sample, in choice order: mean log-probability of its tokens
	 * and DeepConf group confidence (null when not reported) */
	{
		json_t *ml = json_array(), *gc = json_array();

		for (size_t i = 0; i < a->n_samples; i++) {
			const Quorum__Sample *s = a->samples[i];

			json_array_append_new(ml, s->has_mean_logprob
				? json_real(s->mean_logprob) : json_null());
			json_array_append_new(gc, s->has_group_confidence
				? json_real(s->group_confidence) : json_null());
		}
		json_object_set_new(q, "mean_logprob", ml);
		json_object_set_new(q, "group_confidence", gc);
	}
	json_decref(tmp);
	return q;
}

void openai_usage_counts(const openai_result *x, const Quorum__Answer *a,
			 openai_usage *u)
{
	memset(u, 0, sizeof(*u));
	u->prompt = a->prefix && a->prefix->has_prompt_tokens
			    ? a->prefix->prompt_tokens : 0;
	for (size_t i = 0; i < x->n; i++)
		u->completion += x->tokens[i];
	u->cached = a->prefix ? a->prefix->prompt_tokens_reused : 0;
	u->has_reasoning = 1;
	for (size_t i = 0; i < a->n_samples; i++) {
		u->has_reasoning &= a->samples[i]->has_reasoning_tokens;
		u->reasoning += a->samples[i]->reasoning_tokens;
	}
	if (!u->has_reasoning)
		u->reasoning = 0;
}

static json_t *usage(const openai_result *x, const Quorum__Answer *a)
{
	openai_usage u;
	json_t *o;

	openai_usage_counts(x, a, &u);
	/* OpenAI's place for prompt tokens served from a cache */
	o = json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens",
		      (json_int_t)u.prompt, "completion_tokens",
		      (json_int_t)u.completion, "total_tokens",
		      (json_int_t)(u.prompt + u.completion),
		      "prompt_tokens_details", "cached_tokens",
		      (json_int_t)u.cached);
	/* and for the tokens spent reasoning */
	if (o && u.has_reasoning)
		json_object_set_new(o, "completion_tokens_details", json_pack(
			"{s:I}", "reasoning_tokens", (json_int_t)u.reasoning));
	return o;
}

/* A chat choice's message: the text split into reasoning_content (when
 * there is any) and content (sc/reasoning.h), unless the request asked
 * for the whole text. */
static json_t *chat_message(const openai_req *r, const char *text,
			    size_t len)
{
	reasoning_split s;
	reasoning_out o = {0};
	json_t *m;

	if (r->reasoning_raw)
		return json_pack("{s:s, s:o, s:n}", "role", "assistant",
				 "content", client_text(text, len), "refusal");
	reasoning_init(&s);
	if (reasoning_feed(&s, text ? text : "", text ? len : 0, &o) ||
	    reasoning_end(&s, &o)) {
		reasoning_out_free(&o);
		return NULL; /* out of memory: the choice has no message */
	}
	/* refusal: null, as OpenAI's message has it (quorum refuses in
	 * words a model writes, never apart) */
	m = json_pack("{s:s, s:o, s:n}", "role", "assistant", "content",
		      client_text(o.cn ? o.c : "", o.cn), "refusal");
	if (m && o.rn)
		json_object_set_new(m, "reasoning_content",
				    client_text(o.r, o.rn));
	reasoning_out_free(&o);
	return m;
}

json_t *openai_response(const openai_req *r, const openai_result *x,
		       const Quorum__Answer *a, const char *id, long created,
		       const char *model)
{
	json_t *o = json_object(), *ch = json_array();

	for (size_t k = 0; k < x->n_chosen; k++) {
		size_t i = x->chosen[k];
		json_t *c = json_object();

		/* every sample: its index, as streamed; else the position */
		json_object_set_new(c, "index", json_integer(
			x->n_chosen == x->n ? x->index[i] : k));
		if (r->chat)
			json_object_set_new(c, "message",
					    chat_message(r, x->text[i], x->len[i]));
		else
			json_object_set_new(c, "text",
					    client_text(x->text[i], x->len[i]));
		json_object_set(c, "logprobs", x->logprobs && x->logprobs[i]
					       ? x->logprobs[i] : json_null());
		json_object_set_new(c, "finish_reason",
				    json_string(x->finish[i]));
		json_array_append_new(ch, c);
	}
	json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "object", json_string(
		r->chat ? "chat.completion" : "text_completion"));
	json_object_set_new(o, "created", json_integer(created));
	json_object_set_new(o, "model", json_string(model));
	json_object_set_new(o, "system_fingerprint", openai_fingerprint());
	json_object_set_new(o, "choices", ch);
	json_object_set_new(o, "usage", usage(x, a));
	json_object_set_new(o, "quorum", openai_quorum(x, a));
	return o;
}

/* The model's fingerprint as system_fingerprint: "fp_" and 16 hex
 * digits, null until the coordinator has reported it. */
static uint64_t fp_value;
static int fp_known;

void openai_set_fingerprint(uint64_t fp)
{
	__atomic_store_n(&fp_value, fp, __ATOMIC_RELAXED);
	__atomic_store_n(&fp_known, 1, __ATOMIC_RELEASE);
}

json_t *openai_fingerprint(void)
{
	char b[24];

	if (!__atomic_load_n(&fp_known, __ATOMIC_ACQUIRE))
		return json_null();
	snprintf(b, sizeof(b), "fp_%016llx", (unsigned long long)
		 __atomic_load_n(&fp_value, __ATOMIC_RELAXED));
	return json_string(b);
}

static json_t *chunk_head(const openai_req *r, const char *id, long created,
			  const char *model)
{
	return json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", id, "object",
			 r->chat ? "chat.completion.chunk" : "text_completion",
			 "created", (json_int_t)created, "model", model,
			 "system_fingerprint", openai_fingerprint());
}

json_t *openai_chunk(const openai_req *r, const char *id, long created,
		    const char *model, uint32_t index, const char *text,
		    size_t len, const char *reasoning, size_t rlen, int role,
		    const char *finish)
{
	json_t *o = chunk_head(r, id, created, model), *c = json_object();

	json_object_set_new(c, "index", json_integer(index));
	if (r->chat) {
		json_t *d = json_object();

		if (role)
			json_object_set_new(d, "role", json_string("assistant"));
		if (reasoning && rlen)
			json_object_set_new(d, "reasoning_content",
					    client_text(reasoning, rlen));
		if (text)
			json_object_set_new(d, "content", client_text(text, len));
		json_object_set_new(c, "delta", d);
	} else {
		json_object_set_new(c, "text", text ? client_text(text, len)
						    : json_string(""));
	}
	json_object_set_new(c, "logprobs", json_null());
	json_object_set_new(c, "finish_reason",
			    finish ? json_string(finish) : json_null());
	json_object_set_new(o, "choices", json_pack("[o]", c));
	/* with include_usage every chunk has usage, null but the last's
	 * (OpenAI's) */
	if (r->include_usage)
		json_object_set_new(o, "usage", json_null());
	return o;
}

json_t *openai_chunk_usage(const openai_req *r, const openai_result *x,
			  const Quorum__Answer *a, const char *id,
			  long created, const char *model)
{
	json_t *o = chunk_head(r, id, created, model);

	json_object_set_new(o, "choices", json_array());
	json_object_set_new(o, "usage", usage(x, a));
	return o;
}

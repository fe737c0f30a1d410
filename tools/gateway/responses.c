/*
 * responses — OpenAI's Responses API on the chat path (responses.h): the
 * request turned into chat's, the response object and its events.
 */
#include "responses.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/client.h"
#include "sc/reasoning.h"

/* a refusal, as openai.c words its own (openai.h) */
#define fail openai_fail

/* the place named in an error (param), openai.c's */
#define at openai_place

/*
 * The top-level fields of a Responses request. COPY: taken into the chat
 * request as they are (chat's rule for that field applies: read,
 * ignored, taken asking for nothing); OWN: read here; NOOP: taken only
 * with the value shown; REFUSED: a 400 naming it. Any other field is a
 * 400 naming it (chat's own fields among them: messages, n, max_tokens,
 * response_format, logprobs, ... have their Responses names).
 */
enum { R_COPY, R_OWN, R_NOOP, R_IGNORED, R_REFUSED };

static const struct rfield {
	const char *key;
	int what;
	const char *arg; /* NOOP: the value (JSON); REFUSED: why */
} rfields[] = {
	{"input", R_OWN, NULL},
	{"instructions", R_OWN, NULL},
	{"max_output_tokens", R_OWN, NULL},
	{"text", R_OWN, NULL},
	{"reasoning", R_OWN, NULL},
	{"include", R_OWN, NULL},
	{"stream_options", R_OWN, NULL},
	{"quorum", R_OWN, NULL},
	{"model", R_COPY, NULL},
	{"temperature", R_COPY, NULL},
	{"top_p", R_COPY, NULL},
	{"stream", R_COPY, NULL},
	{"top_logprobs", R_COPY, NULL},
	{"tools", R_COPY, NULL},
	{"tool_choice", R_COPY, NULL},
	/* quorum's extensions, as chat takes them */
	{"samples", R_COPY, NULL},
	{"think", R_COPY, NULL},
	{"chat_template_kwargs", R_COPY, NULL},
	{"reasoning_format", R_COPY, NULL},
	{"seed", R_COPY, NULL},
	{"top_k", R_COPY, NULL},
	{"min_p", R_COPY, NULL},
	{"presence_penalty", R_COPY, NULL},
	{"frequency_penalty", R_COPY, NULL},
	{"stop", R_COPY, NULL},
	{"logit_bias", R_COPY, NULL},
	{"ignore_eos", R_COPY, NULL},
	{"early_stop", R_COPY, NULL},
	{"vote", R_COPY, NULL},
	{"answer_format", R_COPY, NULL},
	{"grammar", R_COPY, NULL},
	{"json_schema", R_COPY, NULL},
	{"regex", R_COPY, NULL},
	{"guided_grammar", R_COPY, NULL},
	{"guided_json", R_COPY, NULL},
	{"guided_regex", R_COPY, NULL},
	{"guided_choice", R_COPY, NULL},
	/* who asks, how it is kept or billed: chat ignores them too */
	{"user", R_COPY, NULL},
	{"metadata", R_COPY, NULL},
	{"store", R_COPY, NULL},
	{"service_tier", R_COPY, NULL},
	{"safety_identifier", R_COPY, NULL},
	{"prompt_cache_key", R_COPY, NULL},
	{"parallel_tool_calls", R_COPY, NULL},
	{"max_tool_calls", R_IGNORED, NULL},
	{"truncation", R_NOOP, "\"disabled\""},
	{"background", R_NOOP, "false"},
	{"previous_response_id", R_REFUSED, "it keeps no responses: send "
	 "the conversation as input"},
	{"conversation", R_REFUSED, "it keeps no conversations: send the "
	 "conversation as input"},
	{"prompt", R_REFUSED, "it keeps no prompt templates: send the "
	 "prompt as instructions and input"},
};

static const struct rfield *rfield(const char *key)
{
	for (size_t i = 0; i < sizeof(rfields) / sizeof(*rfields); i++)
		if (!strcmp(rfields[i].key, key))
			return &rfields[i];
	return NULL;
}

/* Where the chat request's messages came from: input[i] (>= 0), or the
 * instructions (INSTR). */
#define INSTR (-1)

typedef struct {
	json_t *chat;    /* the chat request being made */
	json_t *msgs;    /* its messages */
	long *from;      /* per message: its input item, or INSTR */
	size_t n, cap;
	int input_str;   /* input was a string */
} conv;

static int add_msg(conv *c, json_t *m, long from)
{
	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 8;
		long *f = realloc(c->from, nc * sizeof(*f));

		if (!f) {
			json_decref(m);
			return -1;
		}
		c->from = f;
		c->cap = nc;
	}
	c->from[c->n++] = from;
	return json_array_append_new(c->msgs, m);
}

/* input[i]'s content (a string, or input_text / output_text parts) as
 * chat's: a string, or text parts. */
static json_t *item_content(json_t *v, size_t i, char *msg, size_t cap,
			    const char **param)
{
	json_t *parts, *p;
	size_t k;

	if (!openai_present(v))
		return json_null(); /* none: chat's check names it */
	if (json_is_string(v))
		return json_incref(v);
	if (!json_is_array(v)) {
		fail(msg, cap, param, at("input[%zu].content", i),
		     "input[%zu].content must be a string or an array of "
		     "parts", i);
		return NULL;
	}
	parts = json_array();
	json_array_foreach(v, k, p) {
		const char *type = json_string_value(json_object_get(p, "type"));
		const char *key;
		json_t *x;

		if (!json_is_object(p) || !type) {
			fail(msg, cap, param, at("input[%zu].content[%zu]", i, k),
			     "input[%zu].content[%zu] must be an object with "
			     "a 'type'", i, k);
			goto bad;
		}
		if (!strcmp(type, "input_image") || !strcmp(type, "input_file") ||
		    !strcmp(type, "input_audio")) {
			fail(msg, cap, param, at("input[%zu].content[%zu]", i, k),
			     "input[%zu].content[%zu]: parts of type '%s' are "
			     "not supported by quorum (its models read text)",
			     i, k, type);
			goto bad;
		}
		if (strcmp(type, "input_text") && strcmp(type, "output_text")) {
			fail(msg, cap, param, at("input[%zu].content[%zu]", i, k),
			     "input[%zu].content[%zu]: unknown part type "
			     "'%.40s' (input_text and output_text are read)",
			     i, k, type);
			goto bad;
		}
		/* an output_text part as a response gave it: its
		 * annotations and logprobs are no part of the text */
		json_object_foreach(p, key, x) {
			if (!strcmp(key, "type") || !strcmp(key, "text") ||
			    (!strcmp(type, "output_text") &&
			     (!strcmp(key, "annotations") ||
			      !strcmp(key, "logprobs"))))
				continue;
			fail(msg, cap, param,
			     at("input[%zu].content[%zu].%.40s", i, k, key),
			     "input[%zu].content[%zu].%.40s: unknown field of "
			     "an %s part", i, k, key, type);
			goto bad;
		}
		x = json_object_get(p, "text");
		if (!json_is_string(x)) {
			fail(msg, cap, param,
			     at("input[%zu].content[%zu].text", i, k),
			     "input[%zu].content[%zu].text must be a string",
			     i, k);
			goto bad;
		}
		json_array_append_new(parts, json_pack("{s:s, s:O}", "type",
						       "text", "text", x));
	}
	return parts;
bad:
	json_decref(parts);
	return NULL;
}

/* input (a string, or items) into c's messages. */
static int take_input(json_t *in, conv *c, char *msg, size_t cap,
		      const char **param)
{
	json_t *it;
	size_t i;

	if (!openai_present(in))
		return fail(msg, cap, param, "input", "'input' is required: "
			    "the question (a string), or the conversation's "
			    "messages");
	if (json_is_string(in)) {
		c->input_str = 1;
		return add_msg(c, json_pack("{s:s, s:O}", "role", "user",
					    "content", in), 0)
			       ? fail(msg, cap, param, NULL, "out of memory")
			       : 0;
	}
	if (!json_is_array(in))
		return fail(msg, cap, param, "input", "'input' must be a "
			    "string or an array of messages");
	json_array_foreach(in, i, it) {
		const char *type = json_string_value(json_object_get(it, "type"));
		json_t *m, *content, *x;
		const char *key;

		if (!json_is_object(it))
			return fail(msg, cap, param, at("input[%zu]", i),
				    "input[%zu] must be an object (a message)",
				    i);
		if (openai_present(json_object_get(it, "type")) && !type)
			return fail(msg, cap, param, at("input[%zu].type", i),
				    "input[%zu].type must be a string", i);
		/* an earlier answer's reasoning, as a response's output
		 * gave it: not shown, as chat's reasoning_content */
		if (type && !strcmp(type, "reasoning"))
			continue;
		if (type && strcmp(type, "message"))
			return fail(msg, cap, param, at("input[%zu]", i),
				    "input[%zu]: items of type '%.40s' are not "
				    "supported by quorum (it calls no tools "
				    "and keeps no items: messages only)", i,
				    type);
		json_object_foreach(it, key, x) {
			/* a response's message item: its id and status
			 * are no part of the conversation */
			if (!strcmp(key, "role") || !strcmp(key, "content") ||
			    !strcmp(key, "type") || !strcmp(key, "id") ||
			    !strcmp(key, "status"))
				continue;
			return fail(msg, cap, param,
				    at("input[%zu].%.40s", i, key),
				    "input[%zu].%.40s: unknown field of a "
				    "message (docs/http.md lists the fields "
				    "quorum reads)", i, key);
		}
		if (!(content = item_content(json_object_get(it, "content"), i,
					     msg, cap, param)))
			return -1;
		m = json_object();
		if (json_object_get(it, "role"))
			json_object_set(m, "role", json_object_get(it, "role"));
		if (!json_is_null(content))
			json_object_set(m, "content", content);
		json_decref(content);
		if (add_msg(c, m, (long)i))
			return fail(msg, cap, param, NULL, "out of memory");
	}
	if (!c->n)
		return fail(msg, cap, param, "input", "'input' holds no "
			    "message");
	return 0;
}

/* text: {"format": {...}, "verbosity"} into chat's response_format. */
static int take_text(json_t *t, conv *c, json_t *echo, char *msg,
		     size_t cap, const char **param)
{
	json_t *f, *x;
	const char *key, *type;

	if (!openai_present(t)) {
		json_object_set_new(echo, "text", json_pack(
			"{s:{s:s}}", "format", "type", "text"));
		return 0;
	}
	if (!json_is_object(t))
		return fail(msg, cap, param, "text", "'text' must be an object");
	json_object_foreach(t, key, x) {
		if (!strcmp(key, "format"))
			continue;
		if (!strcmp(key, "verbosity") && !openai_present(x))
			continue;
		return fail(msg, cap, param, at("text.%.40s", key),
			    !strcmp(key, "verbosity")
			    ? "'text.verbosity' is not supported by quorum"
			    : "'text.%.40s' is not a field this API reads "
			      "(text reads: format)", key);
	}
	f = json_object_get(t, "format");
	json_object_set_new(echo, "text", json_pack("{s:o}", "format",
		openai_present(f) ? json_incref(f) : json_pack("{s:s}", "type",
							"text")));
	if (!openai_present(f))
		return 0;
	type = json_string_value(json_object_get(f, "type"));
	if (!json_is_object(f) || !type)
		return fail(msg, cap, param, "text.format", "'text.format' "
			    "must be an object with a 'type': text, "
			    "json_object or json_schema");
	if (!strcmp(type, "text")) {
		if (json_object_size(f) != 1)
			return fail(msg, cap, param, "text.format",
				    "'text.format' of type text takes no "
				    "other field");
		return 0;
	}
	if (!strcmp(type, "json_object")) {
		json_object_set_new(c->chat, "response_format", json_pack(
			"{s:s}", "type", "json_object"));
		if (json_object_size(f) != 1)
			return fail(msg, cap, param, "text.format",
				    "'text.format' of type json_object takes "
				    "no other field");
		return 0;
	}
	if (strcmp(type, "json_schema"))
		return fail(msg, cap, param, "text.format.type",
			    "'text.format.type' must be one of text, "
			    "json_object, json_schema");
	{
		json_t *js = json_deep_copy(f);

		json_object_del(js, "type");
		json_object_set_new(c->chat, "response_format", json_pack(
			"{s:s, s:o}", "type", "json_schema", "json_schema", js));
	}
	return 0;
}

/* reasoning: {"effort", "summary", "generate_summary"}. */
static int take_reasoning(json_t *v, conv *c, json_t *echo, char *msg,
			  size_t cap, const char **param)
{
	json_t *x;
	const char *key;

	json_object_set_new(echo, "reasoning", json_pack(
		"{s:O, s:O}", "effort", openai_present(v) && json_object_get(v,
			"effort") ? json_object_get(v, "effort") : json_null(),
		"summary", openai_present(v) && json_object_get(v, "summary")
			? json_object_get(v, "summary") : json_null()));
	if (!openai_present(v))
		return 0;
	if (!json_is_object(v))
		return fail(msg, cap, param, "reasoning",
			    "'reasoning' must be an object");
	json_object_foreach(v, key, x) {
		/* a summary asked for: the reasoning item carries the
		 * whole reasoning as its content, its summary empty */
		if (!strcmp(key, "effort") || !strcmp(key, "summary") ||
		    !strcmp(key, "generate_summary"))
			continue;
		return fail(msg, cap, param, at("reasoning.%.40s", key),
			    "'reasoning.%.40s' is not a field this API "
			    "reads (reasoning reads: effort, summary)", key);
	}
	if (openai_present(x = json_object_get(v, "effort")))
		json_object_set(c->chat, "reasoning_effort", x);
	return 0;
}

/* include[] and top_logprobs: the output text's log-probabilities. */
static int take_include(json_t *v, json_t *o, conv *c, char *msg,
			size_t cap, const char **param)
{
	json_t *x, *tl = json_object_get(o, "top_logprobs");
	size_t i;
	int lp = 0;

	if (openai_present(v) && !json_is_array(v))
		return fail(msg, cap, param, "include", "'include' must be an "
			    "array of strings");
	json_array_foreach(v, i, x) {
		const char *s = json_string_value(x);

		if (s && !strcmp(s, "message.output_text.logprobs"))
			lp = 1;
		/* none is kept: the reasoning items carry their text, no
		 * encrypted copy, and are not read back */
		else if (!s || strcmp(s, "reasoning.encrypted_content"))
			return fail(msg, cap, param, at("include[%zu]", i),
				    "include[%zu] is not supported by quorum "
				    "(it includes message.output_text.logprobs)",
				    i);
	}
	/* alternatives asked for bring the tokens' own */
	if (lp || (json_is_integer(tl) && json_integer_value(tl) > 0))
		json_object_set_new(c->chat, "logprobs", json_true());
	return 0;
}

/* Chat's words for a place, in the Responses API's (the messages'
 * indices through c->from): into out. A bare "messages" is the field's
 * name only as a param, at a message's start or quoted; elsewhere it is
 * a word ("two user messages in a row"). */
static void rename_in(const conv *c, const char *s, char *out, size_t cap)
{
	const char *s0 = s;

	static const struct { const char *chat, *resp; } names[] = {
		{"response_format.json_schema", "text.format"},
		{"response_format", "text.format"},
		{"max_completion_tokens", "max_output_tokens"},
		{"reasoning_effort", "reasoning.effort"},
	};
	size_t o = 0;

	while (*s && o + 1 < cap) {
		size_t k, done = 0;

		if (!strncmp(s, "messages[", 9)) {
			char *end;
			unsigned long m = strtoul(s + 9, &end, 10);

			if (*end == ']' && m < c->n) {
				if (c->from[m] == INSTR)
					o += (size_t)snprintf(out + o, cap - o,
							      "instructions");
				else if (c->input_str)
					o += (size_t)snprintf(out + o, cap - o,
							      "input");
				else
					o += (size_t)snprintf(out + o, cap - o,
							      "input[%ld]",
							      c->from[m]);
				s = end + 1;
				if (o >= cap)
					break;
				continue;
			}
		}
		if (!strncmp(s, "messages", 8) &&
		    (s == s0 || s[-1] == '\'')) {
			o += (size_t)snprintf(out + o, cap - o, "input");
			s += 8;
			if (o >= cap)
				break;
			continue;
		}
		for (k = 0; k < sizeof(names) / sizeof(*names); k++) {
			size_t n = strlen(names[k].chat);

			if (!strncmp(s, names[k].chat, n)) {
				o += (size_t)snprintf(out + o, cap - o, "%s",
						      names[k].resp);
				s += n;
				done = 1;
				break;
			}
		}
		if (o >= cap)
			break;
		if (!done)
			out[o++] = *s++;
	}
	out[o < cap ? o : cap - 1] = '\0';
}

int responses_parse(const char *body, size_t len, int max_n,
		    openai_req *r, char *msg, size_t cap, const char **param)
{
	json_t *o = openai_load_body(body, len, msg, cap, param), *v, *echo;
	conv c = {0};
	const char *key;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (!o)
		return -1;
	c.chat = json_object();
	c.msgs = json_array();
	echo = json_object();
	json_object_set(c.chat, "messages", c.msgs);
	json_object_foreach(o, key, v) {
		const struct rfield *f = rfield(key);

		if (!f) {
			fail(msg, cap, param, at("%.60s", key), "unknown field "
			     "'%.60s' for /v1/responses (docs/http.md lists "
			     "the fields quorum reads and ignores)", key);
			goto out;
		}
		if (f->what == R_COPY)
			json_object_set(c.chat, key, v);
		if (!openai_present(v) || f->what == R_COPY || f->what == R_OWN ||
		    f->what == R_IGNORED)
			continue;
		if (f->what == R_NOOP) {
			json_t *want = json_loads(f->arg, JSON_DECODE_ANY, NULL);
			int same = want && json_equal(want, v);

			json_decref(want);
			if (same)
				continue;
			fail(msg, cap, param, at("%.60s", key), "'%s' is not "
			     "supported by quorum (only %s)", key, f->arg);
			goto out;
		}
		fail(msg, cap, param, at("%.60s", key), "'%s' is not "
		     "supported by quorum (%s)", key, f->arg);
		goto out;
	}
	v = json_object_get(o, "instructions");
	if (openai_present(v) && !json_is_string(v)) {
		fail(msg, cap, param, "instructions",
		     "'instructions' must be a string");
		goto out;
	}
	json_object_set_new(echo, "instructions", openai_present(v) ? json_incref(v)
							    : json_null());
	if (openai_present(v) && add_msg(&c, json_pack("{s:s, s:O}", "role",
						"system", "content", v),
				  INSTR)) {
		fail(msg, cap, param, NULL, "out of memory");
		goto out;
	}
	if (take_input(json_object_get(o, "input"), &c, msg, cap, param))
		goto out;
	v = json_object_get(o, "max_output_tokens");
	json_object_set_new(echo, "max_output_tokens",
			    openai_present(v) ? json_incref(v) : json_null());
	if (openai_present(v))
		json_object_set(c.chat, "max_completion_tokens", v);
	if (take_text(json_object_get(o, "text"), &c, echo, msg, cap, param) ||
	    take_reasoning(json_object_get(o, "reasoning"), &c, echo, msg, cap,
			   param) ||
	    take_include(json_object_get(o, "include"), o, &c, msg, cap, param))
		goto out;
	/* one output, the voted chain: no stream of every sample */
	v = json_object_get(o, "quorum");
	if (openai_present(v)) {
		if (json_is_object(v) &&
		    openai_present(json_object_get(v, "stream_samples"))) {
			fail(msg, cap, param, "quorum.stream_samples",
			     "'quorum.stream_samples' is not for "
			     "/v1/responses: its one output is the voted "
			     "chain");
			goto out;
		}
		json_object_set(c.chat, "quorum", v);
	}
	v = json_object_get(o, "stream_options");
	if (openai_present(v)) {
		json_t *ob = json_object_get(v, "include_obfuscation");

		/* OpenAI's padding against size side channels: quorum
		 * pads nothing, so true and false read the same */
		if (!json_is_object(v) || json_object_size(v) !=
		    (size_t)!!ob || (ob && !json_is_boolean(ob))) {
			fail(msg, cap, param, "stream_options",
			     "'stream_options' must be an object with a "
			     "boolean 'include_obfuscation' only");
			goto out;
		}
	}
	if (openai_parse_json(1, c.chat, max_n, r, msg, cap, param)) {
		char m2[512];

		rename_in(&c, msg, m2, sizeof(m2));
		snprintf(msg, cap, "%s", m2);
		if (*param) {
			char p2[OPENAI_PLACE_MAX];

			rename_in(&c, *param, p2, sizeof(p2));
			*param = at("%s", p2);
		}
		goto out;
	}
	r->chat = 1;
	r->responses = 1;
	if (r->field[SC_S_MAX_NEW_TOKENS])
		r->field[SC_S_MAX_NEW_TOKENS] = "max_output_tokens";
	/* what the response repeats of the request */
	json_object_set_new(echo, "temperature", openai_present(v = json_object_get(
		o, "temperature")) ? json_incref(v) : json_null());
	json_object_set_new(echo, "top_p", openai_present(v = json_object_get(
		o, "top_p")) ? json_incref(v) : json_null());
	json_object_set_new(echo, "top_logprobs", openai_present(v = json_object_get(
		o, "top_logprobs")) ? json_incref(v) : json_integer(0));
	json_object_set_new(echo, "tool_choice", openai_present(v = json_object_get(
		o, "tool_choice")) ? json_incref(v) : json_string("auto"));
	json_object_set_new(echo, "tools", json_array());
	json_object_set_new(echo, "parallel_tool_calls", openai_present(
		v = json_object_get(o, "parallel_tool_calls"))
		? json_incref(v) : json_true());
	json_object_set_new(echo, "truncation", json_string("disabled"));
	json_object_set_new(echo, "metadata", openai_present(v = json_object_get(
		o, "metadata")) ? json_incref(v) : json_object());
	json_object_set_new(echo, "user", openai_present(v = json_object_get(
		o, "user")) ? json_incref(v) : json_null());
	/* quorum keeps no responses, whatever store asked */
	json_object_set_new(echo, "store", json_false());
	json_object_set_new(echo, "previous_response_id", json_null());
	r->echo = echo;
	echo = NULL;
	rc = 0;
out:
	json_decref(echo);
	json_decref(c.msgs);
	json_decref(c.chat);
	free(c.from);
	json_decref(o);
	return rc;
}

/* The items' ids: the response's hex digits behind their prefix. */
static void item_id(const char *id, const char *prefix, char *out,
		    size_t cap)
{
	const char *h = strchr(id, '_');

	snprintf(out, cap, "%s_%s", prefix, h ? h + 1 : id);
}

/* A reasoning item whole: its text (len bytes) as its one content. */
static json_t *reasoning_item(const char *iid, const char *text, size_t len)
{
	return json_pack("{s:s, s:s, s:[], s:[{s:s, s:o}]}", "id", iid,
			 "type", "reasoning", "summary", "content", "type",
			 "reasoning_text", "text", client_text(text, len));
}

json_t *responses_object(const openai_req *r, const openai_result *x,
			 const Quorum__Answer *a, const char *id,
			 long created, const char *model)
{
	json_t *o = json_object(), *out = json_array(), *k;
	const char *status = "in_progress", *key;
	char iid[64];

	json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "object", json_string("response"));
	json_object_set_new(o, "created_at", json_integer(created));
	if (x && x->n_chosen) {
		size_t i = x->chosen[0];
		const char *t = x->text[i] ? x->text[i] : "";
		size_t n = x->text[i] ? x->len[i] : 0;
		reasoning_split s;
		reasoning_out ro = {0};
		json_t *part;

		if (!r->reasoning_raw) {
			reasoning_init(&s);
			if (reasoning_feed(&s, t, n, &ro) ||
			    reasoning_end(&s, &ro)) {
				reasoning_out_free(&ro);
				json_decref(out);
				json_decref(o);
				return NULL;
			}
			t = ro.cn ? ro.c : "";
			n = ro.cn;
			if (ro.rn) {
				item_id(id, "rs", iid, sizeof(iid));
				json_array_append_new(out, reasoning_item(
					iid, ro.r, ro.rn));
			}
		}
		status = !strcmp(x->finish[i], "length") ? "incomplete"
							 : "completed";
		part = json_pack("{s:s, s:o, s:[]}", "type", "output_text",
				 "text", client_text(t, n), "annotations");
		if (x->logprobs && x->logprobs[i]) {
			/* the text's own tokens: the reasoning's go with
			 * no item (a reasoning item has no logprobs) */
			size_t at = r->reasoning_raw ? 0 : reasoning_content_at(
				x->text[i] ? x->text[i] : "",
				x->text[i] ? x->len[i] : 0);

			json_object_set_new(part, "logprobs", openai_lp_from(
				json_object_get(x->logprobs[i], "content"), 0,
				at));
		}
		item_id(id, "msg", iid, sizeof(iid));
		json_array_append_new(out, json_pack(
			"{s:s, s:s, s:s, s:s, s:[o]}", "id", iid, "type",
			"message", "status", status, "role", "assistant",
			"content", part));
		reasoning_out_free(&ro);
	}
	json_object_set_new(o, "status", json_string(status));
	json_object_set_new(o, "error", json_null());
	json_object_set_new(o, "incomplete_details",
			    !strcmp(status, "incomplete")
			    ? json_pack("{s:s}", "reason", "max_output_tokens")
			    : json_null());
	json_object_set_new(o, "model", json_string(model));
	json_object_set_new(o, "output", out);
	json_object_foreach(r->echo, key, k)
		json_object_set(o, key, k);
	if (x && a) {
		openai_usage u;
		json_t *us;

		openai_usage_counts(x, a, &u);
		us = json_pack("{s:I, s:{s:I}, s:I, s:I}", "input_tokens",
			       (json_int_t)u.prompt, "input_tokens_details",
			       "cached_tokens", (json_int_t)u.cached,
			       "output_tokens", (json_int_t)u.completion,
			       "total_tokens",
			       (json_int_t)(u.prompt + u.completion));
		if (us && u.has_reasoning)
			json_object_set_new(us, "output_tokens_details",
					    json_pack("{s:I}",
						      "reasoning_tokens",
						      (json_int_t)u.reasoning));
		json_object_set_new(o, "usage", us);
		json_object_set_new(o, "quorum", openai_quorum(x, a));
	} else {
		json_object_set_new(o, "usage", json_null());
	}
	return o;
}

/* An event of type with the item's place (output_index k, content_index
 * 0 where part is set). */
static json_t *ev(const char *type, size_t k, const char *item, int part)
{
	json_t *e = json_pack("{s:s}", "type", type);

	if (item)
		json_object_set_new(e, "item_id", json_string(item));
	json_object_set_new(e, "output_index", json_integer((json_int_t)k));
	if (part)
		json_object_set_new(e, "content_index", json_integer(0));
	return e;
}

void responses_live_init(responses_live *l, const char *id,
			 responses_emit emit, void *ctx)
{
	memset(l, 0, sizeof(*l));
	snprintf(l->id, sizeof(l->id), "%s", id);
	l->emit = emit;
	l->ctx = ctx;
}

void responses_live_fini(responses_live *l)
{
	free(l->rtext);
	l->rtext = NULL;
}

/* Opens the next item: reasoning, or the message (and its text part). */
static void live_open(responses_live *l, int message)
{
	char iid[64];
	json_t *e;

	l->k = l->opened++;
	l->open = message ? 2 : 1;
	item_id(l->id, message ? "msg" : "rs", iid, sizeof(iid));
	e = ev("response.output_item.added", l->k, NULL, 0);
	json_object_set_new(e, "item", message
		? json_pack("{s:s, s:s, s:s, s:s, s:[]}", "id", iid, "type",
			    "message", "status", "in_progress", "role",
			    "assistant", "content")
		: json_pack("{s:s, s:s, s:[], s:[]}", "id", iid, "type",
			    "reasoning", "summary", "content"));
	l->emit(l->ctx, e);
	/* its one part, empty: the deltas fill it (as OpenAI's SDKs
	 * accumulate them) */
	e = ev("response.content_part.added", l->k, iid, 1);
	json_object_set_new(e, "part", message
		? json_pack("{s:s, s:s, s:[]}", "type", "output_text", "text",
			    "", "annotations")
		: json_pack("{s:s, s:s}", "type", "reasoning_text", "text", ""));
	l->emit(l->ctx, e);
}

/* Closes the open item: its text's done event, its part's, its own, the
 * item whole (item; NULL: the reasoning as streamed). */
static void live_close(responses_live *l, json_t *item)
{
	char iid[64];
	json_t *e, *own = NULL, *c0;

	item_id(l->id, l->open == 2 ? "msg" : "rs", iid, sizeof(iid));
	if (!item)
		item = own = reasoning_item(iid, l->rtext ? l->rtext : "",
					    l->rlen);
	c0 = json_array_get(json_object_get(item, "content"), 0);
	if (l->open == 1) {
		e = ev("response.reasoning_text.done", l->k, iid, 1);
		json_object_set(e, "text", json_object_get(c0, "text"));
		l->emit(l->ctx, e);
	} else {
		json_t *lp = json_object_get(c0, "logprobs");

		if (json_array_size(lp) > l->lp_sent) {
			/* the entries no delta carried (the last tokens'
			 * come with the result): one more delta, of no
			 * text, so that the deltas' lists join to the
			 * text's as chat's chunks do */
			json_t *rest = json_array();

			for (size_t j = l->lp_sent; j < json_array_size(lp);
			     j++)
				json_array_append(rest, json_array_get(lp, j));
			e = ev("response.output_text.delta", l->k, iid, 1);
			json_object_set_new(e, "delta", json_string(""));
			json_object_set_new(e, "logprobs", rest);
			l->emit(l->ctx, e);
			l->lp_sent = json_array_size(lp);
		}
		e = ev("response.output_text.done", l->k, iid, 1);
		json_object_set(e, "text", json_object_get(c0, "text"));
		json_object_set_new(e, "logprobs", lp ? json_incref(lp)
						      : json_array());
		l->emit(l->ctx, e);
	}
	e = ev("response.content_part.done", l->k, iid, 1);
	json_object_set(e, "part", c0);
	l->emit(l->ctx, e);
	e = ev("response.output_item.done", l->k, NULL, 0);
	json_object_set(e, "item", item);
	l->emit(l->ctx, e);
	json_decref(own);
	l->open = 0;
}

void responses_live_text(responses_live *l, const char *r, size_t rn,
			 const char *c, size_t cn, json_t *lp)
{
	char iid[64];
	json_t *e;

	if (rn) {
		char *b = realloc(l->rtext, l->rlen + rn + 1);

		if (l->open != 1)
			live_open(l, 0);
		if (b) {
			memcpy(b + l->rlen, r, rn);
			l->rlen += rn;
			b[l->rlen] = '\0';
			l->rtext = b;
		}
		item_id(l->id, "rs", iid, sizeof(iid));
		e = ev("response.reasoning_text.delta", l->k, iid, 1);
		json_object_set_new(e, "delta", client_text(r, rn));
		l->emit(l->ctx, e);
	}
	if (cn) {
		if (l->open == 1)
			live_close(l, NULL);
		if (l->open != 2)
			live_open(l, 1);
		item_id(l->id, "msg", iid, sizeof(iid));
		e = ev("response.output_text.delta", l->k, iid, 1);
		json_object_set_new(e, "delta", client_text(c, cn));
		json_object_set_new(e, "logprobs", lp ? json_incref(lp)
						      : json_array());
		l->emit(l->ctx, e);
		l->lp_sent += json_array_size(lp);
	}
}

void responses_live_end(responses_live *l, json_t *o)
{
	json_t *out = json_object_get(o, "output"), *e;
	size_t n = json_array_size(out);

	/* what is open closes with the object's item whole; an item the
	 * text never opened (an empty message) opens and closes */
	for (;;) {
		if (l->open)
			live_close(l, l->k < n ? json_array_get(out, l->k)
					       : NULL);
		if (l->opened >= n)
			break;
		live_open(l, !!strcmp(json_string_value(json_object_get(
			json_array_get(out, l->opened), "type")), "reasoning"));
	}
	e = json_pack("{s:s, s:O}", "type",
		      !strcmp(json_string_value(json_object_get(o, "status")),
			      "incomplete") ? "response.incomplete"
					    : "response.completed",
		      "response", o);
	l->emit(l->ctx, e);
}

void responses_events(json_t *o, const char *id, responses_emit emit,
		      void *ctx)
{
	responses_live l;
	json_t *item;
	size_t k;

	/* the whole texts as one delta each, then the ends */
	responses_live_init(&l, id, emit, ctx);
	json_array_foreach(json_object_get(o, "output"), k, item) {
		json_t *c0 = json_array_get(json_object_get(item, "content"), 0);
		const char *t = json_string_value(json_object_get(c0, "text"));
		size_t tl = json_string_length(json_object_get(c0, "text"));

		if (!strcmp(json_string_value(json_object_get(item, "type")),
			    "reasoning"))
			responses_live_text(&l, t, tl, NULL, 0, NULL);
		else
			responses_live_text(&l, NULL, 0, t, tl,
					    json_object_get(c0, "logprobs"));
	}
	responses_live_end(&l, o);
	responses_live_fini(&l);
}

/*
 * hfvocab — reads a Hugging Face tokenizer.json (see hfvocab.h) into the
 * token table, merges and special tokens a GGUF vocabulary holds, so a
 * synthesized model carries a real tokenizer. Callers: infer/mkmodel.c,
 * the tokenizer tests, bench and fuzzer.
 */
#include "text/hfvocab.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qerr.h"
#include "text/tok.h"

/* ids beyond this are taken as corrupt input, not a vocabulary */
#define HFV_MAX_ID (1u << 24)

/* pre-tokenizer Split regexes as they appear in tokenizer.json */
static const struct {
	const char *regex;
	const char *pre;
} known_res[] = {
	{"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
	 " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	 "qwen2"},
	{"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
	 "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
	 "\\s+(?!\\S)|\\s+",
	 "llama-bpe"},
	{"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"
	 "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
	 "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
	 "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
	 "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
	 "\\s+(?!\\S)|\\s+",
	 "gpt-4o"},
	{"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
	 "\\s+(?!\\S)|\\s+",
	 "gpt-2"},
};

static void info_init(hfvocab_info *info)
{
	memset(info, 0, sizeof(*info));
	info->bos = info->eos = info->pad = -1;
	info->add_bos = -1;
}

static void set_str(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* ---- tokenizer.json -------------------------------------------------- */

typedef struct {
	const char *path;
	uint32_t n;             /* tokens */
	const char **text;      /* (n) into the JSON or pads */
	uint64_t *len;          /* (n) */
	int32_t *type;          /* (n) */
	char **owned;           /* (n) malloc'ed [PADi] texts, else NULL */
	const char **mtext;     /* merges "a b" */
	uint64_t *mlen;
	char **mown;
	uint64_t n_merges;
} conv;

static void conv_fini(conv *c)
{
	if (c->owned)
		for (uint32_t i = 0; i < c->n; i++)
			free(c->owned[i]);
	if (c->mown)
		for (uint64_t i = 0; i < c->n_merges; i++)
			free(c->mown[i]);
	free(c->owned);
	free(c->text);
	free(c->len);
	free(c->type);
	free(c->mtext);
	free(c->mlen);
	free(c->mown);
}

static int json_id(const conv *c, json_t *v, const char *what, uint32_t *id)
{
	double d;

	if (!json_is_number(v))
		return qerr_fail(QERR_FORMAT, "%s: %s: id is not a number",
				 c->path, what);
	d = json_number_value(v);
	if (!(d >= 0 && d < HFV_MAX_ID) || d != (double)(uint32_t)d)
		return qerr_fail(QERR_FORMAT, "%s: %s: bad id %g", c->path, what,
				 d);
	*id = (uint32_t)d;
	return 0;
}

static int looks_special(const char *s, size_t n)
{
	static const char fw_open[] = "<\xef\xbd\x9c", fw_close[] = "\xef\xbd\x9c>";

	if (n >= 4 && !memcmp(s, "<|", 2) && !memcmp(s + n - 2, "|>", 2))
		return 1;
	if (n >= 8 && !memcmp(s, fw_open, 4) && !memcmp(s + n - 4, fw_close, 4))
		return 1;
	if (n >= 8 && !memcmp(s, "<unused", 7) && s[n - 1] == '>')
		return 1;
	return (n == 5 && !memcmp(s, "<pad>", 5)) ||
	       (n == 6 && !memcmp(s, "<mask>", 6)) ||
	       (n == 7 && !memcmp(s, "<2mass>", 7)) ||
	       (n == 7 && !memcmp(s, "[@BOS@]", 7));
}

static int fill_tokens(conv *c, json_t *vocab, json_t *added, uint32_t pad_to)
{
	uint32_t max = 0, id;
	const char *key;
	json_t *v;
	size_t i;
	int rc, any = 0;

	json_object_foreach(vocab, key, v) {
		if ((rc = json_id(c, v, "model.vocab", &id)))
			return rc;
		max = id > max ? id : max;
		any = 1;
	}
	if (added && !json_is_array(added))
		return qerr_fail(QERR_FORMAT, "%s: added_tokens is not an array",
				 c->path);
	json_array_foreach(added, i, v) {
		if (!json_is_object(v) ||
		    !json_is_string(json_object_get(v, "content")))
			return qerr_fail(QERR_FORMAT, "%s: added_tokens[%zu] has "
					 "no content", c->path, i);
		if ((rc = json_id(c, json_object_get(v, "id"), "added_tokens",
				  &id)))
			return rc;
		max = id > max ? id : max;
		any = 1;
	}
	if (!any)
		return qerr_fail(QERR_FORMAT, "%s: empty vocabulary", c->path);
	c->n = max + 1 > pad_to ? max + 1 : pad_to;
	c->text = calloc(c->n, sizeof(*c->text));
	c->len = calloc(c->n, sizeof(*c->len));
	c->type = calloc(c->n, sizeof(*c->type));
	c->owned = calloc(c->n, sizeof(*c->owned));
	if (!c->text || !c->len || !c->type || !c->owned)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", c->path);
	json_object_foreach(vocab, key, v) {
		json_id(c, v, "model.vocab", &id);
		if (c->text[id])
			return qerr_fail(QERR_FORMAT, "%s: id %u is used by '%s' "
					 "and '%s'", c->path, id, c->text[id],
					 key);
		c->text[id] = key;
		c->len[id] = strlen(key);
		c->type[id] = 1;
	}
	json_array_foreach(added, i, v) {
		json_t *content = json_object_get(v, "content");
		const char *s = json_string_value(content);
		size_t n = json_string_length(content);

		json_id(c, json_object_get(v, "id"), "added_tokens", &id);
		if (c->text[id] && (c->len[id] != n || memcmp(c->text[id], s, n)))
			return qerr_fail(QERR_FORMAT, "%s: added token '%s' "
					 "reuses id %u of '%s'", c->path, s,
					 id, c->text[id]);
		if (!n)
			return qerr_fail(QERR_FORMAT, "%s: added token %u is "
					 "empty", c->path, id);
		c->text[id] = s;
		c->len[id] = n;
		c->type[id] = json_is_true(json_object_get(v, "special")) ||
			      looks_special(s, n) ? 3 : 4;
	}
	for (id = 0; id < c->n; id++) {
		if (c->text[id])
			continue;
		if (asprintf(&c->owned[id], "[PAD%u]", id) < 0) {
			c->owned[id] = NULL;
			return qerr_fail(QERR_NOMEM, "%s: out of memory",
					 c->path);
		}
		c->text[id] = c->owned[id];
		c->len[id] = strlen(c->owned[id]);
		c->type[id] = 5;
	}
	return 0;
}

static int fill_merges(conv *c, json_t *merges)
{
	json_t *v;
	size_t i;

	if (!json_is_array(merges))
		return qerr_fail(QERR_FORMAT, "%s: model.merges is missing or "
				 "not an array", c->path);
	c->n_merges = json_array_size(merges);
	c->mtext = calloc(c->n_merges + 1, sizeof(*c->mtext));
	c->mlen = calloc(c->n_merges + 1, sizeof(*c->mlen));
	c->mown = calloc(c->n_merges + 1, sizeof(*c->mown));
	if (!c->mtext || !c->mlen || !c->mown)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", c->path);
	json_array_foreach(merges, i, v) {
		if (json_is_string(v)) {
			c->mtext[i] = json_string_value(v);
			c->mlen[i] = json_string_length(v);
			if (!memchr(c->mtext[i], ' ', c->mlen[i]))
				return qerr_fail(QERR_FORMAT, "%s: merges[%zu] "
						 "'%s' is not 'left right'",
						 c->path, i, c->mtext[i]);
		} else if (json_is_array(v) && json_array_size(v) == 2 &&
			   json_is_string(json_array_get(v, 0)) &&
			   json_is_string(json_array_get(v, 1))) {
			json_t *a = json_array_get(v, 0), *b = json_array_get(v, 1);
			size_t la = json_string_length(a);
			size_t lb = json_string_length(b);
			char *s = malloc(la + lb + 2);

			if (!s)
				return qerr_fail(QERR_NOMEM, "%s: out of memory",
						 c->path);
			memcpy(s, json_string_value(a), la);
			s[la] = ' ';
			memcpy(s + la + 1, json_string_value(b), lb);
			s[la + lb + 1] = '\0';
			c->mown[i] = s;
			c->mtext[i] = s;
			c->mlen[i] = la + lb + 1;
		} else {
			return qerr_fail(QERR_FORMAT, "%s: merges[%zu] is neither "
					 "\"a b\" nor [\"a\", \"b\"]", c->path,
					 i);
		}
	}
	return 0;
}

/* Looks for a ByteLevel step and a Split regex in the pre_tokenizer. */
static void scan_pre(json_t *pt, int *byte_level, int *bl_regex,
		     const char **split)
{
	const char *type = json_string_value(json_object_get(pt, "type"));
	json_t *v;
	size_t i;

	if (!type)
		return;
	if (!strcmp(type, "Sequence")) {
		json_array_foreach(json_object_get(pt, "pretokenizers"), i, v)
			scan_pre(v, byte_level, bl_regex, split);
	} else if (!strcmp(type, "ByteLevel")) {
		json_t *ur = json_object_get(pt, "use_regex");

		*byte_level = 1;
		/* use_regex defaults to true in HF tokenizers */
		if (!ur || json_is_true(ur))
			*bl_regex = 1;
	} else if (!strcmp(type, "Split") && !*split) {
		*split = json_string_value(
			json_object_get(json_object_get(pt, "pattern"),
					"Regex"));
	}
}

static const char *detect_pre(json_t *root, int *guessed, int *byte_level)
{
	int bl_regex = 0;
	const char *split = NULL;
	json_t *dec = json_object_get(root, "decoder");
	const char *dt = json_string_value(json_object_get(dec, "type"));

	*byte_level = 0;
	scan_pre(json_object_get(root, "pre_tokenizer"), byte_level, &bl_regex,
		 &split);
	if (dt && !strcmp(dt, "ByteLevel"))
		*byte_level = 1;
	*guessed = 0;
	if (split) {
		for (size_t i = 0; i < sizeof(known_res) / sizeof(known_res[0]);
		     i++)
			if (!strcmp(split, known_res[i].regex))
				return known_res[i].pre;
		*guessed = 1;
		return "default";
	}
	if (bl_regex)
		return "gpt-2";
	*guessed = 1;
	return "default";
}

/* token text of a tokenizer_config field: "text" or {"content": "text"} */
static const char *cfg_token(json_t *cfg, const char *key)
{
	json_t *v = json_object_get(cfg, key);

	if (json_is_object(v))
		v = json_object_get(v, "content");
	return json_string_value(v);
}

static int32_t find_text(const conv *c, const char *s)
{
	size_t n;

	if (!s)
		return -1;
	n = strlen(s);
	for (uint32_t i = 0; i < c->n; i++)
		if (c->len[i] == n && !memcmp(c->text[i], s, n))
			return (int32_t)i;
	return -1;
}

static json_t *load_json(const char *path, int *rc)
{
	json_error_t err;
	json_t *j = json_load_file(path, JSON_DECODE_INT_AS_REAL, &err);

	*rc = 0;
	if (!j) {
		if (json_error_code(&err) == json_error_cannot_open_file)
			*rc = qerr_fail(QERR_IO, "%s: cannot open: %s", path,
					err.text);
		else
			*rc = qerr_fail(QERR_FORMAT, "%s:%d:%d: %s", path,
					err.line, err.column, err.text);
	}
	return j;
}

static int write_config(gguf_writer *w, conv *c, json_t *root,
			const char *tokenizer_json, hfvocab_info *info)
{
	char *dir = strdup(tokenizer_json), *slash, *cpath = NULL;
	json_t *cfg = NULL, *v;
	const char *tmpl = NULL;
	int rc = 0;

	if (!dir)
		return qerr_fail(QERR_NOMEM, "out of memory");
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (asprintf(&cpath, "%s/tokenizer_config.json",
		     slash ? dir : ".") < 0) {
		free(dir);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	free(dir);
	if (!access(cpath, F_OK)) {
		cfg = load_json(cpath, &rc);
		if (rc)
			goto out;
		if (!json_is_object(cfg)) {
			rc = qerr_fail(QERR_FORMAT, "%s: not a JSON object",
				       cpath);
			goto out;
		}
	}
	info->bos = find_text(c, cfg_token(cfg, "bos_token"));
	info->eos = find_text(c, cfg_token(cfg, "eos_token"));
	info->pad = find_text(c, cfg_token(cfg, "pad_token"));
	if (json_is_boolean(v = json_object_get(cfg, "add_bos_token"))) {
		info->add_bos = json_is_true(v);
	} else {
		/* TemplateProcessing {single: [{SpecialToken: {id}}, ...]} */
		json_t *pp = json_object_get(root, "post_processor");
		json_t *steps = json_object_get(pp, "processors");
		size_t i;

		if (!steps) {
			steps = json_array();
			if (steps && pp)
				json_array_append(steps, pp);
		} else {
			json_incref(steps);
		}
		json_array_foreach(steps, i, v) {
			json_t *first = json_array_get(
				json_object_get(v, "single"), 0);
			const char *id = json_string_value(json_object_get(
				json_object_get(first, "SpecialToken"), "id"));

			if (id && find_text(c, id) >= 0) {
				info->add_bos = 1;
				if (info->bos < 0)
					info->bos = find_text(c, id);
			}
		}
		json_decref(steps);
	}
	if (info->bos >= 0)
		gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)info->bos);
	if (info->eos >= 0)
		gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)info->eos);
	if (info->pad >= 0)
		gguf_w_u32(w, "tokenizer.ggml.padding_token_id",
			   (uint32_t)info->pad);
	if (info->add_bos == 1 && info->bos < 0)
		info->add_bos = -1;   /* nothing to add */
	if (info->add_bos >= 0)
		gguf_w_bool(w, "tokenizer.ggml.add_bos_token", info->add_bos);
	if (json_is_boolean(v = json_object_get(cfg, "add_eos_token")) &&
	    (!json_is_true(v) || info->eos >= 0))
		gguf_w_bool(w, "tokenizer.ggml.add_eos_token", json_is_true(v));
	v = json_object_get(cfg, "chat_template");
	if (json_is_string(v)) {
		tmpl = json_string_value(v);
	} else if (json_is_array(v)) {
		json_t *e;
		size_t i;

		/* [{name, template}, ...]: "default", else the first */
		json_array_foreach(v, i, e) {
			const char *name = json_string_value(
				json_object_get(e, "name"));
			const char *tt = json_string_value(
				json_object_get(e, "template"));

			if (tt && (!tmpl || (name && !strcmp(name, "default"))))
				tmpl = tt;
		}
	}
	if (tmpl) {
		gguf_w_str(w, "tokenizer.chat_template", tmpl);
		info->has_chat_template = 1;
	}
out:
	json_decref(cfg);
	free(cpath);
	return rc;
}

int hfvocab_from_json(gguf_writer *w, const char *tokenizer_json,
		      const char *pre_override, uint32_t pad_to,
		      hfvocab_info *info)
{
	hfvocab_info dummy;
	conv c = {.path = tokenizer_json};
	json_t *root, *model;
	const char *mtype, *pre;
	int rc, byte_level, guessed;

	if (!info)
		info = &dummy;
	info_init(info);
	root = load_json(tokenizer_json, &rc);
	if (rc)
		return rc;
	model = json_object_get(root, "model");
	mtype = json_string_value(json_object_get(model, "type"));
	if (!json_is_object(model) || (mtype && strcmp(mtype, "BPE"))) {
		rc = qerr_fail(QERR_UNSUPPORTED, "%s: model type '%s' is not "
			       "supported (want byte-level BPE)",
			       tokenizer_json, mtype ? mtype : "?");
		goto out;
	}
	if (!json_is_object(json_object_get(model, "vocab"))) {
		rc = qerr_fail(QERR_FORMAT, "%s: model.vocab is missing or not "
			       "an object", tokenizer_json);
		goto out;
	}
	pre = detect_pre(root, &guessed, &byte_level);
	if (!byte_level) {
		rc = qerr_fail(QERR_UNSUPPORTED, "%s: not a byte-level BPE "
			       "tokenizer (SentencePiece-style tokenizer.json "
			       "is not supported; use a vocab GGUF)",
			       tokenizer_json);
		goto out;
	}
	if (pre_override && *pre_override) {
		if (!tok_pre_known(pre_override)) {
			char known[400];

			tok_pre_list(known, sizeof(known));
			rc = qerr_fail(QERR_ARG, "pre-tokenizer '%.40s' is not "
				       "one quorum (or llama.cpp) reads, and its "
				       "model would not load (known: %s)",
				       pre_override, known);
			goto out;
		}
		pre = pre_override;
		guessed = 0;
	}
	if ((rc = fill_tokens(&c, json_object_get(model, "vocab"),
			      json_object_get(root, "added_tokens"),
			      pad_to)) ||
	    (rc = fill_merges(&c, json_object_get(model, "merges"))))
		goto out;
	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_str(w, "tokenizer.ggml.pre", pre);
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", c.text, c.len, c.n);
	gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, c.type, c.n);
	rc = gguf_w_arr_str(w, "tokenizer.ggml.merges", c.mtext, c.mlen,
			    c.n_merges);
	if (rc)
		goto out;
	if ((rc = write_config(w, &c, root, tokenizer_json, info)))
		goto out;
	info->n_tokens = c.n;
	info->n_merges = c.n_merges;
	set_str(info->model, sizeof(info->model), "gpt2", 4);
	set_str(info->pre, sizeof(info->pre), pre, strlen(pre));
	info->pre_guessed = guessed;
	/* a writer error is latched and reported again by gguf_writer_save */
out:
	conv_fini(&c);
	json_decref(root);
	return rc;
}

/* ---- copy from a GGUF ------------------------------------------------ */

static char *dupstr(gguf_str s)
{
	char *p = malloc(s.len + 1);

	if (p) {
		memcpy(p, s.ptr, s.len);
		p[s.len] = '\0';
	}
	return p;
}

static int copy_kv(gguf_writer *w, const char *key, const gguf_kv *kv,
		   const char *path)
{
	switch (kv->type) {
	case GGUF_UINT8: case GGUF_UINT16: case GGUF_UINT32: case GGUF_UINT64:
		if (kv->v.u > UINT32_MAX)
			break;
		return gguf_w_u32(w, key, (uint32_t)kv->v.u);
	case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64:
		if (kv->v.i < INT32_MIN || kv->v.i > INT32_MAX)
			break;
		return gguf_w_i32(w, key, (int32_t)kv->v.i);
	case GGUF_FLOAT32: case GGUF_FLOAT64:
		return gguf_w_f32(w, key, (float)kv->v.f);
	case GGUF_BOOL:
		return gguf_w_bool(w, key, (int)kv->v.u);
	case GGUF_STRING: {
		char *s = dupstr(kv->v.s);
		int rc;

		if (!s)
			return qerr_fail(QERR_NOMEM, "out of memory");
		rc = gguf_w_str(w, key, s);
		free(s);
		return rc;
	}
	case GGUF_ARRAY:
		if (kv->arr_type != GGUF_STRING)
			return gguf_w_arr(w, key, kv->arr_type, kv->arr_data,
					  kv->arr_n);
		{
			const char **p = malloc((kv->arr_n + 1) * sizeof(*p));
			uint64_t *l = malloc((kv->arr_n + 1) * sizeof(*l));
			int rc;

			if (!p || !l) {
				free(p);
				free(l);
				return qerr_fail(QERR_NOMEM, "out of memory");
			}
			for (uint64_t i = 0; i < kv->arr_n; i++) {
				p[i] = kv->arr_str[i].ptr;
				l[i] = kv->arr_str[i].len;
			}
			rc = gguf_w_arr_str(w, key, p, l, kv->arr_n);
			free(p);
			free(l);
			return rc;
		}
	}
	return qerr_fail(QERR_UNSUPPORTED, "%s: cannot copy '%s' (type %s, "
			 "value out of 32-bit range)", path, key,
			 gguf_vtype_name(kv->type));
}

int hfvocab_from_gguf(gguf_writer *w, const gguf_file *src,
		      hfvocab_info *info)
{
	hfvocab_info dummy;
	const gguf_kv *kv;
	gguf_str s;
	uint32_t u;
	int rc, b;

	if (!info)
		info = &dummy;
	info_init(info);
	rc = gguf_get_arr(src, "tokenizer.ggml.tokens", GGUF_STRING, &kv);
	if (rc)
		return rc;
	if (kv->arr_n == 0 || kv->arr_n > HFV_MAX_ID)
		return qerr_fail(QERR_FORMAT, "%s: tokenizer.ggml.tokens has "
				 "%llu entries", gguf_path(src),
				 (unsigned long long)kv->arr_n);
	info->n_tokens = (uint32_t)kv->arr_n;
	if ((rc = gguf_get_str(src, "tokenizer.ggml.model", &s)))
		return rc;
	set_str(info->model, sizeof(info->model), s.ptr, s.len);
	if (!gguf_get_str(src, "tokenizer.ggml.pre", &s))
		set_str(info->pre, sizeof(info->pre), s.ptr, s.len);
	if (gguf_find(src, "tokenizer.ggml.merges")) {
		const gguf_kv *m = gguf_find(src, "tokenizer.ggml.merges");

		info->n_merges = m->type == GGUF_ARRAY ? m->arr_n : 0;
	}
	if (!gguf_get_u32(src, "tokenizer.ggml.bos_token_id", &u))
		info->bos = (int32_t)u;
	if (!gguf_get_u32(src, "tokenizer.ggml.eos_token_id", &u))
		info->eos = (int32_t)u;
	if (!gguf_get_u32(src, "tokenizer.ggml.padding_token_id", &u))
		info->pad = (int32_t)u;
	if (!gguf_get_bool(src, "tokenizer.ggml.add_bos_token", &b))
		info->add_bos = b;
	info->has_chat_template = gguf_find(src, "tokenizer.chat_template") !=
				  NULL;
	qerr_clear();
	for (uint64_t i = 0; i < gguf_n_kv(src); i++) {
		const gguf_kv *e = gguf_kv_at(src, i);
		char *key;

		if (e->key.len < 10 || memcmp(e->key.ptr, "tokenizer.", 10))
			continue;
		key = dupstr(e->key);
		if (!key)
			return qerr_fail(QERR_NOMEM, "out of memory");
		rc = copy_kv(w, key, e, gguf_path(src));
		free(key);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * constrain — the ways a request may constrain what its samples write,
 * each made one GBNF grammar (gbnf.h) that the sampler follows: a GBNF
 * text as it is (llama.cpp's grammar), a JSON schema (jschema.h), any
 * JSON object, a regular expression the whole text matches (rxgbnf.h),
 * or one of a list of strings. The doors (tools/sampflags.c, the
 * gateway's openai.c, conf/cfg.c) name them by their spellings and call
 * here; what they get is the text of the `grammar` setting (sc/params).
 */
#ifndef QUORUM_CONSTRAIN_H
#define QUORUM_CONSTRAIN_H

#include <jansson.h>
#include <stddef.h>

typedef enum {
	CONSTRAIN_GRAMMAR,     /* a GBNF text (no NUL) */
	CONSTRAIN_JSON_SCHEMA, /* a JSON schema: an object, or its text */
	CONSTRAIN_JSON_OBJECT, /* any JSON object (the value is unused) */
	CONSTRAIN_REGEX,       /* a regular expression, matched whole */
	CONSTRAIN_CHOICE,      /* an array of 1..256 non-empty strings */
} constrain_kind;

#define CONSTRAIN_CHOICES_MAX 256
#define CONSTRAIN_CHOICE_BYTES 1024

/* The grammar text of constraint v of kind k into *out (malloc'ed,
 * NUL-terminated; not yet checked as GBNF: the grammar setting's parser
 * does that). 0, or QERR_FORMAT / QERR_UNSUPPORTED / QERR_RANGE with the
 * reason as qerr detail ("pattern: unclosed '[' (at offset 3)",
 * "schema.properties.a: ...", "choice[2]: an empty string");
 * QERR_NOMEM. */
int constrain_gbnf(constrain_kind k, const json_t *v, char **out);

/* The answer format (sc/answer.h's spelling) a sample constrained by
 * kind k is voted on when the request names none: a JSON value's
 * canonical form ("json:": keys sorted, numbers by value), the whole text
 * as written for a regular expression or a choice ("exact": the options
 * "a" and "A" stay apart, none is dropped as an article); NULL for a GBNF
 * grammar, whose text may hold reasoning before its answer (auto reads
 * it). The one rule of the doors (sampflags.c, openai.c, cfg.c). */
const char *constrain_answer(constrain_kind k);

/* The grammar of a regular expression (CONSTRAIN_REGEX), or of one of n
 * strings (CONSTRAIN_CHOICE), as constrain_gbnf. */
int constrain_regex(const char *pattern, char **out);
int constrain_choice(const char *const *opts, size_t n, char **out);

/* The largest grammar or JSON schema file read. */
#define CONSTRAIN_FILE_MAX (2u << 20)

/* The text of a grammar or JSON schema file (what: "grammar", "JSON
 * schema", for messages) into *out (malloc'ed, NUL-terminated), *len its
 * bytes: the one reader of such files (--grammar, --json-schema,
 * sampling.grammar_file, sampling.json_schema_file). An empty grammar
 * setting means no constraint, so an empty file, or a directory (which
 * reads as empty), would silently constrain nothing: both are refused.
 * 0, or with the detail naming path: QERR_IO ("PATH: No such file or
 * directory"), QERR_FORMAT ("PATH: is a directory", "PATH: empty
 * grammar"), QERR_RANGE ("PATH: over 2 MiB"), QERR_NOMEM. */
int constrain_read_file(const char *path, const char *what, char **out,
			size_t *len);

#endif

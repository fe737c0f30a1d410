/*
 * tok — text <-> token ids for the vocabularies stored in GGUF files,
 * bit-exact with llama.cpp's tokenizer (its test-tokenizer-0 vectors).
 *
 * implements: tokenizer.ggml.model = "gpt2"  (byte-level BPE, GPT-2 byte to
 *             unicode mapping, merges by rank, pre-tokenizer regexes chosen
 *             by tokenizer.ggml.pre: "qwen2", "llama-bpe", "gpt-4o"
 *             (o200k), "gpt-2", "default" and their llama.cpp aliases;
 *             llama.cpp's attribute fixes for gpt-oss's harmony tokens);
 *             tokenizer.ggml.model = "llama" (SentencePiece BPE by score,
 *             "\xe2\x96\x81" for spaces, leading-space prefix, <0xNN> byte
 *             fallback).
 *
 * Encoding, in llama.cpp's order:
 *   1. special-token partition: the text of control (3) / unknown (2)
 *      tokens is matched as one token only when parse_special is set;
 *      user-defined (4) tokens are ALWAYS matched (as llama.cpp and HF
 *      tokenizers do). Longer tokens win over shorter ones.
 *   2. each remaining text run is tokenized on its own. Invalid UTF-8 is
 *      never an error: for BPE every byte that does not start a well-formed
 *      sequence becomes U+FFFD (as llama.cpp does), for SPM it falls back
 *      to its <0xNN> byte token.
 *   3. with add_special, BOS (and EOS) are added when the vocabulary says
 *      so (tokenizer.ggml.add_bos_token / add_eos_token; defaults as in
 *      llama.cpp: on for SPM and llama-bpe, off otherwise).
 *
 * Decoding: tok_piece() gives the exact bytes of one token, so a sample's
 * text is the concatenation of its pieces (which may split a UTF-8
 * sequence; bytes are bytes). Control and unknown tokens give "" unless
 * special is set, then their text. llama.cpp's optional "clean spaces"
 * post-pass is NOT applied: decoding is pure concatenation.
 *
 * A tok is immutable after tok_load(): every function here may be called
 * from several threads on one shared tok (encode uses per-call scratch).
 * It does not reference the gguf_file after loading (all text is copied).
 */
#ifndef QUORUM_TOK_H
#define QUORUM_TOK_H

#include <stdbool.h>

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"

typedef struct tok tok;

/* tokenizer.ggml.token_type values */
enum tok_type {
	TOK_TYPE_UNDEFINED = 0,
	TOK_TYPE_NORMAL = 1,
	TOK_TYPE_UNKNOWN = 2,
	TOK_TYPE_CONTROL = 3,
	TOK_TYPE_USER_DEFINED = 4,
	TOK_TYPE_UNUSED = 5,
	TOK_TYPE_BYTE = 6,
};

/* Loads the tokenizer.* metadata of g (a full model or a vocab-only file).
 * Malformed metadata (missing/mistyped arrays, length mismatches, merges
 * naming unknown tokens, special ids out of range, duplicate tokens, ...)
 * gives QERR_FORMAT / QERR_MISSING / QERR_UNSUPPORTED with a detail. */
int tok_load(const gguf_file *g, tok **out);

/* Whether name is a tokenizer.ggml.pre that tok_load knows (another
 * refuses the model, as llama.cpp does); the known names, ", " between
 * them, as many as fit cap, into out. */
bool tok_pre_known(const char *name);
void tok_pre_list(char *out, size_t cap);
void tok_free(tok **t);

/* Tokenizes len bytes of text (need not be NUL-terminated nor valid
 * UTF-8). On success *ids is a malloc'ed array of *n_ids ids (the caller
 * frees it; NULL when *n_ids is 0). Errors: QERR_NOMEM, QERR_ARG. */
int tok_encode(const tok *t, const char *text, size_t len, int parse_special,
	       int add_special, int32_t **ids, size_t *n_ids);

/* Bytes of token id (NOT NUL-terminated; *len set). Control and unknown
 * tokens give "" unless special; unused tokens always give "". Returns
 * NULL (and *len = 0) for an id out of range. Points into t. */
const char *tok_piece(const tok *t, int32_t id, int special, size_t *len);

/* tok_decode flags */
#define TOK_DECODE_SPECIAL 1   /* render control/unknown tokens' text */
#define TOK_DECODE_STRIP   2   /* drop the one leading space an SPM vocab
				* adds when encoding (first token after an
				* optional BOS), as llama.cpp's detokenizer */

/* Concatenates the pieces of ids into a malloc'ed, NUL-terminated buffer
 * (*len excludes the NUL; the text may itself contain NULs). An id out of
 * range is QERR_RANGE. */
int tok_decode(const tok *t, const int32_t *ids, size_t n, int flags,
	       char **out, size_t *len);

uint32_t tok_vocab_size(const tok *t);
int32_t tok_bos(const tok *t);          /* -1 when none */
int32_t tok_eos(const tok *t);          /* -1 when none */
int32_t tok_eot(const tok *t);          /* end of turn (<|im_end|>, <|eot_id|>, ...), -1 when none */
int tok_add_bos(const tok *t);          /* 1 when add_special prepends BOS */
/* tokenizer.chat_template (a Jinja text, up to its first NUL), or NULL. */
const char *tok_chat_template(const tok *t);
/* Id of the token whose vocabulary text is exactly text, or -1. */
int32_t tok_find(const tok *t, const char *text);
/* enum tok_type of id (TOK_TYPE_UNDEFINED when out of range). */
int tok_type(const tok *t, int32_t id);
int tok_is_control(const tok *t, int32_t id);
/* End of generation: eos, eot and the end-of-text/turn tokens llama.cpp
 * recognises by text (<|im_end|>, <|eot_id|>, <|endoftext|>, ...). */
int tok_is_eog(const tok *t, int32_t id);
/* Raw vocabulary text of id (byte-level encoded for BPE), or NULL. */
const char *tok_text(const tok *t, int32_t id, size_t *len);

/* "gpt2" or "llama" */
const char *tok_model_name(const tok *t);
/* Effective pre-tokenizer: "qwen2", "llama-bpe", "gpt-2", "default", ...
 * (the GGUF value, or llama.cpp's canonical name for an alias). An
 * unknown name fails tok_load (QERR_UNSUPPORTED naming the key, the value
 * and the known names), as in llama.cpp. For SPM vocabularies "spm". */
const char *tok_pre_name(const tok *t);

#endif

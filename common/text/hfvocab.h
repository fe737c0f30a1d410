/*
 * hfvocab — tokenizer metadata for the GGUF files quorum writes.
 *
 * implements: conversion of a Hugging Face tokenizer.json (byte-level BPE:
 *             GPT-2, Llama 3, Qwen2/2.5/3, ...) into the tokenizer.* keys
 *             llama.cpp's converter writes, and copying the tokenizer.*
 *             keys of an existing GGUF (e.g. a vocab-only file).
 *
 * Keys written by hfvocab_from_json, in this order:
 *   tokenizer.ggml.model       "gpt2"
 *   tokenizer.ggml.pre         "qwen2" | "llama-bpe" | "gpt-4o" | "gpt-2" |
 *                              "default"
 *                              (from the Split regex of the pre_tokenizer,
 *                              or the override)
 *   tokenizer.ggml.tokens      ids 0..max over model.vocab and
 *                              added_tokens; holes are "[PAD<id>]"
 *   tokenizer.ggml.token_type  1 normal; added tokens: 3 control when
 *                              "special" or shaped <|...|>, else 4
 *                              user-defined; holes 5 unused
 *   tokenizer.ggml.merges      "left right" (from strings or [l, r] pairs)
 *   tokenizer.ggml.bos_token_id / eos_token_id / padding_token_id
 *   tokenizer.ggml.add_bos_token / add_eos_token
 *   tokenizer.chat_template
 * The last three groups only when known: from tokenizer_config.json in the
 * same directory (bos_token, eos_token, pad_token, add_bos_token,
 * add_eos_token, chat_template), else add_bos from a TemplateProcessing
 * post-processor that starts with a special token.
 *
 * Input files are untrusted: a malformed field is a QERR_FORMAT with a
 * detail naming the file and field (ids must be integers below 2^24). On
 * error w may already hold some keys: discard the writer.
 * tokenizer.json's normalizer (e.g. Qwen's NFC) is not recorded; llama.cpp
 * does not apply it either.
 */
#ifndef QUORUM_HFVOCAB_H
#define QUORUM_HFVOCAB_H

#include <stdint.h>

#include "format/gguf.h"

typedef struct {
	uint32_t n_tokens;      /* vocabulary size = embedding rows */
	uint64_t n_merges;
	char model[16];         /* tokenizer.ggml.model: "gpt2" / "llama" */
	char pre[64];           /* tokenizer.ggml.pre ("" when absent) */
	int pre_guessed;        /* 1: pre-tokenizer not recognised ("default") */
	int32_t bos, eos, pad;  /* -1 when not set */
	int add_bos;            /* -1 when not set, else 0 / 1 */
	int has_chat_template;
} hfvocab_info;

/* Converts tokenizer_json (a path) into tokenizer.* keys of w. pre_override
 * (NULL or "" for detection) forces tokenizer.ggml.pre. The token list is
 * padded with unused "[PADi]" tokens up to pad_to entries (as llama.cpp's
 * converter pads to the model's vocab_size; 0: no padding). info may be
 * NULL. */
int hfvocab_from_json(gguf_writer *w, const char *tokenizer_json,
		      const char *pre_override, uint32_t pad_to,
		      hfvocab_info *info);

/* Copies every tokenizer.* key of src into w, values unchanged (scalar
 * integer types other than u32/i32 are narrowed to u32/i32 when in range,
 * float64 to float32). info may be NULL. */
int hfvocab_from_gguf(gguf_writer *w, const gguf_file *src,
		      hfvocab_info *info);

#endif

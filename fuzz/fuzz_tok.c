/*
 * fuzz_tok — libFuzzer target: the tokenizer on arbitrary text and ids.
 *
 * Vocabularies, loaded once: GPT-2 and Llama SPM (the vocab GGUFs of
 * $QUORUM_ROOT/data/tokenizer-vectors/), Qwen2 and o200k (gpt-oss: the
 * gpt-4o pre-tokenizer and harmony's specials; their tokenizer.json
 * converted with hfvocab_from_json into a temp file). A vocabulary that
 * does not load aborts the run: a fuzz run never silently tests less.
 *
 * Input: byte 0 = mode: bits 0-1 vocabulary, bit 7 decode (else encode);
 * bit 2 parse_special (decode: TOK_DECODE_SPECIAL), bit 3 add_special
 * (decode: TOK_DECODE_STRIP), bit 6 (decode) ids reduced modulo the
 * vocabulary size; the rest is the text (or, in decode mode,
 * little-endian int32 ids).
 *
 * Properties checked beyond "no crash, no leak, no UB": every id encoded
 * is in the vocabulary; for the byte-level BPE vocabularies, valid UTF-8
 * text decodes back to itself (without add_special); tok_decode gives
 * QERR_RANGE exactly when an id is out of range, and otherwise the
 * concatenation of tok_piece.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "text/hfvocab.h"
#include "qerr.h"
#include "text/tok.h"

#define NV 4
static tok *voc[NV];              /* gpt-2, llama-spm, qwen2, o200k */
static const int bpe[NV] = {1, 0, 1, 1};

static void die(const char *what)
{
	fprintf(stderr, "fuzz_tok: %s: %s\n", what, qerr_detail());
	abort();
}

static tok *load(const char *path)
{
	gguf_file *g;
	tok *t = NULL;

	if (gguf_open(path, &g) || tok_load(g, &t))
		die(path);
	gguf_close(&g);
	return t;
}

/* A tokenizer.json (under root) through hfvocab_from_json, as `quorum
 * import` converts it. */
static tok *load_json(const char *root, const char *rel)
{
	char p[1024], tmp[64];
	gguf_writer *w;
	tok *t;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	snprintf(tmp, sizeof(tmp), "/tmp/fuzz-tok-XXXXXX");
	if ((fd = mkstemp(tmp)) < 0)
		die("mkstemp");
	close(fd);
	if (gguf_writer_new(&w) || hfvocab_from_json(w, p, NULL, 0, NULL) ||
	    gguf_writer_save(w, tmp, NULL, NULL))
		die(p);
	gguf_writer_free(&w);
	t = load(tmp);
	unlink(tmp);
	return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *sh = getenv("QUORUM_ROOT");
	char p[1024];

	(void)argc;
	(void)argv;
	if (!sh || !*sh)
		sh = ".";
	snprintf(p, sizeof(p), "%s/data/tokenizer-vectors/ggml-vocab-gpt-2.gguf",
		 sh);
	voc[0] = load(p);
	snprintf(p, sizeof(p),
		 "%s/data/tokenizer-vectors/ggml-vocab-llama-spm.gguf", sh);
	voc[1] = load(p);
	voc[2] = load_json(sh, "data/tokenizers/qwen2/tokenizer.json");
	voc[3] = load_json(sh, "data/tokenizers/o200k/tokenizer.json");
	return 0;
}

/* Well-formed UTF-8 (no overlongs, surrogates or code points past
 * U+10FFFF). */
static int utf8_ok(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint32_t c = s[i], need, min;

		if (c < 0x80) { i++; continue; }
		if ((c & 0xe0) == 0xc0) { need = 1; min = 0x80; c &= 0x1f; }
		else if ((c & 0xf0) == 0xe0) { need = 2; min = 0x800; c &= 0x0f; }
		else if ((c & 0xf8) == 0xf0) { need = 3; min = 0x10000; c &= 0x07; }
		else return 0;
		if (n - i <= need)
			return 0;
		for (uint32_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			c = c << 6 | (s[i + k] & 0x3f);
		}
		if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return 0;
		i += need + 1;
	}
	return 1;
}

static void encode(const tok *t, int is_bpe, const uint8_t *s, size_t n,
		   int ps, int as)
{
	int32_t *ids = NULL;
	size_t nid = 0, len;
	char *out = NULL;
	uint32_t v = tok_vocab_size(t);

	if (tok_encode(t, (const char *)s, n, ps, as, &ids, &nid))
		die("tok_encode");
	if (nid && !ids)
		die("ids missing");
	for (size_t i = 0; i < nid; i++)
		if (ids[i] < 0 || (uint32_t)ids[i] >= v)
			die("id out of the vocabulary");
	if (tok_decode(t, ids, nid, ps ? TOK_DECODE_SPECIAL : 0, &out, &len))
		die("tok_decode of encoded ids");
	if (out[len] != '\0')
		die("decode not NUL-terminated");
	if (is_bpe && !as && utf8_ok(s, n) && (len != n || memcmp(out, s, n))) {
		fprintf(stderr, "round trip: %zu bytes in, %zu out\n", n, len);
		die("BPE encode/decode is not the identity");
	}
	free(out);
	free(ids);
}

static void decode(const tok *t, const uint8_t *s, size_t n, int flags,
		   int modulo)
{
	size_t nid = n / 4, len, plen, off = 0;
	int32_t *ids = malloc((nid ? nid : 1) * sizeof(*ids));
	uint32_t v = tok_vocab_size(t);
	int bad = 0, rc;
	char *out = NULL;

	if (!ids)
		abort();
	for (size_t i = 0; i < nid; i++) {
		uint32_t u = (uint32_t)s[4 * i] | (uint32_t)s[4 * i + 1] << 8 |
			     (uint32_t)s[4 * i + 2] << 16 |
			     (uint32_t)s[4 * i + 3] << 24;

		ids[i] = modulo ? (int32_t)(u % v) : (int32_t)u;
		bad |= ids[i] < 0 || (uint32_t)ids[i] >= v;
	}
	rc = tok_decode(t, ids, nid, flags, &out, &len);
	if (bad) {
		if (rc != QERR_RANGE)
			die("an id out of range decoded");
		free(ids);
		return;
	}
	if (rc)
		die("tok_decode");
	if (!(flags & TOK_DECODE_STRIP))
		for (size_t i = 0; i < nid; i++) {
			const char *p = tok_piece(t, ids[i],
						  flags & TOK_DECODE_SPECIAL,
						  &plen);

			if (!p || plen > len - off || memcmp(out + off, p, plen))
				die("decode is not the concatenation of pieces");
			off += plen;
		}
	if (!(flags & TOK_DECODE_STRIP) && off != len)
		die("decode longer than its pieces");
	free(out);
	free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned mode;
	int v;

	if (size < 1)
		return 0;
	mode = data[0];
	v = mode & 3;
	if (!(mode & 0x80))
		encode(voc[v], bpe[v], data + 1, size - 1, !!(mode & 4),
		       !!(mode & 8));
	else
		decode(voc[v], data + 1, size - 1,
		       (mode & 4 ? TOK_DECODE_SPECIAL : 0) |
			       (mode & 8 ? TOK_DECODE_STRIP : 0),
		       !!(mode & 0x40));
	return 0;
}

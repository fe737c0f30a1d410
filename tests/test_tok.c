/*
 * test_tok — tokenizer conformance (llama.cpp's test vectors, every case),
 * round trips, special tokens, bad metadata, invalid UTF-8, hfvocab.
 *
 * QUORUM_ROOT names the repository root holding data/ (default .).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "text/hfvocab.h"
#include "qerr.h"
#include "text/tok.h"

#define SEP "\n__ggml_vocab_test__\n"

static const char *root_dir(void)
{
	const char *s = getenv("QUORUM_ROOT");

	return s && *s ? s : ".";
}

static char tmpdir[64];

/* one loaded vocabulary per family, built once for the whole run */
enum { V_GPT2, V_SPM, V_QWEN2, V_LLAMA3, V_O200K, V_COUNT };
static const char *const vname[V_COUNT] = {"gpt-2", "llama-spm", "qwen2",
					   "llama-bpe", "o200k"};
static const char *const vdir[V_COUNT] = {NULL, NULL, "qwen2", "llama3",
					  "o200k"};
/* cases in ggml-vocab-NAME.gguf.inp: llama.cpp's 46, o200k's 46 + 36 */
static const size_t vcases[V_COUNT] = {46, 46, 46, 46, 82};
static gguf_file *vg[V_COUNT];
static tok *vt[V_COUNT];
static hfvocab_info vinfo[V_COUNT];

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
		if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		} else {
			buf[n] = '\0';
			*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

static int build_from_json(const char *json, const char *out,
			   hfvocab_info *info)
{
	gguf_writer *w = NULL;
	int rc = gguf_writer_new(&w);

	if (!rc)
		rc = hfvocab_from_json(w, json, NULL, 0, info);
	if (!rc)
		rc = gguf_writer_save(w, out, NULL, NULL);
	gguf_writer_free(&w);
	return rc;
}

static int open_tok(const char *path, gguf_file **g, tok **t)
{
	int rc = gguf_open(path, g);

	if (!rc)
		rc = tok_load(*g, t);
	return rc;
}

static int setup_all(void **state)
{
	char path[512], json[512];
	int rc;

	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_tok.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	for (int v = 0; v < V_COUNT; v++) {
		if (v == V_GPT2 || v == V_SPM) {
			snprintf(path, sizeof(path),
				 "%s/data/tokenizer-vectors/ggml-vocab-%s.gguf",
				 root_dir(), vname[v]);
		} else {
			snprintf(json, sizeof(json),
				 "%s/data/tokenizers/%s/tokenizer.json",
				 root_dir(), vdir[v]);
			snprintf(path, sizeof(path), "%s/%s.gguf", tmpdir,
				 vname[v]);
			rc = build_from_json(json, path, &vinfo[v]);
			if (rc) {
				fprintf(stderr, "building %s: %s\n", vname[v],
					qerr_detail());
				return -1;
			}
		}
		rc = open_tok(path, &vg[v], &vt[v]);
		if (rc) {
			fprintf(stderr, "loading %s: %s\n", path, qerr_detail());
			return -1;
		}
	}
	return 0;
}

static int teardown_all(void **state)
{
	char cmd[128];

	(void)state;
	for (int v = 0; v < V_COUNT; v++) {
		tok_free(&vt[v]);
		gguf_close(&vg[v]);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (tmpdir[0] && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return 0;
}

static void print_escaped(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\n')
			fputs("\\n", stderr);
		else if (c == '\t')
			fputs("\\t", stderr);
		else if (c < 0x20 || c == 0x7f)
			fprintf(stderr, "\\x%02x", c);
		else
			fputc(c, stderr);
	}
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
	fprintf(stderr, "  %s:", label);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %d", ids[i]);
	fputc('\n', stderr);
}

/* Runs every case of ggml-vocab-NAME.gguf.{inp,out} on vocabulary v:
 * exact ids (no BOS, parse_special off, as llama.cpp's test-tokenizer-0)
 * and decode(encode(x)) == x. */
static void run_vectors(int v)
{
	char path[512];
	size_t ni = 0, no = 0, n_cases = 0, n_ok = 0;
	char *inp, *out, *ip, *op;

	snprintf(path, sizeof(path),
		 "%s/data/tokenizer-vectors/ggml-vocab-%s.gguf.inp",
		 root_dir(), vname[v]);
	inp = read_all(path, &ni);
	assert_non_null(inp);
	snprintf(path, sizeof(path),
		 "%s/data/tokenizer-vectors/ggml-vocab-%s.gguf.out",
		 root_dir(), vname[v]);
	out = read_all(path, &no);
	assert_non_null(out);
	ip = inp;
	op = out;
	for (;;) {
		char *sep = strstr(ip, SEP), *eol;
		size_t len, n_ids = 0, n_exp = 0, dlen = 0;
		int32_t *ids = NULL, exp[4096];
		char *dec = NULL;
		int same;

		if (!sep)
			break;
		len = (size_t)(sep - ip);
		eol = strchr(op, '\n');
		assert_non_null(eol);   /* one .out line per input */
		*eol = '\0';
		for (char *q = op, *e; *q; q = e) {
			long id = strtol(q, &e, 10);

			if (e == q)
				break;
			assert_true(n_exp < 4096);
			exp[n_exp++] = (int32_t)id;
		}
		n_cases++;
		assert_int_equal(tok_encode(vt[v], ip, len, 0, 0, &ids, &n_ids),
				 QERR_OK);
		same = n_ids == n_exp &&
		       (n_ids == 0 || !memcmp(ids, exp, n_ids * sizeof(*ids)));
		if (!same) {
			fprintf(stderr, "%s: case %zu mismatch, input '",
				vname[v], n_cases);
			print_escaped(ip, len);
			fprintf(stderr, "'\n");
			print_ids("expected", exp, n_exp);
			print_ids("got     ", ids, n_ids);
		}
		assert_true(same);
		assert_int_equal(tok_decode(vt[v], ids, n_ids, TOK_DECODE_STRIP,
					    &dec, &dlen), QERR_OK);
		if (dlen != len || memcmp(dec, ip, len)) {
			fprintf(stderr, "%s: case %zu round trip gives '",
				vname[v], n_cases);
			print_escaped(dec, dlen);
			fprintf(stderr, "'\n");
		}
		assert_int_equal(dlen, len);
		assert_memory_equal(dec, ip, len);
		n_ok++;
		free(dec);
		free(ids);
		ip = sep + strlen(SEP);
		op = eol + 1;
	}
	assert_int_equal(n_cases, vcases[v]);
	printf("[ INFO     ] %s: %zu/%zu vectors exact, round trip exact\n",
	       vname[v], n_ok, n_cases);
	free(inp);
	free(out);
}

static void test_vectors_gpt2(void **state) { (void)state; run_vectors(V_GPT2); }
static void test_vectors_llama_spm(void **state) { (void)state; run_vectors(V_SPM); }
static void test_vectors_qwen2(void **state) { (void)state; run_vectors(V_QWEN2); }
static void test_vectors_llama_bpe(void **state) { (void)state; run_vectors(V_LLAMA3); }
static void test_vectors_o200k(void **state) { (void)state; run_vectors(V_O200K); }


static size_t enc(int v, const char *s, int parse_special, int add_special,
		  int32_t *out, size_t cap)
{
	int32_t *ids = NULL;
	size_t n = 0;

	assert_int_equal(tok_encode(vt[v], s, strlen(s), parse_special,
				    add_special, &ids, &n), QERR_OK);
	assert_true(n <= cap);
	if (n)
		memcpy(out, ids, n * sizeof(*ids));
	free(ids);
	return n;
}

/* Letters and numbers that Unicode 15.0/15.1 added (CJK Extension I,
 * Kaktovik numerals, Nag Mundari, Kawi) are letters and numbers to the
 * pre-tokenizer, as to llama.cpp (its tables are 15.1): quorum's regexes
 * spell \p{L}, \p{N}, \p{P} out from text/ucd.h, where they had taken
 * PCRE2's own tables (Debian's 10.42: Unicode 14, and the host's library
 * chose the tokens). The ids: llama-tokenize (llama.cpp 3f545bec, plain:
 * --no-bos --no-parse-special) on each vocabulary. */
static void test_unicode_15(void **state)
{
	static const char *const texts[] = {
		"\xf0\xae\xaf\xb0's",         /* U+2EBF0 's */
		" \xf0\x9d\x8b\x80",          /* space U+1D2C0 */
		"\xf0\x9e\x93\x90\xf0\x9e\x93\xb9 12", /* U+1E4D0 U+1E4F9 */
		"x\xf0\x91\xbc\x84'S",        /* x U+11F04 'S */
		" \xf0\x9d\x8b\x80\xf0\x9d\x8b\x81\xf0\x9d\x8b\x82!",
	};
	static const struct {
		int v;
		int32_t ids[5][12];
	} rows[] = {
		{V_QWEN2, {{172, 106, 107, 108, 594, -1},
			   {220, 56252, 233, 222, -1},
			   {172, 252, 241, 238, 172, 252, 241, 117, 220, 16, 17,
			    -1},
			   {87, 128240, 120, 226, 13272, -1},
			   {220, 56252, 233, 222, 56252, 233, 223, 56252, 233,
			    224, 0, -1}}},
		{V_GPT2, {{172, 106, 107, 108, 338, -1},
			  {220, 47728, 233, 222, -1},
			  {172, 252, 241, 238, 172, 252, 241, 117, 1105, -1},
			  {87, 172, 239, 120, 226, 6, 50, -1},
			  {220, 47728, 233, 222, 47728, 233, 223, 47728, 233,
			   224, 0, -1}}},
		{V_LLAMA3, {{172, 106, 107, 108, 596, -1},
			    {220, 57352, 233, 222, -1},
			    {172, 252, 241, 238, 172, 252, 241, 117, 220, 717,
			     -1},
			    {87, 172, 239, 120, 226, 13575, -1},
			    {220, 57352, 233, 222, 57352, 233, 223, 57352, 233,
			     224, 0, -1}}},
		{V_O200K, {{172, 106, 107, 108, 885, -1},
			   {220, 43120, 233, 222, -1},
			   {172, 252, 241, 238, 172, 252, 241, 117, 220, 899,
			    -1},
			   {87, 172, 239, 120, 226, 31233, -1},
			   {220, 43120, 233, 222, 43120, 233, 223, 43120, 233,
			    224, 0, -1}}},
	};

	(void)state;
	for (size_t r = 0; r < sizeof(rows) / sizeof(*rows); r++)
		for (size_t i = 0; i < sizeof(texts) / sizeof(*texts); i++) {
			int32_t *ids = NULL;
			size_t n = 0, m = 0;

			assert_int_equal(tok_encode(vt[rows[r].v], texts[i],
						    strlen(texts[i]), 0, 0, &ids,
						    &n), QERR_OK);
			while (rows[r].ids[i][m] >= 0)
				m++;
			if (n != m || memcmp(ids, rows[r].ids[i],
					     n * sizeof(*ids))) {
				fprintf(stderr, "%s: text %zu\n", vname[rows[r].v],
					i);
				print_ids("expected", rows[r].ids[i], m);
				print_ids("got     ", ids, n);
				fail();
			}
			free(ids);
		}
}

/* o200k as gpt-oss has it (o200k_harmony): the pre-tokenizer, the ids of
 * the harmony tokens and the attributes llama.cpp gives them. */
static void test_o200k_harmony(void **state)
{
	static const struct {
		const char *text;
		int32_t id;
		int eog, rendered;   /* rendered: piece without "special" */
	} h[] = {
		{"<|startoftext|>", 199998, 0, 0},
		{"<|endoftext|>", 199999, 1, 0},
		{"<|return|>", 200002, 1, 0},
		{"<|constrain|>", 200003, 0, 1},
		{"<|channel|>", 200005, 0, 1},
		{"<|start|>", 200006, 0, 1},
		{"<|end|>", 200007, 0, 1},
		{"<|message|>", 200008, 0, 1},
		{"<|call|>", 200012, 1, 0},
		{"<|endofprompt|>", 200018, 0, 0},
	};
	const tok *t = vt[V_O200K];
	int32_t ids[64];
	size_t n, len;

	(void)state;
	assert_string_equal(vinfo[V_O200K].pre, "gpt-4o");
	assert_int_equal(vinfo[V_O200K].pre_guessed, 0);
	assert_int_equal(vinfo[V_O200K].n_tokens, 200019);
	assert_int_equal(vinfo[V_O200K].n_merges, 199742);
	assert_int_equal(vinfo[V_O200K].bos, 199998);
	assert_int_equal(vinfo[V_O200K].eos, 200002);
	assert_int_equal(vinfo[V_O200K].pad, 199999);
	assert_int_equal(vinfo[V_O200K].add_bos, -1);
	assert_string_equal(tok_pre_name(t), "gpt-4o");
	assert_false(tok_add_bos(t));
	for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
		const char *p;

		assert_int_equal(tok_find(t, h[i].text), h[i].id);
		assert_int_equal(!!tok_is_eog(t, h[i].id), h[i].eog);
		p = tok_piece(t, h[i].id, 0, &len);
		assert_int_equal(len, h[i].rendered ? strlen(h[i].text) : 0);
		if (len)
			assert_memory_equal(p, h[i].text, len);
		/* every one is a single token with parse_special */
		n = enc(V_O200K, h[i].text, 1, 0, ids, 64);
		assert_int_equal(n, 1);
		assert_int_equal(ids[0], h[i].id);
	}
	/* the message tokens are user-defined: matched in plain text too;
	 * the control ones are not */
	n = enc(V_O200K, "<|channel|>final<|message|>", 0, 0, ids, 64);
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 200005);
	assert_int_equal(ids[2], 200008);
	n = enc(V_O200K, "<|return|>", 0, 0, ids, 64);
	assert_true(n > 1);
	for (size_t i = 0; i < n; i++)
		assert_true(ids[i] < 199998);
	/* the pre-tokenizer's cuts: at a lower-to-upper case change, after
	 * three digits, before the digits of " 1234" */
	{
		static const char *const cuts[][4] = {
			{"parseJSON", "parse", "JSON", NULL},
			{"HelloWorld's", "Hello", "World's", NULL},
			{" 1234", " ", "123", "4"},
			{"a/b//\n", "a", "/b", "//\n"},
		};

		for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
			int32_t parts[64];
			size_t np = 0;

			for (int k = 1; k < 4 && cuts[c][k]; k++)
				np += enc(V_O200K, cuts[c][k], 0, 0, parts + np,
					  64 - np);
			n = enc(V_O200K, cuts[c][0], 0, 0, ids, 64);
			assert_int_equal(n, np);
			assert_memory_equal(ids, parts, n * sizeof(*ids));
		}
	}
}

static void test_special_tokens(void **state)
{
	int32_t ids[64], user;
	size_t n, len;
	const char *p;

	(void)state;
	/* qwen2: control tokens only with parse_special */
	assert_int_equal(tok_find(vt[V_QWEN2], "<|im_start|>"), 151644);
	assert_int_equal(tok_find(vt[V_QWEN2], "<|im_end|>"), 151645);
	assert_int_equal(tok_find(vt[V_QWEN2], "<|nope|>"), -1);
	user = tok_find(vt[V_QWEN2], "user");
	assert_true(user >= 0);
	n = enc(V_QWEN2, "<|im_start|>user", 1, 0, ids, 64);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 151644);
	assert_int_equal(ids[1], user);
	n = enc(V_QWEN2, "<|im_start|>user", 0, 0, ids, 64);
	assert_true(n > 2);
	for (size_t i = 0; i < n; i++)
		assert_true(ids[i] < 151643);
	/* user-defined tokens are matched even without parse_special */
	assert_int_equal(tok_type(vt[V_QWEN2], 151667), TOK_TYPE_USER_DEFINED);
	n = enc(V_QWEN2, "<think>hi</think>", 0, 0, ids, 64);
	assert_int_equal(ids[0], 151667);
	assert_int_equal(ids[n - 1], 151668);
	/* control pieces render only when asked */
	p = tok_piece(vt[V_QWEN2], 151644, 0, &len);
	assert_non_null(p);
	assert_int_equal(len, 0);
	p = tok_piece(vt[V_QWEN2], 151644, 1, &len);
	assert_int_equal(len, 12);
	assert_memory_equal(p, "<|im_start|>", 12);
	assert_true(tok_is_control(vt[V_QWEN2], 151644));
	assert_false(tok_is_control(vt[V_QWEN2], user));
	/* end of generation */
	assert_true(tok_is_eog(vt[V_QWEN2], 151645));
	assert_true(tok_is_eog(vt[V_QWEN2], 151643));
	assert_false(tok_is_eog(vt[V_QWEN2], 151644));
	/* "</s>", an ordinary token of Qwen's vocabulary, is an end of
	 * generation and a control token to llama.cpp (its list by text,
	 * for paddleocr): matched whole with parse_special, as
	 * llama-tokenize gives it (it had been "</", "s", ">") */
	assert_int_equal(tok_find(vt[V_QWEN2], "</s>"), 128247);
	assert_true(tok_is_eog(vt[V_QWEN2], 128247));
	assert_true(tok_is_control(vt[V_QWEN2], 128247));
	n = enc(V_QWEN2, "a</s>b", 1, 0, ids, 64);
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 64);
	assert_int_equal(ids[1], 128247);
	assert_int_equal(ids[2], 65);
	assert_false(tok_is_eog(vt[V_QWEN2], user));
	assert_int_equal(tok_eos(vt[V_QWEN2]), 151645);
	assert_int_equal(tok_eot(vt[V_QWEN2]), 151645);
	assert_int_equal(tok_bos(vt[V_QWEN2]), -1);
	assert_false(tok_add_bos(vt[V_QWEN2]));
	assert_true(tok_is_eog(vt[V_LLAMA3], tok_find(vt[V_LLAMA3],
						      "<|eot_id|>")));
	assert_true(tok_is_eog(vt[V_GPT2], 50256));
	assert_true(tok_is_eog(vt[V_SPM], 2));
	assert_false(tok_is_eog(vt[V_SPM], 1));
	assert_false(tok_is_eog(vt[V_SPM], -5));
	assert_false(tok_is_eog(vt[V_SPM], 1 << 30));

	/* llama3: BOS added by default, and the text of BOS parses */
	assert_int_equal(tok_bos(vt[V_LLAMA3]), 128000);
	assert_true(tok_add_bos(vt[V_LLAMA3]));
	n = enc(V_LLAMA3, "Hello", 0, 1, ids, 64);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 128000);
	n = enc(V_LLAMA3, "<|begin_of_text|>Hello", 1, 0, ids, 64);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 128000);

	/* SPM: BOS, and the space prefix after a special token */
	n = enc(V_SPM, "Hello", 0, 1, ids, 64);
	assert_int_equal(ids[0], 1);
	{
		int32_t a[64];
		size_t m = enc(V_SPM, "<s>Hello", 1, 0, a, 64);

		assert_int_equal(m, n);
		assert_memory_equal(a, ids, n * sizeof(*ids));
	}
	n = enc(V_SPM, "<s>", 0, 0, ids, 64);
	assert_true(n > 1);
	/* decode strips the prefix space after BOS too */
	{
		char *d;
		size_t dl;

		n = enc(V_SPM, " x  y", 0, 1, ids, 64);
		assert_int_equal(tok_decode(vt[V_SPM], ids, n, TOK_DECODE_STRIP,
					    &d, &dl), 0);
		assert_string_equal(d, " x  y");
		free(d);
		assert_int_equal(tok_decode(vt[V_SPM], ids, n,
					    TOK_DECODE_SPECIAL, &d, &dl), 0);
		assert_string_equal(d, "<s>  x  y");
		free(d);
	}
}

static void test_pieces(void **state)
{
	static const char text[] = "Grüße, 世界! \xf0\x9f\x98\x81 ok\n\tdone";
	size_t len;
	const char *p;

	(void)state;
	p = tok_piece(vt[V_GPT2], tok_find(vt[V_GPT2], "\xc4\xa0world"), 0,
		      &len);
	assert_int_equal(len, 6);
	assert_memory_equal(p, " world", 6);
	p = tok_piece(vt[V_SPM], tok_find(vt[V_SPM], "<0x0A>"), 0, &len);
	assert_int_equal(len, 1);
	assert_int_equal(p[0], '\n');
	p = tok_piece(vt[V_SPM], tok_find(vt[V_SPM], "\xe2\x96\x81the"), 0,
		      &len);
	assert_int_equal(len, 4);
	assert_memory_equal(p, " the", 4);
	assert_null(tok_piece(vt[V_SPM], 32000, 0, &len));
	assert_null(tok_piece(vt[V_SPM], -1, 1, &len));
	/* incremental decode: pieces concatenate to the text */
	for (int v = 0; v < V_COUNT; v++) {
		int32_t *ids = NULL;
		size_t n = 0, k = 0, dl;
		char buf[256], *d;

		assert_int_equal(tok_encode(vt[v], text, strlen(text), 0, 0,
					    &ids, &n), 0);
		for (size_t i = 0; i < n; i++) {
			p = tok_piece(vt[v], ids[i], 0, &len);
			assert_true(k + len < sizeof(buf));
			memcpy(buf + k, p, len);
			k += len;
		}
		assert_int_equal(tok_decode(vt[v], ids, n, 0, &d, &dl), 0);
		assert_int_equal(dl, k);
		assert_memory_equal(d, buf, k);
		/* SPM adds one leading space, BPE nothing */
		assert_int_equal(k, strlen(text) + (v == V_SPM));
		assert_memory_equal(buf + (v == V_SPM), text, strlen(text));
		free(d);
		free(ids);
	}
	{
		int32_t bad[] = {5, 999999};
		char *d = (char *)1;
		size_t dl = 7;

		assert_int_equal(tok_decode(vt[V_GPT2], bad, 2, 0, &d, &dl),
				 QERR_RANGE);
		assert_null(d);
	}
}

/* Invalid UTF-8 never fails: BPE sees U+FFFD per bad byte (llama.cpp),
 * SPM falls back to byte tokens and round-trips the bytes. */
static void test_invalid_utf8(void **state)
{
	static const struct {
		const char *name, *in, *as;   /* as: BPE-equivalent text */
	} cases[] = {
		{"lone 0xff", "a\xff" "b", "a\xef\xbf\xbd" "b"},
		{"bare continuation", "\x80\x80x", "\xef\xbf\xbd\xef\xbf\xbdx"},
		{"truncated at end", "abc\xe2\x82", "abc\xef\xbf\xbd\xef\xbf\xbd"},
		{"bad continuation", "\xe2(\xa1", "\xef\xbf\xbd(\xef\xbf\xbd"},
		{"5-byte lead", "\xf8\x88\x80\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd"
		 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
		{"overlong slash", "a\xc0\xafz", "a/z"},
		{"surrogate", "x\xed\xa0\x80y", NULL},
		{"above U+10FFFF", "\xf4\x90\x80\x80!", "\xef\xbf\xbd!"},
	};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		for (int v = 0; v < V_COUNT; v++) {
			int32_t *a = NULL, *b = NULL;
			size_t na = 0, nb = 0, dl;
			size_t il = strlen(cases[c].in);
			char *d;

			fprintf(stderr, "%s", "");
			assert_int_equal(tok_encode(vt[v], cases[c].in, il, 1, 1,
						    &a, &na), 0);
			assert_true(na > 0);
			if (v == V_SPM) {
				assert_int_equal(tok_decode(vt[v], a, na,
							    TOK_DECODE_STRIP,
							    &d, &dl), 0);
				if (dl != il || memcmp(d, cases[c].in, il))
					fail_msg("%s: SPM round trip", cases[c].name);
				free(d);
			} else if (cases[c].as) {
				assert_int_equal(tok_encode(vt[v], cases[c].as,
							    strlen(cases[c].as),
							    1, 1, &b, &nb), 0);
				if (na != nb || memcmp(a, b, na * sizeof(*a)))
					fail_msg("%s: %s differs from its "
						 "U+FFFD form", vname[v],
						 cases[c].name);
			}
			free(a);
			free(b);
		}
	}
	/* long whitespace / digit runs stay fine (regex stack limits) */
	{
		size_t n = 200000;
		char *big = malloc(n + 2);
		int32_t *ids = NULL;
		size_t ni = 0;

		assert_non_null(big);
		memset(big, ' ', n);
		big[n] = 'x';
		big[n + 1] = '\0';
		for (int v = 0; v < V_COUNT; v++) {
			assert_int_equal(tok_encode(vt[v], big, n + 1, 0, 0,
						    &ids, &ni), 0);
			assert_true(ni > 0);
			free(ids);
		}
		memset(big, '7', n);
		assert_int_equal(tok_encode(vt[V_QWEN2], big, n, 0, 0, &ids,
					    &ni), 0);
		assert_int_equal(ni, n);   /* qwen2 splits digits one by one */
		free(ids);
		free(big);
	}
	{
		int32_t *ids = (int32_t *)1;
		size_t ni = 9;

		assert_int_equal(tok_encode(vt[V_GPT2], "", 0, 1, 0, &ids, &ni),
				 0);
		assert_int_equal(ni, 0);
		assert_null(ids);
		assert_int_equal(tok_encode(vt[V_GPT2], NULL, 3, 1, 0, &ids,
					    &ni), QERR_ARG);
	}
}

/* ---- malformed metadata --------------------------------------------- */

static const char *const tiny_tokens[] = {"a", "b", "ab", "<|end|>", "c"};
static const int32_t tiny_types[] = {1, 1, 1, 3, 1};

static void w_tiny(gguf_writer *w, int skip_tokens, int skip_merges)
{
	static const char *const merges[] = {"a b"};

	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2");
	if (!skip_tokens)
		gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 5);
	gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, tiny_types, 5);
	if (!skip_merges)
		gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
}

static void m_ok(gguf_writer *w) { w_tiny(w, 0, 0); }
static void m_no_tokens(gguf_writer *w) { w_tiny(w, 1, 0); }
static void m_no_merges(gguf_writer *w) { w_tiny(w, 0, 1); }
static void m_no_model(gguf_writer *w)
{
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 5);
}
static void m_bad_model(gguf_writer *w)
{
	gguf_w_str(w, "tokenizer.ggml.model", "bert");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 5);
}
static void m_tokens_not_strings(gguf_writer *w)
{
	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr(w, "tokenizer.ggml.tokens", GGUF_INT32, tiny_types, 5);
}
static void m_empty_tokens(gguf_writer *w)
{
	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 0);
}
static void m_short_types(gguf_writer *w)
{
	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 5);
	gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, tiny_types, 3);
}
static void m_bad_type_value(gguf_writer *w)
{
	static const int32_t types[] = {1, 1, 9, 1, 1};

	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 5);
	gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, types, 5);
}
static void m_merge_unknown(gguf_writer *w)
{
	static const char *const merges[] = {"a b", "a zz"};

	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 5);
	gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 2);
}
static void m_merge_result_unknown(gguf_writer *w)
{
	static const char *const merges[] = {"b a"};

	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 5);
	gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
}
static void m_merge_no_space(gguf_writer *w)
{
	static const char *const merges[] = {"ab"};

	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 5);
	gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
}
static void m_bos_range(gguf_writer *w)
{
	w_tiny(w, 0, 0);
	gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 5);
}
static void m_bos_wrong_type(gguf_writer *w)
{
	w_tiny(w, 0, 0);
	gguf_w_str(w, "tokenizer.ggml.eos_token_id", "4");
}
static void m_add_bos_no_bos(gguf_writer *w)
{
	w_tiny(w, 0, 0);
	gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
}
static void m_duplicate(gguf_writer *w)
{
	static const char *const toks[] = {"a", "b", "a"};

	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 3);
	gguf_w_arr_str(w, "tokenizer.ggml.merges", toks, NULL, 0);
}
/* One token past GGUF_MAX_VOCAB (the bound the loader, the tokenizer
 * and the coordinator share), every one empty: a 32 MB file that had
 * taken 1 GB to load with no bound. */
static void m_too_many(gguf_writer *w)
{
	const char **toks = calloc(GGUF_MAX_VOCAB + 1u, sizeof(*toks));

	assert_non_null(toks);
	for (size_t i = 0; i <= GGUF_MAX_VOCAB; i++)
		toks[i] = "";
	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL,
		       GGUF_MAX_VOCAB + 1u);
	gguf_w_arr_str(w, "tokenizer.ggml.merges", toks, NULL, 0);
	free(toks);
}
static void m_spm_bad_byte(gguf_writer *w)
{
	static const char *const toks[] = {"<unk>", "<s>", "</s>", "<0xZZ>"};
	static const int32_t types[] = {2, 3, 3, 6};

	gguf_w_str(w, "tokenizer.ggml.model", "llama");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 4);
	gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, types, 4);
}
static void m_spm_short_scores(gguf_writer *w)
{
	static const char *const toks[] = {"<unk>", "<s>", "</s>", "x"};
	static const float sc[] = {0, 0};

	gguf_w_str(w, "tokenizer.ggml.model", "llama");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 4);
	gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_FLOAT32, sc, 2);
}
static void m_pre_unknown(gguf_writer *w)
{
	static const char *const merges[] = {"a b"};

	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_str(w, "tokenizer.ggml.pre", "martian");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, NULL, 5);
	gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
}

static const struct {
	const char *name;
	void (*fill)(gguf_writer *w);
	int rc;
} meta_cases[] = {
	{"valid tiny vocab", m_ok, QERR_OK},
	/* another split gives other ids than the model was trained on */
	{"unknown pre refused", m_pre_unknown, QERR_UNSUPPORTED},
	{"tokens missing", m_no_tokens, QERR_MISSING},
	{"merges missing", m_no_merges, QERR_MISSING},
	{"model missing", m_no_model, QERR_MISSING},
	{"model unsupported", m_bad_model, QERR_UNSUPPORTED},
	{"tokens not strings", m_tokens_not_strings, QERR_FORMAT},
	{"tokens empty", m_empty_tokens, QERR_FORMAT},
	{"token_type shorter than tokens", m_short_types, QERR_FORMAT},
	{"token_type value 9", m_bad_type_value, QERR_FORMAT},
	{"merge names unknown token", m_merge_unknown, QERR_FORMAT},
	{"merge result not a token", m_merge_result_unknown, QERR_FORMAT},
	{"merge without space", m_merge_no_space, QERR_FORMAT},
	{"bos id out of range", m_bos_range, QERR_FORMAT},
	{"eos id is a string", m_bos_wrong_type, QERR_FORMAT},
	{"add_bos without bos id", m_add_bos_no_bos, QERR_FORMAT},
	{"duplicate token", m_duplicate, QERR_FORMAT},
	{"tokens past the bound", m_too_many, QERR_FORMAT},
	{"byte token not <0xHH>", m_spm_bad_byte, QERR_FORMAT},
	{"scores shorter than tokens", m_spm_short_scores, QERR_FORMAT},
};

static void test_bad_metadata(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(meta_cases) / sizeof(meta_cases[0]); i++) {
		char path[128];
		gguf_writer *w = NULL;
		gguf_file *g = NULL;
		tok *t = (tok *)1;
		int rc;

		snprintf(path, sizeof(path), "%s/meta%zu.gguf", tmpdir, i);
		assert_int_equal(gguf_writer_new(&w), 0);
		meta_cases[i].fill(w);
		assert_int_equal(gguf_writer_save(w, path, NULL, NULL), 0);
		gguf_writer_free(&w);
		assert_int_equal(gguf_open(path, &g), 0);
		qerr_clear();
		rc = tok_load(g, &t);
		if (rc != meta_cases[i].rc)
			fail_msg("%s: got %d (%s), want %d", meta_cases[i].name,
				 rc, qerr_detail(), meta_cases[i].rc);
		if (rc) {
			assert_null(t);
			if (!*qerr_detail())
				fail_msg("%s: no error detail", meta_cases[i].name);
			if (meta_cases[i].fill == m_pre_unknown &&
			    (!strstr(qerr_detail(), "tokenizer.ggml.pre "
					"'martian' is not a known pre-tokenizer") ||
			     !strstr(qerr_detail(), "qwen2, ")))
				fail_msg("unknown pre: %s", qerr_detail());
			if (meta_cases[i].fill == m_too_many &&
			    !strstr(qerr_detail(), "tokenizer.ggml.tokens has "
					"4194305 entries (at most 4194304)"))
				fail_msg("past the bound: %s", qerr_detail());
		} else {
			int32_t *ids = NULL;
			size_t n = 0;

			assert_non_null(t);
			assert_int_equal(tok_encode(t, "abcab", 5, 0, 0, &ids,
						    &n), 0);
			/* "ab" merges; nothing else is in the vocabulary */
			assert_int_equal(n, 3);
			assert_int_equal(ids[0], 2);
			assert_int_equal(ids[1], 4);
			assert_int_equal(ids[2], 2);
			free(ids);
			assert_true(tok_is_eog(t, 3));   /* <|end|> by text */
			tok_free(&t);
			assert_null(t);
		}
		gguf_close(&g);
	}
	tok_free(NULL);
}

/* ---- hfvocab --------------------------------------------------------- */

static void write_text(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(s, f);
	fclose(f);
}

static void test_hfvocab(void **state)
{
	static const struct {
		const char *name, *json;
		int rc;
	} bad[] = {
		{"not JSON", "{\"model\": ", QERR_FORMAT},
		{"no vocab", "{\"model\": {\"type\": \"BPE\", \"merges\": []},"
		 "\"decoder\": {\"type\": \"ByteLevel\"}}", QERR_FORMAT},
		{"bad merge", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0},"
		 "\"merges\": [[\"a\"]]}, \"decoder\": {\"type\": \"ByteLevel\"}}",
		 QERR_FORMAT},
		{"negative id", "{\"model\": {\"type\": \"BPE\", \"vocab\": "
		 "{\"a\": -1}, \"merges\": []}, \"decoder\": {\"type\": "
		 "\"ByteLevel\"}}", QERR_FORMAT},
		{"unigram", "{\"model\": {\"type\": \"Unigram\"}}",
		 QERR_UNSUPPORTED},
		{"not byte-level", "{\"model\": {\"type\": \"BPE\", \"vocab\": "
		 "{\"a\": 0}, \"merges\": []}}", QERR_UNSUPPORTED},
	};
	char path[128], out[128];
	gguf_writer *w = NULL;
	gguf_file *g = NULL;
	tok *t = NULL;
	hfvocab_info info;
	int32_t a[64], *b = NULL;
	size_t na, nb = 0;

	(void)state;
	/* what the conversions reported */
	assert_int_equal(vinfo[V_QWEN2].n_tokens, 151669);
	assert_string_equal(vinfo[V_QWEN2].pre, "qwen2");
	assert_string_equal(vinfo[V_QWEN2].model, "gpt2");
	assert_int_equal(vinfo[V_QWEN2].pre_guessed, 0);
	assert_int_equal(vinfo[V_QWEN2].n_merges, 151387);
	assert_int_equal(vinfo[V_QWEN2].eos, 151645);
	assert_int_equal(vinfo[V_QWEN2].pad, 151643);
	assert_int_equal(vinfo[V_QWEN2].bos, -1);
	assert_int_equal(vinfo[V_QWEN2].add_bos, 0);
	assert_true(vinfo[V_QWEN2].has_chat_template);
	assert_int_equal(vinfo[V_LLAMA3].n_tokens, 128256);
	assert_string_equal(vinfo[V_LLAMA3].pre, "llama-bpe");
	assert_int_equal(vinfo[V_LLAMA3].bos, 128000);
	assert_int_equal(vinfo[V_LLAMA3].eos, 128001);
	assert_int_equal(tok_vocab_size(vt[V_QWEN2]), 151669);
	assert_string_equal(tok_pre_name(vt[V_QWEN2]), "qwen2");
	assert_string_equal(tok_pre_name(vt[V_LLAMA3]), "llama-bpe");
	assert_string_equal(tok_pre_name(vt[V_GPT2]), "gpt-2");
	assert_string_equal(tok_model_name(vt[V_SPM]), "llama");
	/* token types: special -> control, <|..|> -> control, else user */
	assert_int_equal(tok_type(vt[V_QWEN2], 151643), TOK_TYPE_CONTROL);
	assert_int_equal(tok_type(vt[V_QWEN2], 151657), TOK_TYPE_USER_DEFINED);
	assert_int_equal(tok_type(vt[V_QWEN2], 151659), TOK_TYPE_CONTROL);
	assert_int_equal(tok_type(vt[V_QWEN2], 100), TOK_TYPE_NORMAL);
	assert_int_equal(tok_type(vt[V_QWEN2], 151669), TOK_TYPE_UNDEFINED);

	/* copying a vocab GGUF gives the same tokenizer */
	snprintf(out, sizeof(out), "%s/copy.gguf", tmpdir);
	assert_int_equal(gguf_writer_new(&w), 0);
	assert_int_equal(hfvocab_from_gguf(w, vg[V_GPT2], &info), 0);
	assert_int_equal(gguf_writer_save(w, out, NULL, NULL), 0);
	gguf_writer_free(&w);
	assert_int_equal(info.n_tokens, 50257);
	assert_string_equal(info.pre, "gpt-2");
	assert_int_equal(info.n_merges, 50000);
	assert_int_equal(info.bos, 50256);
	assert_int_equal(open_tok(out, &g, &t), 0);
	assert_null(gguf_find(g, "general.architecture"));
	na = enc(V_GPT2, "Hello world, it's 2024!", 0, 0, a, 64);
	assert_int_equal(tok_encode(t, "Hello world, it's 2024!", 23, 0, 0, &b,
				    &nb), 0);
	assert_int_equal(nb, na);
	assert_memory_equal(a, b, na * sizeof(*a));
	free(b);
	tok_free(&t);
	gguf_close(&g);

	/* the pre override wins */
	snprintf(path, sizeof(path), "%s/data/tokenizers/qwen2/tokenizer.json",
		 root_dir());
	assert_int_equal(gguf_writer_new(&w), 0);
	assert_int_equal(hfvocab_from_json(w, path, "gpt-2", 0, &info), 0);
	assert_string_equal(info.pre, "gpt-2");
	gguf_writer_free(&w);
	/* ... when tok_load would read it: an unknown one is refused here,
	 * not written into a model that then refuses to load */
	assert_int_equal(gguf_writer_new(&w), 0);
	assert_int_not_equal(hfvocab_from_json(w, path, "qwen-2", 0, &info), 0);
	assert_non_null(strstr(qerr_detail(), "'qwen-2' is not one"));
	assert_non_null(strstr(qerr_detail(), "known: default, "));
	gguf_writer_free(&w);
	assert_true(tok_pre_known("qwen2"));
	assert_false(tok_pre_known("qwen-2"));
	assert_false(tok_pre_known(NULL));
	{
		/* the list, as many names as fit */
		char b[24];

		tok_pre_list(b, sizeof(b));
		assert_string_equal(b, "default, llama-bpe");
	}

	/* malformed tokenizer.json */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc;

		snprintf(path, sizeof(path), "%s/bad%zu.json", tmpdir, i);
		write_text(path, bad[i].json);
		assert_int_equal(gguf_writer_new(&w), 0);
		qerr_clear();
		rc = hfvocab_from_json(w, path, NULL, 0, NULL);
		gguf_writer_free(&w);
		if (rc != bad[i].rc)
			fail_msg("%s: got %d (%s), want %d", bad[i].name, rc,
				 qerr_detail(), bad[i].rc);
		assert_true(*qerr_detail() != '\0');
	}
	snprintf(path, sizeof(path), "%s/does-not-exist.json", tmpdir);
	assert_int_equal(gguf_writer_new(&w), 0);
	assert_int_equal(hfvocab_from_json(w, path, NULL, 0, NULL), QERR_IO);
	gguf_writer_free(&w);
}

/* ---- threads --------------------------------------------------------- */

struct thr {
	const char *text;
	size_t len;
	int32_t *ids;
	size_t n;
	int rc;
};

static void *thr_main(void *arg)
{
	struct thr *a = arg;

	for (int i = 0; i < 20 && !a->rc; i++) {
		free(a->ids);
		a->ids = NULL;
		a->rc = tok_encode(vt[V_QWEN2], a->text, a->len, 1, 0, &a->ids,
				   &a->n);
	}
	return NULL;
}

static void test_threads(void **state)
{
	static const char text[] = "<|im_start|>user\nWhat is 17 * 23? "
				   "Think step by step.<|im_end|>\n"
				   "<|im_start|>assistant\n";
	struct thr a[4];
	pthread_t th[4];
	int32_t *ref = NULL;
	size_t nref = 0;

	(void)state;
	assert_int_equal(tok_encode(vt[V_QWEN2], text, strlen(text), 1, 0, &ref,
				    &nref), 0);
	for (int i = 0; i < 4; i++) {
		a[i] = (struct thr){text, strlen(text), NULL, 0, 0};
		assert_int_equal(pthread_create(&th[i], NULL, thr_main, &a[i]),
				 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].rc, 0);
		assert_int_equal(a[i].n, nref);
		assert_memory_equal(a[i].ids, ref, nref * sizeof(*ref));
		free(a[i].ids);
	}
	free(ref);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors_gpt2),
		cmocka_unit_test(test_vectors_llama_spm),
		cmocka_unit_test(test_vectors_qwen2),
		cmocka_unit_test(test_unicode_15),
		cmocka_unit_test(test_vectors_llama_bpe),
		cmocka_unit_test(test_vectors_o200k),
		cmocka_unit_test(test_o200k_harmony),
		cmocka_unit_test(test_special_tokens),
		cmocka_unit_test(test_pieces),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_bad_metadata),
		cmocka_unit_test(test_hfvocab),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, setup_all, teardown_all);
}

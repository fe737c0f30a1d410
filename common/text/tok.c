/*
 * tok — see tok.h. Layout of this file:
 *   hash tables (token text -> id, merge pair -> rank), pre-tokenizer
 *   table, loading, UTF-8 cleaning, regex split, BPE and SPM word
 *   encoders, special-token partition, encode, pieces and decode.
 */
#include "text/tok.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fnv.h"
#include "qerr.h"
#include "text/strbuf.h"
#include "text/ucd.h"

/* internal token attributes (bit set; llama.cpp keeps the same split) */
enum {
	A_NORMAL = 1 << 0,
	A_UNKNOWN = 1 << 1,
	A_CONTROL = 1 << 2,
	A_USER = 1 << 3,
	A_UNUSED = 1 << 4,
	A_BYTE = 1 << 5,
	A_UNDEF = 1 << 6,
};

enum tok_model { M_BPE, M_SPM };

/* pre-tokenizer regex sets */
enum pre_kind { P_DEFAULT, P_GPT2, P_LLAMA3, P_QWEN2, P_STARCODER, P_FALCON,
		P_GPT4O };

#define MAX_RE 4

typedef struct {
	uint64_t key;   /* left id << 32 | right id; UINT64_MAX = empty */
	int32_t rank;
	int32_t id;     /* merged token */
} merge_ent;

struct tok {
	int model;
	uint32_t n;                 /* vocabulary size */
	char *text;                 /* all token texts, back to back */
	uint64_t *toff;             /* (n + 1) offsets into text */
	uint8_t *attr;              /* (n) A_* bits */
	uint8_t *ttype;             /* (n) enum tok_type as stored */
	float *score;               /* (n) SPM scores (0 when absent) */
	char *piece;                /* decoded bytes of every token */
	uint64_t *poff;             /* (n + 1) offsets into piece */

	int32_t *tmap;              /* text -> id, open addressing, -1 empty */
	uint64_t tmask;
	merge_ent *mmap;            /* merges, open addressing */
	uint64_t mmask;

	int32_t *special;           /* control/user/unknown ids, longest first */
	uint32_t n_special;
	int32_t *eog;               /* sorted */
	uint32_t n_eog;

	uint16_t byte_cpt[256];     /* BPE: code point of each byte */
	int32_t byte_id[256];       /* BPE: token of the byte's char; SPM: <0xNN> */
	int32_t byte_fb[256][2];    /* BPE: tokens of the char's single bytes */

	pcre2_code *re[MAX_RE];
	int n_re;
	int ignore_merges;

	int32_t bos, eos, eot, eom, unk, pad;
	int add_bos, add_eos, add_space_prefix;
	char *chat_template;        /* tokenizer.chat_template, or NULL */
	char pre[64];
};

/* ---- hashing --------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = fnv1a(FNV_BASIS, s, n);

	return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static uint64_t pow2_at_least(uint64_t n)
{
	uint64_t p = 16;

	while (p < n)
		p <<= 1;
	return p;
}

static const char *ttext(const tok *t, int32_t id, size_t *len)
{
	*len = t->toff[id + 1] - t->toff[id];
	return t->text + t->toff[id];
}

static int32_t lookup(const tok *t, const char *s, size_t n)
{
	uint64_t i = hash_bytes(s, n) & t->tmask;

	for (;; i = (i + 1) & t->tmask) {
		int32_t id = t->tmap[i];
		size_t l;
		const char *p;

		if (id < 0)
			return -1;
		p = ttext(t, id, &l);
		if (l == n && !memcmp(p, s, n))
			return id;
	}
}

static merge_ent *merge_slot(const tok *t, uint64_t key)
{
	uint64_t i = hash_u64(key) & t->mmask;

	while (t->mmap[i].key != UINT64_MAX && t->mmap[i].key != key)
		i = (i + 1) & t->mmask;
	return &t->mmap[i];
}

static inline uint64_t pair_key(int32_t a, int32_t b)
{
	return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

/* ---- pre-tokenizers -------------------------------------------------- */

/* llama.cpp's whitespace set (Unicode White_Space), spelled out instead of
 * \s so that PCRE2's notion of \s (which lacks U+0085) cannot differ. */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}" \
	   "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define RE_S "[" WS "]"
#define RE_NS "[^" WS "]"
#define CONTRACT_CI "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]"
#define TAIL_SPACE RE_S "+(?!" RE_NS ")|" RE_S "+"

static const char re_gpt2[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|"
	TAIL_SPACE;
static const char re_llama3[] =
	CONTRACT_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
	"| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|" RE_S "*[\\r\\n]+|" TAIL_SPACE;
static const char re_qwen2[] =
	CONTRACT_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
	"| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|" RE_S "*[\\r\\n]+|" TAIL_SPACE;
/* o200k (llama.cpp's "gpt-4o"): words split at case changes. llama.cpp
 * runs tokenizer.json's regex rewritten without \p{Lu}/\p{Ll}: "upper"
 * is any letter but a-z, "lower" any letter but A-Z (so a non-ASCII
 * letter is both, and marks \p{M} are no letters); [^\P{L}a-z] is that
 * class. Contractions are optional suffixes of a word; digits go in
 * threes; punctuation runs keep trailing newlines and slashes. */
#define UP "[^\\P{L}a-z]"
#define LO "[^\\P{L}A-Z]"
static const char re_gpt4o[] =
	"[^\\r\\n\\p{L}\\p{N}]?" UP "*" LO "+(?:" CONTRACT_CI ")?"
	"|[^\\r\\n\\p{L}\\p{N}]?" UP "+" LO "*(?:" CONTRACT_CI ")?"
	"|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|" RE_S "*[\\r\\n]+|"
	TAIL_SPACE;
#undef UP
#undef LO
static const char re_punct[] = "[\\p{P}\\$\\+<=>\\^~\\|]+";
static const char re_punct_falcon[] = "[\\p{P}\\$\\+<=>\\^~\\|`]+";
static const char re_numbers[] = "\\p{N}+";
static const char re_digit[] = "\\p{N}";
static const char re_3digits[] = "[0-9][0-9][0-9]";

static const struct {
	int kind;
	const char *re[MAX_RE];
} pre_res[] = {
	{P_DEFAULT, {re_punct, re_gpt2, re_numbers, re_3digits}},
	{P_GPT2, {re_gpt2}},
	{P_LLAMA3, {re_llama3}},
	{P_QWEN2, {re_qwen2}},
	{P_STARCODER, {re_digit, re_gpt2}},
	{P_FALCON, {re_punct_falcon, re_gpt2, re_3digits}},
	{P_GPT4O, {re_gpt4o}},
};

/* tokenizer.ggml.pre names (llama.cpp's) -> regex set and defaults */
static const struct {
	const char *name;
	int kind, ignore_merges, add_bos;
} pre_names[] = {
	{"default", P_DEFAULT, 0, 0},
	{"llama-bpe", P_LLAMA3, 1, 1},
	{"llama3", P_LLAMA3, 1, 1},
	{"llama-v3", P_LLAMA3, 1, 1},
	{"falcon3", P_LLAMA3, 1, 1},
	{"falcon-h1", P_LLAMA3, 1, 1},
	{"pixtral", P_LLAMA3, 1, 1},
	{"dbrx", P_LLAMA3, 0, 0},
	{"smaug-bpe", P_LLAMA3, 0, 0},
	{"qwen2", P_QWEN2, 0, 0},
	{"deepseek-r1-qwen", P_QWEN2, 0, 0},
	{"megrez", P_QWEN2, 0, 0},
	{"stablelm2", P_QWEN2, 0, 0},
	{"hunyuan", P_QWEN2, 0, 0},
	{"grok-2", P_QWEN2, 0, 0},
	{"gpt-2", P_GPT2, 0, 0},
	{"phi-2", P_GPT2, 0, 0},
	{"mpt", P_GPT2, 0, 0},
	{"olmo", P_GPT2, 0, 0},
	{"jais", P_GPT2, 0, 0},
	{"roberta-bpe", P_GPT2, 0, 0},
	{"starcoder", P_STARCODER, 0, 0},
	{"refact", P_STARCODER, 0, 0},
	{"command-r", P_STARCODER, 0, 0},
	{"smollm", P_STARCODER, 0, 0},
	{"codeshell", P_STARCODER, 0, 0},
	{"falcon", P_FALCON, 0, 0},
	{"gpt-4o", P_GPT4O, 0, 0},
	{"llama4", P_GPT4O, 0, 0},
	{"kanana2", P_GPT4O, 0, 0},
	{"talkie", P_GPT4O, 0, 0},
};

bool tok_pre_known(const char *name)
{
	for (size_t i = 0; name && i < sizeof(pre_names) / sizeof(*pre_names);
	     i++)
		if (!strcmp(name, pre_names[i].name))
			return true;
	return false;
}

void tok_pre_list(char *out, size_t cap)
{
	size_t k = 0;

	if (!cap)
		return;
	out[0] = '\0';
	for (size_t i = 0; i < sizeof(pre_names) / sizeof(*pre_names); i++) {
		int w = snprintf(out + k, cap - k, "%s%s", i ? ", " : "",
				 pre_names[i].name);

		if (w < 0 || (size_t)w >= cap - k) {
			out[k] = '\0'; /* as many whole names as fit */
			break;
		}
		k += (size_t)w;
	}
}

/* Ranges r[0, n) (or, complement, the code points outside them, the
 * surrogates left out: UTF-8 has none) as a character class's body. */
static void put_range(strbuf *b, uint32_t a, uint32_t z)
{
	if (a == z)
		strbuf_printf(b, "\\x{%x}", a);
	else if (a < z)
		strbuf_printf(b, "\\x{%x}-\\x{%x}", a, z);
}

static void put_ranges(strbuf *b, const uint32_t (*r)[2], size_t n,
		       int complement)
{
	uint32_t from = 0;

	if (!complement) {
		for (size_t i = 0; i < n; i++)
			put_range(b, r[i][0], r[i][1]);
		return;
	}
	/* the gaps before each range and after the last */
	for (size_t i = 0; i <= n; i++) {
		uint32_t end = i < n ? r[i][0] : 0x110000;

		if (end > from) {
			uint32_t a = from, z = end - 1;

			if (a <= 0xdfff && z >= 0xd800) {
				/* around the surrogates */
				if (a < 0xd800)
					put_range(b, a, 0xd7ff);
				a = 0xe000;
			}
			if (a <= z)
				put_range(b, a, z);
		}
		if (i < n)
			from = r[i][1] + 1;
	}
}

/* Pattern re with its \p{L}, \p{N}, \p{P} (and \P{..}) spelled out as
 * the code points of text/ucd.h (one Unicode version, whatever PCRE2's
 * tables are) into b. */
static void expand_classes(const char *re, strbuf *b)
{
	static const struct {
		char name;
		const uint32_t (*r)[2];
		size_t n;
	} cls[] = {
		{'L', UCD_L, sizeof(UCD_L) / sizeof(*UCD_L)},
		{'N', UCD_N, sizeof(UCD_N) / sizeof(*UCD_N)},
		{'P', UCD_P, sizeof(UCD_P) / sizeof(*UCD_P)},
	};
	int in_class = 0;

	for (const char *c = re; *c; c++) {
		if (c[0] == '\\' && (c[1] == 'p' || c[1] == 'P') &&
		    c[2] == '{' && c[3] && c[4] == '}') {
			size_t k = 0;

			while (k < sizeof(cls) / sizeof(*cls) &&
			       cls[k].name != c[3])
				k++;
			if (k < sizeof(cls) / sizeof(*cls)) {
				int neg = c[1] == 'P';

				if (!in_class)
					strbuf_puts(b, neg ? "[^" : "[");
				put_ranges(b, cls[k].r, cls[k].n,
					   in_class && neg);
				if (!in_class)
					strbuf_puts(b, "]");
				c += 4;
				continue;
			}
		}
		if (c[0] == '\\' && c[1]) {
			strbuf_add(b, c, 2);
			c++;
			continue;
		}
		if (!in_class && c[0] == '[') {
			/* a ']' first in the class (after '^') is a member */
			in_class = 1;
			strbuf_add(b, c, 1);
			if (c[1] == '^')
				strbuf_add(b, ++c, 1);
			if (c[1] == ']')
				strbuf_add(b, ++c, 1);
			continue;
		}
		if (in_class && c[0] == ']')
			in_class = 0;
		strbuf_add(b, c, 1);
	}
}

static int compile_pre(tok *t, int kind)
{
	for (size_t i = 0; i < sizeof(pre_res) / sizeof(pre_res[0]); i++) {
		if (pre_res[i].kind != kind)
			continue;
		for (int j = 0; j < MAX_RE && pre_res[i].re[j]; j++) {
			int ec;
			PCRE2_SIZE eo;
			strbuf x = {0};
			pcre2_code *re;

			expand_classes(pre_res[i].re[j], &x);
			if (x.oom)
				return qerr_fail(QERR_NOMEM, "tokenizer: out of "
						 "memory");
			re = pcre2_compile((PCRE2_SPTR)x.b, x.n, PCRE2_UTF,
					   &ec, &eo, NULL);
			free(x.b);
			if (!re) {
				PCRE2_UCHAR msg[128];

				pcre2_get_error_message(ec, msg, sizeof(msg));
				return qerr_fail(QERR_UNSUPPORTED, "tokenizer: "
						 "cannot compile pre-tokenizer "
						 "regex: %s at %zu", (char *)msg,
						 (size_t)eo);
			}
			/* JIT is an optimisation: without it matching still works */
			pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
			t->re[t->n_re++] = re;
		}
		return 0;
	}
	return qerr_fail(QERR_UNSUPPORTED, "tokenizer: no regex set %d", kind);
}

/* ---- GPT-2 byte <-> unicode ------------------------------------------ */

/* Code point that byte b is written as in byte-level BPE vocabularies. */
static uint32_t byte_cpt(int b)
{
	int n = 0;

	if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) ||
	    (b >= 0xae && b <= 0xff))
		return (uint32_t)b;
	for (int c = 0; c < b; c++)
		if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) ||
		      (c >= 0xae && c <= 0xff)))
			n++;
	return 256u + (uint32_t)n;
}

static size_t utf8_put(uint32_t c, char *o)
{
	if (c < 0x80) {
		o[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (char)(0xc0 | (c >> 6));
		o[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (char)(0xe0 | (c >> 12));
		o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (c >> 18));
	o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	o[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/* llama.cpp's lenient decoder: a lead byte followed by the right number of
 * continuation bytes is accepted whatever its value (overlongs, surrogates,
 * > U+10FFFF); anything else is invalid (returns 0, *cpt untouched). */
static size_t utf8_get(const uint8_t *s, size_t n, uint32_t *cpt)
{
	uint8_t b = s[0];
	size_t k;
	uint32_t c;

	if (b < 0x80) {
		*cpt = b;
		return 1;
	}
	if (!(b & 0x40))
		return 0;
	if (!(b & 0x20)) {
		k = 2;
		c = b & 0x1f;
	} else if (!(b & 0x10)) {
		k = 3;
		c = b & 0x0f;
	} else if (!(b & 0x08)) {
		k = 4;
		c = b & 0x07;
	} else {
		return 0;
	}
	if (k > n)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	*cpt = c;
	return k;
}

/* bytes of the UTF-8 sequence a lead byte announces (llama.cpp's table) */
static size_t utf8_len(uint8_t b)
{
	static const uint8_t l[16] = {1, 1, 1, 1, 1, 1, 1, 1,
				      1, 1, 1, 1, 2, 2, 3, 4};
	return l[b >> 4];
}

/* ---- loading --------------------------------------------------------- */

static int get_opt_id(const gguf_file *g, const char *key, uint32_t n,
		      int32_t *id)
{
	const gguf_kv *kv = gguf_find(g, key);
	uint32_t v;
	int rc;

	if (!kv)
		return 0;
	rc = gguf_get_u32(g, key, &v);
	if (rc)
		return rc;
	if (v >= n)
		return qerr_fail(QERR_FORMAT, "%s: %s = %u is out of range (vocab "
				 "size %u)", gguf_path(g), key, v, n);
	*id = (int32_t)v;
	return 0;
}

static int get_opt_bool(const gguf_file *g, const char *key, int *out)
{
	if (!gguf_find(g, key))
		return 0;
	return gguf_get_bool(g, key, out);
}

static int cmp_special(const void *a, const void *b, void *ctx)
{
	const tok *t = ctx;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	uint64_t lx = t->toff[x + 1] - t->toff[x];
	uint64_t ly = t->toff[y + 1] - t->toff[y];

	if (lx != ly)
		return lx > ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return x < y ? -1 : x > y;
}

static int32_t find_first(const tok *t, const char *const *names)
{
	for (; *names; names++) {
		int32_t id = lookup(t, *names, strlen(*names));

		if (id >= 0)
			return id;
	}
	return -1;
}

static void add_eog(tok *t, int32_t id)
{
	if (id < 0)
		return;
	for (uint32_t i = 0; i < t->n_eog; i++)
		if (t->eog[i] == id)
			return;
	t->eog[t->n_eog++] = id;
	/* llama.cpp forces end-of-generation tokens to control */
	t->attr[id] |= A_CONTROL;
}

/* End-of-turn / end-of-generation tokens llama.cpp recognises by text. */
static const char *const eot_names[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
	"<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
	"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
	"<end_of_utterance>", NULL};
static const char *const eog_names[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
	"<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>",
	"<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
	"<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
	"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
	"[e~[", NULL};
static const char *const eom_names[] = {"<|eom_id|>", NULL};
static const char *const fim_pad_names[] = {"<|fim_pad|>", "<fim-pad>",
					    "<fim_pad>", "<PAD>", NULL};
static const char *const fim_rep_names[] = {"<|fim_repo|>", "<|repo_name|>",
					    "<fim-repo>", "<REPO>",
					    "<reponame>", NULL};
static const char *const fim_sep_names[] = {"<|file_sep|>", NULL};
/* only promoted to control, as llama.cpp does */
static const char *const fim_other_names[] = {
	"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>",
	"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>",
	"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", NULL};

/* Whether an end-of-generation token has text w: its id, or -1. */
static int32_t eog_text(const tok *t, const char *w)
{
	int32_t id = lookup(t, w, strlen(w));

	for (uint32_t i = 0; id >= 0 && i < t->n_eog; i++)
		if (t->eog[i] == id)
			return id;
	return -1;
}

/* Drops id from the end-of-generation tokens, its attributes now attr. */
static void eog_drop(tok *t, int32_t id, uint8_t attr)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i < t->n_eog; i++)
		if (t->eog[i] != id)
			t->eog[j++] = t->eog[i];
	t->n_eog = j;
	t->attr[id] = attr;
}

/* gpt-oss (o200k_harmony), as llama.cpp: the message-structure tokens are
 * user-defined (always matched in text, always rendered), and with
 * <|return|> and <|call|> ending generation (or <|calls|> and <|flush|>,
 * solar-open's), <|end|> (which closes every message, the analysis one
 * too) is not an end of generation. And as llama.cpp's gemma4 and
 * paddleocr workaround, "</s>" beside "<|tool_response>" is a normal
 * token, no end. */
static void harmony_attrs(tok *t)
{
	static const char *const user[] = {"<|channel|>", "<|message|>",
					   "<|start|>", "<|constrain|>"};
	int32_t end = eog_text(t, "<|end|>"), s = eog_text(t, "</s>");
	int ret = eog_text(t, "<|return|>") >= 0,
	    call = eog_text(t, "<|call|>") >= 0 ||
		   eog_text(t, "<|calls|>") >= 0,
	    flush = eog_text(t, "<|flush|>") >= 0;

	for (size_t i = 0; i < sizeof(user) / sizeof(user[0]); i++) {
		int32_t id = lookup(t, user[i], strlen(user[i]));

		if (id >= 0)
			t->attr[id] = A_USER;
	}
	if (end >= 0 && call && (ret || flush))
		eog_drop(t, end, A_USER);
	if (s >= 0 && eog_text(t, "<|tool_response>") >= 0)
		eog_drop(t, s, A_NORMAL);
}

static int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int build_pieces(tok *t)
{
	uint64_t cap = t->toff[t->n] + 16, len = 0;
	int16_t inv[512];   /* code point (< 512) -> byte, -1 none */

	for (int i = 0; i < 512; i++)
		inv[i] = -1;
	for (int b = 0; b < 256; b++)
		inv[byte_cpt(b)] = (int16_t)b;
	/* a piece never needs more bytes than its text */
	t->piece = malloc(cap);
	t->poff = malloc((t->n + 1ull) * sizeof(*t->poff));
	if (!t->piece || !t->poff)
		return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
	for (uint32_t id = 0; id < t->n; id++) {
		size_t n;
		const uint8_t *s = (const uint8_t *)ttext(t, (int32_t)id, &n);
		char *o = t->piece;
		uint8_t a = t->attr[id];

		t->poff[id] = len;
		if (a & (A_CONTROL | A_UNKNOWN | A_USER)) {
			memcpy(o + len, s, n);
			len += n;
		} else if (a & A_NORMAL) {
			for (size_t i = 0; i < n;) {
				uint32_t c = 0;
				size_t k = utf8_get(s + i, n - i, &c);

				if (t->model == M_SPM && n - i >= 3 &&
				    !memcmp(s + i, "\xe2\x96\x81", 3)) {
					o[len++] = ' ';
					i += 3;
				} else if (t->model == M_BPE && k &&
					   c < 512 && inv[c] >= 0) {
					o[len++] = (char)inv[c];
					i += k;
				} else {
					/* not a mapped char: keep its bytes */
					size_t m = k ? k : 1;

					memcpy(o + len, s + i, m);
					len += m;
					i += m;
				}
			}
		} else if (a & A_BYTE) {
			int hi = n == 6 ? hexval(s[3]) : -1;
			int lo = n == 6 ? hexval(s[4]) : -1;

			if (hi < 0 || lo < 0 || memcmp(s, "<0x", 3) || s[5] != '>')
				return qerr_fail(QERR_FORMAT, "tokenizer: byte "
						 "token %u is '%.*s', not "
						 "<0xHH>", id, (int)n, s);
			o[len++] = (char)(hi << 4 | lo);
		}
		/* unused and undefined tokens decode to nothing */
	}
	t->poff[t->n] = len;
	return 0;
}

static int load_merges(tok *t, const gguf_file *g)
{
	const gguf_kv *kv;
	int rc = gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_STRING, &kv);

	if (rc)
		return rc;
	if (kv->arr_n > INT32_MAX)
		return qerr_fail(QERR_FORMAT, "%s: too many merges",
				 gguf_path(g));
	t->mmask = pow2_at_least(kv->arr_n * 2 + 1) - 1;
	t->mmap = malloc((t->mmask + 1) * sizeof(*t->mmap));
	if (!t->mmap)
		return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
	for (uint64_t i = 0; i <= t->mmask; i++)
		t->mmap[i].key = UINT64_MAX;
	for (uint64_t i = 0; i < kv->arr_n; i++) {
		gguf_str s = kv->arr_str[i];
		const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1)
					   : NULL;
		int32_t a, b, m;
		merge_ent *e;
		char *buf;
		size_t la, lb;

		if (!sp)
			return qerr_fail(QERR_FORMAT, "%s: merge %llu '%.*s' is "
					 "not 'left right'", gguf_path(g),
					 (unsigned long long)i, (int)s.len,
					 s.ptr);
		la = (size_t)(sp - s.ptr);
		lb = s.len - la - 1;
		a = lookup(t, s.ptr, la);
		b = lookup(t, sp + 1, lb);
		buf = malloc(la + lb + 1);
		if (!buf)
			return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
		memcpy(buf, s.ptr, la);
		memcpy(buf + la, sp + 1, lb);
		m = lookup(t, buf, la + lb);
		free(buf);
		if (a < 0 || b < 0 || m < 0)
			return qerr_fail(QERR_FORMAT, "%s: merge %llu '%.*s' "
					 "names a token not in the vocabulary",
					 gguf_path(g), (unsigned long long)i,
					 (int)s.len, s.ptr);
		e = merge_slot(t, pair_key(a, b));
		if (e->key == UINT64_MAX) {   /* first (lowest rank) wins */
			e->key = pair_key(a, b);
			e->rank = (int32_t)i;
			e->id = m;
		}
	}
	return 0;
}

static int load_vocab(tok *t, const gguf_file *g)
{
	const gguf_kv *tk, *ty = NULL, *sc = NULL;
	uint64_t total = 0, n;
	char tmp[32];
	int rc;

	rc = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &tk);
	if (rc)
		return rc;
	n = tk->arr_n;
	if (n == 0 || n > GGUF_MAX_VOCAB)
		return qerr_fail(QERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu "
				 "entries (at most %d)", gguf_path(g),
				 (unsigned long long)n, GGUF_MAX_VOCAB);
	t->n = (uint32_t)n;
	if (gguf_find(g, "tokenizer.ggml.token_type")) {
		rc = gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_INT32,
				  &ty);
		if (rc)
			return rc;
		if (ty->arr_n < n)
			return qerr_fail(QERR_FORMAT, "%s: %llu token types for "
					 "%llu tokens", gguf_path(g),
					 (unsigned long long)ty->arr_n,
					 (unsigned long long)n);
	}
	if (gguf_find(g, "tokenizer.ggml.scores")) {
		const gguf_kv *kv = gguf_find(g, "tokenizer.ggml.scores");

		if (kv->type != GGUF_ARRAY || (kv->arr_type != GGUF_FLOAT32 &&
					       kv->arr_type != GGUF_INT32))
			return qerr_fail(QERR_FORMAT, "%s: tokenizer.ggml.scores "
					 "is not an array of float32",
					 gguf_path(g));
		if (kv->arr_n < n)
			return qerr_fail(QERR_FORMAT, "%s: %llu scores for %llu "
					 "tokens", gguf_path(g),
					 (unsigned long long)kv->arr_n,
					 (unsigned long long)n);
		sc = kv;
	}
	for (uint64_t i = 0; i < n; i++)
		total += tk->arr_str[i].len ? tk->arr_str[i].len : 32;
	t->text = malloc(total + 1);
	t->toff = malloc((n + 1) * sizeof(*t->toff));
	t->attr = calloc(n, 1);
	t->ttype = calloc(n, 1);
	t->score = calloc(n, sizeof(*t->score));
	t->tmask = pow2_at_least(n * 2) - 1;
	t->tmap = malloc((t->tmask + 1) * sizeof(*t->tmap));
	if (!t->text || !t->toff || !t->attr || !t->ttype || !t->score ||
	    !t->tmap)
		return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
	memset(t->tmap, 0xff, (t->tmask + 1) * sizeof(*t->tmap));
	total = 0;
	for (uint64_t i = 0; i < n; i++) {
		gguf_str s = tk->arr_str[i];
		int32_t type = TOK_TYPE_NORMAL;
		uint64_t h;

		if (!s.len) {   /* llama.cpp renames empty tokens */
			s.len = (uint64_t)snprintf(tmp, sizeof(tmp),
						   "[EMPTY_%llu]",
						   (unsigned long long)i);
			s.ptr = tmp;
		}
		t->toff[i] = total;
		memcpy(t->text + total, s.ptr, s.len);
		total += s.len;
		if (ty)
			memcpy(&type, ty->arr_data + 4 * i, 4);
		if (type < 0 || type > TOK_TYPE_BYTE)
			return qerr_fail(QERR_FORMAT, "%s: token %llu has type "
					 "%d (want 0..6)", gguf_path(g),
					 (unsigned long long)i, type);
		t->ttype[i] = (uint8_t)type;
		switch (type) {
		case TOK_TYPE_NORMAL: t->attr[i] = A_NORMAL; break;
		case TOK_TYPE_UNKNOWN: t->attr[i] = A_UNKNOWN; break;
		case TOK_TYPE_CONTROL: t->attr[i] = A_CONTROL; break;
		case TOK_TYPE_USER_DEFINED: t->attr[i] = A_USER; break;
		case TOK_TYPE_UNUSED: t->attr[i] = A_UNUSED; break;
		case TOK_TYPE_BYTE: t->attr[i] = A_BYTE; break;
		default: t->attr[i] = A_UNDEF; break;
		}
		if (sc && sc->arr_type == GGUF_FLOAT32) {
			memcpy(&t->score[i], sc->arr_data + 4 * i, 4);
		} else if (sc) {
			int32_t v;

			memcpy(&v, sc->arr_data + 4 * i, 4);
			t->score[i] = (float)v;
		}
		t->toff[i + 1] = total;
		h = hash_bytes(s.ptr, s.len) & t->tmask;
		for (;; h = (h + 1) & t->tmask) {
			int32_t o = t->tmap[h];
			size_t l;
			const char *p;

			if (o < 0) {
				t->tmap[h] = (int32_t)i;
				break;
			}
			p = ttext(t, o, &l);
			if (l == s.len && !memcmp(p, s.ptr, l))
				return qerr_fail(QERR_FORMAT, "%s: duplicate "
						 "token '%.*s' (ids %d and %llu)",
						 gguf_path(g), (int)l, p, o,
						 (unsigned long long)i);
		}
	}
	return 0;
}

static int load_specials(tok *t, const gguf_file *g)
{
	static const char *const keys[] = {
		"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
		"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
		"tokenizer.ggml.unknown_token_id",
		"tokenizer.ggml.padding_token_id"};
	int32_t *dst[] = {&t->bos, &t->eos, &t->eot, &t->eom, &t->unk,
			  &t->pad};
	int add_bos = -1, add_eos = -1, rc;
	int32_t pad, rep, sep;
	gguf_str tmpl;

	rc = gguf_get_str(g, "tokenizer.chat_template", &tmpl);
	if (rc == QERR_MISSING) {
		qerr_clear();
	} else if (rc) {
		return rc;
	} else if (!(t->chat_template = strndup(tmpl.ptr, tmpl.len))) {
		return qerr_fail(QERR_NOMEM, "%s: out of memory",
				 gguf_path(g));
	}

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if ((rc = get_opt_id(g, keys[i], t->n, dst[i])))
			return rc;
	if ((rc = get_opt_bool(g, "tokenizer.ggml.add_bos_token", &add_bos)) ||
	    (rc = get_opt_bool(g, "tokenizer.ggml.add_eos_token", &add_eos)) ||
	    (rc = get_opt_bool(g, "tokenizer.ggml.add_space_prefix",
			       &t->add_space_prefix)))
		return rc;
	if (add_bos >= 0) {
		if (add_bos && t->bos < 0)
			return qerr_fail(QERR_FORMAT, "%s: add_bos_token is true "
					 "but there is no bos_token_id",
					 gguf_path(g));
		t->add_bos = add_bos;
	} else if (t->bos < 0) {
		t->add_bos = 0;
	}
	if (add_eos >= 0) {
		if (add_eos && t->eos < 0)
			return qerr_fail(QERR_FORMAT, "%s: add_eos_token is true "
					 "but there is no eos_token_id",
					 gguf_path(g));
		t->add_eos = add_eos;
	}

	/* auto-detection by text, as llama.cpp */
	if (t->eot < 0)
		t->eot = find_first(t, eot_names);
	if (t->eot >= 0)
		t->attr[t->eot] |= A_CONTROL;
	if (t->eom < 0)
		t->eom = find_first(t, eom_names);
	t->eog = malloc((sizeof(eog_names) / sizeof(eog_names[0]) + 8) *
			sizeof(*t->eog));
	if (!t->eog)
		return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
	pad = find_first(t, fim_pad_names);
	rep = find_first(t, fim_rep_names);
	sep = find_first(t, fim_sep_names);
	add_eog(t, pad);
	add_eog(t, rep);
	add_eog(t, sep);
	for (const char *const *p = fim_other_names; *p; p++) {
		int32_t id = lookup(t, *p, strlen(*p));

		if (id >= 0)
			t->attr[id] |= A_CONTROL;
	}
	for (const char *const *p = eog_names; *p; p++)
		add_eog(t, lookup(t, *p, strlen(*p)));
	add_eog(t, t->eos);
	add_eog(t, t->eot);
	add_eog(t, t->eom);
	harmony_attrs(t);
	qsort(t->eog, t->n_eog, sizeof(*t->eog), cmp_i32);

	/* tokens matched as a whole in text, longest first */
	t->special = malloc((t->n + 1ull) * sizeof(*t->special));
	if (!t->special)
		return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
	for (uint32_t i = 0; i < t->n; i++)
		if (t->attr[i] & (A_CONTROL | A_USER | A_UNKNOWN))
			t->special[t->n_special++] = (int32_t)i;
	qsort_r(t->special, t->n_special, sizeof(*t->special), cmp_special, t);
	return 0;
}

static int setup_bpe(tok *t, const gguf_file *g)
{
	gguf_str pre = {"default", 7};
	int kind = P_GPT2, found = 0, rc;

	if (gguf_find(g, "tokenizer.ggml.pre") &&
	    (rc = gguf_get_str(g, "tokenizer.ggml.pre", &pre)))
		return rc;
	for (size_t i = 0; i < sizeof(pre_names) / sizeof(pre_names[0]); i++) {
		if (!gguf_str_eq(pre, pre_names[i].name))
			continue;
		kind = pre_names[i].kind;
		t->ignore_merges = pre_names[i].ignore_merges;
		t->add_bos = pre_names[i].add_bos;
		snprintf(t->pre, sizeof(t->pre), "%s", pre_names[i].name);
		found = 1;
		break;
	}
	/* refused, as llama.cpp does: another name's split (GPT-2's was
	 * taken) silently gives other ids than the model was trained on,
	 * e.g. digits grouped differently */
	if (!found) {
		char known[400];

		tok_pre_list(known, sizeof(known));
		return qerr_fail(QERR_UNSUPPORTED, "%s: tokenizer.ggml.pre "
				 "'%.*s' is not a known pre-tokenizer (known: "
				 "%s)", gguf_path(g),
				 (int)(pre.len > 40 ? 40 : pre.len), pre.ptr,
				 known);
	}
	for (int b = 0; b < 256; b++) {
		char u[4];
		size_t k;

		t->byte_cpt[b] = (uint16_t)byte_cpt(b);
		k = utf8_put(t->byte_cpt[b], u);

		t->byte_id[b] = lookup(t, u, k);
		t->byte_fb[b][0] = t->byte_fb[b][1] = -1;
		if (t->byte_id[b] < 0)
			for (size_t j = 0; j < k; j++)
				t->byte_fb[b][j] = lookup(t, u + j, 1);
	}
	if ((rc = load_merges(t, g)))
		return rc;
	return compile_pre(t, kind);
}

static void setup_spm(tok *t)
{
	snprintf(t->pre, sizeof(t->pre), "spm");
	t->add_space_prefix = 1;
	t->add_bos = 1;
	t->bos = 1;
	t->eos = 2;
	t->unk = 0;
	for (int b = 0; b < 256; b++) {
		char buf[8];
		int32_t id;

		snprintf(buf, sizeof(buf), "<0x%02X>", b);
		id = lookup(t, buf, 6);
		if (id < 0) {
			buf[0] = (char)b;
			id = lookup(t, buf, 1);
		}
		t->byte_id[b] = id;
	}
}

int tok_load(const gguf_file *g, tok **out)
{
	tok *t = calloc(1, sizeof(*t));
	gguf_str model;
	int rc;

	*out = NULL;
	if (!t)
		return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
	t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
	if ((rc = gguf_get_str(g, "tokenizer.ggml.model", &model)))
		goto fail;
	if (gguf_str_eq(model, "gpt2")) {
		t->model = M_BPE;
	} else if (gguf_str_eq(model, "llama")) {
		t->model = M_SPM;
	} else {
		rc = qerr_fail(QERR_UNSUPPORTED, "%s: tokenizer model '%.*s' is "
			       "not supported (want gpt2 or llama)",
			       gguf_path(g), (int)(model.len > 40 ? 40 :
						   model.len), model.ptr);
		goto fail;
	}
	if ((rc = load_vocab(t, g)))
		goto fail;
	if (t->model == M_SPM) {
		setup_spm(t);
		/* llama.cpp's SPM defaults, dropped when out of range */
		if (t->bos >= (int32_t)t->n)
			t->bos = -1;
		if (t->eos >= (int32_t)t->n)
			t->eos = -1;
		if (t->unk >= (int32_t)t->n)
			t->unk = -1;
	} else if ((rc = setup_bpe(t, g))) {
		goto fail;
	}
	if ((rc = load_specials(t, g)) || (rc = build_pieces(t)))
		goto fail;
	*out = t;
	return 0;
fail:
	tok_free(&t);
	return rc;
}

void tok_free(tok **pt)
{
	tok *t;

	if (!pt || !*pt)
		return;
	t = *pt;
	for (int i = 0; i < t->n_re; i++)
		pcre2_code_free(t->re[i]);
	free(t->text);
	free(t->toff);
	free(t->attr);
	free(t->ttype);
	free(t->score);
	free(t->piece);
	free(t->poff);
	free(t->tmap);
	free(t->mmap);
	free(t->special);
	free(t->eog);
	free(t->chat_template);
	free(t);
	*pt = NULL;
}

/* ---- per-call scratch ------------------------------------------------ */

typedef struct {
	double key;         /* BPE: rank; SPM: -score (min-heap) */
	int32_t left, right;
	int32_t a, b;       /* BPE: ids of left, right; SPM: a = byte size */
} bigram;

typedef struct {
	size_t off, len;
} span;

typedef struct {
	int32_t *out;
	size_t n_out, cap_out;
	/* symbols */
	int32_t *sid, *sprev, *snext;
	uint32_t *soff, *slen;
	size_t cap_sym;
	bigram *heap;
	size_t n_heap, cap_heap;
	/* text buffers */
	char *clean, *match, *enc;
	size_t cap_text, cap_match, cap_enc;
	span *seg, *seg2;
	size_t n_seg, cap_seg, n_seg2, cap_seg2;
	pcre2_match_data *md;
} scratch;

static void scratch_fini(scratch *s)
{
	free(s->out);
	free(s->sid);
	free(s->sprev);
	free(s->snext);
	free(s->soff);
	free(s->slen);
	free(s->heap);
	free(s->clean);
	free(s->match);
	free(s->enc);
	free(s->seg);
	free(s->seg2);
	if (s->md)
		pcre2_match_data_free(s->md);
}

static int grow(void **p, size_t *cap, size_t need, size_t es)
{
	size_t nc;
	void *np;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	np = realloc(*p, nc * es);
	if (!np)
		return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
	*p = np;
	*cap = nc;
	return 0;
}

static int push_id(scratch *s, int32_t id)
{
	if (s->n_out == s->cap_out &&
	    grow((void **)&s->out, &s->cap_out, s->n_out + 1, sizeof(*s->out)))
		return QERR_NOMEM;
	s->out[s->n_out++] = id;
	return 0;
}

static int sym_reserve(scratch *s, size_t n)
{
	size_t c;

	if (n <= s->cap_sym)
		return 0;
	c = s->cap_sym;
	if (grow((void **)&s->sid, &c, n, sizeof(*s->sid)))
		return QERR_NOMEM;
	c = s->cap_sym;
	if (grow((void **)&s->sprev, &c, n, sizeof(*s->sprev)))
		return QERR_NOMEM;
	c = s->cap_sym;
	if (grow((void **)&s->snext, &c, n, sizeof(*s->snext)))
		return QERR_NOMEM;
	c = s->cap_sym;
	if (grow((void **)&s->soff, &c, n, sizeof(*s->soff)))
		return QERR_NOMEM;
	c = s->cap_sym;
	if (grow((void **)&s->slen, &c, n, sizeof(*s->slen)))
		return QERR_NOMEM;
	s->cap_sym = c;
	return 0;
}

static inline int bg_less(const bigram *x, const bigram *y)
{
	return x->key < y->key || (x->key == y->key && x->left < y->left);
}

static int heap_push(scratch *s, bigram b)
{
	size_t i;

	if (s->n_heap == s->cap_heap &&
	    grow((void **)&s->heap, &s->cap_heap, s->n_heap + 1,
		 sizeof(*s->heap)))
		return QERR_NOMEM;
	i = s->n_heap++;
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!bg_less(&b, &s->heap[p]))
			break;
		s->heap[i] = s->heap[p];
		i = p;
	}
	s->heap[i] = b;
	return 0;
}

static bigram heap_pop(scratch *s)
{
	bigram top = s->heap[0], last = s->heap[--s->n_heap];
	size_t i = 0, n = s->n_heap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && bg_less(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!bg_less(&s->heap[c], &last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (n)
		s->heap[i] = last;
	return top;
}

/* ---- BPE ------------------------------------------------------------- */

static int bpe_try(const tok *t, scratch *s, int32_t l, int32_t r)
{
	const merge_ent *e;
	bigram b;

	if (l < 0 || r < 0 || s->sid[l] < 0 || s->sid[r] < 0)
		return 0;
	e = merge_slot(t, pair_key(s->sid[l], s->sid[r]));
	if (e->key == UINT64_MAX)
		return 0;
	b.key = e->rank;
	b.left = l;
	b.right = r;
	b.a = s->sid[l];
	b.b = s->sid[r];
	return heap_push(s, b);
}

/* Encodes one pre-tokenized word w[0..n) (cleaned UTF-8 bytes). */
static int bpe_word(const tok *t, scratch *s, const uint8_t *w, size_t n)
{
	if (t->ignore_merges) {
		/* the whole word, byte-level encoded, may be one token */
		size_t k = 0;
		int32_t id;

		if (grow((void **)&s->enc, &s->cap_enc, 2 * n + 1, 1))
			return QERR_NOMEM;
		for (size_t i = 0; i < n; i++)
			k += utf8_put(t->byte_cpt[w[i]], s->enc + k);
		id = lookup(t, s->enc, k);
		if (id >= 0)
			return push_id(s, id);
	}
	if (sym_reserve(s, n))
		return QERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		s->sid[i] = t->byte_id[w[i]];
		s->soff[i] = (uint32_t)i;
		s->sprev[i] = (int32_t)i - 1;
		s->snext[i] = i + 1 < n ? (int32_t)i + 1 : -1;
	}
	s->n_heap = 0;
	for (size_t i = 1; i < n; i++)
		if (bpe_try(t, s, (int32_t)i - 1, (int32_t)i))
			return QERR_NOMEM;
	while (s->n_heap) {
		bigram b = heap_pop(s);
		int32_t l = b.left, r = b.right;

		/* stale: a side was merged away or grew since the push */
		if (s->sid[l] != b.a || s->sid[r] != b.b || s->snext[l] != r)
			continue;
		s->sid[l] = merge_slot(t, pair_key(b.a, b.b))->id;
		s->sid[r] = -2;
		s->snext[l] = s->snext[r];
		if (s->snext[r] >= 0)
			s->sprev[s->snext[r]] = l;
		if (bpe_try(t, s, s->sprev[l], l) ||
		    bpe_try(t, s, l, s->snext[l]))
			return QERR_NOMEM;
	}
	for (int32_t i = 0; i >= 0; i = s->snext[i]) {
		int32_t id = s->sid[i];

		if (id >= 0) {
			if (push_id(s, id))
				return QERR_NOMEM;
			continue;
		}
		/* a byte whose char is not a token: llama.cpp tries the
		 * char's single bytes and drops what is not found */
		for (int j = 0; j < 2; j++)
			if (t->byte_fb[w[s->soff[i]]][j] >= 0 &&
			    push_id(s, t->byte_fb[w[s->soff[i]]][j]))
				return QERR_NOMEM;
	}
	return 0;
}

/* Rewrites text as llama.cpp sees it: every code point its lenient decoder
 * accepts is re-encoded canonically, every other byte becomes U+FFFD.
 * s->clean gets those bytes (fed to BPE); s->match the same with surrogates
 * (and code points above U+10FFFF) replaced by U+FFFD so that PCRE2 sees
 * valid UTF-8 with offsets unchanged. *out gets the length. */
static int clean_utf8(scratch *s, const uint8_t *p, size_t n, size_t *out)
{
	size_t k = 0;

	if (grow((void **)&s->clean, &s->cap_text, 3 * n + 4, 1) ||
	    grow((void **)&s->match, &s->cap_match, 3 * n + 4, 1))
		return QERR_NOMEM;
	for (size_t i = 0; i < n;) {
		uint32_t c = 0;
		size_t m = utf8_get(p + i, n - i, &c);

		if (!m) {
			c = 0xfffd;
			m = 1;
		}
		if (c > 0x10ffff)
			c = 0xfffd;
		if (c >= 0xd800 && c <= 0xdfff) {
			/* llama.cpp keeps a surrogate's 3 bytes */
			utf8_put(c, s->clean + k);
			utf8_put(0xfffd, s->match + k);
			k += 3;
		} else {
			size_t w = utf8_put(c, s->clean + k);

			memcpy(s->match + k, s->clean + k, w);
			k += w;
		}
		i += m;
	}
	*out = k;
	return 0;
}

static int seg_push(span **a, size_t *n, size_t *cap, size_t off, size_t len)
{
	if (*n == *cap && grow((void **)a, cap, *n + 1, sizeof(**a)))
		return QERR_NOMEM;
	(*a)[*n].off = off;
	(*a)[*n].len = len;
	(*n)++;
	return 0;
}

static int re_match(pcre2_code *re, const char *p, size_t n, size_t start,
		    pcre2_match_data *md)
{
	int rc = pcre2_match(re, (PCRE2_SPTR)p, n, start, PCRE2_NO_UTF_CHECK,
			     md, NULL);

	if (rc == PCRE2_ERROR_JIT_STACKLIMIT)   /* long runs: interpreter */
		rc = pcre2_match(re, (PCRE2_SPTR)p, n, start,
				 PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
	return rc;
}

/* Splits s->match[0..n) with the pre-tokenizer regexes into s->seg: each
 * regex refines every current span into its matches and the gaps between
 * them (llama.cpp's unicode_regex_split). */
static int pre_split(const tok *t, scratch *s, size_t n)
{
	s->n_seg = 0;
	if (seg_push(&s->seg, &s->n_seg, &s->cap_seg, 0, n))
		return QERR_NOMEM;
	for (int r = 0; r < t->n_re; r++) {
		s->n_seg2 = 0;
		for (size_t i = 0; i < s->n_seg; i++) {
			const char *p = s->match + s->seg[i].off;
			size_t len = s->seg[i].len, pos = 0, prev = 0;

			while (pos < len) {
				int rc = re_match(t->re[r], p, len, pos, s->md);
				PCRE2_SIZE *ov;
				size_t a, b;

				if (rc == PCRE2_ERROR_NOMATCH)
					break;
				if (rc < 0)
					return qerr_fail(QERR_UNSUPPORTED,
							 "tokenizer: regex "
							 "match failed (%d)",
							 rc);
				ov = pcre2_get_ovector_pointer(s->md);
				a = ov[0];
				b = ov[1];
				if (b == a) {   /* empty match: step one char */
					pos = a + 1;
					while (pos < len &&
					       ((uint8_t)p[pos] & 0xc0) == 0x80)
						pos++;
					continue;
				}
				if (a > prev &&
				    seg_push(&s->seg2, &s->n_seg2,
					     &s->cap_seg2,
					     s->seg[i].off + prev, a - prev))
					return QERR_NOMEM;
				if (seg_push(&s->seg2, &s->n_seg2,
					     &s->cap_seg2,
					     s->seg[i].off + a, b - a))
					return QERR_NOMEM;
				prev = pos = b;
			}
			if (prev < len &&
			    seg_push(&s->seg2, &s->n_seg2, &s->cap_seg2,
				     s->seg[i].off + prev, len - prev))
				return QERR_NOMEM;
		}
		{
			span *tmp = s->seg;
			size_t c = s->cap_seg;

			s->seg = s->seg2;
			s->cap_seg = s->cap_seg2;
			s->n_seg = s->n_seg2;
			s->seg2 = tmp;
			s->cap_seg2 = c;
		}
	}
	return 0;
}

static int bpe_text(const tok *t, scratch *s, const char *p, size_t n)
{
	size_t m;
	int rc;

	if ((rc = clean_utf8(s, (const uint8_t *)p, n, &m)))
		return rc;
	if ((rc = pre_split(t, s, m)))
		return rc;
	for (size_t i = 0; i < s->n_seg; i++)
		if ((rc = bpe_word(t, s, (const uint8_t *)s->clean +
				   s->seg[i].off, s->seg[i].len)))
			return rc;
	return 0;
}

/* ---- SentencePiece --------------------------------------------------- */

static int spm_try(const tok *t, scratch *s, const char *txt, int32_t l,
		   int32_t r)
{
	int32_t id;
	bigram b;

	if (l < 0 || r < 0)
		return 0;
	id = lookup(t, txt + s->soff[l], s->slen[l] + s->slen[r]);
	if (id < 0)
		return 0;
	b.key = -(double)t->score[id];
	b.left = l;
	b.right = r;
	b.a = (int32_t)(s->slen[l] + s->slen[r]);
	b.b = 0;
	return heap_push(s, b);
}

static int spm_text(const tok *t, scratch *s, const char *p, size_t n,
		    int prefix)
{
	size_t k = 0, ns = 0;
	char *x;

	if (grow((void **)&s->clean, &s->cap_text, 3 * n + 4, 1))
		return QERR_NOMEM;
	x = s->clean;
	if (prefix) {
		memcpy(x, "\xe2\x96\x81", 3);
		k = 3;
	}
	for (size_t i = 0; i < n; i++) {
		if (p[i] == ' ') {
			memcpy(x + k, "\xe2\x96\x81", 3);
			k += 3;
		} else {
			x[k++] = p[i];
		}
	}
	if (sym_reserve(s, k + 1))
		return QERR_NOMEM;
	for (size_t i = 0; i < k; ns++) {
		size_t l = utf8_len((uint8_t)x[i]);

		if (l > k - i)
			l = k - i;
		s->soff[ns] = (uint32_t)i;
		s->slen[ns] = (uint32_t)l;
		s->sprev[ns] = (int32_t)ns - 1;
		s->snext[ns] = i + l < k ? (int32_t)ns + 1 : -1;
		i += l;
	}
	s->n_heap = 0;
	for (size_t i = 1; i < ns; i++)
		if (spm_try(t, s, x, (int32_t)i - 1, (int32_t)i))
			return QERR_NOMEM;
	while (s->n_heap) {
		bigram b = heap_pop(s);
		int32_t l = b.left, r = b.right;

		if (!s->slen[l] || !s->slen[r] ||
		    s->slen[l] + s->slen[r] != (uint32_t)b.a)
			continue;
		s->slen[l] += s->slen[r];
		s->slen[r] = 0;
		s->snext[l] = s->snext[r];
		if (s->snext[r] >= 0)
			s->sprev[s->snext[r]] = l;
		if (spm_try(t, s, x, s->sprev[l], l) ||
		    spm_try(t, s, x, l, s->snext[l]))
			return QERR_NOMEM;
	}
	for (int32_t i = ns ? 0 : -1; i >= 0; i = s->snext[i]) {
		int32_t id = lookup(t, x + s->soff[i], s->slen[i]);

		if (id >= 0) {
			if (push_id(s, id))
				return QERR_NOMEM;
			continue;
		}
		for (uint32_t j = 0; j < s->slen[i]; j++) {
			uint8_t c = (uint8_t)x[s->soff[i] + j];
			int32_t bid = t->byte_id[c] >= 0 ? t->byte_id[c]
							  : t->unk;

			if (bid < 0)
				return qerr_fail(QERR_UNSUPPORTED, "tokenizer: "
						 "no byte token for 0x%02X and "
						 "no unknown token", c);
			if (push_id(s, bid))
				return QERR_NOMEM;
		}
	}
	return 0;
}

/* ---- encode ---------------------------------------------------------- */

typedef struct {
	size_t off, len;
	int32_t id;   /* >= 0: a special token; -1: text */
} frag;

/* llama.cpp's tokenizer_st_partition: for each special token, longest
 * first, split every text fragment at its occurrences (left to right). */
static int partition(const tok *t, const char *text, size_t len,
		     int parse_special, frag **out, size_t *n_out)
{
	frag *f = NULL, *g = NULL;
	size_t nf = 0, cf = 0, ng, cg = 0;
	uint8_t seen[256] = {0};

	for (size_t i = 0; i < len; i++)
		seen[(uint8_t)text[i]] = 1;
	if (grow((void **)&f, &cf, 1, sizeof(*f)))
		return QERR_NOMEM;
	f[nf++] = (frag){0, len, -1};
	for (uint32_t k = 0; k < t->n_special; k++) {
		int32_t id = t->special[k];
		size_t sl;
		const char *st = ttext(t, id, &sl);
		int hit = 0;

		if (!parse_special && (t->attr[id] & (A_CONTROL | A_UNKNOWN)))
			continue;
		if (!seen[(uint8_t)st[0]] || sl > len)
			continue;
		for (size_t i = 0; i < nf && !hit; i++)
			hit = f[i].id < 0 && f[i].len >= sl &&
			      memmem(text + f[i].off, f[i].len, st, sl);
		if (!hit)
			continue;
		ng = 0;
		for (size_t i = 0; i < nf; i++) {
			size_t off = f[i].off, rem = f[i].len;
			const char *m;

			if (f[i].id >= 0) {
				if (grow((void **)&g, &cg, ng + 1, sizeof(*g)))
					goto nomem;
				g[ng++] = f[i];
				continue;
			}
			while (rem >= sl &&
			       (m = memmem(text + off, rem, st, sl))) {
				size_t a = (size_t)(m - text);

				if (grow((void **)&g, &cg, ng + 2, sizeof(*g)))
					goto nomem;
				if (a > off)
					g[ng++] = (frag){off, a - off, -1};
				g[ng++] = (frag){a, sl, id};
				rem -= a + sl - off;
				off = a + sl;
			}
			if (rem) {
				if (grow((void **)&g, &cg, ng + 1, sizeof(*g)))
					goto nomem;
				g[ng++] = (frag){off, rem, -1};
			}
		}
		{
			frag *tmp = f;
			size_t c = cf;

			f = g;
			cf = cg;
			nf = ng;
			g = tmp;
			cg = c;
		}
	}
	free(g);
	*out = f;
	*n_out = nf;
	return 0;
nomem:
	free(f);
	free(g);
	return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
}

int tok_encode(const tok *t, const char *text, size_t len, int parse_special,
	       int add_special, int32_t **ids, size_t *n_ids)
{
	scratch s = {0};
	frag *f = NULL;
	size_t nf = 0;
	int rc = 0, prev_special = 1;

	*ids = NULL;
	*n_ids = 0;
	if (!t || (!text && len))
		return qerr_fail(QERR_ARG, "tok_encode: NULL argument");
	if (add_special && t->add_bos && (rc = push_id(&s, t->bos)))
		goto out;
	if (len && (rc = partition(t, text, len, parse_special, &f, &nf)))
		goto out;
	if (t->model == M_BPE) {
		s.md = pcre2_match_data_create(1, NULL);
		if (!s.md) {
			rc = qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
			goto out;
		}
	}
	for (size_t i = 0; i < nf; i++) {
		if (f[i].id >= 0) {
			rc = push_id(&s, f[i].id);
			prev_special = 1;
		} else if (t->model == M_SPM) {
			rc = spm_text(t, &s, text + f[i].off, f[i].len,
				      t->add_space_prefix && prev_special);
			prev_special = 0;
		} else {
			rc = bpe_text(t, &s, text + f[i].off, f[i].len);
		}
		if (rc)
			goto out;
	}
	if (add_special && t->add_eos && t->eos >= 0 &&
	    (rc = push_id(&s, t->eos)))
		goto out;
	*ids = s.out;
	*n_ids = s.n_out;
	s.out = NULL;
out:
	free(f);
	scratch_fini(&s);
	return rc;
}

/* ---- decode and queries ---------------------------------------------- */

const char *tok_piece(const tok *t, int32_t id, int special, size_t *len)
{
	if (!t || id < 0 || (uint32_t)id >= t->n) {
		*len = 0;
		return NULL;
	}
	if (!special && (t->attr[id] & (A_CONTROL | A_UNKNOWN))) {
		*len = 0;
		return t->piece + t->poff[id];
	}
	*len = t->poff[id + 1] - t->poff[id];
	return t->piece + t->poff[id];
}

int tok_decode(const tok *t, const int32_t *ids, size_t n, int flags,
	       char **out, size_t *len)
{
	size_t total = 0, k = 0, first = 0;
	int special = flags & TOK_DECODE_SPECIAL;
	char *buf;

	*out = NULL;
	*len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l;

		if (!tok_piece(t, ids[i], special, &l))
			return qerr_fail(QERR_RANGE, "token id %d is out of "
					 "range (vocab size %u)", ids[i],
					 t ? t->n : 0);
		total += l;
	}
	buf = malloc(total + 1);
	if (!buf)
		return qerr_fail(QERR_NOMEM, "tokenizer: out of memory");
	if (n && ids[0] == t->bos && t->add_bos)
		first = 1;
	for (size_t i = 0; i < n; i++) {
		size_t l;
		const char *p = tok_piece(t, ids[i], special, &l);

		if (i == first && (flags & TOK_DECODE_STRIP) &&
		    t->add_space_prefix && l && *p == ' ') {
			p++;
			l--;
		}
		memcpy(buf + k, p, l);
		k += l;
	}
	buf[k] = '\0';
	*out = buf;
	*len = k;
	return 0;
}

uint32_t tok_vocab_size(const tok *t) { return t->n; }
int32_t tok_bos(const tok *t) { return t->bos; }
int32_t tok_eos(const tok *t) { return t->eos; }
int32_t tok_eot(const tok *t) { return t->eot; }
int tok_add_bos(const tok *t) { return t->add_bos; }
const char *tok_chat_template(const tok *t) { return t->chat_template; }
const char *tok_model_name(const tok *t)
{
	return t->model == M_SPM ? "llama" : "gpt2";
}
const char *tok_pre_name(const tok *t) { return t->pre; }

int32_t tok_find(const tok *t, const char *text)
{
	return text ? lookup(t, text, strlen(text)) : -1;
}

int tok_type(const tok *t, int32_t id)
{
	if (id < 0 || (uint32_t)id >= t->n)
		return TOK_TYPE_UNDEFINED;
	return t->ttype[id];
}

int tok_is_control(const tok *t, int32_t id)
{
	return id >= 0 && (uint32_t)id < t->n && (t->attr[id] & A_CONTROL);
}

int tok_is_eog(const tok *t, int32_t id)
{
	return id >= 0 && bsearch(&id, t->eog, t->n_eog, sizeof(*t->eog),
				  cmp_i32) != NULL;
}

const char *tok_text(const tok *t, int32_t id, size_t *len)
{
	if (id < 0 || (uint32_t)id >= t->n) {
		*len = 0;
		return NULL;
	}
	return ttext(t, id, len);
}

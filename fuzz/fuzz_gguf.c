/*
 * fuzz_gguf — libFuzzer target: gguf_open() on arbitrary file contents,
 * then everything built on an open GGUF that reads its metadata: the
 * typed getters, tok_load() (and, when it loads, a short encode/decode)
 * and model_from_gguf().
 *
 * The bytes go to a memfd opened by its /proc/self/fd path, so the real
 * open/fstat/mmap path runs. Properties checked beyond "no crash, no leak,
 * no UB": every string, array and tensor the reader returns lies inside
 * the file (the mapping's base is known from the layout: the first key, or
 * the first tensor name, starts at byte 32), tensors do not overlap the
 * header, and a failed open leaves *out NULL.
 * Seeds: fuzz/corpus/gguf/ (written by fuzz/mkseeds.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "format/gguf.h"
#include "infer/model.h"
#include "qerr.h"
#include "text/tok.h"

static int fd = -1;
static char path[64];

static void check_in(const uint8_t *base, uint64_t size, const void *p,
		     uint64_t n, const char *what)
{
	const uint8_t *q = p;

	if (n == 0)
		return;
	if (!q || q < base || (uint64_t)(q - base) > size ||
	    n > size - (uint64_t)(q - base)) {
		fprintf(stderr, "%s outside the file: %p+%llu, file %p+%llu\n",
			what, p, (unsigned long long)n, (const void *)base,
			(unsigned long long)size);
		abort();
	}
	/* touch both ends: a pointer past the mapping faults here */
	volatile uint8_t sink = q[0];
	sink = q[n - 1];
	(void)sink;
}

static uint64_t elem_size(uint32_t type)
{
	switch (type) {
	case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
	case GGUF_UINT16: case GGUF_INT16: return 2;
	case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
	case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
	default: abort(); /* the reader refuses other element types */
	}
}

static void getters(const gguf_file *g, const gguf_kv *kv)
{
	char key[256];
	uint32_t u;
	int32_t i;
	float f;
	int b;
	gguf_str s;
	const gguf_kv *a;

	if (kv->key.len >= sizeof(key) || memchr(kv->key.ptr, 0, kv->key.len))
		return;
	memcpy(key, kv->key.ptr, kv->key.len);
	key[kv->key.len] = '\0';
	if (!gguf_find(g, key))
		abort(); /* a key that is there must be found */
	(void)gguf_get_u32(g, key, &u);
	(void)gguf_get_i32(g, key, &i);
	(void)gguf_get_f32(g, key, &f);
	(void)gguf_get_bool(g, key, &b);
	(void)gguf_get_str(g, key, &s);
	if (kv->type == GGUF_ARRAY &&
	    gguf_get_arr(g, key, kv->arr_type, &a) == QERR_OK && a != kv)
		abort();
}

static void use_tok(const tok *t)
{
	static const char text[] = "Hello world <|im_end|> 123 \xe2\x96\x81x\xff";
	int32_t *ids = NULL;
	size_t n = 0, len;
	char *out = NULL;

	if (tok_encode(t, text, sizeof(text) - 1, 1, 1, &ids, &n) == QERR_OK) {
		if (tok_decode(t, ids, n, TOK_DECODE_SPECIAL, &out, &len) ==
		    QERR_OK)
			free(out);
		free(ids);
	}
	for (int32_t id = -1; id < 8; id++) {
		(void)tok_piece(t, id, 1, &len);
		(void)tok_text(t, id, &len);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gguf_file *g = (gguf_file *)data; /* must be overwritten */
	const uint8_t *base = NULL;
	uint64_t nkv, nt;
	tok *t = NULL;
	model *m = NULL;

	if (fd < 0) {
		fd = memfd_create("fuzz-gguf", MFD_CLOEXEC);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || ftruncate(fd, (off_t)size) ||
	    (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	if (gguf_open(path, &g)) {
		if (g)
			abort();
		return 0;
	}
	if (gguf_file_size(g) != size)
		abort();
	nkv = gguf_n_kv(g);
	nt = gguf_n_tensors(g);
	if (nkv)
		base = (const uint8_t *)gguf_kv_at(g, 0)->key.ptr - 32;
	else if (nt)
		base = (const uint8_t *)gguf_tensor_at(g, 0)->name.ptr - 32;
	for (uint64_t k = 0; k < nkv; k++) {
		const gguf_kv *kv = gguf_kv_at(g, k);

		check_in(base, size, kv->key.ptr, kv->key.len, "key");
		if (kv->type == GGUF_STRING)
			check_in(base, size, kv->v.s.ptr, kv->v.s.len, "string");
		if (kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING)
			for (uint64_t j = 0; j < kv->arr_n; j++)
				check_in(base, size, kv->arr_str[j].ptr,
					 kv->arr_str[j].len, "array string");
		else if (kv->type == GGUF_ARRAY)
			check_in(base, size, kv->arr_data,
				 kv->arr_n * elem_size(kv->arr_type),
				 "array data");
		getters(g, kv);
	}
	for (uint64_t k = 0; k < nt; k++) {
		const gguf_tensor *te = gguf_tensor_at(g, k);

		check_in(base, size, te->name.ptr, te->name.len, "tensor name");
		check_in(base, size, te->data, te->nbytes, "tensor data");
		if (te->n_dims > 4)
			abort();
	}
	if (tok_load(g, &t) == QERR_OK) {
		use_tok(t);
		tok_free(&t);
	} else if (t) {
		abort();
	}
	if (model_from_gguf(g, &m) == QERR_OK) {
		model_free(&m); /* owns g now */
		return 0;
	}
	if (m)
		abort();
	gguf_close(&g);
	return 0;
}

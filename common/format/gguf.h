/*
 * gguf — reader and writer for GGUF v3 model files (llama.cpp's format).
 *
 * File layout (all integers little-endian):
 *   1. magic "GGUF" (4 bytes), version u32 (= 3),
 *      tensor count u64, metadata key/value count u64
 *   2. metadata: n_kv times { key: string, value type: u32, value }
 *      string = u64 length + bytes (no NUL); array = elem type u32,
 *      count u64, elements
 *   3. tensor infos: n_tensors times { name: string, n_dims: u32,
 *      ne[n_dims]: u64 (ne[0] is the fastest-varying dimension),
 *      type: u32 (ggml type), offset: u64 (relative to the data section) }
 *   4. padding to general.alignment (default 32)
 *   5. data section: tensor bytes, each at its offset (aligned)
 *
 * The reader mmaps the file read-only (MAP_SHARED: processes on one host
 * share the page cache) and validates everything against the file size:
 * every length, count and offset; no two tensors' data overlap. All strings and tensor data returned
 * point into the mapping and live until gguf_close().
 *
 * Owns the file format only (header, key/values, tensor infos, the
 * writer); the tensor types, their names and sizes are ggml.h's table.
 * Users: the model loader (infer/model.c), the tokenizers (text/), the
 * quantize and mkmodel tools, the coordinator (model metadata).
 */
#ifndef QUORUM_GGUF_H
#define QUORUM_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "format/ggml.h" /* the tensor types */

#define GGUF_MAGIC "GGUF"
#define GGUF_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32
/* The largest {arch}.context_length taken: by the model loader
 * (infer/model.c) and the coordinator, which reads it without the
 * weights; one bound, so that neither takes a model the other refuses. */
#define GGUF_MAX_CONTEXT (1 << 24)
/* The most tokenizer.ggml.tokens taken: by the tokenizer (text/tok.c,
 * which the coordinator and `quorum tokenize` load alone) and the model
 * loader. */
#define GGUF_MAX_VOCAB (1 << 22)

enum gguf_vtype {
	GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3,
	GGUF_UINT32 = 4, GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7,
	GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
	GGUF_FLOAT64 = 12, GGUF_VTYPE_COUNT_
};

/* A string inside the mapping: NOT NUL-terminated. */
typedef struct {
	const char *ptr;
	uint64_t len;
} gguf_str;

typedef struct {
	gguf_str key;
	uint32_t type;          /* enum gguf_vtype */
	union {
		uint64_t u;     /* unsigned ints and bool */
		int64_t i;      /* signed ints */
		double f;       /* floats */
		gguf_str s;     /* string */
	} v;
	/* arrays (type == GGUF_ARRAY) */
	uint32_t arr_type;      /* element type */
	uint64_t arr_n;         /* element count */
	const uint8_t *arr_data;/* raw elements (numeric arrays) */
	gguf_str *arr_str;      /* string arrays: arr_n strings (owned) */
} gguf_kv;

typedef struct {
	gguf_str name;
	uint32_t n_dims;
	uint64_t ne[4];         /* ne[0] fastest; unused dims are 1 */
	uint32_t type;          /* enum ggml_type */
	uint64_t offset;        /* in the data section */
	uint64_t nbytes;
	const void *data;       /* into the mapping */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Opens and validates path. On failure returns a qerr code with a detail
 * naming the file and the problem (see qerr_detail()). */
int gguf_open(const char *path, gguf_file **out);
void gguf_close(gguf_file **g);
/* Moves the tensors' bytes from the file's mapping to a private copy in
 * anonymous memory, 2 MiB aligned and advised for transparent huge pages
 * (page-cache pages are usually 4 KiB: a decode step streams every
 * weight once, and the page walks of 4 KiB pages cost it time). The
 * tensors' data pointers move to the copy; nothing else changes. On
 * failure (QERR_NOMEM) the tensors stay in the mapping. */
int gguf_copy_tensors(gguf_file *g);
/* The same for the tensors keep(t, ctx) accepts (every one when keep is
 * NULL); the others stay in the mapping, where their bytes still read.
 * The copy spans the whole data section (each tensor at its offset from
 * a 2 MiB boundary), but only the kept tensors' pages are ever touched,
 * so only they cost memory and time. */
int gguf_copy_tensors_if(gguf_file *g,
			 int (*keep)(const gguf_tensor *t, void *ctx),
			 void *ctx);

/* The file's pages of [p, p + n) leave this process's mapping when those
 * bytes are the mapping's (not a copy's): once a tensor left in the
 * mapping has been read for good (packed), it need not stay resident
 * here; the page cache keeps it, and a later read faults it back in. */
void gguf_drop_mapped(const gguf_file *g, const void *p, size_t n);

const char *gguf_path(const gguf_file *g);
uint64_t gguf_file_size(const gguf_file *g);
uint64_t gguf_n_kv(const gguf_file *g);
const gguf_kv *gguf_kv_at(const gguf_file *g, uint64_t i);
uint64_t gguf_n_tensors(const gguf_file *g);
const gguf_tensor *gguf_tensor_at(const gguf_file *g, uint64_t i);

/* NULL when absent. */
const gguf_kv *gguf_find(const gguf_file *g, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);

/* Typed getters: QERR_MISSING when absent, QERR_FORMAT on a type that does
 * not convert (ints convert among themselves when in range). */
int gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out);
int gguf_get_i32(const gguf_file *g, const char *key, int32_t *out);
int gguf_get_f32(const gguf_file *g, const char *key, float *out);
int gguf_get_bool(const gguf_file *g, const char *key, int *out);
int gguf_get_str(const gguf_file *g, const char *key, gguf_str *out);
/* Array of elem_type (GGUF_STRING allowed); returns the kv. */
int gguf_get_arr(const gguf_file *g, const char *key, uint32_t elem_type,
		 const gguf_kv **out);

/* 1 when s equals the NUL-terminated c. */
int gguf_str_eq(gguf_str s, const char *c);

const char *gguf_vtype_name(uint32_t type);

/* ---- writer ---------------------------------------------------------- */

typedef struct gguf_writer gguf_writer;

/* Fills nbytes of tensor idx (in gguf_w_tensor order) into dst. */
typedef int (*gguf_fill_fn)(void *ctx, int idx, void *dst, uint64_t nbytes);

int gguf_writer_new(gguf_writer **out);
void gguf_writer_free(gguf_writer **w);
/* Metadata in insertion order; keys and strings are copied. The writer
 * aligns tensors to GGUF_DEFAULT_ALIGNMENT: general.alignment may only be
 * written as that u32 (else QERR_UNSUPPORTED, from the save too). */
int gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_w_f32(gguf_writer *w, const char *key, float v);
int gguf_w_bool(gguf_writer *w, const char *key, int v);
int gguf_w_str(gguf_writer *w, const char *key, const char *v);
/* Numeric array: elem_type is a scalar gguf_vtype, data n elements. */
int gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type,
	       const void *data, uint64_t n);
/* String array: n strings given by pointer and length. */
int gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *s,
		   const uint64_t *len, uint64_t n);
/* A copy of a key/value read from a file (same types, same bytes). */
int gguf_w_kv(gguf_writer *w, const gguf_kv *kv);
/* Declares a tensor; its bytes come from fill() at save time. */
int gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type,
		  uint32_t n_dims, const uint64_t *ne);
/* Writes the file (to path.tmp, then rename). */
int gguf_writer_save(gguf_writer *w, const char *path, gguf_fill_fn fill,
		     void *ctx);

/* A model file's fingerprint: a hash of its size, every metadata key and
 * value, and each tensor's name and first 4 KiB. model_load gives a model
 * this fingerprint; workers register with it and the coordinator, which
 * hashes its own copy of the file, refuses a worker whose model differs. */
uint64_t gguf_fingerprint(const gguf_file *g);

#endif

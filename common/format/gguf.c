/*
 * gguf — the GGUF v3 reader (mmap, every length, count and offset
 * checked against the file size) and writer (see gguf.h for the layout).
 * Tensor sizes come from ggml.h's type table.
 */
#include "format/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/hugemem.h"
#include "fnv.h"
#include "qerr.h"

/* Caps on untrusted counts: generous for real models, small enough that a
 * corrupt header cannot make us allocate absurd amounts. */
#define GGUF_MAX_KV 65536u
#define GGUF_MAX_TENSORS 1048576u
#define GGUF_MAX_STR (64u << 20)      /* one string */
#define GGUF_MAX_ARR (1ull << 32)     /* elements of one array */
#define GGUF_MAX_DIMS 4u

struct gguf_file {
	char *path;
	const uint8_t *map;
	uint64_t size;
	uint32_t version;
	uint64_t n_kv;
	gguf_kv *kv;
	uint64_t n_tensors;
	gguf_tensor *tensors;
	uint64_t alignment;
	uint64_t data_off;
	void *copy;       /* gguf_copy_tensors: the data section's copy */
	size_t copy_len;
};

/* ---- parsing cursor -------------------------------------------------- */

typedef struct {
	const uint8_t *p;
	uint64_t off, size;
	const char *path;
	int err;
} cursor;

static int cur_fail(cursor *c, const char *what)
{
	if (!c->err)
		c->err = qerr_fail(QERR_FORMAT, "%s: truncated or corrupt GGUF: "
				   "%s at byte %llu (file size %llu)", c->path,
				   what, (unsigned long long)c->off,
				   (unsigned long long)c->size);
	return c->err;
}

static int cur_take(cursor *c, uint64_t n, const uint8_t **out,
		    const char *what)
{
	if (c->err)
		return c->err;
	if (n > c->size - c->off)
		return cur_fail(c, what);
	*out = c->p + c->off;
	c->off += n;
	return 0;
}

static uint32_t cur_u32(cursor *c, const char *what)
{
	const uint8_t *b = NULL;
	uint32_t v = 0;

	if (!cur_take(c, 4, &b, what))
		memcpy(&v, b, 4);
	return v;
}

static uint64_t cur_u64(cursor *c, const char *what)
{
	const uint8_t *b = NULL;
	uint64_t v = 0;

	if (!cur_take(c, 8, &b, what))
		memcpy(&v, b, 8);
	return v;
}

static gguf_str cur_str(cursor *c, const char *what)
{
	gguf_str s = {"", 0};
	const uint8_t *b = NULL;
	uint64_t n = cur_u64(c, what);

	if (c->err)
		return s;
	if (n > GGUF_MAX_STR) {
		cur_fail(c, "string longer than 64 MiB");
		return s;
	}
	if (!cur_take(c, n, &b, what)) {
		s.ptr = (const char *)b;
		s.len = n;
	}
	return s;
}

static uint64_t vtype_size(uint32_t t)
{
	switch (t) {
	case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
	case GGUF_UINT16: case GGUF_INT16: return 2;
	case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
	case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
	default: return 0;
	}
}

/* Reads a scalar of type t into kv->v. */
static void read_scalar(cursor *c, uint32_t t, gguf_kv *kv)
{
	const uint8_t *b = NULL;
	uint64_t n = vtype_size(t);

	if (t == GGUF_STRING) {
		kv->v.s = cur_str(c, "string value");
		return;
	}
	if (cur_take(c, n, &b, "value"))
		return;
	switch (t) {
	case GGUF_UINT8: kv->v.u = b[0]; break;
	case GGUF_BOOL: kv->v.u = b[0] != 0; break;
	case GGUF_INT8: kv->v.i = (int8_t)b[0]; break;
	case GGUF_UINT16: { uint16_t x; memcpy(&x, b, 2); kv->v.u = x; break; }
	case GGUF_INT16: { int16_t x; memcpy(&x, b, 2); kv->v.i = x; break; }
	case GGUF_UINT32: { uint32_t x; memcpy(&x, b, 4); kv->v.u = x; break; }
	case GGUF_INT32: { int32_t x; memcpy(&x, b, 4); kv->v.i = x; break; }
	case GGUF_FLOAT32: { float x; memcpy(&x, b, 4); kv->v.f = x; break; }
	case GGUF_UINT64: memcpy(&kv->v.u, b, 8); break;
	case GGUF_INT64: memcpy(&kv->v.i, b, 8); break;
	case GGUF_FLOAT64: memcpy(&kv->v.f, b, 8); break;
	}
}

static int read_kv(cursor *c, gguf_kv *kv)
{
	kv->key = cur_str(c, "metadata key");
	kv->type = cur_u32(c, "metadata type");
	if (c->err)
		return c->err;
	if (kv->type >= GGUF_VTYPE_COUNT_)
		return c->err = qerr_fail(QERR_FORMAT, "%s: metadata key '%.*s' "
					  "has unknown type %u", c->path,
					  (int)kv->key.len, kv->key.ptr,
					  kv->type);
	if (kv->type != GGUF_ARRAY) {
		read_scalar(c, kv->type, kv);
		return c->err;
	}
	kv->arr_type = cur_u32(c, "array type");
	kv->arr_n = cur_u64(c, "array length");
	if (c->err)
		return c->err;
	if (kv->arr_type == GGUF_ARRAY || kv->arr_type >= GGUF_VTYPE_COUNT_)
		return c->err = qerr_fail(QERR_FORMAT, "%s: array '%.*s' has "
					  "unsupported element type %u",
					  c->path, (int)kv->key.len,
					  kv->key.ptr, kv->arr_type);
	if (kv->arr_n > GGUF_MAX_ARR)
		return cur_fail(c, "array too long");
	if (kv->arr_type != GGUF_STRING) {
		uint64_t es = vtype_size(kv->arr_type);
		if (kv->arr_n > (c->size - c->off) / es)
			return cur_fail(c, "array data");
		cur_take(c, kv->arr_n * es, &kv->arr_data, "array data");
		return c->err;
	}
	/* each string needs at least its 8-byte length */
	if (kv->arr_n > (c->size - c->off) / 8)
		return cur_fail(c, "string array");
	kv->arr_data = c->p + c->off;
	kv->arr_str = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof(gguf_str));
	if (!kv->arr_str)
		return c->err = qerr_fail(QERR_NOMEM, "%s: out of memory "
					  "reading array '%.*s'", c->path,
					  (int)kv->key.len, kv->key.ptr);
	for (uint64_t i = 0; i < kv->arr_n && !c->err; i++)
		kv->arr_str[i] = cur_str(c, "string array element");
	return c->err;
}

const char *gguf_vtype_name(uint32_t t)
{
	static const char *const names[GGUF_VTYPE_COUNT_] = {
		"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
		"string", "array", "u64", "i64", "f64",
	};
	return t < GGUF_VTYPE_COUNT_ ? names[t] : "unknown";
}

static int read_tensor(cursor *c, gguf_tensor *t)
{
	t->name = cur_str(c, "tensor name");
	t->n_dims = cur_u32(c, "tensor dims");
	if (c->err)
		return c->err;
	if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
		return c->err = qerr_fail(QERR_FORMAT, "%s: tensor '%.*s' has "
					  "%u dimensions", c->path,
					  (int)t->name.len, t->name.ptr,
					  t->n_dims);
	for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
		t->ne[d] = d < t->n_dims ? cur_u64(c, "tensor shape") : 1;
	t->type = cur_u32(c, "tensor type");
	t->offset = cur_u64(c, "tensor offset");
	return c->err;
}

static void gguf_free_parts(gguf_file *g)
{
	if (g->kv)
		for (uint64_t i = 0; i < g->n_kv; i++)
			free(g->kv[i].arr_str);
	free(g->kv);
	free(g->tensors);
	if (g->map)
		munmap((void *)g->map, g->size);
	if (g->copy)
		hugemem_free(g->copy, g->copy_len);
	free(g->path);
	free(g);
}

/* a name's length for "%.*s", at most 96 */
#define NAME_CAP(s) ((int)((s).len > 96 ? 96 : (s).len))

static int by_off(const void *a, const void *b)
{
	uint64_t x = (*(const gguf_tensor *const *)a)->offset;
	uint64_t y = (*(const gguf_tensor *const *)b)->offset;

	return x < y ? -1 : x > y;
}

/* No two tensors' bytes overlap: one tensor's data given as part of
 * another's (an offset copied or corrupted) would load as weights that
 * are not its own. ggml's reader refuses it too (it wants each tensor
 * right after the one before). Tensors of an unknown layout are unsized
 * and skipped (the model loader names them if used). */
static int check_overlap(gguf_file *g)
{
	const gguf_tensor **ix, *far = NULL;
	uint64_t n = 0;
	int rc = 0;

	if (g->n_tensors < 2)
		return 0;
	ix = malloc(g->n_tensors * sizeof(*ix));
	if (!ix)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", g->path);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (g->tensors[i].data)
			ix[n++] = &g->tensors[i];
	qsort(ix, n, sizeof(*ix), by_off);
	/* far: of the tensors so far, the one that ends last */
	for (uint64_t i = 0; i < n && !rc; i++) {
		const gguf_tensor *t = ix[i];

		if (far && t->offset < far->offset + far->nbytes)
			rc = qerr_fail(QERR_FORMAT, "%s: tensors '%.*s' (%llu "
				       "bytes at data offset %llu) and '%.*s' "
				       "(%llu bytes at %llu) overlap", g->path,
				       NAME_CAP(far->name), far->name.ptr,
				       (unsigned long long)far->nbytes,
				       (unsigned long long)far->offset,
				       NAME_CAP(t->name), t->name.ptr,
				       (unsigned long long)t->nbytes,
				       (unsigned long long)t->offset);
		if (!far || t->offset + t->nbytes > far->offset + far->nbytes)
			far = t;
	}
	free(ix);
	return rc;
}

/* Shape and bounds of every tensor; types checked later by the model. */
static int check_tensors(gguf_file *g)
{
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		gguf_tensor *t = &g->tensors[i];
		uint64_t rows = 1, rb;
		const char *nm = t->name.ptr;
		int nl = (int)t->name.len;

		for (uint32_t d = 1; d < GGUF_MAX_DIMS; d++) {
			if (t->ne[d] && rows > UINT64_MAX / t->ne[d])
				return qerr_fail(QERR_FORMAT, "%s: tensor '%.*s' "
						 "shape overflows", g->path, nl,
						 nm);
			rows *= t->ne[d];
		}
		if (t->ne[0] == 0 || rows == 0)
			return qerr_fail(QERR_FORMAT, "%s: tensor '%.*s' has an "
					 "empty dimension", g->path, nl, nm);
		rb = ggml_row_bytes(t->type, t->ne[0]);
		/* a known layout whose whole-block row does not fit 64 bits
		 * is not a row of partial blocks: said as what it is */
		if (rb == 0 && ggml_block_elems(t->type) &&
		    t->ne[0] % (uint64_t)ggml_block_elems(t->type) == 0)
			return qerr_fail(QERR_FORMAT, "%s: tensor '%.*s' size "
					 "overflows (rows of %llu elements)",
					 g->path, nl, nm,
					 (unsigned long long)t->ne[0]);
		if (rb == 0) {
			/* Unknown block layout: we cannot size it, so it
			 * cannot be used; the model loader names it. */
			t->nbytes = 0;
			t->data = NULL;
			continue;
		}
		if (rows > UINT64_MAX / rb)
			return qerr_fail(QERR_FORMAT, "%s: tensor '%.*s' size "
					 "overflows", g->path, nl, nm);
		t->nbytes = rb * rows;
		if (t->offset % g->alignment)
			return qerr_fail(QERR_FORMAT, "%s: tensor '%.*s' offset "
					 "%llu is not aligned to %llu", g->path,
					 nl, nm, (unsigned long long)t->offset,
					 (unsigned long long)g->alignment);
		if (t->offset > g->size - g->data_off ||
		    t->nbytes > g->size - g->data_off - t->offset)
			return qerr_fail(QERR_FORMAT, "%s: tensor '%.*s' (%llu "
					 "bytes at data offset %llu) extends "
					 "past the end of the file (truncated?)",
					 g->path, nl, nm,
					 (unsigned long long)t->nbytes,
					 (unsigned long long)t->offset);
		t->data = g->map + g->data_off + t->offset;
	}
	return check_overlap(g);
}

static int by_str(const void *a, const void *b)
{
	const gguf_str *x = *(const gguf_str *const *)a;
	const gguf_str *y = *(const gguf_str *const *)b;
	int c;

	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	c = memcmp(x->ptr, y->ptr, x->len);
	return c ? c : x < y ? -1 : x > y; /* stable: the first one first */
}

/* The n names (a gguf_str at offset off of each of n items, size bytes
 * apart) are distinct: a second key or tensor of one name would be
 * silently shadowed by the first (ggml's reader refuses both). Sorted,
 * so a hostile file's 65,536 keys or million tensors cost n log n
 * comparisons, not n^2 (4.8 s for 65,536 keys of one length, checked
 * pair by pair). */
static int check_unique(const gguf_file *g, const void *items, uint64_t n,
			size_t size, size_t off, const char *what)
{
	const gguf_str **ix;
	int rc = 0;

	if (n < 2)
		return 0;
	if (!(ix = malloc(n * sizeof(*ix))))
		return qerr_fail(QERR_NOMEM, "%s: out of memory", g->path);
	for (uint64_t i = 0; i < n; i++)
		ix[i] = (const gguf_str *)((const char *)items + i * size + off);
	qsort(ix, n, sizeof(*ix), by_str);
	for (uint64_t i = 1; i < n && !rc; i++)
		if (ix[i]->len == ix[i - 1]->len &&
		    !memcmp(ix[i]->ptr, ix[i - 1]->ptr, ix[i]->len))
			rc = qerr_fail(QERR_FORMAT, "%s: duplicate %s '%.*s'",
				       g->path, what, NAME_CAP(*ix[i]),
				       ix[i]->ptr);
	free(ix);
	return rc;
}

static int parse(gguf_file *g)
{
	cursor c = {g->map, 0, g->size, g->path, 0};
	const uint8_t *magic = NULL;
	const gguf_kv *al;
	int rc;

	if (cur_take(&c, 4, &magic, "magic") || memcmp(magic, GGUF_MAGIC, 4))
		return qerr_fail(QERR_FORMAT, "%s: not a GGUF file (bad magic)",
				 g->path);
	g->version = cur_u32(&c, "version");
	if (c.err)
		return c.err;
	if (g->version != 2 && g->version != 3) {
		/* a file written big-endian reads its version byte-swapped */
		uint32_t sw = __builtin_bswap32(g->version);

		return qerr_fail(QERR_UNSUPPORTED, "%s: GGUF version %u is not "
				 "supported (want 2 or 3)%s", g->path,
				 g->version, sw == 2 || sw == 3
				 ? ": a big-endian file (byte-swapped version "
				   "2 or 3); quorum reads little-endian GGUF"
				 : "");
	}
	g->n_tensors = cur_u64(&c, "tensor count");
	g->n_kv = cur_u64(&c, "metadata count");
	if (c.err)
		return c.err;
	if (g->n_kv > GGUF_MAX_KV || g->n_tensors > GGUF_MAX_TENSORS)
		return qerr_fail(QERR_FORMAT, "%s: implausible counts (%llu "
				 "metadata keys, %llu tensors)", g->path,
				 (unsigned long long)g->n_kv,
				 (unsigned long long)g->n_tensors);
	g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof(gguf_kv));
	g->tensors = calloc(g->n_tensors ? g->n_tensors : 1,
			    sizeof(gguf_tensor));
	if (!g->kv || !g->tensors)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", g->path);
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (read_kv(&c, &g->kv[i]))
			return c.err;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (read_tensor(&c, &g->tensors[i]))
			return c.err;
	if ((rc = check_unique(g, g->kv, g->n_kv, sizeof(gguf_kv),
			       offsetof(gguf_kv, key), "metadata key")) ||
	    (rc = check_unique(g, g->tensors, g->n_tensors,
			       sizeof(gguf_tensor),
			       offsetof(gguf_tensor, name), "tensor name")))
		return rc;
	g->alignment = GGUF_DEFAULT_ALIGNMENT;
	al = gguf_find(g, "general.alignment");
	if (al) {
		if (al->type != GGUF_UINT32)
			return qerr_fail(QERR_FORMAT, "%s: general.alignment "
					 "has type %s, want u32", g->path,
					 gguf_vtype_name(al->type));
		if (al->v.u == 0 || (al->v.u & (al->v.u - 1)) ||
		    al->v.u > 65536)
			return qerr_fail(QERR_FORMAT, "%s: general.alignment = "
					 "%llu: not a power of two up to 65536",
					 g->path, (unsigned long long)al->v.u);
		g->alignment = al->v.u;
	}
	g->data_off = (c.off + g->alignment - 1) / g->alignment * g->alignment;
	if (g->n_tensors && g->data_off > g->size)
		return qerr_fail(QERR_FORMAT, "%s: truncated before the tensor "
				 "data", g->path);
	if (g->data_off > g->size)
		g->data_off = g->size;
	return check_tensors(g);
}

int gguf_open(const char *path, gguf_file **out)
{
	gguf_file *g;
	struct stat st;
	int fd, rc;
	void *m;

	*out = NULL;
	g = calloc(1, sizeof(*g));
	if (!g || !(g->path = strdup(path))) {
		free(g);
		return qerr_fail(QERR_NOMEM, "%s: out of memory", path);
	}
	/* O_NONBLOCK: a FIFO named as the model must fail the S_ISREG check
	 * below, not block open() until a writer shows up (no effect on a
	 * regular file) */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = qerr_fail(QERR_IO, "%s: cannot open: %s", path,
			       strerror(errno));
		gguf_free_parts(g);
		return rc;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		rc = qerr_fail(QERR_IO, "%s: not a regular file", path);
		gguf_free_parts(g);
		return rc;
	}
	if (st.st_size < 24) {
		close(fd);
		rc = qerr_fail(QERR_FORMAT, "%s: too small to be a GGUF file "
			       "(%lld bytes)", path, (long long)st.st_size);
		gguf_free_parts(g);
		return rc;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		rc = qerr_fail(QERR_IO, "%s: mmap failed: %s", path,
			       strerror(errno));
		gguf_free_parts(g);
		return rc;
	}
	g->map = m;
	g->size = (uint64_t)st.st_size;
	rc = parse(g);
	if (rc) {
		gguf_free_parts(g);
		return rc;
	}
	*out = g;
	return QERR_OK;
}

/* The file's pages of bytes [lo, hi) of the data section leave this
 * mapping (the page cache keeps them for other processes): whole pages
 * inside the range only. */
static void drop_pages(const gguf_file *g, uint64_t lo, uint64_t hi)
{
	uintptr_t a = ((uintptr_t)g->map + g->data_off + lo + 4095) &
		      ~(uintptr_t)4095;
	uintptr_t b = ((uintptr_t)g->map + g->data_off + hi) &
		      ~(uintptr_t)4095;

	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

int gguf_copy_tensors_if(gguf_file *g,
			 int (*keep)(const gguf_tensor *t, void *ctx),
			 void *ctx)
{
	size_t n = (size_t)(g->size - g->data_off);
	uint64_t kept = 0;
	char *a;

	if (g->copy || n == 0)
		return QERR_OK;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		kept += !keep || keep(&g->tensors[i], ctx);
	if (!kept)
		return QERR_OK;
	if (!(a = hugemem_alloc(n)))
		return qerr_fail(QERR_NOMEM, "%s: no memory for a copy of "
				 "%zu bytes of tensors", g->path, n);
	if (!keep) {
		memcpy(a, g->map + g->data_off, n);
		/* a tensor the reader left unsized (no data: rows not whole
		 * blocks, a type it cannot size) stays so, for the loader to
		 * name */
		for (uint64_t i = 0; i < g->n_tensors; i++)
			if (g->tensors[i].data)
				g->tensors[i].data = a + g->tensors[i].offset;
		drop_pages(g, 0, n);
	} else {
		for (uint64_t i = 0; i < g->n_tensors; i++) {
			gguf_tensor *t = &g->tensors[i];

			if (!t->data || !keep(t, ctx))
				continue;
			memcpy(a + t->offset, t->data, t->nbytes);
			t->data = a + t->offset;
			drop_pages(g, t->offset, t->offset + t->nbytes);
		}
	}
	mprotect(a, hugemem_span(n), PROT_READ);
	g->copy = a;
	g->copy_len = n;
	return QERR_OK;
}

int gguf_copy_tensors(gguf_file *g)
{
	return gguf_copy_tensors_if(g, NULL, NULL);
}

void gguf_drop_mapped(const gguf_file *g, const void *p, size_t n)
{
	const uint8_t *b = p, *lo = g->map + g->data_off, *hi = g->map + g->size;

	if (b >= lo && b <= hi && n <= (size_t)(hi - b))
		drop_pages(g, (uint64_t)(b - lo), (uint64_t)(b - lo) + n);
}

void gguf_close(gguf_file **g)
{
	if (!g || !*g)
		return;
	gguf_free_parts(*g);
	*g = NULL;
}

const char *gguf_path(const gguf_file *g) { return g->path; }
uint64_t gguf_file_size(const gguf_file *g) { return g->size; }
uint64_t gguf_n_kv(const gguf_file *g) { return g->n_kv; }
uint64_t gguf_n_tensors(const gguf_file *g) { return g->n_tensors; }

const gguf_kv *gguf_kv_at(const gguf_file *g, uint64_t i)
{
	return i < g->n_kv ? &g->kv[i] : NULL;
}

const gguf_tensor *gguf_tensor_at(const gguf_file *g, uint64_t i)
{
	return i < g->n_tensors ? &g->tensors[i] : NULL;
}

int gguf_str_eq(gguf_str s, const char *c)
{
	size_t n = strlen(c);

	return s.len == n && !memcmp(s.ptr, c, n);
}

const gguf_kv *gguf_find(const gguf_file *g, const char *key)
{
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (gguf_str_eq(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name)
{
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (gguf_str_eq(g->tensors[i].name, name))
			return &g->tensors[i];
	return NULL;
}

static int is_signed(uint32_t t)
{
	return t == GGUF_INT8 || t == GGUF_INT16 || t == GGUF_INT32 ||
	       t == GGUF_INT64;
}

/* A bool is no number: a count or a size written as one (true) is a
 * corrupt key, not 1. */
static int is_unsigned(uint32_t t)
{
	return t == GGUF_UINT8 || t == GGUF_UINT16 || t == GGUF_UINT32 ||
	       t == GGUF_UINT64;
}

static int find_typed(const gguf_file *g, const char *key,
		      const gguf_kv **kv)
{
	*kv = gguf_find(g, key);
	if (!*kv)
		return qerr_fail(QERR_MISSING, "%s: missing metadata key '%s'",
				 g->path, key);
	return 0;
}

static int wrong_type(const gguf_file *g, const char *key, const gguf_kv *kv,
		      const char *want)
{
	return qerr_fail(QERR_FORMAT, "%s: metadata key '%s' has type %s, "
			 "want %s", g->path, key, gguf_vtype_name(kv->type),
			 want);
}

/* Any integer key as int64 range-checked into [lo, hi]. */
static int get_int(const gguf_file *g, const char *key, int64_t lo,
		   int64_t hi, int64_t *out, const char *want)
{
	const gguf_kv *kv;
	int rc = find_typed(g, key, &kv);

	if (rc)
		return rc;
	if (is_unsigned(kv->type)) {
		if (kv->v.u > (uint64_t)hi)
			goto range;
		*out = (int64_t)kv->v.u;
		return 0;
	}
	if (is_signed(kv->type)) {
		if (kv->v.i < lo || kv->v.i > hi)
			goto range;
		*out = kv->v.i;
		return 0;
	}
	return wrong_type(g, key, kv, want);
range:
	return qerr_fail(QERR_RANGE, "%s: metadata key '%s' is out of range "
			 "for %s", g->path, key, want);
}

int gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out)
{
	int64_t v;
	int rc = get_int(g, key, 0, UINT32_MAX, &v, "u32");

	if (!rc)
		*out = (uint32_t)v;
	return rc;
}

int gguf_get_i32(const gguf_file *g, const char *key, int32_t *out)
{
	int64_t v;
	int rc = get_int(g, key, INT32_MIN, INT32_MAX, &v, "i32");

	if (!rc)
		*out = (int32_t)v;
	return rc;
}

int gguf_get_f32(const gguf_file *g, const char *key, float *out)
{
	const gguf_kv *kv;
	int rc = find_typed(g, key, &kv);

	if (rc)
		return rc;
	if (kv->type == GGUF_FLOAT32 || kv->type == GGUF_FLOAT64)
		*out = (float)kv->v.f;
	else if (is_unsigned(kv->type))
		*out = (float)kv->v.u;
	else if (is_signed(kv->type))
		*out = (float)kv->v.i;
	else
		return wrong_type(g, key, kv, "f32");
	return 0;
}

int gguf_get_bool(const gguf_file *g, const char *key, int *out)
{
	const gguf_kv *kv;
	int rc = find_typed(g, key, &kv);

	if (rc)
		return rc;
	if (kv->type != GGUF_BOOL && !is_unsigned(kv->type) &&
	    !is_signed(kv->type))
		return wrong_type(g, key, kv, "bool");
	*out = kv->v.u != 0;
	return 0;
}

int gguf_get_str(const gguf_file *g, const char *key, gguf_str *out)
{
	const gguf_kv *kv;
	int rc = find_typed(g, key, &kv);

	if (rc)
		return rc;
	if (kv->type != GGUF_STRING)
		return wrong_type(g, key, kv, "string");
	*out = kv->v.s;
	return 0;
}

int gguf_get_arr(const gguf_file *g, const char *key, uint32_t elem_type,
		 const gguf_kv **out)
{
	const gguf_kv *kv;
	int rc = find_typed(g, key, &kv);

	if (rc)
		return rc;
	if (kv->type != GGUF_ARRAY || kv->arr_type != elem_type)
		return qerr_fail(QERR_FORMAT, "%s: metadata key '%s' is not an "
				 "array of %s", g->path, key,
				 gguf_vtype_name(elem_type));
	*out = kv;
	return 0;
}

/* ---- writer ---------------------------------------------------------- */

typedef struct {
	uint8_t *p;
	size_t len, cap;
} wbuf;

typedef struct {
	char *name;
	uint32_t type, n_dims;
	uint64_t ne[4], nbytes, offset;
} wtensor;

struct gguf_writer {
	wbuf kv;          /* serialized metadata */
	uint64_t n_kv;
	wtensor *t;
	uint64_t n_t, cap_t;
	uint64_t data_size;
	int err;
};

static int wb_put(gguf_writer *w, const void *d, size_t n)
{
	wbuf *b = &w->kv;

	if (w->err)
		return w->err;
	if (n == 0)
		return 0; /* memcpy from NULL (an empty buffer) is undefined */
	if (b->len + n > b->cap) {
		size_t nc = b->cap ? b->cap : 4096;
		uint8_t *np;

		while (nc < b->len + n)
			nc *= 2;
		np = realloc(b->p, nc);
		if (!np)
			return w->err = qerr_fail(QERR_NOMEM, "gguf writer: out "
						  "of memory");
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
	return 0;
}

static int wb_u32(gguf_writer *w, uint32_t v) { return wb_put(w, &v, 4); }
static int wb_u64(gguf_writer *w, uint64_t v) { return wb_put(w, &v, 8); }

static int wb_str(gguf_writer *w, const char *s, uint64_t n)
{
	wb_u64(w, n);
	return wb_put(w, s, n);
}

static int wb_key(gguf_writer *w, const char *key, uint32_t type)
{
	/* tensors are laid out at GGUF_DEFAULT_ALIGNMENT (gguf_w_u32 checks
	 * the value): any other general.alignment would make a file the
	 * reader refuses */
	if (!w->err && type != GGUF_UINT32 &&
	    !strcmp(key, "general.alignment"))
		w->err = qerr_fail(QERR_UNSUPPORTED, "gguf writer: "
				   "general.alignment must be a u32");
	w->n_kv++;
	wb_str(w, key, strlen(key));
	return wb_u32(w, type);
}

int gguf_writer_new(gguf_writer **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : qerr_fail(QERR_NOMEM, "gguf writer: out of memory");
}

void gguf_writer_free(gguf_writer **w)
{
	if (!w || !*w)
		return;
	for (uint64_t i = 0; i < (*w)->n_t; i++)
		free((*w)->t[i].name);
	free((*w)->t);
	free((*w)->kv.p);
	free(*w);
	*w = NULL;
}

int gguf_w_u32(gguf_writer *w, const char *key, uint32_t v)
{
	if (!w->err && v != GGUF_DEFAULT_ALIGNMENT &&
	    !strcmp(key, "general.alignment"))
		w->err = qerr_fail(QERR_UNSUPPORTED, "gguf writer: "
				   "general.alignment %u (only %d is written)",
				   v, GGUF_DEFAULT_ALIGNMENT);
	wb_key(w, key, GGUF_UINT32);
	return wb_u32(w, v);
}

int gguf_w_i32(gguf_writer *w, const char *key, int32_t v)
{
	wb_key(w, key, GGUF_INT32);
	return wb_put(w, &v, 4);
}

int gguf_w_f32(gguf_writer *w, const char *key, float v)
{
	wb_key(w, key, GGUF_FLOAT32);
	return wb_put(w, &v, 4);
}

int gguf_w_bool(gguf_writer *w, const char *key, int v)
{
	uint8_t b = v != 0;

	wb_key(w, key, GGUF_BOOL);
	return wb_put(w, &b, 1);
}

int gguf_w_str(gguf_writer *w, const char *key, const char *v)
{
	wb_key(w, key, GGUF_STRING);
	return wb_str(w, v, strlen(v));
}

int gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type,
	       const void *data, uint64_t n)
{
	uint64_t es = vtype_size(elem_type);

	if (!es)
		return w->err = qerr_fail(QERR_ARG, "gguf writer: bad array "
					  "type %u for '%s'", elem_type, key);
	wb_key(w, key, GGUF_ARRAY);
	wb_u32(w, elem_type);
	wb_u64(w, n);
	return wb_put(w, data, n * es);
}

int gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *s,
		   const uint64_t *len, uint64_t n)
{
	wb_key(w, key, GGUF_ARRAY);
	wb_u32(w, GGUF_STRING);
	wb_u64(w, n);
	for (uint64_t i = 0; i < n && !w->err; i++)
		wb_str(w, s[i], len ? len[i] : strlen(s[i]));
	return w->err;
}

int gguf_w_kv(gguf_writer *w, const gguf_kv *kv)
{
	char *key = malloc(kv->key.len + 1);
	uint8_t b[8];
	uint64_t n;

	if (!key)
		return w->err = qerr_fail(QERR_NOMEM, "gguf writer: out of "
					  "memory");
	memcpy(key, kv->key.ptr, kv->key.len);
	key[kv->key.len] = 0;
	if (kv->type == GGUF_STRING) {
		wb_key(w, key, GGUF_STRING);
		wb_str(w, kv->v.s.ptr, kv->v.s.len);
	} else if (kv->type == GGUF_ARRAY) {
		wb_key(w, key, GGUF_ARRAY);
		wb_u32(w, kv->arr_type);
		wb_u64(w, kv->arr_n);
		if (kv->arr_type == GGUF_STRING)
			for (uint64_t i = 0; i < kv->arr_n && !w->err; i++)
				wb_str(w, kv->arr_str[i].ptr, kv->arr_str[i].len);
		else
			wb_put(w, kv->arr_data, kv->arr_n *
			       vtype_size(kv->arr_type));
	} else {
		/* scalars: the value's low bytes (little-endian) */
		n = vtype_size(kv->type);
		if (kv->type == GGUF_FLOAT32) {
			float f = (float)kv->v.f;
			memcpy(b, &f, 4);
		} else if (kv->type == GGUF_FLOAT64) {
			memcpy(b, &kv->v.f, 8);
		} else {
			uint64_t u = kv->v.u; /* v.i shares the bits */
			for (int i = 0; i < 8; i++)
				b[i] = (uint8_t)(u >> (8 * i));
		}
		if (kv->type == GGUF_UINT32)
			gguf_w_u32(w, key, (uint32_t)kv->v.u);
		else {
			wb_key(w, key, kv->type);
			wb_put(w, b, n);
		}
	}
	free(key);
	return w->err;
}

int gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type,
		  uint32_t n_dims, const uint64_t *ne)
{
	wtensor *t;
	uint64_t rows = 1, rb;

	if (w->err)
		return w->err;
	if (n_dims < 1 || n_dims > 4)
		return w->err = qerr_fail(QERR_ARG, "gguf writer: tensor '%s' "
					  "has %u dims", name, n_dims);
	rb = ggml_row_bytes(type, ne[0]);
	if (!rb)
		return w->err = qerr_fail(QERR_ARG, "gguf writer: tensor '%s' "
					  "type %s cannot hold rows of %llu",
					  name, ggml_type_name(type),
					  (unsigned long long)ne[0]);
	if (w->n_t == w->cap_t) {
		uint64_t nc = w->cap_t ? w->cap_t * 2 : 64;
		wtensor *nt = realloc(w->t, nc * sizeof(*nt));

		if (!nt)
			return w->err = qerr_fail(QERR_NOMEM, "gguf writer: out "
						  "of memory");
		w->t = nt;
		w->cap_t = nc;
	}
	t = &w->t[w->n_t];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	if (!t->name)
		return w->err = qerr_fail(QERR_NOMEM, "gguf writer: out of "
					  "memory");
	t->type = type;
	t->n_dims = n_dims;
	for (uint32_t d = 0; d < 4; d++) {
		t->ne[d] = d < n_dims ? ne[d] : 1;
		if (d)
			rows *= t->ne[d];
	}
	t->nbytes = rb * rows;
	t->offset = w->data_size;
	w->data_size += (t->nbytes + GGUF_DEFAULT_ALIGNMENT - 1) /
			GGUF_DEFAULT_ALIGNMENT * GGUF_DEFAULT_ALIGNMENT;
	w->n_t++;
	return 0;
}

static int write_all(FILE *f, const void *p, size_t n, const char *path)
{
	if (n && fwrite(p, 1, n, f) != n)
		return qerr_fail(QERR_IO, "%s: write failed: %s", path,
				 strerror(errno));
	return 0;
}

static int write_pad(FILE *f, uint64_t pos, const char *path)
{
	static const uint8_t zero[GGUF_DEFAULT_ALIGNMENT];
	uint64_t pad = (GGUF_DEFAULT_ALIGNMENT - pos % GGUF_DEFAULT_ALIGNMENT) %
		       GGUF_DEFAULT_ALIGNMENT;

	return write_all(f, zero, pad, path);
}

int gguf_writer_save(gguf_writer *w, const char *path, gguf_fill_fn fill,
		     void *ctx)
{
	wbuf hdr = {0};
	gguf_writer hw = {0};
	char *tmp = NULL;
	FILE *f = NULL;
	void *buf = NULL;
	uint64_t pos;
	int rc;

	if (w->err)
		return w->err;
	/* header + tensor infos, serialized with the same buffer helpers */
	hw.kv = hdr;
	wb_put(&hw, GGUF_MAGIC, 4);
	wb_u32(&hw, GGUF_VERSION);
	wb_u64(&hw, w->n_t);
	wb_u64(&hw, w->n_kv);
	wb_put(&hw, w->kv.p, w->kv.len);
	for (uint64_t i = 0; i < w->n_t; i++) {
		wtensor *t = &w->t[i];

		wb_str(&hw, t->name, strlen(t->name));
		wb_u32(&hw, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims; d++)
			wb_u64(&hw, t->ne[d]);
		wb_u32(&hw, t->type);
		wb_u64(&hw, t->offset);
	}
	if ((rc = hw.err))
		goto out;
	{
		/* a directory given for the file: said as such (the rename
		 * at the end had failed with "Is a directory" or "Device or
		 * resource busy") */
		struct stat st;

		if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
			rc = qerr_fail(QERR_ARG, "%s: is a directory (give the "
				       "file to write)", path);
			goto out;
		}
	}
	if (asprintf(&tmp, "%s.tmp", path) < 0) {
		tmp = NULL;
		rc = qerr_fail(QERR_NOMEM, "gguf writer: out of memory");
		goto out;
	}
	f = fopen(tmp, "wb");
	if (!f) {
		rc = qerr_fail(QERR_IO, "%s: cannot create: %s", tmp,
			       strerror(errno));
		goto out;
	}
	if ((rc = write_all(f, hw.kv.p, hw.kv.len, tmp)))
		goto out;
	pos = hw.kv.len;
	if (w->n_t && (rc = write_pad(f, pos, tmp)))
		goto out;
	for (uint64_t i = 0; i < w->n_t; i++) {
		wtensor *t = &w->t[i];

		free(buf);
		buf = malloc(t->nbytes);
		if (!buf) {
			rc = qerr_fail(QERR_NOMEM, "gguf writer: out of memory "
				       "for tensor '%s'", t->name);
			goto out;
		}
		if ((rc = fill(ctx, (int)i, buf, t->nbytes)))
			goto out;
		if ((rc = write_all(f, buf, t->nbytes, tmp)))
			goto out;
		if (i + 1 < w->n_t && (rc = write_pad(f, t->nbytes, tmp)))
			goto out;
	}
	if (fflush(f) || fsync(fileno(f))) {
		rc = qerr_fail(QERR_IO, "%s: write failed: %s", tmp,
			       strerror(errno));
		goto out;
	}
	if (fclose(f)) {
		f = NULL;
		rc = qerr_fail(QERR_IO, "%s: close failed: %s", tmp,
			       strerror(errno));
		goto out;
	}
	f = NULL;
	if (rename(tmp, path)) {
		rc = qerr_fail(QERR_IO, "%s: rename failed: %s", path,
			       strerror(errno));
		goto out;
	}
out:
	if (f) {
		fclose(f);
		unlink(tmp);
	} else if (rc && tmp) {
		unlink(tmp);
	}
	free(buf);
	free(tmp);
	free(hw.kv.p);
	return rc;
}

/* Identifies the file's contents cheaply: its size, all metadata, and
 * every tensor's name and first 4 KiB. */
uint64_t gguf_fingerprint(const gguf_file *g)
{
	uint64_t size = gguf_file_size(g), h = FNV_BASIS;

	h = fnv1a(h, (const uint8_t *)&size, sizeof(size));
	for (uint64_t i = 0; i < gguf_n_kv(g); i++) {
		const gguf_kv *kv = gguf_kv_at(g, i);

		h = fnv1a(h, (const uint8_t *)kv->key.ptr, kv->key.len);
		if (kv->type == GGUF_STRING)
			h = fnv1a(h, (const uint8_t *)kv->v.s.ptr, kv->v.s.len);
		else if (kv->type != GGUF_ARRAY)
			h = fnv1a(h, (const uint8_t *)&kv->v.u,
				  sizeof(kv->v.u));
		else
			h = fnv1a(h, (const uint8_t *)&kv->arr_n,
				  sizeof(kv->arr_n));
	}
	for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
		const gguf_tensor *t = gguf_tensor_at(g, i);
		uint64_t head = t->nbytes < 4096 ? t->nbytes : 4096;

		h = fnv1a(h, (const uint8_t *)t->name.ptr, t->name.len);
		if (t->data)
			h = fnv1a(h, t->data, head);
	}
	return h;
}

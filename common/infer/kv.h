/*
 * kv — the paged KV cache: a pool of fixed-size blocks in one shared
 * memory region, and per-sequence page tables that share blocks by
 * reference count (prefix sharing for self-consistency sampling).
 *
 * implements: pool (alloc/free of blocks, O(1)), refcounted sharing,
 *             copy-on-write of a shared, partly filled tail block,
 *             read-only attachment of another process's pool.
 *
 * Region layout (native byte order; readers validate every field):
 *   1. kv_shm_header at offset 0: shm_header {magic KV_MAGIC, version
 *      KV_VERSION, size = whole region}, then the pool parameters, the
 *      block stride, the offset of block 0, the creator (shm_owner) and
 *      the window slots (item 4).
 *   2. Blocks at data_offset (4096) + id * block_stride, id in
 *      [0, n_blocks). block_stride = block_bytes rounded up to 64.
 *   3. Inside a block, for each layer l in [0, n_layers):
 *        K rows [block_tokens] then V rows [block_tokens], each row
 *        kv_row_bytes(dtype, kv_dim) bytes of kv_dim elements:
 *        KV_F32: float; KV_F16: IEEE half bits; KV_Q8_0: kv_dim / 32
 *        blocks of ggml's block_q8_0 (f16 scale d, 32 int8 q; 34 bytes),
 *        element i of a block = d * q[i] (exact in f32).
 *      A KV_Q8_0 row is written by kv_row_put: ggml's reference rounding
 *      (quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) with the
 *      unrounded d, then d stored as f16), so a head of head_dim elements
 *      is whole blocks only when head_dim % 32 == 0 (the engine checks).
 *      Everything that sizes or copies rows or blocks (shm regions, COW,
 *      prefix export/import, cross-host transfer) uses kv_row_bytes.
 *   4. Pools with sliding-window layers (win_pattern > 0: layer l is
 *      windowed iff l % win_pattern != win_pattern - 1, the model's rule)
 *      split each block by layer class: area 2 holds only the full
 *      layers' K/V (in layer order), at block_stride; then at win_offset
 *      = data_offset + n_blocks * block_stride, n_blocks window slots of
 *      the windowed layers' K/V (same per-layer shape) at win_stride
 *      (rounded to 64); then at wmap_offset = win_offset + win_blocks *
 *      win_stride, uint32 wmap[n_blocks]: block id -> its window slot
 *      (KV_NO_BLOCK once released). A pool may have fewer window slots
 *      (win_blocks) than blocks: a block takes a slot when allocated,
 *      and a reserve needing more slots than are free is QERR_FULL. win_pattern 0 (or a pattern leaving
 *      no layer windowed) is the layout of 2-3 above, byte for byte.
 * Only ids and offsets live in the region. Refcounts, the free list and
 * the page tables live in the owner's process memory: other processes map
 * the region read-only (kv_pool_attach_ro) and only read rows.
 *
 * Sequences. A kv_seq is a page table: token t lives in blocks[t / B] at
 * row t % B (B = block_tokens). Its first n_tokens rows are committed
 * (written and immutable while shared); rows after that, up to
 * n_blocks * B, are reserved by kv_seq_reserve and belong to this sequence
 * alone. The write protocol for n new tokens is
 *     kv_seq_reserve(p, s, n);   write rows n_tokens .. n_tokens+n-1;
 *     kv_seq_commit(s, n);
 * kv_seq_fork shares the committed blocks only, so blocks past the last
 * committed one are always private (refcount 1). A block holding committed
 * rows may be shared; its rows >= a holder's n_tokens are scratch for
 * whoever holds the last reference, and kv_seq_reserve gives each writer a
 * private tail ("make unique": copy when refcount > 1, else write in
 * place). Full blocks are never copied. Reserve, write and commit in one
 * step: a copy-on-write copies committed rows only, so a fork of s between
 * its write and its commit would lose s's uncommitted rows.
 *
 * Sliding windows. A block's window part (its windowed layers' rows) has
 * its own reference count: every holder of a block sees its window part
 * until it calls kv_seq_drop_window, which releases the window parts of
 * the holder's blocks lying wholly before its window (a window slot
 * returns to its free list when no holder sees it), so a long chain's
 * windowed layers hold about window + B rows. Drops are a prefix of the
 * table: blocks below s->w_lo are the ones s no longer sees. A fork shares
 * only what src still sees; kv_seq_fork_prefix refuses a src that dropped
 * anything (a shorter prefix could need rows it released). The engine
 * drops only samples' sequences: roots, cached prompts and the rows
 * exported to other hosts keep every layer.
 *
 * Threads. A pool and its sequences are used by one thread (the decode
 * loop) — no locking. Several threads may read rows through kv_k/kv_v
 * concurrently as long as nobody calls a mutating function meanwhile.
 *
 * Ownership. kv_pool_new/kv_pool_attach_ro return a pool owned by the
 * caller, released with kv_pool_free (which NULLs the pointer). A kv_seq
 * is an embedded value (kv_seq_init/kv_seq_free); its blocks belong to the
 * pool it was used with and must be freed before the pool.
 */
#ifndef QUORUM_KV_H
#define QUORUM_KV_H

#include "infer/shm.h"

#include <stddef.h>
#include <stdint.h>

/* Values are also the wire's (Register.kv_dtype) and cfg_dtype's. */
enum kv_dtype { KV_F32 = 0, KV_F16 = 1, KV_Q8_0 = 2 };
#define KV_Q8_BLOCK 32 /* elements per KV_Q8_0 block */

#define KV_MAGIC 0x504b5651u /* "QVKP" little-endian */
#define KV_VERSION 2u /* 2: owner at 64; win_pattern at 36 and
			   * win_blocks at 80 are 0 in pools without windows
			   * (an older reader required 0 at 36, so it refuses
			   * a windowed pool) */
#define KV_DATA_OFFSET 4096u
#define KV_BLOCK_ALIGN 64u
#define KV_DEFAULT_BLOCK_TOKENS 16
#define KV_NO_BLOCK UINT32_MAX /* never a valid block id */

/*
 * Linked pools. A page-table entry is a block reference: the low 24 bits
 * are a block id, the high 8 bits a slot. Slot 0 is the pool itself; slot
 * k >= 1 is a read-only pool linked with kv_pool_link() (another worker's
 * pool on this host, mapped PROT_READ). kv_k/kv_v resolve references, so
 * the forward pass reads a fork's shared prefix straight from the pool
 * that holds it. Linked blocks are never refcounted or freed here (their
 * owner keeps them alive until released); appending to a sequence whose
 * partly-filled tail is linked copies that one block into this pool
 * (copy-on-write), full linked blocks are never copied.
 */
#define KV_MAX_SLOTS 256
#define KV_BLOCK_MASK 0x00ffffffu
/* The most blocks one pool holds (16,777,216: a reference's 24 bits of
 * block id); the config's kv.blocks is held to it. */
#define KV_MAX_BLOCKS (KV_BLOCK_MASK + 1u)
#define KV_REF(slot, block) (((uint32_t)(slot) << 24) | (uint32_t)(block))
#define KV_REF_SLOT(ref) ((uint32_t)(ref) >> 24)
#define KV_REF_BLOCK(ref) ((uint32_t)(ref) & KV_BLOCK_MASK)

typedef struct {
	int n_layers;
	int kv_dim;       /* n_kv_heads * head_dim */
	int block_tokens; /* B, tokens per block; default 16 */
	uint32_t n_blocks;
	int dtype; /* enum kv_dtype */
	int win_pattern; /* 0: no windowed layers; else layer l is windowed
			  * iff l % win_pattern != win_pattern - 1 */
	uint32_t win_blocks; /* window slots (win_pattern > 0): 0 means
			      * n_blocks, else 1..n_blocks; fewer slots than
			      * blocks is where released windows save memory */
} kv_params;

/* The region's header (offsets fixed: readers in other processes and
 * tools rely on them). */
typedef struct {
	shm_header h;          /*  0: magic, version, size */
	uint32_t n_layers;     /* 16 */
	uint32_t kv_dim;       /* 20 */
	uint32_t block_tokens; /* 24 */
	uint32_t n_blocks;     /* 28 */
	uint32_t dtype;        /* 32 */
	uint32_t win_pattern;  /* 36: kv_params.win_pattern */
	uint64_t block_bytes;  /* 40: payload of one block (its full
				* layers' part when split by windows) */
	uint64_t block_stride; /* 48: distance between blocks */
	uint64_t data_offset;  /* 56: offset of block 0 */
	shm_owner owner;       /* 64: creator (pid, start time); not checked
				* by readers, used to find stale regions */
	uint32_t win_blocks;   /* 80: window slots (0 without windows) */
	uint32_t reserved;     /* 84: 0 */
} kv_shm_header;

typedef struct {
	uint64_t allocs;    /* blocks taken from the free list, COW included */
	uint64_t frees;     /* blocks returned to the free list */
	uint64_t cow;       /* blocks copied by copy-on-write */
	uint64_t cow_bytes; /* bytes memcpy'd by copy-on-write */
	uint64_t forks;     /* kv_seq_fork calls that succeeded */
	uint32_t in_use;    /* blocks with refcount > 0 now */
	uint32_t peak;      /* max of in_use over the pool's life */
	uint32_t win_in_use; /* window slots held now (0 without windows) */
	uint64_t win_drops; /* window-part references kv_seq_drop_window
			     * dropped (a slot frees at its last) */
	uint64_t held_bytes; /* KV payload held now: in_use full parts +
			      * win_in_use window parts (without windows:
			      * in_use whole blocks) */
} kv_stats;

typedef struct kv_pool kv_pool;

/* Bytes of one K (or V) row of kv_dim elements of dtype: the one size
 * every sizing and copy of KV rows uses. 0 for an unknown dtype, kv_dim
 * < 1, or a KV_Q8_0 kv_dim that is not a multiple of KV_Q8_BLOCK. */
size_t kv_row_bytes(int dtype, int kv_dim);
/* The ggml type of a dtype's elements (GGML_TYPE_F32/F16/Q8_0), the kt of
 * kern_att_scores / kern_att_values; UINT32_MAX for an unknown dtype. */
uint32_t kv_ggml_type(int dtype);
/* "f32", "f16", "q8_0" ("?" for another value), and back: -1 for a name
 * that is none of them. */
const char *kv_dtype_name(int dtype);
int kv_dtype_from_name(const char *name);
/* Encodes n (kv_row_bytes-compatible) floats into a row of dtype: f32
 * copied, f16 rounded to nearest even, q8_0 as in the layout above. */
void kv_row_put(int dtype, const float *x, void *row, int n);

/* Checks params and computes the region size (header + blocks, + window
 * slots and wmap with windows).
 * QERR_ARG: NULL, unknown dtype, a KV_Q8_0 kv_dim that is not a multiple
 * of 32. QERR_RANGE: a dimension < 1, win_pattern < 0, n_blocks 0
 * or over 2^24 (block references carry 24 bits), or a size that overflows
 * uint64/size_t/off_t. */
int kv_params_check(const kv_params *p, uint64_t *region_bytes);

/* Creates a pool: one memfd region (see shm_create) holding all
 * n_blocks blocks, all free. Block contents start zeroed.
 * Errors: as kv_params_check, QERR_NOMEM, QERR_IO. */
int kv_pool_new(const kv_params *p, kv_pool **out);

/* Maps another pool's region read-only by its fd (borrowed; the pool
 * keeps a dup). The header is validated against the fd's size and
 * recomputed from its params: QERR_FORMAT if anything disagrees,
 * QERR_UNSUPPORTED for another version. kv_k/kv_v/kv_pool_params work;
 * every mutating call returns QERR_ARG (kv_seq_free only releases the
 * table). Rows are those the owner writes, at the time they are read. */
int kv_pool_attach_ro(int fd, kv_pool **out);

void kv_pool_free(kv_pool **p);

/* As kv_pool_new over a POSIX shm object `name` ("/..."; created with
 * O_EXCL, mode 0600) so other processes can map it by name. kv_pool_free
 * unlinks the name. */
int kv_pool_new_named(const kv_params *p, const char *name, kv_pool **out);
/* Maps a named pool read-only (validated like kv_pool_attach_ro). */
int kv_pool_attach_name_ro(const char *name, kv_pool **out);
/* The creator recorded in the first len bytes of a region (a stale-region
 * sweep reads them without mapping, see shm_sweep_stale): QERR_OK with
 * *out set for a KV_MAGIC region of this KV_VERSION; QERR_FORMAT for a
 * short or foreign header, QERR_UNSUPPORTED for another version (whose
 * owner is unknown). */
int kv_region_owner(const void *head, size_t len, shm_owner *out);
/* An shm_stale_fn: 1 when head is a KV region of this version whose
 * creator no longer runs (shm_owner_alive), else 0. name, arg unused. */
int kv_region_stale(const char *name, const void *head, size_t len,
		    void *arg);
/* The shm name of a named pool, else NULL. */
const char *kv_pool_name(const kv_pool *p);

/* Links a read-only pool (borrowed; same layers, kv_dim, block size and
 * dtype) into slot 1..255 of p. QERR_ARG on a mismatch. */
int kv_pool_link(kv_pool *p, int slot, kv_pool *foreign);
void kv_pool_unlink(kv_pool *p, int slot);


const kv_params *kv_pool_params(const kv_pool *p);
int kv_pool_readonly(const kv_pool *p);
/* Blocks on the free list (0 for a read-only pool). */
uint32_t kv_pool_free_blocks(const kv_pool *p);
/* Window slots on their free list (0 without windows or read-only), and
 * the pool's slot count (0 without windows). */
uint32_t kv_pool_free_win_slots(const kv_pool *p);
uint32_t kv_pool_win_slots(const kv_pool *p);
/* References to block (0 if free, out of range or read-only pool). */
uint32_t kv_block_refcount(const kv_pool *p, uint32_t block);
void kv_pool_stats(const kv_pool *p, kv_stats *out);

/* The region's fd (valid while the pool lives; O_CLOEXEC) and size, to
 * hand to another process (SCM_RIGHTS, /proc/PID/fd/N) that calls
 * kv_pool_attach_ro. The fd is sealed: it can only be mapped read-only. */
int kv_pool_fd(const kv_pool *p);
uint64_t kv_pool_bytes(const kv_pool *p);

/* Start of layer's K (or V) rows [block_tokens][kv_dim] in block.
 * block < n_blocks and 0 <= layer < n_layers (asserted). Writable only for
 * the owner, and only for rows the caller has reserved. */
void *kv_k(const kv_pool *p, uint32_t block, int layer);
void *kv_v(const kv_pool *p, uint32_t block, int layer);

typedef struct {
	uint32_t *blocks; /* [cap]; first n_blocks are block ids */
	uint32_t n_blocks, cap;
	uint32_t n_tokens; /* committed tokens */
	uint32_t w_lo;     /* blocks [0, w_lo): window parts released by
			    * this sequence (kv_seq_drop_window) */
} kv_seq;

/* Row of token t (t < n_blocks * B) of sequence s in layer. */
void *kv_seq_k_row(const kv_pool *p, const kv_seq *s, int layer, uint32_t t);
void *kv_seq_v_row(const kv_pool *p, const kv_seq *s, int layer, uint32_t t);

/* Empty sequence, no allocation. */
void kv_seq_init(kv_seq *s);

/* dst := a new sequence sharing src's committed blocks (refcount + 1
 * each); n_tokens copied, no KV bytes copied, O(blocks). dst is
 * overwritten: it must hold no blocks (initialized or freed). src's
 * reserved, uncommitted blocks are not shared.
 * Errors: QERR_ARG (read-only pool, dst == src, NULL), QERR_NOMEM; dst is
 * left empty and refcounts unchanged on error. */
int kv_seq_fork(kv_pool *p, const kv_seq *src, kv_seq *dst);

/* As kv_seq_fork, sharing only src's first n_tokens (<= its committed
 * tokens; QERR_RANGE otherwise) committed rows: the blocks holding them
 * (refcount + 1 each); dst->n_tokens = n_tokens. When n_tokens ends
 * mid-block, that block is shared and its rows from n_tokens on are
 * src's: dst's first reserve copies the block (copy-on-write), so dst
 * never sees them. A prompt sharing a cached one's prefix starts so.
 * QERR_ARG when n_tokens < src's and src dropped window parts. */
int kv_seq_fork_prefix(kv_pool *p, const kv_seq *src, uint32_t n_tokens,
		       kv_seq *dst);

/* Makes rows n_tokens .. n_tokens+n_new-1 writable by s alone: if n_new > 0
 * and the tail block (committed rows n_tokens % B > 0) is shared, copies its
 * committed rows of every layer into a fresh block and drops the shared
 * reference; then appends fresh blocks until n_blocks*B >= n_tokens+n_new.
 * Already-reserved rows count: reserving twice does not allocate twice.
 * Reserved rows hold unspecified data until written.
 * All-or-nothing: QERR_FULL ("KV pool exhausted: need X blocks, Y free",
 * or "... X window slots, Y free"),
 * QERR_NOMEM, QERR_RANGE (token count overflows) or QERR_ARG (read-only
 * pool) leave s and the pool exactly as they were. */
int kv_seq_reserve(kv_pool *p, kv_seq *s, uint32_t n_new);

/* Releases s's view of the window parts of its blocks that lie wholly
 * before the window of its next row: a row at position n_tokens sees
 * n_tokens - window + 1 .. n_tokens on windowed layers, so block i goes
 * when (i + 1) * B <= n_tokens + 1 - window. A window part returns to the
 * free list when no holder sees it; the blocks' full parts stay. Rows of
 * windowed layers in released blocks must not be read through s again
 * (the forward pass reads only the window). Returns the window-part
 * references s dropped (0: a pool without windows, window < 1,
 * read-only). */
uint32_t kv_seq_drop_window(kv_pool *p, kv_seq *s, int window);
/* 1 when layer is one of p's windowed layers. */
int kv_layer_windowed(const kv_pool *p, int layer);

/* Rows s may hold without another reserve: n_blocks * B. */
uint32_t kv_seq_capacity(const kv_pool *p, const kv_seq *s);

/* n_tokens += n after the caller wrote those rows; n must not exceed the
 * reserved rows, n_tokens + n <= kv_seq_capacity (not checked here: the
 * sequence does not know B). */
void kv_seq_commit(kv_seq *s, uint32_t n);

/* Drops s's references (a block returns to the free list at 0), frees the
 * table, leaves s empty. */
void kv_seq_free(kv_pool *p, kv_seq *s);
/* Builds s as a view of n_blocks blocks (ids in the pool at `slot`) holding
 * n_tokens committed tokens: e.g. another worker's root prefix. A view of
 * a linked pool owns only its table; fork it, never append to it. */
int kv_seq_view(kv_seq *s, int slot, const uint32_t *blocks,
		uint32_t n_blocks, uint32_t n_tokens, uint32_t block_tokens);

#endif

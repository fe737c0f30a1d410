/*
 * pfx — the longest cached prefix of a prompt, a block of tokens at a
 * time: chained block hashes, every candidate verified against the tokens.
 *
 * implements: an index of token sequences (prompts whose KV is cached,
 * each named by an opaque owner pointer) answering "which owners share
 * the most full blocks with this prompt". A sequence of n tokens is
 * indexed by its floor(n / B) full blocks (B = block_tokens): block d
 * gets the chain hash h_d = mix(h_{d-1}, tokens of block d), so equal
 * hashes at depth d mean (up to a collision) equal tokens 0..(d+1)B-1.
 * A hash is never trusted alone: a candidate counts only when its tokens
 * equal the prompt's over the whole shared range. The partial last block
 * of a sequence is not indexed: sharing is block-aligned, as the KV
 * cache's blocks are.
 *
 * Ownership: the index borrows each owner's tokens (they must stay valid
 * and unchanged until pfx_remove). Single-threaded.
 */
#ifndef QUORUM_PFX_H
#define QUORUM_PFX_H

#include <stddef.h>
#include <stdint.h>

typedef struct pfx pfx;

/* block_tokens >= 1. QERR_ARG, QERR_NOMEM. */
int pfx_new(uint32_t block_tokens, pfx **out);
void pfx_free(pfx **p);

/* Indexes owner's full blocks (tokens borrowed). An owner is added once;
 * a sequence shorter than one block adds nothing (QERR_OK). QERR_NOMEM
 * leaves the index as it was. */
int pfx_add(pfx *p, void *owner, const int32_t *tokens, size_t n);
/* Drops owner's blocks (tokens and n as given to pfx_add). */
void pfx_remove(pfx *p, void *owner, const int32_t *tokens, size_t n);
/* Blocks indexed (all owners). */
size_t pfx_blocks(const pfx *p);

/* Called for each owner whose tokens equal the prompt's over
 * shared = (d + 1) * B tokens, depth d = 0, 1, ... in increasing order
 * (an owner is visited once per depth it shares). Returns nonzero to
 * accept it: the walk goes one block deeper only while some owner was
 * accepted at the current depth. */
typedef int (*pfx_visit_fn)(void *arg, void *owner, size_t shared);

/* Walks the owners sharing full blocks with tokens[0..n) (only blocks
 * that are full in both). Returns the longest shared length (a multiple
 * of B) of an accepted owner, 0 when none. visit NULL accepts all; *best
 * (may be NULL) gets the first owner accepted at that depth. */
size_t pfx_longest(const pfx *p, const int32_t *tokens, size_t n,
		   pfx_visit_fn visit, void *arg, void **best);

/* Test hook: every chain hash is ANDed with mask (0: all blocks of a
 * depth collide; UINT64_MAX: normal). Process-wide. */
void pfx_test_hash_mask(uint64_t mask);

#endif

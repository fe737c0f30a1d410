/*
 * hugemem — anonymous memory for a model's large read-mostly arrays (the
 * tensors' copy, the integer kernels' packed weights): 2 MiB aligned, with
 * transparent huge pages asked for (MADV_HUGEPAGE; a hint: without them
 * it is ordinary memory, the same bytes).
 *
 * Why: a decode round reads every weight once, so with 4 KiB pages it
 * takes a TLB miss every 4 KiB of the stream, and the tiles' requests for
 * the next block wait on page walks. The 0.5b's decode on an AMD EPYC
 * Zen 5, packed weights on huge pages against 4 KiB ones, three rounds
 * alternating: N = 8 329-379 against 295-305 tok/s, N = 32 522-627
 * against 469-517; the 1.5b's were within the machine's noise.
 */
#ifndef QUORUM_HUGEMEM_H
#define QUORUM_HUGEMEM_H

#include <stddef.h>

/* n bytes (n > 0), zero-filled, on a 2 MiB boundary; NULL when the
 * system has no memory for them. Give them back with hugemem_free(p, n). */
void *hugemem_alloc(size_t n);
void hugemem_free(void *p, size_t n);
/* The bytes such an allocation of n spans: whole huge pages. */
size_t hugemem_span(size_t n);

#endif

/*
 * hugemem — anonymous memory for a model's large read-mostly arrays (the
 * tensors' copy, the integer kernels' packed weights): 2 MiB aligned, with
 * transparent huge pages asked for (MADV_HUGEPAGE; a hint: without them
 * it is ordinary memory, the same bytes).
 *
 * Why: a decode round reads every weight once, so with 4 KiB pages it
 * takes a TLB miss every 4 KiB of the stream, and the tiles' requests for
 * the next block can wait on page walks. On an AMD EPYC Zen 5 the gain
 * did not rise above that machine's noise: the 0.5b's decode with the
 * same binary, transparent huge pages off against on (madvise), ten
 * rounds alternating, ran N = 8 at 299-398 against 304-428 tok/s and
 * N = 32 at 413-630 against 445-624. It is kept as one home for the
 * tensors' copy and the packed copy alike.
 */
#ifndef QUORUM_HUGEMEM_H
#define QUORUM_HUGEMEM_H

#include <stddef.h>

/* n bytes (n > 0), zero-filled, starting on a 2 MiB boundary; NULL when
 * the system has no memory for them. The mapping ends at the page after
 * n, not at the next huge page: its whole 2 MiB stretches take huge
 * pages and its tail (under 2 MiB) ordinary ones, so a small matrix
 * costs no more memory than before (rounded up to 2 MiB each, the packed
 * matrices had added 243 MB to the 0.5b's process). Give them back with
 * hugemem_free(p, n). */
void *hugemem_alloc(size_t n);
void hugemem_free(void *p, size_t n);
/* The bytes such an allocation of n spans: whole pages. */
size_t hugemem_span(size_t n);

#endif

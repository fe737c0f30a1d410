/*
 * fnv — FNV-1a, 64-bit: the one hash of bytes the project uses where a
 * fast, stable checksum is wanted (a model's fingerprint, the tokenizer's
 * tables, a request's bytes, streamed text). Not a defence against a peer
 * forging collisions.
 */
#ifndef QUORUM_FNV_H
#define QUORUM_FNV_H

#include <stddef.h>
#include <stdint.h>

#define FNV_BASIS 0xcbf29ce484222325ull

/* h after n more bytes of p (start from FNV_BASIS). */
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

#endif

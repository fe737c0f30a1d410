/*
 * poolname — the names of cluster workers' KV pools (POSIX shared memory),
 * the one contract between a worker, which names its pool, and the
 * coordinator and the workers of its host, which check a name before they
 * trust or map it:  "/quorum-<cluster>@<id>@<12 lowercase hex digits>".
 * '@' occurs neither in cluster names ([A-Za-z0-9_-]) nor in worker ids
 * ([A-Za-z0-9_.-]), so (cluster, id) pairs never share a prefix.
 *
 * Callers: worker/ (names its pool, sweeps stale ones), coordinator/
 * (checks a registering worker's pool name), tests.
 */
#ifndef QUORUM_POOLNAME_H
#define QUORUM_POOLNAME_H

#include <stddef.h>

#define POOLNAME_SEP '@'
#define POOLNAME_RND_BYTES 6
/* Writes the name of id's pool with random suffix rnd; QERR_RANGE when it
 * does not fit cap. */
int poolname_make(char *buf, size_t cap, const char *cluster,
		  const char *id, const unsigned char *rnd);
/* "/quorum-<cluster>@" (id NULL) or "/quorum-<cluster>@<id>@"; QERR_RANGE
 * when it does not fit. */
int poolname_prefix(char *buf, size_t cap, const char *cluster,
		    const char *id);
/* 1 when name is exactly a pool name of cluster (of worker id, unless
 * id is NULL), else 0. */
int poolname_ok(const char *name, const char *cluster, const char *id);

#endif

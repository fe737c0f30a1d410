/*
 * shm — the OS seam for shared memory regions: the only module that calls
 * memfd_create, shm_open, mmap and friends.
 *
 * implements: anonymous writable regions over a memfd (owner side),
 *             named POSIX shm regions (owner side), read-only attachment
 *             by fd or by name with header validation (reader side).
 *
 * Every region starts with a shm_header (magic, version, total size);
 * the module that owns the region defines what follows it. Inside a region
 * there are only offsets and ids, never pointers: each process maps it at
 * its own address.
 *
 * Owner side. shm_create() makes a memfd (MFD_CLOEXEC), reserves the whole
 * size with posix_fallocate (so that lack of memory is reported here, as
 * QERR_NOMEM, instead of a SIGBUS on first touch), maps it MAP_SHARED
 * read-write, writes the shm_header, and then seals the memfd against
 * shrinking and growing (readers can trust st_size for the region's life)
 * and against new writable mappings (F_SEAL_FUTURE_WRITE: whoever gets the
 * fd can only map it read-only; the owner's mapping stays writable).
 * shm_create_named() does the same over shm_open(O_CREAT|O_EXCL); POSIX shm
 * objects cannot be sealed, so there the owner must simply not truncate.
 *
 * Reader side. shm_map_fd_ro()/shm_map_name_ro() check st_size and read the
 * header with pread before any page is touched (a short or foreign file is
 * QERR_FORMAT, never SIGBUS), then map header.size bytes PROT_READ,
 * MAP_SHARED: the reader sees the owner's later writes.
 *
 * A shm_region is a plain value owned by its holder; release it with
 * shm_unmap(), which does nothing on a region that is not mapped (all
 * zero, failed create/map, or already unmapped).
 */
#ifndef QUORUM_SHM_H
#define QUORUM_SHM_H

#include <stdint.h>

/* First bytes of every region; native byte order (regions never leave the
 * host). size is the whole region, header included. */
typedef struct {
	uint32_t magic;
	uint32_t version;
	uint64_t size;
} shm_header;

typedef struct {
	void *base;    /* mapping of the whole region; NULL when unmapped */
	uint64_t size; /* bytes mapped (== header size) */
	int fd;        /* owned descriptor (O_CLOEXEC), -1 when none */
	int writable;  /* 1: PROT_READ|PROT_WRITE owner map, 0: PROT_READ */
} shm_region;

/* Creates an anonymous region of size bytes (>= sizeof(shm_header)) over a
 * memfd called tag (debug name, shown in /proc/PID/fd), writes its header
 * and maps it read-write. The rest of the region is zero.
 * Errors: QERR_ARG (size too small/too big for this platform, NULL out),
 * QERR_NOMEM (not enough memory to back the region), QERR_IO. On error
 * *out is zeroed (fd -1). */
int shm_create(const char *tag, uint32_t magic, uint32_t version,
	       uint64_t size, shm_region *out);

/* As shm_create over a new POSIX shm object name ("/x", must not exist,
 * mode 0600). The caller removes the name with shm_unlink_name(). */
int shm_create_named(const char *name, uint32_t magic, uint32_t version,
		     uint64_t size, shm_region *out);

/* Removes a POSIX shm name (mappings stay valid). QERR_IO on failure. */
int shm_unlink_name(const char *name);

/* Maps an existing region read-only from fd (borrowed: the region holds
 * its own dup). The header must carry magic; a different version gives
 * QERR_UNSUPPORTED; a file shorter than its header says, or a header size
 * other than expect_size (when expect_size != 0), gives QERR_FORMAT. */
int shm_map_fd_ro(int fd, uint32_t magic, uint32_t version,
		  uint64_t expect_size, shm_region *out);

/* As shm_map_fd_ro for a POSIX shm name (opened O_RDONLY). */
int shm_map_name_ro(const char *name, uint32_t magic, uint32_t version,
		    uint64_t expect_size, shm_region *out);

/* Unmaps and closes; leaves *r zeroed with fd -1. */
void shm_unmap(shm_region *r);

#endif

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

#include <stddef.h>
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

/* As shm_create over a new POSIX shm object name ("/x", must not exist:
 * O_CREAT|O_EXCL; mode 0600 whatever the umask). The caller removes the
 * name with shm_unlink_name(). */
int shm_create_named(const char *name, uint32_t magic, uint32_t version,
		     uint64_t size, shm_region *out);

/* MemAvailable of /proc/meminfo in bytes: what the machine can give
 * without swapping or killing; 0 if unknown. */
uint64_t shm_mem_available(void);

/* The one rule on a region's size against memory: QERR_OK when size bytes
 * fit in avail (avail 0: unknown, nothing refused), else QERR_NOMEM with a
 * detail naming what, the bytes needed and those available. shm_create
 * and shm_create_named apply it with shm_mem_available() before reserving
 * anything; callers that know why a region is that large (the KV pool's
 * blocks, a request's samples) apply it first for a clearer message. */
int shm_room(const char *what, uint64_t size, uint64_t avail);

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

/*
 * Owners and stale regions. A named region outlives a creator killed
 * before it could unlink the name (SIGKILL, a crash). The owning module
 * records a shm_owner in its header so that a later process can tell
 * whether the creator still runs: the pid alone is not enough (pids are
 * reused), so the process's start time (clock ticks after boot,
 * /proc/PID/stat field 22) goes with it. /dev/shm does not survive a
 * reboot, so (pid, start_time) names one process for a region's life.
 */
typedef struct {
	uint32_t pid;        /* 0: unknown owner (never stale) */
	uint32_t reserved;   /* 0 */
	uint64_t start_time; /* of pid, in clock ticks after boot */
} shm_owner;

/* This process as an owner. QERR_IO if /proc/self/stat is unreadable. */
int shm_owner_self(shm_owner *out);

/* 1 while the process o names runs (same pid, same start time, not a
 * zombie), else 0. An owner that cannot be checked (pid 0, /proc hidden)
 * counts as running: callers only ever remove what is provably dead. */
int shm_owner_alive(const shm_owner *o);

/* Decides about one candidate of shm_sweep_stale: name ("/..."), the
 * first head_len bytes of the region (its magic already checked). Returns
 * 1 to unlink the name, 0 to leave it. */
typedef int (*shm_stale_fn)(const char *name, const void *head,
			    size_t head_len, void *arg);

/* Unlinks the stale regions among the POSIX shm names starting with
 * prefix ("/..."): regular files of this effective uid, at least head_len
 * (>= sizeof(shm_header), <= 4096) bytes, whose header carries magic and
 * for which is_stale says 1. Everything else (another uid, another magic,
 * short, unreadable, a symlink) is left alone. *n_removed (may be NULL)
 * counts the unlinked names. Errors: QERR_ARG, QERR_IO (the shm
 * directory cannot be listed); a name that vanishes meanwhile is no
 * error. */
int shm_sweep_stale(const char *prefix, uint32_t magic, size_t head_len,
		    shm_stale_fn is_stale, void *arg, int *n_removed);

#endif

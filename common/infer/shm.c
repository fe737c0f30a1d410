/*
 * shm — the one module that calls memfd_create, shm_open, mmap and
 * munmap (see shm.h): creating owner regions, attaching read-only by fd
 * or name with the header checked, and sweeping named regions whose
 * creator is gone. Callers: infer/kv.c, worker/ (sweep), tests.
 */
#include "infer/shm.h"

#include "qerr.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void region_zero(shm_region *r)
{
	r->base = NULL;
	r->size = 0;
	r->fd = -1;
	r->writable = 0;
}

/* The size must be representable as off_t (ftruncate, fallocate) and as
 * size_t (mmap). */
static int size_ok(uint64_t size)
{
	return size >= sizeof(shm_header) && size <= (uint64_t)INT64_MAX &&
	       size <= (uint64_t)SIZE_MAX;
}

uint64_t shm_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

int shm_room(const char *what, uint64_t size, uint64_t avail)
{
	if (!avail || size <= avail)
		return QERR_OK;
	return qerr_fail(QERR_NOMEM,
			 "%s: %llu bytes of shared memory needed, more than "
			 "the %llu bytes of memory available",
			 what, (unsigned long long)size,
			 (unsigned long long)avail);
}

/* Backs [0, size) with memory now; ENOSPC/ENOMEM here instead of SIGBUS
 * on first touch later. posix_fallocate returns the error number. */
static int reserve(int fd, uint64_t size, const char *what)
{
	int e;

	do
		e = posix_fallocate(fd, 0, (off_t)size);
	while (e == EINTR);
	if (e == EOPNOTSUPP || e == EINVAL) {
		/* Filesystem without fallocate: size it and hope. */
		if (ftruncate(fd, (off_t)size) == 0)
			return QERR_OK;
		e = errno;
	}
	if (e == 0)
		return QERR_OK;
	if (e == ENOSPC || e == ENOMEM || e == EFBIG)
		return qerr_fail(QERR_NOMEM,
				 "%s: cannot reserve %llu bytes of shared "
				 "memory: %s",
				 what, (unsigned long long)size, strerror(e));
	return qerr_fail(QERR_IO, "%s: fallocate %llu bytes: %s", what,
			 (unsigned long long)size, strerror(e));
}

/* fd is owned by this call from here on (closed on failure). */
static int map_new(int fd, const char *what, uint32_t magic, uint32_t version,
		   uint64_t size, shm_region *out)
{
	void *base;
	shm_header h;
	int rc;

	/* A region the machine cannot hold is refused before a page of it
	 * is taken: fallocate on a memfd does not fail with ENOMEM when the
	 * request exceeds memory, it fills memory (tmpfs pages count
	 * against no limit of ours) until the kernel's OOM killer ends
	 * processes machine-wide. */
	if ((rc = shm_room(what, size, shm_mem_available())) ||
	    (rc = reserve(fd, size, what)))
		goto fail;
	/* the pages reserve allocated, mapped now: a KV pool's first
	 * writes (decode's rows, a fork's tail copy) took a fault a page,
	 * about 1.1 ms of a 32-row round of the 0.5b on an AMD EPYC Zen 5
	 * VM (kv_seq_reserve and the KV stores: 2.2 -> 1.1 ms) */
	base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_POPULATE, fd, 0);
	if (base == MAP_FAILED) {
		rc = qerr_fail(errno == ENOMEM ? QERR_NOMEM : QERR_IO,
			       "%s: mmap %llu bytes: %s", what,
			       (unsigned long long)size, strerror(errno));
		goto fail;
	}
	h.magic = magic;
	h.version = version;
	h.size = size;
	memcpy(base, &h, sizeof(h));
	out->base = base;
	out->size = size;
	out->fd = fd;
	out->writable = 1;
	return QERR_OK;
fail:
	close(fd);
	return rc;
}

int shm_create(const char *tag, uint32_t magic, uint32_t version,
	       uint64_t size, shm_region *out)
{
	int fd, rc;

	if (!out)
		return qerr_fail(QERR_ARG, "shm_create: NULL region");
	region_zero(out);
	if (!size_ok(size))
		return qerr_fail(QERR_ARG, "shm_create: bad region size %llu",
				 (unsigned long long)size);
	if (!tag)
		tag = "quorum";
	fd = memfd_create(tag, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return qerr_fail(errno == ENOMEM || errno == EMFILE ||
						 errno == ENFILE
					 ? QERR_NOMEM
					 : QERR_IO,
				 "memfd_create %s: %s", tag, strerror(errno));
	rc = map_new(fd, tag, magic, version, size, out);
	if (rc)
		return rc;
	/* Fix the size for the region's life, and make every later mapping
	 * of this fd read-only (ours was made before the seal). Best effort:
	 * an older kernel without F_SEAL_FUTURE_WRITE still gets the size
	 * seals. */
	if (fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
			  F_SEAL_SEAL) != 0)
		(void)fcntl(fd, F_ADD_SEALS,
			    F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	return QERR_OK;
}

int shm_create_named(const char *name, uint32_t magic, uint32_t version,
		     uint64_t size, shm_region *out)
{
	int fd, rc;

	if (!out)
		return qerr_fail(QERR_ARG, "shm_create_named: NULL region");
	region_zero(out);
	if (!name || name[0] != '/')
		return qerr_fail(QERR_ARG,
				 "shm_create_named: name must start with '/'");
	if (!size_ok(size))
		return qerr_fail(QERR_ARG, "shm %s: bad region size %llu", name,
				 (unsigned long long)size);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return qerr_fail(QERR_IO, "shm_open %s: %s", name,
				 strerror(errno));
	/* 0600 whatever the umask: a umask of 0277 would leave 0400 (and
	 * 0377 would leave 0000, which same-uid readers could not open). */
	if (fchmod(fd, 0600) != 0) {
		rc = qerr_fail(QERR_IO, "shm %s: fchmod 0600: %s", name,
			       strerror(errno));
		close(fd);
		shm_unlink(name);
		return rc;
	}
	rc = map_new(fd, name, magic, version, size, out);
	if (rc)
		shm_unlink(name);
	return rc;
}

int shm_unlink_name(const char *name)
{
	if (!name || shm_unlink(name) != 0)
		return qerr_fail(QERR_IO, "shm_unlink %s: %s",
				 name ? name : "(null)",
				 name ? strerror(errno) : "NULL name");
	return QERR_OK;
}

/* Reader side: validates fd's header without touching any page, then maps
 * it PROT_READ. fd is borrowed. */
static int map_ro(int fd, const char *what, uint32_t magic, uint32_t version,
		  uint64_t expect_size, shm_region *out)
{
	struct stat st;
	shm_header h;
	ssize_t n;
	void *base;
	int dup_fd;

	if (fstat(fd, &st) != 0)
		return qerr_fail(QERR_IO, "%s: fstat: %s", what,
				 strerror(errno));
	if (!S_ISREG(st.st_mode))
		return qerr_fail(QERR_FORMAT, "%s: not a shared memory file",
				 what);
	if (st.st_size < (off_t)sizeof(h))
		return qerr_fail(QERR_FORMAT,
				 "%s: %lld bytes, shorter than a region header",
				 what, (long long)st.st_size);
	do
		n = pread(fd, &h, sizeof(h), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return qerr_fail(QERR_IO, "%s: read header: %s", what,
				 strerror(errno));
	if ((size_t)n != sizeof(h))
		return qerr_fail(QERR_FORMAT, "%s: short header read", what);
	if (h.magic != magic)
		return qerr_fail(QERR_FORMAT,
				 "%s: bad magic 0x%08x (want 0x%08x)", what,
				 h.magic, magic);
	if (h.version != version)
		return qerr_fail(QERR_UNSUPPORTED,
				 "%s: region version %u, this build reads %u",
				 what, h.version, version);
	if (!size_ok(h.size))
		return qerr_fail(QERR_FORMAT, "%s: bad region size %llu", what,
				 (unsigned long long)h.size);
	if (h.size > (uint64_t)st.st_size)
		return qerr_fail(QERR_FORMAT,
				 "%s: header says %llu bytes, file has %lld",
				 what, (unsigned long long)h.size,
				 (long long)st.st_size);
	if (expect_size && h.size != expect_size)
		return qerr_fail(QERR_FORMAT,
				 "%s: region is %llu bytes, expected %llu", what,
				 (unsigned long long)h.size,
				 (unsigned long long)expect_size);
	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0)
		return qerr_fail(QERR_IO, "%s: dup: %s", what,
				 strerror(errno));
	base = mmap(NULL, (size_t)h.size, PROT_READ, MAP_SHARED, dup_fd, 0);
	if (base == MAP_FAILED) {
		int e = errno;

		close(dup_fd);
		return qerr_fail(e == ENOMEM ? QERR_NOMEM : QERR_IO,
				 "%s: mmap read-only %llu bytes: %s", what,
				 (unsigned long long)h.size, strerror(e));
	}
	out->base = base;
	out->size = h.size;
	out->fd = dup_fd;
	out->writable = 0;
	return QERR_OK;
}

int shm_map_fd_ro(int fd, uint32_t magic, uint32_t version,
		  uint64_t expect_size, shm_region *out)
{
	char what[32];

	if (!out)
		return qerr_fail(QERR_ARG, "shm_map_fd_ro: NULL region");
	region_zero(out);
	if (fd < 0)
		return qerr_fail(QERR_ARG, "shm_map_fd_ro: bad fd %d", fd);
	snprintf(what, sizeof(what), "shm fd %d", fd);
	return map_ro(fd, what, magic, version, expect_size, out);
}

int shm_map_name_ro(const char *name, uint32_t magic, uint32_t version,
		    uint64_t expect_size, shm_region *out)
{
	int fd, rc;

	if (!out)
		return qerr_fail(QERR_ARG, "shm_map_name_ro: NULL region");
	region_zero(out);
	if (!name || name[0] != '/')
		return qerr_fail(QERR_ARG,
				 "shm_map_name_ro: name must start with '/'");
	fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return qerr_fail(errno == ENOENT ? QERR_MISSING : QERR_IO,
				 "shm_open %s read-only: %s", name,
				 strerror(errno));
	rc = map_ro(fd, name, magic, version, expect_size, out);
	close(fd);
	return rc;
}

void shm_unmap(shm_region *r)
{
	/* base decides, so that a memset-0 region (fd 0) is left alone. */
	if (!r || !r->base)
		return;
	munmap(r->base, (size_t)r->size);
	if (r->fd >= 0)
		close(r->fd);
	region_zero(r);
}

/* ---- owners and stale regions ----------------------------------------- */

/* glibc keeps POSIX shm objects as files of the tmpfs mounted here. */
#define SHM_DIR "/dev/shm"

/* State letter and start time (field 22) of pid from /proc/PID/stat.
 * 0, or -ENOENT when there is no such process, or -EIO. */
static int proc_stat(uint32_t pid, char *state, uint64_t *start)
{
	char path[48], buf[1024], *p;
	unsigned long long st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EIO;
	do
		n = read(fd, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return n == 0 ? -ENOENT : -EIO; /* empty: it just exited */
	buf[n] = '\0';
	/* "pid (comm) S f4 .. f21 starttime ...": comm may hold ") ", so
	 * the fields start after the last ')'. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	*state = p[2];
	p += 3;
	for (int f = 4; f <= 21; f++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EIO;
	}
	if (sscanf(p, " %llu", &st) != 1)
		return -EIO;
	*start = st;
	return 0;
}

int shm_owner_self(shm_owner *out)
{
	char state;
	uint64_t start;

	if (!out)
		return qerr_fail(QERR_ARG, "shm_owner_self: NULL out");
	memset(out, 0, sizeof(*out));
	if (proc_stat((uint32_t)getpid(), &state, &start) != 0)
		return qerr_fail(QERR_IO, "/proc/self/stat: cannot read the "
				 "process start time");
	out->pid = (uint32_t)getpid();
	out->start_time = start;
	return QERR_OK;
}

int shm_owner_alive(const shm_owner *o)
{
	char state;
	uint64_t start;
	int rc;

	if (!o || o->pid == 0 || o->pid > (uint32_t)INT32_MAX)
		return 1; /* unknown: never provably dead */
	rc = proc_stat(o->pid, &state, &start);
	if (rc == -ENOENT)
		/* /proc may be mounted hidepid: ask the kernel directly */
		return !(kill((pid_t)o->pid, 0) != 0 && errno == ESRCH);
	if (rc != 0)
		return 1;
	if (start != o->start_time)
		return 0; /* the pid was reused */
	return state != 'Z' && state != 'X'; /* a zombie maps nothing */
}

int shm_sweep_stale(const char *prefix, uint32_t magic, size_t head_len,
		    shm_stale_fn is_stale, void *arg, int *n_removed)
{
	unsigned char head[4096];
	size_t plen;
	DIR *d;
	struct dirent *de;
	int n = 0;

	if (n_removed)
		*n_removed = 0;
	if (!prefix || prefix[0] != '/' || strchr(prefix + 1, '/') ||
	    !is_stale || head_len < sizeof(shm_header) ||
	    head_len > sizeof(head))
		return qerr_fail(QERR_ARG, "shm_sweep_stale: bad arguments");
	plen = strlen(prefix + 1);
	d = opendir(SHM_DIR);
	if (!d)
		return qerr_fail(QERR_IO, "%s: %s", SHM_DIR, strerror(errno));
	while ((de = readdir(d))) {
		char name[NAME_MAX + 2];
		struct stat st, again;
		shm_header h;
		ssize_t got;
		int fd, stale;

		if (strncmp(de->d_name, prefix + 1, plen))
			continue;
		/* O_NOFOLLOW: not through a planted symlink; O_NONBLOCK: a
		 * planted FIFO must not block the sweep. */
		fd = openat(dirfd(d), de->d_name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid() || st.st_size < (off_t)head_len) {
			close(fd);
			continue;
		}
		do
			got = pread(fd, head, head_len, 0);
		while (got < 0 && errno == EINTR);
		close(fd);
		if (got != (ssize_t)head_len)
			continue;
		memcpy(&h, head, sizeof(h));
		if (h.magic != magic)
			continue;
		snprintf(name, sizeof(name), "/%s", de->d_name);
		stale = is_stale(name, head, head_len, arg);
		/* unlink only the file that was judged, not a replacement */
		if (stale != 1 ||
		    fstatat(dirfd(d), de->d_name, &again,
			    AT_SYMLINK_NOFOLLOW) != 0 ||
		    again.st_ino != st.st_ino || again.st_dev != st.st_dev)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			n++;
	}
	closedir(d);
	if (n_removed)
		*n_removed = n;
	return QERR_OK;
}

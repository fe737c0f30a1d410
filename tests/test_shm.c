/*
 * shm owners and the stale-region sweep: shm_owner_self/alive tell a
 * running creator from a dead one (pid reuse and zombies included), and
 * shm_sweep_stale with kv_region_stale removes exactly the KV regions of
 * dead creators under a prefix — never a live one, another prefix, a
 * decoy with a wrong magic, an older version, a short file, a FIFO, a
 * symlink or another user's file. Also: named regions are 0600 whatever
 * the umask.
 *
 * Every name this program creates starts with "/quorum-tshm<pid>" and is
 * removed in teardown, also after a failed assertion.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "infer/kv.h"
#include "poolutil.h"
#include "qerr.h"
#include "infer/shm.h"

static char base[64]; /* "quorum-tshm<pid>", no slash */

static void name_of(char *buf, size_t cap, const char *tail)
{
	snprintf(buf, cap, "/%s%s", base, tail);
}

static int exists(const char *tail)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "/dev/shm/%s%s", base, tail);
	return lstat(path, &st) == 0;
}

static void remove_ours(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, base, strlen(base)) &&
		    unlinkat(dirfd(d), de->d_name, 0) != 0)
			unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	if (d)
		closedir(d);
}

static int teardown(void **state)
{
	(void)state;
	remove_ours();
	return 0;
}

static const kv_params small = {1, 4, 4, 2, KV_F32, 0, 0};

static void kill_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* ---- owners ----------------------------------------------------------- */

static void test_owner(void **state)
{
	shm_owner me, o;
	int fds[2];
	pid_t pid;

	(void)state;
	assert_int_equal(shm_owner_self(&me), QERR_OK);
	assert_int_equal(me.pid, (uint32_t)getpid());
	assert_true(me.start_time > 0);
	assert_int_equal(me.reserved, 0);
	assert_int_equal(shm_owner_alive(&me), 1);

	/* the same pid with another start time: a reused pid, not ours */
	o = me;
	o.start_time++;
	assert_int_equal(shm_owner_alive(&o), 0);

	/* unknown owner: never provably dead */
	memset(&o, 0, sizeof(o));
	assert_int_equal(shm_owner_alive(&o), 1);
	assert_int_equal(shm_owner_alive(NULL), 1);
	assert_int_equal(shm_owner_self(NULL), QERR_ARG);

	/* a child: alive, then a zombie (dead), then gone (dead) */
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		shm_owner c;
		char go;

		close(fds[1]);
		if (shm_owner_self(&c) || c.pid != (uint32_t)getpid())
			_exit(1);
		if (read(fds[0], &go, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[0]);
	{
		char path[64], buf[1024], *p;
		unsigned long long st = 0;
		ssize_t n;
		int fd;

		/* the child's start time, read independently of shm.c */
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		fd = open(path, O_RDONLY);
		assert_true(fd >= 0);
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		assert_true(n > 0);
		buf[n] = '\0';
		p = strrchr(buf, ')');
		assert_non_null(p);
		assert_int_equal(sscanf(p + 2,
					"%*c %*d %*d %*d %*d %*d %*u %*u %*u "
					"%*u %*u %*u %*u %*d %*d %*d %*d %*d "
					"%*d %llu",
					&st),
				 1);
		o.pid = (uint32_t)pid;
		o.reserved = 0;
		o.start_time = st;
	}
	assert_int_equal(shm_owner_alive(&o), 1);
	close(fds[1]); /* the child exits: a zombie until reaped */
	{
		siginfo_t si;

		assert_int_equal(waitid(P_PID, (id_t)pid, &si,
					WEXITED | WNOWAIT),
				 0);
		assert_int_equal(si.si_status, 0);
	}
	assert_int_equal(shm_owner_alive(&o), 0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(shm_owner_alive(&o), 0);
}

/* Named pools record their creator; anonymous ones too. */
static void test_pool_records_owner(void **state)
{
	char name[128];
	kv_shm_header h;
	kv_pool *p = NULL;
	shm_owner o, me;
	int fd;

	(void)state;
	name_of(name, sizeof(name), ".own.0");
	assert_int_equal(shm_owner_self(&me), QERR_OK);
	assert_int_equal(kv_pool_new_named(&small, name, &p), QERR_OK);
	fd = shm_open(name, O_RDONLY, 0);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	assert_int_equal(h.h.version, KV_VERSION);
	assert_int_equal(kv_region_owner(&h, sizeof(h), &o), QERR_OK);
	assert_memory_equal(&o, &me, sizeof(o));
	assert_int_equal(kv_region_stale(name, &h, sizeof(h), NULL), 0);
	assert_int_equal(kv_region_owner(&h, sizeof(h) - 1, &o), QERR_FORMAT);
	h.h.version = 1;
	assert_int_equal(kv_region_owner(&h, sizeof(h), &o),
			 QERR_UNSUPPORTED);
	h.h.magic ^= 1;
	assert_int_equal(kv_region_owner(&h, sizeof(h), &o), QERR_FORMAT);
	kv_pool_free(&p);
	assert_false(exists(".own.0"));

	assert_int_equal(kv_pool_new(&small, &p), QERR_OK);
	assert_int_equal(pread(kv_pool_fd(p), &h, sizeof(h), 0),
			 (ssize_t)sizeof(h));
	assert_memory_equal(&h.owner, &me, sizeof(me));
	kv_pool_free(&p);
}

/* 0600 whatever the umask (0377 would otherwise leave 0400 & ~0377 = 0). */
static void test_mode_0600(void **state)
{
	static const mode_t masks[] = {0, 022, 077, 0277, 0377};
	char name[128];
	struct stat st;

	(void)state;
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		shm_region r;
		mode_t old = umask(masks[i]);
		int rc;

		name_of(name, sizeof(name), ".mode.0");
		rc = shm_create_named(name, 0x1234, 1, 4096, &r);
		umask(old);
		assert_int_equal(rc, QERR_OK);
		assert_int_equal(fstat(r.fd, &st), 0);
		if ((st.st_mode & 07777) != 0600)
			fail_msg("umask %03o: mode %03o", (unsigned)masks[i],
				 (unsigned)(st.st_mode & 07777));
		shm_unmap(&r);
		assert_int_equal(shm_unlink_name(name), QERR_OK);
	}
}

/* ---- the sweep --------------------------------------------------------- */

/* Only names "<prefix>" + 2 hex digits are ours (like the worker's rule:
 * exact suffix, so "<prefix>x-..." of another id is not). */
static int stale_if_ours(const char *name, const void *head, size_t len,
			 void *arg)
{
	const char *prefix = arg, *s = name + strlen(prefix);

	if (strlen(s) != 2 || !strchr("0123456789abcdef", s[0]) ||
	    !strchr("0123456789abcdef", s[1]))
		return 0;
	return kv_region_stale(name, head, len, NULL);
}

static void write_file(const char *tail, const void *data, size_t len,
		       mode_t mode)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%s%s", base, tail);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void test_sweep(void **state)
{
	static const struct {
		const char *tail; /* after base */
		int removed;      /* by the sweep of prefix base + ".w1." */
	} want[] = {
		{".w1.a0", 1},       /* KV, creator dead */
		{".w1.a1", 1},       /* KV, creator dead */
		{".w1.b0", 0},       /* KV, creator alive (another process) */
		{".w1.b1", 0},       /* KV, creator alive (this process) */
		{".w1.c0", 0},       /* decoy: our name, wrong magic */
		{".w1.c1", 0},       /* decoy: our name, magic only, short */
		{".w1.c2", 0},       /* KV magic, version 1 (owner unknown) */
		{".w1.c3", 0},       /* a FIFO */
		{".w1.c4", 0},       /* a symlink to a dead KV region */
		{".w1.c5", 0},       /* a dead KV region of another uid */
		{".w1.c6", 0},       /* a directory */
		{".w1-x.d0", 0},     /* KV, dead, worker "w1-x" */
		{".w1.d0x", 0},      /* KV, dead, suffix not ours */
		{"-o.w1.e0", 0},     /* KV, dead, another cluster "...-o" */
		{".w2.e1", 0},       /* KV, dead, worker w2 */
	};
	char name[128], prefix[128], path[256], target[256];
	kv_pool *mine = NULL;
	pid_t alive;
	kv_shm_header h;
	int n = -1, other_uid = geteuid() == 0;

	(void)state;
	name_of(prefix, sizeof(prefix), ".w1.");
	name_of(name, sizeof(name), ".w1.a0");
	pu_dead_pool(&small, name);
	name_of(name, sizeof(name), ".w1.a1");
	pu_dead_pool(&small, name);
	name_of(name, sizeof(name), ".w1.b0");
	pu_live_pool(&small, name, &alive);
	name_of(name, sizeof(name), ".w1.b1");
	assert_int_equal(kv_pool_new_named(&small, name, &mine), QERR_OK);
	{
		shm_region r;

		name_of(name, sizeof(name), ".w1.c0");
		assert_int_equal(shm_create_named(name, KV_MAGIC ^ 0xff,
						  KV_VERSION, 8192, &r),
				 QERR_OK);
		shm_unmap(&r);
	}
	/* a copy of a dead region's header: c1 cut short, c2 version 1 */
	name_of(name, sizeof(name), ".w1.a0");
	{
		int fd = shm_open(name, O_RDONLY, 0);

		assert_true(fd >= 0);
		assert_int_equal(pread(fd, &h, sizeof(h), 0),
				 (ssize_t)sizeof(h));
		close(fd);
	}
	assert_int_equal(kv_region_stale(name, &h, sizeof(h), NULL), 1);
	write_file(".w1.c1", &h, sizeof(shm_header) + 8, 0600);
	h.h.version = 1;
	write_file(".w1.c2", &h, sizeof(h), 0600);
	h.h.version = KV_VERSION;
	snprintf(path, sizeof(path), "/dev/shm/%s.w1.c3", base);
	assert_int_equal(mkfifo(path, 0600), 0);
	name_of(name, sizeof(name), ".x.dead");
	pu_dead_pool(&small, name);
	snprintf(target, sizeof(target), "/dev/shm/%s.x.dead", base);
	snprintf(path, sizeof(path), "/dev/shm/%s.w1.c4", base);
	assert_int_equal(symlink(target, path), 0);
	write_file(".w1.c5", &h, sizeof(h), 0600);
	if (other_uid) {
		snprintf(path, sizeof(path), "/dev/shm/%s.w1.c5", base);
		assert_int_equal(chown(path, 65534, 65534), 0);
	}
	snprintf(path, sizeof(path), "/dev/shm/%s.w1.c6", base);
	assert_int_equal(mkdir(path, 0700), 0);
	name_of(name, sizeof(name), ".w1-x.d0");
	pu_dead_pool(&small, name);
	name_of(name, sizeof(name), ".w1.d0x");
	pu_dead_pool(&small, name);
	name_of(name, sizeof(name), "-o.w1.e0");
	pu_dead_pool(&small, name);
	name_of(name, sizeof(name), ".w2.e1");
	pu_dead_pool(&small, name);

	assert_int_equal(shm_sweep_stale(prefix, KV_MAGIC, sizeof(h),
					 stale_if_ours, prefix, &n),
			 QERR_OK);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (!other_uid && !strcmp(want[i].tail, ".w1.c5"))
			continue; /* not root: the file is ours, see below */
		if (exists(want[i].tail) == want[i].removed)
			fail_msg("%s: %s", want[i].tail,
				 want[i].removed ? "left" : "removed");
	}
	/* c5 is a dead region's header: stale when it is ours (not root) */
	assert_int_equal(n, other_uid ? 2 : 3);
	assert_true(exists(".x.dead")); /* the symlink was not followed */

	/* once the live creator dies its region is stale too */
	kill_reap(alive);
	assert_int_equal(shm_sweep_stale(prefix, KV_MAGIC, sizeof(h),
					 stale_if_ours, prefix, &n),
			 QERR_OK);
	assert_int_equal(n, 1);
	assert_false(exists(".w1.b0"));
	assert_true(exists(".w1.b1"));
	kv_pool_free(&mine);
	assert_false(exists(".w1.b1"));
	snprintf(path, sizeof(path), "/dev/shm/%s.w1.c6", base);
	rmdir(path);
}

static int always(const char *name, const void *head, size_t len, void *arg)
{
	(void)name;
	(void)head;
	(void)len;
	(*(int *)arg)++;
	return 1;
}

/* The sweep itself checks the magic (and the file type and size): the
 * callback sees only regions that carry it, whatever it would say. */
static void test_sweep_checks_magic(void **state)
{
	char name[128], prefix[128], path[256];
	shm_region r;
	int n = -1, calls = 0;

	(void)state;
	name_of(prefix, sizeof(prefix), ".m.");
	name_of(name, sizeof(name), ".m.wrong");
	assert_int_equal(shm_create_named(name, 0x1111, 1, 4096, &r), QERR_OK);
	shm_unmap(&r);
	name_of(name, sizeof(name), ".m.right");
	assert_int_equal(shm_create_named(name, 0x2222, 1, 4096, &r), QERR_OK);
	shm_unmap(&r);
	name_of(name, sizeof(name), ".m.small");
	assert_int_equal(shm_create_named(name, 0x2222, 1, 64, &r), QERR_OK);
	shm_unmap(&r);
	snprintf(path, sizeof(path), "/dev/shm/%s.m.fifo", base);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(shm_sweep_stale(prefix, 0x2222, 128, always, &calls,
					 &n),
			 QERR_OK);
	assert_int_equal(calls, 1);
	assert_int_equal(n, 1);
	assert_true(exists(".m.wrong"));
	assert_false(exists(".m.right"));
	assert_true(exists(".m.small"));
	assert_true(exists(".m.fifo"));
}

static void test_sweep_args(void **state)
{
	int n = 7;

	(void)state;
	assert_int_equal(shm_sweep_stale(NULL, KV_MAGIC, 80, kv_region_stale,
					 NULL, &n),
			 QERR_ARG);
	assert_int_equal(n, 0);
	assert_int_equal(shm_sweep_stale("no-slash", KV_MAGIC, 80,
					 kv_region_stale, NULL, NULL),
			 QERR_ARG);
	assert_int_equal(shm_sweep_stale("/a/b", KV_MAGIC, 80,
					 kv_region_stale, NULL, NULL),
			 QERR_ARG);
	assert_int_equal(shm_sweep_stale("/x", KV_MAGIC, 80, NULL, NULL,
					 NULL),
			 QERR_ARG);
	assert_int_equal(shm_sweep_stale("/x", KV_MAGIC, 8, kv_region_stale,
					 NULL, NULL),
			 QERR_ARG);
	assert_int_equal(shm_sweep_stale("/x", KV_MAGIC, 8192,
					 kv_region_stale, NULL, NULL),
			 QERR_ARG);
	/* nothing under a prefix nobody uses */
	n = 7;
	assert_int_equal(shm_sweep_stale("/quorum-tshm-none-", KV_MAGIC, 80,
					 kv_region_stale, NULL, &n),
			 QERR_OK);
	assert_int_equal(n, 0);
}

/* ---- room: regions the machine cannot hold --------------------------- */

/* The rule itself, with the available figure given: at most avail bytes,
 * and nothing refused when the figure is unknown (0). */
static void test_room_rule(void **state)
{
	(void)state;
	assert_int_equal(shm_room("x", 100, 0), QERR_OK);
	assert_int_equal(shm_room("x", 100, 100), QERR_OK);
	assert_int_equal(shm_room("x", UINT64_MAX, 0), QERR_OK);
	assert_int_equal(shm_room("pool", 101, 100), QERR_NOMEM);
	assert_non_null(strstr(qerr_detail(), "pool: 101 bytes"));
	assert_non_null(strstr(qerr_detail(), "the 100 bytes of memory "
				"available"));
}

/* A region (an anonymous one, a named one, a KV pool) larger than the
 * machine's available memory is refused before any of it is reserved:
 * fallocate on a memfd would fill memory until the OOM killer ends
 * processes machine-wide. A child under RLIMIT_FSIZE asks: without the
 * check, fallocate fails at once with EFBIG ("File too large") instead
 * of reserving, so no memory is ever taken whichever path answers. */
static void test_room_before_reserve(void **state)
{
	uint64_t avail = shm_mem_available();
	pid_t pid;
	int status;

	(void)state;
	if (!avail)
		skip(); /* no MemAvailable: nothing to compare against */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {1 << 20, 1 << 20};
		uint64_t big = avail + ((uint64_t)1 << 30);
		/* 1 layer x 2 x 4 tokens x 65536 f32 = 2 MiB a block */
		kv_params kp = {1, 1 << 16, 4,
				(uint32_t)(big / (2u << 20) + 1), KV_F32, 0, 0};
		char name[128];
		kv_pool *p = NULL;
		shm_region r;
		int bad = 0;

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
			_exit(3);
		if (shm_create("big", 1, 1, big, &r) != QERR_NOMEM ||
		    r.fd != -1 || !strstr(qerr_detail(), "memory available"))
			bad |= 4;
		name_of(name, sizeof(name), "-big");
		if (shm_create_named(name, 1, 1, big, &r) != QERR_NOMEM ||
		    !strstr(qerr_detail(), "memory available") ||
		    exists("-big"))
			bad |= 8;
		if (kv_pool_new(&kp, &p) != QERR_NOMEM || p ||
		    !strstr(qerr_detail(), "memory available"))
			bad |= 16;
		if (bad)
			fprintf(stderr, "room: %s\n", qerr_detail());
		_exit(bad);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_owner, teardown),
		cmocka_unit_test_teardown(test_pool_records_owner, teardown),
		cmocka_unit_test_teardown(test_mode_0600, teardown),
		cmocka_unit_test_teardown(test_sweep, teardown),
		cmocka_unit_test_teardown(test_sweep_checks_magic, teardown),
		cmocka_unit_test_teardown(test_sweep_args, teardown),
		cmocka_unit_test(test_room_rule),
		cmocka_unit_test_teardown(test_room_before_reserve, teardown),
	};
	int rc;

	snprintf(base, sizeof(base), "quorum-tshm%d", (int)getpid());
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	remove_ours();
	return rc;
}

/*
 * Hygiene with real processes: shared memory left by kill -9 is swept on
 * the next start (and nothing else is), pools are 0600 and map read-only
 * for others; bad configs and bad model files make the coordinator and
 * the worker exit on their own with one clear message, before they bind
 * a socket or create shared memory; a client of a cluster without a
 * usable worker gets STATUS_NO_CAPACITY (its time reported, not bounded).
 *
 * "Before they bind / create": each bad-input run is traced with strace
 * (bind/listen/connect, openat under /dev/shm with O_CREAT) — a positive
 * control (a good config) shows the trace does see the bind. Every run has
 * a hang guard (RUN_MS, killed as a process group; never a speed) and
 * every name created here is removed in teardown.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "clusterutil.h"
#include "format/gguf.h"
#include "infer/kv.h"
#include "poolutil.h"
#include "infer/shm.h"

/* a hang guard, never a speed: a bad-input run ends on its own (its exit,
 * status, one line and what it did not bind are the checks); one that
 * has not by then is killed and fails as "did not exit" */
#define RUN_MS 60000

static char model_path[PATH_MAX];
static cu_cluster cl;

/* names this program created in /dev/shm (without the slash) */
static char made[16][128];
static int n_made;
static pid_t holder; /* child keeping a live pool */

/* ---- processes --------------------------------------------------------- */

typedef struct {
	int exited;   /* 1: exited on its own within the bound */
	int status;   /* exit status when exited */
	char err[8192]; /* stderr */
	int bound;    /* the trace shows bind/listen */
	int connected;/* the trace shows an AF_INET connect */
	int shm_made; /* the trace shows a /dev/shm file created */
} run_res;

static int have_strace(void)
{
	if (access("/usr/bin/strace", X_OK) == 0)
		return 1;
	fprintf(stderr, "strace is needed (tools/deps.sh installs it)\n");
	return 0;
}

/* Runs argv (stdout to /dev/null, stderr captured, traced when trace) in
 * its own process group, killed after RUN_MS. as_nobody: uid/gid 65534. */
static void run(char *const argv[], int trace, int as_nobody, run_res *r)
{
	char tpath[PATH_MAX + 32];
	int fds[2], st = 0;
	size_t got = 0;
	int64_t end = wire_now_ms() + RUN_MS;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	snprintf(tpath, sizeof(tpath), "%s/trace-%d.txt", cu_tmpdir,
		 (int)getpid());
	unlink(tpath);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *targv[64];
		int k = 0, dn = open("/dev/null", O_WRONLY);

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(dn, 1);
		dup2(fds[1], 2);
		close(fds[0]);
		if (as_nobody && (setgid(65534) || setuid(65534)))
			_exit(126);
		if (trace) {
			/* LeakSanitizer cannot run under ptrace: in a sanitizer
			 * build it would add a fatal-error line to stderr */
			const char *ao = getenv("ASAN_OPTIONS");
			char aob[512];

			snprintf(aob, sizeof(aob), "%s%sdetect_leaks=0",
				 ao ? ao : "", ao && *ao ? ":" : "");
			setenv("ASAN_OPTIONS", aob, 1);
			targv[k++] = "/usr/bin/strace";
			targv[k++] = "-f";
			targv[k++] = "-qq";
			targv[k++] = "-e";
			targv[k++] = "trace=bind,listen,connect,openat";
			targv[k++] = "-e";
			targv[k++] = "signal=none";
			targv[k++] = "-o";
			targv[k++] = tpath;
		}
		for (int i = 0; argv[i] && k < 63; i++)
			targv[k++] = argv[i];
		targv[k] = NULL;
		execv(targv[0], targv);
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		struct pollfd p = {fds[0], POLLIN, 0};
		int64_t left = end - wire_now_ms();
		ssize_t n;

		if (left <= 0)
			break;
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		n = read(fds[0], r->err + got, sizeof(r->err) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(r->err) - 1)
			break;
	}
	close(fds[0]);
	pid_t w;

	while ((w = waitpid(pid, &st, WNOHANG)) == 0 && wire_now_ms() < end)
		usleep(5000);
	if (w == pid) {
		r->exited = WIFEXITED(st);
		r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	} else {
		kill(-pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	r->err[got] = '\0';
	if (trace) {
		FILE *f = fopen(tpath, "r");
		char line[4096];

		assert_non_null(f);
		while (fgets(line, sizeof(line), f)) {
			if (strstr(line, " bind(") || strstr(line, " listen("))
				r->bound = 1;
			if (strstr(line, " connect(") &&
			    strstr(line, "AF_INET"))
				r->connected = 1;
			if (strstr(line, "openat(") &&
			    strstr(line, "\"/dev/shm/") &&
			    strstr(line, "O_CREAT"))
				r->shm_made = 1;
		}
		fclose(f);
		unlink(tpath);
	}
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* A TCP port on 127.0.0.1 nobody listens on now. */
static int port_free(int port)
{
	struct sockaddr_in a = {0};
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1, ok;

	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ok = bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	     listen(s, 1) == 0;
	close(s);
	return ok;
}

/* /dev/shm names starting with prefix (no slash), listed into out. */
static int shm_list(const char *prefix, char out[][128], int cap)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix)) && n < cap)
			snprintf(out[n++], 128, "%.127s", de->d_name);
	if (d)
		closedir(d);
	return n;
}

static int shm_exists(const char *name)
{
	char p[PATH_MAX + 16];
	struct stat st;

	snprintf(p, sizeof(p), "/dev/shm/%s", name);
	return lstat(p, &st) == 0;
}

/* ---- setup --------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	if (cu_setup_paths("hygiene") || cu_model(model_path, 11))
		return -1;
	/* uid 65534 runs read configs and models in here */
	chmod(cu_tmpdir, 0755);
	cu_zctx = zmq_ctx_new();
	return cu_zctx ? 0 : -1;
}

static int group_teardown(void **state)
{
	char cmd[PATH_MAX + 32];

	(void)state;
	/* not zmq_ctx_term: a failed case's open sockets would hang it */
	if (cu_zctx)
		zmq_ctx_shutdown(cu_zctx);
	unlink(model_path);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cu_tmpdir);
	if (strstr(cu_tmpdir, "hygiene-") && system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", cu_tmpdir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cu_stop(&cl);
	if (holder > 0) {
		kill(holder, SIGKILL);
		waitpid(holder, NULL, 0);
		holder = 0;
	}
	for (int i = 0; i < n_made; i++) {
		char p[PATH_MAX];

		snprintf(p, sizeof(p), "/%s", made[i]);
		shm_unlink(p);
	}
	n_made = 0;
	return 0;
}

/* ---- kill -9, then a restart sweeps exactly the stale pools -------------- */

static const kv_params small = {1, 4, 4, 2, KV_F32, 0, 0};

static void remember(const char *name)
{
	assert_true(n_made < 16);
	snprintf(made[n_made++], sizeof(made[0]), "%s", name + 1);
}

/* A pool whose creator is dead (a child that exits without unlinking). */
static void dead_pool(const char *name)
{
	remember(name);
	pu_dead_pool(&small, name);
}

/* A pool whose creator lives (until teardown). */
static void live_pool(const char *name)
{
	remember(name);
	pu_live_pool(&small, name, &holder);
}

/* Children of pid, from /proc/N/stat (field 4). */
static int children_of(pid_t pid, pid_t *out, int cap)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d))) {
		char p[300], buf[512], *c;
		FILE *f;
		int ppid;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
		if (!(f = fopen(p, "r")))
			continue;
		if (fgets(buf, sizeof(buf), f) && (c = strrchr(buf, ')')) &&
		    sscanf(c + 2, "%*c %d", &ppid) == 1 && ppid == pid &&
		    n < cap)
			out[n++] = (pid_t)atoi(de->d_name);
		fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

/* The pool of worker id: exactly "quorum-NAME@ID@" + 12 hex digits. */
static int pool_of(const char *id, char *out)
{
	char prefix[128], names[32][128];
	int n, found = 0;

	snprintf(prefix, sizeof(prefix), "quorum-%s@%s@", cu_name(), id);
	n = shm_list(prefix, names, 32);
	for (int i = 0; i < n; i++) {
		const char *t = names[i] + strlen(prefix);
		int decoy = 0;

		for (int k = 0; k < n_made; k++)
			decoy |= !strcmp(made[k], names[i]);
		if (decoy || strlen(t) != 12 ||
		    strspn(t, "0123456789abcdef") != 12)
			continue;
		snprintf(out, 128, "%.127s", names[i]);
		found++;
	}
	return found;
}

/* mode 0600; mapped read-only by name the map is r--s, cannot be made
 * writable, and a write through it faults; another uid cannot open it. */
static void check_pool_access(const char *name)
{
	char path[256], slash[256], line[512];
	struct stat st;
	kv_pool *ro = NULL;
	const unsigned char *b;
	FILE *f;
	int found = 0, status;
	pid_t pid;

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	snprintf(slash, sizeof(slash), "/%s", name);
	assert_int_equal(stat(path, &st), 0);
	if ((st.st_mode & 07777) != 0600)
		fail_msg("%s: mode %03o", name, (unsigned)(st.st_mode & 07777));
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(kv_pool_attach_name_ro(slash, &ro), QERR_OK);
	b = kv_k(ro, 0, 0);
	f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    (uintptr_t)b >= lo && (uintptr_t)b < hi) {
			assert_string_equal(perms, "r--s");
			found = 1;
		}
	}
	fclose(f);
	assert_true(found);
	/* no upgrade: the fd behind the map was opened O_RDONLY */
	assert_int_not_equal(mprotect((void *)((uintptr_t)b & ~(uintptr_t)4095),
				      4096, PROT_READ | PROT_WRITE),
			     0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		*(volatile unsigned char *)b = 1;
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGSEGV);
	kv_pool_free(&ro);
	if (geteuid() != 0) {
		/* no other uid to become: the 0600 mode above stands for it */
		fprintf(stderr, "note: not root, other-uid open not tried\n");
		return;
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int a, w;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		a = shm_open(slash, O_RDONLY, 0);
		w = shm_open(slash, O_RDWR, 0);
		_exit(a < 0 && w < 0 && errno == EACCES ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void kill9_restart_sweeps(void **state)
{
	cu_cfg k = cu_cfg_defaults(model_path);
	char old_local[128], old_w1[128], new_local[128], new_w1[128];
	char wrong_magic[128], other_cluster[128], other_id[128], live[128];
	pid_t kids[8];
	int nk, st;

	(void)state;
	k.local = 1;
	assert_int_equal(cu_start(&cl, &k), 0);
	assert_true(cu_worker(&cl, "w1", "h1") > 0);
	assert_true(cu_wait_workers(&cl, 2, CU_WAIT_MS) >= 0);
	assert_int_equal(pool_of("local-0", old_local), 1);
	assert_int_equal(pool_of("w1", old_w1), 1);
	check_pool_access(old_w1);
	check_pool_access(old_local);

	/* decoys: named like w1's pools but not stale pools of w1 */
	snprintf(wrong_magic, sizeof(wrong_magic), "/quorum-%s@w1@00000000dec0",
		 cu_name());
	{
		shm_region r;

		remember(wrong_magic);
		assert_int_equal(shm_create_named(wrong_magic, KV_MAGIC ^ 1,
						  KV_VERSION, 8192, &r),
				 QERR_OK);
		shm_unmap(&r);
	}
	snprintf(other_cluster, sizeof(other_cluster),
		 "/quorum-%sx@w1@0000000000c1", cu_name());
	dead_pool(other_cluster);
	snprintf(other_id, sizeof(other_id), "/quorum-%s@w1-x@0000000000c2",
		 cu_name());
	dead_pool(other_id);
	snprintf(live, sizeof(live), "/quorum-%s@w1@0000000000c3", cu_name());
	live_pool(live);

	/* kill -9 everything: the coordinator is stopped first so that it
	 * cannot restart its local worker meanwhile */
	kill(cl.coord, SIGSTOP);
	nk = children_of(cl.coord, kids, 8);
	assert_int_equal(nk, 1);
	kill(kids[0], SIGKILL);
	kill(cl.kids[0], SIGKILL);
	waitpid(cl.kids[0], NULL, 0);
	cl.kids[0] = 0;
	kill(cl.coord, SIGKILL);
	waitpid(cl.coord, &st, 0);
	cl.coord = 0;
	{
		int64_t end = wire_now_ms() + 5000;

		while (kill(kids[0], 0) == 0 && wire_now_ms() < end)
			usleep(10000); /* reaped by init */
	}
	/* nobody unlinked anything */
	assert_true(shm_exists(old_local + 0));
	assert_true(shm_exists(old_w1));

	/* the same cluster again: its workers sweep their dead pools */
	assert_int_equal(cu_start(&cl, &k), 0);
	assert_true(cu_worker(&cl, "w1", "h1") > 0);
	assert_true(cu_wait_workers(&cl, 2, CU_WAIT_MS) >= 0);
	if (shm_exists(old_local))
		fail_msg("stale pool %s of local-0 left", old_local);
	if (shm_exists(old_w1))
		fail_msg("stale pool %s of w1 left", old_w1);
	assert_int_equal(pool_of("local-0", new_local), 1);
	assert_int_equal(pool_of("w1", new_w1), 1);
	assert_string_not_equal(new_w1, old_w1);
	for (int i = 0; i < n_made; i++)
		if (!shm_exists(made[i]))
			fail_msg("%s was removed", made[i]);

	/* a clean shutdown leaves no pool */
	cu_kill_wait(cl.coord); /* SIGTERM: stops local-0 */
	cl.coord = 0;
	cu_kill_wait(cl.kids[0]); /* the new w1 */
	cl.kids[0] = 0;
	assert_false(shm_exists(new_local));
	assert_false(shm_exists(new_w1));
	assert_int_equal(pool_of("local-0", new_local), 0);
	assert_int_equal(pool_of("w1", new_w1), 0);
}

/* A local worker that does not stop when the coordinator does (stopped
 * here) is killed after the grace, and the coordinator removes the pool
 * it could not (it had stayed in /dev/shm until a worker of that id
 * started again). */
static void killed_local_swept(void **state)
{
	cu_cfg k = cu_cfg_defaults(model_path);
	char pool[128];
	pid_t kids[8];

	(void)state;
	k.local = 1;
	assert_int_equal(cu_start(&cl, &k), 0);
	assert_true(cu_wait_workers(&cl, 1, CU_WAIT_MS) >= 0);
	assert_int_equal(pool_of("local-0", pool), 1);
	assert_int_equal(children_of(cl.coord, kids, 8), 1);
	kill(kids[0], SIGSTOP); /* SIGTERM waits; SIGKILL does not */
	/* SIGTERM: its 5 s grace, then SIGKILL and the sweep; it ends by
	 * itself (cu_kill_wait's own 5 s would cut it short) */
	kill(cl.coord, SIGTERM);
	{
		int64_t end = wire_now_ms() + CU_WAIT_MS;
		int st;

		while (waitpid(cl.coord, &st, WNOHANG) == 0 &&
		       wire_now_ms() < end)
			usleep(20000);
		if (kill(cl.coord, 0) == 0)
			fail_msg("the coordinator did not stop");
	}
	cl.coord = 0;
	if (shm_exists(pool))
		fail_msg("pool %s of the killed local-0 left", pool);
	assert_int_equal(pool_of("local-0", pool), 0);
}

/* ---- bad configs --------------------------------------------------------- */

/* @M model path, @N cluster name, @C/@W endpoints. */
#define BASE_HEAD "model:\n  path: @M\ncluster:\n  name: @N\n"
#define BASE_EPS                                                              \
	"coordinator:\n  client_endpoint: @C\n  worker_endpoint: @W\n"
#define BASE BASE_HEAD BASE_EPS

static const struct {
	const char *name;
	const char *text; /* NULL: the huge file */
	int line, col;    /* of the reported position */
	const char *says; /* a word of the message */
} bad_cfgs[] = {
	{"yaml syntax", BASE "kv:\n  blocks: [1, 2\n", 10, 1, "YAML syntax"},
	{"tab indentation", "model:\n\tpath: @M\n", 2, 1, "tab"},
	{"unknown top-level key", BASE "kvv:\n  blocks: 8\n", 8, 1,
	 "unknown key 'kvv'"},
	{"unknown key", BASE "kv:\n  blokcs: 8\n", 9, 3, "unknown key 'blokcs'"},
	{"duplicate key", BASE "kv:\n  blocks: 8\n  blocks: 9\n", 10, 3,
	 "duplicate key 'blocks'"},
	{"duplicate section", BASE "kv:\n  blocks: 8\nkv:\n  dtype: f32\n", 10,
	 1, "duplicate key 'kv'"},
	{"string for an integer", BASE "kv:\n  blocks: lots\n", 9, 11,
	 "integer"},
	{"mapping for an integer", BASE "kv:\n  blocks:\n    a: 1\n", 10, 5,
	 "got a mapping"},
	{"scalar for a section", BASE "kv: 5\n", 8, 5, "must be a mapping"},
	{"zero blocks", BASE "kv:\n  blocks: 0\n", 9, 11,
	 "kv.blocks: must be in 1..16777216, got 0"},
	{"integer overflow", BASE "kv:\n  blocks: 99999999999999999999999\n",
	 9, 11, "overflows"},
	{"negative interval", BASE "heartbeat:\n  interval_ms: -5\n", 9, 16,
	 ">= 1"},
	{"unknown dtype", BASE "kv:\n  dtype: f64\n", 9, 10, "dtype"},
	{"deep nesting",
	 BASE "kv:\n  blocks: [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]\n", 9,
	 25, "deeper"},
	{"empty file", "", 1, 1, "empty"},
	{"comment only", "# nothing here\n", 1, 1, "empty"},
	{"alias", BASE "kv:\n  blocks: &b 8\n  block_tokens: *b\n", 9, 11,
	 "anchors"},
	{"two documents", BASE "---\n" BASE, 8, 1, "second YAML document"},
	{"missing cluster", "model:\n  path: @M\n", 1, 1,
	 "missing required key 'cluster'"},
	{"empty cluster name", "model:\n  path: @M\ncluster:\n  name:\n", 4,
	 8, "empty value"},
	{"bad cluster name", "model:\n  path: @M\ncluster:\n  name: a/b\n", 4,
	 9, "cluster.name"},
	{"bad endpoint", BASE_HEAD "coordinator:\n  client_endpoint: nonsense\n",
	 6, 20, "not an endpoint"},
	{"NUL byte", BASE "kv:\n  blocks: 8\0\n", 9, 12, "control character"},
	{"huge file", NULL, 1, 1, "1 MiB"},
};

/* Expands the placeholders into path; ports are port, port+1. */
static void write_cfg(const char *path, const char *text, size_t len,
		      const char *name, int port, int huge)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '@' && i + 1 < len) {
			switch (text[++i]) {
			case 'M': fputs(model_path, f); continue;
			case 'N': fputs(name, f); continue;
			case 'C': fprintf(f, "tcp://127.0.0.1:%d", port);
				  continue;
			case 'W': fprintf(f, "tcp://127.0.0.1:%d", port + 1);
				  continue;
			default: i--; break;
			}
		}
		fputc(text[i], f);
	}
	if (huge) { /* valid YAML: 1 MiB + of comments */
		char line[101];

		memset(line, 'x', 99);
		line[0] = '#';
		line[99] = '\n';
		line[100] = '\0';
		for (int i = 0; i < 11000; i++)
			fputs(line, f);
	}
	fclose(f);
}

/* A free pair below the ephemeral range (32768..) and below the ports
 * the cluster tests pick (20000..), so nothing else takes it meanwhile. */
static int test_port(void)
{
	for (int k = 0; k < 100; k++) {
		int p = 10000 +
			(int)((getpid() * 31 + wire_now_ms() + k * 7) % 5000) *
				2;

		if (port_free(p) && port_free(p + 1))
			return p;
	}
	fail_msg("no free port pair in 10000..19999");
	return -1;
}

/* Both programs on one bad input: exit non-zero at once, say where, bind
 * nothing, create no shm. want_pos: "path:line:" or "path:line:col: ";
 * NULL: the message must name path. */
static void expect_refusal(const char *what, const char *cfg_path,
			   const char *name, int port, const char *want_pos,
			   const char *says)
{
	char *cargv[] = {cu_bin("coordinator"), "--config", (char *)cfg_path,
			 NULL};
	char *wargv[] = {cu_bin("worker"), "--config", (char *)cfg_path,
			 "--id", "w1", NULL};
	char *const *argvs[2] = {cargv, wargv};
	char prefix[96], before[32][128], after[32][128];

	snprintf(prefix, sizeof(prefix), "quorum-%s@", name);
	for (int p = 0; p < 2; p++) {
		run_res r;
		int nb = shm_list(prefix, before, 32), na;

		run(argvs[p], 1, 0, &r);
		na = shm_list(prefix, after, 32);
		if (!r.exited || r.status == 0)
			fail_msg("%s, %s: %s (status %d)\n%s", what,
				 p ? "worker" : "coordinator",
				 r.exited ? "exited 0" : "did not exit",
				 r.status, r.err);
		if (r.status >= 126)
			fail_msg("%s: not run (status %d): %s", what, r.status,
				 r.err);
		if (!strstr(r.err, want_pos ? want_pos : cfg_path))
			fail_msg("%s, %s: want '%s' in:\n%s", what,
				 p ? "worker" : "coordinator",
				 want_pos ? want_pos : cfg_path, r.err);
		if (says && *says && !strstr(r.err, says))
			fail_msg("%s: want '%s' in:\n%s", what, says, r.err);
		if (count_lines(r.err) != 1)
			fail_msg("%s, %s: want one line:\n%s", what,
				 p ? "worker" : "coordinator", r.err);
		if (r.bound || r.connected || r.shm_made)
			fail_msg("%s, %s: bound %d connected %d shm %d", what,
				 p ? "worker" : "coordinator", r.bound,
				 r.connected, r.shm_made);
		if (na != nb)
			fail_msg("%s: /dev/shm %s*: %d names, was %d", what,
				 prefix, na, nb);
		if (!port_free(port) || !port_free(port + 1))
			fail_msg("%s: port %d or %d is taken", what, port,
				 port + 1);
	}
}

static void bad_configs(void **state)
{
	char path[PATH_MAX + 64], name[32], pos[PATH_MAX + 128];

	(void)state;
	assert_true(have_strace());
	snprintf(name, sizeof(name), "hyg%d", (int)getpid() % 100000);
	for (size_t i = 0; i < sizeof(bad_cfgs) / sizeof(bad_cfgs[0]); i++) {
		const char *text = bad_cfgs[i].text;
		size_t len = text ? strlen(text) : 0;
		int port = test_port();

		if (!strcmp(bad_cfgs[i].name, "NUL byte"))
			len = strlen(text) + 2; /* "8\0\n" */
		snprintf(path, sizeof(path), "%s/bad-%zu.yaml", cu_tmpdir, i);
		write_cfg(path, text ? text : BASE, text ? len : strlen(BASE),
			  name, port, !text);
		snprintf(pos, sizeof(pos), "%s:%d:%d: ", path,
			 bad_cfgs[i].line, bad_cfgs[i].col);
		expect_refusal(bad_cfgs[i].name, path, name, port, pos,
			       bad_cfgs[i].says);
		unlink(path);
	}
	/* a missing config file */
	snprintf(path, sizeof(path), "%s/none.yaml", cu_tmpdir);
	expect_refusal("missing config", path, name, test_port(), NULL, "");
}

/* An ipc:// endpoint is one process's: another's bind of it fails as a
 * tcp port in use does (EADDRINUSE, naming the lock), where ZeroMQ alone
 * took the socket file over and left the first listener unreachable;
 * the holder itself may bind it again; once it is gone, the path is
 * free. */
static void ipc_endpoint_claimed(void **state)
{
	char ep[PATH_MAX + 16];
	void *ctx = zmq_ctx_new(), *a = NULL, *b = NULL;
	int st;
	pid_t pid;

	(void)state;
	snprintf(ep, sizeof(ep), "ipc://%s/claimed.sock", cu_tmpdir);
	assert_int_equal(wire_bind(ctx, ZMQ_ROUTER, ep, 0, &a), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		void *c2 = zmq_ctx_new(), *x = NULL;
		int rc = wire_bind(c2, ZMQ_ROUTER, ep, 0, &x);

		_exit(rc && errno == EADDRINUSE &&
		      strstr(qerr_detail(), "another process holds") ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* the holder rebinds it */
	wire_close(&a);
	assert_int_equal(wire_bind(ctx, ZMQ_ROUTER, ep, 0, &b), 0);
	wire_close(&b);
	zmq_ctx_term(ctx);
	/* a process that held it and ended leaves it free */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		void *c2 = zmq_ctx_new(), *x = NULL;
		char ep2[PATH_MAX + 16];

		snprintf(ep2, sizeof(ep2), "ipc://%s/freed.sock", cu_tmpdir);
		_exit(wire_bind(c2, ZMQ_ROUTER, ep2, 0, &x) ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	{
		char ep2[PATH_MAX + 16];

		ctx = zmq_ctx_new();
		snprintf(ep2, sizeof(ep2), "ipc://%s/freed.sock", cu_tmpdir);
		assert_int_equal(wire_bind(ctx, ZMQ_ROUTER, ep2, 0, &a), 0);
		wire_close(&a);
		zmq_ctx_term(ctx);
	}
}

/* The positive control: with a good config the trace sees the bind (so a
 * bad config's empty trace means something). */
static void good_config_binds(void **state)
{
	char path[PATH_MAX + 64], name[32];
	char *argv[] = {cu_bin("coordinator"), "--config", path, NULL};
	int port = test_port(), fds[2];
	pid_t pid;
	int64_t end;
	char tpath[PATH_MAX + 32], line[4096];
	int bound = 0;
	FILE *f;

	(void)state;
	assert_true(have_strace());
	snprintf(name, sizeof(name), "hyg%d", (int)getpid() % 100000);
	snprintf(path, sizeof(path), "%s/good.yaml", cu_tmpdir);
	write_cfg(path, BASE, strlen(BASE), name, port, 0);
	snprintf(tpath, sizeof(tpath), "%s/good-trace.txt", cu_tmpdir);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *targv[] = {"/usr/bin/strace", "-f", "-qq", "-e",
				 "trace=bind,listen", "-e", "signal=none", "-o",
				 tpath, argv[0], argv[1], argv[2], NULL};

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		dup2(fds[1], 2);
		execv(targv[0], targv);
		_exit(127);
	}
	close(fds[1]);
	/* bound once the port is taken (or the coordinator is gone, which
	 * fails below): the wait is for that event, the bound a hang guard
	 * only — under ASan, strace -f and a loaded machine the start took
	 * over 10 s in CI */
	end = wire_now_ms() + 2 * RUN_MS;
	while (wire_now_ms() < end && port_free(port) &&
	       waitpid(pid, NULL, WNOHANG) == 0)
		usleep(20000);
	assert_false(port_free(port));
	kill(-pid, SIGTERM);
	end = wire_now_ms() + 5000;
	while (wire_now_ms() < end && waitpid(pid, NULL, WNOHANG) == 0)
		usleep(20000);
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(fds[0]);
	f = fopen(tpath, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		bound |= strstr(line, " bind(") != NULL;
	fclose(f);
	unlink(tpath);
	unlink(path);
	assert_true(bound);
}

/* ---- bad model files ----------------------------------------------------- */

typedef enum { M_MISSING, M_DIR, M_FIFO, M_EMPTY, M_TEXT, M_TRUNC_HEAD,
	       M_TRUNC_HALF, M_UNREADABLE, M_CTX_BIG } model_case;

static const struct {
	const char *name;
	model_case k;
} bad_models[] = {
	{"missing", M_MISSING},
	{"a directory", M_DIR},
	{"a FIFO", M_FIFO},
	{"empty", M_EMPTY},
	{"not GGUF", M_TEXT},
	{"truncated header", M_TRUNC_HEAD},
	{"truncated data", M_TRUNC_HALF},
	{"unreadable (uid 65534)", M_UNREADABLE},
	/* past the loader's bound: the coordinator had taken it (and
	 * shown 2^31 as a negative context) while every worker refused */
	{"context_length 2^24 + 1", M_CTX_BIG},
};

static void copy_prefix(const char *from, const char *to, off_t n)
{
	int a = open(from, O_RDONLY), b;
	char buf[65536];

	assert_true(a >= 0);
	b = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(b >= 0);
	while (n > 0) {
		ssize_t r = read(a, buf, n < (off_t)sizeof(buf) ? (size_t)n
							      : sizeof(buf));

		assert_true(r > 0);
		assert_int_equal(write(b, buf, (size_t)r), r);
		n -= r;
	}
	close(a);
	close(b);
}

/* Makes the bad model file of case k at path (removed by the caller). */
static void make_bad_model(model_case k, const char *path)
{
	struct stat st;
	int fd;

	assert_int_equal(stat(model_path, &st), 0);
	switch (k) {
	case M_MISSING: break;
	case M_DIR: assert_int_equal(mkdir(path, 0755), 0); break;
	case M_FIFO: assert_int_equal(mkfifo(path, 0644), 0); break;
	case M_EMPTY:
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		assert_true(fd >= 0);
		close(fd);
		break;
	case M_TEXT:
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, "model:\n  this is not gguf\n", 26),
				 26);
		close(fd);
		break;
	case M_TRUNC_HEAD: copy_prefix(model_path, path, 100); break;
	case M_TRUNC_HALF: copy_prefix(model_path, path, st.st_size / 2); break;
	case M_UNREADABLE:
		copy_prefix(model_path, path, st.st_size);
		assert_int_equal(chmod(path, 0), 0);
		break;
	case M_CTX_BIG: {
		/* the key's u32 value, behind its name and type */
		static const char key[] = ".context_length";
		uint32_t v = GGUF_MAX_CONTEXT + 1u;
		size_t n = 0;
		char *f, *at;

		copy_prefix(model_path, path, st.st_size);
		assert_non_null(f = tu_slurp(path, &n));
		assert_non_null(at = memmem(f, n, key, sizeof(key) - 1));
		fd = open(path, O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, &v, 4, at - f + sizeof(key) - 1 + 4),
				 4);
		close(fd);
		free(f);
		break;
	}
	}
}

static void remove_bad_model(const char *path)
{
	if (unlink(path) != 0)
		rmdir(path);
}

/* The coordinator itself refuses a bad model at start, in one line that
 * names the model, the config and the key that named it. */
static void coordinator_bad_model(void **state)
{
	char mpath[PATH_MAX + 64], cpath[PATH_MAX + 64], name[32];
	char *argv[] = {cu_bin("coordinator"), "--config", cpath, NULL};

	(void)state;
	snprintf(name, sizeof(name), "hyg%d", (int)getpid() % 100000);
	for (size_t i = 0; i < sizeof(bad_models) / sizeof(bad_models[0]);
	     i++) {
		int port = test_port(), nobody = bad_models[i].k == M_UNREADABLE;
		char prefix[64], text[2 * PATH_MAX];
		run_res r;

		snprintf(mpath, sizeof(mpath), "%s/bad-model-%zu.gguf",
			 cu_tmpdir, i);
		snprintf(cpath, sizeof(cpath), "%s/bad-model-%zu.yaml",
			 cu_tmpdir, i);
		make_bad_model(bad_models[i].k, mpath);
		snprintf(text, sizeof(text),
			 "model:\n  path: %s\ncluster:\n  name: %s\n"
			 "coordinator:\n  client_endpoint: tcp://127.0.0.1:%d\n"
			 "  worker_endpoint: tcp://127.0.0.1:%d\n",
			 mpath, name, port, port + 1);
		{
			FILE *f = fopen(cpath, "w");

			assert_non_null(f);
			fputs(text, f);
			fclose(f);
			chmod(cpath, 0644);
		}
		if (nobody && geteuid() != 0) {
			/* chmod 000 works as a non-root user directly */
			nobody = 0;
		}
		run(argv, !nobody, nobody, &r);
		snprintf(prefix, sizeof(prefix), "quorum-%s@", name);
		if (!r.exited || r.status == 0 || r.status >= 126)
			fail_msg("%s: coordinator %s (status %d):\n%s",
				 bad_models[i].name,
				 r.exited ? "exited" : "did not exit",
				 r.status, r.err);
		/* one line naming the model, the config and its key */
		if (count_lines(r.err) != 1 || !strstr(r.err, mpath) ||
		    strncmp(r.err, "coordinator: ", 13) ||
		    !strstr(r.err, cpath) || !strstr(r.err, ": model.path: "))
			fail_msg("%s: want one line naming %s, %s and "
				 "model.path:\n%s", bad_models[i].name, mpath,
				 cpath, r.err);
		if (r.bound || r.shm_made || !port_free(port))
			fail_msg("%s: bound or made shm", bad_models[i].name);
		remove_bad_model(mpath);
		unlink(cpath);
	}
}

/* Sampling defaults this model cannot serve (max_new_tokens over its
 * context, a logit_bias id outside its vocabulary: every request relying
 * on them would be refused): the coordinator refuses the config at start,
 * --check-config too, in one line naming the key, the value and the
 * model's limit, before it binds anything. */
static void coordinator_defaults_vs_model(void **state)
{
	static const struct {
		const char *sampling, *at, *says;
	} cases[] = {
		{"max_new_tokens: 5000", ":9:19: ", "sampling.max_new_tokens = "
		 "5000: over the model's context (4096 tokens)"},
		{"logit_bias: \"3:1,100000:-5\"", ":9:15: ", "sampling.logit_bias: "
		 "token 100000 is not in the model's vocabulary"},
	};
	char cpath[PATH_MAX + 64], name[32], where[PATH_MAX + 96];

	(void)state;
	snprintf(name, sizeof(name), "hyg%d", (int)getpid() % 100000);
	snprintf(cpath, sizeof(cpath), "%s/defaults.yaml", cu_tmpdir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int check = 0; check < 2; check++) {
			char *argv[] = {cu_bin("coordinator"), "--config", cpath,
					check ? "--check-config" : NULL, NULL};
			int port = test_port();
			FILE *f = fopen(cpath, "w");
			run_res r;

			assert_non_null(f);
			fprintf(f, "model:\n  path: %s\ncluster:\n  name: %s\n"
				"coordinator:\n  client_endpoint: "
				"tcp://127.0.0.1:%d\n  worker_endpoint: "
				"tcp://127.0.0.1:%d\nsampling:\n  %s\n",
				model_path, name, port, port + 1,
				cases[i].sampling);
			fclose(f);
			run(argv, 1, 0, &r);
			if (!r.exited || r.status == 0 || r.status >= 126)
				fail_msg("%s%s: coordinator %s (status %d):\n%s",
					 cases[i].sampling,
					 check ? " --check-config" : "",
					 r.exited ? "exited" : "did not exit",
					 r.status, r.err);
			/* the key's place in the file, as the file's own
			 * errors give it */
			snprintf(where, sizeof(where), "%s%s%s", cpath,
				 cases[i].at, cases[i].says);
			if (count_lines(r.err) != 1 || !strstr(r.err, where))
				fail_msg("%s: want one line with '%s':\n%s",
					 cases[i].sampling, where, r.err);
			if (r.bound || r.shm_made || !port_free(port))
				fail_msg("%s: bound or made shm",
					 cases[i].sampling);
			unlink(cpath);
		}
	}
}

/* A worker with a bad model says so in one line and exits; it never
 * registers, and a client of that cluster gets NO_CAPACITY at once. */
static void worker_bad_model(void **state)
{
	cu_cfg k = cu_cfg_defaults(model_path);
	char mpath[PATH_MAX + 64], wcfg[PATH_MAX + 64];

	(void)state;
	assert_int_equal(cu_start(&cl, &k), 0);
	for (size_t i = 0; i < sizeof(bad_models) / sizeof(bad_models[0]);
	     i++) {
		char *argv[] = {cu_bin("worker"), "--config", wcfg, "--id",
				"wbad", "--host", "h1", NULL};
		char line[PATH_MAX + 128], buf[8192];
		int nobody = bad_models[i].k == M_UNREADABLE && geteuid() == 0;
		FILE *in, *out;
		run_res r;
		Quorum__ClientReply *rep;
		void *s;
		cu_ask a = {"What is 2 + 2?", 2, 1, 0.9f, 0.95f, 0, 4, 0, 0,
			    NULL, NULL};
		int64_t t0;

		snprintf(mpath, sizeof(mpath), "%s/wbad-model-%zu.gguf",
			 cu_tmpdir, i);
		snprintf(wcfg, sizeof(wcfg), "%s/wbad-%zu.yaml", cu_tmpdir, i);
		make_bad_model(bad_models[i].k, mpath);
		/* the cluster's config with the model path replaced */
		in = fopen(cl.config, "r");
		out = fopen(wcfg, "w");
		assert_non_null(in);
		assert_non_null(out);
		while (fgets(line, sizeof(line), in)) {
			if (!strncmp(line, "  path: ", 8))
				fprintf(out, "  path: %s\n", mpath);
			else
				fputs(line, out);
		}
		fclose(in);
		fclose(out);
		chmod(wcfg, 0644);
		run(argv, 0, nobody, &r);
		snprintf(buf, sizeof(buf), "worker wbad: %s", mpath);
		if (!r.exited || r.status == 0 || r.status >= 126)
			fail_msg("%s: worker %s (status %d):\n%s",
				 bad_models[i].name,
				 r.exited ? "exited" : "did not exit",
				 r.status, r.err);
		if (count_lines(r.err) != 1 || strncmp(r.err, buf, strlen(buf)))
			fail_msg("%s: want one line '%s...':\n%s",
				 bad_models[i].name, buf, r.err);
		/* a file read and found malformed says WIRE_WORKER_EXIT_MODEL
		 * (restarting cannot help); one it could not read, 1 */
		{
			int malformed = bad_models[i].k == M_CTX_BIG ||
					bad_models[i].k == M_EMPTY ||
					bad_models[i].k == M_TEXT ||
					bad_models[i].k == M_TRUNC_HEAD ||
					bad_models[i].k == M_TRUNC_HALF;

			if (r.status != (malformed ? WIRE_WORKER_EXIT_MODEL
						   : 1))
				fail_msg("%s: exit status %d, want %d",
					 bad_models[i].name, r.status,
					 malformed ? WIRE_WORKER_EXIT_MODEL
						   : 1);
		}
		assert_int_equal(pool_of("wbad", line), 0);
		remove_bad_model(mpath);
		unlink(wcfg);

		/* no worker registered: the client hears so */
		s = cu_client(&cl);
		assert_non_null(s);
		t0 = wire_now_ms();
		assert_int_equal(cu_ask_send(s, 9, &a), 0);
		/* (after the no-worker grace: liveness x interval +
		 * reconnect_min_ms; the time is reported, not bounded) */
		rep = cu_recv(s, CU_WAIT_MS);
		if (!rep)
			fail_msg("%s: no reply", bad_models[i].name);
		assert_int_equal(rep->status,
				 QUORUM__STATUS__STATUS_NO_CAPACITY);
		fprintf(stderr, "# %s: NO_CAPACITY after %lld ms\n",
			bad_models[i].name, (long long)(wire_now_ms() - t0));
		quorum__client_reply__free_unpacked(rep, NULL);
		zmq_close(s);
	}
}

/* The coordinator and the worker take their long options whole: a
 * prefix ("--conf" for --config) is refused naming the option it
 * starts, as are a missing --config, a stray argument and a worker's
 * host label of characters ids may not hold, each with its line before
 * the usage (exit 2, nothing bound). */
static void programs_usage(void **state)
{
	static const struct {
		const char *prog, *args[4], *says;
	} rows[] = {
		{"coordinator", {"--conf", "x.yaml", NULL},
		 "coordinator: unknown option '--conf' (options are taken "
		 "whole: --config?)"},
		{"coordinator", {"--config", "x.yaml", "--check"},
		 "unknown option '--check' (options are taken whole: "
		 "--check-config?)"},
		{"coordinator", {NULL}, "coordinator: --config FILE is required"},
		{"coordinator", {"--config", "x.yaml", "extra"},
		 "coordinator: unexpected argument 'extra'"},
		{"worker", {"--conf", "x.yaml", NULL},
		 "worker: unknown option '--conf' (options are taken whole: "
		 "--config?)"},
		/* a host label the coordinator would refuse, at once (it had
		 * made a pool first) */
		{"worker", {"--config", "x.yaml", "--host", "h@x"},
		 "worker: bad --id or --host 'h@x'"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		char *argv[6] = {cu_bin(rows[i].prog)};
		run_res r;

		for (int k = 0; k < 4 && rows[i].args[k]; k++)
			argv[k + 1] = (char *)rows[i].args[k];
		run(argv, 0, 0, &r);
		if (!r.exited || r.status != 2 || !strstr(r.err, rows[i].says))
			fail_msg("%s %s: status %d, want 2 and '%s':\n%s",
				 rows[i].prog, rows[i].args[0] ? rows[i].args[0]
							       : "",
				 r.status, rows[i].says, r.err);
	}
}

/* quorum serve refuses a key file that is not a regular file of mode
 * 0600 at once, one line naming it: a FIFO (open() had blocked until a
 * writer came), a directory, a file others can read; and one without a
 * key (comments only, as deploy/k8s's Secret ships), saying how to make
 * one. */
static void serve_bad_key_files(void **state)
{
	static const struct {
		const char *key, *kind, *says;
	} rows[] = {
		{"api_keys_file", "fifo", "must be a regular file of mode 0600"},
		{"admin_keys_file", "fifo",
		 "must be a regular file of mode 0600"},
		{"api_keys_file", "dir", "must be a regular file of mode 0600"},
		{"api_keys_file", "0644", "must be a regular file of mode 0600"},
		{"api_keys_file", "empty",
		 "no keys (an empty key file would lock everyone out; `quorum "
		 "keygen --api-key FILE` writes one)"},
	};
	char cpath[PATH_MAX + 64], kpath[PATH_MAX + 64], akpath[PATH_MAX + 64];
	char *argv[] = {cu_bin("quorum"), "serve", "--config", cpath, NULL};

	(void)state;
	snprintf(cpath, sizeof(cpath), "%s/serve-keys.yaml", cu_tmpdir);
	snprintf(kpath, sizeof(kpath), "%s/serve-keys", cu_tmpdir);
	snprintf(akpath, sizeof(akpath), "%s/serve-api-keys", cu_tmpdir);
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		int admin = !strcmp(rows[i].key, "admin_keys_file"), port =
			test_port();
		char text[4 * PATH_MAX];
		run_res r;
		FILE *f;

		if (!strcmp(rows[i].kind, "fifo")) {
			assert_int_equal(mkfifo(kpath, 0600), 0);
		} else if (!strcmp(rows[i].kind, "dir")) {
			assert_int_equal(mkdir(kpath, 0700), 0);
		} else if (!strcmp(rows[i].kind, "empty")) {
			assert_non_null(f = fopen(kpath, "w"));
			fputs("# one key per line: none here\n", f);
			fclose(f);
			assert_int_equal(chmod(kpath, 0600), 0);
		} else {
			assert_non_null(f = fopen(kpath, "w"));
			fputs("sk-test-key\n", f);
			fclose(f);
			assert_int_equal(chmod(kpath, 0644), 0);
		}
		/* admin keys need api keys: a good file of those */
		assert_non_null(f = fopen(akpath, "w"));
		fputs("sk-good-key\n", f);
		fclose(f);
		assert_int_equal(chmod(akpath, 0600), 0);
		snprintf(text, sizeof(text),
			 "model:\n  path: %s\ncluster:\n  name: hygk%d\n"
			 "coordinator:\n  client_endpoint: tcp://127.0.0.1:%d\n"
			 "  worker_endpoint: tcp://127.0.0.1:%d\n"
			 "http:\n  listen: 127.0.0.1:%d\n  api_keys_file: %s\n"
			 "%s%s%s",
			 model_path, (int)getpid() % 100000, port, port + 1,
			 port + 2, admin ? akpath : kpath,
			 admin ? "  admin_keys_file: " : "", admin ? kpath : "",
			 admin ? "\n" : "");
		assert_non_null(f = fopen(cpath, "w"));
		fputs(text, f);
		fclose(f);
		run(argv, 0, 0, &r);
		if (!r.exited || r.status != 1)
			fail_msg("%s %s: %s (status %d)\n%s", rows[i].key,
				 rows[i].kind, r.exited ? "exit" : "no exit",
				 r.status, r.err);
		if (!strstr(r.err, kpath) || !strstr(r.err, rows[i].says) ||
		    count_lines(r.err) != 1)
			fail_msg("%s %s: want one line naming %s:\n%s",
				 rows[i].key, rows[i].kind, kpath, r.err);
		if (unlink(kpath))
			assert_int_equal(rmdir(kpath), 0);
	}
	unlink(akpath);
	unlink(cpath);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(kill9_restart_sweeps, teardown),
		cmocka_unit_test_teardown(killed_local_swept, teardown),
		cmocka_unit_test_teardown(ipc_endpoint_claimed, teardown),
		cmocka_unit_test_teardown(good_config_binds, teardown),
		cmocka_unit_test_teardown(bad_configs, teardown),
		cmocka_unit_test_teardown(coordinator_bad_model, teardown),
		cmocka_unit_test_teardown(coordinator_defaults_vs_model,
					  teardown),
		cmocka_unit_test_teardown(worker_bad_model, teardown),
		cmocka_unit_test_teardown(serve_bad_key_files, teardown),
		cmocka_unit_test_teardown(programs_usage, teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

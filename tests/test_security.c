/*
 * CurveZMQ on the cluster (common/net/curve.h): the key file format, `quorum
 * keygen`, and a real coordinator + local worker on loopback with curve
 * on: an allowed client is served the right answer (a gateway key may
 * name its users, another client may not); a plaintext client, a
 * client with an unknown key and raw bytes get nothing; a rogue worker
 * never registers; configs without an allowlist or with bad key files are
 * refused at start with nothing bound and no shared memory created.
 *
 * QUORUM_BIN is the CLI (its directory holds coordinator and worker).
 * Every wait is bounded; every child is killed in teardown.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zmq.h>
#include <cmocka.h>

#include "clusterutil.h"
#include "net/curve.h"
#include "infer/model.h"
#include "text/prompt.h"
#include "proto/quorum.pb-c.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "testutil.h"
#include "text/tok.h"
#include "net/wire.h"

extern char **environ;

#define WAIT_MS 30000
#define SILENCE_MS 1500 /* how long a refused peer is watched */
#define N_SAMPLES 4
#define MAX_NEW 12
#define SEED 77
#define QUESTION "What is 17 * 23? Answer with a number."

static char quorum_bin[PATH_MAX + 16]; /* cu_bindir: its directory */
static char tmpdir[PATH_MAX], model_path[PATH_MAX];
static sc_result ref;

/* ---- processes ------------------------------------------------------- */

static pid_t kids[8];
static int n_kids;

/* Spawns argv with stdout/stderr to files (NULL: inherited). */
static pid_t spawn_io(char *const argv[], const char *out, const char *err)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc;

	posix_spawn_file_actions_init(&fa);
	if (out)
		posix_spawn_file_actions_addopen(&fa, 1, out,
						 O_WRONLY | O_CREAT | O_TRUNC,
						 0644);
	if (err)
		posix_spawn_file_actions_addopen(&fa, 2, err,
						 O_WRONLY | O_CREAT | O_TRUNC,
						 0644);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -1;
	if (n_kids < (int)(sizeof(kids) / sizeof(kids[0])))
		kids[n_kids++] = pid;
	return pid;
}

/* Exit status of pid within ms, or -1 (still running). */
static int wait_exit(pid_t pid, int ms)
{
	int64_t end = wire_now_ms() + ms;
	int st;

	while (wire_now_ms() < end) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			for (int i = 0; i < n_kids; i++)
				if (kids[i] == pid)
					kids[i] = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st)
					     : 128 + WTERMSIG(st);
		}
		usleep(20000);
	}
	return -1;
}

static void kill_wait(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	if (wait_exit(pid, 5000) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

static void kill_all(void)
{
	for (int i = 0; i < n_kids; i++) {
		kill_wait(kids[i]);
		kids[i] = 0;
	}
	n_kids = 0;
}

/* Runs argv to completion (bounded) and returns its exit status. */
static int run(char *const argv[], const char *out, const char *err)
{
	pid_t pid = spawn_io(argv, out, err);
	int rc;

	assert_true(pid > 0);
	rc = wait_exit(pid, 20000);
	if (rc < 0) {
		kill_wait(pid);
		fail_msg("%s did not finish", argv[0]);
	}
	return rc;
}

/* The file at path, or "" where it cannot be read: valid until the
 * next call. */
static const char *slurp(const char *path)
{
	static char *last;

	free(last);
	last = tu_slurp(path, NULL);
	return last ? last : "";
}

static const char *tpath(const char *name)
{
	static char p[4][PATH_MAX + 64];
	static int k;

	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", tmpdir, name);
	return p[k];
}

static int keygen(const char *name)
{
	char base[PATH_MAX + 64];
	char *argv[] = {quorum_bin, "keygen", "-o", base, NULL};

	snprintf(base, sizeof(base), "%s/%s", tmpdir, name);
	return run(argv, tpath("keygen.out"), tpath("keygen.err"));
}

/* A listening TCP socket on 127.0.0.1:port, or -1 when taken. */
static int hold_port(int port)
{
	struct sockaddr_in a = {0};
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 4)) {
		close(s);
		return -1;
	}
	return s;
}

static int port_free(int port)
{
	int s = hold_port(port);

	if (s >= 0)
		close(s);
	return s >= 0;
}

static int pick_port(void)
{
	for (int i = 0; i < 64; i++) {
		int p = 20001 + (int)((getpid() * 31 + i * 7919 + wire_now_ms()) %
				      20000) * 2;

		if (port_free(p) && port_free(p + 1))
			return p;
	}
	fail_msg("no free port pair");
	return -1;
}

static char cluster_name[32];

/* Writes a config: curve on, keys from tmpdir, then `security` lines. */
static const char *write_config(const char *file, int port, int local,
				const char *security)
{
	const char *path = tpath(file);
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f,
		"model:\n  path: %s\n"
		"cluster:\n  name: %s\n"
		"coordinator:\n  client_endpoint: tcp://127.0.0.1:%d\n"
		"  worker_endpoint: tcp://127.0.0.1:%d\n"
		"security:\n  curve: true\n%s"
		"kv:\n  block_tokens: 16\n  blocks: 256\n  dtype: f32\n"
		"limits:\n  max_n: 16\n  max_prompt_tokens: 200\n"
		"  request_timeout_ms: 30000\n"
		"heartbeat:\n  interval_ms: 200\n  liveness: 25\n"
		"  reconnect_min_ms: 200\n  reconnect_max_ms: 1000\n"
		"workers:\n  local: %d\n  threads: 1\n  slots: 8\n",
		model_path, cluster_name, port, port + 1, security, local);
	fclose(f);
	return path;
}

/* The security section of a good config (keys made in group_setup). */
#define GOOD_SERVER                                                      \
	"  server_public_key_file: server.pub\n"                         \
	"  server_secret_key_file: server.key\n"
#define GOOD_WORKER                                                      \
	"  worker_public_key_file: worker.pub\n"                         \
	"  worker_secret_key_file: worker.key\n"
#define GOOD_LISTS                                                       \
	"  client_keys: [alice.pub]\n"                                   \
	"  worker_keys: [worker.pub]\n"

/* Shared memory segments of this test's cluster name. */
static int count_pools(int unlink_them)
{
	char prefix[64];
	size_t n = (size_t)snprintf(prefix, sizeof(prefix), "quorum-%s@",
				    cluster_name);
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	int k = 0;

	while (d && (de = readdir(d))) {
		char name[300];

		if (strncmp(de->d_name, prefix, n))
			continue;
		k++;
		snprintf(name, sizeof(name), "/%s", de->d_name);
		if (unlink_them)
			shm_unlink(name);
	}
	if (d)
		closedir(d);
	return k;
}

/* ---- clients --------------------------------------------------------- */

/* A DEALER to the client endpoint; with keys (secret file name in
 * tmpdir) a CURVE client of server.pub; monitored when mon is set. */
static void *dealer(int port, const char *secret, void **mon)
{
	void *s = zmq_socket(cu_zctx, ZMQ_DEALER);
	int zero = 0, to = 200;
	char ep[64];
	static int seq;

	assert_non_null(s);
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof(to));
	zmq_setsockopt(s, ZMQ_SNDTIMEO, &to, sizeof(to));
	if (secret) {
		curve_sock k;

		if (curve_sock_client(tpath("server.pub"), tpath(secret), NULL,
				      &k))
			fail_msg("%s", qerr_detail());
		assert_int_equal(curve_sock_apply(s, &k), 0);
		curve_sock_wipe(&k);
	}
	if (mon) {
		char mep[64];

		snprintf(mep, sizeof(mep), "inproc://mon-%d", ++seq);
		assert_int_equal(zmq_socket_monitor(s, mep, ZMQ_EVENT_ALL), 0);
		*mon = zmq_socket(cu_zctx, ZMQ_PAIR);
		zmq_setsockopt(*mon, ZMQ_LINGER, &zero, sizeof(zero));
		assert_int_equal(zmq_connect(*mon, mep), 0);
	}
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
	assert_int_equal(zmq_connect(s, ep), 0);
	return s;
}

/* Reads monitor events for up to ms; returns the OR of the events. */
static unsigned monitor_events(void *mon, int ms)
{
	int64_t end = wire_now_ms() + ms;
	unsigned seen = 0;

	while (wire_now_ms() < end) {
		zmq_pollitem_t it = {mon, 0, ZMQ_POLLIN, 0};
		zmq_msg_t m;

		if (zmq_poll(&it, 1, 50) <= 0)
			continue;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, mon, 0) >= 6) {
			uint16_t ev;

			memcpy(&ev, zmq_msg_data(&m), 2);
			seen |= ev;
		}
		zmq_msg_close(&m);
		/* the second frame: the endpoint */
		zmq_msg_init(&m);
		zmq_msg_recv(&m, mon, ZMQ_DONTWAIT);
		zmq_msg_close(&m);
	}
	return seen;
}

/* Sends q; waits up to ms for one reply (NULL when none came). */
static Quorum__ClientReply *call(void *s, const Quorum__ClientRequest *q,
				 int ms)
{
	size_t n = quorum__client_request__get_packed_size(q);
	uint8_t *b = malloc(n + 1);
	int64_t end = wire_now_ms() + ms;
	Quorum__ClientReply *r = NULL;

	quorum__client_request__pack(q, b);
	zmq_send(s, b, n, ZMQ_DONTWAIT); /* no pipe: lost, as for a client */
	free(b);
	while (!r && wire_now_ms() < end) {
		zmq_msg_t m;

		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, s, 0) >= 0)
			r = quorum__client_reply__unpack(NULL, zmq_msg_size(&m),
							 zmq_msg_data(&m));
		zmq_msg_close(&m);
	}
	return r;
}

static Quorum__ClientReply *status(void *s, int ms)
{
	Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__StatusQuery sq = QUORUM__STATUS_QUERY__INIT;

	q.version = WIRE_VERSION;
	q.request_id = 9;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	q.status = &sq;
	return call(s, &q, ms);
}

/* An ask on behalf of user obo (NULL: none). */
static Quorum__ClientReply *ask_for(void *s, const char *obo, int ms);

static Quorum__ClientReply *ask(void *s, int ms)
{
	return ask_for(s, NULL, ms);
}

static Quorum__ClientReply *ask_for(void *s, const char *obo, int ms)
{
	Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__Ask a = QUORUM__ASK__INIT;
	Quorum__SamplingParams p = QUORUM__SAMPLING_PARAMS__INIT;

	p.has_n = p.has_seed = p.has_temperature = p.has_top_p = 1;
	p.has_top_k = p.has_max_new_tokens = 1;
	p.n = N_SAMPLES;
	p.seed = SEED;
	p.temperature = 0.9f;
	p.top_p = 0.95f;
	p.top_k = 0;
	p.max_new_tokens = MAX_NEW;
	a.question.data = (uint8_t *)QUESTION;
	a.question.len = strlen(QUESTION);
	a.params = &p;
	a.on_behalf_of = (char *)obo;
	q.version = WIRE_VERSION;
	q.request_id = 1234;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	q.ask = &a;
	return call(s, &q, ms);
}

/* Workers the coordinator reports to an allowed client, -1 on no reply. */
static int n_workers(int port)
{
	void *s = dealer(port, "alice.key", NULL);
	Quorum__ClientReply *r = status(s, 5000);
	int n = -1;

	if (r && r->body_case == QUORUM__CLIENT_REPLY__BODY_CLUSTER)
		n = (int)r->cluster->n_workers;
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
	return n;
}

/* ---- setup ----------------------------------------------------------- */

static int group_setup(void **state)
{
	const char *qb = getenv("QUORUM_BIN");
	char buf[PATH_MAX];
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	/* the cluster's defaults (early stopping, the answer format) but
	 * the settings the test's requests send */
	sc_params p = SC_PARAMS_DEFAULTS;
	sc_engine *e = NULL;
	model *m = NULL;
	tok *t = NULL;
	int32_t *ids = NULL;
	size_t n = 0;

	(void)state;
	p.sp.temperature = 0.9f;
	p.sp.top_k = 0;
	p.sp.top_p = 0.95f;
	p.seed = SEED;
	p.n = N_SAMPLES;
	p.max_new = MAX_NEW;
	signal(SIGPIPE, SIG_IGN);
	if (qb && *qb) {
		if (!realpath(qb, buf))
			return -1;
	} else {
		ssize_t k = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

		if (k < 0)
			return -1;
		buf[k] = '\0';
		*strrchr(buf, '/') = '\0';  /* B/tests -> B */
		strcat(buf, "/../quorum");
		if (!realpath(buf, cu_bindir))
			return -1;
		memcpy(buf, cu_bindir, sizeof(buf));
	}
	snprintf(quorum_bin, sizeof(quorum_bin), "%s", buf);
	snprintf(cu_bindir, sizeof(cu_bindir), "%s", dirname(buf));
	snprintf(cluster_name, sizeof(cluster_name), "sec%d",
		 (int)getpid() % 100000);
	snprintf(buf, sizeof(buf), "%s/security-XXXXXX", tu_tmpdir());
	if (!mkdtemp(buf) || !realpath(buf, tmpdir))
		return -1;
	if (tu_model(buf, sizeof(buf), "qwen2", "tiny", GGML_TYPE_Q8_0,
		     tu_chat_tokenizer(), 5) ||
	    !realpath(buf, model_path))
		return -1;
	/* the reference: what the cluster must answer */
	ep.n_threads = 1;
	ep.kv_dtype = KV_F32;
	if (model_load(model_path, &m) || tok_load(m->gguf, &t) ||
	    prompt_build(t, NULL, QUESTION, &ids, &n) ||
	    sc_engine_new(m, t, &ep, &e) || sc_run(e, ids, n, &p, &ref)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	sc_engine_free(&e);
	free(ids);
	tok_free(&t);
	model_free(&m);
	if (keygen("server") || keygen("worker") || keygen("alice") ||
	    keygen("mallory") || keygen("rogue") || keygen("guest") ||
	    keygen("gateway")) {
		fprintf(stderr, "setup: keygen failed: %s\n",
			slurp(tpath("keygen.err")));
		return -1;
	}
	cu_zctx = zmq_ctx_new();
	return cu_zctx ? 0 : -1;
}

static int group_teardown(void **state)
{
	char cmd[PATH_MAX + 32];

	(void)state;
	kill_all();
	count_pools(1);
	sc_run_result_fini(&ref);
	/* not zmq_ctx_term: it waits for every socket to be closed, and a
	 * failed assertion leaves its case's sockets open (the group would
	 * then hang instead of reporting the failure); the process ends
	 * next */
	if (cu_zctx)
		zmq_ctx_shutdown(cu_zctx);
	unlink(model_path);
	/* only files this test made live in tmpdir */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (tmpdir[0] == '/' && system(cmd) != 0)
		fprintf(stderr, "teardown: could not remove %s\n", tmpdir);
	return 0;
}

static int test_teardown(void **state)
{
	(void)state;
	kill_all();
	count_pools(1);
	return 0;
}

/* ---- the key file format ---------------------------------------------- */

#define PUB1 "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"

static const struct kcase {
	const char *name, *text;
	curve_kind kind;
	int rc;
	const char *detail; /* substring of qerr_detail(), or the key */
} kcases[] = {
	{"bare", PUB1, CURVE_PUBLIC, QERR_OK, PUB1},
	{"newline", PUB1 "\n", CURVE_PUBLIC, QERR_OK, PUB1},
	{"crlf_comments", "# a comment\r\n\r\n  " PUB1 " \r\n# end\r\n",
	 CURVE_PUBLIC, QERR_OK, PUB1},
	{"keygen_tag", CURVE_PUBLIC_TAG " (x)\n" PUB1 "\n", CURVE_PUBLIC,
	 QERR_OK, PUB1},
	{"empty", "", CURVE_PUBLIC, QERR_MISSING, "no key in the file"},
	{"only_comments", "# x\n#y\n", CURVE_SECRET, QERR_MISSING,
	 "no key in the file"},
	{"two_keys", PUB1 "\n" PUB1 "\n", CURVE_PUBLIC, QERR_FORMAT,
	 ":2: a second key line"},
	{"short", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf\n", CURVE_PUBLIC,
	 QERR_FORMAT, ":1: expected a public key of 40 Z85 characters, got 39"},
	{"bad_char", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf\"\n",
	 CURVE_PUBLIC, QERR_FORMAT, "not a valid Z85 key"},
	{"overflow", "$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$$\n",
	 CURVE_PUBLIC, QERR_FORMAT, "not a valid Z85 key"},
	{"secret_as_public", CURVE_SECRET_TAG " (quorum keygen)\n" PUB1 "\n",
	 CURVE_PUBLIC, QERR_FORMAT, "this is a secret key file; a public key"},
	{"public_as_secret", CURVE_PUBLIC_TAG "\n" PUB1 "\n", CURVE_SECRET,
	 QERR_FORMAT, "this is a public key file; a secret key"},
	{"nul", PUB1 "\0\n", CURVE_PUBLIC, QERR_FORMAT, "NUL byte"},
};

static void key_format(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(kcases) / sizeof(kcases[0]); i++) {
		const struct kcase *k = &kcases[i];
		char z85[CURVE_Z85_LEN + 1];
		size_t len = strlen(k->text) + (!strcmp(k->name, "nul") ? 2 : 0);
		int rc = curve_key_parse("k", k->text, len, k->kind, z85);

		if (rc != k->rc)
			fail_msg("%s: rc %d, want %d (%s)", k->name, rc, k->rc,
				 qerr_detail());
		if (rc == QERR_OK && strcmp(z85, k->detail))
			fail_msg("%s: key %s", k->name, z85);
		if (rc && !strstr(qerr_detail(), k->detail))
			fail_msg("%s: detail '%s' lacks '%s'", k->name,
				 qerr_detail(), k->detail);
	}
	{
		char big[CURVE_FILE_MAX + 2], z85[CURVE_Z85_LEN + 1];

		memset(big, '#', sizeof(big));
		assert_int_equal(curve_key_parse("k", big, sizeof(big),
						 CURVE_PUBLIC, z85),
				 QERR_RANGE);
	}
}

static void keygen_files(void **state)
{
	struct stat st;
	char sec[CURVE_Z85_LEN + 1], pub[CURVE_Z85_LEN + 1];
	char derived[CURVE_Z85_LEN + 1], before[8192];
	mode_t old = umask(0077); /* keygen's modes ignore the umask */

	(void)state;
	assert_int_equal(keygen("kg"), 0);
	umask(old);
	assert_int_equal(stat(tpath("kg.key"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stat(tpath("kg.pub"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	if (curve_key_load(tpath("kg.key"), CURVE_SECRET, sec) ||
	    curve_key_load(tpath("kg.pub"), CURVE_PUBLIC, pub) ||
	    curve_public_of(sec, derived))
		fail_msg("%s", qerr_detail());
	assert_string_equal(pub, derived);
	/* stdout is the public key */
	assert_non_null(strstr(slurp(tpath("keygen.out")), pub));
	/* the files of one kind are refused as the other */
	assert_int_equal(curve_key_load(tpath("kg.key"), CURVE_PUBLIC, pub),
			 QERR_FORMAT);
	/* never overwrite: both exist */
	snprintf(before, sizeof(before), "%s", slurp(tpath("kg.key")));
	assert_int_equal(keygen("kg"), 1);
	assert_non_null(strstr(slurp(tpath("keygen.err")),
			       "refusing to overwrite"));
	assert_string_equal(slurp(tpath("kg.key")), before);
	/* only NAME.pub exists: fails, and no NAME.key is left behind */
	assert_int_equal(unlink(tpath("kg.key")), 0);
	assert_int_equal(keygen("kg"), 1);
	assert_int_equal(stat(tpath("kg.key"), &st), -1);
	assert_int_equal(errno, ENOENT);
	/* a secret key readable by others is refused */
	assert_int_equal(keygen("kg2"), 0);
	assert_int_equal(chmod(tpath("kg2.key"), 0644), 0);
	assert_int_equal(curve_key_load(tpath("kg2.key"), CURVE_SECRET, sec),
			 QERR_RANGE);
	assert_non_null(strstr(qerr_detail(), "chmod 600"));
	/* a FIFO named as a key: refused at once (open() had blocked until
	 * a writer came; the alarm ends such a hang as a failure) */
	assert_int_equal(mkfifo(tpath("fifo.key"), 0600), 0);
	alarm(60);
	assert_int_equal(curve_key_load(tpath("fifo.key"), CURVE_SECRET, sec),
			 QERR_IO);
	assert_int_equal(curve_key_load(tpath("fifo.key"), CURVE_PUBLIC, pub),
			 QERR_IO);
	alarm(0);
	assert_non_null(strstr(qerr_detail(), "not a regular file"));
	assert_int_equal(unlink(tpath("fifo.key")), 0);
	/* usage */
	{
		char *argv[] = {quorum_bin, "keygen", NULL};

		assert_int_equal(run(argv, NULL, tpath("keygen.err")), 2);
	}
}

/* ---- refusing to start ------------------------------------------------ */

static const struct rcase {
	const char *name, *security, *msg;
	int local;
} rcases[] = {
	{"empty_client_allowlist",
	 GOOD_SERVER GOOD_WORKER "  client_keys: []\n  worker_keys: [worker.pub]\n",
	 "security.client_keys is empty: refusing to start without an "
	 "allowlist", 1},
	{"empty_worker_allowlist",
	 GOOD_SERVER "  client_keys: [alice.pub]\n",
	 "security.worker_keys is empty", 0},
	{"missing_secret_file",
	 "  server_public_key_file: server.pub\n"
	 "  server_secret_key_file: nowhere.key\n" GOOD_LISTS,
	 "nowhere.key: cannot open secret key file", 0},
	{"malformed_public_file",
	 "  server_public_key_file: bad.pub\n"
	 "  server_secret_key_file: server.key\n" GOOD_LISTS,
	 "bad.pub:2: expected a public key of 40 Z85 characters", 0},
	{"not_one_pair",
	 "  server_public_key_file: alice.pub\n"
	 "  server_secret_key_file: server.key\n" GOOD_LISTS,
	 "are not one key pair", 0},
	{"allowlist_file_missing",
	 GOOD_SERVER "  client_keys: [nobody.pub]\n  worker_keys: [worker.pub]\n",
	 "nobody.pub: cannot open public key file", 0},
	{"allowlist_holds_a_secret",
	 GOOD_SERVER "  client_keys: [alice.key]\n  worker_keys: [worker.pub]\n",
	 "alice.key: this is a secret key file", 0},
	{"gateway_not_a_client",
	 GOOD_SERVER GOOD_LISTS "  gateway_keys: [gateway.pub]\n",
	 "is not on security.client_keys", 0},
	{"local_worker_not_allowed",
	 GOOD_SERVER GOOD_WORKER
	 "  client_keys: [alice.pub]\n  worker_keys: [rogue.pub]\n",
	 "the local workers' public key is not on security.worker_keys", 1},
	{"local_worker_id_not_allowed",
	 GOOD_SERVER GOOD_WORKER "  client_keys: [alice.pub]\n"
	 "  worker_keys: [{key: worker.pub, ids: [local-0, local-9]}]\n",
	 "may not register id local-1 (security.worker_keys ids)", 2},
};

static void refuses_to_start(void **state)
{
	FILE *f = fopen(tpath("bad.pub"), "w");

	(void)state;
	assert_non_null(f);
	fputs("# not a key\nhello\n", f);
	fclose(f);
	for (size_t i = 0; i < sizeof(rcases) / sizeof(rcases[0]); i++) {
		const struct rcase *r = &rcases[i];
		int port = pick_port(), rc;
		const char *cfgp = write_config("refused.yaml", port, r->local,
						r->security);
		char *argv[] = {cu_bin("coordinator"), "--config", (char *)cfgp,
				NULL};
		const char *err;
		/* we hold the client port: a coordinator that got as far as
		 * binding would fail with "Address already in use" (status 4)
		 * instead of the security refusal */
		int held = hold_port(port);

		assert_true(held >= 0);
		rc = run(argv, NULL, tpath("coord.err"));
		close(held);
		err = slurp(tpath("coord.err"));
		if (rc != 1)
			fail_msg("%s: exit status %d, want 1:\n%s", r->name, rc,
				 err);
		if (!strstr(err, r->msg))
			fail_msg("%s: stderr lacks '%s':\n%s", r->name, r->msg,
				 err);
		assert_null(strstr(err, "in use"));
		/* nothing bound, nothing spawned, no shared memory */
		if (!port_free(port + 1))
			fail_msg("%s: the worker port is taken", r->name);
		assert_null(strstr(err, "started worker"));
		assert_int_equal(count_pools(0), 0);
	}
}

/* ---- a running cluster with curve on ---------------------------------- */

static void check_answer(const Quorum__ClientReply *r)
{
	const Quorum__Answer *a;

	if (!r)
		fail_msg("allowed client: no reply");
	if (r->status != QUORUM__STATUS__STATUS_OK)
		fail_msg("allowed client: %s: %s", wire_status_name(r->status),
			 r->error ? r->error : "");
	assert_int_equal(r->body_case, QUORUM__CLIENT_REPLY__BODY_ANSWER);
	a = r->answer;
	assert_int_equal(a->n_samples, (size_t)ref.n);
	for (int i = 0; i < ref.n; i++) {
		const Quorum__Sample *x = a->samples[i];

		assert_int_equal(x->text.len, ref.samples[i].len);
		assert_memory_equal(x->text.data, ref.samples[i].text,
				    x->text.len);
	}
	assert_int_equal(a->has_answer, ref.vote.winner != VOTE_NONE);
	if (a->has_answer) {
		assert_int_equal(a->answer.len,
				 strlen(ref.vote.entries[0].answer));
		assert_memory_equal(a->answer.data, ref.vote.entries[0].answer,
				    a->answer.len);
	}
}

/* Raw bytes to the client port: nothing but libzmq's greeting comes back
 * (at most 64 bytes), never a reply. */
static void raw_bytes(int port)
{
	struct sockaddr_in a = {0};
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = {0, 200000};
	static const char junk[] = "\x01\x00GET / HTTP/1.0\r\n\r\n"
				   "\xff\x00\x00\x00\x00\x00\x00\x00\x09\x7f"
				   "garbage that is not ZMTP";
	int64_t end = wire_now_ms() + SILENCE_MS;
	size_t got = 0;
	char buf[4096];

	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_true(send(s, junk, sizeof(junk) - 1, MSG_NOSIGNAL) > 0);
	while (wire_now_ms() < end) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);

		if (n == 0)
			break; /* the coordinator hung up */
		if (n > 0)
			got += (size_t)n;
	}
	close(s);
	if (got > 64)
		fail_msg("raw bytes: %zu bytes came back", got);
}

static void curve_cluster(void **state)
{
	int port = -1;
	const char *cfgp, *rogue_cfg;
	pid_t coord = -1, rogue;
	void *s, *mon;
	Quorum__ClientReply *r;
	unsigned ev;

	(void)state;
	for (int attempt = 0; attempt < 6 && coord < 0; attempt++) {
		char *argv[] = {cu_bin("coordinator"), "--config", NULL, NULL};

		port = pick_port();
		cfgp = write_config("curve.yaml", port, 1,
				    GOOD_SERVER GOOD_WORKER
				    "  client_keys: [alice.pub, gateway.pub]\n"
				    "  gateway_keys: [gateway.pub]\n"
				    "  worker_keys:\n"
				    "    - worker.pub\n"
				    "    - {key: guest.pub, ids: [guest-1]}\n");
		argv[2] = (char *)cfgp;
		coord = spawn_io(argv, NULL, tpath("curve.err"));
		assert_true(coord > 0);
		if (wait_exit(coord, 1000) >= 0) /* port taken meanwhile */
			coord = -1;
	}
	assert_true(coord > 0);
	{
		int64_t end = wire_now_ms() + WAIT_MS;
		int n = -1;

		while (wire_now_ms() < end && (n = n_workers(port)) != 1)
			usleep(100000);
		if (n != 1)
			fail_msg("the local worker did not register (%d):\n%s",
				 n, slurp(tpath("curve.err")));
	}

	/* an allowed client is served, with the right answer */
	s = dealer(port, "alice.key", NULL);
	r = ask(s, WAIT_MS);
	check_answer(r);
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);

	/* naming a user: only from the gateway key (loopback or not), the
	 * same bytes */
	s = dealer(port, "alice.key", NULL);
	r = ask_for(s, "key:0123456789abcdef", WAIT_MS);
	assert_non_null(r);
	assert_int_equal(r->status, QUORUM__STATUS__STATUS_BAD_REQUEST);
	assert_non_null(strstr(r->error, "gateway"));
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
	s = dealer(port, "gateway.key", NULL);
	r = ask_for(s, "key:0123456789abcdef", WAIT_MS);
	check_answer(r);
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);

	/* a plaintext client: the handshake cannot even start */
	s = dealer(port, NULL, NULL);
	assert_null(r = status(s, SILENCE_MS));
	zmq_close(s);

	/* an unknown key: ZAP says 400, the client sees an auth failure */
	s = dealer(port, "mallory.key", &mon);
	assert_null(r = status(s, SILENCE_MS));
	ev = monitor_events(mon, 300);
	zmq_close(s);
	zmq_close(mon);
	if (!(ev & ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) ||
	    (ev & ZMQ_EVENT_HANDSHAKE_SUCCEEDED))
		fail_msg("unknown key: monitor events 0x%x", ev);
	/* a worker's key is not a client's key (separate domains) */
	s = dealer(port, "worker.key", NULL);
	assert_null(r = status(s, SILENCE_MS));
	zmq_close(s);

	/* raw bytes */
	raw_bytes(port);

	/* a rogue worker (valid CURVE, unknown key) never registers */
	rogue_cfg = write_config("rogue.yaml", port, 0,
				 GOOD_SERVER GOOD_LISTS
				 "  worker_public_key_file: rogue.pub\n"
				 "  worker_secret_key_file: rogue.key\n");
	{
		char *argv[] = {cu_bin("worker"), "--config", (char *)rogue_cfg,
				"--id", "rogue", NULL};

		rogue = spawn_io(argv, NULL, tpath("rogue.err"));
		assert_true(rogue > 0);
	}
	usleep(2500 * 1000); /* model load + several handshakes */
	assert_int_equal(wait_exit(rogue, 0), -1); /* still trying */
	assert_int_equal(n_workers(port), 1);
	assert_null(strstr(slurp(tpath("curve.err")), "rogue registered"));

	/* the CLI with keys (and without) */
	{
		char srv[PATH_MAX + 64], cli[PATH_MAX + 64], ep[64];
		char *ok[] = {quorum_bin, "status", "--endpoint", ep,
			      "--server-key", srv, "--client-key", cli,
			      "--json", NULL};
		char *plain[] = {quorum_bin, "status", "--endpoint", ep,
				 "--timeout", "0.5", "--retries", "1", NULL};

		snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
		snprintf(srv, sizeof(srv), "%s", tpath("server.pub"));
		snprintf(cli, sizeof(cli), "%s", tpath("alice.key"));
		assert_int_equal(run(ok, tpath("st.out"), tpath("st.err")), 0);
		assert_non_null(strstr(slurp(tpath("st.out")), "local-0"));
		assert_int_equal(run(plain, tpath("st.out"), tpath("st.err")),
				 1);
		assert_non_null(strstr(slurp(tpath("st.err")), "no reply"));
		snprintf(cli, sizeof(cli), "%s", tpath("mallory.key"));
		ok[8] = "--timeout=0.5"; /* bounded: --retries 2 by default */
		assert_int_equal(run(ok, tpath("st.out"), tpath("st.err")), 1);
	}

	/* still serving the allowed client after all that */
	assert_int_equal(n_workers(port), 1);

	/* a key limited to ids: another id is refused at registration (the
	 * worker is told why and exits), its own id registers */
	{
		char gcfg[PATH_MAX + 64], wbin[PATH_MAX + 32];
		char *argv[] = {wbin, "--config", gcfg, "--id", "guest-2", NULL};
		pid_t g;
		int64_t end;

		/* (both helpers return rotating static buffers) */
		snprintf(gcfg, sizeof(gcfg), "%s",
			 write_config("guest.yaml", port, 0,
				      GOOD_SERVER GOOD_LISTS
				      "  worker_public_key_file: guest.pub\n"
				      "  worker_secret_key_file: guest.key\n"));
		snprintf(wbin, sizeof(wbin), "%s", cu_bin("worker"));
		g = spawn_io(argv, NULL, tpath("guest2.err"));
		assert_true(g > 0);
		if (wait_exit(g, WAIT_MS) != 3) /* the worker's "rejected" */
			fail_msg("guest-2 was not refused:\n%s",
				 slurp(tpath("guest2.err")));
		assert_non_null(strstr(slurp(tpath("guest2.err")),
				       "worker id is not among the ids "
				       "security.worker_keys allows this "
				       "CURVE key"));
		assert_int_equal(n_workers(port), 1);
		argv[4] = "guest-1";
		g = spawn_io(argv, NULL, tpath("guest1.err"));
		assert_true(g > 0);
		end = wire_now_ms() + WAIT_MS;
		while (wire_now_ms() < end && n_workers(port) != 2)
			usleep(100000);
		if (n_workers(port) != 2)
			fail_msg("guest-1 did not register:\n%s",
				 slurp(tpath("guest1.err")));
		kill_wait(g);
	}
	kill_wait(rogue);
	kill_wait(coord);
	assert_int_equal(count_pools(0), 0);
}

/* The Python client with and without keys. */
static void python_client(void **state)
{
	char cmd[4 * PATH_MAX], dir[PATH_MAX + 16];
	int port = pick_port(), rc;
	const char *cfgp = write_config("py.yaml", port, 1,
					GOOD_SERVER GOOD_WORKER GOOD_LISTS);
	char *argv[] = {cu_bin("coordinator"), "--config", (char *)cfgp, NULL};
	pid_t coord;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/py", tmpdir);
	snprintf(cmd, sizeof(cmd), "sh clients/python/gen_pb.sh %s >/dev/null",
		 dir);
	if (system(cmd) != 0)
		fail_msg("gen_pb.sh failed (python3-protobuf, protoc: "
			 "tools/deps.sh)");
	coord = spawn_io(argv, NULL, tpath("py.err"));
	assert_true(coord > 0);
	{
		int64_t end = wire_now_ms() + WAIT_MS;

		while (wire_now_ms() < end && n_workers(port) != 1)
			usleep(100000);
	}
	/* allowed: status OK with the worker; unknown key: NO_REPLY, fast */
	snprintf(cmd, sizeof(cmd),
		 "cd clients/python && QUORUM_PB2_DIR=%s timeout 20 "
		 "/usr/bin/python3 -c '\n"
		 "import sys\n"
		 "from quorum_client import QuorumClient\n"
		 "ep, d = sys.argv[1], sys.argv[2]\n"
		 "with QuorumClient(ep, timeout=5, retries=0, "
		 "server_key=d + \"/server.pub\", "
		 "client_key=d + \"/alice.key\") as qc:\n"
		 "    s = qc.status()\n"
		 "    assert s[\"status\"] == \"STATUS_OK\", s\n"
		 "    assert [w[\"id\"] for w in s[\"workers\"]] == [\"local-0\"], s\n"
		 "    a = qc.ask(\"" QUESTION "\", n=%d, seed=%d, temperature=0.9,\n"
		 "               top_k=0, top_p=0.95, max_new_tokens=%d)\n"
		 "    assert a[\"status\"] == \"STATUS_OK\", a\n"
		 /* the stop report, as quorum ask --json prints it */
		 "    assert a[\"stop\"][\"budget\"] == %d, a\n"
		 "    print(\"ANSWER=[%%s]\" %% a[\"answer\"])\n"
		 "with QuorumClient(ep, timeout=0.5, retries=1, "
		 "server_key=d + \"/server.pub\", "
		 "client_key=d + \"/mallory.key\") as qc:\n"
		 "    assert qc.status()[\"status\"] == \"NO_REPLY\"\n"
		 "with QuorumClient(ep, timeout=0.5, retries=1) as qc:\n"
		 "    assert qc.status()[\"status\"] == \"NO_REPLY\"\n"
		 "try:\n"
		 "    QuorumClient(ep, server_key=d + \"/alice.key\", "
		 "client_key=d + \"/alice.key\")\n"
		 "    sys.exit(\"a secret key taken as the server key\")\n"
		 "except ValueError:\n"
		 "    pass\n"
		 "print(\"PYOK\")\n"
		 "' tcp://127.0.0.1:%d %s > %s 2>&1",
		 dir, N_SAMPLES, SEED, MAX_NEW, N_SAMPLES, port, tmpdir,
		 tpath("py.out"));
	rc = system(cmd);
	kill_wait(coord);
	if (rc != 0 || !strstr(slurp(tpath("py.out")), "PYOK"))
		fail_msg("python client (rc %d):\n%s", rc,
			 slurp(tpath("py.out")));
	{
		char want[256];

		if (ref.vote.winner != VOTE_NONE)
			snprintf(want, sizeof(want), "ANSWER=[%s]",
				 ref.vote.entries[0].answer);
		else
			snprintf(want, sizeof(want), "ANSWER=[None]");
		if (!strstr(slurp(tpath("py.out")), want))
			fail_msg("python answer: want %s:\n%s", want,
				 slurp(tpath("py.out")));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(key_format),
		cmocka_unit_test_teardown(keygen_files, test_teardown),
		cmocka_unit_test_teardown(refuses_to_start, test_teardown),
		cmocka_unit_test_teardown(curve_cluster, test_teardown),
		cmocka_unit_test_teardown(python_client, test_teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

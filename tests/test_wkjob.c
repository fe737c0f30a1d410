/*
 * A real worker against a fake coordinator: the test binds the worker
 * endpoint itself (a ROUTER), takes the worker's Register and sends it
 * commands a coordinator never would — what the worker must refuse, in
 * words, and still serve what follows.
 *
 *   dup_indices   a DecodeJob naming a sample index twice: JobDone
 *                 BAD_REQUEST ("duplicate sample index"), no sample
 *                 decoded; a good job after it is served
 *   two_frames    a command of two frames: dropped with a log line,
 *                 the worker serves what follows
 *
 * Every wait is bounded (CU_WAIT_MS); the worker is killed in teardown.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "clusterutil.h"

static char model_path[PATH_MAX], err_path[PATH_MAX + 32];
static cu_cluster cl;
static void *router;           /* the fake coordinator */
static unsigned char wid[256]; /* the worker's routing id */
static size_t wid_len;
static Quorum__WorkerMsg *reg; /* its Register */

/* Spawns the worker of cl's config, its stderr to err_path. */
static pid_t spawn_worker(const char *id)
{
	char *argv[] = {cu_bin("worker"), "--config", cl.config, "--id",
			(char *)id, "--host", "a", NULL};
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, err_path,
					 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -1;
	cl.kids[cl.n_kids++] = pid;
	return pid;
}

static void send_cmd(Quorum__CoordMsg *m)
{
	m->version = WIRE_VERSION;
	assert_int_equal(wire_send(router, wid, wid_len, &m->base), 0);
}

static void send_heartbeat(void)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__Heartbeat h = QUORUM__HEARTBEAT__INIT;

	m.body_case = QUORUM__COORD_MSG__BODY_HEARTBEAT;
	m.heartbeat = &h;
	send_cmd(&m);
}

/* The next worker message other than a heartbeat within wait_ms (NULL:
 * none); heartbeats go to the worker meanwhile, as a coordinator's. */
static Quorum__WorkerMsg *next_msg(int wait_ms)
{
	int64_t end = wire_now_ms() + wait_ms, hb = 0;

	while (wire_now_ms() < end) {
		zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
		Quorum__WorkerMsg *m;
		wire_msg in;

		if (wid_len && wire_now_ms() >= hb) {
			send_heartbeat();
			hb = wire_now_ms() + 100;
		}
		if (zmq_poll(&it, 1, 50) <= 0)
			continue;
		if (wire_recv(router, 1, 1, 0, &in))
			continue;
		m = quorum__worker_msg__unpack(NULL, in.len, in.data);
		if (!wid_len) {
			memcpy(wid, in.id, in.id_len);
			wid_len = in.id_len;
		}
		wire_msg_close(&in);
		if (!m)
			continue;
		if (m->body_case == QUORUM__WORKER_MSG__BODY_HEARTBEAT) {
			quorum__worker_msg__free_unpacked(m, NULL);
			continue;
		}
		return m;
	}
	return NULL;
}

static int group_setup(void **state)
{
	cu_cfg k;
	int zero = 0;

	(void)state;
	if (cu_setup_paths("wkjob") || cu_model(model_path, 5) ||
	    !(cu_zctx = zmq_ctx_new()))
		return -1;
	k = cu_cfg_defaults(model_path);
	for (int attempt = 0; attempt < 8 && !router; attempt++) {
		int port = 20000 + (int)((getpid() * 13 + attempt * 7919 +
					  wire_now_ms()) % 20000) * 2;

		snprintf(cl.client_ep, sizeof(cl.client_ep),
			 "tcp://127.0.0.1:%d", port);
		snprintf(cl.worker_ep, sizeof(cl.worker_ep),
			 "tcp://127.0.0.1:%d", port + 1);
		if (wire_bind(cu_zctx, ZMQ_ROUTER, cl.worker_ep, 0, &router))
			router = NULL;
	}
	if (!router)
		return -1;
	zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof(zero));
	cu_write_config(&cl, &k);
	snprintf(err_path, sizeof(err_path), "%s/worker.err", cu_tmpdir);
	if (spawn_worker("wj") < 0)
		return -1;
	reg = next_msg(CU_WAIT_MS);
	if (!reg || reg->body_case != QUORUM__WORKER_MSG__BODY_REGISTER) {
		fprintf(stderr, "setup: no Register from the worker\n");
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (reg)
		quorum__worker_msg__free_unpacked(reg, NULL);
	cu_stop(&cl);
	wire_close(&router);
	if (cu_zctx)
		zmq_ctx_shutdown(cu_zctx);
	unlink(err_path);
	unlink(model_path);
	rmdir(cu_tmpdir);
	return 0;
}

/* A root of a few prompt tokens on the worker (its PrefixReady). */
static Quorum__WorkerMsg *prefill(uint64_t rid)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__Prefill p = QUORUM__PREFILL__INIT;
	uint32_t toks[] = {10, 11, 12, 13, 14};
	Quorum__WorkerMsg *r;

	p.request_id = rid;
	p.attempt = 1;
	p.n_tokens = 5;
	p.tokens = toks;
	m.body_case = QUORUM__COORD_MSG__BODY_PREFILL;
	m.prefill = &p;
	send_cmd(&m);
	r = next_msg(CU_WAIT_MS);
	assert_non_null(r);
	if (r->body_case != QUORUM__WORKER_MSG__BODY_PREFIX_READY)
		fail_msg("prefill: worker message %d, not PrefixReady",
			 (int)r->body_case);
	return r;
}

/* A DecodeJob of the root in px, of n samples, for indices. */
static void decode(const Quorum__PrefixReady *px, uint64_t rid,
		   uint32_t n, uint32_t *indices, size_t n_indices)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__DecodeJob d = QUORUM__DECODE_JOB__INIT;
	Quorum__RootRef ref = QUORUM__ROOT_REF__INIT;
	Quorum__SamplingParams sp = QUORUM__SAMPLING_PARAMS__INIT;

	ref.worker_id = "wj";
	ref.host = "a";
	ref.pool_name = px->pool_name;
	ref.root_id = px->root_id;
	ref.n_tokens = px->n_tokens;
	ref.n_blocks = px->n_blocks;
	ref.blocks = px->blocks;
	sp.has_n = sp.has_seed = sp.has_temperature = sp.has_top_k = 1;
	sp.has_top_p = sp.has_max_new_tokens = 1;
	sp.n = n;
	sp.seed = 7;
	sp.temperature = 0.7f;
	sp.top_k = 40;
	sp.top_p = 0.95f;
	sp.max_new_tokens = 4;
	d.request_id = rid;
	d.attempt = 1;
	d.root = &ref;
	d.logits = px->logits;
	d.n_indices = n_indices;
	d.indices = indices;
	d.params = &sp;
	m.body_case = QUORUM__COORD_MSG__BODY_DECODE;
	m.decode = &d;
	send_cmd(&m);
}

/* Reads job rid's messages to its JobDone: the samples in *samples. */
static Quorum__WorkerMsg *job_done(uint64_t rid, int *samples)
{
	Quorum__WorkerMsg *m;

	*samples = 0;
	while ((m = next_msg(CU_WAIT_MS))) {
		if (m->body_case == QUORUM__WORKER_MSG__BODY_SAMPLE &&
		    m->sample->request_id == rid)
			++*samples;
		else if (m->body_case == QUORUM__WORKER_MSG__BODY_JOB_DONE &&
			 m->job_done->request_id == rid)
			return m;
		quorum__worker_msg__free_unpacked(m, NULL);
	}
	fail_msg("no JobDone for request %llu", (unsigned long long)rid);
	return NULL;
}

static void dup_indices(void **state)
{
	Quorum__WorkerMsg *px = prefill(1), *done;
	uint32_t dup[] = {0, 0, 0}, good[] = {0, 1};
	int samples;

	(void)state;
	decode(px->prefix_ready, 2, 4, dup, 3);
	done = job_done(2, &samples);
	assert_int_equal(samples, 0);
	assert_int_equal(done->job_done->status,
			 QUORUM__STATUS__STATUS_BAD_REQUEST);
	assert_non_null(done->job_done->error);
	assert_non_null(strstr(done->job_done->error, "duplicate"));
	quorum__worker_msg__free_unpacked(done, NULL);
	/* the worker goes on */
	decode(px->prefix_ready, 3, 4, good, 2);
	done = job_done(3, &samples);
	assert_int_equal(samples, 2);
	assert_int_equal(done->job_done->status, QUORUM__STATUS__STATUS_OK);
	quorum__worker_msg__free_unpacked(done, NULL);
	quorum__worker_msg__free_unpacked(px, NULL);
}

/* The worker's stderr so far (static). */
static const char *worker_err(void)
{
	static char text[65536];
	FILE *f = fopen(err_path, "r");
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;

	if (f)
		fclose(f);
	text[n] = '\0';
	return text;
}

static void two_frames(void **state)
{
	Quorum__WorkerMsg *px, *done;
	uint32_t good[] = {0};
	int samples;

	(void)state;
	assert_int_equal(zmq_send(router, wid, wid_len, ZMQ_SNDMORE),
			 (int)wid_len);
	assert_int_equal(zmq_send(router, "a", 1, ZMQ_SNDMORE), 1);
	assert_int_equal(zmq_send(router, "b", 1, 0), 1);
	/* what follows is served (so the frames above were read) */
	px = prefill(4);
	decode(px->prefix_ready, 5, 1, good, 1);
	done = job_done(5, &samples);
	assert_int_equal(done->job_done->status, QUORUM__STATUS__STATUS_OK);
	quorum__worker_msg__free_unpacked(done, NULL);
	quorum__worker_msg__free_unpacked(px, NULL);
	assert_non_null(strstr(worker_err(), "worker wj: a malformed command "
				"(message of 2 frames refused) dropped"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dup_indices),
		cmocka_unit_test(two_frames),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

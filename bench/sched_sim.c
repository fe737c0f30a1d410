/*
 * sched_sim — the coordinator's scheduler (coordinator/sched*.c, the code
 * the coordinator runs) against simulated workers: no model, no sockets.
 * Fake workers (tests/fakeworker.c, the harness test_sched uses too)
 * answer every Prefill and DecodeJob at once, so what is
 * measured is the scheduler's own work: tokenizing prompts, placement,
 * splitting samples over slots, the prefix cache, collecting results,
 * voting and replying.
 *
 *   build/bench/sched_sim [--workers 16,256,1024] [--requests R] [--n N]
 *                         [--concurrency C] [--distinct D] [--hosts H]
 *                         [--vocab models/arith.gguf]
 *
 * For each worker count: R requests of N samples each, C in flight,
 * cycling over D distinct questions (so the prefix cache hits on repeats),
 * workers spread over H host labels (a root is copied to another host
 * once per (root, host), as in the cluster). Reported:
 *   results/s   sample results handled per second of scheduler CPU time
 *               (time inside sched_on_client / sched_on_worker /
 *               sched_tick, on one core; the fake workers' time excluded)
 *   p50/p99     request latency in the simulation, ask to reply, at
 *               concurrency 1 (the latency the scheduler adds: the fake
 *               workers answer at once) and at C (with queueing)
 *   peak RSS    the process's peak resident memory so far (VmHWM; the
 *               runs go by growing worker count, so it is that of the
 *               largest run yet, the tokenizer included)
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer/kv.h"
#include "text/prompt.h"
#include "proto/quorum.pb-c.h"
#include "qerr.h"
#include "coordinator/scheduler.h"
#include "text/tok.h"
#include "net/wire.h"
#include "net/poolname.h"
#include "tests/fakeworker.h"

/* A fake pool's size: block ids wrap inside it (the coordinator
 * refuses ids outside a worker's pool). */
#define SIM_POOL_BLOCKS (1u << 20)

#define SIM_FP 0x51aull
#define SIM_CLIENTS 16
#define MAX_WORKERS 4096

/* ---- clock ------------------------------------------------------------ */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int64_t io_now(void *arg)
{
	(void)arg;
	return wire_now_ms();
}

/* CPU time of this thread: a loaded machine's preemption is not counted */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double sched_cpu; /* CPU seconds spent inside the scheduler */

#define TIMED(call)                                                        \
	do {                                                               \
		double t0_ = cpu_s();                                      \
		call;                                                      \
		sched_cpu += cpu_s() - t0_;                                \
	} while (0)

/* ---- fake workers (tests/fakeworker.c) -------------------------------- */

typedef struct {
	char ident[16], id[16], host[16];
} sim_names;

static fw *workers;
static sim_names *names; /* the workers' strings, by index */
static int n_workers;
static const tok *vocab;

/* ---- clients ---------------------------------------------------------- */

typedef struct {
	double t_ask;
	int open;
} sim_req;

static sim_req *reqs;     /* by request id - 1 */
static double *lat;       /* latencies of the replies, in order */
static int n_lat, n_done, n_bad;

static int io_send(void *arg, int to_worker, const unsigned char *id,
		   size_t id_len, const ProtobufCMessage *m)
{
	(void)arg;
	if (to_worker) {
		int w;

		/* idents are "w<index>" */
		if (id_len < 2 || id[0] != 'w')
			return -1;
		w = atoi((const char *)id + 1);
		if (w < 0 || w >= n_workers)
			return -1;
		return fw_post(&workers[w], m);
	}
	/* a client reply: the ClientReply's request id and status */
	{
		const Quorum__ClientReply *r = (const Quorum__ClientReply *)m;
		uint64_t rid = r->request_id;

		if (rid == 0 || !reqs[rid - 1].open)
			return 0; /* a status reply, or not ours */
		reqs[rid - 1].open = 0;
		lat[n_lat++] = now_s() - reqs[rid - 1].t_ask;
		n_done++;
		if (r->status != QUORUM__STATUS__STATUS_OK)
			n_bad++;
	}
	return 0;
}

/* fw_env.deliver: the scheduler's time on a worker message, counted */
static void sim_deliver(void *arg, sched *s, wire_msg *in)
{
	(void)arg;
	TIMED(sched_on_worker(s, 0, in));
}

/* fw_env.sample: every sample a 64-token chain of ~150 bytes ending in
 * an answer; answers split 3:1 so the vote has work to do */
static void sim_sample(void *arg, const fw *w, uint32_t i, const char *mark,
		       fw_sample *out)
{
	(void)arg;
	(void)w;
	(void)mark;
	snprintf(out->answer, sizeof(out->answer), "%u", i % 4 ? 42u : 41u);
	snprintf(out->text, sizeof(out->text),
		 "Step 1: 45 - 12 = 33. Step 2: 3 * 8 = 24. "
		 "Step 3: 33 + 24 = 57, then a detour through "
		 "sample %u's own reasoning. The answer is %s.", i,
		 out->answer);
	out->tokens = 64;
	out->has_logprobs = 1;
	out->mean_logprob = -0.25;
	out->group_confidence = -0.5;
}

/* 16 bytes a token: the prompts here fit one message (the root whole, as
 * when chunk_bytes is not exceeded) */
static fw_env env = {
	.block_tokens = 16,
	.token_bytes = 16,
	.deliver = sim_deliver,
	.sample = sim_sample,
};

/* ---- the run ---------------------------------------------------------- */

static void ask(sched *s, uint64_t rid, const char *question, uint32_t n)
{
	Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__Ask a = QUORUM__ASK__INIT;
	Quorum__SamplingParams p = QUORUM__SAMPLING_PARAMS__INIT;
	wire_msg in = {0};
	char cid[16];
	size_t len;
	uint8_t *b;

	p.has_n = 1;
	p.n = n;
	p.stop = "none";
	a.question.data = (uint8_t *)question;
	a.question.len = strlen(question);
	a.params = &p;
	q.version = WIRE_VERSION;
	q.request_id = rid;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	q.ask = &a;
	len = quorum__client_request__get_packed_size(&q);
	if (!(b = malloc(len + 1)))
		return;
	quorum__client_request__pack(&q, b);
	snprintf(cid, sizeof(cid), "c%d", (int)(rid % SIM_CLIENTS));
	in.id_len = strlen(cid);
	memcpy(in.id, cid, in.id_len);
	in.data = b;
	in.len = len;
	reqs[rid - 1].t_ask = now_s();
	reqs[rid - 1].open = 1;
	TIMED(sched_on_client(s, 0, &in));
	free(b);
}

static long peak_rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = atol(line + 6);
	if (f)
		fclose(f);
	return kb;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
	int i;

	if (n == 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	i = (int)(p / 100.0 * (n - 1) + 0.5);
	return v[i];
}

typedef struct {
	double results_per_s, wall_s, p50_ms, p99_ms;
	long rss_kb;
	int done, bad;
} sim_out;

static int run(int nw, int requests, int n, int conc, int distinct,
	       int hosts, sim_out *out)
{
	char text[1024];
	cfg *c = NULL;
	sched_opts o = {0};
	sched *s = NULL;
	int sent = 0, inflight;
	double last_move = now_s();
	uint64_t last_results = 0;
	int last_done = 0;
	double t0, next_hb;
	const int hb_ms = 500;

	snprintf(text, sizeof(text),
		 "model:\n  path: /nonexistent.gguf\n"
		 "cluster:\n  name: sim\n"
		 "kv:\n  block_tokens: 16\n  blocks: 1048576\n  dtype: f16\n"
		 "sampling:\n  max_new_tokens: 64\n"
		 "limits:\n  max_n: 64\n  queue_depth: 100000\n"
		 "  request_timeout_ms: 600000\n"
		 "heartbeat:\n  interval_ms: %d\n  liveness: 20\n"
		 "prefix_cache:\n  entries: 64\n", hb_ms);
	if (cfg_parse("sim.yaml", text, strlen(text), &c)) {
		fprintf(stderr, "sched_sim: config: %s\n", qerr_detail());
		return -1;
	}
	o.c = c;
	o.t = vocab;
	o.prompt_family = PROMPT_CHATML;
	o.ctx_len = 32768;
	o.fingerprint = SIM_FP;
	o.has_fingerprint = 1;
	o.io.send = io_send;
	o.io.now_ms = io_now;
	if (sched_new(&o, &s)) {
		fprintf(stderr, "sched_sim: sched_new: %s\n", qerr_detail());
		cfg_free(&c);
		return -1;
	}
	n_workers = nw;
	workers = calloc((size_t)nw, sizeof(*workers));
	names = calloc((size_t)nw, sizeof(*names));
	reqs = calloc((size_t)requests, sizeof(*reqs));
	lat = calloc((size_t)requests, sizeof(*lat));
	n_lat = n_done = n_bad = 0;
	env.vocab = vocab;
	env.results = 0;
	sched_cpu = 0;
	if (!workers || !names || !reqs || !lat)
		return -1;
	for (int i = 0; i < nw; i++) {
		fw *w = &workers[i];
		sim_names *nm = &names[i];
		unsigned char rnd[POOLNAME_RND_BYTES] = {0};

		snprintf(nm->ident, sizeof(nm->ident), "w%d", i);
		snprintf(nm->id, sizeof(nm->id), "sim%d", i);
		snprintf(nm->host, sizeof(nm->host), "h%d", i % hosts);
		rnd[0] = (unsigned char)i;
		rnd[1] = (unsigned char)(i >> 8);
		if (fw_init(&env, w, nm->ident, nm->id, nm->host, "sim", rnd,
			    SIM_POOL_BLOCKS, 32))
			return -1;
		w->fp = SIM_FP;
		w->kv_dtype = 1; /* f16, as the config */
		fw_register(s, w);
	}
	for (int i = 0; i < nw; i++)
		fw_serve(s, &workers[i]);
	if (sched_n_workers(s) != nw) {
		fprintf(stderr, "sched_sim: %d of %d workers registered\n",
			sched_n_workers(s), nw);
		return -1;
	}
	sched_cpu = 0;
	t0 = now_s();
	next_hb = t0 + hb_ms / 2000.0;
	while (n_done < requests) {
		inflight = sent - n_done;
		while (inflight < conc && sent < requests) {
			char q[128];

			snprintf(q, sizeof(q), "Question %d: a farmer has %d "
				 "sheep and buys %d more. How many now?",
				 sent % distinct, 17 + sent % distinct,
				 23 + sent % distinct);
			sent++;
			ask(s, (uint64_t)sent, q, (uint32_t)n);
			inflight++;
		}
		for (int i = 0; i < nw; i++)
			fw_serve(s, &workers[i]);
		TIMED(sched_tick(s));
		if (now_s() >= next_hb) {
			for (int i = 0; i < nw; i++)
				fw_heartbeat(s, &workers[i]);
			next_hb += hb_ms / 2000.0;
		}
		/* no sample result nor reply for 10 s: not a timer it
		 * waits on (the longest is a heartbeat interval): stuck */
		if (env.results != last_results || n_done != last_done) {
			last_results = env.results;
			last_done = n_done;
			last_move = now_s();
		} else if (now_s() - last_move > 10) {
			fprintf(stderr, "sched_sim: stuck: %d of %d replied\n",
				n_done, requests);
			break;
		}
	}
	out->wall_s = now_s() - t0;
	out->results_per_s = sched_cpu > 0 ? (double)env.results / sched_cpu : 0;
	out->p50_ms = pct(lat, n_lat, 50) * 1e3;
	out->p99_ms = pct(lat, n_lat, 99) * 1e3;
	out->rss_kb = peak_rss_kb();
	out->done = n_done;
	out->bad = n_bad;
	sched_free(&s);
	fw_env_reset(&env);
	free(workers);
	free(names);
	free(reqs);
	free(lat);
	cfg_free(&c);
	return n_done == requests ? 0 : -1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sched_sim [options]\n"
		"  --workers LIST      worker counts (default 16,256,1024)\n"
		"  --requests R        requests per run (default 2000)\n"
		"  --n N               samples per request (default 16)\n"
		"  --concurrency C     requests in flight (default 64)\n"
		"  --distinct D        distinct questions (default 100)\n"
		"  --hosts H           host labels (default 1)\n"
		"  --vocab PATH        tokenizer GGUF (default models/arith.gguf)\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"workers", 1, 0, 'w'}, {"requests", 1, 0, 'r'},
		{"n", 1, 0, 'n'}, {"concurrency", 1, 0, 'c'},
		{"distinct", 1, 0, 'd'}, {"hosts", 1, 0, 'H'},
		{"vocab", 1, 0, 'v'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0},
	};
	const char *wl = "16,256,1024", *vpath = "models/arith.gguf";
	int requests = 2000, n = 16, conc = 64, distinct = 100, hosts = 1, opt;
	gguf_file *g = NULL;
	tok *t = NULL;

	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'w': wl = optarg; break;
		case 'r': requests = atoi(optarg); break;
		case 'n': n = atoi(optarg); break;
		case 'c': conc = atoi(optarg); break;
		case 'd': distinct = atoi(optarg); break;
		case 'H': hosts = atoi(optarg); break;
		case 'v': vpath = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (requests < 1 || n < 1 || n > 64 || conc < 1 || distinct < 1 ||
	    hosts < 1) {
		usage(stderr);
		return 2;
	}
	if (gguf_open(vpath, &g) || tok_load(g, &t)) {
		fprintf(stderr, "sched_sim: %s: %s\n", vpath, qerr_detail());
		return 1;
	}
	vocab = t;
	printf("| workers | hosts | requests x N | concurrency | results/s "
	       "(scheduler CPU) | p50 / p99 ms | wall s | peak RSS |\n"
	       "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (const char *p = wl; *p;) {
		int nw = atoi(p);
		sim_out a, b;

		if (nw < 1 || nw > MAX_WORKERS) {
			fprintf(stderr, "sched_sim: --workers: 1..%d\n",
				MAX_WORKERS);
			return 2;
		}
		/* concurrency 1: the latency the scheduler adds alone */
		if (run(nw, requests / 4 > 0 ? requests / 4 : 1, n, 1,
			distinct, hosts, &a) ||
		    run(nw, requests, n, conc, distinct, hosts, &b)) {
			fprintf(stderr, "sched_sim: run with %d workers "
				"failed\n", nw);
			return 1;
		}
		printf("| %d | %d | %d x %d | 1 | %.0f | %.3f / %.3f | %.2f | "
		       "%.1f MiB |\n", nw, hosts, a.done, n, a.results_per_s,
		       a.p50_ms, a.p99_ms, a.wall_s, a.rss_kb / 1024.0);
		printf("| %d | %d | %d x %d | %d | %.0f | %.3f / %.3f | %.2f | "
		       "%.1f MiB |\n", nw, hosts, b.done, n, conc,
		       b.results_per_s, b.p50_ms, b.p99_ms, b.wall_s,
		       b.rss_kb / 1024.0);
		if (a.bad || b.bad)
			fprintf(stderr, "sched_sim: %d replies not OK\n",
				a.bad + b.bad);
		fflush(stdout);
		p = strchr(p, ',');
		if (!p)
			break;
		p++;
	}
	tok_free(&t);
	gguf_close(&g);
	return 0;
}

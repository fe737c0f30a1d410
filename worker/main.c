/* worker — serves prefill and decode jobs for a quorum coordinator. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "conf/cfg.h"
#include "conf/opts.h"
#include "qerr.h"
#include "net/wire.h"
#include "wk.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: worker --config cluster.yaml [options]\n\n"
		"Loads the model of the config, connects to the coordinator's\n"
		"worker endpoint and serves prefill/decode jobs until SIGTERM.\n\n"
		"options:\n"
		"  --config FILE     cluster configuration (required)\n"
		"  --id NAME         worker id, [A-Za-z0-9_.-] (default w-PID)\n"
		"  --host LABEL      host label: workers with the same label map\n"
		"                    each other's KV pools (default: hostname)\n"
		"  --connect EP      coordinator worker endpoint (default: the\n"
		"                    config's coordinator.worker_endpoint)\n"
		"  --threads T       compute threads (default: workers.threads)\n"
		"  --parent PID      exit when process PID (the supervising\n"
		"                    coordinator) is gone\n"
		"  -h, --help        this help\n\n"
		"exit status: 0 stopped (SIGTERM), 1 an error, 2 a usage error,\n"
		"3 refused by the coordinator, 4 the model file cannot be\n"
		"served (malformed or unsupported: a coordinator that started\n"
		"this worker stops)\n");
}

/* A wildcard bind endpoint (tcp://STAR:7701) is reached at the loopback. */
static void connectable(const char *ep, char *out, size_t cap)
{
	const char *star = strstr(ep, "://*:");
	const char *any = strstr(ep, "://0.0.0.0:");

	if (star)
		snprintf(out, cap, "%.*s://127.0.0.1:%s", (int)(star - ep), ep,
			 star + 5);
	else if (any)
		snprintf(out, cap, "%.*s://127.0.0.1:%s", (int)(any - ep), ep,
			 any + 11);
	else
		snprintf(out, cap, "%s", ep);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, 0, 'c'},
		{"id", required_argument, 0, 'i'},
		{"host", required_argument, 0, 'H'},
		{"connect", required_argument, 0, 'C'},
		{"threads", required_argument, 0, 't'},
		{"parent", required_argument, 0, 'P'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *config = NULL, *id = NULL, *host = NULL, *ep = NULL;
	char idbuf[WK_ID_MAX], hostbuf[WK_HOST_MAX], epbuf[512];
	long threads = 0, parent = 0;
	cfg *c = NULL;
	wk_opts o = {0};
	curve_sock ck;
	struct sigaction sa;
	int ch, rc, model_bad = 0;

	if (opts_whole(argc, argv, "h", opts)) {
		fprintf(stderr, "worker: %s\n", qerr_detail());
		usage(stderr);
		return 2;
	}
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end;

		switch (ch) {
		case 'c': config = optarg; break;
		case 'i': id = optarg; break;
		case 'H': host = optarg; break;
		case 'C': ep = optarg; break;
		case 't':
			threads = strtol(optarg, &end, 10);
			if (*end || threads < 1 || threads > 1024) {
				fprintf(stderr, "worker: bad --threads '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'P':
			parent = strtol(optarg, &end, 10);
			if (*end || parent < 1) {
				fprintf(stderr, "worker: bad --parent '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!config || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (!id) {
		snprintf(idbuf, sizeof(idbuf), "w-%d", (int)getpid());
		id = idbuf;
	}
	if (!host) {
		if (gethostname(hostbuf, sizeof(hostbuf)))
			snprintf(hostbuf, sizeof(hostbuf), "localhost");
		hostbuf[sizeof(hostbuf) - 1] = '\0';
		host = hostbuf;
	}
	/* the coordinator's rule for both (members.c), said here at once:
	 * a host label it would refuse had made a pool first */
	if (!wire_name_ok(id, WK_ID_MAX) || !wire_name_ok(host, WK_HOST_MAX)) {
		fprintf(stderr, "worker: bad --id or --host '%s' (letters, "
			"digits, '_', '-', '.'; id up to %d bytes, host up to "
			"%d)\n", wire_name_ok(id, WK_ID_MAX) ? host : id,
			WK_ID_MAX - 1, WK_HOST_MAX - 1);
		return 2;
	}
	/* --connect by the config's rule (cfg_load checks the config's) */
	if (ep && cfg_endpoint_check("worker: --connect", ep)) {
		fprintf(stderr, "%s\n", qerr_detail());
		return 2;
	}
	/* SIGTERM when the parent dies; it may have died already */
	if (parent && (prctl(PR_SET_PDEATHSIG, SIGTERM) ||
		       getppid() != (pid_t)parent)) {
		fprintf(stderr, "worker: parent %ld is gone\n", parent);
		return 1;
	}
	if (cfg_load(config, &c)) {
		fprintf(stderr, "worker: %s\n", qerr_detail());
		return 1;
	}
	memset(&ck, 0, sizeof(ck));
	if (c->security.curve &&
	    (!c->security.worker_secret_key_file ||
	     !c->security.server_public_key_file)) {
		fprintf(stderr, "worker: security.curve is on but security.%s "
			"is not set\n", !c->security.server_public_key_file
				  ? "server_public_key_file"
				  : "worker_secret_key_file");
		cfg_free(&c);
		return 1;
	}
	if (c->security.curve &&
	    curve_sock_client(c->security.server_public_key_file,
			      c->security.worker_secret_key_file,
			      c->security.worker_public_key_file, &ck)) {
		fprintf(stderr, "worker: security: %s\n", qerr_detail());
		cfg_free(&c);
		return 1;
	}
	connectable(ep ? ep : c->coordinator.worker_endpoint, epbuf,
		    sizeof(epbuf));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	o.c = c;
	o.id = id;
	o.host = host;
	o.endpoint = epbuf;
	o.curve = c->security.curve ? &ck : NULL;
	o.threads = threads ? (int)threads : c->workers.threads;
	o.stop = &stop_flag;
	o.model_bad = &model_bad;
	rc = wk_run(&o);
	curve_sock_wipe(&ck);
	if (rc && rc != QERR_REJECTED)
		fprintf(stderr, "worker %s: %s\n", id, qerr_detail());
	cfg_free(&c);
	if (rc == QERR_REJECTED)
		return 3;
	if (rc && model_bad)
		return WIRE_WORKER_EXIT_MODEL;
	return rc ? 1 : 0;
}

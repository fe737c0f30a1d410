/*
 * local — `quorum serve --model FILE`: a whole cluster behind the gateway
 * in one command. A private directory holds a generated config (the
 * model, K local workers, ipc:// endpoints inside the directory so no
 * port is taken or shared); the coordinator found beside this program is
 * started with it and spawns the workers (workers.local, coordinator/
 * proc.c); at the end the coordinator is stopped with SIGTERM (it stops
 * its workers and unlinks their shared-memory pools), waited for, and the
 * directory removed. Called by serve.c.
 */
#include "local.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conf/cfg.h"
#include "qerr.h"

struct gw_local {
	char dir[PATH_MAX];
	char config[PATH_MAX];
	pid_t coord;
	int status;        /* the coordinator's, once it ended */
	int ended;
};

/* The coordinator program beside this one. */
static int coordinator_path(char *out, size_t cap)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return -1;
	self[n] = '\0';
	if (!(slash = strrchr(self, '/')))
		return -1;
	*slash = '\0';
	if ((size_t)snprintf(out, cap, "%s/coordinator", self) >= cap)
		return -1;
	return access(out, X_OK);
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[PATH_MAX];

	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) <
		    sizeof(p))
			unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

int local_start(const char *model, int workers, int threads,
		const char *listen, gw_local **out)
{
	gw_local *l = calloc(1, sizeof(*l));
	char coord[PATH_MAX], *abs = NULL;
	const char *tmp = getenv("TMPDIR");
	pid_t parent;
	cfg c;
	FILE *f;
	int rc;

	*out = NULL;
	if (!l)
		return qerr_fail(QERR_NOMEM, "out of memory");
	if (coordinator_path(coord, sizeof(coord))) {
		free(l);
		return qerr_fail(QERR_MISSING, "no coordinator program beside "
				 "this one (build it: make)");
	}
	if (!(abs = realpath(model, NULL))) {
		free(l);
		return qerr_fail(QERR_MISSING, "--model %s: %s", model,
				 strerror(errno));
	}
	snprintf(l->dir, sizeof(l->dir), "%s/quorum-serve-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(l->dir)) {
		rc = qerr_fail(QERR_IO, "mkdtemp %s: %s", l->dir,
			       strerror(errno));
		free(abs);
		free(l);
		return rc;
	}
	cfg_defaults(&c);
	c.model.path = abs;
	snprintf(c.cluster.name, sizeof(c.cluster.name), "serve-%d",
		 (int)getpid());
	if ((size_t)snprintf(c.coordinator.client_endpoint,
			     sizeof(c.coordinator.client_endpoint),
			     "ipc://%s/client", l->dir) >=
		    sizeof(c.coordinator.client_endpoint) ||
	    (size_t)snprintf(c.coordinator.worker_endpoint,
			     sizeof(c.coordinator.worker_endpoint),
			     "ipc://%s/workers", l->dir) >=
		    sizeof(c.coordinator.worker_endpoint) ||
	    strlen(listen) >= sizeof(c.http.listen)) {
		rc = qerr_fail(QERR_ARG, "the temporary directory's name %s "
			       "is too long for an endpoint", l->dir);
		goto fail;
	}
	c.workers.local = workers;
	c.workers.threads = threads;
	strcpy(c.http.listen, listen);
	if ((size_t)snprintf(l->config, sizeof(l->config), "%s/cluster.yaml",
			     l->dir) >= sizeof(l->config)) {
		rc = qerr_fail(QERR_ARG, "the temporary directory's name %s "
			       "is too long", l->dir);
		goto fail;
	}
	if (!(f = fopen(l->config, "w"))) {
		rc = qerr_fail(QERR_IO, "%s: %s", l->config, strerror(errno));
		goto fail;
	}
	cfg_dump(&c, f);
	if (fclose(f)) {
		rc = qerr_fail(QERR_IO, "%s: %s", l->config, strerror(errno));
		goto fail;
	}
	/* called before any thread starts, so fork is plain; the child
	 * gets SIGTERM if this process dies without stopping it (even by
	 * SIGKILL), and stops its workers in turn */
	parent = getpid();
	if ((l->coord = fork()) < 0) {
		rc = qerr_fail(QERR_IO, "fork: %s", strerror(errno));
		goto fail;
	}
	if (l->coord == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != parent)
			_exit(127);
		execl(coord, coord, "--config", l->config, (char *)NULL);
		fprintf(stderr, "quorum serve: exec %s: %s\n", coord,
			strerror(errno));
		_exit(127);
	}
	free(abs);
	*out = l;
	return QERR_OK;
fail:
	free(abs);
	remove_dir(l->dir);
	free(l);
	return rc;
}

const char *local_config(const gw_local *l)
{
	return l->config;
}

int local_alive(gw_local *l)
{
	if (l->ended)
		return 0;
	if (waitpid(l->coord, &l->status, WNOHANG) == l->coord) {
		l->ended = 1;
		return 0;
	}
	return 1;
}

int local_wait_ready(gw_local *l)
{
	char sock[PATH_MAX + 16];
	struct stat st;

	snprintf(sock, sizeof(sock), "%s/client", l->dir);
	/* its ipc:// socket file appears when it binds, after it read the
	 * model; or it ends */
	while (stat(sock, &st) || !S_ISSOCK(st.st_mode)) {
		if (!local_alive(l))
			return qerr_fail(QERR_IO, "the coordinator did not "
					 "start (%s)", local_status(l));
		usleep(10000);
	}
	return 0;
}

const char *local_status(const gw_local *l)
{
	static char buf[64];

	if (!l->ended)
		return "running";
	if (WIFEXITED(l->status))
		snprintf(buf, sizeof(buf), "exit status %d",
			 WEXITSTATUS(l->status));
	else if (WIFSIGNALED(l->status))
		snprintf(buf, sizeof(buf), "killed by signal %d",
			 WTERMSIG(l->status));
	else
		snprintf(buf, sizeof(buf), "status %#x", l->status);
	return buf;
}

void local_stop(gw_local **lp)
{
	gw_local *l = lp ? *lp : NULL;

	if (!l)
		return;
	if (!l->ended) {
		/* the coordinator stops its workers (and their pools) */
		kill(l->coord, SIGTERM);
		for (int i = 0; i < 300 && local_alive(l); i++) {
			struct timespec ts = {0, 100 * 1000000L};

			nanosleep(&ts, NULL);
		}
		if (!l->ended) {
			kill(l->coord, SIGKILL);
			waitpid(l->coord, &l->status, 0);
			l->ended = 1;
		}
	}
	remove_dir(l->dir);
	free(l);
	*lp = NULL;
}

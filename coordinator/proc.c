/*
 * proc — the coordinator's local worker processes (see proc.h): spawning
 * them with posix_spawn, reaping and restarting with backoff from the
 * poll loop, and stopping them at shutdown. Called by coordinator/main.c.
 */
#include "proc.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qerr.h"
#include "net/wire.h"

extern char **environ;

typedef struct {
	pid_t pid;          /* 0: not running */
	int64_t start_at;   /* when to (re)start it */
	int64_t backoff_ms;
	int64_t started;
	int gave_up;        /* exited WIRE_WORKER_EXIT_MODEL: not restarted */
	char id[32];
} proc_child;

struct proc_set {
	char *path, *config, *host;
	int n, min_ms, max_ms;
	proc_child *c;      /* (n) */
};

int proc_new(const char *worker_path, const char *config, const char *host,
	     int n, int backoff_min_ms, int backoff_max_ms, proc_set **out)
{
	proc_set *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p || !(p->path = strdup(worker_path)) ||
	    !(p->config = strdup(config)) || !(p->host = strdup(host)) ||
	    !(p->c = calloc(n > 0 ? (size_t)n : 1, sizeof(*p->c)))) {
		proc_free(&p);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	p->n = n;
	p->min_ms = backoff_min_ms;
	p->max_ms = backoff_max_ms;
	for (int i = 0; i < n; i++) {
		snprintf(p->c[i].id, sizeof(p->c[i].id), "local-%d", i);
		p->c[i].backoff_ms = backoff_min_ms;
	}
	*out = p;
	return QERR_OK;
}

static void spawn(proc_set *p, proc_child *c)
{
	char parent[24];
	/* --parent: the worker exits with us (a coordinator killed with -9
	 * must not leave workers that fight its successor's over their ids) */
	char *argv[] = {p->path, "--config", p->config, "--id", c->id,
			"--host", p->host, "--parent", parent, NULL};
	int rc;

	snprintf(parent, sizeof(parent), "%d", (int)getpid());
	rc = posix_spawn(&c->pid, p->path, NULL, NULL, argv, environ);

	if (rc) {
		fprintf(stderr, "coordinator: cannot start %s: %s\n", p->path,
			strerror(rc));
		c->pid = 0;
		c->start_at = wire_now_ms() + c->backoff_ms;
		if ((c->backoff_ms *= 2) > p->max_ms)
			c->backoff_ms = p->max_ms;
		return;
	}
	c->started = wire_now_ms();
	fprintf(stderr, "coordinator: started worker %s (pid %d)\n", c->id,
		(int)c->pid);
}

int proc_tick(proc_set *p)
{
	int64_t now = wire_now_ms();
	pid_t pid;
	int st, alive = 0;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		for (int i = 0; i < p->n; i++) {
			proc_child *c = &p->c[i];

			if (c->pid != pid)
				continue;
			if (WIFEXITED(st) &&
			    WEXITSTATUS(st) == WIRE_WORKER_EXIT_MODEL) {
				fprintf(stderr, "coordinator: worker %s (pid "
					"%d) cannot serve the model (its "
					"message above); restarting cannot "
					"help\n", c->id, (int)pid);
				c->pid = 0;
				c->gave_up = 1;
				continue;
			}
			fprintf(stderr, "coordinator: worker %s (pid %d) %s %d; "
				"restart in %lld ms\n", c->id, (int)pid,
				WIFSIGNALED(st) ? "killed by signal"
						: "exited with",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
				(long long)c->backoff_ms);
			c->pid = 0;
			/* a worker that lived a while starts a fresh backoff */
			if (now - c->started > 10 * p->max_ms)
				c->backoff_ms = p->min_ms;
			c->start_at = now + c->backoff_ms;
			if ((c->backoff_ms *= 2) > p->max_ms)
				c->backoff_ms = p->max_ms;
		}
	for (int i = 0; i < p->n; i++) {
		if (p->c[i].gave_up)
			continue;
		alive++;
		if (!p->c[i].pid && now >= p->c[i].start_at)
			spawn(p, &p->c[i]);
	}
	return p->n && !alive ? -1 : 0;
}

void proc_stop_all(proc_set *p, int wait_ms,
		   void (*killed)(void *ctx, const char *id), void *ctx)
{
	int64_t end = wire_now_ms() + wait_ms;
	int left;

	if (!p)
		return;
	for (int i = 0; i < p->n; i++)
		if (p->c[i].pid)
			kill(p->c[i].pid, SIGTERM);
	do {
		left = 0;
		for (int i = 0; i < p->n; i++) {
			pid_t r;
			int st;

			if (!p->c[i].pid)
				continue;
			r = waitpid(p->c[i].pid, &st, WNOHANG);
			if (r == p->c[i].pid || (r < 0 && errno == ECHILD))
				p->c[i].pid = 0;
			else
				left++;
		}
		if (left) {
			struct timespec ts = {0, 20 * 1000000};

			nanosleep(&ts, NULL);
		}
	} while (left && wire_now_ms() < end);
	for (int i = 0; i < p->n; i++)
		if (p->c[i].pid) {
			kill(p->c[i].pid, SIGKILL);
			waitpid(p->c[i].pid, NULL, 0);
			p->c[i].pid = 0;
			if (killed)
				killed(ctx, p->c[i].id);
		}
}

void proc_free(proc_set **pp)
{
	proc_set *p = pp ? *pp : NULL;

	if (!p)
		return;
	free(p->path);
	free(p->config);
	free(p->host);
	free(p->c);
	free(p);
	*pp = NULL;
}

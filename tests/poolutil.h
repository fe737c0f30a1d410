/*
 * poolutil — named KV pools held by child processes, for the tests of the
 * stale-pool sweep (header-only, static inline: every test is its own
 * binary): a pool whose creator is dead, and one whose creator lives until
 * it is killed. Names are the caller's; so is unlinking them.
 */
#ifndef QUORUM_POOLUTIL_H
#define QUORUM_POOLUTIL_H

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "infer/kv.h"

/* A child creates pool name (params kp) and exits without unlinking it,
 * as a SIGKILLed worker would; the child is reaped. */
static inline void pu_dead_pool(const kv_params *kp, const char *name)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		kv_pool *p = NULL;

		_exit(kv_pool_new_named(kp, name, &p) ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A child that creates pool name (params kp) and waits to be killed
 * (SIGKILL, then reap it); returns once the pool exists. *pid is set right
 * after the fork, so the caller can kill the child after a failed check. */
static inline void pu_live_pool(const kv_params *kp, const char *name,
				pid_t *pid)
{
	int fds[2];
	char c = 0;

	assert_int_equal(pipe(fds), 0);
	*pid = fork();
	assert_true(*pid >= 0);
	if (*pid == 0) {
		kv_pool *p = NULL;

		close(fds[0]);
		/* dies with the test (a failed or killed test leaves no
		 * process holding its stdout) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		c = kv_pool_new_named(kp, name, &p) ? 'n' : 'y';
		if (write(fds[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &c, 1), 1);
	close(fds[0]);
	assert_int_equal(c, 'y');
}

#endif

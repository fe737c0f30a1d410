/*
 * tpool — persistent workers, spin-then-futex wake-up.
 *
 * A job is published in one 64-bit word, work = gen:24 | n:20 | next:20.
 * A thread claims task `next` by a CAS that bumps it; a successful claim
 * proves the job is still current and unfinished, so fn/ctx (written
 * before the word was published, rewritten only after every task is done)
 * are valid for it. A straggler still holding an older job's word just
 * fails its CAS. The caller counts finished tasks in `done`.
 *
 * Workers spin on `gen32` for a while after each job (decode issues
 * hundreds of jobs per token, back to back), then sleep on a futex.
 */
#include "kernels/tpool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/prof.h"
#include "qerr.h"

#define TASK_BITS 20
#define TASK_MAX ((1 << TASK_BITS) - 1)
#define GEN_MASK ((1u << 24) - 1)
#define SPIN_ITERS 20000 /* ~0.5 ms of pause on Zen */
#define YIELD_EVERY 256   /* lets an oversubscribed host make progress */

struct tpool {
	int n_threads;
	pthread_t *threads;
	_Atomic uint64_t work;
	_Atomic uint32_t gen32; /* futex word: bumps on each publish */
	_Atomic int sleepers;
	_Atomic int done;
	_Atomic int stop;
	tpool_fn fn;
	void *ctx;
	uint32_t gen;
	_Atomic int64_t busy_ns; /* task time, while profiling (prof.h) */
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL,
		NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX,
		NULL, NULL, 0);
}

/* Claims and runs tasks of the current job until none is left. */
static void run_tasks(tpool *p)
{
	uint64_t w = atomic_load_explicit(&p->work, memory_order_acquire);
	for (;;) {
		uint32_t n = (uint32_t)(w >> TASK_BITS) & TASK_MAX;
		uint32_t i = (uint32_t)w & TASK_MAX;
		if (i >= n)
			return;
		if (!atomic_compare_exchange_weak_explicit(
			    &p->work, &w, w + 1, memory_order_acq_rel,
			    memory_order_acquire))
			continue;
		if (prof_active) {
			int64_t t0 = prof_now();

			p->fn(p->ctx, (int)i, (int)n);
			atomic_fetch_add_explicit(&p->busy_ns, prof_now() - t0,
						  memory_order_relaxed);
		} else {
			p->fn(p->ctx, (int)i, (int)n);
		}
		atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
		w = atomic_load_explicit(&p->work, memory_order_acquire);
	}
}

static void *worker(void *arg)
{
	tpool *p = arg;
	/* gen32 was 0 when this thread was created: starting from 0 (not
	 * from a fresh load) means a job or a stop published before the
	 * thread got going is still seen. */
	uint32_t seen = 0;
	for (;;) {
		uint32_t g;
		int spins = 0;
		while ((g = atomic_load_explicit(&p->gen32,
						 memory_order_acquire)) == seen) {
			if (++spins < SPIN_ITERS) {
				if (spins % YIELD_EVERY == 0)
					sched_yield();
				else
					cpu_relax();
				continue;
			}
			atomic_fetch_add_explicit(&p->sleepers, 1,
						  memory_order_seq_cst);
			/* Re-check after announcing ourselves: a publisher
			 * bumps gen32 before reading sleepers. */
			if (atomic_load_explicit(&p->gen32,
						 memory_order_seq_cst) == seen)
				futex_wait(&p->gen32, seen);
			atomic_fetch_sub_explicit(&p->sleepers, 1,
						  memory_order_relaxed);
			spins = 0;
		}
		seen = g;
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			return NULL;
		run_tasks(p);
	}
}

static void publish(tpool *p)
{
	atomic_fetch_add_explicit(&p->gen32, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) > 0)
		futex_wake_all(&p->gen32);
}

int tpool_new(int n_threads, tpool **out)
{
	*out = NULL;
	if (n_threads < 1)
		return qerr_fail(QERR_ARG, "tpool_new: %d threads", n_threads);
	tpool *p = calloc(1, sizeof(*p));
	if (!p)
		return QERR_NOMEM;
	p->n_threads = n_threads;
	atomic_init(&p->work, 0);
	atomic_init(&p->gen32, 0);
	atomic_init(&p->sleepers, 0);
	atomic_init(&p->done, 0);
	atomic_init(&p->stop, 0);
	atomic_init(&p->busy_ns, 0);
	if (n_threads > 1) {
		p->threads = calloc((size_t)n_threads - 1, sizeof(pthread_t));
		if (!p->threads)
			goto nomem;
	}
	for (int i = 0; i < n_threads - 1; i++) {
		int rc = pthread_create(&p->threads[i], NULL, worker, p);
		if (rc != 0) {
			p->n_threads = i + 1; /* join those started */
			tpool_free(&p);
			return qerr_fail(QERR_NOMEM,
					 "tpool_new: pthread_create: error %d",
					 rc);
		}
	}
	*out = p;
	return QERR_OK;
nomem:
	free(p);
	return QERR_NOMEM;
}

void tpool_free(tpool **pp)
{
	tpool *p = *pp;
	if (!p)
		return;
	atomic_store_explicit(&p->stop, 1, memory_order_release);
	publish(p);
	for (int i = 0; i < p->n_threads - 1; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	free(p);
	*pp = NULL;
}

int tpool_size(const tpool *p)
{
	return p ? p->n_threads : 1;
}

int64_t tpool_busy_ns(tpool *p)
{
	return p ? atomic_load_explicit(&p->busy_ns, memory_order_relaxed)
		 : 0;
}

struct batch {
	tpool_fn fn;
	void *ctx;
	int base, n_tasks;
};

static void batch_fn(void *ctx, int i, int n)
{
	const struct batch *b = ctx;
	(void)n;
	b->fn(b->ctx, b->base + i, b->n_tasks);
}

void tpool_run(tpool *p, tpool_fn fn, void *ctx, int n_tasks)
{
	if (n_tasks <= 0)
		return;
	if (!p || p->n_threads == 1 || n_tasks == 1) {
		int64_t t0 = p && prof_active ? prof_now() : 0;

		for (int i = 0; i < n_tasks; i++)
			fn(ctx, i, n_tasks);
		if (t0)
			atomic_fetch_add_explicit(&p->busy_ns, prof_now() - t0,
						  memory_order_relaxed);
		return;
	}
	if (n_tasks > TASK_MAX) { /* beyond the word's field: batches */
		for (int base = 0; base < n_tasks; base += TASK_MAX) {
			struct batch b = {fn, ctx, base, n_tasks};
			int n = n_tasks - base < TASK_MAX ? n_tasks - base :
							    TASK_MAX;
			tpool_run(p, batch_fn, &b, n);
		}
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	atomic_store_explicit(&p->done, 0, memory_order_relaxed);
	p->gen = (p->gen + 1) & GEN_MASK;
	uint64_t w = ((uint64_t)p->gen << (2 * TASK_BITS)) |
		     ((uint64_t)n_tasks << TASK_BITS);
	atomic_store_explicit(&p->work, w, memory_order_release);
	publish(p);
	run_tasks(p);
	for (int spins = 1; atomic_load_explicit(&p->done, memory_order_acquire) <
			    n_tasks;
	     spins++) {
		if (spins % YIELD_EVERY == 0)
			sched_yield();
		else
			cpu_relax();
	}
}

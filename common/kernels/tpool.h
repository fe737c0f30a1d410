/*
 * tpool — a small fixed-size thread pool for data-parallel kernels.
 *
 * tpool_run() splits one job into n_tasks tasks, runs them on the pool's
 * threads (the caller's thread works too) and returns when all are done.
 * Which thread runs which task is unspecified, so a task must write only
 * its own output: kernels split over output elements, never over a
 * reduction, which keeps results independent of the thread count.
 * A pool is used by one caller thread at a time.
 */
#ifndef QUORUM_TPOOL_H
#define QUORUM_TPOOL_H

#include <stdint.h>

typedef struct tpool tpool;

typedef void (*tpool_fn)(void *ctx, int task, int n_tasks);

/* n_threads >= 1 (total, including the caller). */
int tpool_new(int n_threads, tpool **out);
void tpool_free(tpool **p);
int tpool_size(const tpool *p);
/* Runs fn(ctx, i, n_tasks) for i in [0, n_tasks). p may be NULL: runs
 * inline. */
void tpool_run(tpool *p, tpool_fn fn, void *ctx, int n_tasks);
/* The time its threads have spent in tasks while profiling (prof.h):
 * a job's idle thread time is threads x wall - the growth of this. 0 for
 * NULL. */
int64_t tpool_busy_ns(tpool *p);

#endif

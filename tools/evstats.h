/*
 * evstats — the statistics `quorum eval-set` prints over a problem set,
 * where the problems are the independent trials (a problem's samples are
 * not): an accuracy's 95% interval, and the paired comparison of two
 * sample counts scored on the same problems.
 */
#ifndef QUORUM_EVSTATS_H
#define QUORUM_EVSTATS_H

#include <stddef.h>

/* The 95% Wilson score interval of a successes in b trials, in percent
 * (b = 0: [0, 100]). */
void evstats_wilson95(size_t a, size_t b, double *lo, double *hi);

/* McNemar's exact test of a paired comparison: of the problems the two
 * scorings disagree on, gained are right only under the second, lost
 * only under the first. The two-sided p-value: twice the binomial
 * (gained + lost, 1/2) probability of a split at least as uneven, at
 * most 1 (1 where they never disagree), to 12 significant digits. */
double evstats_mcnemar(size_t gained, size_t lost);

#endif

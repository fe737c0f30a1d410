/* evstats — eval-set's statistics (evstats.h). */
#include "evstats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void evstats_wilson95(size_t a, size_t b, double *lo, double *hi)
{
	const double z = 1.959963984540054;
	double n = (double)b, p, c, h;

	if (!b) {
		*lo = 0.0;
		*hi = 100.0;
		return;
	}
	p = (double)a / n;
	c = (p + z * z / (2 * n)) / (1 + z * z / n);
	h = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n);
	*lo = 100.0 * (c - h > 0 ? c - h : 0);
	*hi = 100.0 * (c + h < 1 ? c + h : 1);
}

double evstats_mcnemar(size_t gained, size_t lost)
{
	size_t n = gained + lost, k = gained < lost ? gained : lost;
	double lgn = lgamma((double)n + 1), tail = 0.0;
	char buf[32];

	if (!n)
		return 1.0;
	/* P(X <= k), X ~ Bin(n, 1/2): each term from logs, so that n in
	 * the thousands neither overflows C(n, i) nor underflows 2^-n
	 * before they meet */
	for (size_t i = 0; i <= k; i++)
		tail += exp(lgn - lgamma((double)i + 1) -
			    lgamma((double)(n - i) + 1) - (double)n * M_LN2);
	/* to 12 significant digits, about what the logs keep: 0.5 and 1
	 * stay 0.5 and 1, not 0.4999999999999999 */
	snprintf(buf, sizeof(buf), "%.12g", 2.0 * tail < 1.0 ? 2.0 * tail
							   : 1.0);
	return strtod(buf, NULL);
}

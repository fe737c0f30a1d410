/*
 * cli — helpers shared by the quorum subcommands (see cli.h): strict
 * number parsing of option values and the usage-error message.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int cli_long(const char *cmd, const char *opt, const char *s, long min,
	     long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "quorum %s: bad value for %s: '%s' (want an "
			"integer in %ld..%ld)\n", cmd, opt, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_u64(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-') {
		fprintf(stderr, "quorum %s: bad value for %s: '%s' (want an "
			"unsigned 64-bit integer)\n", cmd, opt, s);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_float(const char *cmd, const char *opt, const char *s, double min,
	      double max, float *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min || v > max) {
		fprintf(stderr, "quorum %s: bad value for %s: '%s' (want a "
			"number in %g..%g)\n", cmd, opt, s, min, max);
		return -1;
	}
	*out = (float)v;
	return 0;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "quorum %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'quorum %s --help'.\n", cmd);
	return 2;
}

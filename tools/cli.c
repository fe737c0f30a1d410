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
#include <string.h>

#include "conf/opts.h"
#include "qerr.h"

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

int cli_opts(const char *cmd, int argc, char *const argv[],
	     const char *optstring, const struct option *opts)
{
	if (!opts_whole(argc, argv, optstring, opts))
		return 0;
	return cli_usage_error(cmd, "%s", qerr_detail());
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

int cli_list(const char *cmd, const char *what, const char *s,
	     int (*each)(const char *item, void *arg), void *arg)
{
	char *dup, *p;
	int rc = 0;

	if (!*s)
		return cli_usage_error(cmd, "%s is empty", what);
	if (!(dup = strdup(s))) {
		fprintf(stderr, "quorum %s: out of memory\n", cmd);
		return 1;
	}
	for (p = dup; !rc; ) {
		char *comma = strchr(p, ',');

		if (comma)
			*comma = '\0';
		if (!*p)
			rc = cli_usage_error(cmd, "%s '%s': empty entry (a "
					     "comma at the start or end, or two "
					     "in a row)", what, s);
		else
			rc = each(p, arg);
		if (!comma)
			break;
		p = comma + 1;
	}
	free(dup);
	return rc;
}

struct id_list {
	const char *cmd, *what, *s;
	int32_t **ids;
	size_t *n, *cap;
};

static int one_id(const char *item, void *arg)
{
	struct id_list *l = arg;
	char *end;
	long v;

	errno = 0;
	v = strtol(item, &end, 10);
	if (errno || end == item || *end || v < 0 || v > INT32_MAX)
		return cli_usage_error(l->cmd, "%s '%s': bad token id '%s' "
				       "(want ids 0..%ld like 1,2,3)", l->what,
				       l->s, item, (long)INT32_MAX);
	if (*l->n == *l->cap) {
		size_t nc = *l->cap ? *l->cap * 2 : 64;
		int32_t *ni = realloc(*l->ids, nc * sizeof(*ni));

		if (!ni) {
			fprintf(stderr, "quorum %s: out of memory\n", l->cmd);
			return 1;
		}
		*l->ids = ni;
		*l->cap = nc;
	}
	(*l->ids)[(*l->n)++] = (int32_t)v;
	return 0;
}

int cli_ids(const char *cmd, const char *what, const char *s, int32_t **ids,
	    size_t *n, size_t *cap)
{
	struct id_list l = {cmd, what, s, ids, n, cap};

	return cli_list(cmd, what, s, one_id, &l);
}

char *cli_read_all(FILE *f, size_t *len)
{
	size_t n = 0, cap = 4096;
	char *b = malloc(cap), *nb;

	while (b) {
		size_t r = fread(b + n, 1, cap - n - 1, f);

		n += r;
		if (r == 0)
			break;
		if (n + 1 == cap) {
			if (!(nb = realloc(b, cap *= 2)))
				free(b);
			b = nb;
		}
	}
	if (b && ferror(f)) {
		free(b);
		return NULL;
	}
	if (b) {
		b[n] = '\0';
		*len = n;
	}
	return b;
}

char *cli_read_question(size_t *len)
{
	char *q = cli_read_all(stdin, len);

	while (q && *len && (q[*len - 1] == '\n' || q[*len - 1] == '\r'))
		q[--*len] = '\0';
	return q;
}

/*
 * opts — refuses abbreviated long options before getopt_long reads them
 * (opts.h). Used by every program's command line: quorum's commands, the
 * coordinator and the worker.
 */
#include "conf/opts.h"

#include <string.h>

#include "qerr.h"

int opts_whole(int argc, char *const argv[], const char *optstring,
	       const struct option *opts)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--"))
			break;
		if (a[0] == '-' && a[1] == '-' && a[2]) {
			size_t n = strcspn(a + 2, "=");
			const struct option *o, *starts = NULL;

			for (o = opts; o->name; o++)
				if (strlen(o->name) == n &&
				    !strncmp(o->name, a + 2, n))
					break;
			if (o->name) {
				/* its value in the next word */
				if (o->has_arg == required_argument &&
				    !a[2 + n])
					i++;
				continue;
			}
			for (o = opts; o->name && !starts; o++)
				if (strlen(o->name) > n &&
				    !strncmp(o->name, a + 2, n))
					starts = o;
			if (starts)
				return qerr_fail(QERR_ARG, "unknown option "
						 "'--%.*s' (options are taken "
						 "whole: --%s?)", (int)n,
						 a + 2, starts->name);
			continue;
		}
		if (a[0] == '-' && a[1] && a[1] != '-')
			for (size_t j = 1; a[j]; j++) {
				const char *s = strchr(optstring, a[j]);

				if (s && s[1] == ':') {
					/* the rest of the word, or the next
					 * word, is its value */
					if (!a[j + 1])
						i++;
					break;
				}
			}
	}
	return 0;
}

/*
 * fuzz_cfg — libFuzzer target: cfg_parse() on arbitrary bytes.
 *
 * Properties checked beyond "no crash, no leak, no UB":
 *   - a failure leaves *out NULL and sets a detail that starts with the
 *     name given;
 *   - a success dumps (cfg_dump) to YAML that cfg_parse accepts again and
 *     that dumps to the same text (the dump is a fixed point).
 * Seeds: fuzz/corpus/cfg/ (config/cluster.yaml and variants).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/cfg.h"
#include "qerr.h"

#define NAME "fuzz.yaml"

static char *dump(const cfg *c, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		abort();
	cfg_dump(c, f);
	if (fclose(f))
		abort();
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cfg *c = (cfg *)data; /* must be overwritten */
	cfg *c2 = NULL;
	char *d1, *d2;
	size_t l1, l2;
	int rc = cfg_parse(NAME, (const char *)data, size, &c);

	if (rc) {
		if (c || strncmp(qerr_detail(), NAME, strlen(NAME))) {
			fprintf(stderr, "failure contract broken: %p '%s'\n",
				(void *)c, qerr_detail());
			abort();
		}
		return 0;
	}
	if (!c)
		abort();
	d1 = dump(c, &l1);
	if (cfg_parse(NAME, d1, l1, &c2)) {
		fprintf(stderr, "dump not accepted: %s\n--\n%s\n", qerr_detail(),
			d1);
		abort();
	}
	d2 = dump(c2, &l2);
	if (l1 != l2 || memcmp(d1, d2, l1)) {
		fprintf(stderr, "dump not stable:\n%s\n--\n%s\n", d1, d2);
		abort();
	}
	free(d1);
	free(d2);
	cfg_free(&c);
	cfg_free(&c2);
	if (c || c2)
		abort();
	return 0;
}

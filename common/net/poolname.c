/*
 * poolname — builds and checks the names of workers' KV pools (see
 * poolname.h for the format). Callers: worker/, coordinator/.
 */
#include "net/poolname.h"

#include <stdio.h>
#include <string.h>

#include "qerr.h"

int poolname_prefix(char *buf, size_t cap, const char *cluster,
		    const char *id)
{
	int n = id ? snprintf(buf, cap, "/quorum-%s%c%s%c", cluster,
			      POOLNAME_SEP, id, POOLNAME_SEP)
		   : snprintf(buf, cap, "/quorum-%s%c", cluster,
			      POOLNAME_SEP);

	if (n < 0 || (size_t)n >= cap)
		return qerr_fail(QERR_RANGE, "pool name prefix too long");
	return QERR_OK;
}

int poolname_make(char *buf, size_t cap, const char *cluster,
		  const char *id, const unsigned char *rnd)
{
	size_t n;
	int rc;

	if ((rc = poolname_prefix(buf, cap, cluster, id)))
		return rc;
	n = strlen(buf);
	if (n + 2 * POOLNAME_RND_BYTES >= cap)
		return qerr_fail(QERR_RANGE, "pool name too long");
	for (int i = 0; i < POOLNAME_RND_BYTES; i++)
		snprintf(buf + n + 2 * (size_t)i, 3, "%02x", rnd[i]);
	return QERR_OK;
}

static int id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

int poolname_ok(const char *name, const char *cluster, const char *id)
{
	char prefix[160];
	const char *p, *at;
	size_t n;

	if (!name || !cluster ||
	    poolname_prefix(prefix, sizeof(prefix), cluster, id))
		return 0;
	n = strlen(prefix);
	if (strncmp(name, prefix, n))
		return 0;
	p = name + n;
	if (!id) { /* <id>@ of any worker: 1..63 id characters */
		if (!(at = strchr(p, POOLNAME_SEP)) || at == p ||
		    at - p >= 64)
			return 0;
		for (const char *q = p; q < at; q++)
			if (!id_char(*q))
				return 0;
		p = at + 1;
	}
	return strlen(p) == 2 * POOLNAME_RND_BYTES &&
	       strspn(p, "0123456789abcdef") == 2 * POOLNAME_RND_BYTES;
}

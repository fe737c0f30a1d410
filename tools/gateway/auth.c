/*
 * auth — the gateway's API keys (auth.h). Owns the key table, written by
 * auth_load before the daemon starts and only read while it serves.
 */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define GW_MAX_KEYS 1024
#define GW_KEY_MAX 256

static char **keys;
static size_t n_keys, n_admin; /* the admin keys: keys[0, n_admin) */

int auth_key(struct MHD_Connection *mc)
{
	const char *h;
	size_t hl;
	int ok = 0, which = AUTH_NONE;

	if (!keys)
		return AUTH_NO_KEYS;
	h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7))
		return AUTH_NONE;
	h += 7;
	while (*h == ' ' || *h == '\t')
		h++;
	hl = strlen(h);
	/* the field's trailing whitespace is no part of it (RFC 9110 5.5) */
	while (hl && (h[hl - 1] == ' ' || h[hl - 1] == '\t'))
		hl--;
	for (size_t i = 0; i < n_keys; i++) {
		const char *k = keys[i];
		size_t kl = strlen(k);
		unsigned char d = kl != hl;

		/* every key compared in full: no early exit on a mismatch */
		for (size_t j = 0; j < kl; j++)
			d |= (unsigned char)(k[j] ^ (j < hl ? h[j] : 0));
		if (!d && !ok)
			which = (int)i;
		ok |= !d;
	}
	return which;
}

int auth_ok(struct MHD_Connection *mc)
{
	return auth_key(mc) != AUTH_NONE;
}

int auth_admin(int key)
{
	return key >= 0 && (size_t)key < n_admin;
}

const char *auth_bearer(struct MHD_Connection *mc)
{
	const char *h;

	if (!keys)
		return NULL;
	h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7))
		return NULL;
	for (h += 7; *h == ' '; h++)
		;
	return h;
}

/* Reads the API key file: mode 0600 (no group/other bits), one key per
 * line, '#' comments. */
int auth_load(const char *path)
{
	FILE *f;
	struct stat st;
	char line[GW_KEY_MAX + 8];
	long ln = 0;
	/* O_NONBLOCK: a FIFO fails the S_ISREG check below at once, not
	 * block open() until a writer shows up */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "quorum serve: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077)) {
		fprintf(stderr, "quorum serve: %s: API key file must be a "
			"regular file of mode 0600 (no group/other access; "
			"chmod 600 %s)\n", path, path);
		close(fd);
		return -1;
	}
	if (!(f = fdopen(fd, "r")) ||
	    (!keys && !(keys = calloc(GW_MAX_KEYS, sizeof(*keys))))) {
		fprintf(stderr, "quorum serve: %s: cannot read\n", path);
		if (f)
			fclose(f);
		else
			close(fd);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line), b = 0;

		ln++;
		if (n && line[n - 1] != '\n' && !feof(f)) {
			fprintf(stderr, "quorum serve: %s:%ld: key longer than "
				"%d bytes\n", path, ln, GW_KEY_MAX);
			fclose(f);
			return -1;
		}
		while (n && strchr(" \t\r\n", line[n - 1]))
			line[--n] = '\0';
		while (line[b] == ' ' || line[b] == '\t')
			b++;
		if (!line[b] || line[b] == '#')
			continue;
		for (size_t i = b; i < n; i++)
			if ((unsigned char)line[i] <= 0x20 ||
			    (unsigned char)line[i] >= 0x7f) {
				fprintf(stderr, "quorum serve: %s:%ld: a key is "
					"printable ASCII without spaces\n",
					path, ln);
				fclose(f);
				return -1;
			}
		if (n_keys == GW_MAX_KEYS) {
			fprintf(stderr, "quorum serve: %s: more than %d keys\n",
				path, GW_MAX_KEYS);
			fclose(f);
			return -1;
		}
		keys[n_keys++] = strdup(line + b);
	}
	fclose(f);
	if (!n_keys) {
		fprintf(stderr, "quorum serve: %s: no keys (an empty key file "
			"would lock everyone out; `quorum keygen --api-key "
			"FILE` writes one)\n", path);
		return -1;
	}
	return 0;
}

int auth_required(void)
{
	return keys != NULL;
}

void auth_free(void)
{
	for (size_t i = 0; i < n_keys; i++)
		free(keys[i]);
	free(keys);
	keys = NULL;
	n_keys = n_admin = 0;
}

int auth_load_admin(const char *path)
{
	if (n_keys) {
		fprintf(stderr, "quorum serve: admin keys are read first\n");
		return -1;
	}
	if (auth_load(path))
		return -1;
	n_admin = n_keys;
	return 0;
}

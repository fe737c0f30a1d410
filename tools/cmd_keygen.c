/* quorum keygen — a CURVE key pair for the cluster (see common/net/curve.h),
 * or an API key file for the gateway (http.api_keys_file). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli.h"
#include "net/curve.h"
#include "qerr.h"

static void help(void)
{
	printf("usage: quorum keygen -o NAME\n"
	       "       quorum keygen --api-key FILE\n\n"
	       "Generates a CurveZMQ key pair (zmq_curve_keypair) for the\n"
	       "coordinator, a worker host or a client:\n"
	       "  NAME.key  the secret key, mode 0600: keep it on that machine\n"
	       "  NAME.pub  the public key, mode 0644: give it to the other side\n"
	       "Each file is one line of 40 Z85 characters after a '#' comment.\n"
	       "Existing files are never overwritten (the command fails and\n"
	       "writes nothing).\n\n"
	       "  coordinator: security.server_public_key_file / _secret_key_file\n"
	       "  worker:      security.worker_public_key_file / _secret_key_file,\n"
	       "               NAME.pub on the coordinator's security.worker_keys\n"
	       "  client:      quorum ask --server-key server.pub --client-key\n"
	       "               NAME.key; NAME.pub on security.client_keys\n\n"
	       "With --api-key, instead: a new API key for the HTTP gateway\n"
	       "(\"sk-quorum-\" and 43 random letters and digits: 256 bits\n"
	       "from getrandom) in FILE, mode 0600, one key a line as\n"
	       "http.api_keys_file reads it; FILE is never overwritten (add\n"
	       "more keys by appending another file's line).\n\n"
	       "options:\n"
	       "  -o, --out NAME    output name (NAME.key and NAME.pub)\n"
	       "  --api-key FILE    write an API key file instead\n"
	       "  -h, --help        this help\n\n"
	       "Prints the public key (with --api-key: the key) on stdout.\n");
}

#define API_KEY_PREFIX "sk-quorum-"
#define API_KEY_CHARS 43 /* of 62: 256 bits */

/* A new API key in FILE (created, mode 0600) and on stdout; 0, or 1
 * with why on stderr. */
static int api_key(const char *path)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn"
				 "opqrstuvwxyz0123456789";
	char key[sizeof(API_KEY_PREFIX) + API_KEY_CHARS], line[160];
	size_t k = strlen(API_KEY_PREFIX);
	int fd, n;

	memcpy(key, API_KEY_PREFIX, k);
	while (k < sizeof(key) - 1) {
		unsigned char b[64];
		ssize_t got = getrandom(b, sizeof(b), 0);

		if (got <= 0) {
			fprintf(stderr, "quorum keygen: getrandom: %s\n",
				strerror(errno));
			return 1;
		}
		/* 248 = 4 x 62: the bytes above it are dropped, so every
		 * character is as likely as the next */
		for (ssize_t i = 0; i < got && k < sizeof(key) - 1; i++)
			if (b[i] < 248)
				key[k++] = al[b[i] % 62];
	}
	key[k] = '\0';
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "quorum keygen: %s: %s%s\n", path,
			strerror(errno), errno == EEXIST
			? " (never overwritten: name a new file)" : "");
		return 1;
	}
	n = snprintf(line, sizeof(line), "# an API key of the quorum "
		     "gateway (http.api_keys_file)\n%s\n", key);
	if (write(fd, line, (size_t)n) != n || close(fd)) {
		fprintf(stderr, "quorum keygen: %s: %s\n", path,
			strerror(errno));
		unlink(path);
		return 1;
	}
	printf("%s\n", key);
	fprintf(stderr, "quorum keygen: wrote %s (mode 0600)\n", path);
	return 0;
}

int cmd_keygen(int argc, char **argv)
{
	static const struct option opts[] = {
		{"out", required_argument, 0, 'o'},
		{"api-key", required_argument, 0, 'a'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *out = NULL, *akey = NULL;
	char pub[CURVE_Z85_LEN + 1];
	int c;

	optind = 1;
	if (cli_opts("keygen", argc, argv, "o:h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'a': akey = optarg; break;
		case 'h': help(); return 0;
		default: return cli_usage_error("keygen", "bad option");
		}
	}
	if (optind != argc)
		return cli_usage_error("keygen", "unexpected argument '%s'",
				       argv[optind]);
	if (akey && out)
		return cli_usage_error("keygen", "-o and --api-key make "
				       "different keys: one of them");
	if (akey && !*akey)
		return cli_usage_error("keygen", "--api-key wants a file name");
	/* '-' is stdin/stdout everywhere else in the CLI: a key file named
	 * so would be a surprise (a secret key is never printed) */
	if ((akey && !strcmp(akey, "-")) || (out && !strcmp(out, "-")))
		return cli_usage_error("keygen", "'-' is no file name here: "
				       "keys are written to files (0600)");
	if (akey)
		return api_key(akey);
	if (!out || !*out)
		return cli_usage_error("keygen", "-o NAME (or --api-key FILE) "
				       "is required");
	if (curve_keygen(out, pub)) {
		fprintf(stderr, "quorum keygen: %s\n", qerr_detail());
		return 1;
	}
	printf("%s\n", pub);
	fprintf(stderr, "quorum keygen: wrote %s.key (secret, 0600) and %s.pub "
		"(public, 0644)\n", out, out);
	return 0;
}

/* quorum keygen — a CURVE key pair for the cluster (see common/net/curve.h). */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "net/curve.h"
#include "qerr.h"

static void help(void)
{
	printf("usage: quorum keygen -o NAME\n\n"
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
	       "options:\n"
	       "  -o, --out NAME    output name (NAME.key and NAME.pub)\n"
	       "  -h, --help        this help\n\n"
	       "Prints the public key on stdout.\n");
}

int cmd_keygen(int argc, char **argv)
{
	static const struct option opts[] = {
		{"out", required_argument, 0, 'o'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *out = NULL;
	char pub[CURVE_Z85_LEN + 1];
	int c;

	optind = 1;
	if (cli_opts("keygen", argc, argv, "o:h", opts))
		return 2;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'h': help(); return 0;
		default: return cli_usage_error("keygen", "bad option");
		}
	}
	if (optind != argc)
		return cli_usage_error("keygen", "unexpected argument '%s'",
				       argv[optind]);
	if (!out || !*out)
		return cli_usage_error("keygen", "-o NAME is required");
	if (curve_keygen(out, pub)) {
		fprintf(stderr, "quorum keygen: %s\n", qerr_detail());
		return 1;
	}
	printf("%s\n", pub);
	fprintf(stderr, "quorum keygen: wrote %s.key (secret, 0600) and %s.pub "
		"(public, 0644)\n", out, out);
	return 0;
}

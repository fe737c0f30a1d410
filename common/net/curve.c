/*
 * curve — CurveZMQ for the cluster (see curve.h): key files (read,
 * write, Z85 checks), the allowlists of client and worker keys, and the
 * ZAP handler thread that authenticates every connection against them.
 * Callers: coordinator/, worker/, tools/ (clients, keygen), the gateway.
 */
#include "net/curve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "qerr.h"

static const char z85_chars[] =
	"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	".-:+=^!/*?&<>()[]{}@%$#";

int curve_z85_ok(const char *s)
{
	uint8_t bin[CURVE_KEY_BYTES];

	if (!s || strlen(s) != CURVE_Z85_LEN)
		return 0;
	for (const char *p = s; *p; p++)
		if (!strchr(z85_chars, *p))
			return 0;
	return zmq_z85_decode(bin, s) != NULL;
}

static const char *kind_name(curve_kind k)
{
	return k == CURVE_SECRET ? "secret" : "public";
}

/* ---- key files ------------------------------------------------------- */

int curve_key_parse(const char *name, const char *text, size_t len,
		    curve_kind kind, char z85[CURVE_Z85_LEN + 1])
{
	const char *other = kind == CURVE_SECRET ? CURVE_PUBLIC_TAG
						 : CURVE_SECRET_TAG;
	size_t pos = 0;
	int line = 0, found = 0;

	if (!name || !text || !z85)
		return qerr_fail(QERR_ARG, "curve: NULL argument");
	z85[0] = '\0';
	if (len > CURVE_FILE_MAX)
		return qerr_fail(QERR_RANGE, "%s: larger than %d bytes: not a "
				 "key file", name, CURVE_FILE_MAX);
	while (pos < len) {
		const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		size_t a = 0, b = n;

		pos += n + (nl != NULL);
		line++;
		if (memchr(s, '\0', n))
			return qerr_fail(QERR_FORMAT, "%s:%d: NUL byte", name,
					 line);
		while (a < b && (s[a] == ' ' || s[a] == '\t'))
			a++;
		while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' ||
				 s[b - 1] == '\r'))
			b--;
		if (a == b)
			continue;
		if (s[0] == '#') {
			if (b - a >= strlen(other) &&
			    !memcmp(s + a, other, strlen(other)))
				return qerr_fail(QERR_FORMAT,
						 "%s: this is a %s key file; a "
						 "%s key is expected here", name,
						 kind_name(!kind), kind_name(kind));
			continue;
		}
		if (found)
			return qerr_fail(QERR_FORMAT, "%s:%d: a second key line "
					 "(a key file holds one key)", name,
					 line);
		if (b - a != CURVE_Z85_LEN)
			return qerr_fail(QERR_FORMAT, "%s:%d: expected a %s key "
					 "of %d Z85 characters, got %zu "
					 "characters", name, line,
					 kind_name(kind), CURVE_Z85_LEN, b - a);
		memcpy(z85, s + a, CURVE_Z85_LEN);
		z85[CURVE_Z85_LEN] = '\0';
		if (!curve_z85_ok(z85)) {
			z85[0] = '\0';
			return qerr_fail(QERR_FORMAT, "%s:%d: not a valid Z85 "
					 "key", name, line);
		}
		found = 1;
	}
	if (!found)
		return qerr_fail(QERR_MISSING, "%s: no key in the file (expected "
				 "one line of %d Z85 characters)", name,
				 CURVE_Z85_LEN);
	return QERR_OK;
}

int curve_key_load(const char *path, curve_kind kind,
		   char z85[CURVE_Z85_LEN + 1])
{
	char buf[CURVE_FILE_MAX + 1];
	struct stat st;
	ssize_t n;
	size_t len = 0;
	int fd, rc;

	if (!path || !*path)
		return qerr_fail(QERR_ARG, "no %s key file given",
				 kind_name(kind));
	/* O_NONBLOCK: a FIFO named as a key fails the S_ISREG check below
	 * at once, not block open() until a writer shows up (no effect on
	 * a regular file's reads) */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return qerr_fail(QERR_IO, "%s: cannot open %s key file: %s",
				 path, kind_name(kind), strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return qerr_fail(QERR_IO, "%s: not a regular file", path);
	}
	if (kind == CURVE_SECRET && (st.st_mode & 0007)) {
		close(fd);
		return qerr_fail(QERR_RANGE, "%s: secret key file is readable "
				 "by others (mode %03o): chmod 600 it", path,
				 (unsigned)(st.st_mode & 0777));
	}
	while (len < sizeof(buf)) {
		n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			return qerr_fail(QERR_IO, "%s: read: %s", path,
					 strerror(e));
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	rc = curve_key_parse(path, buf, len, kind, z85);
	explicit_bzero(buf, sizeof(buf));
	return rc;
}

int curve_public_of(const char *secret, char pub[CURVE_Z85_LEN + 1])
{
	if (!curve_z85_ok(secret))
		return qerr_fail(QERR_FORMAT, "not a Z85 secret key");
	if (zmq_curve_public(pub, secret))
		return qerr_fail(QERR_UNSUPPORTED, "zmq_curve_public: %s "
				 "(libzmq without CURVE?)",
				 zmq_strerror(zmq_errno()));
	return QERR_OK;
}

/* Creates path with O_EXCL and the exact mode (umask does not apply). */
static int create_excl(const char *path, int mode, int *fd)
{
	*fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (*fd < 0)
		return qerr_fail(QERR_IO, "%s: %s%s", path, strerror(errno),
				 errno == EEXIST ? " (refusing to overwrite a "
						   "key file)" : "");
	if (fchmod(*fd, (mode_t)mode)) {
		int e = errno;

		close(*fd);
		unlink(path);
		return qerr_fail(QERR_IO, "%s: chmod: %s", path, strerror(e));
	}
	return QERR_OK;
}

static int write_key(int fd, const char *path, const char *tag,
		     const char *z85)
{
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "%s (quorum keygen)\n%s\n", tag,
			 z85);
	int rc = QERR_OK;

	if (n <= 0 || n >= (int)sizeof(buf) ||
	    write(fd, buf, (size_t)n) != n || fsync(fd))
		rc = qerr_fail(QERR_IO, "%s: write: %s", path, strerror(errno));
	explicit_bzero(buf, sizeof(buf));
	return rc;
}

int curve_keygen(const char *base, char pub[CURVE_Z85_LEN + 1])
{
	char kpath[4096], ppath[4096];
	char p[CURVE_Z85_LEN + 1], s[CURVE_Z85_LEN + 1];
	int kfd = -1, pfd = -1, rc;

	if (!base || !*base)
		return qerr_fail(QERR_ARG, "keygen: no output name");
	if ((size_t)snprintf(kpath, sizeof(kpath), "%s.key", base) >=
		    sizeof(kpath) ||
	    (size_t)snprintf(ppath, sizeof(ppath), "%s.pub", base) >=
		    sizeof(ppath))
		return qerr_fail(QERR_ARG, "keygen: name too long");
	if (!zmq_has("curve"))
		return qerr_fail(QERR_UNSUPPORTED, "libzmq has no CURVE support");
	if (zmq_curve_keypair(p, s))
		return qerr_fail(QERR_UNSUPPORTED, "zmq_curve_keypair: %s",
				 zmq_strerror(zmq_errno()));
	/* both names are taken before anything is written */
	if ((rc = create_excl(kpath, 0600, &kfd)))
		goto out;
	if ((rc = create_excl(ppath, 0644, &pfd))) {
		close(kfd);
		kfd = -1;
		unlink(kpath);
		goto out;
	}
	if ((rc = write_key(kfd, kpath, CURVE_SECRET_TAG, s)) ||
	    (rc = write_key(pfd, ppath, CURVE_PUBLIC_TAG, p))) {
		unlink(kpath);
		unlink(ppath);
		goto out;
	}
	if (pub)
		memcpy(pub, p, sizeof(p));
out:
	if (kfd >= 0 && close(kfd) && !rc) {
		rc = qerr_fail(QERR_IO, "%s: close: %s", kpath, strerror(errno));
		unlink(kpath);
		unlink(ppath);
	}
	if (pfd >= 0 && close(pfd) && !rc) {
		rc = qerr_fail(QERR_IO, "%s: close: %s", ppath, strerror(errno));
		unlink(kpath);
		unlink(ppath);
	}
	explicit_bzero(s, sizeof(s));
	return rc;
}

/* ---- socket options -------------------------------------------------- */

void curve_sock_wipe(curve_sock *k)
{
	if (k)
		explicit_bzero(k, sizeof(*k));
}

/* Loads a secret key file and checks it against a public key file. */
static int load_pair(const char *pub_file, const char *sec_file,
		     char sec[CURVE_Z85_LEN + 1], char pub[CURVE_Z85_LEN + 1])
{
	char derived[CURVE_Z85_LEN + 1];
	int rc;

	if ((rc = curve_key_load(sec_file, CURVE_SECRET, sec)) ||
	    (rc = curve_public_of(sec, derived)))
		return rc;
	if (pub_file) {
		if ((rc = curve_key_load(pub_file, CURVE_PUBLIC, pub)))
			return rc;
		if (strcmp(pub, derived))
			return qerr_fail(QERR_FORMAT, "%s and %s are not one key "
					 "pair (the public key of the secret "
					 "key is %s)", pub_file, sec_file,
					 derived);
	} else {
		memcpy(pub, derived, sizeof(derived));
	}
	return QERR_OK;
}

int curve_sock_server(const curve_security *s, const char *domain,
		      curve_sock *out)
{
	char pub[CURVE_Z85_LEN + 1];
	int rc;

	if (!s || !domain || !out)
		return qerr_fail(QERR_ARG, "curve: NULL argument");
	memset(out, 0, sizeof(*out));
	if (!s->server_public_key_file || !s->server_secret_key_file)
		return qerr_fail(QERR_MISSING, "security.curve is on but "
				 "security.server_%s_key_file is not set",
				 s->server_public_key_file ? "secret" : "public");
	if (!zmq_has("curve"))
		return qerr_fail(QERR_UNSUPPORTED, "libzmq has no CURVE support");
	out->server = 1;
	out->domain = domain;
	rc = load_pair(s->server_public_key_file, s->server_secret_key_file,
		       out->secret, pub);
	if (rc)
		curve_sock_wipe(out);
	return rc;
}

int curve_sock_client(const char *server_pub_file, const char *secret_file,
		      const char *public_file, curve_sock *out)
{
	int rc;

	if (!out)
		return qerr_fail(QERR_ARG, "curve: NULL argument");
	memset(out, 0, sizeof(*out));
	if (!server_pub_file || !secret_file)
		return qerr_fail(QERR_MISSING, "CURVE needs the server's public "
				 "key file and this peer's secret key file");
	if (!zmq_has("curve"))
		return qerr_fail(QERR_UNSUPPORTED, "libzmq has no CURVE support");
	if ((rc = curve_key_load(server_pub_file, CURVE_PUBLIC,
				 out->server_key)) ||
	    (rc = load_pair(public_file, secret_file, out->secret,
			    out->public_)))
		curve_sock_wipe(out);
	return rc;
}

int curve_sock_apply(void *sock, const curve_sock *k)
{
	int one = 1;

	if (!k)
		return QERR_OK;
	if (k->server) {
		if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) ||
		    zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->secret,
				   CURVE_Z85_LEN + 1) ||
		    zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, k->domain,
				   strlen(k->domain)))
			return qerr_fail(QERR_IO, "CURVE server options: %s",
					 zmq_strerror(zmq_errno()));
		return QERR_OK;
	}
	if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, k->server_key,
			   CURVE_Z85_LEN + 1) ||
	    zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, k->public_,
			   CURVE_Z85_LEN + 1) ||
	    zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->secret,
			   CURVE_Z85_LEN + 1))
		return qerr_fail(QERR_IO, "CURVE client options: %s",
				 zmq_strerror(zmq_errno()));
	return QERR_OK;
}

/* ---- ZAP ------------------------------------------------------------- */

typedef struct {
	uint8_t (*keys)[CURVE_KEY_BYTES]; /* (n) */
	const curve_key *entries;           /* (n) borrowed: their ids */
	size_t n;
} allowlist;

struct curve_zap {
	void *rep;          /* REP at CURVE_ZAP_ENDPOINT, NULL without ctx */
	allowlist clients, workers;
	uint64_t allowed, refused;
};

static int load_list(const char *what, const curve_key *k, size_t n,
		     allowlist *out)
{
	if (!n)
		return qerr_fail(QERR_MISSING, "security.curve is on but "
				 "security.%s is empty: refusing to start "
				 "without an allowlist", what);
	if (!(out->keys = calloc(n, sizeof(*out->keys))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	out->entries = k;
	for (size_t i = 0; i < n; i++) {
		char z85[CURVE_Z85_LEN + 1];
		int rc;

		if (k[i].path) {
			if ((rc = curve_key_load(k[i].path, CURVE_PUBLIC, z85)))
				return rc;
		} else {
			memcpy(z85, k[i].z85, sizeof(z85));
			z85[CURVE_Z85_LEN] = '\0';
		}
		if (!curve_z85_ok(z85) || !zmq_z85_decode(out->keys[i], z85))
			return qerr_fail(QERR_FORMAT, "security.%s[%zu]: not a "
					 "Z85 key", what, i);
		out->n = i + 1;
	}
	return QERR_OK;
}

void curve_zap_free(curve_zap **pz)
{
	curve_zap *z;

	if (!pz || !*pz)
		return;
	z = *pz;
	if (z->rep)
		zmq_close(z->rep);
	free(z->clients.keys);
	free(z->workers.keys);
	free(z);
	*pz = NULL;
}

int curve_zap_new(const curve_security *s, curve_zap **out)
{
	curve_zap *z;
	int rc;

	if (!s || !out)
		return qerr_fail(QERR_ARG, "curve: NULL argument");
	*out = NULL;
	if (!(z = calloc(1, sizeof(*z))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	if ((rc = load_list("client_keys", s->client_keys, s->n_client_keys,
			    &z->clients)) ||
	    (rc = load_list("worker_keys", s->worker_keys, s->n_worker_keys,
			    &z->workers))) {
		curve_zap_free(&z);
		return rc;
	}
	*out = z;
	return QERR_OK;
}

int curve_zap_bind(curve_zap *z, void *ctx)
{
	int zero = 0;

	if (!z || !ctx || z->rep)
		return qerr_fail(QERR_ARG, "curve_zap_bind: bad arguments");
	if (!(z->rep = zmq_socket(ctx, ZMQ_REP)) ||
	    zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_bind(z->rep, CURVE_ZAP_ENDPOINT)) {
		int e = zmq_errno();

		if (z->rep)
			zmq_close(z->rep);
		z->rep = NULL;
		return qerr_fail(QERR_IO, "ZAP handler %s: %s",
				 CURVE_ZAP_ENDPOINT, zmq_strerror(e));
	}
	return QERR_OK;
}

void *curve_zap_socket(const curve_zap *z)
{
	return z ? z->rep : NULL;
}

int curve_zap_allowed(const curve_zap *z, const char *domain,
		      const uint8_t *key)
{
	const allowlist *l;

	if (!z || !domain || !key)
		return 0;
	if (!strcmp(domain, CURVE_DOMAIN_CLIENTS))
		l = &z->clients;
	else if (!strcmp(domain, CURVE_DOMAIN_WORKERS))
		l = &z->workers;
	else
		return 0;
	for (size_t i = 0; i < l->n; i++)
		if (!memcmp(l->keys[i], key, CURVE_KEY_BYTES))
			return 1;
	return 0;
}

int curve_zap_id_allowed(const curve_zap *z, const char *user,
			 const char *id)
{
	uint8_t key[CURVE_KEY_BYTES];

	if (!z || !user || !id || !curve_z85_ok(user) ||
	    !zmq_z85_decode(key, user))
		return 0;
	for (size_t i = 0; i < z->workers.n; i++) {
		const curve_key *e = &z->workers.entries[i];

		/* (a key may have several entries: any one allows) */
		if (memcmp(z->workers.keys[i], key, CURVE_KEY_BYTES))
			continue;
		if (!e->n_ids)
			return 1;
		for (size_t j = 0; j < e->n_ids; j++)
			if (!strcmp(e->ids[j], id))
				return 1;
	}
	return 0;
}

void curve_zap_counts(const curve_zap *z, uint64_t *allowed,
		      uint64_t *refused)
{
	if (allowed)
		*allowed = z ? z->allowed : 0;
	if (refused)
		*refused = z ? z->refused : 0;
}

#define ZAP_MAX_FRAMES 8

static int frame_is(zmq_msg_t *f, const char *s)
{
	size_t n = strlen(s);

	return zmq_msg_size(f) == n && !memcmp(zmq_msg_data(f), s, n);
}

/* Reads one request and answers it. 1 answered, 0 nothing waiting, -1 a
 * socket error. */
static int zap_one(curve_zap *z)
{
	zmq_msg_t f[ZAP_MAX_FRAMES];
	int n = 0, more = 1, ok = 0, malformed;
	const char *code, *text;
	char domain[256] = "", user[CURVE_Z85_LEN + 1] = "";
	const void *rid = "";
	size_t rid_len = 0;

	while (more) {
		zmq_msg_t tmp, *m = n < ZAP_MAX_FRAMES ? &f[n] : &tmp;

		zmq_msg_init(m);
		if (zmq_msg_recv(m, z->rep, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
			int e = zmq_errno();

			zmq_msg_close(m);
			for (int i = 0; i < n && i < ZAP_MAX_FRAMES; i++)
				zmq_msg_close(&f[i]);
			return n == 0 && e == EAGAIN ? 0 : -1;
		}
		more = zmq_msg_more(m);
		if (m == &tmp)
			zmq_msg_close(&tmp);
		n++;
	}
	/* version, request id, domain, address, identity, mechanism,
	 * credentials (CURVE: exactly one, the 32-byte client key) */
	malformed = n < 6 || n > ZAP_MAX_FRAMES || !frame_is(&f[0], "1.0") ||
		    zmq_msg_size(&f[2]) >= sizeof(domain);
	if (!malformed) {
		rid = zmq_msg_data(&f[1]);
		rid_len = zmq_msg_size(&f[1]);
		memcpy(domain, zmq_msg_data(&f[2]), zmq_msg_size(&f[2]));
		domain[zmq_msg_size(&f[2])] = '\0';
		ok = frame_is(&f[5], "CURVE") && n == 7 &&
		     zmq_msg_size(&f[6]) == CURVE_KEY_BYTES &&
		     curve_zap_allowed(z, domain, zmq_msg_data(&f[6]));
		if (ok)
			zmq_z85_encode(user, zmq_msg_data(&f[6]),
				       CURVE_KEY_BYTES);
	} else if (n >= 2) {
		rid = zmq_msg_data(&f[1]);
		rid_len = zmq_msg_size(&f[1]);
	}
	code = malformed ? "500" : ok ? "200" : "400";
	text = malformed ? "malformed ZAP request"
	       : ok	 ? "OK"
			 : "not on the allowlist";
	if (ok)
		z->allowed++;
	else
		z->refused++;
	/* REP: exactly one reply per request, whatever it held */
	zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
	zmq_send(z->rep, rid, rid_len, ZMQ_SNDMORE);
	zmq_send(z->rep, code, 3, ZMQ_SNDMORE);
	zmq_send(z->rep, text, strlen(text), ZMQ_SNDMORE);
	zmq_send(z->rep, user, strlen(user), ZMQ_SNDMORE);
	zmq_send(z->rep, "", 0, 0);
	for (int i = 0; i < n && i < ZAP_MAX_FRAMES; i++)
		zmq_msg_close(&f[i]);
	return 1;
}

int curve_zap_serve(curve_zap *z)
{
	int k = 0;

	/* bounded: a flood of handshakes cannot starve the caller's loop */
	while (z && z->rep && k < 256 && zap_one(z) == 1)
		k++;
	return k;
}

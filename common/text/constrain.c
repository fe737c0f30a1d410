/*
 * constrain — a constraint's spelling as a GBNF grammar (see
 * constrain.h): schemas through jschema.c, patterns through rxgbnf.c,
 * choices as literal alternatives here.
 */
#include "text/constrain.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qerr.h"
#include "text/jschema.h"
#include "text/rxgbnf.h"
#include "text/strbuf.h"

int constrain_regex(const char *pattern, char **out)
{
	strbuf b = {0};
	int rc;

	*out = NULL;
	strbuf_puts(&b, "root ::= ");
	if ((rc = rxgbnf(pattern, RX_RAW, &b))) {
		strbuf_free(&b);
		return rc;
	}
	strbuf_puts(&b, "\n");
	if (!(*out = strbuf_take(&b)))
		return qerr_fail(QERR_NOMEM, "out of memory");
	return 0;
}

const char *constrain_answer(constrain_kind k)
{
	switch (k) {
	case CONSTRAIN_JSON_SCHEMA:
	case CONSTRAIN_JSON_OBJECT: return "json:";
	case CONSTRAIN_REGEX:
	case CONSTRAIN_CHOICE: return "exact";
	default: return NULL;
	}
}

int constrain_choice(const char *const *opts, size_t n, char **out)
{
	strbuf b = {0};

	*out = NULL;
	if (!n || n > CONSTRAIN_CHOICES_MAX)
		return qerr_fail(QERR_RANGE, "choice: 1..%d strings expected "
				 "(got %zu)", CONSTRAIN_CHOICES_MAX, n);
	strbuf_puts(&b, "root ::= ");
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(opts[i]);

		if (!len || len > CONSTRAIN_CHOICE_BYTES) {
			strbuf_free(&b);
			return qerr_fail(QERR_RANGE, "choice[%zu]: 1..%d bytes "
					 "expected (got %zu)", i,
					 CONSTRAIN_CHOICE_BYTES, len);
		}
		if (i)
			strbuf_puts(&b, " | ");
		strbuf_puts(&b, "\"");
		for (size_t j = 0; j < len; j++) {
			unsigned char c = (unsigned char)opts[i][j];

			if (c == '"' || c == '\\')
				strbuf_printf(&b, "\\%c", c);
			else if (c < 0x20 || c == 0x7f)
				strbuf_printf(&b, "\\x%02X", c);
			else
				strbuf_add(&b, (const char *)&c, 1);
		}
		strbuf_puts(&b, "\"");
	}
	strbuf_puts(&b, "\n");
	if (!(*out = strbuf_take(&b)))
		return qerr_fail(QERR_NOMEM, "out of memory");
	return 0;
}

/* The options of a choice array (borrowed from v) into *opts. */
static int choice_list(const json_t *v, const char ***opts, size_t *n)
{
	size_t i;
	json_t *x;

	*opts = NULL;
	*n = 0;
	if (!json_is_array(v))
		return qerr_fail(QERR_FORMAT, "choice: an array of strings "
				 "expected");
	if (!json_array_size(v) || json_array_size(v) > CONSTRAIN_CHOICES_MAX)
		return qerr_fail(QERR_RANGE, "choice: 1..%d strings expected "
				 "(got %zu)", CONSTRAIN_CHOICES_MAX,
				 json_array_size(v));
	if (!(*opts = calloc(json_array_size(v), sizeof(**opts))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	json_array_foreach(v, i, x) {
		if (!json_is_string(x) ||
		    strlen(json_string_value(x)) != json_string_length(x)) {
			free(*opts);
			*opts = NULL;
			return qerr_fail(QERR_FORMAT, "choice[%zu]: a string "
					 "without NUL bytes expected", i);
		}
		(*opts)[i] = json_string_value(x);
	}
	*n = json_array_size(v);
	return 0;
}

int constrain_gbnf(constrain_kind k, const json_t *v, char **out)
{
	json_t *owned = NULL;
	const char **opts;
	size_t n;
	int rc;

	*out = NULL;
	switch (k) {
	case CONSTRAIN_GRAMMAR:
		/* the whole text is the grammar: a NUL would cut it short in
		 * silence (an empty one the grammar setting refuses) */
		if (!json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return qerr_fail(QERR_FORMAT, "grammar: a string of "
					 "GBNF without NUL bytes expected");
		if (!(*out = strndup(json_string_value(v),
				     json_string_length(v))))
			return qerr_fail(QERR_NOMEM, "out of memory");
		return 0;
	case CONSTRAIN_JSON_SCHEMA:
		if (json_is_string(v)) {
			json_error_t je;

			/* vLLM's guided_json may be the schema's text */
			if (!(owned = json_loads(json_string_value(v),
						 JSON_REJECT_DUPLICATES, &je)))
				return qerr_fail(QERR_FORMAT, "schema: not JSON "
						 "(line %d: %s)", je.line,
						 je.text);
			v = owned;
		}
		if (!json_is_object(v) && !json_is_true(v)) {
			json_decref(owned);
			return qerr_fail(QERR_FORMAT, "schema: an object "
					 "expected");
		}
		rc = jschema_to_gbnf(v, out);
		json_decref(owned);
		return rc;
	case CONSTRAIN_JSON_OBJECT:
		return jschema_any(out);
	case CONSTRAIN_REGEX:
		if (!json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return qerr_fail(QERR_FORMAT, "regex: a string without "
					 "NUL bytes expected");
		return constrain_regex(json_string_value(v), out);
	case CONSTRAIN_CHOICE:
		if ((rc = choice_list(v, &opts, &n)))
			return rc;
		rc = constrain_choice(opts, n, out);
		free(opts);
		return rc;
	}
	return qerr_fail(QERR_ARG, "constraint kind %d", (int)k);
}

int constrain_read_file(const char *path, const char *what, char **out,
			size_t *len)
{
	struct stat st;
	char *text = NULL;
	size_t n = 0;
	ssize_t r;
	int fd, rc;

	*out = NULL;
	*len = 0;
	/* a FIFO or /dev/stdin is read as asked (blocking): a pipe of a
	 * grammar is a use; a directory only reads as empty */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return qerr_fail(QERR_IO, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return qerr_fail(QERR_FORMAT, "%s: is a directory", path);
	}
	/* one byte over the limit says the file is over it */
	if (!(text = malloc(CONSTRAIN_FILE_MAX + 2))) {
		close(fd);
		return qerr_fail(QERR_NOMEM, "%s: out of memory", path);
	}
	do {
		r = read(fd, text + n, CONSTRAIN_FILE_MAX + 1 - n);
		if (r > 0)
			n += (size_t)r;
	} while ((r > 0 || (r < 0 && errno == EINTR)) &&
		 n <= CONSTRAIN_FILE_MAX);
	rc = r < 0 ? qerr_fail(errno == EISDIR ? QERR_FORMAT : QERR_IO,
			       "%s: %s", path, errno == EISDIR
					       ? "is a directory"
					       : strerror(errno))
	     : n > CONSTRAIN_FILE_MAX
		     ? qerr_fail(QERR_RANGE, "%s: over 2 MiB", path)
	     : !n ? qerr_fail(QERR_FORMAT, "%s: empty %s", path, what)
		  : 0;
	close(fd);
	if (rc) {
		free(text);
		return rc;
	}
	text[n] = '\0';
	*out = text;
	*len = n;
	return 0;
}

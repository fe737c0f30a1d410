/*
 * qerr — the name of every error code and the thread-local detail buffer
 * a failing call leaves its one-line explanation in (see qerr.h).
 * Called from everywhere.
 */
#include "qerr.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const qerr_names[QERR_COUNT_] = {
	[QERR_OK] = "success",
	[QERR_NOMEM] = "out of memory",
	[QERR_IO] = "input/output error",
	[QERR_FORMAT] = "malformed input",
	[QERR_UNSUPPORTED] = "unsupported",
	[QERR_MISSING] = "missing",
	[QERR_RANGE] = "value out of range",
	[QERR_ARG] = "invalid argument",
	[QERR_FULL] = "capacity exhausted",
	[QERR_TOOLONG] = "too long for the context",
	[QERR_CANCELLED] = "cancelled",
	[QERR_REJECTED] = "rejected by the peer",
};

static _Thread_local char qerr_buf[512];

const char *qerr_str(int code)
{
	if (code < 0 || code >= QERR_COUNT_ || !qerr_names[code])
		return "unknown error";
	return qerr_names[code];
}

int qerr_fail(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(qerr_buf, sizeof(qerr_buf), fmt, ap);
	va_end(ap);
	return code;
}

const char *qerr_detail(void)
{
	return qerr_buf;
}

void qerr_clear(void)
{
	qerr_buf[0] = '\0';
}

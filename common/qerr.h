/*
 * qerr — quorum's typed error codes.
 *
 * Every fallible library function returns an int: QERR_OK (0) or one of the
 * codes below. A failing function may also leave a one-line human-readable
 * detail (naming the file, tensor, key, ... at fault) in a thread-local
 * buffer with qerr_fail(); callers print it with qerr_detail(). The detail
 * is only meaningful right after a call returned non-zero.
 */
#ifndef QUORUM_QERR_H
#define QUORUM_QERR_H

enum qerr {
	QERR_OK = 0,
	QERR_NOMEM,      /* out of memory */
	QERR_IO,         /* open/read/write/mmap failed */
	QERR_FORMAT,     /* malformed file or message */
	QERR_UNSUPPORTED,/* valid but unsupported (type, architecture, ...) */
	QERR_MISSING,    /* required key/tensor/field absent */
	QERR_RANGE,      /* value out of range */
	QERR_ARG,        /* bad argument from the caller */
	QERR_FULL,       /* capacity exhausted (KV pool, queue) */
	QERR_TOOLONG,    /* prompt or sequence exceeds the context */
	QERR_CANCELLED,  /* stopped on request (Cancel, signal) */
	QERR_REJECTED,   /* refused by the peer (a worker's registration) */
	QERR_COUNT_
};

/* Stable, short message for a code ("out of memory"); never NULL. */
const char *qerr_str(int code);

/* Records a printf-style detail for the current thread and returns code. */
int qerr_fail(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Detail of the last qerr_fail() on this thread, or qerr_str(code) of it
 * when none was given; "" when nothing failed yet. */
const char *qerr_detail(void);

/* Clears the current thread's detail. */
void qerr_clear(void);

#endif

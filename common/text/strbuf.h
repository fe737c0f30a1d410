/*
 * strbuf — a growing byte string, NUL-terminated at every step, for the
 * text that modules assemble (grammars from schemas, selection prompts).
 * A failed allocation sets oom and makes every later call a no-op, so a
 * builder checks once at the end.
 */
#ifndef QUORUM_STRBUF_H
#define QUORUM_STRBUF_H

#include <stddef.h>

typedef struct strbuf {
	char *b;       /* NULL until the first byte; owned */
	size_t n, cap;
	int oom;
} strbuf;

void strbuf_add(strbuf *s, const char *t, size_t n);
void strbuf_puts(strbuf *s, const char *t);
void strbuf_printf(strbuf *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The text, handed over (NULL when out of memory; then freed here). */
char *strbuf_take(strbuf *s);
void strbuf_free(strbuf *s);

#endif

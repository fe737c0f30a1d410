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

/* 1 when t[0, n) holds nothing but ASCII whitespace (none at all too):
 * a question with no words, which every entry point refuses as empty. */
static inline int text_blank(const char *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (t[i] != ' ' && t[i] != '\t' && t[i] != '\n' &&
		    t[i] != '\r' && t[i] != '\v' && t[i] != '\f')
			return 0;
	return 1;
}

#endif

/*
 * strbuf — a growing byte string (see strbuf.h).
 */
#include "text/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_add(strbuf *s, const char *t, size_t n)
{
	if (s->oom)
		return;
	if (s->n + n + 1 > s->cap) {
		size_t c = s->cap ? s->cap * 2 : 4096;
		char *nb;

		while (c < s->n + n + 1)
			c *= 2;
		if (!(nb = realloc(s->b, c))) {
			s->oom = 1;
			return;
		}
		s->b = nb;
		s->cap = c;
	}
	memcpy(s->b + s->n, t, n);
	s->n += n;
	s->b[s->n] = '\0';
}

void strbuf_puts(strbuf *s, const char *t)
{
	strbuf_add(s, t, strlen(t));
}

void strbuf_printf(strbuf *s, const char *fmt, ...)
{
	char tmp[512], *big;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(tmp)) {
		strbuf_add(s, tmp, (size_t)n);
		return;
	}
	if (!(big = malloc((size_t)n + 1))) {
		s->oom = 1;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	strbuf_add(s, big, (size_t)n);
	free(big);
}

char *strbuf_take(strbuf *s)
{
	char *b = s->b;

	if (s->oom) {
		free(b);
		b = NULL;
	}
	s->b = NULL;
	s->n = s->cap = 0;
	return b;
}

void strbuf_free(strbuf *s)
{
	free(s->b);
	s->b = NULL;
	s->n = s->cap = 0;
}

/*
 * usc — the selection prompt and the reading of its reply (see usc.h).
 */
#include "sc/usc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	char *b;
	size_t n, cap;
	int oom;
} sbuf;

static void add(sbuf *s, const char *t, size_t n)
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

static void adds(sbuf *s, const char *t)
{
	add(s, t, strlen(t));
}

char *usc_prompt(const char *question, size_t qlen, const char *const *texts,
		 const size_t *lens, int n)
{
	sbuf s = {0};
	char head[48];

	adds(&s, "Below are ");
	snprintf(head, sizeof(head), "%d", n);
	adds(&s, head);
	adds(&s, " numbered responses to one question.\n\nQuestion: ");
	add(&s, question, qlen);
	adds(&s, "\n\n");
	for (int i = 0; i < n; i++) {
		size_t len = texts[i] ? lens[i] : 0;

		if (len > USC_RESPONSE_MAX)
			len = USC_RESPONSE_MAX;
		snprintf(head, sizeof(head), "Response %d:\n", i);
		adds(&s, head);
		if (len)
			add(&s, texts[i], len);
		adds(&s, "\n\n");
	}
	adds(&s, "Which response agrees best with the majority of the others? "
		 "Begin your reply with \"Response K\", K being its number.");
	if (s.oom) {
		free(s.b);
		return NULL;
	}
	return s.b;
}

int usc_pick(const char *reply, size_t len, int n)
{
	static const char w[] = "response";

	for (size_t i = 0; i + 8 <= len; i++) {
		size_t k = 0, j;
		long v = 0;

		while (k < 8 && (reply[i + k] | 0x20) == w[k])
			k++;
		if (k < 8)
			continue;
		j = i + 8;
		while (j < len && (reply[j] == ' ' || reply[j] == '#'))
			j++;
		if (j >= len || reply[j] < '0' || reply[j] > '9')
			continue;
		while (j < len && reply[j] >= '0' && reply[j] <= '9' &&
		       v < 1000000)
			v = v * 10 + (reply[j++] - '0');
		return v < n ? (int)v : -1;
	}
	return -1;
}

/*
 * usc — the selection prompt and the reading of its reply (see usc.h).
 */
#include "sc/usc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/strbuf.h"

char *usc_prompt(const char *question, size_t qlen, const char *const *texts,
		 const size_t *lens, int n)
{
	strbuf s = {0};
	char head[48];

	strbuf_puts(&s, "Below are ");
	snprintf(head, sizeof(head), "%d", n);
	strbuf_puts(&s, head);
	strbuf_puts(&s, " numbered responses to one question.\n\nQuestion: ");
	strbuf_add(&s, question, qlen);
	strbuf_puts(&s, "\n\n");
	for (int i = 0; i < n; i++) {
		size_t len = texts[i] ? lens[i] : 0;

		if (len > USC_RESPONSE_MAX)
			len = USC_RESPONSE_MAX;
		snprintf(head, sizeof(head), "Response %d:\n", i);
		strbuf_puts(&s, head);
		if (len)
			strbuf_add(&s, texts[i], len);
		strbuf_puts(&s, "\n\n");
	}
	strbuf_puts(&s, "Which response agrees best with the majority of the others? "
		 "Begin your reply with \"Response K\", K being its number.");
	return strbuf_take(&s);
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

/*
 * reasoning — splits a sample's text into reasoning and content as it
 * streams in (reasoning.h): a small state machine over vote.h's rule 0
 * grammar, holding back only what could still be the start of a marker.
 */
#include "sc/reasoning.h"

#include <stdlib.h>
#include <string.h>

enum {
	RS_START,    /* nothing settled: <think>, <|channel|> or plain? */
	RS_PLAIN,    /* no reasoning: all content */
	RS_THINK,    /* inside <think> */
	RS_ANSWER,   /* after </think> */
	RS_HEADER,   /* harmony: after <|channel|>, before <|message|> */
	RS_BODY,     /* harmony: a message's text */
	RS_BETWEEN,  /* harmony: after a message's end */
};

enum { M_THINK, M_UNTHINK, M_CHANNEL, M_MESSAGE, M_END, M_START, M_RETURN,
       M_CALL, M_COUNT };
static const char *const mark[M_COUNT] = {
	"<think>", "</think>", "<|channel|>", "<|message|>", "<|end|>",
	"<|start|>", "<|return|>", "<|call|>",
};

/* The markers each state watches for, ending with -1. */
static const int watch[][6] = {
	[RS_START] = {M_THINK, M_CHANNEL, -1},
	[RS_PLAIN] = {-1},
	[RS_THINK] = {M_UNTHINK, -1},
	[RS_ANSWER] = {-1},
	[RS_HEADER] = {M_MESSAGE, M_CHANNEL, -1},
	[RS_BODY] = {M_END, M_START, M_RETURN, M_CALL, M_CHANNEL, -1},
	[RS_BETWEEN] = {M_CHANNEL, -1},
};

void reasoning_init(reasoning_split *s)
{
	memset(s, 0, sizeof(*s));
	s->state = RS_START;
	s->content_at = REASONING_NO_CONTENT;
}

static int put(char **buf, size_t *len, size_t *cap, const char *p,
	       size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 64;
		char *b;

		while (c < *len + n + 1)
			c *= 2;
		if (!(b = realloc(*buf, c)))
			return -1;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

int reasoning_space(char b)
{
	return b == ' ' || b == '\t' || b == '\n' || b == '\r';
}

/* n content bytes from the text's byte at: the first of them marks
 * where the content begins; appended to o (NULL: only that mark). */
static int content(reasoning_split *s, size_t at, const char *p, size_t n,
		   reasoning_out *o)
{
	if (n && s->content_at == REASONING_NO_CONTENT)
		s->content_at = at;
	return o ? put(&o->c, &o->cn, &o->ccap, p, n) : 0;
}

static int reason_bytes(const char *p, size_t n, reasoning_out *o)
{
	return o ? put(&o->r, &o->rn, &o->rcap, p, n) : 0;
}

/* One settled byte (not part of a marker), the text's byte at, in the
 * current state. */
static int settle(reasoning_split *s, char b, size_t at, reasoning_out *o)
{
	switch (s->state) {
	case RS_START: /* not a marker's start: the whole text is plain */
	case RS_PLAIN:
		s->state = RS_PLAIN;
		return content(s, at, &b, 1, o);
	case RS_THINK:
		return reason_bytes(&b, 1, o);
	case RS_ANSWER:
		if (s->lead && reasoning_space(b))
			return 0;
		s->lead = 0;
		return content(s, at, &b, 1, o);
	case RS_HEADER: /* the channel's name: up to a space or a '<' */
		if (s->lead)
			return 0;
		if (b == ' ' || b == '<' || s->name_len + 1 >= sizeof(s->name)) {
			s->lead = 1;
			if (b != ' ' && b != '<')
				s->name_len = sizeof(s->name); /* too long */
			return 0;
		}
		s->name[s->name_len++] = b;
		return 0;
	case RS_BODY:
		return s->final ? content(s, at, &b, 1, o)
				: reason_bytes(&b, 1, o);
	default: /* RS_BETWEEN: markup */
		return 0;
	}
}

static void enter(reasoning_split *s, int m)
{
	switch (m) {
	case M_THINK:
		s->state = RS_THINK;
		break;
	case M_UNTHINK:
		s->state = RS_ANSWER;
		s->lead = 1;
		break;
	case M_CHANNEL:
		s->state = RS_HEADER;
		s->name_len = 0;
		s->lead = 0; /* name not ended */
		break;
	case M_MESSAGE:
		s->state = RS_BODY;
		s->final = s->name_len == 5 && !memcmp(s->name, "final", 5);
		break;
	default: /* a message's end */
		s->state = RS_BETWEEN;
	}
}

/* pend against the state's markers: 2 a whole one (*m), 1 a proper
 * prefix of one, 0 neither. */
static int match(const reasoning_split *s, int *m)
{
	int pre = 0;

	for (const int *w = watch[s->state]; *w >= 0; w++) {
		size_t n = strlen(mark[*w]);

		if (s->pend_len > n || memcmp(s->pend, mark[*w], s->pend_len))
			continue;
		if (s->pend_len == n) {
			*m = *w;
			return 2;
		}
		pre = 1;
	}
	return pre;
}

int reasoning_feed(reasoning_split *s, const char *text, size_t n,
		   reasoning_out *o)
{
	for (size_t i = 0; i < n; i++) {
		int m, k;

		if (s->state == RS_PLAIN) { /* nothing to watch for */
			size_t at = s->pos;

			s->pos += n - i;
			return content(s, at, text + i, n - i, o);
		}
		s->pend[s->pend_len++] = text[i];
		s->pos++;
		while (s->pend_len && (k = match(s, &m)) != 1) {
			if (k == 2) {
				s->pend_len = 0;
				enter(s, m);
				break;
			}
			/* the first held byte starts no marker: settled (the
			 * held bytes are the last pend_len read) */
			if (settle(s, s->pend[0], s->pos - s->pend_len, o))
				return -1;
			memmove(s->pend, s->pend + 1, --s->pend_len);
		}
	}
	return 0;
}

size_t reasoning_feed_to_content(reasoning_split *s, const char *text,
				 size_t n, int *at)
{
	*at = REASONING_NOT_YET;
	for (size_t k = 0; k < n; k++) {
		/* no output: the books alone cannot fail */
		(void)reasoning_feed(s, text + k, 1, NULL);
		if ((*at = reasoning_content_next(s)) != REASONING_NOT_YET)
			return k + 1;
	}
	return n;
}

int reasoning_has_marker(const char *p, size_t n)
{
	for (int m = 0; m < M_COUNT; m++)
		if (memmem(p, n, mark[m], strlen(mark[m])))
			return 1;
	return 0;
}

int reasoning_content_next(const reasoning_split *s)
{
	if (s->pend_len)
		return REASONING_NOT_YET;
	if (s->state == RS_ANSWER)
		return REASONING_AFTER_THINK;
	if (s->state == RS_BODY && s->final)
		return REASONING_FINAL_BODY;
	return REASONING_NOT_YET;
}

int reasoning_end(reasoning_split *s, reasoning_out *o)
{
	for (size_t i = 0; i < s->pend_len; i++)
		if (settle(s, s->pend[i], s->pos - s->pend_len + i, o))
			return -1;
	s->pend_len = 0;
	return 0;
}

size_t reasoning_content_at(const char *text, size_t n)
{
	reasoning_split s;

	reasoning_init(&s);
	reasoning_feed(&s, text, n, NULL); /* without o: nothing to fail */
	reasoning_end(&s, NULL);
	return s.content_at;
}

void reasoning_out_clear(reasoning_out *o)
{
	o->rn = o->cn = 0;
	if (o->r)
		o->r[0] = '\0';
	if (o->c)
		o->c[0] = '\0';
}

void reasoning_out_free(reasoning_out *o)
{
	free(o->r);
	free(o->c);
	memset(o, 0, sizeof(*o));
}

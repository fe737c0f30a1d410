/*
 * reasoning — a sample's text as a chat reply shows it: the model's
 * reasoning apart from its answer (OpenAI-style `reasoning_content`
 * beside `content`), read incrementally so a stream can send each part
 * as it arrives.
 *
 * The grammar is vote.h's rule 0, read from the start of the text:
 *   "<think>" R "</think>" C   R is reasoning; C, its leading
 *                              whitespace dropped, is content (a later
 *                              <think> in C stays content).
 *   "<|channel|>" ...          harmony: every message
 *                              <|channel|>NAME[ ...]<|message|>BODY is
 *                              reasoning, or content when NAME is
 *                              "final"; BODY ends at <|end|>, <|start|>,
 *                              <|return|>, <|call|> or <|channel|>. The
 *                              markup between messages ("<|start|>
 *                              assistant") is neither.
 *   anything else              all content, byte for byte.
 * So the content of a harmony text with one final message is exactly the
 * span vote_harmony_final gives (the one the vote reads); with several,
 * their bodies joined in order. Bodies of several reasoning messages are
 * joined as they are.
 *
 * Incremental: reasoning_feed takes any split of the text (even inside a
 * marker) and appends to the two outputs only bytes no later byte can
 * move: a possible marker's beginning is held back until it is settled
 * or reasoning_end flushes it to the part it was in. Feeding a text in
 * pieces gives the same two outputs as feeding it whole.
 */
#ifndef QUORUM_REASONING_H
#define QUORUM_REASONING_H

#include <stddef.h>
#include <stdint.h>

/* Appended bytes: reasoning's and content's, of one feed. */
typedef struct {
	char *r, *c;         /* NUL-terminated; NULL when nothing appended */
	size_t rn, cn;
	size_t rcap, ccap;
} reasoning_out;

typedef struct {
	int state;           /* RS_* in reasoning.c */
	int final;           /* the message being read is "final" */
	int lead;            /* think: content's leading whitespace to drop */
	char name[16];       /* harmony: the channel name read so far */
	size_t name_len;
	char pend[16];       /* bytes held back: a marker's possible start */
	size_t pend_len;
	size_t pos;          /* bytes read so far */
	size_t content_at;   /* the text's byte where the content begins (its
			      * first settled byte), REASONING_NO_CONTENT
			      * while none is */
} reasoning_split;

#define REASONING_NO_CONTENT SIZE_MAX

void reasoning_init(reasoning_split *s);
/* Reads text[0, n) on; what it settles is appended to o (grown with
 * realloc; NULL: only s's books, content_at among them). Returns 0, or -1
 * when out of memory (o keeps what it had). */
int reasoning_feed(reasoning_split *s, const char *text, size_t n,
		   reasoning_out *o);
/* The text is whole: flushes what was held back. */
int reasoning_end(reasoning_split *s, reasoning_out *o);
/* Where the content of the whole text[0, n) begins: the offset of its
 * first byte (after </think> and the whitespace dropped behind it, at
 * harmony's final message's body, 0 for a text without reasoning), or
 * REASONING_NO_CONTENT when it has none (a sample that ran out of
 * tokens while reasoning). Its reasoning tokens are those whose pieces
 * start before it (usage's reasoning_tokens). */
size_t reasoning_content_at(const char *text, size_t n);
/* Where the text read so far stands against its content, for a
 * constraint that waits for it (fork.c): REASONING_AFTER_THINK right
 * after a </think> (content follows, whitespace dropped before it),
 * REASONING_FINAL_BODY at the start of harmony's final message body,
 * else REASONING_NOT_YET (reasoning, markup, or a marker not yet whole).
 * Meaningful while the content has not begun. */
enum { REASONING_NOT_YET, REASONING_AFTER_THINK, REASONING_FINAL_BODY };
int reasoning_content_next(const reasoning_split *s);
/* Feeds text[0, n) (books only) up to the byte after which the content
 * begins: returns the bytes fed (n when it did not begin) and sets *at
 * to reasoning_content_next's verdict there, so text[returned, n) is the
 * piece's part that belongs to the content (a token that ends the
 * reasoning may carry some). */
size_t reasoning_feed_to_content(reasoning_split *s, const char *text,
				 size_t n, int *at);
/* 1 for the whitespace dropped before a think text's content (after
 * </think>): space, tab, line feed, carriage return. */
int reasoning_space(char b);
/* 1 when p[0, n) holds one of the markers above (<think>, </think>,
 * harmony's <|channel|>, <|message|>, <|end|>, <|start|>, <|return|>,
 * <|call|>): content holding one would read as reasoning or markup. */
int reasoning_has_marker(const char *p, size_t n);
/* Empties o (keeps its buffers) / frees them. */
void reasoning_out_clear(reasoning_out *o);
void reasoning_out_free(reasoning_out *o);

#endif

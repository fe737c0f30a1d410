/*
 * rxgbnf — a regular expression as a GBNF expression (gbnf.h): the text
 * it matches, whole, as the grammar engine constrains sampling. Used for
 * a JSON schema's string "pattern" (jschema.c: the expression is over the
 * string's characters as JSON writes them, between the quotes) and for a
 * plain regex constraint (constrain.c: over the raw text).
 *
 * THE SUBSET (anything else is refused with "pattern: why", naming the
 * place): literal characters (UTF-8), escapes \. \* \\ etc., \n \r \t \f
 * \v, \xHH, the classes \d \w \s and \D \W \S, . (any character but a
 * line break), [..] and [^..] with ranges and those escapes, groups (..)
 * and (?:..), alternation |, the quantifiers * + ? {m} {m,} {m,n} (n up
 * to 256; a lazy ? after one changes nothing a grammar can tell), the
 * anchors ^ at the start and $ at the end. Back-references, look-around
 * and other anchors cannot be written as a grammar and are refused.
 *
 * Anchoring: a regex constraint is always whole (as vLLM's guided_regex
 * and SGLang's regex). A schema's pattern follows JSON Schema: without ^
 * it may start anywhere and without $ end anywhere (any characters
 * around it).
 *
 * JSON mode: the value's characters are written as JSON does — a quote,
 * a backslash or a control character as its escape (\", \\, \n, \u001F)
 * — and the characters a class or . may stand for exclude those three
 * kinds unless escaped; \s there is a space or one of the escapes \t \n
 * \r \f (inside [..]: a space only).
 */
#ifndef QUORUM_RXGBNF_H
#define QUORUM_RXGBNF_H

#include "text/strbuf.h"

enum { RX_RAW = 0, RX_JSON = 1 };

/* The GBNF expression (one parenthesized group) of pattern into b. 0, or
 * QERR_FORMAT / QERR_UNSUPPORTED with "pattern: why" as qerr detail. */
int rxgbnf(const char *pattern, int mode, strbuf *b);

#endif

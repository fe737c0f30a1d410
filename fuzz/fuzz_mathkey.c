/*
 * fuzz_mathkey — libFuzzer target: the math parser and every answer
 * format on arbitrary bytes.
 *
 * Input: byte 0 selects the format (its low 3 bits: auto, number, math,
 * choice, yesno, text, regex:\d+, choice with options A=12|B=15); the
 * rest is a sample's text, and (when it fits) mathkey's input.
 *
 * Properties beyond "no crash, no leak, no UB, bounded time": a key is
 * NUL-terminated within its buffer; the same input gives the same key
 * twice (no state leaks between calls); mathkey of its own key's digits
 * form is stable for rationals written as numbers (a key "0.5" keys to
 * "0.5").
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc/answer.h"
#include "sc/mathkey.h"
#include "sc/vote.h"

static const char *const FORMATS[8] = {
	"auto", "number", "math", "choice", "yesno", "text", "regex:\\d+",
	"choice:A=12|B=15"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	answer_format f;
	char a[VOTE_ANSWER_MAX], b[VOTE_ANSWER_MAX];
	bool ka, kb;

	if (size < 1)
		return 0;
	if (answer_format_parse(FORMATS[data[0] & 7], &f, NULL))
		abort();
	ka = answer_extract(&f, (const char *)data + 1, size - 1, a,
			    sizeof(a));
	kb = answer_extract(&f, (const char *)data + 1, size - 1, b,
			    sizeof(b));
	if (ka != kb || (ka && strcmp(a, b)) || memchr(a, 0, sizeof(a)) == NULL)
		abort();
	ka = mathkey((const char *)data + 1, size - 1, a, sizeof(a), NULL);
	if (ka && a[0] >= '0' && a[0] <= '9' && !strpbrk(a, "/,:")) {
		/* a plain number key keys to itself */
		if (!mathkey(a, strlen(a), b, sizeof(b), NULL) || strcmp(a, b))
			abort();
	}
	return 0;
}

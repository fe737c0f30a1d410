/*
 * jscan — the pre-scan of a body's JSON (jscan.h). No state, no
 * allocation.
 */
#include "jscan.h"

int jscan_check(const char *body, size_t len, size_t max_values,
		size_t max_depth, size_t *values, size_t *depth)
{
	size_t nv = 0, d = 0, dmax = 0, i = 0;
	int rc = JSCAN_OK;

	while (i < len) {
		unsigned char c = (unsigned char)body[i];

		if (c == '"') {
			nv++;
			for (i++; i < len && body[i] != '"'; i++)
				if (body[i] == '\\')
					i++;
			i++;
		} else if (c == '{' || c == '[') {
			nv++;
			if (++d > dmax)
				dmax = d;
			i++;
		} else if (c == '}' || c == ']') {
			if (d)
				d--;
			i++;
		} else if (c == '-' || (c >= '0' && c <= '9') || c == 't' ||
			   c == 'f' || c == 'n') {
			/* a number or literal: one value to its end */
			nv++;
			while (i < len && body[i] != ',' && body[i] != ']' &&
			       body[i] != '}' && body[i] != ' ' &&
			       body[i] != '\n' && body[i] != '\t' &&
			       body[i] != '\r' && body[i] != '"' &&
			       body[i] != '{' && body[i] != '[')
				i++;
		} else {
			i++;
		}
		if (nv > max_values) {
			rc = JSCAN_VALUES;
			break;
		}
		if (dmax > max_depth) {
			rc = JSCAN_DEPTH;
			break;
		}
	}
	*values = nv;
	*depth = dmax;
	return rc;
}

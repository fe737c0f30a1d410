/*
 * jscan — a cheap pre-scan of a request body's JSON, before jansson
 * builds anything: counts its values (objects, arrays, strings — keys
 * too —, numbers, literals) and its nesting depth in one pass without
 * allocating, so a small hostile body (`{"junk":[{},{},…]}`: a value per
 * 3 bytes, each some 60 bytes once parsed) is refused at the cost of
 * reading it. Called by completions.c on every POST body.
 *
 * It does not validate: what it passes, jansson still parses (and may
 * refuse). Bytes inside strings are skipped (escapes honoured).
 */
#ifndef QUORUM_GW_JSCAN_H
#define QUORUM_GW_JSCAN_H

#include <stddef.h>

enum { JSCAN_OK, JSCAN_VALUES, JSCAN_DEPTH };

/* Scans body[0, len): JSCAN_OK, or JSCAN_VALUES when it holds more than
 * max_values values, JSCAN_DEPTH when it nests deeper than max_depth
 * (stopping there). *values, *depth: what was counted (up to the stop). */
int jscan_check(const char *body, size_t len, size_t max_values,
		size_t max_depth, size_t *values, size_t *depth);

#endif

/*
 * jschema — a JSON schema as a GBNF grammar (gbnf.h): the text a model
 * may write is JSON that the schema accepts, as OpenAI's response_format
 * json_schema and llama.cpp's and vLLM's guided decoding constrain it.
 *
 * THE SUBSET (anything else is refused, naming its place in the schema:
 * "schema.properties.age.minimum: ...", never silently ignored):
 *   type         object, array, string, number, integer, boolean, null,
 *                or a list of them
 *   object       properties (written in their order), required (the rest
 *                may be left out), additionalProperties false (also the
 *                default: only the properties named) or true / a schema
 *                (further "key": value pairs after the named ones)
 *   array        items, minItems, maxItems (up to 256), prefixItems
 *   string       enum, const, minLength, maxLength (up to 256), pattern
 *                (rxgbnf.h's subset of regular expressions; unanchored
 *                ends match anything, as JSON Schema says), format
 *                date, time, date-time, uuid
 *   integer      minimum, maximum, exclusiveMinimum, exclusiveMaximum
 *                (the range written digit by digit into the grammar)
 *   number       (minimum/maximum refused: a grammar of decimals cannot
 *                bound them exactly)
 *   enum, const  any JSON values (a `type` beside them keeps those of
 *                its type)
 *   anyOf, oneOf alternatives (oneOf only where no value can meet two
 *                branches, as a grammar cannot forbid two matching:
 *                else refused); allOf of one schema
 *   $ref         "#", "#/$defs/NAME", "#/definitions/NAME"
 *   ignored      title, description, $schema, $id, $comment, examples,
 *                default, deprecated, readOnly, writeOnly, strict
 * Whitespace between tokens is optional and bounded (a space, or a line
 * break and up to 20 spaces or tabs), so a sample cannot pad forever.
 * jschema_any gives the grammar of any JSON object (response_format
 * json_object).
 */
#ifndef QUORUM_JSCHEMA_H
#define QUORUM_JSCHEMA_H

#include <jansson.h>
#include <stddef.h>

/* The GBNF text of schema into *out (malloc'ed, NUL-terminated). 0, or
 * QERR_UNSUPPORTED / QERR_FORMAT with "schema.PATH: why" as qerr detail;
 * QERR_NOMEM. */
int jschema_to_gbnf(const json_t *schema, char **out);

/* The grammar of any JSON object. */
int jschema_any(char **out);

#endif

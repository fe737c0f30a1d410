/*
 * gbnf — grammars that constrain sampling, in llama.cpp's GBNF: a sample
 * may only take tokens whose bytes keep its text a prefix of something
 * the grammar accepts, and may end only where the grammar does.
 *
 * THE LANGUAGE (llama.cpp's grammars/README.md): rules `name ::= body`;
 * a body is alternatives separated by `|`, each a sequence of
 *   "literal"      with \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH
 *   [a-z0-9_]      a character class (ranges, escapes), [^...] negated
 *   .              any character
 *   name           a rule
 *   ( ... )        a group
 * each optionally followed by *, +, ?, {m}, {m,}, {m,n}; `#` comments to
 * the end of the line; rules may span lines where a body continues (an
 * operator or an open group ends a line; an indented next line alone
 * does not continue it, as in llama.cpp).
 * The start rule is `root`. Characters are Unicode code points; text is
 * matched as UTF-8 (a token may end inside a character: it is allowed
 * when some character the grammar can take begins with those bytes).
 * Refused with a message naming the line and column: an undefined rule,
 * no root, left recursion (a rule that can reach itself without taking a
 * character), unbalanced groups and classes, a bad escape or repetition.
 *
 * THE MATCHER. A state is the set of parse stacks the text so far leaves
 * (a pushdown automaton, as llama.cpp's), interned: equal sets are one
 * state id. gbnf_step moves a state by bytes (cached per state and byte);
 * gbnf_allowed gives the vocabulary's bitset of tokens whose bytes keep
 * the state alive, computed once per state by walking a byte trie of the
 * vocabulary (cached, a bounded number of bitsets kept). Everything is a
 * pure function of (grammar, vocabulary, text), so a masked sample's bytes
 * still depend only on its (prompt, settings, seed, index). A matcher is
 * shared by the forks of one request and used from one thread.
 */
#ifndef QUORUM_GBNF_H
#define QUORUM_GBNF_H

#include <stddef.h>
#include <stdint.h>

#include "text/tok.h"

/* Bounds: a grammar's text, its elements, the stacks of one state, the
 * states one matcher interns, the masks it keeps. */
#define GBNF_TEXT_MAX (1u << 20)
#define GBNF_ELEMS_MAX 65536
#define GBNF_STACKS_MAX 4096
#define GBNF_STATES_MAX 200000
#define GBNF_MASKS_KEPT 64

typedef struct gbnf gbnf;

/* Compiles GBNF text (len bytes). QERR_OK and *out; QERR_FORMAT with
 * "grammar:LINE:COL: why" as qerr detail; QERR_NOMEM. */
int gbnf_parse(const char *text, size_t len, gbnf **out);
void gbnf_free(gbnf **g);

/* A vocabulary's tokens as a byte trie: built once per vocabulary (an
 * engine keeps one) and shared by every matcher over it. */
typedef struct gbnf_vocab gbnf_vocab;
int gbnf_vocab_new(const tok *t, gbnf_vocab **out);
void gbnf_vocab_free(gbnf_vocab **v);

typedef struct gbnf_matcher gbnf_matcher;

/* A matcher of g over vocabulary v (both borrowed; they must outlive it).
 * QERR_OK, QERR_NOMEM. */
int gbnf_matcher_new(const gbnf *g, const gbnf_vocab *v,
		     gbnf_matcher **out);
void gbnf_matcher_free(gbnf_matcher **m);

#define GBNF_DEAD (-1)

/* The state before any text. */
int gbnf_start(gbnf_matcher *m);

/* The state after bytes b[0, n) from state s; GBNF_DEAD when the text
 * leaves the grammar (or a bound is hit). */
int gbnf_step(gbnf_matcher *m, int s, const char *b, size_t n);

/* Whether the grammar may end in state s (the text so far is a whole
 * sentence of it). */
int gbnf_accepting(gbnf_matcher *m, int s);

/* The tokens allowed in state s: bit id of the returned bitset
 * ((vocab + 63) / 64 words) is 1 for a token whose bytes keep s alive.
 * Tokens without bytes (control tokens) are 0; the caller allows the end
 * tokens when gbnf_accepting. Valid until the next call on m. NULL when
 * out of memory. */
const uint64_t *gbnf_allowed(gbnf_matcher *m, int s);

/* Counters for tests and benchmarks. */
typedef struct {
	size_t states, steps_cached, steps, masks_built, masks_cached;
} gbnf_stats;
void gbnf_get_stats(const gbnf_matcher *m, gbnf_stats *st);

#endif

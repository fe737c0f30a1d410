/*
 * mathkey — the canonical key of a math answer as models write it (LaTeX
 * or plain text): two answers vote together when their keys are equal,
 * and their keys are equal when their values are. The answer format
 * `math` of answer.h.
 *
 * WHAT IS READ (after answer.h has found the answer's span):
 *   numbers      42, -3.5, .5, 1,000 and 1 000 (thousands groups of
 *                exactly three digits, one separator throughout: "1,000"
 *                is 1000, "1, 000" is a list of 1 and 0); two numbers
 *                side by side ("2 3") are no product and do not parse;
 *                U+2212 as a minus sign, and as a sign where one may
 *                stand (not after a value: "3–5" is no 3 - 5) the dashes
 *                models write for it, U+2012, U+2013, U+FE63, U+FF0D
 *   fractions    \frac{a}{b}, \dfrac, \tfrac, \frac12 (one-character
 *                arguments), a/b, \div; a mixed number "2\frac{1}{2}",
 *                "2 \frac{1}{2}" or "2 1/2" (digits, then a fraction of
 *                digits) is 2 + 1/2
 *   operators    + - * \cdot \times, ^ (right-associative; ^{..}; a
 *                number after it whole: "2^10" is 1024, as plain text
 *                means it, not LaTeX's 2^1 times 0), ! is not read;
 *                implicit multiplication: 2x, 2\pi, x(x+1), (a)(b),
 *                2\sqrt{3}
 *   roots        \sqrt{x}, \sqrt x, \sqrt[n]{x}, sqrt(x)
 *   constants    \pi (and the word pi), \infty (inf, infinity, U+221E)
 *   grouping     ( ) [ ] { } and \left( ... \right) etc.
 *   dropped      $ and \$, \% and % (50\% is 50, as MATH's normaliser has
 *                it), \( \) \[ \], units in \text{..} \mathrm{..}
 *                \textbf{..} \textrm{..} \mbox{..} (with a power after
 *                them: \text{ m/s}^2) where a unit stands: words (or the
 *                SI letters) after a value, before the end, an operator
 *                or a separator ("12\text{ cm}"; "1\text{ hour }30" keeps
 *                its words and keys as its spelling, "2\mathrm{e}" is 2e);
 *                any other group's content is kept, and always that of
 *                \mathbf \mathit \textit \operatorname and the like
 *                ("2\mathbf{i}+3\mathbf{j}", "\operatorname{lcm}(4,6)" a
 *                spelling); units written
 *                apart after a number (words and the SI letters m s g h
 *                l L N J W V A K, joined by /, *, \cdot or a space, with
 *                powers: "5 km/h", "9.8 m/s^2", "12 apples"; "3h" and
 *                "2 x" are products), ^\circ and ^{\circ}, spacing (\,
 *                \; \: \! \quad, "\ "), \displaystyle; a left-hand side
 *                "x = 5" (the part after the last top-level '=', unless a
 *                top-level comma comes before it: "x = 2, y = 3" is a
 *                list of equations, keyed "x=2,y=3": each variable's
 *                value, in name order; a variable twice, "x = 3, x = 2",
 *                "x=2,x=3")
 *   joined       "or" and "and", alone or in \text{..}, are a comma: "x = 2
 *                or x = 3" is a list of equations (not 3), "3\text{ or }5"
 *                the list 3, 5 (not 35); so is \quad or \qquad between
 *                two equations ("x = 2 \quad y = 3")
 *   variables    a letter, or a Greek letter command (\alpha, \theta...)
 *   lists        at the top level only: "(a, b)" and "[a, b]" are ordered
 *                and their brackets matter ("(1,2)" is not "[1,2]"; a
 *                half-open "[1, 3)" is an interval), "\{a, b\}" is a set
 *                (unordered, duplicates once), "a, b" a bare list
 *
 * VALUES. Arithmetic is exact over rationals (64-bit numerator and
 * denominator); a result that overflows, a root that is not exact, \pi,
 * or a fractional power continue in IEEE double with +, -, *, /, sqrt
 * only (roots beyond square roots by a fixed Newton iteration): no libm,
 * so the same bits on every ISA and compiler. A double within 1e-9
 * (relative) of a fraction whose denominator is at most 1000 is taken as
 * that fraction (so \sqrt{8}/\sqrt{2} is 2); a difference within 1e-12
 * of its operands' size is 0; a value past a double's range is undefined
 * (its spelling keys it). An expression with free
 * variables is evaluated at three fixed points for each variable.
 *
 * KEYS. A rational is written as the number rule of vote.h writes it when
 * its decimal expansion ends ("0.5", "-12", "1234.5": so plain numbers key
 * as they always did), else "p/q" ("1/3"); a double as "~" and 12
 * significant digits ("~1.41421356237"); infinity "inf", "-inf"; with
 * variables "f[x,y]" then the values at the three points; lists as
 * "(k,k)", "[k,k)", "{k,k}" (sorted), "k,k".
 *
 * FALLBACK. What does not parse (an unknown command such as \sin, an
 * unbalanced bracket, text) keys as the normalized string "s:..." —
 * spacing commands, \left/\right, \dfrac/\tfrac, braces around one
 * character after ^ or _ ("^{2}" = "^2") and whitespace removed — so
 * equal spellings still vote together.
 *
 * BOUNDS. At most MATHKEY_INPUT_MAX bytes, MATHKEY_DEPTH nested groups,
 * MATHKEY_NODES parsed nodes, integer powers up to 64 exactly (beyond,
 * double; a value past a double's range, 2^{2000} or 1e-400, is
 * undefined, so it keys as its spelling: not inf, not 0; a double keeps
 * its size, 2^{-70} is no 0), digit strings over 18 digits in an
 * expression as doubles (a plain number alone keeps all its digits, as
 * the number rule writes it; a \text{..} alone keys as its words "s:.."):
 * bounded time and memory whatever the input; what exceeds them has no
 * key (mathkey returns false).
 */
#ifndef QUORUM_MATHKEY_H
#define QUORUM_MATHKEY_H

#include <stdbool.h>
#include <stddef.h>

#define MATHKEY_INPUT_MAX 1024
#define MATHKEY_DEPTH 48
#define MATHKEY_NODES 512

/* The key of s[0, len) into out (NUL-terminated, at most cap-1 bytes).
 * false: no key (empty, too long, over the bounds, or the key does not
 * fit cap); out is then "". *parsed (may be NULL) is set to whether the
 * math parse succeeded (false: the key is the "s:" fallback). */
bool mathkey(const char *s, size_t len, char *out, size_t cap,
	     bool *parsed);

#endif

/*
 * test_answer — the answer formats (sc/answer.h) and math keys
 * (sc/mathkey.h) as tables of named groups: every spelling in a group
 * keys to the group's key (so equal answers vote together), the traps
 * key apart, bad formats are refused with their words, and hostile
 * inputs (deep nesting, huge exponents and numbers) end in bounded time
 * with a key or none — never a crash. The keys are plain C arithmetic
 * without libm: the same on every ISA (test_kern's build matrix runs
 * this file's code unchanged).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc/answer.h"
#include "sc/mathkey.h"
#include "sc/usc.h"
#include "sc/vote.h"

/* A group: under format fmt, every text keys to key (NULL: no answer). */
typedef struct {
	const char *fmt;
	const char *key;
	const char *text[16];
} group;

static const group groups[] = {
	/* ---- math: numbers, as the number rule writes them */
	{"math", "42", {"42", "42.0", "+42", "042", "\\boxed{42}",
			"The answer is 42.", "$42$", "42.000",
			"x = 42", "\\boxed{ 42 }", "answer: 42", NULL}},
	{"math", "0.5", {"\\frac{1}{2}", "\\frac12", "\\dfrac{1}{2}",
			 "\\tfrac12", "1/2", "0.5", ".5", "\\frac{2}{4}",
			 "\\boxed{\\frac{1}{2}}", "2^{-1}", "\\frac{3}{6}",
			 NULL}},
	{"math", "1/3", {"\\frac{1}{3}", "1/3", "\\frac{2}{6}", "\\frac13",
			 "\\boxed{\\dfrac{1}{3}}", "3^{-1}", NULL}},
	{"math", "-2.5", {"-2.5", "-\\frac{5}{2}", "\\frac{-5}{2}", "-5/2",
			  "\xe2\x88\x92" "2.5", "-2\\frac{1}{2}", NULL}},
	{"math", "2.5", {"2\\frac{1}{2}", "2 1/2", "5/2", "2.5",
			 "\\frac{10}{4}", NULL}},
	{"math", "1000", {"1,000", "1000", "1{,}000", "10^3", "10^{3}",
			  "1e3", "\\boxed{1,000}", "1000.0", NULL}},
	{"math", "1234567", {"1,234,567", "1234567", NULL}},
	{"math", "0", {"0", "-0", "0.0", "+0", "-0.0", "\\frac{0}{5}",
		       "\\sqrt{2}\\sqrt{8}-4", "0^{100}",
		       "0/7", NULL}},
	{"math", "50", {"50\\%", "50%", "50", "\\boxed{50\\%}", NULL}},
	{"math", "12", {"\\$12", "$12", "12 dollars", "\\text{12}",
			"12\\text{ cm}", "12\\,\\mathrm{kg}", NULL}},
	{"math", "90", {"90^\\circ", "90^{\\circ}", "90", NULL}},
	{"math", "2", {"\\sqrt{4}", "\\sqrt4", "\\sqrt[3]{8}", "4^{1/2}",
		       "\\sqrt{8}/\\sqrt{2}", "sqrt(4)", "8^{\\frac{1}{3}}",
		       "\\left(2\\right)", "((2))", NULL}},
	{"math", "~1.41421356237", {"\\sqrt{2}", "\\sqrt2", "2^{1/2}",
				    "\\sqrt{2}\\cdot 1", "sqrt(2)",
				    "\\frac{2}{\\sqrt{2}}", NULL}},
	{"math", "~0.707106781187", {"\\frac{\\sqrt{2}}{2}",
				     "\\frac{1}{\\sqrt{2}}",
				     "\\frac{\\sqrt2}{2}", "\\sqrt{1/2}",
				     "\\sqrt{0.5}", NULL}},
	{"math", "~3.14159265359", {"\\pi", "pi", "\\frac{2\\pi}{2}",
				    "\xcf\x80", NULL}},
	{"math", "~6.28318530718", {"2\\pi", "2 \\pi", "\\pi\\cdot2",
				    "2\\times\\pi", "\\pi+\\pi", NULL}},
	{"math", "inf", {"\\infty", "+\\infty", "inf", "infinity",
			 "\xe2\x88\x9e", NULL}},
	{"math", "-inf", {"-\\infty", "-inf", NULL}},
	/* values past exact fractions keep their size: 2^{-70} is no 0,
	 * and those past a double's range key as their spelling, not as 0
	 * or infinity */
	{"math", "~8.47032947254e-22", {"2^{-70}", "\\frac{1}{2^{70}}",
					"0.5^{70}", NULL}},
	{"math", "~1.18059162072e+21", {"2^{70}", "4^{35}", NULL}},
	{"math", "s:2^{-2000}", {"\\boxed{2^{-2000}}", NULL}},
	{"math", "s:2^{2000}", {"\\boxed{2^{2000}}", NULL}},
	{"math", "s:3^{2000}", {"\\boxed{3^{2000}}", NULL}},
	{"math", "s:1e-400", {"\\boxed{1e-400}", NULL}},
	{"math", "s:1e400", {"\\boxed{1e400}", NULL}},
	{"math", "~2.5e-300", {"2.5e-300", "2.5\\times10^{-300}", NULL}},
	{"math", "1", {"1^{1000}", "(-1)^{1000}", NULL}},
	{"math", "-1", {"(-1)^{1001}", NULL}},
	{"math", "6", {"2\\cdot3", "2\\times 3", "2*3", "3(2)", "(2)(3)",
		       "12/2", "12\\div2", "\\frac{12}{2}",
		       /* a reason after the value (review 2: a spelling) */
		       "Therefore the answer is 6 because 2 times 3 is 6.",
		       "The answer is 6 apples because each box has 3.",
		       "The answer is 6, since 2 times 3 is 6.", NULL}},
	{"math", "8", {"2^3", "2^{3}", "2^{1+2}", "(1+1)^3", NULL}},
	{"math", "512", {"2^{3^2}", "2^{9}", NULL}},
	{"math", "~1.26765060023e+30", {"2^{100}", "1.26765060023e30",
					NULL}},
	{"math", "f[x]:5.84;10;674/49", {"x^2+1", "1+x^2", "x^{2}+1",
					 "x\\cdot x+1", "(x+1)^2-2x",
					 "y = x^2 + 1", NULL}},
	{"math", "f[x]:6.4;8;64/7", {"2(x+1)", "2x+2", "2+2x", "x+x+2",
				     "\\frac{4x+4}{2}", NULL}},
	{"math", "f[a,b]:11/24;18/31;25/38", {"\\frac{a}{b}", "a/b",
					      "a\\cdot\\frac{1}{b}", NULL}},
	{"math", "(1,2)", {"(1,2)", "(1, 2)", "\\left(1,2\\right)",
			   "(\\frac{2}{2}, 2)", "(1.0,2)", NULL}},
	{"math", "[1,2]", {"[1,2]", "[1, 2]", NULL}},
	{"math", "[1,3)", {"[1,3)", "[1, 3)", "\\left[1,3\\right)", NULL}},
	{"math", "(0,inf)", {"(0,\\infty)", "(0, \\infty)", NULL}},
	{"math", "{1,2}", {"\\{1,2\\}", "\\{2,1\\}", "\\{1, 2, 2\\}",
			   "\\{\\frac{4}{2}, 1\\}", NULL}},
	{"math", "1,2", {"1, 2", "1,2", "x = 1, 2", NULL}},
	{"math", "1,0", {"1, 000", NULL}},
	{"math", "s:\\sinx", {"\\boxed{\\sin x}", "The answer is \\sin x.",
				"\\boxed{ \\sin  x }", NULL}},
	{"math", "100000", {"1e5", "10^5", "100,000", "1E5", NULL}},
	{"math", "0.0025", {"2.5e-3", "0.0025", "\\frac{1}{400}", NULL}},
	{"math", "0.25", {"\\frac{1}{4}", "1/4", "0.25", ".25",
			  "\\frac{25}{100}", "2^{-2}", "\\frac{1}{2^2}",
			  "(1/2)^2", "\\left(\\frac{1}{2}\\right)^{2}", NULL}},
	{"math", "-1/3", {"-\\frac{1}{3}", "\\frac{-1}{3}", "\\frac{1}{-3}",
			  "-1/3", "-\\frac{2}{6}", NULL}},
	{"math", "3.14", {"3.14", "3.140", "\\frac{314}{100}", "157/50",
			  NULL}},
	{"math", "7", {"7", "\\boxed{7}", "\\boxed{7.}", "x=7", "n = 7", "7.",
		       "+7",
		       "\\frac{14}{2}", "\\sqrt{49}", "49^{1/2}",
		       /* \( \) and \[ \] around the span (review 2: the
			* spelling "s:\(7\)") */
		       "Final answer: \\( 7 \\)", "The answer is \\[7\\].",
		       "Answer:\n\\[\n7\n\\]", NULL}},
	{"math", "-7", {"-7", "\\boxed{-7}", "x = -7", "(-7)",
			"-\\sqrt{49}", "-(7)",
			/* the dashes written for a minus (review 2: "\u20137"
			 * had been the spelling "s:\u20137") */
			"\xe2\x80\x93" "7", "The answer is \xe2\x80\x93" "7.",
			"\xe2\x80\x92" "7", "\xef\xb9\xa3" "7",
			"\xef\xbc\x8d" "7", "2^{\xe2\x80\x93" "1} - 7.5", NULL}},
	{"math", "~2.2360679775", {"\\sqrt{5}", "5^{1/2}", "5^{0.5}",
				   NULL}},
	{"math", "~4.472135955", {"2\\sqrt{5}", "\\sqrt{20}", "2\\sqrt5",
				  "\\sqrt{4}\\sqrt{5}", NULL}},
	{"math", "1.5", {"\\frac{3}{2}", "3/2", "1.5", "1\\frac{1}{2}",
			 "1 1/2", "\\frac{6}{4}", NULL}},
	/* 18 places, 19 digits: the key reads back as itself (a fuzz
	 * finding: it was read as a double) */
	{"math", "3.000003814697265625", {"2+8^-6+1", "3+1/262144",
					  "3.000003814697265625", NULL}},
	/* ---- math: what a review found merged or lost (2026-12-07) */
	/* the SI's thousands groups are one number, two numbers side by
	 * side no product */
	{"math", "12345", {"12 345", "12,345", "12345", "\\boxed{12 345}",
			   NULL}},
	{"math", "1000000", {"The answer is 1 000 000.", "1,000,000",
			     "10^6", NULL}},
	{"math", "s:23", {"\\boxed{2 3}", "The answer is 2 3.", NULL}},
	{"math", "3.5", {"3 \\frac{1}{2}", "3\\frac{1}{2}", "3 1/2",
			 "\\boxed{3 \\frac12}", NULL}},
	/* plain numbers of more than 18 digits keep every digit */
	{"math", "12345678901234567890", {"12345678901234567890",
					  "\\boxed{12345678901234567890}",
					  "12,345,678,901,234,567,890",
					  "012345678901234567890.000", NULL}},
	{"math", "12345678901234567891", {"12345678901234567891", NULL}},
	{"math", "-0.1234567890123456789", {"-0.1234567890123456789",
					    "-.12345678901234567890", NULL}},
	{"math", "-9223372036854775808", {"(-2)^{63}",
					  "-9223372036854775807-1", NULL}},
	/* a list of equations is not its last right-hand side: each
	 * variable's value, in name order, wherever it is written (a
	 * last line as the box; it had been the last number) */
	{"math", "x=2,y=3", {"\\boxed{x=2, y=3}", "The answer is x = 2, y = 3.",
			     "x=2, y=3", "x = 2, y = 3", "y = 3, x = \\frac{4}{2}",
			     "So we get\nx = 2, y = 3",
			     /* "and" joins them (review 2: this was 3) */
			     "\\boxed{x=2\\text{ and }y=3}", "x = 2 and y = 3",
			     "\\boxed{x = 2 \\quad y = 3}", NULL}},
	{"math", "x=5,y=3", {"\\boxed{x=5, y=3}", NULL}},
	{"math", "a=0.5,b=f[x]:2.2;3;25/7", {"a = 0.5, b = x", "b = x, a = 1/2", NULL}},
	/* a unit after a number, apart from it, is not algebra: words,
	 * the SI letters, joined by /, *, \cdot or a space, with powers
	 * ("5 km/h" had keyed as f[h,k,m]) */
	{"math", "9.8", {"9.8 m/s^2", "9.8 m s^-2", "9.8", "9.8 N/kg",
			 "The answer is 9.8 m/s^2.", "\\boxed{9.8\\text{ m/s}^2}",
			 "9.8 kg \\cdot m", NULL}},
	{"auto", "5", {"The answer is 5 km/h.", "The answer is 5 m",
		       "Answer: 5 cm^2", "5 m/s", NULL}},
	/* ... but a letter written onto a number, or one that names no
	 * unit, is a variable */
	{"math", "f[h]:6.6;9;75/7", {"3h", NULL}},
	{"math", "f[x,y]:21.12;31;1900/49", {"2 x y", NULL}},
	/* not a list of equations: the last number */
	{"math", "3", {"x = 2, so the answer is 3", "3", NULL}},
	{"math", "s:even", {"\\boxed{\\text{even}}", "\\boxed{ \\text{ even } }",
			    "The answer is $\\text{even}$.", NULL}},
	/* ---- the span: what a review found (2026-12-07) */
	/* "this answer is right" is no cue; markup, filler words and a
	 * comment after the value */
	{"math", "13", {"The answer is 13. I am confident this answer is "
			"right.", "**Answer:** 13", "The answer is therefore 13.",
			"The answer is about 13.", "Answer:\n13",
			"The final answer is: 13", NULL}},
	{"math", "0.2", {"The answer is $\\frac15$ (or 0.2).",
			 "The answer is 0.2, i.e. one fifth.",
			 "### Final Answer\n$$\\frac{1}{5}$$",
			 "**Answer:** $\\frac{1}{5}$", NULL}},
	{"math", "5.2", {"The answer is approx. 5.2", NULL}},
	{"text", "st louis", {"The answer is St. Louis.", NULL}},
	{"text", "st paul", {"The answer is St. Paul.", NULL}},
	{"text", "3.5", {"The answer is 3.5.", "3.5", NULL}},
	{"text", "35", {"The answer is 35.", NULL}},
	{"text", "1000 people", {"1,000 people", NULL}},
	/* capitals beyond ASCII fold too (Latin-1, Extended-A, Greek,
	 * Cyrillic) */
	{"text", "caf\xc3\xa9 z\xc3\xbcrich", {"CAF\xc3\x89 Z\xc3\x9cRICH",
					      "Caf\xc3\xa9 Z\xc3\xbcrich",
					      NULL}},
	{"text", "\xd0\xbc\xd0\xbe\xd1\x81\xd0\xba\xd0\xb2\xd0\xb0",
	 {"\xd0\x9c\xd0\x9e\xd0\xa1\xd0\x9a\xd0\x92\xd0\x90",
	  "\xd0\x9c\xd0\xbe\xd1\x81\xd0\xba\xd0\xb2\xd0\xb0", NULL}},
	{"text", "\xc5\x82\xc3\xb3" "d\xc5\xba", {"\xc5\x81\xc3\x93" "D\xc5\xb9",
						    NULL}},
	/* letters written with combining marks (NFD) are the composed
	 * letters (NFC): "e" + U+0301 is "é", "E" + U+0301 "É" (then "é");
	 * "u" + U+0308 + U+0304 is U+01D6; "и" + U+0306 is "й" */
	{"text", "caf\xc3\xa9", {"Caf\xc3\xa9", "cafe\xcc\x81", "CAFE\xcc\x81",
				"The answer is cafe\xcc\x81.", NULL}},
	{"text", "z\xc3\xbcrich", {"Z\xc3\xbcrich", "Zu\xcc\x88rich", NULL}},
	{"text", "\xc7\x96", {"\xc7\x96", "u\xcc\x88\xcc\x84", NULL}},
	{"text", "\xd0\xb9", {"\xd0\x99", "\xd0\xb8\xcc\x86", NULL}},
	/* a mark with nothing to compose with stays */
	{"text", "x\xcc\x81", {"x\xcc\x81", NULL}},
	{"text", "x aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", {"x aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", NULL}},
	{"text", "xaaaaaaa aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", {"xaaaaaaa aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
					 NULL}},
	{"yesno", "yes", {"Yes, because the claim is false.", "**Yes**, it is "
			  "not false", NULL}},
	{"yesno", "no", {"No. The claim is true.",
			 "No, because the statement is true.", NULL}},
	{"choice", "B", {"B) 17", "B. 17", "B: 17",
			 "The answer is B because 15 > 12.",
			 "The answer is B, since it is larger.",
			 "The correct option is B.", "(B) 17", NULL}},
	{"choice:A=1/2|B=Paris", "A", {"The answer is 0.5",
				       "The answer is \\frac{1}{2}.", NULL}},
	{"choice:A=1/2|B=Paris", "B", {"The answer is paris", NULL}},
	{"auto", "0.2", {"1/5", "$\\frac{1}{5}$",
			 "### Final Answer\n$$\\frac{1}{5}$$",
			 "**Answer:** $\\frac{1}{5}$", NULL}},
	{"auto", "2.5", {"2 1/2", "\\boxed{2 \\frac{1}{2}}", NULL}},
	{"auto", "100000", {"1e5", NULL}},
	{"auto", "13", {"The answer is 13. I am confident this answer is "
			"right.", NULL}},
	{"auto", "f[x]:3.2;4;32/7", {"The answer is x+1", "\\boxed{x+1}",
				     NULL}},
	{"auto", "mount everest", {"The answer is Mount Everest.",
				   "Mount Everest", NULL}},
	{"json:/answer", "4.2", {"{\"answer\": \"4.2\"}",
				 "{\"answer\": 4.2}", NULL}},
	{"json:/answer", "42", {"{\"answer\": 42}", NULL}},
	{"json:/answer", "0.1", {"{\"answer\": 0.1}", NULL}},
	/* exact: the whole text as written, trimmed (a choice constraint's
	 * options: under auto "a" is an article, no answer, and "3 apples"
	 * and "3 pears" both 3) */
	{"exact", "a", {"a", " a\n", NULL}},
	{"exact", "A", {"A", NULL}},
	{"exact", "3 apples", {"3 apples", NULL}},
	{"exact", "3 pears", {"3 pears", NULL}},
	{"exact", "Paris.", {"Paris.", NULL}},
	/* json: (the root): the value in canonical form, whatever the
	 * whitespace and key order */
	{"json:", "{\"city\":\"Paris\",\"ok\":true}",
	 {"{ \"city\":\"Paris\", \"ok\": true }",
	  "{\n\t\"ok\":true,\n\t\"city\":\"Paris\"}", NULL}},
	/* ---- what a second review found (2026-12-07, review2-vote) */
	/* \mathbf{}, \mathrm{}, \textit{}, \operatorname{} hold variables
	 * and names, not units: kept (they had been dropped, "2\mathbf{i} +
	 * 3\mathbf{j}" was 5, "2\mathrm{e}" 2, "2\textit{x}" 2); "or" and
	 * "and" join answers as a comma does ("3\text{ or }5" was 35, "x = 2
	 * or x = 3" was 3) */
	{"math", "f[i,j]:18.8;21.5;164/7", {"\\boxed{2\\mathbf{i} + 3\\mathbf{j}}",
					    "2i+3j", NULL}},
	{"math", "f[e]:4.4;6;50/7", {"\\boxed{2\\mathrm{e}}", "2e", NULL}},
	{"math", "f[x]:4.4;6;50/7", {"\\boxed{2\\textit{x}}", "2x", NULL}},
	{"math", "s:lcm(4,6)", {"\\boxed{\\operatorname{lcm}(4,6)}", NULL}},
	{"math", "3,5", {"\\boxed{3\\text{ or }5}", "3 or 5", "3, 5", NULL}},
	{"math", "2,300", {"\\boxed{2\\text{ or }300}", "2 or 300", NULL}},
	{"math", "x=2,x=3", {"The answer is x = 2 or x = 3.",
			     "\\boxed{x=2 \\text{ or } x=3}",
			     "\\boxed{x = 3, x = 2}", NULL}},
	/* words between two values are no unit (it had been 130) */
	{"math", "s:1hour30", {"\\boxed{1\\text{ hour }30\\text{ minutes}}",
			       NULL}},
	/* ... units after a value still go */
	{"math", "25", {"25\\text{\xc2\xb0" "C}", "\\boxed{25\\text{ apples}}",
			"\\boxed{20\\text{ m} + 5\\text{ m}}",
			"x = 25 \\quad \\text{cm}", NULL}},
	/* a dash after a value is a range's, no minus */
	{"math", "s:3\xe2\x80\x93" "5", {"\\boxed{3\xe2\x80\x93" "5}", NULL}},
	/* a number after ^ whole, as plain text means it (2^10 had been
	 * 2^1 times 0, x^12 x^1 times 2) */
	{"math", "1024", {"\\boxed{2^10}", "2^{10}", "1024", NULL}},
	{"math", "f[x]:12855.002631049216;531441;59604644775390625/13841287201",
	 {"\\boxed{x^12}", "x^{12}", NULL}},
	{"math", "1000000000000", {"The answer is 10^12.", "10^{12}", NULL}},
	{"auto", "0.5", {"The answer is \\(\\frac{1}{2}\\).",
			 "The answer is $\\frac{1}{2}$.",
			 "Answer:\n\\[\n\\frac{1}{2}\n\\]", "Answer: 1/2", NULL}},
	{"auto", "-3", {"The answer is \xe2\x80\x93" "3.", "The answer is -3.",
			NULL}},
	/* "no" that leads the span is the answer, no abbreviation */
	{"auto", "no", {"The answer is no. 9 is composite.",
			"The answer is no.", NULL}},
	{"text", "no", {"The answer is No. Nine is composite.", NULL}},
	{"text", "building no 5", {"The answer is Building No. 5.", NULL}},
	/* auto: yes/no leading the span, an option letter marked or before
	 * a reason (they had been 7, no answer, "b paris" or a variable B) */
	{"auto", "yes", {"The answer is yes, because 7 is prime.",
			 "Yes, 7 is prime.", "True, because 7 is prime.",
			 "Some reasoning first.\nYes.", "\\boxed{\\text{Yes}}",
			 NULL}},
	{"auto", "no", {"No, because the number is odd.",
			"Some reasoning first.\nNo, because the number is odd.",
			NULL}},
	{"auto", "B", {"The answer is B, because 2+2=4.",
		       "The answer is B because 2+2=4.",
		       "The correct answer is **(B) Paris**.", "Answer: (B) Paris",
		       "The correct answer is B: Paris", "The answer is (b).",
		       "\\boxed{\\textbf{B}}", NULL}},
	/* ... but a number stays the answer over a closing yes */
	{"auto", "5", {"So x = 5.\nYes, that checks out.", NULL}},
	/* a word's box as its words after a cue (they had been 4 groups) */
	{"auto", "paris", {"\\boxed{Paris}", "\\boxed{\\text{Paris}}",
			   "The answer is Paris.", NULL}},
	/* choice: small letters a bracket marks; \textbf{}, \( \) around
	 * it; the pronoun I (they had no answer, or I) */
	{"choice", "B", {"(b)", "The answer is (b).", "b)", "\\boxed{\\textbf{B}}",
			 "\\boxed{\\mathrm{B}}", "The answer is \\(B\\).",
			 "**Answer:** I would pick B.", "The answer is I think B.",
			 NULL}},
	{"choice", NULL, {"The answer is a prime number.", NULL}},
	{"choice:A=1|B=2|C=3|D=4|E=5|F=6|G=7|H=8|I=9|J=10", "I",
	 {"The answer is I think B.", "The answer is (I).", NULL}},
	/* an option's words before its value: units are no part of a math
	 * key ("2 m" had been A, the first option of value 2) */
	{"choice:A=2 cm|B=2 m|C=2 km", "B", {"The answer is 2 m.", "2 m", NULL}},
	{"choice:A=2 cm|B=2 m|C=2 km", NULL, {"The answer is 2 meters.", NULL}},
	{"choice:A=London|B=Paris|C=Rome", "B", {"The answer is Paris.",
						 "(b)", NULL}},
	/* "answer to ... is" with a few words between is a cue (it had
	 * been none, and the last number, 3, voted) */
	{"auto", "7", {"The answer to the question is 7. We used 3 steps.",
		       "The final answer to this problem is 7. It took 3 tries.",
		       "The answer is 7.", NULL}},
	/* ... within its clause only */
	{"auto", "12", {"The answer to part one. Then the result is 12.",
			NULL}},
	/* ---- math: the span */
	{"math", "0.75", {"so x = 3/4, and \\boxed{0.75}",
			  "The answer is 3/4.", "hence 3/4",
			  "thinking... </think> \\boxed{\\frac34}", NULL}},
	{"math", NULL, {"", "no numbers here", "<think> 5", NULL}},
	/* ---- number: today's rules */
	{"number", "42", {"42", "\\boxed{42}", "42.0", "The answer is 42.",
			  NULL}},
	{"number", "\\frac{1}{2}", {"\\boxed{\\frac{1}{2}}", NULL}},
	{"number", "2", {"1/2", NULL}},
	/* ---- choice */
	{"choice", "B", {"B", "(B)", "B)", "B.", "Answer: B",
			 "The answer is B.", "the answer is (B)", "\\boxed{B}",
			 "**B**", "I choose option B", "Answer: \\text{(B)}",
			 NULL}},
	{"choice", "C", {"\\boxed{\\text{(C)}}", "So the answer is C) 7",
			 "(A) is wrong, (C) is right", "Answer: C: 15",
			 NULL}},
	{"choice", "J", {"J", "(J)", NULL}},
	{"choice", NULL, {"I think so", "K", "(K)", "nothing", NULL}},
	{"choice:A=12|B=15", "B", {"the answer is 15", "\\boxed{15}",
				   "Answer: 15.0", "B", NULL}},
	{"choice:A=12|B=15", "A", {"the answer is 12", "\\boxed{12}", NULL}},
	{"choice:A=12|B=15", NULL, {"the answer is 16", NULL}},
	/* a last line that is an option's value: its letter (a bare
	 * "15" had no answer) */
	{"choice:A=12|B=15", "B", {"15", "So:\n15", "1/2 of 30 is\n15.",
				   NULL}},
	{"choice:A=1/2|B=Paris", "B", {"Paris", "paris.", NULL}},
	{"choice:A=12|B=15", NULL, {"16", "I think it is 15 or 12", NULL}},
	{"choice", "A", {"A", "(A)", "\\boxed{A}", "The answer is A.",
			 "Answer: (A)", NULL}},
	{"choice", "E", {"The correct option is (E).", "option E",
			 "\\boxed{(E)}", NULL}},
	/* ---- yesno */
	{"yesno", "yes", {"Yes", "yes.", "YES!", "The answer is yes.",
			  "\\boxed{Yes}", "true", "True.", "\\boxed{true}",
			  "so, yes", "Answer: yes", NULL}},
	{"yesno", "no", {"No", "no.", "NO", "The answer is no.",
			 "\\boxed{No}", "false", "False", "Answer: no",
			 "so... no", NULL}},
	{"yesno", NULL, {"maybe", "I am not sure", "knowing", NULL}},
	/* a negation before the word turns it */
	{"yesno", "no", {"The answer isn't yes.", "The answer is not yes.",
			 "So the claim is not true.",
			 "It wasn\xe2\x80\x99t true.", "That is never true.",
			 "The answer is NOT \"yes\".", NULL}},
	{"yesno", "yes", {"The answer isn't no.", "So it is not false.",
			  "The answer is not no, it is yes.",
			  "Not really sure, but no doubt: yes", NULL}},
	/* ---- text */
	{"text", "eiffel tower", {"The answer is the Eiffel Tower.",
				  "the answer is: eiffel tower!",
				  "\\boxed{The Eiffel Tower}",
				  "Answer: Eiffel   Tower", NULL}},
	{"text", "paris", {"Paris", "the answer is Paris.", "\\boxed{paris}",
			   /* a \text{} around it (review 2: "textparis") */
			   "\\boxed{\\text{Paris}}", "\\boxed{\\textbf{Paris}}",
			   "The answer is \\(\\text{Paris}\\).", NULL}},
	{"text", "new york city", {"The answer is New York City.",
				   "answer: new-york city", NULL}},
	/* ---- regex */
	{"regex:(\\d+) apples", "5", {"3 apples, then 5 apples",
				      "5 apples", NULL}},
	{"regex:Final: ([A-Z]+)", "ABC", {"Final: XY ... Final: ABC", NULL}},
	{"regex:\\d+", "7", {"1 2 7", NULL}},
	{"regex:\\d+", NULL, {"none", NULL}},
	/* ---- auto: by the answer's shape */
	{"auto", "42", {"42", "The answer is 42.", "\\boxed{42}",
			"\\boxed{42.0}", NULL}},
	{"auto", "0.5", {"\\boxed{\\frac{1}{2}}", "\\boxed{1/2}",
			 "\\boxed{0.5}", NULL}},
	{"auto", "B", {"\\boxed{B}", "The answer is (B).", "Answer: B",
		       NULL}},
	{"auto", "yes", {"\\boxed{yes}", "The answer is yes.", NULL}},
	{"auto", "hello world", {"\\boxed{hello world}", NULL}},
	/* a whole text of one short line (a choice constraint's) */
	{"auto", "yes", {"yes", "Yes.", " YES \n", NULL}},
	{"auto", "B", {"B", "(B)", NULL}},
	{"auto", "paris", {"Paris", "paris!", NULL}},
	{"auto", "12", {"12 apples", NULL}},
	/* ... but a longer text, several lines, more than 5 words or
	 * broken bytes (U+FFFD) without a number have none */
	{"auto", NULL, {"Paris\nis the capital", "I think the capital of "
			"France is the city of Paris, on the Seine river "
			"(it is)", "it is the city of Paris",
			"\xef\xbf\xbd answer vera", "\xe2\x82 answer",
			"ab\xc0\xaf", NULL}},
	{"auto", "caf\xc3\xa9", {"Caf\xc3\xa9", NULL}},
};

static void check_group(const group *g)
{
	answer_format f;
	const char *why = NULL;
	char out[VOTE_ANSWER_MAX];

	if (answer_format_parse(g->fmt, &f, &why))
		fail_msg("format %s: %s", g->fmt, why);
	for (int i = 0; g->text[i]; i++) {
		const char *t = g->text[i];
		bool ok = answer_extract(&f, t, strlen(t), out, sizeof(out));

		if (!g->key) {
			if (ok)
				fail_msg("%s: \"%s\" keys to \"%s\", want none",
					 g->fmt, t, out);
			continue;
		}
		if (!ok)
			fail_msg("%s: \"%s\" has no key, want \"%s\"", g->fmt,
				 t, g->key);
		if (strcmp(out, g->key))
			fail_msg("%s: \"%s\" keys to \"%s\", want \"%s\"",
				 g->fmt, t, out, g->key);
	}
}

static size_t n_cases(void)
{
	size_t n = 0;

	for (size_t i = 0; i < sizeof(groups) / sizeof(*groups); i++)
		for (int k = 0; groups[i].text[k]; k++)
			n++;
	return n;
}

static void table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(groups) / sizeof(*groups); i++)
		check_group(&groups[i]);
	print_message("answer: %zu spellings in %zu groups\n", n_cases(),
		      sizeof(groups) / sizeof(*groups));
}

/* exact keys a text too long for a key by its head and a hash of the
 * whole: two long texts that differ only past the head stay apart. */
static void exact_long(void **state)
{
	answer_format f;
	char a[1100], b[1100], ka[VOTE_ANSWER_MAX], kb[VOTE_ANSWER_MAX];

	(void)state;
	assert_int_equal(answer_format_parse("exact", &f, NULL), 0);
	memset(a, 'x', sizeof(a) - 1);
	a[sizeof(a) - 1] = '\0';
	memcpy(b, a, sizeof(a));
	b[900] = 'y';
	assert_true(answer_extract(&f, a, strlen(a), ka, sizeof(ka)));
	assert_true(answer_extract(&f, b, strlen(b), kb, sizeof(kb)));
	assert_true(strlen(ka) < sizeof(ka));
	assert_string_not_equal(ka, kb);
	assert_memory_equal(ka, a, 200);
}

/* Every pair of distinct math groups keys apart (the traps: 0.5 vs
 * 1/2 together, (1,2) vs [1,2] apart, 1,000 vs 1, 000 apart). */
static void apart(void **state)
{
	const char *keys[sizeof(groups) / sizeof(*groups)];
	size_t n = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(groups) / sizeof(*groups); i++)
		if (!strcmp(groups[i].fmt, "math") && groups[i].key)
			keys[n++] = groups[i].key;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (!strcmp(keys[i], keys[j]))
				fail_msg("two math groups share %s", keys[i]);
}

static void formats(void **state)
{
	static const struct {
		const char *s, *why; /* why NULL: accepted */
	} rows[] = {
		{"auto", NULL}, {"number", NULL}, {"math", NULL},
		{"choice", NULL}, {"yesno", NULL}, {"text", NULL},
		{"regex:a+", NULL}, {"choice:A=1|B=2", NULL}, {"exact", NULL},
		{"bogus", "must be " ANSWER_LIST}, {"", "must be " ANSWER_LIST},
		{"regex:", "regex: the pattern must be 1..1023 bytes"},
		{"regex:(", "regex:(: missing closing parenthesis at offset 1"},
		{"choice:A=1|", "choice: options must be L=VALUE|L=VALUE with "
				"letters A-J"},
		{"choice:K=1", "choice: options must be L=VALUE|L=VALUE with "
			       "letters A-J"},
		{"MATH", "must be " ANSWER_LIST},
		{"choice:A=1|B=2|A=3", "choice: option A is given twice"},
	};
	char name[ANSWER_PATTERN_MAX + 16];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		answer_format f;
		const char *why = NULL;
		int rc = answer_format_parse(rows[i].s, &f, &why);

		if (!rows[i].why) {
			assert_int_equal(rc, 0);
			assert_string_equal(answer_format_name(&f, name,
							       sizeof(name)),
					    rows[i].s);
		} else {
			assert_int_equal(rc, -1);
			assert_string_equal(why, rows[i].why);
		}
	}
}

/* 80 bytes: an MMLU option's length */
#define LONG80 "Alpha option text that is fairly long and descriptive, " \
	       "about eighty bytes or so "

/* Options of a question: "A) 12 B) 15", "(A) 12 (B) 15", lines. */
static void options(void **state)
{
	static const struct {
		const char *question, *want;
	} rows[] = {
		{"How many? A) 12 B) 15 C) 20", "A=12|B=15|C=20"},
		{"How many? (A) 12 (B) 15 (C) 1/2", "A=12|B=15|C=1/2"},
		{"Which? A) K2 B) Mount Everest", "A=K2|B=Mount Everest"},
		{"Pick one:\nA. 3\nB. 4\nC. 5\n", "A=3|B=4|C=5"},
		{"No options here, only A and B", ""},
		/* in small letters, where a bracket marks them; "e.g." is
		 * no option E */
		{"What is the capital of France? (a) London (b) Paris (c) "
		 "Rome", "A=London|B=Paris|C=Rome"},
		{"Which? a) 12 b) 15", "A=12|B=15"},
		{"Name a city, e.g. Paris", ""},
		/* all of them or none (D had been cut at 255 bytes; an
		 * option with a '|' had been left out of the middle) */
		{"Which?\nA. " LONG80 "a\nB. " LONG80 "b\nC. " LONG80 "c\nD. "
		 LONG80 "d", "A=" LONG80 "a|B=" LONG80 "b|C=" LONG80 "c|D="
		 LONG80 "d"},
		{"Which? A) x|y B) 2 C) 3", ""},
	};
	char name[ANSWER_PATTERN_MAX + 16];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		answer_format f;

		assert_int_equal(answer_format_parse("choice", &f, NULL), 0);
		answer_choice_options(&f, rows[i].question,
				      strlen(rows[i].question));
		assert_string_equal(f.pattern, rows[i].want);
		if (*rows[i].want) {
			snprintf(name, sizeof(name), "choice:%s",
				 rows[i].want);
			assert_int_equal(answer_format_parse(name, &f, NULL),
					 0);
		}
	}
}

/* Expected answers key as samples that gave them. */
static void expected(void **state)
{
	static const struct {
		const char *fmt, *expected, *key;
	} rows[] = {
		{"math", "\\frac{1}{2}", "0.5"}, {"math", "0.5", "0.5"},
		{"math", "1,000", "1000"}, {"choice", "B", "B"},
		{"choice", "(C)", "C"}, {"yesno", "Yes", "yes"},
		{"yesno", "FALSE", "no"}, {"text", "The Eiffel Tower",
					     "eiffel tower"},
		{"number", "42.0", "42"}, {"regex:\\d+", " 17 ", "17"},
		{"auto", "\\frac{1}{2}", "0.5"}, {"auto", "B", "B"},
		{"auto", "Paris", "paris"}, {"auto", "1/2", "0.5"},
		{"auto", "The Eiffel Tower", "eiffel tower"},
		{"json:/answer", "0.1", "0.1"},
		/* read as a sample is: a box, a cue (they had keyed
		 * "boxed11", "the answer is paris") */
		{"text", "\\boxed{11}", "11"}, {"text", "\\boxed{Paris}", "paris"},
		{"text", "The answer is Paris.", "paris"},
		{"regex:(\\d+) apples", "12 apples", "12"},
		{"regex:(\\d+) apples", "12", "12"},
		/* a choice's letter in either case */
		{"choice", "b", "B"}, {"choice", "(b)", "B"}, {"choice", "b)", "B"},
		{"choice", "c.", "C"},
	};
	char out[VOTE_ANSWER_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		answer_format f;

		assert_int_equal(answer_format_parse(rows[i].fmt, &f, NULL), 0);
		answer_expected_key(&f, rows[i].expected,
				    strlen(rows[i].expected), out, sizeof(out));
		if (strcmp(out, rows[i].key))
			fail_msg("%s: expected \"%s\" keys to \"%s\", want "
				 "\"%s\"", rows[i].fmt, rows[i].expected, out,
				 rows[i].key);
	}
}

/* JSON numbers as their writers meant them: the shortest text that
 * reads back (an expected 0.1 is "0.1", not "0.10000000000000001"). */
static void number_text(void **state)
{
	static const struct {
		double v;
		const char *want;
	} rows[] = {
		{0.1, "0.1"}, {0.3, "0.3"}, {3.0, "3"}, {-2.5, "-2.5"},
		{0.1 + 0.2, "0.30000000000000004"}, {1e21, "1e+21"},
		{123456789.125, "123456789.125"},
	};
	char out[64];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		answer_number_text(rows[i].v, out, sizeof(out));
		assert_string_equal(out, rows[i].want);
	}
}

/* The answer as a person reads it: the key where it reads as it is,
 * else the text it came from (an expression's key is "f[x]:..."). */
static void shown(void **state)
{
	static const struct {
		const char *key, *text, *want;
	} rows[] = {
		{"42", "so it is \\boxed{42}", "42"},
		{"f[x]:3.2;4;32/7", "so the answer is x + 1.", "x + 1"},
		{"f[x]:3.2;4;32/7", "We get \\boxed{1 + x} in the end", "1 + x"},
		{"f[x]:3.2;4;32/7", "Work:\n  1+x\n  = x\t+ 1", "= x + 1"},
		{"s:even", "The answer is \\text{even}", "\\text{even}"},
		{"f[x]:3.2;4;32/7", "<think>x+1?</think>\nthe answer is x + 1",
		 "x + 1"},
		{"f[x]:3.2;4;32/7", NULL, "f[x]:3.2;4;32/7"},
	};
	char out[VOTE_ANSWER_MAX], small[6];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		answer_shown(rows[i].key, rows[i].text,
			     rows[i].text ? strlen(rows[i].text) : 0, out,
			     sizeof(out));
		if (strcmp(out, rows[i].want))
			fail_msg("%s / %s: '%s', want '%s'", rows[i].key,
				 rows[i].text ? rows[i].text : "(none)", out,
				 rows[i].want);
	}
	/* cut to cap, never inside a character */
	answer_shown("s:x", "the answer is \xc3\xa9\xc3\xa9\xc3\xa9", 20, small,
		     sizeof(small));
	assert_string_equal(small, "\xc3\xa9\xc3\xa9");
}

/* Why a sample has no answer, in the words of its format: what the
 * format looks for (yesno's reason had been the number format's). */
static void no_answer_reasons(void **state)
{
	static const struct {
		const char *format, *want;
	} rows[] = {
		{"yesno", "no yes/no/true/false"},
		{"number", "no boxed answer or number"},
		{"auto", "no boxed answer, stated answer or number"},
		{"choice", "no option letter (A-J) or option"},
		{"regex:\\d+", "no match of the pattern"},
		{"json:/a", "no JSON value at the pointer"},
	};
	answer_format f;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		assert_int_equal(answer_format_parse(rows[i].format, &f, NULL),
				 0);
		assert_string_equal(answer_no_answer_reason(&f, "maybe", 5),
				    rows[i].want);
	}
	assert_string_equal(answer_no_answer_reason(NULL, "maybe", 5),
			    "no answer its format reads");
	/* the model's own unfinished turn comes first */
	assert_int_equal(answer_format_parse("yesno", &f, NULL), 0);
	assert_string_equal(answer_no_answer_reason(&f, "<think>yes", 10),
			    "thinking never ended (no </think>)");
}

/* Hostile inputs: bounded, a key or none, never a crash. */
static void bounded(void **state)
{
	char *s = malloc(1 << 20);
	char out[VOTE_ANSWER_MAX];
	size_t n;

	(void)state;
	assert_non_null(s);
	/* deep nesting: over MATHKEY_DEPTH, no parse (the fallback is too
	 * long for a key) */
	n = 0;
	for (int i = 0; i < 400; i++)
		s[n++] = '(';
	s[n++] = '1';
	for (int i = 0; i < 400; i++)
		s[n++] = ')';
	assert_false(mathkey(s, n, out, sizeof(out), NULL));
	/* a huge exponent: past a double's range, so its spelling (inf
	 * would be \infty's key) */
	assert_true(mathkey("2^{99999999}", 12, out, sizeof(out), NULL));
	assert_string_equal(out, "s:2^{99999999}");
	assert_true(mathkey("10^{10^{10}}", 12, out, sizeof(out), NULL));
	/* a million digits: over the input bound */
	memset(s, '7', 1000000);
	assert_false(mathkey(s, 1000000, out, sizeof(out), NULL));
	/* ... and through answer_extract (the box is too long) */
	memcpy(s, "\\boxed{", 7);
	s[999999] = '}';
	{
		answer_format f;

		assert_int_equal(answer_format_parse("math", &f, NULL), 0);
		(void)answer_extract(&f, s, 1000000, out, sizeof(out));
	}
	/* 0/0, a root of a negative number: undefined, the fallback key */
	assert_true(mathkey("0/0", 3, out, sizeof(out), NULL));
	assert_string_equal(out, "s:0/0");
	assert_true(mathkey("\\sqrt{-4}", 9, out, sizeof(out), NULL));
	assert_string_equal(out, "s:\\sqrt{-4}");
	free(s);
}

/* answer select: the selection prompt and the reading of its reply */
static void usc(void **state)
{
	const char *texts[3] = {"2 + 2 = 4. The answer is 4.", NULL,
				"It is 5."};
	size_t lens[3] = {27, 0, 8};
	char *q = usc_prompt("What is 2 + 2?", 14, texts, lens, 3);

	(void)state;
	assert_non_null(q);
	assert_non_null(strstr(q, "Question: What is 2 + 2?"));
	assert_non_null(strstr(q, "Response 0:\n2 + 2 = 4."));
	assert_non_null(strstr(q, "Response 1:\n\n"));
	assert_non_null(strstr(q, "Response 2:\nIt is 5."));
	free(q);
	assert_int_equal(usc_pick("Response 2 agrees most.", 23, 3), 2);
	assert_int_equal(usc_pick("The best is response #1", 23, 3), 1);
	assert_int_equal(usc_pick("RESPONSE 0", 10, 3), 0);
	assert_int_equal(usc_pick("Response 7", 10, 3), -1);
	assert_int_equal(usc_pick("Responses agree", 15, 3), -1);
	assert_int_equal(usc_pick("none", 4, 3), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table),
		cmocka_unit_test(apart),
		cmocka_unit_test(exact_long),
		cmocka_unit_test(formats),
		cmocka_unit_test(options),
		cmocka_unit_test(expected),
		cmocka_unit_test(number_text),
		cmocka_unit_test(bounded),
		cmocka_unit_test(no_answer_reasons),
		cmocka_unit_test(shown),
		cmocka_unit_test(usc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

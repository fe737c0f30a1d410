"""The hand-written held-out set: train/data/handwritten.txt (family,
expression, question; written by hand for this repository) turned into
train/data/handwritten.jsonl, the format of test.jsonl and `quorum eval-set`.

Each answer is computed from its expression, never typed in, and checked:
a whole, non-negative number; every number of the expression appears in the
question (as digits or a word); no number in the question has more than 3
digits. Training never sees these questions (train.py excludes them, as it
does test.jsonl).

    /usr/bin/python3 train/handwritten.py           # rewrite the JSONL
    /usr/bin/python3 train/handwritten.py --check   # compare, exit 1 if stale
    /usr/bin/python3 train/handwritten.py --set dev # the dev set (issue 34)
"""
import argparse
import json
import os
import re
import sys
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
# The hand-written sets: the held-out 226 (issue 28) that judge a model, and
# the dev set (issue 34) that picks a training run; both are written the
# same way and both are kept out of training.
SETS = {"held-out": "handwritten", "dev": "dev"}
SRC = os.path.join(HERE, "data", "handwritten.txt")
OUT = os.path.join(HERE, "data", "handwritten.jsonl")

UNITS = ("zero one two three four five six seven eight nine ten eleven "
         "twelve thirteen fourteen fifteen sixteen seventeen eighteen "
         "nineteen").split()
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
        "seventy": 70, "eighty": 80, "ninety": 90}
WORDS = {w: i for i, w in enumerate(UNITS)}
WORDS.update(TENS)
for t, v in TENS.items():
    for i in range(1, 10):
        WORDS["%s-%s" % (t, UNITS[i])] = v + i
# words that stand for a number in a question ("twice as many")
ALIAS = {"half": 2, "twice": 2, "double": 2, "dozen": 12, "pair": 2}


def words_to_digits(expr):
    """Number words of an expression as digits ("-" is always minus
    there: write 25, not twenty-five)."""
    return re.sub(r"[a-z]+", lambda m: str(WORDS[m.group(0)]), expr)


def evaluate(expr):
    """The exact value of + - * / ( ) over whole numbers."""
    e = words_to_digits(expr)
    if not re.fullmatch(r"[0-9+\-*/() ]+", e):
        raise ValueError("bad expression %r" % expr)
    v = eval(re.sub(r"([0-9]+)", r"Fraction(\1)", e),
             {"__builtins__": {}, "Fraction": Fraction})
    return v


def numbers_said(question):
    """Every number the question states, as digits or words."""
    q = question.lower()
    said = {int(x) for x in re.findall(r"[0-9]+", q)}
    for w in re.findall(r"[a-z]+(?:-[a-z]+)?", q):
        if w in WORDS:
            said.add(WORDS[w])
        elif w in ALIAS or w.rstrip("s") in ALIAS:
            said.add(ALIAS.get(w, ALIAS.get(w.rstrip("s"))))
        else:
            for part in w.split("-"):
                if part in WORDS:
                    said.add(WORDS[part])
    if "hundred" in q:
        said.add(100)
    return said


def load(path=SRC):
    """[(family, expression, question)], raising ValueError with the line
    number on a malformed or wrong line."""
    rows = []
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            parts = line.split("|", 2)
            if len(parts) != 3:
                raise ValueError("%s:%d: want family|expression|question" %
                                 (path, ln))
            fam, expr, q = parts
            v = evaluate(expr)
            if v.denominator != 1 or v < 0:
                raise ValueError("%s:%d: %s is %s, not a whole number" %
                                 (path, ln, expr, v))
            for x in re.findall(r"[0-9]+", q):
                if len(x) > 3:
                    raise ValueError("%s:%d: %s has more than 3 digits" %
                                     (path, ln, x))
            said = numbers_said(q)
            for x in re.findall(r"[0-9]+|[a-z]+", expr):
                n = int(x) if x.isdigit() else WORDS[x]
                if n not in said:
                    raise ValueError("%s:%d: %s is not in the question" %
                                     (path, ln, x))
            rows.append((fam, expr, q, str(v.numerator)))
    return rows


def render(rows):
    return "".join(json.dumps({"question": q, "answer": a, "family": fam}) +
                   "\n" for fam, _, q, a in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--set", choices=sorted(SETS), default="held-out")
    a = ap.parse_args()
    base = os.path.join(HERE, "data", SETS[a.set])
    src, out = base + ".txt", base + ".jsonl"
    try:
        text = render(load(src))
    except ValueError as e:
        print(e)
        return 1
    if a.check:
        if not os.path.exists(out) or open(out).read() != text:
            print("%s is not what %s gives" % (out, src))
            return 1
        return 0
    with open(out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How the answer formats change the vote (issue 36): synthetic samples of
MATH-style, multiple-choice and yes/no questions, written the way models
write final answers (LaTeX fractions and roots in several spellings,
option letters in several wrappings, yes/no with case and punctuation),
voted with `quorum vote` under the old string vote (`number`) and under
the format for their kind (`math`, `choice`, `yesno`) and `auto`.

Each question has a correct answer and one or two wrong ones; each of its
N samples states one of them (correct with probability P), in a spelling
drawn at random. Seeded: the same report every run.

    python3 bench/vote_formats.py [--quorum build/quorum] [--questions 300]
"""
import argparse
import json
import random
import subprocess
import sys

# A value and the spellings a model may give it (all equal).
MATH = [
    ("1/2", [r"\frac{1}{2}", r"\frac12", r"\dfrac{1}{2}", "1/2", "0.5",
             r"\tfrac{1}{2}", r"\frac{2}{4}"]),
    ("3/4", [r"\frac{3}{4}", r"\frac34", "3/4", "0.75", r"\dfrac{3}{4}"]),
    ("2/3", [r"\frac{2}{3}", r"\frac23", "2/3", r"\dfrac{4}{6}"]),
    ("sqrt2", [r"\sqrt{2}", r"\sqrt2", r"2^{1/2}", r"\frac{2}{\sqrt{2}}"]),
    ("sqrt2/2", [r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}",
                 r"\frac{\sqrt2}{2}", r"\sqrt{\frac{1}{2}}"]),
    ("2pi", [r"2\pi", r"2 \pi", r"\pi \cdot 2", r"\frac{4\pi}{2}"]),
    ("5/2", [r"\frac{5}{2}", "5/2", "2.5", r"2\frac{1}{2}", r"\frac{10}{4}"]),
    ("1000", ["1000", "1,000", "1{,}000", "10^3", "1000.0"]),
    ("x2+1", ["x^2+1", "1+x^2", "x^{2}+1", r"(x+1)^2-2x"]),
    ("set12", [r"\{1,2\}", r"\{2,1\}", r"\{1, 2\}"]),
    ("int27", [r"(2,7)", r"\left(2, 7\right)", r"(2, 7)"]),
    ("-1/3", [r"-\frac{1}{3}", r"\frac{-1}{3}", "-1/3", r"-\frac{2}{6}"]),
    ("12", ["12", "12.0", r"\boxed{12}", "+12", r"\$12", "12 dollars"]),
    ("3sqrt5", [r"3\sqrt{5}", r"\sqrt{45}", r"3\sqrt5"]),
]
LETTERS = "ABCDE"
CHOICE = ["{L}", "({L})", "{L})", "{L}.", r"\text{{({L})}}", "**{L}**",
          "option {L}"]
YES = ["Yes", "yes", "Yes.", "YES", "true", "True."]
NO = ["No", "no", "No.", "NO", "false", "False."]
ENDS = [r"So the answer is $\boxed{{{a}}}$.", r"Therefore, \boxed{{{a}}}",
        "The answer is {a}.", "Final answer: {a}", r"\boxed{{{a}}}"]


def sample(rng, spelling):
    return rng.choice(ENDS).format(a=spelling)


def make(rng, n_q, n):
    out = []
    for i in range(n_q):
        kind = ("math", "choice", "yesno")[i % 3]
        if kind == "math":
            vals = rng.sample(MATH, 3)
            spell = [v[1] for v in vals]
            expected = vals[0][1][0]
        elif kind == "choice":
            ls = rng.sample(LETTERS, 3)
            spell = [[c.format(L=l) for c in CHOICE] for l in ls]
            expected = ls[0]
        else:
            yes = rng.random() < 0.5
            spell = [YES, NO] if yes else [NO, YES]
            expected = "yes" if yes else "no"
        p = rng.uniform(0.35, 0.7)
        texts = []
        for _ in range(n):
            k = 0 if rng.random() < p else rng.randrange(1, len(spell))
            texts.append(sample(rng, rng.choice(spell[k])))
        out.append({"kind": kind, "samples": texts, "expected": expected})
    return out


def vote(quorum, lines, fmt):
    inp = "".join(json.dumps({"samples": l["samples"],
                              "expected": l["expected"],
                              "answer_format": fmt(l)}) + "\n"
                  for l in lines)
    r = subprocess.run([quorum, "vote"], input=inp, capture_output=True,
                       text=True, check=True)
    return [json.loads(x) for x in r.stdout.splitlines()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quorum", default="build/quorum")
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--seed", type=int, default=36)
    a = ap.parse_args()
    lines = make(random.Random(a.seed), a.questions, a.n)
    old = vote(a.quorum, lines, lambda l: "number")
    new = vote(a.quorum, lines, lambda l: l["kind"])
    auto = vote(a.quorum, lines, lambda l: "auto")
    # every winner judged by value, whatever vote chose it: the winner's
    # text stated as one sample, keyed by the question's kind
    for v in (old,):
        judged = vote(a.quorum, [
            {"samples": [r"\boxed{%s}" % x["answer"]] if x["answer"] else [],
             "expected": l["expected"], "kind": l["kind"]}
            for x, l in zip(v, lines)], lambda l: l["kind"])
        for x, j in zip(v, judged):
            x["correct"] = bool(j.get("correct"))
    print("%d questions (%d samples each), seed %d" % (len(lines), a.n,
                                                        a.seed))
    print("%-8s %5s %18s %18s %18s %13s %9s" % (
        "kind", "qs", "string vote: right", "by kind: right",
        "auto: right", "gained/lost", "groups"))
    for kind in ("math", "choice", "yesno", "all"):
        idx = [i for i, l in enumerate(lines)
               if kind == "all" or l["kind"] == kind]
        def right(v):
            return sum(1 for i in idx if v[i].get("correct"))
        gained = sum(1 for i in idx
                     if new[i].get("correct") and not old[i].get("correct"))
        lost = sum(1 for i in idx
                   if old[i].get("correct") and not new[i].get("correct"))
        groups_o = sum(len(old[i]["groups"]) for i in idx) / len(idx)
        groups_n = sum(len(new[i]["groups"]) for i in idx) / len(idx)
        print("%-8s %5d %11d (%4.1f%%) %8d (%4.1f%%) %8d (%4.1f%%) %7d/%-5d "
              "%.1f -> %.1f" % (
                  kind, len(idx), right(old), 100 * right(old) / len(idx),
                  right(new), 100 * right(new) / len(idx), right(auto),
                  100 * right(auto) / len(idx), gained, lost, groups_o,
                  groups_n))
    return 0


if __name__ == "__main__":
    sys.exit(main())

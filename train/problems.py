"""Seeded generator of arithmetic word problems with step-by-step solutions.

Families: add, sub, mul, div (one step) and two- and three-step mixes.
Every problem has a whole-number answer; operands have at most 3 digits.
A solution is one line per arithmetic step ("45 - 12 = 33.") and the final
line "The answer is 57." which quorum's answer extraction reads.

`level` in [0, 1] is the curriculum: it scales the largest operand (and the
number of steps) from small numbers at 0 to the full range at 1. The
held-out test set is drawn at level 1.

    /usr/bin/python3 train/problems.py --seed 1001 --count 600 --out FILE
"""
import argparse
import json
import random
import re

NAMES = ("Mia Liam Emma Noah Ava Lucas Sofia Ethan Zoe Omar Lena Ivan Maya "
         "Leo Nora Ben Aria Sam Ella Max Ruby Tom Iris Jack Lily Hugo Ana "
         "Finn Rosa Kai Alma Theo Jade Eli Vera Owen Nina Paul Dora Raj").split()
# (singular, plural)
ITEMS = [(w, w + "s") for w in (
    "apple pen sticker marble card book shell coin stamp bead egg cookie "
    "pencil flower ball rock candy toy button ribbon balloon cup plate "
    "orange lemon carrot brick nail sock kite boat tile").split()]
ITEMS += [("peach", "peaches"), ("box", "boxes"), ("cherry", "cherries"),
          ("sheep", "sheep"), ("fish", "fish"), ("puppy", "puppies")]
GROUPS = [(w, w + "s") for w in (
    "bag jar basket crate pack tray bucket row can").split()]
GROUPS += [("box", "boxes"), ("bunch", "bunches"), ("pouch", "pouches"),
           ("shelf", "shelves")]
PEOPLE = ("brother sister friend teacher cousin neighbor mother father "
          "uncle aunt").split()
HE = {}  # name -> pronoun (deterministic by name)
for i, n in enumerate(NAMES):
    HE[n] = ("She", "her") if i % 2 == 0 else ("He", "his")


def _num(rng, lo, hi):
    """A number in [lo, hi], first picking its digit count uniformly so
    small and large numbers are equally common."""
    lo = max(lo, 0)
    if hi <= lo:
        return lo
    spans = []
    for d in (1, 2, 3):
        a, b = max(lo, 10 ** (d - 1) if d > 1 else 0), min(hi, 10 ** d - 1)
        if a <= b:
            spans.append((a, b))
    a, b = rng.choice(spans)
    return rng.randint(a, b)


def _limits(level):
    """Largest add/sub operand and largest multiplication operand."""
    top = int(20 + (999 - 20) * min(1.0, level) ** 1.5)
    mul = int(9 + (99 - 9) * min(1.0, level))
    return top, mul


class P:
    """A problem under construction: sentences, steps, current value."""

    def __init__(self, rng):
        self.rng = rng
        self.q = []
        self.steps = []

    def step(self, a, op, b):
        r = {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[op]
        self.steps.append("%d %s %d = %d." % (a, op, b, r))
        return r


def _who(rng):
    n = rng.choice(NAMES)
    return n, HE[n][0], HE[n][1]


def _item(rng):
    return rng.choice(ITEMS)


# ---- one-step families -----------------------------------------------------

def fam_add(rng, level):
    top, _ = _limits(level)
    a, b = _num(rng, 2, top), _num(rng, 2, top)
    n, he, his = _who(rng)
    s, pl = _item(rng)
    p = P(rng)
    t = rng.randrange(6)
    if t == 0:
        q = "%s has %d %s and buys %d more. How many %s does %s have now?" % (
            n, a, pl, b, pl, he.lower())
    elif t == 1:
        q = "A farmer has %d %s and gets %d more. How many %s are there?" % (
            a, pl, b, pl)
    elif t == 2:
        q = ("%s found %d %s on Monday and %d %s on Tuesday. How many %s did "
             "%s find in all?" % (n, a, pl, b, pl, pl, he.lower()))
    elif t == 3:
        q = ("There are %d %s in a room. %d more are brought in. How many %s "
             "are in the room?" % (a, pl, b, pl))
    elif t == 4:
        q = ("%s had %d %s. %s %s gave %s %d more. How many %s does %s "
             "have?" % (n, a, pl, his.capitalize(), rng.choice(PEOPLE), his.replace(
                 "his", "him"), b, pl, n))
    else:
        q = "What is the total of %d %s and %d %s?" % (a, pl, b, pl)
    r = p.step(a, "+", b)
    return q, p.steps, r


def fam_sub(rng, level):
    top, _ = _limits(level)
    a = _num(rng, 3, top)
    b = _num(rng, 1, a - 1) if a > 2 else 1
    n, he, his = _who(rng)
    s, pl = _item(rng)
    p = P(rng)
    t = rng.randrange(5)
    if t == 0:
        q = "%s has %d %s and gives %d to %s %s. How many %s are left?" % (
            n, a, pl, b, his, rng.choice(PEOPLE), pl)
    elif t == 1:
        q = "A shop has %d %s. It sells %d of them. How many %s are left?" % (
            a, pl, b, pl)
    elif t == 2:
        q = ("%s had %d %s and lost %d. How many %s does %s have now?" % (
            n, a, pl, b, pl, he.lower()))
    elif t == 3:
        q = ("There were %d %s in a box. %d were taken out. How many %s are "
             "still in the box?" % (a, pl, b, pl))
    else:
        q = ("%s wants %d %s and already has %d. How many more %s does %s "
             "need?" % (n, a, pl, b, pl, he.lower()))
    r = p.step(a, "-", b)
    return q, p.steps, r


def _mul_ops(rng, level):
    _, mt = _limits(level)
    a = rng.randint(2, 12 if level > 0.3 else 9)
    b = _num(rng, 2, mt)
    return a, b


def fam_mul(rng, level):
    g, per = _mul_ops(rng, level)
    if rng.random() < 0.5:
        g, per = per, g
    n, he, his = _who(rng)
    s, pl = _item(rng)
    gs, gpl = rng.choice(GROUPS)
    p = P(rng)
    t = rng.randrange(4)
    if t == 0:
        q = "Each %s holds %d %s. How many %s are in %d %s?" % (
            gs, per, pl, pl, g, gpl)
    elif t == 1:
        q = ("%s buys %d %s of %s. Each %s has %d %s. How many %s does %s "
             "buy?" % (n, g, gpl, pl, gs, per, pl, pl, he.lower()))
    elif t == 2:
        q = "There are %d %s with %d %s in each. How many %s are there?" % (
            g, gpl, per, pl, pl)
    else:
        q = ("%s makes %d %s every day. How many %s does %s make in %d "
             "days?" % (n, per, pl, pl, he.lower(), g))
    r = p.step(g, "*", per) if rng.random() < 0.5 else p.step(per, "*", g)
    return q, p.steps, r


def fam_div(rng, level):
    d, qv = _mul_ops(rng, level)
    if qv > 60:
        qv = rng.randint(2, 60)
    tot = d * qv
    n, he, his = _who(rng)
    s, pl = _item(rng)
    gs, gpl = rng.choice(GROUPS)
    p = P(rng)
    t = rng.randrange(4)
    if t == 0:
        q = ("%s shares %d %s equally among %d friends. How many %s does "
             "each friend get?" % (n, tot, pl, d, pl))
    elif t == 1:
        q = ("%d %s are packed into %s of %d. How many %s are needed?" % (
            tot, pl, gpl, d, gpl))
    elif t == 2:
        q = ("%d %s are put into %d %s with the same number in each. How "
             "many %s are in each %s?" % (tot, pl, d, gpl, pl, gs))
    else:
        q = ("A class of %d students splits into teams of %d. How many teams "
             "are there?" % (tot, d))
    r = p.step(tot, "/", d)
    return q, p.steps, r


# ---- multi-step families ---------------------------------------------------

def fam_give_buy(rng, level):
    """Mia has 45 stickers. She gives 12 to her brother and then buys 3
    packs of 8. How many stickers does she have now?"""
    top, _ = _limits(level)
    a = _num(rng, 10, top)
    b = _num(rng, 1, a - 1)
    k, per = _mul_ops(rng, level)
    n, he, his = _who(rng)
    s, pl = _item(rng)
    gs, gpl = rng.choice(GROUPS)
    p = P(rng)
    q = ("%s has %d %s. %s gives %d to %s %s and then buys %d %s of %d. How "
         "many %s does %s have now?" % (n, a, pl, he, b, his,
                                       rng.choice(PEOPLE), k, gpl, per, pl,
                                       he.lower()))
    x = p.step(a, "-", b)
    y = p.step(k, "*", per)
    r = p.step(x, "+", y)
    return q, p.steps, r


def fam_buy_sell(rng, level):
    top, _ = _limits(level)
    k, per = _mul_ops(rng, level)
    n, he, his = _who(rng)
    s, pl = _item(rng)
    gs, gpl = rng.choice(GROUPS)
    p = P(rng)
    x = k * per
    b = _num(rng, 1, max(1, x - 1))
    q = ("%s buys %d %s with %d %s in each. %s sells %d of the %s. How many "
         "%s are left?" % (n, k, gpl, per, pl, he, b, pl, pl))
    x = p.step(k, "*", per)
    r = p.step(x, "-", b)
    return q, p.steps, r


def fam_two_adds(rng, level):
    top, _ = _limits(level)
    a, b = _num(rng, 2, top), _num(rng, 2, top)
    c = _num(rng, 1, a + b - 1)
    n, he, his = _who(rng)
    s, pl = _item(rng)
    p = P(rng)
    q = ("%s picked %d %s in the morning and %d in the afternoon. %s ate %d "
         "of them. How many %s are left?" % (n, a, pl, b, he, c, pl))
    x = p.step(a, "+", b)
    r = p.step(x, "-", c)
    return q, p.steps, r


def fam_share(rng, level):
    d, per = _mul_ops(rng, level)
    if per > 40:
        per = rng.randint(2, 40)
    top, _ = _limits(level)
    n, he, his = _who(rng)
    s, pl = _item(rng)
    p = P(rng)
    a = d * per
    extra = _num(rng, 1, top)
    tot = a + extra
    q = ("%s has %d %s. %s keeps %d and shares the rest equally among %d "
         "friends. How many %s does each friend get?" % (
             n, tot, pl, he, extra, d, pl))
    x = p.step(tot, "-", extra)
    r = p.step(x, "/", d)
    return q, p.steps, r


def fam_two_groups(rng, level):
    k1, p1 = _mul_ops(rng, level)
    k2, p2 = _mul_ops(rng, level)
    n, he, his = _who(rng)
    s, pl = _item(rng)
    g1, g1p = rng.choice(GROUPS)
    g2, g2p = rng.choice([g for g in GROUPS if g[0] != g1])
    p = P(rng)
    q = ("%s has %d %s of %d %s and %d %s of %d %s. How many %s does %s "
         "have in all?" % (n, k1, g1p, p1, pl, k2, g2p, p2, pl, pl,
                           he.lower()))
    x = p.step(k1, "*", p1)
    y = p.step(k2, "*", p2)
    r = p.step(x, "+", y)
    return q, p.steps, r


def fam_three_steps(rng, level):
    top, _ = _limits(level)
    a = _num(rng, 10, top)
    b = _num(rng, 2, top)
    c = _num(rng, 1, a + b - 1)
    d = _num(rng, 2, top)
    n, he, his = _who(rng)
    s, pl = _item(rng)
    p = P(rng)
    q = ("%s has %d %s. %s gets %d more, gives away %d, and then finds %d. "
         "How many %s does %s have now?" % (n, a, pl, he, b, c, d, pl,
                                           he.lower()))
    x = p.step(a, "+", b)
    y = p.step(x, "-", c)
    r = p.step(y, "+", d)
    return q, p.steps, r


ONE_STEP = [fam_add, fam_sub, fam_mul, fam_div]
MULTI = [fam_give_buy, fam_buy_sell, fam_two_adds, fam_share, fam_two_groups,
         fam_three_steps]


def make(rng, level=1.0):
    """One problem: dict(question, solution, answer, family)."""
    p_multi = 0.15 + 0.45 * min(1.0, level)
    fams = MULTI if rng.random() < p_multi else ONE_STEP
    f = rng.choice(fams)
    while True:
        q, steps, r = f(rng, level)
        if 0 <= r <= 99999:
            break
    sol = "\n".join(steps + ["The answer is %d." % r])
    return {"question": q, "solution": sol, "answer": str(r),
            "family": f.__name__[4:]}


def valid(p):
    """Every number in the question has at most 3 digits. A few `share`
    draws break this (the kept amount plus a multiple can pass 999); they
    are skipped rather than redrawn inside make(), so the committed test
    set stays the same draws."""
    return all(len(x) <= 3 for x in re.findall(r"[0-9]+", p["question"]))


def draw_excluding(make_fn, rng, level, exclude):
    """A valid make_fn() problem whose question is not in exclude (the
    held-out sets): the training stream never contains a test question.
    Every generator draws through it."""
    while True:
        p = make_fn(rng, level)
        if valid(p) and p["question"] not in exclude:
            return p


def make_excluding(rng, level, exclude):
    return draw_excluding(make, rng, level, exclude)


def sample_cli(make_fn, doc):
    """`--seed S --count N --level L`: N problems of make_fn as JSON lines
    (the generators' own command lines)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--level", type=float, default=1.0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    for _ in range(a.count):
        print(json.dumps(make_fn(rng, a.level)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, required=True,
                    help="distinct questions drawn; invalid ones (see "
                         "valid()) are then left out")
    ap.add_argument("--level", type=float, default=1.0)
    ap.add_argument("--exclude", help="JSONL whose questions must not recur")
    ap.add_argument("--solutions", action="store_true",
                    help="also write the reference solution")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    seen = set()
    if a.exclude:
        with open(a.exclude) as f:
            seen = {json.loads(l)["question"] for l in f}
    rng = random.Random(a.seed)
    with open(a.out, "w") as f:
        n = 0
        while n < a.count:
            p = make(rng, a.level)
            if p["question"] in seen:
                continue
            seen.add(p["question"])
            n += 1
            if not valid(p):
                continue
            rec = {"question": p["question"], "answer": p["answer"],
                   "family": p["family"]}
            if a.solutions:
                rec["solution"] = p["solution"]
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()

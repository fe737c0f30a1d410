"""Word problems whose phrasing composes from parts (issue 28): a setting
sentence, one to three change sentences, a question, and sometimes a
distractor sentence with a number that plays no part — each drawn from many
frames, with synonyms for the operations, names, people and objects from
lists, units, plurals, numbers as digits or (small ones) as words, and
lower-case or unpunctuated typing. problems.py keeps its fixed templates
(the generated held-out set is drawn from them); train.py mixes both.

A problem is built from an owner (a name, "I", "a farmer", "the shop"),
a thing counted (an object with its plural, or a unit such as dollars or
cm), and events; each event is one step of the solution ("45 - 12 = 33."),
which ends "The answer is N.". The record's "expr" is the answer's
arithmetic (test_problems.py recomputes it).

    /usr/bin/python3 train/phrasing.py --seed 3 --count 20
"""

import problems

NAMES = list(problems.NAMES) + (
    "Amy Ali Bella Carl Dan Eva Fatima Grace Hana Ian Jill Ken Lee Lucy "
    "Mike Nadia Olga Pedro Quinn Rita Sara Ted Uma Victor Wendy Yara Zack "
    "Anna Carlos Diego Elena Felix Gina Hector Irene Jon Kim Laura Marco "
    "Nico Pia Rosa Sean Tara").split()
SHE = set(problems.NAMES[0::2]) | set(
    "Amy Bella Eva Fatima Grace Hana Jill Lucy Nadia Olga Rita Sara Uma "
    "Wendy Yara Anna Elena Gina Irene Kim Laura Pia Rosa Tara".split())
# problems.ITEMS less its "candys" (kept there: the held-out set has it)
THINGS = [(s, p) for s, p in problems.ITEMS if s != "candy"] + [
    (w, w + "s") for w in (
        "sticker card shell stamp marble bead crayon grape muffin cupcake "
        "bottle balloon ticket brick seed nut pear melon donut sandwich "
        "comic toy car block puzzle leaf feather button candle flag").split()
] + [("strawberry", "strawberries"), ("daisy", "daisies"),
     ("potato", "potatoes"), ("tomato", "tomatoes"), ("glass", "glasses"),
     ("brush", "brushes"), ("mouse", "mice"), ("goose", "geese"),
     ("child", "children"), ("chicken", "chickens"), ("duck", "ducks"),
     ("cow", "cows"), ("goat", "goats"), ("bird", "birds"),
     ("rabbit", "rabbits"), ("candy", "candies")]
# (unit, what spending/losing it is called): amounts, not objects
UNITS = [("dollars", "spends"), ("cm of ribbon", "cuts off"),
         ("meters of rope", "cuts off"), ("kg of flour", "uses"),
         ("liters of water", "uses"), ("minutes", "uses"),
         ("points", "loses"), ("pages", "reads")]
GROUPS = list(problems.GROUPS) + [
    ("carton", "cartons"), ("bowl", "bowls"), ("plate", "plates"),
    ("tray", "trays"), ("tin", "tins"), ("sack", "sacks"),
    ("drawer", "drawers"), ("album", "albums"), ("case", "cases"),
    ("team", "teams"), ("table", "tables")]
PLACES = ("shop store bakery library farm school zoo garden classroom "
          "market cafe museum").split()
OWNERS = ("a farmer", "a baker", "a teacher", "a girl", "a boy", "my mom",
          "my dad", "my sister", "my brother", "grandma", "grandpa",
          "a gardener", "the coach", "a chef")
PEOPLE = problems.PEOPLE + "classmate grandma grandpa coach".split()
SMALL = ("zero one two three four five six seven eight nine ten eleven "
         "twelve thirteen fourteen fifteen sixteen seventeen eighteen "
         "nineteen twenty").split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()


# ---- owners and numbers ------------------------------------------------------

class Who:
    """Who the problem is about, with the verb forms that go with it."""

    def __init__(self, rng):
        r = rng.random()
        if r < 0.55:
            self.name = rng.choice(NAMES)
            she = self.name in SHE
            self.sub, self.obj, self.pos = (("she", "her", "her") if she
                                            else ("he", "him", "his"))
            self.first = False
        elif r < 0.7:
            self.name, self.sub, self.obj, self.pos = "I", "I", "me", "my"
            self.first = True
        else:
            o = rng.choice(OWNERS)
            self.name = o
            she = o.split()[-1] in ("mom", "sister", "grandma", "girl")
            self.sub, self.obj, self.pos = (("she", "her", "her") if she
                                            else ("he", "him", "his"))
            self.first = False

    def v(self, third, base):
        return base if self.first else third

    def cap(self, s):
        return s[0].upper() + s[1:]

    def has(self):
        return self.v("has", "have")

    def does(self):
        return self.v("does", "do")


def say(rng, n):
    """n as digits, or for small n sometimes as a word."""
    if n <= 20 and rng.random() < 0.3:
        return SMALL[n]
    return str(n)


class Prob:
    def __init__(self, rng):
        self.rng = rng
        self.steps = []
        self.expr = None

    def step(self, a, op, b):
        r = {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[op]
        assert op != "/" or a % b == 0
        self.steps.append("%d %s %d = %d." % (a, op, b, r))
        return r


def thing(rng):
    """(singular, plural, is_unit)."""
    if rng.random() < 0.2:
        u, _ = rng.choice(UNITS)
        return u, u, True
    s, p = rng.choice(THINGS)
    return s, p, False


def num(rng, lo, hi):
    return problems._num(rng, lo, hi)


# ---- sentence frames ---------------------------------------------------------

def setting(rng, w, n, pl):
    N = say(rng, n)
    f = rng.randrange(8)
    if f == 0:
        return "%s %s %s %s." % (w.cap(w.name), w.has(), N, pl)
    if f == 1:
        return "%s had %s %s." % (w.cap(w.name), N, pl)
    if f == 2:
        return "%s started with %s %s." % (w.cap(w.name), N, pl)
    if f == 3:
        return "There are %s %s in %s %s." % (
            N, pl, w.pos, rng.choice(["bag", "box", "room", "collection",
                                     "basket"]))
    if f == 4:
        return "%s owns %s %s." % (w.cap(w.name), N, pl) if not w.first \
            else "I own %s %s." % (N, pl)
    if f == 5:
        return "At first %s had %s %s." % (w.name, N, pl)
    if f == 6:
        return "%s %s got %s %s." % (w.cap(w.name), w.v("has", "have"), N, pl)
    return "%s collected %s %s." % (w.cap(w.name), N, pl)


GAIN = [("buys", "buy", "more"), ("gets", "get", "more"),
        ("finds", "find", "more"), ("wins", "win", "more"),
        ("picks", "pick", "more"), ("receives", "receive", "more"),
        ("collects", "collect", "more"), ("earns", "earn", "more"),
        ("makes", "make", "more"), ("adds", "add", "more")]
LOSS = [("loses", "lose"), ("eats", "eat"), ("gives away", "give away"),
        ("sells", "sell"), ("uses", "use"), ("breaks", "break"),
        ("drops", "drop"), ("spends", "spend"), ("throws away", "throw away"),
        ("donates", "donate")]


def gain(rng, w, n, pl, unit):
    N = say(rng, n)
    f = rng.randrange(7)
    if unit and f in (2, 3):
        f = 0
    t, b, _ = rng.choice(GAIN)
    if f == 0:
        return "%s %s %s more." % (w.cap(w.sub), w.v(t, b), N)
    if f == 1:
        return "Then %s %s %s %s." % (w.sub, w.v(t, b), N, pl)
    if f == 2:
        return "%s %s %s %s %s more." % (
            w.cap(w.pos), rng.choice(PEOPLE), rng.choice(["gives", "hands"]),
            w.obj, N)
    if f == 3:
        return "%s %s given %s more %s." % (
            w.cap(w.sub), w.v("is", "am"), N, pl)
    if f == 4:
        return "On %s %s %s another %s." % (
            rng.choice(DAYS), w.sub, w.v(t, b), N)
    if f == 5:
        return "Later %s %s %s %s %s." % (
            w.sub, w.v(t, b), N, "more" if rng.random() < 0.5 else "extra",
            pl)
    return "%s also %s %s %s." % (w.cap(w.sub), w.v(t, b), N, pl)


def loss(rng, w, n, pl, unit):
    N = say(rng, n)
    f = rng.randrange(6)
    t, b = rng.choice(LOSS)
    if f == 0:
        return "%s %s %s." % (w.cap(w.sub), w.v(t, b), N)
    if f == 1:
        return "Then %s %s %s of them." % (w.sub, w.v(t, b), N) if not unit \
            else "Then %s %s %s." % (w.sub, w.v(t, b), N)
    if f == 2:
        return "%s %s %s %s to %s %s." % (
            w.cap(w.sub), w.v("gives", "give"), N, pl, w.pos,
            rng.choice(PEOPLE))
    if f == 3:
        return "%s %s %s %s." % (w.cap(w.sub), w.v(t, b), N, pl)
    if f == 4:
        return "After that, %s %s %s." % (w.sub, w.v(t, b), N)
    return "%s %s %s %s later that day." % (w.cap(w.sub), w.v(t, b), N, pl)


def ask_now(rng, w, pl, left):
    f = rng.randrange(7)
    if left and f < 3:
        q = rng.choice(["How many %s are left?" % pl,
                        "How many %s %s %s have left?" % (pl, w.does(),
                                                         w.sub),
                        "how many %s remain" % pl])
        return q
    return rng.choice([
        "How many %s %s %s have now?" % (pl, w.does(), w.sub),
        "How many %s %s %s have in total?" % (pl, w.does(), w.sub),
        "How many %s are there now?" % pl,
        "how many %s %s %s have" % (pl, w.does(), w.sub),
        "What is the number of %s %s %s now?" % (pl, w.sub,
                                                  w.v("has", "have")),
        "How many %s altogether?" % pl,
        "How many %s %s %s got now?" % (pl, w.v("has", "have"), w.sub)])


def distractor(rng, w):
    n = rng.randint(2, 60)
    return rng.choice([
        "%s %s %d years old." % (w.cap(w.name), w.v("is", "am"), n),
        "It is %d degrees outside." % n,
        "The %s opens at %d." % (rng.choice(PLACES), rng.randint(7, 11)),
        "%s %s %d %s." % (w.cap(w.name), w.v("has", "have"),
                          rng.randint(2, 9),
                          rng.choice(["cousins", "cats", "pet fish",
                                      "brothers"])),
        "The bus number is %d." % n,
        "%s lives at house number %d." % (w.cap(w.name), n)
        if not w.first else "I live at house number %d." % n,
        "There are %d days until the holiday." % n])


def maybe_lower(rng, s):
    r = rng.random()
    if r < 0.1:
        return s.lower()
    if r < 0.18:
        return s.rstrip("?").rstrip(".")
    return s


# ---- families ----------------------------------------------------------------

def fam_change(rng, level):
    """Start, one to three gains or losses, how many now / left."""
    top, _ = problems._limits(level)
    w = Who(rng)
    s, pl, unit = thing(rng)
    p = Prob(rng)
    x = num(rng, 2, top)
    sents = [setting(rng, w, x, pl)]
    expr = str(x)
    nev = rng.choice([1, 1, 1, 2, 2, 3]) if level > 0.2 else 1
    left = False
    for _ in range(nev):
        if x > 1 and rng.random() < 0.5:
            b = num(rng, 1, x - 1)
            sents.append(loss(rng, w, b, pl, unit))
            x = p.step(x, "-", b)
            expr += "-%d" % b
            left = True
        else:
            b = num(rng, 1, top)
            sents.append(gain(rng, w, b, pl, unit))
            x = p.step(x, "+", b)
            expr += "+%d" % b
            left = False
    return sents, ask_now(rng, w, pl, left), p, expr, x, \
        "change%d" % nev


def fam_groups(rng, level):
    """Groups of equal size: multiply, then maybe a gain or a loss."""
    g, per = problems._mul_ops(rng, level)
    if rng.random() < 0.5:
        g, per = per, g
    w = Who(rng)
    s, pl, _ = rng.choice(THINGS) + (False,)
    gs, gpl = rng.choice(GROUPS)
    p = Prob(rng)
    G, PER = say(rng, g), say(rng, per)
    f = rng.randrange(6)
    if f == 0:
        sents = ["%s %s %s %s of %s." % (w.cap(w.name), w.v("buys", "buy"),
                                         G, gpl, pl),
                 "Each %s %s %s %s." % (gs, rng.choice(["holds", "has",
                                                        "contains"]),
                                        PER, pl)]
    elif f == 1:
        sents = ["There are %s %s with %s %s in each." % (G, gpl, PER, pl)]
    elif f == 2:
        sents = ["Each %s holds %s %s, and %s %s %s %s." % (
            gs, PER, pl, w.name, w.has(), G, gpl)]
    elif f == 3:
        sents = ["%s %s %s %s every day for %s days." % (
            w.cap(w.name), w.v("makes", "make"), PER, pl, G)]
    elif f == 4:
        sents = ["%s %s of %s %s are on the table." % (
            w.cap(G), gpl, PER, pl)]
    else:
        sents = ["%s %s %s %s, %s %s in every %s." % (
            w.cap(w.name), w.v("fills", "fill"), G, gpl, PER, pl, gs)]
    x = p.step(g, "*", per) if rng.random() < 0.5 else p.step(per, "*", g)
    expr = "%d*%d" % (g, per)
    q = rng.choice(["How many %s are there in all?" % pl,
                    "How many %s is that?" % pl,
                    "how many %s in total" % pl,
                    "How many %s are there altogether?" % pl])
    fam = "groups"
    # frames 1 and 4 name nobody, so no "he" can follow them
    if level > 0.2 and f not in (1, 4) and rng.random() < 0.4:
        if rng.random() < 0.5 and x > 1:
            b = num(rng, 1, x - 1)
            sents.append(loss(rng, w, b, pl, False))
            x = p.step(x, "-", b)
            expr += "-%d" % b
            q = rng.choice(["How many %s are left?" % pl,
                            "How many %s %s %s have left?" % (pl, w.does(),
                                                             w.sub)])
        else:
            top, _ = problems._limits(level)
            b = num(rng, 1, top)
            sents.append(gain(rng, w, b, pl, False))
            x = p.step(x, "+", b)
            expr += "+%d" % b
            q = ask_now(rng, w, pl, False)
        fam = "groups2"
    return sents, q, p, expr, x, fam


def fam_share(rng, level):
    """Equal sharing or packing: divide, sometimes after a change."""
    d, qv = problems._mul_ops(rng, level)
    if qv > 60:
        qv = rng.randint(2, 60)
    w = Who(rng)
    s, pl = rng.choice(THINGS)
    gs, gpl = rng.choice(GROUPS)
    p = Prob(rng)
    tot = d * qv
    pre = []
    expr = None
    fam = "share"
    if level > 0.2 and rng.random() < 0.35:
        top, _ = problems._limits(level)
        extra = num(rng, 1, min(top, 999 - tot)) if tot < 999 else 0
        if extra:
            start = tot + extra
            pre = [setting(rng, w, start, pl),
                   loss(rng, w, extra, pl, False)]
            p.step(start, "-", extra)
            expr = "(%d-%d)" % (start, extra)
            fam = "share2"
    T, D = say(rng, tot), say(rng, d)
    it = "them" if pre else "%s %s" % (T, pl)
    f = rng.randrange(6)
    if f == 0:
        sents = ["%s %s %s equally among %s friends." % (
            w.cap(w.sub if pre else w.name), w.v("shares", "share"),
            "the rest" if pre else it, D)]
        q = "How many %s does each friend get?" % pl
    elif f == 1:
        sents = ["%s %s %s into %s with %s in each." % (
            w.cap(w.sub if pre else w.name), w.v("packs", "pack"),
            "the rest" if pre else it, gpl, D)]
        q = "How many %s %s %s fill?" % (gpl, w.does(), w.sub)
    elif f == 2:
        sents = ["%s %s %s equally into %s %s." % (
            w.cap(w.sub if pre else w.name), w.v("puts", "put"),
            "the rest" if pre else it, D, gpl)]
        q = "How many %s are in each %s?" % (pl, gs)
    elif f == 3:
        sents = ["%s %s %s between %s kids so that each kid gets the same "
                 "number." % (w.cap(w.sub if pre else w.name),
                              w.v("splits", "split"),
                              "the rest" if pre else it, D)]
        q = "how many does each kid get"
    elif f == 4:
        sents = ["%s %s %s in groups of %s." % (
            w.cap(w.sub if pre else w.name), w.v("arranges", "arrange"),
            "the rest" if pre else it, D)]
        q = "How many groups are there?"
    else:
        sents = ["%s %s %s in equal rows of %s." % (
            w.cap(w.sub if pre else w.name), w.v("plants", "plant"),
            "the rest" if pre else it, D)]
        q = "How many rows %s %s get?" % (w.does(), w.sub)
    x = p.step(tot, "/", d)
    expr = ("%s/%d" % (expr, d)) if expr else "%d/%d" % (tot, d)
    return pre + sents, q, p, expr, x, fam


def fam_compare(rng, level):
    """Two people: how many more, or k times / n more than the other."""
    top, _ = problems._limits(level)
    a_name = rng.choice(NAMES)
    b_name = rng.choice([n for n in NAMES if n != a_name])
    s, pl = rng.choice(THINGS)
    p = Prob(rng)
    f = rng.randrange(4)
    if f == 0:
        a = num(rng, 3, top)
        b = num(rng, 1, a - 1)
        sents = ["%s has %s %s and %s has %s %s." % (
            a_name, say(rng, a), pl, b_name, say(rng, b), pl)]
        q = rng.choice(["How many more %s does %s have than %s?" % (
            pl, a_name, b_name), "How many fewer %s does %s have?" % (
            pl, b_name), "What is the difference?"])
        x = p.step(a, "-", b)
        expr = "%d-%d" % (a, b)
    elif f == 1:
        a = num(rng, 2, top)
        b = num(rng, 1, top)
        sents = ["%s has %s %s." % (a_name, say(rng, a), pl),
                 "%s has %s more %s than %s." % (b_name, say(rng, b), pl,
                                                  a_name)]
        q = "How many %s does %s have?" % (pl, b_name)
        x = p.step(a, "+", b)
        expr = "%d+%d" % (a, b)
    elif f == 2:
        k, a = problems._mul_ops(rng, level)
        sents = ["%s has %s %s." % (a_name, say(rng, a), pl),
                 "%s has %s times as many." % (b_name, say(rng, k))]
        q = "How many %s does %s have?" % (pl, b_name)
        x = p.step(a, "*", k)
        expr = "%d*%d" % (a, k)
    else:
        a = num(rng, 3, top)
        b = num(rng, 1, a - 1)
        sents = ["%s has %s %s." % (a_name, say(rng, a), pl),
                 "%s has %s fewer %s than %s." % (b_name, say(rng, b), pl,
                                                   a_name)]
        q = "How many %s does %s have?" % (pl, b_name)
        x = p.step(a, "-", b)
        expr = "%d-%d" % (a, b)
    return sents, q, p, expr, x, "compare"


def fam_total(rng, level):
    """Two or three amounts to add up ("in total", "altogether")."""
    top, _ = problems._limits(level)
    s, pl = rng.choice(THINGS)
    p = Prob(rng)
    k = 3 if level > 0.3 and rng.random() < 0.3 else 2
    xs = [num(rng, 1, top) for _ in range(k)]
    f = rng.randrange(4)
    if f == 0:
        sents = ["A %s sold %s %s on %s." % (
            rng.choice(PLACES), ", ".join(say(rng, x) for x in xs[:-1]) +
            " and " + say(rng, xs[-1]), pl, "three days" if k == 3 else
            "two days")]
    elif f == 1:
        names = rng.sample(NAMES, k)
        sents = ["%s has %s %s." % (n, say(rng, x), pl)
                 for n, x in zip(names, xs)]
    elif f == 2:
        sents = ["There are %s %s in the first %s" % (
            say(rng, xs[0]), pl, rng.choice(["box", "bag", "room"])) +
            "".join(", %s in the %s" % (say(rng, x), o)
                    for x, o in zip(xs[1:], ["second", "third"])) + "."]
    else:
        sents = ["Someone counted %s %s on Monday and %s on %s." % (
            say(rng, xs[0]), pl, " and ".join(say(rng, x) for x in xs[1:]),
            "the next days" if k == 3 else "Tuesday")]
    x = xs[0]
    for y in xs[1:]:
        x = p.step(x, "+", y)
    expr = "+".join(str(x) for x in xs)
    q = rng.choice(["How many %s in total?" % pl,
                    "How many %s are there altogether?" % pl,
                    "What is the total number of %s?" % pl,
                    "how many %s all together" % pl])
    return sents, q, p, expr, x, "total"


FAMILIES = [(fam_change, 4), (fam_groups, 2), (fam_share, 2),
            (fam_compare, 2), (fam_total, 1)]


def make(rng, level=1.0):
    """One problem: dict(question, solution, answer, family, expr)."""
    while True:
        r, acc = rng.random() * sum(w for _, w in FAMILIES), 0
        for f, wt in FAMILIES:
            acc += wt
            if r < acc:
                break
        sents, q, p, expr, x, fam = f(rng, level)
        if 0 <= x <= 9999 and p.steps:
            break
    if rng.random() < 0.2:
        w = Who(rng)
        sents.insert(rng.randrange(len(sents) + 1), distractor(rng, w))
    question = " ".join(sents + [q])
    question = maybe_lower(rng, question)
    sol = "\n".join(p.steps + ["The answer is %d." % x])
    return {"question": question, "solution": sol, "answer": str(x),
            "family": fam, "expr": expr}


def make_excluding(rng, level, exclude):
    return problems.draw_excluding(make, rng, level, exclude)


def main():
    problems.sample_cli(make, __doc__)


if __name__ == "__main__":
    main()

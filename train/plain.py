"""Word problems as people type them (issue 34): the situations and
wordings of everyday questions — morning and afternoon, boys and girls,
prices and rates, dozens and pairs, "how many more do we need", "years
older", "out of", "what is 25 times 25" — over large lists of people,
things, places and units, with the surface noise of a typed question
("Q:", "please help", lower case, no question mark, number words).

It widens phrasing.py (composed change stories) and problems.py (fixed
templates, which the generated held-out set is drawn from); train.py mixes
the three (--mix). Every word list and frame here was written for this
repository. A record is the same as theirs: question, solution (one line a
step, "45 - 12 = 33.", then "The answer is 33."), answer, family and expr,
the answer's arithmetic over the numbers the question states
(test_problems.py recomputes it and checks every step's operands).

    /usr/bin/python3 train/plain.py --seed 3 --count 20
"""

import problems

# ---- words -------------------------------------------------------------------

SHE_NAMES = (
    "Maya Emma Ava Sofia Zoe Lena Nora Ella Ruby Iris Lily Ana Rosa Alma "
    "Jade Vera Nina Dora Amy Bella Eva Fatima Grace Hana Jill Lucy Nadia "
    "Olga Rita Sara Uma Wendy Yara Anna Elena Gina Irene Kim Laura Pia Tara "
    "Chloe Mei Priya Aisha Leah Hannah Julia Clara Sophie Olivia Mila Isla "
    "Freya Ines Noor Zara Keiko Lola Marta Nadia Paula Rachel Sienna Tess "
    "Ursula Violet Wanda Xena Yuki Zelda Bea Carmen Dana Erin Fiona Greta "
    "Holly Ivy Jess Kate Lara Molly Nell Opal Petra Ruth Sally Tina").split()
HE_NAMES = (
    "Liam Noah Lucas Ethan Omar Ivan Leo Ben Sam Max Tom Jack Hugo Finn Kai "
    "Theo Eli Owen Paul Raj Ali Carl Dan Ian Ken Lee Mike Pedro Quinn Ted "
    "Victor Zack Carlos Diego Felix Hector Jon Marco Nico Sean Adam Ahmed "
    "Bruno Chris Dev Eric Frank George Harry Isaac Jamal Kevin Louis Mateo "
    "Nate Oscar Pablo Ravi Simon Tariq Umar Vince Will Yusuf Zane Arjun "
    "Boris Caleb Dmitri Emil Gus Hiro Igor Jake Kofi Leon Milo Ned Otto "
    "Pete Rob Stan Toby Uri Vlad Wes").split()
# (owner, pronoun she/he/they) for people named by what they are
ROLES = [("a farmer", "he"), ("a baker", "she"), ("the teacher", "she"),
         ("my mom", "she"), ("my dad", "he"), ("my sister", "she"),
         ("my brother", "he"), ("grandma", "she"), ("grandpa", "he"),
         ("my aunt", "she"), ("my uncle", "he"), ("a chef", "he"),
         ("the coach", "she"), ("a gardener", "he"), ("the librarian", "she"),
         ("a shopkeeper", "he"), ("my friend", "she"), ("the nurse", "she"),
         ("a fisherman", "he"), ("the mailman", "he"), ("a girl", "she"),
         ("a boy", "he"), ("my neighbor", "he"), ("the principal", "she")]
# (singular, plural): things people count
THINGS = [(w, w + "s") for w in (
    "apple pen pencil sticker marble card book shell coin stamp bead egg "
    "cookie flower ball rock toy button ribbon balloon cup plate orange "
    "lemon carrot brick nail sock kite boat tile crayon grape muffin "
    "cupcake bottle ticket seed nut pear melon donut sandwich comic block "
    "puzzle leaf feather candle flag bagel banana plum doll robot truck "
    "train car bike shirt hat shoe glove scarf bowl spoon fork napkin "
    "envelope letter postcard magazine notebook eraser marker ruler clip "
    "pin magnet sticker bracelet necklace ring rose tulip daisy lollipop "
    "pretzel cracker chip pancake waffle pie cake biscuit apricot kiwi "
    "coconut pumpkin onion pepper bean pea walnut acorn pebble stone "
    "seashell feather log plank brick bucket towel pillow blanket chair "
    "table lamp candle drum flute guitar song photo drawing painting "
    "video game point goal question email text lap mile step").split()]
IRREGULAR = [("cherry", "cherries"), ("strawberry", "strawberries"),
           ("blueberry", "blueberries"), ("peach", "peaches"),
           ("box", "boxes"), ("sheep", "sheep"), ("fish", "fish"),
           ("puppy", "puppies"), ("kitten", "kittens"), ("mouse", "mice"),
           ("goose", "geese"), ("child", "children"), ("person", "people"),
           ("potato", "potatoes"), ("tomato", "tomatoes"),
           ("glass", "glasses"), ("brush", "brushes"),
           ("sandwich", "sandwiches"), ("candy", "candies"),
           ("butterfly", "butterflies"), ("bunny", "bunnies"),
           ("loaf of bread", "loaves of bread"), ("knife", "knives"),
           ("leaf", "leaves"), ("wolf", "wolves"), ("dish", "dishes"),
           ("watch", "watches"), ("bus", "buses"), ("fox", "foxes")]
THINGS = sorted(set(t for t in THINGS
                    if t[0] not in {s for s, _ in IRREGULAR})) + IRREGULAR
ANIMALS = [("cow", "cows"), ("duck", "ducks"), ("hen", "hens"),
           ("chicken", "chickens"), ("goat", "goats"), ("horse", "horses"),
           ("pig", "pigs"), ("rabbit", "rabbits"), ("bird", "birds"),
           ("frog", "frogs"), ("sheep", "sheep"), ("dog", "dogs"),
           ("cat", "cats"), ("turtle", "turtles"), ("bee", "bees"),
           ("ant", "ants"), ("deer", "deer"), ("owl", "owls"),
           ("pigeon", "pigeons"), ("swan", "swans")]
# containers: (singular, plural)
BOXES = [(w, w + "s") for w in (
    "bag jar basket crate pack tray bucket can carton bowl plate tin sack "
    "drawer album case bottle jug envelope folder cup shelf pot wagon "
    "truck bus car van boat cart tank barrel bin packet tube roll").split()]
BOXES = [(s, "shelves" if s == "shelf" else p) for s, p in BOXES] + [
    ("box", "boxes"), ("bunch", "bunches"), ("pouch", "pouches"),
    ("dish", "dishes"), ("glass", "glasses"), ("batch", "batches")]
PLACES = ("shop store bakery library farm school zoo garden classroom "
          "market cafe museum park pool cinema theater gym hospital "
          "restaurant toy store bookshop kitchen hotel camp stadium "
          "office factory station airport beach").split()
# (unit, what it measures): amounts that are not objects
UNITS = [("dollars", "money"), ("cents", "money"), ("euros", "money"),
         ("km", "distance"), ("miles", "distance"), ("meters", "distance"),
         ("cm", "length"), ("feet", "length"), ("inches", "length"),
         ("kg", "weight"), ("pounds", "weight"), ("grams", "weight"),
         ("liters", "volume"), ("cups of flour", "volume"),
         ("minutes", "time"), ("hours", "time"), ("days", "time"),
         ("pages", "reading"), ("points", "score"), ("laps", "laps"),
         ("steps", "steps")]
PEOPLE = ("brother sister friend teacher cousin neighbor mom dad uncle aunt "
          "grandma grandpa coach classmate boss").split()
KIDS = ("kids children students friends players people girls boys "
        "campers guests workers cousins").split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = ("January February March April May June July August September "
          "October November December").split()
# pairs of times, for "X in the morning and Y in the afternoon"
WHEN2 = [("in the morning", "in the afternoon"), ("yesterday", "today"),
         ("last week", "this week"), ("before lunch", "after lunch"),
         ("on Saturday", "on Sunday"), ("in the first game", "in the second"),
         ("last year", "this year"), ("in the first half",
                                      "in the second half"),
         ("on the way there", "on the way back"), ("at home", "at school"),
         ("in the first round", "in the second round"),
         ("on day one", "on day two")]
# pairs of kinds, for "X red and Y blue"
KINDS2 = [("red", "blue"), ("big", "small"), ("green", "yellow"),
          ("white", "brown"), ("old", "new"), ("black", "white"),
          ("chocolate", "vanilla"), ("long", "short"), ("boy", "girl"),
          ("orange", "purple")]
WORDS = ("zero one two three four five six seven eight nine ten eleven "
         "twelve thirteen fourteen fifteen sixteen seventeen eighteen "
         "nineteen").split()
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy",
        "eighty", "ninety")


# ---- people and numbers --------------------------------------------------------

class Who:
    """Who a problem is about: a name, "I", or a role ("my mom"), with the
    pronouns and verb forms that go with it."""

    def __init__(self, rng, first=0.15):
        r = rng.random()
        if r < first:
            self.name, self.sub, self.obj, self.pos = "I", "I", "me", "my"
            self.first = True
            return
        self.first = False
        if r < 0.72:
            she = rng.random() < 0.5
            self.name = rng.choice(SHE_NAMES if she else HE_NAMES)
        else:
            self.name, p = rng.choice(ROLES)
            she = p == "she"
        self.sub, self.obj, self.pos = (("she", "her", "her") if she
                                        else ("he", "him", "his"))

    def v(self, third, base):
        """The verb for this subject: "has" or (I) "have"."""
        return base if self.first else third

    def Name(self):
        return cap(self.name)

    def Sub(self):
        return cap(self.sub)


def cap(s):
    return s[:1].upper() + s[1:]


def word(n):
    if n < 20:
        return WORDS[n]
    if n < 100:
        t, u = divmod(n, 10)
        return TENS[t] + ("-" + WORDS[u] if u else "")
    return str(n)


def say(rng, n, p=0.25):
    """n as digits, or (below 100) sometimes as words."""
    if n < 100 and rng.random() < (p if n <= 20 else p / 3):
        return word(n)
    return str(n)


def num(rng, lo, hi):
    """A number in [lo, hi], its digit count drawn first (problems._num)."""
    return problems._num(rng, lo, hi)


def top_of(level):
    return problems._limits(level)[0]


def mul_ops(rng, level):
    """(a, b) for a product: one factor 2-12, the other up to the level's
    limit (problems._mul_ops), in either order."""
    a, b = problems._mul_ops(rng, level)
    return (a, b) if rng.random() < 0.5 else (b, a)


class Prob:
    """Steps of a solution and the answer's expression."""

    def __init__(self):
        self.steps = []

    def step(self, a, op, b):
        assert op != "/" or (b and a % b == 0), (a, b)
        r = {"+": a + b, "-": a - b, "*": a * b}[op] if op != "/" \
            else a // b
        assert r >= 0, (a, op, b)
        self.steps.append("%d %s %d = %d." % (a, op, b, r))
        return r


def thing(rng):
    """(singular, plural) of something counted."""
    if rng.random() < 0.2:
        return rng.choice(ANIMALS)
    return rng.choice(THINGS)


def when2(rng):
    return rng.choice(WHEN2)


# ---- families ------------------------------------------------------------------
# Each returns (text, prob, expr, answer, family); text is the whole
# question before surface noise.

def fam_add(rng, level):
    top = top_of(level)
    a, b = num(rng, 1, top), num(rng, 1, top)
    w = Who(rng)
    s, pl = thing(rng)
    A, B = say(rng, a), say(rng, b)
    t1, t2 = when2(rng)
    k1, k2 = rng.choice(KINDS2)
    place = rng.choice(PLACES)
    f = rng.randrange(16)
    if f == 0:
        q = "%s %s %s %s and %s %s more. How many %s %s there?" % (
            w.Name(), w.v("has", "have"), A, pl,
            w.v(rng.choice(["buys", "gets", "finds", "is given"]),
                rng.choice(["buy", "get", "find"])), B, pl,
            rng.choice(["are", "are now"]))
    elif f == 1:
        q = "%s %s %s %s %s and %s %s. How many %s %s %s %s in all?" % (
            w.Name(), rng.choice(["picked", "made", "found", "sold", "saw",
                                  "collected", "counted"]),
            A, pl, t1, B, t2, pl, w.v("did", "did"), w.sub,
            rng.choice(["get", "have", "count"]))
    elif f == 2:
        q = "There are %s %s and %s %s in the %s. How many %s are there?" % (
            A, rng.choice(["boys", "girls"]) if rng.random() < 0.3 else
            "%s %s" % (k1, pl), B, "%s %s" % (k2, pl),
            rng.choice(["room", "box", "class", "yard", "garden", "bag"]),
            pl)
    elif f == 3:
        q = "%s %s %s and %s %s. How many %s %s %s have %s?" % (
            w.Name(), w.v("had", "had"), "%s %s" % (A, pl),
            w.v("then got", "then got"), B, pl, w.v("does", "do"), w.sub,
            rng.choice(["now", "altogether", "in total", "all together"]))
    elif f == 4:
        q = "A %s had %s %s. It got %s more %s. How many %s does the %s " \
            "have now?" % (place, A, pl, B, rng.choice(
                ["this week", "today", "in a delivery", "from a farm", ""]
            ).strip() or "later", pl, place)
    elif f == 5:
        q = "%s %s on %s and %s on %s. How many %s in total?" % (
            A, pl, rng.choice(DAYS), B, rng.choice(DAYS), pl)
        q = "%s %s %s" % (w.Name(), rng.choice(
            ["counted", "saw", "sold", "read", "wrote", "made"]), q)
    elif f == 6:
        q = "%s ate %s %s %s and %s %s. How many %s did %s eat?" % (
            w.Name(), A, pl, t1, B, t2, pl, w.sub)
    elif f == 7:
        q = "%s %s %s. %s more %s %s. How many %s are %s now?" % (
            cap(A), pl, rng.choice(["are on the bus", "are in the pond",
                                    "are in the park", "sit on the fence",
                                    "are at the party", "are in line"]),
            cap(B), rng.choice(["come", "join them", "arrive",
                                "show up"]),
            rng.choice(["", "later"]), pl,
            rng.choice(["there", "in all"]))
        q = q.replace("  ", " ").replace(" .", ".")
    elif f == 8:
        q = "%s %s %s in %s and %s in %s. How many %s did %s %s?" % (
            w.Name(), rng.choice(["saved", "earned", "spent"]), "%s %s" % (
                A, rng.choice(["dollars", "euros"])), rng.choice(MONTHS),
            B, rng.choice(MONTHS), "dollars", w.sub,
            rng.choice(["save", "earn", "spend"]))
        q = q.replace("How many dollars", rng.choice(
            ["How many dollars", "How much money"]))
    elif f == 9:
        u = rng.choice(["km", "miles", "meters"])
        q = "%s %s %s %s %s and %s %s %s. How far did %s %s?" % (
            w.Name(), rng.choice(["drove", "walked", "ran", "rode", "swam"]),
            A, u, t1, B, u, t2, w.sub, rng.choice(["go", "travel",
                                                   "go in total"]))
    elif f == 10:
        q = "%s has %s %s. %s has %s %s. How many %s do they have " \
            "%s?" % (rng.choice(SHE_NAMES), A, pl, rng.choice(HE_NAMES), B,
                     pl, pl, rng.choice(["together", "altogether",
                                         "in all", "combined"]))
    elif f == 11:
        b0 = rng.choice(BOXES)[0]
        q = "%s put %s %s in a %s and then %s more. How many %s are in " \
            "the %s?" % (w.Name(), A, pl, b0, B, pl, b0)
    elif f == 12:
        q = "%s scored %s points %s and %s points %s. What was %s " \
            "total?" % (w.Name(), A, t1, B, t2, w.pos)
    elif f == 13:
        q = "a %s has %s %s and %s %s. how many %s does it have" % (
            rng.choice(["farm", "zoo", "pet shop", "park"]), A,
            rng.choice(ANIMALS)[1], B, rng.choice(ANIMALS)[1],
            rng.choice(["animals", "animals in all"]))
    elif f == 14:
        q = "If %s %s %s and %s %s %s, how many %s %s that?" % (
            w.name if not w.first else "I", w.v("has", "have"), A, w.sub
            if not w.first else "I", w.v("gets", "get"), B, pl,
            rng.choice(["is", "makes"]))
    else:
        u = rng.choice(["cm", "meters", "feet"])
        q = "%s is %s %s long. %s adds %s %s more. How long is it now?" % (
            rng.choice(["A rope", "A ribbon", "A fence", "A road",
                        "A train"]), A, u, w.Name(), B, u)
    p = Prob()
    x = p.step(a, "+", b)
    return q, p, "%d+%d" % (a, b), x, "add"


def fam_sub(rng, level):
    top = top_of(level)
    a = num(rng, 2, top)
    b = num(rng, 1, a)
    w = Who(rng)
    s, pl = thing(rng)
    A, B = say(rng, a), say(rng, b)
    place = rng.choice(PLACES)
    lose = rng.choice(["lost", "ate", "sold", "gave away", "broke", "used",
                       "dropped", "threw away", "gave", "spent", "donated",
                       "traded"])
    f = rng.randrange(15)
    if f == 0:
        q = "%s had %s %s and %s %s of them. How many %s %s %s have " \
            "left?" % (w.Name(), A, pl, lose, B, pl, w.v("does", "do"),
                       w.sub)
    elif f == 1:
        q = "There were %s %s %s. %s %s. How many are %s?" % (
            A, pl, rng.choice(["on the plate", "in the tree", "in the box",
                               "on the shelf", "in the jar", "at the party",
                               "on the bus", "in the pond"]), cap(B),
            rng.choice(["were eaten", "flew away", "fell off", "left",
                        "got taken", "went home", "popped", "broke"]),
            rng.choice(["left", "still there", "there now"]))
    elif f == 2:
        q = "A %s had %s %s and sold %s. How many %s %s?" % (
            place, A, pl, B, pl, rng.choice(["are left", "are still in the "
                                             + place, "remain",
                                             "does it have now"]))
    elif f == 3:
        u = rng.choice(["dollars", "euros"])
        q = "%s %s %s %s and %s %s %s on %s. How much money %s %s " \
            "have left?" % (w.Name(), w.v("has", "have"), A, u,
                            w.v("spends", "spend"), B, u,
                            rng.choice(["a book", "lunch", "a toy", "shoes",
                                        "a gift", "games", "food"]),
                            w.v("does", "do"), w.sub)
    elif f == 4:
        q = "We need %s %s for the %s and we have %s. How many more " \
            "%s do we need?" % (A, pl, rng.choice(["party", "class",
                                                   "trip", "game", "show"]),
                                B, pl)
    elif f == 5:
        q = "%s answered %s questions out of %s. How many questions " \
            "did %s not answer?" % (w.Name(), B, A, w.sub)
    elif f == 6:
        q = "%s people were %s and %s %s. How many %s?" % (
            cap(A), rng.choice(["at the show", "on the train",
                                "in the hall", "waiting in line",
                                "at the beach"]), B,
            rng.choice(["left", "went home", "got off"]),
            rng.choice(["stayed", "are still there", "are left"]))
    elif f == 7:
        q = "%s book has %s pages. %s has read %s pages. How many pages " \
            "%s left to read?" % (cap(w.pos), A, w.Sub(), B,
                                  rng.choice(["are", "does %s have" %
                                              w.sub]))
        if w.first:
            q = "My book has %s pages. I have read %s pages. How many " \
                "pages are left to read?" % (A, B)
    elif f == 8:
        q = "%s minus %s" % (A, B)
        q = rng.choice(["what is %s", "%s = ?", "how much is %s",
                        "%s equals what?", "What's %s?"]) % q
    elif f == 9:
        q = "%s take away %s" % (A, B)
        q = rng.choice(["what is %s?", "%s", "what do you get for %s"]) % q
    elif f == 10:
        verbs = [("broke", "broken"), ("lost", "lost"), ("ate", "eaten"),
                 ("used", "used"), ("sold", "sold")]
        v1, v2 = rng.choice(verbs)
        q = "%s had %s %s. %s %s %s. How many %s are not %s?" % (
            w.Name(), A, pl, w.Sub(), v1, B, pl, v2)
    elif f == 11:
        u = rng.choice(["km", "miles", "meters"])
        q = "A trip is %s %s long. We have gone %s %s. How far is it " \
            "still to go?" % (A, u, B, u)
    elif f == 12:
        q = "what is the difference between %s and %s" % (A, B)
    elif f == 13:
        q = "%s %s %s. %s %s %s of them away. How many %s %s %s " \
            "got?" % (w.Name(), w.v("had", "had"), "%s %s" % (A, pl),
                      w.Sub(), w.v("gave", "gave"), B, pl,
                      w.v("has", "have"), w.sub)
    else:
        q = "%s %s from %s. How many are left?" % (
            rng.choice(["Take", "Subtract", "take"]), B, A)
    p = Prob()
    x = p.step(a, "-", b)
    return q, p, "%d-%d" % (a, b), x, "sub"


def fam_mul(rng, level):
    g, per = mul_ops(rng, level)
    w = Who(rng)
    s, pl = thing(rng)
    bs, bpl = rng.choice(BOXES)
    G, PER = say(rng, g), say(rng, per)
    f = rng.randrange(16)
    a, b = g, per
    if f == 0:
        q = "There are %s %s with %s %s in each %s. How many %s are " \
            "there?" % (G, bpl, PER, pl, bs, pl)
    elif f == 1:
        q = "%s %s costs %s dollars. How much do %s %s cost?" % (
            rng.choice(["One", "A", "Each"]), s, PER, G, pl)
        a, b = per, g
    elif f == 2:
        q = "%s %s %s %s a day. How many %s %s %s %s in %s days?" % (
            w.Name(), w.v(rng.choice(["reads", "makes", "walks", "writes",
                                      "eats", "runs", "sells"]),
                          rng.choice(["read", "make", "walk", "eat"])),
            PER, pl, pl, w.v("does", "do"), w.sub,
            w.v("get through", "get through"), G)
        a, b = per, g
    elif f == 3:
        q = "A %s has %s rows of %s with %s in each row. How many %s " \
            "are there?" % (rng.choice(["garden", "box", "theater",
                                        "field", "tray", "wall"]),
                            G, pl, PER, pl)
    elif f == 4:
        q = "%s %s each %s %s %s. How many %s is that?" % (
            cap(G), rng.choice(KIDS), rng.choice(["have", "bring", "get",
                                                   "eat", "make", "buy"]),
            PER, pl, pl)
    elif f == 5:
        q = "A %s holds %s %s. How many %s are in %s %s?" % (
            bs, PER, pl, pl, G, bpl)
        a, b = per, g
    elif f == 6:
        u = rng.choice(["km", "miles"])
        q = "A %s goes %s %s every hour. How far does it go in %s " \
            "hours?" % (rng.choice(["car", "train", "bus", "truck",
                                    "boat"]), PER, u, G)
        a, b = per, g
    elif f == 7:
        q = "what is %s times %s" % (G, PER)
        q = rng.choice([q, q + "?", "%s x %s = ?" % (g, per),
                        "how much is %s times %s" % (G, PER),
                        "%s * %s" % (g, per),
                        "multiply %s by %s" % (G, PER)])
    elif f == 8:
        q = "%s %s %s %s of %s, %s in each. How many %s did %s %s?" % (
            w.Name(), w.v("buys", "buy"), G, bpl, pl, PER, pl, w.sub,
            "buy")
    elif f == 9:
        q = "%s saves %s dollars every week. How much money does %s " \
            "save in %s weeks?" % (w.Name(), PER, w.sub, G)
        if w.first:
            q = "I save %s dollars every week. How much do I save in %s " \
                "weeks?" % (PER, G)
        a, b = per, g
    elif f == 10:
        q = "Each of the %s %s has %s %s. How many %s are there in " \
            "all?" % (G, bpl, PER, pl, pl)
    elif f == 11:
        q = "%s %s have %s legs each. How many legs is that?" % (
            cap(G), rng.choice(["spiders", "ants", "tables", "chairs",
                                "dogs", "bugs", "stools"]), PER)
    elif f == 12:
        q = "A ticket costs %s dollars. %s friends each buy one. How " \
            "much do they pay?" % (PER, cap(G))
        a, b = per, g
    elif f == 13:
        u = rng.choice(["laps", "miles", "km", "meters"])
        q = "%s %s %s %s, %s times. How many %s is that in all?" % (
            w.Name(), w.v("runs", "run"), PER, u, G, u)
        a, b = per, g
    elif f == 14:
        q = "%s %s %s for %s hours. How many %s does %s make?" % (
            w.Name(), w.v("earns", "earn"), "%s dollars an hour" % PER, G,
            "dollars", w.sub)
        if w.first:
            q = "I earn %s dollars an hour and work %s hours. How much " \
                "do I earn?" % (PER, G)
        a, b = per, g
    else:
        q = "there are %s %s. each one has %s %s. how many %s" % (
            G, bpl, PER, pl, pl)
    if per == 12 and rng.random() < 0.3 and f in (0, 5, 10):
        # a dozen as a word: "5 dozen eggs"
        q = "%s buys %s dozen %s. A dozen is 12. How many %s is that?" % (
            w.Name(), G, pl, pl)
        a, b = g, 12
    p = Prob()
    x = p.step(a, "*", b)
    return q, p, "%d*%d" % (a, b), x, "mul"


def fam_div(rng, level):
    d, qv = problems._mul_ops(rng, level)
    if qv > 80:
        qv = rng.randint(2, 80)
    if rng.random() < 0.4:
        d, qv = qv, d
    if d < 2:
        d = 2
    tot = d * qv
    if tot > 999:
        d, qv = 5, tot // 5 if tot // 5 * 5 <= 999 else 9
        tot = d * qv
    w = Who(rng)
    s, pl = thing(rng)
    bs, bpl = rng.choice(BOXES)
    T, D = say(rng, tot), say(rng, d)
    kids = rng.choice(KIDS)
    f = rng.randrange(15)
    if f == 0:
        q = "%s %s are shared equally among %s %s. How many %s does " \
            "each %s get?" % (cap(T), pl, D, kids, pl, kids.rstrip("s")
                              if kids != "children" else "child")
        if kids == "people":
            q = q.replace("each people", "each person")
    elif f == 1:
        q = "%s %s %s %s into %s of %s. How many %s %s %s fill?" % (
            w.Name(), w.v("puts", "put"), T, pl, bpl, D, bpl,
            w.v("does", "do"), w.sub)
    elif f == 2:
        u = rng.choice(["cm", "meters", "feet", "inches"])
        q = "A %s %s %s long is cut into %s equal pieces. How long is " \
            "each piece?" % (rng.choice(["rope", "ribbon", "board",
                                         "string", "pipe"]), T, u, D)
    elif f == 3:
        q = "%s %s %s %s on %s %s, the same number on each. How many " \
            "%s go on each %s?" % (w.Name(), w.v("puts", "put"), T, pl, D,
                                   bpl, pl, bs)
    elif f == 4:
        q = "%s dollars is split evenly between %s %s. How much does " \
            "each get?" % (T, D, kids)
    elif f == 5:
        q = "%s %s make groups of %s. How many groups are there?" % (
            cap(T), kids, D)
    elif f == 6:
        q = "%s %s are packed %s to a %s. How many %s are needed?" % (
            cap(T), pl, D, bs, bpl)
    elif f == 7:
        q = rng.choice(["what is %s divided by %s",
                        "%s / %s = ?", "how much is %s divided by %s?",
                        "divide %s by %s", "What is %s split into %s "
                        "equal parts?", "%s shared by %s is what?"]) % (
            T if rng.random() < 0.5 else tot, D)
    elif f == 8:
        q = "%s %s %s %s between %s %s so they get the same. How many " \
            "does each one get?" % (w.Name(), w.v("splits", "split"), T,
                                    pl, D, kids)
    elif f == 9:
        q = "%s days is how many weeks? There are %s days in a week." % (
            tot if d == 7 else T, D) if d == 7 else \
            "There are %s %s in %s equal rows. How many %s are in each " \
            "row?" % (T, pl, D, pl)
    elif f == 10:
        q = "How many %s-dollar %s can you buy with %s dollars?" % (
            D, pl, T)
    elif f == 11:
        q = "%s %s share %s %s equally. How many %s does each one " \
            "get?" % (cap(D), kids, T, pl, pl)
    elif f == 12:
        q = "%s %s %s %s. %s %s in each %s. How many %s %s %s " \
            "fill?" % (w.Name(), w.v("has", "have"), T, pl, cap(D), pl, bs,
                       bpl, w.v("can", "can"), w.sub)
    elif f == 13:
        q = "A car goes %s km in %s hours at the same speed. How far " \
            "does it go in one hour?" % (T, D)
    else:
        q = "%s %s %s %s in %s days, the same each day. How many %s a " \
            "day is that?" % (w.Name(), w.v(rng.choice(
                ["read", "made", "sold", "ate"]), "read"), T, pl, D, pl)
    p = Prob()
    x = p.step(tot, "/", d)
    return q, p, "%d/%d" % (tot, d), x, "div"


def fam_compare(rng, level):
    top = top_of(level)
    n1 = rng.choice(SHE_NAMES + HE_NAMES)
    n2 = rng.choice([n for n in SHE_NAMES + HE_NAMES if n != n1])
    s, pl = thing(rng)
    p = Prob()
    f = rng.randrange(14)
    if f in (0, 1, 2, 3):
        a = num(rng, 3, top)
        b = num(rng, 1, a - 1)
        A, B = say(rng, a), say(rng, b)
        q = [
            "%s has %s %s and %s has %s %s. How many more %s does %s "
            "have?" % (n1, A, pl, n2, B, pl, pl, n1),
            "%s has %s %s. %s has %s. How many fewer %s does %s have "
            "than %s?" % (n1, A, pl, n2, B, pl, n2, n1),
            "A %s %s is %s %s long and a %s one is %s %s. How much "
            "longer is the %s one?" % (
                "red", rng.choice(["rope", "ribbon", "snake", "pencil",
                                   "road"]), A, "cm", "blue", B, "cm",
                "red"),
            "%s scored %s points and %s scored %s. By how many points "
            "did %s win?" % (n1, A, n2, B, n1),
        ][f]
        x = p.step(a, "-", b)
        expr = "%d-%d" % (a, b)
    elif f in (4, 5):
        a = num(rng, 1, top)
        b = num(rng, 1, top)
        A, B = say(rng, a), say(rng, b)
        if f == 4:
            rel = rng.choice(["brother", "sister", "cousin", "aunt"])
            a, b = rng.randint(1, 70), rng.randint(1, 30)
            A, B = say(rng, a), say(rng, b)
            q = "%s is %s years old. %s %s is %s years older. How old is " \
                "the %s?" % (n1, A, n1 + "'s", rel, B, rel)
        else:
            q = "%s has %s %s. %s has %s more %s than %s. How many %s " \
                "does %s have?" % (n1, A, pl, n2, B, pl, n1, pl, n2)
        x = p.step(a, "+", b)
        expr = "%d+%d" % (a, b)
    elif f in (6, 7):
        a = num(rng, 3, top)
        b = num(rng, 1, a - 1)
        A, B = say(rng, a), say(rng, b)
        if f == 6:
            rel = rng.choice(["son", "daughter", "little brother",
                              "little sister"])
            a = rng.randint(20, 90)
            b = rng.randint(1, min(a - 1, 45))
            A, B = say(rng, a), say(rng, b)
            q = "%s is %s years old. %s %s is %s years younger. How old " \
                "is %s %s?" % (n1, A, "Their", rel, B, "the", rel)
        else:
            q = "%s has %s %s. %s has %s fewer %s than %s. How many %s " \
                "does %s have?" % (n1, A, pl, n2, B, pl, n1, pl, n2)
        x = p.step(a, "-", b)
        expr = "%d-%d" % (a, b)
    elif f in (8, 9):
        k, a = problems._mul_ops(rng, level)
        A = say(rng, a)
        kw = say(rng, k, 0.5)
        if k == 2 and rng.random() < 0.5:
            mult = rng.choice(["twice as many", "double that",
                               "twice as many %s as %s" % (pl, n1)])
        else:
            mult = "%s times as many" % kw
        q = "%s has %s %s. %s has %s. How many %s does %s have?" % (
            n1, A, pl, n2, mult, pl, n2)
        if f == 9:
            u = rng.choice(["kg", "pounds"])
            big = rng.choice(["pony", "horse", "cow", "bear"])
            q = "A %s weighs %s %s. A %s weighs %s as much. How much " \
                "does the %s weigh?" % (
                    rng.choice(["dog", "cat", "puppy", "lamb"]), A, u, big,
                    "twice" if k == 2 else "%s times" % kw, big)
        x = p.step(a, "*", k)
        expr = "%d*%d" % (a, k)
    elif f in (10, 11):
        k, r = problems._mul_ops(rng, level)
        a = k * r
        if a > 999:
            k, r, a = 2, a // 2 // 2, (a // 2 // 2) * 2
        A = say(rng, a)
        if f == 10 and k == 2:
            q = "%s has %s %s. %s has half as many. How many %s does %s " \
                "have?" % (n1, A, pl, n2, pl, n2)
        else:
            q = "%s has %s %s, which is %s times as many as %s has. How " \
                "many %s does %s have?" % (n1, A, pl, say(rng, k, 0.5), n2,
                                           pl, n2)
        x = p.step(a, "/", k)
        expr = "%d/%d" % (a, k)
    else:
        a = num(rng, 3, top)
        b = num(rng, 1, a - 1)
        q = rng.choice([
            "How many more is %s than %s?",
            "how much bigger is %s than %s",
            "What is the difference between %s and %s?"]) % (a, b)
        if f == 12:
            q = "The %s team has %s fans and the %s team has %s. How " \
                "many more fans does the %s team have?" % (
                    "red", a, "green", b, "red")
        x = p.step(a, "-", b)
        expr = "%d-%d" % (a, b)
    return q, p, expr, x, "compare"


def fam_bare(rng, level):
    """Arithmetic asked without a story: "what is 25 times 25"."""
    top = top_of(level)
    op = rng.choice("+-*/")
    p = Prob()
    if op == "+":
        a, b = num(rng, 0, top), num(rng, 0, top)
        words = ["plus", "and", "+", "added to"]
    elif op == "-":
        a = num(rng, 1, top)
        b = num(rng, 0, a)
        words = ["minus", "-", "take away", "less"]
    elif op == "*":
        a, b = mul_ops(rng, level)
        words = ["times", "x", "*", "multiplied by"]
    else:
        b, qv = mul_ops(rng, level)
        if b == 0:
            b = 1
        a = b * qv
        words = ["divided by", "/", "over", "split into groups of"]
    wd = rng.choice(words)
    A, B = say(rng, a, 0.15), say(rng, b, 0.15)
    if op == "+" and wd == "added to":
        e = "%s added to %s" % (B, A)
    else:
        e = "%s %s %s" % (A, wd, B)
    q = rng.choice(["What is %s?", "what is %s", "what's %s?",
                    "How much is %s?", "%s = ?", "%s", "%s equals what?",
                    "Calculate %s.", "Can you tell me what %s is?",
                    "solve %s", "%s?"]) % e
    if op == "+" and rng.random() < 0.25:
        q = rng.choice(["What do you get if you add %s and %s?",
                        "What is the sum of %s and %s?",
                        "add %s and %s"]) % (A, B)
    if op == "*" and rng.random() < 0.2:
        q = "What is the product of %s and %s?" % (A, B)
    x = p.step(a, op, b)
    return q, p, "%d%s%d" % (a, op, b), x, "bare"


def fam_multi(rng, level):
    """Two or three steps in situations people write about."""
    top = top_of(level)
    w = Who(rng)
    s, pl = thing(rng)
    bs, bpl = rng.choice(BOXES)
    p = Prob()
    f = rng.randrange(14)
    if f == 0:          # groups, then some more or some fewer
        g, per = mul_ops(rng, level)
        y = p.step(g, "*", per)
        if rng.random() < 0.5:
            c = num(rng, 1, top)
            q = "%s %s %s %s of %s with %s in each and %s %s more. How " \
                "many %s %s %s have?" % (
                    w.Name(), w.v("buys", "buy"), say(rng, g), bpl, pl,
                    say(rng, per), w.v("finds", "find"), say(rng, c), pl,
                    w.v("does", "do"), w.sub)
            x = p.step(y, "+", c)
            expr = "%d*%d+%d" % (g, per, c)
        else:
            c = num(rng, 1, y)
            q = "There are %s %s with %s %s in each. %s %s are %s. How " \
                "many %s are %s?" % (say(rng, g), bpl, say(rng, per), pl,
                                     cap(say(rng, c)), pl,
                                     rng.choice(["broken", "eaten",
                                                 "rotten", "lost",
                                                 "given away"]),
                                     pl, rng.choice(["left", "good",
                                                     "still there"]))
            x = p.step(y, "-", c)
            expr = "%d*%d-%d" % (g, per, c)
    elif f == 1:        # spend twice
        a = num(rng, 20, top)
        b = num(rng, 1, a - 1)
        c = num(rng, 1, a - b)
        q = "%s %s %s dollars. %s %s %s on %s and %s on %s. How much " \
            "money %s %s have left?" % (
                w.Name(), w.v("has", "have"), a, w.Sub(),
                w.v("spends", "spend"), b,
                rng.choice(["lunch", "a book", "a ticket", "a toy"]), c,
                rng.choice(["a drink", "a movie", "a pen", "candy"]),
                w.v("does", "do"), w.sub)
        y = p.step(a, "-", b)
        x = p.step(y, "-", c)
        expr = "%d-%d-%d" % (a, b, c)
    elif f == 2:        # two groups join, then share
        k, each = problems._mul_ops(rng, level)
        tot = k * each
        if tot > 999 or tot < 2:
            k, each, tot = 4, 6, 24
        a = rng.randint(1, tot - 1)
        b = tot - a
        q = "%s boys and %s girls make %s equal teams. How many kids are " \
            "on each team?" % (say(rng, a), say(rng, b), say(rng, k))
        y = p.step(a, "+", b)
        x = p.step(y, "/", k)
        expr = "(%d+%d)/%d" % (a, b, k)
    elif f == 3:        # two kinds of things bought at prices
        n1, c1 = rng.randint(2, 9), rng.randint(2, 30)
        n2, c2 = rng.randint(2, 9), rng.randint(2, 30)
        i1, i2 = rng.sample(["shirts", "hats", "books", "pens", "toys",
                             "cakes", "tickets", "plants", "balls"], 2)
        q = "%s %s %d %s for %d dollars each and %d %s for %d dollars " \
            "each. How much did %s spend?" % (
                w.Name(), "bought", n1, i1, c1, n2, i2, c2, w.sub)
        y1 = p.step(n1, "*", c1)
        y2 = p.step(n2, "*", c2)
        x = p.step(y1, "+", y2)
        expr = "%d*%d+%d*%d" % (n1, c1, n2, c2)
    elif f == 4:        # gives the same to each of k friends
        k = rng.randint(2, 9)
        each = rng.randint(1, max(1, top // (2 * k)))
        a = num(rng, k * each, top) if k * each <= top else k * each
        q = "%s had %s %s. %s gave %s to each of %s %s friends. How " \
            "many %s %s %s have left?" % (
                w.Name(), a, pl, w.Sub(), say(rng, each), w.pos,
                say(rng, k), pl, w.v("does", "do"), w.sub)
        y = p.step(k, "*", each)
        x = p.step(a, "-", y)
        expr = "%d-%d*%d" % (a, k, each)
    elif f == 5:        # share, then some of the shares together
        k, each = problems._mul_ops(rng, level)
        if k < 3:
            k = 3
        tot = k * each
        if tot > 999:
            each = 999 // k
            tot = k * each
        m = rng.randint(2, k - 1)
        q = "%s %s are shared equally by %s %s. How many %s do %s of " \
            "them have together?" % (cap(say(rng, tot)), pl, say(rng, k),
                                     rng.choice(KIDS), pl, say(rng, m))
        y = p.step(tot, "/", k)
        x = p.step(y, "*", m)
        expr = "%d/%d*%d" % (tot, k, m)
    elif f == 6:        # each item has some broken/extra
        per = rng.randint(3, 20)
        bad = rng.randint(1, per - 1)
        g = rng.randint(2, 9)
        q = "Each %s has %s %s but %s in each %s are %s. How many good " \
            "%s are in %s %s?" % (bs, say(rng, per), pl, say(rng, bad), bs,
                                  rng.choice(["broken", "bad", "cracked"]),
                                  pl, say(rng, g), bpl)
        y = p.step(per, "-", bad)
        x = p.step(y, "*", g)
        expr = "(%d-%d)*%d" % (per, bad, g)
    elif f == 7:        # gain, lose, gain
        a = num(rng, 5, top)
        b = num(rng, 1, top)
        c = num(rng, 1, a + b)
        q = "%s had %s %s. %s got %s more, then %s %s. How many %s %s " \
            "%s have now?" % (w.Name(), say(rng, a), pl, w.Sub(),
                              say(rng, b), rng.choice(["lost", "sold",
                                                       "gave away", "used"]),
                              say(rng, c), pl, w.v("does", "do"), w.sub)
        y = p.step(a, "+", b)
        x = p.step(y, "-", c)
        expr = "%d+%d-%d" % (a, b, c)
    elif f == 8:        # twice as many, together
        a = num(rng, 1, min(top, 499))
        n2 = rng.choice(SHE_NAMES + HE_NAMES)
        q = "%s has %s %s. %s has twice as many. How many %s do they " \
            "have together?" % (w.Name() if not w.first else "Ali",
                                say(rng, a), pl, n2, pl)
        y = p.step(2, "*", a)
        x = p.step(a, "+", y)
        expr = "%d+2*%d" % (a, a)
    elif f == 9:        # a tank used on two days
        a = num(rng, 20, top)
        b = num(rng, 1, a - 1)
        c = num(rng, 1, a - b)
        u = rng.choice(["liters", "gallons", "kg", "cups"])
        q = "A %s had %s %s. %s %s were used on %s and %s on %s. How " \
            "many %s are left?" % (
                rng.choice(["tank", "barrel", "bag", "jar", "pot"]), a, u,
                cap(say(rng, b)), u, DAYS[0], c, DAYS[1], u)
        y = p.step(a, "-", b)
        x = p.step(y, "-", c)
        expr = "%d-%d-%d" % (a, b, c)
    elif f == 10:       # rows less some removed
        g, per = mul_ops(rng, level)
        y = g * per
        c = num(rng, 1, y)
        q = "There are %s rows of chairs with %s chairs in each row. %s " \
            "chairs are taken away. How many chairs are left?" % (
                say(rng, g), say(rng, per), cap(say(rng, c)))
        y = p.step(g, "*", per)
        x = p.step(y, "-", c)
        expr = "%d*%d-%d" % (g, per, c)
    elif f == 11:       # two amounts, then share
        k = rng.randint(2, 9)
        each = rng.randint(2, max(2, min(99, 999 // k)))
        tot = k * each
        a = rng.randint(1, tot - 1)
        q = "%s has %s %s %s and %s %s %s. %s makes %s %s with the " \
            "same number of %s in each. How many %s are in each %s?" % (
                w.Name() if not w.first else "Mia", say(rng, a), "blue", pl,
                say(rng, tot - a), "white", pl,
                "She" if w.first else w.Sub(), say(rng, k), bpl, pl,
                pl, bs)
        y = p.step(a, "+", tot - a)
        x = p.step(y, "/", k)
        expr = "(%d+%d)/%d" % (a, tot - a, k)
    elif f == 12:       # three days added
        xs = [num(rng, 1, top // 2 + 1) for _ in range(3)]
        q = "%s %s %s %s on %s, %s on %s and %s on %s. How many %s " \
            "%s %s %s?" % (
                w.Name(), rng.choice(["read", "sold", "made", "picked"]),
                say(rng, xs[0]), pl, DAYS[0], say(rng, xs[1]), DAYS[1],
                say(rng, xs[2]), DAYS[2], pl, "did", w.sub,
                rng.choice(["read", "sell", "make", "pick"]))
        y = p.step(xs[0], "+", xs[1])
        x = p.step(y, "+", xs[2])
        expr = "%d+%d+%d" % tuple(xs)
    else:               # earn, then spend
        per, g = rng.randint(2, 25), rng.randint(2, 12)
        c = num(rng, 1, per * g)
        q = "%s %s %d dollars a day for %d days and then %s %s dollars " \
            "on a %s. How much money %s %s have?" % (
                w.Name(), w.v("earns", "earn"), per, g,
                w.v("spends", "spend"), say(rng, c),
                rng.choice(["game", "bike", "gift", "jacket"]),
                w.v("does", "do"), w.sub)
        y = p.step(per, "*", g)
        x = p.step(y, "-", c)
        expr = "%d*%d-%d" % (per, g, c)
    return q, p, expr, x, "multi"


# sentences with a number that plays no part
def distractor(rng):
    n = rng.randint(2, 60)
    w = Who(rng, first=0.0)
    return rng.choice([
        "%s is %d years old." % (w.Name(), n),
        "It is %d degrees %s." % (n, rng.choice(["outside", "today"])),
        "The %s opens at %d." % (rng.choice(PLACES), rng.randint(7, 11)),
        "%s has %d %s." % (w.Name(), rng.randint(2, 9),
                           rng.choice(["cousins", "cats", "brothers",
                                       "sisters", "goldfish"])),
        "The bus number is %d." % n,
        "%s lives at house number %d." % (w.Name(), n),
        "There are %d days until the holiday." % n,
        "%s is in grade %d." % (w.Name(), rng.randint(1, 8)),
        "It took %d minutes." % n,
        "The %s has %d windows." % (rng.choice(["house", "school",
                                                "bus", "shop"]), n),
        "There are 7 days in a week.",
        "%s's phone is %d percent charged." % (w.Name(), rng.randint(5, 99)),
        "The room is on floor %d." % rng.randint(2, 20),
        "It rained for %d days." % rng.randint(2, 9)])


FAMILIES = [(fam_add, 3), (fam_sub, 3), (fam_mul, 3), (fam_div, 2),
            (fam_compare, 3), (fam_bare, 1), (fam_multi, 4)]

PREFIXES = ["Q: ", "Question: ", "please help: ", "help!! ", "Problem: ",
            "Can you solve this? ", "quick question: ", "Math: ",
            "Please answer: ", "hi, ", "Word problem: "]
SUFFIXES = [" thanks", " Thanks!", " Show your work.", " pls",
            " Explain.", " ??", "?"]


def noise(rng, q):
    """How a question is typed: lower case, no final mark, a prefix or a
    suffix (each sometimes)."""
    r = rng.random()
    if r < 0.2:
        q = q.lower()
    elif r < 0.25:
        q = q[0].lower() + q[1:]
    if rng.random() < 0.15:
        q = q.rstrip("?.")
    if rng.random() < 0.1:
        q = rng.choice(PREFIXES) + q
    if rng.random() < 0.06:
        q = q + rng.choice(SUFFIXES)
    if rng.random() < 0.03:
        q = q.replace(". ", ".  ", 1)
    return q


def make(rng, level=1.0):
    """One problem: dict(question, solution, answer, family, expr)."""
    tot = sum(wt for _, wt in FAMILIES)
    while True:
        r, acc = rng.random() * tot, 0
        for f, wt in FAMILIES:
            acc += wt
            if r < acc:
                break
        q, p, expr, x, fam = f(rng, level)
        if 0 <= x <= 9999 and p.steps:
            break
    if fam != "bare" and rng.random() < 0.2:
        sents = q.split(". ")
        i = rng.randrange(len(sents))
        sents.insert(i, distractor(rng).rstrip("."))
        q = ". ".join(sents)
    q = noise(rng, q)
    sol = "\n".join(p.steps + ["The answer is %d." % x])
    return {"question": q, "solution": sol, "answer": str(x),
            "family": fam, "expr": expr}


def make_excluding(rng, level, exclude):
    return problems.draw_excluding(make, rng, level, exclude)


def main():
    problems.sample_cli(make, __doc__)


if __name__ == "__main__":
    main()

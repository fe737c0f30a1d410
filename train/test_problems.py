"""Tests of the problem generator, the committed held-out set and the
tokenizer files (no PyTorch needed): run by tests/train_data.sh.

    /usr/bin/python3 train/test_problems.py
Prints one line per case and "train_data: N passed, N failed".
"""
import json
import os
import random
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import handwritten  # noqa: E402
import phrasing  # noqa: E402
import plain  # noqa: E402
import problems  # noqa: E402

TEST = os.path.join(HERE, "data", "test.jsonl")
HAND = os.path.join(HERE, "data", "handwritten.jsonl")
SHOTS = os.path.join(HERE, "data", "shots3.jsonl")
DEV = os.path.join(HERE, "data", "dev.jsonl")
TRAIN_SEED = 7      # train.py --seed default: the training stream
TEST_SEED = 1001    # the committed held-out set (see models/README.md)
STEP = re.compile(r"^(\d+) ([-+*/]) (\d+) = (\d+)\.$")


def nums(q):
    return [int(x) for x in re.findall(r"\d+", q)]


# The answer of each family recomputed from the numbers in the question, in
# the order they appear: independent of the code that writes solutions.
FORMULA = {
    "add": lambda n: n[0] + n[1],
    "sub": lambda n: n[0] - n[1],
    "mul": lambda n: n[0] * n[1],
    "div": lambda n: n[0] // n[1],
    "give_buy": lambda n: n[0] - n[1] + n[2] * n[3],
    "buy_sell": lambda n: n[0] * n[1] - n[2],
    "two_adds": lambda n: n[0] + n[1] - n[2],
    "share": lambda n: (n[0] - n[1]) // n[2],
    "two_groups": lambda n: n[0] * n[1] + n[2] * n[3],
    "three_steps": lambda n: n[0] + n[1] - n[2] + n[3],
}


def check_problem(p):
    """Raises AssertionError unless p is a well-formed problem."""
    n = nums(p["question"])
    fam = p["family"]
    want = FORMULA[fam](n)
    assert str(want) == p["answer"], (p, want)
    if fam in ("div", "share"):
        num = n[0] if fam == "div" else n[0] - n[1]
        assert num % n[-1] == 0, ("not an even division", p)
    assert all(x < 1000 for x in n), ("operand over 3 digits", p)
    if "solution" in p:
        lines = p["solution"].split("\n")
        assert lines[-1] == "The answer is %s." % p["answer"], p
        for ln in lines[:-1]:
            m = STEP.match(ln)
            assert m, ("not a step line", ln)
            a, op, b, r = int(m[1]), m[2], int(m[3]), int(m[4])
            exact = {"+": a + b, "-": a - b, "*": a * b}.get(op)
            if op == "/":
                assert b and a % b == 0, ln
                exact = a // b
            assert exact == r, ("wrong arithmetic", ln)
        last = STEP.match(lines[-2])
        assert last and last[4] == p["answer"], p


def case_solutions_and_answers():
    rng = random.Random(12345)
    for i in range(6000):
        check_problem(problems.make_excluding(rng, (i % 11) / 10, set()))


def case_invalid_draws_are_caught():
    """valid() rejects a question with a 4-digit number (some raw `share`
    draws have one); make_excluding never returns such a problem."""
    rng = random.Random(12345)
    raw = [problems.make(rng, 1.0) for _ in range(20000)]
    bad = [p for p in raw if not problems.valid(p)]
    assert bad and all(p["family"] == "share" for p in bad), len(bad)


def case_every_family_appears():
    rng = random.Random(5)
    seen = {problems.make(rng)["family"] for _ in range(3000)}
    assert seen == set(FORMULA), seen


def case_test_set_committed_matches_generator():
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as f:
        sys.argv = ["problems.py", "--seed", str(TEST_SEED), "--count", "600",
                    "--out", f.name]
        problems.main()
        assert open(TEST).read() == f.read(), "regenerated set differs"


def case_test_set_wellformed():
    rows = [json.loads(l) for l in open(TEST)]
    assert len(rows) >= 500, len(rows)
    assert len({r["question"] for r in rows}) == len(rows), "duplicates"
    for r in rows:
        check_problem(r)


def case_train_test_disjoint():
    """The training stream (problems.make_excluding with the held-out
    questions, as train.py draws it) never yields a test question, though
    plain draws do hit some (small numbers recur)."""
    test = {json.loads(l)["question"] for l in open(TEST)}
    rng = random.Random(TRAIN_SEED)
    plain = sum(problems.make(rng, 1.0)["question"] in test
                for _ in range(100000))
    rng = random.Random(TRAIN_SEED)
    for _ in range(100000):
        assert problems.make_excluding(rng, 1.0, test)["question"] not in test
    print("       (plain draws hitting the test set: %d of 100000)" % plain)


def case_tokenizer_digits_single():
    tok = bpe.BPE.load(os.path.join(HERE, "..", "models", "arith-tok.json"))
    for t in tok.tokens:
        if any(c.isdigit() for c in t):
            assert len(t) == 1, ("a merged token holds a digit", t)
    for d in "0123456789":
        assert tok.encode(d) == [tok.id[d]]


def case_tokenizer_roundtrip_test_set():
    tok = bpe.BPE.load(os.path.join(HERE, "..", "models", "arith-tok.json"))
    for l in open(TEST):
        q = json.loads(l)["question"]
        assert tok.decode(tok.encode(q)) == q, q


def case_model_checksum():
    """models/arith.gguf is the file its .sha256 names."""
    import hashlib
    d = os.path.join(HERE, "..", "models")
    want = open(os.path.join(d, "arith.gguf.sha256")).read().split()[0]
    h = hashlib.sha256(open(os.path.join(d, "arith.gguf"), "rb").read())
    assert h.hexdigest() == want, (h.hexdigest(), want)


def check_steps(question, solution, answer):
    """Each step's arithmetic is exact, each operand is a number the
    question states (digits or a word) or an earlier step's result, and
    the last line gives the last result."""
    said = handwritten.numbers_said(question)
    lines = solution.split("\n")
    assert lines[-1] == "The answer is %s." % answer, (lines[-1], answer)
    have = set(said)
    for ln in lines[:-1]:
        m = STEP.match(ln)
        assert m, ("not a step line", ln)
        a, op, b, r = int(m[1]), m[2], int(m[3]), int(m[4])
        assert a in have and b in have, ("operand not in question", ln,
                                         question)
        if op == "/":
            assert b and a % b == 0, ln
        assert {"+": a + b, "-": a - b, "*": a * b,
                "/": a // b if b else None}[op] == r, ("arithmetic", ln)
        have.add(r)
    assert STEP.match(lines[-2])[4] == answer, solution


def case_phrasing_answers():
    """phrasing.py: the answer is its expression's value, the solution
    is sound step by step, no number in a question has over 3 digits."""
    rng = random.Random(4242)
    for i in range(6000):
        p = phrasing.make_excluding(rng, (i % 11) / 10, set())
        assert str(handwritten.evaluate(p["expr"])) == p["answer"], p
        check_steps(p["question"], p["solution"], p["answer"])
        assert all(len(x) <= 3 for x in re.findall(r"[0-9]+",
                                                   p["question"])), p


def case_phrasing_variety():
    """Many distinct phrasings: every family, number words, distractors,
    first person, lower case; few repeats of a question's wording once
    its numbers are masked."""
    rng = random.Random(77)
    ps = [phrasing.make(rng, 1.0) for _ in range(5000)]
    fams = {p["family"] for p in ps}
    assert fams >= {"change1", "change2", "change3", "groups", "groups2",
                    "share", "share2", "compare", "total"}, fams
    qs = [p["question"] for p in ps]
    assert any(re.search(r"\b(two|five|seven|twelve)\b", q) for q in qs)
    assert any("years old" in q or "degrees" in q for q in qs)
    assert any(q.startswith("I ") for q in qs)
    assert any(q == q.lower() for q in qs)
    frames = {re.sub(r"[0-9]+", "#", q) for q in qs}
    assert len(frames) > 3000, len(frames)


def case_plain_answers():
    """plain.py: the answer is its expression's value, the solution is
    sound step by step (operands stated in the question, in digits or
    words, or earlier results), no number in a question has over 3
    digits."""
    rng = random.Random(4343)
    for i in range(6000):
        p = plain.make_excluding(rng, (i % 11) / 10, set())
        assert str(handwritten.evaluate(p["expr"])) == p["answer"], p
        check_steps(p["question"], p["solution"], p["answer"])
        assert all(len(x) <= 3 for x in re.findall(r"[0-9]+",
                                                   p["question"])), p


def case_plain_variety():
    """plain.py covers how people type: every family, bare arithmetic,
    prefixes, lower case, number words, distractors, many wordings."""
    rng = random.Random(78)
    ps = [plain.make(rng, 1.0) for _ in range(5000)]
    fams = {p["family"] for p in ps}
    assert fams == {"add", "sub", "mul", "div", "compare", "bare",
                    "multi"}, fams
    qs = [p["question"] for p in ps]
    assert any(q.startswith(("Q: ", "please help")) for q in qs)
    assert any(q == q.lower() for q in qs)
    assert any(re.search(r"\b(twice|half|dozen)\b", q) for q in qs)
    assert any(re.search(r"\b(two|five|seven|twelve)\b", q) for q in qs)
    assert any("years old" in q or "degrees" in q for q in qs)
    frames = {re.sub(r"[0-9]+", "#", q) for q in qs}
    assert len(frames) > 3500, len(frames)


def case_dev_set():
    """dev.jsonl (issue 34) is what dev.txt gives, 100+ distinct
    questions, none of them in the held-out sets."""
    rows = handwritten.load(os.path.join(HERE, "data", "dev.txt"))
    assert handwritten.render(rows) == open(DEV).read(), \
        "dev.jsonl is stale: run train/handwritten.py --set dev"
    qs = {r[2] for r in rows}
    assert len(qs) == len(rows) >= 100, len(rows)
    held = set()
    for path in (TEST, HAND, SHOTS):
        held |= {json.loads(l)["question"] for l in open(path)}
    assert not qs & held, qs & held


def case_handwritten_set():
    """handwritten.jsonl is what handwritten.txt gives (each answer
    recomputed from its expression), 200+ distinct questions."""
    assert handwritten.render(handwritten.load()) == open(HAND).read(), \
        "handwritten.jsonl is stale: run train/handwritten.py"
    rows = [json.loads(l) for l in open(HAND)]
    assert len(rows) >= 200, len(rows)
    assert len({r["question"] for r in rows}) == len(rows), "duplicates"
    for r in rows:
        assert all(len(x) <= 3 for x in re.findall(r"[0-9]+",
                                                   r["question"])), r


def case_handwritten_catches_mistakes():
    """The checker rejects a wrong expression and a fraction."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write("add|17+24|A farmer has 17 sheep and buys 23 more.\n")
        f.flush()
        try:
            handwritten.load(f.name)
            raise AssertionError("24 is not in the question, yet loaded")
        except ValueError as e:
            assert "24" in str(e), e
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write("div|7/2|Share 7 pears between 2 kids.\n")
        f.flush()
        try:
            handwritten.load(f.name)
            raise AssertionError("7/2 loaded")
        except ValueError as e:
            assert "whole" in str(e), e


def case_shots_file_wellformed():
    rows = [json.loads(l) for l in open(SHOTS)]
    assert len(rows) == 3, len(rows)
    for r in rows:
        ans = r["solution"].split("\n")[-1][len("The answer is "):-1]
        check_steps(r["question"], r["solution"], ans)


def case_training_never_sees_held_out():
    """Both generators, drawn as train.py draws them (make_excluding with
    every held-out question), never give a held-out or shot question."""
    held = set()
    for path in (TEST, HAND, SHOTS, DEV):
        held |= {json.loads(l)["question"] for l in open(path)}
    rng = random.Random(TRAIN_SEED)
    for i in range(30000):
        lv = (i % 11) / 10
        for gen in (phrasing, problems, plain):
            assert gen.make_excluding(rng, lv, held)["question"] \
                not in held
    # the exclusion is what keeps them apart: a generated question that
    # equals a hand-written one would be skipped, as this one is
    q = json.loads(open(HAND).readline())["question"]

    fake = {"question": q, "solution": "1 + 1 = 2.\nThe answer is 2.",
            "answer": "2", "family": "x", "expr": "1+1"}
    real = phrasing.make
    calls = []

    def make(rng, level=1.0):
        calls.append(1)
        return fake if len(calls) == 1 else real(rng, level)
    phrasing.make = make
    try:
        got = phrasing.make_excluding(random.Random(1), 1.0, held)
    finally:
        phrasing.make = real
    assert got["question"] != q and len(calls) == 2, calls


def main():
    cases = [(k, v) for k, v in globals().items() if k.startswith("case_")]
    passed = failed = 0
    for name, fn in cases:
        try:
            fn()
            print("[ OK ] %s" % name)
            passed += 1
        except Exception as e:  # report every case, then the total
            print("[FAIL] %s: %r" % (name, e))
            failed += 1
    print("train_data: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

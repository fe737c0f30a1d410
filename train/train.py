"""Trains quorum's arithmetic model: a small qwen2-architecture transformer
that solves the word problems of problems.py step by step, then writes it
as a GGUF file quorum and llama.cpp load.

    /usr/bin/python3 train/train.py --out models/arith [--steps N | --minutes M]
        [--resume] [--device cpu|cuda]

The training stream mixes problems.py's templates with phrasing.py's
composed phrasings, and shows zero to four worked examples before the
question as quorum's `--shots` does. A run writes PREFIX-ckpt.pt every few
minutes (weights, optimizer, step, random states, schedule position);
--resume continues from it, so a long CPU run can be stopped and started
again. --device cuda runs the same recipe on an NVIDIA GPU (bf16 autocast;
the weights and the exported GGUF stay float32/F16 as on the CPU).

The forward pass here is the one quorum runs for `qwen2` (RMSNorm, rotary
embeddings in NEOX order, QKV bias, SwiGLU, tied output), so the exported
weights mean the same thing there. Fixed seeds; with --steps the run is
reproducible on one machine (thread scheduling aside).
"""
import argparse
import contextlib
import json
import math
import multiprocessing as mp
import os
import random
import sys
import time


def tuned_environment():
    """What PyTorch 1.13 from Debian trains fastest with on these CPUs,
    measured (models/README.md, "A fast CPU trainer"): glibc's malloc
    keeping freed memory instead of returning it to the kernel (every step
    frees and re-allocates the same activations; blocks over 32 MiB, such
    as the attention scores, would otherwise be mmap'd and unmapped each
    time: half the time went to page faults at 4.9M parameters), and OpenBLAS's AVX-512 kernels where the
    CPU has AVX-512 (an OPENBLAS_CORETYPE=Haswell in the environment forces
    the AVX2 ones). Both must be set before the libraries load, so main()
    re-executes the script once with them."""
    env = dict(os.environ)
    env["GLIBC_TUNABLES"] = ("glibc.malloc.mmap_max=0:"
                             "glibc.malloc.trim_threshold=17179869184:"
                             "glibc.malloc.top_pad=268435456")
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        flags = ""
    if " avx512f " in flags and " avx512bw " in flags:
        env["OPENBLAS_CORETYPE"] = "SkylakeX"
    env["QUORUM_TRAIN_ENV"] = "1"
    return env


if __name__ == "__main__" and not os.environ.get("QUORUM_TRAIN_ENV"):
    os.execve(sys.executable, [sys.executable] + sys.argv,
              tuned_environment())

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import gguf_writer  # noqa: E402
import phrasing  # noqa: E402
import plain  # noqa: E402
import problems  # noqa: E402

# quorum's default system prompt (common/text/prompt.h PROMPT_DEFAULT_SYSTEM):
# most training examples carry it, so `quorum run` works without --system.
DEFAULT_SYSTEM = ("You are a careful problem solver. Reason step by step, "
                  "then give the final answer on the last line as "
                  "\\boxed{ANSWER}.")
SYSTEMS = [(DEFAULT_SYSTEM, 0.4), ("", 0.3),
           ("Solve the problem step by step.", 0.1),
           ("You are a helpful assistant.", 0.1),
           ("Answer the question. Show your work.", 0.1)]
EPS = 1e-6
ROPE_BASE = 10000.0


# ---- model -----------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * \
            self.weight


def rope(x, cos, sin):
    """NEOX order: element i pairs with i + head_dim/2."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["dim"], c["dim"] // c["heads"]
        self.c = c
        self.attn_norm = RMSNorm(d)
        self.q = nn.Linear(d, c["heads"] * hd, bias=True)
        self.k = nn.Linear(d, c["kv_heads"] * hd, bias=True)
        self.v = nn.Linear(d, c["kv_heads"] * hd, bias=True)
        self.o = nn.Linear(c["heads"] * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d)
        self.gate = nn.Linear(d, c["ffn"], bias=False)
        self.up = nn.Linear(d, c["ffn"], bias=False)
        self.down = nn.Linear(c["ffn"], d, bias=False)

    def forward(self, x, cos, sin, mask):
        """mask: [G*T, T], the causal mask repeated for the G query heads
        that share a key/value head. The query heads of one kv head are
        stacked as one [G*T, hd] matrix, so K and V are never copied per
        head; q is scaled before the product and the mask is added in it
        (baddbmm): the [T, T] scores are touched by no extra pass."""
        B, T, d = x.shape
        H, KV = self.c["heads"], self.c["kv_heads"]
        hd, G = d // H, H // KV
        h = self.attn_norm(x)
        q = self.q(h).view(B, T, H, hd).transpose(1, 2)
        k = self.k(h).view(B, T, KV, hd).transpose(1, 2)
        v = self.v(h).view(B, T, KV, hd).transpose(1, 2)
        q = rope(q, cos, sin) * (1.0 / math.sqrt(hd))
        k = rope(k, cos, sin)
        q = q.reshape(B * KV, G * T, hd)
        k = k.reshape(B * KV, T, hd)
        v = v.reshape(B * KV, T, hd)
        a = torch.baddbmm(mask, q, k.transpose(1, 2)).softmax(-1)
        y = torch.bmm(a, v).view(B, KV, G, T, hd).permute(0, 3, 1, 2, 4) \
            .reshape(B, T, d)
        x = x + self.o(y)
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embd = nn.Embedding(c["vocab"], c["dim"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["dim"])
        hd = c["dim"] // c["heads"]
        inv = ROPE_BASE ** (-torch.arange(0, hd // 2, dtype=torch.float64) *
                            2.0 / hd)
        self.register_buffer("inv_freq", inv, persistent=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if n.endswith("o.weight") or n.endswith("down.weight"):
                    std = 0.02 / math.sqrt(2 * c["layers"])
                nn.init.normal_(p, 0.0, std)
            elif n.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, ids):
        B, T = ids.shape
        pos = torch.arange(T, dtype=torch.float64, device=ids.device)
        ang = pos[:, None] * self.inv_freq[None, :]
        cos, sin = ang.cos().float(), ang.sin().float()
        G = self.c["heads"] // self.c["kv_heads"]
        mask = torch.full((T, T), float("-inf"), device=ids.device).triu(1)
        mask = mask.repeat(G, 1)
        x = self.embd(ids)
        for b in self.blocks:
            x = b(x, cos, sin, mask)
        return self.norm(x) @ self.embd.weight.t()   # tied output


# ---- data ------------------------------------------------------------------

class Encoder:
    def __init__(self, tok):
        self.t = tok
        self.S, self.E = tok.special("<|im_start|>"), tok.special("<|im_end|>")
        self.nl = tok.encode("\n")
        self.sys_head = [self.S] + tok.encode("system\n")
        self.user_head = [self.E] + self.nl + [self.S] + tok.encode("user\n")
        self.asst_head = [self.E] + self.nl + [self.S] + \
            tok.encode("assistant\n")

    def prompt(self, system, question, shots=()):
        """The tokens quorum's prompt_build_shots makes for the ChatML
        family: no system turn when the system prompt is empty, each shot
        a user turn and an assistant turn before the question."""
        ids = []
        if system:
            ids = self.sys_head + self.t.encode(system) + [self.E] + self.nl
        for q, a in shots:
            ids += [self.S] + self.t.encode("user\n") + self.t.encode(q) + \
                self.asst_head + self.t.encode(a) + [self.E] + self.nl
        return (ids + [self.S] + self.t.encode("user\n") +
                self.t.encode(question) + self.asst_head)

    def example(self, system, question, solution, shots=()):
        """(ids, mask): mask is 1 on the tokens trained on — every
        assistant turn's solution and its <|im_end|>, the shots' too (they
        are the same kind of text, so a long prompt is not wasted)."""
        ids, mask = [], []

        def add(t, m):
            ids.extend(t)
            mask.extend([m] * len(t))
        if system:
            add(self.sys_head + self.t.encode(system) + [self.E] + self.nl,
                0)
        for q, a in list(shots) + [(question, solution)]:
            add([self.S] + self.t.encode("user\n") + self.t.encode(q) +
                self.asst_head, 0)
            add(self.t.encode(a) + [self.E], 1)
            add(self.nl, 0)
        del ids[-1], mask[-1]
        return ids, mask


def pick_system(rng):
    x, acc = rng.random(), 0.0
    for s, w in SYSTEMS:
        acc += w
        if x < acc:
            return s
    return SYSTEMS[0][0]


# How many worked examples precede the question: 0..4 with these weights.
SHOTS = (0.55, 0.1, 0.1, 0.15, 0.1)


def pick_shots(rng):
    x, acc = rng.random(), 0.0
    for k, w in enumerate(SHOTS):
        acc += w
        if x < acc:
            return k
    return 0


GENERATORS = {"problems": problems, "phrasing": phrasing, "plain": plain}


def parse_mix(text):
    """--mix: "plain:0.5,phrasing:0.25,problems:0.25" (shares of each
    generator, normalised), or one number, the share of phrasing.py with
    the rest problems.py (issue 28's form)."""
    try:
        x = float(text)
        parts = [("phrasing", x), ("problems", 1.0 - x)]
    except ValueError:
        parts = []
        for item in text.split(","):
            name, _, w = item.partition(":")
            if name.strip() not in GENERATORS:
                raise ValueError("--mix: unknown generator %r (have %s)" % (
                    name.strip(), ", ".join(sorted(GENERATORS))))
            parts.append((name.strip(), float(w)))
    tot = sum(w for _, w in parts)
    if tot <= 0 or any(w < 0 for _, w in parts):
        raise ValueError("--mix: shares must be >= 0 and not all 0")
    return [(n, w / tot) for n, w in parts if w > 0]


def draw(rng, level, exclude, mix):
    """One training problem from a generator picked by its share of mix;
    never a held-out question."""
    lv = level if rng.random() < 0.7 else level * rng.random()
    x, acc = rng.random(), 0.0
    for name, w in mix:
        acc += w
        if x < acc:
            break
    return GENERATORS[name].make_excluding(rng, lv, exclude)


def examples(rng, enc, n, level, exclude, mix, ctx=1 << 30, tokens=0):
    """(ids, mask) sequences, n of them or (with tokens) until they hold
    that many tokens; a prompt may carry worked examples (drawn like the
    question, at full level) before the question."""
    seqs, held = [], 0
    while (len(seqs) < n) if not tokens else (held < tokens):
        p = draw(rng, level, exclude, mix)
        shots = [draw(rng, 1.0, exclude, mix)
                 for _ in range(pick_shots(rng))]
        shots = [(s["question"], s["solution"]) for s in shots]
        ids, mask = enc.example(pick_system(rng), p["question"],
                                p["solution"], shots)
        if len(ids) <= ctx:
            seqs.append((ids, mask))
            held += len(ids)
    return seqs


def make_group(seed, g, level, enc, exclude, mix, ctx, budget):
    """Group g of the stream: a function of (seed, g, level) alone, so any
    group can be made again — a resumed run remakes its current group and
    skips the batches it has trained on. GROUP batches' worth of examples
    are sorted by length and cut into batches of at most `budget` tokens
    counting padding (a batch of long sequences holds fewer of them), so
    a batch pads little and every step costs about the same."""
    rng = random.Random("%d:%d" % (seed, g))
    seqs = examples(rng, enc, 0, level, exclude, mix, ctx,
                    tokens=budget * Batches.GROUP)
    seqs.sort(key=lambda s: len(s[0]))
    out, cur = [], []
    for sq in seqs:
        if cur and (len(cur) + 1) * len(sq[0]) > budget:
            out.append(cur)
            cur = []
        cur.append(sq)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def _group_worker(args, requests, results):
    """The data stream's own process: makes the groups asked for, so the
    Python generators never hold up a training step."""
    torch.set_num_threads(1)
    tok, exclude, mix, ctx, budget, seed = args
    enc = Encoder(tok)
    while True:
        req = requests.get()
        if req is None:
            return
        g, level = req
        results.put((g, make_group(seed, g, level, enc, exclude, mix, ctx,
                                   budget)))


class Batches:
    """The training stream as groups of batches (make_group), made AHEAD
    groups in advance by a worker process (or in this one with
    workers=0). state() / restore() give the position: (group, batches of
    it used)."""
    GROUP = 8
    AHEAD = 2

    def __init__(self, tok, exclude, mix, ctx, budget, seed, level_of,
                 workers=1):
        self.level_of = level_of      # group index -> curriculum level
        self.args = (tok, exclude, mix, ctx, budget, seed)
        self.g, self.used, self.cur = 0, 0, None
        self.asked = {}               # group -> level asked for
        self.proc = None
        if workers:
            ctxm = mp.get_context("fork")
            self.req, self.res = ctxm.Queue(), ctxm.Queue()
            self.proc = ctxm.Process(target=_group_worker,
                                     args=(self.args, self.req, self.res),
                                     daemon=True)
            self.proc.start()
        else:
            self.enc = Encoder(tok)
        self.ready = {}

    def _ask(self, g):
        if g in self.asked:
            return
        lv = self.level_of(g)
        self.asked[g] = lv
        if self.proc:
            self.req.put((g, lv))

    def _get(self, g):
        self._ask(g)
        if self.proc:
            while g not in self.ready:
                k, v = self.res.get()
                self.ready[k] = v
            return self.ready.pop(g)
        tok, exclude, mix, ctx, budget, seed = self.args
        return make_group(seed, g, self.asked[g], self.enc, exclude, mix,
                          ctx, budget)

    def next(self):
        if self.cur is None:
            self.cur = self._get(self.g)
            self.level = self.asked[self.g]
            for k in range(1, self.AHEAD + 1):
                self._ask(self.g + k)
        batch = self.cur[self.used]
        self.used += 1
        if self.used == len(self.cur):
            self.asked.pop(self.g, None)
            self.g, self.used, self.cur = self.g + 1, 0, None
        return collate(batch)

    def state(self):
        return {"group": self.g, "used": self.used,
                "level": self.asked.get(self.g)}

    def restore(self, st):
        self.g, self.used, self.cur = st["group"], 0, None
        if st.get("level") is not None:
            self.asked[self.g] = st["level"]
            if self.proc:
                self.req.put((self.g, st["level"]))
        skip = st["used"]
        for _ in range(skip):
            self.next()

    def close(self):
        if self.proc:
            self.req.put(None)
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                self.proc.terminate()


def collate(seqs):
    n = len(seqs)
    T = max(len(s) for s, _ in seqs)
    ids = torch.zeros((n, T), dtype=torch.long)
    lab = torch.full((n, T), -100, dtype=torch.long)
    ntok = 0
    for i, (s, m) in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        # position j predicts token j+1 where token j+1 is trained on
        t = torch.tensor(s[1:])
        t[torch.tensor(m[1:]) == 0] = -100
        lab[i, :len(s) - 1] = t
        ntok += len(s)
    return ids, lab, ntok


# ---- export ----------------------------------------------------------------

def export(model, tok, path, c, meta):
    sd = {k: v.detach().float().cpu().numpy()
          for k, v in model.state_dict().items()}
    F16, F32 = gguf_writer.GGML_F16, gguf_writer.GGML_F32
    t = [("token_embd.weight", sd["embd.weight"], F16),
         ("output_norm.weight", sd["norm.weight"], F32)]
    names = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
             "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}
    for i in range(c["layers"]):
        p = "blocks.%d." % i
        t.append(("blk.%d.attn_norm.weight" % i, sd[p + "attn_norm.weight"],
                  F32))
        t.append(("blk.%d.ffn_norm.weight" % i, sd[p + "ffn_norm.weight"],
                  F32))
        for k, g in names.items():
            t.append(("blk.%d.%s.weight" % (i, g), sd[p + k + ".weight"], F16))
            if k in "qkv":
                t.append(("blk.%d.%s.bias" % (i, g), sd[p + k + ".bias"],
                          F32))
    kv = {"general.architecture": "qwen2",
          "general.name": "quorum-arith",
          "general.file_type": ("u32", 1),
          "general.description": json.dumps(meta, sort_keys=True),
          "qwen2.context_length": ("u32", c["ctx"]),
          "qwen2.embedding_length": ("u32", c["dim"]),
          "qwen2.block_count": ("u32", c["layers"]),
          "qwen2.feed_forward_length": ("u32", c["ffn"]),
          "qwen2.attention.head_count": ("u32", c["heads"]),
          "qwen2.attention.head_count_kv": ("u32", c["kv_heads"]),
          "qwen2.rope.freq_base": ("f32", ROPE_BASE),
          "qwen2.attention.layer_norm_rms_epsilon": ("f32", EPS)}
    kv.update(tok.gguf_kv())
    gguf_writer.write(path, kv, t)


# ---- main ------------------------------------------------------------------

def load_gguf_weights(model, path, c):
    """Our own GGUF's tensors (export's names) into the model: continue
    training a shipped model."""
    t = gguf_writer.read(path)
    sd = {"embd.weight": t["token_embd.weight"],
          "norm.weight": t["output_norm.weight"]}
    names = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
             "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}
    for i in range(c["layers"]):
        p = "blocks.%d." % i
        sd[p + "attn_norm.weight"] = t["blk.%d.attn_norm.weight" % i]
        sd[p + "ffn_norm.weight"] = t["blk.%d.ffn_norm.weight" % i]
        for k, g in names.items():
            sd[p + k + ".weight"] = t["blk.%d.%s.weight" % (i, g)]
            if k in "qkv":
                sd[p + k + ".bias"] = t["blk.%d.%s.bias" % (i, g)]
    model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})


def held_out(paths):
    """Every question of the held-out sets and few-shot files: training
    never sees one."""
    qs = set()
    for path in paths:
        if os.path.exists(path):
            with open(path) as f:
                qs |= {json.loads(l)["question"] for l in f if l.strip()}
    return qs


# What a checkpoint fixes: a resumed run takes these from it, not from the
# command line, so stopping and resuming trains the same schedule.
RECIPE = ("steps", "minutes", "batch_tokens", "lr", "dim", "layers", "heads",
          "kv_heads", "ffn", "ctx", "seed", "level_start", "warmup", "mix",
          "init", "init_gguf")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="models/arith",
                    help="output prefix: PREFIX.gguf, PREFIX-tok.json, "
                         "PREFIX-train.csv, PREFIX.pt, PREFIX-ckpt.pt")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--resume", action="store_true",
                    help="continue from PREFIX-ckpt.pt when it exists (its "
                         "recipe wins over these options), else start")
    ap.add_argument("--ckpt-minutes", type=float, default=5.0,
                    help="write PREFIX-ckpt.pt (and the GGUF) this often")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop (with a checkpoint) after this many steps "
                         "of this run; --resume goes on from there")
    ap.add_argument("--stop-minutes", type=float, default=0,
                    help="stop (with a checkpoint) after this many minutes "
                         "of this run (a pilot: the start of a longer "
                         "schedule that --resume can go on with)")
    ap.add_argument("--minutes", type=float, default=75.0,
                    help="with --steps 0: learning rate and curriculum "
                         "follow training time (summed over resumes), and "
                         "training stops after this many minutes")
    ap.add_argument("--batch-tokens", type=int, default=6144,
                    help="tokens per batch counting padding (examples of "
                         "about equal length are batched together)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=384)
    ap.add_argument("--ctx", type=int, default=1024,
                    help="context length written to the GGUF; no training "
                         "sequence is longer")
    ap.add_argument("--mix", default="0.5",
                    help="generators and their shares, e.g. "
                         "plain:0.5,phrasing:0.25,problems:0.25; one number "
                         "is phrasing.py's share, the rest problems.py")
    ap.add_argument("--merges", type=int, default=700)
    ap.add_argument("--tok", help="use this tokenizer (a PREFIX-tok.json) "
                    "instead of learning one")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--test", action="append",
                    help="held-out sets and shot files whose questions "
                         "never enter training (default: train/data's "
                         "test.jsonl, handwritten.jsonl, shots3.jsonl)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="PyTorch's threads (the data stream has its own "
                         "process)")
    ap.add_argument("--snap-minutes", type=float, default=0,
                    help="also write PREFIX-snap/TOKENS.gguf this often "
                         "(the learning curve's points)")
    ap.add_argument("--data-workers", type=int, default=1, choices=(0, 1),
                    help="1: the data stream in its own process; 0: inline")
    ap.add_argument("--bench", type=int, default=0,
                    help="only time this many steps and exit")
    ap.add_argument("--init", help="start from these weights (a PREFIX.pt "
                    "of an earlier run): a second stage")
    ap.add_argument("--init-gguf", help="start from a GGUF this script "
                    "wrote (e.g. the shipped models/arith.gguf)")
    ap.add_argument("--level-start", type=float, default=0.0,
                    help="curriculum level at step 0 (1 = full range)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--export-only", action="store_true",
                    help="write the GGUF from PREFIX.pt")
    a = ap.parse_args()
    if a.test is None:
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
        a.test = [os.path.join(d, f) for f in
                  ("test.jsonl", "handwritten.jsonl", "dev.jsonl",
                   "shots3.jsonl")]

    ckpath = a.out + "-ckpt.pt"
    ck = None
    if a.resume and os.path.exists(ckpath):
        ck = torch.load(ckpath, map_location="cpu")
        for k in RECIPE:
            setattr(a, k, ck["recipe"][k])
        print("resuming %s at step %d (%.1f min trained)" % (
            ckpath, ck["step"], ck["seconds"] / 60), flush=True)

    dev = torch.device(a.device)
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("train.py: --device cuda, but PyTorch sees no CUDA device")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    try:
        mix = parse_mix(a.mix)
    except ValueError as e:
        sys.exit("train.py: %s" % e)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    exclude = held_out(a.test)

    tokpath = a.out + "-tok.json"
    if os.path.exists(tokpath):
        tok = bpe.BPE.load(tokpath)
    elif a.tok:
        tok = bpe.BPE.load(a.tok)
        tok.save(tokpath)
    else:
        trng = random.Random(a.seed + 1)
        texts = [s for s, _ in SYSTEMS] + ["system\n", "user\n",
                                           "assistant\n"]
        for i in range(20000):
            gen = phrasing if i % 2 else problems
            p = gen.make(trng, trng.random())
            texts += [p["question"], p["solution"]]
        tok = bpe.BPE.train(texts, a.merges)
        tok.save(tokpath)
    enc = Encoder(tok)
    c = {"vocab": len(tok.tokens), "dim": a.dim, "layers": a.layers,
         "heads": a.heads, "kv_heads": a.kv_heads, "ffn": a.ffn,
         "ctx": a.ctx}
    model = Model(c)
    nparam = sum(p.numel() for p in model.parameters())
    print("vocab %d, parameters %d (%.2fM), device %s" % (
        c["vocab"], nparam, nparam / 1e6, a.device), flush=True)

    if a.export_only:
        ck = torch.load(a.out + ".pt", map_location="cpu")
        model.load_state_dict(ck["model"])
        export(model, tok, a.out + ".gguf", c, ck["meta"])
        print("wrote", a.out + ".gguf")
        return

    step0, tokens0, secs0, stages = 0, 0, 0.0, []
    if a.init:
        ini = torch.load(a.init, map_location="cpu")
        model.load_state_dict(ini["model"])
        step0, tokens0 = ini["meta"]["steps"], ini["meta"]["tokens"]
        secs0 = ini["meta"]["seconds"]
        stages = ini["meta"].get("stages", [ini["meta"].get("schedule")])
        print("from %s: step %d" % (a.init, step0), flush=True)
    elif a.init_gguf:
        load_gguf_weights(model, a.init_gguf, c)
        stages = ["weights of %s" % os.path.basename(a.init_gguf)]
        print("from %s" % a.init_gguf, flush=True)
    model.to(dev)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    # the curriculum level: by the group's place in a step schedule, or
    # (with --minutes) by the training time when the group is asked for
    clock = {"now": lambda: 0.0}

    def level_of(g):
        if a.steps:
            frac = g * Batches.GROUP / a.steps
        else:
            frac = clock["now"]() / (a.minutes * 60)
        return min(1.0, a.level_start + frac / 0.6)
    batches = Batches(tok, exclude, mix, a.ctx, a.batch_tokens, a.seed,
                      level_of, a.data_workers)
    stage = "seed %d, lr %g, %s, level from %g, mix %s, %s" % (
        a.seed, a.lr, "steps=%d" % a.steps if a.steps else
        "minutes=%g" % a.minutes, a.level_start, a.mix, a.device)
    step, tokens, ema, done = 0, 0, None, 0.0   # done: seconds trained
    if ck:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, tokens, ema, done = ck["step"], ck["tokens"], ck["ema"], \
            ck["seconds"]
        step0, tokens0, secs0 = ck["step0"], ck["tokens0"], ck["secs0"]
        stages = ck["stages"]
        torch.set_rng_state(ck["torch_rng"])
        batches.restore(ck["stream"])
        stage = ck["stage"]
    recipe = {k: getattr(a, k) for k in RECIPE}

    def meta():
        return {"steps": step0 + step, "batch_tokens": a.batch_tokens,
                "stages": stages + [stage], "lr": a.lr, "seed": a.seed,
                "tokens": tokens0 + tokens,
                "seconds": round(secs0 + done, 1), "parameters": nparam,
                "config": c, "loss": round(ema or 0.0, 5),
                "device": a.device}

    def checkpoint():
        sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        torch.save({"model": sd, "opt": opt.state_dict(), "step": step,
                    "tokens": tokens, "ema": ema, "seconds": done,
                    "step0": step0, "tokens0": tokens0, "secs0": secs0,
                    "stages": stages, "stage": stage,
                    "torch_rng": torch.get_rng_state(),
                    "stream": batches.state(), "recipe": recipe},
                   ckpath + ".tmp")
        os.replace(ckpath + ".tmp", ckpath)
        torch.save({"model": sd, "meta": meta()}, a.out + ".pt.tmp")
        os.replace(a.out + ".pt.tmp", a.out + ".pt")
        export(model, tok, a.out + ".gguf", c, meta())

    def snap(ntok):
        os.makedirs(a.out + "-snap", exist_ok=True)
        export(model, tok, os.path.join(a.out + "-snap", "%09d.gguf" % ntok),
               c, meta())

    total = a.steps or 10 ** 9
    fresh = not (ck or a.init)
    logpath = a.out + "-train.csv"
    log = open(logpath, "w" if fresh else "a")
    if fresh or not os.path.getsize(logpath):
        log.write("step,seconds,tokens,loss,level,lr\n")
    amp = a.device == "cuda"
    t0, tb, last_ck = time.time(), 0, time.time()
    t_start = t0
    last_snap = t0
    clock["now"] = lambda: done + time.time() - t0
    bench_tok = 0
    while step < total:
        if a.stop_after and tb == a.stop_after:
            break
        if a.stop_minutes and time.time() - t_start >= a.stop_minutes * 60:
            break
        if a.bench and tb == a.bench:
            dt = time.time() - t0
            print("bench: %d steps, %.1f s, %.0f tokens/s, %.2f steps/s" % (
                tb, dt, bench_tok / dt, tb / dt))
            batches.close()
            return
        now = done + time.time() - t0
        # progress through the schedule: by steps, or by training time (on
        # a shared machine the step rate is not known in advance)
        if a.steps:
            frac = step / a.steps
        else:
            frac = now / (a.minutes * 60)
            if frac >= 1.0:
                break
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * \
            (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, lab, n = batches.next()
        level = batches.level
        ids, lab = ids.to(dev), lab.to(dev)
        with (torch.autocast("cuda", dtype=torch.bfloat16) if amp else
              contextlib.nullcontext()):
            logits = model(ids)
        loss = F.cross_entropy(logits.float().view(-1, c["vocab"]),
                               lab.view(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += n
        bench_tok += n
        step += 1
        tb += 1
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 25 == 0:
            log.write("%d,%.1f,%d,%.5f,%.3f,%.6f\n" % (
                step0 + step, secs0 + done + time.time() - t0,
                tokens0 + tokens, ema, level, lr))
            log.flush()
        if step % 200 == 0:
            print("step %d  loss %.4f  level %.2f  lr %.2e  %.1f min" % (
                step, ema, level, lr, (done + time.time() - t0) / 60),
                flush=True)
        if not a.bench and time.time() - last_ck >= a.ckpt_minutes * 60:
            done += time.time() - t0
            checkpoint()   # its own time is not training time
            t0 = last_ck = time.time()
            print("checkpoint at step %d (%.1f min)" % (
                step, done / 60), flush=True)
        if a.snap_minutes and time.time() - last_snap >= a.snap_minutes * 60:
            snap(tokens0 + tokens)
            last_snap = time.time()
    done += time.time() - t0
    checkpoint()
    batches.close()
    print("done: %d steps, %.1f min" % (step, done / 60))


if __name__ == "__main__":
    main()

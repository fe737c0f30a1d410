"""Trains quorum's arithmetic model: a small qwen2-architecture transformer
that solves the word problems of problems.py step by step, then writes it
as a GGUF file quorum and llama.cpp load.

    /usr/bin/python3 train/train.py --out models/arith [--steps N | --minutes M]

The forward pass here is the one quorum runs for `qwen2` (RMSNorm, rotary
embeddings in NEOX order, QKV bias, SwiGLU, tied output), so the exported
weights mean the same thing there. Fixed seeds; with --steps the run is
reproducible on one machine (thread scheduling aside).
"""
import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import gguf_writer  # noqa: E402
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
        B, T, d = x.shape
        H, KV = self.c["heads"], self.c["kv_heads"]
        hd = d // H
        h = self.attn_norm(x)
        q = self.q(h).view(B, T, H, hd).transpose(1, 2)
        k = self.k(h).view(B, T, KV, hd).transpose(1, 2)
        v = self.v(h).view(B, T, KV, hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        if KV != H:
            k = k.repeat_interleave(H // KV, 1)
            v = v.repeat_interleave(H // KV, 1)
        a = (q @ k.transpose(-1, -2)) / math.sqrt(hd) + mask
        y = (a.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d)
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
        pos = torch.arange(T, dtype=torch.float64)
        ang = pos[:, None] * self.inv_freq[None, :]
        cos, sin = ang.cos().float(), ang.sin().float()
        mask = torch.full((T, T), float("-inf")).triu(1)
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

    def prompt(self, system, question):
        """The tokens quorum's prompt_build makes for the ChatML family."""
        return (self.sys_head + self.t.encode(system) + self.user_head +
                self.t.encode(question) + self.asst_head)

    def example(self, system, question, solution):
        p = self.prompt(system, question)
        return p, self.t.encode(solution) + [self.E]


def pick_system(rng):
    x, acc = rng.random(), 0.0
    for s, w in SYSTEMS:
        acc += w
        if x < acc:
            return s
    return SYSTEMS[0][0]


class Batches:
    """Examples drawn GROUP batches at a time and sorted by length, so a
    batch pads little."""
    GROUP = 4

    def __init__(self, rng, enc, n, exclude):
        self.rng, self.enc, self.n, self.exclude = rng, enc, n, exclude
        self.queue = []

    def next(self, level):
        if not self.queue:
            seqs = examples(self.rng, self.enc, self.n * self.GROUP, level,
                            self.exclude)
            seqs.sort(key=lambda s: len(s[0]) + len(s[1]))
            self.queue = [seqs[i:i + self.n]
                          for i in range(0, len(seqs), self.n)]
            self.rng.shuffle(self.queue)
        return collate(self.queue.pop())


def examples(rng, enc, n, level, exclude):
    seqs = []
    while len(seqs) < n:
        lv = level if rng.random() < 0.7 else level * rng.random()
        p = problems.make_excluding(rng, lv, exclude)
        pr, tg = enc.example(pick_system(rng), p["question"], p["solution"])
        seqs.append((pr, tg))
    return seqs


def collate(seqs):
    n = len(seqs)
    T = max(len(a) + len(b) for a, b in seqs)
    ids = torch.zeros((n, T), dtype=torch.long)
    lab = torch.full((n, T), -100, dtype=torch.long)
    ntok = 0
    for i, (a, b) in enumerate(seqs):
        s = a + b
        ids[i, :len(s)] = torch.tensor(s)
        # position j predicts token j+1: targets are the solution tokens
        lab[i, len(a) - 1:len(s) - 1] = torch.tensor(b)
        ntok += len(s)
    return ids, lab, ntok


# ---- export ----------------------------------------------------------------

def export(model, tok, path, c, meta):
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
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

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="models/arith",
                    help="output prefix: PREFIX.gguf, PREFIX-tok.json, "
                         "PREFIX-train.csv, PREFIX.pt")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=75.0,
                    help="with --steps 0: learning rate and curriculum "
                         "follow wall time, and training stops after this "
                         "many minutes")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=384)
    ap.add_argument("--merges", type=int, default=700)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--test", default="train/data/test.jsonl",
                    help="held-out set: its questions never enter training")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bench", type=int, default=0,
                    help="only time this many steps and exit")
    ap.add_argument("--init", help="start from these weights (a PREFIX.pt "
                    "of an earlier run): a second stage")
    ap.add_argument("--level-start", type=float, default=0.0,
                    help="curriculum level at step 0 (1 = full range)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--export-only", action="store_true",
                    help="write the GGUF from PREFIX.pt")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    exclude = set()
    if os.path.exists(a.test):
        with open(a.test) as f:
            exclude = {json.loads(l)["question"] for l in f}

    tokpath = a.out + "-tok.json"
    if os.path.exists(tokpath):
        tok = bpe.BPE.load(tokpath)
    else:
        trng = random.Random(a.seed + 1)
        texts = [s for s, _ in SYSTEMS] + ["system\n", "user\n",
                                           "assistant\n"]
        for _ in range(20000):
            p = problems.make(trng, trng.random())
            texts += [p["question"], p["solution"]]
        tok = bpe.BPE.train(texts, a.merges)
        tok.save(tokpath)
    enc = Encoder(tok)
    c = {"vocab": len(tok.tokens), "dim": a.dim, "layers": a.layers,
         "heads": a.heads, "kv_heads": a.kv_heads, "ffn": a.ffn, "ctx": 512}
    model = Model(c)
    nparam = sum(p.numel() for p in model.parameters())
    print("vocab %d, parameters %d (%.2fM)" % (c["vocab"], nparam,
                                                nparam / 1e6), flush=True)

    if a.export_only:
        ck = torch.load(a.out + ".pt")
        model.load_state_dict(ck["model"])
        export(model, tok, a.out + ".gguf", c, ck["meta"])
        print("wrote", a.out + ".gguf")
        return

    step0, tokens0, secs0, stages = 0, 0, 0.0, []
    if a.init:
        ck = torch.load(a.init)
        model.load_state_dict(ck["model"])
        step0, tokens0 = ck["meta"]["steps"], ck["meta"]["tokens"]
        secs0 = ck["meta"]["seconds"]
        stages = ck["meta"].get("stages", [ck["meta"].get("schedule")])
        print("from %s: step %d" % (a.init, step0), flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    total = a.steps or 10 ** 9
    warm = a.warmup
    batches = Batches(rng, enc, a.batch, exclude)
    t0 = time.time()
    log = open(a.out + "-train.csv", "a" if a.init else "w")
    if not a.init:
        log.write("step,seconds,tokens,loss,level,lr\n")
    stage = "seed %d, lr %g, %s, level from %g" % (
        a.seed, a.lr, "steps=%d" % a.steps if a.steps else
        "minutes=%g" % a.minutes, a.level_start)
    tokens, ema = 0, None
    step = 0
    while step < total:
        if a.bench and step == a.bench:
            dt = time.time() - t0
            print("bench: %d steps, %.1f s, %.0f tokens/s" % (
                step, dt, tokens / dt))
            return
        # progress through the schedule: by steps, or by wall time (on a
        # shared machine the step rate is not known in advance)
        if a.steps:
            frac = step / a.steps
        else:
            frac = (time.time() - t0) / (a.minutes * 60)
            if frac >= 1.0:
                total = step
                break
        level = min(1.0, a.level_start + frac / 0.6)
        lr = a.lr * min(1.0, (step + 1) / warm) * \
            (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, lab, n = batches.next(level)
        logits = model(ids)
        loss = F.cross_entropy(logits.view(-1, c["vocab"]), lab.view(-1),
                               ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += n
        step += 1
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 25 == 0:
            log.write("%d,%.1f,%d,%.5f,%.3f,%.6f\n" % (
                step0 + step, secs0 + time.time() - t0, tokens0 + tokens,
                ema, level, lr))
            log.flush()
        if step % 200 == 0:
            print("step %d  loss %.4f  level %.2f  lr %.2e  %.0f tok/s  "
                  "%.1f min" % (step, ema, level, lr,
                                tokens / (time.time() - t0),
                                (time.time() - t0) / 60), flush=True)
        if step % 500 == 0:
            meta = {"steps": step0 + step, "batch": a.batch,
                    "stages": stages + [stage],
                    "lr": a.lr, "seed": a.seed, "tokens": tokens0 + tokens,
                    "seconds": round(secs0 + time.time() - t0, 1),
                    "parameters": nparam, "config": c,
                    "loss": round(ema, 5)}
            torch.save({"model": model.state_dict(), "meta": meta},
                       a.out + ".pt.tmp")
            os.replace(a.out + ".pt.tmp", a.out + ".pt")
            export(model, tok, a.out + ".gguf", c, meta)
    meta = {"steps": step0 + step, "batch": a.batch, "lr": a.lr,
            "seed": a.seed, "stages": stages + [stage],
            "tokens": tokens0 + tokens,
            "seconds": round(secs0 + time.time() - t0, 1),
            "parameters": nparam, "config": c, "loss": round(ema, 5),
            "schedule": "steps" if a.steps else "minutes=%g" % a.minutes}
    torch.save({"model": model.state_dict(), "meta": meta}, a.out + ".pt")
    export(model, tok, a.out + ".gguf", c, meta)
    print("done: %d steps, %.1f min" % (step, (time.time() - t0) / 60))


if __name__ == "__main__":
    main()

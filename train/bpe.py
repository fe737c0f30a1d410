"""Byte-level BPE: training, encoding, and the vocabulary in GGUF form.

The pre-tokenizer is Qwen2's (GGUF `tokenizer.ggml.pre = qwen2`): every
digit is a pre-token of its own, so numbers are always spelled digit by
digit and no merge can join digits. Training only needs ASCII text, so the
regex below is Qwen2's with \\p{L} = [A-Za-z] and \\p{N} = [0-9]; quorum and
llama.cpp tokenize with the full Unicode pattern, which splits ASCII text
the same way (checked against `quorum tokenize` by train.py --check-tok).
"""
import json
import re
from collections import Counter

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

PRETOK = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]"
    r"| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_unicode():
    """GPT-2's reversible map from bytes to printable characters."""
    keep = (list(range(ord("!"), ord("~") + 1)) +
            list(range(ord("\xa1"), ord("\xac") + 1)) +
            list(range(ord("\xae"), ord("\xff") + 1)))
    m, extra = {}, 0
    for b in range(256):
        if b in keep:
            m[b] = chr(b)
        else:
            m[b] = chr(256 + extra)
            extra += 1
    return m


B2U = byte_unicode()


def pretokenize(text):
    return ["".join(B2U[b] for b in w.encode("utf-8"))
            for w in PRETOK.findall(text)]


class BPE:
    def __init__(self, merges):
        self.merges = list(merges)              # [(a, b)] in rank order
        self.rank = {m: i for i, m in enumerate(self.merges)}
        self.tokens = [B2U[b] for b in range(256)]
        self.tokens += [a + b for a, b in self.merges]
        self.tokens += SPECIALS
        self.id = {t: i for i, t in enumerate(self.tokens)}
        self.cache = {}

    @classmethod
    def train(cls, texts, n_merges):
        words = Counter()
        for t in texts:
            words.update(pretokenize(t))
        seqs = {w: list(w) for w in words}
        merges = []
        for _ in range(n_merges):
            pairs = Counter()
            for w, c in words.items():
                s = seqs[w]
                for i in range(len(s) - 1):
                    pairs[(s[i], s[i + 1])] += c
            if not pairs:
                break
            # most frequent; ties by the pair's text so training is
            # deterministic whatever the dict order
            best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
            if pairs[best] < 2:
                break
            merges.append(best)
            a, b = best
            for w in words:
                s = seqs[w]
                i, out = 0, []
                while i < len(s):
                    if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                        out.append(a + b)
                        i += 2
                    else:
                        out.append(s[i])
                        i += 1
                seqs[w] = out
        return cls(merges)

    def _word(self, w):
        r = self.cache.get(w)
        if r is not None:
            return r
        s = list(w)
        while len(s) > 1:
            best, bi = None, -1
            for i in range(len(s) - 1):
                k = self.rank.get((s[i], s[i + 1]))
                if k is not None and (best is None or k < best):
                    best, bi = k, i
            if best is None:
                break
            s = s[:bi] + [s[bi] + s[bi + 1]] + s[bi + 2:]
        r = [self.id[x] for x in s]
        self.cache[w] = r
        return r

    def encode(self, text):
        out = []
        for w in pretokenize(text):
            out += self._word(w)
        return out

    def special(self, name):
        return self.id[name]

    def decode(self, ids):
        u2b = {v: k for k, v in B2U.items()}
        bs = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in SPECIALS:
                bs += t.encode()
            else:
                bs += bytes(u2b[c] for c in t)
        return bs.decode("utf-8", "replace")

    def save(self, path):
        with open(path, "w") as f:
            json.dump({"merges": [list(m) for m in self.merges]}, f)

    @classmethod
    def load(cls, path):
        with open(path) as f:
            return cls([tuple(m) for m in json.load(f)["merges"]])

    def gguf_kv(self):
        """The tokenizer.ggml.* keys (GGUF value types given by the writer)."""
        types = [1] * (len(self.tokens) - len(SPECIALS)) + [3] * len(SPECIALS)
        return {
            "tokenizer.ggml.model": "gpt2",
            "tokenizer.ggml.pre": "qwen2",
            "tokenizer.ggml.tokens": list(self.tokens),
            "tokenizer.ggml.token_type": ("i32", types),
            "tokenizer.ggml.merges": ["%s %s" % m for m in self.merges],
            "tokenizer.ggml.eos_token_id": ("u32", self.id["<|im_end|>"]),
            "tokenizer.ggml.padding_token_id":
                ("u32", self.id["<|endoftext|>"]),
            "tokenizer.ggml.bos_token_id": ("u32", self.id["<|endoftext|>"]),
            "tokenizer.ggml.add_bos_token": False,
            "tokenizer.chat_template": CHATML,
        }


CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + "
          "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")

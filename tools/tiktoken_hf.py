#!/usr/bin/python3
"""tiktoken_hf — writes data/tokenizers/o200k/ from js-tiktoken's o200k ranks.

tiktoken ranks are a list of byte strings; a Hugging Face / GGUF BPE
vocabulary needs merges. A token of rank r is recovered as a merge by
running byte-level BPE over its own bytes with only the tokens ranked
below r: what remains is exactly two parts, and "left right" is its
merge, of rank r. Merges are written in rank order.

Usage (from the repository root, after `npm pack js-tiktoken` and
unpacking it in DIR):
    /usr/bin/python3 tools/tiktoken_hf.py DIR/package/dist/ranks/o200k_base.js \
        data/tokenizers/o200k

The special tokens are those of gpt-oss's o200k_harmony (ids 199998 to
200018); tokenizer_config.json names bos/eos/pad as gpt-oss does and
carries a short harmony chat template written for quorum.
"""

import base64
import json
import os
import re
import sys

# o200k's Split regex as tokenizer.json spells it (llama.cpp's "gpt-4o")
PAT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*"
       r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
       r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
       r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
       r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# gpt-oss (o200k_harmony) added tokens; the rest of 200000..200017 are
# reserved placeholders
SPECIAL = {
    199998: "<|startoftext|>",
    199999: "<|endoftext|>",
    200002: "<|return|>",
    200003: "<|constrain|>",
    200005: "<|channel|>",
    200006: "<|start|>",
    200007: "<|end|>",
    200008: "<|message|>",
    200012: "<|call|>",
    200018: "<|endofprompt|>",
}

# Our own minimal harmony template (no tools, no date): what quorum's
# "harmony" family renders, so a synthesized model is recognised as one.
TEMPLATE = (
    "<|start|>system<|message|>You are ChatGPT, a large language model "
    "trained by OpenAI.\nKnowledge cutoff: 2024-06\n\nReasoning: "
    "{{ reasoning_effort | default('medium') }}\n\n# Valid channels: "
    "analysis, commentary, final. Channel must be included for every "
    "message.<|end|>"
    "{% for m in messages %}{% if m.role == 'system' %}"
    "<|start|>developer<|message|># Instructions\n\n{{ m.content }}\n\n"
    "<|end|>"
    "{% elif m.role == 'assistant' %}<|start|>assistant<|channel|>final"
    "<|message|>{{ m.content }}<|end|>"
    "{% else %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|start|>assistant{% endif %}")


def byte_chars():
    """GPT-2's printable stand-in for each byte."""
    keep = (list(range(0x21, 0x7f)) + list(range(0xa1, 0xad)) +
            list(range(0xae, 0x100)))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(0x100 + extra)
            extra += 1
    return out


def read_ranks(path):
    text = open(path, encoding="utf-8").read()
    obj = json.loads(text[text.index("{"):text.rindex("}") + 1])
    ranks = {}
    for line in obj["bpe_ranks"].split("\n"):
        if not line:
            continue
        fields = line.split(" ")
        base = int(fields[1])
        for i, b64 in enumerate(fields[2:]):
            ranks[base64.b64decode(b64)] = base + i
    return obj, ranks


def split_pair(ranks, tok, rank):
    """The two parts BPE leaves of tok using only tokens ranked < rank."""
    parts = [bytes([b]) for b in tok]
    while len(parts) > 2:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < rank and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    if len(parts) != 2:
        raise SystemExit("token %d (%r) is not one merge" % (rank, tok))
    return parts


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    obj, ranks = read_ranks(sys.argv[1])
    if re.sub(r"\('s\|.*?'D\)", "", obj["pat_str"]) != \
       re.sub(r"\(\?i:'s\|.*?'d\)", "", PAT):
        raise SystemExit("unexpected pat_str: " + obj["pat_str"])
    bc = byte_chars()
    enc = lambda b: "".join(bc[x] for x in b)
    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    if [r for _, r in by_rank] != list(range(len(by_rank))):
        raise SystemExit("ranks are not 0..n-1")
    vocab, merges = {}, []
    for tok, rank in by_rank:
        vocab[enc(tok)] = rank
        if len(tok) > 1:
            left, right = split_pair(ranks, tok, rank)
            merges.append(enc(left) + " " + enc(right))
    n = len(by_rank)
    added = []
    for i in range(n, 200019):
        content = SPECIAL.get(i, "<|reserved_%d|>" % i)
        added.append({"id": i, "content": content, "single_word": False,
                      "lstrip": False, "rstrip": False, "normalized": False,
                      "special": True})
    bl = {"type": "ByteLevel", "add_prefix_space": False,
          "trim_offsets": True, "use_regex": False}
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PAT},
             "behavior": "Isolated", "invert": False}, bl]},
        "post_processor": bl, "decoder": bl,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    cfg = {"bos_token": "<|startoftext|>", "eos_token": "<|return|>",
           "pad_token": "<|endoftext|>", "chat_template": TEMPLATE,
           "model_max_length": 131072,
           "tokenizer_class": "PreTrainedTokenizerFast"}
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w",
              encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(out, "tokenizer_config.json"), "w",
              encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print("%d BPE tokens, %d merges, %d added" % (n, len(merges),
                                                  len(added)))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""llama_vectors — writes a tokenizer-vectors .out file with llama.cpp.

Each input of NAME.inp (inputs separated by lines __ggml_vocab_test__)
is tokenized by llama.cpp's llama-tokenize on MODEL.gguf as
test-tokenizer-0 does (no BOS, special tokens not parsed, the bytes as
they are); one line of ids per input, each id after a space.

Usage:
    /usr/bin/python3 tools/llama_vectors.py LLAMA_TOKENIZE MODEL.gguf \\
        data/tokenizer-vectors/ggml-vocab-NAME.gguf.inp

(the .out is written beside the .inp).
"""

import os
import re
import subprocess
import sys
import tempfile

SEP = "\n__ggml_vocab_test__\n"


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    exe, model, inp = sys.argv[1:]
    with open(inp, "rb") as f:
        cases = f.read().split(SEP.encode())[:-1]
    lines = []
    with tempfile.NamedTemporaryFile() as tmp:
        for i, case in enumerate(cases):
            tmp.seek(0)
            tmp.truncate()
            tmp.write(case)
            tmp.flush()
            r = subprocess.run([exe, "-m", model, "-f", tmp.name, "--ids",
                                "--no-bos", "--no-parse-special",
                                "--no-escape", "--log-disable"],
                               capture_output=True)
            last = r.stdout.decode().strip().splitlines()[-1:] or [""]
            m = re.fullmatch(r"\[(.*)\]", last[0])
            if r.returncode or not m:
                raise SystemExit("case %d: %s" % (i, r.stderr.decode()[-400:]))
            ids = [int(x) for x in m.group(1).split(",") if x.strip()]
            lines.append("".join(" %d" % x for x in ids))
    out = os.path.splitext(inp)[0] + ".out"
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%s: %d cases" % (out, len(lines)))


if __name__ == "__main__":
    main()

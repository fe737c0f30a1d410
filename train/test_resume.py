"""A training run stopped and resumed gives the weights of one unbroken
run, bit for bit (train.py --stop-after, then --resume; tiny model, one
thread, step schedule). Needs PyTorch: run by tests/train_data.sh when
/usr/bin/python3 has it.

    /usr/bin/python3 train/test_resume.py
"""
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_writer  # noqa: E402
TINY = ["--dim", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
        "--ffn", "64", "--batch-tokens", "600", "--steps", "6", "--warmup", "2",
        "--threads", "1", "--ckpt-minutes", "1000",
        "--tok", os.path.join(HERE, "..", "models", "arith-tok.json")]


def run(out, *extra):
    subprocess.run([sys.executable, os.path.join(HERE, "train.py"),
                    "--out", out] + TINY + list(extra), check=True,
                   stdout=subprocess.DEVNULL)


def main():
    with tempfile.TemporaryDirectory() as d:
        whole, parts = os.path.join(d, "whole"), os.path.join(d, "parts")
        run(whole)
        run(parts, "--stop-after", "2")
        mid = torch.load(parts + "-ckpt.pt")["step"]
        run(parts, "--resume")
        a = torch.load(whole + ".pt")["model"]
        b = torch.load(parts + ".pt")["model"]
        ok = mid == 2 and a.keys() == b.keys() and \
            all(torch.equal(a[k], b[k]) for k in a)
        ga = gguf_writer.read(whole + ".gguf")
        gb = gguf_writer.read(parts + ".gguf")
        same_gguf = ga.keys() == gb.keys() and \
            all((ga[k] == gb[k]).all() for k in ga)
        print("[%s] case_resume_bit_identical (stopped at step %d)" % (
            "OK" if ok and same_gguf else "FAIL", mid))
        print("train_resume: %d passed, %d failed" % (
            (1, 0) if ok and same_gguf else (0, 1)))
        return 0 if ok and same_gguf else 1


if __name__ == "__main__":
    sys.exit(main())

"""Plots for the model card: the training loss curve, accuracy vs N, and
the learning curve (accuracy vs training tokens).

    /usr/bin/python3 train/plot.py --train models/arith-train.csv \\
        --eval models/arith-eval.json [--eval ...] [--greedy models/arith-greedy.json] \\
        --out models/
Needs Debian's python3-matplotlib. --eval is `quorum eval-set --json`.
"""
import argparse
import csv
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def loss_plot(path, out):
    rows = list(csv.DictReader(open(path)))
    step = [int(r["step"]) for r in rows]
    loss = [float(r["loss"]) for r in rows]
    level = [float(r["level"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(step, loss, color="tab:blue", label="training loss (EMA)")
    lr = [float(r["lr"]) for r in rows]
    for i in range(1, len(rows)):
        if lr[i] > 1.5 * lr[i - 1] and step[i] > 200:  # a second stage
            ax.axvline(step[i], color="tab:red", ls=":", label="stage 2")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy per solution token")
    ax2 = ax.twinx()
    ax2.plot(step, level, color="tab:gray", ls="--", label="curriculum level")
    ax2.set_ylabel("curriculum level (1 = full range)")
    ax2.set_ylim(0, 1.05)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper right")
    ax.set_title("quorum-arith training")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "arith-loss.png"), dpi=100)


def acc_plot(paths, greedy, out, name="arith-accuracy.png",
             title="held-out set"):
    """One pair of curves (majority, single sample) per eval file, e.g.
    one per temperature or with and without worked examples."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    ns = []
    problems = 0
    for k, path in enumerate(paths):
        e = json.load(open(path))
        res = e["results"]
        ns = [r["n"] for r in res]
        problems = res[0]["problems"]
        c = colors[k % len(colors)]
        label = "T=%g" % e["temperature"]
        if e.get("top_k") or e.get("top_p", 1) < 1:
            label += " (top-k %d, top-p %g)" % (e["top_k"], e["top_p"])
        if e.get("shots"):
            label += ", %d examples" % e["shots"]
        ax.plot(ns, [r["majority_accuracy"] for r in res], "o-", color=c,
                label=label + ": majority of N")
        ax.plot(ns, [r["single_sample_accuracy"] for r in res], "s--",
                color=c, alpha=0.6, label=label + ": single sample")
    if greedy:
        g = json.load(open(greedy))["results"][0]["majority_accuracy"]
        ax.axhline(g, color="tab:gray", ls=":", label="greedy")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns])
    ax.set_xlabel("samples N")
    ax.set_ylabel("accuracy on the %s (%%)" % title)
    ax.set_title("quorum-arith, self-consistency, %s, %d problems" % (
        title, problems))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=100)


def curve_plot(path, out, name="arith-curve.png"):
    """The learning curve of the pilots and the run: greedy accuracy on the
    dev set and the generated held-out set against training tokens, one
    line per run (a JSON file: {"runs": [{"name", "points": [{"tokens",
    "dev", "gen"}]}]})."""
    runs = json.load(open(path))["runs"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    for k, r in enumerate(runs):
        t = [p["tokens"] / 1e6 for p in r["points"]]
        c = colors[k % len(colors)]
        ax.plot(t, [p["dev"] for p in r["points"]], "o-", color=c,
                label=r["name"] + ": dev (hand-written)")
        if all("gen" in p for p in r["points"]):
            ax.plot(t, [p["gen"] for p in r["points"]], "s--", color=c,
                    alpha=0.5, label=r["name"] + ": generated")
    ax.set_xlabel("training tokens of the run (millions)")
    ax.set_ylabel("greedy accuracy (%)")
    ax.set_title("quorum-arith: accuracy vs training tokens")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train")
    ap.add_argument("--eval", action="append",
                    help="eval-set --json output (repeatable)")
    ap.add_argument("--greedy")
    ap.add_argument("--out", default="models")
    ap.add_argument("--name", default="arith-accuracy.png",
                    help="file name of the accuracy plot")
    ap.add_argument("--title", default="held-out set",
                    help="which set the accuracy plot is of")
    ap.add_argument("--curve", help="learning-curve JSON (runs, points)")
    a = ap.parse_args()
    if a.train:
        loss_plot(a.train, a.out)
    if a.eval:
        acc_plot(a.eval, a.greedy, a.out, a.name, a.title)
    if a.curve:
        curve_plot(a.curve, a.out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Ask a running quorum cluster one question, then show the cluster.

    clients/python/gen_pb.sh               # once: build/python/quorum_pb2.py
    /usr/bin/python3 clients/python/example.py "What is 6*7?"
    /usr/bin/python3 clients/python/example.py --json -n 4 "What is 6*7?"

Exit status: 0 answered, 1 failed, 3 the cluster is busy (as `quorum ask`).
"""
import argparse
import json
import sys

from quorum_client import DEFAULT_ENDPOINT, QuorumClient


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("question")
    ap.add_argument("--endpoint", default=DEFAULT_ENDPOINT)
    ap.add_argument("-n", type=int, help="samples (default: the cluster's)")
    ap.add_argument("--max-new-tokens", type=int)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds per attempt (default 60)")
    ap.add_argument("--server-key", help="CURVE: the coordinator's public "
                    "key file")
    ap.add_argument("--client-key", help="CURVE: this client's secret key "
                    "file")
    ap.add_argument("--json", action="store_true",
                    help="print {\"ask\": ..., \"status\": ...} as JSON")
    a = ap.parse_args()

    with QuorumClient(a.endpoint, timeout=a.timeout,
                      server_key=a.server_key,
                      client_key=a.client_key) as qc:
        r = qc.ask(a.question, n=a.n, seed=a.seed,
                   max_new_tokens=a.max_new_tokens)
        s = qc.status() if r["status"] != "NO_REPLY" else None
    if a.json:
        print(json.dumps({"ask": r, "status": s}, indent=2))
    else:
        if r["status"] != "STATUS_OK":
            print("error: %s: %s" % (r["status"], r["error"]),
                  file=sys.stderr)
        else:
            votes = ", ".join("%s x%d" % (v["answer"], v["count"])
                              for v in r["votes"])
            print("answer: %s  (votes: %s; %d samples)"
                  % (r["answer"], votes or "none", len(r["samples"])))
            t = r["timings"] or {}
            print("total %.1f ms, %s tokens"
                  % (t.get("total_ms") or 0, t.get("generated_tokens")))
        if s and s["status"] == "STATUS_OK":
            print("cluster %s: %d worker(s), %s served, queue %s"
                  % (s["cluster"], len(s["workers"]), s["requests_served"],
                     s["queue_depth"]))
    return {"STATUS_OK": 0, "STATUS_BUSY": 3}.get(r["status"], 1)


if __name__ == "__main__":
    sys.exit(main())

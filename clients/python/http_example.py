#!/usr/bin/python3
"""Ask a quorum cluster through its HTTP gateway (`quorum serve`) with only
the standard library: the OpenAI chat-completions request, the choices,
and the vote in the response's "quorum" object.

    clients/python/http_example.py [--base-url URL] [--key KEY] [-n N]
                                   [--seed S] [--max-tokens K] [--stream]
                                   "question"

--base-url defaults to http://127.0.0.1:8080/v1 (the gateway's default
listen address); --key (or $QUORUM_API_KEY) is sent as a Bearer token when
given. With --stream the answer arrives as Server-Sent Events and each
choice's text is reassembled from its chunks. Exit status: 0 answered,
1 an HTTP or protocol error (printed), 2 usage.
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request


def post(url, body, key, timeout):
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", "Bearer " + key)
    return urllib.request.urlopen(req, timeout=timeout)


def read_stream(resp):
    """Reassembles an SSE stream: (texts by index, finish by index, the
    chunk with the quorum object: the last finish). Raises ValueError on
    an error event or a stream without [DONE]."""
    texts, finish, last = {}, {}, None
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\n")
        if not line.startswith("data: "):
            continue  # blank separators and ": keep-alive" comments
        data = line[6:]
        if data == "[DONE]":
            return texts, finish, last
        chunk = json.loads(data)
        if "error" in chunk:
            raise ValueError(chunk["error"]["message"])
        for c in chunk["choices"]:
            i = c["index"]
            texts[i] = texts.get(i, "") + (c["delta"].get("content") or "")
            if c["finish_reason"]:
                finish[i] = c["finish_reason"]
        if "quorum" in chunk:
            last = chunk
    raise ValueError("the stream ended without [DONE]")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("question")
    ap.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--key", default=os.environ.get("QUORUM_API_KEY"))
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()

    body = {"n": a.n,
            "messages": [{"role": "user", "content": a.question}]}
    if a.seed is not None:
        body["seed"] = a.seed
    if a.max_tokens is not None:
        body["max_tokens"] = a.max_tokens
    if a.stream:
        body["stream"] = True
    url = a.base_url.rstrip("/") + "/chat/completions"
    try:
        with post(url, body, a.key, a.timeout) as resp:
            if a.stream:
                texts, finish, last = read_stream(resp)
                choices = [{"index": i, "text": texts[i],
                            "finish_reason": finish.get(i)}
                           for i in sorted(texts)]
                q = last["quorum"]
            else:
                r = json.load(resp)
                choices = [{"index": c["index"],
                            "text": c["message"]["content"],
                            "finish_reason": c["finish_reason"]}
                           for c in r["choices"]]
                q = r["quorum"]
    except urllib.error.HTTPError as e:
        try:
            err = json.load(e)["error"]
            print("error: HTTP %d %s: %s" % (e.code, err.get("code"),
                                              err["message"]),
                  file=sys.stderr)
        except (ValueError, KeyError):
            print("error: HTTP %d" % e.code, file=sys.stderr)
        return 1
    except (urllib.error.URLError, ValueError, KeyError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1

    print("answer: %s  (agreement %.0f%%, %d of %d samples voted)" % (
        q["answer"], 100 * q["agreement"], q["voters"], q["samples"]))
    for v in q["votes"]:
        print("  %4d  %s" % (v["count"], v["answer"]))
    for c in choices:
        print("--- choice %d (%s): %r" % (c["index"], c["finish_reason"],
                                         c["text"][:200]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

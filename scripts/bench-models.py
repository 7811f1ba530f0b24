#!/usr/bin/env python3
"""How `minfer serve` shares the CPU between models decoding at once.

Two measurements, each in ROUNDS rounds (median and range reported):
  same:      two copies of model A (two files, so two engines with their own KV caches), one client
             on each, decoding TOKENS tokens at once: each client's tokens/s while both decode, and
             the slower one's rate over the faster one's (the goal: within 20 %, >= 0.80);
  different: model A and model B, one client each: each one's tokens/s while both decode, and A's
             share of the steps taken meanwhile (one token per step: the goal is 0.5), beside each
             model's rate alone.
The clients stream /v1/completions with ignore_eos so that every answer is TOKENS tokens long, and
with logprobs so that each chunk says how many tokens it carries.

Usage: scripts/bench-models.py [--model-a A.gguf] [--model-b B.gguf] [--tokens N] [--rounds R] [--json]
Default models: build/bench-models/qwen2-0.5b-q4_0.gguf and llama-1.1b-q4_0.gguf
(scripts/make-bench-models.sh writes them). MINFER_SERVE_ARGS adds options to the servers'.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_server(minfer, models, threads):
    proc = subprocess.Popen([minfer, "serve", *models, "--port", "0", "-np", "1", "--ctx", "1024",
                             "-t", str(threads), "--no-access-log", "--keep-alive", "-1", *os.environ.get("MINFER_SERVE_ARGS", "").split()],
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        m = re.search(r"listening on (http://\S+?)(,|$)", line.strip())
        if m:
            url = m.group(1)
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            deadline = time.time() + 600
            while time.time() < deadline:  # one model loads at start: /health says when
                try:
                    with urllib.request.urlopen(url + "/health", timeout=5):
                        return proc, url
                except OSError:
                    time.sleep(0.2)
            raise SystemExit("bench-models: the server did not become ready")
    raise SystemExit("bench-models: the server did not start")


def stream_completion(url, model, tokens, out):
    """Streams one completion; appends the arrival time of every token to out. (A chunk may carry
    several tokens, or none while a character is incomplete: the tokens are counted from its
    log-probabilities.)"""
    body = json.dumps({"model": model, "prompt": "Once upon a time", "max_tokens": tokens,
                       "ignore_eos": True, "stream": True, "temperature": 0,
                       "logprobs": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: {"):
                logprobs = json.loads(line[6:])["choices"][0].get("logprobs") or {}
                now = time.monotonic()
                out.extend(now for _ in logprobs.get("tokens", []))


def together(url, models, tokens):
    """Both clients at once: each one's token times."""
    times = [[] for _ in models]
    threads = [threading.Thread(target=stream_completion, args=(url, m, tokens, t))
               for m, t in zip(models, times)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def overlap_rates(times):
    """Tokens/s of each client counted while both were decoding, and the tokens each got then."""
    start = max(t[0] for t in times)
    end = min(t[-1] for t in times)
    span = max(end - start, 1e-9)
    counts = [sum(1 for x in t if start <= x <= end) for t in times]
    return [c / span for c in counts], counts


def alone_rate(url, model, tokens):
    times = []
    stream_completion(url, model, tokens, times)
    return (len(times) - 1) / (times[-1] - times[0])


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-a", default=os.path.join(ROOT, "build/bench-models/qwen2-0.5b-q4_0.gguf"))
    p.add_argument("--model-b", default=os.path.join(ROOT, "build/bench-models/llama-1.1b-q4_0.gguf"))
    p.add_argument("--minfer", default=os.path.join(ROOT, "build/release/minfer"))
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="-t for the server (0: every CPU)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    for m in (a.model_a, a.model_b):
        if not os.path.exists(m):
            raise SystemExit(f"bench-models: {m} is missing (scripts/make-bench-models.sh writes it)")
    scratch = tempfile.mkdtemp(prefix="minfer-bench-models-")
    copy = os.path.join(scratch, "copy-of-" + os.path.basename(a.model_a))
    os.symlink(os.path.abspath(a.model_a), copy)
    stem = lambda path: os.path.basename(path)[:-5]
    result = {}
    try:
        # Two copies of A.
        proc, url = start_server(a.minfer, [a.model_a, copy], a.threads)
        ids = [stem(a.model_a), stem(copy)]
        try:
            for m in ids:
                alone_rate(url, m, 8)  # load and warm
            ratios, rates = [], []
            for _ in range(a.rounds):
                r, _ = overlap_rates(together(url, ids, a.tokens))
                rates.append(r)
                ratios.append(min(r) / max(r))
            result["same"] = {"model": stem(a.model_a), "ratio": summary(ratios),
                              "tokens_per_s": [summary([r[i] for r in rates]) for i in range(2)]}
        finally:
            proc.terminate()
            proc.wait()
        # A and B.
        proc, url = start_server(a.minfer, [a.model_a, a.model_b], a.threads)
        ids = [stem(a.model_a), stem(a.model_b)]
        try:
            alone = {m: [] for m in ids}
            shares, rates = [], []
            for m in ids:
                alone_rate(url, m, 8)
            for _ in range(a.rounds):
                for m in ids:
                    alone[m].append(alone_rate(url, m, a.tokens))
                r, counts = overlap_rates(together(url, ids, a.tokens))
                rates.append(r)
                shares.append(counts[0] / sum(counts))
            result["different"] = {
                "models": ids, "share_of_steps_a": summary(shares),
                "tokens_per_s": [summary([r[i] for r in rates]) for i in range(2)],
                "alone_tokens_per_s": [summary(alone[m]) for m in ids]}
        finally:
            proc.terminate()
            proc.wait()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    if a.json:
        print(json.dumps(result, indent=2))
        return
    f = lambda s, d=1: f"{s['median']:.{d}f} ({s['min']:.{d}f}-{s['max']:.{d}f})"
    same = result["same"]
    print(f"two copies of {same['model']}, {a.tokens} tokens each, {a.rounds} rounds (median (range)):")
    print(f"  tokens/s while both decode: {f(same['tokens_per_s'][0])} and {f(same['tokens_per_s'][1])}")
    print(f"  slower / faster: {f(same['ratio'], 2)}  (goal >= 0.80)")
    d = result["different"]
    print(f"{d['models'][0]} and {d['models'][1]} at once:")
    for i, m in enumerate(d["models"]):
        print(f"  {m}: {f(d['tokens_per_s'][i])} tokens/s together, {f(d['alone_tokens_per_s'][i])} alone")
    print(f"  {d['models'][0]}'s share of the steps: {f(d['share_of_steps_a'], 2)}  (goal 0.50)")


if __name__ == "__main__":
    main()

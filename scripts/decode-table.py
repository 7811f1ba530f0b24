#!/usr/bin/env python3
"""Measures the decode table of docs/speed.md on this machine.

Runs `minfer bench MODEL -p 512 -n 128 -t 2 -r 3` on each model of scripts/make-bench-models.sh
that is present, in passes (each pass every model once, so that a slow minute of a shared machine
hits one figure of a range, not a whole row), and prints a Markdown table of ranges over the
passes: tokens/s, the weights' read rate while decoding, its fraction of the read bandwidth
`bench` measured beside it (in brackets), prefill, the engine's start and the peak resident
memory. With --no-repack each model also runs with the weights in the file's layout, alternating
with the repacked run.

  scripts/decode-table.py [--models DIR] [--passes 2] [--threads 2] [--no-repack] [MODEL ...]
"""

import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The rows in docs/speed.md's order (file names from make-bench-models.sh).
MODELS = [
    ("Qwen2 0.5B Q4_0", "qwen2-0.5b-q4_0.gguf"),
    ("Qwen2 0.5B Q8_0", "qwen2-0.5b-q8_0.gguf"),
    ("Qwen2 0.5B Q4_K_M", "qwen2-0.5b-q4_k_m.gguf"),
    ("Qwen2 0.5B F16", "qwen2-0.5b-f16.gguf"),
    ("Llama 1.1B Q4_0", "llama-1.1b-q4_0.gguf"),
    ("Llama 1.1B Q4_K_M", "llama-1.1b-q4_k_m.gguf"),
    ("Llama 1.1B F16", "llama-1.1b-f16.gguf"),
    ("qwen3moe-16x768 Q4_K_M", "qwen3moe-16x768-q4_k_m.gguf"),
    ("qwen3moe-16x768 F16", "qwen3moe-16x768-f16.gguf"),
    ("gemma2-2b Q4_K_M", "gemma2-2b-q4_k_m.gguf"),
    ("gemma2-2b F16", "gemma2-2b-f16.gguf"),
]


def run_bench(minfer, model, threads, repack):
    """One `bench` run; returns its figures (None where bench printed none)."""
    cmd = [str(minfer), "bench", str(model), "-p", "512", "-n", "128", "-t", str(threads),
           "-r", "3"]
    if not repack:
        cmd.append("--no-repack")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"decode-table: {' '.join(cmd)} failed ({done.returncode}): "
                 f"{done.stderr.strip().splitlines()[-1:]}")
    out = done.stdout + done.stderr

    def number(pattern):
        m = re.search(pattern, out)
        return float(m.group(1)) if m else None

    kernels = re.search(r"Kernels: (.*)", out)
    roofline = re.search(r"tg128 x1: ([\d.]+) GB/s of ([\d.]+) GB/s .*= (\d+)%", out)
    return {
        "pp": number(r"\|\s+pp512 \|\s+([\d.]+)"),
        "tg": number(r"\|\s+tg128 \|\s+([\d.]+)"),
        "engine_ms": number(r"engine ([\d.]+) ms"),
        "peak_mb": number(r"Peak resident memory: ([\d.]+) MB"),
        "read": float(roofline.group(1)) if roofline else None,
        "bandwidth": float(roofline.group(2)) if roofline else None,
        "fraction": int(roofline.group(3)) if roofline else None,
        "kernels": kernels.group(1) if kernels else "?",
    }


def span(values, fmt="{:.1f}"):
    """'a-b' over the passes ('a' where they agree, '?' where bench printed nothing)."""
    values = [v for v in values if v is not None]
    if not values:
        return "?"
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low}-{high}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="GGUF files (default: every known model in "
                        "--models)")
    parser.add_argument("--models", dest="models_dir", default=str(ROOT / "build/bench-models"),
                        help="folder of scripts/make-bench-models.sh's output (default: "
                        "build/bench-models)")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-repack", action="store_true",
                        help="also measure --no-repack, alternating with the repacked runs")
    parser.add_argument("--minfer", default=str(ROOT / "build/release/minfer"))
    args = parser.parse_args()
    if args.passes < 1:
        sys.exit("decode-table: --passes must be at least 1")

    if args.models:
        rows = [(pathlib.Path(m).stem, pathlib.Path(m)) for m in args.models]
    else:
        rows = [(name, pathlib.Path(args.models_dir) / f) for name, f in MODELS]
        rows = [(name, path) for name, path in rows if path.is_file()]
    missing = [str(p) for _, p in rows if not p.is_file()]
    if missing or not rows:
        sys.exit(f"decode-table: no such model: {', '.join(missing) or args.models_dir} "
                 "(scripts/make-bench-models.sh writes them)")

    results = {name: {"repack": [], "file": []} for name, _ in rows}
    for n in range(args.passes):
        for name, path in rows:
            print(f"pass {n + 1}/{args.passes}: {name}", file=sys.stderr, flush=True)
            results[name]["repack"].append(run_bench(args.minfer, path, args.threads, True))
            if args.no_repack:
                results[name]["file"].append(run_bench(args.minfer, path, args.threads, False))

    first = results[rows[0][0]]["repack"][0]
    print(f"{args.threads} threads, kernels: {first['kernels']}; ranges over {args.passes} "
          "pass(es); the bandwidth beside each run in brackets\n")
    head = ["model", "tg128", "decode read", "fraction of bandwidth", "pp512", "engine start",
            "peak resident"]
    if args.no_repack:
        head += ["tg128 --no-repack", "pp512 --no-repack", "peak --no-repack"]
    print("| " + " | ".join(head) + " |")
    print("| --- |" + " ---: |" * (len(head) - 1))
    for name, _ in rows:
        runs = results[name]["repack"]
        fractions = ", ".join(f"{r['fraction']} % ({r['bandwidth']:.1f})" for r in runs
                              if r["fraction"] is not None) or "?"
        cells = [name, span([r["tg"] for r in runs]),
                 span([r["read"] for r in runs]) + " GB/s", fractions,
                 span([r["pp"] for r in runs], "{:.0f}"),
                 span([r["engine_ms"] / 1000 if r["engine_ms"] else None for r in runs]) + " s",
                 span([r["peak_mb"] for r in runs], "{:.0f}") + " MB"]
        if args.no_repack:
            plain = results[name]["file"]
            cells += [span([r["tg"] for r in plain]), span([r["pp"] for r in plain], "{:.0f}"),
                      span([r["peak_mb"] for r in plain], "{:.0f}") + " MB"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""minfer beside llama.cpp and ik_llama.cpp, in alternating short runs, so that a ratio means the
engines and not the minute.

A 2-vCPU VM's memory bandwidth moves by tens of percent from minute to minute (other tenants), so
a table that runs each engine for minutes in turn measures the drift. Here every round runs every
configuration once on each model (`-r 1`), in an order that rotates from round to round, and
samples the read bandwidth (build/release/tools/machine_limits) between the runs. Each round gives
a paired ratio, minfer over the fastest peer configuration of that round; the report is the median
and range of those ratios over the rounds, beside each engine's median tokens/s and decode's
fraction of the bandwidth sampled around its run (weight bytes a step, from minfer's bench, times
steps a second).

Configurations: minfer; llama.cpp plain and -fa 1; ik_llama.cpp plain and -rtr 1 -fa 1 (its
fastest on CPUs). The peers come from ../shared/tools/build-peers.sh (default /tmp/peer).

  scripts/bench-peers.py                       # the five-model table, 5 rounds (about 30 minutes)
  scripts/bench-peers.py --extra               # also Qwen2 0.5B Q6_K, Q5_K_M and IQ4_XS
  scripts/bench-peers.py --models a.gguf,b.gguf --rounds 3 -p 128 -n 32
  scripts/bench-peers.py --ratio='-np 16 -p 0 -n 64 | -np 1 -p 0 -n 64' --models m.gguf
                        # minfer against itself: the ratio of two bench settings, alternated
  scripts/bench-peers.py --servers --models m.gguf -p 128 -n 128 --rounds 3
                        # the servers at 16 streamed clients (minfer bench-serve), and minfer
                        # bench -np 16 with the same lengths

The models are quantized by llama.cpp's llama-quantize (the same files for every engine) from the
F16 models scripts/make-bench-models.sh writes, into build/bench-models/by-llama-quantize/, once.
--json FILE writes every run and the summary; the markdown table goes to stdout, progress to stderr.
"""

import argparse
import json
import os
import statistics
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINFER = os.path.join(ROOT, "build/release/minfer")
LIMITS = os.path.join(ROOT, "build/release/tools/machine_limits")
MODELS = os.path.join(ROOT, "build/bench-models")
QUANTIZED = os.path.join(MODELS, "by-llama-quantize")

# (name in the table, F16 source, llama-quantize type)
TABLE = [
    ("Qwen2 0.5B Q4_0", "qwen2-0.5b-f16.gguf", "Q4_0"),
    ("Qwen2 0.5B Q8_0", "qwen2-0.5b-f16.gguf", "Q8_0"),
    ("Qwen2 0.5B Q4_K_M", "qwen2-0.5b-f16.gguf", "Q4_K_M"),
    ("Llama 1.1B Q4_0", "llama-1.1b-f16.gguf", "Q4_0"),
    ("Llama 1.1B Q4_K_M", "llama-1.1b-f16.gguf", "Q4_K_M"),
]
EXTRA = [
    ("Qwen2 0.5B Q6_K", "qwen2-0.5b-f16.gguf", "Q6_K"),
    ("Qwen2 0.5B Q5_K_M", "qwen2-0.5b-f16.gguf", "Q5_K_M"),
    ("Qwen2 0.5B IQ4_XS", "qwen2-0.5b-f16.gguf", "IQ4_XS"),
]


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def run_json(cmd, timeout=1800):
    """Runs a command that prints JSON on stdout; the parsed value (an error names the command)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-600:]}")
    out = proc.stdout
    start = min(i for i in (out.find("["), out.find("{")) if i >= 0)  # llama-bench may log first
    return json.loads(out[start:])


def read_bandwidth(threads):
    return run_json([LIMITS, "-t", str(threads), "--only", "read"])["read_gbps"] * 1e9


def peer_configs(peers):
    llama = os.path.join(peers, "llama.cpp/build/bin/llama-bench")
    ik = os.path.join(peers, "ik_llama.cpp/build/bin/llama-bench")
    configs = []
    if os.access(llama, os.X_OK):
        configs += [("llama.cpp", [llama]), ("llama.cpp -fa 1", [llama, "-fa", "1"])]
    if os.access(ik, os.X_OK):
        configs += [("ik_llama.cpp", [ik]), ("ik_llama.cpp -rtr 1 -fa 1", [ik, "-rtr", "1", "-fa", "1"])]
    return configs


def quantized_model(peers, source, qtype):
    """build/bench-models/by-llama-quantize/<source stem>-<type>.gguf, written once."""
    os.makedirs(QUANTIZED, exist_ok=True)
    out = os.path.join(QUANTIZED, source.replace("-f16.gguf", f"-{qtype.lower()}.gguf"))
    if os.path.exists(out):
        return out
    src = os.path.join(MODELS, source)
    if not os.path.exists(src):
        sys.exit(f"bench-peers: {src} is missing: run scripts/make-bench-models.sh first")
    quantize = os.path.join(peers, "llama.cpp/build/bin/llama-quantize")
    if not os.access(quantize, os.X_OK):
        sys.exit(f"bench-peers: {quantize} is missing: run ../shared/tools/build-peers.sh first")
    log(f"bench-peers: quantizing {source} to {qtype} with llama-quantize")
    subprocess.run([quantize, src, out + ".tmp", qtype, str(os.cpu_count())], check=True,
                   capture_output=True)
    os.replace(out + ".tmp", out)
    return out


def minfer_run(model, args, threads):
    rows = run_json([MINFER, "bench", model, *args, "-r", "1", "-t", str(threads), "--json"])
    return rows


def summarize(values):
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt_range(s, digits=1):
    if s is None:
        return "-"
    if round(s["min"], digits) == round(s["max"], digits):
        return f"{s['median']:.{digits}f}"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def side_by_side(opts, models, configs):
    runs = []  # every run: round, model, engine, pp, tg, bandwidth around it
    names = ["minfer"] + [name for name, _ in configs]
    for rnd in range(opts.rounds):
        for mi, (label, path) in enumerate(models):
            order = names[(rnd + mi) % len(names):] + names[:(rnd + mi) % len(names)]
            for name in order:
                before = read_bandwidth(opts.threads)
                t0 = time.time()
                if name == "minfer":
                    rows = minfer_run(path, ["-p", str(opts.p), "-n", str(opts.n)], opts.threads)
                else:
                    cmd = dict(configs)[name]
                    rows = run_json([*cmd, "-m", path, "-p", str(opts.p), "-n", str(opts.n), "-r", "1",
                                     "-t", str(opts.threads), "-o", "json"])
                after = read_bandwidth(opts.threads)
                pp = next((r["avg_ts"] for r in rows if r["n_prompt"] > 0 and r["n_gen"] == 0), None)
                tg_row = next((r for r in rows if r["n_gen"] > 0 and r["n_prompt"] == 0), {})
                run = {"round": rnd, "model": label, "engine": name, "pp": pp, "tg": tg_row.get("avg_ts"),
                       "bandwidth": [before, after], "seconds": time.time() - t0}
                if name == "minfer":
                    run["step_bytes"] = tg_row.get("decode_bytes_per_step")
                    run["kernels_by_type"] = tg_row.get("kernels_by_type")
                runs.append(run)
                log(f"round {rnd + 1}/{opts.rounds} {label:<20} {name:<26} pp {pp or 0:8.1f}  "
                    f"tg {run['tg'] or 0:7.1f}  read {before / 1e9:5.1f}/{after / 1e9:5.1f} GB/s  "
                    f"{run['seconds']:.0f} s")
    return runs, names


def report(opts, runs, names, models, machine):
    summary = []
    for label, _ in models:
        mine = [r for r in runs if r["model"] == label]
        step_bytes = next((r["step_bytes"] for r in mine if r.get("step_bytes")), None)
        row = {"model": label, "engines": {}}
        for name in names:
            rs = [r for r in mine if r["engine"] == name]
            fractions = [r["tg"] * step_bytes / max(r["bandwidth"]) for r in rs if r["tg"] and step_bytes]
            row["engines"][name] = {"pp": summarize([r["pp"] for r in rs if r["pp"]]),
                                    "tg": summarize([r["tg"] for r in rs if r["tg"]]),
                                    "tg_bandwidth_fraction": summarize(fractions)}
        for test in ("pp", "tg"):
            ratios, best_names = [], []
            for rnd in range(opts.rounds):
                this = {r["engine"]: r[test] for r in mine if r["round"] == rnd and r[test]}
                peers = {k: v for k, v in this.items() if k != "minfer"}
                if "minfer" in this and peers:
                    best = max(peers, key=peers.get)
                    ratios.append(this["minfer"] / peers[best])
                    best_names.append(best)
            row[f"{test}_ratio"] = summarize(ratios)
            row[f"{test}_best_peer"] = max(set(best_names), key=best_names.count) if best_names else None
        summary.append(row)

    print(f"\nMachine: {machine['cpu']}, minfer's kernels {machine['kernels']}, {opts.threads} threads; "
          f"read bandwidth {fmt_range(machine['read_gbps'])} GB/s over the runs; int8 peak "
          f"{machine['int8_tops']:.2f} TOP/s; {opts.rounds} rounds of -p {opts.p} -n {opts.n} -r 1.\n")
    peers = names[1:]
    print("| model | test | minfer | " + " | ".join(peers) + " | minfer / best peer (median, range) | best peer |")
    print("| --- | --- | ---: | " + " | ".join("---:" for _ in peers) + " | ---: | --- |")
    for row in summary:
        for test, length in (("pp", opts.p), ("tg", opts.n)):
            if length == 0:
                continue
            cells = [fmt_range(row["engines"][n][test]) for n in names]
            ratio = row[f"{test}_ratio"]
            print(f"| {row['model']} | {test}{length} | " + " | ".join(cells) +
                  f" | {fmt_range(ratio, 2)} | {row[f'{test}_best_peer'] or '-'} |")
    if opts.n > 0:
        print("\nDecode's fraction of the read bandwidth sampled around each run (median, range):\n")
        print("| model | " + " | ".join(names) + " |")
        print("| --- | " + " | ".join("---:" for _ in names) + " |")
        for row in summary:
            cells = []
            for n in names:
                f = row["engines"][n]["tg_bandwidth_fraction"]
                cells.append("-" if f is None else
                             f"{100 * f['median']:.0f} % ({100 * f['min']:.0f}-{100 * f['max']:.0f})")
            print(f"| {row['model']} | " + " | ".join(cells) + " |")
    return summary


def ratio_mode(opts, models):
    """minfer against itself: the ratio of two bench settings, alternated round by round."""
    a, b = (part.strip() for part in opts.ratio.split("|"))
    out = []
    for label, path in models:
        ratios, rates = [], {a: [], b: []}
        for rnd in range(opts.rounds):
            pair = (a, b) if rnd % 2 == 0 else (b, a)
            got = {}
            for args in pair:
                rows = minfer_run(path, args.split(), opts.threads)
                got[args] = rows[-1]["avg_ts"]
                rates[args].append(got[args])
            ratios.append(got[a] / got[b])
            log(f"round {rnd + 1}/{opts.rounds} {label}: [{a}] {got[a]:.1f}  [{b}] {got[b]:.1f} t/s  "
                f"ratio {ratios[-1]:.2f}")
        row = {"model": label, "a": a, "b": b, "ratio": summarize(ratios),
               "a_ts": summarize(rates[a]), "b_ts": summarize(rates[b])}
        out.append(row)
        print(f"| {label} | `{a}` {fmt_range(row['a_ts'])} t/s | `{b}` {fmt_range(row['b_ts'])} t/s | "
              f"ratio {fmt_range(row['ratio'], 2)} over {opts.rounds} rounds |")
    return out


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(cmd, port):
    """Starts a server and waits until /health answers 200 (llama-server says 503 while loading)."""
    # In the temporary directory: ik_llama.cpp's server writes llama.log where it starts.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=tempfile.gettempdir())
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode} while starting")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"{' '.join(cmd)} did not answer /health within 300 s")


def server_mode(opts, models):
    """minfer serve beside llama-server (-fa) and ik_llama.cpp's (-rtr -fa on), 16 slots each, one
    bench-serve row at --clients concurrent streamed requests, and minfer bench -np with the same
    lengths (its time counts the prefill too), alternated round by round."""
    clients, p, n = opts.clients, opts.p, opts.n
    ctx = 2 * p + n + 64  # a slot's context: the prompt (about p tokens of random words), the answer
    llama = os.path.join(opts.peers, "llama.cpp/build/bin/llama-server")
    ik = os.path.join(opts.peers, "ik_llama.cpp/build/bin/llama-server")
    out = []
    for label, path in models:
        path = os.path.abspath(path)  # the servers start in the temporary directory
        servers = [("minfer serve", lambda port: [MINFER, "serve", path, "--port", str(port), "-np", str(clients),
                                                  "--ctx", str(ctx), "-t", str(opts.threads), "--no-access-log"])]
        if os.access(llama, os.X_OK):
            servers.append(("llama-server -fa", lambda port: [llama, "-m", path, "--port", str(port), "-np", str(clients),
                                                              "-c", str(clients * ctx), "-t", str(opts.threads), "-fa"]))
        if os.access(ik, os.X_OK):
            servers.append(("ik_llama.cpp server -rtr -fa on",
                            lambda port: [ik, "-m", path, "--port", str(port), "-np", str(clients), "-c",
                                          str(clients * ctx), "-t", str(opts.threads), "-rtr", "-fa", "on"]))
        names = [name for name, _ in servers] + ["minfer bench"]
        runs = []
        for rnd in range(opts.rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for name in order:
                if name == "minfer bench":
                    rows = minfer_run(path, ["-np", str(clients), "-p", str(p), "-n", str(n)], opts.threads)
                    run = {"round": rnd, "engine": name, "tokens_per_second": rows[-1]["avg_ts"]}
                else:
                    port = free_port()
                    proc = start_server(dict(servers)[name](port), port)
                    try:
                        row = run_json([MINFER, "bench-serve", f"http://127.0.0.1:{port}", "--concurrency",
                                        str(clients), "--requests", str(2 * clients), "--prompt-tokens", str(p),
                                        "--gen-tokens", str(n), "--json"])[0]
                    finally:
                        proc.terminate()
                        proc.wait(timeout=60)
                    if row["failed"]:  # reported, and the round is left out of the ratios
                        log(f"round {rnd + 1}/{opts.rounds} {label}: {name}: {row['failed']} of "
                            f"{row['requests']} requests failed, the first: {row.get('first_error', '?')}")
                        runs.append({"round": rnd, "engine": name, "failed": row["failed"]})
                        continue
                    run = {"round": rnd, "engine": name, "tokens_per_second": row["tokens_per_second"],
                           "ttft_p50_s": row["ttft_p50_s"]}
                runs.append(run)
                log(f"round {rnd + 1}/{opts.rounds} {label:<20} {name:<32} {run['tokens_per_second']:7.1f} t/s"
                    + (f"  TTFT p50 {run['ttft_p50_s']:.2f} s" if "ttft_p50_s" in run else ""))
        peers_, ratios, of_bench, ttft_ratios = [n_ for n_ in names if n_ not in ("minfer serve", "minfer bench")], [], [], []
        for rnd in range(opts.rounds):
            this = {r["engine"]: r for r in runs if r["round"] == rnd}
            if any("failed" in r for r in this.values()):
                continue
            best = max(peers_, key=lambda k: this[k]["tokens_per_second"]) if peers_ else None
            if best:
                ratios.append(this["minfer serve"]["tokens_per_second"] / this[best]["tokens_per_second"])
                fastest_ttft = min(this[k]["ttft_p50_s"] for k in peers_)
                ttft_ratios.append(this["minfer serve"]["ttft_p50_s"] / fastest_ttft)
            of_bench.append(this["minfer serve"]["tokens_per_second"] / this["minfer bench"]["tokens_per_second"])
        row = {"model": label, "runs": runs, "ratio_to_best_peer": summarize(ratios),
               "ratio_to_bench": summarize(of_bench), "ttft_ratio_to_best_peer": summarize(ttft_ratios),
               "failed_runs": [r for r in runs if "failed" in r],
               "engines": {k: {"tokens_per_second": summarize([r["tokens_per_second"] for r in runs
                                                                if r["engine"] == k and "failed" not in r]),
                               "ttft_p50_s": summarize([r["ttft_p50_s"] for r in runs if r["engine"] == k and "ttft_p50_s" in r])}
                           for k in names}}
        out.append(row)
        print(f"\n{label}: {clients} clients, prompts of about {p} tokens, {n} generated, {opts.rounds} rounds\n")
        print("| | aggregate tokens/s | TTFT p50 |")
        print("| --- | ---: | ---: |")
        for k in names:
            e = row["engines"][k]
            print(f"| {k} | {fmt_range(e['tokens_per_second'])} | {fmt_range(e['ttft_p50_s'], 2)} |")
        print(f"\nminfer serve / best peer server: {fmt_range(row['ratio_to_best_peer'], 2)}; "
              f"TTFT p50 / best peer's: {fmt_range(row['ttft_ratio_to_best_peer'], 2)}; "
              f"minfer serve / minfer bench -np {clients} -p {p} -n {n}: {fmt_range(row['ratio_to_bench'], 2)}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated GGUF files (default: the table's, by llama-quantize)")
    ap.add_argument("--extra", action="store_true", help="add the Q6_K, Q5_K_M and IQ4_XS rows")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--peers", default=os.environ.get("MINFER_PEERS", "/tmp/peer"))
    ap.add_argument("--ratio", metavar="'ARGS_A | ARGS_B'",
                    help="minfer bench arguments of two settings, split by |: report A's t/s over "
                         "B's (write --ratio='...': the arguments start with a dash)")
    ap.add_argument("--servers", action="store_true",
                    help="compare the servers instead: minfer serve, llama-server -fa, ik_llama.cpp's "
                         "-rtr -fa on, at --clients streamed clients (-p, -n: their lengths)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--json", help="write every run and the summary to this file")
    opts = ap.parse_args()
    if opts.rounds < 1:
        sys.exit("bench-peers: --rounds must be at least 1")
    if opts.ratio and opts.ratio.count("|") != 1:
        sys.exit("bench-peers: --ratio takes two settings split by one |: --ratio='-np 16 | -np 1'")
    for tool in (MINFER, LIMITS):
        if not os.access(tool, os.X_OK):
            sys.exit(f"bench-peers: {tool} is missing: cmake --build --preset release")

    if opts.models:
        models = [(os.path.basename(m), m) for m in opts.models.split(",")]
        for _, m in models:
            if not os.path.exists(m):
                sys.exit(f"bench-peers: {m}: no such file")
    else:
        models = [(label, quantized_model(opts.peers, src, q)) for label, src, q in
                  TABLE + (EXTRA if opts.extra else [])]

    limits = run_json([LIMITS, "-t", str(opts.threads)])
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    if opts.ratio:
        result = {"ratio": ratio_mode(opts, models)}
    elif opts.servers:
        result = {"servers": server_mode(opts, models)}
    else:
        configs = peer_configs(opts.peers)
        if not configs:
            sys.exit(f"bench-peers: no peer's llama-bench under {opts.peers}: run ../shared/tools/build-peers.sh")
        runs, names = side_by_side(opts, models, configs)
        samples = [bw / 1e9 for r in runs for bw in r["bandwidth"]]
        machine = {"cpu": cpu, "kernels": limits["kernels"], "read_gbps": summarize(samples),
                   "int8_tops": limits["int8_tops"]}
        result = {"machine": machine, "runs": runs, "summary": report(opts, runs, names, models, machine)}
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

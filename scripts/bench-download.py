#!/usr/bin/env python3
"""minfer pull against curl -o, the same file from the same local server, rounds rotating.

Usage: scripts/bench-download.py [--size-mib N] [--rounds N] [--minfer PATH] [--rate BYTES_PER_S]

Serves a file of random bytes through tests/hub/fake_hub.py as a Hugging Face repository (so the
pull checks the sha256 the hub announces, syncs the file and renames it, as for a real model) and
downloads it in rounds that rotate three clients: `curl -L -o` (writes the bytes, nothing else),
the same followed by `sync FILE` (durable, as minfer's file is), and `minfer pull
hf:bench/big:Q8_0` (a fresh cache each round). Prints each round's MB/s (MB = 10^6 bytes, API
requests included for minfer), the CPU seconds each client used, the medians and minfer's median
as a fraction of each curl's. The file's page cache is warmed first; the download
directories are on the same file system (the scratch directory, --dir), and every round starts
after a sync, with no earlier round's writeback in flight. curl's rounds end with the file in the
page cache; minfer's with it on the disk (fsync before the rename).
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMIT = "b" * 40


def child_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd, env):
    cpu_before, start = child_cpu_seconds(), time.monotonic()
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit("%s failed (%d): %s" % (cmd[0], done.returncode, done.stderr.strip()))
    return seconds, child_cpu_seconds() - cpu_before, done.stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--minfer", default=os.path.join(ROOT, "build/release/minfer"))
    parser.add_argument("--rate", type=int, help="limit the server to this many bytes/s")
    parser.add_argument("--dir", help="scratch directory (default: a new one under $TMPDIR)")
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="minfer-bench-download-", dir=args.dir)
    try:
        source = os.path.join(scratch, "big.gguf")
        with open(source, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(1 << 20))
        size = os.path.getsize(source)
        config = {
            "repos": {"bench/big": {"refs": {"main": COMMIT},
                                    "commits": {COMMIT: {"big-Q8_0.gguf": {"source": source}}}}},
            "faults": {"bench/big/big-Q8_0.gguf": {"rate": args.rate}} if args.rate else {},
        }
        config_path = os.path.join(scratch, "hub.json")
        with open(config_path, "w") as f:
            json.dump(config, f)
        hub = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/hub/fake_hub.py"),
                                config_path], stdout=subprocess.PIPE, text=True)
        try:
            ready = hub.stdout.readline().split()
            if not ready or ready[0] != "READY":
                sys.exit("fake_hub.py did not start")
            api = "http://127.0.0.1:%s" % ready[1]
            url = "%s/bench/big/resolve/main/big-Q8_0.gguf" % api
            env = dict(os.environ, HF_ENDPOINT=api, HF_TOKEN="", HF_HUB_OFFLINE="",
                       http_proxy="", https_proxy="", HTTP_PROXY="", HTTPS_PROXY="")
            # The server hashes the file once (for the tree it announces) and the page cache
            # holds it: neither belongs to a round.
            timed(["curl", "-sf", "-o", "/dev/null", "%s/api/models/bench/big/tree/main" % api],
                  env)
            clients = ["curl", "curl+sync", "minfer"]
            results = {client: [] for client in clients}
            for round_no in range(args.rounds):
                order = clients[round_no % 3:] + clients[:round_no % 3]
                for client in order:
                    target = os.path.join(scratch, "round")
                    shutil.rmtree(target, ignore_errors=True)
                    os.makedirs(target)
                    # The previous round's bytes reach the disk before this one starts: curl
                    # leaves them in the page cache, and their writeback would otherwise slow
                    # the next round (minfer's, which writes to the disk itself).
                    os.sync()
                    if client == "curl":
                        cmd = ["curl", "-sfL", "-o", os.path.join(target, "big.gguf"), url]
                    elif client == "curl+sync":
                        # The same, made durable as minfer makes its file (sync FILE: fsync).
                        out = os.path.join(target, "big.gguf")
                        cmd = ["sh", "-c", 'curl -sfL -o "$1" "$2" && sync "$1"', "sh", out, url]
                    else:
                        env["HF_HUB_CACHE"] = target
                        env["MINFER_CACHE"] = os.path.join(target, "minfer")
                        cmd = [args.minfer, "pull", "hf:bench/big:Q8_0"]
                    seconds, cpu, _ = timed(cmd, env)
                    results[client].append((size / seconds / 1e6, cpu))
                    print("round %d %-9s %7.0f MB/s  %5.2f s CPU" % (round_no + 1, client,
                                                                     size / seconds / 1e6, cpu),
                          flush=True)
            shutil.rmtree(os.path.join(scratch, "round"), ignore_errors=True)
        finally:
            hub.kill()
            hub.wait()
        medians = {c: statistics.median(r[0] for r in rs) for c, rs in results.items()}
        for client, rs in results.items():
            print("%-9s median %7.0f MB/s (%.0f-%.0f), CPU %.2f s per GiB" % (
                client, medians[client], min(r[0] for r in rs), max(r[0] for r in rs),
                statistics.median(r[1] for r in rs) * (1 << 30) / size))
        print("minfer / curl: %.2f, minfer / curl+sync: %.2f" % (
            medians["minfer"] / medians["curl"], medians["minfer"] / medians["curl+sync"]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The reader's test: every command in the README and docs/ runs as written, every link lands.

Usage: scripts/check-docs.py [--minfer PATH] [--shared DIR] [--list] [FILE.md ...]
  (default files: README.md, DEVELOPERS.md and docs/*.md; default minfer: build/release/minfer)

What it checks, in every Markdown file it reads:
- Links: a relative link names a file that exists, and an #anchor a heading of that file
  (GitHub's rule for heading anchors).
- Code blocks: every fence names its language. ```sh blocks are commands, one per line (a
  trailing backslash continues a line); ```console blocks are transcripts, whose "$ " lines are
  the commands. Other languages (text, json, js, jinja, gbnf, ...) are not run.
- Each command runs in bash, in a scratch directory that holds the files the pages name:
    model.gguf        a small chat model (tiny-qwen2-q4_k_m, with the Qwen2.5 template), also
                      as qwen2.5-0.5b-instruct-q4_k_m.gguf
    model-f16.gguf    its F16 sibling (for quantize)
    every model of ../shared/fixtures/models under its own name (stories260K.gguf, ...)
    prompt.txt, answer.schema.json, messages.json, tools.json
  with build/release on PATH and the hub's variables pointing at tests/hub/fake_hub.py, which
  serves hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF (the default model), hf:bartowski/Llama-3.2-1B-
  Instruct-GGUF, ollama:qwen2.5:0.5b and https://example.com/models/model.gguf (rewritten to
  the fake hub) with the tiny models: nothing reaches the network. Standard input is empty.
  A command must exit 0 within 180 s.
- A comment on the line before a fence changes how its commands run:
    <!-- check: skip: WHY -->  not run; WHY is printed (CI's own commands, hours-long runs)
    <!-- check: fails -->      must exit non-zero (examples of refusals)
    <!-- check: server -->     started in the background and waited for (GET /health on its
                               --port); it runs until the next block that is not
                               "with-server", then gets SIGTERM and must exit 0
    <!-- check: with-server --> run while the server of the block before runs

Exit status 0 when everything passed; fixtures missing from ../shared skip the command checks
with a message, or fail them with CI=true.
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMAND_TIMEOUT = 180
RUN_LANGUAGES = ("sh", "console")


class Block:
    def __init__(self, path, line, language, marker, lines):
        self.path, self.line, self.language, self.marker, self.lines = path, line, language, marker, lines

    def commands(self):
        """(line number, command) for each command of the block."""
        out, pending, start = [], "", 0
        for i, text in enumerate(self.lines):
            number = self.line + 1 + i
            if self.language == "console" and not pending:
                if not text.startswith("$ "):
                    continue
                text = text[2:]
            if not pending:
                start = number
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            out.append((start, pending + text))
            pending = ""
        return out


def parse(path):
    """The fenced blocks and the link targets of a Markdown file, and its problems."""
    blocks, links, problems, headings = [], [], [], []
    lines = open(path, encoding="utf-8").read().split("\n")
    fence = None
    for i, text in enumerate(lines):
        m = re.match(r"^(\s*)(`{3,})(.*)$", text)
        if fence is None and m:
            language = m.group(3).strip()
            marker = None
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            mm = re.match(r"^<!--\s*check:\s*(.*?)\s*-->$", lines[j].strip()) if j >= 0 else None
            if mm:
                marker = mm.group(1)
            if not language:
                problems.append("%s:%d: a code block without a language (sh, console, text, ...)" % (path, i + 1))
            fence = (len(m.group(2)), i + 1, language, marker, [])
            continue
        if fence is not None:
            if m and len(m.group(2)) >= fence[0] and not m.group(3).strip():
                blocks.append(Block(path, fence[1], fence[2], fence[3], fence[4]))
                fence = None
            else:
                fence[4].append(text)
            continue
        h = re.match(r"^#{1,6}\s+(.*?)\s*#*$", text)
        if h:
            headings.append(h.group(1))
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", text)):
            links.append((i + 1, target))
    if fence is not None:
        problems.append("%s:%d: a code block that is never closed" % (path, fence[1]))
    return blocks, links, headings, problems


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    out = []
    for c in text:
        if c in " -":
            out.append("-")
        elif c == "_" or c.isalnum() or unicodedata.category(c).startswith("M"):
            out.append(c)
    return "".join(out)


def anchors_of(headings):
    seen, out = {}, set()
    for h in headings:
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def check_links(files):
    problems = []
    cache = {}

    def anchors(path):
        if path not in cache:
            cache[path] = anchors_of(parse(path)[2])
        return cache[path]

    for path in files:
        for line, target in parse(path)[1]:
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append("%s:%d: link to %s: no such file" % (path, line, target))
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append("%s:%d: link to %s: %s has no heading with that anchor" %
                                (path, line, target, os.path.relpath(dest, ROOT)))
    return problems


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def make_sandbox(shared):
    models = os.path.join(shared, "fixtures", "models")
    box = tempfile.mkdtemp(prefix="minfer-docs-")
    names = {"model.gguf": "tiny-qwen2-q4_k_m.gguf", "model-f16.gguf": "tiny-qwen2-f16.gguf",
             "qwen2.5-0.5b-instruct-q4_k_m.gguf": "tiny-qwen2-q4_k_m.gguf"}
    names.update({f: f for f in os.listdir(models) if f.endswith(".gguf")})
    for name, fixture in names.items():
        os.symlink(os.path.join(models, fixture), os.path.join(box, name))
    write(os.path.join(box, "prompt.txt"), "Write one sentence about the sea.\n")
    write(os.path.join(box, "answer.schema.json"), json.dumps(
        {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}}, "required": ["answer"]}))
    write(os.path.join(box, "messages.json"), json.dumps(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]))
    write(os.path.join(box, "tools.json"), json.dumps([{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]))
    for d in ("home", "hf-cache", "minfer-cache", "ollama-models"):
        os.mkdir(os.path.join(box, d))
    commit = "0123456789abcdef0123456789abcdef01234567"
    hub = {
        "repos": {
            "Qwen/Qwen2.5-0.5B-Instruct-GGUF": {"refs": {"main": commit}, "commits": {commit: {
                "qwen2.5-0.5b-instruct-q4_k_m.gguf": {"source": os.path.join(models, "tiny-qwen2-q4_k_m.gguf")},
                "qwen2.5-0.5b-instruct-q8_0.gguf": {"source": os.path.join(models, "tiny-qwen2-q8_0.gguf")}}}},
            "bartowski/Llama-3.2-1B-Instruct-GGUF": {"refs": {"main": commit}, "commits": {commit: {
                "Llama-3.2-1B-Instruct-Q4_K_M.gguf": {"source": os.path.join(models, "tiny-llama-q4_k_m.gguf")}}}},
        },
        "ollama": {"library/qwen2.5:0.5b": {"source": os.path.join(models, "tiny-qwen2-q8_0.gguf")}},
        "urls": {"/models/model.gguf": {"source": os.path.join(models, "tiny-qwen2-q8_0.gguf"), "etag": "\"1\""}},
        "log": os.path.join(box, "hub-requests.log"),
    }
    write(os.path.join(box, "hub.json"), json.dumps(hub))
    return box


def start_hub(box):
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "hub", "fake_hub.py"),
                             os.path.join(box, "hub.json")], stdout=subprocess.PIPE, text=True)
    ready = proc.stdout.readline().split()
    if len(ready) != 3 or ready[0] != "READY":
        raise SystemExit("check-docs: the fake hub did not start")
    return proc, int(ready[1])


def environment(box, minfer, hub_port):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "MINFER_", "OLLAMA_"))}
    env.update({
        "PATH": os.path.dirname(os.path.abspath(minfer)) + os.pathsep + env.get("PATH", ""),
        "HOME": os.path.join(box, "home"),
        "XDG_CACHE_HOME": os.path.join(box, "home", ".cache"),
        "HF_ENDPOINT": "http://127.0.0.1:%d" % hub_port,
        "MINFER_OLLAMA_REGISTRY": "http://127.0.0.1:%d" % hub_port,
        "HF_HUB_CACHE": os.path.join(box, "hf-cache"),
        "MINFER_CACHE": os.path.join(box, "minfer-cache"),
        "OLLAMA_MODELS": os.path.join(box, "ollama-models"),
        "MINFER_HUB_RETRIES": "1",
        "MINFER_HUB_RETRY_DELAY": "0.05",
        "MINFER_SHARED": os.environ.get("MINFER_SHARED", ""),
    })
    return env


def as_run(command, hub_port):
    return command.replace("https://example.com/", "http://127.0.0.1:%d/" % hub_port)


def wait_for_health(port, proc, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minfer", default=os.path.join(ROOT, "build", "release", "minfer"))
    ap.add_argument("--shared", default=os.environ.get("MINFER_SHARED") or os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--list", action="store_true", help="print the commands without running them")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = args.files or ([os.path.join(ROOT, "README.md"), os.path.join(ROOT, "DEVELOPERS.md")] +
                           sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))))
    problems = []
    blocks = []
    for path in files:
        b, _, _, p = parse(path)
        blocks += b
        problems += p
    problems += check_links(files)
    runs = [(b, line, cmd) for b in blocks if b.language in RUN_LANGUAGES for line, cmd in b.commands()]
    if args.list:
        for b, line, cmd in runs:
            print("%s:%d [%s] %s" % (os.path.relpath(b.path, ROOT), line, b.marker or "run", cmd))
        return 0
    fixture = os.path.join(args.shared, "fixtures", "models", "tiny-qwen2-q4_k_m.gguf")
    if not os.path.exists(fixture):
        message = "check-docs: %s is missing: the commands were not run" % fixture
        if os.environ.get("CI") == "true":
            print(message + " (CI=true: failing)")
            return 1
        print(message)
        return 1 if problems else 0
    if not os.access(args.minfer, os.X_OK):
        print("check-docs: %s is not built (scripts/setup.sh)" % args.minfer)
        return 1

    box = make_sandbox(os.path.abspath(args.shared))
    hub, hub_port = start_hub(box)
    env = environment(box, args.minfer, hub_port)
    server = None
    passed = skipped = 0

    def stop_server():
        nonlocal server
        if server is None:
            return None
        proc, where = server
        server = None
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            return "%s: the server did not stop within 30 s of SIGTERM" % where
        return None if rc == 0 else "%s: the server exited %d after SIGTERM" % (where, rc)

    try:
        for b, line, cmd in runs:
            where = "%s:%d" % (os.path.relpath(b.path, ROOT), line)
            marker = b.marker or ""
            if marker != "with-server":
                failure = stop_server()
                if failure:
                    problems.append(failure)
            if marker.startswith("skip"):
                skipped += 1
                print("check-docs: %s skipped (%s): %s" % (where, marker.partition(":")[2].strip(), cmd))
                continue
            if marker == "with-server" and server is None:
                problems.append("%s: marked with-server, but no server runs before it" % where)
                continue
            started = time.time()
            if marker == "server":
                m = re.search(r"--port[ =](\d+)", cmd)
                port = int(m.group(1)) if m else 8080
                log = open(os.path.join(box, "server.log"), "w")
                proc = subprocess.Popen(["bash", "-c", "exec " + as_run(cmd, hub_port)], cwd=box, env=env,
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
                if not wait_for_health(port, proc):
                    proc.kill()
                    problems.append("%s: the server did not answer /health on port %d: %s\n%s" % (
                        where, port, cmd, open(os.path.join(box, "server.log")).read()[-2000:]))
                    continue
                server = (proc, where)
                passed += 1
                print("check-docs: %s ok (serving) %s" % (where, cmd))
                continue
            try:
                r = subprocess.run(["bash", "-c", as_run(cmd, hub_port)], cwd=box, env=env,
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   errors="replace", timeout=COMMAND_TIMEOUT)
                rc, output = r.returncode, (r.stdout + r.stderr)
            except subprocess.TimeoutExpired:
                rc, output = None, "(no exit within %d s)" % COMMAND_TIMEOUT
            ok = (rc not in (0, None)) if marker == "fails" else rc == 0
            if ok:
                passed += 1
                print("check-docs: %s ok (%.1f s) %s" % (where, time.time() - started, cmd[:100]))
            else:
                expected = "a failure" if marker == "fails" else "exit 0"
                problems.append("%s: %s\n  expected %s, got %s\n%s" % (
                    where, cmd, expected, "a timeout" if rc is None else "exit %d" % rc,
                    "\n".join("  | " + l for l in output.strip().split("\n")[-15:])))
        failure = stop_server()
        if failure:
            problems.append(failure)
    finally:
        if server is not None:
            server[0].kill()
        hub.kill()
        shutil.rmtree(box, ignore_errors=True)

    for p in problems:
        print("check-docs: FAILED " + p)
    print("check-docs: %d commands passed, %d skipped, %d problems (%d files)" %
          (passed, skipped, len(problems), len(files)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

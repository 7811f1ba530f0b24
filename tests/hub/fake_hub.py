#!/usr/bin/env python3
"""A local stand-in for the Hugging Face hub and ollama's registry, for minfer's hub tests.

Usage: fake_hub.py CONFIG.json
Binds two ports on 127.0.0.1 (the API and a "CDN" that serves the bytes after a redirect, as the
real hub does), prints "READY API_PORT DATA_PORT" and serves until killed. CONFIG.json is read
again whenever it changes (the tests rewrite it to change the faults); one JSON line per request
goes to config["log"]: port, method, path, range, whether an Authorization header came, status,
body bytes sent.

Config:
  token: the token gated repositories accept
  repos: {"OWNER/NAME": {"gated": bool, "page_size": N,
          "refs": {"main": COMMIT, ...},
          "commits": {COMMIT: {PATH: {"source": FILE, "lfs": true, "sha256": S, "size": N}}}}}
          (sha256/size override what the tree announces: a server that lies)
  ollama: {"NAMESPACE/NAME:TAG": {"source": FILE, "digest": HEX, "size": N, "manifest": RAW}}
  urls:   {"/files/NAME.gguf": {"source": FILE, "etag": "\"...\""}}
  faults: {KEY: {...}} where KEY is "OWNER/NAME/PATH" (hub files), "ollama:HEX", or a URL path
          status: [500, 429]  answered to the first requests, in order (retry_after: seconds)
          drop_after: N       close the connection after N body bytes (times: how many requests)
          stall_after: N      send N bytes, then nothing for stall_seconds (times)
          ignore_range: true  answer 200 with everything to a Range request
          rate: N             at most N bytes per second
          corrupt: true       flip one byte of what is sent
          no_length: true     no Content-Length: the body ends when the connection closes
"""

import hashlib
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONFIG_PATH = sys.argv[1]
STATE = {"mtime": None, "config": {}, "counters": {}}
LOCK = threading.Lock()
HASHES = {}
PORTS = {}


def config():
    with LOCK:
        try:
            mtime = os.stat(CONFIG_PATH).st_mtime_ns
        except OSError:
            return STATE["config"]
        if mtime != STATE["mtime"]:
            with open(CONFIG_PATH) as f:
                STATE["config"] = json.load(f)
            STATE["mtime"] = mtime
            STATE["counters"] = {}
        return STATE["config"]


def count(key):
    """How many requests for this fault key came before this one."""
    with LOCK:
        n = STATE["counters"].get(key, 0)
        STATE["counters"][key] = n + 1
        return n


def file_hashes(path):
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in HASHES:
        sha256, size = hashlib.sha256(), 0
        data_for_git = hashlib.sha1()
        data_for_git.update(b"blob %d\0" % st.st_size)
        with open(path, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                sha256.update(chunk)
                data_for_git.update(chunk)
                size += len(chunk)
        HASHES[key] = (sha256.hexdigest(), data_for_git.hexdigest(), size)
    return HASHES[key]


def log(entry):
    path = config().get("log")
    if path:
        with LOCK, open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    port_name = "api"

    def log_message(self, *args):
        pass

    # ---- helpers ----
    def record(self, status, sent):
        log({"port": self.port_name, "method": self.command, "path": self.path,
             "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
             "if_none_match": self.headers.get("If-None-Match"),
             "auth": self.headers.get("Authorization") is not None,
             "status": status, "bytes": sent, "time": time.time()})

    def reply(self, status, body=b"", headers=None):
        if isinstance(body, str):
            body = body.encode()
        # Recorded before the client can have the answer: a test that clears the log once the
        # client has exited must not find this request there afterwards.
        self.record(status, len(body))
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def json_reply(self, status, obj, headers=None):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        self.reply(status, json.dumps(obj), h)

    def hub_error(self, status, code, message):
        self.json_reply(status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message})

    def token_ok(self):
        token = config().get("token")
        return token and self.headers.get("Authorization") == "Bearer " + token

    def repo_or_error(self, owner, name):
        repo = config().get("repos", {}).get(owner + "/" + name)
        if repo is None:
            if self.headers.get("Authorization"):
                self.hub_error(404, "RepoNotFound", "Repository not found")
            else:
                self.hub_error(401, "RepoNotFound", "Repository not found")
            return None
        if repo.get("gated") and not self.token_ok():
            if self.headers.get("Authorization"):
                self.hub_error(403, "GatedRepo", "Access to this model is restricted")
            else:
                self.hub_error(401, "GatedRepo", "Access to this model is restricted")
            return None
        return repo

    def commit_or_error(self, repo, rev):
        if rev in repo.get("commits", {}):
            return rev
        commit = repo.get("refs", {}).get(rev)
        if commit is None:
            self.hub_error(404, "RevisionNotFound", "Invalid rev id: " + rev)
        return commit

    # ---- the API port ----
    def do_GET(self):
        if self.port_name == "data":
            return self.data_get()
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.split("/")
        try:
            if url.path.startswith("/api/models/") and len(parts) >= 6:
                owner, name, kind = parts[3], parts[4], parts[5]
                rev = urllib.parse.unquote("/".join(parts[6:]))
                repo = self.repo_or_error(owner, name)
                if repo is None:
                    return
                commit = self.commit_or_error(repo, rev)
                if commit is None:
                    return
                if kind == "revision":
                    return self.json_reply(200, {"id": owner + "/" + name, "sha": repo.get("sha_override", commit)})
                if kind == "tree":
                    return self.tree(owner, name, repo, commit, urllib.parse.parse_qs(url.query))
            if len(parts) >= 6 and parts[3] == "resolve":
                owner, name = parts[1], parts[2]
                rev = urllib.parse.unquote(parts[4])
                path = urllib.parse.unquote("/".join(parts[5:]))
                repo = self.repo_or_error(owner, name)
                if repo is None:
                    return
                commit = self.commit_or_error(repo, rev)
                if commit is None:
                    return
                if path not in repo["commits"][commit]:
                    return self.hub_error(404, "EntryNotFound", "Entry not found")
                target = "http://127.0.0.1:%d/blobs/%s/%s/%s/%s?sig=abc" % (
                    PORTS["data"], owner, name, commit, urllib.parse.quote(path))
                return self.reply(302, b"", {"Location": target, "X-Repo-Commit": commit})
            if url.path.startswith("/v2/"):
                return self.ollama(parts)
            if url.path in config().get("urls", {}):
                entry = config()["urls"][url.path]
                return self.serve_file(url.path, entry["source"], entry.get("etag"))
            self.reply(404, "not found")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def tree(self, owner, name, repo, commit, query):
        files = repo["commits"][commit]
        entries, dirs = [], set()
        for path, spec in sorted(files.items()):
            sha256, git_oid, size = file_hashes(spec["source"])
            pieces = path.split("/")
            for i in range(1, len(pieces)):
                d = "/".join(pieces[:i])
                if d not in dirs:
                    dirs.add(d)
                    entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": d})
            size = spec.get("size", size)
            entry = {"type": "file", "oid": git_oid if not spec.get("lfs", True) else hashlib.sha1(path.encode()).hexdigest(),
                     "size": size, "path": path}
            if spec.get("lfs", True):
                entry["lfs"] = {"oid": spec.get("sha256", sha256), "size": size, "pointerSize": 134}
            entries.append(entry)
        page_size = repo.get("page_size", 1000)
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start:start + page_size]
        headers = {}
        if start + page_size < len(entries):
            host = repo.get("next_host", "127.0.0.1:%d" % PORTS["api"])
            headers["Link"] = '<http://%s/api/models/%s/%s/tree/%s?recursive=true&cursor=%d>; rel="next"' % (
                host, owner, name, commit, start + page_size)
        self.json_reply(200, page, headers)

    def ollama(self, parts):
        # /v2/NS/NAME/manifests/TAG or /v2/NS/NAME/blobs/sha256:HEX
        if len(parts) != 6:
            return self.reply(404, "not found")
        ns, name, kind, last = parts[2], parts[3], parts[4], parts[5]
        models = config().get("ollama", {})
        if kind == "manifests":
            entry = models.get("%s/%s:%s" % (ns, name, last))
            if entry is None:
                return self.json_reply(404, {"errors": [{"code": "MANIFEST_UNKNOWN"}]})
            if "manifest" in entry:
                return self.reply(200, entry["manifest"], {"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"})
            sha256, _, size = file_hashes(entry["source"])
            manifest = {
                "schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                           "digest": "sha256:" + "1" * 64, "size": 10},
                "layers": [
                    {"mediaType": "application/vnd.ollama.image.model",
                     "digest": "sha256:" + entry.get("digest", sha256), "size": entry.get("size", size)},
                    {"mediaType": "application/vnd.ollama.image.template",
                     "digest": "sha256:" + "2" * 64, "size": 20},
                ],
            }
            return self.json_reply(200, manifest, {"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"})
        if kind == "blobs" and last.startswith("sha256:"):
            target = "http://127.0.0.1:%d/ollama-blobs/%s/%s/%s" % (PORTS["data"], ns, name, last[7:])
            return self.reply(307, b"", {"Location": target})
        self.reply(404, "not found")

    # ---- the data port ----
    def data_get(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")]
        try:
            if parts[1] == "blobs" and len(parts) >= 6:
                owner, name, commit, path = parts[2], parts[3], parts[4], "/".join(parts[5:])
                spec = config()["repos"][owner + "/" + name]["commits"][commit][path]
                return self.serve_file("%s/%s/%s" % (owner, name, path), spec["source"], None)
            if parts[1] == "ollama-blobs" and len(parts) == 5:
                ns, name, digest = parts[2], parts[3], parts[4]
                for key, entry in config().get("ollama", {}).items():
                    if key.startswith("%s/%s:" % (ns, name)) and "source" in entry:
                        sha256, _, _ = file_hashes(entry["source"])
                        if entry.get("digest", sha256) == digest:
                            return self.serve_file("ollama:" + digest, entry["source"], None)
            self.reply(404, "not found")
        except (KeyError, IndexError):
            self.reply(404, "not found")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def serve_file(self, key, source, etag):
        fault = config().get("faults", {}).get(key, {})
        n = count(key)
        statuses = fault.get("status", [])
        if n < len(statuses):
            headers = {}
            if "retry_after" in fault:
                headers["Retry-After"] = str(fault["retry_after"])
            return self.reply(statuses[n], "fault", headers)
        size = os.path.getsize(source)
        if etag and self.headers.get("If-None-Match") == etag:
            return self.reply(304, b"", {"ETag": etag})
        start = 0
        rng = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if rng and not fault.get("ignore_range") and (if_range is None or if_range == etag):
            spec = rng.split("=", 1)[1]
            start = int(spec.split("-")[0])
            if start >= size:
                return self.reply(416, "", {"Content-Range": "bytes */%d" % size})
        length = size - start
        self.send_response(206 if start > 0 else 200)
        if fault.get("no_length"):
            # The body ends when the connection closes (HTTP/1.1 allows it).
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(length))
        if start > 0:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        if etag:
            self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        times = fault.get("times", 1)
        drop_after = fault.get("drop_after") if n - len(statuses) < times else None
        stall_after = fault.get("stall_after") if n - len(statuses) < times else None
        rate = fault.get("rate")
        sent = 0
        with open(source, "rb") as f:
            f.seek(start)
            if not (drop_after or stall_after or rate or fault.get("corrupt")):
                try:
                    sent = self.connection.sendfile(f, start, length)
                finally:
                    self.record(206 if start > 0 else 200, sent)
                return
            try:
                while sent < length:
                    want = min(64 * 1024, length - sent)
                    limit = drop_after if drop_after is not None else stall_after
                    if limit is not None:
                        want = min(want, max(0, limit - sent))
                        if want == 0:
                            break
                    chunk = f.read(want)
                    if fault.get("corrupt") and sent == 0 and chunk:
                        chunk = bytes([chunk[0] ^ 0xFF]) + chunk[1:]
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    if rate:
                        time.sleep(len(chunk) / rate)
                if stall_after is not None and sent < length:
                    self.wfile.flush()
                    time.sleep(fault.get("stall_seconds", 5))
                if sent < length:
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
            except (BrokenPipeError, ConnectionResetError, OSError):
                self.close_connection = True
            self.record(206 if start > 0 else 200, sent)


class DataHandler(Handler):
    port_name = "data"


def main():
    config()
    api = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    data = ThreadingHTTPServer(("127.0.0.1", 0), DataHandler)
    api.daemon_threads = data.daemon_threads = True
    PORTS["api"], PORTS["data"] = api.server_address[1], data.server_address[1]
    threading.Thread(target=data.serve_forever, daemon=True).start()
    print("READY %d %d" % (PORTS["api"], PORTS["data"]), flush=True)
    api.serve_forever()


if __name__ == "__main__":
    main()

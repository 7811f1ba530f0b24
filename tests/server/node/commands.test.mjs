// The commands around the server: `minfer bench-serve` against a running server (its JSON rows),
// and `minfer serve` failing cleanly (a model that does not load, a port already taken, bad flags).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync, spawn } from "node:child_process";
import { binary, fixture, startServer } from "./harness.mjs";

function runAsync(args, timeout = 120000) {
  return new Promise((resolve) => {
    const p = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => p.kill("SIGKILL"), timeout);
    p.on("exit", (code) => { clearTimeout(timer); resolve({ code, out, err }); });
  });
}

test("bench-serve measures a server at each concurrency", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const server = await startServer(model, ["-t", "2", "-np", "4", "--ctx", "512"]);
  try {
    const r = await runAsync(["bench-serve", server.url, "--concurrency", "1,4", "--requests", "8",
                              "--prompt-tokens", "64", "--gen-tokens", "16", "--json"]);
    assert.equal(r.code, 0, r.err);
    const rows = JSON.parse(r.out);
    assert.deepEqual(rows.map((x) => x.concurrency), [1, 4]);
    for (const row of rows) {
      assert.equal(row.failed, 0);
      assert.equal(row.requests, 8);
      assert.equal(row.generated_tokens, 8 * 16);
      assert.equal(row.mean_prompt_tokens, 64);  // the template's share learnt and filled in
      assert.ok(row.tokens_per_second > 0 && row.ttft_p50_s > 0 && row.itl_p50_s > 0);
      assert.ok(row.itl_p99_s >= row.itl_p50_s && row.ttft_p99_s >= row.ttft_p50_s);
    }
    const table = await runAsync(["bench-serve", server.url + "/v1", "--concurrency", "2", "--requests", "2", "--gen-tokens", "4"]);
    assert.equal(table.code, 0, table.err);
    assert.match(table.out, /\| clients \|/);
  } finally {
    await server.stop();
  }
  const refused = spawnSync(binary, ["bench-serve", "https://example.com"], { encoding: "utf8" });
  assert.equal(refused.status, 2);
  assert.match(refused.stderr, /plain HTTP/);
  const down = spawnSync(binary, ["bench-serve", "http://127.0.0.1:1", "--requests", "1"], { encoding: "utf8" });
  assert.equal(down.status, 1);
  assert.match(down.stderr, /minfer: error: bench-serve: http:\/\/127\.0\.0\.1:1/);
});

test("serve fails with one line and exit 1 when the model cannot load or the port is taken", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const missing = spawnSync(binary, ["serve", "/nonexistent.gguf", "--port", "0"], { encoding: "utf8", timeout: 30000 });
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /minfer: error: .*nonexistent\.gguf/);
  const server = await startServer(model, ["-t", "1"]);
  try {
    const port = new URL(server.url).port;
    const taken = spawnSync(binary, ["serve", model, "--port", port], { encoding: "utf8", timeout: 30000 });
    assert.equal(taken.status, 1);
    assert.match(taken.stderr, /cannot listen on 127\.0\.0\.1:\d+/);
  } finally {
    await server.stop();
  }
  for (const args of [["-np", "0"], ["--port", "70000"], ["--log-format", "xml"], ["-n", "0"]]) {
    const r = spawnSync(binary, ["serve", model, ...args], { encoding: "utf8", timeout: 30000 });
    assert.equal(r.status, 2, args.join(" ") + ": " + r.stderr);
  }
  const kv = spawnSync(binary, ["serve", model, "--port", "0", "--ctx", "512", "--kv-cache-tokens", "100"], { encoding: "utf8", timeout: 30000 });
  assert.equal(kv.status, 2, kv.stderr);
  assert.match(kv.stderr, /less than one sequence's context/);
});

// Two `minfer serve` replicas behind Debian's nginx with deploy/nginx.conf (its ports rewritten):
// 64 requests spread over both; one replica killed with SIGKILL while requests run: no
// non-streamed request is lost (nginx retries them on the other replica), the streams it held end
// as a closed connection that the client reports, and the next requests all succeed.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import net from "node:net";
import path from "node:path";
import OpenAI from "openai";
import { fixture, startServer, repo, eventually } from "./harness.mjs";

const nginxPath = process.env.NGINX || "/usr/sbin/nginx";

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

async function startNginx(upstreamPorts) {
  const dir = mkdtempSync(path.join(tmpdir(), "minfer-nginx-"));
  chmodSync(dir, 0o777);  // nginx's workers run as nobody and write their temp files here
  const port = await freePort();
  let conf = readFileSync(path.join(repo, "deploy/nginx.conf"), "utf8");
  conf = conf.replaceAll("127.0.0.1:8081", `127.0.0.1:${upstreamPorts[0]}`)
             .replaceAll("127.0.0.1:8082", `127.0.0.1:${upstreamPorts[1]}`)
             .replace("listen 8080;", `listen 127.0.0.1:${port};`)
             .replace("worker_processes auto;", "worker_processes 1;");
  const confPath = path.join(dir, "nginx.conf");
  writeFileSync(confPath, conf);
  const proc = spawn(nginxPath, ["-p", dir, "-c", confPath, "-e", path.join(dir, "error.log"),
                                 "-g", `daemon off; pid ${dir}/nginx.pid;`], { stdio: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  await eventually(async () => (await fetch(url + "/health").catch(() => null))?.status === 200, 10000, "nginx");
  return { url, proc, dir, stop: () => new Promise((r) => { proc.on("exit", r); proc.kill("SIGQUIT"); }) };
}

const served = (replica) => (replica.log().match(/"POST \/v1\/chat\/completions" 200/g) || []).length;

test("replicas behind nginx: spread, a replica killed mid-load, no request lost", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  if (!existsSync(nginxPath)) {
    if (process.env.CI === "true") throw new Error(`no nginx at ${nginxPath}`);
    return t.skip(`no nginx at ${nginxPath}`);
  }
  const args = ["-t", "1", "--ctx", "32768", "-np", "8", "--shutdown-timeout", "0.5"];
  const a = await startServer(model, args);
  const b = await startServer(model, args);
  const lb = await startNginx([new URL(a.url).port, new URL(b.url).port]);
  try {
    const client = new OpenAI({ baseURL: lb.url + "/v1", apiKey: "x", maxRetries: 0 });
    const messages = [{ role: "user", content: "Hello" }];
    const ask = (max_tokens = 16) => client.chat.completions.create({ model: "m", messages, temperature: 0, max_tokens, ignore_eos: true });

    // 64 requests, 16 at a time: both replicas take some, every answer is the same.
    const answers = [];
    for (let wave = 0; wave < 4; ++wave) answers.push(...await Promise.all(Array.from({ length: 16 }, () => ask())));
    assert.equal(answers.length, 64);
    for (const r of answers) assert.equal(r.choices[0].message.content, answers[0].choices[0].message.content);
    await eventually(() => served(a) + served(b) >= 64, 5000, "the access log of 64 requests");
    assert.ok(served(a) > 0 && served(b) > 0, `replica a ${served(a)}, b ${served(b)}`);
    assert.equal(served(a) + served(b), 64);

    // Long streams on both replicas and non-streamed requests in flight; then replica a dies.
    const streams = await Promise.all(Array.from({ length: 4 }, () =>
      client.chat.completions.create({ model: "m", messages, max_tokens: 30000, ignore_eos: true, stream: true })));
    const outcomes = streams.map(async (s) => {
      try {
        for await (const _ of s) { /* drain */ }
        return "completed";
      } catch (e) {
        return "closed: " + e.message;
      }
    });
    await new Promise((r) => setTimeout(r, 300));
    const inFlight = Array.from({ length: 24 }, () => ask(400));
    await new Promise((r) => setTimeout(r, 100));
    a.proc.kill("SIGKILL");
    const results = await Promise.allSettled(inFlight);
    const lost = results.filter((r) => r.status === "rejected");
    assert.equal(lost.length, 0, lost.map((r) => String(r.reason)).join("\n"));
    for (const r of results) assert.equal(r.value.choices[0].finish_reason, "length");
    // The streams a held end with an error the client sees; b's run to their end.
    b.proc.kill("SIGTERM");  // (ends b's streams quickly: a last chunk, then [DONE])
    const ends = await Promise.all(outcomes);
    assert.ok(ends.some((e) => e.startsWith("closed")), ends.join("\n"));
    assert.ok(ends.some((e) => e === "completed"), ends.join("\n"));
  } finally {
    await lb.stop();
    a.proc.kill("SIGKILL");
    await b.stop();
  }
});

test("after a replica dies the next requests all succeed", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model || !existsSync(nginxPath)) return t.skip();
  const a = await startServer(model, ["-t", "1"]);
  const b = await startServer(model, ["-t", "1"]);
  const lb = await startNginx([new URL(a.url).port, new URL(b.url).port]);
  try {
    a.proc.kill("SIGKILL");
    await a.exited;
    const client = new OpenAI({ baseURL: lb.url + "/v1", apiKey: "x", maxRetries: 0 });
    const rs = await Promise.all(Array.from({ length: 16 }, () =>
      client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Hi" }], max_tokens: 4, ignore_eos: true })));
    assert.equal(rs.length, 16);
    // (The access-log line follows the response: it may reach us a moment after it.)
    await eventually(() => served(b) >= 16, 5000, "the access log of 16 requests");
    assert.equal(served(b), 16);
  } finally {
    await lb.stop();
    await b.stop();
  }
});

// Busy is not down: a replica whose queue is full answers 503; nginx sends the request to the
// other replica and does not leave the full one out for fail_timeout (10 s), so it serves again
// as soon as it has room.
test("a busy replica sheds to the other and is not ejected", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model || !existsSync(nginxPath)) return t.skip();
  const a = await startServer(model, ["-t", "1", "-np", "1", "--max-queue", "0"]);
  const b = await startServer(model, ["-t", "1", "-np", "8"]);
  const lb = await startNginx([new URL(a.url).port, new URL(b.url).port]);
  try {
    const messages = [{ role: "user", content: "Hi" }];
    // a's one sequence is taken by a long stream sent to it directly (nginx does not see it).
    const direct = new OpenAI({ baseURL: a.url + "/v1", apiKey: "x", maxRetries: 0 });
    const hog = await direct.chat.completions.create({ model: "m", messages, max_tokens: 30000, ignore_eos: true, stream: true });
    const hogDone = (async () => { try { for await (const _ of hog) { /* drain */ } } catch { /* cancelled */ } })();
    const client = new OpenAI({ baseURL: lb.url + "/v1", apiKey: "x", maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: "m", messages, max_tokens: 4, ignore_eos: true });
    const busy = await Promise.all(Array.from({ length: 16 }, ask));
    assert.equal(busy.length, 16);  // every one answered, though a refused the ones it got
    await eventually(() => (a.log().match(/" 503 /g) || []).length > 0, 5000, "a 503 from the full replica");
    hog.controller.abort();
    await hogDone;
    // a has room again: within fail_timeout it takes requests (an ejected replica would not).
    await eventually(async () => {
      await Promise.all(Array.from({ length: 8 }, ask));
      return served(a) > 0;
    }, 8000, "the replica that was full serving again");
  } finally {
    await lb.stop();
    await a.stop();
    await b.stop();
  }
});


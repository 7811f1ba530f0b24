// Serving many models by name: `minfer serve A B C` loads each when a request names it, keeps at
// most --max-models, unloads the least recently used idle one, honours keep_alive, and answers an
// unknown name with 404 in each API's error shape; a model that fails to load fails its requests
// and the others go on. `minfer serve` without MODEL serves the caches, and with --allow-pull
// clients pull (streamed progress, from a local fake hub) and delete models through the official
// ollama client. Memory returns to where it started once every model is unloaded.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import { spawnSync } from "node:child_process";
import { binary, eventually, fixture, residentBytes, startFakeHub, startServer } from "./harness.mjs";

const names = ["tiny-llama-q4_0", "tiny-qwen2-q8_0", "tiny-llama-q8_0"];
const messages = [{ role: "user", content: "Tell me a story about a dragon." }];
let server, ollama, openai, broken;

before(async (t) => {
  const models = names.map((n) => fixture(t, `models/${n}.gguf`));
  if (models.includes(null)) return;
  broken = path.join(mkdtempSync(path.join(tmpdir(), "minfer-")), "broken.gguf");
  writeFileSync(broken, "GGUF, but not a model");
  server = await startServer([...models, broken],
                             ["--max-models", "2", "-np", "2", "--ctx", "256", "-t", "2"]);
  ollama = new Ollama({ host: server.url });
  openai = new OpenAI({ baseURL: server.url + "/v1", apiKey: "none" });
});
after(async () => {
  if (server) {
    const { code } = await server.stop();
    assert.equal(code, 0, "exit status after SIGTERM\n" + server.log());
  }
});

const loaded = async () => (await ollama.ps()).models.map((m) => m.name).sort();
const say = (model, extra = {}) =>
  ollama.chat({ model, messages, stream: false, options: { temperature: 0, num_predict: 4 }, ...extra });

test("every model is listed by id before any is loaded, by /v1/models and /api/tags", async (t) => {
  if (!server) return t.skip();
  const ids = [];
  for await (const m of openai.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [...names, "broken"]);
  const tags = (await ollama.list()).models.map((m) => m.name);
  assert.deepEqual(tags, [...names, "broken"].map((n) => n + ":latest"));
  const qwen = (await ollama.list()).models.find((m) => m.name === "tiny-qwen2-q8_0:latest");
  assert.equal(qwen.details.family, "qwen2");
  assert.equal(qwen.details.quantization_level, "Q8_0");
  assert.deepEqual(await loaded(), []);
});

test("a model loads when named; requests arriving while it loads wait for it", async (t) => {
  if (!server) return t.skip();
  const answers = await Promise.all([0, 1, 2].map(() => say("tiny-llama-q4_0")));
  for (const a of answers) {
    assert.equal(a.done_reason, "length");
    assert.equal(a.message.content, answers[0].message.content);
    // ollama's load_duration counts the wait for the model, inside total_duration.
    assert.ok(a.load_duration > 0 && a.load_duration <= a.total_duration);
  }
  assert.deepEqual(await loaded(), ["tiny-llama-q4_0:latest"]);
  // Its id with or without ollama's tag, and through the OpenAI and Anthropic APIs.
  const c = await openai.chat.completions.create({ model: "tiny-llama-q4_0", messages, max_tokens: 3 });
  assert.equal(c.model, "tiny-llama-q4_0");
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: "none" });
  const m = await anthropic.messages.create({ model: "tiny-llama-q4_0:latest", messages, max_tokens: 3 });
  assert.equal(m.stop_reason, "max_tokens");
});

test("two models answer at once; a third unloads the least recently used idle one", async (t) => {
  if (!server) return t.skip();
  const [a, b] = await Promise.all([say("tiny-qwen2-q8_0"), say("tiny-llama-q4_0")]);
  assert.equal(a.done, true);
  assert.equal(b.done, true);
  assert.deepEqual(await loaded(), ["tiny-llama-q4_0:latest", "tiny-qwen2-q8_0:latest"]);
  await say("tiny-llama-q4_0");  // now tiny-qwen2-q8_0 is the least recently used
  await say("tiny-llama-q8_0");
  assert.deepEqual(await loaded(), ["tiny-llama-q4_0:latest", "tiny-llama-q8_0:latest"]);
  assert.match(server.log(), /unloaded 'tiny-qwen2-q8_0' to make room for 'tiny-llama-q8_0'/);
  const ps = (await ollama.ps()).models[0];
  assert.equal(ps.context_length, 256);
  assert.ok(Date.parse(ps.expires_at) > Date.now());
});

test("an unknown name is 404 in each API's error shape, and a name is never a path", async (t) => {
  if (!server) return t.skip();
  for (const model of ["gpt-4o", "../../etc/passwd", "/etc/passwd", names[0] + ".gguf"]) {
    const e = await ollama.chat({ model, messages, stream: false }).catch((err) => err);
    assert.equal(e.status_code, 404, model);
    assert.match(e.error, /not found/);
    const o = await openai.chat.completions.create({ model, messages }).catch((err) => err);
    assert.equal(o.status, 404, model);
    assert.equal(o.code, "model_not_found");
  }
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: "none", maxRetries: 0 });
  const a = await anthropic.messages.create({ model: "claude-x", messages, max_tokens: 3 }).catch((err) => err);
  assert.equal(a.status, 404);
  assert.equal(a.error.error.type, "not_found_error");
  // Several models: a tokenizer request must say which.
  const r = await fetch(server.url + "/tokenize", { method: "POST", body: JSON.stringify({ content: "hi" }) });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /'model' is required/);
});

test("a model that fails to load fails its requests with the reason; the others go on", async (t) => {
  if (!server) return t.skip();
  const failures = await Promise.all([0, 1].map(() => say("broken").catch((e) => e)));
  for (const e of failures) {
    assert.equal(e.status_code, 500);
    assert.match(e.error, /model 'broken' could not be loaded: .*broken\.gguf/);
  }
  assert.equal((await say("tiny-llama-q4_0")).done, true);
});

test("keep_alive 0 unloads after the request; an empty request loads or unloads", async (t) => {
  if (!server) return t.skip();
  const load = await ollama.generate({ model: "tiny-qwen2-q8_0", prompt: "" });
  assert.equal(load.done_reason, "load");
  assert.ok((await loaded()).includes("tiny-qwen2-q8_0:latest"));
  const unload = await ollama.generate({ model: "tiny-qwen2-q8_0", prompt: "", keep_alive: 0 });
  assert.equal(unload.done_reason, "unload");
  await eventually(async () => !(await loaded()).includes("tiny-qwen2-q8_0:latest"), 5000, "unload");
  await say("tiny-llama-q8_0", { keep_alive: "0s" });
  await eventually(async () => !(await loaded()).includes("tiny-llama-q8_0:latest"), 5000, "unload");
  const e = await say("tiny-llama-q4_0", { keep_alive: "soon" }).catch((err) => err);
  assert.equal(e.status_code, 400);
  assert.match(e.error, /keep_alive/);
});

test("--model-options gives one model its own context, sequences and cache type", async (t) => {
  const models = names.slice(0, 2).map((n) => fixture(t, `models/${n}.gguf`));
  if (models.includes(null)) return;
  // (Given before the MODELs too: each takes one value.)
  const s = await startServer(["--model-options", "tiny-llama-q4_0,ctx=512,np=1,cache-type=q8_0", ...models],
                              ["--ctx", "256", "-np", "3", "-t", "2"]);
  try {
    const o = new Ollama({ host: s.url });
    for (const model of names.slice(0, 2)) await o.generate({ model, prompt: "" });
    const ps = Object.fromEntries((await o.ps()).models.map((m) => [m.name, m.context_length]));
    assert.deepEqual(ps, { "tiny-llama-q4_0:latest": 512, "tiny-qwen2-q8_0:latest": 256 });
    const list = (await (await fetch(s.url + "/v1/models")).json()).data;
    assert.deepEqual(list.map((m) => m.meta.n_parallel), [1, 3]);
  } finally {
    await s.stop();
  }
  for (const [spec, message] of [["nope,ctx=1", /no model served is called 'nope'/],
                                 ["tiny-llama-q4_0,ctx=x", /ctx must be a whole number/],
                                 ["tiny-llama-q4_0,temp=1", /unknown setting 'temp'/],
                                 ["tiny-llama-q4_0,np=999", /np must be/]]) {
    const r = spawnSync(binary, ["serve", ...models, "--model-options", spec], { encoding: "utf8" });
    assert.equal(r.status, 2, spec + "\n" + r.stderr);
    assert.match(r.stderr, message);
  }
});

// Measured as anonymous resident memory (the KV caches, repacked weights, buffers; the weights'
// file pages are checked apart: no model file may stay mapped), since a process's file-backed
// pages come and go with what code runs (libcrypto's 2 MiB of code is paged in by the first
// /api/ps that hashes a digest). "Start" is the server after each model has been loaded and
// unloaded once: that makes the malloc arenas of the threads that run models, once. Then, in two
// more rounds, what stays after unloading must be within 10 % of what the models took.
test("memory returns to within 10 % of its start once every model is unloaded", async (t) => {
  const models = names.map((n) => fixture(t, `models/${n}.gguf`));
  if (models.includes(null)) return;
  // On lavapipe, the driver's own threads and compiler move the process's anonymous memory by a
  // few MiB from round to round (what minfer allocates on the device it frees: the engine tests
  // count it); the measure here is minfer's own memory, on the CPU backend.
  if (process.env.MINFER_SERVE_DEVICE && process.env.MINFER_SERVE_DEVICE !== "cpu")
    return t.skip(`the driver's memory of --device ${process.env.MINFER_SERVE_DEVICE} is not minfer's`);
  // A cache large enough to be seen: f32, 4 sequences of 4096 positions per model.
  const s = await startServer(models, ["--max-models", "3", "-np", "4", "--ctx", "4096",
                                       "--cache-type", "f32", "-t", "2"],
                              // glibc keeps the stacks of ended threads (each load starts two)
                              // for reuse, touched pages and all: not memory minfer holds.
                              { env: { GLIBC_TUNABLES: "glibc.pthread.stack_cache_size=0" } });
  try {
    const o = new Ollama({ host: s.url });
    const mib = (b) => (b / 1048576).toFixed(1) + " MiB";
    const anon = () => residentBytes(s.proc.pid, "RssAnon");
    const mapped = () => readFileSync(`/proc/${s.proc.pid}/maps`, "utf8").split("\n")
      .filter((line) => line.endsWith(".gguf")).length;
    const round = async (list) => {
      for (const model of list) await o.chat({ model, messages, stream: false, options: { num_predict: 8 } });
      const peak = anon();
      assert.equal(mapped(), list.length);
      for (const model of list) await o.generate({ model, prompt: "", keep_alive: 0 });
      await eventually(async () => (await o.ps()).models.length === 0, 5000, "every model unloaded");
      // (/api/ps stops listing a model as its unloading starts; the memory goes just after.)
      await eventually(() => mapped() === 0, 5000, "every model file unmapped");
      return peak;
    };
    await round(names);
    const start = anon();
    for (let i = 0; i < 2; i++) {
      const peak = await round(names);
      const allowed = start + (peak - start) / 10;
      let end = 0;
      await eventually(() => (end = anon()) <= allowed, 2000, "the memory back").catch(() => {});
      t.diagnostic(`anonymous resident memory: ${mib(start)} at start, ${mib(peak)} with three models, ` +
                   `${mib(end)} after unloading them (all resident: ${mib(residentBytes(s.proc.pid))})`);
      assert.ok(peak > start + 8 * 1048576, `loading three models added only ${mib(peak - start)}`);
      assert.ok(end <= allowed, `${mib(end)} after unloading: ${mib(end - start)} of the ${mib(peak - start)} ` +
                                "the models took stayed");
    }
  } finally {
    await s.stop();
  }
});

test("serve without MODEL: the caches; --allow-pull pulls with progress and deletes", async (t) => {
  const qwen = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  const llama = fixture(t, "models/tiny-llama-q4_k_m.gguf");
  if (!qwen || !llama) return;
  const commit = "0123456789abcdef0123456789abcdef01234567";
  const hub = await startFakeHub({
    repos: { "bartowski/Llama-3.2-1B-Instruct-GGUF": { refs: { main: commit }, commits: { [commit]: {
      "Llama-3.2-1B-Instruct-Q4_K_M.gguf": { source: llama } } } } },
    ollama: { "library/qwen2.5:0.5b": { source: qwen } },
  });
  const s = await startServer([], ["--allow-pull", "-np", "1", "--ctx", "256", "-t", "2"], { env: hub.env });
  try {
    const o = new Ollama({ host: s.url });
    assert.deepEqual((await o.list()).models, []);
    // A pull streams its progress, then the model is served.
    const statuses = [];
    let completed = 0;
    for await (const p of await o.pull({ model: "qwen2.5:0.5b", stream: true })) {
      statuses.push(p.status);
      if (p.completed !== undefined) {
        assert.ok(p.completed >= completed && p.completed <= p.total);
        completed = p.completed;
      }
    }
    assert.equal(statuses[0], "pulling manifest");
    assert.equal(statuses.at(-1), "success");
    assert.ok(completed > 0, statuses.join(", "));
    assert.deepEqual((await o.list()).models.map((m) => m.name), ["qwen2.5:0.5b"]);
    assert.equal((await o.chat({ model: "qwen2.5:0.5b", messages, stream: false,
                                 options: { num_predict: 3 } })).done, true);
    // A request naming a model not pulled yet pulls it first (--allow-pull), in Hugging Face's
    // spelling as ollama writes it.
    const hf = "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M";
    assert.equal((await o.chat({ model: hf, messages, stream: false, options: { num_predict: 3 } })).done, true);
    const ids = (await o.list()).models.map((m) => m.name).sort();
    assert.deepEqual(ids, ["bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "qwen2.5:0.5b"]);
    assert.equal((await o.pull({ model: "qwen2.5:0.5b", stream: false })).status, "success");
    const missing = await (async () => { for await (const _ of await o.pull({ model: "nosuch:1b", stream: true })); })()
      .then(() => null, (err) => err);
    assert.match(String(missing), /nosuch/);
    const bad = await o.pull({ model: "../../etc/passwd", stream: false }).catch((err) => err);
    assert.equal(bad.status_code, 400);
    // Hostile bodies, raw: wrong types, a path for a name, the wrong method.
    const raw = async (method, p, body) => {
      const r = await fetch(s.url + p, { method, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: r.status, error: (await r.json()).error };
    };
    assert.deepEqual((await raw("POST", "/api/pull", { model: 5 })).status, 400);
    assert.match((await raw("POST", "/api/pull", { model: 5 })).error, /model/);
    assert.equal((await raw("POST", "/api/pull", [])).status, 400);
    assert.equal((await raw("DELETE", "/api/delete", { model: "/etc/passwd" })).status, 404);
    assert.equal((await raw("DELETE", "/api/delete", { name: ["x"] })).status, 400);
    assert.equal((await raw("GET", "/api/pull")).status, 405);
    // Delete: gone from the list, the server and the caches; a second delete finds nothing.
    await o.delete({ model: "qwen2.5:0.5b" });
    assert.deepEqual((await o.list()).models.map((m) => m.name), ["bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"]);
    await eventually(async () => !(await o.ps()).models.some((m) => m.name === "qwen2.5:0.5b"), 5000, "unload");
    const again = await o.delete({ model: "qwen2.5:0.5b" }).catch((err) => err);
    assert.equal(again.status_code, 404);
    await o.delete({ model: hf });
    assert.deepEqual((await o.list()).models, []);
  } finally {
    const { code } = await s.stop();
    hub.stop();
    assert.equal(code, 0, s.log());
  }
});

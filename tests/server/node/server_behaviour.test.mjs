// What `minfer serve` does around the API: the API key, the queue limit (503 + Retry-After),
// CORS, graceful shutdown on SIGTERM, reasoning returned apart, chat_template_kwargs.

import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import OpenAI from "openai";
import { fixture, startServer, metrics, eventually, thinkTemplate, hasVulkanDevice } from "./harness.mjs";

const messages = [{ role: "user", content: "Hello there" }];

test("an API key guards the API but not /health, /metrics or the chat page", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const server = await startServer(model, ["--api-key", "s3cret", "-t", "2"]);
  try {
    const wrong = new OpenAI({ baseURL: server.url + "/v1", apiKey: "nope", maxRetries: 0 });
    await assert.rejects(wrong.chat.completions.create({ model: "m", messages, max_tokens: 2 }),
                         (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const none = await fetch(server.url + "/v1/models");
    assert.equal(none.status, 401);
    assert.equal((await none.json()).error.type, "authentication_error");
    const right = new OpenAI({ baseURL: server.url + "/v1", apiKey: "s3cret", maxRetries: 0 });
    const r = await right.chat.completions.create({ model: "m", messages, max_tokens: 2, ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 2);
    for (const p of ["/health", "/metrics", "/"]) assert.equal((await fetch(server.url + p)).status, 200, p);
  } finally {
    await server.stop();
  }
  // The key from MINFER_API_KEY.
  const env = await startServer(model, ["-t", "2"], { env: { MINFER_API_KEY: "from-env" } });
  try {
    assert.equal((await fetch(env.url + "/v1/models")).status, 401);
    assert.equal((await fetch(env.url + "/v1/models", { headers: { Authorization: "Bearer from-env" } })).status, 200);
  } finally {
    await env.stop();
  }
});

test("a full queue answers 503 with Retry-After; CORS headers when asked for", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const server = await startServer(model, ["-np", "1", "--max-queue", "0", "--ctx", "32768", "-t", "2",
                                           "--cors-origin", "https://app.example"]);
  try {
    const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "x", maxRetries: 0 });
    const controller = new AbortController();
    const busy = await client.chat.completions.create(
      { model: "m", messages, max_tokens: 30000, ignore_eos: true, stream: true }, { signal: controller.signal });
    const it = busy[Symbol.asyncIterator]();
    await it.next();  // it runs
    await assert.rejects(client.chat.completions.create({ model: "m", messages, max_tokens: 2 }), (e) => {
      assert.equal(e.status, 503);
      assert.equal(e.headers["retry-after"], "1");
      assert.equal(e.error?.type ?? e.type, "server_busy_error");
      return true;
    });
    controller.abort();
    await eventually(async () => (await metrics(server.url)).minfer_sequences_running === 0, 5000, "the stream to end");
    const preflight = await fetch(server.url + "/v1/chat/completions", {
      method: "OPTIONS", headers: { Origin: "https://app.example", "Access-Control-Request-Method": "POST" } });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "https://app.example");
    assert.match(preflight.headers.get("access-control-allow-headers"), /Authorization/);
    const models = await fetch(server.url + "/v1/models");
    assert.equal(models.headers.get("access-control-allow-origin"), "https://app.example");
  } finally {
    await server.stop();
  }
});

test("SIGTERM lets a running stream finish within the timeout, then ends it and exits 0", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const server = await startServer(model, ["--ctx", "32768", "--shutdown-timeout", "1", "-t", "2"]);
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "x", maxRetries: 0 });
  const stream = await client.chat.completions.create(
    { model: "m", messages, max_tokens: 30000, ignore_eos: true, stream: true });
  let finish = null, chunks = 0;
  const started = Date.now();
  const reading = (async () => {
    for await (const chunk of stream) {
      ++chunks;
      if (chunks === 2) server.proc.kill("SIGTERM");
      for (const c of chunk.choices) if (c.finish_reason) finish = c.finish_reason;
    }
  })();
  await reading;
  const { code } = await server.exited;
  assert.equal(code, 0, server.log());
  assert.equal(finish, "length");  // cut short, with a last chunk and [DONE]
  assert.ok(Date.now() - started < 8000);
  assert.match(server.log(), /SIGTERM: finishing running requests/);
  // New connections are refused once it stops accepting.
  await assert.rejects(fetch(server.url + "/health"));
});

test("reasoning between <think> tags comes back as reasoning_content", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const server = await startServer(model, ["--template", thinkTemplate(), "-t", "2"]);
  try {
    const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "x", maxRetries: 0 });
    const params = { model: "m", messages, temperature: 0, max_tokens: 10, ignore_eos: true };
    const r = await client.chat.completions.create(params);
    assert.ok(r.choices[0].message.reasoning_content.length > 0);
    assert.equal(r.choices[0].message.content, "");
    let reasoning = "", content = "";
    for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
      for (const c of chunk.choices) {
        reasoning += c.delta?.reasoning_content ?? "";
        content += c.delta?.content ?? "";
      }
    }
    assert.equal(reasoning, r.choices[0].message.reasoning_content);
    assert.equal(content, "");
  } finally {
    await server.stop();
  }
});

test("chat_template_kwargs reach the template (Qwen3's enable_thinking)", async (t) => {
  const model = fixture(t, "models/tiny-qwen3-q8_0.gguf");
  if (!model) return;
  const server = await startServer(model, ["-t", "2"]);
  try {
    const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "x", maxRetries: 0 });
    const base = { model: "m", messages, max_tokens: 1, ignore_eos: true };
    const thinking = await client.chat.completions.create(base);
    const direct = await client.chat.completions.create({ ...base, chat_template_kwargs: { enable_thinking: false } });
    // enable_thinking=false adds an empty <think></think> block to the prompt.
    assert.ok(direct.usage.prompt_tokens > thinking.usage.prompt_tokens,
              `${direct.usage.prompt_tokens} vs ${thinking.usage.prompt_tokens}`);
  } finally {
    await server.stop();
  }
});

// HTTP/1.1 pipelining: a client sends a long generation and, on the same connection, a second
// request, then goes away. The first request's sequence ends at the next engine step, although
// the server had already read the second request (it used to keep generating until the first
// reply was written in full); and a pipelining client that stays gets both answers in order.
test("a pipelining client that disconnects frees its sequence at once", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const server = await startServer(model, ["--ctx", "32768", "-t", "2"]);
  const { hostname, port } = new URL(server.url);
  const request = (maxTokens) => {
    const body = JSON.stringify({ model: "m", messages, max_tokens: maxTokens, ignore_eos: true });
    return `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
           `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };
  try {
    const socket = net.connect(Number(port), hostname);
    await new Promise((resolve) => socket.on("connect", resolve));
    socket.write(request(30000) + request(2));
    await eventually(async () => (await metrics(server.url)).minfer_sequences_running === 1, 5000, "the first request to run");
    socket.destroy();
    await eventually(async () => (await metrics(server.url)).minfer_sequences_running === 0, 3000,
                     "the disconnected client's sequence to end");

    // Staying: both replies arrive, in order.
    const stay = net.connect(Number(port), hostname);
    const received = [];
    stay.on("data", (d) => received.push(d));
    await new Promise((resolve) => stay.on("connect", resolve));
    stay.write(request(3) + request(2));
    await eventually(() => (Buffer.concat(received).toString().match(/HTTP\/1\.1 200/g) || []).length === 2, 10000, "two replies");
    const text = Buffer.concat(received).toString();
    const usages = [...text.matchAll(/"completion_tokens":(\d+)/g)].map((m) => Number(m[1]));
    assert.deepEqual(usages, [3, 2]);
    stay.destroy();
  } finally {
    await server.stop();
  }
});

test("a forward pass beyond the GPU's memory fails its request with a 500 saying why; serving goes on", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model || !hasVulkanDevice(t)) return;
  // A device budget of 8 MB holds the weights (5.2 MiB, copied to the device), the cache and a
  // short prompt's activations, not those of a prompt of 600 tokens in one pass.
  const device = process.env.MINFER_SERVE_DEVICE ? [] : ["--device", "vulkan"];
  const server = await startServer(model, [...device, "-np", "1", "--ctx", "1024", "-t", "2"],
                                   { env: { MINFER_VULKAN_MEMORY_BUDGET: "8000000", MINFER_VULKAN_IMPORT: "0" } });
  try {
    const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "x", maxRetries: 0 });
    const long = [{ role: "user", content: "hello world ".repeat(200) }];
    const why = /the server could not run this request: the activations of a batch of \d+ tokens: Vulkan device .* has no room for/;
    await assert.rejects(client.chat.completions.create({ model: "m", messages: long, max_tokens: 2 }), (e) => {
      assert.equal(e.status, 500);
      assert.match(e.message, why);
      return true;
    });
    // Streamed: the client raises the stream's error (or the 500 before it began).
    await assert.rejects((async () => {
      const stream = await client.chat.completions.create({ model: "m", messages: long, max_tokens: 2, stream: true });
      for await (const chunk of stream) assert.ok(chunk);
    })(), why);
    // ollama's and Anthropic's APIs say it in their shapes.
    const ollama = await fetch(server.url + "/api/chat", {
      method: "POST", body: JSON.stringify({ model: "m", messages: long, stream: false }) });
    assert.equal(ollama.status, 500);
    assert.match((await ollama.json()).error, why);
    const anthropic = await fetch(server.url + "/v1/messages", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: long, max_tokens: 2 }) });
    assert.equal(anthropic.status, 500);
    const body = await anthropic.json();
    assert.equal(body.error.type, "api_error");
    assert.match(body.error.message, why);
    // The server serves on.
    const r = await client.chat.completions.create({ model: "m", messages, max_tokens: 2, ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 2);
    assert.match(server.log(), /server: a step failed: the activations of a batch of 512 tokens/);
  } finally {
    await server.stop();
  }
});

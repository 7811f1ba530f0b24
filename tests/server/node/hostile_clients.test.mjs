// Clients that misbehave, over raw sockets and plain HTTP: malformed and truncated JSON, bodies
// and headers beyond the limits, a slowloris, invalid UTF-8, 10,000 message parts, absurd
// max_tokens, every field with the wrong type, too many connections; then 10,000 sequential
// requests with the server's resident memory flat. The server answers each with the right
// status (never 500) and keeps serving.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { readFileSync } from "node:fs";
import { fixture, startServer } from "./harness.mjs";

let server, host, port;
const REQUESTS = Number(process.env.MINFER_HOSTILE_REQUESTS || 10000);

before(async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  server = await startServer(model, ["-t", "2", "--ctx", "512", "--request-timeout", "1",
                                     "--max-connections", "32", "--no-access-log"]);
  ({ hostname: host, port } = new URL(server.url));
});
after(async () => {
  if (server) assert.equal((await server.stop()).code, 0, server.log());
});

// Writes `chunks` (strings or Buffers, with optional pauses) to a fresh connection and resolves
// with everything the server sent until it closed (or `timeout` ms passed).
function raw(chunks, { timeout = 5000, pause = 0 } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host);
    const received = [];
    let closedByServer = false;
    const timer = setTimeout(() => { socket.destroy(); resolve({ text: Buffer.concat(received).toString(), closed: false }); }, timeout);
    socket.on("data", (d) => received.push(d));
    socket.on("error", () => {});  // a reset after the answer is fine
    socket.on("close", () => {
      closedByServer = true;
      clearTimeout(timer);
      resolve({ text: Buffer.concat(received).toString(), closed: closedByServer });
    });
    socket.on("connect", async () => {
      for (const c of chunks) {
        if (socket.destroyed) break;
        socket.write(c);
        if (pause) await new Promise((r) => setTimeout(r, pause));
      }
    });
    socket.on("timeout", reject);
  });
}
const status = (text) => Number((text.match(/^HTTP\/1\.1 (\d{3})/) || [])[1]);

function post(path, body, extra = "") {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                                    `Content-Length: ${b.length}\r\nConnection: close\r\n${extra}\r\n`), b]);
}

async function chat(body) {
  const r = await fetch(server.url + "/v1/chat/completions", { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}
const messages = [{ role: "user", content: "hi" }];

test("malformed, truncated and non-object JSON is a 400", async (t) => {
  if (!server) return t.skip();
  for (const body of ["{", '{"messages": [', "null", "42", '"x"', "[]", "{]", '{"messages":[{"role":"user","content":"hi"}]', "\u0000",
                     '{"messages":[{"role":"user","content":"hi"}],"n":6e6666}']) {
    const r = await chat(body);
    assert.equal(r.status, 400, body);
    assert.equal(r.json.error.type, "invalid_request_error");
  }
  // A body shorter than its Content-Length: the connection is dropped after the deadline.
  const short = await raw([`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"mess`], { timeout: 8000 });
  assert.ok(short.closed);
  assert.ok(!short.text.includes(" 500 "));
});

test("a 100 MB body is refused with 413 before it is read", async (t) => {
  if (!server) return t.skip();
  const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${100 * 1024 * 1024}\r\n\r\n`;
  const r = await raw([head, Buffer.alloc(1024 * 1024, 0x20)]);
  assert.equal(status(r.text), 413);
  // Chunked, with no length announced: refused once it passes the limit.
  const chunk = Buffer.alloc(1 << 20, 0x20);
  const chunks = [`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n`];
  for (let i = 0; i < 12; ++i) chunks.push(`${chunk.length.toString(16)}\r\n`, chunk, "\r\n");
  const c = await raw(chunks);
  assert.equal(status(c.text), 413);
});

test("10,000 headers are refused with 431", async (t) => {
  if (!server) return t.skip();
  let head = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (let i = 0; i < 10000; ++i) head += `X-H${i}: ${i}\r\n`;
  const r = await raw([head + "\r\n"]);
  assert.equal(status(r.text), 431);
});

test("a slowloris is dropped at the header deadline", async (t) => {
  if (!server) return t.skip();
  const start = Date.now();
  const bytes = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(200);
  const r = await raw(bytes.split(""), { pause: 20, timeout: 10000 });
  assert.ok(r.closed, "the server closed the connection");
  assert.equal(r.text, "");
  assert.ok(Date.now() - start < 3000, `${Date.now() - start} ms`);  // --request-timeout 1
});

test("invalid UTF-8, 10,000 message parts, absurd max_tokens", async (t) => {
  if (!server) return t.skip();
  const bad = Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}]}')]);
  const r1 = await raw([post("/v1/chat/completions", bad)]);
  assert.equal(status(r1.text), 400);
  const parts = Array.from({ length: 10000 }, (_, i) => ({ type: "text", text: `p${i}` }));
  const many = await chat({ messages: [{ role: "user", content: parts }], max_tokens: 1 });
  assert.equal(many.status, 400);
  assert.equal(many.json.error.code, "context_length_exceeded");
  const manyMessages = await chat({ messages: Array.from({ length: 10000 }, () => ({ role: "user", content: "" })), max_tokens: 1 });
  assert.equal(manyMessages.status, 400);
  assert.equal((await chat({ messages, max_tokens: -5 })).status, 400);
  assert.equal((await chat({ messages, max_tokens: 1e300 })).status, 400);  // not an integer
  const huge = await chat({ messages, max_tokens: 9007199254740991, ignore_eos: true });
  assert.equal(huge.status, 200);
  assert.equal(huge.json.choices[0].finish_reason, "length");
});

test("every field with the wrong type is a 400 naming it", async (t) => {
  if (!server) return t.skip();
  const wrong = {
    model: 5, messages: "hi", temperature: "x", top_p: [], top_k: "3", min_p: {}, presence_penalty: "a",
    frequency_penalty: true, repeat_penalty: "1", seed: "s", stop: 7, n: "2", logprobs: "yes",
    top_logprobs: "3", logit_bias: [], ignore_eos: 1, stream: "no", stream_options: 1,
    max_tokens: "10", max_completion_tokens: 1.5, tools: "x", tool_choice: 5, chat_template_kwargs: "x",
    response_format: "json",
  };
  for (const [field, value] of Object.entries(wrong)) {
    const body = { messages, max_tokens: 1, [field]: value };
    if (field === "top_logprobs") body.logprobs = true;
    const r = await chat(body);
    assert.equal(r.status, 400, `${field}: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.error.param, field === "messages" ? "messages" : field, field);
  }
  const completion = await fetch(server.url + "/v1/completions", { method: "POST", body: JSON.stringify({ prompt: 5 }) });
  assert.equal(completion.status, 400);
});

test("HEAD gets headers without a body, and the kept-alive connection goes on", async (t) => {
  if (!server) return t.skip();
  const r = await raw(["HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"]);
  const answers = r.text.split(/(?=HTTP\/1\.1 )/);
  assert.equal(answers.length, 2, r.text);
  assert.match(answers[0], /^HTTP\/1\.1 405 /);
  assert.ok(answers[0].endsWith("\r\n\r\n"), "no body after HEAD's headers");
  assert.match(answers[1], /^HTTP\/1\.1 200 [\s\S]*"status":"ok"/);
});

test("connections beyond --max-connections get 503", async (t) => {
  if (!server) return t.skip();
  const sockets = [];
  for (let i = 0; i < 40; ++i) {
    sockets.push(await new Promise((resolve) => {
      const s = net.connect(port, host, () => resolve(s));
      s.on("error", () => {});
    }));
  }
  const answer = await raw(["GET /health HTTP/1.1\r\nHost: x\r\n\r\n"]);
  assert.equal(status(answer.text), 503);
  for (const s of sockets) s.destroy();
  await new Promise((r) => setTimeout(r, 200));
  assert.equal((await fetch(server.url + "/health")).status, 200);
});

test(`${REQUESTS} sequential requests keep resident memory flat`, async (t) => {
  if (!server) return t.skip();
  const rss = () => Number(readFileSync(`/proc/${server.proc.pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]);
  const body = JSON.stringify({ messages, max_tokens: 1, ignore_eos: true });
  const one = async () => {
    const r = await fetch(server.url + "/v1/chat/completions", { method: "POST", body });
    assert.equal(r.status, 200);
    await r.arrayBuffer();
  };
  const warmup = Math.min(1000, REQUESTS / 10);
  for (let i = 0; i < warmup; ++i) await one();
  const before = rss();
  for (let i = 0; i < REQUESTS; ++i) await one();
  const after = rss();
  assert.ok(after <= before * 1.1, `resident memory ${before} kB -> ${after} kB`);
  t.diagnostic(`resident memory ${before} kB -> ${after} kB over ${REQUESTS} requests`);
});

// `minfer serve` through the real `openai` npm client: chat and completions, streamed and not,
// stop strings, length limits, usage, log-probabilities, seeds, several choices, 16 concurrent
// streams, a stream the client aborts, and every error status through the SDK's error classes
// (automatic retries off, so that each request is made once).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { fixture, startServer, metrics, eventually } from "./harness.mjs";

let server, client, model;
const messages = [{ role: "user", content: "Tell me a story about a dragon." }];

before(async (t) => {
  model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  server = await startServer(model, ["-np", "16", "--ctx", "512", "--max-queue", "64", "-t", "2"]);
  client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  if (server) {
    const { code } = await server.stop();
    assert.equal(code, 0, "exit status after SIGTERM\n" + server.log());
  }
});

async function joinStream(stream) {
  let text = "";
  let finish = null, usage = null, role = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta?.role) role = c.delta.role;
      text += c.delta?.content ?? c.text ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, role };
}

test("chat: the joined stream equals the non-streamed answer at temperature 0", async (t) => {
  if (!server) return t.skip();
  const params = { model: "anything", messages, temperature: 0, max_tokens: 24, ignore_eos: true };
  const whole = await client.chat.completions.create(params);
  assert.equal(whole.object, "chat.completion");
  assert.equal(whole.model, "anything");  // echoed
  assert.match(whole.id, /^chatcmpl-/);
  assert.equal(whole.choices[0].message.role, "assistant");
  assert.equal(whole.choices[0].finish_reason, "length");
  assert.equal(whole.usage.completion_tokens, 24);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 24);
  const streamed = await joinStream(
    await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }));
  assert.equal(streamed.role, "assistant");
  assert.equal(streamed.text, whole.choices[0].message.content);
  assert.equal(streamed.finish, "length");
  assert.deepEqual(streamed.usage, whole.usage);
});

test("completions: a string prompt and the same prompt as token ids", async (t) => {
  if (!server) return t.skip();
  const prompt = "Once upon a time";
  const r = await client.completions.create({ model: "m", prompt, temperature: 0, max_tokens: 12, ignore_eos: true });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices[0].finish_reason, "length");
  const tokenized = await (await fetch(server.url + "/tokenize", {
    method: "POST", body: JSON.stringify({ content: prompt, add_special: true }),
  })).json();
  // usage counts what the tokenizer says
  assert.equal(r.usage.prompt_tokens, tokenized.tokens.length);
  assert.equal(r.usage.completion_tokens, 12);
  const byIds = await client.completions.create({ model: "m", prompt: tokenized.tokens, temperature: 0, max_tokens: 12, ignore_eos: true });
  assert.equal(byIds.choices[0].text, r.choices[0].text);
  const streamed = await joinStream(await client.completions.create({
    model: "m", prompt, temperature: 0, max_tokens: 12, ignore_eos: true, stream: true }));
  assert.equal(streamed.text, r.choices[0].text);
  // /detokenize gives back the text of ids
  const back = await (await fetch(server.url + "/detokenize", {
    method: "POST", body: JSON.stringify({ tokens: tokenized.tokens }) })).json();
  assert.equal(back.content.trim(), prompt);
});

test("a stop string ends the answer before it, with finish_reason stop", async (t) => {
  if (!server) return t.skip();
  const base = { model: "m", messages, temperature: 0, max_tokens: 40, ignore_eos: true };
  const full = (await client.chat.completions.create(base)).choices[0].message.content;
  // A stop string from the middle of the answer.
  const words = full.split(" ").filter((w) => w.length >= 3);
  assert.ok(words.length > 3, full);
  const stop = words[Math.floor(words.length / 2)];
  const cut = await client.chat.completions.create({ ...base, stop: [stop, "never-appears"] });
  assert.equal(cut.choices[0].finish_reason, "stop");
  assert.equal(cut.choices[0].message.content, full.slice(0, full.indexOf(stop)));
  const streamed = await joinStream(await client.chat.completions.create({ ...base, stop, stream: true }));
  assert.equal(streamed.text, cut.choices[0].message.content);
  assert.equal(streamed.finish, "stop");
});

test("logprobs: the chosen token, the top alternatives in order, one entry per token", async (t) => {
  if (!server) return t.skip();
  const r = await client.chat.completions.create({
    model: "m", messages, temperature: 0, max_tokens: 8, ignore_eos: true, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  let text = "";
  for (const e of content) {
    assert.equal(e.top_logprobs.length, 3);
    assert.ok(e.logprob <= 0);
    // greedy: the chosen token is the most likely one
    assert.equal(e.token, e.top_logprobs[0].token);
    assert.ok(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, "utf8")]);
    text += e.token;
  }
  assert.equal(text, r.choices[0].message.content);
  const legacy = await client.completions.create({ model: "m", prompt: "Once", temperature: 0, max_tokens: 5, ignore_eos: true, logprobs: 2 });
  const lp = legacy.choices[0].logprobs;
  assert.equal(lp.tokens.length, 5);
  assert.equal(lp.token_logprobs.length, 5);
  assert.equal(Object.keys(lp.top_logprobs[0]).length, 2);
  assert.equal(lp.text_offset[0], 0);
});

test("the same seed gives the same text; several choices share the prompt", async (t) => {
  if (!server) return t.skip();
  const params = { model: "m", messages, temperature: 1.0, top_k: 0, top_p: 1, min_p: 0, max_tokens: 16, ignore_eos: true };
  const a = await client.chat.completions.create({ ...params, seed: 42 });
  const b = await client.chat.completions.create({ ...params, seed: 42 });
  const c = await client.chat.completions.create({ ...params, seed: 43 });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.notEqual(a.choices[0].message.content, c.choices[0].message.content);
  const three = await client.chat.completions.create({ ...params, seed: 42, n: 3 });
  assert.equal(three.choices.length, 3);
  assert.deepEqual(three.choices.map((x) => x.index), [0, 1, 2]);
  // choice i draws with seed + i: the first is the seed-42 answer
  assert.equal(three.choices[0].message.content, a.choices[0].message.content);
  assert.equal(three.choices[1].message.content, c.choices[0].message.content);
  assert.equal(three.usage.completion_tokens, 48);
  const streamed = await client.chat.completions.create({ ...params, seed: 42, n: 2, stream: true });
  const texts = ["", ""];
  for await (const chunk of streamed) for (const ch of chunk.choices) texts[ch.index] += ch.delta?.content ?? "";
  assert.equal(texts[0], a.choices[0].message.content);
  assert.equal(texts[1], c.choices[0].message.content);
});

test("16 concurrent streams at temperature 0 all equal the solo answer", async (t) => {
  if (!server) return t.skip();
  const params = { model: "m", messages, temperature: 0, max_tokens: 32, ignore_eos: true };
  const solo = (await client.chat.completions.create(params)).choices[0].message.content;
  const streams = await Promise.all(Array.from({ length: 16 }, () =>
    client.chat.completions.create({ ...params, stream: true }).then(joinStream)));
  for (const s of streams) assert.equal(s.text, solo);
});

test("a stream aborted by the client frees its sequence", async (t) => {
  if (!server) return t.skip();
  // A context long enough that the answer outlasts the test (the tiny model is fast).
  const long = await startServer(model, ["--ctx", "32768", "-t", "2"]);
  try {
    const c = new OpenAI({ baseURL: long.url + "/v1", apiKey: "unused", maxRetries: 0 });
    const controller = new AbortController();
    const stream = await c.chat.completions.create(
      { model: "m", messages, temperature: 0, max_tokens: 30000, ignore_eos: true, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    // (The SDK ends the iteration quietly when its controller aborts.)
    for await (const _ of stream) {
      if (++chunks === 3) {
        assert.equal((await metrics(long.url)).minfer_sequences_running, 1);
        controller.abort();
      }
    }
    assert.ok(chunks >= 3 && chunks < 1000, `${chunks} chunks`);
    await eventually(async () => (await metrics(long.url)).minfer_sequences_running === 0, 5000,
                     "the aborted sequence to end");
    const m = await metrics(long.url);
    assert.equal(m.minfer_kv_blocks_used, 0);  // its blocks went back (or to the prefix cache)
    assert.equal(m['minfer_requests_total{status="499"}'], 1);
  } finally {
    await long.stop();
  }
});

test("errors come back in OpenAI's shape through the SDK's error classes", async (t) => {
  if (!server) return t.skip();
  const expectError = async (promise, klass, status, param, code) => {
    await assert.rejects(promise, (e) => {
      assert.ok(e instanceof klass, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, status);
      if (param !== undefined) assert.equal(e.param, param);
      if (code !== undefined) assert.equal(e.code, code);
      return true;
    });
  };
  await expectError(client.chat.completions.create({ model: "m", messages, temperature: "hot" }),
                    OpenAI.BadRequestError, 400, "temperature");
  await expectError(client.chat.completions.create({ model: "m", messages: [] }), OpenAI.BadRequestError, 400, "messages");
  await expectError(client.chat.completions.create({ model: "m" }), OpenAI.BadRequestError, 400, "messages");
  await expectError(client.chat.completions.create({ model: "m", messages, n: 9 }), OpenAI.BadRequestError, 400, "n");
  await expectError(client.chat.completions.create({ model: "m", messages, max_tokens: -7 }), OpenAI.BadRequestError, 400, "max_tokens");
  const long = [{ role: "user", content: "dragon ".repeat(600) }];
  await expectError(client.chat.completions.create({ model: "m", messages: long }), OpenAI.BadRequestError, 400,
                    "messages", "context_length_exceeded");
  await expectError(client.get("/nope"), OpenAI.NotFoundError, 404);
  await expectError(client.get("/chat/completions"), OpenAI.APIError, 405);
  const huge = [{ role: "user", content: "x".repeat(9 * 1024 * 1024) }];
  await expectError(client.chat.completions.create({ model: "m", messages: huge }), OpenAI.APIError, 413);
  // A prompt that fits but leaves less room than max_tokens: generates until the context is full.
  const nearly = [{ role: "user", content: "dragon ".repeat(230) }];
  const r = await client.chat.completions.create({ model: "m", messages: nearly, max_tokens: 100, ignore_eos: true });
  assert.ok(r.usage.prompt_tokens > 412 && r.usage.prompt_tokens < 512, `${r.usage.prompt_tokens}`);
  assert.equal(r.choices[0].finish_reason, "length");
  // 512 positions evaluated; the last token, sampled from the last row, needs no position.
  assert.equal(r.usage.prompt_tokens + r.usage.completion_tokens, 513);
});

test("models, health and metrics", async (t) => {
  if (!server) return t.skip();
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ["tiny-qwen2-q8_0"]);
  const health = await fetch(server.url + "/health");
  assert.equal(health.status, 200);
  const m = await metrics(server.url);
  assert.ok(m['minfer_requests_total{status="200"}'] > 0);
  assert.ok(m.minfer_generated_tokens_total > 0);
  assert.ok(m.minfer_kv_blocks_total > 0);
  assert.ok(m.minfer_time_to_first_token_seconds_count > 0);
  assert.ok(m.minfer_inter_token_latency_seconds_count > 0);
});

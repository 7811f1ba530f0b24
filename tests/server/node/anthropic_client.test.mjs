// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) through the official
// `@anthropic-ai/sdk` client: whole and streamed answers, stop sequences, system prompts and
// prefills, token counts, tools (any, a named tool, auto; a round trip with a tool_result),
// thinking blocks and the `thinking` switch, x-api-key and Bearer keys, and every refusal in
// Anthropic's error shape. The fixture models have random weights: the tests check the API's
// form, not the model's sense.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import Ajv from "ajv";
import { fixture, startServer, thinkTemplate } from "./harness.mjs";

const KEY = "sk-ant-test-key";
let server, client;

before(async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  server = await startServer(model, ["-np", "4", "--ctx", "1024", "-t", "2", "--api-key", KEY]);
  client = new Anthropic({ baseURL: server.url, apiKey: KEY, maxRetries: 0 });
});
after(async () => {
  if (server) {
    const { code } = await server.stop();
    assert.equal(code, 0, "exit status after SIGTERM\n" + server.log());
  }
});

const messages = [{ role: "user", content: "Tell me a story about a dragon." }];

function textOf(message) {
  return message.content.filter((b) => b.type === "text").map((b) => b.text).join("");
}

test("messages: a whole answer, and the same answer streamed, at temperature 0", async (t) => {
  if (!server) return t.skip();
  const params = { model: "claude-test", max_tokens: 20, messages, temperature: 0 };
  const whole = await client.messages.create(params);
  assert.match(whole.id, /^msg_/);
  assert.equal(whole.type, "message");
  assert.equal(whole.role, "assistant");
  assert.equal(whole.model, "claude-test");  // echoed
  assert.equal(whole.content.length, 1);
  assert.equal(whole.content[0].type, "text");
  assert.ok(whole.content[0].text.length > 0);
  assert.equal(whole.stop_reason, "max_tokens");
  assert.equal(whole.stop_sequence, null);
  assert.equal(whole.usage.output_tokens, 20);
  assert.ok(whole.usage.input_tokens > 5);

  // The SDK's stream helper: every event in Anthropic's order, and its accumulated message.
  const events = [];
  const stream = client.messages.stream(params);
  stream.on("streamEvent", (e) => events.push(e.type));
  const final = await stream.finalMessage();
  assert.equal(textOf(final), whole.content[0].text);
  assert.equal(final.stop_reason, "max_tokens");
  assert.deepEqual(final.usage.output_tokens, 20);
  assert.equal(final.usage.input_tokens, whole.usage.input_tokens);
  assert.equal(events[0], "message_start");
  assert.equal(events[1], "content_block_start");
  assert.deepEqual(events.slice(-3), ["content_block_stop", "message_delta", "message_stop"]);
  assert.ok(events.slice(2, -3).every((e) => e === "content_block_delta"), events.join(","));
});

test("stop_sequences: the answer ends before the first one met, which is named", async (t) => {
  if (!server) return t.skip();
  const params = { model: "m", max_tokens: 40, messages, temperature: 0 };
  const text = textOf(await client.messages.create(params));
  // A piece from the middle of the answer stops it there.
  const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 4);
  assert.ok(stop.trim().length > 0, JSON.stringify(text));
  for (const streamed of [false, true]) {
    const req = { ...params, stop_sequences: ["\u0001never", stop] };
    const r = streamed ? await client.messages.stream(req).finalMessage() : await client.messages.create(req);
    assert.equal(r.stop_reason, "stop_sequence", `streamed ${streamed}`);
    assert.equal(r.stop_sequence, stop);
    assert.equal(textOf(r), text.slice(0, text.indexOf(stop)));
  }
});

test("count_tokens equals the prompt a request is given; system and prefill count", async (t) => {
  if (!server) return t.skip();
  const base = { model: "m", messages };
  const counted = await client.messages.countTokens(base);
  const r = await client.messages.create({ ...base, max_tokens: 1 });
  assert.equal(counted.input_tokens, r.usage.input_tokens);
  // (The template has a default system prompt of its own: compare two of ours.)
  const short = await client.messages.countTokens({ ...base, system: "You are terse." });
  const longer = await client.messages.countTokens({ ...base, system: "You are terse. You answer in one word." });
  assert.ok(longer.input_tokens > short.input_tokens);
  // A system prompt as text blocks is the same prompt.
  const blocks = await client.messages.countTokens({
    ...base, system: [{ type: "text", text: "You are terse." }, { type: "text", text: "You answer in one word." }],
  });
  const joined = await client.messages.countTokens({ ...base, system: "You are terse.\nYou answer in one word." });
  assert.equal(blocks.input_tokens, joined.input_tokens);
  // A last assistant message is the start of the answer: counted, continued, not repeated.
  const prefill = [...messages, { role: "assistant", content: "Once upon a time" }];
  const withPrefill = await client.messages.countTokens({ model: "m", messages: prefill });
  assert.ok(withPrefill.input_tokens > counted.input_tokens);
  const continued = await client.messages.create({ model: "m", messages: prefill, max_tokens: 5, temperature: 0 });
  assert.equal(continued.usage.input_tokens, withPrefill.input_tokens);
  assert.ok(!textOf(continued).startsWith("Once upon a time"));
});

const ajv = new Ajv();
const TOOLS = [
  {
    name: "get_weather",
    description: "The weather in a city",
    input_schema: {
      type: "object",
      properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city"],
    },
  },
  {
    name: "add",
    description: "Adds two integers",
    input_schema: {
      type: "object",
      properties: { a: { type: "integer", minimum: -99, maximum: 99 }, b: { type: "integer", minimum: -99, maximum: 99 } },
      required: ["a", "b"],
    },
  },
];
const VALIDATE = Object.fromEntries(TOOLS.map((tool) => [tool.name, ajv.compile(tool.input_schema)]));

function checkToolUses(message, only) {
  const uses = message.content.filter((b) => b.type === "tool_use");
  assert.ok(uses.length >= 1, JSON.stringify(message));
  for (const use of uses) {
    assert.match(use.id, /^toolu_[A-Za-z0-9]{24}$/);
    if (only) assert.equal(use.name, only);
    assert.ok(VALIDATE[use.name], `unknown tool ${use.name}`);
    assert.ok(VALIDATE[use.name](use.input), `${JSON.stringify(use.input)}: ${JSON.stringify(VALIDATE[use.name].errors)}`);
  }
  return uses;
}

test("tools: tool_choice any gives tool_use blocks whose input validates, streamed or not", async (t) => {
  if (!server) return t.skip();
  for (const seed of [1, 2, 3]) {
    const params = {
      model: "m", max_tokens: 300, messages: [{ role: "user", content: "Weather in Paris?" }],
      tools: TOOLS, tool_choice: { type: "any", disable_parallel_tool_use: true }, temperature: 1,
      metadata: { user_id: `seed-${seed}` },
    };
    const whole = await client.messages.create(params);
    assert.equal(whole.stop_reason, "tool_use", JSON.stringify(whole));
    assert.equal(checkToolUses(whole).length, 1);
    assert.equal(textOf(whole), "");  // constrained to calls: no text
    const final = await client.messages.stream(params).finalMessage();
    assert.equal(final.stop_reason, "tool_use");
    assert.equal(checkToolUses(final).length, 1);
  }
});

test("tools: a named tool is the one used; auto gives text or a well-formed use", async (t) => {
  if (!server) return t.skip();
  const named = await client.messages.create({
    model: "m", max_tokens: 300, messages: [{ role: "user", content: "2+3?" }], tools: TOOLS,
    tool_choice: { type: "tool", name: "add", disable_parallel_tool_use: true },
  });
  assert.equal(named.stop_reason, "tool_use");
  checkToolUses(named, "add");
  for (const temperature of [0, 1]) {
    const auto = await client.messages.create({
      model: "m", max_tokens: 120, messages: [{ role: "user", content: "Hi" }], tools: TOOLS,
      tool_choice: { type: "auto" }, temperature,
    });
    if (auto.content.some((b) => b.type === "tool_use")) {
      checkToolUses(auto);
      assert.ok(["tool_use", "max_tokens"].includes(auto.stop_reason), auto.stop_reason);
    }
    assert.ok(!textOf(auto).includes("<tool_call>"), textOf(auto));
  }
  const none = await client.messages.create({
    model: "m", max_tokens: 10, messages: [{ role: "user", content: "Hi" }], tools: TOOLS,
    tool_choice: { type: "none" },
  });
  assert.ok(none.content.every((b) => b.type === "text"));
});

test("tools: a round trip with the tool's result goes back through the template", async (t) => {
  if (!server) return t.skip();
  const first = await client.messages.create({
    model: "m", max_tokens: 300, messages: [{ role: "user", content: "Weather in Paris?" }], tools: TOOLS,
    tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
  });
  const [use] = checkToolUses(first, "get_weather");
  const history = [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: first.content },
    { role: "user", content: [
      { type: "tool_result", tool_use_id: use.id, content: "18 degrees, sunny" },
      { type: "text", text: "Thanks. Summarise it." },
    ] },
  ];
  const counted = await client.messages.countTokens({ model: "m", messages: history, tools: TOOLS });
  const second = await client.messages.create({ model: "m", max_tokens: 8, messages: history, tools: TOOLS });
  assert.equal(second.usage.input_tokens, counted.input_tokens);
  assert.ok(["end_turn", "max_tokens", "tool_use"].includes(second.stop_reason));
  // The result and the earlier call are in the prompt: it is longer than without them.
  const shorter = await client.messages.countTokens({ model: "m", messages: history.slice(0, 1), tools: TOOLS });
  assert.ok(counted.input_tokens > shorter.input_tokens + 10);
});

test("refusals come in Anthropic's error shape through the SDK's error classes", async (t) => {
  if (!server) return t.skip();
  const refused = async (params, status, pattern) => {
    const e = await client.messages.create(params).then(() => null, (err) => err);
    assert.ok(e instanceof Anthropic.APIError, String(e));
    assert.equal(e.status, status, e.message);
    assert.equal(e.error.type, "error");
    assert.equal(e.error.error.type, status === 400 ? "invalid_request_error" : e.error.error.type);
    assert.match(e.error.error.message, pattern);
    return e;
  };
  await refused({ model: "m", messages }, 400, /'max_tokens' is required/);
  await refused({ model: "m", max_tokens: 0, messages }, 400, /max_tokens/);
  await refused({ model: "m", max_tokens: 5, messages: [] }, 400, /at least one message/);
  await refused({ model: "m", max_tokens: 5, messages: [{ role: "system", content: "x" }] }, 400, /'user' or 'assistant'/);
  await refused({ model: "m", max_tokens: 5, temperature: 1.5, messages }, 400, /temperature/);
  await refused({ model: "m", max_tokens: 5, stop_sequences: "x", messages }, 400, /stop_sequences/);
  await refused({
    model: "m", max_tokens: 5,
    messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }],
  }, 400, /image block: minfer serves text models/);
  await refused({ model: "m", max_tokens: 5, messages, tools: [{ type: "web_search_20250305", name: "web_search" }] }, 400, /server tool/);
  await refused({ model: "m", max_tokens: 5, messages, tools: TOOLS, tool_choice: { type: "tool", name: "nope" } }, 400, /'nope'/);
  await refused({ model: "m", max_tokens: 5, messages, thinking: { type: "sometimes" } }, 400, /thinking/);
  const long = [{ role: "user", content: "dragon ".repeat(2000) }];
  await refused({ model: "m", max_tokens: 5, messages: long }, 400, /maximum context length/);

  // The key: x-api-key (the SDK's) or Bearer; a wrong one is a 401 in the same shape.
  const wrong = new Anthropic({ baseURL: server.url, apiKey: "wrong", maxRetries: 0 });
  const e = await wrong.messages.create({ model: "m", max_tokens: 1, messages }).then(() => null, (err) => err);
  assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
  assert.equal(e.error.error.type, "authentication_error");
  const bearer = await fetch(server.url + "/v1/messages", {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "m", max_tokens: 1, messages }),
  });
  assert.equal(bearer.status, 200);

  // Refused by the HTTP layer before any handler: malformed JSON, a body over the limit.
  const raw = async (body, status, type) => {
    const r = await fetch(server.url + "/v1/messages", {
      method: "POST", headers: { "x-api-key": KEY, "content-type": "application/json" }, body,
    });
    assert.equal(r.status, status);
    const j = await r.json();
    assert.equal(j.type, "error");
    assert.equal(j.error.type, type);
  };
  await raw("{not json", 400, "invalid_request_error");
  await raw("[1,2]", 400, "invalid_request_error");
  await raw("x".repeat(9 << 20), 413, "request_too_large");
  const get = await fetch(server.url + "/v1/messages", { headers: { "x-api-key": KEY } });
  assert.equal(get.status, 405);
  assert.equal((await get.json()).error.type, "invalid_request_error");
});

test("thinking: a reasoning block comes back as a thinking block; the switch reaches the template", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const thinker = await startServer(model, ["--template", thinkTemplate(), "-t", "2"]);
  try {
    const c = new Anthropic({ baseURL: thinker.url, apiKey: "x", maxRetries: 0 });
    const params = { model: "m", max_tokens: 10, messages, temperature: 0 };
    const whole = await c.messages.create(params);
    assert.equal(whole.content.length, 1);
    assert.equal(whole.content[0].type, "thinking");
    assert.ok(whole.content[0].thinking.length > 0);
    const final = await c.messages.stream(params).finalMessage();
    assert.equal(final.content[0].type, "thinking");
    assert.equal(final.content[0].thinking, whole.content[0].thinking);
  } finally {
    await thinker.stop();
  }
  // Qwen3's template reads enable_thinking: disabled writes an empty <think></think> into the
  // prompt, so the same conversation is longer.
  const qwen3 = fixture(t, "models/tiny-qwen3-q8_0.gguf");
  if (!qwen3) return;
  const q = await startServer(qwen3, ["-t", "2"]);
  try {
    const c = new Anthropic({ baseURL: q.url, apiKey: "x", maxRetries: 0 });
    const on = await c.messages.countTokens({ model: "m", messages, thinking: { type: "enabled", budget_tokens: 1024 } });
    const off = await c.messages.countTokens({ model: "m", messages, thinking: { type: "disabled" } });
    assert.ok(off.input_tokens > on.input_tokens, `${off.input_tokens} > ${on.input_tokens}`);
  } finally {
    await q.stop();
  }
});

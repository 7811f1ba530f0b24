// ollama's API (/api/chat, /api/generate, /api/tags, /api/show, /api/ps, /api/version) through the
// official `ollama` npm client: streamed (NDJSON, ollama's default) and whole answers, options,
// structured `format`, tools with arguments as objects, thinking, the "load" answer to an empty
// request, and the refusals in ollama's error shape ({"error": "..."}). The fixture models have
// random weights: the tests check the API's form, not the model's sense.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Ollama } from "ollama";
import Ajv from "ajv";
import { fixture, startServer, thinkTemplate } from "./harness.mjs";

let server, ollama;

before(async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  server = await startServer(model, ["-np", "4", "--ctx", "1024", "-t", "2"]);
  ollama = new Ollama({ host: server.url });
});
after(async () => {
  if (server) {
    const { code } = await server.stop();
    assert.equal(code, 0, "exit status after SIGTERM\n" + server.log());
  }
});

const messages = [{ role: "user", content: "Tell me a story about a dragon." }];

test("chat: the joined stream equals the whole answer at temperature 0, with ollama's timings", async (t) => {
  if (!server) return t.skip();
  const params = { model: "tiny-qwen2-q8_0:latest", messages, options: { temperature: 0, num_predict: 16 } };
  const whole = await ollama.chat({ ...params, stream: false });
  assert.equal(whole.model, "tiny-qwen2-q8_0:latest");
  assert.equal(whole.message.role, "assistant");
  assert.ok(whole.message.content.length > 0);
  assert.equal(whole.done, true);
  assert.equal(whole.done_reason, "length");
  assert.equal(whole.eval_count, 16);
  assert.ok(whole.prompt_eval_count > 5);
  assert.ok(whole.total_duration >= whole.eval_duration && whole.eval_duration > 0);
  assert.ok(!Number.isNaN(Date.parse(whole.created_at)));
  let text = "", last = null, parts = 0;
  for await (const part of await ollama.chat({ ...params, stream: true })) {
    parts++;
    text += part.message.content;
    if (part.done) last = part;
  }
  assert.equal(text, whole.message.content);
  assert.ok(parts > 2);
  assert.equal(last.done_reason, "length");
  assert.equal(last.eval_count, 16);
  assert.equal(last.prompt_eval_count, whole.prompt_eval_count);
});

test("generate: a prompt through the template, raw, with a system prompt and stop strings", async (t) => {
  if (!server) return t.skip();
  const options = { temperature: 0, num_predict: 24, seed: 7 };
  const whole = await ollama.generate({ model: "m", prompt: "Once upon a time", options });
  assert.equal(whole.done, true);
  assert.ok(whole.response.length > 0);
  let streamed = "";
  for await (const part of await ollama.generate({ model: "m", prompt: "Once upon a time", options, stream: true }))
    streamed += part.response;
  assert.equal(streamed, whole.response);
  const raw = await ollama.generate({ model: "m", prompt: "Once upon a time", options, raw: true });
  assert.ok(raw.prompt_eval_count < whole.prompt_eval_count);  // no template around it
  const system = await ollama.generate({ model: "m", prompt: "Once upon a time", system: "Be terse. Be kind. Be brief.", options });
  assert.notEqual(system.prompt_eval_count, whole.prompt_eval_count);
  const stop = whole.response.slice(Math.floor(whole.response.length / 2), Math.floor(whole.response.length / 2) + 4);
  const stopped = await ollama.generate({ model: "m", prompt: "Once upon a time", options: { ...options, stop: [stop] } });
  assert.equal(stopped.done_reason, "stop");
  assert.equal(stopped.response, whole.response.slice(0, whole.response.indexOf(stop)));
  // An empty prompt loads the model (ollama's way), answered at once.
  const load = await ollama.generate({ model: "m", prompt: "" });
  assert.equal(load.done_reason, "load");
});

test("format: \"json\" and a JSON schema constrain the answer", async (t) => {
  if (!server) return t.skip();
  // (An unbounded JSON object may outlast the budget: only finished answers are parsed.)
  for (const seed of [0, 1, 2, 3]) {
    const json = await ollama.chat({ model: "m", messages, format: "json", options: { num_predict: 200, seed } });
    if (json.done_reason !== "stop") continue;
    const v = JSON.parse(json.message.content);
    assert.ok(typeof v === "object" && v !== null && !Array.isArray(v), json.message.content);
  }
  const schema = {
    type: "object",
    properties: { name: { enum: ["ann", "bob"] }, age: { type: "integer", minimum: 0, maximum: 120 } },
    required: ["name", "age"],
  };
  const validate = new Ajv().compile(schema);
  for (const seed of [1, 2]) {
    for (const stream of [false, true]) {
      let text = "", reason = null;
      const r = await ollama.generate({ model: "m", prompt: "A person:", format: schema, stream, options: { seed, num_predict: 200 } });
      if (stream) {
        for await (const part of r) { text += part.response; if (part.done) reason = part.done_reason; }
      } else {
        text = r.response; reason = r.done_reason;
      }
      assert.equal(reason, "stop", text);
      assert.ok(validate(JSON.parse(text)), text);
    }
  }
});

test("tools: calls have their arguments as objects; earlier calls and results go back in", async (t) => {
  if (!server) return t.skip();
  const tools = [{
    type: "function",
    function: {
      name: "get_weather", description: "The weather in a city",
      parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"] },
    },
  }];
  // The model decides (ollama has no tool_choice): text without call syntax, or well-formed calls.
  for (const seed of [1, 2, 3, 4]) {
    const r = await ollama.chat({ model: "m", messages: [{ role: "user", content: "Weather in Paris?" }], tools, options: { seed, num_predict: 120 } });
    assert.ok(!r.message.content.includes("<tool_call>"), r.message.content);
    for (const call of r.message.tool_calls ?? []) {
      assert.equal(call.function.name, "get_weather");
      assert.equal(typeof call.function.arguments.city, "string");
    }
  }
  // A conversation with a call (arguments as an object, as ollama writes them) and its result.
  const question = [{ role: "user", content: "Weather in Paris?" }];
  const history = [...question,
    { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris" } } }] },
    { role: "tool", content: "18 degrees", tool_name: "get_weather" }];
  const before = await ollama.chat({ model: "m", tools, messages: question, options: { num_predict: 1 } });
  const after = await ollama.chat({ model: "m", tools, messages: history, options: { num_predict: 1 } });
  assert.ok(after.prompt_eval_count > before.prompt_eval_count + 10);
});

test("tags, show, ps and version describe the model being served", async (t) => {
  if (!server) return t.skip();
  const { models } = await ollama.list();
  assert.equal(models.length, 1);
  const [m] = models;
  assert.equal(m.name, "tiny-qwen2-q8_0:latest");
  assert.equal(m.details.format, "gguf");
  assert.equal(m.details.family, "qwen2");
  assert.equal(m.details.quantization_level, "Q8_0");
  assert.match(m.digest, /^[0-9a-f]{64}$/);
  assert.ok(m.size > 1000000);
  const shown = await ollama.show({ model: m.name });
  assert.ok(shown.template.includes("<|im_start|>"));
  assert.ok(shown.capabilities.includes("completion") && shown.capabilities.includes("tools"));
  assert.equal(shown.model_info["general.architecture"], "qwen2");
  const ps = await ollama.ps();
  assert.equal(ps.models[0].name, m.name);
  const { version } = await ollama.version();
  assert.match(version, /^\d+\.\d+\.\d+$/);
});

test("refusals come in ollama's shape through the client's ResponseError", async (t) => {
  if (!server) return t.skip();
  const refused = async (promise, status, pattern) => {
    const e = await promise.then(() => null, (err) => err);
    assert.equal(e?.name, "ResponseError", String(e));
    assert.equal(e.status_code, status, e.error);
    assert.match(e.error, pattern);
  };
  await refused(ollama.chat({ model: "m", messages: [{ role: "user", content: "x", images: ["AAAA"] }] }), 400, /images/);
  await refused(ollama.generate({ model: "m", prompt: "x", images: ["AAAA"] }), 400, /images/);
  await refused(ollama.chat({ model: "m", messages: [{ role: "robot", content: "x" }] }), 400, /role/);
  await refused(ollama.chat({ model: "m", messages, options: { temperature: "hot" } }), 400, /temperature/);
  await refused(ollama.chat({ model: "m", messages, format: "yaml" }), 400, /format/);
  await refused(ollama.chat({ model: "", messages }), 400, /model/);
  await refused(ollama.generate({ model: "m", prompt: "x", suffix: "y" }), 400, /suffix/);
  await refused(ollama.embed({ model: "m", input: "x" }), 501, /embeddings/);
  // Managing models takes --allow-pull (models_by_name.test.mjs has the server that allows it).
  await refused(ollama.pull({ model: "llama3.2" }), 403, /--allow-pull/);
  await refused(ollama.delete({ model: "m" }), 403, /--allow-pull/);
  await refused(ollama.copy({ source: "m", destination: "n" }), 501, /not supported/);
  // Malformed JSON and a wrong method, raw.
  const r = await fetch(server.url + "/api/chat", { method: "POST", body: "{nope" });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error, /not valid JSON/);
  const get = await fetch(server.url + "/api/chat");
  assert.equal(get.status, 405);
  assert.ok((await get.json()).error);
});

test("think: a reasoning block comes back as thinking", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const thinker = await startServer(model, ["--template", thinkTemplate(), "-t", "2"]);
  try {
    const o = new Ollama({ host: thinker.url });
    const params = { model: "m", messages, think: true, options: { temperature: 0, num_predict: 10 } };
    const whole = await o.chat(params);
    assert.ok(whole.message.thinking.length > 0);
    assert.equal(whole.message.content, "");
    let thinking = "";
    for await (const part of await o.chat({ ...params, stream: true })) thinking += part.message.thinking ?? "";
    assert.equal(thinking, whole.message.thinking);
  } finally {
    await thinker.stop();
  }
});

// Constrained generation through the real `openai` npm client: response_format json_schema and
// json_object, llama-server's `grammar`, and tools (tool_choice required, a named function, auto,
// none; streamed and not; a round trip with a tool result). The fixture model has random weights,
// so its unconstrained output is noise: every finished answer must still parse and validate under
// its schema, checked by an independent validator (npm's ajv), not by minfer's converter.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Ajv from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { fixture, startServer } from "./harness.mjs";

let server, client;
const ajv = new Ajv({ strict: false });
addFormats(ajv);

// Short runs in CI; STRUCTURED_SEEDS=20 for the long form.
const SEEDS = Number(process.env.STRUCTURED_SEEDS || 6);

before(async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  server = await startServer(model, ["-np", "8", "--ctx", "1024", "-t", "2"]);
  client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  if (server) assert.equal((await server.stop()).code, 0, server.log());
});

// Schemas whose strings and arrays are bounded, so that noise can finish.
const SCHEMAS = {
  person: {
    type: "object",
    properties: {
      name: { type: "string", maxLength: 12 },
      age: { type: "integer", minimum: 0, maximum: 120 },
      role: { enum: ["admin", "editor", "viewer"] },
    },
    required: ["name", "age", "role"],
    additionalProperties: false,
  },
  nested: {
    type: "object",
    properties: {
      id: { type: "string", format: "uuid" },
      tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
      address: {
        type: "object",
        properties: { city: { type: "string", maxLength: 10 }, zip: { type: "string", pattern: "^[0-9]{5}$" } },
        required: ["city", "zip"],
      },
      active: { type: "boolean" },
    },
    required: ["id", "tags", "address"],
  },
  tuple_and_numbers: {
    type: "array",
    prefixItems: [{ type: "number" }, { type: "string", format: "date" }, { type: ["boolean", "null"] }],
    items: false,
    minItems: 3,
  },
  recursive: {
    $defs: {
      node: {
        type: "object",
        properties: {
          v: { type: "integer", minimum: -9, maximum: 9 },
          kids: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 2 },
        },
        required: ["v"],
      },
    },
    $ref: "#/$defs/node",
  },
  any_of: {
    anyOf: [
      { type: "object", properties: { ok: { const: true }, count: { type: "integer", exclusiveMinimum: 0, maximum: 999 } }, required: ["ok", "count"] },
      { type: "object", properties: { ok: { const: false }, reason: { type: "string", maxLength: 8 } }, required: ["ok"] },
    ],
  },
};

test("json_schema: every finished answer parses and validates (ajv); most answers finish", async (t) => {
  if (!server) return t.skip();
  let finished = 0, total = 0;
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    const validate = ajv.compile(schema);
    const answers = await Promise.all(Array.from({ length: SEEDS }, (_, seed) =>
      client.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: `Give me a ${name}.` }],
        temperature: 1,
        seed: 1000 + seed,
        max_tokens: 400,
        response_format: { type: "json_schema", json_schema: { name, schema, strict: true } },
      })));
    for (const r of answers) {
      total++;
      const c = r.choices[0];
      if (c.finish_reason !== "stop") continue;
      finished++;
      const value = JSON.parse(c.message.content);
      assert.ok(validate(value), `${name}: ${c.message.content}\n${JSON.stringify(validate.errors)}`);
    }
  }
  t.diagnostic(`${finished} of ${total} answers finished`);
  assert.ok(finished >= 0.8 * total, `${finished} of ${total} answers finished`);
});

test("json_schema: a token limit reached inside the object is finish_reason length", async (t) => {
  if (!server) return t.skip();
  const r = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 3, seed: 1,
    response_format: { type: "json_schema", json_schema: { name: "p", schema: SCHEMAS.person } },
  });
  assert.equal(r.choices[0].finish_reason, "length");
  assert.throws(() => JSON.parse(r.choices[0].message.content));
});

test("json_schema streamed: the joined deltas are the same JSON", async (t) => {
  if (!server) return t.skip();
  const params = {
    model: "m", messages: [{ role: "user", content: "x" }], temperature: 0, max_tokens: 300,
    response_format: { type: "json_schema", json_schema: { name: "p", schema: SCHEMAS.person } },
  };
  const whole = await client.chat.completions.create(params);
  let text = "";
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true }))
    text += chunk.choices[0]?.delta?.content ?? "";
  assert.equal(text, whole.choices[0].message.content);
  assert.ok(ajv.validate(SCHEMAS.person, JSON.parse(text)));
});

test("json_object and llama-server's grammar", async (t) => {
  if (!server) return t.skip();
  for (let seed = 0; seed < SEEDS; seed++) {
    const r = await client.chat.completions.create({
      model: "m", messages: [{ role: "user", content: "x" }], seed, max_tokens: 200,
      response_format: { type: "json_object" },
    });
    if (r.choices[0].finish_reason !== "stop") continue;
    const v = JSON.parse(r.choices[0].message.content);
    assert.equal(typeof v, "object");
    assert.ok(!Array.isArray(v) && v !== null);
  }
  const g = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "x" }], seed: 3, max_tokens: 50,
    grammar: 'root ::= ("yes" | "no") ", because " [a-z]{3,8} "."',
  });
  assert.match(g.choices[0].message.content, /^(yes|no), because [a-z]{3,8}\.$/);
  assert.equal(g.choices[0].finish_reason, "stop");
  // The text endpoint takes them too.
  const c = await client.completions.create({
    model: "m", prompt: "Answer:", seed: 4, max_tokens: 50, grammar: 'root ::= [0-9]{4} "-" [0-9]{2}',
  });
  assert.match(c.choices[0].text, /^[0-9]{4}-[0-9]{2}$/);
});

const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
        required: ["city"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "add",
      description: "Adds two integers",
      parameters: {
        type: "object",
        properties: { a: { type: "integer", minimum: -99, maximum: 99 }, b: { type: "integer", minimum: -99, maximum: 99 } },
        required: ["a", "b"],
      },
    },
  },
];
const PARAMS = Object.fromEntries(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

function checkCalls(message, only) {
  assert.ok(Array.isArray(message.tool_calls) && message.tool_calls.length >= 1, JSON.stringify(message));
  for (const call of message.tool_calls) {
    assert.equal(call.type, "function");
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    if (only) assert.equal(call.function.name, only);
    const validate = PARAMS[call.function.name];
    assert.ok(validate, `unknown tool ${call.function.name}`);
    const args = JSON.parse(call.function.arguments);
    assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
  }
}

test("tools: tool_choice required gives calls whose arguments validate", async (t) => {
  if (!server) return t.skip();
  let finished = 0;
  for (let seed = 0; seed < SEEDS; seed++) {
    const r = await client.chat.completions.create({
      model: "m", messages: [{ role: "user", content: "Weather in Paris? And 2+3?" }], seed,
      max_tokens: 300, tools: TOOLS, tool_choice: "required", parallel_tool_calls: false,
    });
    const c = r.choices[0];
    if (c.finish_reason === "length") continue;
    finished++;
    assert.equal(c.finish_reason, "tool_calls");
    assert.equal(c.message.tool_calls.length, 1);
    checkCalls(c.message);
  }
  t.diagnostic(`${finished} of ${SEEDS} finished`);
  assert.ok(finished >= 0.8 * SEEDS, `${finished} of ${SEEDS} finished`);
});

test("tools: a named function is the one called; several calls when parallel", async (t) => {
  if (!server) return t.skip();
  const r = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "Add 2 and 3." }], seed: 5, max_tokens: 300,
    tools: TOOLS, tool_choice: { type: "function", function: { name: "add" } }, parallel_tool_calls: false,
  });
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  checkCalls(r.choices[0].message, "add");
  // With parallel calls allowed, the answer may hold several; each one validates.
  const several = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "Add." }], seed: 6, max_tokens: 600,
    tools: TOOLS, tool_choice: "required",
  });
  if (several.choices[0].finish_reason === "tool_calls") checkCalls(several.choices[0].message);
});

test("tools streamed: the SDK's accumulated message holds the same calls", async (t) => {
  if (!server) return t.skip();
  const params = {
    model: "m", messages: [{ role: "user", content: "Weather in Oslo?" }], temperature: 0,
    max_tokens: 300, tools: TOOLS, tool_choice: "required", parallel_tool_calls: false,
  };
  const whole = await client.chat.completions.create(params);
  const stream = client.beta.chat.completions.stream({ ...params, stream: true });
  const final = await stream.finalChatCompletion();
  const a = whole.choices[0].message.tool_calls, b = final.choices[0].message.tool_calls;
  assert.equal(final.choices[0].finish_reason, "tool_calls");
  assert.equal(b.length, a.length);
  assert.equal(b[0].function.name, a[0].function.name);
  assert.equal(b[0].function.arguments, a[0].function.arguments);
  checkCalls(final.choices[0].message);
});

// Parallel calls allowed (the default) and a random model that keeps calling until the token
// budget runs out mid-call: the complete calls come back, the cut one is dropped (finish_reason
// "length"), and no call syntax ever reaches content, streamed or not. With parallel_tool_calls
// false the grammar ends the turn after the first call: exactly one, finish_reason "tool_calls".
test("tools: required calls cut by max_tokens leave no call syntax in content", async (t) => {
  if (!server) return t.skip();
  for (let round = 0; round < 2 * SEEDS; round++) {
    const seed = round % SEEDS, parallel = round < SEEDS;
    const params = {
      model: "m", messages: [{ role: "user", content: "Weather in Paris?" }], seed, temperature: 1,
      max_tokens: 300, tools: TOOLS, tool_choice: seed % 2 ? "required" : { type: "function", function: { name: "get_weather" } },
      ...(parallel ? {} : { parallel_tool_calls: false }),
    };
    const whole = await client.chat.completions.create(params);
    const stream = client.beta.chat.completions.stream({ ...params, stream: true });
    let streamedContent = "";
    stream.on("content", (delta) => { streamedContent += delta; });
    const final = await stream.finalChatCompletion();
    for (const [what, c, content] of [["whole", whole.choices[0], whole.choices[0].message.content ?? ""],
                                      ["streamed", final.choices[0], streamedContent]]) {
      assert.equal(content, "", `${what}, seed ${seed}: content ${JSON.stringify(content)}`);
      if (parallel) {
        assert.ok(["tool_calls", "length"].includes(c.finish_reason), `${what}: ${c.finish_reason}`);
        assert.ok(c.message.tool_calls?.length >= (c.finish_reason === "tool_calls" ? 1 : 0));
      } else {
        assert.equal(c.finish_reason, "tool_calls", `${what}, seed ${seed}, one call`);
        assert.equal(c.message.tool_calls?.length, 1, `${what}, seed ${seed}, one call`);
      }
      if (c.message.tool_calls?.length) checkCalls(c.message);
    }
    assert.equal(final.choices[0].message.tool_calls?.length ?? 0, whole.choices[0].message.tool_calls?.length ?? 0);
  }
});

test("tools: auto gives text or well-formed calls; none gives text", async (t) => {
  if (!server) return t.skip();
  for (let round = 0; round < 2 * SEEDS; round++) {
    const seed = round % SEEDS, streamed = round >= SEEDS;
    const params = {
      model: "m", messages: [{ role: "user", content: "Hi" }], seed, max_tokens: 120, tools: TOOLS,
      tool_choice: "auto", parallel_tool_calls: seed % 2 === 0,
    };
    const r = streamed
      ? await client.beta.chat.completions.stream({ ...params, stream: true }).finalChatCompletion()
      : await client.chat.completions.create(params);
    const c = r.choices[0];
    if (c.message.tool_calls?.length) {
      assert.ok(["tool_calls", "length"].includes(c.finish_reason), c.finish_reason);
      checkCalls(c.message);
      if (!params.parallel_tool_calls) assert.equal(c.message.tool_calls.length, 1);
    } else {
      assert.ok(!(c.message.content ?? "").includes("<tool_call>"), c.message.content);
    }
  }
  const none = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "Hi" }], seed: 1, max_tokens: 30, tools: TOOLS,
    tool_choice: "none", ignore_eos: true,
  });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.equal(none.choices[0].finish_reason, "length");
});

test("tools: a full round trip with the tool's result goes back through the template", async (t) => {
  if (!server) return t.skip();
  const messages = [{ role: "user", content: "Weather in Paris?" }];
  const first = await client.chat.completions.create({
    model: "m", messages, seed: 2, max_tokens: 300, tools: TOOLS, tool_choice: "required",
    parallel_tool_calls: false,
  });
  const call = first.choices[0].message.tool_calls[0];
  messages.push(first.choices[0].message);
  messages.push({ role: "tool", tool_call_id: call.id, content: '{"temp": 21}' });
  // The template renders the earlier call with its arguments as an object, and the result.
  const rendered = await (await fetch(server.url + "/apply-template", {
    method: "POST", body: JSON.stringify({ messages, tools: TOOLS }),
  })).json();
  const args = JSON.parse(call.function.arguments);
  assert.ok(rendered.prompt.includes(`"arguments": ${JSON.stringify(args).replaceAll(",", ", ").replaceAll(":", ": ")}`)
    || rendered.prompt.includes(`"arguments": ${JSON.stringify(args)}`), rendered.prompt);
  assert.ok(rendered.prompt.includes('<tool_response>\n{"temp": 21}\n</tool_response>'), rendered.prompt);
  const second = await client.chat.completions.create({ model: "m", messages, seed: 3, max_tokens: 20, tools: TOOLS });
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
});

test("errors name the field: schemas, grammars, tools", async (t) => {
  if (!server) return t.skip();
  const cases = [
    [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "integer", multipleOf: 3 } } } },
      "response_format", /unsupported keyword 'multipleOf'/],
    [{ response_format: { type: "xml" } }, "response_format", /must be 'text', 'json_object' or 'json_schema'/],
    [{ grammar: "root ::= (" }, "grammar", /never closed/],
    [{ grammar: "root ::= root" }, "grammar", /can never finish/],
    [{ tools: TOOLS, tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice", /not among 'tools'/],
    [{ tools: [{ type: "function", function: { name: "bad name" } }] }, "tools", /letters, digits/],
    [{ tools: TOOLS, response_format: { type: "json_object" } }, "response_format", /cannot be combined with tools/],
    [{ tool_choice: "required" }, "tool_choice", /no 'tools'/],
  ];
  for (const [extra, param, message] of cases) {
    await assert.rejects(
      client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 5, ...extra }),
      (e) => {
        assert.equal(e.status, 400, JSON.stringify(extra));
        assert.equal(e.param, param, JSON.stringify(extra));
        assert.match(e.message, message);
        return true;
      });
  }
});

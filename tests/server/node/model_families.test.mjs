// `minfer serve` on the families of issue 16 (Gemma 2 and 3, Phi-3, Mixtral-style llama,
// Qwen3-MoE): each fixture model answers completions and chat completions, and two requests
// decoding in the same steps get what each gets alone (batch invariance through the sliding
// windows and the batched expert matmuls of the server's engine).

import { test } from "node:test";
import assert from "node:assert/strict";
import { fixture, startServer } from "./harness.mjs";

const models = ["tiny-gemma2-q8_0.gguf", "tiny-gemma3-q8_0.gguf", "tiny-phi3-q8_0.gguf",
                "tiny-mixtral-q8_0.gguf", "tiny-qwen3moe-q8_0.gguf"];
const prompts = ["Once upon a time", "The engineers wrote a loader that"];

async function post(url, path, body) {
  const r = await fetch(url + path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(r.status, 200, await r.clone().text());
  return r.json();
}

const complete = (url, prompt) =>
  post(url, "/v1/completions", { prompt, max_tokens: 12, temperature: 0, ignore_eos: true });

for (const name of models) {
  test(`serve runs ${name}`, async (t) => {
    const model = fixture(t, "models/" + name);
    if (!model) return;
    const server = await startServer(model, ["-t", "2", "-np", "2", "--ctx", "256"]);
    try {
      const alone = [];
      for (const p of prompts) alone.push(await complete(server.url, p));
      const together = await Promise.all(prompts.map((p) => complete(server.url, p)));
      for (let i = 0; i < prompts.length; ++i) {
        assert.equal(alone[i].usage.completion_tokens, 12);
        assert.equal(together[i].choices[0].text, alone[i].choices[0].text, prompts[i]);
      }
      const chat = await post(server.url, "/v1/chat/completions", {
        messages: [{ role: "user", content: "Hello" }], max_tokens: 6, temperature: 0,
      });
      assert.equal(typeof chat.choices[0].message.content, "string");
      assert.ok(chat.usage.completion_tokens >= 1 && chat.usage.completion_tokens <= 6);
    } finally {
      await server.stop();
    }
  });
}

// The chat page at / in a real browser (Debian's Chromium, headless, driven by playwright-core):
// a message is sent, the answer streams in and is stopped; no console errors; model output that
// holds HTML (here `<script>`, which a logit bias makes the model write) is shown as text; the
// model picker and the conversations kept in the browser (reload, rename, delete, regenerate);
// Markdown, code highlighting and hostile HTML in an answer. Each test leaves a screenshot in
// build/test-output/chat-page/ (its path is printed).

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { fixture, startServer, metrics, eventually, repo } from "./harness.mjs";

const browserPath = process.env.CHROMIUM || "/usr/bin/chromium";

const screenshots = path.join(repo, "build", "test-output", "chat-page");

async function withPage(t, server, f) {
  if (!existsSync(browserPath)) {
    if (process.env.CI === "true") throw new Error(`no browser at ${browserPath}`);
    return t.skip(`no browser at ${browserPath}`);
  }
  const browser = await chromium.launch({ executablePath: browserPath, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
    const errors = [];
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(server.url + "/");
    await f(page);
    mkdirSync(screenshots, { recursive: true });
    const shot = path.join(screenshots, t.name.replace(/[^a-z0-9]+/gi, "-").toLowerCase() + ".png");
    await page.screenshot({ path: shot, fullPage: true });
    t.diagnostic(`screenshot: ${shot}`);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
}

test("a message streams in and the stop button stops it", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  // A long context and --ignore-eos... the page asks for no limit: the answer runs until stopped.
  const server = await startServer(model, ["--ctx", "32768", "-t", "2"]);
  try {
    await withPage(t, server, async (page) => {
      assert.equal(await page.title(), "minfer chat");
      await eventually(async () => (await page.inputValue("#model")) === "tiny-qwen2-q8_0", 5000, "the model name");
      await page.fill("#system", "You are terse.");
      await page.fill("#input", "Tell me about <b>dragons</b>");
      await page.press("#input", "Enter");
      // The user's message is text, not markup.
      assert.equal(await page.textContent(".msg.user .body"), "Tell me about <b>dragons</b>");
      assert.equal(await page.locator(".msg.user b").count(), 0);
      const answer = page.locator(".msg.assistant .body").last();
      const first = await eventually(async () => (await answer.textContent()).length > 20 && (await answer.textContent()), 10000, "the answer to stream");
      await eventually(async () => (await answer.textContent()).length > first.length, 10000, "the answer to grow");
      assert.ok(await page.isEnabled("#stop"));
      await page.click("#stop");
      await eventually(async () => !(await page.isEnabled("#stop")), 5000, "the stop button to be disabled");
      const stopped = await answer.textContent();
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(await answer.textContent(), stopped);  // nothing more arrives
      await eventually(async () => (await metrics(server.url)).minfer_sequences_running === 0, 5000,
                       "the stopped sequence to end on the server");
    });
  } finally {
    await server.stop();
  }
});

test("model output holding <script> is shown as text", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  // "<script>" is the tokens 27 '<', 1416 'sc', 1968 'ript', 29 '>' of this vocabulary: biases of
  // 100, 90, 80, 70 and a repetition penalty that divides a used token's logit by 100 make greedy
  // decoding write them in that order.
  const server = await startServer(model, [
    "-t", "2", "--temp", "0", "-n", "4", "--repeat-penalty", "100",
    "--logit-bias", "27+100", "--logit-bias", "1416+90", "--logit-bias", "1968+80", "--logit-bias", "29+70"]);
  try {
    await withPage(t, server, async (page) => {
      let dialogs = 0;
      page.on("dialog", (d) => { ++dialogs; d.dismiss(); });
      await page.fill("#input", "Say something");
      await page.press("#input", "Enter");
      const answer = page.locator(".msg.assistant .body").last();
      await eventually(async () => (await page.locator(".msg.assistant .stats").count()) === 1, 10000, "the answer to end");
      assert.equal(await answer.textContent(), "<script>");
      assert.equal(await page.locator(".msg.assistant script").count(), 0);
      assert.equal(dialogs, 0);
    });
  } finally {
    await server.stop();
  }
});

// Finishes an answer: waits for its stats line.
async function answered(page, count) {
  await eventually(async () => (await page.locator(".msg.assistant .stats").count()) === count, 20000, "the answer to end");
}

test("the model picker, and conversations kept in the browser: reload, rename, delete, regenerate", async (t) => {
  const qwen = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  const llama = fixture(t, "models/tiny-llama-q4_0.gguf");
  if (!qwen || !llama) return;
  const server = await startServer([qwen, llama], ["-t", "2", "-n", "12"]);
  try {
    await withPage(t, server, async (page) => {
      await eventually(async () => (await page.locator("#model option").count()) === 2, 5000, "the models");
      assert.deepEqual(await page.locator("#model option").allTextContents(), ["tiny-qwen2-q8_0", "tiny-llama-q4_0"]);
      await page.selectOption("#model", "tiny-llama-q4_0");
      await page.fill("#input", "A story about a lighthouse");
      await page.press("#input", "Enter");
      await answered(page, 1);
      assert.match(await page.textContent(".msg.assistant .stats"), /\d+ tokens · [\d.]+ tokens\/s · first token after [\d.]+ s/);
      assert.match(await page.textContent(".msg.assistant .who"), /tiny-llama-q4_0/);
      const ps = await (await fetch(server.url + "/api/ps")).json();
      assert.deepEqual(ps.models.map((m) => m.name), ["tiny-llama-q4_0:latest"]);
      // Regenerate replaces the last answer with a new one.
      const requests = async () => (await metrics(server.url))['minfer_requests_total{status="200"}'] || 0;
      const before = await requests();
      await page.click(".regenerate");
      await answered(page, 1);
      assert.equal(await page.locator(".msg.assistant").count(), 1);
      await eventually(async () => (await requests()) > before, 5000, "a second request");
      // Kept across a reload, with its model.
      await page.reload();
      await eventually(async () => (await page.locator(".msg.assistant").count()) === 1, 5000, "the conversation back");
      assert.equal(await page.textContent("#conversations li.current .open"), "A story about a lighthouse");
      assert.equal(await page.inputValue("#model"), "tiny-llama-q4_0");
      assert.equal(await page.textContent(".msg.user .body"), "A story about a lighthouse");
      // Rename, a second conversation, delete the first.
      page.once("dialog", (d) => d.accept("Lighthouses"));
      await page.click("#conversations li.current .rename");
      assert.equal(await page.textContent("#conversations li.current .open"), "Lighthouses");
      await page.click("#new");
      assert.equal(await page.locator(".msg").count(), 0);
      await page.selectOption("#model", "tiny-qwen2-q8_0");
      await page.fill("#input", "Second one");
      await page.press("#input", "Enter");
      await answered(page, 1);
      assert.deepEqual(await page.locator("#conversations .open").allTextContents(), ["Second one", "Lighthouses"]);
      page.once("dialog", (d) => d.accept());
      await page.locator("#conversations li", { hasText: "Lighthouses" }).locator(".delete").click();
      await page.reload();
      await eventually(async () => (await page.locator("#conversations li").count()) === 1, 5000, "one conversation");
      assert.equal(await page.textContent("#conversations .open"), "Second one");
      assert.equal(await page.inputValue("#model"), "tiny-qwen2-q8_0");
    });
  } finally {
    await server.stop();
  }
});

test("answers are Markdown with highlighted code, reasoning folded, and hostile HTML inert", async (t) => {
  const model = fixture(t, "models/tiny-qwen2-q8_0.gguf");
  if (!model) return;
  const server = await startServer(model, ["-t", "2"]);
  // Random-weight models do not write Markdown: this answer is put in the page's store as if a
  // model had written it, and the page renders it as it renders every answer.
  const answer = [
    "# Title", "", "Some **bold**, a [link](https://example.com) and [a trap](javascript:alert(1)).", "",
    "```python", "def double(x):", "    return x * 2", "```", "",
    "<img src=x onerror=alert(1)><script>alert(2)</script>", "",
    "| a | b |", "| --- | --- |", "| 1 | 2 |",
  ].join("\n");
  const stored = [{ id: "x1", title: "Markdown", model: "tiny-qwen2-q8_0", system: "", updated: 1, messages: [
    { role: "user", content: "Show me <b>markdown</b>" },
    { role: "assistant", content: answer, reasoning: "I think *carefully*.", stats: "9 tokens" }] }];
  try {
    await withPage(t, server, async (page) => {
      let dialogs = 0;
      page.on("dialog", (d) => { ++dialogs; d.dismiss(); });
      await page.evaluate((list) => localStorage.setItem("minfer-conversations", JSON.stringify(list)), stored);
      await page.reload();
      const body = page.locator(".msg.assistant .body");
      await eventually(async () => (await body.locator("h1").count()) === 1, 5000, "the answer rendered");
      assert.equal(await body.locator("h1").textContent(), "Title");
      assert.equal(await body.locator("strong").textContent(), "bold");
      assert.equal(await body.locator("table td").count(), 2);
      const link = body.locator("a", { hasText: "link" });
      assert.equal(await link.getAttribute("href"), "https://example.com");
      assert.equal(await link.getAttribute("target"), "_blank");
      assert.equal(await link.getAttribute("rel"), "noopener noreferrer");
      const trap = await body.locator("a", { hasText: "a trap" }).getAttribute("href").catch(() => null);
      assert.ok(trap === null || !/^javascript:/i.test(trap), `href ${trap}`);
      // Highlighted: highlight.js wraps the keyword.
      assert.equal(await body.locator("pre code.hljs .hljs-keyword").first().textContent(), "def");
      // The model's HTML is text: no element made of it, and it ran nothing.
      assert.equal(await page.locator(".msg script, .msg img").count(), 0);
      assert.match(await body.textContent(), /<img src=x onerror=alert\(1\)><script>alert\(2\)<\/script>/);
      assert.equal(await page.textContent(".msg.user .body"), "Show me <b>markdown</b>");
      // Reasoning folded, and opened on a click.
      const thinking = body.locator("details.thinking");
      assert.equal(await thinking.getAttribute("open"), null);
      await thinking.locator("summary").click();
      assert.equal(await thinking.locator("em").textContent(), "carefully");
      await page.waitForTimeout(200);
      assert.equal(dialogs, 0);
    });
  } finally {
    await server.stop();
  }
});

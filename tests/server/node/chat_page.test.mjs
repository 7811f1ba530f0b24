// The chat page at / in a real browser (Debian's Chromium, headless, driven by playwright-core):
// a message is sent, the answer streams in and is stopped; no console errors; model output that
// holds HTML (here `<script>`, which a logit bias makes the model write) is shown as text.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import { fixture, startServer, metrics, eventually } from "./harness.mjs";

const browserPath = process.env.CHROMIUM || "/usr/bin/chromium";

async function withPage(t, server, f) {
  if (!existsSync(browserPath)) {
    if (process.env.CI === "true") throw new Error(`no browser at ${browserPath}`);
    return t.skip(`no browser at ${browserPath}`);
  }
  const browser = await chromium.launch({ executablePath: browserPath, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(server.url + "/");
    await f(page);
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
      await eventually(async () => (await page.textContent("#model")) === "tiny-qwen2-q8_0", 5000, "the model name");
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

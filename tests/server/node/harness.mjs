// Starts `minfer serve` on a free port for a test file and stops it afterwards.
// The binary is build/release/minfer (MINFER_BINARY overrides), the fixtures ../shared/fixtures
// (MINFER_SHARED overrides); without fixtures a test skips, and fails when CI=true.
// MINFER_SERVE_DEVICE=vulkan (or any --device value) runs every server on that device.

import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, "../../..");
export const binary = process.env.MINFER_BINARY || path.join(repo, "build/release/minfer");
const shared = process.env.MINFER_SHARED || path.resolve(repo, "../shared");

// The path of a fixture, or null (and a skip) when it is missing outside CI.
export function fixture(t, relative) {
  const p = path.join(shared, "fixtures", relative);
  if (existsSync(p)) return p;
  if (process.env.CI === "true") throw new Error(`fixture missing in CI: ${p}`);
  t.skip(`fixture missing: ${p}`);
  return null;
}

// Whether this machine has a Vulkan device (lavapipe, which scripts/setup.sh installs, is one
// everywhere): false and a skip without one, a failure in CI.
export function hasVulkanDevice(t) {
  const listed = execFileSync(binary, ["--list-devices"], { encoding: "utf8" });
  if (listed.includes("vulkan:0")) return true;
  if (process.env.CI === "true") throw new Error("no Vulkan device in CI:\n" + listed);
  t.skip("no Vulkan device here");
  return false;
}

// Runs `minfer serve MODEL ARGS... --port 0` and resolves once it serves. `model` may be an array
// of models, or empty for every model in the caches.
export async function startServer(model, args = [], { env = {} } = {}) {
  const device = process.env.MINFER_SERVE_DEVICE ? ["--device", process.env.MINFER_SERVE_DEVICE] : [];
  const models = Array.isArray(model) ? model : [model];
  const proc = spawn(binary, ["serve", ...models, "--port", "0", ...device, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const exited = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    let listening = null;
    const timer = setTimeout(() => reject(new Error("the server did not start:\n" + log)), 30000);
    proc.stderr.on("data", (d) => {
      log += d.toString();
      const m = log.match(/listening on (http:\/\/[^,\s]+)/);
      if (m) listening = m[1];
      if (listening && log.includes("minfer: serving")) {
        clearTimeout(timer);
        resolve(listening);
      }
    });
    exited.then(({ code }) => { clearTimeout(timer); reject(new Error(`the server exited (${code}):\n` + log)); });
  });
  return {
    url,
    proc,
    exited,
    log: () => log,
    async stop(signal = "SIGTERM") {
      if (proc.exitCode !== null || proc.signalCode !== null) return exited;
      proc.kill(signal);
      return exited;
    },
  };
}

// GET /metrics as { name or name{labels}: value }.
export async function metrics(url) {
  const text = await (await fetch(url + "/metrics")).text();
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const cut = line.lastIndexOf(" ");
    out[line.slice(0, cut)] = Number(line.slice(cut + 1));
  }
  return out;
}

// Polls until f() is truthy (or throws after `ms`).
export async function eventually(f, ms = 5000, what = "condition") {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// A chat template file whose generation prompt opens a reasoning block: a (random) model's whole
// answer is reasoning, since it does not write </think>.
export function thinkTemplate() {
  const dir = mkdtempSync(path.join(tmpdir(), "minfer-"));
  const template = path.join(dir, "think.jinja");
  writeFileSync(template, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
                          "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}{# </think> #}");
  return template;
}

// Starts tests/hub/fake_hub.py (the Hugging Face hub and ollama's registry, on 127.0.0.1) with
// `config` (its header says what it takes), in a scratch directory that also holds empty caches.
// Resolves to { env, stop }: env points minfer's caches and hubs there.
export async function startFakeHub(config) {
  const box = mkdtempSync(path.join(tmpdir(), "minfer-hub-"));
  for (const d of ["home", "hf-cache", "minfer-cache", "ollama-models"]) mkdirSync(path.join(box, d));
  const configPath = path.join(box, "hub.json");
  writeFileSync(configPath, JSON.stringify({ log: path.join(box, "hub.log"), ...config }));
  const proc = spawn("python3", [path.join(repo, "tests/hub/fake_hub.py"), configPath],
                     { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d.toString();
      const m = out.match(/READY (\d+) (\d+)/);
      if (m) resolve(Number(m[1]));
    });
    proc.on("exit", (code) => reject(new Error(`the fake hub exited (${code})`)));
  });
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    box,
    env: {
      HOME: path.join(box, "home"),
      XDG_CACHE_HOME: path.join(box, "home", ".cache"),
      HF_ENDPOINT: endpoint,
      MINFER_OLLAMA_REGISTRY: endpoint,
      HF_HUB_CACHE: path.join(box, "hf-cache"),
      MINFER_CACHE: path.join(box, "minfer-cache"),
      OLLAMA_MODELS: path.join(box, "ollama-models"),
      MINFER_HUB_RETRIES: "1",
      MINFER_HUB_RETRY_DELAY: "0.05",
    },
    stop() { proc.kill(); },
  };
}

// The resident memory of a process, in bytes (Linux): all of it (VmRSS), or only the anonymous
// part (RssAnon: heap, stacks, mapped anonymous memory; not the pages of files it maps).
export function residentBytes(pid, field = "VmRSS") {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(status.match(new RegExp(field + ":\\s+(\\d+) kB"))[1]) * 1024;
}

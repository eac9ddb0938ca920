// POST /v1/embeddings through the official `openai` npm client: tern-server serving the
// embedding tests' Gemma3 and Qwen3 bundles, vectors against the independent float64
// reference (cosine >= 0.999), usage against the Hugging Face tokenizers oracle's token
// counts, base64 and float encodings, dimensions, the stored query prompt (prompt_name: the
// reference's prompted vector, and tern-embed --prompt's exactly), token-id input (the text's
// ids from /tokenize, and the oracle's with their special tokens, give the text's vector
// exactly), and the 4xx a client gets for bad input (empty ones included) and for the wrong
// kind of model.
//   node openai_embeddings_test.mjs --server BIN --embed BIN --embedding-dir DIR --generative BUNDLE --npm DIR
//                                   [--emulator E]
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { stopTernServer } from './server_process.mjs';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
function fail(why) {
  console.error(`FAIL: ${why}`);
  process.exit(1);
}
const reference = path.join(args['embedding-dir'] ?? '', 'reference.jsonl');
for (const p of [path.join(args.npm ?? '', 'node_modules', 'openai'), reference, args.generative, args.server, args.embed]) {
  if (!p || !fs.existsSync(p)) fail(`${p} is missing (.ci/deps installs openai; ctest makes the bundles first)`);
}
const OpenAI = createRequire(path.resolve(args.npm, 'package.json'))('openai').default;
const emulator = args.emulator ? args.emulator.split(',') : [];
const program = (bin, argv) => (emulator.length ? [emulator[0], [...emulator.slice(1), bin, ...argv]] : [bin, argv]);
const watchdog = setTimeout(() => fail('did not finish within 150 s'), 150000);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function startServer(bundle, extra) {
  const proc = spawn(...program(args.server, [bundle, '--port', '0', ...extra]), { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(Number(out.trim()));
    });
    proc.on('exit', (code) => reject(new Error(`tern-server exited (${code}): ${err}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; ++i) {
    const j = await (await fetch(`${base}/health`)).json();
    if (j.status === 'ok') break;
    assert.ok(i < 1500 && j.status !== 'error', `not ready: ${JSON.stringify(j)}`);
    await sleep(20);
  }
  return { proc, base, name: path.basename(bundle).replace(/\.tern$/, '') };
}
const cosine = (a, b) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; ++i) (ab += a[i] * b[i]), (aa += a[i] * a[i]), (bb += b[i] * b[i]);
  return ab / Math.sqrt(aa * bb);
};
const norm = (a) => Math.sqrt(a.reduce((s, x) => s + x * x, 0));
async function status(promise) {
  try {
    await promise;
    return 200;
  } catch (e) {
    return e.status;
  }
}

const refs = fs.readFileSync(reference, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
let checks = 0;
for (const model of ['gemma3', 'qwen3']) {
  const server = await startServer(path.join(args['embedding-dir'], `${model}.tern`), ['--sessions', '2', '--ctx', '256']);
  const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0 });
  const cases = refs.filter((r) => r.model === model && r.prompt === '');
  const texts = cases.map((c) => c.text);

  // One string, then the whole list: both encodings, the order kept, usage = the oracle's tokens.
  const one = await client.embeddings.create({ model: server.name, input: texts[0], encoding_format: 'float' });
  assert.equal(one.data.length, 1);
  assert.ok(cosine(one.data[0].embedding, cases[0].embedding) >= 0.999, `${model}: one text`);
  assert.equal(one.usage.prompt_tokens, cases[0].ids.length, `${model}: usage of one text`);
  const floats = await client.embeddings.create({ model: server.name, input: texts, encoding_format: 'float' });
  const b64 = await client.embeddings.create({ model: server.name, input: texts });  // the client asks for base64
  assert.equal(floats.data.length, texts.length);
  assert.equal(floats.usage.prompt_tokens, cases.reduce((n, c) => n + c.ids.length, 0), `${model}: usage`);
  let worst = 1;
  for (let i = 0; i < texts.length; ++i) {
    assert.equal(floats.data[i].index, i);
    const v = floats.data[i].embedding;
    worst = Math.min(worst, cosine(v, cases[i].embedding));
    assert.ok(Math.abs(norm(v) - 1) < 1e-5, `${model}: text ${i} is unit length`);
    const w = Array.from(b64.data[i].embedding);
    assert.equal(w.length, v.length);
    for (let d = 0; d < v.length; ++d) assert.ok(Math.abs(w[d] - v[d]) < 1e-6, `${model}: base64 equals float`);
    checks += 3;
  }
  assert.ok(worst >= 0.999, `${model}: worst cosine ${worst}`);
  console.log(`${model}: ${texts.length} texts, worst cosine to the reference ${worst.toFixed(6)}`);

  // dimensions: the first D, re-normalized.
  const cut = await client.embeddings.create({ model: server.name, input: texts[1], dimensions: 16, encoding_format: 'float' });
  const ref16 = cases[1].embedding.slice(0, 16);
  assert.equal(cut.data[0].embedding.length, 16);
  assert.ok(Math.abs(norm(cut.data[0].embedding) - 1) < 1e-5 && cosine(cut.data[0].embedding, ref16) >= 0.999);

  // prompt_name: the bundle's stored query prompt in front, as the reference computed it and
  // exactly as tern-embed --prompt query gives it.
  const query = refs.find((r) => r.model === model && r.prompt !== '');
  const prompted = await client.embeddings.create({
    model: server.name, input: query.text, prompt_name: 'query', encoding_format: 'float',
  });
  assert.ok(cosine(prompted.data[0].embedding, query.embedding) >= 0.999, `${model}: prompt_name query`);
  assert.equal(prompted.usage.prompt_tokens, query.ids.length, `${model}: the prompt's tokens are counted`);
  const cli = JSON.parse(execFileSync(...program(args.embed, [path.join(args['embedding-dir'], `${model}.tern`),
                                                               '-p', query.text, '--prompt', 'query', '-q'])).toString());
  assert.deepEqual(prompted.data[0].embedding.map(Math.fround), cli.embeddings[0].map(Math.fround),
                   `${model}: prompt_name equals tern-embed --prompt`);
  const noPrompt = await client.embeddings.create({ model: server.name, input: query.text, prompt_name: '', encoding_format: 'float' });
  assert.ok(cosine(noPrompt.data[0].embedding, prompted.data[0].embedding) < 0.999, `${model}: "" is no prompt`);
  await assert.rejects(client.embeddings.create({ model: server.name, input: 'x', prompt_name: 'passage' }), (e) =>
    e.status === 400 && e.param === 'prompt_name' && /no prompt named 'passage' \(it has .*'query'/.test(e.message));
  checks += 5;

  // Token ids: the text's from /tokenize, or the oracle's with its special tokens, embed to the
  // text's vector exactly; one list or a list of lists.
  const ids = [];
  for (const text of texts) {
    const r = await fetch(`${server.base}/tokenize`, { method: 'POST', body: JSON.stringify({ content: text }) });
    ids.push((await r.json()).tokens);
  }
  const byIds = await client.embeddings.create({ model: server.name, input: ids, encoding_format: 'float' });
  const byOracle = await client.embeddings.create({ model: server.name, input: cases.map((c) => c.ids), encoding_format: 'float' });
  const oneList = await client.embeddings.create({ model: server.name, input: ids[2], encoding_format: 'float' });
  for (let i = 0; i < texts.length; ++i) {
    assert.deepEqual(byIds.data[i].embedding, floats.data[i].embedding, `${model}: text ${i}'s ids`);
    assert.deepEqual(byOracle.data[i].embedding, floats.data[i].embedding, `${model}: text ${i}'s oracle ids`);
  }
  assert.deepEqual(oneList.data[0].embedding, floats.data[2].embedding);
  assert.equal(byIds.usage.prompt_tokens, floats.usage.prompt_tokens, `${model}: usage of token input`);
  checks += 2 * texts.length + 2;

  // Bad input: 400, and the server keeps serving.
  const bad = [
    { input: [] }, { input: '' }, { input: [''] }, { input: ['x', ''] }, { input: [[]] }, { input: [[1], []] },
    { input: [1, 100000000] }, { input: [[-1]] }, { input: [1, 'x'] }, { input: 42 },
    { input: 'x', dimensions: 0 }, { input: 'x', dimensions: 100000 },
    { input: 'x', encoding_format: 'int8' }, { input: 'word '.repeat(400) }, { input: Array(400).fill(ids[0][0]) },
  ];
  for (const body of bad) {
    assert.equal(await status(client.embeddings.create({ model: server.name, ...body })), 400, JSON.stringify(body).slice(0, 80));
  }
  assert.equal((await client.embeddings.create({ model: 'nope', input: 'x' })).model, server.name, 'any model name');
  assert.equal(await status(client.chat.completions.create({ model: server.name, messages: [{ role: 'user', content: 'hi' }] })), 400,
               'an embedding model refuses chat completions');
  assert.equal(await status(client.completions.create({ model: server.name, prompt: 'hi' })), 400);
  assert.ok(cosine((await client.embeddings.create({ model: server.name, input: texts[0], encoding_format: 'float' })).data[0].embedding,
                   cases[0].embedding) >= 0.999, 'still serving after the bad requests');
  checks += bad.length + 4;
  await stopTernServer(server);
}

// A generative model has no embeddings.
const gen = await startServer(args.generative, []);
const genClient = new OpenAI({ baseURL: `${gen.base}/v1`, apiKey: 'none', maxRetries: 0 });
assert.equal(await status(genClient.embeddings.create({ model: gen.name, input: 'x' })), 400);
await stopTernServer(gen);
clearTimeout(watchdog);
console.log(`${checks + 1} passed, 0 failed`);

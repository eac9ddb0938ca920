// tern-server's OpenAI compatibility through the official `openai` npm client (and fetch for
// what a browser sends): any model name and --alias in models.list / models.retrieve and in
// replies; CORS preflights and headers behind --cors-origin (none without it); completion
// prompt arrays and token-id prompts (each choice equal to tern-run's greedy text; ids that are
// not a text's tokens refused), streamed with their index; echo; system_fingerprint on every
// object and chunk; the developer role.
//   node openai_compat_test.mjs --server BIN --run BIN --bundle FILE --other-bundle FILE --npm DIR
//                               [--emulator E] [--deadline S]
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

import { startTernServer, stopTernServer } from './server_process.mjs';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
function fail(why) {
  console.error(`FAIL: ${why}`);
  process.exit(1);
}
for (const p of [path.join(args.npm ?? '', 'node_modules', 'openai'), args.server, args.run, args.bundle, args['other-bundle']]) {
  if (!p || !fs.existsSync(p)) fail(`${p} is missing (.ci/deps installs openai; ctest makes the bundles first)`);
}
const OpenAI = createRequire(path.resolve(args.npm, 'package.json'))('openai').default;
const emulator = args.emulator ? args.emulator.split(',') : [];
const program = (bin, argv) => (emulator.length ? [emulator[0], [...emulator.slice(1), bin, ...argv]] : [bin, argv]);
const servers = [];
const deadline = Number(args.deadline ?? 120);
const watchdog = setTimeout(() => {
  for (const s of servers) s.proc.kill('SIGKILL');
  fail(`did not finish within ${deadline} s`);
}, deadline * 1000);

const bundleName = path.basename(args.bundle).replace(/\.tern$/, '');
const ctx = 256;
let checks = 0;
const step = (name) => console.log(`-- ${name}`);
const start = (extra, bundle = args.bundle) =>
  startTernServer(...program(args.server, [bundle, '--port', '0', '--ctx', String(ctx), ...extra]), servers);
const clientOf = (server, key = 'none') => new OpenAI({ baseURL: `${server.base}/v1`, apiKey: key, maxRetries: 0, timeout: 20000 });

// tern-run's greedy continuation of `prompt` (its stdout is the prompt, the text, "\n").
function ternRun(prompt, n) {
  const out = execFileSync(...program(args.run, [args.bundle, '-p', prompt, '--greedy', '-n', String(n), '--ctx', String(ctx)]), {
    stdio: ['ignore', 'pipe', 'ignore'],
  }).toString('utf8');
  assert.ok(out.startsWith(prompt) && out.endsWith('\n'), 'tern-run echoes the prompt');
  return out.slice(prompt.length, -1);
}

async function apiStatus(promise) {
  try {
    await promise;
    return 200;
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `an APIError, not ${e}`);
    return e;
  }
}

const fingerprint = /^tern-\d+\.\d+\.\d+[^-]*-[0-9a-f]{12}$/;

async function modelNames() {
  step('models: any name is the served model; models.retrieve answers its name only');
  const plain = await start([]);
  const client = clientOf(plain);
  assert.deepEqual((await client.models.list()).data.map((m) => m.id), [bundleName]);
  const model = await client.models.retrieve(bundleName);
  assert.equal(model.id, bundleName);
  assert.equal(model.object, 'model');
  const missing = await apiStatus(client.models.retrieve('gpt-4o'));
  assert.ok(missing instanceof OpenAI.NotFoundError, `404 for another name, not ${missing}`);
  assert.equal(missing.code, 'model_not_found');
  const reply = await client.chat.completions.create({
    model: 'gpt-4o', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 2,
  });
  assert.equal(reply.model, bundleName, 'the reply names the served model');
  await stopTernServer(plain);
  checks += 7;

  const alias = 'austen/tiny-chat';
  const named = await start(['--alias', alias]);
  const aliased = clientOf(named);
  assert.deepEqual((await aliased.models.list()).data.map((m) => m.id), [alias]);
  assert.equal((await aliased.models.retrieve(alias)).id, alias, 'an id with a slash, percent-encoded by the client');
  assert.ok((await apiStatus(aliased.models.retrieve(bundleName))) instanceof OpenAI.NotFoundError);
  const completion = await aliased.completions.create({ model: bundleName, prompt: 'It is', max_tokens: 2 });
  assert.equal(completion.model, alias);
  const stream = await aliased.chat.completions.create({
    model: 'anything', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 3, stream: true,
  });
  for await (const chunk of stream) assert.equal(chunk.model, alias);
  assert.equal((await (await fetch(`${named.base}/props`)).json()).model, alias);
  assert.match(named.log.join('\n'), /model austen\/tiny-chat/);
  await stopTernServer(named);
  checks += 7;
}

async function cors() {
  step('CORS: a preflight without the API key, the allow-origin header on replies, errors and streams');
  const origin = 'https://app.example.com';
  const key = 'sk-cors';
  const server = await start(['--cors-origin', origin, '--cors-origin', 'http://localhost:5173', '--api-key', key]);
  const preflight = await fetch(`${server.base}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': 'POST',
               'Access-Control-Request-Headers': 'authorization,content-type,x-stainless-lang' },
  });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get('access-control-allow-origin'), origin);
  assert.match(preflight.headers.get('access-control-allow-methods'), /\bPOST\b/);
  const allowed = preflight.headers.get('access-control-allow-headers').toLowerCase();
  for (const h of ['authorization', 'content-type', 'x-stainless-lang']) assert.ok(allowed.includes(h), allowed);
  assert.ok(Number(preflight.headers.get('access-control-max-age')) > 0);
  const bare = await fetch(`${server.base}/v1/models`, { method: 'OPTIONS', headers: { Origin: 'http://localhost:5173',
    'Access-Control-Request-Method': 'GET' } });
  assert.equal(bare.status, 204);
  assert.match(bare.headers.get('access-control-allow-headers'), /Authorization/);
  const stranger = await fetch(`${server.base}/v1/chat/completions`, {
    method: 'OPTIONS', headers: { Origin: 'https://evil.example', 'Access-Control-Request-Method': 'POST' },
  });
  assert.equal(stranger.status, 204);
  assert.equal(stranger.headers.get('access-control-allow-origin'), null, 'an origin not listed is not allowed');

  const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Origin: origin };
  const body = JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 3 });
  const ok = await fetch(`${server.base}/v1/chat/completions`, { method: 'POST', headers: auth, body });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('access-control-allow-origin'), origin);
  assert.match(ok.headers.get('vary') ?? '', /Origin/);
  const noKey = await fetch(`${server.base}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Origin: origin }, body,
  });
  assert.equal(noKey.status, 401);
  assert.equal(noKey.headers.get('access-control-allow-origin'), origin, 'a 401 is readable by the app');
  const unknown = await fetch(`${server.base}/v1/nothing`, { headers: auth });
  assert.equal(unknown.status, 404);
  assert.equal(unknown.headers.get('access-control-allow-origin'), origin);
  const streamed = await fetch(`${server.base}/v1/completions`, {
    method: 'POST', headers: auth, body: JSON.stringify({ prompt: 'It is', max_tokens: 3, stream: true }),
  });
  assert.equal(streamed.headers.get('access-control-allow-origin'), origin);
  assert.match(await streamed.text(), /data: \[DONE\]/);
  const other = await fetch(`${server.base}/v1/models`, { headers: { ...auth, Origin: 'https://evil.example' } });
  assert.equal(other.status, 200);
  assert.equal(other.headers.get('access-control-allow-origin'), null);
  await stopTernServer(server);
  checks += 20;

  const any = await start(['--cors-origin', '*']);
  const star = await fetch(`${any.base}/v1/models`, { headers: { Origin: 'https://anywhere.example' } });
  assert.equal(star.headers.get('access-control-allow-origin'), '*');
  await stopTernServer(any);

  const none = await start([]);
  const options = await fetch(`${none.base}/v1/chat/completions`, {
    method: 'OPTIONS', headers: { Origin: origin, 'Access-Control-Request-Method': 'POST' },
  });
  assert.equal(options.status, 404, 'without --cors-origin OPTIONS is not answered');
  const plain = await fetch(`${none.base}/v1/models`, { headers: { Origin: origin } });
  assert.equal(plain.headers.get('access-control-allow-origin'), null);
  await stopTernServer(none);
  checks += 3;
}

async function completions() {
  step('completions: prompt arrays and token ids, one choice each; echo; system_fingerprint');
  const server = await start(['--sessions', '1']);
  const client = clientOf(server);
  const prompts = ['It is a truth universally acknowledged', 'Mr. Bennet was so odd a mixture', 'The village of Longbourn'];
  const expected = prompts.map((p) => ternRun(p, 12));
  const many = await client.completions.create({ model: 'm', prompt: prompts, max_tokens: 12, temperature: 0 });
  assert.equal(many.choices.length, prompts.length);
  for (let i = 0; i < prompts.length; ++i) {
    assert.equal(many.choices[i].index, i);
    assert.equal(many.choices[i].text, expected[i], `choice ${i}`);
    assert.equal(many.choices[i].finish_reason, 'length');
  }
  assert.equal(many.usage.completion_tokens, 12 * prompts.length);
  assert.match(many.system_fingerprint, fingerprint);

  // Token ids: /tokenize with the BOS (tern-run's prompt) gives tern-run's text.
  const ids = [];
  for (const p of prompts) {
    const r = await fetch(`${server.base}/tokenize`, { method: 'POST', body: JSON.stringify({ content: p, add_special: true }) });
    ids.push((await r.json()).tokens);
  }
  const one = await client.completions.create({ model: 'm', prompt: ids[0], max_tokens: 12, temperature: 0 });
  assert.equal(one.choices[0].text, expected[0]);
  const lists = await client.completions.create({ model: 'm', prompt: ids.slice(1), max_tokens: 12, temperature: 0 });
  assert.deepEqual(lists.choices.map((c) => c.text), expected.slice(1));
  assert.equal(lists.usage.prompt_tokens, ids[1].length + ids[2].length);
  // Ids run as given, as llama.cpp's server runs them: no BOS is added in front.
  const bare = await client.completions.create({ model: 'm', prompt: ids[0].slice(1), max_tokens: 12, temperature: 0 });
  assert.equal(bare.usage.prompt_tokens, ids[0].length - 1, 'ids run as given, no BOS added');
  // A control token inside runs as given too; an id outside the vocabulary is a 400 naming the prompt.
  const props = await (await fetch(`${server.base}/props`)).json();
  const control = props.eot_id >= 0 ? props.eot_id : props.eos_id;
  const inside = await client.completions.create({ model: 'm', prompt: [...ids[0], control, ...ids[1].slice(1)], max_tokens: 2 });
  assert.equal(inside.usage.prompt_tokens, ids[0].length + ids[1].length);
  const odd = await apiStatus(client.completions.create({ model: 'm', prompt: [...ids[0], props.vocab_size], max_tokens: 2 }));
  assert.equal(odd.status, 400);
  assert.equal(odd.param, 'prompt');
  assert.match(odd.message, /outside the vocabulary/);
  checks += 3 * prompts.length + 10;

  // Streamed: chunks carry their choice's index; each choice joins to its text and ends once.
  const stream = await client.completions.create({
    model: 'm', prompt: prompts, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  const joined = prompts.map(() => '');
  const finished = prompts.map(() => 0);
  let usage = null;
  for await (const chunk of stream) {
    assert.match(chunk.system_fingerprint, fingerprint, 'every chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      joined[c.index] += c.text;
      if (c.finish_reason) finished[c.index] += 1;
    }
  }
  assert.deepEqual(joined, expected);
  assert.deepEqual(finished, prompts.map(() => 1));
  assert.equal(usage.completion_tokens, 12 * prompts.length);
  checks += 3;

  // echo: the prompt in front, whole and streamed; token ids echoed as their text.
  const echoed = await client.completions.create({ model: 'm', prompt: prompts.slice(0, 2), max_tokens: 12, temperature: 0, echo: true });
  assert.deepEqual(echoed.choices.map((c) => c.text), [prompts[0] + expected[0], prompts[1] + expected[1]]);
  const echoIds = await client.completions.create({ model: 'm', prompt: ids[2], max_tokens: 12, temperature: 0, echo: true });
  assert.equal(echoIds.choices[0].text.trim(), prompts[2] + expected[2].trimEnd());
  const echoStream = await client.completions.create({ model: 'm', prompt: prompts[0], max_tokens: 12, temperature: 0, echo: true, stream: true });
  let echoJoined = '';
  for await (const chunk of echoStream) echoJoined += chunk.choices[0]?.text ?? '';
  assert.equal(echoJoined, prompts[0] + expected[0]);
  const withLogprobs = await apiStatus(client.completions.create({ model: 'm', prompt: 'It is', echo: true, logprobs: 1 }));
  assert.equal(withLogprobs.status, 400);
  assert.equal(withLogprobs.param, 'logprobs');
  checks += 5;

  // Bad prompt forms: 400 naming "prompt".
  for (const prompt of [[], [[]], [1, 'x'], ['x', [1]], [-1], [100000000], Array(65).fill('x'), [[1], [100000000]]]) {
    const e = await apiStatus(client.completions.create({ model: 'm', prompt, max_tokens: 2 }));
    assert.equal(e.status, 400, JSON.stringify(prompt).slice(0, 60));
    assert.equal(e.param, 'prompt', e.message);
    checks += 1;
  }

  // system_fingerprint: on chat objects and chunks too, the same for the same bundle bytes
  // under another file name, another for another bundle.
  const chat = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 });
  assert.equal(chat.system_fingerprint, many.system_fingerprint);
  const chatStream = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, stream: true, stream_options: { include_usage: true },
  });
  for await (const chunk of chatStream) assert.equal(chunk.system_fingerprint, many.system_fingerprint);

  // The developer role is the system role (OpenAI's newer name for it).
  const asSystem = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 0,
  });
  const asDeveloper = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 0,
  });
  assert.equal(asDeveloper.choices[0].message.content, asSystem.choices[0].message.content);
  assert.equal(asDeveloper.usage.prompt_tokens, asSystem.usage.prompt_tokens);
  await stopTernServer(server);
  checks += 4;

  const copy = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tern-compat-')), 'renamed.tern');
  fs.copyFileSync(args.bundle, copy);
  for (const [bundle, same] of [[copy, true], [args['other-bundle'], false]]) {
    const other = await start([], bundle);
    const reply = await clientOf(other).completions.create({ model: 'm', prompt: 'It is', max_tokens: 1 });
    assert.match(reply.system_fingerprint, fingerprint);
    assert.equal(reply.system_fingerprint === many.system_fingerprint, same, `${path.basename(bundle)}: ${reply.system_fingerprint}`);
    await stopTernServer(other);
    checks += 2;
  }
  fs.rmSync(path.dirname(copy), { recursive: true });
}

await modelNames();
await cors();
await completions();
clearTimeout(watchdog);
console.log(`${checks} passed, 0 failed`);

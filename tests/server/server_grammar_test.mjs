// tern-server's bound on a request's grammar compile and its reuse of compiled grammars
// (tools/server/README.md, "Structured output"), through the official openai npm client, on a
// bundle with LLaMA-3's 128,256-token vocabulary:
//   - a schema whose compile runs past --grammar-compile-ms gets 400 grammar_compile_timeout
//     while a stream on the other slot goes on to its end; the slot then serves again;
//   - the same schema twice: the second reply says X-Tern-Grammar: reused and nothing is
//     compiled; a request without a grammar in between takes the slot holding none;
//   - a client that leaves during a compile stops it (logged 499, not a timeout);
//   - a grammar larger than --grammar-memory gets 400 grammar_too_large.
// Arguments: --server BIN --bundle tiny-llama3.tern --npm DIR [--deadline S].
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';

import { startTernServer, stopTernServer } from './server_process.mjs';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];

const openaiDir = path.join(args.npm ?? '', 'node_modules', 'openai');
if (!fs.existsSync(openaiDir)) {
  console.error(`FAIL: the openai npm package is not in ${args.npm} (run .ci/deps)`);
  process.exit(1);
}
const OpenAI = createRequire(path.join(args.npm, 'package.json'))('openai').default;

const servers = [];
const deadline = Number(args.deadline ?? 120);
const watchdog = setTimeout(() => {
  console.error(`FAIL: the grammar suite did not finish within ${deadline} s`);
  for (const s of servers) s.proc.kill('SIGKILL');
  process.exit(1);
}, deadline * 1000);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const model = path.basename(args.bundle).replace(/\.tern$/, '');

async function startServer(extra) {
  return startTernServer(args.server, [args.bundle, '--port', '0', ...extra], servers);
}

const clientOf = (server) => new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
const health = async (server) => (await fetch(`${server.base}/health`)).json();
const messages = [{ role: 'user', content: 'Describe a person.' }];
const schemaFormat = (schema) => ({ type: 'json_schema', json_schema: { name: 'reply', schema } });

// 40 properties, each a string of at most 16 characters: each bounded string is copied out,
// ~23,000 grammar positions, each a walk over the vocabulary (about 11 s here, 33 MB).
const slowSchema = {
  type: 'object',
  properties: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`p${i}`, { type: 'string', maxLength: 16 }])),
  required: Array.from({ length: 40 }, (_, i) => `p${i}`),
  additionalProperties: false,
};
const personSchema = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 150 } },
  required: ['name', 'age'],
  additionalProperties: false,
};

// The API error a request ends with (the client throws it), with the time it took.
async function refusal(promise) {
  const t0 = performance.now();
  try {
    await promise;
  } catch (e) {
    return { error: e, ms: performance.now() - t0 };
  }
  assert.fail('the request was answered, not refused');
}

// (a) The compile bound, with a stream running on the other slot.
async function timeoutCase() {
  const server = await startServer(['--sessions', '2', '--threads', '1', '--ctx', '512', '--grammar-memory', '64M',
                                    '--grammar-compile-ms', '30']);
  const client = clientOf(server);
  const props = await (await fetch(`${server.base}/props`)).json();
  const ban = {};
  for (const id of [props.eos_id, props.eot_id]) if (id >= 0) ban[String(id)] = -100;
  // A stream that runs to max_tokens, on one slot.
  const stamps = [];
  let finish = null;
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 400, temperature: 0,
                                                        logit_bias: ban, stream: true });
  const streamed = (async () => {
    for await (const chunk of stream) {
      stamps.push(performance.now());
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
  })();
  while (stamps.length < 2) await sleep(5);
  // The slow schema on the other slot.
  const sent = performance.now();
  const { error, ms } = await refusal(client.chat.completions.create(
    { model, messages, max_tokens: 8, response_format: schemaFormat(slowSchema) }));
  const answered = performance.now();
  assert.equal(error.status, 400, `a 400: ${error.message}`);
  assert.equal(error.code, 'grammar_compile_timeout', error.message);
  assert.equal(error.param, 'response_format');
  assert.match(error.message, /30 ms.*--grammar-compile-ms/, 'the message names the limit and the option');
  console.log(`   400 grammar_compile_timeout after ${ms.toFixed(0)} ms (limit 30 ms)`);
  assert.ok(ms < 5000, `the 400 arrives within 5 s (${ms.toFixed(0)} ms)`);
  const during = stamps.filter((t) => t > sent && t < answered).length;
  console.log(`   the stream on the other slot got ${during} chunks meanwhile`);
  assert.ok(during > 0, 'the stream on the other slot went on during the compile');
  // The timed-out slot serves (the stream still holds the other one).
  const normal = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  assert.equal(finish, null, 'the stream still runs, so the timed-out slot answered');
  assert.ok(normal.choices[0].message.content.length > 0, 'the timed-out slot answers a normal request');
  await streamed;
  assert.equal(finish, 'length', 'the stream ran to its max_tokens');
  const h = await health(server);
  assert.equal(h.grammar.timed_out, 1, `one timeout counted: ${JSON.stringify(h.grammar)}`);
  assert.equal(h.grammar.compiled, 0);
  assert.equal(h.slots_idle, 2, 'both slots are free again');
  await stopTernServer(server);
}

// One request on a connection of its own, dropped after `ms`.
function droppedAfter(server, body, ms) {
  const req = http.request({ host: '127.0.0.1', port: server.port, method: 'POST', path: '/v1/chat/completions',
                             agent: false,
                             headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } });
  req.on('error', () => {});
  req.end(body);
  setTimeout(() => req.destroy(), ms);
}

// (b) Reuse, and a client that leaves during a compile, with no time limit (under the
// sanitizers even a small schema's compile can pass the default 1000 ms).
async function reuseCase() {
  const server = await startServer(['--sessions', '2', '--ctx', '512', '--grammar-compile-ms', '0']);
  const client = clientOf(server);
  const ask = (schema) => client.chat.completions.create(
    { model, messages, max_tokens: 64, temperature: 0, response_format: schemaFormat(schema) }).withResponse();
  const check = (data) => {
    const value = JSON.parse(data.choices[0].message.content);
    assert.ok(typeof value.name === 'string' && Number.isInteger(value.age), `follows the schema: ${JSON.stringify(value)}`);
  };
  const first = await ask(personSchema);
  const note = first.response.headers.get('x-tern-grammar');
  assert.match(note, /^compiled \d+ ms$/, `the first compiles: ${note}`);
  check(first.data);
  const h1 = await health(server);
  assert.equal(h1.grammar.compiled, 1, JSON.stringify(h1.grammar));
  const second = await ask(personSchema);
  assert.equal(second.response.headers.get('x-tern-grammar'), 'reused', 'the same schema again: reused');
  check(second.data);
  const h2 = await health(server);
  assert.equal(h2.grammar.compiled, 1, `no compile for the repeat: ${JSON.stringify(h2.grammar)}`);
  assert.equal(h2.grammar.reused, 1);
  assert.ok(h2.grammar.schema_cache.hits > h1.grammar.schema_cache.hits, 'the conversion came from the cache');
  // A request without a grammar takes the slot holding none, so the schema's slot keeps it.
  const plain = await client.chat.completions.create({ model, messages, max_tokens: 4 }).withResponse();
  assert.equal(plain.response.headers.get('x-tern-grammar'), null, 'no grammar, no header');
  const third = await ask(personSchema);
  assert.equal(third.response.headers.get('x-tern-grammar'), 'reused', 'still reused after a plain request');
  console.log(`   first reply: ${note}; the repeats: reused`);
  // A client that leaves 100 ms into a compile of ~11 s stops it long before the 1000 ms limit.
  const before = await health(server);
  droppedAfter(server, JSON.stringify({ model, messages, max_tokens: 8, response_format: schemaFormat(slowSchema) }), 100);
  const t0 = performance.now();
  const left = () => server.log.some((l) => /^POST \/v1\/chat\/completions 499 /.test(l));
  while (!left()) {
    assert.ok(performance.now() - t0 < 5000, `the compile stops when its client leaves:\n${server.log.join('\n')}`);
    await sleep(10);
  }
  console.log(`   the compile of a client that left stopped ${(performance.now() - t0).toFixed(0)} ms after it left`);
  const after = await health(server);
  assert.equal(after.grammar.timed_out, before.grammar.timed_out, 'not counted as a timeout');
  assert.equal(after.grammar.compiled, before.grammar.compiled, 'not compiled');
  await stopTernServer(server);
}

// (c) A grammar larger than --grammar-memory: a JSON grammar over 128k tokens needs ~3 MB.
async function tooLargeCase() {
  const server = await startServer(['--grammar-memory', '1M']);
  const client = clientOf(server);
  const { error, ms } = await refusal(client.chat.completions.create(
    { model, messages, max_tokens: 8, response_format: { type: 'json_object' } }));
  assert.equal(error.status, 400, error.message);
  assert.equal(error.code, 'grammar_too_large', error.message);
  assert.equal(error.param, 'response_format');
  assert.match(error.message, /\d+ bytes/, 'the message names the bytes needed');
  console.log(`   400 grammar_too_large after ${ms.toFixed(0)} ms`);
  assert.ok(ms < 5000, `the 400 arrives within 5 s (${ms.toFixed(0)} ms)`);
  assert.equal((await health(server)).grammar.too_large, 1);
  const normal = await client.chat.completions.create({ model, messages, max_tokens: 4 });
  assert.ok(normal.choices.length === 1, 'the slot serves a request without a grammar');
  await stopTernServer(server);
}

async function main() {
  await timeoutCase();
  await reuseCase();
  await tooLargeCase();
  clearTimeout(watchdog);
  console.log('grammar: ok');
}

main().catch((e) => {
  console.error(`FAIL: ${e.stack ?? e}`);
  for (const s of servers) s.proc.kill('SIGKILL');
  process.exit(1);
});

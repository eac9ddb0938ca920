// tern-server's throughput with several streams at once: one server (--sessions N), then for
// each stream count the same streamed chat requests sent together through the official openai
// client, every one generating exactly --tokens tokens (an end token is banned by logit_bias,
// so no stream stops early). Prints, per stream count, the tokens per second of all streams
// together (from the first request sent to the last token received), each stream's own rate
// (from its request to its last token), time to first token, and the ratio to one stream. Runs every
// count --rounds times, interleaved, and reports medians.
//   node bench/server_streams.mjs --server BIN --bundle FILE --npm DIR
//        [--streams 1,2,4] [--tokens 64] [--threads 2] [--rounds 3] [--ctx 1024] [--prompt TEXT]
// e.g. node bench/server_streams.mjs --server build/release/tools/server/tern-server \
//        --bundle build/release/test-bundles/tiny-austen-2b4t-chat.tern --npm build/npm
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

import { startTernServer } from '../tests/server/server_process.mjs';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const need of ['server', 'bundle', 'npm']) {
  if (!args[need] || !fs.existsSync(args[need])) {
    console.error(`server_streams: --${need} ${args[need] ?? ''} is missing (a build and .ci/deps make them)`);
    process.exit(1);
  }
}
const OpenAI = createRequire(path.resolve(args.npm, 'package.json'))('openai').default;
const counts = (args.streams ?? '1,2,4').split(',').map(Number);
const tokens = Number(args.tokens ?? 64);
const rounds = Number(args.rounds ?? 3);
const maxStreams = Math.max(...counts);
const prompt = args.prompt ?? 'Write a long letter from Elizabeth to her sister about the ball at Netherfield.';
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

const started = [];
const server = await startTernServer(args.server, [args.bundle, '--port', '0', '--sessions', String(maxStreams),
                                                   '--queue', String(maxStreams), '--threads',
                                                   String(args.threads ?? 2), '--ctx', String(args.ctx ?? 1024)],
                                     started);
process.on('exit', () => server.proc.exitCode === null && server.proc.kill('SIGKILL'));
const base = server.base;
const props = await (await fetch(`${base}/props`)).json().catch(() => ({}));
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600000 });
const model = 'any';

// The model's end tokens, banned so every stream runs its full length.
const ends = [props.eos_id, props.eot_id].filter((t) => Number.isInteger(t) && t >= 0);
const logit_bias = Object.fromEntries(ends.map((t) => [String(t), -100]));

async function stream(i, t0) {
  const s = await client.chat.completions.create({
    model, stream: true, max_tokens: tokens, temperature: 0.8, seed: i, logit_bias,
    messages: [{ role: 'user', content: `${prompt} (${i})` }],
  });
  let first = 0, last = 0, pieces = 0;
  for await (const chunk of s) {
    if (!chunk.choices[0]?.delta?.content) continue;
    last = performance.now();
    if (pieces++ === 0) first = last;
  }
  return { ttft: first - t0, end: last };
}

async function run(n) {
  const t0 = performance.now();
  const r = await Promise.all(Array.from({ length: n }, (_, i) => stream(i, t0)));
  const wall = (Math.max(...r.map((x) => x.end)) - t0) / 1000;
  return {
    together: (n * tokens) / wall,
    perStream: median(r.map((x) => tokens / ((x.end - t0) / 1000))),
    ttft: median(r.map((x) => x.ttft)),
  };
}

await run(1);  // warm-up: the weights paged in
const results = Object.fromEntries(counts.map((n) => [n, []]));
for (let round = 0; round < rounds; ++round) {
  for (const n of round % 2 ? [...counts].reverse() : counts) results[n].push(await run(n));
}
const load = fs.existsSync('/proc/loadavg') ? fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ') : '?';
console.log(`tern-server on ${path.basename(args.bundle)}: --sessions ${maxStreams} ` +
            `--threads ${args.threads ?? 2}, ${tokens} tokens per stream, medians of ${rounds} rounds (load ${load})\n`);
console.log('| streams | tok/s together | × one stream | tok/s per stream | time to first token |');
console.log('|---:|---:|---:|---:|---:|');
const one = median(results[counts[0]].map((x) => x.together));
for (const n of counts) {
  const together = median(results[n].map((x) => x.together));
  console.log(`| ${n} | ${together.toFixed(1)} | ${(together / one).toFixed(2)} | ` +
              `${median(results[n].map((x) => x.perStream)).toFixed(1)} | ` +
              `${median(results[n].map((x) => x.ttft)).toFixed(0)} ms |`);
}
server.proc.kill('SIGTERM');

// Soak of tern-server: many requests from 8 clients through the official openai client and
// raw HTTP, mixing streamed and whole answers, streams dropped mid-way, bad requests and
// over-long ones, on --sessions 2. Prints requests per outcome, time to first token, and the
// server's RSS, open file descriptors and threads at start (after a warm-up), middle and end,
// each sampled when the clients are paused and idle connections have closed; fails when the
// end is not within 5 % of the start, or any answer is not what its kind should get.
//   node bench/server_soak.mjs --server BIN --bundle FILE --npm DIR (--requests N | --seconds S)
// e.g. node bench/server_soak.mjs --server build/release/tools/server/tern-server \
//        --bundle build/release/test-bundles/tiny-austen-2b4t-chat.tern --npm build/npm --requests 10000
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const need of ['server', 'bundle', 'npm']) {
  if (!args[need] || !fs.existsSync(args[need])) {
    console.error(`server_soak: --${need} ${args[need] ?? ''} is missing (build, .ci/test and .ci/deps make them)`);
    process.exit(1);
  }
}
const OpenAI = createRequire(path.resolve(args.npm, 'package.json'))('openai').default;
const clients = Number(args.clients ?? 8);
const seconds = args.seconds ? Number(args.seconds) : 0;
const requests = seconds ? Infinity : Number(args.requests ?? 10000);
// Short deadlines so a pause empties the server quickly: idle keep-alive connections close after
// 1 s (undici then does not reuse them: it keeps a socket for the Keep-Alive hint less 2 s).
// Connections that never sent a request (undici opens spare ones and keeps them 4 s) close
// after 6 s: closing them sooner races undici picking one up for its next request, which then
// fails with "other side closed" (seen at 2 s; the default is 10 s).
const idleTimeout = Number(args['idle-timeout'] ?? 1);
const headerTimeout = 6;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const proc = spawn(args.server, [args.bundle, '--port', '0', '--sessions', '2', '--queue', '8', '--ctx', '256',
                                 '--timeout', '30', '--max-body', '65536', '--idle-timeout', String(idleTimeout),
                                 '--header-timeout', String(headerTimeout)],
                   { stdio: ['ignore', 'pipe', 'pipe'] });
process.on('exit', () => proc.exitCode === null && proc.kill('SIGKILL'));  // never left running after a failure
let logLines = 0;
const log = args.log ? fs.createWriteStream(args.log) : null;  // --log FILE: the server's stderr
proc.stderr.on('data', (d) => {
  logLines += d.toString().split('\n').length - 1;
  log?.write(d);
});
const port = await new Promise((resolve, reject) => {
  let out = '';
  proc.stdout.on('data', (d) => {
    out += d;
    if (out.includes('\n')) resolve(Number(out.trim()));
  });
  proc.on('exit', (code) => reject(new Error(`tern-server exited (${code})`)));
});
const base = `http://127.0.0.1:${port}`;
for (let i = 0; ; ++i) {
  const h = await (await fetch(`${base}/health`)).json().catch(() => ({}));
  if (h.status === 'ok') break;
  if (i > 500) throw new Error('tern-server did not become ready');
  await sleep(20);
}
const model = path.basename(args.bundle).replace(/\.tern$/, '');
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });

function sample() {
  const status = fs.readFileSync(`/proc/${proc.pid}/status`, 'utf8');
  return {
    rss: Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024,
    threads: Number(/Threads:\s+(\d+)/.exec(status)[1]),
    fds: fs.readdirSync(`/proc/${proc.pid}/fd`).length,
  };
}

// Each request's kind, by its number: the mix is fixed, the order interleaves the kinds.
const kinds = ['stream', 'whole', 'stream', 'cancel', 'bad', 'whole', 'stream', 'overlong', 'cancel', 'bad'];
const prompts = ['Who is Mr. Darcy?', 'It is a truth universally acknowledged', 'The village of Longbourn',
                 'Mr. Bennet was so odd a mixture'];
const outcomes = {};
const ttft = [];
const count = (o) => (outcomes[o] = (outcomes[o] ?? 0) + 1);

async function oneRequest(i) {
  const kind = kinds[i % kinds.length];
  const t0 = performance.now();
  const prompt = prompts[i % prompts.length];
  const max_tokens = 8 + (i * 7) % 41;
  try {
    if (kind === 'stream' || kind === 'cancel') {
      const stream = await client.chat.completions.create({
        model, messages: [{ role: 'user', content: prompt }], max_tokens: kind === 'cancel' ? 200 : max_tokens,
        temperature: 0.8, seed: i, stream: true,
      });
      let chunks = 0;
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta?.content && chunks++ === 0) ttft.push(performance.now() - t0);
        if (kind === 'cancel' && chunks >= 2) {
          stream.controller.abort();
          break;
        }
      }
      count(kind === 'cancel' ? 'cancelled mid-stream' : 'streamed 200');
    } else if (kind === 'whole') {
      const r = await client.completions.create({ model, prompt, max_tokens, temperature: 0.8, seed: i });
      if (!(r.usage.completion_tokens > 0)) throw new Error('an empty completion');
      count('whole 200');
    } else {
      const body = kind === 'bad'
        ? [`{"messages": [`, JSON.stringify({ model, messages: 'hi' }), JSON.stringify({ model, prompt })][i % 3]
        : [JSON.stringify({ model, prompt: 'the house was quiet and '.repeat(80) }),  // past the 256-token context
           JSON.stringify({ model, prompt: 'x'.repeat(70000) })][Math.floor(i / 10) % 2];  // past --max-body
      // The third bad request goes to a legacy route this server does not have (404).
      const route = kind !== 'bad' ? '/v1/completions'
        : i % 3 === 2 ? '/v1/engines/davinci/completions' : '/v1/chat/completions';
      const r = await fetch(`${base}${route}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      const j = await r.json();
      const want = kind === 'bad' ? (i % 3 === 2 ? 404 : 400) : (Math.floor(i / 10) % 2 === 0 ? 400 : 413);
      if (r.status !== want || !j.error?.message) throw new Error(`${kind}: HTTP ${r.status} ${JSON.stringify(j)}`);
      count(`${kind} ${r.status}`);
    }
  } catch (e) {
    if (e instanceof OpenAI.APIError && e.status === 503) return count('busy 503');
    if (kind === 'cancel' && e.name === 'AbortError') return count('cancelled mid-stream');
    const cause = e.cause?.cause?.code ?? e.cause?.code ?? e.cause?.message ?? '';
    throw new Error(`request ${i} (${kind}) failed ${((performance.now() - t0) / 1000).toFixed(3)} s in, at ` +
                    `${new Date().toISOString()}: ${e} ${cause}`);
  }
}

let next = 0;
let done = 0;
async function phase(until) {
  const end = seconds ? performance.now() + until * 1000 : 0;
  const more = () => (seconds ? performance.now() < end : next < until);
  await Promise.all(Array.from({ length: clients }, async () => {
    while (more()) {
      await oneRequest(next++);
      ++done;
    }
  }));
}
// Paused: no request in flight, idle keep-alive connections closed.
async function quiet() {
  await sleep((Math.max(idleTimeout, headerTimeout) + 0.5) * 1000);
  return sample();
}

// Both slots' KV caches filled once, so the start sample holds the memory the plan gives them
// (pages of the arena become resident as positions are first written).
const props = await (await fetch(`${base}/props`)).json();
const ban = Object.fromEntries([props.eos_id, props.eot_id].filter((id) => id >= 0).map((id) => [String(id), -100]));
await Promise.all([0, 1].map(async (slot) => {
  const r = await client.completions.create({ model, prompt: 'It is', max_tokens: props.n_ctx - 8, logit_bias: ban, seed: slot });
  if (r.usage.prompt_tokens + r.usage.completion_tokens < props.n_ctx - 8) throw new Error('the fill did not fill the cache');
}));

const t0 = performance.now();
const warm = seconds ? seconds / 10 : Math.min(400, requests / 10);
await phase(warm);
const start = await quiet();
await phase(seconds ? (seconds - warm) / 2 : requests / 2);
const middle = await quiet();
await phase(seconds ? (seconds - warm) / 2 : requests);
const end = await quiet();
const wall = (performance.now() - t0) / 1000;
const health = await (await fetch(`${base}/health`)).json();

const sorted = ttft.sort((a, b) => a - b);
const pct = (p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))].toFixed(1);
const mib = (b) => (b / 1048576).toFixed(1);
console.log(`${done} requests from ${clients} clients on 2 slots in ${wall.toFixed(1)} s (${logLines} log lines)\n`);
console.log('| outcome | requests |\n|---|---|');
for (const [o, n] of Object.entries(outcomes).sort()) console.log(`| ${o} | ${n} |`);
console.log(`\n| time to first token | p50 | p95 | p99 |\n|---|---|---|---|\n| ${sorted.length} streams | ${pct(50)} ms | ` +
            `${pct(95)} ms | ${pct(99)} ms |`);
console.log('\n| sample | RSS (MiB) | open fds | threads |\n|---|---|---|---|');
for (const [name, s] of [['start (after warm-up)', start], ['middle', middle], ['end', end]]) {
  console.log(`| ${name} | ${mib(s.rss)} | ${s.fds} | ${s.threads} |`);
}
const within = (a, b) => Math.abs(a - b) <= 0.05 * b;
const failures = [];
for (const key of ['rss', 'fds', 'threads']) {
  if (!within(end[key], start[key])) failures.push(`${key} ended at ${end[key]}, started at ${start[key]}`);
}
if (health.status !== 'ok' || health.connections.open !== 1 || health.slots_idle !== 2) {
  failures.push(`the server is not idle at the end: ${JSON.stringify(health)}`);
}
proc.kill('SIGTERM');
const code = await new Promise((resolve) => proc.on('exit', (c) => resolve(c)));
if (code !== 0) failures.push(`tern-server exited with ${code} on SIGTERM`);
if (failures.length) {
  console.error(`\nFAIL: ${failures.join('; ')}`);
  process.exit(1);
}
console.log('\nend within 5 % of start: RSS, open file descriptors and threads');

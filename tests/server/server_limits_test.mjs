// tern-server's limits on what clients may take (tools/server/README.md, "Limits"):
//   node server_limits_test.mjs --suite memory ...  40 rounds of large but legal requests (1 MiB
//                                                  bodies, deep JSON, 1,001 pipelined requests):
//                                                  the RSS after each round stays within the plan
//                                                  plus the allowance /health reports
//   node server_limits_test.mjs --suite queue ...   a queued request whose client left gives up its
//                                                  place at once; a non-streaming request whose
//                                                  client left is aborted (logged 499)
//   node server_limits_test.mjs --suite key ...     the API key from --api-key-file and TERN_API_KEY
//   node server_limits_test.mjs --suite clients ... one address's 512 idle connections while another
//                                                  address's /health answers in < 200 ms
// Common arguments: --server BIN --bundle FILE [--rounds N] [--csv FILE: the RSS curve].
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

import { startTernServer, stopTernServer } from './server_process.mjs';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];

const servers = [];
const deadline = Number(args.deadline ?? 150);
const watchdog = setTimeout(() => {
  console.error(`FAIL: the ${args.suite} suite did not finish within ${deadline} s`);
  for (const s of servers) s.proc.kill('SIGKILL');
  process.exit(1);
}, deadline * 1000);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const modelName = path.basename(args.bundle).replace(/\.tern$/, '');
const mib = (b) => (b / 1048576).toFixed(1);

// Starts tern-server on a free loopback port; resolves when /health says ok.
async function startServer(extra) {
  return startTernServer(args.server, [args.bundle, '--port', '0', ...extra], servers);
}

function rssBytes(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024;
}

// One request on a connection of its own (node's fetch pools connections; these must not).
function request(port, method, route, body = '', { localAddress, timeoutMs = 60000 } = {}) {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method, path: route, agent: false, localAddress,
        headers: body ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } : {} },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode, text, ms: performance.now() - t0 }));
      });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${route} took over ${timeoutMs} ms`)));
    req.end(body);
  });
}

// `count` requests written at once on one connection; resolves with the number of responses.
function pipelined(port, count, raw) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    sock.on('data', (d) => (data += d.toString('latin1')));
    sock.on('error', reject);
    sock.on('close', () => resolve(data.split('HTTP/1.1 ').length - 1));
    sock.on('connect', () => sock.write(raw.repeat(count)));
  });
}

// ---- Memory: the process inside the plan plus the allowance ----

async function memorySuite() {
  const rounds = Number(args.rounds ?? 40);
  const server = await startServer(['--memory-budget', '64M', '--sessions', '1', '--queue', '16', '--timeout', '30']);
  const health0 = JSON.parse((await request(server.port, 'GET', '/health')).text);
  const planned = health0.memory.planned_bytes;
  const allowance = health0.memory.allowance_bytes;
  assert.ok(Number.isFinite(planned) && planned > 0, '/health reports the plan');
  // Legal and large: a 1 MiB body (a 1,048,000-byte prompt), a deep JSON value, and 1,001
  // requests pipelined on one connection (the 1,001st past the per-connection limit).
  const big = JSON.stringify({ model: modelName, prompt: 'the '.repeat(261990), max_tokens: 1 });
  assert.ok(big.length <= 1 << 20 && big.length > 1040000, `the big body is ${big.length} bytes`);
  const tokenize = JSON.stringify({ content: 'the '.repeat(261995) });
  const deep = `{"model":"${modelName}","prompt":"x","max_tokens":1,"user":${'['.repeat(200000)}${']'.repeat(200000)}}`;
  const get = 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n';
  const curve = [rssBytes(server.proc.pid)];
  for (let round = 0; round < rounds; ++round) {
    const work = [];
    for (let i = 0; i < 4; ++i) work.push(request(server.port, 'POST', '/v1/completions', big));
    for (let i = 0; i < 4; ++i) work.push(request(server.port, 'POST', '/tokenize', tokenize));
    for (let i = 0; i < 4; ++i) work.push(request(server.port, 'POST', '/v1/completions', deep));
    work.push(pipelined(server.port, 1001, get));
    const results = await Promise.all(work);
    for (const r of results.slice(0, 12)) assert.ok([200, 400, 503].includes(r.status), `status ${r.status}: ${r.text}`);
    assert.ok(results.slice(4, 8).some((r) => r.status === 200), 'a /tokenize round is answered');
    assert.equal(results[12], 1000, 'the first 1,000 pipelined requests are answered');
    curve.push(rssBytes(server.proc.pid));
  }
  const health = JSON.parse((await request(server.port, 'GET', '/health')).text);
  console.log(`planned ${mib(planned)} MiB, allowance ${mib(allowance)} MiB, budget ${mib(health.memory.budget_bytes)} MiB`);
  console.log(`RSS after each round (MiB): ${curve.map(mib).join(' ')}`);
  if (args.csv) fs.writeFileSync(args.csv, curve.map((b, i) => `${i},${b}`).join('\n') + '\n');
  assert.ok(Number.isFinite(allowance) && allowance > 0, `/health reports the allowance: ${JSON.stringify(health.memory)}`);
  assert.ok(Number.isFinite(health.memory.rss_bytes), '/health reports the RSS');
  const limit = planned + allowance;
  const worst = Math.max(...curve);
  assert.ok(health.memory.rss_bytes <= limit, `/health's RSS ${mib(health.memory.rss_bytes)} MiB is within ${mib(limit)}`);
  assert.ok(worst <= limit, `RSS ${mib(worst)} MiB after a round stays within the plan plus the allowance (${mib(limit)} MiB)`);
  await stopTernServer(server);
}

// ---- Clients that have left ----

async function health(server) {
  return JSON.parse((await request(server.port, 'GET', '/health')).text);
}

async function waitFor(what, test, ms) {
  const t0 = performance.now();
  while (!(await test())) {
    assert.ok(performance.now() - t0 < ms, `${what} within ${ms} ms`);
    await sleep(20);
  }
  return performance.now() - t0;
}

// A request on a connection of its own that the test may drop (destroy) at any time.
function droppable(port, body) {
  const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/completions', agent: false,
                             headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } });
  const done = new Promise((resolve) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.on('error', () => resolve({ status: -1 }));
  });
  req.end(body);
  return { drop: () => req.destroy(), done };
}

async function queueSuite() {
  // One slot, one place in line, an evicting cache (a generation may run as long as it is
  // allowed to) and end-of-text banned: the first request would run for a million tokens.
  const server = await startServer(['--sessions', '1', '--queue', '1', '--kv', 'q4', '--ctx', '128', '--timeout', '20']);
  const props = JSON.parse((await request(server.port, 'GET', '/props')).text);
  const ban = {};
  for (const id of [props.eos_id, props.eot_id]) if (id >= 0) ban[String(id)] = -100;
  const prompt = 'It is a truth universally acknowledged';
  const endless = droppable(server.port, JSON.stringify({ model: modelName, prompt, max_tokens: 1000000, logit_bias: ban, seed: 1 }));
  await waitFor('the endless request takes the slot', async () => (await health(server)).slots_idle === 0, 5000);
  const short = JSON.stringify({ model: modelName, prompt, max_tokens: 4, temperature: 0 });
  const queued = droppable(server.port, short);
  await waitFor('the second request waits in line', async () => (await health(server)).queue === 1, 5000);
  // The line is full: a third is turned away (the control for what follows).
  assert.equal((await request(server.port, 'POST', '/v1/completions', short)).status, 503, 'past the queue: 503');
  queued.drop();
  const left = await waitFor('the dropped request leaves the line', async () => (await health(server)).queue === 0, 2000);
  console.log(`   queued request left the line ${left.toFixed(0)} ms after its client dropped`);
  // Its place is free: a live client waits in line instead of a 503.
  const live = request(server.port, 'POST', '/v1/completions', short);
  await waitFor('a live client takes the freed place', async () => (await health(server)).queue === 1, 2000);
  // The endless request's client leaves: the generation stops and the live one runs.
  const dropped = performance.now();
  endless.drop();
  const answer = await live;
  const after = performance.now() - dropped;
  assert.equal(answer.status, 200, `the live client is answered: ${answer.text}`);
  assert.ok(after < 3000, `the live request is answered ${after.toFixed(0)} ms after the running one's client left`);
  console.log(`   live request answered ${after.toFixed(0)} ms after the running request's client left`);
  // Both requests whose clients left are logged 499 (the running one as its generation stops).
  const aborted = () => server.log.filter((l) => /^POST \/v1\/completions 499 /.test(l)).length;
  await waitFor('both requests whose clients left are logged 499', async () => aborted() === 2, 2000)
    .catch((e) => assert.fail(`${e.message}:\n${server.log.join('\n')}`));
  await stopTernServer(server);
}

// ---- One client cannot fill the connection table ----

async function clientsSuite() {
  const server = await startServer(['--sessions', '1']);
  const h0 = await health(server);
  assert.equal(h0.connections.limit, 512);
  // 512 idle connections from 127.0.0.1 (a slowloris that never sends a byte).
  const idle = [];
  for (let i = 0; i < 512; ++i) {
    const sock = net.connect({ port: server.port, host: '127.0.0.1' });
    const c = { sock, data: '' };
    sock.on('data', (d) => (c.data += d.toString('latin1')));
    sock.on('error', () => {});
    c.connected = new Promise((resolve) => sock.on('connect', resolve));
    idle.push(c);
  }
  await Promise.all(idle.map((c) => c.connected));
  await sleep(300);
  // Another client (127.0.0.2: loopback answers the whole 127/8) asks for /health.
  const times = [];
  for (let i = 0; i < 10; ++i) {
    const r = await request(server.port, 'GET', '/health', '', { localAddress: '127.0.0.2', timeoutMs: 5000 });
    assert.equal(r.status, 200, `another client's /health: ${r.text}`);
    times.push(r.ms);
  }
  const refused = idle.filter((c) => /^HTTP\/1\.1 503 /.test(c.data)).length;
  const h = JSON.parse((await request(server.port, 'GET', '/health', '', { localAddress: '127.0.0.2' })).text);
  console.log(`   /health from another address: ${times.map((t) => t.toFixed(1)).join(' ')} ms; ` +
              `${refused} of the first client's 512 refused (per-client limit ${h.connections.per_client_limit})`);
  // The default per-client limit is a quarter of --max-connections (tools/server/README.md).
  assert.equal(h.connections.per_client_limit, 128);
  assert.ok(Math.max(...times) < 200, `/health answered in < 200 ms (slowest ${Math.max(...times).toFixed(1)} ms)`);
  // (startServer's fetch may still hold a kept-alive connection from 127.0.0.1: one more.)
  assert.ok(refused === 384 || refused === 385, `connections past the per-client limit get a 503 (${refused})`);
  // A completion from the other client is served too.
  const body = JSON.stringify({ model: modelName, prompt: 'It is', max_tokens: 4, temperature: 0 });
  const r = await request(server.port, 'POST', '/v1/completions', body, { localAddress: '127.0.0.2', timeoutMs: 20000 });
  assert.equal(r.status, 200, r.text);
  for (const c of idle) c.sock.destroy();
  await stopTernServer(server);
}

// ---- The API key off the command line ----

// tern-server's exit code and stderr when it refuses to start.
function refusedStart(extra, env = {}) {
  return new Promise((resolve) => {
    const proc = spawn(args.server, [args.bundle, '--port', '0', ...extra], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
    let err = '';
    proc.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10000);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, err });
    });
  });
}

async function keySuite() {
  const dir = fs.mkdtempSync('/tmp/tern-key-');
  const file = path.join(dir, 'api-key');
  fs.writeFileSync(file, 'sk-from-file\n', { mode: 0o600 });
  fs.chmodSync(file, 0o600);
  const check = async (server, key) => {
    const body = JSON.stringify({ model: modelName, prompt: 'It is', max_tokens: 2 });
    const auth = (k) => new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: server.port, method: 'POST', path: '/v1/completions', agent: false,
                                 headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${k}` } },
                               (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(await auth(key), 200, 'the key is accepted');
    assert.equal(await auth(`${key}x`), 401, 'another key is refused');
  };
  // The first line of the file, its newline stripped; not in the command line.
  let server = await startServer(['--api-key-file', file]);
  await check(server, 'sk-from-file');
  assert.ok(!fs.readFileSync(`/proc/${server.proc.pid}/cmdline`, 'utf8').includes('sk-from-file'));
  await stopTernServer(server);
  // The environment variable.
  const saved = process.env.TERN_API_KEY;
  process.env.TERN_API_KEY = 'sk-from-env';
  server = await startServer([]);
  await check(server, 'sk-from-env');
  await stopTernServer(server);
  // Two ways at once is ambiguous: refused.
  let r = await refusedStart(['--api-key-file', file]);
  assert.notEqual(r.code, 0);
  assert.match(r.err, /one way/);
  if (saved === undefined) delete process.env.TERN_API_KEY;
  else process.env.TERN_API_KEY = saved;
  const env = { TERN_API_KEY: '' };
  // A file others may read is refused; a FIFO is refused without hanging.
  fs.chmodSync(file, 0o644);
  r = await refusedStart(['--api-key-file', file], env);
  assert.notEqual(r.code, 0);
  assert.match(r.err, /other users may read/);
  const fifo = path.join(dir, 'fifo');
  execFileSync('mkfifo', ['-m', '600', fifo]);
  r = await refusedStart(['--api-key-file', fifo], env);
  assert.ok(r.code !== null && r.code !== 0, `a FIFO is refused at once (${r.code})`);
  assert.match(r.err, /not a regular file/);
  r = await refusedStart(['--api-key-file', path.join(dir, 'missing')], env);
  assert.notEqual(r.code, 0);
  fs.rmSync(dir, { recursive: true });
}

async function main() {
  if (args.suite === 'memory') await memorySuite();
  else if (args.suite === 'queue') await queueSuite();
  else if (args.suite === 'clients') await clientsSuite();
  else if (args.suite === 'key') await keySuite();
  else throw new Error(`no suite ${args.suite}`);
  clearTimeout(watchdog);
  console.log(`${args.suite}: ok`);
}

main().catch((e) => {
  console.error(`FAIL: ${e.stack ?? e}`);
  for (const s of servers) s.proc.kill('SIGKILL');
  process.exit(1);
});

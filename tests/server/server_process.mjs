// tern-server as the Node test suites start it: on a free loopback port (--port 0, which it
// prints on stdout), its stderr kept line by line, ready once /health says ok.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// command, argv: the server and its arguments (an emulator's, when one runs it). Resolves to
// { proc, port, log, base }, added to `started` as soon as it listens (so a suite can stop it
// even when it never becomes ready); rejects when the server exits before listening.
export async function startTernServer(command, argv, started) {
  const proc = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  const log = [];
  let stderr = '';
  proc.stderr.on('data', (d) => {
    stderr += d;
    const lines = stderr.split('\n');
    stderr = lines.pop();
    log.push(...lines);
  });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(Number(out.trim()));
    });
    proc.on('exit', (code) => reject(new Error(`tern-server exited (${code}) before listening: ${log.join('\n')}`)));
  });
  const server = { proc, port, log, base: `http://127.0.0.1:${port}` };
  started.push(server);
  for (let i = 0; ; ++i) {
    const r = await fetch(`${server.base}/health`);
    const j = await r.json();
    if (r.status === 200 && j.status === 'ok') break;
    assert.ok(i < 500 && j.status !== 'error', `the server did not become ready: ${JSON.stringify(j)}`);
    await sleep(20);
  }
  return server;
}

// Stops a running server with SIGTERM; it must exit with status 0.
export async function stopTernServer(server) {
  const exited = new Promise((resolve) => server.proc.on('exit', (code) => resolve(code)));
  assert.equal(server.proc.exitCode, null, 'the server is still running before it is asked to stop');
  server.proc.kill('SIGTERM');
  assert.equal(await exited, 0, 'tern-server exits cleanly on SIGTERM');
}

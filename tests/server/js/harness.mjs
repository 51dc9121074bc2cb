// What the openai-client end-to-end tests share: starting `tessera serve` on a free loopback
// port, waiting for /ready, and running named tests with a pass/fail summary.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';

// Starts `tessera serve --port 0 ARGS...`; resolves with the child, its port once it listens
// (the port is read from its stdout) and its stderr so far (`log.text`, the server's and the
// worker's lines, collected from the start: the worker may log before the server listens).
export function startServer(tessera, args, env = {}) {
  const child = spawn(tessera, ['serve', '--port', '0', ...args],
                      { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = { text: '' };
  child.stderr.on('data', (d) => { log.text += d; });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('server did not start in 60 s')), 60000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve({ child, port: Number(m[1]), log }); }
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
}

// startServer, then waitReady on it: resolves with { child, port, log, base } (base:
// "http://127.0.0.1:PORT"). A server that does not get ready is stopped.
export async function serveReady(tessera, args, env = {}, readySeconds = 60) {
  const s = await startServer(tessera, args, env);
  const base = `http://127.0.0.1:${s.port}`;
  try {
    await waitReady(base, readySeconds);
  } catch (e) {
    s.child.kill('SIGTERM');
    throw e;
  }
  return { ...s, base };
}

export async function waitReady(base, seconds) {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    try { if ((await fetch(`${base}/ready`)).status === 200) return; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('server not ready');
}

// Runs every test against `client`, prints ok/FAIL lines and a summary; exits 1 on failure.
export async function runTests(tests, client, child) {
  let failed = 0;
  try {
    for (const t of tests) {
      try {
        await t.fn(client);
        console.log(`ok: ${t.name}`);
      } catch (e) {
        failed++;
        console.log(`FAIL: ${t.name}: ${e.stack ?? e}`);
      }
    }
  } finally {
    child.kill('SIGTERM');
  }
  console.log(`${tests.length - failed}/${tests.length} passed`);
  process.exit(failed ? 1 : 0);
}

// Named checks run one after another, each printing ok/FAIL, for tests that start several
// servers: `const { check, failed } = checker(); await check('name', async () => {...});`.
export function checker() {
  let failures = 0;
  return {
    failed: () => failures,
    check: async (name, fn) => {
      try {
        await fn();
        console.log(`ok: ${name}`);
      } catch (e) {
        failures++;
        console.log(`FAIL: ${name}: ${e.stack ?? e}`);
      }
    },
  };
}

// The `ollama` client's call is refused with `status`, the error (Ollama's {"error": "..."})
// naming each of `words`.
export async function ollamaRefused(promise, status, ...words) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.name, 'ResponseError', String(e));
    assert.equal(e.status_code, status, e.error);
    for (const w of words) assert.ok(e.error.includes(w), `${e.error} does not name ${w}`);
    return true;
  });
}

// End-to-end test of POST /api/pull with the official `ollama` npm package (0.6.4, locked)
// unmodified: `tessera serve` pulls through tessera's own pull from a hub-like HTTP server in
// this test (HF_ENDPOINT; never the internet) that publishes the tiny test model. Checked: the
// streamed progress in Ollama's shape and order (pulling manifest, per-file lines with digest,
// total and completed, verifying sha256 digest, writing manifest, success); the pulled model in
// /api/tags, /v1/models and /metrics, answering a chat; a catalog name (served under it); a pull
// with stream: false (already current: one success); a name the hub lacks (an error line
// mid-stream, a 404 whole); an Ollama registry name (400); a second pull of a name being pulled
// (409); a client that leaves mid-download stops the download (the hub sees its connection
// closed), streamed or not, and frees the name; the next pull resumes and succeeds.
//   node ollama_pull_e2e_test.mjs TESSERA E2E_WORK_DIR STORIES_MODEL   (E2E_WORK_DIR: tiny/)
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Ollama } from 'ollama';
import { checker, ollamaRefused, startServer, waitReady } from './harness.mjs';

const [tessera, work, stories] = process.argv.slice(2);
const commit = 'c0ffee'.padEnd(40, '0');

// The hub: every repo publishes the tiny model's files; `stall` repos send half of the weights
// on their first download and then nothing until the client closes the connection.
const files = {};
for (const name of fs.readdirSync(`${work}/tiny`)) files[name] = fs.readFileSync(`${work}/tiny/${name}`);
const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');
const gitBlobId = (b) => crypto.createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');
const weights = 'model.safetensors';
const hub = { stalled: new Set(), closedStalls: 0,
              repos: new Set(['test-org/tiny', 'test-org/stall', 'test-org/stall-whole',
                              'HuggingFaceTB/SmolLM2-135M-Instruct']) };
const hubServer = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://hub');
  let m = url.pathname.match(/^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/);
  if (m) {
    if (!hub.repos.has(m[1])) { res.writeHead(404); return res.end('{"error":"Repository not found"}'); }
    const siblings = Object.entries(files).map(([rfilename, b]) => (rfilename.endsWith('.safetensors')
      ? { rfilename, size: b.length, lfs: { sha256: sha256(b), size: b.length } }
      : { rfilename, size: b.length, blobId: gitBlobId(b) }));
    res.writeHead(200, { 'Content-Type': 'application/json' });
    return res.end(JSON.stringify({ sha: commit, siblings }));
  }
  m = url.pathname.match(/^\/([^/]+\/[^/]+)\/resolve\/([0-9a-f]{40})\/(.+)$/);
  const body = m && hub.repos.has(m[1]) && m[2] === commit ? files[decodeURIComponent(m[3])] : undefined;
  if (!body) { res.writeHead(404); return res.end(); }
  if (m[1].startsWith('test-org/stall') && m[3] === weights && !hub.stalled.has(m[1])) {
    hub.stalled.add(m[1]);
    res.writeHead(200, { 'Content-Length': body.length });
    res.write(body.subarray(0, body.length >> 1));
    res.on('close', () => { hub.closedStalls++; });
    return;  // never ends: only the client's leaving closes it
  }
  const from = Number((req.headers.range ?? '').match(/^bytes=(\d+)-$/)?.[1] ?? 0);
  if (from > 0) {
    res.writeHead(206, { 'Content-Length': body.length - from,
                         'Content-Range': `bytes ${from}-${body.length - 1}/${body.length}` });
    return res.end(body.subarray(from));
  }
  res.writeHead(200, { 'Content-Length': body.length });
  res.end(body);
});
await new Promise((r) => hubServer.listen(0, '127.0.0.1', r));
const hubUrl = `http://127.0.0.1:${hubServer.address().port}`;

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-pull-e2e-'));
const models = `${home}/models`;
const { child, port } = await startServer(
  tessera, ['--no-auth', '--model', `stories=${stories}`],
  { HF_ENDPOINT: hubUrl, TESSERA_MODELS: models, HOME: home, HF_HOME: `${home}/hf`, HF_TOKEN: '',
    OLLAMA_MODELS: `${home}/ollama` });
const base = `http://127.0.0.1:${port}`;
const ollama = new Ollama({ host: base });
const { check, failed } = checker();
const deadline = (s) => Date.now() + s * 1000;

const refused = ollamaRefused;

try {
  await waitReady(base, 60);

  await check('streamed pull: Ollama\'s progress shape and order', async () => {
    const parts = [];
    for await (const p of await ollama.pull({ model: 'test-org/tiny', stream: true })) parts.push(p);
    const statuses = parts.map((p) => p.status);
    assert.equal(statuses[0], 'pulling manifest');
    assert.deepEqual(statuses.slice(-3), ['verifying sha256 digest', 'writing manifest', 'success']);
    const fileLines = parts.slice(1, -3);
    for (const p of fileLines) assert.match(p.status, /^pulling /, JSON.stringify(p));
    // The weights: named by the first 12 hex digits of their sha256, with the digest; the last
    // line of each file is complete.
    const digest = `sha256:${sha256(files[weights])}`;
    const w = fileLines.filter((p) => p.digest === digest);
    assert.ok(w.length >= 2, JSON.stringify(parts));
    assert.equal(w[0].status, `pulling ${digest.slice(7, 19)}`);
    assert.ok(w.every((p) => p.total === files[weights].length));
    assert.equal(w.at(-1).completed, files[weights].length);
    for (let i = 1; i < w.length; i++) assert.ok(w[i].completed >= (w[i - 1].completed ?? 0));
    // Files kept in Git: named, no digest.
    for (const name of ['config.json', 'tokenizer.json']) {
      const last = fileLines.filter((p) => p.status === `pulling ${name}`).at(-1);
      assert.ok(last, `no line for ${name}: ${JSON.stringify(statuses)}`);
      assert.equal(last.digest, undefined);
      assert.equal(last.completed, files[name].length);
    }
  });

  await check('the pulled model is listed by /api/tags and /v1/models, answers a chat, has its /metrics', async () => {
    const { models: listed } = await ollama.list();
    assert.ok(listed.some((m) => m.name === 'test-org/tiny' && m.details.format === 'safetensors'),
              JSON.stringify(listed.map((m) => m.name)));
    const r = await ollama.chat({ model: 'test-org/tiny', messages: [{ role: 'user', content: 'Hi' }],
                                  options: { num_predict: 2 } });
    assert.equal(r.done, true);
    assert.equal(r.model, 'test-org/tiny');
    assert.ok(r.eval_count >= 1);
    // The counters were once read before they showed the chat just answered (CI, once in
    // three runs): poll for them, bounded (10 s).
    const counted = /tessera_prompt_tokens_total\{model="test-org\/tiny"\} [1-9]/;
    let metrics = '';
    for (let i = 0; i < 200 && !counted.test(metrics); ++i) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 50));
      metrics = await (await fetch(`${base}/metrics`)).text();
    }
    assert.match(metrics, counted);
    const { data } = await (await fetch(`${base}/v1/models`)).json();
    assert.ok(data.some((m) => m.id === 'test-org/tiny' && m.x_tessera_kind === 'chat'));
  });

  await check('stream: false answers one {"status":"success"} (already current)', async () => {
    const r = await ollama.pull({ model: 'test-org/tiny:latest', stream: false });
    assert.equal(r.status, 'success', JSON.stringify(r));
  });

  await check('a catalog name pulls its repository and is served under the catalog name', async () => {
    const r = await ollama.pull({ model: 'smollm2-135m-instruct', stream: false });
    assert.equal(r.status, 'success', JSON.stringify(r));
    const { models: listed } = await ollama.list();
    assert.ok(listed.some((m) => m.name === 'smollm2-135m-instruct'), JSON.stringify(listed.map((m) => m.name)));
    assert.ok(fs.existsSync(`${models}/smollm2-135m-instruct/tessera-lock.json`));
  });

  await check('a name the hub does not have: an error line streamed, a 404 whole', async () => {
    await assert.rejects(async () => {
      for await (const _ of await ollama.pull({ model: 'test-org/missing', stream: true })) { /* progress */ }
    }, /was not found on the hub/);
    await refused(ollama.pull({ model: 'test-org/missing' }), 404, 'not found on the hub');
    await refused(ollama.pull({ model: 'qwen3:0.6b' }), 400, 'Ollama registry name');
  });

  await check('a second pull of a name being pulled is refused; a client that leaves stops its pull', async () => {
    const first = await ollama.pull({ model: 'test-org/stall', stream: true });
    const it = first[Symbol.asyncIterator]();
    // Until the weights' first bytes arrived: the download is under way.
    for (;;) {
      const { value, done } = await it.next();
      assert.ok(!done, 'the stream ended');
      if (value.digest === `sha256:${sha256(files[weights])}` && value.completed > 0) break;
    }
    await refused(ollama.pull({ model: 'test-org/stall' }), 409, 'already running');
    first.abort();
    await it.next().catch(() => {});
    const until = deadline(10);
    while (hub.closedStalls === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.equal(hub.closedStalls, 1, 'the download went on after the client left');
    // The name is free once the pull has stopped, and the next pull resumes and succeeds.
    let last;
    while (Date.now() < until) {
      last = await ollama.pull({ model: 'test-org/stall' }).catch((e) => e);
      if (last?.status_code !== 409) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(last?.status, 'success', String(last?.error ?? JSON.stringify(last)));
    const { models: listed } = await ollama.list();
    assert.ok(listed.some((m) => m.name === 'test-org/stall'));
  });

  await check('a client that leaves a pull with stream: false stops it too', async () => {
    const leaving = new AbortController();
    const answer = fetch(`${base}/api/pull`, { method: 'POST', signal: leaving.signal,
      body: JSON.stringify({ model: 'test-org/stall-whole', stream: false }) }).catch(() => 'aborted');
    const until = deadline(10);
    while (!hub.stalled.has('test-org/stall-whole') && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(hub.stalled.has('test-org/stall-whole'), 'the download did not start');
    leaving.abort();
    assert.equal(await answer, 'aborted');
    while (hub.closedStalls < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.equal(hub.closedStalls, 2, 'the download went on after the client left');
  });
} finally {
  child.kill('SIGTERM');
  hubServer.closeAllConnections();
  hubServer.close();
  fs.rmSync(home, { recursive: true, force: true });
}
console.log(failed() ? `${failed()} failure(s)` : 'all pull checks passed');
process.exit(failed() ? 1 : 0);

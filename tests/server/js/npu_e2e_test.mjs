// End-to-end test of hybrid NPU placement (issue #16) on the FAKE XDNA device: no NPU executes
// anything here; --npu-device fake:xdna1 makes the xdna backend run its program's CPU reference
// kernels, and every log line, /ready and the stats say so. Through the official openai
// package: greedy answers with the first layer, and with every layer, on the "NPU" equal the
// cpu-only server's; a command timeout injected mid-decode is recovered without changing a
// token; a lost device restarts the worker; a hung chain gets the worker killed past
// --hang-timeout and a request waiting in it runs again; bad NPU flags, and an NPU that fails doctor's checks, stop `serve` before it listens.
// The product has no fault injection: the timeout is injected by WITH_FAULTS, a test program
// running tessera's own commands whose --npu-device also takes ",fault=KIND@CHAIN"
// (tests/support/npu_device_with_faults.cc); tessera itself refuses that option.
//   node npu_e2e_test.mjs TESSERA E2E_WORK_DIR WITH_FAULTS   (E2E_WORK_DIR holds tiny/, qwen/, slow/)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import OpenAI from 'openai';
import { checker, serveReady } from './harness.mjs';

const [tessera, work, withFaults] = process.argv.slice(2);
const KEY = 'npu-key';
const prompts = ['Once upon a time', 'The river', 'Numbers such as 1, 2, 3'];

async function serve(args, env = {}, program = tessera) {
  const s = await serveReady(program, ['--rate-limit', '0', ...args], { TESSERA_API_KEY: KEY, ...env });
  return { ...s, client: new OpenAI({ apiKey: KEY, baseURL: `${s.base}/v1` }) };
}

// Greedy completions and one chat answer of each model on one server.
async function answers(srv) {
  const out = [];
  for (const model of ['tiny', 'qwen']) {
    for (const prompt of prompts) {
      const r = await srv.client.completions.create({ model, prompt, max_tokens: 16, temperature: 0 });
      out.push(r.choices[0].text);
    }
    const c = await srv.client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Say something about boats.' }], max_tokens: 16,
      temperature: 0 });
    out.push(c.choices[0].message.content);
  }
  return out;
}

const models = ['--model', `tiny=${work}/tiny`, '--model', `qwen=${work}/qwen`, '--max-loaded-models', '2'];
const { check, failed } = checker();

const cpu = await serve(models);
const expected = await answers(cpu);
const cpuReady = await (await fetch(`${cpu.base}/ready`)).json();
cpu.child.kill('SIGTERM');

await check('cpu-only: no NPU device in /ready', async () => {
  assert.equal(cpuReady.npu_device, null);
  assert.match(cpuReady.placements.tiny, /cpu#0/);
});

for (const flags of [['--npu-layers', '1'], ['--npu-percent', '100']]) {
  await check(`fake xdna1 ${flags.join(' ')}: the cpu-only answers, and /ready says fake`, async () => {
    const npu = await serve([...models, ...flags, '--npu-device', 'fake:xdna1']);
    try {
      assert.deepEqual(await answers(npu), expected);
      assert.match(npu.log.text, /tessera: NPU device: fake xdna1 \(CPU reference kernels; no NPU executes anything\)/);
      assert.match(npu.log.text, /xdna-fake-xdna1: layers 0-/);
      const ready = await (await fetch(`${npu.base}/ready`)).json();
      assert.match(ready.npu_device, /^fake xdna1 .*no NPU executes anything/);
      assert.match(ready.placements.tiny, /-> xdna#0/);
      assert.match(ready.placements.qwen, /-> xdna#0/);
      if (flags[0] === '--npu-percent') assert.match(ready.placements.tiny, /, head -> cpu#1$/);
      // Every answer's stats name the device too.
      const r = await npu.client.completions.create({ model: 'tiny', prompt: 'x', max_tokens: 1 });
      assert.match(r.x_tessera_stats.npu_device, /^fake xdna1/);
      // Four streams at once (one batched pass per step on the NPU path) give each answer.
      const streams = await Promise.all(prompts.concat(['The river']).map(async (prompt) => {
        const s = await npu.client.completions.create({ model: 'tiny', prompt, max_tokens: 16, temperature: 0, stream: true });
        let text = '';
        for await (const chunk of s) text += chunk.choices[0]?.text ?? '';
        return text;
      }));
      assert.deepEqual(streams, expected.slice(0, 3).concat([expected[1]]));
    } finally {
      npu.child.kill('SIGTERM');
    }
  });
}

await check('fake xdna2: a command timeout mid-decode is run again and changes no token', async () => {
  const npu = await serve([...models, '--npu-percent', '100', '--npu-device', 'fake:xdna2,fault=timeout@12'],
                          {}, withFaults);
  try {
    assert.deepEqual(await answers(npu), expected);
    // The fault did fire, once, and the chain ran again.
    assert.match(npu.log.text, /timeout: injected fault: command timed out .*running the chain again \(attempt 2 of 3\)/);
    assert.equal(npu.log.text.match(/running the chain again/g).length, 1);
    const ready = await (await fetch(`${npu.base}/ready`)).json();
    assert.equal(ready.x_tessera_stats.worker_restarts, 0);
    assert.match(ready.npu_device, /^fake xdna2/);
  } finally {
    npu.child.kill('SIGTERM');
  }
});

await check('a lost NPU mid-decode: the request fails, the worker is restarted, the next request runs', async () => {
  const npu = await serve(['--model', `tiny=${work}/tiny`, '--npu-percent', '100',
                           '--npu-device', 'fake:xdna1,fault=lost@6'], {}, withFaults);
  try {
    const complete = async (max_tokens) => {
      const r = await fetch(`${npu.base}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ model: 'tiny', prompt: prompts[0], max_tokens, temperature: 0 }) });
      return r.json();
    };
    // 16 tokens take more than 6 chains: the 7th loses the device.
    const lost = await complete(16);
    assert.ok(lost.error, JSON.stringify(lost));
    // The worker exits after answering; /ready shows the restart once the new one is up.
    const deadline = Date.now() + 60000;
    let ready;
    do {
      const r = await fetch(`${npu.base}/ready`);
      ready = await r.json();
      if (r.status === 200 && ready.x_tessera_stats.worker_restarts >= 1) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    } while (Date.now() < deadline);
    assert.equal(ready.x_tessera_stats.worker_restarts, 1, JSON.stringify(ready));
    assert.equal(ready.status, 'ready');
    assert.match(npu.log.text, /the NPU was lost; exiting so the server restarts the worker/);
    // The new worker's device has run no chain yet: 2 tokens fit before its 7th.
    const next = await complete(2);
    assert.equal(next.choices?.[0]?.finish_reason, 'length', JSON.stringify(next));
  } finally {
    npu.child.kill('SIGTERM');
  }
});

await check('a hung NPU chain: the worker is killed past --hang-timeout, a waiting request runs again', async () => {
  // hang@6: the 7th chain never returns (a step that overruns). The stream below stops after
  // its first tokens; a non-streamed request sent then waits in the hung worker's socket. The
  // stream's client leaves, its job is cancelled, the cancel goes unacknowledged for 2 s: the
  // worker is killed and the waiting request, which sent its client nothing, runs again on
  // the new worker (whose device has run no chain yet: 2 tokens fit before its 7th).
  const npu = await serve(['--model', `tiny=${work}/tiny`, '--npu-percent', '100', '--hang-timeout', '2', '--max-active', '2',
                           '--npu-device', 'fake:xdna1,fault=hang@6'], {}, withFaults);
  try {
    const pidBefore = spawnSync('pgrep', ['-P', String(npu.child.pid)], { encoding: 'utf8' }).stdout.trim();
    const controller = new AbortController();
    const stream = await fetch(`${npu.base}/v1/completions`, {
      method: 'POST', signal: controller.signal,
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: 'tiny', prompt: prompts[0], max_tokens: 16, temperature: 0, stream: true }) });
    // Read until no chunk came for a second: the step hangs.
    const reader = stream.body.getReader();
    let received = '';
    for (;;) {
      const next = await Promise.race([reader.read(), new Promise((r) => setTimeout(() => r(null), 1000))]);
      if (next === null) break;
      assert.ok(!next.done, `the stream ended instead of hanging: ${received}`);
      received += new TextDecoder().decode(next.value);
    }
    assert.match(received, /"text"/);
    const waiting = fetch(`${npu.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: 'tiny', prompt: prompts[0], max_tokens: 2, temperature: 0 }) });
    await new Promise((r) => setTimeout(r, 300));  // let it reach the worker's socket
    const t0 = Date.now();
    controller.abort();
    const r = await waiting;
    const body = await r.json();
    console.log(`note: the waiting request answered ${r.status} ${Date.now() - t0} ms after the hung stream's client left (--hang-timeout 2)`);
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.equal(body.choices[0].finish_reason, 'length');
    assert.ok(expected[0].startsWith(body.choices[0].text), `${body.choices[0].text} vs ${expected[0]}`);
    assert.match(npu.log.text, /did not stop job \d+ within --hang-timeout 2 s of its cancel: a step is hung; killing the worker/);
    assert.match(npu.log.text, /running it again on the restarted worker/);
    const ready = await (await fetch(`${npu.base}/ready`)).json();
    assert.equal(ready.x_tessera_stats.worker_restarts, 1, JSON.stringify(ready));
    const pidAfter = spawnSync('pgrep', ['-P', String(npu.child.pid)], { encoding: 'utf8' }).stdout.trim();
    assert.notEqual(pidAfter, pidBefore);
  } finally {
    npu.child.kill('SIGTERM');
  }
});

await check('fake xdna2 with 2 MiB: models take turns, one that cannot fit is a 503 saying so', async () => {
  const npu = await serve([...models, '--model', `slow=${work}/slow`, '--max-loaded-models', '3',
                           '--npu-percent', '100', '--npu-device', 'fake:xdna2,memory-mib=2']);
  try {
    // tiny and qwen fit the fake NPU one at a time: each closes the other, keeping its KV.
    assert.deepEqual(await answers(npu), expected);
    assert.match(npu.log.text, /closed on the NPU to make room/);
    // slow's 38 MiB never fit: 503 engine_busy with Retry-After, naming the NPU.
    const r = await fetch(`${npu.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: 'slow', prompt: 'hi', max_tokens: 2 }) });
    const body = await r.json();
    assert.equal(r.status, 503, JSON.stringify(body));
    assert.ok(Number(r.headers.get('retry-after')) >= 1);
    assert.equal(body.error.code, 'engine_busy');
    assert.match(body.error.message, /'slow' does not fit: the NPU cannot hold/);
    // The server keeps serving the models that fit.
    assert.deepEqual(await answers(npu), expected);
    const ready = await (await fetch(`${npu.base}/ready`)).json();
    assert.equal(ready.status, 'ready');
    assert.equal(ready.x_tessera_stats.worker_restarts, 0);
  } finally {
    npu.child.kill('SIGTERM');
  }
});

await check('bad NPU flags stop serve before it listens (exit 2, the flag named)', async () => {
  const run = (args, env = {}) => spawnSync(tessera, ['serve', '--port', '0', ...models, ...args],
                                            { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60000 });
  const both = run(['--npu-layers', '1', '--npu-percent', '50', '--npu-device', 'fake:xdna1']);
  assert.equal(both.status, 2, both.stderr);
  assert.match(both.stderr, /--npu-layers or --npu-percent, not both/);
  const many = run(['--npu-layers', '99', '--npu-device', 'fake:xdna1']);
  assert.equal(many.status, 2, many.stderr);
  assert.match(many.stderr, /places more than the model's/);
  const mixed = run(['--npu-layers', '1', '--placement', 'reference', '--npu-device', 'fake:xdna1']);
  assert.equal(mixed.status, 2, mixed.stderr);
  const fake = run(['--npu-layers', '1', '--npu-device', 'fake:xdna9']);
  assert.equal(fake.status, 2, fake.stderr);
  assert.match(fake.stderr, /--npu-device: unknown NPU generation 'xdna9'/);
  const option = run(['--npu-layers', '1', '--npu-device', 'fake:xdna1,speed=9']);
  assert.equal(option.status, 2, option.stderr);
  assert.match(option.stderr, /unknown fake device option 'speed=9'/);
  // Fault injection is a test program's option, not tessera's.
  const fault = run(['--npu-layers', '1', '--npu-device', 'fake:xdna2,fault=timeout@12']);
  assert.equal(fault.status, 2, fault.stderr);
  assert.match(fault.stderr, /unknown fake device option 'fault=timeout@12'/);
  const device = run(['--npu-layers', '1', '--npu-device', 'npu0']);
  assert.equal(device.status, 2, device.stderr);
  assert.match(device.stderr, /expected xrt, fake:xdna1 or fake:xdna2/);
});

await check('no NPU here: serve runs doctor, says so and refuses NPU layers', async () => {
  // This machine has no NPU (and Debian's XRT 2.13 cannot drive one). For doctor that is
  // information (exit 0, the CPU backend runs); asking serve for NPU layers is still refused.
  const r = spawnSync(tessera, ['serve', '--port', '0', ...models, '--npu-layers', '1'],
                      { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /npu_present\s+info\s+no NPU found/);
  assert.match(r.stderr, /no supported NPU on this machine .* serve without --npu-layers/);
  assert.doesNotMatch(r.stdout, /listening on/);
});

console.log(`${failed() ? 'some' : 'all'} npu tests done; ${failed()} failed`);
process.exit(failed() ? 1 : 0);

// End-to-end test of GET /metrics (issue #17, item 2): scraped before and after a known sequence
// of requests, each counter moves by exactly the expected amount, and the text parses with the
// official Prometheus client's text-format parser (Debian's python3-prometheus-client,
// prometheus_client.parser, which refuses malformed exposition). The key is needed unless the
// server runs with --metrics-public.
//   node metrics_e2e_test.mjs TESSERA E2E_WORK_DIR   (E2E_WORK_DIR holds tiny/)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { checker, serveReady } from './harness.mjs';

const [tessera, work] = process.argv.slice(2);
const KEY = 'metrics-key';
const { check, failed } = checker();

function serve(extra = []) {
  return serveReady(tessera, ['--model', `tiny=${work}/tiny`, '--rate-limit', '0', ...extra],
                    { TESSERA_API_KEY: KEY });
}

const auth = { Authorization: `Bearer ${KEY}` };
// Every sample of the exposition as prometheus_client.parser reads it: [{family, type, name,
// labels, value}]; a parse error fails the test.
const PARSE = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        out.append({"family": f.name, "type": f.type, "name": s.name, "labels": s.labels, "value": s.value})
print(json.dumps(out))
`;
function parse(text) {
  const r = spawnSync('/usr/bin/python3', ['-c', PARSE], { input: text, encoding: 'utf8' });
  assert.equal(r.status, 0, `prometheus_client could not parse /metrics: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
async function scrape(base, headers = auth) {
  const r = await fetch(`${base}/metrics`, { headers });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  return parse(await r.text());
}
// The value of sample `name` whose labels include `labels` (0 when absent).
function value(samples, name, labels = {}) {
  const m = samples.find((s) => s.name === name &&
                         Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return m ? m.value : 0;
}
async function post(base, path, body) {
  const r = await fetch(`${base}${path}`, {
    method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

const srv = await serve();
try {
  await check('without the key /metrics is 401', async () => {
    const r = await fetch(`${srv.base}/metrics`);
    assert.equal(r.status, 401);
  });
  await check('counters move by exactly the requests made', async () => {
    const before = await scrape(srv.base);
    const a = await post(srv.base, '/v1/completions', { model: 'tiny', prompt: 'Once upon', max_tokens: 4 });
    const b = await post(srv.base, '/v1/completions', { model: 'tiny', prompt: 'The river ran', max_tokens: 6 });
    const c = await post(srv.base, '/v1/chat/completions', { model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 });
    const bad = await post(srv.base, '/v1/completions', { model: 'tiny', prompt: 'x', bogus_field: 1 });
    const missing = await fetch(`${srv.base}/no/such/path`, { headers: auth });
    assert.deepEqual([a.status, b.status, c.status, bad.status, missing.status], [200, 200, 200, 400, 404]);
    const after = await scrape(srv.base);
    const d = (name, labels) => value(after, name, labels) - value(before, name, labels);
    assert.equal(d('tessera_http_requests_total', { route: '/v1/completions', status: '200' }), 2);
    assert.equal(d('tessera_http_requests_total', { route: '/v1/completions', status: '400' }), 1);
    assert.equal(d('tessera_http_requests_total', { route: '/v1/chat/completions', status: '200' }), 1);
    assert.equal(d('tessera_http_requests_total', { route: 'other', status: '404' }), 1);
    assert.equal(d('tessera_http_requests_total', { route: '/metrics', status: '200' }), 1);  // `before`
    const used = [a, b, c].map((r) => r.body.usage);
    assert.equal(d('tessera_prompt_tokens_total', { model: 'tiny' }),
                 used.reduce((s, u) => s + u.prompt_tokens, 0));
    assert.equal(d('tessera_completion_tokens_total', { model: 'tiny' }),
                 used.reduce((s, u) => s + u.completion_tokens, 0));
    assert.equal(d('tessera_time_to_first_token_seconds_count', { model: 'tiny' }), 3);
    assert.equal(d('tessera_time_per_output_token_seconds_count', { model: 'tiny' }),
                 used.filter((u) => u.completion_tokens > 1).length);
    assert.equal(d('tessera_request_duration_seconds_count', { route: '/v1/completions' }), 3);
    assert.ok(d('tessera_request_duration_seconds_sum', { route: '/v1/completions' }) > 0);
    // Histogram buckets are cumulative and end at the count.
    const buckets = after.filter((s) => s.name === 'tessera_request_duration_seconds_bucket' &&
                                        s.labels.route === '/v1/completions');
    assert.equal(buckets.length, 13);
    for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i].value >= buckets[i - 1].value);
    assert.equal(buckets[12].labels.le, '+Inf');
    assert.equal(buckets[12].value, value(after, 'tessera_request_duration_seconds_count', { route: '/v1/completions' }));
    assert.equal(after.find((s) => s.name === 'tessera_http_requests_total').type, 'counter');
    // Gauges and info.
    assert.equal(value(after, 'tessera_requests_active'), 0);
    assert.equal(value(after, 'tessera_queue_depth'), 0);
    assert.equal(value(after, 'tessera_worker_ready'), 1);
    assert.equal(value(after, 'tessera_worker_restarts_total'), 0);
    assert.equal(value(after, 'tessera_model_info', { model: 'tiny', placement: 'layers 0-1 + head -> cpu#0' }), 1);
    assert.ok(value(after, 'tessera_process_resident_memory_bytes', { process: 'http' }) > 1 << 20);
    assert.ok(value(after, 'tessera_process_resident_memory_bytes', { process: 'worker' }) > 1 << 20);
    // The scheduler gauges are the model's state when its last job (c) ended, as its stats said.
    const sched = c.body.x_tessera_stats.slots;
    assert.ok(sched.kv_blocks > 0, JSON.stringify(sched));
    for (const [name, key] of [['tessera_slots', 'total'], ['tessera_slots_in_use', 'in_use'],
                               ['tessera_sequences_waiting', 'waiting'], ['tessera_kv_blocks', 'kv_blocks'],
                               ['tessera_kv_blocks_free', 'kv_blocks_free'],
                               ['tessera_kv_blocks_cached', 'kv_blocks_cached']]) {
      assert.ok(after.some((s) => s.name === name && s.labels.model === 'tiny'), `${name} missing`);
      assert.equal(value(after, name, { model: 'tiny' }), sched[key], name);
    }
  });
  await check('a killed worker: restarts move by exactly 1 and the new worker is measured', async () => {
    const before = await scrape(srv.base);
    // The worker is the server's only child (started by its monitor thread).
    const children = spawnSync('pgrep', ['-P', String(srv.child.pid)], { encoding: 'utf8' }).stdout
      .trim().split(/\s+/).filter(Boolean).map(Number);
    assert.equal(children.length, 1, `worker processes: ${children}`);
    process.kill(children[0], 'SIGKILL');
    // Bounded wait for the supervisor to notice and the new worker to warm up.
    const deadline = Date.now() + 60000;
    let after = before;
    while (Date.now() < deadline) {
      after = await scrape(srv.base);
      if (value(after, 'tessera_worker_restarts_total') > value(before, 'tessera_worker_restarts_total') &&
          value(after, 'tessera_worker_ready') === 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(value(after, 'tessera_worker_restarts_total') - value(before, 'tessera_worker_restarts_total'), 1);
    assert.equal(value(after, 'tessera_worker_ready'), 1);
    assert.ok(value(after, 'tessera_process_resident_memory_bytes', { process: 'worker' }) > 1 << 20);
    const r = await post(srv.base, '/v1/completions', { model: 'tiny', prompt: 'Once upon', max_tokens: 4 });
    assert.equal(r.status, 200);
  });
  await check('a client cannot grow the label set with made-up paths', async () => {
    for (let i = 0; i < 5; i++) await fetch(`${srv.base}/made/up/${i}`, { headers: auth });
    const m = await scrape(srv.base);
    const routes = new Set(m.filter((s) => s.name === 'tessera_http_requests_total').map((s) => s.labels.route));
    for (const r of routes) assert.ok(!r.startsWith('/made'), r);
  });
} finally {
  srv.child.kill('SIGTERM');
}

const open = await serve(['--metrics-public']);
try {
  await check('--metrics-public: scraped without the key; the API still needs it', async () => {
    const m = await scrape(open.base, {});
    assert.equal(value(m, 'tessera_worker_ready'), 1);
    const r = await fetch(`${open.base}/v1/models`);
    assert.equal(r.status, 401);
  });
} finally {
  open.child.kill('SIGTERM');
}

console.log(`${failed() ? 'some' : 'all'} metrics tests done; ${failed()} failed`);
process.exit(failed() ? 1 : 0);

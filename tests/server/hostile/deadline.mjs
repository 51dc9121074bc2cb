// Hostile-load group `deadline` (issue #43, item 3): a request past --request-timeout is
// answered 504 `timeout` (or an SSE error event) and only its job is cancelled. Three models
// are resident; a long completion on `slow`, streamed and not, and a 2,048-document rerank
// (the tiny model declared a reranker) hit a 3 s deadline while bystanders stream from
// `stories` back to back. The worker is not restarted (same pid,
// worker_restarts 0, /metrics restarts 0), every bystander ends with [DONE] and none sees
// worker_crashed, and `slow` answers again at once (its cancelled job left the worker).
// Then the bystanders of a crash: two non-streamed requests in a worker killed with SIGKILL
// both run again on the new worker and answer what they would have (200, the greedy text of
// a run without the kill); a request alone in a killed worker is its cause and gets 502.
// (A hung step, the worker killed past --hang-timeout and its bystander run again, needs a
// fault inside the worker: tests/server/js/npu_e2e_test.mjs, through tessera_with_npu_faults.)
import fs from 'node:fs';
import path from 'node:path';
import {
  API_KEY as key, check, childPids, contentChunks, delay, note, now, pollUntil, request, sseRequest,
  startServer,
} from '../js/hostile_http_lib.mjs';

const TIMEOUT_S = 3;

export default async function deadline(ctx) {
  const srv = await startServer(ctx, 'deadline', [
    '--model', `slow=${ctx.model('slow')}`, '--model', `stories=${ctx.stories}`,
    '--model', `rr=${ctx.model('tiny')}`, '--kind', 'rr=rerank',
    '--max-loaded-models', '3', '--max-active', '4', '--max-queued', '4',
    '--request-timeout', String(TIMEOUT_S), '--rate-limit', '100000',
  ], { readySeconds: 120 });
  // Load `stories` and `rr` beside the prewarmed `slow` before any clock starts.
  const warm = await request(srv.port, 'POST', '/v1/completions',
                             { key, body: { model: 'stories', prompt: 'Once', max_tokens: 2 } });
  const warmRerank = await request(srv.port, 'POST', '/v1/rerank',
                                   { key, body: { model: 'rr', query: 'mill', documents: ['a mill', 'a boat'] } });
  check('deadline: stories and rr answer before the test', warm.status === 200 && warmRerank.status === 200,
        `${warm.status} ${warm.text?.slice(0, 200)} / ${warmRerank.status} ${warmRerank.text?.slice(0, 200)}`);
  const workers = childPids(srv.pid);
  check('deadline: one worker process', workers.length === 1, `children ${workers}`);

  const long = (stream) => ({ model: 'slow', prompt: 'Once upon a time', max_tokens: 4000, temperature: 0, stream });
  const t0 = now();
  let wholeMs = 0;
  const whole = request(srv.port, 'POST', '/v1/completions', { key, body: long(false), timeoutMs: 60000 })
    .then((r) => { wholeMs = now() - t0; return r; });
  const streamed = sseRequest(srv.port, '/v1/completions', long(true), { key });
  // 2,048 documents of about 140 tokens (the tiny model's context is 256): ~196 KB.
  const documents = Array.from({ length: 2048 }, (_, i) => `the mill by the river grinds wheat number ${i} `.repeat(2));
  let rerankMs = 0;
  const rerank = request(srv.port, 'POST', '/v1/rerank', { key, body: { model: 'rr', query: 'where is the mill?', documents }, timeoutMs: 60000 })
    .then((r) => { rerankMs = now() - t0; return r; });

  // Bystander streams on the other model, one after another, until past the deadline. Short
  // ones: until the worker interleaves models by step time, `slow` slows them down, and each
  // has the same 3 s deadline.
  const bystanders = [];
  const bystanderMs = [];
  while (now() - t0 < (TIMEOUT_S + 1.5) * 1000) {
    const t = now();
    const s = sseRequest(srv.port, '/v1/completions',
                         { model: 'stories', prompt: 'Once upon a time', max_tokens: 12, stream: true }, { key });
    await s.until((x) => x.ended, 30000);
    bystanderMs.push(now() - t);
    bystanders.push(s);
  }
  const w = await whole;
  await streamed.until((x) => x.ended, 30000);
  const rr = await rerank;
  const streamErr = streamed.events.find((e) => e && e.error);

  note(`non-streamed slow job: ${w.status} ${w.json?.error?.code} after ${wholeMs} ms (--request-timeout ${TIMEOUT_S})`);
  check('deadline: the long non-streamed job gets 504 timeout', w.status === 504 && w.json?.error?.code === 'timeout',
        `${w.status} ${w.text?.slice(0, 300)}`);
  check('deadline: ... no sooner than its deadline, within 2 s after it',
        wholeMs >= TIMEOUT_S * 1000 - 50 && wholeMs < TIMEOUT_S * 1000 + 2000, `${wholeMs} ms`);
  note(`2,048-document rerank: ${rr.status} ${rr.json?.error?.code} after ${rerankMs} ms`);
  check('deadline: the 2,048-document rerank gets 504 timeout within 2 s after its deadline',
        rr.status === 504 && rr.json?.error?.code === 'timeout' && rerankMs < TIMEOUT_S * 1000 + 2000,
        `${rr.status} ${rr.text?.slice(0, 300)} after ${rerankMs} ms`);
  check('deadline: the long stream ends with an error event, code timeout, and no [DONE]',
        streamErr?.error?.code === 'timeout' && !streamed.events.includes('[DONE]'),
        streamErr ? JSON.stringify(streamErr.error) : `events ${streamed.events.length}`);
  note(`long stream: ${contentChunks(streamed.events).length} content chunks before its timeout event`);

  const complete = bystanders.filter((s) => s.status === 200 && s.events.includes('[DONE]') &&
                                           !s.events.some((e) => e && e.error));
  const crashed = bystanders.filter((s) => s.events.some((e) => e?.error?.code === 'worker_crashed'));
  note(`bystander streams on stories across the deadline: ${bystanders.length}, complete ${complete.length}, ` +
       `longest ${Math.max(...bystanderMs)} ms (12 tokens each; noisy: 2 shared cores)`);
  const incomplete = bystanders.filter((s) => !complete.includes(s));
  for (const [i, s] of incomplete.entries()) fs.writeFileSync(path.join(ctx.work, `incomplete-${i}.sse`), s.raw);
  const codes = incomplete.map((s) => s.events.find((e) => e && e.error)?.error?.code ?? `${s.status} ${s.error}`);
  check('deadline: every bystander stream completes with [DONE]', bystanders.length > 0 && complete.length === bystanders.length,
        `${complete.length}/${bystanders.length}; the others ended with ${codes.join(', ')} (streams in ${ctx.work})`);
  check('deadline: no bystander sees worker_crashed', crashed.length === 0, `${crashed.length}`);

  // The worker lives on: same process, no restart.
  check('deadline: the same worker process after both deadlines', JSON.stringify(childPids(srv.pid)) === JSON.stringify(workers),
        `before ${workers}, after ${childPids(srv.pid)}`);
  const ready = await request(srv.port, 'GET', '/ready', { key });
  check('deadline: /ready 200 with worker_restarts 0', ready.status === 200 && ready.json?.x_tessera_stats?.worker_restarts === 0,
        `${ready.status} ${ready.text?.slice(0, 300)}`);
  const metrics = await request(srv.port, 'GET', '/metrics', { key });
  check('deadline: tessera_worker_restarts_total 0', /^tessera_worker_restarts_total 0$/m.test(metrics.text || ''),
        (metrics.text || '').split('\n').find((l) => l.startsWith('tessera_worker_restarts_total')));

  // The cancelled jobs left the worker: slow and rr answer short requests within their
  // deadline, and no kill followed (the watchdog's line would say so).
  const t1 = now();
  const after = await pollUntil(async () => {
    const r = await request(srv.port, 'POST', '/v1/completions',
                            { key, body: { model: 'slow', prompt: 'Once', max_tokens: 2, temperature: 0 } });
    return r.status === 200 ? r : null;
  }, 20000, 100);
  note(`slow after the deadlines: ${after ? `200 in ${now() - t1} ms` : 'no 200 within 20 s'}`);
  check('deadline: slow answers again after its cancelled jobs', !!after);
  const rrAfter = await request(srv.port, 'POST', '/v1/rerank', { key, body: { model: 'rr', query: 'mill', documents: ['a mill', 'a boat'] } });
  check('deadline: rr answers again after its cancelled rerank', rrAfter.status === 200, `${rrAfter.status} ${rrAfter.text?.slice(0, 200)}`);
  check('deadline: the server never killed the worker', !/killing the worker|inference worker killed/.test(srv.err),
        srv.err.split('\n').filter((l) => /kill/.test(l)).join(' | '));

  await crashBystanders(ctx);
}

async function crashBystanders(ctx) {
  const srv = await startServer(ctx, 'deadline-crash', [
    '--model', `slow=${ctx.model('slow')}`, '--max-active', '2', '--rate-limit', '100000',
  ], { readySeconds: 120 });
  const prompts = ['Once upon a time', 'The river'];
  const complete = (prompt) => request(srv.port, 'POST', '/v1/completions', {
    key, body: { model: 'slow', prompt, max_tokens: 48, temperature: 0 }, timeoutMs: 90000 });
  const running = (n) => pollUntil(async () => (await request(srv.port, 'GET', '/ready')).json?.active === n, 10000, 20);
  const killWorker = () => {
    const [worker] = childPids(srv.pid);
    if (worker) process.kill(worker, 'SIGKILL');
    return worker;
  };
  const reference = await Promise.all(prompts.map(complete));
  check('crash: the reference answers', reference.every((r) => r.status === 200), reference.map((r) => r.status).join());

  // Two jobs in the worker; SIGKILL it while they generate.
  const pending = prompts.map(complete);
  check('crash: both requests are running', await running(2));
  await delay(300);  // submitted and generating (48 tokens take seconds on `slow`)
  const killed = killWorker();
  const answers = await Promise.all(pending);
  note(`crash bystanders: ${answers.map((r) => `${r.status} in ${r.ms} ms`).join(', ')} (worker ${killed} killed)`);
  check('crash: both bystanders of the kill answer 200', answers.every((r) => r.status === 200),
        answers.map((r) => `${r.status} ${r.text?.slice(0, 200)}`).join(' | '));
  check('crash: ... with the text of a run without the kill (greedy)',
        answers.every((r, i) => r.json?.choices?.[0]?.text === reference[i].json?.choices?.[0]?.text),
        answers.map((r, i) => `${JSON.stringify(r.json?.choices?.[0]?.text)} vs ${JSON.stringify(reference[i].json?.choices?.[0]?.text)}`).join(' | '));
  check('crash: ... each ran again once (the server says so)',
        (srv.err.match(/running it again on the restarted worker/g) || []).length === 2, srv.err.slice(-1500));

  // Alone in the worker when it dies, a request is taken for its cause: 502, not run again.
  const lone = complete(prompts[0]);
  check('crash: a lone request is running', await running(1));
  await delay(300);
  killWorker();
  const r = await lone;
  check('crash: the request alone in a killed worker gets 502 worker_crashed', r.status === 502 && r.json?.error?.code === 'worker_crashed',
        `${r.status} ${r.text?.slice(0, 300)}`);
  check('crash: ... and did not run again', (srv.err.match(/running it again on the restarted worker/g) || []).length === 2);
}

// fair_models (issue #43, item 3): one model's big jobs do not stall another model's stream.
// Two models resident in one worker on the cpu backend: `bulk`, the tiny test model with its
// context raised to 8192 (RoPE: config.json only, the weights are the same) and declared a
// reranker (a reranker also completes), and stories260k (`st`) streaming. Measured at the
// client, in microseconds: the gaps between st's stream events alone (idle), then while a
// 2,048-document rerank (~870 KB) and a 4,000-token completion run on bulk (loaded).
// Asserted: p99(loaded gaps) < 3 x p99(idle gaps) (p99 of both, each over three 400-token
// streams), both big jobs still running when the measurement ends, and that a client hanging
// up frees its job promptly: the time from the hang-up until /ready's `active` drops (the
// server holds the admission place until the worker has answered the Cancel).
// On a shared machine the figures are noisy (both p99s include the machine's own hiccups): a
// second round of both measurements is run when the first misses the bound.
import fs from 'node:fs';
import path from 'node:path';
import { API_KEY, check, note, pollUntil, request, sseRequest, startServer } from '../js/hostile_http_lib.mjs';

const STREAM_TOKENS = 400;
const STREAMS = 3;
const DOCUMENTS = 2048;

const nowUs = () => Number(process.hrtime.bigint() / 1000n);
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN;
};
const ms = (us) => (us / 1000).toFixed(2);

// The tiny model with a longer context, so a 4,000-token completion fits.
function longContextCopy(from, to) {
  fs.mkdirSync(to, { recursive: true });
  for (const f of fs.readdirSync(from)) {
    if (fs.statSync(path.join(from, f)).isFile()) fs.copyFileSync(path.join(from, f), path.join(to, f));
  }
  const config = JSON.parse(fs.readFileSync(path.join(to, 'config.json'), 'utf8'));
  config.max_position_embeddings = 8192;
  fs.writeFileSync(path.join(to, 'config.json'), JSON.stringify(config, null, 2));
}

// The gaps (us) between st's stream events over `streams` streams of STREAM_TOKENS tokens.
async function streamGaps(port, streams) {
  const gaps = [];
  let events = 0;
  for (let k = 0; k < streams; k++) {
    const s = sseRequest(port, '/v1/completions', {
      model: 'st', prompt: 'Once upon a time', max_tokens: STREAM_TOKENS, temperature: 0, stream: true,
    }, { key: API_KEY });
    let seen = 0;
    let last = 0;
    s.on('change', () => {
      if (s.events.length === seen) return;
      seen = s.events.length;
      const t = nowUs();
      if (last) gaps.push(t - last);
      last = t;
    });
    await s.until(() => false, 30000);
    if (s.status !== 200) throw new Error(`the st stream answered ${s.status}: ${s.raw.slice(0, 200)}`);
    events += seen;
  }
  return { gaps, events };
}

async function active(port) {
  const r = await request(port, 'GET', '/ready', { timeoutMs: 2000 });
  return r.json ? r.json.active : -1;
}

// Hangs up `client` and returns how long (ms) until /ready's active count is `expect`.
async function hangUp(port, client, expect) {
  const t0 = nowUs();
  client.destroy();
  const freed = await pollUntil(async () => (await active(port)) === expect, 10000, 10);
  return freed ? (nowUs() - t0) / 1000 : Infinity;
}

export default async function (ctx) {
  const long = path.join(ctx.work, 'long');
  longContextCopy(ctx.model('tiny'), long);
  const srv = await startServer(ctx, 'fair_models', [
    '--model', `bulk=${long}`, '--kind', 'bulk=rerank', '--model', `st=${ctx.stories}`,
    '--max-loaded-models', '2', '--parallel', '4', '--max-active', '8', '--rate-limit', '0',
    '--placement', 'cpu']);
  const port = srv.port;
  for (const model of ['st', 'bulk']) {  // both loaded and warm before anything is measured
    const r = await request(port, 'POST', '/v1/completions', { key: API_KEY, body: { model, prompt: 'warm', max_tokens: 2 } });
    if (r.status !== 200) throw new Error(`warming ${model}: ${r.status} ${r.text}`);
  }

  const doc = (i) => `Document ${i}: ${'the river moved slowly past the old mill and the boats waited there '.repeat(6)}`;
  const rerankBody = { model: 'bulk', query: 'where is the mill?', documents: Array.from({ length: DOCUMENTS }, (_, i) => doc(i)) };
  note(`rerank body: ${DOCUMENTS} documents, ${JSON.stringify(rerankBody).length} bytes`);

  // One round: st alone, then st beside the two big jobs, then both clients hang up.
  async function round(n) {
    const idle = await streamGaps(port, STREAMS);
    const idleP99 = pct(idle.gaps, 0.99);
    note(`round ${n}: st alone: ${idle.events} events, gap median ${ms(pct(idle.gaps, 0.5))} ms, p99 ${ms(idleP99)} ms, max ${ms(Math.max(...idle.gaps))} ms`);
    const rerank = sseRequest(port, '/v1/rerank', rerankBody, { key: API_KEY });
    const completion = sseRequest(port, '/v1/completions', { model: 'bulk', prompt: 'Once upon a time', max_tokens: 4000, temperature: 0 }, { key: API_KEY });
    const both = await pollUntil(async () => (await active(port)) === 2, 10000, 10);
    check(`fair_models: round ${n}: the rerank and the completion are both admitted`, both);
    const loadedT0 = nowUs();
    const loaded = await streamGaps(port, STREAMS);
    const loadedS = (nowUs() - loadedT0) / 1e6;
    const loadedP99 = pct(loaded.gaps, 0.99);
    note(`round ${n}: st beside the rerank and the completion: ${loaded.events} events in ${loadedS.toFixed(1)} s, gap median ${ms(pct(loaded.gaps, 0.5))} ms, p99 ${ms(loadedP99)} ms, max ${ms(Math.max(...loaded.gaps))} ms`);
    note(`round ${n}: p99 loaded / p99 idle = ${(loadedP99 / idleP99).toFixed(2)} (bound 3)`);
    check(`fair_models: round ${n}: the rerank and the completion were still running while st streamed`,
          !rerank.ended && !completion.ended, `rerank ended ${rerank.ended} (${rerank.status}), completion ended ${completion.ended} (${completion.status})`);
    // Hang-ups: the worker stops each job at its next step; the server frees the place then.
    const rerankFreedMs = await hangUp(port, rerank, 1);
    note(`round ${n}: rerank hang-up: its place was freed after ${rerankFreedMs.toFixed(0)} ms`);
    check(`fair_models: round ${n}: a rerank client hanging up frees its job within 1 s`, rerankFreedMs < 1000, `${rerankFreedMs} ms`);
    const completionFreedMs = await hangUp(port, completion, 0);
    note(`round ${n}: completion hang-up: its place was freed after ${completionFreedMs.toFixed(0)} ms`);
    check(`fair_models: round ${n}: a completion client hanging up frees its job within 1 s`, completionFreedMs < 1000, `${completionFreedMs} ms`);
    return { idleP99, loadedP99 };
  }

  // A machine shared with other work stalls single steps for ~10 ms now and then, in either
  // phase; a second round is run only when the first misses the bound, and both are noted.
  let r = await round(1);
  if (!(r.loadedP99 < 3 * r.idleP99)) r = await round(2);
  check('fair_models: st inter-token gap p99 under load < 3x its idle p99', r.loadedP99 < 3 * r.idleP99,
        `idle p99 ${ms(r.idleP99)} ms, loaded p99 ${ms(r.loadedP99)} ms`);

  const after = await streamGaps(port, 1);
  note(`st after the hang-ups: gap median ${ms(pct(after.gaps, 0.5))} ms, p99 ${ms(pct(after.gaps, 0.99))} ms`);
}

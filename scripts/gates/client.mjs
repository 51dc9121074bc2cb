// The release gates' HTTP client (node >= 18, built-ins only): reference answers, then
// concurrent clients that keep sending requests of several kinds and compare every answer
// with its kind's reference.
//   node client.mjs refs SPEC.json   -> {"kind": "text", ...} (exit 1 unless every kind is 200)
//   node client.mjs run SPEC.json    -> a JSON summary on stdout (the gate judges it)
// SPEC: {"base", "kinds": [{"name", "path", "body" (a stream when body.stream)}], "refs"?, "clients"?,
//        "requests"? (total), "loads_log"?, "loads_target"? (stop once the worker logged that
//        many loads), "deadline_s"}
import { readFileSync } from 'node:fs';

const [mode, specFile] = process.argv.slice(2);
const spec = JSON.parse(readFileSync(specFile, 'utf8'));

// The text of a choice: completions carry `text`, chat `message.content`; a stream is the
// concatenation of its chunks' `text` / `delta.content` and must end with [DONE].
function answerText(kind, status, raw) {
  if (status !== 200) return { text: null };
  if (!kind.body.stream) {
    const d = JSON.parse(raw);
    const c = d.choices[0];
    const loadMs = d.x_tessera_stats ? d.x_tessera_stats.model_load_ms : null;
    return { text: c.text !== undefined ? c.text : c.message.content, loadMs };
  }
  let text = '', done = false, loadMs = null, error = null;
  for (const event of raw.split('\n\n')) {
    const line = event.trim();
    if (!line.startsWith('data: ')) continue;
    const data = line.slice(6);
    if (data === '[DONE]') { done = true; continue; }
    const d = JSON.parse(data);
    if (d.error) { error = d.error; continue; }
    for (const c of d.choices || []) text += c.text !== undefined ? c.text : (c.delta.content || '');
    if (d.x_tessera_stats && d.x_tessera_stats.model_load_ms !== undefined) loadMs = d.x_tessera_stats.model_load_ms;
  }
  if (error || !done) return { text: null, streamError: error ? JSON.stringify(error) : 'no [DONE]' };
  return { text, loadMs };
}

async function ask(kind) {
  const res = await fetch(spec.base + kind.path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(kind.body),
    signal: AbortSignal.timeout(60000),
  });
  const raw = await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), raw, ...answerText(kind, res.status, raw) };
}

// Reading the server's log is cheap but not free: at most every 100 ms.
let loadsCache = { at: 0, n: 0 };
function loadsLogged(fresh = false) {
  if (!fresh && Date.now() - loadsCache.at < 100) return loadsCache.n;
  const log = readFileSync(spec.loads_log, 'utf8');
  loadsCache = { at: Date.now(), n: (log.match(/^tessera worker: model '.*' loaded and warmed/gm) || []).length };
  return loadsCache.n;
}

async function refs() {
  const out = {};
  for (const kind of spec.kinds) {
    const r = await ask(kind);
    if (r.text === null) {
      console.error(`reference for ${kind.name}: status ${r.status} ${r.streamError || ''} ${r.raw.slice(0, 300)}`);
      process.exit(1);
    }
    out[kind.name] = r.text;
  }
  console.log(JSON.stringify(out));
}

async function run() {
  const deadline = Date.now() + spec.deadline_s * 1000;
  const s = {
    requests: 0, ok: 0, mismatches: 0, status: {}, refused_with_retry_after: 0, bad: [],
    load_waits: 0, per_kind: {}, deadline_hit: false, loads_start: 0, loads_end: 0, seconds: 0,
  };
  const t0 = Date.now();
  if (spec.loads_log) s.loads_start = loadsLogged(true);
  let started = 0;
  const enough = () => {
    if (spec.requests !== undefined && started >= spec.requests) return true;
    if (spec.loads_target !== undefined && loadsLogged() - s.loads_start >= spec.loads_target) return true;
    if (Date.now() > deadline) { s.deadline_hit = true; return true; }
    return false;
  };
  const note = (what) => { if (s.bad.length < 20) s.bad.push(what); };
  async function client(i) {
    for (let j = 0; !enough(); j++) {
      started++;
      // Client i starts at kind i, so concurrent clients ask for different models at once.
      const kind = spec.kinds[(i + j) % spec.kinds.length];
      let r;
      try {
        r = await ask(kind);
      } catch (e) {
        s.requests++; s.status.error = (s.status.error || 0) + 1; note(`${kind.name}: ${e}`);
        continue;
      }
      s.requests++;
      s.status[r.status] = (s.status[r.status] || 0) + 1;
      const pk = (s.per_kind[kind.name] ||= { ok: 0, mismatches: 0 });
      if (r.status === 200) {
        if (r.text === null) { note(`${kind.name}: stream ended badly: ${r.streamError}`); continue; }
        if (r.loadMs > 0) s.load_waits++;
        if (r.text === spec.refs[kind.name]) { s.ok++; pk.ok++; }
        else { s.mismatches++; pk.mismatches++; note(`${kind.name}: got ${JSON.stringify(r.text)}`); }
      } else if ((r.status === 429 || r.status === 503) && r.retryAfter !== null) {
        s.refused_with_retry_after++;  // a documented refusal: the client may retry later
      } else {
        note(`${kind.name}: status ${r.status} retry-after ${r.retryAfter}: ${r.raw.slice(0, 200)}`);
      }
    }
  }
  await Promise.all(Array.from({ length: spec.clients || 1 }, (_, i) => client(i)));
  if (spec.loads_log) s.loads_end = loadsLogged(true);
  s.seconds = (Date.now() - t0) / 1000;
  console.log(JSON.stringify(s));
}

if (mode === 'refs') await refs();
else if (mode === 'run') await run();
else { console.error('usage: client.mjs refs|run SPEC.json'); process.exit(2); }

// Huge JSON objects behind a valid key (issue #43, finding 1): an 870 KB body holding one
// object of 80,000 keys cost 22.5 s of CPU before its 400 while nlohmann's ordered parser
// looked up every key linearly, so eight of them stalled a normal completion past its
// deadline. Now every body parses in time linear in its size and an object past 4,096 members
// is refused as soon as the parser reaches it.
// Rounds of 8 such bodies in parallel (in an unknown field, inside `messages`, in a schema and
// on /v1/embeddings) must each be answered 400 naming the limit within 100 ms of being sent,
// while a client keeps sending normal completions whose latency (p99) must stay near its idle
// value.
import { API_KEY, check, note, request, startServer } from '../js/hostile_http_lib.mjs';

const ROUNDS = 8;
const PARALLEL = 8;
const NORMAL_IDLE = 20;

// One object of n keys, about 870 KB for 80,000.
function wideObject(n) {
  const parts = [];
  for (let i = 0; i < n; i++) parts.push(`"k${String(i).padStart(5, '0')}":0`);
  return `{${parts.join(',')}}`;
}

const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

export default async function run(ctx) {
  const srv = await startServer(ctx, 'json_bodies', [
    '--model', `stories=${ctx.stories}`, '--model', `embed=${ctx.model('embed')}`,
    '--max-loaded-models', '2', '--max-active', '4', '--max-queued', '16', '--rate-limit', '0',
  ]);
  const wide = wideObject(80000);
  const bodies = [
    ['/v1/completions', `{"model":"stories","prompt":"Once upon a time","max_tokens":4,"x_unknown":${wide}}`],
    ['/v1/chat/completions', `{"model":"stories","messages":[{"role":"user","content":"hi","extra":${wide}}]}`],
    ['/v1/completions', `{"model":"stories","prompt":"Once","response_format":{"type":"json_schema",` +
        `"json_schema":{"name":"x","schema":{"type":"object","properties":${wide}}}}}`],
    ['/v1/embeddings', `{"model":"embed","input":"hello","x_unknown":${wide}}`],
  ];
  note(`hostile body sizes: ${bodies.map(([, b]) => b.length).join(', ')} bytes`);
  const normal = { model: 'stories', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 };
  const completion = () => request(srv.port, 'POST', '/v1/completions', { key: API_KEY, body: normal });

  // Idle latency of the normal completion first.
  const idle = [];
  for (let i = 0; i < NORMAL_IDLE; i++) {
    const r = await completion();
    if (r.status !== 200) { check('idle completion answers 200', false, `${r.status} ${r.error ?? r.text}`); return; }
    idle.push(r.ms);
  }

  // Rounds of 8 hostile bodies in parallel while the normal client keeps going.
  const refusals = [];
  const loaded = [];
  let badRefusal = null;
  let stop = false;
  const normalClient = (async () => {
    while (!stop) {
      const r = await completion();
      if (r.status !== 200) { badRefusal ??= `normal completion under load: ${r.status} ${r.error ?? r.text}`; break; }
      loaded.push(r.ms);
    }
  })();
  for (let round = 0; round < ROUNDS; round++) {
    const sent = [];
    for (let i = 0; i < PARALLEL; i++) {
      const [urlPath, body] = bodies[(round * PARALLEL + i) % bodies.length];
      sent.push(request(srv.port, 'POST', urlPath, { key: API_KEY, body, headers: { 'Content-Type': 'application/json' } }));
    }
    for (const r of await Promise.all(sent)) {
      refusals.push(r.ms);
      const message = r.json?.error?.message ?? '';
      if (r.status !== 400 || !/more than 4096 members/.test(message)) {
        badRefusal ??= `hostile body answered ${r.status} ${r.error ?? r.text.slice(0, 200)}`;
      }
    }
  }
  stop = true;
  await normalClient;
  check('every 80,000-key body is refused 400 naming the member limit', badRefusal === null, badRefusal);
  const worst = Math.max(...refusals);
  note(`refusal of ${refusals.length} 80,000-key bodies (${PARALLEL} in parallel): p50 ${percentile(refusals, 50)} ms, ` +
       `p99 ${percentile(refusals, 99)} ms, max ${worst} ms`);
  check('each is refused within 100 ms of being sent', worst < 100, `slowest ${worst} ms`);
  const idleP99 = percentile(idle, 99);
  const loadedP99 = loaded.length ? percentile(loaded, 99) : Infinity;
  note(`normal completion (8 tokens): idle p50 ${percentile(idle, 50)} ms p99 ${idleP99} ms; ` +
       `during the bodies (${loaded.length} requests) p50 ${percentile(loaded, 50)} ms p99 ${loadedP99} ms`);
  check('normal completions kept answering during the bodies', loaded.length >= ROUNDS, `${loaded.length} answered`);
  check('normal completion p99 during the bodies stays within 3x idle p99 + 50 ms',
        loadedP99 <= 3 * idleP99 + 50, `${loadedP99} ms vs idle ${idleP99} ms`);
}

// A burst past the admission queue (issue #43, item 2): 60 streams sent at once to a server
// with --max-active 4 --max-queued 4 on a model whose streams take a few seconds, while two
// requests already run (a free slot is when admission used to let every arrival in: /ready
// showed 62 held). Never more than 8 may be held (the 200s of the burst plus the two, and
// /ready's active + queued polled during the burst); every other one is refused 429
// queue_full with Retry-After within 100 ms of being sent; none hangs (every request ends
// within a bound).
import { API_KEY, Raw, check, delay, httpRequest, note, now, pollUntil, request, startServer } from '../js/hostile_http_lib.mjs';

const STREAMS = 60;
const HELD_MAX = 8;                // --max-active 4 + --max-queued 4
const RUNNING_BEFORE = 2;          // requests already running when the burst comes
const REFUSAL_BOUND_MS = 100;      // the bound for a refusal
const END_BOUND_MS = 45000;        // every request, admitted ones included, ends within this

const pct = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

export default async function burst(ctx) {
  const srv = await startServer(ctx, 'burst', [
    '--model', `slow=${ctx.model('slow')}`, '--max-active', '4', '--max-queued', '4',
    '--rate-limit', '0', '--max-connections-per-client', '1000']);
  // Warm the model so the burst meets a running server, not a load.
  const warm = await request(srv.port, 'POST', '/v1/completions',
    { key: API_KEY, body: { model: 'slow', prompt: 'warm', max_tokens: 2 }, timeoutMs: 60000 });
  check('burst: the model answers before the burst', warm.status === 200, JSON.stringify(warm).slice(0, 300));

  // Two requests running before the burst: two of the four slots busy, two free.
  const before = Array.from({ length: RUNNING_BEFORE }, () => request(srv.port, 'POST', '/v1/chat/completions', {
    key: API_KEY, body: { model: 'slow', messages: [{ role: 'user', content: 'go on' }], max_tokens: 200 },
    timeoutMs: END_BOUND_MS }));
  const running = await pollUntil(async () => (await request(srv.port, 'GET', '/ready')).json.active === RUNNING_BEFORE, 20000);
  check(`burst: ${RUNNING_BEFORE} requests run before the burst`, running);

  // A stream of a few seconds each: max_tokens on the slow model.
  const body = { model: 'slow', messages: [{ role: 'user', content: 'tell me a long story' }],
                 max_tokens: 64, stream: true };
  const wire = httpRequest('POST', '/v1/chat/completions', {
    key: API_KEY, body, headers: { 'Content-Type': 'application/json', Connection: 'close' } });
  // Connect first, then send every request in one go: the burst is the writes, not the handshakes.
  const clients = await Promise.all(Array.from({ length: STREAMS }, () => Raw.connect(srv.port)));

  let mostHeld = 0;
  let polls = 0;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const r = await request(srv.port, 'GET', '/ready', { timeoutMs: 5000 });
      if (r.json && typeof r.json.active === 'number') {
        polls++;
        mostHeld = Math.max(mostHeld, r.json.active + r.json.queued);
      }
      await delay(10);  // pacing the poller, not waiting for the server
    }
  })();

  const sentAt = [];
  for (const c of clients) {
    sentAt.push(now());
    c.write(wire);
  }
  const t0 = sentAt[0];
  const ended = await Promise.all(clients.map((c) => c.untilEnd(END_BOUND_MS)));
  polling = false;
  await poller;
  const beforeAnswers = await Promise.all(before);

  const refusalMs = [];
  let admitted = 0;
  let refusedWithRetry = 0;
  const other = [];
  let lastRefusalAt = 0;
  let firstStreamEndAt = Infinity;
  clients.forEach((c, i) => {
    const [res] = c.responses();
    if (!res) { other.push(`#${i}: no response (${c.error || 'ended'})`); return; }
    if (res.status === 200) {
      admitted++;
      firstStreamEndAt = Math.min(firstStreamEndAt, c.endedAt || Infinity);
    } else if (res.status === 429 && res.json && res.json.error && res.json.error.code === 'queue_full') {
      if (Number(res.header('retry-after')) >= 1) refusedWithRetry++;
      refusalMs.push(c.firstByteAt - sentAt[i]);
      lastRefusalAt = Math.max(lastRefusalAt, c.firstByteAt);
    } else {
      other.push(`#${i}: ${res.status} ${res.text.slice(0, 120)}`);
    }
  });
  for (const c of clients) c.destroy();

  check('burst: every request ended within the bound (none hangs)', ended.every(Boolean),
        `${ended.filter((e) => !e).length} of ${STREAMS} still open after ${END_BOUND_MS} ms`);
  check('burst: every answer is a 200 stream or a 429 queue_full', other.length === 0, other.slice(0, 5).join('; '));
  check(`burst: the ${RUNNING_BEFORE} requests running before it were answered 200`,
        beforeAnswers.every((r) => r.status === 200), beforeAnswers.map((r) => r.status || r.error).join(', '));
  check(`burst: at most ${HELD_MAX - RUNNING_BEFORE} of ${STREAMS} admitted (200) beside the ${RUNNING_BEFORE} running`,
        admitted <= HELD_MAX - RUNNING_BEFORE && admitted >= 1, `${admitted} admitted`);
  check(`burst: /ready never showed more than ${HELD_MAX} running + waiting`, polls > 0 && mostHeld <= HELD_MAX,
        `max ${mostHeld} over ${polls} polls`);
  check('burst: every refusal carries Retry-After', refusedWithRetry === refusalMs.length && refusalMs.length > 0,
        `${refusedWithRetry} of ${refusalMs.length}`);
  // The refusals all came while the admitted streams were still running: the count above is
  // of requests admitted at once, not over time.
  check('burst: every refusal came before the first admitted stream ended', lastRefusalAt < firstStreamEndAt,
        `last refusal +${lastRefusalAt - t0} ms, first stream end +${firstStreamEndAt - t0} ms`);
  const max = Math.max(...refusalMs);
  check(`burst: every refusal within ${REFUSAL_BOUND_MS} ms of its request being sent`, max <= REFUSAL_BOUND_MS,
        `max ${max} ms`);
  note(`burst: ${STREAMS} streams (--max-active 4 --max-queued 4, slow model, max_tokens 64, ${RUNNING_BEFORE} requests ` +
       `already running): ${admitted} admitted, ` +
       `${refusalMs.length} refused 429 queue_full; refusal latency p50 ${pct(refusalMs, 50)} ms, p99 ${pct(refusalMs, 99)} ms, ` +
       `max ${max} ms; /ready max active+queued ${mostHeld} over ${polls} polls; every request ended within ` +
       `${Math.max(...clients.map((c) => (c.endedAt || now()) - t0))} ms of the burst`);
}

// Readers that never read (issue #43, item 4): 8 clients open long streams on a server with
// --max-active 4 --max-queued 4 --stall-timeout 2 and never read a byte, so they hold every
// running and waiting place. Each must be cut within the stall timeout (+ a margin) of its
// output no longer flowing, measured on the client's own receive queue (/proc/net/tcp), and
// its place freed within a second of the cut (polled on /ready); a polite client that backs
// off on 429 gets its 200 meanwhile; the access log names the cut streams client_stalled.
import fs from 'node:fs';
import net from 'node:net';
import { API_KEY, accessLines, check, delay, httpRequest, note, now, pollUntil, request, startServer } from '../js/hostile_http_lib.mjs';

const CLIENTS = 8;
const STALL_S = 2;
// Past the stall timeout: once the client's receive buffer is full the server's writes still
// progress into the kernel's 16 KiB unsent share (8 or so tokens' chunks at the generation
// rate, ~0.3 s here, more on a loaded machine), then the 50 ms sampling here.
const CUT_MARGIN_MS = 1500;
const FREE_MARGIN_MS = 1000;   // from a cut to its place being free: the job's 50 ms check, the cancel
const BOUND_MS = 40000;        // every non-reader cut and the polite client answered within this

// Receive queue and state of the client end of loopback connections to `serverPort`, by the
// client's local port (IPv4 /proc/net/tcp: addresses and queues in hex).
function clientSockets(serverPort) {
  const out = new Map();
  for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 5) continue;
    const local = parseInt(f[1].split(':')[1], 16);
    const remote = parseInt(f[2].split(':')[1], 16);
    if (remote !== serverPort) continue;
    out.set(local, { state: f[3], rx: parseInt(f[4].split(':')[1], 16) });
  }
  return out;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export default async function nonreaders(ctx) {
  const srv = await startServer(ctx, 'nonreaders', [
    '--model', `qwen=${ctx.model('qwen')}`, '--parallel', '4', '--max-active', '4', '--max-queued', '4',
    '--stall-timeout', String(STALL_S), '--rate-limit', '0', '--max-connections-per-client', '1000']);
  const warm = await request(srv.port, 'POST', '/v1/completions',
    { key: API_KEY, body: { model: 'qwen', prompt: 'warm', max_tokens: 2 }, timeoutMs: 60000 });
  check('nonreaders: the model answers before the test', warm.status === 200, JSON.stringify(warm).slice(0, 300));

  // Long streams with large chunks (20 top logprobs a token on a 151,936-token vocabulary), so
  // the output outgrows what the kernel buffers for a client long before the stream would end.
  const wire = httpRequest('POST', '/v1/chat/completions', {
    key: API_KEY,
    headers: { 'Content-Type': 'application/json' },
    body: { model: 'qwen', messages: [{ role: 'user', content: 'write forever' }], max_tokens: 1900,
            stream: true, logprobs: true, top_logprobs: 20 } });
  const t0 = now();
  const readers = [];
  for (let i = 0; i < CLIENTS; i++) {
    const socket = await new Promise((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port: srv.port }, () => resolve(s));
      s.once('error', reject);
    });
    socket.pause();  // never read: what arrives stays in the kernel's receive queue
    socket.on('error', () => {});  // the reset of the cut
    socket.write(wire);
    readers.push({ socket, port: socket.localPort, rx: 0, lastGrowthAt: now(), cutAt: 0 });
  }

  // Sample the clients' receive queues and /ready until every non-reader is cut.
  const samples = [];  // {sentAt, doneAt, held}
  let polite = { firstAt: 0, inFlight: [], refused: 0, okAt: 0, status: 0 };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const sockets = clientSockets(srv.port);
      const t = now();
      for (const r of readers) {
        if (r.cutAt) continue;
        const s = sockets.get(r.port);
        if (!s || s.state !== '01') { r.cutAt = t; continue; }  // reset: gone, or no longer established
        if (s.rx > r.rx) { r.rx = s.rx; r.lastGrowthAt = t; }
      }
      await delay(50);  // the sampling period
    }
  })();
  const readyPoller = (async () => {
    while (sampling) {
      const sentAt = now();
      const res = await request(srv.port, 'GET', '/ready', { timeoutMs: 5000 });
      if (res.json && typeof res.json.active === 'number') {
        samples.push({ sentAt, doneAt: now(), held: res.json.active + res.json.queued });
      }
      await delay(100);  // the polling period
    }
  })();

  const allHeld = await pollUntil(() => samples.some((s) => s.held >= CLIENTS), 20000);
  check(`nonreaders: the ${CLIENTS} non-readers hold every running and waiting place`, allHeld,
        `most held ${Math.max(0, ...samples.map((s) => s.held))}`);

  // A polite client: a short completion, retried after Retry-After (at most 1 s) on 429.
  polite.firstAt = now();
  while (now() - t0 < BOUND_MS) {
    const attempt = { from: now(), to: 0 };
    polite.inFlight.push(attempt);
    const res = await request(srv.port, 'POST', '/v1/chat/completions', {
      key: API_KEY, body: { model: 'qwen', messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 },
      timeoutMs: BOUND_MS });
    attempt.to = now();
    polite.status = res.status;
    if (res.status === 200) { polite.okAt = now(); break; }
    if (res.status !== 429) break;
    polite.refused++;
    await delay(Math.min(1000, 1000 * Number(res.headers['retry-after'] || 1)));
  }

  await pollUntil(() => readers.every((r) => r.cutAt), Math.max(0, BOUND_MS - (now() - t0)));
  const lastCut = Math.max(...readers.map((r) => r.cutAt || now()));
  const idle = await pollUntil(async () => {
    const r = await request(srv.port, 'GET', '/ready', { timeoutMs: 2000 });
    return r.json && r.json.active === 0 && r.json.queued === 0;
  }, FREE_MARGIN_MS + 1000);
  const idleAt = now();
  sampling = false;
  await Promise.all([sampler, readyPoller]);
  for (const r of readers) r.socket.destroy();

  const cut = readers.filter((r) => r.cutAt);
  check(`nonreaders: all ${CLIENTS} non-readers were cut within ${BOUND_MS} ms`, cut.length === CLIENTS,
        `${cut.length} cut`);
  const lag = cut.map((r) => r.cutAt - r.lastGrowthAt);
  check(`nonreaders: each was cut within the stall timeout (${STALL_S} s) + ${CUT_MARGIN_MS} ms of its output stopping`,
        lag.length > 0 && Math.max(...lag) <= STALL_S * 1000 + CUT_MARGIN_MS, `stop->cut ms: ${lag.join(', ')}`);
  check('nonreaders: each had output waiting unread when cut', cut.every((r) => r.rx > 0),
        `receive queues: ${readers.map((r) => r.rx).join(', ')}`);
  // Places: at any /ready snapshot, no more held than the non-readers not yet cut a margin
  // before it, plus the polite client if it was in flight.
  const aliveAt = (t) => readers.filter((r) => !r.cutAt || r.cutAt > t).length;
  const politeIn = (s) => polite.inFlight.some((a) => a.from <= s.doneAt && (a.to === 0 || a.to >= s.sentAt)) ? 1 : 0;
  const over = samples.filter((s) => s.held > aliveAt(s.sentAt - FREE_MARGIN_MS) + politeIn(s));
  check(`nonreaders: a cut client's place was free within ${FREE_MARGIN_MS} ms (every /ready snapshot)`,
        over.length === 0, over.slice(0, 3).map((s) => `+${s.sentAt - t0} ms held ${s.held}, alive ${aliveAt(s.sentAt - FREE_MARGIN_MS)}`).join('; '));
  check(`nonreaders: idle (active 0, queued 0) within ${FREE_MARGIN_MS + 1000} ms of the last cut`, idle,
        `still busy ${idleAt - lastCut} ms after`);
  check('nonreaders: the polite client got its 200', polite.okAt > 0, `last status ${polite.status}`);
  const stalled = accessLines(srv).filter((l) => l.path === '/v1/chat/completions' && l.finish_reason === 'client_stalled');
  check(`nonreaders: the access log names the ${CLIENTS} cut streams client_stalled (status 200)`,
        stalled.length === CLIENTS && stalled.every((l) => l.status === 200),
        JSON.stringify(accessLines(srv).filter((l) => l.path === '/v1/chat/completions').map((l) => [l.status, l.finish_reason])));
  note(`nonreaders: ${CLIENTS} non-reading streams (qwen, top_logprobs 20, --stall-timeout ${STALL_S}): ` +
       `unread bytes per client when cut ${Math.min(...readers.map((r) => r.rx))}-${Math.max(...readers.map((r) => r.rx))}; ` +
       `output stop -> cut min ${Math.min(...lag)} / median ${median(lag)} / max ${Math.max(...lag)} ms; ` +
       `cuts at +${readers.map((r) => r.cutAt - t0).sort((a, b) => a - b).join(', +')} ms; ` +
       `idle ${idleAt - lastCut} ms after the last cut (polled); polite client: ${polite.refused} x 429, ` +
       `200 after ${polite.okAt ? polite.okAt - polite.firstAt : 'never'} ms (started when all places were held)`);
}

// Hostile-client end-to-end tests of `tessera serve`'s HTTP front end, over raw sockets where
// a client library would hide what the server does: request smuggling through unread bodies,
// slowloris, chunked bodies past the size limit, --no-auth on a name that is not loopback,
// pipelining, connection bursts, framing errors, Expect: 100-continue, usage on error events,
// and HTTP/1.0, auth-scheme case, /v1/models/{id} and a second SIGTERM. Each group starts its
// own server(s) on a free loopback port and always stops them.
//   node hostile_http_test.mjs GROUP TESSERA WORK TINY_MODEL SLOW_MODEL STORIES_MODEL
// GROUP: desync slowloris trickle chunked noauth pipeline burst framing expect usage compat
// (HOSTILE_HTTP_DROP_FLAGS=flag,... drops serve flags, to run a group against an older server.)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  API_KEY, LAST_CHUNK, Raw, accessLines, check, childPids, chunk, contentChunks, delay, fail, httpRequest, median, note,
  now, pollUntil, procStatus, request, spawnServer, sseRequest, startServer, stopServer, summary, waitForChange,
} from './hostile_http_lib.mjs';

const key = API_KEY;
const json = { 'Content-Type': 'application/json' };

// A server that did not start says why in its message; anything else keeps its stack.
const describe = (e) => (e && /^server \S+ (did not start|not ready)/.test(e.message) ? e.message : e && e.stack ? e.stack : String(e));

// Runs one part of a group; an exception is a failure of that part, and the group goes on.
async function part(name, fn) {
  try {
    await fn();
  } catch (e) {
    fail(name, describe(e));
  }
}

// Starts a server, runs fn(srv), always stops it.
async function withServer(ctx, name, args, opts, fn) {
  let srv = null;
  try {
    srv = await startServer(ctx, name, args, opts);
    await fn(srv);
  } catch (e) {
    fail(name, describe(e));
  } finally {
    if (srv) await stopServer(srv);
  }
}

const brief = (s, n = 300) => JSON.stringify(String(s)).slice(0, n);

// ================================================================ 1. request desync
// A body the server does not read must not run as the next request on the connection. Each
// case runs twice: head and body in one write, and the body written only after the server
// answered the head (or after 1 s, for a server that waits for the body first), so that it
// arrives as fresh bytes on the socket.
async function sendHeadThenBody(c, head, body, split) {
  if (!split) { c.write(Buffer.concat([head, body])); return; }
  c.write(head);
  await c.until((x) => x.finals().length >= 1 || x.peerEnded, 1000);
  if (!c.peerEnded) c.write(body);
}

async function desync(ctx) {
  const args = ['--model', `tiny=${ctx.tiny}`, '--allow-origin', 'http://good.example', '--rate-limit', '100000'];
  await withServer(ctx, 'desync', args, {}, async (srv) => {
    const smuggled = Buffer.from(`GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    const isList = (r) => r.json && r.json.object === 'list';
    const variants = [['in one write', false], ['body sent after the answer', true]];

    for (const [label, auth] of [['no key', null], ['a wrong key', 'Bearer wrong-key']]) {
      for (const [how, split] of variants) {
        const name = `desync: POST with ${label} whose body is a request (${how})`;
        await part(name, async () => {
          const headers = { ...json, 'Content-Length': smuggled.length };
          if (auth) headers.Authorization = auth;
          const c = await Raw.connect(srv.port);
          await sendHeadThenBody(c, httpRequest('POST', '/v1/completions', { headers }), smuggled, split);
          const closed = await c.untilEnd(5000);
          c.destroy();
          const rs = c.finals();
          check(`${name}: exactly one response`, rs.length === 1 && c.rawStatusCount() === 1,
                `${c.rawStatusCount()} status lines: ${c.statusLines().join(' | ')}`);
          check('desync: ... and it is 401', rs[0] && rs[0].status === 401, rs[0] ? `status ${rs[0].status}` : 'no response');
          check('desync: ... the smuggled GET /v1/models is never answered', !rs.some(isList),
                `answered: ${rs.filter(isList).map((r) => `${r.status} ${brief(r.text, 60)}`).join()}`);
          check('desync: ... the server closes the connection after the 401', closed, 'still open 5 s later');
        });
      }
    }

    // A request whose body the server has no use for: the body must still be read as body.
    const carriers = [
      ['GET /health', 200, (r) => r.json && r.json.status === 'ok',
        httpRequest('GET', '/health', { headers: { 'Content-Length': smuggled.length } })],
      ['an allowed CORS preflight (OPTIONS)', 204, () => true,
        httpRequest('OPTIONS', '/v1/chat/completions', {
          headers: { Origin: 'http://good.example', 'Access-Control-Request-Method': 'POST', 'Content-Length': smuggled.length } })],
    ];
    const isReady = (r) => r.json && typeof r.json.active === 'number' && 'queued' in r.json;
    for (const [label, status, looksRight, head] of carriers) {
      for (const [how, split] of variants) {
        const name = `desync: ${label} carrying a request as its body (${how})`;
        await part(name, async () => {
          const c = await Raw.connect(srv.port);
          await sendHeadThenBody(c, head, smuggled, split);
          await c.untilResponses(1, 5000);
          // The next real request on the same connection (if the server kept it open).
          if (!c.peerEnded) c.write(httpRequest('GET', '/ready', { headers: { Connection: 'close' } }));
          await c.untilEnd(5000);
          c.destroy();
          const rs = c.finals();
          const ids = (c.text().match(/\r\nx-request-id:/gi) || []).length;
          check(`${name}: answered ${status}`, rs[0] && rs[0].status === status && looksRight(rs[0]),
                rs[0] ? `status ${rs[0].status} ${brief(rs[0].text, 120)}` : 'no response');
          check('desync: ... the request in its body is never answered', !rs.some(isList) && rs.slice(1).every(isReady),
                `responses: ${rs.map((r) => `${r.status} ${brief(r.text, 60)}`).join(' | ')}`);
          check(`desync: ... one response per real request (${c.rawStatusCount()} status lines, ${ids} X-Request-Id)`,
                rs.length <= 2 && c.rawStatusCount() === rs.length && ids === rs.length, c.statusLines().join(' | '));
          check('desync: ... the next request on the connection gets its own answer, or the server had closed it',
                (rs.length === 2 && isReady(rs[1])) || (rs.length === 1 && c.peerEnded && !c.error),
                `${rs.length} responses, closed ${c.peerEnded}, error ${c.error}`);
        });
      }
    }
  });
}

// ================================================================ 2. slowloris
// 500 connections trickling a request head (one byte a second) beside a normal client.
async function slowloris(ctx) {
  const args = ['--model', `tiny=${ctx.tiny}`, '--header-timeout', '60', '--socket-timeout', '60', '--rate-limit', '100000'];
  await withServer(ctx, 'slowloris', args, {}, async (srv) => {
    const before = procStatus(srv.pid);
    const head = `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: ${'a'.repeat(200)}`;
    const socks = [];
    const openErrors = {};
    const t0open = now();
    for (let round = 0; round < 50; round++) {
      const batch = [];
      for (let a = 10; a < 20; a++) {
        batch.push(Raw.connect(srv.port, { localAddress: `127.0.0.${a}`, timeoutMs: 10000 })
          .then((c) => { c.sent = 1; c.write(head[0]); socks.push(c); })  // the first byte at once
          .catch((e) => { openErrors[e.code || e.message] = (openErrors[e.code || e.message] || 0) + 1; }));
      }
      await Promise.all(batch);
    }
    note(`opened ${socks.length} trickling connections from 127.0.0.10-19 in ${now() - t0open} ms` +
         (Object.keys(openErrors).length ? `, errors ${JSON.stringify(openErrors)}` : ''));
    check('slowloris: 500 connections opened (50 from each of 10 addresses)', socks.length === 500, `${socks.length} opened`);

    // Then each socket gets one more byte a second, a tenth of them on each 100 ms tick.
    const TRICKLE_MS = 30000;
    const t0 = now();
    let tick = 0;
    const trickle = setInterval(() => {
      for (let i = tick % 10; i < socks.length; i += 10) {
        const c = socks[i];
        if (!c.peerEnded && c.sent < head.length) c.write(head[c.sent++]);
      }
      tick++;
    }, 100);
    let maxThreads = 0;
    const probes = [];
    try {
      for (let n = 0; now() - t0 < TRICKLE_MS; n++) {
        const slot = now();
        const r = n % 2 === 0
          ? await request(srv.port, 'GET', '/health', { timeoutMs: 5000 })
          : await request(srv.port, 'POST', '/v1/completions', { key, body: { model: 'tiny', prompt: 'Hi', max_tokens: 4 }, timeoutMs: 5000 });
        probes.push({ kind: n % 2 === 0 ? 'health' : 'completion', ms: r.ms, status: r.status, error: r.error });
        const st = procStatus(srv.pid);
        if (st) maxThreads = Math.max(maxThreads, st.threads);
        await delay(Math.max(0, slot + 500 - now()));  // pacing: one probe every ~0.5 s
      }
    } finally {
      clearInterval(trickle);
    }
    const open = socks.filter((c) => !c.peerEnded).length;
    const after = procStatus(srv.pid) || { rssKb: 0, threads: 0 };
    maxThreads = Math.max(maxThreads, after.threads);
    const lat = probes.map((p) => p.ms);
    const bad = probes.filter((p) => p.status !== 200);
    note(`server RSS ${before.rssKb} -> ${after.rssKb} kB, threads ${before.threads} -> ${after.threads} (max seen ${maxThreads})`);
    note(`${probes.length} probes: latency max ${Math.max(...lat)} ms, median ${median(lat)} ms; ` +
         `health max ${Math.max(...probes.filter((p) => p.kind === 'health').map((p) => p.ms))} ms, ` +
         `completion max ${Math.max(...probes.filter((p) => p.kind === 'completion').map((p) => p.ms))} ms`);
    check('slowloris: every probe (GET /health, POST /v1/completions) answered 200', probes.length >= 20 && bad.length === 0,
          `${bad.length} of ${probes.length} failed: ${bad.slice(0, 5).map((p) => `${p.kind} ${p.status ?? p.error} after ${p.ms} ms`).join(', ')}`);
    check('slowloris: every probe answered within 1 s', Math.max(...lat) < 1000, `max ${Math.max(...lat)} ms`);
    check(`slowloris: server threads stayed below 32 (max ${maxThreads})`, maxThreads > 0 && maxThreads < 32, `max ${maxThreads}`);
    check(`slowloris: trickling connections still open after 30 s: ${open} (>= 450)`, open >= 450, `${open} open`);
    for (const c of socks) c.destroy();
  });
}

// A client trickling a request head one byte a second is cut by the socket timeout, counted
// from its first byte.
async function trickle(ctx) {
  await withServer(ctx, 'trickle', ['--model', `tiny=${ctx.tiny}`, '--socket-timeout', '3', '--rate-limit', '100000'], {}, async (srv) => {
    const head = `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: ${'a'.repeat(100)}`;
    const c = await Raw.connect(srv.port);
    const t0 = now();
    for (let i = 0; i < head.length && !c.peerEnded && now() - t0 < 10000; i++) {
      c.write(head[i]);
      await c.until((x) => x.peerEnded, 1000);  // paces the trickle: one byte a second until closed
    }
    const elapsed = (c.peerEnded ? c.endedAt : now()) - t0;
    c.destroy();
    const rs = c.finals();
    note(`trickling client: ${c.peerEnded ? `closed by the server after ${elapsed} ms` : `still open after ${elapsed} ms`}` +
         (rs.length ? `, answered ${rs[0].status}` : ''));
    check('trickle: --socket-timeout 3 closes a client trickling its head within 5 s of its first byte',
          c.peerEnded && elapsed <= 5000, c.peerEnded ? `closed after ${elapsed} ms` : `still open after ${elapsed} ms`);
  });
}

// ================================================================ 3. chunked bodies
// Lets libuv poll the socket (read what arrived) before the next write: two setImmediate
// turns put one poll phase in between.
const yieldToPoll = () => new Promise((r) => setImmediate(() => setImmediate(r)));

async function chunked(ctx) {
  await withServer(ctx, 'chunked', ['--model', `tiny=${ctx.tiny}`, '--rate-limit', '100000'], {}, async (srv) => {
    // A valid completion request padded with spaces: a server that reads it all answers 200.
    const CH = 64 * 1024;
    const spaces = Buffer.alloc(CH, 0x20);
    const prefix = Buffer.from('{"model":"tiny","prompt":"Hi","max_tokens":1}');
    const first = Buffer.concat([prefix, spaces.subarray(prefix.length)]);
    const MiB = 1024 * 1024;
    const head = httpRequest('POST', '/v1/completions', { key, headers: { ...json, 'Transfer-Encoding': 'chunked' } });

    // Streams `total` bytes of chunked body (then the last chunk) unless an answer comes
    // first or the connection fails.
    const send = async (total) => {
      const logged = accessLines(srv).length;
      const c = await Raw.connect(srv.port);
      c.write(head);
      const rss0 = procStatus(srv.pid).rssKb;
      let rssMax = rss0;
      const sampler = setInterval(() => { const st = procStatus(srv.pid); if (st) rssMax = Math.max(rssMax, st.rssKb); }, 50);
      let sent = 0;
      const t0 = now();
      const answered = () => c.buf.length > 0;
      try {
        while (sent < total && !answered() && !c.peerEnded && now() - t0 < 60000) {
          const data = sent === 0 ? first : spaces;
          const more = c.write(chunk(data));
          sent += data.length;
          if (!more) await c.drained(10000, answered);
          await yieldToPoll();
        }
        if (sent >= total && !answered() && !c.peerEnded) c.write(LAST_CHUNK);
        await c.until((x) => x.finals().length >= 1 || x.peerEnded, 30000);
        await c.until((x) => x.peerEnded, 5000);
      } finally {
        clearInterval(sampler);
        c.destroy();
      }
      const st = procStatus(srv.pid);
      if (st) rssMax = Math.max(rssMax, st.rssKb);
      // The server's own record of the request, for when the reset of a connection the server
      // closed unread reached node before the answer did (node then drops what it had not read).
      let line = null;
      await pollUntil(() => (line = accessLines(srv).slice(logged).find((l) => l.path === '/v1/completions')), 3000);
      return { c, r: c.finals()[0], line, sent, rss0, rssMax, ms: now() - t0 };
    };
    const statusOf = ({ r, line, c }) => (r ? r.status : (c.error || c.writeError) && line ? line.status : undefined);
    const how = ({ r, line, c }) => (r ? `answered ${r.status}` : line ? `no answer read (${c.error || c.writeError || 'closed'}); access log status ${line.status}` : `no answer (${c.error || c.writeError || 'open'})`);

    await part('chunked: past the limit, then a pause', async () => {
      // Deterministic: 1.5 MiB of chunks, then nothing; the answer must not wait for more.
      const c = await Raw.connect(srv.port);
      c.write(head);
      c.write(chunk(first));
      for (let i = 1; i < 24; i++) c.write(chunk(spaces));
      await c.until((x) => x.finals().length >= 1 || x.peerEnded, 5000);
      const r = c.finals()[0];
      const closed = await c.untilEnd(5000);
      c.destroy();
      check('chunked: a chunked body past --max-body-bytes (1.5 MiB, then a pause) -> 413 body_too_large at once',
            r && r.status === 413 && r.json && r.json.error && r.json.error.code === 'body_too_large',
            r ? `status ${r.status} ${brief(r.text, 150)}` : `no answer in 5 s (${c.error || (c.peerEnded ? 'closed' : 'open')})`);
      check('chunked: ... and the server closes the connection', r && closed, r ? 'still open 5 s later' : 'no 413 came');
    });

    await part('chunked: 100 MiB', async () => {
      const res = await send(100 * MiB);
      const { c, r, sent, rss0, rssMax, ms } = res;
      note(`100 MiB chunked body: ${how(res)} after ${(sent / MiB).toFixed(2)} MiB sent (${ms} ms); server RSS ${rss0} kB, max ${rssMax} kB`);
      check('chunked: a 100 MiB chunked body gets 413', statusOf(res) === 413, how(res) + (r ? ` ${brief(r.text, 150)}` : ''));
      check('chunked: ... as soon as the limit is passed (< 16 MiB sent)', statusOf(res) === 413 && sent < 16 * MiB, `${(sent / MiB).toFixed(2)} MiB sent`);
      check('chunked: ... server RSS stayed below its start + 64 MiB', rssMax - rss0 < 64 * 1024, `+${rssMax - rss0} kB`);
      check('chunked: ... and the server closed the connection', c.peerEnded, 'still open');
    });

    await part('chunked: 10 MiB', async () => {
      const res = await send(10 * MiB);
      check('chunked: a 10 MiB chunked (valid JSON) body gets 413, never reaching the model', statusOf(res) === 413,
            `${how(res)} after ${(res.sent / MiB).toFixed(2)} MiB` + (res.r ? ` ${brief(res.r.text, 150)}` : ''));
    });
  });
}

// ================================================================ 4. --no-auth resolves --host
async function noauth(ctx) {
  const env = { ...process.env };
  delete env.TESSERA_API_KEY;
  // The server runs with a private /etc/hosts (a mount namespace) and, where allowed, in a
  // network namespace of its own whose lo also carries 198.51.100.7, so that a server which
  // trusted the name would really listen there; nothing is ever sent to that address.
  const netns = 'ip link set lo up && ip addr add 198.51.100.7/32 dev lo';
  let mode = null;
  if (spawnSync('unshare', ['-m', '-n', 'sh', '-c', netns], { timeout: 10000 }).status === 0) mode = ['-m', '-n'];
  else if (spawnSync('unshare', ['-m', 'true'], { timeout: 10000 }).status === 0) mode = ['-m'];
  if (!mode) {
    note('skip: unshare -m is not permitted here; the name-resolution cases need a private /etc/hosts');
  } else {
    note(mode.length === 2 ? 'private mount and network namespace (198.51.100.7 on its own lo)' : 'private mount namespace only');
    const cases = [
      ['evil', '198.51.100.7 127.evil.test\n', '127.evil.test'],
      ['mixed', '127.0.0.1 mixed.test\n198.51.100.7 mixed.test\n', 'mixed.test'],
    ];
    for (const [label, hosts, host] of cases) {
      await part(`noauth: ${host}`, async () => {
        const hostsFile = path.join(ctx.work, `hosts-${label}`);
        fs.writeFileSync(hostsFile, hosts);
        const script = `${mode.length === 2 ? `${netns} && ` : ''}mount --bind "$1" /etc/hosts && shift && exec "$@"`;
        const argv = [...mode, 'sh', '-c', script, 'sh', hostsFile,
                      ctx.tessera, 'serve', '--no-auth', '--host', host, '--port', '0', '--placement', 'reference',
                      '--model', `tiny=${ctx.tiny}`];
        const srv = spawnServer(ctx.work, `noauth-${label}`, 'unshare', argv, env);
        ctx.servers.push(srv);
        const t0 = now();
        await waitForChange(srv, () => srv.exitCode !== undefined || !!srv.exitSignal || /listening on/.test(srv.out), 10000);
        const listening = /listening on/.test(srv.out);
        const exited = srv.exitCode !== undefined || !!srv.exitSignal;
        if (!exited) await stopServer(srv, 2000);
        note(`--no-auth --host ${host} (${hosts.trim().replace(/\n/g, ', ')}): ${listening ? 'listened (then stopped by the test)' : exited ? `exit ${srv.exitCode ?? srv.exitSignal} after ${srv.exitedAt - t0} ms` : 'still running after 10 s'}; stderr: ${brief(srv.err.trim(), 400)}`);
        check(`noauth: --host ${host} is refused at start (non-zero exit within 10 s)`, exited && srv.exitCode !== 0 && !listening,
              listening ? 'it listened' : exited ? `exit ${srv.exitCode ?? srv.exitSignal}` : 'still running after 10 s');
        check(`noauth: ... never listening`, !listening, srv.out.trim());
        check(`noauth: ... the message names --no-auth and the address 198.51.100.7`,
              srv.err.includes('--no-auth') && srv.err.includes('198.51.100.7'), brief(srv.err.trim(), 400));
      });
    }
  }
  await withServer(ctx, 'noauth-localhost', ['--no-auth', '--host', 'localhost', '--model', `tiny=${ctx.tiny}`, '--rate-limit', '100000'],
                   { noAuth: true }, async (srv) => {
    const ok200 = await pollUntil(async () => (await request(srv.port, 'GET', '/health', { timeoutMs: 2000 })).status === 200, 10000);
    check('noauth: --host localhost --no-auth is accepted and answers /health on 127.0.0.1', ok200);
  });
}

// ================================================================ 5. pipelining
async function pipeline(ctx) {
  const args = ['--model', `tiny=${ctx.tiny}`, '--model', `stories=${ctx.stories}`, '--max-loaded-models', '2', '--rate-limit', '100000'];
  await withServer(ctx, 'pipeline', args, {}, async (srv) => {
    await part('pipeline: three requests in one write', async () => {
      const c = await Raw.connect(srv.port);
      c.write(Buffer.concat([
        httpRequest('GET', '/health'),
        httpRequest('GET', '/v1/models', { key }),
        httpRequest('POST', '/tokenize', { key, headers: json, body: { model: 'stories', prompt: 'Once upon a time' } }),
      ]));
      await c.untilResponses(3, 15000);
      c.destroy();
      const rs = c.finals();
      check('pipeline: GET /health, GET /v1/models, POST /tokenize in one write get three responses', rs.length === 3,
            `${rs.length} responses: ${c.statusLines().join(' | ')}`);
      check('pipeline: ... 1st is /health', rs[0] && rs[0].status === 200 && rs[0].json && rs[0].json.status === 'ok', rs[0] && brief(rs[0].text, 100));
      check('pipeline: ... 2nd is /v1/models', rs[1] && rs[1].status === 200 && rs[1].json && rs[1].json.object === 'list', rs[1] && brief(rs[1].text, 100));
      check('pipeline: ... 3rd is /tokenize', rs[2] && rs[2].status === 200 && rs[2].json && Array.isArray(rs[2].json.tokens), rs[2] && brief(rs[2].text, 100));
      check('pipeline: ... nothing else on the connection', !c.parsed().garbage && c.statusLines().length === rs.length, c.text().slice(-200));
    });
    await part('pipeline: two completions in one write', async () => {
      const c = await Raw.connect(srv.port);
      const a = { model: 'stories', prompt: 'Once upon a time', max_tokens: 5 };
      const b = { model: 'stories', prompt: 'Once upon a time there was a little girl named Lily', max_tokens: 5 };
      c.write(Buffer.concat([httpRequest('POST', '/v1/completions', { key, headers: json, body: a }),
                             httpRequest('POST', '/v1/completions', { key, headers: json, body: b })]));
      await c.untilResponses(2, 30000);
      c.destroy();
      const rs = c.finals();
      check('pipeline: two pipelined POST /v1/completions get two 200 responses', rs.length === 2 && rs.every((r) => r.status === 200),
            `${rs.length} responses: ${c.statusLines().join(' | ')}`);
      const pt = rs.map((r) => r.json && r.json.usage && r.json.usage.prompt_tokens);
      check('pipeline: ... in order (the shorter prompt first)', rs.length === 2 && pt[0] > 0 && pt[0] < pt[1], `prompt_tokens ${pt}`);
    });
  });
}

// ================================================================ 6. burst of connections
async function burst(ctx) {
  await withServer(ctx, 'burst', ['--model', `tiny=${ctx.tiny}`, '--rate-limit', '100000'], {}, async (srv) => {
    const N = 200;
    const data = httpRequest('POST', '/v1/completions', { key, headers: { ...json, Connection: 'close' },
                                                          body: { model: 'tiny', prompt: 'Hi', max_tokens: 4 } });
    // Two bursts, one after the other: a backlog that overflows does not do so every time.
    for (const round of [1, 2]) {
      const t0 = now();
      const one = () => new Promise((resolve) => {
        const c = new Raw(net.connect({ host: '127.0.0.1', port: srv.port }));
        c.socket.once('connect', () => c.write(data));
        c.until((x) => x.finals().length >= 1 || x.peerEnded, 60000).then(() => {
          const r = c.finals()[0];
          c.destroy();
          let outcome = r ? String(r.status) : c.error ? `error ${c.error}` : c.peerEnded ? 'closed without a response' : 'no answer in 60 s';
          if (r && r.status === 429 && !/^\d+$/.test(r.header('retry-after') || '')) outcome = '429 without Retry-After';
          if (r && c.error) outcome += ` + ${c.error}`;
          if (c.writeError && !r) outcome += ` (write ${c.writeError})`;
          resolve({ outcome, ms: now() - t0 });
        });
      });
      const results = await Promise.all(Array.from({ length: N }, one));
      const ms = now() - t0;
      const counts = {};
      for (const { outcome } of results) counts[outcome] = (counts[outcome] || 0) + 1;
      note(`burst ${round}: ${N} concurrent completions in ${ms} ms (median answer ${median(results.map((x) => x.ms))} ms): ${JSON.stringify(counts)}`);
      check(`burst ${round}: all ${N} concurrent requests got a complete 200 or 429 (with Retry-After)`,
            results.every(({ outcome }) => outcome === '200' || outcome === '429'), JSON.stringify(counts));
      check(`burst ${round}: ... at least one 200`, (counts['200'] || 0) > 0, JSON.stringify(counts));
      check(`burst ${round}: ... all within 60 s`, ms < 60000, `${ms} ms`);
      // Stricter than the 60 s: a request that waited out SYN retransmits behind a full listen
      // backlog (1 s, 3 s, 7 s, ...) took seconds even when it was answered in the end.
      const slowest = Math.max(...results.map((x) => x.ms));
      check(`burst ${round}: ... each answered within 10 s (slowest ${slowest} ms)`, slowest < 10000, `slowest ${slowest} ms`);
    }
  });
}

// ================================================================ 7. framing
async function framing(ctx) {
  const tok = JSON.stringify({ model: 'tiny', prompt: 'Hello there' });
  await withServer(ctx, 'framing', ['--model', `tiny=${ctx.tiny}`, '--rate-limit', '100000'], {}, async (srv) => {
    await part('framing: huge Content-Length', async () => {
      const c = await Raw.connect(srv.port);
      c.write(httpRequest('POST', '/v1/completions', { key, headers: { ...json, 'Content-Length': '1000000000000' } }));
      const t0 = now();
      await c.until((x) => x.finals().length >= 1 || x.peerEnded, 2000);
      const ms = now() - t0;
      const r = c.finals()[0];
      check('framing: Content-Length 1000000000000 with no body sent -> 413 within 2 s', r && r.status === 413 && ms <= 2000,
            r ? `status ${r.status} after ${ms} ms` : `no answer in ${ms} ms${c.peerEnded ? ' (closed)' : ''}`);
      check('framing: ... then the server closes the connection', r && (await c.untilEnd(5000)), r ? 'still open 5 s later' : 'no 413 came');
      c.destroy();
    });
    const framingCase = async (name, data) => {
      const c = await Raw.connect(srv.port);
      c.write(data);
      await c.until((x) => x.finals().length >= 1 || x.peerEnded, 5000);
      const r = c.finals()[0];
      const closed = await c.untilEnd(5000);
      c.destroy();
      check(`framing: ${name} -> 400`, r && r.status === 400, r ? `status ${r.status} ${brief(r.text, 100)}` : 'no answer');
      check(`framing: ... and the server closes the connection`, closed, 'still open 5 s after the answer');
    };
    await part('framing: two Content-Lengths', () => framingCase('two different Content-Length headers',
      Buffer.concat([Buffer.from(`POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
                                 `Content-Length: ${tok.length}\r\nContent-Length: ${tok.length + 10}\r\n\r\n`), Buffer.from(tok)])));
    await part('framing: Content-Length with chunked', () => framingCase('Content-Length together with Transfer-Encoding: chunked',
      Buffer.concat([Buffer.from(`POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
                                 'Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n'), chunk(tok), LAST_CHUNK])));
    await part('framing: short chunk, half-close', async () => {
      const c = await Raw.connect(srv.port, { allowHalfOpen: true });
      c.write(httpRequest('POST', '/tokenize', { key, headers: { ...json, 'Transfer-Encoding': 'chunked' } }));
      c.write(`100\r\n${tok}`);
      c.end();
      const t0 = now();
      await c.until((x) => x.finals().length >= 1 || x.peerEnded, 5000);
      const r = c.finals()[0];
      c.destroy();
      check('framing: a chunk shorter than its size, then a half-close -> 400 within 5 s', r && r.status === 400,
            r ? `status ${r.status} after ${now() - t0} ms` : `no answer (${c.peerEnded ? 'closed' : 'open'} after ${now() - t0} ms)`);
    });
  });
  await withServer(ctx, 'framing-timeout', ['--model', `tiny=${ctx.tiny}`, '--socket-timeout', '3', '--rate-limit', '100000'], {}, async (srv) => {
    const c = await Raw.connect(srv.port);
    const t0 = now();
    c.write(Buffer.concat([httpRequest('POST', '/tokenize', { key, headers: { ...json, 'Transfer-Encoding': 'chunked' } }), Buffer.from(`100\r\n${tok}`)]));
    await c.until((x) => x.finals().length >= 1 || x.peerEnded, 10000);
    const ms = now() - t0;
    const r = c.finals()[0];
    c.destroy();
    note(`short chunk, client silent, --socket-timeout 3: ${r ? `answered ${r.status}` : c.peerEnded ? 'closed' : 'nothing'} after ${ms} ms`);
    check('framing: a chunk shorter than its size, client silent, --socket-timeout 3 -> 408 or closed within 5 s',
          ms <= 5000 && (r ? r.status === 408 : c.peerEnded), r ? `status ${r.status} after ${ms} ms` : `${c.peerEnded ? 'closed' : 'open'} after ${ms} ms`);
  });
}

// ================================================================ 8. Expect: 100-continue
async function expect(ctx) {
  await withServer(ctx, 'expect', ['--model', `tiny=${ctx.tiny}`, '--rate-limit', '100000'], {}, async (srv) => {
    const body = JSON.stringify({ model: 'tiny', prompt: 'Hello there' });
    const firstStatus = async (headers) => {
      const c = await Raw.connect(srv.port);
      c.write(httpRequest('POST', '/tokenize', { headers: { ...json, Expect: '100-continue', ...headers } }));
      await c.until((x) => x.statusLines().length >= 1 || x.peerEnded, 3000);
      return c;
    };
    await part('expect: no key', async () => {
      const c = await firstStatus({ 'Content-Length': body.length });
      c.destroy();
      const lines = c.statusLines();
      check('expect: Expect: 100-continue without a key -> first status 401, no 100', /^HTTP\/1\.\d 401/.test(lines[0] || '') && !lines.some((l) => / 100 /.test(`${l} `)),
            lines.join(' | ') || 'no answer');
    });
    await part('expect: too large', async () => {
      const c = await firstStatus({ Authorization: `Bearer ${key}`, 'Content-Length': 2000000 });
      c.destroy();
      const lines = c.statusLines();
      check('expect: Expect: 100-continue, Content-Length 2000000 > --max-body-bytes -> first status 413, no 100',
            /^HTTP\/1\.\d 413/.test(lines[0] || '') && !lines.some((l) => / 100 /.test(`${l} `)), lines.join(' | ') || 'no answer');
    });
    await part('expect: valid', async () => {
      const c = await firstStatus({ Authorization: `Bearer ${key}`, 'Content-Length': body.length });
      const lines = c.statusLines();
      check('expect: Expect: 100-continue with a key and a small body -> HTTP/1.1 100 Continue first', /^HTTP\/1\.1 100/.test(lines[0] || ''),
            lines.join(' | ') || 'nothing in 3 s');
      c.write(body);
      await c.until((x) => x.finals().length >= 1 || x.peerEnded, 10000);
      c.destroy();
      const r = c.finals()[0];
      check('expect: ... then 200 from /tokenize after the body', r && r.status === 200 && r.json && Array.isArray(r.json.tokens),
            r ? `status ${r.status} ${brief(r.text, 100)}` : 'no answer');
    });
  });
}

// ================================================================ 9. usage on errors
const SERVER_STATS = ['queue_wait_ms', 'active', 'queued', 'worker_state', 'worker_restarts', 'uptime_s'];
const missingStats = (stats, extra = []) => [...SERVER_STATS, ...extra].filter((k) => !stats || stats[k] === undefined);

async function usage(ctx) {
  const chat = (maxTokens) => ({ model: 'slow', messages: [{ role: 'user', content: 'Hi' }], max_tokens: maxTokens, stream: true });

  // (a) the request deadline passes mid-stream.
  await withServer(ctx, 'usage-timeout', ['--model', `slow=${ctx.slow}`, '--request-timeout', '3', '--rate-limit', '100000'],
                   { readySeconds: 120 }, async (srv) => {
    const s = sseRequest(srv.port, '/v1/chat/completions', chat(4000), { key });
    await s.until((x) => x.ended, 30000);
    s.destroy();
    const err = s.events.find((e) => e && e.error);
    const n = contentChunks(s.events).length;
    note(`timeout stream: ${n} content chunks, then ${err ? brief(JSON.stringify(err), 600) : 'no error event'}`);
    check('usage: a stream past --request-timeout ends with an error event, code timeout', err && err.error.code === 'timeout', err ? err.error.code : 'no error event');
    check(`usage: ... its usage.completion_tokens > 0 and >= the ${n} content chunks`,
          err && err.usage && err.usage.completion_tokens > 0 && err.usage.completion_tokens >= n, err && JSON.stringify(err.usage));
    check('usage: ... its usage.prompt_tokens > 0', err && err.usage && err.usage.prompt_tokens > 0, err && JSON.stringify(err.usage));
    const miss = err ? missingStats(err.x_tessera_stats, ['sampling']) : ['all'];
    check('usage: ... x_tessera_stats has the server stats and sampling', miss.length === 0, `missing ${miss}`);
  });

  await withServer(ctx, 'usage', ['--model', `slow=${ctx.slow}`, '--model', `tiny=${ctx.tiny}`, '--max-loaded-models', '2', '--rate-limit', '100000'],
                   { readySeconds: 120 }, async (srv) => {
    // (d, e) a prompt longer than the context.
    await part('usage: context_length_exceeded', async () => {
      const long = 'word '.repeat(600);
      const t = await request(srv.port, 'POST', '/tokenize', { key, body: { model: 'tiny', prompt: long } });
      const count = t.json && t.json.count;
      const r = await request(srv.port, 'POST', '/v1/completions', { key, body: { model: 'tiny', prompt: long, max_tokens: 4 } });
      const e = r.json && r.json.error;
      check('usage: /v1/completions with a prompt over the context -> 400 context_length_exceeded', r.status === 400 && e && e.code === 'context_length_exceeded',
            `${r.status} ${brief(r.text, 200)}`);
      check('usage: ... error.param is prompt', e && e.param === 'prompt', e && `param ${e.param}`);
      check(`usage: ... usage.prompt_tokens equals /tokenize's count (${count})`, r.json && r.json.usage && count > 0 && r.json.usage.prompt_tokens === count,
            r.json && JSON.stringify(r.json.usage));
      const miss = missingStats(r.json && r.json.x_tessera_stats);
      check('usage: ... x_tessera_stats has queue_wait_ms, active, queued, worker_state, worker_restarts, uptime_s', miss.length === 0, `missing ${miss}`);
      const c = await request(srv.port, 'POST', '/v1/chat/completions', { key, body: { model: 'tiny', messages: [{ role: 'user', content: long }], max_tokens: 4 } });
      check('usage: the chat endpoint names messages for the same error', c.status === 400 && c.json && c.json.error.code === 'context_length_exceeded' &&
            c.json.error.param === 'messages', `${c.status} ${brief(c.text, 200)}`);
    });

    // (c) a streaming client that hangs up mid-stream.
    await part('usage: client disconnect', async () => {
      const logged = accessLines(srv).length;
      const s = sseRequest(srv.port, '/v1/chat/completions', chat(4000), { key });
      await s.until((x) => contentChunks(x.events).length >= 3, 30000);
      const id = s.headers && s.headers['x-request-id'];
      const n = contentChunks(s.events).length;
      s.destroy();
      // Its access line: by request id (without one: the next streamed chat on slow logged).
      const find = () => (id ? accessLines(srv).find((l) => l.id === id)
        : accessLines(srv).slice(logged).find((l) => l.path === '/v1/chat/completions' && l.model === 'slow'));
      let line = null;
      await pollUntil(() => (line = find()), 10000);
      note(`disconnected stream (${n} content chunks): ${line ? JSON.stringify(line) : 'no access line'}`);
      check('usage: a client that disconnects mid-stream is logged with finish_reason client_disconnected',
            line && line.finish_reason === 'client_disconnected', line ? JSON.stringify(line) : `no access line for ${id}`);
      check(`usage: ... and completion_tokens > 0 (${n} content chunks were sent)`, line && line.completion_tokens > 0, line && `completion_tokens ${line.completion_tokens}`);
    });

    // (b) the worker is killed mid-stream.
    await part('usage: worker crash', async () => {
      const ready = await pollUntil(async () => (await request(srv.port, 'GET', '/ready', { timeoutMs: 2000 })).json?.active === 0, 30000);
      if (!ready) throw new Error('the server did not become idle after the disconnect');
      const s = sseRequest(srv.port, '/v1/chat/completions', chat(4000), { key });
      await s.until((x) => contentChunks(x.events).length >= 3, 30000);
      const workers = childPids(srv.pid);
      for (const pid of workers) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
      await s.until((x) => x.ended, 15000);
      s.destroy();
      const err = s.events.find((e) => e && e.error);
      const n = contentChunks(s.events).length;
      note(`killed worker ${workers}: ${n} content chunks, then ${err ? brief(JSON.stringify(err), 600) : 'no error event'}`);
      check('usage: a stream whose worker is SIGKILLed ends with error code worker_crashed', err && err.error.code === 'worker_crashed', err ? err.error.code : 'no error event');
      check(`usage: ... its usage.completion_tokens > 0 and >= the ${n} content chunks`,
            err && err.usage && err.usage.completion_tokens > 0 && err.usage.completion_tokens >= n, err && JSON.stringify(err.usage));
      const miss = err ? missingStats(err.x_tessera_stats, ['sampling']) : ['all'];
      check('usage: ... x_tessera_stats has the server stats and sampling', miss.length === 0, `missing ${miss}`);
    });
  });
}

// ================================================================ 10. compatibility
async function compat(ctx) {
  const args = ['--model', `tiny=${ctx.tiny}`, '--model', `test-org/tiny-chat=${ctx.tiny}`, '--rate-limit', '100000'];
  await withServer(ctx, 'compat', args, {}, async (srv) => {
    await part('compat: HTTP/1.0 stream', async () => {
      const c = await Raw.connect(srv.port);
      c.write(httpRequest('POST', '/v1/chat/completions', { version: '1.0', key, headers: json,
        body: { model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, stream: true } }));
      const closed = await c.untilEnd(15000);
      c.destroy();
      const text = c.text();
      const headEnd = text.indexOf('\r\n\r\n');
      const head = headEnd >= 0 ? text.slice(0, headEnd) : text;
      const body = headEnd >= 0 ? text.slice(headEnd + 4) : '';
      const lines = body.split('\n').filter((l) => l.trim() !== '');
      check('compat: an HTTP/1.0 streamed request is answered 200', /^HTTP\/1\.[01] 200/.test(head), head.split('\r\n')[0]);
      check('compat: ... without Transfer-Encoding: chunked', !/^transfer-encoding:.*chunked/im.test(head), brief(head, 400));
      check('compat: ... the body is plain SSE data: lines', lines.length > 2 && lines.every((l) => l.startsWith('data: ')), brief(body, 200));
      check('compat: ... ending with data: [DONE]', lines.length > 0 && lines[lines.length - 1] === 'data: [DONE]', brief(body.slice(-100), 120));
      check('compat: ... and the server closes the connection at the end', closed, 'still open after 15 s');
    });
    await part('compat: auth scheme case', async () => {
      for (const scheme of ['bearer', 'BEARER']) {
        const r = await request(srv.port, 'GET', '/v1/models', { headers: { Authorization: `${scheme} ${key}` } });
        check(`compat: Authorization: ${scheme} KEY is accepted`, r.status === 200, `${r.status ?? r.error}`);
      }
    });
    await part('compat: /v1/models/{id}', async () => {
      for (const id of ['tiny', 'test-org/tiny-chat']) {
        const r = await request(srv.port, 'GET', `/v1/models/${id}`, { key });
        const j = r.json || {};
        check(`compat: GET /v1/models/${id} -> 200 {id, object: model, created, owned_by}`,
              r.status === 200 && j.id === id && j.object === 'model' && typeof j.created === 'number' && typeof j.owned_by === 'string',
              `${r.status} ${brief(r.text, 200)}`);
      }
      const r = await request(srv.port, 'GET', '/v1/models/no-such-model', { key });
      check('compat: GET /v1/models/no-such-model -> 404 model_not_found', r.status === 404 && r.json && r.json.error && r.json.error.code === 'model_not_found',
            `${r.status} ${brief(r.text, 200)}`);
    });
  });

  // A second SIGTERM while draining ends the server at once.
  await withServer(ctx, 'compat-sigterm', ['--model', `slow=${ctx.slow}`, '--rate-limit', '100000'], { readySeconds: 120 }, async (srv) => {
    const s = sseRequest(srv.port, '/v1/chat/completions', { model: 'slow', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4000, stream: true }, { key });
    try {
      await s.until((x) => contentChunks(x.events).length >= 2, 30000);
      check('compat: a long stream is in flight', contentChunks(s.events).length >= 2 && !s.ended, `${contentChunks(s.events).length} chunks, ended ${s.ended}`);
      srv.child.kill('SIGTERM');
      // Draining: /ready answers 503 (or the listener is already closed).
      const draining = await pollUntil(async () => {
        const r = await request(srv.port, 'GET', '/ready', { timeoutMs: 1000 });
        return r.status === 503 || r.error === 'ECONNREFUSED';
      }, 5000);
      const alive = srv.exitCode === undefined && !srv.exitSignal;
      check('compat: after the first SIGTERM the server drains (/ready 503) and keeps running', draining && alive, `draining ${draining}, running ${alive}`);
      const t0 = now();
      srv.child.kill('SIGTERM');
      const exited = await waitForChange(srv, () => srv.exitCode !== undefined || !!srv.exitSignal, 2000);
      const ms = now() - t0;
      note(`second SIGTERM: ${exited ? `exit ${srv.exitCode ?? srv.exitSignal} after ${ms} ms` : 'still running after 2 s'}`);
      check('compat: a second SIGTERM while draining makes the server exit within 2 s', exited, `still running ${ms} ms later`);
      // The stream is cut because the server stops, not because a worker crashed.
      await s.until((x) => x.ended, 3000);
      const err = s.events.find((e) => e && e.error);
      note(`second SIGTERM: the stream ended with ${err ? `error ${err.error.code}: ${err.error.message}` : 'no error event (the connection closed first)'}`);
      check('compat: ... the cut stream never says worker_crashed (its error, if it got one, is shutting_down)',
            !err || err.error.code === 'shutting_down', err && JSON.stringify(err.error));
    } finally {
      s.destroy();
    }
  });
}

// ================================================================ main

const groups = { desync, slowloris, trickle, chunked, noauth, pipeline, burst, framing, expect, usage, compat };
// Seconds before the whole group is abandoned (below the CTest TIMEOUT in hostile_http.cmake).
const limits = { desync: 110, slowloris: 170, trickle: 110, chunked: 170, noauth: 110, pipeline: 110, burst: 170,
                 framing: 110, expect: 110, usage: 290, compat: 170 };

const [group, tessera, work, tiny, slow, stories] = process.argv.slice(2);
if (!groups[group] || !stories) {
  console.error(`usage: node hostile_http_test.mjs GROUP TESSERA WORK TINY SLOW STORIES\n  GROUP: ${Object.keys(groups).join(' ')}`);
  process.exit(2);
}
const ctx = { tessera: path.resolve(tessera), work: path.resolve(work), tiny: path.resolve(tiny), slow: path.resolve(slow),
              stories: path.resolve(stories), servers: [] };
fs.mkdirSync(ctx.work, { recursive: true });
const hardLimit = setTimeout(() => {
  fail(`${group}: the group did not finish within ${limits[group]} s`);
  for (const srv of ctx.servers) { try { srv.child.kill('SIGKILL'); } catch { /* gone */ } }
  summary();
  process.exit(1);
}, limits[group] * 1000);
hardLimit.unref();
try {
  await groups[group](ctx);
} catch (e) {
  fail(group, describe(e));
} finally {
  for (const srv of ctx.servers) await stopServer(srv);
}
process.exit(summary() ? 1 : 0);

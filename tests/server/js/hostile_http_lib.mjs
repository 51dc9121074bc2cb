// Helpers for hostile_http_test.mjs: start and stop a real `tessera serve`, raw TCP clients
// that see every byte the server sends, an HTTP/1.x response parser (status line, headers,
// Content-Length or chunked bodies, 1xx interim responses), SSE streams, /proc readings.
// Node >= 18, built-in modules only. Every wait has a deadline; waits are event-driven (a
// condition checked whenever something arrives), never a sleep standing in for one.
import { spawn, execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

export const API_KEY = 'hostile-test-key';

// ------------------------------------------------------------------ results

let passed = 0;
let failed = 0;
export function ok(name) { passed++; console.log(`ok: ${name}`); }
export function fail(name, detail) { failed++; console.log(`FAIL: ${name}${detail ? `: ${detail}` : ''}`); }
export function check(name, cond, detail) { if (cond) ok(name); else fail(name, detail); return !!cond; }
export function note(text) { console.log(`note: ${text}`); }
export function summary() { console.log(`${passed} passed, ${failed} failed`); return failed; }

// ------------------------------------------------------------------ small utilities

export const now = () => Number(process.hrtime.bigint() / 1000000n);

// A timer for scheduling (pacing a client), never for waiting on the server.
export const delay = (ms) => new Promise((r) => setTimeout(r, ms));

// Resolves true as soon as `pred()` holds, checked whenever `emitter` emits 'change' (and
// once at the start), false when `ms` pass first.
export function waitForChange(emitter, pred, ms) {
  return new Promise((resolve) => {
    if (pred()) return resolve(true);
    let timer = null;
    const onChange = () => {
      if (!pred()) return;
      clearTimeout(timer);
      emitter.off('change', onChange);
      resolve(true);
    };
    timer = setTimeout(() => { emitter.off('change', onChange); resolve(pred()); }, ms);
    emitter.on('change', onChange);
  });
}

// Polls an async condition every `everyMs` until it holds or `ms` pass.
export async function pollUntil(fn, ms, everyMs = 50) {
  const deadline = now() + ms;
  for (;;) {
    let v = false;
    try { v = await fn(); } catch { v = false; }
    if (v) return v;
    if (now() >= deadline) return false;
    await delay(everyMs);
  }
}

export function median(xs) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

// VmRSS (kB) and Threads of a process, from /proc/PID/status; null once it is gone.
export function procStatus(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+)/.exec(text);
    const threads = /Threads:\s+(\d+)/.exec(text);
    return { rssKb: rss ? Number(rss[1]) : 0, threads: threads ? Number(threads[1]) : 0 };
  } catch {
    return null;
  }
}

// The child processes of `pid` (the worker of a server).
export function childPids(pid) {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

// ------------------------------------------------------------------ the server

const running = new Set();
process.on('exit', () => {
  for (const child of running) { try { child.kill('SIGKILL'); } catch { /* gone */ } }
});

// HOSTILE_HTTP_DROP_FLAGS=flag1,flag2 removes those serve flags (each with its value) from
// every server command line. Diagnostics only: it lets a group run against a server that
// does not know a flag yet, to see how that server behaves.
const dropFlags = (process.env.HOSTILE_HTTP_DROP_FLAGS || '').split(',').filter(Boolean).map((f) => `--${f.replace(/^--/, '')}`);
export function serveArgs(args) {
  const out = [];
  for (let i = 0; i < args.length; i++) {
    if (dropFlags.includes(args[i])) { i++; continue; }
    out.push(args[i]);
  }
  return out;
}

// Starts `command argv` (a `tessera serve ...` or a wrapper around one), keeps its stdout and
// stderr (also copied to WORK/NAME.out and .err) and returns a handle; `listening` resolves
// with the port once the server prints it, or rejects when it exits or 30 s pass first.
export function spawnServer(work, name, command, argv, env) {
  fs.mkdirSync(work, { recursive: true });
  const outFile = fs.createWriteStream(path.join(work, `${name}.out`));
  const errFile = fs.createWriteStream(path.join(work, `${name}.err`));
  const child = spawn(command, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  const srv = new EventEmitter();
  Object.assign(srv, { name, child, pid: child.pid, out: '', err: '', exitCode: undefined, exitSignal: undefined, port: 0 });
  srv.setMaxListeners(0);
  srv.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      running.delete(child);
      srv.exitCode = code;
      srv.exitSignal = signal;
      srv.exitedAt = now();
      srv.emit('change');
      resolve({ code, signal });
    });
  });
  child.on('error', (e) => { srv.err += `spawn error: ${e.message}\n`; srv.emit('change'); });
  child.stdout.on('data', (d) => { srv.out += d; outFile.write(d); srv.emit('change'); });
  child.stderr.on('data', (d) => { srv.err += d; errFile.write(d); srv.emit('change'); });
  child.on('close', () => { outFile.end(); errFile.end(); });
  srv.listening = (async () => {
    const re = /listening on https?:\/\/(?:\[[^\]]*\]|[^\s:/]+):(\d+)/;
    const seen = await waitForChange(srv, () => re.test(srv.out) || srv.exitCode !== undefined || srv.exitSignal, 30000);
    const m = re.exec(srv.out);
    if (m) { srv.port = Number(m[1]); return srv.port; }
    throw new Error(`server ${name} did not start (${seen ? `exit ${srv.exitCode ?? srv.exitSignal}` : 'no port in 30 s'}): ${srv.err.trim().slice(-2000)}`);
  })();
  srv.listening.catch(() => {});
  return srv;
}

// `tessera serve --port 0 --placement reference ARGS` with TESSERA_API_KEY (unless noAuth);
// resolves once it listens. Waits for /ready too unless opts.ready === false.
export async function startServer(ctx, name, args, opts = {}) {
  const env = { ...process.env };
  if (opts.noAuth) delete env.TESSERA_API_KEY; else env.TESSERA_API_KEY = API_KEY;
  const argv = ['serve', '--port', '0', '--placement', 'reference', '--log-format', 'json',
                ...serveArgs(args)];
  const srv = spawnServer(ctx.work, name, ctx.tessera, argv, env);
  ctx.servers.push(srv);
  await srv.listening;
  if (opts.ready !== false) {
    const ready = await pollUntil(async () => (await request(srv.port, 'GET', '/ready', { timeoutMs: 2000 })).status === 200,
                                  opts.readySeconds ? opts.readySeconds * 1000 : 60000);
    if (!ready) throw new Error(`server ${name} not ready within ${opts.readySeconds ?? 60} s`);
  }
  return srv;
}

// SIGTERM, then SIGKILL if it has not exited within boundMs. Returns how it ended.
export async function stopServer(srv, boundMs = 10000) {
  if (srv.exitCode !== undefined || srv.exitSignal) return { code: srv.exitCode, signal: srv.exitSignal, killed: false };
  try { srv.child.kill('SIGTERM'); } catch { /* gone */ }
  const t0 = now();
  const done = await waitForChange(srv, () => srv.exitCode !== undefined || !!srv.exitSignal, boundMs);
  if (!done) {
    try { srv.child.kill('SIGKILL'); } catch { /* gone */ }
    await waitForChange(srv, () => srv.exitCode !== undefined || !!srv.exitSignal, 5000);
  }
  return { code: srv.exitCode, signal: srv.exitSignal, killed: !done, ms: now() - t0 };
}

// The access-log lines the server wrote to stderr (it runs with --log-format json), parsed.
export function accessLines(srv) {
  const out = [];
  for (const line of srv.err.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const j = JSON.parse(line);
      if (j.type === 'access') out.push(j);
    } catch { /* partial line */ }
  }
  return out;
}

// ------------------------------------------------------------------ HTTP over node's http

// One request on its own connection (agent: false). Resolves with {status, headers, text,
// json, ms} or {error, ms}; never rejects.
export function request(port, method, urlPath, opts = {}) {
  const t0 = now();
  return new Promise((resolve) => {
    const headers = { ...(opts.headers || {}) };
    if (opts.key) headers.Authorization = `Bearer ${opts.key}`;
    let body = opts.body;
    if (body !== undefined && typeof body !== 'string' && !Buffer.isBuffer(body)) {
      body = JSON.stringify(body);
      headers['Content-Type'] = 'application/json';
    }
    if (body !== undefined) headers['Content-Length'] = Buffer.byteLength(body);
    let settled = false;
    const finish = (v) => { if (!settled) { settled = true; clearTimeout(timer); resolve({ ...v, ms: now() - t0 }); } };
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, headers, agent: false,
                               localAddress: opts.localAddress }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json = null;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        finish({ status: res.statusCode, headers: res.headers, text, json });
      });
      res.on('error', (e) => finish({ error: e.code || e.message }));
    });
    const timer = setTimeout(() => { finish({ error: 'timeout' }); req.destroy(); }, opts.timeoutMs ?? 30000);
    req.on('error', (e) => finish({ error: e.code || e.message }));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

// A streamed (SSE) POST: `events` fills with each parsed `data:` payload (objects, or the
// string '[DONE]') as it arrives; emits 'change'. `ended` resolves when the response ends or
// the connection fails.
export function sseRequest(port, urlPath, bodyObj, opts = {}) {
  const s = new EventEmitter();
  s.setMaxListeners(0);
  Object.assign(s, { status: 0, headers: null, events: [], raw: '', ended: false, error: null });
  const body = JSON.stringify(bodyObj);
  const headers = { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) };
  if (opts.key) headers.Authorization = `Bearer ${opts.key}`;
  let pending = '';
  const end = (error) => { if (!s.ended) { s.ended = true; s.error = error || null; s.emit('change'); } };
  s.req = http.request({ host: '127.0.0.1', port, method: 'POST', path: urlPath, headers, agent: false }, (res) => {
    s.status = res.statusCode;
    s.headers = res.headers;
    s.emit('change');
    res.setEncoding('utf8');
    res.on('data', (d) => {
      s.raw += d;
      pending += d;
      let i;
      while ((i = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, i).replace(/\r$/, '');
        pending = pending.slice(i + 1);
        if (!line.startsWith('data: ')) continue;
        const payload = line.slice(6);
        if (payload === '[DONE]') { s.events.push('[DONE]'); continue; }
        try { s.events.push(JSON.parse(payload)); } catch { s.events.push({ unparsed: payload }); }
      }
      s.emit('change');
    });
    res.on('end', () => end(null));
    res.on('error', (e) => end(e.code || e.message));
    res.on('close', () => end(null));
  });
  s.req.on('error', (e) => end(e.code || e.message));
  s.req.write(body);
  s.req.end();
  s.destroy = () => s.req.destroy();
  s.until = (pred, ms) => waitForChange(s, () => pred(s) || s.ended, ms).then(() => pred(s));
  return s;
}

// Chunks of a chat or text completion stream that carry generated text.
export function contentChunks(events) {
  return events.filter((e) => e && typeof e === 'object' && Array.isArray(e.choices) && e.choices.length &&
    ((e.choices[0].delta && e.choices[0].delta.content) || e.choices[0].text));
}

// ------------------------------------------------------------------ raw TCP

// A raw client connection: `buf` holds every byte received; `peerEnded` once the server sent
// FIN (or reset), `closed` once the socket is gone; `error` the first socket error code.
// Emits 'change' on each of those. Writes never throw; a failed write is in `writeError`.
export class Raw extends EventEmitter {
  constructor(socket) {
    super();
    this.setMaxListeners(0);
    this.socket = socket;
    this.buf = Buffer.alloc(0);
    this.peerEnded = false;
    this.closed = false;
    this.error = null;
    this.writeError = null;
    this.firstByteAt = 0;
    this.endedAt = 0;
    socket.on('data', (d) => {
      if (!this.firstByteAt) this.firstByteAt = now();
      this.buf = Buffer.concat([this.buf, d]);
      this.emit('change');
    });
    socket.on('end', () => { this.peerEnded = true; this.endedAt ||= now(); this.emit('change'); });
    socket.on('error', (e) => {
      this.error ||= e.code || e.message;
      this.peerEnded = true;
      this.endedAt ||= now();
      this.emit('change');
    });
    socket.on('close', () => { this.closed = true; this.peerEnded = true; this.endedAt ||= now(); this.emit('change'); });
  }

  static connect(port, opts = {}) {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: '127.0.0.1', port, localAddress: opts.localAddress, allowHalfOpen: !!opts.allowHalfOpen });
      const timer = setTimeout(() => { socket.destroy(); reject(new Error('connect timeout')); }, opts.timeoutMs ?? 5000);
      const raw = new Raw(socket);
      socket.once('connect', () => { clearTimeout(timer); resolve(raw); });
      socket.once('error', (e) => { clearTimeout(timer); reject(e); });
    });
  }

  write(data) {
    if (this.socket.destroyed) { this.writeError ||= 'destroyed'; return false; }
    try {
      return this.socket.write(data, (e) => { if (e) this.writeError ||= e.code || e.message; });
    } catch (e) {
      this.writeError ||= e.code || e.message;
      return false;
    }
  }

  // Resolves once the socket can take more: true if it drained, false when the socket is
  // gone, `stop()` holds on a change (e.g. an answer arrived) or `ms` pass.
  drained(ms, stop = () => false) {
    if (!this.socket.writableNeedDrain) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (v) => { clearTimeout(timer); this.socket.off('drain', onDrain); this.off('change', onChange); resolve(v); };
      const onDrain = () => done(true);
      const onChange = () => { if (this.closed || this.error || stop()) done(false); };
      const timer = setTimeout(() => done(false), ms);
      this.socket.on('drain', onDrain);
      this.on('change', onChange);
    });
  }

  end() { try { this.socket.end(); } catch { /* gone */ } }
  destroy() { this.socket.destroy(); }

  parsed() { return parseResponses(this.buf, this.peerEnded); }
  responses() { return this.parsed().responses; }
  // Final (non-1xx) responses.
  finals() { return this.responses().filter((r) => r.status >= 200); }

  until(pred, ms) { return waitForChange(this, () => pred(this), ms); }
  untilResponses(n, ms) { return this.until((c) => c.finals().length >= n || c.peerEnded, ms).then(() => this.finals().length >= n); }
  untilEnd(ms) { return this.until((c) => c.peerEnded, ms); }
  text() { return this.buf.toString('latin1'); }
  // The status lines of the parsed responses, 1xx included.
  statusLines() { return this.responses().map((r) => `HTTP/${r.version} ${r.status} ${r.reason}`.trim()); }
  // Every "HTTP/1.x NNN" anywhere in what arrived (a response glued to a body included).
  rawStatusCount() { return (this.text().match(/HTTP\/1\.\d \d{3}/g) || []).length; }
}

// One raw exchange: connect, write `data`, read until the server closes or `ms` pass.
export async function rawExchange(port, data, ms = 5000, opts = {}) {
  const c = await Raw.connect(port, opts);
  c.write(data);
  await c.untilEnd(ms);
  c.destroy();
  return c;
}

// ------------------------------------------------------------------ HTTP/1.x response parser

function dechunk(buf, start) {
  const parts = [];
  let p = start;
  for (;;) {
    const lineEnd = buf.indexOf('\r\n', p);
    if (lineEnd < 0) return null;
    const sizeText = buf.subarray(p, lineEnd).toString('latin1').split(';')[0].trim();
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) return { bad: true };
    const size = parseInt(sizeText, 16);
    p = lineEnd + 2;
    if (size === 0) {
      // Trailers, then an empty line.
      for (;;) {
        const e = buf.indexOf('\r\n', p);
        if (e < 0) return null;
        const empty = e === p;
        p = e + 2;
        if (empty) return { body: Buffer.concat(parts), end: p };
      }
    }
    if (buf.length < p + size + 2) return null;
    parts.push(buf.subarray(p, p + size));
    p += size + 2;
  }
}

// Parses as many complete responses from `buf` as there are. A body without length or
// chunking runs to the end of the connection, so it is complete only once `eof`.
// Returns {responses, partial (an incomplete response follows), garbage (bytes that are not
// a response)}. Each response: {version, status, reason, headers: [[lower-name, value]],
// header(name), headerAll(name), chunked, body (Buffer), text, json}.
export function parseResponses(buf, eof) {
  const responses = [];
  let pos = 0;
  while (pos < buf.length) {
    const headEnd = buf.indexOf('\r\n\r\n', pos);
    if (headEnd < 0) {
      const garbage = !/^HTTP\/\d/.test(buf.subarray(pos, pos + 6).toString('latin1')) && buf.length - pos >= 6;
      return { responses, partial: !garbage, garbage };
    }
    const lines = buf.subarray(pos, headEnd).toString('latin1').split('\r\n');
    const m = /^HTTP\/(\d\.\d) (\d{3})(?: (.*))?$/.exec(lines[0]);
    if (!m) return { responses, partial: false, garbage: true };
    const headers = lines.slice(1).map((l) => {
      const i = l.indexOf(':');
      return [l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim()];
    });
    const headerAll = (n) => headers.filter(([k]) => k === n.toLowerCase()).map(([, v]) => v);
    const header = (n) => headerAll(n)[0];
    const status = Number(m[2]);
    let p = headEnd + 4;
    let body = Buffer.alloc(0);
    const chunked = /\bchunked\b/i.test(headerAll('transfer-encoding').join(','));
    if (status < 200 || status === 204 || status === 304) {
      // no body
    } else if (chunked) {
      const d = dechunk(buf, p);
      if (!d) return { responses, partial: true, garbage: false };
      if (d.bad) return { responses, partial: false, garbage: true };
      body = d.body;
      p = d.end;
    } else if (header('content-length') !== undefined) {
      const n = Number(header('content-length'));
      if (buf.length < p + n) return { responses, partial: true, garbage: false };
      body = buf.subarray(p, p + n);
      p += n;
    } else {
      if (!eof) return { responses, partial: true, garbage: false };
      body = buf.subarray(p);
      p = buf.length;
    }
    const text = body.toString('utf8');
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    responses.push({ version: m[1], status, reason: m[3] || '', headers, header, headerAll, chunked, body, text, json });
    pos = p;
  }
  return { responses, partial: false, garbage: false };
}

// ------------------------------------------------------------------ request builders

export function httpRequest(method, urlPath, { headers = {}, body, version = '1.1', key } = {}) {
  const lines = [`${method} ${urlPath} HTTP/${version}`, 'Host: 127.0.0.1'];
  if (key) lines.push(`Authorization: Bearer ${key}`);
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  let b = body;
  if (b !== undefined && typeof b !== 'string' && !Buffer.isBuffer(b)) b = JSON.stringify(b);
  if (b !== undefined && !Object.keys(headers).some((k) => /^(content-length|transfer-encoding)$/i.test(k))) {
    lines.push(`Content-Length: ${Buffer.byteLength(b)}`);
  }
  const head = `${lines.join('\r\n')}\r\n\r\n`;
  return b === undefined ? Buffer.from(head, 'latin1') : Buffer.concat([Buffer.from(head, 'latin1'), Buffer.from(b)]);
}

export function chunk(data) {
  const b = Buffer.isBuffer(data) ? data : Buffer.from(data);
  return Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]);
}
export const LAST_CHUNK = Buffer.from('0\r\n\r\n');

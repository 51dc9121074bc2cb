// Task endpoint benchmark (issue #15): embedding inputs/s at 32, 128 and 512 tokens, batched
// (16 inputs in one request) and one by one (16 requests in turn); rerank documents/s (16
// documents of ~100 tokens per request); decision latency with 2 and 10 options against one
// chat completion token on the same prompt. Give two binaries to compare them: every cell runs
// each binary in turn, ROUNDS times, alternating the order, and reports the median.
//
//   node bench/serve/tasks.mjs EMBED_DIR RERANK_DIR CHAT_DIR TESSERA [OTHER_TESSERA] [--rounds R]
//
// The models are meant to be the synthetic presets at the real shapes (tessera synth --preset
// qwen3-embedding-0.6b / qwen3-reranker-0.6b / qwen3-0.6b); every server runs them on the cpu
// backend in their checkpoint's format, --no-auth, --rate-limit 0. Prints Markdown rows.
import { spawn } from 'node:child_process';

const args = process.argv.slice(2);
let rounds = 3;
const roundsAt = args.indexOf('--rounds');
if (roundsAt >= 0) { rounds = Number(args[roundsAt + 1]); args.splice(roundsAt, 2); }
const [embed, rerank, chat, ...bins] = args;
if (!bins.length) {
  console.error('usage: tasks.mjs EMBED_DIR RERANK_DIR CHAT_DIR TESSERA [OTHER] [--rounds R]');
  process.exit(2);
}

function start(bin) {
  const child = spawn(bin, ['serve', '--port', '0', '--no-auth', '--rate-limit', '0',
    '--max-loaded-models', '3', '--max-queued', '64', '--model', `emb=${embed}`,
    '--model', `rr=${rerank}`, '--kind', 'rr=rerank', '--model', `chat=${chat}`],
  { stdio: ['ignore', 'pipe', 'ignore'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve({ child, base: `http://127.0.0.1:${m[1]}` });
    });
    child.on('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
}

async function post(base, path, body) {
  const res = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json' } });
  const json = await res.json();
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const words = ('the river moved slowly past old mill and a small boat waited by stone steps ' +
  'boy who owned it sat on wall with his shoes beside him market town across water mother sold ' +
  'bread sister counted coins into wooden box').split(' ');
// n pseudo-random words from `seed` (a linear congruential generator): texts of different seeds
// share no prefix, so no request finds another's prompt in the prefix cache.
function text(n, seed) {
  let x = (seed * 2654435761 + 12345) >>> 0;
  return Array.from({ length: n }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return words[x % words.length];
  }).join(' ');
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const now = () => performance.now();

const measured = {};  // what the requests reported, printed after the table
// Each cell: name -> async (base) => value (higher or lower is better, as labelled).
const cells = [];
for (const tokens of [32, 128, 512]) {
  // The synthetic tokenizer gives ~1.9 tokens a word here (the measured counts are printed);
  // each round its own texts, so no round finds another's prefix cached.
  const batch = (round) => Array.from({ length: 16 },
    (_, i) => text(Math.round(tokens / 1.9), 1 + i + 17 * round + 1000 * tokens));
  cells.push({ name: `embeddings ${tokens} tok, batched (16 per request)`, unit: 'inputs/s', run: async (base, round) => {
    const inputs = batch(round);
    const t0 = now();
    const r = await post(base, '/v1/embeddings', { model: 'emb', input: inputs });
    const seconds = (now() - t0) / 1000;
    measured[`embedding input tokens, mean (nominal ${tokens})`] = r.usage.prompt_tokens / 16;
    measured[`cached tokens of the ${tokens}-token batch`] = r.x_tessera_stats.cached_tokens;
    return 16 / seconds;
  } });
  cells.push({ name: `embeddings ${tokens} tok, one by one`, unit: 'inputs/s', run: async (base, round) => {
    const inputs = batch(round + 1000);
    const t0 = now();
    for (const input of inputs) await post(base, '/v1/embeddings', { model: 'emb', input });
    return 16 / ((now() - t0) / 1000);
  } });
}
cells.push({ name: 'rerank 16 documents of ~100 tokens', unit: 'documents/s', run: async (base, round) => {
  const docs = Array.from({ length: 16 }, (_, i) => text(50, 500000 + i + 17 * round));
  const t0 = now();
  await post(base, '/v1/rerank', { model: 'rr', query: 'where is the mill?', documents: docs });
  return 16 / ((now() - t0) / 1000);
} });
const question = (round) => [{ role: 'user', content: `${text(40, 900000 + round)}. Is the mill by the river?` }];
for (const n of [2, 10]) {
  const options = Array.from({ length: n }, (_, i) => (i === 0 ? 'yes' : i === 1 ? 'no' : `maybe ${i}`));
  cells.push({ name: `decision, ${n} options`, unit: 'ms', run: async (base, round) => {
    const t0 = now();
    await post(base, '/v1/chat/completions', { model: 'chat', messages: question(round + 100 * n),
      response_format: { type: 'json_schema', json_schema: { name: 'd', schema: { enum: options } } } });
    return now() - t0;
  } });
}
cells.push({ name: 'one chat completion token (the same prompt)', unit: 'ms', run: async (base, round) => {
  const t0 = now();
  await post(base, '/v1/chat/completions', { model: 'chat', messages: question(round + 999), max_tokens: 1 });
  return now() - t0;
} });

const servers = [];
for (const bin of bins) servers.push(await start(bin));
try {
  for (const s of servers) {  // load and warm every model once
    await post(s.base, '/v1/embeddings', { model: 'emb', input: 'warm' });
    await post(s.base, '/v1/rerank', { model: 'rr', query: 'q', documents: ['warm'] });
    await post(s.base, '/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
  }
  console.log(`| cell | unit | ${bins.map((b, i) => `binary ${i + 1}`).join(' | ')} |`);
  console.log(`|---|---|${bins.map(() => '---').join('|')}|`);
  for (const cell of cells) {
    const values = bins.map(() => []);
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [...servers.keys()] : [...servers.keys()].reverse();
      for (const i of order) {
        values[i].push(await cell.run(servers[i].base, r));
      }
    }
    console.log(`| ${cell.name} | ${cell.unit} | ${values.map((v) => median(v).toFixed(1)).join(' | ')} |`);
  }
  for (const [k, v] of Object.entries(measured)) console.log(`${k}: ${v}`);
} finally {
  for (const s of servers) s.child.kill('SIGTERM');
}

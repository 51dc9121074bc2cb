// Many users against `tessera serve`, measured with the official openai client:
//   1. streams: N concurrent streamed completions (N from --concurrency), each with its own
//      prompt of about --prompt-tokens tokens and --gen-tokens greedy tokens: aggregate decode
//      tok/s (tokens after each stream's first / the time from the last first token to the last
//      token) and all tokens / wall time; TTFT p50 and p99 from the client's clock.
//   2. interference: 4 streams decode while one --long-tokens prompt arrives; the largest gap
//      between two tokens of the running streams while it is prefilled, against their median
//      gap before it arrived.
//   3. prefix: a --system-tokens system prompt, then a second request with another question:
//      TTFT of each and the cached tokens the second reports.
//   4. structured: decode tok/s (the server's x_tessera_stats) of the same request with and
//      without a json_schema response_format, alternating, medians.
//   node many_users.mjs --base http://127.0.0.1:PORT --model NAME [--concurrency 1,4,8]
//                       [--prompt-tokens 32] [--gen-tokens 64] [--rounds 3] [--skip 2,3,4]
import OpenAI from 'openai';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const base = args.base;
const model = args.model;
const concurrency = (args.concurrency ?? '1,4,8').split(',').map(Number);
const promptTokens = Number(args['prompt-tokens'] ?? 32);
const genTokens = Number(args['gen-tokens'] ?? 64);
const rounds = Number(args.rounds ?? 3);
const longTokens = Number(args['long-tokens'] ?? 4000);
const systemTokens = Number(args['system-tokens'] ?? 2000);
const skip = new Set((args.skip ?? '').split(',').filter(Boolean).map(Number));
const client = new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 0, timeout: 600000 });

const words = ['river', 'stone', 'garden', 'light', 'orange', 'music', 'window', 'forest', 'cloud',
               'paper', 'silver', 'dance', 'winter', 'bridge', 'candle', 'ocean'];
// Text of about n tokens (calibrated with the server's own tokenizer), distinct per salt.
async function textOf(n, salt) {
  const make = (count) => Array.from({ length: count }, (_, i) => words[(i * 7 + salt * 13 + (i >> 3)) % words.length]).join(' ');
  let count = n;
  for (let i = 0; i < 4; i++) {
    const r = await fetch(`${base}/tokenize`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                body: JSON.stringify({ model, prompt: make(count) }) });
    const got = (await r.json()).count;
    if (Math.abs(got - n) <= Math.max(2, n / 100)) break;
    count = Math.max(1, Math.round(count * n / got));
  }
  return make(count);
}

const median = (v) => { const s = [...v].sort((a, b) => a - b); return s.length ? s[Math.floor((s.length - 1) / 2)] : 0; };
const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.round(p / 100 * (s.length - 1)))] : 0; };

// One streamed completion; token arrival times (one per chunk with text or a token).
async function stream(prompt, maxTokens, extra = {}) {
  const t0 = performance.now();
  const times = [];
  let usage = null;
  const s = await client.completions.create({ model, prompt, max_tokens: maxTokens, temperature: 0, stream: true,
                                              stream_options: { include_usage: true }, ...extra });
  for await (const chunk of s) {
    if (chunk.choices.length && chunk.choices[0].finish_reason == null) times.push(performance.now());
    if (chunk.usage) usage = chunk.usage;
  }
  return { t0, times, usage };
}

const out = { model, prompt_tokens: promptTokens, gen_tokens: genTokens, rounds };

if (!skip.has(1)) {
  out.streams = {};
  const prompts = [];
  for (let i = 0; i < Math.max(...concurrency) * rounds; i++) prompts.push(await textOf(promptTokens, i));
  await stream(prompts[0], 4);  // warm
  for (const n of concurrency) {
    const decode = [], total = [], ttft = [];
    for (let r = 0; r < rounds; r++) {
      const start = performance.now();
      const res = await Promise.all(Array.from({ length: n }, (_, i) => stream(prompts[r * n + i], genTokens)));
      const end = performance.now();
      let tokens = 0, firstMax = 0;
      for (const x of res) {
        tokens += x.usage.completion_tokens;
        ttft.push(x.times[0] - x.t0);
        firstMax = Math.max(firstMax, x.times[0]);
      }
      decode.push((tokens - n) / ((end - firstMax) / 1000));
      total.push(tokens / ((end - start) / 1000));
    }
    out.streams[n] = { decode_tok_s: median(decode), total_tok_s: median(total), ttft_p50_ms: pct(ttft, 50), ttft_p99_ms: pct(ttft, 99) };
    console.error(`streams ${n}: decode ${median(decode).toFixed(1)} tok/s, total ${median(total).toFixed(1)} tok/s, ttft p50 ${pct(ttft, 50).toFixed(1)} ms p99 ${pct(ttft, 99).toFixed(1)} ms`);
  }
}

if (!skip.has(2)) {
  const longPrompt = await textOf(longTokens, 99);
  const running = [0, 1, 2, 3].map((i) => stream(`${i} ` + words.join(' '), 400));
  await new Promise((r) => setTimeout(r, 1500));
  const arrive = performance.now();
  const long = await stream(longPrompt, 1);
  const longDone = long.times[0] ?? performance.now();
  const res = await Promise.all(running);
  const before = [], during = [];
  for (const x of res) {
    for (let k = 1; k < x.times.length; k++) {
      const gap = x.times[k] - x.times[k - 1];
      if (x.times[k] < arrive) before.push(gap);
      else if (x.times[k - 1] >= arrive && x.times[k] <= longDone) during.push(gap);
    }
  }
  out.interference = { long_prompt_tokens: long.usage?.prompt_tokens, ttft_long_ms: longDone - arrive,
                       median_gap_before_ms: median(before), max_gap_during_ms: Math.max(...during),
                       median_gap_during_ms: median(during) };
  console.error(`interference: ${JSON.stringify(out.interference)}`);
}

if (!skip.has(3)) {
  const system = await textOf(systemTokens, 7);
  const ask = async (q) => {
    const t0 = performance.now();
    let first = 0, usage = null;
    const s = await client.chat.completions.create({ model, messages: [{ role: 'system', content: system }, { role: 'user', content: q }],
                                                     max_tokens: 4, temperature: 0, stream: true, stream_options: { include_usage: true } });
    for await (const c of s) {
      if (!first && c.choices.length && c.choices[0].delta.content !== undefined && c.choices[0].delta.role === undefined) first = performance.now();
      if (c.usage) usage = c.usage;
    }
    return { ttft: (first || performance.now()) - t0, usage };
  };
  const a = await ask('What is the first word?');
  const b = await ask('And which word comes last of all?');
  out.prefix = { system_prompt_tokens: a.usage.prompt_tokens, ttft_first_ms: a.ttft, ttft_second_ms: b.ttft,
                 second_cached_tokens: b.usage.prompt_tokens_details?.cached_tokens, ratio: b.ttft / a.ttft };
  console.error(`prefix: ${JSON.stringify(out.prefix)}`);
}

if (!skip.has(4)) {
  const schema = { type: 'object', properties: { title: { type: 'string', maxLength: 200 }, year: { type: 'integer', minimum: 1900, maximum: 2100 },
                   tags: { type: 'array', items: { type: 'string', maxLength: 40 }, maxItems: 8 }, rating: { type: 'number' } },
                   required: ['title', 'year', 'tags', 'rating'], additionalProperties: false };
  const plain = [], constrained = [];
  for (let r = 0; r < rounds * 2; r++) {
    for (const withSchema of r % 2 ? [true, false] : [false, true]) {
      const res = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Describe a film.' }], max_tokens: 128,
                                                        temperature: 0.8, seed: r,
                                                        ...(withSchema ? { response_format: { type: 'json_schema', json_schema: { name: 'film', schema } } } : {}) });
      (withSchema ? constrained : plain).push(res.x_tessera_stats.decode_tok_s);
    }
  }
  out.structured = { plain_decode_tok_s: median(plain), schema_decode_tok_s: median(constrained), ratio: median(constrained) / median(plain) };
  console.error(`structured: ${JSON.stringify(out.structured)}`);
}

console.log(JSON.stringify(out));

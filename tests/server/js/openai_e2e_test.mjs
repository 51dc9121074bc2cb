// End-to-end test of `tessera serve` with the official `openai` npm package: list models,
// chat non-streamed and streamed (with usage), seeded sampling reproduced exactly, logprobs
// consistent with the greedy choice, stop strings honoured, errors surfaced as APIError.
//   node openai_e2e_test.mjs TESSERA TINY_MODEL STORIES_MODEL
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { runTests, serveReady } from './harness.mjs';

const [tessera, tiny, stories] = process.argv.slice(2);
const apiKey = 'js-test-key';

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('models.list', async (client) => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, ['tiny', 'stories']);
});

test('models.retrieve', async (client) => {
  const m = await client.models.retrieve('stories');
  assert.equal(m.id, 'stories');
  assert.equal(m.object, 'model');
  assert.equal(m.owned_by, 'tessera');
  await assert.rejects(client.models.retrieve('no-such-model'),
                       (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
});

test('chat non-streamed', async (client) => {
  const r = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 6 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.usage.completion_tokens, 6);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 6);
  assert.equal(r.x_tessera_stats.sampling.mode, 'greedy');
});

test('chat streamed with usage equals non-streamed', async (client) => {
  const body = { model: 'tiny', messages: [{ role: 'user', content: 'Tell me' }], max_tokens: 10, temperature: 0 };
  const plain = await client.chat.completions.create(body);
  const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.choices.length) {
      text += chunk.choices[0].delta.content ?? '';
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(finish, plain.choices[0].finish_reason);
  const counts = (u) => [u.prompt_tokens, u.completion_tokens, u.total_tokens];
  assert.deepEqual(counts(usage), counts(plain.usage));
  // The same prompt again: its cache is reused, all of it but the last two tokens (the last
  // one's logits choose the first reply token, and it runs as a prompt row, as uncached).
  assert.equal(usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens - 2);
});

test('seeded sampling reproduces exactly', async (client) => {
  const body = { model: 'stories', prompt: 'Once upon a time', max_tokens: 30, temperature: 1.0, top_p: 0.95, seed: 1234 };
  const a = await client.completions.create(body);
  const b = await client.completions.create(body);
  const c = await client.completions.create({ ...body, seed: 99 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.notEqual(a.choices[0].text, c.choices[0].text);
  assert.equal(a.x_tessera_stats.sampling.mode, 'sample');
  assert.equal(a.x_tessera_stats.sampling.seed, 1234);
  assert.equal(a.x_tessera_stats.sampling.top_p, 0.95);
  const chatBody = { model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 12, temperature: 1.5, seed: 7 };
  const x = await client.chat.completions.create(chatBody);
  const y = await client.chat.completions.create(chatBody);
  assert.equal(x.choices[0].message.content, y.choices[0].message.content);
  // Without a seed the server draws one and reports it; replaying it gives the same text.
  const drawn = await client.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 20, temperature: 1 });
  assert.equal(drawn.x_tessera_stats.sampling.seed_generated, true);
  const replay = await client.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 20, temperature: 1,
                                                   seed: drawn.x_tessera_stats.sampling.seed });
  assert.equal(replay.choices[0].text, drawn.choices[0].text);
});

test('logprobs consistent with the greedy choice', async (client) => {
  const r = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello there' }],
                                                   max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const t of content) {
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.token, t.top_logprobs[0].token);        // greedy picks the most likely
    assert.equal(t.logprob, t.top_logprobs[0].logprob);
    assert.ok(t.logprob <= 0);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
  }
  const s = await client.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 10, logprobs: 2 });
  assert.equal(s.choices[0].logprobs.tokens.join(''), s.choices[0].text);
});

test('stop strings honoured, streamed and not', async (client) => {
  const base = { model: 'stories', prompt: 'Once upon a time', max_tokens: 60 };
  const full = (await client.completions.create(base)).choices[0].text;
  for (const stop of ['Lily', ' was', 'play']) {
    assert.ok(full.includes(stop), `the reference text contains ${stop}`);
    const cut = full.slice(0, full.indexOf(stop));
    const r = await client.completions.create({ ...base, stop: [stop, 'zzzz'] });
    assert.equal(r.choices[0].text, cut);
    assert.equal(r.choices[0].finish_reason, 'stop');
    let streamed = '';
    for await (const chunk of await client.completions.create({ ...base, stop, stream: true })) {
      if (chunk.choices.length) streamed += chunk.choices[0].text;
    }
    assert.equal(streamed, cut);
  }
});

test('errors are APIErrors with OpenAI fields', async (client) => {
  await assert.rejects(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }),
                       (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  await assert.rejects(client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], top_p: 7 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'top_p');
  const bad = new OpenAI({ apiKey: 'wrong', baseURL: client.baseURL, maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
});

const { child, base } = await serveReady(
  tessera, ['--placement', 'reference', '--rate-limit', '1000', '--model', `tiny=${tiny}`,
            '--model', `stories=${stories}`, '--max-loaded-models', '2'],
  { TESSERA_API_KEY: apiKey });
await runTests(tests, new OpenAI({ apiKey, baseURL: `${base}/v1`, maxRetries: 0, timeout: 60000 }), child);

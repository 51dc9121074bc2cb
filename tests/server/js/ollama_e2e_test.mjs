// End-to-end test of Ollama's API on tessera's port with the official `ollama` npm package
// (0.6.4, locked in package-lock.json) unmodified: version, list, show, ps, chat streamed and
// not, generate (through the chat template, raw, and on a completion model), format, embed and
// the older embeddings, a conversation with Ollama-shaped tool calls on the Qwen2.5 template,
// and the refusals (an unknown option named, the store-changing calls' 501 and a registry name
// given to /api/pull, errors in Ollama's shape). The models are tiny and random: shapes, counts
// and equalities are checked, not text.
//   node ollama_e2e_test.mjs TESSERA E2E_WORK_DIR STORIES_MODEL   (E2E_WORK_DIR: tiny/, embed/, qwen/)
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { ollamaRefused, runTests, serveReady } from './harness.mjs';

const [tessera, work, stories] = process.argv.slice(2);
const apiKey = 'ollama-test-key';
const tests = [];
const test = (name, fn) => tests.push({ name, fn });
let base = '';

const hello = [{ role: 'user', content: 'Hello there' }];
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

// The request is refused with `status`, the error (Ollama's {"error": "..."}) naming `words`.
const refused = ollamaRefused;

// The final object's counters, as every answer ends.
function checkDone(r, evalCount) {
  assert.equal(r.done, true);
  assert.ok(['stop', 'length'].includes(r.done_reason), r.done_reason);
  assert.ok(r.prompt_eval_count > 0);
  if (evalCount !== undefined) assert.equal(r.eval_count, evalCount);
  for (const d of ['total_duration', 'prompt_eval_duration', 'eval_duration']) {
    assert.ok(Number.isInteger(r[d]) && r[d] > 0, `${d}: ${r[d]}`);
  }
  assert.ok(r.total_duration >= r.eval_duration);
  assert.ok(!Number.isNaN(Date.parse(r.created_at)), r.created_at);
}

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

test('version', async (ollama) => {
  const v = await ollama.version();
  assert.match(v.version, /^\d+\.\d+\.\d+/);
});

test('list: every served model with its details', async (ollama) => {
  const { models } = await ollama.list();
  assert.deepEqual(models.map((m) => m.name), ['tiny', 'emb', 'qwen', 'stories']);
  for (const m of models) {
    assert.equal(m.model, m.name);
    assert.match(m.digest, /^[0-9a-f]{64}$/);
    assert.ok(m.size > 0);
    assert.ok(!Number.isNaN(Date.parse(m.modified_at)));
    assert.equal(m.details.format, 'safetensors');
    assert.ok(m.details.family.length > 0);
    assert.match(m.details.parameter_size, /^\d+(\.\d+)?[KMB]$/);
  }
  assert.equal(models[0].details.family, 'llama');
  assert.equal(models[2].details.family, 'qwen2');
});

test('show: template, model_info, capabilities; an unknown model is a 404', async (ollama) => {
  const tiny = await ollama.show({ model: 'tiny' });
  assert.ok(tiny.template.includes('<|im_start|>'));
  assert.equal(tiny.details.family, 'llama');
  assert.equal(tiny.model_info['general.architecture'], 'llama');
  assert.ok(tiny.model_info['general.parameter_count'] > 0);
  assert.equal(tiny.model_info['llama.embedding_length'], 64);
  assert.deepEqual(tiny.capabilities, ['completion']);
  assert.ok(tiny.modelfile.includes('FROM tiny'));
  const latest = await ollama.show({ model: 'tiny:latest' });  // Ollama's default tag
  assert.deepEqual(latest.details, tiny.details);
  assert.deepEqual((await ollama.show({ model: 'emb' })).capabilities, ['embedding']);
  await refused(ollama.show({ model: 'no-such-model' }), 404, 'no-such-model');
});

test('ps: the served models, none on a GPU', async (ollama) => {
  const { models } = await ollama.ps();
  assert.equal(models.length, 4);
  for (const m of models) {
    assert.equal(m.size_vram, 0);
    assert.ok(Date.parse(m.expires_at) > Date.now());
  }
});

test('chat non-streamed', async (ollama) => {
  const r = await ollama.chat({ model: 'tiny', messages: hello, options: { num_predict: 6, temperature: 0 } });
  assert.equal(r.model, 'tiny');
  assert.equal(r.message.role, 'assistant');
  assert.equal(typeof r.message.content, 'string');
  assert.equal(r.done_reason, 'length');
  checkDone(r, 6);
});

test('chat streamed equals non-streamed, ending with done', async (ollama) => {
  const request = { model: 'tiny', messages: hello, options: { num_predict: 8, temperature: 0 } };
  const whole = await ollama.chat(request);
  const parts = await collect(await ollama.chat({ ...request, stream: true }));
  assert.ok(parts.length >= 2);
  const last = parts.at(-1);
  assert.ok(parts.slice(0, -1).every((p) => p.done === false && p.message.role === 'assistant'));
  assert.equal(parts.map((p) => p.message.content).join(''), whole.message.content);
  checkDone(last, 8);
  assert.equal(last.done_reason, whole.done_reason);
  assert.equal(last.prompt_eval_count, whole.prompt_eval_count);
});

test('chat: logprobs, one per answer token', async (ollama) => {
  const r = await ollama.chat({ model: 'tiny', messages: hello, logprobs: true, top_logprobs: 2, options: { num_predict: 4, temperature: 0 } });
  assert.equal(r.logprobs.length, r.eval_count);
  assert.equal(r.logprobs.map((l) => l.token).join(''), r.message.content);
  for (const l of r.logprobs) {
    assert.equal(l.top_logprobs.length, 2);
    assert.equal(l.top_logprobs[0].token, l.token);  // greedy: the likeliest token
  }
});

test('chat: seeded sampling repeats; stop ends the answer', async (ollama) => {
  const request = { model: 'tiny', messages: hello, options: { num_predict: 10, temperature: 1, seed: 7, top_k: 40, top_p: 0.9 } };
  const a = await ollama.chat(request);
  const b = await ollama.chat(request);
  assert.equal(a.message.content, b.message.content);
  const greedy = await ollama.chat({ model: 'tiny', messages: hello, options: { num_predict: 10, temperature: 0 } });
  const text = greedy.message.content;
  if (text.length > 2) {
    const stop = text.slice(1, 2);
    const cut = await ollama.chat({ model: 'tiny', messages: hello, options: { num_predict: 10, temperature: 0, stop: [stop] } });
    assert.equal(cut.message.content, text.slice(0, text.indexOf(stop)));
  }
});

test('generate: through the chat template, streamed and not', async (ollama) => {
  const request = { model: 'tiny', prompt: 'Hello there', options: { num_predict: 5, temperature: 0 } };
  const whole = await ollama.generate(request);
  assert.equal(typeof whole.response, 'string');
  checkDone(whole, 5);
  const parts = await collect(await ollama.generate({ ...request, stream: true }));
  assert.equal(parts.map((p) => p.response).join(''), whole.response);
  checkDone(parts.at(-1), 5);
  // The same conversation through /api/chat gives the same tokens.
  const chat = await ollama.chat({ model: 'tiny', messages: hello, options: request.options });
  assert.equal(chat.message.content, whole.response);
  assert.equal(chat.prompt_eval_count, whole.prompt_eval_count);
  const raw = await ollama.generate({ ...request, raw: true });
  assert.ok(raw.prompt_eval_count < whole.prompt_eval_count);  // no template around it
});

test('generate on a completion model; system needs a template', async (ollama) => {
  const r = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 12, temperature: 0 } });
  assert.ok(r.response.length > 0);
  checkDone(r, 12);
  await refused(ollama.generate({ model: 'stories', prompt: 'x', system: 'Be brief' }), 400, 'system');
});

test('format: a schema choosing among values answers one of them', async (ollama) => {
  const format = { type: 'object', properties: { color: { enum: ['red', 'blue'] } }, required: ['color'] };
  const r = await ollama.chat({ model: 'tiny', messages: hello, format });
  assert.ok(['red', 'blue'].includes(JSON.parse(r.message.content).color), r.message.content);
  await refused(ollama.chat({ model: 'tiny', messages: hello, format: 'yaml' }), 400, 'format');
});

test('embed: a batch, one input, dimensions, and the older embeddings', async (ollama) => {
  const batch = await ollama.embed({ model: 'emb', input: ['bread', 'a small boat waited'] });
  assert.equal(batch.model, 'emb');
  assert.equal(batch.embeddings.length, 2);
  for (const v of batch.embeddings) {
    assert.equal(v.length, 64);
    assert.ok(Math.abs(norm(v) - 1) < 1e-5);
  }
  assert.ok(batch.prompt_eval_count > 2);
  assert.ok(Number.isInteger(batch.total_duration) && batch.total_duration > 0);
  const one = await ollama.embed({ model: 'emb', input: 'bread' });
  assert.deepEqual(one.embeddings[0], batch.embeddings[0]);
  const cut = await ollama.embed({ model: 'emb', input: 'bread', dimensions: 32 });
  assert.equal(cut.embeddings[0].length, 32);
  const legacy = await ollama.embeddings({ model: 'emb', prompt: 'bread' });
  assert.deepEqual(legacy.embedding, batch.embeddings[0]);
  await refused(ollama.embed({ model: 'tiny', input: 'bread' }), 400, 'tiny');
  await refused(ollama.embed({ model: 'emb', input: 'bread', truncate: true }), 400, 'truncate');
});

test('tool calls in Ollama\'s shape render through the Qwen2.5 template', async (ollama) => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const messages = [
    { role: 'user', content: 'Weather in Oslo?' },
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] },
    { role: 'tool', content: '{"celsius": -3}', tool_name: 'get_weather' },
  ];
  const r = await ollama.chat({ model: 'qwen', messages, tools, options: { num_predict: 8, temperature: 0 } });
  checkDone(r);
  // The history's call is in the prompt: removing it shortens the prompt.
  const shorter = await ollama.chat({ model: 'qwen', messages: messages.slice(0, 1), tools, options: { num_predict: 1 } });
  assert.ok(shorter.prompt_eval_count < r.prompt_eval_count);
});

test('an unknown or unsupported option is refused by name', async (ollama) => {
  await refused(ollama.chat({ model: 'tiny', messages: hello, options: { num_ctx: 4096 } }), 400, 'options.num_ctx', '--context');
  await refused(ollama.chat({ model: 'tiny', messages: hello, stream: true, options: { mirostat: 2 } }), 400, 'options.mirostat');
  await refused(ollama.generate({ model: 'tiny', prompt: 'x', options: { no_such_option: 1 } }), 400, 'options.no_such_option');
  await refused(ollama.chat({ model: 'tiny', messages: hello, think: 'high' }), 400, 'think');
  await refused(ollama.chat({ model: 'tiny', messages: [{ role: 'user', content: 'x', images: ['aGk='] }] }), 400, 'images');
});

test('the store-changing calls answer 501 naming what to run', async (ollama) => {
  // /api/pull runs tessera's own pull (ollama_pull_e2e_test.mjs); Ollama's registry names are
  // refused before anything is fetched.
  await refused(ollama.pull({ model: 'qwen2.5:0.5b' }), 400, 'Ollama registry name', 'tessera list --catalog');
  await refused(ollama.delete({ model: 'tiny' }), 501, 'tessera rm');
  await refused(ollama.copy({ source: 'tiny', destination: 'tiny2' }), 501, '--model');
  await refused(ollama.push({ model: 'tiny' }), 501, 'push');
  await refused(ollama.create({ model: 'x', from: 'tiny' }), 501, 'create');
});

test('errors in Ollama\'s shape: unknown model, chat on an embedding model, wrong key', async (ollama) => {
  await refused(ollama.chat({ model: 'nope', messages: hello }), 404, 'nope');
  await refused(ollama.chat({ model: 'emb', messages: hello }), 400, 'emb');
  const stranger = new Ollama({ host: base, headers: { Authorization: 'Bearer wrong' } });
  await refused(stranger.list(), 401, 'API key');
  // The stream's media type, as Ollama's.
  const res = await fetch(`${base}/api/chat`, { method: 'POST', headers: { Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model: 'tiny', messages: hello, options: { num_predict: 2 } }) });
  assert.equal(res.headers.get('content-type'), 'application/x-ndjson');
  const lines = (await res.text()).trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.at(-1).done, true);
});

const server = await serveReady(
  tessera, ['--rate-limit', '0', '--model', `tiny=${work}/tiny`, '--model', `emb=${work}/embed`,
            '--model', `qwen=${work}/qwen`, '--model', `stories=${stories}`, '--max-loaded-models', '4'],
  { TESSERA_API_KEY: apiKey });
const { child } = server;
base = server.base;
await runTests(tests, new Ollama({ host: base, headers: { Authorization: `Bearer ${apiKey}` } }), child);

// End-to-end test of many users at once, with the official `openai` npm package against
// `tessera serve --parallel 8`: 8 concurrent streams with different prompts and sampling
// settings give exactly what each gives alone, and aborting one leaves the others intact; n
// choices; structured outputs (json_object, json_schema) always parse and validate; a tool
// call round trip (tool call -> tool result -> final answer) on a model with the real Qwen2.5
// tokenizer and chat template; the prefix cache reported in usage.
//   node many_users_e2e_test.mjs TESSERA STORIES_MODEL QWEN_TEMPLATE_MODEL
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { runTests, serveReady } from './harness.mjs';

const [tessera, stories, qwen] = process.argv.slice(2);

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

// Request i of the concurrency test: its own prompt, length and sampling.
function storyRequest(i) {
  const prompts = ['Once upon a time', 'Lily', 'The dog', 'One day, a little', 'Tim had a big',
                   'The sun', 'She was happy', 'In the park there was a'];
  const body = { model: 'stories', prompt: prompts[i], max_tokens: 20 + 7 * i };
  if (i % 2 === 1) Object.assign(body, { temperature: 0.8, top_k: 40, seed: 100 + i });
  else body.temperature = 0;
  return body;
}

async function streamText(client, body, options = {}) {
  let text = '';
  let finish = null;
  const stream = await client.completions.create({ ...body, stream: true }, options);
  for await (const chunk of stream) {
    if (chunk.choices.length) {
      text += chunk.choices[0].text;
      finish = chunk.choices[0].finish_reason ?? finish;
    }
  }
  return { text, finish };
}

test('8 concurrent streams equal each alone; an aborted one leaves the others intact', async (client) => {
  const alone = [];
  for (let i = 0; i < 8; i++) alone.push(await streamText(client, storyRequest(i)));
  const together = await Promise.all([...Array(8).keys()].map((i) => streamText(client, storyRequest(i))));
  for (let i = 0; i < 8; i++) assert.deepEqual(together[i], alone[i], `stream ${i}`);
  // Abort stream 3 after its first chunks; the rest finish exactly as alone.
  const controller = new AbortController();
  const runs = [...Array(8).keys()].map((i) => {
    if (i !== 3) return streamText(client, storyRequest(i));
    return (async () => {
      const body = { ...storyRequest(3), max_tokens: 200, stream: true };
      const stream = await client.completions.create(body, { signal: controller.signal });
      let n = 0;
      try {
        for await (const chunk of stream) { if (++n === 3) controller.abort(); void chunk; }
      } catch { /* aborted */ }
      return null;
    })();
  });
  const results = await Promise.all(runs);
  for (let i = 0; i < 8; i++) if (i !== 3) assert.deepEqual(results[i], alone[i], `stream ${i} with 3 aborted`);
});

test('n choices: greedy ones agree, seeded ones differ and replay', async (client) => {
  const greedy = await client.completions.create({ model: 'stories', prompt: 'Lily', max_tokens: 12, temperature: 0, n: 3 });
  assert.equal(greedy.choices.length, 3);
  assert.deepEqual(greedy.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of greedy.choices) assert.equal(c.text, greedy.choices[0].text);
  assert.equal(greedy.usage.completion_tokens, 36);
  const body = { model: 'stories', prompt: 'Lily', max_tokens: 24, temperature: 1.0, seed: 7, n: 4 };
  const a = await client.completions.create(body);
  const b = await client.completions.create(body);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.ok(new Set(a.choices.map((c) => c.text)).size > 1, 'seeded choices differ');
  // Streamed: every choice's chunks carry its index and add up to the same texts.
  const texts = ['', '', '', ''];
  for await (const chunk of await client.completions.create({ ...body, stream: true })) {
    for (const c of chunk.choices) texts[c.index] += c.text;
  }
  assert.deepEqual(texts, a.choices.map((c) => c.text));
});

// A small independent validator for the schemas below.
function validate(value, schema) {
  if (schema.enum) return schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value));
  switch (schema.type) {
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
      for (const k of schema.required ?? []) if (!(k in value)) return false;
      for (const [k, v] of Object.entries(value)) {
        if (!(k in (schema.properties ?? {}))) return false;
        if (!validate(v, schema.properties[k])) return false;
      }
      return true;
    }
    case 'array':
      return Array.isArray(value) && value.length >= (schema.minItems ?? 0) &&
             value.length <= (schema.maxItems ?? Infinity) && value.every((v) => validate(v, schema.items));
    case 'string':
      // JSON Schema counts characters (code points), not UTF-16 units.
      return typeof value === 'string' && [...value].length <= (schema.maxLength ?? Infinity);
    case 'integer':
      return Number.isInteger(value) && value >= (schema.minimum ?? -Infinity) && value <= (schema.maximum ?? Infinity);
    case 'boolean':
      return typeof value === 'boolean';
    default:
      return false;
  }
}

test('structured outputs always parse and validate', async (client) => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 12 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      tags: { type: 'array', items: { type: 'string', maxLength: 6 }, minItems: 1, maxItems: 3 },
      mood: { enum: ['happy', 'sad', 'calm'] },
      ok: { type: 'boolean' },
    },
    required: ['name', 'age', 'tags', 'mood', 'ok'],
    additionalProperties: false,
  };
  for (let seed = 1; seed <= 4; seed++) {
    const r = await client.chat.completions.create({
      model: 'qwen', messages: [{ role: 'user', content: 'Describe a person.' }], max_tokens: 200,
      temperature: 1.0, seed, response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    const value = JSON.parse(r.choices[0].message.content);
    assert.ok(validate(value, schema), r.choices[0].message.content);
    assert.deepEqual(Object.keys(value), Object.keys(schema.properties), 'keys in the schema order');
    assert.equal(r.choices[0].finish_reason, 'stop');
  }
  const obj = await client.chat.completions.create({
    model: 'qwen', messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 300, temperature: 0.7, seed: 3,
    response_format: { type: 'json_object' },
  });
  if (obj.choices[0].finish_reason === 'stop') {
    const v = JSON.parse(obj.choices[0].message.content);
    assert.equal(typeof v, 'object');
  }
  await assert.rejects(client.chat.completions.create({
    model: 'qwen', messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: {} } } },
  }), (e) => e instanceof OpenAI.BadRequestError && /patternProperties/.test(e.message));
});

test('tool call round trip with the Qwen2.5 template', async (client) => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
                    required: ['city', 'days'], additionalProperties: false },
    },
  }, {
    type: 'function',
    function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'] } },
  }];
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const first = await client.chat.completions.create({ model: 'qwen', messages, tools, tool_choice: 'required', max_tokens: 100, temperature: 0.8, seed: 5 });
  const choice = first.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  assert.equal(call.type, 'function');
  const fn = tools.find((t) => t.function.name === call.function.name);
  assert.ok(fn, `a known function: ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(validate(args, { ...fn.function.parameters, type: 'object' }), call.function.arguments);

  // A named function, streamed: the call arrives as delta.tool_calls.
  let streamed = null;
  let finish = null;
  const stream = await client.chat.completions.create({
    model: 'qwen', messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
    max_tokens: 100, temperature: 0.8, seed: 6, stream: true });
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    finish = c.finish_reason ?? finish;
    for (const t of c.delta.tool_calls ?? []) {
      if (t.id) streamed = { id: t.id, name: t.function.name, arguments: '' };
      streamed.arguments += t.function.arguments ?? '';
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(streamed.name, 'get_weather');
  assert.ok(validate(JSON.parse(streamed.arguments), tools[0].function.parameters), streamed.arguments);

  // The tool's result goes back; the model answers in text.
  const followup = [...messages, choice.message, { role: 'tool', tool_call_id: call.id, content: '{"temp_c": 21}' }];
  const final = await client.chat.completions.create({ model: 'qwen', messages: followup, tools, tool_choice: 'none', max_tokens: 8, temperature: 0 });
  assert.equal(typeof final.choices[0].message.content, 'string');
  assert.equal(final.choices[0].message.tool_calls, undefined);
  // tool_choice none renders no tools (so no call markup can appear in content); the call and
  // its result make the prompt longer than the question alone.
  const question = await client.chat.completions.create({ model: 'qwen', messages, tools, tool_choice: 'none', max_tokens: 1 });
  assert.ok(final.usage.prompt_tokens > question.usage.prompt_tokens + 10, 'the call and its result are in the prompt');

  await assert.rejects(client.chat.completions.create({ model: 'qwen', messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } } }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice');
});

test('strict tools under tool_choice auto: a call the model opens follows the schema', async (client) => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', strict: true,
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
                    required: ['city', 'days'], additionalProperties: false },
    },
  }];
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  // These random weights never open a call by themselves: logit_bias makes "<tool_call>" (one
  // token of the Qwen vocabulary) the first choice; from there the grammar writes the call.
  const r = await fetch(`${client.baseURL.replace(/\/v1$/, '')}/tokenize`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'qwen', prompt: '<tool_call>' }) });
  const ids = (await r.json()).tokens;
  assert.equal(ids.length, 1, `one token: ${JSON.stringify(ids)}`);
  for (const seed of [1, 2, 3]) {
    const res = await client.chat.completions.create({ model: 'qwen', messages, tools, tool_choice: 'auto', logit_bias: { [ids[0]]: 100 },
                                                       max_tokens: 100, temperature: 0.8, seed });
    const choice = res.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
    assert.equal(choice.message.tool_calls.length, 1);
    assert.equal(choice.message.tool_calls[0].function.name, 'get_weather');
    const args = JSON.parse(choice.message.tool_calls[0].function.arguments);
    assert.ok(validate(args, tools[0].function.parameters), choice.message.tool_calls[0].function.arguments);
  }
  // Without the push the model answers in text: strict auto is no longer refused.
  const plain = await client.chat.completions.create({ model: 'qwen', messages, tools, tool_choice: 'auto', max_tokens: 4, temperature: 0 });
  assert.equal(typeof plain.choices[0].message.content, 'string');
  // A non-strict function whose schema holds a keyword the grammar lacks ("format") is only
  // described to the model under auto: accepted. Under required its schema would be enforced:
  // a 400 naming it.
  const loose = { type: 'function', function: { name: 'log_event', parameters: { type: 'object', properties: { when: { type: 'string', format: 'date-time' } } } } };
  const mixed = await client.chat.completions.create({ model: 'qwen', messages, tools: [...tools, loose], tool_choice: 'auto', max_tokens: 4, temperature: 0 });
  assert.equal(typeof mixed.choices[0].message.content, 'string');
  await assert.rejects(client.chat.completions.create({ model: 'qwen', messages, tools: [...tools, loose], tool_choice: 'required', max_tokens: 4 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools[1].function.parameters' && /format/.test(e.message));
  // logit_bias is checked: keys are token ids inside the vocabulary, values -100..100.
  for (const logit_bias of [{ x: 1 }, { 5: 101 }, { 999999999: 1 }]) {
    await assert.rejects(client.chat.completions.create({ model: 'qwen', messages, logit_bias, max_tokens: 1 }),
                         (e) => e instanceof OpenAI.BadRequestError && /logit_bias/.test(e.message), JSON.stringify(logit_bias));
  }
});

test('a shared system prompt is cached across requests', async (client) => {
  const system = 'You are a helpful assistant. '.repeat(60);
  const ask = (q) => client.chat.completions.create({ model: 'qwen', messages: [{ role: 'system', content: system }, { role: 'user', content: q }], max_tokens: 2, temperature: 0 });
  const a = await ask('First question?');
  const b = await ask('Second question, a different one?');
  assert.ok(b.usage.prompt_tokens_details.cached_tokens >= 300,
            `cached ${b.usage.prompt_tokens_details.cached_tokens} of ${b.usage.prompt_tokens}`);
  assert.ok(a.usage.prompt_tokens > 300);
});

const { child, base } = await serveReady(
  tessera, ['--no-auth', '--rate-limit', '100000', '--parallel', '8', '--max-loaded-models', '2',
            '--model', `stories=${stories}`, '--model', `qwen=${qwen}`], {}, 120);
await runTests(tests, new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 0, timeout: 120000 }), child);

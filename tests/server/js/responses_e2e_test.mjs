// End-to-end test of OpenAI's Responses API on `tessera serve` with the official `openai` npm
// package, unmodified: responses.create (string input, instructions, max_output_tokens), a
// second turn through previous_response_id, responses.stream with its typed events and
// finalResponse(), a function tool round trip forced with tool_choice, text.format json_schema,
// retrieve and delete, store: false, refusals named by field, and one API key never reading
// another's stored responses. The model is tiny and random (the Qwen2.5 tokenizer and
// template): the checks are on shapes, event order, token counts and errors.
//   node responses_e2e_test.mjs TESSERA QWEN_MODEL WORK_DIR
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import OpenAI from 'openai';
import { runTests, serveReady } from './harness.mjs';

const [tessera, qwen, work] = process.argv.slice(2);
const keyA = 'responses-key-a-0123456789';
const keyB = 'responses-key-b-0123456789';

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  // An enum keeps the forced call short on random weights.
  parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } },
                required: ['city'], additionalProperties: false },
  strict: true,
};

function checkUsage(r) {
  assert.ok(r.usage.input_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
}

test('create with a string input and instructions', async (client) => {
  const r = await client.responses.create({ model: 'qwen', input: 'Hello', instructions: 'Answer briefly.',
                                            max_output_tokens: 5, metadata: { run: 'e2e' } });
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, 'response');
  assert.equal(r.model, 'qwen');
  assert.equal(r.instructions, 'Answer briefly.');
  assert.deepEqual(r.metadata, { run: 'e2e' });
  assert.equal(r.max_output_tokens, 5);
  assert.equal(r.usage.output_tokens, 5);
  checkUsage(r);
  // Five tokens of random weights: cut short, as OpenAI reports it.
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(r.output.length, 1);
  const [msg] = r.output;
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.match(msg.id, /^msg_/);
  assert.equal(msg.content[0].type, 'output_text');
  assert.deepEqual(msg.content[0].annotations, []);
  assert.equal(r.output_text, msg.content[0].text);  // the client's own convenience field
  // The instructions are part of the prompt: longer ones make it longer.
  const longer = await client.responses.create({ model: 'qwen', input: 'Hello', max_output_tokens: 1,
                                                 instructions: 'Answer briefly. Be kind.' });
  assert.ok(longer.usage.input_tokens > r.usage.input_tokens);
  const bare = await client.responses.create({ model: 'qwen', input: 'Hello', max_output_tokens: 1 });
  assert.equal(bare.instructions, null);
});

test('previous_response_id continues the stored conversation', async (client) => {
  const first = await client.responses.create({ model: 'qwen', input: 'My name is Ada.', max_output_tokens: 3 });
  const second = await client.responses.create({ model: 'qwen', input: [{ role: 'user', content: 'What is my name?' }],
                                                 previous_response_id: first.id, max_output_tokens: 3 });
  assert.equal(second.previous_response_id, first.id);
  // The second prompt holds the first turn (its input and output) and reuses its cache.
  const alone = await client.responses.create({ model: 'qwen', input: 'What is my name?', max_output_tokens: 1 });
  assert.ok(second.usage.input_tokens > alone.usage.input_tokens + first.usage.output_tokens);
  assert.ok(second.usage.input_tokens_details.cached_tokens > 0);
  // A chain of three: the third sees both earlier turns.
  const third = await client.responses.create({ model: 'qwen', input: 'And again?', previous_response_id: second.id,
                                                max_output_tokens: 1 });
  assert.ok(third.usage.input_tokens > second.usage.input_tokens);
});

test('an unknown previous_response_id is a 404 naming it', async (client) => {
  await assert.rejects(client.responses.create({ model: 'qwen', input: 'x', previous_response_id: 'resp_nope' }),
                       (e) => e instanceof OpenAI.NotFoundError && e.param === 'previous_response_id' &&
                              e.code === 'previous_response_not_found' && /resp_nope/.test(e.message));
});

test('responses.stream: typed events in order and finalResponse()', async (client) => {
  const stream = client.responses.stream({ model: 'qwen', input: 'Tell me a story', max_output_tokens: 6 });
  const events = [];
  let deltas = '';
  stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
  for await (const event of stream) events.push(event);
  const final = await stream.finalResponse();
  const types = events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added',
                                       'response.content_part.added']);
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done',
                                     'response.output_item.done', 'response.incomplete']);
  assert.ok(types.slice(4, -4).every((t) => t === 'response.output_text.delta'));
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.equal(events[0].response.status, 'in_progress');
  assert.equal(final.id, events[0].response.id);
  assert.equal(final.output[0].content[0].text, deltas);
  assert.equal(events.at(-4).text, deltas);
  // response.incomplete carries the finished response (the client's snapshot takes only
  // response.completed's).
  const last = events.at(-1).response;
  assert.equal(last.status, 'incomplete');
  assert.equal(last.usage.output_tokens, 6);
  assert.deepEqual(last.output, final.output.map(({ content, ...m }) => ({ ...m, status: 'incomplete',
    content: content.map(({ parsed, ...c }) => c) })));
  // The same request whole gives the same text (greedy), and the stored copy is the final one.
  const whole = await client.responses.create({ model: 'qwen', input: 'Tell me a story', max_output_tokens: 6 });
  assert.equal(whole.output_text, deltas);
  const kept = await client.responses.retrieve(final.id);
  assert.equal(kept.output_text, deltas);
  assert.equal(kept.status, 'incomplete');
  // Streamed, continuing a stored response.
  const next = client.responses.stream({ model: 'qwen', input: 'Go on', previous_response_id: final.id, max_output_tokens: 2 });
  const done = await next.finalResponse();
  assert.equal(done.previous_response_id, final.id);
  assert.ok((await client.responses.retrieve(done.id)).usage.input_tokens > kept.usage.input_tokens);
});

test('function tool round trip forced with tool_choice', async (client) => {
  const input = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const first = await client.responses.create({ model: 'qwen', input, tools: [weather],
                                                tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 60 });
  assert.equal(first.status, 'completed');
  const calls = first.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1);
  const [call] = calls;
  assert.equal(call.name, 'get_weather');
  assert.match(call.call_id, /^call_/);
  assert.match(call.id, /^fc_/);
  assert.equal(call.status, 'completed');
  assert.ok(['Paris', 'Oslo'].includes(JSON.parse(call.arguments).city), call.arguments);
  assert.equal(first.tools[0].name, 'get_weather');
  assert.deepEqual(first.tool_choice, { type: 'function', name: 'get_weather' });
  // Streamed: the call arrives as function_call_arguments events.
  const stream = client.responses.stream({ model: 'qwen', input, tools: [weather], tool_choice: 'required',
                                           max_output_tokens: 60 });
  const types = [];
  let args = '';
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'response.function_call_arguments.delta') args += e.delta;
  }
  const streamed = await stream.finalResponse();
  assert.deepEqual(types.filter((t) => t.startsWith('response.output_item') || t.startsWith('response.function_call')),
                   ['response.output_item.added', 'response.function_call_arguments.delta',
                    'response.function_call_arguments.done', 'response.output_item.done']);
  assert.equal(streamed.output[0].type, 'function_call');
  assert.equal(streamed.output[0].arguments, args);
  assert.equal(streamed.status, 'completed');
  assert.equal(streamed.usage.total_tokens, streamed.usage.input_tokens + streamed.usage.output_tokens);
  // The result goes back as a function_call_output: by previous_response_id ...
  const answer = await client.responses.create({ model: 'qwen', previous_response_id: first.id, tools: [weather],
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temp_c": 21}' }], max_output_tokens: 4 });
  assert.equal(answer.output[0].type, 'message');
  assert.ok(answer.usage.input_tokens > first.usage.input_tokens);
  // ... or with the whole conversation as input (the call item as the response gave it).
  const stateless = await client.responses.create({ model: 'qwen', tools: [weather], store: false,
    input: [...input, call, { type: 'function_call_output', call_id: call.call_id, output: '{"temp_c": 21}' }],
    max_output_tokens: 4 });
  assert.equal(stateless.usage.input_tokens, answer.usage.input_tokens);
  assert.equal(stateless.output_text, answer.output_text);
  // The streamed call item as finalResponse() gives it (with the client's parsed_arguments).
  const fromStream = streamed.output[0];
  const again = await client.responses.create({ model: 'qwen', tools: [weather], store: false, max_output_tokens: 1,
    input: [...input, fromStream, { type: 'function_call_output', call_id: fromStream.call_id, output: '1' }] });
  assert.equal(again.output[0].type, 'message');
  // An output for a call nobody made is refused.
  await assert.rejects(client.responses.create({ model: 'qwen', input: [{ type: 'function_call_output', call_id: 'call_x', output: '1' }] }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'input[0].call_id');
});

test('text.format json_schema', async (client) => {
  const schema = { type: 'object', properties: { n: { type: 'integer' }, ok: { type: 'boolean' } },
                   required: ['n', 'ok'], additionalProperties: false };
  const r = await client.responses.create({ model: 'qwen', input: 'Give me a number', max_output_tokens: 40,
                                            text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } } });
  assert.equal(r.status, 'completed', JSON.stringify(r.output));
  const value = JSON.parse(r.output_text);
  assert.equal(typeof value.n, 'number');
  assert.equal(typeof value.ok, 'boolean');
  assert.deepEqual(Object.keys(value), ['n', 'ok']);
  assert.equal(r.text.format.type, 'json_schema');
  assert.equal(r.text.format.name, 'answer');
  const obj = await client.responses.create({ model: 'qwen', input: 'JSON please', max_output_tokens: 40,
                                              text: { format: { type: 'json_object' } } });
  if (obj.status === 'completed') assert.equal(typeof JSON.parse(obj.output_text), 'object');
  await assert.rejects(client.responses.create({ model: 'qwen', input: 'x', text: { format: { type: 'json_schema', name: 'a', schema: { type: 'string', format: 'email' } } } }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'text.format.schema');
});

test('retrieve, delete, store: false', async (client) => {
  const r = await client.responses.create({ model: 'qwen', input: 'Keep me', max_output_tokens: 2 });
  const kept = await client.responses.retrieve(r.id);
  assert.equal(kept.id, r.id);
  assert.deepEqual(kept.output, r.output);
  assert.deepEqual(kept.usage, r.usage);
  await client.responses.delete(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.responses.delete(r.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.responses.create({ model: 'qwen', input: 'x', previous_response_id: r.id }),
                       (e) => e instanceof OpenAI.NotFoundError);
  const unkept = await client.responses.create({ model: 'qwen', input: 'Forget me', max_output_tokens: 1, store: false });
  assert.equal(unkept.store, false);
  await assert.rejects(client.responses.retrieve(unkept.id), (e) => e instanceof OpenAI.NotFoundError);
});

test('another API key cannot read, continue or delete a stored response', async (client) => {
  const other = new OpenAI({ apiKey: keyB, baseURL: client.baseURL, maxRetries: 0, timeout: 120000 });
  const r = await client.responses.create({ model: 'qwen', input: 'Mine', max_output_tokens: 1 });
  await assert.rejects(other.responses.retrieve(r.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(other.responses.delete(r.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(other.responses.create({ model: 'qwen', input: 'x', previous_response_id: r.id }),
                       (e) => e instanceof OpenAI.NotFoundError);
  assert.equal((await client.responses.retrieve(r.id)).id, r.id);
});

test('unsupported fields are refused by name', async (client) => {
  const refused = async (extra, param, pattern) => {
    await assert.rejects(client.responses.create({ model: 'qwen', input: 'x', ...extra }),
                         (e) => e instanceof OpenAI.BadRequestError && e.param === param && pattern.test(e.message),
                         `${JSON.stringify(extra)} refused as ${param}`);
  };
  await refused({ reasoning: { effort: 'low' } }, 'reasoning', /reasoning is not supported/);
  await refused({ background: true }, 'background', /background/);
  await refused({ include: ['reasoning.encrypted_content'] }, 'include', /include/);
  await refused({ tools: [{ type: 'web_search' }] }, 'tools[0].type', /web_search/);
  await refused({ frobnicate: 1 }, 'frobnicate', /frobnicate/);
  await refused({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0].type', /input_image/);
  await refused({ max_output_tokens: 0 }, 'max_output_tokens', /at least 1/);
  await refused({ temperature: 'hot' }, 'temperature', /number/);
  // A prompt past the context is blamed on input, streamed or not (the worker refuses it
  // before the stream's headers).
  for (const stream of [false, true]) {
    await assert.rejects(client.responses.create({ model: 'qwen', input: 'word '.repeat(3000), stream }),
                         (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded' &&
                                e.param === 'input');
  }
  const raw = await fetch(`${client.baseURL}/responses/x`, { method: 'PUT', headers: { Authorization: `Bearer ${keyA}` } });
  assert.equal(raw.status, 405);
  assert.equal(raw.headers.get('allow'), 'GET, HEAD, DELETE');
});

mkdirSync(work, { recursive: true });
const keys = `${work}/responses-keys`;
writeFileSync(keys, `teamb:${keyB}\n`);
chmodSync(keys, 0o600);
const { child, base } = await serveReady(tessera, ['--api-keys', keys, '--model', `qwen=${qwen}`],
                                         { TESSERA_API_KEY: keyA }, 120);
await runTests(tests, new OpenAI({ apiKey: keyA, baseURL: `${base}/v1`, maxRetries: 0, timeout: 120000 }), child);

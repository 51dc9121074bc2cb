// End-to-end test of `tessera serve`'s Anthropic Messages API with the official, unmodified
// @anthropic-ai/sdk (locked in package-lock.json): messages.create non-streamed and streamed
// (messages.stream and its finalMessage), the raw SSE events in Anthropic's order with pings,
// stop sequences, a tool round trip forced with tool_choice on a model with Qwen3's real
// tokenizer and chat template, count_tokens against the prompt a reply ran (system prompt,
// tools and the thinking switch counted), errors as the SDK's classes, x-api-key and Bearer
// auth against a server with a key.
//   node anthropic_e2e_test.mjs TESSERA TINY_MODEL QWEN3_TEMPLATE_MODEL
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { runTests, serveReady } from './harness.mjs';

const [tessera, tiny, qwen3] = process.argv.slice(2);
const apiKey = 'anthropic-test-key';

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

const weather = {
  name: 'get_weather',
  description: 'The current weather in a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 16 }, unit: { type: 'string', enum: ['c', 'f'] } },
    required: ['city', 'unit'],
  },
};
const question = [{ role: 'user', content: 'What is the weather in Paris?' }];

// The raw SSE frames of a streamed request: [{event, data}] in order.
async function rawEvents(base, body) {
  const res = await fetch(`${base}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': apiKey, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const text = await res.text();
  return text.split('\n\n').filter((f) => f.length).map((frame) => {
    const m = frame.match(/^event: (.+)\ndata: (.+)$/s);
    assert.ok(m, `a named event: ${frame}`);
    const data = JSON.parse(m[2]);
    assert.equal(data.type, m[1]);
    return { event: m[1], data };
  });
}

// Anthropic's order: message_start, (ping), blocks each start / delta* / stop with rising
// indices, message_delta, message_stop.
function checkOrder(events) {
  const names = events.map((e) => e.event);
  assert.equal(names[0], 'message_start');
  assert.deepEqual(names.slice(-2), ['message_delta', 'message_stop']);
  let open = -1;
  let next = 0;
  for (const { event, data } of events.slice(1, -2)) {
    if (event === 'ping') continue;
    if (event === 'content_block_start') {
      assert.equal(open, -1, 'a block starts while none is open');
      assert.equal(data.index, next);
      open = next++;
    } else {
      assert.ok(event === 'content_block_delta' || event === 'content_block_stop', event);
      assert.equal(data.index, open);
      if (event === 'content_block_stop') open = -1;
    }
  }
  assert.equal(open, -1, 'every block stopped');
}

test('messages.create: the message object', async ({ client }) => {
  const m = await client.messages.create({ model: 'tiny', max_tokens: 6, temperature: 0, messages: [{ role: 'user', content: 'Hello' }] });
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, 'tiny');
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.equal(typeof m.content[0].text, 'string');
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.stop_sequence, null);
  assert.equal(m.usage.output_tokens, 6);
  assert.ok(m.usage.input_tokens > 0);
});

test('messages.stream: events in order, finalMessage equals the non-streamed message', async ({ client, base }) => {
  const body = { model: 'tiny', max_tokens: 12, temperature: 0, system: 'Be brief.', messages: [{ role: 'user', content: 'Tell me' }] };
  const plain = await client.messages.create(body);
  const stream = client.messages.stream(body);
  const seen = [];
  stream.on('streamEvent', (e) => seen.push(e.type));
  const final = await stream.finalMessage();
  assert.deepEqual(final.content, plain.content);
  assert.equal(final.stop_reason, plain.stop_reason);
  assert.deepEqual([final.usage.input_tokens, final.usage.output_tokens],
                   [plain.usage.input_tokens, plain.usage.output_tokens]);
  assert.equal(seen[0], 'message_start');
  assert.equal(seen.at(-1), 'message_stop');
  // On the wire: named events, a ping, Anthropic's order.
  const events = await rawEvents(base, body);
  checkOrder(events);
  assert.ok(events.some((e) => e.event === 'ping'));
  assert.equal(events[0].data.message.usage.input_tokens, plain.usage.input_tokens);
  const end = events.at(-2).data;
  assert.deepEqual(end.delta, { stop_reason: plain.stop_reason, stop_sequence: null });
  assert.equal(end.usage.output_tokens, plain.usage.output_tokens);
  const text = events.filter((e) => e.event === 'content_block_delta').map((e) => e.data.delta.text).join('');
  assert.equal(text, plain.content[0].text);
});

test('stop_sequences: stop_reason stop_sequence names the one that matched', async ({ client }) => {
  // The tiny model's greedy reply is newlines: a run of them ends it at once.
  const body = { model: 'tiny', max_tokens: 24, temperature: 0, messages: [{ role: 'user', content: 'Go on' }] };
  const full = (await client.messages.create(body)).content[0].text;
  const stop = '\n\n\n';
  assert.ok(full.includes(stop), JSON.stringify(full));
  const text = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  const m = await client.messages.create({ ...body, stop_sequences: ['never here', stop] });
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
  assert.equal(text(m), full.slice(0, full.indexOf(stop)));
  assert.ok(m.usage.output_tokens < 24, `${m.usage.output_tokens} tokens`);
  const streamed = await client.messages.stream({ ...body, stop_sequences: [stop] }).finalMessage();
  assert.equal(streamed.stop_reason, 'stop_sequence');
  assert.equal(streamed.stop_sequence, stop);
  assert.equal(text(streamed), text(m));
  // Without one that matches, the reply runs to max_tokens.
  const unstopped = await client.messages.create({ ...body, stop_sequences: ['never here'] });
  assert.equal(unstopped.stop_reason, 'max_tokens');
  assert.equal(unstopped.stop_sequence, null);
});

function checkWeatherCall(block) {
  assert.equal(block.type, 'tool_use');
  assert.match(block.id, /^toolu_[A-Za-z0-9]{24}$/);
  assert.equal(block.name, 'get_weather');
  assert.equal(typeof block.input, 'object');
  assert.equal(typeof block.input.city, 'string');
  assert.ok(['c', 'f'].includes(block.input.unit), JSON.stringify(block.input));
}

test('tool round trip forced with tool_choice {type: tool}', async ({ client, base }) => {
  const tools = [weather];
  const forced = { model: 'qwen3', max_tokens: 200, temperature: 0.8, messages: question, tools,
                   tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
                   thinking: { type: 'disabled' } };
  const first = await client.messages.create(forced);
  assert.equal(first.stop_reason, 'tool_use');
  const calls = first.content.filter((b) => b.type === 'tool_use');
  assert.equal(calls.length, 1);
  checkWeatherCall(calls[0]);
  // Streamed: the call arrives as a tool_use block and input_json_delta; the SDK's snapshot
  // parses it into an object.
  const streamed = await client.messages.stream(forced).finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  checkWeatherCall(streamed.content.find((b) => b.type === 'tool_use'));
  const events = await rawEvents(base, forced);
  checkOrder(events);
  const start = events.find((e) => e.event === 'content_block_start' && e.data.content_block.type === 'tool_use');
  assert.deepEqual(start.data.content_block.input, {});
  const json = events.filter((e) => e.event === 'content_block_delta' && e.data.index === start.data.index)
    .map((e) => { assert.equal(e.data.delta.type, 'input_json_delta'); return e.data.delta.partial_json; }).join('');
  checkWeatherCall({ ...start.data.content_block, input: JSON.parse(json) });
  // The result goes back in a user message; the model answers in text.
  const followup = [...question, { role: 'assistant', content: first.content },
                    { role: 'user', content: [{ type: 'tool_result', tool_use_id: calls[0].id, content: '21 C, sunny' }] }];
  const final = await client.messages.create({ model: 'qwen3', max_tokens: 8, temperature: 0, messages: followup, tools,
                                               tool_choice: { type: 'none' }, thinking: { type: 'disabled' } });
  assert.ok(['max_tokens', 'end_turn'].includes(final.stop_reason), final.stop_reason);
  assert.deepEqual(final.content.map((b) => b.type), ['text']);
  // tool_choice any forces one call of any tool.
  const any = await client.messages.create({ ...forced, tool_choice: { type: 'any' } });
  assert.equal(any.stop_reason, 'tool_use');
  checkWeatherCall(any.content.find((b) => b.type === 'tool_use'));
});

test('count_tokens: the prompt a reply runs, system, tools and thinking switch counted', async ({ client }) => {
  const conversation = { model: 'qwen3', system: 'You are terse.', messages: question, tools: [weather] };
  const counted = await client.messages.countTokens(conversation);
  assert.ok(Number.isInteger(counted.input_tokens), JSON.stringify(counted));
  const ran = await client.messages.create({ ...conversation, max_tokens: 1 });
  assert.equal(counted.input_tokens, ran.usage.input_tokens);
  const bare = await client.messages.countTokens({ model: 'qwen3', messages: question });
  const noSystem = await client.messages.countTokens({ model: 'qwen3', messages: question, tools: [weather] });
  assert.ok(counted.input_tokens > noSystem.input_tokens);
  assert.ok(noSystem.input_tokens > bare.input_tokens + 20, 'the tool definitions are in the prompt');
  // Qwen3's template closes an empty think block when thinking is off.
  const off = await client.messages.countTokens({ model: 'qwen3', messages: question, thinking: { type: 'disabled' } });
  const on = await client.messages.countTokens({ model: 'qwen3', messages: question, thinking: { type: 'enabled', budget_tokens: 1024 } });
  assert.ok(off.input_tokens > on.input_tokens, `${off.input_tokens} > ${on.input_tokens}`);
  assert.equal(on.input_tokens, bare.input_tokens);  // Qwen3 thinks unless told not to
  const offRan = await client.messages.create({ model: 'qwen3', messages: question, max_tokens: 1, thinking: { type: 'disabled' } });
  assert.equal(offRan.usage.input_tokens, off.input_tokens);
});

test('errors in Anthropic shape as the SDK classes', async ({ client, base }) => {
  await assert.rejects(client.messages.create({ model: 'no-such-model', max_tokens: 4, messages: question }),
                       (e) => e instanceof Anthropic.NotFoundError && e.error?.error?.type === 'not_found_error');
  await assert.rejects(client.messages.countTokens({ model: 'no-such-model', messages: question }),
                       (e) => e instanceof Anthropic.NotFoundError);
  await assert.rejects(
    client.messages.create({ model: 'tiny', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBO' } }] }] }),
    (e) => e instanceof Anthropic.BadRequestError && e.error.error.type === 'invalid_request_error' && /image blocks are not supported/.test(e.message));
  await assert.rejects(client.messages.create({ model: 'tiny', max_tokens: 4, messages: question, container: 'c' }),
                       (e) => e instanceof Anthropic.BadRequestError && /container is not supported/.test(e.message));
  // max_tokens is required, as Anthropic requires it.
  const res = await fetch(`${base}/v1/messages`, {
    method: 'POST', headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', messages: question }) });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(body.type, 'error');
  assert.equal(body.error.type, 'invalid_request_error');
  assert.match(body.error.message, /max_tokens/);
});

test('auth: x-api-key and Bearer accepted, a wrong key refused', async ({ client, base }) => {
  const bearer = new Anthropic({ apiKey: null, authToken: apiKey, baseURL: base, maxRetries: 0 });
  const m = await bearer.messages.create({ model: 'tiny', max_tokens: 2, messages: question });
  assert.equal(m.usage.output_tokens, 2);
  const wrong = new Anthropic({ apiKey: 'wrong', baseURL: base, maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model: 'tiny', max_tokens: 2, messages: question }),
                       (e) => e instanceof Anthropic.AuthenticationError && e.error.error.type === 'authentication_error');
  await assert.rejects(wrong.messages.countTokens({ model: 'tiny', messages: question }),
                       (e) => e instanceof Anthropic.AuthenticationError);
  assert.ok(client.apiKey === apiKey);
});

const { child, base } = await serveReady(
  tessera, ['--placement', 'reference', '--rate-limit', '10000', '--max-loaded-models', '2',
            '--model', `tiny=${tiny}`, '--model', `qwen3=${qwen3}`],
  { TESSERA_API_KEY: apiKey });
const client = new Anthropic({ apiKey, baseURL: base, maxRetries: 0, timeout: 60000 });
await runTests(tests, { client, base }, child);

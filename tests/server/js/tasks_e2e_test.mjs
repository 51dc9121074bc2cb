// End-to-end test of the task endpoints on one port (issue #15): embeddings and moderations
// through the official `openai` npm package unchanged, rerank and classify over raw HTTP, and
// a 4xx naming the field for every malformed or over-limit request. The server serves an
// embedding model, a classifier, and the tiny chat model declared once as a reranker and once
// as a guard, all resident together. System One's example is read from docs/tasks.md.
//   node tasks_e2e_test.mjs TESSERA E2E_WORK_DIR DOCS_TASKS_MD
//   (E2E_WORK_DIR holds embed/, cls/, tiny/)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import OpenAIWithDecisions from 'openai-decisions';  // openai 7.60.0: client.decisions
import { runTests, serveReady, startServer, waitReady } from './harness.mjs';

const [tessera, work, docs] = process.argv.slice(2);
const tests = [];
const test = (name, fn) => tests.push({ name, fn });
let base = '';

async function post(path, body, at = base) {
  const res = await fetch(`${at}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer task-key' },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

async function refused(path, body, param, status = 400) {
  const r = await post(path, body);
  assert.equal(r.status, status, `${path} ${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(r.body)}`);
  assert.equal(r.body.error.param, param, JSON.stringify(r.body.error));
  assert.ok(r.body.error.message.length > 10);
  return r.body.error;
}

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const texts = ['The river moved slowly past the old mill.', 'bread', 'a small boat waited',
               'Numbers such as 1, 2, 3 appear in lists'];

test('embeddings: float and base64 are equal, unit norm, usage', async (client) => {
  // The openai client asks for base64 by default and decodes it.
  const b64 = await client.embeddings.create({ model: 'emb', input: texts });
  const flt = await client.embeddings.create({ model: 'emb', input: texts, encoding_format: 'float' });
  assert.equal(b64.data.length, texts.length);
  for (let i = 0; i < texts.length; i++) {
    assert.equal(flt.data[i].index, i);
    assert.equal(flt.data[i].embedding.length, 64);
    assert.deepEqual(Array.from(b64.data[i].embedding), flt.data[i].embedding.map(Math.fround));
    assert.ok(Math.abs(norm(flt.data[i].embedding) - 1) < 1e-5);
  }
  assert.ok(flt.usage.prompt_tokens > texts.length);
  assert.equal(flt.usage.total_tokens, flt.usage.prompt_tokens);
  const raw = await post('/v1/embeddings', { input: 'bread', encoding_format: 'base64' });
  assert.equal(typeof raw.body.data[0].embedding, 'string');
});

test('embeddings: dimensions keeps the first values, renormalised', async (client) => {
  const full = await client.embeddings.create({ model: 'emb', input: 'bread', encoding_format: 'float' });
  const cut = await client.embeddings.create({ model: 'emb', input: 'bread', dimensions: 32, encoding_format: 'float' });
  const v = cut.data[0].embedding;
  assert.equal(v.length, 32);
  assert.ok(Math.abs(norm(v) - 1) < 1e-5);
  const head = full.data[0].embedding.slice(0, 32);
  const n = norm(head);
  for (let i = 0; i < 32; i++) assert.ok(Math.abs(v[i] - head[i] / n) < 1e-6, `dim ${i}`);
});

test('embeddings: a batch equals each input alone; token ids; query prompt', async (client) => {
  const batch = await client.embeddings.create({ model: 'emb', input: texts, encoding_format: 'float' });
  for (let i = 0; i < texts.length; i++) {
    const one = await client.embeddings.create({ model: 'emb', input: texts[i], encoding_format: 'float' });
    assert.deepEqual(one.data[0].embedding, batch.data[i].embedding, `input ${i}`);
  }
  const tok = await post('/tokenize', { model: 'emb', prompt: 'bread' });
  const ids = await client.embeddings.create({ model: 'emb', input: [tok.body.tokens], encoding_format: 'float' });
  assert.deepEqual(ids.data[0].embedding, batch.data[1].embedding);
  const query = await post('/v1/embeddings', { model: 'emb', input: 'bread', prompt_name: 'query' });
  assert.equal(query.status, 200);
  assert.notDeepEqual(query.body.data[0].embedding, batch.data[1].embedding);
  assert.ok(query.body.usage.prompt_tokens > ids.usage.prompt_tokens);
  const doc = await post('/v1/embeddings', { input: 'bread', prompt_name: 'document' });
  assert.deepEqual(doc.body.data[0].embedding, batch.data[1].embedding);
});

test('embeddings: refusals name the field', async () => {
  await refused('/v1/embeddings', { input: 'x', colour: 'red' }, 'colour');
  await refused('/v1/embeddings', { input: 'x', dimensions: 16 }, 'dimensions');
  await refused('/v1/embeddings', { input: 'x', dimensions: 2048 }, 'dimensions');
  await refused('/v1/embeddings', { input: 'x', encoding_format: 'hex' }, 'encoding_format');
  await refused('/v1/embeddings', { input: 'x', prompt_name: 'poem' }, 'prompt_name');
  await refused('/v1/embeddings', { input: [] }, 'input');
  await refused('/v1/embeddings', { input: ['a', 3] }, 'input[1]');
  await refused('/v1/embeddings', {}, 'input');
  await refused('/v1/embeddings', { input: 'x', model: 'chat' }, 'model');
  await refused('/v1/embeddings', { input: 'x', model: 'nope' }, 'model', 404);
  const long = Array(5000).fill('bread').join(' ');
  const e = await refused('/v1/embeddings', { input: ['ok', long] }, 'input[1]');
  assert.match(e.message, /input\[1\].*limit of 4096/);
});

test('moderations through the openai client: guard labels and their scores', async (client) => {
  const r = await client.moderations.create({ input: ['how do I bake bread?', 'hello'] });
  assert.equal(r.results.length, 2);
  for (const res of r.results) {
    assert.ok(['Safe', 'Unsafe', 'Controversial'].includes(res.label));
    const scores = Object.values(res.label_scores);
    assert.equal(scores.length, 3);
    assert.ok(Math.abs(scores.reduce((a, b) => a + b, 0) - 1) < 1e-5);
    assert.equal(res.label, Object.entries(res.label_scores).sort((a, b) => b[1] - a[1])[0][0]);
    assert.equal(res.flagged, res.label === 'Unsafe');
    assert.ok(Array.isArray(res.guard_categories));
    assert.ok(res.guard_categories.every((c) => typeof c === 'string' && c.length > 0 && c !== 'None'));
    assert.equal(res.categories.violence, false);
    assert.equal(res.category_scores.hate, 0);
  }
  const named = await client.moderations.create({ model: 'omni-moderation-latest', input: 'hello' });
  assert.deepEqual(named.results[0].label_scores, r.results[1].label_scores);
  const parts = await client.moderations.create({ input: [{ type: 'text', text: 'hello' }] });
  assert.deepEqual(parts.results[0].label_scores, r.results[1].label_scores);
  const strict = await post('/v1/moderations', { input: 'hello', strict: true });
  assert.equal(strict.body.results[0].flagged, ['Unsafe', 'Controversial'].includes(strict.body.results[0].label));
  // messages: the user's last message is judged when no reply follows it.
  const convo = await post('/v1/moderations', { messages: [{ role: 'user', content: 'hello' }] });
  assert.deepEqual(convo.body.results[0].label_scores, r.results[1].label_scores);
  const reply = await post('/v1/moderations', {
    messages: [{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi there' }] });
  assert.equal(reply.status, 200);
  assert.notDeepEqual(reply.body.results[0].label_scores, r.results[1].label_scores);
  await refused('/v1/moderations', { input: 'x', messages: [{ role: 'user', content: 'x' }] }, 'messages');
  await refused('/v1/moderations', { input: [{ type: 'image_url', image_url: { url: 'x' } }] }, 'input[0]');
  await refused('/v1/moderations', { messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role');
});

test('rerank: results sorted by relevance, top_n, documents, /rerank alias', async () => {
  const docs = ['The mill stood by the river.', { text: 'Apples were sorted.' }, 'bread', 'a dog barked'];
  const r = await post('/v1/rerank', { query: 'where is the mill?', documents: docs, return_documents: true });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.results.length, 4);
  const seen = new Set();
  for (let i = 0; i < 4; i++) {
    const res = r.body.results[i];
    seen.add(res.index);
    assert.ok(res.relevance_score > 0 && res.relevance_score < 1);
    if (i > 0) assert.ok(r.body.results[i - 1].relevance_score >= res.relevance_score);
    const d = docs[res.index];
    assert.equal(res.document.text, typeof d === 'string' ? d : d.text);
  }
  assert.equal(seen.size, 4);
  const top = await post('/rerank', { query: 'where is the mill?', documents: docs, top_n: 2 });
  assert.equal(top.body.results.length, 2);
  assert.deepEqual(top.body.results.map((x) => [x.index, x.relevance_score]),
                   r.body.results.slice(0, 2).map((x) => [x.index, x.relevance_score]));
  assert.equal(top.body.results[0].document, undefined);
  const other = await post('/v1/rerank', { query: 'where is the mill?', documents: docs, instruction: 'Find bakeries' });
  assert.notDeepEqual(other.body.results.map((x) => x.relevance_score).sort(),
                      r.body.results.map((x) => x.relevance_score).sort());
  await refused('/v1/rerank', { documents: ['a'] }, 'query');
  await refused('/v1/rerank', { query: 'q', documents: [] }, 'documents');
  await refused('/v1/rerank', { query: 'q', documents: [{ txt: 'a' }] }, 'documents[0]');
  await refused('/v1/rerank', { query: 'q', documents: ['a'], top_n: 0 }, 'top_n');
  await refused('/v1/rerank', { query: 'q', documents: ['a'], model: 'emb' }, 'model');
});

test('classify: probabilities, labels, token ids, use_activation, truncation', async () => {
  const r = await post('/classify', { model: 'cls', input: ['what a fine morning', 'the dog barked'] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.object, 'list');
  for (const [i, d] of r.body.data.entries()) {
    assert.equal(d.index, i);
    assert.equal(d.num_classes, 3);
    assert.ok(Math.abs(d.probs.reduce((a, b) => a + b, 0) - 1) < 1e-5);
    assert.equal(d.label, ['negative', 'neutral', 'positive'][d.probs.indexOf(Math.max(...d.probs))]);
  }
  assert.ok(r.body.usage.prompt_tokens > 0);
  const tok = await post('/tokenize', { model: 'cls', prompt: 'what a fine morning' });
  const ids = await post('/classify', { input: tok.body.tokens });
  assert.deepEqual(ids.body.data[0].probs, r.body.data[0].probs);
  const raw = await post('/classify', { input: 'what a fine morning', use_activation: false });
  const exp = raw.body.data[0].probs.map(Math.exp);
  const sum = exp.reduce((a, b) => a + b, 0);
  exp.forEach((x, k) => assert.ok(Math.abs(x / sum - r.body.data[0].probs[k]) < 1e-5));
  const cut = await post('/classify', { input: 'a b c d e f g h', truncate_prompt_tokens: 2 });
  assert.equal(cut.body.usage.prompt_tokens, 2);
  await refused('/classify', { input: 'x', truncate_prompt_tokens: 0 }, 'truncate_prompt_tokens');
  await refused('/classify', { input: 'x', model: 'chat' }, 'model');
  await refused('/classify', { input: [[1, 2], [99999999]] }, 'input[1]');
});

test('decisions through chat.completions.create with a choice response_format', async (client) => {
  const rf = (schema, description) => ({
    type: 'json_schema', json_schema: { name: 'd', schema, ...(description ? { description } : {}) } });
  const messages = [{ role: 'user', content: 'Is fresh bread better than old bread?' }];
  const ask = (response_format, extra = {}) => client.chat.completions.create(
    { model: 'chat', messages, response_format, logprobs: true, temperature: 0.9, ...extra });
  const r = await ask(rf({ enum: ['yes', 'no', 'maybe'] }, 'Answer the question'));
  const choice = r.choices[0];
  const value = JSON.parse(choice.message.content);
  assert.ok(['yes', 'no', 'maybe'].includes(value));
  assert.equal(choice.finish_reason, 'stop');
  const top = choice.logprobs.content[0].top_logprobs;
  assert.deepEqual(top.map((t) => t.token).sort(), ['maybe', 'no', 'yes']);
  assert.ok(Math.abs(top.reduce((a, t) => a + Math.exp(t.logprob), 0) - 1) < 1e-5);
  assert.equal(top[0].token, value);
  assert.equal(choice.logprobs.content[0].token, value);
  const again = await ask(rf({ enum: ['yes', 'no', 'maybe'] }, 'Answer the question'), { temperature: 0, seed: 3 });
  assert.deepEqual(again.choices[0].logprobs, choice.logprobs);  // sampling fields are ignored
  const obj = await ask(rf({ type: 'object', additionalProperties: false, required: ['verdict'],
    properties: { verdict: { oneOf: [{ const: 'fresh', description: 'baked today' }, { const: 'old bread', description: 'days old' }] } } }));
  const parsed = JSON.parse(obj.choices[0].message.content);
  assert.deepEqual(Object.keys(parsed), ['verdict']);
  assert.ok(['fresh', 'old bread'].includes(parsed.verdict));
  const bool = await ask(rf({ type: 'boolean' }));
  assert.equal(typeof JSON.parse(bool.choices[0].message.content), 'boolean');
  let streamed = '';
  const stream = await client.chat.completions.create({ model: 'chat', messages, stream: true,
    response_format: rf({ enum: ['yes', 'no', 'maybe'] }, 'Answer the question') });
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(streamed, choice.message.content);
  const many = Array.from({ length: 11 }, (_, i) => `option ${i}`);
  await refused('/v1/chat/completions', { model: 'chat', messages, response_format: rf({ enum: many }) }, 'response_format');
  await refused('/v1/chat/completions', { model: 'chat', messages, n: 2, response_format: rf({ type: 'boolean' }) }, 'n');
});

test('System One: choice, score and noul answers; identical with resume on; 422 naming the path', async () => {
  const body = {
    state: { ticket: 'My invoice is wrong and I am furious', customer: 'ACME', open_days: 3 },
    questions: [
      { type: 'choice', instructions: 'Which team should handle it?', criteria: { billing: 'money matters', tech: 'software bugs' } },
      { type: 'score', instructions: 'How urgent is it?', criteria: ['not urgent', 'somewhat urgent', 'very urgent'] },
      { type: 'noul', instructions: 'Is the customer angry?' },
      { type: 'choice', instructions: 'Which language?', criteria: ['English', 'German', 'French'] },
    ],
  };
  const r = await post('/v1/systemone', body);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const [choice, score, noul, lang] = r.body.answers;
  const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
  assert.equal(choice.type, 'choice');
  assert.ok(['billing', 'tech'].includes(choice.choice));
  assert.ok(Math.abs(sum(choice.probabilities) - 1) < 1e-5);
  assert.equal(choice.confidence, Math.max(...Object.values(choice.probabilities)));
  assert.equal(choice.probabilities[choice.choice], choice.confidence);
  assert.deepEqual(Object.keys(lang.probabilities).sort(), ['English', 'French', 'German']);
  assert.equal(score.type, 'score');
  assert.deepEqual(score.legend, { 0: 'not urgent', 1: 'somewhat urgent', 2: 'very urgent' });
  assert.ok(Math.abs(sum(score.probabilities) - 1) < 1e-5);
  const expected = Object.entries(score.probabilities).reduce((a, [k, p]) => a + Number(k) * p, 0);
  assert.ok(Math.abs(score.score - expected) < 1e-9);
  assert.equal(noul.type, 'noul');
  assert.ok(noul.probability > 0 && noul.probability < 1);
  assert.ok(r.body.usage.prompt_tokens > 0);
  const text = await post('/v1/systemone', { ...body, state: JSON.stringify(body.state) });
  assert.deepEqual(text.body.answers, r.body.answers);  // JSON is read as its text
  // The same questions on a server that reads each state once and keeps it.
  const resumed = await serveReady(tessera, ['--model', `chat=${work}/tiny`, '--rate-limit', '0', '--systemone-reuse', 'pinned'],
                                   { TESSERA_API_KEY: 'task-key' });
  try {
    const again = await post('/v1/systemone', body, resumed.base);
    assert.deepEqual(again.body.answers, r.body.answers);
    assert.ok(again.body.x_tessera_stats.cached_tokens >= 3 * 32);  // the state, read once
  } finally {
    resumed.child.kill('SIGTERM');
  }
  const bad = async (b, param) => {
    const e = await refused('/v1/systemone', b, param, 422);
    assert.equal(e.code, 'invalid_field');
  };
  await bad({ questions: body.questions }, 'state');
  await bad({ state: 's', questions: [] }, 'questions');
  await bad({ state: 's', questions: [{ type: 'guess', instructions: 'q' }] }, 'questions[0].type');
  await bad({ state: 's', questions: [body.questions[0], { type: 'choice', instructions: 'q', criteria: ['a'] }] }, 'questions[1].criteria');
  await bad({ state: 's', questions: [{ type: 'score', instructions: 'q', criteria: ['a', ''] }] }, 'questions[0].criteria[1]');
  await bad({ state: 's', questions: [{ type: 'noul', instructions: '' }] }, 'questions[0].instructions');
  await bad({ state: 's', questions: [{ type: 'noul', instructions: 'q', weight: 2 }] }, 'questions[0].weight');
  await bad({ state: 's', questions: [{ type: 'choice', instructions: 'q', criteria: { a: 1, b: 'x' } }] }, 'questions[0].criteria.a');
  await bad({ state: 's', questions: body.questions, extra: true }, 'extra');
  // Questions by name: the path names the question.
  const named = { team: body.questions[0], urgency: body.questions[1] };
  await bad({ state: 's', questions: { ...named, lang: { type: 'choice', instructions: 'q', criteria: ['a'] } } }, 'questions.lang.criteria');
  await bad({ state: 's', questions: { ...named, angry: { type: 'noul', instructions: 'q', weight: 2 } } }, 'questions.angry.weight');
  await bad({ state: 's', questions: { team: { type: 'guess', instructions: 'q' } } }, 'questions.team.type');
  await bad({ state: 's', questions: { urgency: { type: 'score', instructions: 'q', criteria: ['a', ''] } } }, 'questions.urgency.criteria[1]');
  await bad({ state: 's', questions: {} }, 'questions');
  await bad({ state: 's', questions: { '': body.questions[2] } }, 'questions');
  await bad({ state: 's', questions: 'team' }, 'questions');
  await refused('/v1/systemone', { state: 's', questions: body.questions, model: 'emb' }, 'model');
});

test('OpenAI decisions (openai 7.60.0 client): typed answers with System One\'s probabilities; 400 naming the path', async () => {
  const client = new OpenAIWithDecisions({ apiKey: 'task-key', baseURL: `${base}/v1` });
  const state = 'My invoice is wrong and I am furious';
  const d = await client.decisions.create({
    model: 'chat',
    input: state,
    questions: [
      { type: 'choice', name: 'team', instructions: 'Which team should handle it?',
        choices: [{ value: 'billing', description: 'money matters' }, { value: 'tech', description: 'software bugs' }] },
      { type: 'score', name: 'urgency', instructions: 'How urgent is it?',
        levels: [{ label: 'low' }, { label: 'medium', description: 'this week' }, { label: 'high' }] },
      { type: 'predicate', instructions: 'Is the customer angry?' },
      { type: 'choice', name: 'refund', instructions: 'Does it ask for a refund?', choices: [{ value: true }, { value: false }] },
    ],
  });
  assert.equal(d.model, 'chat');
  const [team, urgency, angry, refund] = d.answers;
  // The same job as System One's: the same probabilities for the same questions.
  const s1 = await post('/v1/systemone', {
    model: 'chat', state,
    questions: [
      { type: 'choice', instructions: 'Which team should handle it?', criteria: { billing: 'money matters', tech: 'software bugs' } },
      { type: 'score', instructions: 'How urgent is it?', criteria: ['low', 'medium: this week', 'high'] },
      { type: 'noul', instructions: 'Is the customer angry?' },
      { type: 'choice', instructions: 'Does it ask for a refund?', criteria: ['true', 'false'] },
    ],
  });
  assert.equal(s1.status, 200, JSON.stringify(s1.body));
  const [c1, sc1, n1, r1] = s1.body.answers;
  assert.deepEqual({ type: team.type, name: team.name, choice: team.choice, confidence: team.confidence },
                   { type: 'choice', name: 'team', choice: c1.choice, confidence: c1.confidence });
  assert.deepEqual(team.probabilities, [{ value: 'billing', probability: c1.probabilities.billing },
                                        { value: 'tech', probability: c1.probabilities.tech }]);
  assert.equal(urgency.type, 'score');
  assert.equal(urgency.score, sc1.score);
  assert.deepEqual(urgency.probabilities.map((p) => [p.label, p.value, p.probability]),
                   [['low', 0, sc1.probabilities['0']], ['medium', 1, sc1.probabilities['1']], ['high', 2, sc1.probabilities['2']]]);
  assert.deepEqual(angry, { type: 'predicate', name: null, probability: n1.probability });
  assert.equal(typeof refund.choice, 'boolean');  // values stay typed
  assert.equal(refund.choice, r1.choice === 'true');
  assert.deepEqual(refund.probabilities.map((p) => p.value), [true, false]);
  assert.ok(d.usage.input_tokens > 0 && d.usage.total_tokens === d.usage.input_tokens);
  assert.equal(d.usage.output_tokens, 0);
  // A conversation is the state as its JSON (the tiny model's 255-token context holds no more).
  const convo = await client.decisions.create({
    model: 'chat',
    input: [{ role: 'system', content: 's' }, { role: 'user', content: 'hi' }],
    questions: [{ type: 'predicate', instructions: 'Paid?' }],
  });
  assert.equal(convo.answers[0].type, 'predicate');
  const bad = async (body, param) => {
    const e = await refused('/v1/decisions', { model: 'chat', input: 'x', questions: [{ type: 'predicate', instructions: 'q' }], ...body }, param, 400);
    assert.equal(e.type, 'invalid_request_error');
  };
  await bad({ input: [{ type: 'function_call_output', call_id: 'nope', output: 'x' }] }, 'input[0].call_id');
  await bad({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,AA' }] }] }, 'input[0].content[0]');
  await bad({ questions: [{ type: 'choice', instructions: 'q', choices: [{ value: 'a' }] }] }, 'questions[0].choices');
  await bad({ questions: [{ type: 'choice', instructions: 'q', choices: [{ value: true }, { value: 'true' }] }] }, 'questions[0].choices[1].value');
  await bad({ questions: [{ type: 'score', instructions: 'q', levels: [{ label: 'a' }, { label: '' }] }] }, 'questions[0].levels[1].label');
  await bad({ questions: [{ type: 'predicate', name: 'x', instructions: 'q' }, { type: 'predicate', name: 'x', instructions: 'r' }] }, 'questions[1].name');
  await bad({ questions: [{ type: 'noul', instructions: 'q' }] }, 'questions[0].type');
  await bad({ questions: [{ type: 'predicate', instructions: 'q', weight: 1 }] }, 'questions[0].weight');
  await bad({ safety_identifier: 'u1' }, 'safety_identifier');
  await bad({ cache_salt: 's' }, 'cache_salt');
  await assert.rejects(client.decisions.create({ model: 'emb', input: 'x', questions: [{ type: 'predicate', instructions: 'q' }] }),
                       (e) => e.status === 400);
});

// The body of the curl request in docs/tasks.md's "System One example" section.
function docsExample() {
  const section = readFileSync(docs, 'utf8').split('\n## System One example\n')[1];
  assert.ok(section, `${docs} has no "## System One example" section`);
  const block = section.match(/```sh\n([\s\S]*?)\n```/);
  assert.ok(block, 'the System One example has no sh block');
  const body = block[1].match(/ -d '([^']*)'$/);
  assert.ok(body, 'the System One example sends no -d body');
  return JSON.parse(body[1]);
}

// One answer against its question: the type echoed and the fields of that type, consistent.
function checkAnswer(q, a, index, what) {
  const sum = (o) => Object.values(o).reduce((x, y) => x + y, 0);
  assert.equal(a.type, q.type, what);
  assert.equal(a.index, index, what);
  if (q.type === 'choice') {
    const options = Array.isArray(q.criteria) ? q.criteria : Object.keys(q.criteria);
    assert.deepEqual(Object.keys(a).sort(), ['choice', 'confidence', 'index', 'probabilities', 'type'], what);
    assert.deepEqual(Object.keys(a.probabilities), options, what);
    assert.ok(Math.abs(sum(a.probabilities) - 1) < 1e-5, what);
    assert.equal(a.confidence, Math.max(...Object.values(a.probabilities)), what);
    assert.equal(a.probabilities[a.choice], a.confidence, what);
  } else if (q.type === 'score') {
    const levels = q.criteria.map((_, k) => String(k));
    assert.deepEqual(Object.keys(a).sort(), ['confidence', 'index', 'legend', 'probabilities', 'score', 'type'], what);
    assert.deepEqual(a.legend, Object.fromEntries(q.criteria.map((c, k) => [String(k), c])), what);
    assert.deepEqual(Object.keys(a.probabilities), levels, what);
    assert.ok(Math.abs(sum(a.probabilities) - 1) < 1e-5, what);
    const expected = levels.reduce((x, k) => x + Number(k) * a.probabilities[k], 0);
    assert.ok(Math.abs(a.score - expected) < 1e-9, what);
    assert.equal(a.confidence, Math.max(...Object.values(a.probabilities)), what);
  } else {
    assert.equal(q.type, 'noul', what);
    assert.deepEqual(Object.keys(a).sort(), ['confidence', 'index', 'noul', 'probability', 'type'], what);
    assert.ok(a.noul > 0 && a.noul < 1, what);
    assert.equal(a.probability, a.noul, what);
    assert.ok(Math.abs(a.confidence - Math.max(a.noul, 1 - a.noul)) < 1e-6, what);
  }
}

test('System One: the docs example by name answers by name, in order, as the list form does', async () => {
  const example = docsExample();
  assert.ok(example.questions && !Array.isArray(example.questions), 'the example sends questions by name');
  const names = Object.keys(example.questions);
  assert.deepEqual(names, ['team', 'anger', 'refund']);
  // The example's model, served here by the tiny chat model declared as a decide model.
  const decider = await serveReady(tessera, ['--model', `${example.model}=${work}/tiny`,
    '--kind', `${example.model}=decide`, '--rate-limit', '0'], { TESSERA_API_KEY: 'task-key' });
  try {
    const at = decider.base;
    // Served as a decide model, its KV pool is a task model's, not every slot's whole context.
    assert.match(decider.log.text, /KV pool: .*a task model's: one whole context/);
    const r = await post('/v1/systemone', example, at);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.model, example.model);
    const { answers } = r.body;
    assert.ok(answers && !Array.isArray(answers), JSON.stringify(answers));
    assert.deepEqual(Object.keys(answers), names);
    names.forEach((name, i) => checkAnswer(example.questions[name], answers[name], i, name));
    // The same questions, model and state as a list: a list of the same answers.
    const listed = await post('/v1/systemone', { ...example, questions: names.map((n) => example.questions[n]) }, at);
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.ok(Array.isArray(listed.body.answers));
    assert.equal(listed.body.answers.length, names.length);
    names.forEach((name, i) => assert.deepEqual(answers[name], listed.body.answers[i], name));
  } finally {
    decider.child.kill('SIGTERM');
  }
});

test('past the queue a task request is 429 queue_full with Retry-After (as generation); queued ones wait', async () => {
  // One running job (a long chat stream on the slow model) and one queued task; the next task
  // is refused at once.
  const busy = await startServer(tessera, ['--model', `slow=${work}/slow`, '--model', `emb=${work}/embed`,
    '--max-loaded-models', '2', '--max-active', '1', '--max-queued', '1', '--rate-limit', '0'],
  { TESSERA_API_KEY: 'task-key' });
  const at = `http://127.0.0.1:${busy.port}`;
  const until = async (pred) => {
    for (let i = 0; i < 600; i++) {
      const ready = await (await fetch(`${at}/ready`)).json();
      if (pred(ready)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the server never reached the expected load');
  };
  try {
    await waitReady(at, 60);
    const controller = new AbortController();
    const running = fetch(`${at}/v1/chat/completions`, { method: 'POST', signal: controller.signal,
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer task-key' },
      body: JSON.stringify({ model: 'slow', messages: [{ role: 'user', content: 'tell a story' }],
        max_tokens: 3000, stream: true }) }).catch(() => null);
    await until((r) => r.active === 1);
    const queued = post('/v1/embeddings', { model: 'emb', input: ['waits its turn'] }, at);
    await until((r) => r.queued === 1);
    const res = await fetch(`${at}/v1/rerank`, { method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer task-key' },
      body: JSON.stringify({ query: 'q', documents: ['a'] }) });
    assert.equal(res.status, 429);
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
    assert.equal((await res.json()).error.code, 'queue_full');
    controller.abort();  // the running stream ends; the queued embedding runs
    const done = await queued;
    assert.equal(done.status, 200);
    await running;
  } finally {
    busy.child.kill('SIGTERM');
  }
});

test('chat still works beside the task models; a task model refuses chat', async (client) => {
  const c = await client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
  assert.equal(c.choices.length, 1);
  await refused('/v1/chat/completions', { model: 'emb', messages: [{ role: 'user', content: 'hi' }] }, 'model');
});

const server = await serveReady(tessera, [
  '--model', `chat=${work}/tiny`, '--model', `emb=${work}/embed`, '--model', `cls=${work}/cls`,
  '--model', `rr=${work}/tiny`, '--kind', 'rr=rerank', '--model', `guard=${work}/tiny`,
  '--kind', 'guard=guard', '--max-loaded-models', '5', '--rate-limit', '0'], { TESSERA_API_KEY: 'task-key' });
const { child } = server;
base = server.base;
const client = new OpenAI({ apiKey: 'task-key', baseURL: `${base}/v1` });
await runTests(tests, client, child);

// Real-browser test of the built-in web page (issue #17): Debian's chromium, headless, driven
// by playwright-core (pinned in package.json). The server runs with an API key and serves the
// tiny and slow test models, the HTML parrot (whose greedy reply is markup), an embedding
// model and stories260k (no chat template: a completion model). Every answer the page shows is
// compared with the API's own answer to the same request. The key: a wrong one is refused and
// not kept, the right one is kept per origin (a reload asks nothing), Forget key asks again.
//   node ui_browser_test.mjs TESSERA E2E_WORK_DIR UI_SOURCE_DIR ARTIFACT_DIR STORIES_DIR
// (E2E_WORK_DIR holds tiny/, slow/, html/, embed/; UI_SOURCE_DIR is src/server/ui.)
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { checker, startServer, waitReady } from './harness.mjs';

const [tessera, work, uiSource, artifacts, stories] = process.argv.slice(2);
const KEY = 'ui-browser-key';
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
  "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const { check, failed } = checker();
assert.ok(Number(process.versions.node.split('.')[0]) >= 18, 'playwright-core 1.61 needs Node >= 18');

const { child, port } = await startServer(tessera, [
  '--model', `tiny=${work}/tiny`, '--model', `slow=${work}/slow`, '--model', `html=${work}/html`,
  '--model', `emb=${work}/embed`, '--model', `stories=${stories}`, '--max-loaded-models', '5',
  '--rate-limit', '0'],
{ TESSERA_API_KEY: KEY });
const base = `http://127.0.0.1:${port}`;
const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
let browser = null;

async function apiPost(path, body) {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: auth, body: JSON.stringify(body) });
  const json = await res.json();
  assert.equal(res.status, 200, JSON.stringify(json));
  return json;
}

try {
  await waitReady(base, 120);

  await check('static files: content, types, CSP and security headers, HEAD, 304, 405', async () => {
    for (const [path, file, type] of [['/', 'index.html', 'text/html'], ['/ui/app.js', 'app.js', 'text/javascript'],
      ['/ui/app.css', 'app.css', 'text/css']]) {
      const res = await fetch(`${base}${path}`);  // no key: the page is public
      assert.equal(res.status, 200, path);
      assert.equal(await res.text(), readFileSync(join(uiSource, file), 'utf8'), `${path} is ${file}`);
      assert.ok(res.headers.get('content-type').startsWith(type), res.headers.get('content-type'));
      assert.equal(res.headers.get('content-security-policy'), CSP);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
      assert.equal(res.headers.get('x-frame-options'), 'DENY');
      assert.equal(res.headers.get('cache-control'), 'no-cache');
      const etag = res.headers.get('etag');
      const again = await fetch(`${base}${path}`, { headers: { 'If-None-Match': etag } });
      assert.equal(again.status, 304);
      const head = await fetch(`${base}${path}`, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(Number(head.headers.get('content-length')), readFileSync(join(uiSource, file)).length);
    }
    const post = await fetch(`${base}/`, { method: 'POST', body: '{}' });
    assert.equal(post.status, 405);
    // The API itself still needs the key.
    assert.equal((await fetch(`${base}/v1/models`)).status, 401);
  });

  // Chromium's sandbox cannot start as root (the CI container runs tests as root).
  const args = process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [];
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args });
  const context = await browser.newContext({ viewport: { width: 1000, height: 900 } });
  const page = await context.newPage();
  const dialogs = [];
  const pageErrors = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  // The API's own 4xx answers are logged by chromium too; anything else (a CSP violation, a
  // script error) fails the run.
  page.on('console', (m) => {
    if (m.type() === 'error' && !/the server responded with a status of 4\d\d/.test(m.text())) pageErrors.push(m.text());
  });
  const last = '#conversation > li.msg.assistant:last-child';
  const waitReply = (timeout = 60000) => page.waitForFunction(
    (sel) => { const li = document.querySelector(sel); return li && li.dataset.state !== 'streaming'; }, last, { timeout });
  const reply = () => page.evaluate((sel) => {
    const li = document.querySelector(sel);
    return { state: li.dataset.state, raw: li.querySelector('pre.raw').textContent,
             shown: li.querySelector('.body').textContent, stats: li.querySelector('.stats').textContent };
  }, last);
  const system = 'You answer briefly.';
  const greedy = async (model, user, maxTokens) => apiPost('/v1/chat/completions', {
    model, max_tokens: maxTokens, temperature: 0,
    messages: [{ role: 'system', content: system }, { role: 'user', content: user }] });

  await check('page loads under its CSP; without a key the API error is shown', async () => {
    const res = await page.goto(`${base}/`);
    assert.equal(res.status(), 200);
    assert.equal(res.headers()['content-security-policy'], CSP);
    await page.waitForFunction(() => /HTTP 401/.test(document.getElementById('error').textContent), null, { timeout: 10000 });
    assert.match(await page.textContent('#error'), /HTTP 401: missing API key/);
  });

  await check('a wrong key is refused with a clear message and not kept', async () => {
    assert.equal(await page.isVisible('#api-key'), true);
    assert.equal(await page.isHidden('#key-forget'), true);
    await page.fill('#api-key', 'not-the-key-0123456789');
    await page.click('#key-save');
    await page.waitForFunction(() => /not this server's API key/.test(document.getElementById('error').textContent), null, { timeout: 10000 });
    assert.match(await page.textContent('#error'), /That is not this server's API key \(HTTP 401\): .*~\/\.config\/tessera\/api-key/);
    assert.equal(await page.evaluate(() => localStorage.getItem('tessera.apiKey')), null);
    assert.equal(await page.isVisible('#api-key'), true);
  });

  const chatPicker = () => page.$$eval('#chat-model option', (o) => o.map((x) => `${x.value}${x.disabled ? ' (disabled)' : ''}`));
  const pickerFilled = () => page.waitForFunction(() => document.querySelectorAll('#chat-model option').length === 4, null, { timeout: 10000 });
  await check('key entry: models listed and filtered by kind; the completion model greyed out with why', async () => {
    await page.fill('#api-key', KEY);
    await page.click('#key-save');
    await pickerFilled();
    assert.deepEqual(await chatPicker(), ['tiny', 'slow', 'html', 'stories (disabled)']);
    assert.deepEqual(await page.$$eval('#emb-model option', (o) => o.map((x) => x.value)), ['emb']);
    assert.deepEqual(await page.$$eval('#cmp-model option', (o) => o.map((x) => x.value)), ['tiny', 'slow', 'html', 'stories']);
    assert.equal(await page.textContent('#chat-model-why'), 'stories has no chat template: use /v1/completions (Tasks → Completion).');
    assert.equal(await page.isVisible('#chat-model-note'), true);
    assert.equal(await page.isHidden('#error'), true);
    // Kept for this origin; the entry is hidden and Forget key shown.
    assert.equal(await page.evaluate(() => localStorage.getItem('tessera.apiKey')), KEY);
    assert.equal(await page.isHidden('#api-key'), true);
    assert.equal(await page.isVisible('#key-forget'), true);
    assert.equal(await page.textContent('#key-state'), 'key saved for this site');
    // The API says the same: stories is a completion model, and chat to it is a 400 saying what to do.
    const models = await (await fetch(`${base}/v1/models`, { headers: auth })).json();
    assert.equal(models.data.find((m) => m.id === 'stories').x_tessera_kind, 'completion');
    assert.equal((await (await fetch(`${base}/v1/models/stories`, { headers: auth })).json()).x_tessera_kind, 'completion');
    const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: auth,
      body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'hi' }] }) });
    assert.equal(res.status, 400);
    assert.match((await res.json()).error.message, /'stories' is a completion model: it has no chat template .*use \/v1\/completions/);
  });

  await check('reload and a new tab: the key is remembered, nothing asked, requests work', async () => {
    await page.reload();
    await pickerFilled();
    assert.equal(await page.isHidden('#api-key'), true);
    assert.equal(await page.isHidden('#error'), true);
    assert.deepEqual(await chatPicker(), ['tiny', 'slow', 'html', 'stories (disabled)']);
    // Another tab of the same origin (sessionStorage would not carry the key there).
    const tab = await context.newPage();
    try {
      await tab.goto(`${base}/`);
      await tab.waitForFunction(() => document.querySelectorAll('#chat-model option').length === 4, null, { timeout: 10000 });
      assert.equal(await tab.isHidden('#api-key'), true);
      assert.equal(await tab.isHidden('#error'), true);
    } finally {
      await tab.close();
    }
  });

  await check('tiny: the streamed reply equals the API greedy answer; figures shown', async () => {
    await page.selectOption('#chat-model', 'tiny');
    await page.click('#settings summary');
    await page.fill('#system-prompt', system);
    await page.fill('#temperature', '0');
    await page.fill('#max-tokens', '24');
    await page.fill('#prompt', 'Hello there');
    await page.click('#send');
    await waitReply();
    const r = await reply();
    const api = await greedy('tiny', 'Hello there', 24);
    assert.equal(r.state, 'done');
    assert.ok(api.choices[0].message.content.length > 0);
    assert.equal(r.raw, api.choices[0].message.content);
    assert.match(r.stats, /TTFT \d+ ms/);
    assert.match(r.stats, /\d+\.\d tok\/s/);
    assert.ok(r.stats.includes(`prompt ${api.usage.prompt_tokens} tokens`), r.stats);
    assert.ok(r.stats.includes(`completion ${api.usage.completion_tokens} tokens`), r.stats);
    assert.equal(await page.isEnabled('#send'), true);
  });

  await check('slow: Stop ends a long reply, it stops growing and the page is usable', async () => {
    await page.click('#new-chat');
    await page.selectOption('#chat-model', 'slow');
    await page.fill('#max-tokens', '3000');
    await page.fill('#prompt', 'Tell me a long story');
    await page.click('#send');
    // (The slow model's greedy reply is newlines: the raw text shows them.)
    await page.waitForFunction((sel) => {
      const li = document.querySelector(sel);
      return li && (li.querySelector('pre.raw').textContent.length > 20 || li.dataset.state !== 'streaming');
    }, last, { timeout: 90000 });
    assert.equal((await reply()).state, 'streaming');
    assert.equal(await page.isEnabled('#stop'), true);
    assert.equal(await page.isDisabled('#send'), true);
    await page.click('#stop');
    await page.waitForFunction((sel) => document.querySelector(sel).dataset.state === 'stopped', last, { timeout: 10000 });
    const stopped = await reply();
    // The server saw the client leave: the slot is free again (bounded poll).
    const deadline = Date.now() + 15000;
    for (;;) {
      const ready = await (await fetch(`${base}/ready`)).json();
      if (ready.active === 0) break;
      assert.ok(Date.now() < deadline, 'the stopped job still runs');
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.equal((await reply()).raw, stopped.raw, 'the reply grew after Stop');
    assert.match(stopped.stats, /stopped/);
    assert.ok(stopped.raw.length > 0);
    assert.equal(await page.isEnabled('#send'), true);
    assert.equal(await page.isDisabled('#stop'), true);
  });

  let htmlAnswer = '';
  await check('html model: markup in the reply is shown as text, nothing runs', async () => {
    await page.click('#new-chat');
    await page.selectOption('#chat-model', 'html');
    await page.fill('#max-tokens', '48');
    await page.fill('#prompt', 'Say something');
    await page.press('#prompt', 'Enter');
    await waitReply();
    const r = await reply();
    const api = await greedy('html', 'Say something', 48);
    htmlAnswer = api.choices[0].message.content;
    assert.match(htmlAnswer, /<script>.*<\/script><img [^>]*onerror=/);
    assert.equal(r.raw, htmlAnswer);
    assert.equal(r.shown, htmlAnswer, 'shown as literal text');
    const counts = await page.evaluate(() => ({
      inConversation: document.querySelectorAll('#conversation script, #conversation img, #conversation [onerror]').length,
      scripts: document.scripts.length, images: document.images.length }));
    assert.deepEqual(counts, { inConversation: 0, scripts: 1, images: 0 });
    assert.deepEqual(dialogs, []);
    mkdirSync(artifacts, { recursive: true });
    const shot = join(artifacts, 'ui_chat.png');
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot: ${shot}`);
  });

  await check('narrow window: no horizontal overflow', async () => {
    await page.setViewportSize({ width: 360, height: 800 });
    const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(over <= 0, `page is ${over}px wider than the window`);
    await page.screenshot({ path: join(artifacts, 'ui_chat_narrow.png') });
    await page.setViewportSize({ width: 1000, height: 900 });
  });

  await check('reload: the conversations persist; Clear empties the current one', async () => {
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('#conversation > li').length === 2, null, { timeout: 10000 });
    assert.equal((await reply()).raw, htmlAnswer);
    assert.equal(await page.$$eval('#chat-list option', (o) => o.length), 3);
    assert.equal(await page.evaluate(() => localStorage.getItem('tessera.apiKey')), KEY);
    await page.click('#clear-chat');
    assert.equal(await page.$$eval('#conversation > li', (l) => l.length), 2, 'Clear showed the next chat');
    assert.equal(await page.$$eval('#chat-list option', (o) => o.length), 2);
    assert.ok(!(await page.evaluate(() => localStorage.getItem('tessera.chats'))).includes('onerror'));
    await page.click('#clear-chat');
    await page.click('#clear-chat');
    assert.equal(await page.$$eval('#conversation > li', (l) => l.length), 0);
    await page.reload();
    await pickerFilled();
    assert.equal(await page.$$eval('#conversation > li', (l) => l.length), 0);
  });

  await check('markdown-ish rendering builds elements from text only', async () => {
    const md = 'Intro **bold** and *it* with `x<y>`\n\n- one <b>\n- two\n\n1. first\n2. second\n\n```js\n<script>alert(3)</script>\n```\nend';
    await page.evaluate((content) => localStorage.setItem('tessera.chats', JSON.stringify({ current: 'm',
      list: [{ id: 'm', title: 'md', messages: [{ role: 'assistant', content, model: 'x' }] }] })), md);
    await page.reload();
    await page.waitForSelector('#conversation .body pre', { timeout: 10000 });
    const shape = await page.evaluate(() => {
      const b = document.querySelector('#conversation .body');
      const texts = (sel) => [...b.querySelectorAll(sel)].map((e) => e.textContent);
      return { strong: texts('strong'), em: texts('em'), code: texts('p code'), ul: texts('ul > li'), ol: texts('ol > li'),
               pre: texts('pre code'), lang: b.querySelector('pre').dataset.lang, p: texts(':scope > p'),
               elements: b.querySelectorAll('script, b, img').length };
    });
    assert.deepEqual(shape, { strong: ['bold'], em: ['it'], code: ['x<y>'], ul: ['one <b>', 'two'], ol: ['first', 'second'],
      pre: ['<script>alert(3)</script>'], lang: 'js', p: ['Intro bold and it with x<y>', 'end'], elements: 0 });
    await page.click('#clear-chat');
  });

  await check('Tasks: embedding similarity equals the API; an API error is shown', async () => {
    await page.click('#tab-tasks');
    assert.equal(await page.isVisible('#task-emb'), true);
    const texts = ['The river moved slowly past the old mill.', 'bread', 'a small boat waited'];
    await page.fill('#emb-texts', texts.join('\n'));
    await page.click('#emb-run');
    await page.waitForSelector('#emb-out table', { timeout: 30000 });
    const cells = await page.$$eval('#emb-out tbody tr', (rows) => rows.map((r) => [...r.querySelectorAll('td')].map((c) => Number(c.textContent))));
    const api = await apiPost('/v1/embeddings', { model: 'emb', input: texts, encoding_format: 'float' });
    const v = api.data.map((d) => d.embedding);
    const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 3; j++) {
        const want = dot(v[i], v[j]) / Math.sqrt(dot(v[i], v[i]) * dot(v[j], v[j]));
        assert.ok(Math.abs(cells[i][j] - want) < 6e-5, `cos[${i}][${j}] ${cells[i][j]} vs ${want}`);
      }
    }
    // A decision with eleven options: the API's 400 and its message appear on the card.
    await page.selectOption('#dec-model', 'tiny');
    await page.fill('#dec-question', 'Pick one');
    await page.fill('#dec-options', Array.from({ length: 11 }, (_, i) => `option ${i}`).join('\n'));
    await page.click('#dec-run');
    await page.waitForFunction(() => !document.querySelector('#task-dec .error').hidden, null, { timeout: 30000 });
    const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: auth, body: JSON.stringify({
      model: 'tiny', messages: [{ role: 'user', content: 'Pick one' }], logprobs: true,
      response_format: { type: 'json_schema', json_schema: { name: 'decision',
        schema: { enum: Array.from({ length: 11 }, (_, i) => `option ${i}`) } } } }) });
    const { error } = await res.json();
    assert.equal(res.status, 400);
    assert.equal(await page.textContent('#task-dec .error'), `HTTP 400: ${error.message}${error.code ? ` (${error.code})` : ''}`);
  });

  await check('Tasks: a completion on stories equals the API answer', async () => {
    await page.evaluate(() => { document.getElementById('temperature').value = '0'; });
    // The chat panel's note opens the Completion card on the completion model.
    await page.click('#tab-chat');
    await page.click('#open-completion');
    assert.equal(await page.isVisible('#task-cmp'), true);
    assert.equal(await page.inputValue('#cmp-model'), 'stories');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'cmp-prompt');
    await page.fill('#cmp-prompt', 'Once upon a time');
    await page.fill('#cmp-max', '16');
    await page.click('#cmp-run');
    await page.waitForSelector('#cmp-out pre', { timeout: 30000 });
    // The chat's settings (temperature 0) apply: greedy, so the API gives the same.
    const api = await apiPost('/v1/completions', { model: 'stories', prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
    assert.ok(api.choices[0].text.length > 0);
    assert.equal(await page.textContent('#cmp-out pre'), `Once upon a time${api.choices[0].text}`);
    assert.match(await page.textContent('#cmp-out .stats'), new RegExp(`completion ${api.usage.completion_tokens} tokens`));
  });

  await check('Forget key: the key is gone and asked for again, also after a reload', async () => {
    await page.click('#tab-chat');
    await page.click('#key-forget');
    assert.equal(await page.evaluate(() => localStorage.getItem('tessera.apiKey')), null);
    assert.equal(await page.isVisible('#api-key'), true);
    assert.equal(await page.isHidden('#key-forget'), true);
    await page.waitForFunction(() => /HTTP 401/.test(document.getElementById('error').textContent), null, { timeout: 10000 });
    assert.match(await page.textContent('#error'), /enter the server's API key above/);
    await page.reload();
    await page.waitForFunction(() => /HTTP 401/.test(document.getElementById('error').textContent), null, { timeout: 10000 });
    assert.equal(await page.isVisible('#api-key'), true);
    assert.equal(await page.evaluate(() => localStorage.getItem('tessera.apiKey')), null);
  });

  await check('no script errors, CSP violations or dialogs during the run', async () => {
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(dialogs, []);
  });
} finally {
  if (browser) await browser.close();
  child.kill('SIGTERM');
}

await check('--no-ui: / is the API\'s 404', async () => {
  const off = await startServer(tessera, ['--model', `tiny=${work}/tiny`, '--no-ui', '--rate-limit', '0'], { TESSERA_API_KEY: KEY });
  try {
    const at = `http://127.0.0.1:${off.port}`;
    for (const path of ['/', '/ui/app.js']) {
      const res = await fetch(`${at}${path}`, { headers: auth });
      assert.equal(res.status, 404);
      assert.equal((await res.json()).error.code, 'not_found');
      assert.equal(res.headers.get('content-security-policy'), null);
    }
  } finally {
    off.child.kill('SIGTERM');
  }
});

console.log(failed() ? `${failed()} check(s) failed` : 'all checks passed');
process.exit(failed() ? 1 : 0);

// tessera's built-in page: chat with streamed replies, and the task endpoints. Plain DOM, no
// framework, nothing fetched but this server's API. Model text only ever enters the page as
// text nodes (textContent, append(string)), never as HTML, so markup in a reply is shown, not
// run. The API key, conversations and settings are kept in localStorage (this origin's): the
// key is checked against the server before it is kept, and "Forget key" removes it.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const KEY = 'tessera.apiKey';
  const CHATS = 'tessera.chats';
  const SETTINGS = 'tessera.settings';

  // An element whose children are nodes or strings (strings become text nodes).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function load(name, fallback) {
    try {
      const v = JSON.parse(localStorage.getItem(name));
      return v && typeof v === 'object' ? v : fallback;
    } catch {
      return fallback;
    }
  }

  // ---------------------------------------------------------------------------- the API

  function headers() {
    const h = { 'Content-Type': 'application/json' };
    const key = localStorage.getItem(KEY);
    if (key) h.Authorization = `Bearer ${key}`;
    return h;
  }

  // The API's error JSON as one line: "HTTP 401: incorrect API key ... (invalid_api_key)".
  async function errorOf(res) {
    let message = res.statusText || 'request failed';
    try {
      const j = await res.json();
      if (j && j.error && j.error.message) {
        message = j.error.message + (j.error.code ? ` (${j.error.code})` : '');
      }
    } catch { /* not JSON: keep the status text */ }
    if (res.status === 401) message += localStorage.getItem(KEY) ? ` — ${KEY_REFUSED}` : ` — enter the server's API key above (${KEY_HELP})`;
    return new Error(`HTTP ${res.status}: ${message}`);
  }

  async function api(path, body, signal) {
    const init = body === undefined ? { headers: headers(), signal }
      : { method: 'POST', headers: headers(), body: JSON.stringify(body), signal };
    const res = await fetch(path, init);
    if (!res.ok) throw await errorOf(res);
    return res.json();
  }

  function showError(node, message) {
    node.textContent = message || '';
    node.hidden = !message;
  }
  const pageError = (m) => showError($('error'), m);

  // ---------------------------------------------------------------------------- key

  // Where a user finds the key (docs/server.md, the saved key).
  const KEY_HELP = 'tessera serve printed it when it first started; on the server\'s machine it is in ~/.config/tessera/api-key';
  const KEY_REFUSED = 'the saved key was refused (did the server\'s key change?): Forget key, then enter the current one';

  // With a key kept, its entry is hidden (a reload asks nothing); without one, it is shown.
  function keyState() {
    const kept = Boolean(localStorage.getItem(KEY));
    $('key-entry').hidden = kept;
    $('key-forget').hidden = !kept;
    $('key-state').textContent = kept ? 'key saved for this site' : '';
  }
  // The key is kept only once the server accepts it (GET /v1/models).
  async function useKey() {
    const k = $('api-key').value.trim();
    if (!k) {
      pageError(`Enter the server's API key: ${KEY_HELP}.`);
      return;
    }
    let res;
    try {
      res = await fetch('/v1/models', { headers: { Authorization: `Bearer ${k}` } });
    } catch (e) {
      pageError(`Cannot reach the server: ${e.message}`);
      return;
    }
    if (res.status === 401) {
      pageError(`That is not this server's API key (HTTP 401): ${KEY_HELP}.`);
      $('api-key').select();
      return;
    }
    if (!res.ok) {
      pageError(`Checking the key: ${(await errorOf(res)).message}`);
      return;
    }
    localStorage.setItem(KEY, k);
    $('api-key').value = '';
    keyState();
    pageError('');
    showModels(await res.json());
  }
  $('key-save').addEventListener('click', useKey);
  $('api-key').addEventListener('keydown', (e) => { if (e.key === 'Enter') useKey(); });
  $('key-forget').addEventListener('click', () => {
    localStorage.removeItem(KEY);
    $('api-key').value = '';
    keyState();
    loadModels();
    $('api-key').focus();
  });

  // ---------------------------------------------------------------------------- models

  // Which served kinds (x_tessera_kind of /v1/models) each picker offers; a server that does
  // not say offers every model everywhere.
  const PICKERS = {
    'chat-model': (k) => k !== 'embed' && k !== 'classify' && k !== 'completion',
    'cmp-model': (k) => k === 'completion' || k === 'chat' || k === 'decide',
    'emb-model': (k) => k === 'embed',
    'rr-model': (k) => k === 'rerank',
    'mod-model': (k) => k === 'guard',
    'cls-model': (k) => k === 'classify',
    'dec-model': (k) => k === 'chat' || k === 'decide',
  };
  let settings = load(SETTINGS, {});

  // Completion models (no chat template) stay in the chat picker, greyed out, and the note
  // under it says why and what to use instead.
  let completionOnly = [];
  function fillPickers(models) {
    completionOnly = models.filter((m) => m.kind === 'completion').map((m) => m.id);
    for (const [id, fits] of Object.entries(PICKERS)) {
      const sel = $(id);
      const prev = sel.value || (id === 'chat-model' ? settings.model : '');
      const ok = models.filter((m) => !m.kind || fits(m.kind));
      const options = ok.map((m) => el('option', { value: m.id }, m.id));
      if (!ok.length) options.push(el('option', { value: '' }, id === 'chat-model' ? '(no chat model served)' : '(none served)'));
      if (id === 'chat-model') {
        for (const name of completionOnly) {
          options.push(el('option', { value: name, disabled: '' }, `${name} (no chat template)`));
        }
      }
      sel.replaceChildren(...options);
      if (ok.some((m) => m.id === prev)) sel.value = prev;
    }
    $('chat-model-why').textContent = completionOnly.map((name) => `${name} has no chat template: use /v1/completions (Tasks → Completion).`).join(' ');
    $('chat-model-note').hidden = !completionOnly.length;
  }
  $('open-completion').addEventListener('click', () => {
    selectTab($('tab-tasks'));
    const first = completionOnly.find((name) => [...$('cmp-model').options].some((o) => o.value === name));
    if (first) $('cmp-model').value = first;
    $('cmp-prompt').focus();
  });
  const showModels = (r) => fillPickers(r.data.map((m) => ({ id: m.id, kind: m.x_tessera_kind })));

  async function loadModels() {
    try {
      showModels(await api('/v1/models'));
      pageError('');
    } catch (e) {
      pageError(`Models: ${e.message}`);
    }
  }
  $('models-refresh').addEventListener('click', loadModels);

  // ---------------------------------------------------------------------------- markdown-ish

  // **bold**, *italic* and `code` inside one block, as elements holding text nodes.
  function inline(node, text) {
    const re = /`([^`\n]+)`|\*\*([^*\n]+?)\*\*|\*([^*\s](?:[^*\n]*[^*\s])?)\*/g;
    let last = 0;
    for (let m = re.exec(text); m; m = re.exec(text)) {
      if (m.index > last) node.append(text.slice(last, m.index));
      if (m[1] !== undefined) node.append(el('code', {}, m[1]));
      else if (m[2] !== undefined) node.append(el('strong', {}, m[2]));
      else node.append(el('em', {}, m[3]));
      last = re.lastIndex;
    }
    if (last < text.length) node.append(text.slice(last));
    return node;
  }

  // Paragraphs, fenced code blocks (an unclosed fence runs to the end, as while streaming)
  // and bulleted or numbered lists.
  function renderMarkdown(text, into) {
    into.replaceChildren();
    const lines = text.split('\n');
    let para = [];
    let list = null;
    const flush = () => {
      if (para.length) into.append(inline(el('p'), para.join('\n')));
      para = [];
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const fence = /^\s*```\s*(\S*)/.exec(line);
      if (fence) {
        flush();
        list = null;
        const code = [];
        for (i++; i < lines.length && !/^\s*```/.test(lines[i]); i++) code.push(lines[i]);
        const pre = el('pre', fence[1] ? { 'data-lang': fence[1] } : {}, el('code', {}, code.join('\n')));
        into.append(pre);
        continue;
      }
      const item = /^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$/.exec(line);
      if (item) {
        flush();
        const ordered = item[1] !== undefined;
        if (!list || list.ordered !== ordered) {
          list = { ordered, node: el(ordered ? 'ol' : 'ul') };
          if (ordered && item[1] !== '1') list.node.setAttribute('start', item[1]);
          into.append(list.node);
        }
        list.node.append(inline(el('li'), item[2]));
      } else if (!line.trim()) {
        flush();
        list = null;
      } else {
        list = null;
        para.push(line);
      }
    }
    flush();
  }

  // ---------------------------------------------------------------------------- chats

  // {current: id, list: [{id, title, messages: [{role, content, model?, stats?, state?}]}]}
  let chats = load(CHATS, null);
  if (!chats || !Array.isArray(chats.list)) chats = { current: null, list: [] };
  const saveChats = () => localStorage.setItem(CHATS, JSON.stringify(chats));
  const saveSettings = () => localStorage.setItem(SETTINGS, JSON.stringify(settings));

  function newChat() {
    const c = { id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`, title: '', messages: [] };
    chats.list.unshift(c);
    chats.current = c.id;
    return c;
  }
  function chat() {
    return chats.list.find((c) => c.id === chats.current) || newChat();
  }

  function fillChatList() {
    const sel = $('chat-list');
    const cur = chat();
    sel.replaceChildren(...chats.list.map((c) => el('option', { value: c.id }, c.title || '(new chat)')));
    sel.value = cur.id;
  }

  function figures(m) {
    const s = m.stats || {};
    const parts = [];
    if (s.ttft_ms !== undefined) parts.push(`TTFT ${Math.round(s.ttft_ms)} ms`);
    if (s.tok_s !== undefined) parts.push(`${s.tok_s.toFixed(1)} tok/s`);
    if (s.prompt_tokens !== undefined) parts.push(`prompt ${s.prompt_tokens} tokens`);
    if (s.completion_tokens !== undefined) parts.push(`completion ${s.completion_tokens} tokens`);
    if (s.finish) parts.push(s.finish);
    if (m.state === 'stopped') parts.push('stopped');
    return parts.join(' · ');
  }

  function messageView(m) {
    const li = el('li', { class: `msg ${m.role}`, 'data-state': m.state || 'done' });
    li.append(el('div', { class: 'who' }, m.role === 'user' ? 'You' : (m.model || 'assistant')));
    const body = el('div', { class: 'body' });
    renderMarkdown(m.content, body);
    li.append(body);
    if (m.role === 'assistant') {
      if (m.error) li.append(el('p', { class: 'error' }, m.error));
      const raw = el('pre', { class: 'raw', hidden: '' }, m.content);
      const toggle = el('button', { type: 'button', class: 'link', 'aria-expanded': 'false' }, 'raw text');
      toggle.addEventListener('click', () => {
        raw.hidden = !raw.hidden;
        toggle.setAttribute('aria-expanded', String(!raw.hidden));
      });
      li.append(el('div', { class: 'stats' }, figures(m), ' ', toggle), raw);
    }
    return li;
  }

  function renderConversation() {
    const c = chat();
    $('conversation').replaceChildren(...c.messages.map(messageView));
    fillChatList();
  }

  $('chat-list').addEventListener('change', () => {
    chats.current = $('chat-list').value;
    saveChats();
    renderConversation();
  });
  $('new-chat').addEventListener('click', () => {
    if (busy) return;
    if (chat().messages.length) newChat();
    saveChats();
    renderConversation();
    $('prompt').focus();
  });
  $('clear-chat').addEventListener('click', () => {
    if (busy) return;
    chats.list = chats.list.filter((c) => c.id !== chats.current);
    chats.current = chats.list.length ? chats.list[0].id : null;
    if (!chats.list.length) newChat();
    saveChats();
    renderConversation();
  });

  // ---------------------------------------------------------------------------- settings

  const FIELDS = { 'system-prompt': 'system', temperature: 'temperature', 'top-p': 'top_p', 'max-tokens': 'max_tokens', seed: 'seed' };
  for (const [id, name] of Object.entries(FIELDS)) {
    if (typeof settings[name] === 'string') $(id).value = settings[name];
    $(id).addEventListener('change', () => {
      settings[name] = $(id).value;
      saveSettings();
    });
  }
  $('chat-model').addEventListener('change', () => {
    settings.model = $('chat-model').value;
    saveSettings();
  });

  // The request's sampling fields; an empty box leaves the field to the server.
  function sampling() {
    const out = {};
    for (const [id, name] of [['temperature', 'temperature'], ['top-p', 'top_p'], ['max-tokens', 'max_tokens'], ['seed', 'seed']]) {
      const v = $(id).value.trim();
      if (!v) continue;
      const n = Number(v);
      if (!Number.isFinite(n)) throw new Error(`${name} must be a number`);
      out[name] = n;
    }
    return out;
  }

  // ---------------------------------------------------------------------------- streaming

  let busy = false;
  let controller = null;
  function setBusy(b) {
    busy = b;
    $('send').disabled = b;
    $('stop').disabled = !b;
    $('new-chat').disabled = b;
    $('clear-chat').disabled = b;
    $('chat-list').disabled = b;
    $('chat-status').textContent = b ? 'generating…' : '';
  }

  // Calls onEvent(json) for each SSE `data:` event of the response until [DONE].
  async function readEvents(res, onEvent) {
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    try {
      return await eventLoop(reader, onEvent, buf);
    } catch (e) {
      reader.cancel().catch(() => {});  // an error event or a bad chunk: drop the connection
      throw e;
    }
  }
  async function eventLoop(reader, onEvent, buf) {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buf += value;
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        const event = buf.slice(0, i);
        buf = buf.slice(i + 2);
        for (const line of event.split('\n')) {
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          if (data === '[DONE]') return true;
          onEvent(JSON.parse(data));
        }
      }
    }
  }

  async function send() {
    const text = $('prompt').value;
    if (busy || !text.trim()) return;
    const model = $('chat-model').value;
    let params;
    try {
      if (!model) {
        throw new Error(completionOnly.length ? `no chat model is served: ${$('chat-model-why').textContent}`
          : 'no chat model is served (or the list is not loaded yet: Refresh models)');
      }
      params = sampling();
    } catch (e) {
      pageError(e.message);
      return;
    }
    pageError('');
    const c = chat();
    const history = c.messages.filter((m) => m.content && !m.error).map((m) => ({ role: m.role, content: m.content }));
    const system = $('system-prompt').value;
    const messages = [...(system.trim() ? [{ role: 'system', content: system }] : []), ...history, { role: 'user', content: text }];
    c.messages.push({ role: 'user', content: text });
    if (!c.title) c.title = text.slice(0, 48);
    const reply = { role: 'assistant', content: '', model, state: 'streaming', stats: {} };
    c.messages.push(reply);
    $('prompt').value = '';
    saveChats();
    renderConversation();
    const view = $('conversation').lastElementChild;
    let pending = false;
    const redraw = () => {
      pending = false;
      if (!view.isConnected) return;  // the reply has ended and was drawn whole
      renderMarkdown(reply.content, view.querySelector('.body'));
      view.querySelector('.raw').textContent = reply.content;
    };

    controller = new AbortController();
    setBusy(true);
    const t0 = performance.now();
    let first = null;
    let usage = null;
    let server = null;  // x_tessera_stats of the last chunk
    try {
      const res = await fetch('/v1/chat/completions', {
        method: 'POST', headers: headers(), signal: controller.signal,
        body: JSON.stringify({ model, messages, stream: true, stream_options: { include_usage: true }, ...params }),
      });
      if (!res.ok) throw await errorOf(res);
      const complete = await readEvents(res, (j) => {
        if (j.error) throw new Error(`stream ended with an error: ${j.error.message}${j.error.code ? ` (${j.error.code})` : ''}`);
        const ch = j.choices && j.choices[0];
        if (ch && ch.delta && typeof ch.delta.content === 'string' && ch.delta.content) {
          if (first === null) first = performance.now();
          reply.content += ch.delta.content;
          if (!pending) {
            pending = true;
            requestAnimationFrame(redraw);
          }
        }
        if (ch && ch.finish_reason) reply.stats.finish = ch.finish_reason;
        if (j.usage) usage = j.usage;
        if (j.x_tessera_stats) server = j.x_tessera_stats;
      });
      if (!complete) throw new Error('the stream ended early (no [DONE])');
      reply.state = 'done';
    } catch (e) {
      if (e.name === 'AbortError') {
        reply.state = 'stopped';
      } else {
        reply.state = 'error';
        reply.error = e.message;
        pageError(e.message);
      }
    }
    const end = performance.now();
    if (first !== null) reply.stats.ttft_ms = first - t0;
    if (usage) {
      reply.stats.prompt_tokens = usage.prompt_tokens;
      reply.stats.completion_tokens = usage.completion_tokens;
      // Decode speed as /stats in `tessera chat` shows it: the worker's own figure (tokens
      // after the first, per second), else the page's (arrival times lump tokens together).
      if (server && server.decode_tok_s > 0) reply.stats.tok_s = server.decode_tok_s;
      else if (usage.completion_tokens > 1 && first !== null && end > first) reply.stats.tok_s = (usage.completion_tokens - 1) / ((end - first) / 1000);
    }
    controller = null;
    saveChats();
    view.replaceWith(messageView(reply));
    setBusy(false);
    $('prompt').focus();
  }

  $('send').addEventListener('click', send);
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('stop').addEventListener('click', () => { if (controller) controller.abort(); });

  // ---------------------------------------------------------------------------- tasks

  const lines = (id) => $(id).value.split('\n').map((s) => s.trim()).filter(Boolean);
  const pct = (p) => `${(100 * p).toFixed(1)}%`;

  // Runs `work` for the task card `id` with its error line and output box.
  function task(id, work) {
    const card = $(`task-${id}`);
    const button = $(`${id}-run`);
    const error = card.querySelector('.error');
    const out = $(`${id}-out`);
    button.addEventListener('click', async () => {
      const model = $(`${id}-model`).value;
      showError(error, '');
      out.replaceChildren();
      button.disabled = true;
      try {
        if (!model) throw new Error('no model of this kind is served');
        out.append(await work(model));
      } catch (e) {
        showError(error, e.message);
      } finally {
        button.disabled = false;
      }
    });
  }

  function table(head, rows) {
    return el('table', {}, el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, ...rows.map((r) => el('tr', {}, ...r.map((c, i) => (i === 0 ? el('th', { scope: 'row' }, c) : el('td', {}, c)))))));
  }

  task('cmp', async (model) => {
    const prompt = $('cmp-prompt').value;
    if (!prompt) throw new Error('give a prompt to continue');
    // The chat's sampling settings apply here too; max_tokens is the box's own.
    const body = { model, prompt, ...sampling() };
    const max = $('cmp-max').value.trim();
    if (max) body.max_tokens = Number(max);
    const r = await api('/v1/completions', body);
    const ch = r.choices[0];
    return el('div', {}, el('pre', { class: 'completion' }, el('strong', {}, prompt), ch.text),
      el('p', { class: 'stats' }, `completion ${r.usage.completion_tokens} tokens · ${ch.finish_reason}`));
  });

  task('emb', async (model) => {
    const texts = lines('emb-texts');
    if (texts.length < 2) throw new Error('give two or more texts, one per line');
    const r = await api('/v1/embeddings', { model, input: texts, encoding_format: 'float' });
    const v = r.data.map((d) => d.embedding);
    const cos = (a, b) => {
      let ab = 0, aa = 0, bb = 0;
      for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
      return ab / Math.sqrt(aa * bb);
    };
    const label = (t, i) => `${i + 1}. ${t.length > 24 ? `${t.slice(0, 24)}…` : t}`;
    return table(['', ...texts.map((_, i) => String(i + 1))],
      texts.map((t, i) => [label(t, i), ...texts.map((_, j) => cos(v[i], v[j]).toFixed(4))]));
  });

  task('rr', async (model) => {
    const documents = lines('rr-docs');
    const query = $('rr-query').value.trim();
    if (!query || !documents.length) throw new Error('give a query and at least one document');
    const r = await api('/v1/rerank', { model, query, documents });
    return el('ol', { class: 'ranked' }, ...r.results.map((x) => el('li', { 'data-index': String(x.index) },
      el('span', { class: 'score' }, x.relevance_score.toFixed(4)), ' ', documents[x.index])));
  });

  task('mod', async (model) => {
    const input = $('mod-input').value;
    if (!input.trim()) throw new Error('give a text to check');
    const res = (await api('/v1/moderations', { model, input })).results[0];
    return el('div', {},
      el('p', {}, el('strong', { class: 'label' }, res.label), res.flagged ? ' — flagged' : ' — not flagged',
        res.guard_categories && res.guard_categories.length ? ` (${res.guard_categories.join(', ')})` : ''),
      table(['label', 'score'], Object.entries(res.label_scores).map(([k, p]) => [k, pct(p)])));
  });

  task('cls', async (model) => {
    const input = $('cls-input').value;
    if (!input.trim()) throw new Error('give a text to classify');
    const d = (await api('/classify', { model, input })).data[0];
    return el('div', {}, el('p', {}, 'label: ', el('strong', { class: 'label' }, String(d.label))),
      table(['class', 'probability'], d.probs.map((p, i) => [String(i), pct(p)])));
  });

  task('dec', async (model) => {
    const question = $('dec-question').value.trim();
    const options = lines('dec-options');
    if (!question || options.length < 2) throw new Error('give a question and two or more options');
    const r = await api('/v1/chat/completions', {
      model, messages: [{ role: 'user', content: question }], logprobs: true,
      response_format: { type: 'json_schema', json_schema: { name: 'decision', schema: { enum: options } } },
    });
    const ch = r.choices[0];
    const top = ch.logprobs && ch.logprobs.content && ch.logprobs.content[0] ? ch.logprobs.content[0].top_logprobs : [];
    return el('div', {}, el('p', {}, 'answer: ', el('strong', { class: 'label' }, String(JSON.parse(ch.message.content)))),
      table(['option', 'probability'], top.map((t) => [t.token, pct(Math.exp(t.logprob))])));
  });

  // ---------------------------------------------------------------------------- tabs

  const tabs = [$('tab-chat'), $('tab-tasks')];
  function selectTab(tab) {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute('aria-controls')).hidden = !on;
    }
    tab.focus();
  }
  for (const t of tabs) {
    t.addEventListener('click', () => selectTab(t));
    t.addEventListener('keydown', (e) => {
      if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') selectTab(tabs[(tabs.indexOf(t) + 1) % tabs.length]);
    });
  }

  // ---------------------------------------------------------------------------- start

  keyState();
  renderConversation();
  loadModels();
})();

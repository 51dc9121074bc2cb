// cache_probe: the prefix cache must not tell one API key about another's prompt (issue #43,
// item 5). A server with --api-keys FILE (alice, bob): bob sending alice's long prompt gets
// cached_tokens 0, alice repeating it gets >= 90 % cached; two cache_salt values under one key
// do not share; --shared-prefix-cache shares across keys. Also the key file itself: a 401 for an
// unknown key, the access log names the key (never the key itself), /metrics labels by name,
// SIGHUP adds a key and a bad file on reload keeps the old ones, and a file group or others can
// read is refused at start with the chmod to run.
import fs from 'node:fs';
import path from 'node:path';
import { API_KEY, accessLines, check, note, pollUntil, request, startServer, stopServer } from '../js/hostile_http_lib.mjs';

const KEYS = { alice: 'alice-key-6f1c2a9e4b7d', bob: 'bob-key-93e1f0c5a2d8', carol: 'carol-key-5b2e7d1a9c04' };

function writeKeys(file, lines, mode) {
  fs.writeFileSync(file, `# cache_probe keys\n${lines.join('\n')}\n`, { mode });
  fs.chmodSync(file, mode);  // writeFileSync's mode applies only to a new file (and the umask)
}

// A story long enough to be 200+ tokens of stories260k, short enough for its 512 positions.
async function longPrompt(port) {
  const sentences = [
    'Once upon a time there was a little girl named Lily who loved to play in the park.',
    'One day she saw a big red ball under a tree and she wanted to share it with her friend Tom.',
    'Tom was sad because his dog was lost, so Lily said they could look for the dog together.',
    'They walked past the pond, the old bench and the tall slide, calling the dog by its name.',
    'At last they heard a happy bark behind the flowers, and the dog ran to Tom with the ball.',
    'Their mom gave them warm cookies and milk, and they all sat in the sun and laughed a lot.',
  ];
  let text = '';
  for (let i = 0; i < 24; i++) {
    text += (text ? ' ' : '') + sentences[i % sentences.length];
    const r = await request(port, 'POST', '/tokenize', { key: KEYS.alice, body: { model: 'stories', prompt: text } });
    const n = r.json && Array.isArray(r.json.tokens) ? r.json.tokens.length : (r.json && r.json.count) || 0;
    if (n >= 220) return { text, tokens: n };
  }
  return { text, tokens: 0 };
}

async function complete(port, key, prompt, salt) {
  const body = { model: 'stories', prompt, max_tokens: 2, temperature: 0 };
  if (salt !== undefined) body.cache_salt = salt;
  const r = await request(port, 'POST', '/v1/completions', { key, body, timeoutMs: 60000 });
  const usage = r.json && r.json.usage;
  const stats = (r.json && r.json.x_tessera_stats) || {};
  return {
    prefillMs: typeof stats.prefill_ms === 'number' ? stats.prefill_ms : NaN,
    status: r.status,
    prompt: usage ? usage.prompt_tokens : -1,
    cached: usage && usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : -1,
    r,
  };
}

export default async function (ctx) {
  const file = path.join(ctx.work, 'keys');
  const args = ['--model', `stories=${ctx.stories}`, '--api-keys', file, '--rate-limit', '0'];

  // A file group or others can read is refused before the server listens.
  writeKeys(file, [`alice:${KEYS.alice}`], 0o644);
  let refusal = '';
  try {
    await startServer(ctx, 'cache_probe_mode', args, { ready: false });
  } catch (e) {
    refusal = String(e.message);
  }
  check('a group/world-readable --api-keys file is refused at start, saying chmod 600 FILE',
        refusal.includes(`chmod 600 ${file}`) && refusal.includes('0644'), refusal.slice(-300));

  writeKeys(file, [`alice:${KEYS.alice}`, `bob:${KEYS.bob}`], 0o600);
  const srv = await startServer(ctx, 'cache_probe', args);
  const { text: prompt, tokens } = await longPrompt(srv.port);
  check('the probe prompt is 200+ tokens', tokens >= 200, `${tokens} tokens`);

  // alice computes the prompt; bob sends the same prompt; alice repeats it.
  const a1 = await complete(srv.port, KEYS.alice, prompt);
  const b1 = await complete(srv.port, KEYS.bob, prompt);
  const a2 = await complete(srv.port, KEYS.alice, prompt);
  check('alice, bob and alice again get 200', a1.status === 200 && b1.status === 200 && a2.status === 200,
        `${a1.status} ${b1.status} ${a2.status} ${a1.r.text.slice(0, 200)}`);
  note(`prompt ${a1.prompt} tokens: alice first cached_tokens=${a1.cached}, bob same prompt cached_tokens=${b1.cached}, alice repeat cached_tokens=${a2.cached} (${(100 * a2.cached / a2.prompt).toFixed(1)} %)`);
  note(`prefill_ms (stories260k, reference placement; noisy, shared machine): alice first ${a1.prefillMs.toFixed(2)}, bob ${b1.prefillMs.toFixed(2)}, alice repeat ${a2.prefillMs.toFixed(2)}`);
  check("bob's cached_tokens for alice's prompt is 0", b1.cached === 0, `${b1.cached}`);
  check('alice repeating her prompt gets >= 90 % cached', a2.cached >= 0.9 * a2.prompt, `${a2.cached} of ${a2.prompt}`);

  // One key, two salts: tenants sharing a key share nothing; each salt keeps its own cache.
  const s1 = await complete(srv.port, KEYS.bob, prompt, 'tenant-1');
  const s2 = await complete(srv.port, KEYS.bob, prompt, 'tenant-2');
  const s1again = await complete(srv.port, KEYS.bob, prompt, 'tenant-1');
  const aSalted = await complete(srv.port, KEYS.alice, prompt, 'tenant-1');
  note(`bob cache_salt tenant-1: ${s1.cached}, tenant-2: ${s2.cached}, tenant-1 again: ${s1again.cached}; alice with bob's salt tenant-1: ${aSalted.cached}`);
  check('cache_salt: a new salt shares nothing with the unsalted or another salt', s1.cached === 0 && s2.cached === 0,
        `${s1.cached} ${s2.cached}`);
  check('cache_salt: the same salt under the same key is cached', s1again.cached >= 0.9 * s1again.prompt, `${s1again.cached}`);
  check("cache_salt: the same salt under another key is another scope", aSalted.cached === 0, `${aSalted.cached}`);
  const badSalt = await request(srv.port, 'POST', '/v1/completions',
                                { key: KEYS.bob, body: { model: 'stories', prompt: 'x', max_tokens: 1, cache_salt: '' } });
  check('an empty cache_salt is a 400 naming the field', badSalt.status === 400 && badSalt.json && badSalt.json.error.param === 'cache_salt',
        `${badSalt.status} ${badSalt.text.slice(0, 200)}`);

  // Keys: unknown is a 401; the default (TESSERA_API_KEY) key still works beside the file.
  const unknown = await request(srv.port, 'GET', '/v1/models', { key: KEYS.carol });
  check('an unknown key is a 401', unknown.status === 401, `${unknown.status}`);
  const byDefault = await request(srv.port, 'GET', '/v1/models', { key: API_KEY });
  check('TESSERA_API_KEY works beside --api-keys (as "default")', byDefault.status === 200, `${byDefault.status}`);

  // SIGHUP: carol is added and works; then a bad file (a duplicate name) keeps the keys.
  writeKeys(file, [`alice:${KEYS.alice}`, `bob:${KEYS.bob}`, `carol:${KEYS.carol}`], 0o600);
  srv.child.kill('SIGHUP');
  const carolIn = await pollUntil(async () => (await request(srv.port, 'GET', '/v1/models', { key: KEYS.carol })).status === 200, 5000);
  check('SIGHUP reloads the file: a new key works', carolIn, srv.err.slice(-300));
  const logged = await pollUntil(() => /SIGHUP: reloaded 4 API keys/.test(srv.err), 5000);
  check('the reload is logged', logged, srv.err.slice(-300));
  writeKeys(file, [`alice:${KEYS.alice}`, `alice:${KEYS.carol}`], 0o600);
  srv.child.kill('SIGHUP');
  const refused = await pollUntil(() => /SIGHUP: refused: .*line 3: the name 'alice' is also on line 2/.test(srv.err), 5000);
  check('a bad file on reload is refused and logged with its line', refused, srv.err.slice(-400));
  const stillBob = await request(srv.port, 'GET', '/v1/models', { key: KEYS.bob });
  const stillCarol = await request(srv.port, 'GET', '/v1/models', { key: KEYS.carol });
  check('after a refused reload the old keys still work', stillBob.status === 200 && stillCarol.status === 200,
        `${stillBob.status} ${stillCarol.status}`);
  writeKeys(file, [`alice:${KEYS.alice}`], 0o640);
  srv.child.kill('SIGHUP');
  const modeRefused = await pollUntil(() => /SIGHUP: refused: .*chmod 600/.test(srv.err), 5000);
  const bobAfterMode = await request(srv.port, 'GET', '/v1/models', { key: KEYS.bob });
  check('a reload of a group-readable file is refused and keeps the keys', modeRefused && bobAfterMode.status === 200,
        `${bobAfterMode.status}`);

  // /metrics labels requests by the key's name.
  const metrics = await request(srv.port, 'GET', '/metrics', { key: KEYS.alice });
  check('/metrics counts requests by key name',
        /tessera_http_requests_total\{route="\/v1\/completions",status="200",key="bob"\} \d+/.test(metrics.text) &&
        /key="alice"/.test(metrics.text), metrics.text.split('\n').filter((l) => l.startsWith('tessera_http_requests_total')).join(' | '));

  const stopped = await stopServer(srv);
  const lines = accessLines(srv);
  const completions = lines.filter((l) => l.path === '/v1/completions');
  check('the access log names the key of each request',
        completions.length >= 8 && completions.every((l) => l.key === 'alice' || l.key === 'bob') &&
        completions.some((l) => l.key === 'alice') && completions.some((l) => l.key === 'bob') &&
        lines.some((l) => l.status === 401 && l.key === null),
        JSON.stringify(completions.slice(0, 2)));
  const everything = srv.out + srv.err;
  const leaked = Object.values(KEYS).concat([API_KEY]).filter((k) => everything.includes(k));
  check('no key appears in the server output', leaked.length === 0, leaked.join(' '));
  check('the server stopped cleanly', stopped.code === 0, JSON.stringify(stopped));

  // --shared-prefix-cache: the operator lets keys share one cache (the salt still separates).
  writeKeys(file, [`alice:${KEYS.alice}`, `bob:${KEYS.bob}`], 0o600);
  const shared = await startServer(ctx, 'cache_probe_shared', [...args, '--shared-prefix-cache']);
  const sa = await complete(shared.port, KEYS.alice, prompt);
  const sb = await complete(shared.port, KEYS.bob, prompt);
  const sbSalted = await complete(shared.port, KEYS.bob, prompt, 'tenant-1');
  note(`--shared-prefix-cache: alice ${sa.cached}, bob same prompt ${sb.cached} of ${sb.prompt}, bob with a salt ${sbSalted.cached}`);
  check('--shared-prefix-cache: another key reuses the prompt', sa.cached === 0 && sb.cached >= 0.9 * sb.prompt,
        `${sa.cached} ${sb.cached}`);
  check('--shared-prefix-cache: a cache_salt still separates', sbSalted.cached === 0, `${sbSalted.cached}`);
  await stopServer(shared);
}

// The same request gives the same tokens wherever it is sent (issue #42): a prompt with its
// sampling, seed, stop strings and max tokens through `tessera generate` and the server's
// /v1/completions, and a message through `tessera chat --prompt` and /v1/chat/completions,
// with every other setting left at its default on both sides. Models: the real trained
// stories260k (no chat template) and a synthetic Qwen3.5-0.8B (hybrid Gated DeltaNet, written
// by `tessera synth` at the real layer shapes, with a 4,352-token vocabulary).
//   node request_parity_e2e_test.mjs TESSERA STORIES_MODEL WORK_DIR
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import OpenAI from 'openai';
import { checker, startServer, waitReady } from './harness.mjs';

const [tessera, stories, work] = process.argv.slice(2);
const qwen = `${work}/qwen3.5-0.8b`;

function run(args) {
  const r = spawnSync(tessera, args, { encoding: 'utf8', timeout: 600000, maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `tessera ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
run(['synth', '--preset', 'qwen3.5-0.8b', '--out', qwen, '--vocab', '4352', '--seed', '7']);

// Each case: the request as CLI flags and as the API's fields.
const cases = [
  { name: 'greedy', flags: ['--max-tokens', '24'], body: { max_tokens: 24, temperature: 0 } },
  { name: 'sampled with a seed', flags: ['--max-tokens', '24', '--temperature', '0.9', '--top-p', '0.95', '--seed', '5'],
    body: { max_tokens: 24, temperature: 0.9, top_p: 0.95, seed: 5 } },
  { name: 'sampled with a stop string', flags: ['--max-tokens', '40', '--temperature', '1.2', '--seed', '11', '--stop', 'e'],
    body: { max_tokens: 40, temperature: 1.2, seed: 11, stop: ['e'] } },
];
// The CLI's greedy is temperature 0 too: the model's generation_config.json decides otherwise.
cases[0].flags.push('--temperature', '0');

const server = await startServer(tessera, ['--model', `stories=${stories}`, '--model', `qwen=${qwen}`,
                                           '--no-auth', '--rate-limit', '0', '--max-loaded-models', '2']);
const base = `http://127.0.0.1:${server.port}`;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused' });
const { check, failed } = checker();
try {
  await waitReady(base, 300);
  for (const [model, dir, prompt] of [['stories', stories, 'Once upon a time'], ['qwen', qwen, 'The weather today']]) {
    for (const c of cases) {
      await check(`${model}, ${c.name}: generate and /v1/completions give the same text`, async () => {
        const cli = JSON.parse(run(['generate', '--model', dir, '--prompt', prompt, '--json', ...c.flags]));
        const api = await client.completions.create({ model, prompt, ...c.body });
        assert.ok(cli.generated_ids.length > 0);
        assert.equal(api.choices[0].text, cli.completion_text);
        assert.equal(api.choices[0].finish_reason, cli.stop_reason);
        // Stop strings end the text where the CLI's tokens end too.
        assert.equal(api.usage.completion_tokens, cli.generated_ids.length);
      });
    }
  }
  for (const c of cases) {
    await check(`qwen, ${c.name}: chat --prompt and /v1/chat/completions give the same reply`, async () => {
      const message = 'Tell me about the sea.';
      const cli = run(['chat', '--model', qwen, '--prompt', message, ...c.flags]);
      const api = await client.chat.completions.create({ model: 'qwen', messages: [{ role: 'user', content: message }], ...c.body });
      assert.ok(cli.length > 1);
      assert.equal(cli, `${api.choices[0].message.content}\n`);
    });
  }
} finally {
  server.child.kill('SIGTERM');
}
console.log(failed() ? `${failed()} check(s) failed` : 'all checks passed');
process.exit(failed() ? 1 : 0);

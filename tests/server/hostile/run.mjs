// Runs one hostile-load group (hostile_load.cmake): imports ./GROUP.mjs and calls its default
// export with a context, bounded by the group's CTest timeout less 10 s. node >= 18, built-in
// modules only (the shared raw-socket helpers are ../js/hostile_http_lib.mjs).
//   node run.mjs GROUP TIMEOUT_S TESSERA WORK MODELS STORIES
// MODELS is the e2e model folder (tiny, slow, qwen, html, embed, cls: make_test_model).
import fs from 'node:fs';
import path from 'node:path';
import { fail, stopServer, summary } from '../js/hostile_http_lib.mjs';

const [group, timeout, tessera, work, models, stories] = process.argv.slice(2);
if (!group || !/^[a-z_]+$/.test(group) || !fs.existsSync(new URL(`./${group}.mjs`, import.meta.url)) || !stories) {
  console.error('usage: node run.mjs GROUP TIMEOUT_S TESSERA WORK MODELS STORIES');
  process.exit(2);
}
const ctx = {
  tessera: path.resolve(tessera), work: path.resolve(work), stories: path.resolve(stories),
  model: (name) => path.join(path.resolve(models), name), servers: [],
};
fs.mkdirSync(ctx.work, { recursive: true });
const limitS = Math.max(10, Number(timeout) - 10);
const hardLimit = setTimeout(() => {
  fail(`${group}: the group did not finish within ${limitS} s`);
  for (const srv of ctx.servers) { try { srv.child.kill('SIGKILL'); } catch { /* gone */ } }
  summary();
  process.exit(1);
}, limitS * 1000);
hardLimit.unref();
try {
  const { default: run } = await import(`./${group}.mjs`);
  await run(ctx);
} catch (e) {
  fail(group, e && e.stack ? e.stack : String(e));
} finally {
  for (const srv of ctx.servers) await stopServer(srv);
}
process.exit(summary() ? 1 : 0);

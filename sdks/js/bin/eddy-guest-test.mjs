#!/usr/bin/env node
// eddy-guest-test: runs a processor project's harness tests under `node --test`. Bundles
// every *.test.ts / *.test.js of the given directories (default: the current one) or
// the given files with esbuild (eddy-guest resolved to this SDK, TypeScript stripped)
// into a temp directory, then runs `node --test` on the bundles.
//
//   node eddy-guest-test.mjs [DIR|FILE]...

import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnSync } from 'node:child_process';

const SDK = resolve(fileURLToPath(new URL('..', import.meta.url)));
const targets = process.argv.length > 2 ? process.argv.slice(2) : ['.'];
const candidates = [
  process.env.EDDY_JS_TOOLCHAIN && join(process.env.EDDY_JS_TOOLCHAIN, 'node_modules'),
  join(SDK, 'node_modules'),
  join(homedir(), '.cache', 'eddy-tools', 'componentize-js-0.23.0', 'node_modules'),
].filter(Boolean);
const esbuildPath = candidates.map((d) => join(d, 'esbuild', 'lib', 'main.js')).find(existsSync);
if (!esbuildPath) {
  console.error(`eddy-guest-test: cannot find esbuild in ${candidates.join(', ')}; set EDDY_JS_TOOLCHAIN`);
  process.exit(1);
}
const esbuild = (await import(pathToFileURL(esbuildPath).href)).default;

const isTest = (file) => file.endsWith('.test.ts') || file.endsWith('.test.js');
const tests = targets.flatMap((target) => {
  const path = resolve(target);
  if (!existsSync(path)) {
    console.error(`eddy-guest-test: ${path} does not exist`);
    process.exit(1);
  }
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path).filter(isTest).sort().map((file) => join(path, file));
});
if (tests.length === 0) {
  console.error(`eddy-guest-test: no *.test.ts or *.test.js in ${targets.join(', ')}`);
  process.exit(1);
}

const out = mkdtempSync(join(tmpdir(), 'eddy-example-tests-'));
try {
  const outputs = [];
  for (const [index, test] of tests.entries()) {
    const outfile = join(out, `${index}-${basename(test).replace(/\.[jt]s$/, '')}.mjs`);
    await esbuild.build({
      entryPoints: [test],
      bundle: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      outfile,
      logLevel: 'error',
      plugins: [
        {
          name: 'eddy-guest',
          setup(build) {
            build.onResolve({ filter: /^eddy-guest(\/testing)?$/ }, (args) => ({
              path: join(SDK, 'src', args.path === 'eddy-guest' ? 'index.js' : 'testing.js'),
            }));
          },
        },
      ],
    });
    outputs.push(outfile);
  }
  const run = spawnSync(process.execPath, ['--test', ...outputs], { stdio: 'inherit' });
  process.exitCode = run.status ?? 1;
} finally {
  rmSync(out, { recursive: true, force: true });
}

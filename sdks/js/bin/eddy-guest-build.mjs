#!/usr/bin/env node
// eddy-guest-build: bundles an eddy processor app (JS or TS) with the SDK into one
// ES module with esbuild, then makes it a WebAssembly component of the world
// `eddy:processor/processor` with componentize-js (StarlingMonkey).
//
//   node eddy-guest-build.mjs app.ts -o app.wasm [--engine starlingmonkey|quickjs] [--bundle-only]
//
// QuickJS (jco componentize --backend quickjs) makes components ~6x smaller that load
// faster, but passes 64-bit integers as JS numbers: the SDK still hands out BigInt
// and refuses values beyond ±2^53 with an error naming them.
//
// Tools are looked up, in order, in $EDDY_JS_TOOLCHAIN/node_modules, the node_modules
// of the app's project (walking up from the app), then
// ~/.cache/eddy-tools/componentize-js-0.23.0/node_modules.

import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { register } from 'node:module';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnSync } from 'node:child_process';

const SDK_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WIT_DIR = join(SDK_DIR, 'wit');
const USAGE = `usage: eddy-guest-build <app.ts|app.js> -o <out.wasm> [--engine starlingmonkey|quickjs] [--bundle-only]

  The app must export the processor: export const handler = exportProcessor(MyProcessor);
  --engine       starlingmonkey (default, componentize-js; full int64 range) or
                 quickjs (jco componentize --backend quickjs; smaller, int64 limited to ±2^53)
  --bundle-only  write the bundled ES module to <out> instead of a component
  Toolchain: $EDDY_JS_TOOLCHAIN/node_modules, the app project's node_modules, then
  ~/.cache/eddy-tools/componentize-js-0.23.0/node_modules.`;

class BuildError extends Error {}

function parseArgs(argv) {
  const opts = { engine: 'starlingmonkey', bundleOnly: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') opts.help = true;
    else if (arg === '-o' || arg === '--out') opts.out = argv[++i];
    else if (arg === '--engine') opts.engine = argv[++i];
    else if (arg === '--bundle-only') opts.bundleOnly = true;
    else if (arg.startsWith('-')) throw new BuildError(`unknown option ${arg}`);
    else if (opts.entry) throw new BuildError(`more than one app entry given (${opts.entry}, ${arg})`);
    else opts.entry = arg;
  }
  if (opts.help) return opts;
  if (!opts.entry) throw new BuildError('no app entry given (e.g. app.ts)');
  if (!opts.out) throw new BuildError('no output given: pass -o <out.wasm>');
  if (!['starlingmonkey', 'quickjs'].includes(opts.engine)) {
    throw new BuildError(`unknown engine "${opts.engine}"; use starlingmonkey or quickjs`);
  }
  opts.entry = resolve(opts.entry);
  opts.out = resolve(opts.out);
  if (!existsSync(opts.entry) || !statSync(opts.entry).isFile()) throw new BuildError(`app entry ${opts.entry} does not exist`);
  return opts;
}

/** The node_modules directories to look for tools in, in order. */
function toolchainDirs(entry) {
  const dirs = [];
  if (process.env.EDDY_JS_TOOLCHAIN) dirs.push(join(resolve(process.env.EDDY_JS_TOOLCHAIN), 'node_modules'));
  for (let dir = dirname(entry); ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules');
    if (existsSync(candidate)) dirs.push(candidate);
    if (dirname(dir) === dir) break;
  }
  dirs.push(join(homedir(), '.cache', 'eddy-tools', 'componentize-js-0.23.0', 'node_modules'));
  return dirs;
}

function findTool(dirs, relative, what) {
  for (const dir of dirs) {
    const path = join(dir, relative);
    if (existsSync(path)) return path;
  }
  throw new BuildError(
    `cannot find ${what} (${relative}) in: ${dirs.join(', ')}. Install it (npm install ${what}) into one of them, ` +
      `or point EDDY_JS_TOOLCHAIN at a directory whose node_modules has it`,
  );
}

function entryModule(app, engine) {
  return `import { selectKey, takeTimer } from 'eddy:processor/scope@0.3.1';
import { ValueState, ListState, MapState } from 'eddy:processor/state@0.3.1';
import { registerTimer, deleteTimer, listTimers } from 'eddy:processor/timers@0.3.1';
import { log } from 'eddy:processor/logging@0.3.1';
import { installHost } from 'eddy-guest';
installHost({
  scope: { selectKey, takeTimer },
  state: { ValueState, ListState, MapState },
  timers: { registerTimer, deleteTimer, listTimers },
  logging: { log },
  int64AsNumber: ${engine === 'quickjs'},
});
export { handler } from ${JSON.stringify(app)};
`;
}

async function bundle(dirs, entry, out, engine) {
  const esbuildPath = findTool(dirs, join('esbuild', 'lib', 'main.js'), 'esbuild');
  const esbuild = (await import(pathToFileURL(esbuildPath).href)).default;
  const sdk = {
    name: 'eddy-guest',
    setup(build) {
      build.onResolve({ filter: /^eddy-guest(\/testing)?$/ }, (args) => ({
        path: join(SDK_DIR, 'src', args.path === 'eddy-guest' ? 'index.js' : 'testing.js'),
      }));
      build.onResolve({ filter: /^eddy:processor\// }, (args) => ({ path: args.path, external: true }));
    },
  };
  const tmp = mkdtempSync(join(tmpdir(), 'eddy-guest-build-'));
  try {
    const stub = join(tmp, 'entry.js');
    writeFileSync(stub, entryModule(entry, engine));
    const result = await esbuild.build({
      entryPoints: [stub],
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      target: 'es2022',
      mainFields: ['module', 'main'],
      outfile: out,
      plugins: [sdk],
      logLevel: 'silent',
      nodePaths: dirs,
    });
    for (const warning of result.warnings) console.error(`warning: ${warning.text}`);
  } catch (e) {
    const errors = (e.errors ?? []).map((err) => {
      const where = err.location ? `${err.location.file}:${err.location.line}:${err.location.column}: ` : '';
      const hint = /No matching export .* "handler"/.test(err.text)
        ? ` (the app must export its processor: export const handler = exportProcessor(MyProcessor);)`
        : '';
      return `${where}${err.text}${hint}`;
    });
    throw new BuildError(`bundling ${entry} failed:\n  ${errors.length ? errors.join('\n  ') : e.message}`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * componentize-js 0.23.0 as installed next to jco 1.35 resolves a preview2-shim that
 * is not hoisted and that preopens no directory by default; this resolves the shim
 * from jco's copy when needed and preopens `/` so the splicer can read the sources.
 */
async function loadComponentize(dirs) {
  const pkg = findTool(dirs, join('@bytecodealliance', 'componentize-js', 'src', 'componentize.js'), '@bytecodealliance/componentize-js');
  const modules = resolve(dirname(pkg), '..', '..', '..');
  const splicer = pathToFileURL(join(dirname(pkg), '..', 'lib', 'spidermonkey-embedding-splicer.js')).href;
  const fallbacks = ['jco', 'jco-transpile', 'preview3-shim']
    .map((name) => join(modules, '@bytecodealliance', name, 'package.json'))
    .filter((path) => existsSync(join(dirname(path), 'node_modules', '@bytecodealliance', 'preview2-shim')))
    .map((path) => pathToFileURL(path).href);
  const hook = `
const SPLICER = ${JSON.stringify(splicer)};
const FALLBACKS = ${JSON.stringify(fallbacks)};
export async function resolve(specifier, context, next) {
  if (specifier === 'eddy-guest-build:preview2-fs') {
    specifier = '@bytecodealliance/preview2-shim/filesystem';
    context = { ...context, parentURL: SPLICER };
  }
  if (!specifier.startsWith('@bytecodealliance/preview2-shim')) return next(specifier, context);
  try {
    return await next(specifier, context);
  } catch (error) {
    for (const parentURL of FALLBACKS) {
      try { return await next(specifier, { ...context, parentURL }); } catch {}
    }
    throw error;
  }
}`;
  register(`data:text/javascript,${encodeURIComponent(hook)}`);
  const fs = await import('eddy-guest-build:preview2-fs');
  if (typeof fs._setPreopens === 'function') fs._setPreopens({ '/': '/' });
  return (await import(pathToFileURL(pkg).href)).componentize;
}

async function componentizeStarlingMonkey(dirs, source, out) {
  const componentize = await loadComponentize(dirs);
  const { component } = await componentize({
    sourcePath: source,
    witPath: WIT_DIR,
    worldName: 'processor',
    disableFeatures: ['http', 'fetch-event'],
  });
  writeFileSync(out, component);
}

function componentizeQuickJs(dirs, source, out) {
  const jco = findTool(dirs, join('@bytecodealliance', 'jco', 'dist', 'jco.js'), '@bytecodealliance/jco');
  const args = [jco, 'componentize', source, '-w', WIT_DIR, '-n', 'processor', '--backend', 'quickjs', '--backend-qjs-disable-async', '-o', out];
  const run = spawnSync(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  if (run.status !== 0) throw new BuildError(`jco componentize --backend quickjs failed (exit ${run.status ?? run.signal})`);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.help) {
    console.log(USAGE);
    return;
  }
  const dirs = toolchainDirs(opts.entry);
  const started = Date.now();
  if (opts.bundleOnly) {
    await bundle(dirs, opts.entry, opts.out, opts.engine);
    console.error(`eddy-guest-build: bundled ${opts.entry} into ${opts.out}`);
    return;
  }
  const tmp = mkdtempSync(join(tmpdir(), 'eddy-guest-bundle-'));
  try {
    const source = join(tmp, 'processor.js');
    await bundle(dirs, opts.entry, source, opts.engine);
    if (opts.engine === 'quickjs') componentizeQuickJs(dirs, source, opts.out);
    else await componentizeStarlingMonkey(dirs, source, opts.out);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  const size = statSync(opts.out).size;
  console.error(
    `eddy-guest-build: built ${opts.out} (${(size / 1e6).toFixed(1)} MB, ${opts.engine}) in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
}

main().catch((error) => {
  if (error instanceof BuildError) {
    console.error(`eddy-guest-build: error: ${error.message}`);
    if (/no app entry|no output|unknown option|unknown engine/.test(error.message)) console.error(USAGE);
  } else {
    console.error(`eddy-guest-build: error: ${error?.stack ?? error}`);
  }
  process.exit(1);
});

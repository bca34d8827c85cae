// space code-interpreter: the JavaScript "kernel". One process per context, started by server.py.
// Commands arrive as JSON lines on fd $SPACE_CI_CMD_FD: {"code": "...", "env": {...}}; events go out as JSON lines on fd $SPACE_CI_EVT_FD:
// {"type":"stdout"|"stderr","text"}, {"type":"result","text"}, {"type":"error","name","value","traceback"},
// {"type":"done"}. Code runs in one persistent vm context, so its globals survive between runs.
'use strict';
const fs = require('fs');
const vm = require('vm');
const util = require('util');
const path = require('path');
const Module = require('module');

let processTopLevelAwait = null;
try { processTopLevelAwait = require('internal/repl/await').processTopLevelAwait; } catch (e) { /* no --expose-internals */ }

const EVT = Number(process.env.SPACE_CI_EVT_FD);
const CMD = Number(process.env.SPACE_CI_CMD_FD);
delete process.env.SPACE_CI_EVT_FD; delete process.env.SPACE_CI_CMD_FD;
function send(obj) {
  const buf = Buffer.from(JSON.stringify(obj) + '\n');
  let off = 0;
  while (off < buf.length) {
    try { off += fs.writeSync(EVT, buf, off); } catch (e) { if (e.code !== 'EAGAIN') throw e; }
  }
}

// Everything the code writes to process.stdout/stderr (console.log included) goes through the event pipe, in order.
function hook(stream, type) {
  stream.write = function (chunk, encoding, cb) {
    if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    if (text.length) send({ type, text });
    if (cb) process.nextTick(cb);
    return true;
  };
}
hook(process.stdout, 'stdout');
hook(process.stderr, 'stderr');

function freshRequire() { return Module.createRequire(path.join(process.cwd(), '[space-ci]')); }

const sandbox = {
  console, process, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder, AbortController,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate, queueMicrotask,
  structuredClone: globalThis.structuredClone, fetch: globalThis.fetch, performance: globalThis.performance,
  require: freshRequire(), module: { exports: {} }, __filename: path.join(process.cwd(), '[space-ci]'),
  __dirname: process.cwd(),
};
sandbox.exports = sandbox.module.exports;
const context = vm.createContext(sandbox);
vm.runInContext('globalThis.global = globalThis;', context);

// Math.random from /dev/urandom, in a pool dropped at every run: V8's own generator is seeded once per process,
// so every sandbox restored from the template's snapshot (and every fork) would draw the same numbers from it.
const urandom = fs.openSync('/dev/urandom', 'r');
let pool = Buffer.alloc(0);
let poolOff = 0;
vm.runInContext('Math', context).random = function random() {
  if (poolOff + 8 > pool.length) { pool = Buffer.alloc(2048); fs.readSync(urandom, pool, 0, pool.length, null); poolOff = 0; }
  const hi = pool.readUInt32BE(poolOff) >>> 5, lo = pool.readUInt32BE(poolOff + 4) >>> 6;
  poolOff += 8;
  return (hi * 67108864 + lo) / 9007199254740992;
};

let current = null; // {finish(err, value)} while a run is in progress

function errorEvent(err) {
  if (err && typeof err === 'object' && 'stack' in err) {
    return { type: 'error', name: String(err.name || 'Error'), value: String(err.message === undefined ? '' : err.message),
             traceback: String(err.stack || '').split('\n').filter((l) => !/node:vm|node:internal|node:events|node:domain|jsrunner\.js/.test(l)).join('\n') };
  }
  return { type: 'error', name: 'Error', value: util.inspect(err), traceback: '' };
}

process.on('uncaughtException', (err) => { send({ type: 'stderr', text: 'Uncaught ' + util.inspect(err) + '\n' }); });
process.on('unhandledRejection', (err) => {
  if (current) current.finish(err); else send({ type: 'stderr', text: 'Unhandled rejection: ' + util.inspect(err) + '\n' });
});
process.on('SIGINT', () => {
  if (current) { const e = new Error('Execution interrupted'); e.name = 'KeyboardInterrupt'; e.stack = ''; current.finish(e); }
});

function run(cmd) {
  pool = Buffer.alloc(0);
  poolOff = 0;
  const env = cmd.env || {};
  const saved = {};
  for (const k of Object.keys(env)) { saved[k] = Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined; process.env[k] = env[k]; }
  let finished = false;
  const finish = (err, value, hasValue) => {
    if (finished) return;
    finished = true;
    current = null;
    if (err !== undefined) send(errorEvent(err));
    else if (hasValue && value !== undefined) {
      let text;
      try { text = typeof value === 'string' ? value : util.inspect(value, { depth: 4 }); } catch (e) { text = String(value); }
      send({ type: 'result', text });
    }
    for (const k of Object.keys(saved)) { if (saved[k] === undefined) delete process.env[k]; else process.env[k] = saved[k]; }
    send({ type: 'done' });
  };
  current = { finish };
  sandbox.require = freshRequire();
  let code = cmd.code;
  let wrapped = false;
  if (processTopLevelAwait && /\bawait\b/.test(code)) {
    try { const w = processTopLevelAwait(code); if (w !== null) { code = w; wrapped = true; } } catch (e) { /* let vm report it */ }
  }
  let value;
  try {
    value = vm.runInContext(code, context, { filename: 'cell', breakOnSigint: true });
  } catch (err) { finish(err); return; }
  if (wrapped) {
    Promise.resolve(value).then((v) => finish(undefined, v && v.value, !!v), (err) => finish(err));
  } else {
    finish(undefined, value, true);
  }
}

let pending = '';
const queue = [];
function pump() {
  while (!current && queue.length) run(queue.shift());
  if (!current && queue.length === 0) return;
  setImmediate(pump);
}
const input = fs.createReadStream(null, { fd: CMD, encoding: 'utf8' });
input.on('data', (chunk) => {
  pending += chunk;
  let i;
  while ((i = pending.indexOf('\n')) >= 0) {
    const line = pending.slice(0, i); pending = pending.slice(i + 1);
    if (!line.trim()) continue;
    try { queue.push(JSON.parse(line)); } catch (e) { send({ type: 'stderr', text: 'space-ci jsrunner: bad command\n' }); }
  }
  pump();
});
input.on('end', () => process.exit(0));
send({ type: 'ready' });

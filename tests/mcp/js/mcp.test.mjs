// SPDX-License-Identifier: Apache-2.0
// space's MCP server (issue 23) driven by the official TypeScript SDK (@modelcontextprotocol/sdk from npm), over
// both transports: `spacectl mcp` on stdio (the SDK starts it) and the daemon's streamable HTTP at /mcp with the
// API key. tests/integration/t46-mcp.sh runs it (node --test) with SPACECTL, SPACE_SOCKET, SPACE_MCP_URL,
// SPACE_MCP_KEY, SPACE_MCP_TEMPLATE (default minimal) and SPACE_MCP_CI_TEMPLATE (a template with the code
// interpreter: t44 sets it, with SPACE_MCP_ONLY naming the tests it runs). Each test is one session with its
// own session sandbox.
import { test as nodeTest } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const SPACECTL = process.env.SPACECTL || 'spacectl';
const SOCKET = process.env.SPACE_SOCKET || '';
const URL_ = process.env.SPACE_MCP_URL || '';
const KEY = process.env.SPACE_MCP_KEY || '';
const TEMPLATE = process.env.SPACE_MCP_TEMPLATE || 'minimal';
const CI_TEMPLATE = process.env.SPACE_MCP_CI_TEMPLATE || '';
const TRANSPORTS = ['stdio', 'http'];
// only the tests whose names hold it are defined: left out, not skipped (node's --test-name-pattern skips)
const ONLY = process.env.SPACE_MCP_ONLY || '';
const test = (name, fn) => ((!ONLY || name.includes(ONLY)) ? nodeTest(name, fn) : undefined);
const CALL = { timeout: 600_000 }; // a session sandbox's first boot under TCG takes its time

const TOOLS = [
  'sandbox_create', 'sandbox_list', 'sandbox_remove', 'sandbox_suspend', 'sandbox_wake', 'sandbox_checkpoint',
  'checkpoint_list', 'sandbox_restore', 'sandbox_fork',
  'file_read', 'file_write', 'file_list', 'file_stat', 'file_remove', 'file_move', 'file_mkdir',
  'exec', 'run_code', 'port_url', 'egress_status',
].sort();

const uniq = (what) => `js-${what}-${randomBytes(4).toString('hex')}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- the daemon's own view (/v1 over its socket)

function api(method, path) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: SOCKET, path, method, timeout: 60_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => {
        let json = null;
        try { json = body ? JSON.parse(body) : null; } catch { json = body; }
        resolve({ status: res.statusCode, body: json });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

async function sandboxState(ref) {
  const r = await api('GET', `/v1/sandboxes/${ref}`);
  if (r.status === 404) return null;
  assert.equal(r.status, 200, `GET /v1/sandboxes/${ref}: ${JSON.stringify(r.body)}`);
  return r.body.state;
}

async function waitState(ref, want, secs = 60) {
  const deadline = Date.now() + secs * 1000;
  let state = await sandboxState(ref);
  while (state !== want && Date.now() < deadline) {
    await sleep(250);
    state = await sandboxState(ref);
  }
  return state;
}

// ---------------------------------------------------------------- sessions and calls

async function open(transport, args = []) {
  const client = new Client({ name: 'space-t46-js', version: '1.0.0' });
  let t;
  if (transport === 'stdio') {
    t = new StdioClientTransport({
      command: SPACECTL, args: ['mcp', '--template', TEMPLATE, ...args], env: { ...process.env }, stderr: 'inherit',
    });
  } else {
    t = new StreamableHTTPClientTransport(new URL(URL_), {
      requestInit: { headers: { Authorization: `Bearer ${KEY}` } },
    });
  }
  await client.connect(t);
  return {
    client, transport: t,
    async close() {
      // HTTP: the session ends with a DELETE (what ends a session there), then the connection goes
      if (transport === 'http') await t.terminateSession();
      await client.close();
    },
  };
}

// withSession(transport, [args], fn): fn(client) in one session, ended afterwards whatever happens.
async function withSession(transport, args, fn) {
  if (typeof args === 'function') { fn = args; args = []; }
  const s = await open(transport, args);
  try {
    return await fn(s.client);
  } finally {
    await s.close();
  }
}

const texts = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function call(c, name, args = {}, opts = {}) {
  return c.callTool({ name, arguments: args }, undefined, { ...CALL, ...opts });
}

async function ok(c, name, args = {}, opts = {}) {
  const r = await call(c, name, args, opts);
  assert.ok(!r.isError, `${name} ${JSON.stringify(args)}: isError: ${texts(r)}`);
  assert.ok(texts(r), `${name}: no text content`);
  return { text: texts(r), s: r.structuredContent };
}

async function bad(c, name, args) {
  const r = await call(c, name, args);
  assert.equal(r.isError, true, `${name} ${JSON.stringify(args)}: expected isError, got ${texts(r)}`);
  assert.ok(texts(r).length > 10, `${name}: an error without a message: ${texts(r)}`);
  return texts(r);
}

// file_stat of a path that is not there: a result saying so (exists false), or a tool error.
async function missing(c, path, extra = {}) {
  const r = await call(c, 'file_stat', { path, ...extra });
  if (!r.isError) {
    assert.equal(r.structuredContent?.exists, false, `file_stat ${path}: ${JSON.stringify(r.structuredContent)}`);
    assert.match(texts(r), /not exist/);
  }
}

async function sh(c, command, extra = {}) {
  const { s } = await ok(c, 'exec', { command, ...extra });
  assert.ok(s && 'exit_code' in s, `exec ${command}: structured ${JSON.stringify(s)}`);
  return s;
}

async function sessionSandbox(c) {
  await sh(c, 'true');
  const { s } = await ok(c, 'sandbox_list');
  const mine = s.sandboxes.filter((b) => b.session);
  assert.equal(mine.length, 1, `sandbox_list: expected one session sandbox: ${JSON.stringify(s)}`);
  return mine[0].sandbox_id;
}

// ---------------------------------------------------------------- the tests, over each transport

for (const tr of TRANSPORTS) {
  test(`tools/list names every tool with a schema [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      assert.ok(c.getServerCapabilities()?.tools, 'no tools capability');
      const { tools } = await c.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
      for (const t of tools) {
        assert.ok(t.description && t.description.length > 15, `${t.name}: description`);
        assert.equal(t.inputSchema.type, 'object', t.name);
        assert.equal(t.inputSchema.additionalProperties, false, `${t.name}: additionalProperties`);
        for (const [p, ps] of Object.entries(t.inputSchema.properties || {})) {
          assert.ok(ps.description, `${t.name}.${p} has no description`);
        }
      }
      const by = Object.fromEntries(tools.map((t) => [t.name, t]));
      assert.deepEqual(by.exec.inputSchema.required || [], []);
      assert.deepEqual([...by.file_move.inputSchema.required].sort(), ['from', 'to']);
      assert.equal(by.sandbox_remove.annotations?.destructiveHint, true);
      assert.equal(by.file_read.annotations?.readOnlyHint, true);
    });
  });

  test(`the session sandbox is removed at the end [${tr}]`, async () => {
    let id;
    await withSession(tr, async (c) => {
      const s = await sh(c, 'echo hello');
      assert.equal(s.stdout, 'hello\n');
      assert.equal(s.exit_code, 0);
      id = await sessionSandbox(c);
      assert.equal(await sandboxState(id), 'running');
    });
    assert.equal(await waitState(id, null), null, 'the session sandbox outlived its session');
  });

  test(`exec: argv, cwd, env, stdin, timeout, bounded output [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      const { text, s } = await ok(c, 'exec', { argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] });
      assert.deepEqual([s.exit_code, s.stdout, s.stderr], [3, 'out\n', 'err\n']);
      assert.match(text, /3/);
      assert.equal((await sh(c, 'pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
      assert.equal((await sh(c, 'echo "$MCP_A"', { env: { MCP_A: 'from env' } })).stdout, 'from env\n');
      assert.equal((await ok(c, 'exec', { argv: ['cat'], stdin: 'fed\n' })).s.stdout, 'fed\n');
      const t0 = Date.now();
      assert.equal((await sh(c, 'sleep 30', { timeout: 2 })).timed_out, true);
      assert.ok(Date.now() - t0 < 20_000);
      const big = await sh(c, "head -c 300000 /dev/zero | tr '\\0' b; echo; echo tail-end");
      assert.ok(big.stdout_truncated_bytes > 0 && big.stdout.length < 80 * 1024, 'output not bounded');
      assert.ok(big.stdout.startsWith('bbbb') && big.stdout.includes('tail-end'));
    });
  });

  test(`progress during a 5 s command [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      await sh(c, 'true');
      const seen = [];
      const t0 = Date.now();
      const r = await call(c, 'exec', { command: 'for i in 1 2 3 4 5; do echo $i; sleep 1; done' },
        { onprogress: (p) => seen.push({ at: Date.now(), ...p }) });
      const t1 = Date.now();
      assert.ok(!r.isError, texts(r));
      assert.equal(r.structuredContent.stdout, '1\n2\n3\n4\n5\n');
      assert.ok(t1 - t0 >= 4000, 'the command did not take its 5 s');
      assert.ok(seen.length >= 3, `${seen.length} progress notifications before the result`);
      assert.ok(seen[0].at < t1 - 2000, 'the first progress came only at the end');
      const said = seen.map((p) => p.message || '').join('');
      assert.ok(said.includes('1') && said.includes('3'), `output not in the progress messages: ${said}`);
    });
  });

  test(`cancellation kills the process [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      await sh(c, 'rm -f /tmp/mcp-cancel.pid');
      const ac = new AbortController();
      const long = call(c, 'exec', { command: 'echo $$ >/tmp/mcp-cancel.pid; exec sleep 300' }, { signal: ac.signal });
      const settled = long.then(() => 'answered', () => 'rejected');
      let pid = '';
      const t0 = Date.now();
      while (!pid && Date.now() - t0 < 60_000) {
        await sleep(300);
        pid = (await sh(c, 'cat /tmp/mcp-cancel.pid 2>/dev/null || true')).stdout.trim();
      }
      assert.match(pid, /^\d+$/, 'the long exec did not start');
      assert.equal((await sh(c, `test -d /proc/${pid} && echo alive || echo gone`)).stdout, 'alive\n');
      ac.abort('the test cancels it');
      assert.equal(await settled, 'rejected');
      let state = 'alive';
      const deadline = Date.now() + 20_000;
      while (state === 'alive' && Date.now() < deadline) {
        await sleep(300);
        state = (await sh(c, `test -d /proc/${pid} && echo alive || echo gone`)).stdout.trim();
      }
      assert.equal(state, 'gone', `pid ${pid} (sleep 300) still runs after the cancellation`);
      assert.equal((await sh(c, 'echo still serving')).stdout, 'still serving\n');
    });
  });

  test(`files: write, read, stat, list, mkdir, move, remove, images [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      const d = '/tmp/mcp-files-js';
      assert.equal((await ok(c, 'file_write', { path: `${d}/a.txt`, content: 'hello js\n' })).s.size, 9);
      assert.match((await ok(c, 'file_read', { path: `${d}/a.txt` })).text, /hello js/);
      assert.equal((await ok(c, 'file_stat', { path: `${d}/a.txt` })).s.size, 9);
      await ok(c, 'file_mkdir', { path: `${d}/sub` });
      await ok(c, 'file_move', { from: `${d}/a.txt`, to: `${d}/sub/b.txt` });
      const { text } = await ok(c, 'file_list', { path: d, depth: 2 });
      assert.ok(text.includes('b.txt') && !text.includes('a.txt'), text);
      const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');
      await ok(c, 'file_write', { path: `${d}/dot.png`, content: png.toString('base64'), encoding: 'base64' });
      const r = await call(c, 'file_read', { path: `${d}/dot.png` });
      const img = r.content.find((i) => i.type === 'image');
      assert.ok(!r.isError && img && img.mimeType === 'image/png', JSON.stringify(r.content).slice(0, 300));
      assert.ok(Buffer.from(img.data, 'base64').equals(png));
      await ok(c, 'file_remove', { path: d, recursive: true });
      await missing(c, `${d}/sub/b.txt`);
    });
  });

  test(`a fork diverges from its parent [${tr}]`, async () => {
    const forks = [];
    await withSession(tr, async (c) => {
      await ok(c, 'file_write', { path: '/tmp/branch.txt', content: 'parent\n' });
      const { s } = await ok(c, 'sandbox_fork', {});
      assert.equal(s.sandboxes.length, 1);
      const child = s.sandboxes[0];
      forks.push(child);
      assert.equal((await sh(c, 'cat /tmp/branch.txt', { sandbox_id: child })).stdout, 'parent\n');
      await ok(c, 'file_write', { path: '/tmp/branch.txt', content: 'child\n', sandbox_id: child });
      assert.equal((await sh(c, 'cat /tmp/branch.txt')).stdout, 'parent\n', 'the parent changed with its fork');
      assert.equal((await sh(c, 'cat /tmp/branch.txt', { sandbox_id: child })).stdout, 'child\n');
      await ok(c, 'file_write', { path: '/tmp/only-parent.txt', content: 'p\n' });
      await missing(c, '/tmp/only-parent.txt', { sandbox_id: child });
    });
    for (const f of forks) assert.equal(await waitState(f, null), null, `fork ${f} outlived the session`);
  });

  test(`checkpoint, list, restore [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      const cp = uniq(`cp-${tr}`);
      await ok(c, 'file_write', { path: '/tmp/state.txt', content: 'v1\n' });
      const { s } = await ok(c, 'sandbox_checkpoint', { name: cp });
      assert.ok(s.checkpoint_id && s.name === cp, JSON.stringify(s));
      await ok(c, 'file_write', { path: '/tmp/state.txt', content: 'v2\n' });
      const l = await ok(c, 'checkpoint_list', {});
      assert.ok(l.s.checkpoints.some((k) => k.name === cp), JSON.stringify(l.s));
      await ok(c, 'sandbox_restore', { checkpoint: s.checkpoint_id });
      assert.equal((await sh(c, 'cat /tmp/state.txt')).stdout, 'v1\n');
    });
  });

  test(`suspend and wake [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      await sh(c, 'echo before >/tmp/s.txt');
      const sb = await sessionSandbox(c);
      await ok(c, 'sandbox_suspend', {});
      assert.equal(await waitState(sb, 'suspended'), 'suspended');
      await ok(c, 'sandbox_wake', {});
      assert.equal(await waitState(sb, 'running'), 'running');
      assert.equal((await sh(c, 'cat /tmp/s.txt')).stdout, 'before\n');
    });
  });

  test(`create, list, remove, and keep [${tr}]`, async () => {
    const kept = uniq('kept');
    const temp = uniq('temp');
    let tempId;
    try {
      await withSession(tr, async (c) => {
        const a = await ok(c, 'sandbox_create', { template: 'minimal', name: kept, keep: true });
        const b = await ok(c, 'sandbox_create', { template: 'minimal', name: temp });
        tempId = b.s.sandbox_id;
        const names = (await ok(c, 'sandbox_list')).s.sandboxes.map((x) => x.name);
        assert.ok(names.includes(kept) && names.includes(temp), names.join(' '));
        const rm = uniq('rm');
        const r = await ok(c, 'sandbox_create', { template: 'minimal', name: rm });
        await ok(c, 'sandbox_remove', { sandbox_id: rm });
        assert.equal(await sandboxState(r.s.sandbox_id), null);
        assert.ok(a.s.sandbox_id);
      });
      assert.equal(await waitState(tempId, null), null, 'a sandbox the session made outlived it');
      assert.equal(await sandboxState(kept), 'running', 'keep: true did not keep it');
    } finally {
      await api('DELETE', `/v1/sandboxes/${kept}?force=1&wait=60`);
    }
  });

  test(`port_url and egress_status [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      await sh(c, 'mkdir -p /tmp/www && echo hello-js-mcp >/tmp/www/index.html');
      const py = (await sh(c, 'command -v python3 || true')).stdout.trim();
      await sh(c, py ? 'cd /tmp/www && nohup python3 -m http.server --bind 127.0.0.1 8000 >/dev/null 2>&1 &'
        : 'busybox httpd -p 127.0.0.1:8000 -h /tmp/www');
      const { s } = await ok(c, 'port_url', { port: 8000 });
      assert.equal(s.url, `http://127.0.0.1:${s.host_port}`);
      let body = '';
      for (let i = 0; i < 60 && !body.includes('hello-js-mcp'); i++) {
        try { body = await (await fetch(`${s.url}/index.html`)).text(); } catch { await sleep(500); }
      }
      assert.match(body, /hello-js-mcp/);
      // a connection the egress policy refuses (10.0.0.0/8 is protected), through the guest's proxy
      const out = (await sh(c, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128 && " +
        'printf "CONNECT 10.9.8.7:81 HTTP/1.1\\r\\n\\r\\n" >&3 && read -t 5 -r line <&3; echo "$line"\'')).stdout;
      assert.match(out, /403/);
      let e;
      for (let i = 0; i < 40; i++) {
        e = await ok(c, 'egress_status', {});
        if (e.s.denied.length) break;
        await sleep(250);
      }
      assert.ok(e.s.denied.some((d) => d.address === '10.9.8.7' && d.port === 81), JSON.stringify(e.s));
      assert.match(e.text, /10\.9\.8\.7/);
    });
  });

  test(`run_code without an interpreter says what to do [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      const { s } = await ok(c, 'sandbox_create', { template: 'minimal' });
      const text = await bad(c, 'run_code', { code: 'print(1)', sandbox_id: s.sandbox_id });
      assert.ok(text.includes('code-interpreter') && text.includes('exec'), text);
    });
  });

  // Only in a run with the code-interpreter template (t44's): left out of the others, not skipped.
  if (CI_TEMPLATE) {
    test(`run_code gives a PNG [${tr}]`, async () => {
      await withSession(tr, async (c) => {
        const { s } = await ok(c, 'sandbox_create', { template: CI_TEMPLATE });
        const r = await call(c, 'run_code', {
          sandbox_id: s.sandbox_id,
          code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()\n',
        });
        assert.ok(!r.isError, texts(r));
        const img = r.content.find((i) => i.type === 'image');
        assert.ok(img && img.mimeType === 'image/png', JSON.stringify(r.content).slice(0, 300));
        assert.ok(Buffer.from(img.data, 'base64').subarray(0, 4).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47])));
      });
    });
  }

  test(`bad arguments are tool errors [${tr}]`, async () => {
    await withSession(tr, async (c) => {
      assert.match(await bad(c, 'exec', { command: 'true', bogus: 1 }), /bogus/);
      await bad(c, 'exec', { argv: 'true' });
      await bad(c, 'exec', { command: 'true', timeout: 'soon' });
      assert.match((await bad(c, 'file_read', { path: 'relative/path' })).toLowerCase(), /absolute/);
      await bad(c, 'exec', { command: 'true', sandbox_id: 'no-such-sandbox' });
      await bad(c, 'sandbox_remove', { sandbox_id: 'no-such-sandbox' });
      assert.equal((await sh(c, 'echo fine')).stdout, 'fine\n');
    });
  });
}

// ---------------------------------------------------------------- keep, and garbage on stdin (stdio only)

test('--keep --name leaves the sandbox for the next session [stdio]', async () => {
  const name = uniq('keep');
  let id;
  await withSession('stdio', ['--keep', '--name', name], async (c) => {
    await ok(c, 'file_write', { path: '/tmp/kept.txt', content: 'first\n' });
    id = await sessionSandbox(c);
  });
  await sleep(1000);
  assert.equal(await sandboxState(name), 'running', 'the kept sandbox is gone');
  await withSession('stdio', ['--keep', '--name', name], async (c) => {
    assert.equal((await sh(c, 'cat /tmp/kept.txt')).stdout, 'first\n');
    assert.equal(await sessionSandbox(c), id);
    await ok(c, 'sandbox_remove', { sandbox_id: id });
  });
  assert.equal(await waitState(id, null), null);
});

function rawServer() {
  const p = spawn(SPACECTL, ['mcp', '--template', TEMPLATE], { stdio: ['pipe', 'pipe', 'inherit'] });
  const queue = [];
  const waiters = [];
  createInterface({ input: p.stdout }).on('line', (line) => {
    const msg = JSON.parse(line);
    if (msg && !Array.isArray(msg) && msg.method && msg.id === undefined) return; // a notification
    if (waiters.length) waiters.shift()(msg); else queue.push(msg);
  });
  return {
    p,
    send(raw) { p.stdin.write(raw + '\n'); },
    answer() {
      if (queue.length) return Promise.resolve(queue.shift());
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('no answer in 30 s')), 30_000);
        waiters.push((m) => { clearTimeout(t); resolve(m); });
      });
    },
    close() {
      const exited = new Promise((resolve) => p.once('exit', (code) => resolve(code)));
      p.stdin.end();
      return exited;
    },
  };
}

const errorCode = (m) => {
  assert.ok(m && m.error && m.result === undefined && m.jsonrpc === '2.0', JSON.stringify(m));
  return m.error.code;
};

test('garbage on stdin gets JSON-RPC errors and the server goes on [stdio]', async () => {
  const s = rawServer();
  let exited;
  try {
    s.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
      protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }));
    const init = await s.answer();
    assert.equal(init.result.protocolVersion, '2025-03-26');
    s.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}');
    s.send('{not json');
    let m = await s.answer();
    assert.equal(errorCode(m), -32700);
    assert.equal(m.id, null);
    s.send('["a", "b"]');
    m = await s.answer();
    if (Array.isArray(m)) assert.ok(m.length && m.every((x) => errorCode(x) === -32600));
    else assert.equal(errorCode(m), -32600);
    s.send('{"id": 9, "method": "tools/list"}');
    m = await s.answer();
    assert.equal(errorCode(m), -32600);
    s.send('{"jsonrpc": "2.0", "id": 10, "method": "resources/none"}');
    m = await s.answer();
    assert.equal(errorCode(m), -32601);
    assert.equal(m.id, 10);
    s.send('{"jsonrpc": "2.0", "id": 11, "method": "ping"}');
    assert.deepEqual(await s.answer(), { jsonrpc: '2.0', id: 11, result: {} });
    assert.equal(s.p.exitCode, null, 'the server died');
  } finally {
    exited = await s.close();
  }
  assert.equal(exited, 0);
});

// SPDX-License-Identifier: Apache-2.0
// sandbox.commands as the JS SDK uses it: envd's process.Process service (Start, Connect, List, SendInput,
// CloseStdin, SendSignal) on top of the daemon's processes.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { CommandExitError, Sandbox, TimeoutError } from 'e2b'
import { TEMPLATE } from './helpers.mjs'

let sbx
before(async () => {
  sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 900_000, envs: { SBX_VAR: 'from-create', OVERRIDE: 'sandbox' } })
})
after(async () => { await sbx?.kill() })

test('stdout, stderr and callbacks', async () => {
  const out = []
  const err = []
  const r = await sbx.commands.run('for i in 1 2; do echo o$i; echo e$i >&2; sleep 0.1; done',
    { onStdout: (d) => out.push(d), onStderr: (d) => err.push(d) })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'o1\no2\n')
  assert.equal(r.stderr, 'e1\ne2\n')
  assert.equal(out.join(''), r.stdout)
  assert.equal(err.join(''), r.stderr)
})

test('a non-zero exit throws CommandExitError', async () => {
  await assert.rejects(sbx.commands.run('echo so-far; exit 4'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, 4)
    assert.equal(e.error, 'exit status 4')
    assert.equal(e.stdout, 'so-far\n')
    return true
  })
})

test('envs of the sandbox and of the command', async () => {
  const r = await sbx.commands.run('echo $SBX_VAR $OVERRIDE $HOME $USER', { envs: { OVERRIDE: 'command' } })
  assert.equal(r.stdout, 'from-create command /home/user user\n')
})

test('user and cwd', async () => {
  assert.equal((await sbx.commands.run('whoami; pwd')).stdout, 'user\n/home/user\n')
  assert.equal((await sbx.commands.run('whoami; pwd', { user: 'root', cwd: '/tmp' })).stdout, 'root\n/tmp\n')
  await sbx.commands.run('mkdir -p rel')
  assert.equal((await sbx.commands.run('pwd', { cwd: 'rel' })).stdout, '/home/user/rel\n')
})

test('timeoutMs kills the command', async () => {
  const t = Date.now()
  await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 2000 }), (e) => e instanceof TimeoutError)
  assert.ok(Date.now() - t < 15_000)
  await new Promise((res) => setTimeout(res, 500))
  const left = (await sbx.commands.list()).filter((p) => p.args.at(-1) === 'sleep 30')
  assert.deepEqual(left, [])
})

test('background: pid, list with envs and cwd, kill', async () => {
  const h = await sbx.commands.run('sleep 60', { background: true, envs: { LISTED: 'yes' }, cwd: '/tmp' })
  assert.ok(h.pid > 0)
  const info = (await sbx.commands.list()).find((p) => p.pid === h.pid)
  assert.equal(info.cmd, '/bin/bash')
  assert.deepEqual(info.args, ['-l', '-c', 'sleep 60'])
  assert.deepEqual(info.envs, { LISTED: 'yes' })
  assert.equal(info.cwd, '/tmp')
  assert.equal(await h.kill(), true)
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1 && e.error === 'signal: killed')
  assert.equal(await sbx.commands.kill(h.pid), false)
})

test('kill of an unknown pid is false', async () => {
  assert.equal(await sbx.commands.kill(999999), false)
})

test('disconnect, then connect again', async () => {
  const h = await sbx.commands.run('for i in 1 2 3 4; do echo n$i; sleep 0.5; done', { background: true })
  await h.disconnect()
  const h2 = await sbx.commands.connect(h.pid)
  assert.equal(h2.pid, h.pid)
  const r = await h2.wait()
  assert.equal(r.exitCode, 0)
  assert.ok(r.stdout.endsWith('n4\n'), r.stdout)
})

test('stdin: sendStdin, then closeStdin ends cat', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'first\n')
  await sbx.commands.sendStdin(h.pid, new TextEncoder().encode('second\n'))
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.stdout, 'first\nsecond\n')
})

test('a large input through stdin arrives whole', async () => {
  const line = 'x'.repeat(1023) + '\n'
  const chunk = line.repeat(512) // 512 KiB per call: more than the stdin window
  const h = await sbx.commands.run('sha256sum', { background: true, stdin: true })
  for (let i = 0; i < 4; i++) await sbx.commands.sendStdin(h.pid, chunk)
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  const { createHash } = await import('node:crypto')
  assert.equal(r.stdout.split(' ')[0], createHash('sha256').update(chunk.repeat(4)).digest('hex'))
})

test('5 MB of output arrives intact', async () => {
  const r = await sbx.commands.run('seq 1 800000', { timeoutMs: 120_000 })
  let want = ''
  for (let i = 1; i <= 800000; i++) want += i + '\n'
  assert.equal(r.stdout.length, want.length)
  assert.ok(r.stdout === want)
})

test('a command not found exits 127', async () => {
  await assert.rejects(sbx.commands.run('no-such-command-here'),
    (e) => e instanceof CommandExitError && e.exitCode === 127)
})

test('nohup ... & outlives the command that started it', async () => {
  const pid = Number((await sbx.commands.run('nohup sleep 300 >/dev/null 2>&1 & echo $!')).stdout)
  await new Promise((res) => setTimeout(res, 1000))
  try {
    assert.equal((await sbx.commands.run(`kill -0 ${pid}`)).exitCode, 0)
  } finally {
    await sbx.commands.run(`kill ${pid} || true`)
  }
})

// SPDX-License-Identifier: Apache-2.0
// sandbox.pty: a login shell on a terminal (Start with pty), input (SendInput pty), resize (Update), kill.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { CommandExitError, Sandbox } from 'e2b'
import { TEMPLATE } from './helpers.mjs'

let sbx
before(async () => { sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 600_000 }) })
after(async () => { await sbx?.kill() })

const enc = new TextEncoder()

async function terminal(opts = {}) {
  const chunks = []
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => chunks.push(Buffer.from(d)), ...opts })
  return { h, text: () => Buffer.concat(chunks).toString('utf8') }
}

test('input goes in, output comes out, the size is the one asked for', async () => {
  const { h, text } = await terminal()
  assert.ok(h.pid > 0)
  await sbx.pty.sendInput(h.pid, enc.encode('echo $TERM; stty size; exit\n'))
  const r = await h.wait()
  assert.equal(r.exitCode, 0)
  assert.match(text(), /xterm-256color/)
  assert.match(text(), /24 80/)
})

test('resize changes what stty sees', async () => {
  const { h, text } = await terminal()
  await sbx.pty.resize(h.pid, { cols: 132, rows: 50 })
  await sbx.pty.sendInput(h.pid, enc.encode('stty size; exit\n'))
  await h.wait()
  assert.match(text(), /50 132/)
})

test('user and cwd', async () => {
  const { h, text } = await terminal({ user: 'root', cwd: '/tmp' })
  await sbx.pty.sendInput(h.pid, enc.encode('echo who=$(whoami) dir=$(pwd); exit\n'))
  await h.wait()
  assert.match(text(), /who=root dir=\/tmp/)
})

test('kill ends the shell; a second kill finds nothing', async () => {
  const { h } = await terminal()
  assert.equal(await sbx.pty.kill(h.pid), true)
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1)
  assert.equal(await sbx.pty.kill(h.pid), false)
})

// SPDX-License-Identifier: Apache-2.0
// What the newest SDK adds to the control plane (issue 26): sandbox.fork (POST /sandboxes/ID/fork) and
// sandbox.updateNetwork (PUT /sandboxes/ID/network). An older SDK has neither: each test is skipped there,
// saying which SDK version lacks what. The network test needs a name the daemon's egress_hosts_file maps to a
// loopback address (SPACE_E2B_NET_HOST, SPACE_E2B_NET_ADDR: t29 sets both), where it serves HTTP itself.
import test from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { createRequire } from 'node:module'
import { Sandbox } from 'e2b'
import { TEMPLATE, e2bApi } from './helpers.mjs'

const SDK = createRequire(import.meta.url)('e2b/package.json').version
const noFork = typeof Sandbox.prototype.fork !== 'function' && `SDK ${SDK} has no Sandbox.fork`
const noNetwork = typeof Sandbox.prototype.updateNetwork !== 'function' && `SDK ${SDK} has no Sandbox.updateNetwork`
const NET_HOST = process.env.SPACE_E2B_NET_HOST
const NET_ADDR = process.env.SPACE_E2B_NET_ADDR

async function sh(sbx, cmd) {
  return (await sbx.commands.run(cmd)).stdout
}

test('two forks diverge while the parent goes on', { skip: noFork }, async () => {
  const parent = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 })
  let forks = []
  try {
    await sh(parent, 'echo from-parent >/tmp/parent.txt')
    const before = await parent.getInfo()
    forks = await parent.fork({ count: 2, timeoutMs: 120_000 })
    assert.equal(forks.length, 2)
    for (const f of forks) assert.ok(f instanceof Sandbox, String(f))
    const [a, b] = forks
    assert.equal(new Set([parent.sandboxId, a.sandboxId, b.sandboxId]).size, 3)
    assert.equal(await sh(a, 'cat /tmp/parent.txt'), 'from-parent\n')
    await sh(a, 'echo only-a >/tmp/fork.txt')
    assert.equal(await sh(b, 'test -e /tmp/fork.txt && echo there || echo absent'), 'absent\n')
    assert.equal(await sh(parent, 'test -e /tmp/fork.txt && echo there || echo absent'), 'absent\n')
    const after = await parent.getInfo()
    assert.equal(after.sandboxId, before.sandboxId)
    assert.equal(after.endAt.getTime(), before.endAt.getTime())
    assert.equal(await sh(parent, 'cat /tmp/parent.txt'), 'from-parent\n')
    // one fork by default
    const one = await Sandbox.fork(parent.sandboxId, { timeoutMs: 60_000 })
    forks.push(...one)
    assert.equal(one.length, 1)
    assert.ok(one[0] instanceof Sandbox, String(one[0]))
    assert.equal(await sh(one[0], 'echo forked'), 'forked\n')
    // the JS SDK sends any count: the server refuses what is out of range
    for (const count of [0, 21])
      await assert.rejects(parent.fork({ count }), /count must be a whole number from 1 to 20/)
    const r = await e2bApi('POST', `/sandboxes/${parent.sandboxId}/fork`, { count: 'many' })
    assert.deepEqual([r.status, r.body.code], [400, 400])
    assert.match(r.body.message, /count must be a whole number/)
  } finally {
    for (const f of forks) if (f instanceof Sandbox) await f.kill()
    await parent.kill()
  }
})

test('updateNetwork cuts and restores a connection', { skip: noNetwork || (!NET_HOST && 'no SPACE_E2B_NET_HOST: the daemon maps no name to a test server (t29 does)') }, async () => {
  let hits = 0
  const srv = http.createServer((req, res) => { hits++; res.end('hello-net\n') })
  await new Promise((resolve) => srv.listen(0, NET_ADDR, resolve))
  const port = srv.address().port
  const allow = [NET_HOST, NET_ADDR]
  const s = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000, network: { allowOut: allow } })
  const get = () => sh(s, `curl -fsS --max-time 20 http://${NET_HOST}:${port}/ 2>&1 || echo CURL-FAILED`)
  try {
    assert.match(await get(), /hello-net/)
    const seen = hits
    await s.updateNetwork({ denyOut: [NET_ADDR] })
    let net = (await s.getInfo()).network
    assert.deepEqual([net.allowOut, net.denyOut], [[], [NET_ADDR]])
    assert.match(await get(), /CURL-FAILED/)
    assert.equal(hits, seen)
    await s.updateNetwork({ allowOut: allow })
    assert.match(await get(), /hello-net/)
    await assert.rejects(s.updateNetwork({ allowOut: ['*.example.com'] }), /network\.allowOut.*\*\.example\.com/)
    net = (await s.getInfo()).network
    assert.deepEqual([net.allowOut, net.denyOut], [allow, []])
    assert.match(await get(), /hello-net/)
  } finally {
    await s.kill()
    srv.close()
  }
})

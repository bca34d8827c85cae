// SPDX-License-Identifier: Apache-2.0
// What the newest SDK sends besides fork and network updates (issue 26), each served or refused with an error
// that says why: the list's filters, order and pages, the snapshots' name filter, symlinks as envd reports
// them, and the pause modes (lifecycle keepMemory, pause keepMemory, connect onResume). The pinned SDK has none
// of these calls: t29 leaves this file to t45.
import test from 'node:test'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { Sandbox } from 'e2b'
import { TEMPLATE } from './helpers.mjs'

async function sh(sbx, cmd) {
  return (await sbx.commands.run(cmd)).stdout
}

async function all(paginator) {
  const out = []
  while (paginator.hasNext) out.push(...(await paginator.nextItems()))
  return out.map((s) => s.sandboxId ?? s.snapshotId)
}

test('list filters, order and pages; snapshot names; symlinks; pause modes', async () => {
  const tag = randomUUID()
  const a = await Sandbox.create(TEMPLATE, { timeoutMs: 600_000, metadata: { suite: tag } })
  await new Promise((r) => setTimeout(r, 1100))
  const b = await Sandbox.create(TEMPLATE, { timeoutMs: 600_000, metadata: { suite: tag } })
  try {
    const query = { metadata: { suite: tag }, state: ['running'] }
    // pages by limit and the next token, in either order
    assert.deepEqual(await all(Sandbox.list({ query, limit: 1 })), [a.sandboxId, b.sandboxId])
    assert.deepEqual(await all(Sandbox.list({ query, order: 'desc', limit: 1 })), [b.sandboxId, a.sandboxId])
    // startedAfter and template
    const info = await b.getInfo()
    assert.deepEqual(await all(Sandbox.list({ query: { ...query, startedAfter: info.startedAt } })), [b.sandboxId])
    assert.deepEqual(await all(Sandbox.list({ query: { ...query, startedAfter: new Date(Date.now() + 3600_000) } })), [])
    assert.deepEqual(await all(Sandbox.list({ query: { ...query, template: TEMPLATE } })), [a.sandboxId, b.sandboxId])
    assert.deepEqual(await all(Sandbox.list({ query: { ...query, template: 'no-such-template' } })), [])
    await assert.rejects(all(Sandbox.list({ query, order: 'sideways' })), /order/)

    // snapshots by name
    const name = `newest-js-${tag.slice(0, 8)}`
    const snap = await a.createSnapshot({ name })
    try {
      assert.deepEqual(await all(Sandbox.listSnapshots({ name })), [snap.snapshotId])
      assert.deepEqual(await all(Sandbox.listSnapshots({ name: `no-such-${name}` })), [])
    } finally {
      await Sandbox.deleteSnapshot(snap.snapshotId)
    }

    // a symlink's target as envd gives it: absolute
    await sh(a, 'mkdir -p /home/user/ln/sub && echo x >/home/user/ln/real.txt && ln -s real.txt /home/user/ln/rel && ln -s ../real.txt /home/user/ln/sub/up')
    assert.equal((await a.files.getInfo('/home/user/ln/rel')).symlinkTarget, '/home/user/ln/real.txt')
    assert.equal((await a.files.getInfo('/home/user/ln/sub/up')).symlinkTarget, '/home/user/ln/real.txt')
    const listed = Object.fromEntries((await a.files.list('/home/user/ln')).map((e) => [e.name, e.symlinkTarget]))
    assert.equal(listed.rel, '/home/user/ln/real.txt')

    // a filesystem-only pause is refused, saying why, and the sandbox runs on; a full one is space's pause
    await assert.rejects(a.pause({ keepMemory: false }), /memory=false/)
    assert.equal(await sh(a, 'echo on'), 'on\n')
    assert.equal(await a.pause({ keepMemory: true }), true)
    await assert.rejects(Sandbox.connect(a.sandboxId, { onResume: 'reboot' }), /reboot/)
    const back = await Sandbox.connect(a.sandboxId, { onResume: 'restore' })
    assert.equal(await sh(back, 'echo back'), 'back\n')
  } finally {
    await a.kill()
    await b.kill()
  }
})

test('watch events carry the entry when asked (includeEntry)', async () => {
  const s = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 })
  try {
    // the SDK gates includeEntry (0.6.3) and allowNetworkMounts (0.6.4) on the envd version the facade reports,
    // which stays below them until file metadata (0.6.2) is served too: pretend it, so that the SDK sends them
    s.files.envdApi.version = '0.6.4'
    await s.files.makeDir('/home/user/we')
    const seen = []
    const h = await s.files.watchDir('/home/user/we', (e) => seen.push(e), { includeEntry: true, allowNetworkMounts: true })
    await sh(s, 'printf 12345 > /home/user/we/f.txt')
    const end = Date.now() + 20_000
    while (Date.now() < end && seen.length < 2) await new Promise((r) => setTimeout(r, 100))
    assert.deepEqual(seen.map((e) => [e.name, e.type]), [['f.txt', 'create'], ['f.txt', 'write']])
    // as envd: the entry as it is when the agent looks (the create's may be from before the write)
    for (const e of seen) assert.deepEqual([e.entry?.name, e.entry?.path, e.entry?.owner], ['f.txt', '/home/user/we/f.txt', 'user'])
    assert.ok([0, 5].includes(seen[0].entry.size) && seen[1].entry.size === 5, JSON.stringify(seen))
    await sh(s, 'rm /home/user/we/f.txt')
    while (Date.now() < end + 20_000 && seen.length < 3) await new Promise((r) => setTimeout(r, 100))
    assert.deepEqual([seen[2]?.name, seen[2]?.type, seen[2]?.entry], ['f.txt', 'remove', undefined])
    await h.stop()
  } finally {
    await s.kill()
  }
})

test('create with lifecycle keepMemory', async () => {
  const s = await Sandbox.create(TEMPLATE, { timeoutMs: 120_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: true } } })
  try {
    assert.equal((await s.getInfo()).lifecycle?.onTimeout, 'pause')
    assert.equal(await sh(s, 'echo up'), 'up\n')
  } finally {
    await s.kill()
  }
  await assert.rejects(Sandbox.create(TEMPLATE, { timeoutMs: 120_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } }),
    /autoPauseMemory/)
})

// SPDX-License-Identifier: Apache-2.0
// What the newest SDK sends besides fork and network updates (issue 26), each served or refused with an error
// that says why: the list's filters, order and pages, the snapshots' name filter, symlinks as envd reports
// them, and the pause modes (lifecycle keepMemory, pause keepMemory, connect onResume): without memory, a stop
// and a cold boot from the disk. The pinned SDK has none of these calls: t29 leaves this file to t45.
import test from 'node:test'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { Sandbox } from 'e2b'
import { TEMPLATE } from './helpers.mjs'

async function sh(sbx, cmd) {
  return (await sbx.commands.run(cmd)).stdout
}

// The guest's command lines, one a line, as /proc has them (busybox's and procps' ps differ).
const PROCS = "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f; echo; done"

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

    // a filesystem-only pause is a stop: the files stay, the processes go, and connect boots it from its disk
    await a.files.write('/home/user/fs-kept.txt', 'kept by the disk')
    await a.commands.run('sleep 1000', { background: true })
    assert.match(await sh(a, PROCS), /sleep 1000/)
    assert.equal(await a.pause({ keepMemory: false }), true)
    assert.equal((await a.getInfo()).state, 'paused')
    const booted = await Sandbox.connect(a.sandboxId)
    assert.equal(await booted.files.read('/home/user/fs-kept.txt'), 'kept by the disk')
    assert.doesNotMatch(await sh(booted, PROCS), /sleep 1000/)
    // a full one is space's suspend; connect with onResume 'reboot' drops that memory and boots the disk
    await booted.commands.run('sleep 1001', { background: true })
    await booted.files.write('/home/user/fs-kept.txt', 'written before a full pause')
    await sh(booted, 'sync')
    assert.equal(await booted.pause({ keepMemory: true }), true)
    const rebooted = await Sandbox.connect(a.sandboxId, { onResume: 'reboot' })
    assert.equal(await rebooted.files.read('/home/user/fs-kept.txt'), 'written before a full pause')
    assert.doesNotMatch(await sh(rebooted, PROCS), /sleep 1001/)
    const back = await Sandbox.connect(a.sandboxId, { onResume: 'restore' })
    assert.equal(await sh(back, 'echo back'), 'back\n')
  } finally {
    await a.kill()
    await b.kill()
  }
})

test('file metadata (envd 0.6.2); symlinks resolved as envd resolves them', async () => {
  const s = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 })
  try {
    const path = '/home/user/meta/m.txt'
    const w = await s.files.write(path, 'one', { metadata: { Owner: 'alice', 'k-2': 'v=2' } })
    assert.deepEqual(w.metadata, { owner: 'alice', 'k-2': 'v=2' })
    assert.deepEqual((await s.files.getInfo(path)).metadata, { owner: 'alice', 'k-2': 'v=2' })
    assert.deepEqual((await s.files.list('/home/user/meta')).map((e) => [e.name, e.metadata]),
      [['m.txt', { owner: 'alice', 'k-2': 'v=2' }]])
    // a write replaces the whole set; one without metadata leaves none
    await s.files.write(path, 'two', { metadata: { x: '1' } })
    assert.deepEqual((await s.files.getInfo(path)).metadata, { x: '1' })
    await s.files.write(path, 'three')
    assert.equal((await s.files.getInfo(path)).metadata, undefined)
    // refused as envd refuses it, with its reason
    await assert.rejects(s.files.write('/home/user/meta/big', 'x', { metadata: Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`k${i}`, 'v'.repeat(100)])) }), /total metadata size/)
    await assert.rejects(s.files.getInfo('/home/user/meta/big'))

    // symlinks: the target resolved through every link (a linked directory, a chain), its type what it
    // leads to; a dangling one's target is itself
    await sh(s, 'mkdir -p /home/user/ch/d && echo x >/home/user/ch/d/f.txt && cd /home/user/ch && ln -s d dl && ln -s dl/f.txt via && ln -s via chain && ln -s nowhere dangling')
    const chain = await s.files.getInfo('/home/user/ch/chain')
    assert.equal(chain.symlinkTarget, '/home/user/ch/d/f.txt')
    assert.equal(chain.type, 'file')
    assert.equal((await s.files.getInfo('/home/user/ch/dl')).type, 'dir')
    assert.equal((await s.files.getInfo('/home/user/ch/dangling')).symlinkTarget, '/home/user/ch/dangling')
    const listed = Object.fromEntries((await s.files.list('/home/user/ch')).map((e) => [e.name, e.symlinkTarget]))
    assert.equal(listed.via, '/home/user/ch/d/f.txt')
  } finally {
    await s.kill()
  }
})

test('watch events carry the entry when asked (includeEntry)', async () => {
  const s = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 })
  try {
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
  // keepMemory false: the timeout pauses it without memory (a stop); connect boots it from its disk
  const f = await Sandbox.create(TEMPLATE, { timeoutMs: 8_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })
  try {
    await f.files.write('/home/user/at-timeout.txt', 'kept')
    await f.commands.run('sleep 1000', { background: true })
    const deadline = Date.now() + 90_000
    while ((await f.getInfo()).state !== 'paused' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500))
    assert.equal((await f.getInfo()).state, 'paused')
    const again = await Sandbox.connect(f.sandboxId, { timeoutMs: 120_000 })
    assert.equal(await again.files.read('/home/user/at-timeout.txt'), 'kept')
    assert.doesNotMatch(await sh(again, PROCS), /sleep 1000/)
  } finally {
    await f.kill()
  }
})

// SPDX-License-Identifier: Apache-2.0
// E2B's control plane through the JS SDK: create, info, lists, timeouts, pause and connect, metrics,
// snapshots, kill and the errors a user meets.
import test from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { promisify } from 'node:util'
import { AuthenticationError, NotFoundError, Sandbox, SandboxError } from 'e2b'
import { TEMPLATE, spaceApi } from './helpers.mjs'

// A command's stdout. SPACE_E2B_NATIVE_EXEC=1 runs it with spacectl instead of the SDK's commands (for
// working on the control plane alone); the suite runs it through the SDK.
async function sh(sbx, cmd) {
  if (process.env.SPACE_E2B_NATIVE_EXEC === '1') {
    const { stdout } = await promisify(execFile)(process.env.SPACECTL,
      ['exec', sbx.sandboxId, '--', 'bash', '-c', cmd], { timeout: 60_000 })
    return stdout
  }
  return (await sbx.commands.run(cmd)).stdout
}

async function nativeState(id) {
  const r = await spaceApi('GET', `/v1/sandboxes/${id}`)
  return r.status === 200 ? r.body.state : null
}

async function waitFor(what, pred, ms = 60_000) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await pred()) return
    await new Promise((r) => setTimeout(r, 500))
  }
  throw new Error(`timed out waiting for ${what}`)
}

const secondsLeft = (info) => (info.endAt.getTime() - Date.now()) / 1000

test('create from base with envs and metadata; info', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, envs: { FOO: 'js bar' }, metadata: { suite: 'js' } })
  try {
    assert.equal(await sh(sbx, 'echo $FOO'), 'js bar\n')
    const info = await sbx.getInfo()
    assert.equal(info.sandboxId, sbx.sandboxId)
    assert.equal(info.templateId, 'seed')
    assert.deepEqual(info.metadata, { suite: 'js' })
    assert.equal(info.state, 'running')
    assert.equal(info.cpuCount, 1)
    assert.ok(info.memoryMB >= 64)
    assert.deepEqual(info.lifecycle, { onTimeout: 'kill', autoResume: false })
    assert.ok(secondsLeft(info) > 100 && secondsLeft(info) <= 125)
  } finally {
    // the instance's kill() returns nothing; the static one says whether it was there
    assert.equal(await Sandbox.kill(sbx.sandboxId), true)
  }
})

test('list by metadata and state, a page at a time', async () => {
  const run = randomUUID()
  const meta = { run, 'odd key': 'a&b=c d%' }
  const a = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000, metadata: meta })
  const b = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000, metadata: { run } })
  try {
    const all = await Sandbox.list({ query: { metadata: { run } } }).nextItems()
    assert.deepEqual(new Set(all.map((s) => s.sandboxId)), new Set([a.sandboxId, b.sandboxId]))
    const onlyA = await Sandbox.list({ query: { metadata: meta } }).nextItems()
    assert.deepEqual(onlyA.map((s) => s.sandboxId), [a.sandboxId])
    assert.deepEqual(onlyA[0].metadata, meta)

    const pages = Sandbox.list({ query: { metadata: { run } }, limit: 1 })
    const first = await pages.nextItems()
    assert.equal(first.length, 1)
    assert.ok(pages.hasNext && pages.nextToken)
    const second = await pages.nextItems()
    assert.equal(second.length, 1)
    assert.equal(pages.hasNext, false)
    assert.notEqual(first[0].sandboxId, second[0].sandboxId)

    assert.equal(await b.pause(), true)
    const paused = await Sandbox.list({ query: { metadata: { run }, state: ['paused'] } }).nextItems()
    assert.deepEqual(paused.map((s) => [s.sandboxId, s.state]), [[b.sandboxId, 'paused']])
    const running = await Sandbox.list({ query: { metadata: { run }, state: ['running'] } }).nextItems()
    assert.deepEqual(running.map((s) => s.sandboxId), [a.sandboxId])
  } finally {
    await a.kill()
    await b.kill()
  }
})

test('setTimeout, then removed at the timeout', async () => {
  const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 })
  await sbx.setTimeout(600_000)
  const left = secondsLeft(await sbx.getInfo())
  assert.ok(left > 580 && left <= 605, `${left}`)
  await sbx.setTimeout(2_000)
  await waitFor('the sandbox to be removed', async () => (await nativeState(sbx.sandboxId)) === null, 30_000)
  await assert.rejects(Sandbox.connect(sbx.sandboxId), NotFoundError)
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
})

test('pause, paused again is false, connect resumes with files and processes', async () => {
  const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 })
  try {
    await sh(sbx, 'echo kept > /tmp/js.txt; (sleep 1000 >/dev/null 2>&1 &); true')
    assert.equal(await sbx.pause(), true)
    assert.equal((await sbx.getInfo()).state, 'paused')
    assert.equal(await nativeState(sbx.sandboxId), 'suspended')
    assert.equal(await sbx.pause(), false)
    const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 200_000 })
    assert.equal((await again.getInfo()).state, 'running')
    assert.equal(await sh(again, 'cat /tmp/js.txt'), 'kept\n')
    const procs = await sh(again, "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline 2>/dev/null; echo; done")
    assert.match(procs, /sleep 1000/)
    const left = secondsLeft(await again.getInfo())
    assert.ok(left > 180 && left <= 205, `${left}`)
  } finally {
    await sbx.kill()
  }
})

test('onTimeout pause with autoResume: paused at the timeout, resumed by use', async () => {
  const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  try {
    assert.deepEqual((await sbx.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: true })
    await sh(sbx, 'echo before > /tmp/p.txt')
    await sbx.setTimeout(2_000)
    await waitFor('the pause at the timeout', async () => (await nativeState(sbx.sandboxId)) === 'suspended')
    assert.equal((await sbx.getInfo()).state, 'paused')
    assert.equal((await sbx.commands.run('cat /tmp/p.txt')).stdout, 'before\n')
    assert.equal((await sbx.getInfo()).state, 'running')
  } finally {
    await sbx.kill()
  }
})

test('metrics are the VM\'s', async () => {
  const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 120_000 })
  try {
    const info = await sbx.getInfo()
    const metrics = await sbx.getMetrics()
    assert.equal(metrics.length, 1)
    const m = metrics[0]
    assert.equal(m.cpuCount, 1)
    assert.ok(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100)
    // memory as the guest sees it (its kernel keeps some of the sandbox's memory for itself)
    assert.ok(m.memTotal > info.memoryMB * 1024 * 1024 / 2 && m.memTotal <= info.memoryMB * 1024 * 1024)
    assert.ok(m.memUsed > 0 && m.memUsed <= m.memTotal)
    assert.ok(m.diskTotal > 0 && m.diskUsed >= 0 && m.diskUsed <= m.diskTotal)
    assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 10_000)
  } finally {
    await sbx.kill()
  }
})

test('a snapshot outlives its sandbox and forks with its files', async () => {
  const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 })
  const name = `js-snap-${randomUUID().slice(0, 8)}`
  let snap
  try {
    await sh(sbx, 'echo js-snap > /tmp/s.txt')
    snap = await sbx.createSnapshot({ name })
    assert.match(snap.snapshotId, /^cp-/)
    assert.deepEqual(snap.names, [name])
    const listed = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()
    assert.deepEqual(listed.map((x) => x.snapshotId), [snap.snapshotId])
    await sbx.kill()
    const fork = await Sandbox.create(name, { timeoutMs: 120_000 })
    try {
      assert.equal(await sh(fork, 'cat /tmp/s.txt'), 'js-snap\n')
    } finally {
      await fork.kill()
    }
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
    snap = undefined
  } finally {
    await sbx.kill()
    if (snap) await Sandbox.deleteSnapshot(snap.snapshotId)
  }
})

test('several at once, each killed once', async () => {
  const made = await Promise.all([1, 2, 3].map(() => Sandbox.create(TEMPLATE, { timeoutMs: 120_000 })))
  try {
    assert.equal(new Set(made.map((s) => s.sandboxId)).size, 3)
    for (const s of made) assert.equal(await s.isRunning(), true)
  } finally {
    for (const s of made) assert.equal(await Sandbox.kill(s.sandboxId), true)
  }
  for (const s of made) assert.equal(await Sandbox.kill(s.sandboxId), false)
})

test('errors say what is wrong', async () => {
  await assert.rejects(Sandbox.create('no-such-template', { timeoutMs: 30_000 }),
    (e) => e instanceof SandboxError && /template 'no-such-template' does not exist/.test(e.message))
  await assert.rejects(Sandbox.list({ apiKey: 'e2b_' + '0'.repeat(40) }).nextItems(), AuthenticationError)
  await assert.rejects(Sandbox.connect('0'.repeat(32)), NotFoundError)
  await assert.rejects(Sandbox.create(TEMPLATE, { timeoutMs: 30_000, network: { denyOut: ['10.0.0.0/33'] } }),
    /network.denyOut/)
})

test('network options are the sandbox\'s egress lists', async () => {
  const s = await Sandbox.create(TEMPLATE, { timeoutMs: 60_000, network: { allowOut: ['1.1.1.1'], denyOut: ['0.0.0.0/0'] } })
  try {
    const { body } = await spaceApi('GET', `/v1/sandboxes/${s.sandboxId}`)
    assert.deepEqual([body.egress_allow, body.egress_deny], [['1.1.1.1'], []])
  } finally {
    await s.kill()
  }
})

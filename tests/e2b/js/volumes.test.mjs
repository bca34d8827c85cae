// SPDX-License-Identifier: Apache-2.0
// E2B's Volume API (issue 26, stage 1) from the JS SDK: create, list, getInfo, connect, destroy, and every file
// operation of the volume content API (list with depth, makeDir, getInfo, exists, updateMetadata, readFile as
// text, bytes, blob and a stream, writeFile from a string, bytes, a Blob and a stream, remove), which the SDK
// sends to E2B_VOLUME_API_URL with the volume's token. Files of 3 MiB streamed in and read back. The quota's
// refusal as the SDK throws it, wrong and other volumes' tokens. volumeMounts (stage 2): checked, a volume written
// by one sandbox read by the next, not destroyed while mounted, its quota ENOSPC in the guest. The pinned SDK has
// no Volume: t29 leaves this file to t45.
import test from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { AuthenticationError, Sandbox, Volume, VolumeError, VolumeNotFoundError, VolumePathNotFoundError } from 'e2b'
import { TEMPLATE, spaceApi } from './helpers.mjs'

const freshName = () => `js-${randomUUID().slice(0, 12)}`

test('volumes: create, list, getInfo, connect, destroy', async () => {
  const name = freshName()
  const v = await Volume.create(name)
  try {
    assert.equal(v.name, name)
    assert.match(v.volumeId, /^vol-[0-9a-f]{16}$/)
    assert.equal(v.token.length, 64)
    assert.ok((await Volume.list()).some((i) => i.volumeId === v.volumeId && i.name === name))
    const info = await Volume.getInfo(v.volumeId)
    assert.deepEqual([info.volumeId, info.name, info.token], [v.volumeId, name, v.token])
    assert.equal((await Volume.connect(v.volumeId)).name, name)
    await assert.rejects(Volume.create(name), /already a volume named/)
    await assert.rejects(Volume.create('../x'), /not a volume name/)
  } finally {
    assert.equal(await Volume.destroy(v.volumeId), true)
  }
  assert.equal(await Volume.destroy(v.volumeId), false)
  await assert.rejects(Volume.getInfo(v.volumeId), VolumeNotFoundError)
})

test('volumes: every file operation', async () => {
  const v = await Volume.create(freshName())
  try {
    const e = await v.writeFile('/docs/a.txt', 'hello', { mode: 0o640, uid: 1000, gid: 1000 })
    assert.deepEqual([e.name, e.type, e.path, e.size, e.mode, e.uid, e.gid], ['a.txt', 'file', '/docs/a.txt', 5, 0o640, 1000, 1000])
    assert.ok(e.mtime instanceof Date && e.mtime.getFullYear() >= 2024)
    assert.equal(await v.readFile('/docs/a.txt'), 'hello')
    assert.deepEqual(Buffer.from(await v.readFile('/docs/a.txt', { format: 'bytes' })), Buffer.from('hello'))
    assert.equal(await (await v.readFile('/docs/a.txt', { format: 'blob' })).text(), 'hello')
    const chunks = []
    for await (const c of await v.readFile('/docs/a.txt', { format: 'stream' })) chunks.push(Buffer.from(c))
    assert.equal(Buffer.concat(chunks).toString(), 'hello')

    const d = await v.makeDir('/docs/sub/deep', { force: true })
    assert.deepEqual([d.type, d.path, d.mode], ['directory', '/docs/sub/deep', 0o755])
    await assert.rejects(v.makeDir('/docs/sub'), VolumeError)
    await assert.rejects(v.makeDir('/nowhere/x'), VolumePathNotFoundError)
    assert.deepEqual((await v.list('/docs')).map((x) => x.path), ['/docs/a.txt', '/docs/sub'])
    assert.deepEqual((await v.list('/docs', { depth: 3 })).map((x) => x.path), ['/docs/a.txt', '/docs/sub', '/docs/sub/deep'])
    assert.equal((await v.getInfo('/docs/a.txt')).size, 5)
    assert.equal(await v.exists('/docs/a.txt'), true)
    assert.equal(await v.exists('/docs/nope'), false)

    const u = await v.updateMetadata('/docs/a.txt', { mode: 0o600, uid: 0 })
    assert.deepEqual([u.mode, u.uid, u.gid], [0o600, 0, 1000])
    await v.writeFile('/docs/a.txt', new TextEncoder().encode('replaced').buffer)
    assert.equal(await v.readFile('/docs/a.txt'), 'replaced')
    await assert.rejects(v.writeFile('/docs/a.txt', 'x', { force: false }), /409/)
    await v.writeFile('/blob.bin', new Blob([Buffer.alloc(300000, 120)]))
    assert.equal((await v.getInfo('/blob.bin')).size, 300000)
    const stream = new ReadableStream({ start (c) { c.enqueue(new TextEncoder().encode('streamed')); c.close() } })
    await v.writeFile('/stream.txt', stream)
    assert.equal(await v.readFile('/stream.txt'), 'streamed')

    await v.remove('/docs')
    await assert.rejects(v.getInfo('/docs'), VolumePathNotFoundError)
    await assert.rejects(v.readFile('/docs/a.txt'), VolumePathNotFoundError)
    await assert.rejects(v.remove('/docs'), VolumePathNotFoundError)
    await assert.rejects(v.readFile('/a/../../etc/passwd'), /'\.\.'/)
    assert.deepEqual((await v.list('/')).map((x) => x.path), ['/blob.bin', '/stream.txt'])
  } finally {
    await Volume.destroy(v.volumeId)
  }
})

test('volumes: files over 1 MiB are streamed in and read back', async () => {
  const v = await Volume.create(freshName())
  try {
    const data = randomBytes(3 * 1024 * 1024)
    const e = await v.writeFile('/big/3m.bin', data)
    assert.deepEqual([e.path, e.size], ['/big/3m.bin', data.length])
    const got = Buffer.from(await v.readFile('/big/3m.bin', { format: 'bytes' }))
    assert.equal(createHash('sha256').update(got).digest('hex'), createHash('sha256').update(data).digest('hex'))
    await v.writeFile('/big/3m-blob.bin', new Blob([data]))
    assert.ok(Buffer.from(await v.readFile('/big/3m-blob.bin', { format: 'bytes' })).equals(data))
    assert.equal((await spaceApi('GET', `/v1/volumes/${v.volumeId}`)).body.usage, 2 * data.length)
  } finally {
    await Volume.destroy(v.volumeId)
  }
})

test('volumes: the quota refuses a large write whole', async () => {
  const name = freshName()
  const { status, body } = await spaceApi('POST', '/v1/volumes', { name, quota: 2 * 1024 * 1024 })
  assert.equal(status, 201)
  const v = await Volume.connect(body.id)
  try {
    await assert.rejects(v.writeFile('/big', randomBytes(3 * 1024 * 1024)), (err) =>
      err instanceof VolumeError && /507/.test(err.message) && /quota of 2097152 bytes/.test(err.message))
    assert.equal(await v.exists('/big'), false)
    assert.equal((await spaceApi('GET', `/v1/volumes/${name}`)).body.usage, 0)
  } finally {
    await Volume.destroy(v.volumeId)
  }
})

test('volumes: the quota refuses a write whole', async () => {
  const name = freshName()
  const { status, body } = await spaceApi('POST', '/v1/volumes', { name, quota: 1000 })
  assert.equal(status, 201)
  const v = await Volume.connect(body.id)
  try {
    await v.writeFile('/a', 'a'.repeat(600))
    await assert.rejects(v.writeFile('/b', 'b'.repeat(600)), (err) =>
      err instanceof VolumeError && /507/.test(err.message) && /quota of 1000 bytes/.test(err.message))
    assert.equal(await v.exists('/b'), false)
    assert.equal((await spaceApi('GET', `/v1/volumes/${name}`)).body.usage, 600)
  } finally {
    await Volume.destroy(v.volumeId)
  }
})

test('volumes: a token opens its own volume only', async () => {
  const v = await Volume.create(freshName())
  const other = await Volume.create(freshName())
  try {
    await v.writeFile('/secret.txt', 'mine')
    const wrong = new Volume(v.volumeId, v.name, '0'.repeat(64))
    await assert.rejects(wrong.readFile('/secret.txt'), AuthenticationError)
    const theirs = new Volume(v.volumeId, v.name, other.token)
    await assert.rejects(theirs.readFile('/secret.txt'), /403/)
    await assert.rejects(theirs.writeFile('/planted.txt', 'x'), /403/)
    assert.equal(await v.exists('/planted.txt'), false)
    await assert.rejects(Volume.list({ apiKey: v.token }), AuthenticationError)
  } finally {
    await Volume.destroy(v.volumeId)
    await Volume.destroy(other.volumeId)
  }
})

test('volumes: volumeMounts are checked', async () => {
  const v = await Volume.create(freshName())
  try {
    const before = (await spaceApi('GET', '/v1/sandboxes')).body.sandboxes.length
    await assert.rejects(Sandbox.create(TEMPLATE, { timeoutMs: 30000, volumeMounts: { '/data': 'js-nope-x' } }),
      /no volume 'js-nope-x'/)
    await assert.rejects(Sandbox.create(TEMPLATE, { timeoutMs: 30000, volumeMounts: { '/': v } }),
      /cannot be mounted at \//)
    assert.equal((await spaceApi('GET', '/v1/sandboxes')).body.sandboxes.length, before)
  } finally {
    await Volume.destroy(v.volumeId)
  }
})

const sh = async (sbx, cmd) => (await sbx.commands.run(cmd, { timeoutMs: 120_000 })).stdout

test('volumes: a volume written by one sandbox is read by the next; mounted, it cannot be destroyed', async () => {
  const v = await Volume.create(freshName())
  try {
    const a = await Sandbox.create(TEMPLATE, { timeoutMs: 180_000, volumeMounts: { '/data': v } })
    try {
      await sh(a, 'mkdir -p /data/js && echo from-a > /data/js/a.txt')
      await a.files.write('/data/js/sdk.txt', 'via-envd')
      const info = await Sandbox.getInfo(a.sandboxId)
      assert.deepEqual(info.volumeMounts ?? (await spaceApi('GET', `/v1/sandboxes/${a.sandboxId}`)).body.volume_mounts.map(
        (m) => ({ name: m.name, path: m.path })), [{ name: v.name, path: '/data' }])
    } finally {
      await a.kill()
    }
    assert.equal(await v.readFile('/js/a.txt'), 'from-a\n')
    const b = await Sandbox.create(TEMPLATE, { timeoutMs: 180_000, volumeMounts: { '/mnt/v': v.name } })
    try {
      assert.equal(await sh(b, 'cat /mnt/v/js/a.txt'), 'from-a\n')
      assert.equal(await b.files.read('/mnt/v/js/sdk.txt'), 'via-envd')
      await assert.rejects(Volume.destroy(v.volumeId), new RegExp(`mounted in 1 sandbox \\(${b.sandboxId}`))
    } finally {
      await b.kill()
    }
  } finally {
    assert.equal(await Volume.destroy(v.volumeId), true)
  }
})

test('volumes: the quota is ENOSPC inside the guest', async () => {
  const name = freshName()
  const created = await spaceApi('POST', '/v1/volumes', { name, quota: 1024 * 1024 })
  assert.equal(created.status, 201)
  const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 180_000, volumeMounts: { '/q': name } })
  try {
    const out = await sh(sbx, 'dd if=/dev/zero of=/q/fill bs=65536 count=32 2>&1; echo rc=$?')
    assert.match(out, /No space left on device/)
    assert.match(out, /rc=1/)
    assert.ok((await spaceApi('GET', `/v1/volumes/${name}`)).body.usage <= 1024 * 1024)
  } finally {
    await sbx.kill()
    await Volume.destroy(created.body.id)
  }
})

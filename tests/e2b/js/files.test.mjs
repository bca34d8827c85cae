// SPDX-License-Identifier: Apache-2.0
// sbx.files through the JS SDK: chunked multipart uploads, octet-stream uploads, reads in every format,
// listing, info, make_dir twice, rename, remove, WatchDir's stream, users, and signed URLs.
import test from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { FileType, FilesystemEventType, NotFoundError, Sandbox } from 'e2b'
import { TEMPLATE } from './helpers.mjs'

test('sbx.files', async (t) => {
  const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 })
  t.after(() => sbx.kill())

  await t.test('write and read in every format', async () => {
    const info = await sbx.files.write('/home/user/js/a.txt', 'hello from js')
    // newer SDKs add metadata: undefined to what they return
    assert.deepEqual({ name: info.name, type: info.type, path: info.path },
      { name: 'a.txt', type: 'file', path: '/home/user/js/a.txt' })
    assert.equal(await sbx.files.read('/home/user/js/a.txt'), 'hello from js')
    const data = randomBytes(200_000)
    await sbx.files.write('js/b.bin', new Blob([data]))
    const bytes = await sbx.files.read('js/b.bin', { format: 'bytes' })
    assert.ok(Buffer.from(bytes).equals(data))
    const blob = await sbx.files.read('js/b.bin', { format: 'blob' })
    assert.equal(blob.size, data.length)
    const chunks = []
    for await (const c of await sbx.files.read('js/b.bin', { format: 'stream' })) chunks.push(Buffer.from(c))
    assert.ok(Buffer.concat(chunks).equals(data))
    await sbx.files.write('js/empty', '')
    assert.equal(await sbx.files.read('js/empty'), '')
  })

  await t.test('octet-stream and many files', async () => {
    const info = await sbx.files.write('js/o.txt', 'octet', { useOctetStream: true })
    assert.equal(info.path, '/home/user/js/o.txt')
    assert.equal(await sbx.files.read('js/o.txt'), 'octet')
    const files = Array.from({ length: 10 }, (_, i) => ({ path: `/home/user/js/many/${i}`, data: `n${i}` }))
    const infos = await sbx.files.write(files)
    assert.deepEqual(infos.map((i) => i.path), files.map((f) => f.path))
    assert.equal(await sbx.files.read('/home/user/js/many/9'), 'n9')
  })

  await t.test('gzip uploads', async () => {
    const data = 'gz'.repeat(100000)
    await sbx.files.write('js/gz/m.txt', data, { gzip: true })
    await sbx.files.write('js/gz/o.txt', data, { gzip: true, useOctetStream: true })
    assert.equal(await sbx.files.read('js/gz/m.txt'), data)
    assert.equal(await sbx.files.read('js/gz/o.txt'), data)
  })

  await t.test('a 20 MiB file intact', async () => {
    const data = randomBytes(20 * 1024 * 1024)
    await sbx.files.write('/home/user/js/big', new Blob([data]))
    const back = Buffer.from(await sbx.files.read('/home/user/js/big', { format: 'bytes' }))
    assert.equal(createHash('sha256').update(back).digest('hex'), createHash('sha256').update(data).digest('hex'))
  })

  await t.test('a written file and one made in the sandbox have a modifiedTime of now', async () => {
    await sbx.files.write('/home/user/js/mt/written.txt', 'now')
    await sbx.commands.run('echo made > /home/user/js/mt/made.txt')
    const now = Date.now()
    const info = await sbx.files.getInfo('/home/user/js/mt/written.txt')
    assert.ok(Math.abs(info.modifiedTime.getTime() - now) < 60_000, String(info.modifiedTime))
    for (const e of await sbx.files.list('/home/user/js/mt'))
      assert.ok(Math.abs(e.modifiedTime.getTime() - now) < 60_000, `${e.name}: ${e.modifiedTime}`)
  })

  await t.test('list, info, exists, makeDir, rename, remove', async () => {
    await sbx.files.makeDir('/home/user/js/l/d1/d2')
    await sbx.files.write('/home/user/js/l/f', '12')
    assert.deepEqual((await sbx.files.list('/home/user/js/l')).map((e) => e.name).sort(), ['d1', 'f'])
    const deep = await sbx.files.list('/home/user/js/l', { depth: 2 })
    assert.deepEqual(deep.map((e) => e.path).sort(),
      ['/home/user/js/l/d1', '/home/user/js/l/d1/d2', '/home/user/js/l/f'])
    const f = await sbx.files.getInfo('/home/user/js/l/f')
    assert.equal(f.type, FileType.FILE)
    assert.equal(f.size, 2)
    assert.equal(f.permissions, '-rw-r--r--')
    assert.equal(f.owner, 'user')
    assert.ok(f.modifiedTime instanceof Date)
    assert.equal(await sbx.files.exists('/home/user/js/l/f'), true)
    assert.equal(await sbx.files.exists('/home/user/js/l/nope'), false)
    assert.equal(await sbx.files.makeDir('/home/user/js/l/d1'), false)
    const moved = await sbx.files.rename('/home/user/js/l/f', '/home/user/js/l/g')
    assert.equal(moved.path, '/home/user/js/l/g')
    await sbx.files.remove('/home/user/js/l')
    assert.equal(await sbx.files.exists('/home/user/js/l'), false)
    await assert.rejects(sbx.files.read('/home/user/js/l/g'), NotFoundError)
  })

  await t.test('users', async () => {
    await assert.rejects(sbx.files.write('/root/nope', 'x'))
    await sbx.files.write('/root/yes', 'x', { user: 'root' })
    assert.equal((await sbx.files.getInfo('/root/yes', { user: 'root' })).owner, 'root')
    assert.equal((await sbx.files.write('rel.txt', 'r')).path, '/home/user/rel.txt')
  })

  await t.test('watchDir streams events', async () => {
    await sbx.files.makeDir('/home/user/js/w')
    const seen = []
    let done
    const got = new Promise((resolve) => { done = resolve })
    const h = await sbx.files.watchDir('/home/user/js/w', (e) => {
      seen.push(e)
      if (e.name === 'x.txt' && e.type === FilesystemEventType.WRITE) done()
    })
    await sbx.files.write('/home/user/js/w/x.txt', 'watched')
    await Promise.race([got, new Promise((_, rej) => setTimeout(() => rej(new Error('no event')), 10_000))])
    assert.ok(seen.some((e) => e.name === 'x.txt' && e.type === FilesystemEventType.CREATE))
    await h.stop()
  })

  // issue 26: inotify in the guest, armed before watchDir returns
  const waitFor = async (seen, pred, ms = 20_000) => {
    const end = Date.now() + ms
    while (Date.now() < end && !pred(seen)) await new Promise((r) => setTimeout(r, 100))
    return pred(seen)
  }
  const has = (seen, name, type) => seen.some((e) => e.name === name && e.type === type)

  await t.test('watchDir sees a write made right after it returns, renames and removes', async () => {
    await sbx.files.makeDir('/home/user/js/wn')
    const seen = []
    const h = await sbx.files.watchDir('/home/user/js/wn', (e) => seen.push(e))
    await sbx.commands.run('echo one > /home/user/js/wn/a.txt && mv /home/user/js/wn/a.txt /home/user/js/wn/b.txt && rm /home/user/js/wn/b.txt')
    assert.ok(await waitFor(seen, (s) => has(s, 'b.txt', FilesystemEventType.REMOVE)), JSON.stringify(seen))
    assert.deepEqual(seen.map((e) => [e.name, e.type]), [
      ['a.txt', FilesystemEventType.CREATE], ['a.txt', FilesystemEventType.WRITE],
      ['a.txt', FilesystemEventType.RENAME], ['b.txt', FilesystemEventType.CREATE],
      ['b.txt', FilesystemEventType.REMOVE]])
    await h.stop()
  })

  await t.test('watchDir recursive follows directories made after it', async () => {
    await sbx.files.makeDir('/home/user/js/wr')
    const seen = []
    const h = await sbx.files.watchDir('/home/user/js/wr', (e) => seen.push(e), { recursive: true })
    await sbx.commands.run('mkdir -p /home/user/js/wr/n/d && echo x > /home/user/js/wr/n/d/f')
    assert.ok(await waitFor(seen, (s) => has(s, 'n/d/f', FilesystemEventType.CREATE)), JSON.stringify(seen))
    assert.ok(has(seen, 'n', FilesystemEventType.CREATE) && has(seen, 'n/d', FilesystemEventType.CREATE))
    await h.stop()
  })

  await t.test('signed URLs', async () => {
    await sbx.files.write('/home/user/js/dl.txt', 'signed')
    const url = await sbx.downloadUrl('/home/user/js/dl.txt')
    assert.match(url, /signature=v1_/)
    const r = await fetch(url)
    assert.equal(r.status, 200)
    assert.equal(await r.text(), 'signed')
    const up = await sbx.uploadUrl('/home/user/js/up.txt')
    const form = new FormData()
    form.append('file', new Blob(['via url']), 'up.txt')
    assert.equal((await fetch(up, { method: 'POST', body: form })).status, 200)
    assert.equal(await sbx.files.read('/home/user/js/up.txt'), 'via url')
  })
})

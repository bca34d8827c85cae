// SPDX-License-Identifier: Apache-2.0
// E2B's Secret API (issue 22) from the JS SDK: create, getInfo, update as a new version, list in pages,
// exists, destroy; values never come back. The pinned SDK has no Secret: t29 leaves this file to t45.
import test from 'node:test'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { Secret } from 'e2b'

test('secrets: create, versions, pages, destroy', async () => {
  const name = `js-${randomUUID().slice(0, 12)}`
  const value = `sk-js-${randomUUID()}`
  const info = await Secret.create(name, value, { metadata: { owner: 'js' } })
  try {
    assert.equal(info.name, name)
    assert.equal(info.version, 1)
    assert.deepEqual(info.metadata, { owner: 'js' })
    assert.match(info.secretId, /^sec-[0-9a-f]{16}$/)
    assert.equal((await Secret.getInfo(info.secretId)).name, name)
    assert.equal(await Secret.exists(name), true)
    await assert.rejects(Secret.create(name, value))
    const v2 = await Secret.update(name, `${value}-2`)
    assert.equal(v2.version, 2)
    assert.deepEqual(v2.metadata, { owner: 'js' })
    assert.ok(!JSON.stringify(await Secret.getInfo(name)).includes(value))

    const seen = []
    const pages = Secret.list({ limit: 1 })
    while (pages.hasNext) seen.push(...(await pages.nextItems()).map((s) => s.name))
    assert.ok(seen.includes(name))
  } finally {
    assert.equal(await Secret.destroy(name), true)
  }
  assert.equal(await Secret.destroy(name), false)
  assert.equal(await Secret.exists(name), false)
  await assert.rejects(Secret.create(`${name}-bad`, 'a\nb'), /line break/)
})

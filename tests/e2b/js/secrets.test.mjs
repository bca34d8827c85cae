// SPDX-License-Identifier: Apache-2.0
// E2B's Secret API (issue 22) from the JS SDK: create, getInfo, update as a new version, list in pages,
// exists, destroy; values never come back. And network.rules whose header transforms carry Secret.fill
// placeholders, on plain HTTP and HTTPS to servers of the test's on a loopback address the daemon's
// egress_hosts_file names (t29 sets SPACE_E2B_NET_*, and SPACE_E2B_TLS_DIR with the HTTPS server's pair, whose
// CA the daemon's egress_tls_ca trusts). The pinned SDK has no Secret: t29 leaves this file to t45.
import test from 'node:test'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import path from 'node:path'
import { Sandbox, Secret } from 'e2b'
import { TEMPLATE, e2bApi } from './helpers.mjs'

const NET_HOST = process.env.SPACE_E2B_NET_HOST
const NET_ADDR = process.env.SPACE_E2B_NET_ADDR
const OTHER_HOST = process.env.SPACE_E2B_NET_OTHER_HOST
const CLOSED_HOST = process.env.SPACE_E2B_NET_CLOSED_HOST
const CLOSED_ADDR = process.env.SPACE_E2B_NET_CLOSED_ADDR
const noNet = !(NET_HOST && NET_ADDR && OTHER_HOST && CLOSED_HOST && CLOSED_ADDR) &&
  'no SPACE_E2B_NET_* names: the daemon maps no name to a test server (t29 does)'

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

test('network.rules: the secret goes in on the way to its host only', { skip: noNet }, async () => {
  const seen = []
  const record = (req, res) => { seen.push(req.headers); res.end('recorded\n') }
  const servers = [http.createServer(record), http.createServer(record)]
  await new Promise((resolve) => servers[0].listen(0, NET_ADDR, resolve))
  const port = servers[0].address().port
  await new Promise((resolve) => servers[1].listen(port, CLOSED_ADDR, resolve))
  const name = `jr-${randomUUID().slice(0, 10)}`
  const value = `sk-jsrule-${randomUUID()}`
  await Secret.create(name, value)
  const ph = Secret.fill(name)
  let s
  const get = async (host, ...headers) => {
    const before = seen.length
    const args = headers.map((h) => `-H '${h}'`).join(' ')
    const out = (await s.commands.run(`curl -sS --max-time 20 ${args} http://${host}:${port}/ 2>&1 || echo CURL-FAILED`)).stdout
    return { out, req: seen.length > before ? seen[seen.length - 1] : null }
  }
  try {
    s = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000, network: {
      allowOut: [NET_HOST, OTHER_HOST, NET_ADDR],
      rules: {
        [NET_HOST]: [{ transform: { headers: { Authorization: `Bearer ${ph}` } } }],
        [CLOSED_HOST]: [{ transform: { headers: { 'X-Closed': ph } } }],
      },
    } })
    let { out, req } = await get(NET_HOST, 'Authorization: forged')
    assert.match(out, /recorded/)
    assert.equal(req.authorization, `Bearer ${value}`)
    ;({ req } = await get(OTHER_HOST, `X-Key: ${ph}`))
    assert.equal(req['x-key'], ph, 'the placeholder leaves as it is for a host with no rule')
    assert.equal(req.authorization, undefined)
    ;({ out, req } = await get(CLOSED_HOST))
    assert.match(out, /no allow rule names it \(no_rule\)/, 'a rule opens nothing allowOut does not')
    assert.equal(req, null)
    const guest = (await s.commands.run("env; for p in /proc/[0-9]*; do tr '\\0' '\\n' <$p/environ 2>/dev/null; done; echo done")).stdout
    assert.ok(guest.endsWith('done\n') && !guest.includes(value), 'the value is in the guest')
    const info = await e2bApi('GET', `/sandboxes/${s.sandboxId}`)
    assert.equal(info.body.network.rules[NET_HOST][0].transform.headers.Authorization, `Bearer ${ph}`)
    assert.ok(!JSON.stringify(info.body).includes(value))
    await Secret.update(name, `${value}-2`)
    ;({ req } = await get(NET_HOST))
    assert.equal(req.authorization, `Bearer ${value}-2`, 'a rotation is seen by the next request')
    await s.updateNetwork({ allowOut: [NET_HOST, NET_ADDR], rules: { [NET_HOST]: [{ transform: { headers: { 'X-New': ph } } }] } })
    ;({ req } = await get(NET_HOST, 'Authorization: mine'))
    assert.equal(req['x-new'], `${value}-2`)
    assert.equal(req.authorization, 'mine')
  } finally {
    if (s) await s.kill()
    await Secret.destroy(name)
    for (const srv of servers) srv.close()
  }
})

const TLS_DIR = process.env.SPACE_E2B_TLS_DIR
test('network.rules over HTTPS: the gateway ends TLS to the ruled host and adds the header',
  { skip: (noNet || !TLS_DIR) && 'no SPACE_E2B_NET_* or SPACE_E2B_TLS_DIR (t29 sets them)' }, async () => {
    const seen = []
    const srv = https.createServer({ cert: fs.readFileSync(path.join(TLS_DIR, 'srv.pem')),
      key: fs.readFileSync(path.join(TLS_DIR, 'srv.key')) }, (req, res) => { seen.push(req.headers); res.end('recorded\n') })
    await new Promise((resolve) => srv.listen(0, NET_ADDR, resolve))
    const port = srv.address().port
    const name = `jt-${randomUUID().slice(0, 10)}`
    const value = `sk-jstls-${randomUUID()}`
    await Secret.create(name, value)
    let s
    try {
      s = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000, network: {
        allowOut: [NET_HOST, OTHER_HOST, NET_ADDR],
        rules: { [NET_HOST]: [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(name)}` } } }] },
      } })
      const out = (await s.commands.run(`curl -sS --max-time 20 https://${NET_HOST}:${port}/ 2>&1 || echo CURL-FAILED`)).stdout
      assert.match(out, /recorded/, 'the sandbox trusts the certificate the gateway shows')
      assert.equal(seen.at(-1).authorization, `Bearer ${value}`)
      const other = (await s.commands.run(`curl -sS --max-time 20 https://${OTHER_HOST}:${port}/ 2>&1 || echo CURL-FAILED`)).stdout
      assert.match(other, /CURL-FAILED/, 'a name with no rule is not intercepted: the server\'s own CA is not the sandbox\'s')
      assert.equal(seen.length, 1)
    } finally {
      if (s) await s.kill()
      await Secret.destroy(name)
      srv.close()
    }
  })

test('network.rules: an unknown secret is refused, naming it', async () => {
  const missing = `nope-${randomUUID().slice(0, 8)}`
  await assert.rejects(Sandbox.create(TEMPLATE, { timeoutMs: 60_000, network: {
    rules: { 'api.example.com': [{ transform: { headers: { Authorization: Secret.fill(missing) } } }] } } }),
  new RegExp(missing))
  const { status, body } = await e2bApi('POST', '/sandboxes', { templateID: TEMPLATE, network: {
    rules: { 'api.example.com': [{ transform: { headers: { 'X-Key': `k=${Secret.fill(missing)}` } } }] } } })
  assert.equal(status, 404)
  assert.match(body.message, new RegExp(missing))
  const bad = await e2bApi('POST', '/sandboxes', { templateID: TEMPLATE, network: { rules: { '*.example.com': [{}] } } })
  assert.equal(bad.status, 400)
  assert.match(bad.body.message, /network\.rules\["\*\.example\.com"\]: wildcards/)
})

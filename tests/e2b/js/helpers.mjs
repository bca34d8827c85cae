// SPDX-License-Identifier: Apache-2.0
// What the JS suite shares: the daemon's native API over its unix socket, to look behind the SDK, and the E2B
// facade's API by hand (with the suite's key), for what the SDK does not send.
import http from 'node:http'

export const TEMPLATE = process.env.SPACE_E2B_TEMPLATE || 'seed'

export function spaceApi(method, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: process.env.SPACE_TEST_SOCKET, path, method,
      headers: { 'Content-Type': 'application/json' } }, (res) => {
      let data = ''
      res.on('data', (c) => { data += c })
      res.on('end', () => resolve({ status: res.statusCode, body: data ? JSON.parse(data) : null }))
    })
    req.on('error', reject)
    if (body !== undefined) req.write(JSON.stringify(body))
    req.end()
  })
}

export async function e2bApi(method, path, body) {
  const base = process.env.E2B_API_URL || process.env.SPACE_TEST_API_URL
  const res = await fetch(base + path, { method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' } })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null }
}

// SPDX-License-Identifier: Apache-2.0
// What the JS suite shares: the daemon's native API over its unix socket, to look behind the SDK.
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

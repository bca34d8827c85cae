// SPDX-License-Identifier: Apache-2.0
// The first thing a user tries: create from seed, run a command (also with sudo, as on E2B's base), read its
// output, kill.
import test from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

test('create, run, kill', async () => {
  const sbx = await Sandbox.create('seed', { timeoutMs: 120_000 })
  try {
    const r = await sbx.commands.run('echo hello from $(whoami)')
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'hello from user\n')
    // seed stands for E2B's base, where the default user may sudo without a password
    const su = await sbx.commands.run('sudo -n whoami && sudo -n install -d /opt/by-sudo && stat -c %U /opt/by-sudo')
    assert.deepEqual([su.exitCode, su.stdout], [0, 'root\nroot\n'])
  } finally {
    await sbx.kill()   // the instance method resolves to nothing in 2.20.1; Sandbox.kill(id) says true or false
    assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  }
})

// SPDX-License-Identifier: Apache-2.0
// E2B's code interpreter on space through the unmodified JS SDK (@e2b/code-interpreter), pointed at the
// daemon with E2B_API_URL and E2B_SANDBOX_URL: results, streaming, errors, charts, contexts, languages,
// per-run environment, a timeout followed by a working kernel, isolation between sandboxes.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

let sbx
before(async () => { sbx = await Sandbox.create({ timeoutMs: 900_000 }) })
after(async () => { await sbx?.kill() })

test('the last expression is the main result', async () => {
  const ex = await sbx.runCode('x = 40\nx + 2')
  assert.equal(ex.error, undefined)
  assert.equal(ex.text, '42')
  assert.deepEqual(ex.results.map((r) => r.isMainResult), [true])
})

test('stdout streams while the code runs', async () => {
  const seen = []
  const t0 = Date.now()
  await sbx.runCode("import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')",
    { onStdout: (m) => seen.push([Date.now() - t0, m.line]) })
  const total = Date.now() - t0
  assert.deepEqual(seen.map((s) => s[1]), ['first\n', 'second\n'])
  assert.ok(seen[0][0] < total - 1500, `the first line came at ${seen[0][0]} ms of ${total} ms: not streamed`)
})

test('an error has its name, value and traceback', async () => {
  const ex = await sbx.runCode("raise KeyError('missing')")
  assert.equal(ex.error.name, 'KeyError')
  assert.match(ex.error.value, /missing/)
  assert.match(ex.error.traceback, /KeyError/)
})

test('a matplotlib figure is a PNG and a chart', async () => {
  const ex = await sbx.runCode("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 2, 1])\nplt.title('Down')\nplt.show()")
  const r = ex.results.find((x) => x.png)
  assert.ok(r, 'no PNG result')
  assert.equal(Buffer.from(r.png, 'base64').subarray(0, 4).toString('latin1'), '\x89PNG')
  assert.equal(r.chart.type, 'line')
  assert.equal(r.chart.title, 'Down')
})

test('a DataFrame is HTML and data', async () => {
  const ex = await sbx.runCode("import pandas as pd\npd.DataFrame({'n': [1, 2, 3]})")
  assert.match(ex.results[0].html, /<table/)
  assert.ok(ex.results[0].data, 'no data')
})

test('contexts: own state and working directory', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
  assert.equal((await sbx.runCode('import os\nos.getcwd()', { context: ctx })).text, '/tmp')
  await sbx.runCode('only_here = 1', { context: ctx })
  const ex = await sbx.runCode('only_here')
  assert.equal(ex.error?.name, 'NameError')
  const ids = (await sbx.listCodeContexts()).map((c) => c.id)
  assert.ok(ids.includes(ctx.id))
  await sbx.removeCodeContext(ctx.id)
})

test('javascript keeps its state and gives the last value', async () => {
  assert.equal((await sbx.runCode('let k = 6\nk * 7', { language: 'javascript' })).text, '42')
  assert.equal((await sbx.runCode('k + 1', { language: 'js' })).text, '7')
})

test('bash keeps its state', async () => {
  await sbx.runCode('WORD=kept', { language: 'bash' })
  const ex = await sbx.runCode('echo $WORD', { language: 'bash' })
  assert.deepEqual(ex.logs.stdout, ['kept\n'])
})

test('an unknown language is refused', async () => {
  // the JS SDK shows only the status of a 400 (its extractError leaves the body out)
  await assert.rejects(sbx.runCode('1', { language: 'cobol' }), /400/)
})

test('env vars apply to one run', async () => {
  assert.equal((await sbx.runCode("import os\nos.environ.get('JS_RUN')", { envs: { JS_RUN: 'y' } })).text, 'y')
  assert.equal((await sbx.runCode("import os\nos.environ.get('JS_RUN')")).text, undefined)
})

test('a timeout interrupts the run and the kernel goes on', async () => {
  await assert.rejects(sbx.runCode('import time\ntime.sleep(60)', { timeoutMs: 3000 }))
  const ex = await sbx.runCode('3 * 3')
  assert.equal(ex.text, '9')
})

test('two sandboxes do not share a kernel', async () => {
  await sbx.runCode("mine = 'first'")
  const other = await Sandbox.create({ timeoutMs: 300_000 })
  try {
    assert.equal((await other.runCode('mine')).error?.name, 'NameError')
  } finally {
    await other.kill()
  }
})

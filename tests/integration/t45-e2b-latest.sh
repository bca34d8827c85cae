#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The E2B facade with the newest E2B SDKs (issue 26): t29 again, with SPACE_E2B_PY=latest SPACE_E2B_JS=latest,
# but only the tests of what the newest SDKs add (fork, network update; the list's filters and order, snapshot
# names, symlinks, pause modes) and the smoke tests. Why not all of
# t29's suites: they are the same requests, and the suite must stay short; the pinned SDKs run everything in
# t29, and the whole suites with the newest SDKs are a `SPACE_E2B_PY=latest SPACE_E2B_JS=latest` run of t29.
export SPACE_E2B_PY=${SPACE_E2B_PY:-latest} SPACE_E2B_JS=${SPACE_E2B_JS:-latest}
export SPACE_E2B_PY_ARGS=${SPACE_E2B_PY_ARGS:-test_fork_network.py test_newest.py test_secrets.py test_smoke.py test_volumes.py}
export SPACE_E2B_JS_TESTS=${SPACE_E2B_JS_TESTS:-./fork-network.test.mjs ./newest.test.mjs ./secrets.test.mjs ./smoke.test.mjs ./volumes.test.mjs}
exec "$(dirname "$0")/t29-e2b.sh" "$@"

# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the E2B SDK suite: the SDK finds the daemon through E2B_API_KEY, E2B_API_URL and
E2B_SANDBOX_URL (set by tests/integration/t29-e2b.sh), or in its domain mode through E2B_DOMAIN and
E2B_API_KEY over TLS, exactly as a user's program would."""
import os
import sys

import pytest
from e2b import Sandbox

TEMPLATE = os.environ.get("SPACE_E2B_TEMPLATE", "seed")


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from spaceapi import UnixHTTPConnection, space_api  # noqa: E402,F401 - the suites import them from here


@pytest.fixture(scope="module")
def sbx():
    """One sandbox for a module's tests (they must not depend on each other's leftovers)."""
    s = Sandbox.create(TEMPLATE, timeout=900)
    yield s
    s.kill()

# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the code interpreter suite (tests/integration/t44-code-interpreter.sh): the unmodified
e2b-code-interpreter SDK finds the daemon through the environment only, either E2B_API_URL and E2B_SANDBOX_URL
or E2B_DOMAIN with TLS, as a user's program would."""
import os
import sys

import pytest
from e2b_code_interpreter import Sandbox


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from spaceapi import UnixHTTPConnection, space_api  # noqa: E402,F401 - the suites import them from here


@pytest.fixture(scope="module")
def sbx():
    """One sandbox from the SDK's default template (code-interpreter-v1) for a module's tests."""
    s = Sandbox.create(timeout=900)
    yield s
    s.kill()

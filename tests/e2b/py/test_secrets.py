# SPDX-License-Identifier: Apache-2.0
"""E2B's Secret API (e2b 2.43 and later; issue 22) on the daemon's secrets: create, get_info by name and id,
update as a new version (metadata replaced or kept), list in pages, exists, destroy. Values are write-only: no
answer holds one. Bad values and names get errors that say why. The pinned SDKs have no Secret: t29 leaves
this file to t45."""
import uuid

import pytest
from e2b import Secret
from e2b.exceptions import SecretException, SecretNotFoundException

from test_sandboxes import api


def test_create_get_update_destroy():
    name = f"t-{uuid.uuid4().hex[:12]}"
    value = f"sk-py-{uuid.uuid4().hex}"
    info = Secret.create(name, value, metadata={"owner": "py"})
    try:
        assert info.name == name and info.version == 1 and info.metadata == {"owner": "py"}
        assert info.secret_id.startswith("sec-")
        assert info.created_at == info.updated_at
        assert Secret.get_info(name).secret_id == info.secret_id
        assert Secret.get_info(info.secret_id).name == name
        assert Secret.exists(name) and not Secret.exists(name + "-no")

        # a second create of the name is refused; an update is a new version
        with pytest.raises(SecretException):
            Secret.create(name, value)
        v2 = Secret.update(name, value + "-2")
        assert v2.version == 2 and v2.metadata == {"owner": "py"}, "metadata left out is kept"
        v3 = Secret.update(info.secret_id, value + "-3", metadata={"rotated": "yes"})
        assert v3.version == 3 and v3.metadata == {"rotated": "yes"}, "metadata given replaces it"

        # the value never comes back, on any read
        for path in (f"/secrets/{name}", f"/secrets/{info.secret_id}", "/secrets"):
            status, body = api("GET", path)
            assert status == 200
            assert value not in str(body), path
    finally:
        assert Secret.destroy(name) is True
    assert Secret.destroy(name) is False, "a second destroy finds nothing"
    with pytest.raises(SecretNotFoundException):
        Secret.get_info(name)
    with pytest.raises(SecretNotFoundException):
        Secret.update(name, "x")


def test_list_pages():
    tag = uuid.uuid4().hex[:8]
    names = [f"p{i}-{tag}" for i in range(3)]
    for n in names:
        Secret.create(n, "v")
    try:
        seen, pages = [], 0
        paginator = Secret.list(limit=2)
        while paginator.has_next:
            seen += [s.name for s in paginator.next_items()]
            pages += 1
        assert [n for n in seen if n.endswith(tag)] == names, "oldest first, each once"
        assert pages >= 2
    finally:
        for n in names:
            Secret.destroy(n)


def test_bad_input():
    with pytest.raises(SecretException, match="line break"):
        Secret.create(f"b-{uuid.uuid4().hex[:8]}", "a\r\nX-Injected: 1")
    with pytest.raises(SecretException, match="not a secret name"):
        Secret.create("-dash-first", "v")
    status, body = api("POST", "/secrets", {"name": "x", "value": "v", "extra": 1})
    assert status == 400 and "extra" in body["message"]
    status, _ = api("GET", "/secrets?nextToken=sec-ffffffffffffffff")
    assert status == 400
    assert Secret.fill("openai") == "${e2b.secrets.openai}"

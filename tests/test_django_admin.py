"""The read-only admin page of ``fencing.django.fence``'s fences, through Django's test
client on the test project (tests/django_project.py): each fence's holder, token and
lease left, by the database's clock; nothing can be added, changed or deleted."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

PAGE = "/admin/fencing/lease/"


@pytest.fixture
def client(django_dbs: Any) -> Any:
    """A test client logged in as a superuser."""
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_superuser(f"op-{uuid.uuid4().hex[:8]}", "op@example.com", None)
    logged_in = Client()
    logged_in.force_login(user)
    return logged_in


def row_of(page: str, name: str) -> list[str]:
    """The cells of the changelist's row for ``name``, as text."""
    row = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*?{re.escape(name)}.*?</tr>", page, re.S)
    assert row is not None, f"no row for {name}"
    return [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(0), re.S)
    ]


def test_the_page_lists_each_fence_with_holder_token_and_lease_left(client: Any) -> None:
    import fencing.django as fd

    prefix = f"admin-{uuid.uuid4().hex[:8]}"
    held = fd.fence(f"{prefix}:held", 30)
    token = held.acquire(timeout=0)
    freed = fd.fence(f"{prefix}:freed", 30)
    freed.release(last := freed.acquire(timeout=0))
    page = client.get(PAGE, {"q": prefix})
    assert page.status_code == 200
    text = page.content.decode()
    assert isinstance(held.issuer, fd.DjangoIssuer)
    holder = held.issuer.status(f"{prefix}:held").holder
    name, shown_holder, shown_token, left = row_of(text, f"{prefix}:held")
    assert (name, shown_holder, shown_token) == (f"{prefix}:held", holder, str(int(token)))
    assert 0 < float(left.removesuffix(" s")) <= 30
    assert row_of(text, f"{prefix}:freed")[2:] == [str(int(last)), "free"]
    held.release(token)


def test_the_page_is_read_only(client: Any) -> None:
    import fencing.django as fd

    name = f"admin-{uuid.uuid4().hex[:8]}"
    fence = fd.fence(name, 30)
    token = fence.acquire(timeout=0)
    assert client.get(f"{PAGE}add/").status_code == 403
    one = f"{PAGE}{name}/"
    assert client.post(f"{one}delete/", {"post": "yes"}).status_code == 403
    assert client.post(f"{one}change/", {"holder": "x", "token": "1"}).status_code == 403
    assert isinstance(fence.issuer, fd.DjangoIssuer)
    assert fence.issuer.status(name).token == token  # untouched
    view = client.get(f"{one}change/")  # the view permission: a read-only form
    assert view.status_code == 200 and b"Save" not in view.content
    fence.release(token)

"""Check ids (store.ids.new_check_id): the text RFC 4648's base32 gives for the 15 bytes
(``created`` then 80 random bits), lowercased, and ``check_created`` reads ``created``
back."""

from __future__ import annotations

import base64
import os
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from store.ids import check_created, new_check_id


@given(
    created=st.integers(min_value=0, max_value=2**40 - 1), noise=st.binary(min_size=10, max_size=10)
)
def test_a_check_id_is_the_base32_of_its_bytes(created: int, noise: bytes) -> None:
    expected = "chk_" + base64.b32encode(created.to_bytes(5, "big") + noise).decode().lower()
    with mock.patch.object(os, "urandom", lambda size: noise[:size]):
        made = new_check_id(created)
    assert made == expected
    assert check_created(made) == created


def test_check_ids_differ() -> None:
    made = {new_check_id(1_790_000_000) for _ in range(1000)}
    assert len(made) == 1000

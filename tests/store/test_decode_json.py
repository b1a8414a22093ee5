"""``store.database.decode_json``, the pool's decoder of ``json`` and ``jsonb``: the values
and errors of ``json.loads``, on what Postgres sends and on anything else."""

from __future__ import annotations

import json
import math

import pytest

from store.database import decode_json

SAMPLES = [
    "{}",
    "[]",
    '{"env": "prod", "team": "core"}',
    '{"a": [1, 2.5, -3e-05, 1e+16, true, false, null], "b": {"c": "\\u00e9\\n\\ud83d\\ude00"}}',
    '"text"',
    "12345678901234567890123",
    "null",
    '  {"written": "as sent"}  ',  # a json column keeps its whitespace
    '{"k": 1}\n',
    '{"dup": 1, "dup": 2}',
    "NaN",
    "-Infinity",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_decode_json_gives_what_json_loads_gives(text: str) -> None:
    decoded, expected = decode_json(text), json.loads(text)
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(decoded)
    else:
        assert decoded == expected and type(decoded) is type(expected)


@pytest.mark.parametrize("text", ["", " ", "{", '{"a": 1} x', "[1,]", "{'a': 1}", "1 2"])
def test_decode_json_refuses_what_json_loads_refuses(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        decode_json(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)

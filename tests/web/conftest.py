"""API tests use the fixtures of tests/conftest.py (``api``, ``api_for``, ``client``,
``make_token``, ``deps``, ``engine``); ``Api`` and ``SECRET`` live in tests/api.py."""

from tests.api import SECRET, Api, MakeToken

__all__ = ["SECRET", "Api", "MakeToken"]

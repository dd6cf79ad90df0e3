"""Fixtures for the TodoSync black-box integration suite (pytest + requests).

The suite runs against a private stack brought up by scripts/test.sh; see tsapi.py for the
environment variables.  Every test makes its own user(s) (fresh e-mail addresses), so tests are
independent of each other and of their order, except test_zz_lifecycle.py, which stops and
starts the database and therefore runs last (pytest runs modules alphabetically).

Fixtures
  base_url, api_url, https_url   the stack's addresses
  client                         an Api for a freshly registered user (function scope)
  other_client                   a second, unrelated fresh user (function scope)
  make_client                    factory: make_client() -> Api for another fresh user
  shared_client                  one user for the whole session; only for tests that create
                                 nothing they later list (validation / 404 / 401 checks), to keep
                                 the registration rate well under nginx's auth rate limit
  raw                            tsapi.raw_request (hand-built HTTP/1.1 over a socket)
  stack_cmd                      run `$TODOSYNC_TEST_STACK <args>` (skips when unset)
  db                             run SQL through the mariadb CLI (skips when unset)
"""

from __future__ import annotations

import shutil

import pytest

import tsapi


@pytest.fixture(scope="session")
def base_url() -> str:
    return tsapi.BASE_URL


@pytest.fixture(scope="session")
def api_url() -> str:
    return tsapi.API_URL


@pytest.fixture(scope="session")
def https_url() -> str:
    return tsapi.HTTPS_URL


@pytest.fixture
def make_client():
    made: list[tsapi.Api] = []

    def _make(email: str | None = None, password: str | None = None) -> tsapi.Api:
        api = tsapi.new_user(email, password)
        made.append(api)
        return api

    yield _make
    for api in made:
        api.session.close()


@pytest.fixture
def client(make_client) -> tsapi.Api:
    return make_client()


@pytest.fixture
def other_client(make_client) -> tsapi.Api:
    return make_client()


@pytest.fixture(scope="session")
def shared_client() -> tsapi.Api:
    api = tsapi.new_user()
    yield api
    api.session.close()


@pytest.fixture
def raw():
    return tsapi.raw_request


@pytest.fixture
def stack_cmd():
    if not tsapi.STACK:
        pytest.skip("TODOSYNC_TEST_STACK not set: stack control unavailable")
    return tsapi.stack


@pytest.fixture
def db():
    if not tsapi.DB_SOCKET:
        pytest.skip("TODOSYNC_TEST_DB_SOCKET not set")
    if shutil.which("mariadb") is None:
        pytest.skip("mariadb CLI not installed")
    return tsapi.db_query

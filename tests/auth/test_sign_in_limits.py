"""SignInLimits (gitreg/auth/pending.py) under concurrency: the per-address
allowance holds for sign-ins started at the same moment, not only in turn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, cast

import pytest

from gitreg.auth.login import LoginFlow
from gitreg.auth.oidc import OidcClient
from gitreg.auth.pending import SignInLimits, SignInsBusy
from gitreg.auth.ratelimit import FailureLimiter
from gitreg.auth.store import AuthIndex
from gitreg.auth.web_sign_in import WebSignIn
from gitreg.errors import UpstreamError
from gitreg.settings import Settings
from tests.support.login_query import authorize_params

CLIENT = "203.0.113.7"


class _EmptyIndex:
    def count_login_states(self, now: float, most: int) -> int:
        return 0


def test_concurrent_sign_ins_from_one_address_get_only_its_allowance() -> None:
    limits = SignInLimits(cast(AuthIndex, _EmptyIndex()), per_client=2, pending_max=100)

    async def together() -> list[Any]:
        starts = (limits.admit(CLIENT, 0.0) for _ in range(10))
        return await asyncio.gather(*starts, return_exceptions=True)

    answers = asyncio.run(together())
    assert sum(a is None for a in answers) == 2
    assert all(isinstance(a, SignInsBusy) for a in answers if a is not None)


class _Index(_EmptyIndex):
    def __init__(self) -> None:
        self.written: list[str] = []

    def put_login_state(self, key: str, text: str, expires: float, now: float) -> None:
        self.written.append(key)


class _Issuer:
    """Down until `up` is set: authorization_url needs its discovery document."""

    up = False

    async def authorization_url(self, redirect_uri: str, *secrets: str) -> str:
        if not self.up:
            raise UpstreamError("identity provider: cannot fetch the discovery document")
        return "https://idp.example/authorize?state=x"


def _web(index: _Index, issuer: _Issuer) -> Callable[[], Coroutine[Any, Any, object]]:
    settings = Settings(oidc_issuer="https://idp.example", oidc_client_id="c")
    limits = SignInLimits(cast(AuthIndex, index), per_client=1, pending_max=100)
    flow = WebSignIn(settings, cast(AuthIndex, index), cast(OidcClient, issuer), limits)
    return lambda: flow.begin("https://reg.example/ui/sign-in/callback", "b", "/", CLIENT)


def _terraform(index: _Index, issuer: _Issuer) -> Callable[[], Coroutine[Any, Any, object]]:
    settings = Settings(oidc_issuer="https://idp.example", oidc_client_id="c")
    limits = SignInLimits(cast(AuthIndex, index), per_client=1, pending_max=100)
    failures = FailureLimiter(5, 60)
    flow = LoginFlow(
        settings, cast(AuthIndex, index), cast(OidcClient, issuer), print, limits, failures=failures
    )
    return lambda: flow.begin(authorize_params(), "https://reg.example/oauth/callback", CLIENT)


@pytest.mark.parametrize("flow", [_web, _terraform])
def test_sign_ins_refused_while_the_issuer_is_down_use_none_of_the_allowance(
    flow: Callable[[_Index, _Issuer], Callable[[], Coroutine[Any, Any, object]]],
) -> None:
    """Nothing is written when the issuer cannot be reached, so nothing is
    counted: once it is back, the address still has its allowance."""
    index, issuer = _Index(), _Issuer()
    begin = flow(index, issuer)
    for _ in range(3):
        with pytest.raises(UpstreamError):
            asyncio.run(begin())
    issuer.up = True
    asyncio.run(begin())
    assert len(index.written) == 1
    with pytest.raises(SignInsBusy):  # and the allowance is still enforced
        asyncio.run(begin())

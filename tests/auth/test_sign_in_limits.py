"""SignInLimits (gitreg/auth/pending.py) under concurrency: the per-address
allowance holds for sign-ins started at the same moment, not only in turn."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from gitreg.auth.pending import SignInLimits, SignInsBusy
from gitreg.storage.protocols import AuthIndex


class _EmptyIndex:
    def count_login_states(self, now: float, most: int) -> int:
        return 0


def test_concurrent_sign_ins_from_one_address_get_only_its_allowance() -> None:
    limits = SignInLimits(cast(AuthIndex, _EmptyIndex()), per_client=2, pending_max=100)

    async def together() -> list[Any]:
        starts = (limits.admit("203.0.113.7", 0.0) for _ in range(10))
        return await asyncio.gather(*starts, return_exceptions=True)

    answers = asyncio.run(together())
    assert sum(a is None for a in answers) == 2
    assert all(isinstance(a, SignInsBusy) for a in answers if a is not None)

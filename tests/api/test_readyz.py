"""`/readyz` answers within 1 s (Kubernetes' default probe timeout) whatever its
dependencies do: a check that does not finish in time is itself the answer, a
503 naming what does not answer, and readiness returns once it does. The
checks themselves are tests/api/test_security_http.py; PostgreSQL
stopping and starting is tests/e2e/test_e2e_readiness.py.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.settings import load_settings

DEADLINE = 30.0


def test_readyz_answers_in_time_while_another_process_holds_the_index(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path / "data", "job_workers": 0}, environ={})
    with TestClient(create_app(settings), base_url="https://testserver") as client:
        assert client.get("/readyz").json() == {"status": "ready"}
        holder = sqlite3.connect(settings.db_path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN EXCLUSIVE")  # a writer that does not let go
        # Let go anyway, later than any answer in time: on a build whose /readyz
        # waits for the lock, the answer then comes late and says "ready".
        late = threading.Timer(5.0, holder.rollback)
        late.start()
        try:
            answer = client.get("/readyz")
        finally:
            late.cancel()
            holder.rollback()
            holder.close()
        assert answer.status_code == 503
        assert answer.json() == {
            "errors": ["readiness checks did not finish within 0.8 s: the index does not answer"]
        }
        deadline = time.monotonic() + DEADLINE
        while (answer := client.get("/readyz")).status_code != 200:
            assert time.monotonic() < deadline, answer.json()
            time.sleep(0.05)
        assert answer.json() == {"status": "ready"}

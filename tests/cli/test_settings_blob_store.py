"""The blob store settings: `blob_store`, `s3_addressing`, `blob_downloads`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.errors import ConfigError
from gitreg.settings import load_settings, s3_location
from tests.support.server import cli


def test_unset_keeps_blobs_in_the_data_dir(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, environ={})
    assert (settings.blob_store, settings.s3_addressing, settings.blob_downloads) == (
        "",
        "virtual",
        "stream",
    )


def test_flag_env_and_file_all_set_the_blob_store(tmp_path: Path) -> None:
    config = tmp_path / "gitreg.toml"
    config.write_text('blob_store = "s3://from-file/p"\ns3_addressing = "path"\n')
    from_file = load_settings({"data_dir": tmp_path}, environ={}, config_file=config)
    assert s3_location(from_file.blob_store) == ("from-file", "p")
    assert from_file.s3_addressing == "path"
    env = {"GITREG_BLOB_STORE": "s3://from-env/a/b/", "GITREG_BLOB_DOWNLOADS": "redirect"}
    from_env = load_settings({"data_dir": tmp_path}, environ=env, config_file=config)
    assert s3_location(from_env.blob_store) == ("from-env", "a/b")
    assert from_env.blob_downloads == "redirect"
    flagged = load_settings({"data_dir": tmp_path, "blob_store": "s3://flag"}, environ=env)
    assert s3_location(flagged.blob_store) == ("flag", "")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GITREG_BLOB_STORE": "/var/lib/blobs"}, r"blob_store must be s3://BUCKET/PREFIX"),
        ({"GITREG_BLOB_STORE": "gs://bucket/x"}, r"blob_store must be s3://BUCKET/PREFIX"),
        ({"GITREG_BLOB_STORE": "s3://Bad_Bucket/x"}, "not a valid S3 bucket name"),
        ({"GITREG_BLOB_STORE": "s3:///x"}, "not a valid S3 bucket name"),
        ({"GITREG_S3_ADDRESSING": "dns"}, "s3_addressing must be virtual or path"),
        ({"GITREG_BLOB_DOWNLOADS": "proxy"}, "blob_downloads must be stream or redirect"),
        ({"GITREG_BLOB_DOWNLOADS": "redirect"}, "needs an s3:// blob_store"),
    ],
)
def test_bad_values_are_clear_errors(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings({"data_dir": tmp_path}, environ=env)


def test_the_cli_flag_reports_a_bad_blob_store_clearly(tmp_path: Path) -> None:
    result = cli(tmp_path / "data", "--blob-store", "ftp://x/y", "modules", check=False)
    assert result.returncode != 0
    assert "gitreg: error: blob_store must be s3://BUCKET/PREFIX" in result.stderr
    assert "Traceback" not in result.stderr

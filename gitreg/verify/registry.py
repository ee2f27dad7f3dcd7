"""One registry as `gitreg verify` reads it, over one HTTPS connection pool.

Discovery names the `attestations.v1` and `modules.v1` bases (relative URLs
resolve against the discovery document). Statements are fetched with the
host's Terraform token; keys, the checkpoint and tiles are public. TLS trusts
what Terraform trusts on this machine: the system roots, or `SSL_CERT_FILE`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from gitreg.attestations import note
from gitreg.attestations.keys import keyid_of, verify_ed25519
from gitreg.attestations.tlog import tile_path
from gitreg.verify.credentials import token_for

if TYPE_CHECKING:
    import httpx

LOG_INDEX = "gitreg-log-index"
NOT_ATTESTED = "gitreg-not-attested"  # why a registry has no statement to give


class RegistryError(Exception):
    """Something about a registry that fails every module installed from it."""


class NoAttestations(Exception):
    """The registry serves no statements: its modules are not verifiable."""


class Registry:
    def __init__(self, client: httpx.Client, host: str) -> None:
        self.host = host
        self._client = client
        self._token = token_for(host)
        self._lock = threading.Lock()
        self._bases: tuple[str, str] | None = None
        self._unusable: RegistryError | NoAttestations | None = None
        self._keys: dict[str, bytes] | None = None
        self._tiles: dict[tuple[int, int], bytes] = {}
        self._bundles: dict[tuple[int, int], bytes] = {}

    def _get(self, url: str, auth: bool = False) -> httpx.Response:
        import httpx

        headers = {"Authorization": f"Bearer {self._token}"} if auth and self._token else {}
        try:
            return self._client.get(url, headers=headers)
        except httpx.HTTPError as exc:
            raise RegistryError(f"cannot reach {self.host}: {exc}") from None
        except (httpx.InvalidURL, UnicodeError) as exc:  # IDNA refuses the host name
            raise RegistryError(
                f"{self.host} is not a host name that can be reached: {exc}"
            ) from None

    def bases(self) -> tuple[str, str]:
        """(attestations base, modules base). Asked once per run: when the
        registry cannot answer, every module from it fails with that answer
        rather than each waiting out the timeout again."""
        with self._lock:
            if self._unusable is not None:
                raise type(self._unusable)(str(self._unusable))
            try:
                return self._discover()
            except (RegistryError, NoAttestations) as exc:
                self._unusable = exc
                raise

    def _discover(self) -> tuple[str, str]:
        if self._bases is None:
            url = f"https://{self.host}/.well-known/terraform.json"
            answer = self._get(url, auth=True)
            if answer.status_code != 200:
                raise RegistryError(f"{url} answered {answer.status_code}")
            try:
                services = answer.json()
            except ValueError:
                raise RegistryError(f"{url} is not JSON") from None
            attestations = services.get("attestations.v1")
            if not isinstance(attestations, str):
                raise NoAttestations(f"{self.host} serves no attestations")
            modules = services.get("modules.v1")
            self._bases = (
                urljoin(url, attestations),
                urljoin(url, modules if isinstance(modules, str) else "/v1/modules/"),
            )
        return self._bases

    @property
    def origin(self) -> str:
        parts = urlsplit(self.bases()[0] + "log")
        return parts.netloc + parts.path

    def keys(self) -> dict[str, bytes]:
        """keyid -> raw Ed25519 public key, checked against its id."""
        base = self.bases()[0]
        with self._lock:
            if self._keys is None:
                answer = self._get(base + "keys")
                if answer.status_code != 200:
                    raise RegistryError(f"the registry's keys answered {answer.status_code}")
                found = {}
                for entry in answer.json().get("keys", []):
                    raw = _raw_from_pem(str(entry.get("pem", "")))
                    if raw is None or keyid_of(raw) != entry.get("keyid"):
                        raise RegistryError(f"key {entry.get('keyid')} does not match its id")
                    found[keyid_of(raw)] = raw
                self._keys = found
            return self._keys

    def statement(self, address: str, version: str) -> tuple[bytes, int]:
        """(the DSSE envelope, the index of its log entry)."""
        url = f"{self.bases()[1]}{address}/{version}/attestation"
        answer = self._get(url, auth=True)
        if answer.status_code in (401, 403):
            raise RegistryError(f"no access to the statement (token for {self.host}?)")
        if answer.status_code == 404 and answer.headers.get(NOT_ATTESTED) == "proxied":
            raise NoAttestations(f"{self.host} proxies this module from another registry")
        if answer.status_code == 404:
            raise RegistryError("the registry has no statement for this version")
        if answer.status_code != 200:
            raise RegistryError(f"the statement answered {answer.status_code}")
        try:
            index = int(answer.headers.get(LOG_INDEX, ""))
        except ValueError:
            raise RegistryError("the statement does not say where it is in the log") from None
        return answer.content, index

    def checkpoint(self) -> note.Checkpoint:
        answer = self._get(self.bases()[0] + "log/checkpoint")
        if answer.status_code != 200:
            raise RegistryError(f"the log's checkpoint answered {answer.status_code}")
        try:
            point = note.open_note(answer.content, list(self.keys().values()), verify_ed25519)
        except Exception as exc:
            raise RegistryError(f"the log's checkpoint does not verify: {exc}") from None
        if point.origin != self.origin:
            raise RegistryError(f"the checkpoint is for log {point.origin!r}, not {self.origin!r}")
        return point

    def tile(self, level: int, index: int, width: int) -> bytes:
        key = (level, index)
        cached = self._tiles.get(key)
        if cached is not None and len(cached) >= width * 32:
            return cached
        data = self._fetch(tile_path(level, index, width))
        self._tiles[key] = data
        return data

    def entries(self, index: int, width: int) -> list[bytes]:
        """An entry bundle, read once per run (every module of a registry
        usually finds its entry in the same one)."""
        key = (index, width)
        cached = self._bundles.get(key)
        if cached is None:
            cached = self._bundles[key] = self._fetch(tile_path("entries", index, width))
        data = cached
        found, at = [], 0
        while at + 2 <= len(data):
            size = int.from_bytes(data[at : at + 2], "big")
            found.append(data[at + 2 : at + 2 + size])
            at += 2 + size
        return found

    def _fetch(self, path: str) -> bytes:
        answer = self._get(self.bases()[0] + "log/" + path)
        if answer.status_code != 200:
            raise RegistryError(f"log {path} answered {answer.status_code}")
        return answer.content

    def archive(self, address: str, version: str) -> bytes:
        """The version's archive, as Terraform downloads it."""
        url = f"{self.bases()[1]}{address}/{version}/download"
        answer = self._get(url, auth=True)
        location = answer.headers.get("x-terraform-get")
        if answer.status_code not in (200, 204) or not location:
            raise RegistryError(f"the download answered {answer.status_code}")
        target, _, query = urljoin(url, location).partition("?")
        scheme, _, rest = target.partition("://")
        rest = rest.split("//", 1)[0]  # `//subdir` selects a directory inside the archive
        body = self._get(f"{scheme}://{rest}" + (f"?{query}" if query else ""))
        if body.status_code != 200:
            raise RegistryError(f"the archive answered {body.status_code}")
        return body.content


def _raw_from_pem(pem: str) -> bytes | None:
    import base64
    import binascii

    body = "".join(line for line in pem.strip().splitlines() if not line.startswith("-----"))
    try:
        der = base64.b64decode(body, validate=True)
    except binascii.Error:
        return None
    prefix = bytes.fromhex("302a300506032b6570032100")
    return der[len(prefix) :] if der.startswith(prefix) and len(der) == 44 else None

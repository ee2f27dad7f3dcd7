"""The screenshots of docs/ui.md: `.venv/bin/python docs/screenshots/take.py` from the
repository root (needs Chromium, like the browser tests). A registry with the
terraform-docs module of tests/support/readmes.py and the documented provider of
tests/catalog/test_provider_docs.py, served by a real `gitreg serve`."""

import sys
import tempfile
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.catalog.test_provider_docs import _ingest
from tests.providers.test_providers_forges import API, TOKEN
from tests.support.browser import chromium_context
from tests.support.gitrepo import GitRepo
from tests.support.provider_dist import make_services, public_armor, publisher_key, make_dist
from tests.support.readmes import network_module
from tests.support.server import cli, free_port, start_server

out = ROOT / "docs/screenshots"
tmp = Path(tempfile.mkdtemp())
data = tmp / "data"; data.mkdir()
(data / "gitreg.toml").write_text(f'[forges.ghe]\nkind = "github"\napi_url = "{API}"\ntoken = "{TOKEN}"\n')
svc = make_services(data, public_url="https://registry.example.com")
svc.providers.keys.add("acme", public_armor(publisher_key()))
_ingest(svc, tmp)
svc.close()
port = free_port()
repo = GitRepo(tmp / "terraform-aws-net"); network_module(repo, f"127.0.0.1:{port}"); repo.commit("first"); repo.tag("v1.0.0")
cli(data, "repo", "add", str(repo.path), "--module", "acme/net/aws")
server = start_server(data, "--reconcile-interval", "0", port=port)
pages = [
    ("home", "/"), ("search", "/search?q=net"), ("module", "/modules/acme/net/aws"),
    ("module-inputs", "/modules/acme/net/aws?tab=inputs"),
    ("submodule", "/modules/acme/net/aws/1.0.0/modules/subnets"),
    ("example", "/modules/acme/net/aws/1.0.0/examples/complete"),
    ("file", "/modules/acme/net/aws/1.0.0/files/main.tf"),
    ("provider", "/providers/acme/null"),
    ("provider-doc", "/providers/acme/null/1.0.0/docs/resources-resource"),
    ("mirror", "/mirror"), ("not-found", "/modules/acme/none/aws"),
]
try:
    with chromium_context(tmp / "profile") as ctx:
        page = ctx.new_page()
        page.set_viewport_size({"width": 1366, "height": 820})
        for name, path in pages:
            page.goto(server.url + path); page.wait_for_load_state("load")
            page.screenshot(path=str(out / f"{name}.png"), type="png")
        page.emulate_media(color_scheme="dark")
        page.goto(server.url + "/modules/acme/net/aws")
        page.screenshot(path=str(out / "module-dark.png"), type="png")
        page.emulate_media(color_scheme="light")
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(server.url + "/modules/acme/net/aws")
        page.screenshot(path=str(out / "module-phone.png"), type="png")
finally:
    server.stop()

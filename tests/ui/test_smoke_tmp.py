from tests.ui.conftest import Ui


def test_smoke(ui: Ui) -> None:
    for path in ["/", "/search?q=vpc", "/modules/acme", "/modules/acme/vpc/aws", "/modules/acme/vpc/aws/1.0.0?tab=inputs", "/mirror", "/ui/token", "/nope", "/modules/secret/vault/aws"]:
        r = ui.client.get(path)
        print(path, r.status_code, len(r.text))
        if r.status_code >= 500:
            print(r.text)
    import pathlib; pathlib.Path("/tmp/module.html").write_text(ui.client.get("/modules/acme/vpc/aws").text)

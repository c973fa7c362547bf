"""Redirect targets stay on this site, and no Host header steers the URLs the pages hand out."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from app import create_app
from tests.conftest import PASSWORD, csrf_token_from
from tests.factories import make_catalog
from tests.helpers import attr, copied, one

# Each as a user (or an attacker's link) would put it in ?next=, before URL encoding.
HOSTILE_TARGETS = [
    "//evil.example",
    "///evil.example",
    "////evil.example/x",
    "/\\evil.example",
    "\\\\evil.example",
    "/\t/evil.example",
    "/\r\n/evil.example",
    "\r\nLocation: https://evil.example",
    "/x\r\nSet-Cookie: a=b",
    " //evil.example",
    "\t//evil.example",
    "https://evil.example",
    "https:evil.example",
    "http:/evil.example",
    "javascript:alert(1)",
    "JavaScript:alert(1)",
    "evil.example",
    "/%09/evil.example",  # arrives already decoded once; the browser would not decode it again, but refuse anyway
]


def landed_on_default_page(response) -> bool:
    """True when a redirect goes to the environments page of this site."""
    return response.status_code in (302, 303) and response.headers["Location"] == "/environments"


@pytest.mark.bad_input
@pytest.mark.parametrize("target", HOSTILE_TARGETS)
def test_hostile_next_after_login_lands_on_the_default_page(client, auth, member, target):
    response = auth.login(member.email, PASSWORD, next_url=target)
    assert landed_on_default_page(response), response.headers.get("Location")


@pytest.mark.bad_input
@pytest.mark.parametrize("target", HOSTILE_TARGETS)
def test_hostile_next_while_logged_in_lands_on_the_default_page(client, auth, member, target):
    assert auth.login(member.email).status_code == 303
    response = client.get(f"/login?next={quote(target, safe='')}")
    assert landed_on_default_page(response), response.headers.get("Location")


@pytest.mark.bad_input
@pytest.mark.parametrize("raw_query", ["/%09/evil.example", "%0d%0a//evil.example", "/%5cevil.example", "//%2fevil"])
def test_encoded_tricks_in_the_raw_query_land_on_the_default_page(client, auth, member, raw_query):
    assert auth.login(member.email).status_code == 303
    response = client.get(f"/login?next={raw_query}")
    assert landed_on_default_page(response), response.headers.get("Location")


@pytest.mark.parametrize("target", ["/runs/abc?x=1", "/environments?page=2", "/trials?failureCategory=timeout"])
def test_a_path_on_this_site_is_kept(client, auth, member, target):
    response = auth.login(member.email, PASSWORD, next_url=target)
    assert response.status_code == 303 and response.headers["Location"] == target


def test_the_login_redirect_remembers_the_page(client, auth, member):
    first = client.get("/environments?page=1")
    assert first.status_code == 302 and first.headers["Location"] == "/login?next=/environments?page%3D1"
    response = auth.login(member.email, PASSWORD, next_url="/environments?page=1")
    assert response.headers["Location"] == "/environments?page=1"


@pytest.fixture
def exporter(database, make_member):
    """A logged-in member's client and an environment to export."""
    member = make_member("mike@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 1.0})
    return member, catalog.environment_id


def export_page(app, member, environment_id, host: str = "localhost"):
    """Fetch the Export page logged in, as a browser that reached the server as `host` (port included) would."""
    client = app.test_client()
    base_url = f"http://{host}"
    if host.split(":")[0] in app.config["TRUSTED_HOSTS"]:  # log in through that host, so the cookie goes along
        token = csrf_token_from(client.get("/login", base_url=base_url).text)
        form = {"email": member.email, "password": PASSWORD, "csrf_token": token}
        assert client.post("/login", data=form, base_url=base_url).status_code == 303
    return client.get(f"/environments/{environment_id}/export", base_url=base_url)


def export_urls(html: str) -> tuple[list[str], list[str]]:
    """The Export page's download links (their hrefs) and its curl lines, as the page shows them."""
    table = one(html, "table.export-kinds")
    return [attr(a, "href") for a in table.select("a[download]")], copied(table)


@pytest.mark.bad_input
@pytest.mark.parametrize("host", ["evil.example", "evil.example:5000", "localhost.evil.example", "127.0.0.1.evil"])
def test_an_untrusted_host_header_answers_400_and_never_appears(app, exporter, host):
    member, environment_id = exporter
    response = export_page(app, member, environment_id, host)
    assert response.status_code == 400
    assert "evil" not in response.text


@pytest.mark.bad_input
def test_an_untrusted_host_is_refused_before_login_too(client):
    response = client.get("/login", headers={"Host": "evil.example"})
    assert response.status_code == 400 and "evil.example" not in response.text


def test_export_urls_use_the_trusted_request_host(app, exporter):
    member, environment_id = exporter
    response = export_page(app, member, environment_id, "127.0.0.1:5000")
    assert response.status_code == 200
    downloads, curls = export_urls(response.text)
    assert f"http://127.0.0.1:5000/api/v1/rollouts?kind=failed&environmentId={environment_id}" in downloads
    everything = f"'http://127.0.0.1:5000/api/v1/rollouts?kind=all&environmentId={environment_id}'"
    assert any(curl.endswith(everything) for curl in curls), curls


def test_export_urls_use_agentforge_base_url_when_set(database_urls, exporter, monkeypatch):
    member, environment_id = exporter
    monkeypatch.setenv("AGENTFORGE_BASE_URL", "https://rl.example.com/")
    app = create_app(
        {
            "TESTING": True,
            "SECRET_KEY": "test-secret",
            "DATABASE_URL": database_urls.runtime,
            "ADMIN_DATABASE_URL": database_urls.admin,
            "MIGRATE_ON_START": False,
        }
    )
    try:
        response = export_page(app, member, environment_id)
        assert response.status_code == 200
        everything = f"'https://rl.example.com/api/v1/rollouts?kind=all&environmentId={environment_id}'"
        assert any(curl.endswith(everything) for curl in export_urls(response.text)[1])
        assert "http://localhost" not in response.text
        assert export_page(app, member, environment_id, "rl.example.com").status_code == 200
        assert export_page(app, member, environment_id, "evil.example").status_code == 400
    finally:
        app.extensions["agentforge_db"].dispose()


@pytest.mark.parametrize("base_url", ["rl.example.com", "ftp://rl.example.com", "https://", "https://x/?a=1"])
def test_a_malformed_base_url_stops_the_app_at_start(monkeypatch, base_url):
    monkeypatch.setenv("AGENTFORGE_BASE_URL", base_url)
    with pytest.raises(ValueError, match="AGENTFORGE_BASE_URL"):
        create_app({"TESTING": True, "SECRET_KEY": "x", "DATABASE_URL": "postgresql://unused/x"})


def test_trusted_hosts_come_from_agentforge_trusted_hosts(monkeypatch):
    monkeypatch.setenv("AGENTFORGE_TRUSTED_HOSTS", "rl.example.com, .corp.example")
    monkeypatch.setenv("AGENTFORGE_BASE_URL", "https://agentforge.example.org")
    app = create_app({"TESTING": True, "SECRET_KEY": "x", "DATABASE_URL": "postgresql://unused/x"})
    assert app.config["TRUSTED_HOSTS"] == ["rl.example.com", ".corp.example", "agentforge.example.org"]
    app.extensions["agentforge_db"].dispose()

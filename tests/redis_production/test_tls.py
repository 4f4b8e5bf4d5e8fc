"""A Redis reached over TLS only (rediss://), that verifies the hub's client certificate too."""

import pytest

from tests.redis_production import servers
from tests.redis_production.conftest import (
    assert_every_client_used,
    converse,
    running_hub,
    start_hub_expecting_failure,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.serial]

PASSWORD = "tls-and-a-password"


@pytest.fixture
def certificates(tmp_path):
    return servers.make_certificates(tmp_path / "certs")


@pytest.fixture
def server(tmp_path, certificates):
    server = servers.tls_server(tmp_path, certificates, password=PASSWORD)
    yield server
    server.stop()


def tls_env(server, certificates, *, ca=None) -> dict:
    return {"REDIS_URL": f"rediss://:{PASSWORD}@127.0.0.1:{server.port}/4",
            "HUB_REDIS_CA_FILE": str(ca or certificates["ca"]),
            "HUB_REDIS_CERT_FILE": str(certificates["client_cert"]),
            "HUB_REDIS_KEY_FILE": str(certificates["client_key"])}


def test_a_reply_streams_through_a_redis_over_tls(tmp_path, server, certificates, speaker):
    with running_hub(tmp_path, tls_env(server, certificates)) as (base, log):
        converse(base, speaker, "lighthouses")
        server.client_options["db"] = 4
        assert_every_client_used(server.client())
    assert PASSWORD not in log.read_text(errors="replace")


def test_a_server_certificate_the_ca_did_not_sign_stops_the_start(tmp_path, server, certificates):
    stranger = servers.make_certificates(tmp_path / "other-ca")["ca"]
    result = start_hub_expecting_failure(tmp_path, tls_env(server, certificates, ca=stranger))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Hub cannot start: Redis at REDIS_URL does not answer"), lines
    assert "certificate verify failed" in lines[0].lower()
    assert PASSWORD not in result.stderr + result.stdout


def test_a_client_without_its_certificate_is_refused(tmp_path, server, certificates):
    env = tls_env(server, certificates)
    del env["HUB_REDIS_CERT_FILE"], env["HUB_REDIS_KEY_FILE"]
    result = start_hub_expecting_failure(tmp_path, env)
    assert result.returncode != 0 and "Hub cannot start: Redis at REDIS_URL does not answer" in result.stderr
    assert PASSWORD not in result.stderr + result.stdout

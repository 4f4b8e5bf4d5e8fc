"""A Redis that asks for a password, as the default user or as an ACL user: the hub streams a
reply through it, and a wrong password stops its start with one line that does not show it."""

from urllib.parse import quote

import pytest

from tests.redis_production import servers
from tests.redis_production.conftest import (
    assert_every_client_used,
    converse,
    running_hub,
    start_hub_expecting_failure,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.serial]

PASSWORD = "p@ss:w/rd#1"  # characters a URL must escape
USER, USER_PASSWORD = "hub-app", "acl pass%2"


@pytest.fixture
def server(tmp_path):
    server = servers.password_server(tmp_path, password=PASSWORD, user=USER, user_password=USER_PASSWORD)
    yield server
    server.stop()


@pytest.mark.parametrize("credentials", [f":{quote(PASSWORD, safe='')}", f"{USER}:{quote(USER_PASSWORD, safe='')}"],
                         ids=["default-user", "acl-user"])
def test_a_reply_streams_through_a_redis_that_asks_for_a_password(tmp_path, server, speaker, credentials):
    with running_hub(tmp_path, {"REDIS_URL": f"redis://{credentials}@127.0.0.1:{server.port}/3"}) as (base, log):
        converse(base, speaker, "walruses")
        server.client_options["db"] = 3
        assert_every_client_used(server.client())
    output = log.read_text(errors="replace")
    assert PASSWORD not in output and USER_PASSWORD not in output and quote(PASSWORD, safe="") not in output


@pytest.mark.parametrize("credentials", [":not-the-password", f"{USER}:not-the-password", ""],
                         ids=["wrong-password", "wrong-user-password", "no-password"])
def test_a_wrong_password_stops_the_start_with_one_line_that_hides_it(tmp_path, server, credentials):
    url = f"redis://{credentials}{'@' if credentials else ''}127.0.0.1:{server.port}/3"
    result = start_hub_expecting_failure(tmp_path, {"REDIS_URL": url})
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Hub cannot start: Redis at ") and "refused REDIS_URL's user or password" in lines[0]
    assert "not-the-password" not in result.stderr + result.stdout

"""The Redis settings an operator gets wrong stop the hub with one clear line, and no page or
report shows the password of REDIS_URL."""

import pytest

from hub.environment import ConfigurationError
from hub.redaction import SettingsFilter
from hub.redis_config import RedisConfig, from_environment

SECRET = "s3cret-in-the-url"


@pytest.fixture(autouse=True)
def _no_redis_settings(monkeypatch):
    for name in ("REDIS_URL", "HUB_REDIS_CA_FILE", "HUB_REDIS_CERT_FILE", "HUB_REDIS_KEY_FILE",
                 "HUB_REDIS_SENTINELS", "HUB_REDIS_SENTINEL_MASTER", "HUB_REDIS_SENTINEL_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("variables, expected", [
    ({"REDIS_URL": f"http://:{SECRET}@host/0"}, "REDIS_URL must start with redis:// or rediss://"),
    ({"REDIS_URL": f"rediss://:{SECRET}@host/0?ssl_cert_reqs=none"}, "REDIS_URL takes no query string"),
    ({"REDIS_URL": f"redis://:{SECRET}@host/0", "HUB_REDIS_CA_FILE": __file__}, "need a rediss:// REDIS_URL"),
    ({"REDIS_URL": f"rediss://:{SECRET}@host/0", "HUB_REDIS_CERT_FILE": __file__},
     "HUB_REDIS_CERT_FILE and HUB_REDIS_KEY_FILE go together"),
    ({"REDIS_URL": f"rediss://:{SECRET}@host/0", "HUB_REDIS_CA_FILE": "/nowhere/ca.pem"},
     "HUB_REDIS_CA_FILE='/nowhere/ca.pem' cannot be read"),
    ({"REDIS_URL": f"redis://:{SECRET}@mymaster/0", "HUB_REDIS_SENTINELS": "10.0.0.1:26379"},
     "HUB_REDIS_SENTINELS and HUB_REDIS_SENTINEL_MASTER go together"),
    ({"REDIS_URL": f"redis://:{SECRET}@mymaster/0", "HUB_REDIS_SENTINELS": "10.0.0.1",
      "HUB_REDIS_SENTINEL_MASTER": "mymaster"}, "HUB_REDIS_SENTINELS must list host:port pairs"),
])
def test_a_wrong_redis_setting_is_refused_with_a_line_that_hides_the_password(monkeypatch, variables, expected):
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as refused:
        from_environment()
    assert expected in str(refused.value)
    assert SECRET not in str(refused.value)


def test_the_debug_page_and_error_reports_hide_every_url_that_carries_the_password(settings):
    config = RedisConfig(f"redis://hub:{SECRET}@redis.internal:6379/0")
    settings.HUB_REDIS = config
    settings.REDIS_URL = config.url
    settings.CELERY_BROKER_URL = config.broker_url()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [config.channel_layer_host()]}}}
    shown = repr(SettingsFilter().get_safe_settings())
    assert "redis.internal" in shown  # the Redis is still named (by HUB_REDIS, redacted)
    assert SECRET not in shown


def test_the_sentinel_settings_name_the_master_for_the_broker_without_showing_the_password():
    config = RedisConfig("redis://:p%40ss@mymaster/5", sentinels=(("10.0.0.1", 26379), ("10.0.0.2", 26380)),
                         sentinel_master="mymaster", sentinel_password="other")
    assert config.broker_url() == "sentinel://:p%40ss@10.0.0.1:26379/5;sentinel://:p%40ss@10.0.0.2:26380/5"
    assert config.broker_transport_options()["master_name"] == "mymaster"
    assert "p@ss" not in repr(config) and "p%40ss" not in repr(config) and "other" not in repr(config)

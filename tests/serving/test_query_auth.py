"""Nobody let in: the query server off loopback requires a bearer token (real HTTP server)."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from streamtable.config import ConfigError
from streamtable.kafka.broker import free_port
from streamtable.serving.http import TOKEN_ENV, QueryServer, create_query_api, is_loopback

TOKEN = "tok-7f3a-SENTINEL"


@pytest.fixture
def api():
    return create_query_api({"counts": _Store({"a": 1, "b": 2})})


class _Store:
    def __init__(self, data):
        self.data = data

    def get(self, key):
        return self.data.get(key)

    def all(self):
        return iter(sorted(self.data.items()))

    def range(self, lo, hi):
        return iter((k, v) for k, v in sorted(self.data.items())
                    if (lo is None or k >= lo) and (hi is None or k <= hi))


def test_loopback_detection():
    assert all(map(is_loopback, ["127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.1.2.3", "example.com"]))


def test_off_loopback_without_a_token_refuses_to_start(api, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(ConfigError, match="needs a bearer token.*--http-token.*" + TOKEN_ENV):
        QueryServer(api, "0.0.0.0", free_port())


def test_loopback_without_a_token_answers(api, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    server = QueryServer(api, "127.0.0.1", free_port()).start()
    try:
        assert httpx.get(server.url + "/stores/counts/keys/%22a%22").json()["value"] == 1
    finally:
        server.stop()


def test_all_addresses_with_the_token_from_the_environment(api, monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    port = free_port()
    server = QueryServer(api, "0.0.0.0", port).start()
    url = f"http://127.0.0.1:{port}/stores"
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                        {"Authorization": "Bearer"}, {"Authorization": f"Bearer {TOKEN[:-1]}"},
                        {"Authorization": f"Basic {TOKEN}"},
                        {"Authorization": f"Bearer {TOKEN}x"}):
            denied = httpx.get(url, headers=headers)
            assert denied.status_code == 401, headers
            assert denied.headers["www-authenticate"].startswith("Bearer")
            assert TOKEN not in denied.text
        ok = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and ok.json() == ["counts"]
        assert httpx.get(url, headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200
        # every path is behind the token, the schema included
        assert httpx.get(f"http://127.0.0.1:{port}/openapi.json").status_code == 401
    finally:
        server.stop()


def test_a_token_given_on_loopback_is_required_too(api, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    server = QueryServer(api, "127.0.0.1", free_port(), token=TOKEN).start()
    try:
        assert httpx.get(server.url + "/stores").status_code == 401
        assert httpx.get(server.url + "/stores",
                         headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    finally:
        server.stop()


def test_cli_serve_off_loopback_without_a_token_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    done = subprocess.run(
        [sys.executable, "-m", "streamtable.cli", "serve", "examples/word_count/app.py",
         "--state-dir", str(tmp_path), "--http-host", "0.0.0.0", "--http-port",
         str(free_port())], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("streamtable: the query server on 0.0.0.0"), done.stderr
    assert "Traceback" not in done.stderr


def test_cli_serve_says_no_state_yet_until_the_application_has_run(tmp_path):
    """``serve`` holds no state of its own: before the application's first batch a key is
    not absent, there is nothing yet (503, as the running application's API answers)."""
    import time

    from streamtable.config import StreamsConfig
    from streamtable.serving import configured_serving_store
    from streamtable.serving.codec import encode_key, encode_value

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamtable.cli", "serve", "examples/word_count/app.py",
         "--state-dir", str(tmp_path), "--http-port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/stores/counts-store/keys/kafka"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                before = httpx.get(url)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.2)
        assert before.status_code == 503 and "no state yet" in before.json()["detail"]
        config = StreamsConfig({"application.id": "wordcount",
                                "state.dir": str(tmp_path)})
        serving = configured_serving_store(config)
        serving.apply(0, [("counts-store", encode_key("kafka"), encode_value((3, 0)), 0)])
        assert httpx.get(url).json()["value"] == 3
        absent = httpx.get(url.replace("kafka", "absent"))
        assert absent.status_code == 404 and "no key" in absent.json()["detail"]
    finally:
        proc.terminate()
        proc.wait(30)

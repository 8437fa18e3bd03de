"""CORS for browser clients (`--cors-origin`): an allowed origin's responses carry
Access-Control-Allow-Origin, errors included, and its preflight OPTIONS requests are answered
without the API key (browsers send them without credentials); other origins, and every origin
when the flag is not given, get no CORS headers, so browsers keep their pages from reading."""

import http.client
import json

import pytest

from conftest import Server

APP = "http://app.example:3000"
KEY = "sekret"


def request(server, method, path, headers=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def cors_server(cli, models):
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "128", "--api-key", KEY,
                     "--cors-origin", APP, "--cors-origin", "http://other.example"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def test_preflight_is_answered_without_the_key(cors_server):
    status, headers, body = request(cors_server, "OPTIONS", "/v1/chat/completions",
                                    {"Origin": APP, "Access-Control-Request-Method": "POST",
                                     "Access-Control-Request-Headers": "authorization,content-type"})
    assert status == 204 and body == b""
    assert headers["access-control-allow-origin"] == APP
    assert "POST" in headers["access-control-allow-methods"]
    assert "authorization" in headers["access-control-allow-headers"].lower()
    assert "content-length" not in headers
    assert headers["vary"] == "Origin"


def test_an_allowed_origin_reads_answers_and_errors(cors_server):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}
    status, headers, _ = request(cors_server, "POST", "/v1/chat/completions",
                                 {"Origin": APP, "Authorization": f"Bearer {KEY}"}, body)
    assert status == 200 and headers["access-control-allow-origin"] == APP
    # A missing key is still a 401, which the page can read.
    status, headers, _ = request(cors_server, "POST", "/v1/chat/completions", {"Origin": APP},
                                 body)
    assert status == 401 and headers["access-control-allow-origin"] == APP
    status, headers, _ = request(cors_server, "GET", "/v1/models",
                                 {"Origin": "http://other.example",
                                  "Authorization": f"Bearer {KEY}"})
    assert status == 200 and headers["access-control-allow-origin"] == "http://other.example"


def test_other_origins_get_no_cors_headers(cors_server):
    status, headers, _ = request(cors_server, "GET", "/v1/models",
                                 {"Origin": "http://evil.example",
                                  "Authorization": f"Bearer {KEY}"})
    assert status == 200 and "access-control-allow-origin" not in headers
    status, headers, _ = request(cors_server, "OPTIONS", "/v1/models",
                                 {"Origin": "http://evil.example",
                                  "Access-Control-Request-Method": "GET"})
    assert status == 401 and "access-control-allow-origin" not in headers


def test_without_the_flag_no_origin_is_allowed(server):
    status, headers, _ = request(server, "GET", "/v1/models", {"Origin": APP})
    assert status == 200 and "access-control-allow-origin" not in headers
    status, _, _ = request(server, "OPTIONS", "/v1/models",
                           {"Origin": APP, "Access-Control-Request-Method": "GET"})
    assert status == 405


def test_any_origin_with_a_star(cli, models):
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "128", "--cors-origin", "*"])
    try:
        status, headers, _ = request(s, "GET", "/health", {"Origin": "http://anything.example"})
        assert status == 200 and headers["access-control-allow-origin"] == "*"
        assert "vary" not in headers
    finally:
        assert s.stop() == 0

"""The endpoint client against a real local server: retries, Retry-After, deadlines, errors, and
the API key kept out of everything but the Authorization header."""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import itertools
import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from fadeway.errors import EndpointError, EndpointResponseError, EndpointTimeout
from fadeway.http import Endpoint, retry_after_seconds
from openai_server import OpenAIServer, Recorded, Reply

KEY = "sk-test-5ecret-key-0123456789"
OK = Reply(body={"ok": True})


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as s:
        yield s


@pytest.fixture
def make_endpoint(server):
    made: list[Endpoint] = []

    def make(**settings) -> Endpoint:
        endpoint = Endpoint(server.url, **{"api_key": KEY, "backoff_initial": 0.01, **settings})
        made.append(endpoint)
        return endpoint

    yield make
    for endpoint in made:
        endpoint.close()


def post(endpoint: Endpoint, payload=None, deadline: float | None = None):
    return asyncio.run(
        endpoint.post_json("chat/completions", payload or {"x": 1}, deadline=deadline)
    )


def gaps(server: OpenAIServer) -> list[float]:
    return [b.at - a.at for a, b in itertools.pairwise(server.requests)]


def test_posts_json_with_bearer_key_and_returns_the_answer(server, make_endpoint):
    server.script(Reply(body={"answer": [1, 2.5, "three"]}))
    endpoint = make_endpoint()
    assert post(endpoint, {"model": "m", "input": ["a"]}) == {"answer": [1, 2.5, "three"]}
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {"model": "m", "input": ["a"]}


def test_no_key_sends_no_authorization(server, make_endpoint):
    server.script(OK)
    post(make_endpoint(api_key=None))
    assert "authorization" not in server.requests[0].headers


def test_429_waits_the_retry_after_seconds(server, make_endpoint):
    server.script(Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}), OK)
    assert post(make_endpoint()) == {"ok": True}
    assert len(server.requests) == 2
    assert gaps(server)[0] >= 0.99  # the backoff alone would wait about 0.01 s


def test_429_waits_until_the_retry_after_date(server, make_endpoint):
    when = (datetime.now(UTC) + timedelta(seconds=2)).replace(microsecond=0)
    date = email.utils.format_datetime(when, usegmt=True)
    server.script(Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": date}), OK)
    assert post(make_endpoint()) == {"ok": True}
    assert server.requests[1].wall >= when.timestamp() - 0.01  # not before the date it was given


def test_retry_after_ms_is_honoured(server, make_endpoint):
    server.script(Reply(429, headers={"retry-after-ms": "300"}), OK)
    assert post(make_endpoint()) == {"ok": True}
    assert gaps(server)[0] >= 0.29


def test_a_long_retry_after_is_capped(server, make_endpoint):
    server.script(Reply(429, headers={"Retry-After": "3600"}), OK)
    endpoint = make_endpoint(retry_after_max=0.05)
    assert post(endpoint, deadline=time.monotonic() + 20) == {"ok": True}


def test_a_retry_after_past_the_deadline_gives_up_without_waiting(server, make_endpoint):
    server.script(Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "30"}), OK)
    start = time.monotonic()
    with pytest.raises(EndpointTimeout, match="would pass the deadline") as info:
        post(make_endpoint(), deadline=start + 5)
    assert info.value.status == 429
    assert "slow down" in str(info.value)
    assert len(server.requests) == 1
    assert time.monotonic() < start + 5  # it did not sleep up to the deadline first


def test_5xx_is_retried_until_success(server, make_endpoint):
    server.script(Reply(500, {"error": {"message": "boom"}}), Reply(503, b"busy"), OK)
    assert post(make_endpoint()) == {"ok": True}
    assert len(server.requests) == 3


def test_failing_every_attempt_raises_the_last_error(server, make_endpoint):
    server.script(*[Reply(502, {"error": {"message": f"bad gateway {i}"}}) for i in range(5)])
    with pytest.raises(EndpointError, match="all 3 attempts.*bad gateway 2") as info:
        post(make_endpoint(max_attempts=3))
    assert not isinstance(info.value, EndpointTimeout)
    assert info.value.status == 502
    assert len(server.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_are_not_retried_and_carry_the_servers_message(server, make_endpoint, status):
    server.script(Reply(status, {"error": {"message": "input is too long", "type": "x"}}), OK)
    with pytest.raises(EndpointError, match=f"HTTP {status}: input is too long") as info:
        post(make_endpoint())
    assert info.value.status == status
    assert len(server.requests) == 1


def test_a_plain_text_error_body_is_the_message(server, make_endpoint):
    server.script(Reply(403, b"  forbidden by proxy \n"))
    with pytest.raises(EndpointError, match="HTTP 403: forbidden by proxy$"):
        post(make_endpoint())


def test_a_dropped_connection_is_retried(server, make_endpoint):
    server.script(Reply(drop=True), OK)
    assert post(make_endpoint()) == {"ok": True}
    assert len(server.requests) == 2


def test_connection_refused_fails_after_every_attempt():
    with socket.socket() as s:  # a port that was free a moment ago and has no listener now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = Endpoint(f"http://127.0.0.1:{port}/v1", max_attempts=2, backoff_initial=0.01)
    with endpoint, pytest.raises(EndpointError, match="all 2 attempts.*ConnectError") as info:
        post(endpoint)
    assert info.value.status is None


def test_a_hung_connection_raises_timeout_at_the_deadline(server, make_endpoint):
    server.script(Reply(hang=True))
    endpoint = make_endpoint(timeout=30.0)
    start = time.monotonic()
    with pytest.raises(EndpointTimeout, match="did not finish by its deadline"):
        post(endpoint, deadline=start + 0.5)
    assert time.monotonic() - start < 10  # the deadline, not the 30 s attempt timeout, ended it
    assert isinstance(EndpointTimeout("x"), TimeoutError)


def test_an_attempt_that_times_out_is_retried(server, make_endpoint):
    server.script(Reply(hang=True), OK)
    assert post(make_endpoint(timeout=1.0)) == {"ok": True}
    assert len(server.requests) == 2


def test_a_deadline_already_past_raises_timeout(server, make_endpoint):
    server.script(OK)
    with pytest.raises(EndpointTimeout):
        post(make_endpoint(), deadline=time.monotonic() - 1)


def test_malformed_json_raises_and_is_not_retried(server, make_endpoint):
    server.script(Reply(body=b'{"data": [1, 2'), OK)
    with pytest.raises(EndpointResponseError, match="malformed JSON"):
        post(make_endpoint())
    assert len(server.requests) == 1


def test_a_wrongly_shaped_answer_raises_response_error(server, make_endpoint):
    server.script(Reply(body={"data": "nope"}))
    endpoint = make_endpoint()
    with pytest.raises(EndpointResponseError, match="unexpected shape"):
        asyncio.run(endpoint.post_json("x", {}, response_type=dict[str, list[int]]))


def test_the_key_is_never_in_errors_logs_or_repr(server, make_endpoint, caplog):
    def echo(status: int):
        def reply(request: Recorded) -> Reply:
            auth = request.headers["authorization"]
            return Reply(status, {"error": {"message": f"Incorrect API key provided: {auth}"}})

        return reply

    server.script(echo(500), echo(401))
    endpoint = make_endpoint()
    with caplog.at_level(logging.DEBUG), pytest.raises(EndpointError) as info:
        post(endpoint)
    assert info.value.status == 401
    assert "Incorrect API key provided: Bearer <api key>" in str(info.value)
    assert "retrying" in caplog.text  # the 500 was logged with its reason...
    for text in (str(info.value), caplog.text, repr(endpoint)):
        assert KEY not in text  # ...and the key nowhere


def test_concurrency_is_bounded(server, make_endpoint):
    server.script(*[Reply(body={"i": i}, delay=0.3) for i in range(6)])
    endpoint = make_endpoint(max_concurrency=2)

    async def main():
        return await asyncio.gather(*(endpoint.post_json("x", {}) for _ in range(6)))

    assert sorted(r["i"] for r in asyncio.run(main())) == list(range(6))
    assert server.max_in_flight == 2


def test_one_endpoint_serves_several_loops_and_the_sync_twin(server, make_endpoint):
    server.script(Reply(body=1), Reply(body=2), Reply(body=3))
    endpoint = make_endpoint()
    assert post(endpoint) == 1
    assert post(endpoint) == 2  # a new asyncio.run loop reuses the same endpoint
    assert endpoint.post_json_sync("x", {}) == 3


def test_a_closed_endpoint_refuses_calls(server, make_endpoint):
    endpoint = make_endpoint()
    endpoint.close()
    with pytest.raises(EndpointError, match="closed"):
        post(endpoint)


def test_from_env_reads_url_model_and_key():
    env = {
        "FADEWAY_JUDGE_BASE_URL": "http://127.0.0.1:9/v1/",
        "FADEWAY_JUDGE_MODEL": "m-1",
        "FADEWAY_JUDGE_API_KEY": KEY,
    }
    endpoint = Endpoint.from_env("FADEWAY_JUDGE", environ=env, max_attempts=2)
    assert (endpoint.base_url, endpoint.model, endpoint.max_attempts) == (
        "http://127.0.0.1:9/v1",
        "m-1",
        2,
    )
    assert KEY not in repr(endpoint)
    with pytest.raises(EndpointError, match="FADEWAY_JUDGE_BASE_URL is not set"):
        Endpoint.from_env("FADEWAY_JUDGE", environ={"FADEWAY_JUDGE_API_KEY": KEY})


def test_a_base_url_must_be_http():
    with pytest.raises(ValueError, match="http:// or https://"):
        Endpoint("ftp://example.com/v1")


def test_retry_after_parsing():
    assert retry_after_seconds({"retry-after": "2.5"}) == 2.5
    assert retry_after_seconds({"retry-after": "-3"}) == 0.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({"retry-after": "nan"}) is None
    assert retry_after_seconds({}) is None
    later = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=100), usegmt=True)
    assert 98 <= retry_after_seconds({"retry-after": later}) <= 100


def test_a_retry_after_holds_every_call_to_the_endpoint(server, make_endpoint):
    # The first request to arrive is told to wait 1 s; four threads, on two Endpoint instances of
    # the same URL, on their own event loops and the sync twin, keep calling meanwhile.
    server.script(Reply(429, headers={"Retry-After": "1"}), *[Reply(body=1, delay=0.1)] * 20)
    first, second = make_endpoint(), make_endpoint()
    start = threading.Barrier(4)

    def calls(endpoint: Endpoint, sync: bool) -> list[object]:
        start.wait()
        return [endpoint.post_json_sync("x", {}) if sync else post(endpoint) for _ in range(5)]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = [
            pool.submit(calls, endpoint, sync)
            for endpoint, sync in [(first, False), (first, True), (second, False), (second, True)]
        ]
        answers = [run.result(timeout=30) for run in runs]
    assert answers == [[1] * 5] * 4  # every call completed
    told = server.requests[0].at  # the 429's arrival; the calls in flight then may still land
    during = [r.at - told for r in server.requests if told + 0.2 < r.at < told + 0.98]
    assert during == []
    assert len(server.requests) == 21


def test_a_call_whose_deadline_falls_in_the_hold_fails_at_once(server, make_endpoint):
    server.script(Reply(429, headers={"retry-after-ms": "3000"}), OK)
    with pytest.raises(EndpointError, match="all 1 attempts"):
        post(make_endpoint(max_attempts=1))
    begun = time.monotonic()
    with pytest.raises(EndpointTimeout, match="past this call's deadline"):
        post(make_endpoint(), deadline=begun + 1)
    assert time.monotonic() - begun < 0.5  # it did not wait for the deadline
    assert len(server.requests) == 1  # and sent nothing


@pytest.mark.parametrize(("status", "held"), [(503, True), (500, False)])
def test_the_backoff_after_a_503_holds_the_endpoint_and_after_a_500_does_not(
    server, make_endpoint, status, held
):
    server.script(Reply(status), OK)
    with pytest.raises(EndpointError, match="all 1 attempts"):
        post(make_endpoint(max_attempts=1, backoff_initial=2.0))  # backoff: 1.5 to 2 s
    deadline = time.monotonic() + 1
    if held:
        with pytest.raises(EndpointTimeout, match="past this call's deadline"):
            post(make_endpoint(), deadline=deadline)
    else:
        assert post(make_endpoint(), deadline=deadline) == {"ok": True}


def test_a_hold_on_one_endpoint_leaves_another_free(server, make_endpoint):
    server.script(Reply(429, headers={"Retry-After": "3"}))
    with pytest.raises(EndpointError, match="all 1 attempts"):
        post(make_endpoint(max_attempts=1))
    with OpenAIServer() as other_server, Endpoint(other_server.url) as other:
        other_server.script(OK)
        begun = time.monotonic()
        assert post(other) == {"ok": True}
        assert time.monotonic() - begun < 0.5
    with pytest.raises(EndpointTimeout, match="past this call's deadline"):  # the first is held
        post(make_endpoint(), deadline=time.monotonic() + 1)

"""`wick serve` as its clients use it: HTTP on loopback against the shipped tiny model.

The OpenAI API's shapes (whole and streamed answers, usage, errors), the chat template, the key,
limits and hostile input, clients that go away, concurrent clients whose answers equal the same
requests sent alone (--deterministic), a flood past the queue, connections past the limit, and
SIGTERM under load. Python's standard library only; every call has a timeout and every server is
stopped by the test.
WICK_CLI names the wick program (ctest sets it).
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

WICK = os.environ.get("WICK_CLI", "wick")
TIMEOUT = 60


class Server:
    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen([WICK, "serve", "--port", "0", *args], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        self.log = []
        deadline = time.time() + TIMEOUT
        self.port = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("wick serve ended: " + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if line.startswith("serve: ready"):
                break
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)

    def call(self, method, path, body=None, headers=None, raw=None):
        c = self.conn()
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        return r.status, dict(r.getheaders()), text

    def json(self, method, path, body=None, headers=None, raw=None):
        status, hdrs, text = self.call(method, path, body, headers, raw)
        return status, hdrs, json.loads(text)

    def stream(self, path, body, headers=None):
        """The events of a streamed answer, [DONE] included."""
        status, _, text = self.call("POST", path, body, headers)
        assert status == 200, text
        return [block[6:] for block in text.split("\n\n") if block.startswith("data: ")]

    def metrics(self, headers=None):
        _, _, text = self.call("GET", "/metrics", headers=headers)
        return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(wick_[a-z_]+) ([0-9.e+-]+)$", text, re.M)}

    def idle(self, headers=None, seconds=10):
        """Waits until nothing runs and no block is held; the last metrics."""
        deadline = time.time() + seconds
        while True:
            m = self.metrics(headers)
            if (m.get("wick_requests_running") == 0 and m.get("wick_requests_waiting") == 0 and
                    m.get("wick_kv_blocks_used") == 0):
                return m
            if time.time() > deadline:
                return m
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", "16", "--max-queue", "128", "--deterministic")
    yield s
    assert s.stop() == 0, "".join(s.log)


def error_of(status, body, expected_status, param=None, code=None):
    assert status == expected_status, body
    e = body["error"]
    assert set(e) == {"message", "type", "param", "code"} and e["message"], body
    if param is not None:
        assert e["param"] == param, body
    if code is not None:
        assert e["code"] == code, body
    return e


def test_health_models_and_page(server):
    status, _, body = server.json("GET", "/health")
    assert status == 200 and body == {"status": "ok"}
    status, _, body = server.json("GET", "/v1/models")
    assert status == 200 and body["object"] == "list" and body["data"][0]["id"] == "tiny.gguf"
    status, hdrs, page = server.call("GET", "/")
    assert status == 200 and hdrs["Content-Type"].startswith("text/html") and "/v1/chat/completions" in page
    assert "http://" not in page and "https://" not in page  # nothing loaded from elsewhere


def test_completion_whole_and_streamed_agree(server):
    req = {"model": "tiny.gguf", "prompt": "The GNU General Public License", "max_tokens": 12, "temperature": 0}
    status, _, whole = server.json("POST", "/v1/completions", req)
    assert status == 200, whole
    assert whole["object"] == "text_completion" and whole["id"].startswith("cmpl-")
    choice = whole["choices"][0]
    assert choice["finish_reason"] == "length" and choice["text"]
    assert whole["usage"]["completion_tokens"] == 12
    assert whole["usage"]["total_tokens"] == whole["usage"]["prompt_tokens"] + 12
    events = server.stream("/v1/completions", {**req, "stream": True, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]) == choice["text"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    # Token ids as the prompt, and echo.
    status, _, ids = server.json("POST", "/v1/completions", {"prompt": [1, 450, 402], "max_tokens": 3, "echo": True})
    assert status == 200 and ids["usage"]["prompt_tokens"] == 3


def test_chat_through_the_models_template(server):
    req = {"model": "tiny.gguf", "max_tokens": 10, "temperature": 0, "seed": 7,
           "messages": [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "free software?"}]}]}
    status, _, whole = server.json("POST", "/v1/chat/completions", req)
    assert status == 200, whole
    assert whole["object"] == "chat.completion" and whole["id"].startswith("chatcmpl-")
    msg = whole["choices"][0]["message"]
    assert msg["role"] == "assistant" and msg["content"]
    # The prompt is the template's text: "<s>Be brief.\n\nQ: What is free software?\nA:".
    events = server.stream("/v1/chat/completions", {**req, "stream": True})
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["object"] == "chat.completion.chunk" and chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == msg["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    # A stop string ends the answer before it.
    text = msg["content"]
    cut = text[3:6] if len(text) > 6 else text[-1]
    status, _, stopped = server.json("POST", "/v1/chat/completions", {**req, "stop": [cut]})
    assert status == 200 and stopped["choices"][0]["finish_reason"] == "stop"
    assert stopped["choices"][0]["message"]["content"] == text[:text.index(cut)]


@pytest.mark.parametrize("body,param,code", [
    ({"prompt": 5}, "prompt", None),
    ({"prompt": "x", "max_tokens": -1}, "max_tokens", None),
    ({"prompt": "x", "max_tokens": 0}, "max_tokens", None),
    ({"prompt": "x", "max_tokens": 10**12}, "max_tokens", None),
    ({"prompt": "x", "max_tokens": 2047}, "max_tokens", "context_length_exceeded"),
    ({"prompt": "x " * 3000}, "prompt", "context_length_exceeded"),
    ({"prompt": "x", "temperature": "hot"}, "temperature", None),
    ({"prompt": "x", "temperature": 9}, "temperature", None),
    ({"prompt": "x", "top_p": 0}, "top_p", None),
    ({"prompt": "x", "n": 2}, "n", None),
    ({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, "stop", None),
    ({"prompt": "x", "stop": 3}, "stop", None),
    ({"prompt": "x", "frobnicate": 1}, "frobnicate", None),
    ({"prompt": "x", "stream_options": {"include_usage": True}}, "stream_options", None),
    ({"prompt": [1, 99999]}, "prompt", None),
    ({"prompt": ["a", "b"]}, "prompt", None),
    ({"prompt": "x", "logprobs": 21}, "logprobs", None),
    ({"prompt": "x", "presence_penalty": 2.5}, "presence_penalty", None),
    ({"prompt": "x", "frequency_penalty": "high"}, "frequency_penalty", None),
    ({}, "prompt", None),
])
def test_bad_completion_requests_are_400_in_the_apis_shape(server, body, param, code):
    status, _, err = server.json("POST", "/v1/completions", body)
    error_of(status, err, 400, param, code)


@pytest.mark.parametrize("messages,param", [
    ([], "messages"),
    ("hi", "messages"),
    ([{"role": "wizard", "content": "x"}], "messages[0].role"),
    ([{"role": "tool", "content": "x"}], "messages[0].role"),
    ([{"role": "user"}], "messages[0].content"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "messages[0].content[0].type"),
    ([{"role": "user", "content": 5}], "messages[0].content"),
])
def test_bad_chat_requests_are_400(server, messages, param):
    status, _, err = server.json("POST", "/v1/chat/completions", {"messages": messages})
    error_of(status, err, 400, param)


def test_logprobs_in_both_endpoints_whole_and_streamed(server):
    req = {"prompt": "The GNU General Public License", "max_tokens": 6, "temperature": 0, "logprobs": 3}
    status, _, whole = server.json("POST", "/v1/completions", req)
    assert status == 200, whole
    lp = whole["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == 6
    assert "".join(lp["tokens"]) == whole["choices"][0]["text"]
    for token, logprob, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        assert logprob <= 0 and len(top) <= 3 and max(top.values()) == logprob and top[token] == logprob  # greedy
    events = server.stream("/v1/completions", {**req, "stream": True})
    streamed = [json.loads(e)["choices"][0]["logprobs"] for e in events[:-1]]
    assert [t for x in streamed if x for t in x["token_logprobs"]] == lp["token_logprobs"]
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "temperature": 0.7, "seed": 1,
            "logprobs": True, "top_logprobs": 2}
    status, _, body = server.json("POST", "/v1/chat/completions", chat)
    assert status == 200, body
    content = body["choices"][0]["logprobs"]["content"]
    assert len(content) == 5 and all(len(e["top_logprobs"]) == 2 and e["logprob"] <= 0 for e in content)
    assert "".join(e["token"] for e in content) == body["choices"][0]["message"]["content"]
    assert all(bytes(e["bytes"]).decode("utf-8", "replace") == e["token"] for e in content)
    status, _, plain = server.json("POST", "/v1/chat/completions", {**chat, "logprobs": False, "top_logprobs": None})
    assert status == 200 and plain["choices"][0]["logprobs"] is None
    assert plain["choices"][0]["message"]["content"] == body["choices"][0]["message"]["content"]
    status, _, err = server.json("POST", "/v1/chat/completions", {**chat, "logprobs": False})
    error_of(status, err, 400, "top_logprobs")


def test_penalties_change_the_answer(server):
    req = {"prompt": "The", "max_tokens": 40, "temperature": 0}
    plain = server.json("POST", "/v1/completions", req)[2]["choices"][0]["text"]
    for penalty in ({"frequency_penalty": 2}, {"presence_penalty": 2}):
        status, _, body = server.json("POST", "/v1/completions", {**req, **penalty})
        assert status == 200 and body["choices"][0]["text"] != plain, penalty


def test_hostile_bodies(server):
    for raw in [b"{", b"[]", b"null", b"{\"prompt\": \"\xff\xfe\"}", b"[" * 100000, b""]:
        status, _, err = server.json("POST", "/v1/completions", raw=raw)
        error_of(status, err, 400)
    status, _, err = server.json("POST", "/v1/completions", {"model": "gpt-4", "prompt": "x"})
    error_of(status, err, 404, "model", "model_not_found")
    status, _, err = server.json("GET", "/v1/nothing")
    error_of(status, err, 404)
    status, _, err = server.json("POST", "/v1/completions", raw=b"{\"prompt\": \"" + b"a" * (9 << 20) + b"\"}")
    error_of(status, err, 413)
    # The server still answers.
    assert server.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1})[0] == 200


def test_a_client_that_goes_away_has_its_request_cancelled(server):
    before = server.idle()["wick_generated_tokens_total"]
    s = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
    body = json.dumps({"prompt": "The", "max_tokens": 2040, "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while b"data: " not in got:
        got += s.recv(4096)
    s.close()
    m = server.idle()
    assert m["wick_requests_running"] == 0 and m["wick_kv_blocks_used"] == 0, m
    # Cancelled, not run to its end.
    assert m["wick_generated_tokens_total"] - before < 2040, m


def test_64_concurrent_streaming_clients_get_what_each_gets_alone(server):
    # 64 clients, two requests each (the second whole), sampled with their own seeds.
    reqs = [[{"prompt": "Everyone " * (1 + (2 * c + k) % 5) + "is free", "max_tokens": 8 + (2 * c + k) % 9,
              "temperature": 0.9, "seed": 2 * c + k, "stream": k == 0} for k in range(2)] for c in range(64)]

    def run(req):
        if req["stream"]:
            events = server.stream("/v1/completions", req)
            assert events[-1] == "[DONE]"
            return "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
        status, _, body = server.json("POST", "/v1/completions", req)
        assert status == 200, body
        return body["choices"][0]["text"]

    alone = [[run(r) for r in client] for client in reqs]
    together = [None] * len(reqs)
    errors = []

    def worker(c):
        try:
            together[c] = [run(r) for r in reqs[c]]
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(c,)) for c in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not errors, errors
    assert together == alone
    m = server.idle()
    assert m["wick_requests_running"] == 0 and m["wick_kv_blocks_used"] == 0, m
    assert m["wick_time_to_first_token_seconds_count"] >= 2 * len(reqs)


def test_metrics_count_requests(server):
    _, _, text = server.call("GET", "/metrics")
    assert re.search(r'^wick_http_requests_total\{endpoint="completions",status="200"\} \d+$', text, re.M)
    assert "wick_time_between_tokens_seconds_bucket{le=\"+Inf\"}" in text


def test_the_key_guards_every_v1_call():
    s = Server(env={"WICK_API_KEY": "sekret"})
    try:
        for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekret"}]:
            status, _, err = s.json("GET", "/v1/models", headers=headers)
            error_of(status, err, 401, code="invalid_api_key")
            status, _, err = s.json("POST", "/v1/completions", {"prompt": "x"}, headers=headers)
            error_of(status, err, 401)
        ok = {"Authorization": "Bearer sekret"}
        assert s.json("GET", "/v1/models", headers=ok)[0] == 200
        assert s.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, headers=ok)[0] == 200
        assert s.call("GET", "/metrics")[0] == 401 and s.call("GET", "/metrics", headers=ok)[0] == 200
        assert s.call("GET", "/health")[0] == 200
    finally:
        assert s.stop() == 0


def test_a_flood_past_the_queue_gets_503_with_retry_after():
    s = Server("--parallel", "1", "--max-queue", "1")
    try:
        results = []

        def one():
            status, hdrs, body = s.call("POST", "/v1/completions", {"prompt": "The", "max_tokens": 400})
            results.append((status, hdrs.get("Retry-After"), body))

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        busy = [r for r in results if r[0] == 503]
        assert len(results) == 8 and busy and all(r[0] in (200, 503) for r in results), results
        assert all(r[1] == "1" and json.loads(r[2])["error"]["code"] == "server_busy" for r in busy)
        assert s.idle()["wick_kv_blocks_used"] == 0
    finally:
        assert s.stop() == 0


def test_connections_past_the_limit_wait_outside_the_server():
    s = Server("--threads", "2", "--max-connections", "3")
    idle = []
    try:
        def descriptors():
            return len(os.listdir(f"/proc/{s.proc.pid}/fd"))

        before = descriptors()
        for _ in range(32):  # connections that send nothing
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", s.port))
            idle.append(c)
        time.sleep(0.5)
        # Three open, and the one the accept loop holds while it waits for room.
        assert descriptors() <= before + 4
        for c in idle:
            c.close()
        idle.clear()
        status, _, _ = s.call("GET", "/health")
        assert status == 200
        # The closed ones are read to their end and closed by the server, soon: then only the
        # connection that asks is open. Each read is judged by itself: the connection of the read
        # before may still be counted while the server sees its end.
        deadline = time.time() + 10
        while (open_now := s.metrics()["wick_http_connections"]) != 1 and time.time() < deadline:
            time.sleep(0.05)
        assert open_now == 1
    finally:
        for c in idle:
            c.close()
        assert s.stop() == 0


def test_sigterm_under_load_stops_cleanly():
    s = Server("--parallel", "4", "--grace", "0.5")
    outcomes = []

    def one():
        try:
            outcomes.append(s.call("POST", "/v1/completions", {"prompt": "The", "max_tokens": 1900, "stream": True})[0])
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            outcomes.append(repr(e))

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    start = time.time()
    assert s.stop() == 0, "".join(s.log)
    assert time.time() - start < 15
    for t in threads:
        t.join(TIMEOUT)
    assert len(outcomes) == 6
    assert "serve: stopped\n" in s.log

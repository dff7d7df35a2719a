"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests of the API backends.

It speaks the wire format the official ``openai`` client expects for
``POST /v1/chat/completions`` (optionally with ``logprobs``/``top_logprobs``) and
``POST /v1/images/generations`` (``b64_json`` PNGs), and records every request (headers
included) so tests can check what was sent. Behaviour is scripted per test:

* ``server.fail_next(status, times)``: answer the next ``times`` requests with an HTTP error
  (429, 500, 401, ...), to exercise the client's retries and our error rows;
* ``server.requests``: every request received, in order: ``path``, ``headers``, ``json`` (the
  body; the very object a reply function is given) and, for a POST, ``client`` (the client
  socket's ``(host, port)``, to find the process that sent it);
* ``server.delay_next(seconds, times)``: sleep before answering (timeouts);
* ``server.latency = seconds``: sleep before answering every request (a slower server of a
  fleet); ``server.kill()`` stops it mid-test (new connections are refused, requests
  already being answered still get their answer);
* ``server.echo_key_in_errors = True``: scripted errors quote the request's API key, as some
  proxies do ("invalid api key sk-..."), to check that error rows never store it;
* ``server.chat_reply = fn(request_json) -> str | dict``: the assistant text (or a full
  ``{"content": ..., "logprobs": [...]}`` dict) for a chat request;
* ``server.image_png = fn(request_json) -> bytes``: PNG bytes for an image request.
* ``server.completion_reply = fn(request_json) -> str``: the continuation of a text
  completion (``POST /v1/completions``, as llama-server and vLLM serve it);
  ``server.chat_only = True`` answers it 404, as a chat-only endpoint does;
* prompt-token log-probs of a text completion: ``echo=True`` with ``logprobs`` returns the
  prompt's tokens (:func:`stub_tokens`: a word with its leading spaces, or one other
  character), their ``text_offset`` and ``token_logprobs`` (:func:`stub_logprob`, a hash of the
  token, so a test computes the expected sum exactly; ``None`` for the first token, as OpenAI
  does); ``server.prompt_logprobs`` chooses what the server honours: ``"echo"`` (default),
  ``"vllm"`` (``echo`` ignored, vLLM's ``prompt_logprobs`` in the request body honoured) or
  ``"none"`` (both ignored: no prompt log-probs at all);
* ``server.malformed_next(kind, times)``: a 200 reply that is not usable: ``"no_choices"``
  (``choices: []``), ``"not_json"`` (an HTML body), ``"json_string"`` (a body that is one JSON
  string) or ``"choices_not_list"`` (``{"choices": "x"}``);
* ``GET /v1/models`` lists ``server.models``; ``GET /v1/models/{id}`` is 404 unless
  ``server.model_detail`` (llama-server has only the listing); an entry of ``server.models``
  is a name or a dict of fields (``owned_by``, llama-server's ``meta``, vLLM's ``root`` /
  ``max_model_len``, ...) over the defaults (``created`` 2025-01-01, ``owned_by: "stub"``);
  ``server.created_now = True`` makes ``created`` the request time, as llama-server and vLLM
  answer, read from ``server.clock`` (default ``time.time``; a test fakes the day with it);
* ``GET /props`` (at the server root, as llama-server serves it) answers ``server.props``
  (a dict; ``None``, the default: 404);
* ``OpenAIStubServer(port=p)`` binds a given port (restart a server at the same URL);
* capability probes (requests carrying dora's ``X-Dora-Probe`` header,
  :mod:`models_inference.backends.server_caps`) go to ``server.probe_requests``, not
  ``server.requests``, and consume no scripted failure, delay or malformed reply;
* ``server.constraints``: the choice constraints the stub honours on chat (``{"grammar",
  "structured_outputs", "guided_choice", "regex", "json_schema"}``; default none, i.e. it
  ignores them as a plain OpenAI-compatible server would): a constrained request is answered
  with ``server.constrained_reply(req, choices)`` (default: the choice with the highest
  :func:`stub_logprob`), and with ``logprobs`` every choice comes back among ``top_logprobs``
  (at most ``server.max_top_logprobs``, default 20, as OpenAI; more is HTTP 400);
* ``server.completion_batching = True``: ``/v1/completions`` honours ``n`` and a list of
  prompts (choice ``index`` = prompt * n + sample, each text ``completion_reply`` of a request
  with that one prompt); off (default), it answers the first prompt once, as a server that
  ignores both would.

Usage::

    with OpenAIStubServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Callable

from tests.helpers.local_http import api_base_url, local_server


def tiny_png(color=(200, 30, 30), size=(8, 8)) -> bytes:
    """A real PNG image of one colour (uses Pillow)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]|\s+$")


def stub_tokens(text: str) -> list[str]:
    """The stub's tokenisation: a word with its leading whitespace, or one other character
    with its leading whitespace (trailing whitespace is a token of its own). Joins to ``text``."""
    return _TOKEN.findall(text)


def stub_logprob(token: str) -> float:
    """The stub's log-probability of ``token``: ``-(1 + (first 2 bytes of its sha256) % 800) / 100``
    (two decimals, in [-8.0, -0.01]), whatever precedes it."""
    return -(1 + int.from_bytes(hashlib.sha256(token.encode()).digest()[:2], "big") % 800) / 100


class OpenAIStubServer:
    """Threaded HTTP server bound to 127.0.0.1 on a free port (see module docstring)."""

    def __init__(self, port: int = 0):
        self.requests: list[dict] = []
        self.chat_reply: Callable[[dict], object] = lambda req: "[brawler]"
        self.completion_reply: Callable[[dict], str] = lambda req: "rawler, and"
        self.chat_only = False
        self.prompt_logprobs = "echo"
        self.models: list[str] = ["stub-model"]
        self.model_detail = False
        self.props: dict | None = None
        self.created_now = False
        self.clock: Callable[[], float] = time.time
        self._malformed: list[str] = []
        self.image_png: Callable[[dict], bytes] = lambda req: tiny_png()
        self._failures: list[int] = []
        self.echo_key_in_errors = False
        self._delays: list[float] = []
        self.latency = 0.0
        self.probe_requests: list[dict] = []
        self.constraints: set[str] = set()
        self.constrained_reply: Callable[[dict, list], str] = lambda req, choices: max(choices, key=stub_logprob)
        self.max_top_logprobs = 20
        self.completion_batching = False
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, status: int, payload):
                self._send_raw(status, json.dumps(payload).encode())

            def _send_raw(self, status: int, body: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                with server._lock:
                    probe = self.headers.get("X-Dora-Probe") is not None
                    (server.probe_requests if probe else server.requests).append({"path": self.path, "headers": dict(self.headers), "json": None})
                if self.path.rstrip("/").endswith("/models"):
                    data = [server._model_entry(m) for m in server.models]
                    self._send(200, {"object": "list", "data": data})
                elif "/models/" in self.path and server.model_detail:
                    mid = self.path.split("/models/", 1)[1]
                    entry = next((e for e in map(server._model_entry, server.models) if e["id"] == mid), None)
                    self._send(200, entry or server._model_entry(mid))
                elif self.path.rstrip("/") == "/props" and server.props is not None:
                    self._send(200, server.props)
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                req = json.loads(self.rfile.read(length) or b"{}")
                probe = self.headers.get("X-Dora-Probe") is not None
                with server._lock:
                    record = {"path": self.path, "headers": dict(self.headers), "json": req, "client": self.client_address}
                    if probe:  # a capability probe: kept apart, and it consumes nothing scripted
                        server.probe_requests.append(record)
                        status, delay, malformed = None, 0.0, None
                    else:
                        server.requests.append(record)
                        status = server._failures.pop(0) if server._failures else None
                        delay = server._delays.pop(0) if server._delays else 0.0
                        malformed = server._malformed.pop(0) if server._malformed else None
                if delay or server.latency:
                    time.sleep(delay + server.latency)
                if status:
                    message = f"scripted {status}"
                    if server.echo_key_in_errors:
                        message += f" (invalid api key {self.headers.get('Authorization', '').removeprefix('Bearer ')})"
                    self._send(status, {"error": {"message": message, "type": "test", "code": str(status)}})
                    return
                if malformed == "not_json":
                    self._send_raw(200, b"<html><body>502 Bad Gateway</body></html>")
                    return
                if malformed in ("json_string", "choices_not_list"):
                    self._send(200, "upstream says: model is loading" if malformed == "json_string" else {"choices": "x"})
                    return
                if malformed == "no_choices":
                    self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "stub", "choices": []})
                    return
                if self.path.endswith("/completions") and not self.path.endswith("/chat/completions"):
                    if server.chat_only:
                        self._send(404, {"error": {"message": "This is a chat model and not supported in the v1/completions endpoint"}})
                    else:
                        self._send(200, server._completion(req))
                elif self.path.endswith("/chat/completions"):
                    if req.get("logprobs") and int(req.get("top_logprobs") or 0) > server.max_top_logprobs:
                        self._send(400, {"error": {"message": f"top_logprobs must be <= {server.max_top_logprobs}"}})
                    else:
                        self._send(200, server._chat(req))
                elif self.path.endswith("/images/generations"):
                    self._send(200, server._images(req))
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

        self._httpd, self._thread = local_server(Handler, port)

    @property
    def base_url(self) -> str:
        return api_base_url(self._httpd)

    def fail_next(self, status: int, times: int = 1) -> None:
        with self._lock:
            self._failures.extend([status] * times)

    def clear_failures(self) -> None:
        """Drop the scripted failures not served yet."""
        with self._lock:
            self._failures.clear()

    def delay_next(self, seconds: float, times: int = 1) -> None:
        with self._lock:
            self._delays.extend([seconds] * times)

    def kill(self) -> None:
        """Stop serving: the listening socket is closed (new connections are refused)."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def malformed_next(self, kind: str, times: int = 1) -> None:
        with self._lock:
            self._malformed.extend([kind] * times)

    def _model_entry(self, model: str | dict) -> dict:
        """One ``/v1/models`` entry: a name, or a dict of fields over the defaults."""
        fields = {"id": model} if isinstance(model, str) else dict(model)
        created = int(self.clock()) if self.created_now else 1735689600
        return {"object": "model", "created": created, "owned_by": "stub", **fields}

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def _completion(self, req: dict) -> dict:
        prompts = req.get("prompt", "")
        if self.completion_batching and (isinstance(prompts, list) or int(req.get("n") or 1) > 1):
            n = int(req.get("n") or 1)
            choices = []
            for p in prompts if isinstance(prompts, list) else [prompts]:
                for _ in range(n):
                    one = self._completion({**req, "prompt": p, "n": 1})["choices"][0]
                    choices.append({**one, "index": len(choices)})
            return {
                "id": f"cmpl-{len(self.requests)}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": req.get("model", "stub"),
                "choices": choices,
                "usage": {"prompt_tokens": 1, "completion_tokens": 2 * len(choices), "total_tokens": 1 + 2 * len(choices)},
            }
        prompt = prompts
        prompt = prompt[0] if isinstance(prompt, list) else prompt
        tokens = stub_tokens(prompt)
        values = [None] + [stub_logprob(t) for t in tokens[1:]]
        max_tokens = req.get("max_tokens")
        # the request object itself when it has one prompt (tests find it in server.requests by identity)
        one = req if req.get("prompt", "") == prompt else {**req, "prompt": prompt}
        text = "" if max_tokens == 0 else self.completion_reply(one)
        choice = {"index": 0, "text": text, "finish_reason": "length" if max_tokens == 0 else "stop", "logprobs": None}
        if req.get("echo") and req.get("logprobs") is not None and self.prompt_logprobs == "echo":
            offsets, at = [], 0
            for t in tokens:
                offsets.append(at)
                at += len(t)
            top = [None] + [{t: v} for t, v in zip(tokens[1:], values[1:], strict=True)]
            choice["text"] = prompt + text
            choice["logprobs"] = {"tokens": tokens, "token_logprobs": values, "top_logprobs": top, "text_offset": offsets}
        if req.get("prompt_logprobs") is not None and self.prompt_logprobs == "vllm":
            ids = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:3], "big") for t in tokens]
            choice["prompt_logprobs"] = [None] + [
                {str(i): {"logprob": v, "rank": 1, "decoded_token": t}} for i, t, v in zip(ids[1:], tokens[1:], values[1:], strict=True)
            ]
        return {
            "id": f"cmpl-{len(self.requests)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": req.get("model", "stub"),
            "choices": [choice],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": 0 if max_tokens == 0 else 2, "total_tokens": len(tokens) + 2},
        }

    def _constraint_choices(self, req: dict) -> tuple[str, list] | None:
        """(constraint, choices) of a chat request under a constraint the stub honours."""
        fmt = req.get("response_format") or {}
        schema = ((fmt.get("json_schema") or {}).get("schema") or {}) if fmt.get("type") == "json_schema" else {}
        found = {
            "grammar": re.findall(r'"((?:[^"\\]|\\.)*)"', req["grammar"]) if isinstance(req.get("grammar"), str) else None,
            "structured_outputs": (req.get("structured_outputs") or {}).get("choice"),
            "guided_choice": req.get("guided_choice"),
            "regex": req["regex"].strip("()").split("|") if isinstance(req.get("regex"), str) else None,
            "json_schema": ((schema.get("properties") or {}).get("answer") or {}).get("enum"),
        }
        for name, choices in found.items():
            if name in self.constraints and choices:
                return name, [re.sub(r"\\(.)", r"\1", c) for c in choices]
        return None

    def _chat(self, req: dict) -> dict:
        constrained = self._constraint_choices(req)
        if constrained is not None:
            name, choices = constrained
            answer = self.constrained_reply(req, choices)
            content = json.dumps({"answer": answer}) if name == "json_schema" else answer
            logprobs = None
            if req.get("logprobs"):
                top = [{"token": c, "logprob": stub_logprob(c), "bytes": None} for c in choices]
                top = sorted(top, key=lambda t: -t["logprob"])[: int(req.get("top_logprobs") or 0)]
                logprobs = [{"token": answer, "logprob": stub_logprob(answer), "bytes": None, "top_logprobs": top}]
            reply = {"content": content, "logprobs": logprobs}
        else:
            reply = self.chat_reply(req)
        content, logprobs = (reply.get("content"), reply.get("logprobs")) if isinstance(reply, dict) else (reply, None)
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        if logprobs is not None:
            choice["logprobs"] = {"content": logprobs}
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.get("model", "stub"),
            "system_fingerprint": "fp_stub",
            "choices": [choice],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }

    def _images(self, req: dict) -> dict:
        n = int(req.get("n", 1))
        data = [{"b64_json": base64.b64encode(self.image_png(req)).decode(), "revised_prompt": req.get("prompt")} for _ in range(n)]
        return {"created": int(time.time()), "data": data}

    def __enter__(self) -> "OpenAIStubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.kill()

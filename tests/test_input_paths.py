"""Every path dora reads from a user is refused in one line when it is not a regular file (or a
folder where one is wanted), before anything opens it: a FIFO must not hang a command. One
check does it (``ingestion/input_paths.py``): the family flags declared with ``path=``, a local
model path, ``dora audit --registry`` and ``dora models list --registry``, ``$DORA_REGISTRY``,
``dora batch import OUTPUT``."""

from __future__ import annotations

import os
import socket

import pytest

from ingestion.input_paths import path_problem
from orchestration import families as fam


@pytest.fixture
def paths(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file.txt").write_text("x\n")
    os.mkfifo(tmp_path / "fifo")  # opening it to read would block until a writer comes: never here
    (tmp_path / "broken").symlink_to(tmp_path / "gone")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    yield {name: str(tmp_path / name) for name in ("dir", "file.txt", "fifo", "broken", "sock", "missing")}
    sock.close()


@pytest.mark.parametrize(
    "name,kind,reason",
    [
        ("file.txt", "file", None),
        ("file.txt", "file_or_folder", None),
        ("dir", "folder", None),
        ("dir", "file_or_folder", None),
        ("fifo", "file", "not a regular file (a FIFO, socket or device); expected a file"),
        ("fifo", "file_or_folder", "not a regular file (a FIFO, socket or device); expected a file or folder"),
        ("fifo", "folder", "not a regular file (a FIFO, socket or device); expected a folder"),
        ("sock", "file", "not a regular file (a FIFO, socket or device); expected a file"),
        ("dir", "file", "is a folder; expected a file"),
        ("file.txt", "folder", "is a file; expected a folder"),
        ("missing", "file", "no such file"),
        ("broken", "file_or_folder", "no such file or folder (a broken symbolic link)"),
    ],
)
def test_the_one_check(paths, name, kind, reason):
    assert path_problem(paths[name], kind) == reason
    assert path_problem(paths[name], kind, "--flag") == (None if reason is None else f"--flag {paths[name]}: {reason}")


def test_a_char_device_is_not_a_file():
    assert path_problem("/dev/null", "file") == "not a regular file (a FIFO, socket or device); expected a file"


def test_an_unknown_kind_is_a_programming_error():
    with pytest.raises(ValueError, match="kind must be one of"):
        path_problem("x", "fiel")


@pytest.fixture
def no_command_runs(monkeypatch):
    """A path that is not refused would let the command run (an audit): fail at once instead."""
    import orchestration.cli

    monkeypatch.setattr(orchestration.cli, "call_reporting_errors", lambda handler, args: pytest.fail(f"{handler.__name__} ran"))


def _main(argv) -> int:
    from orchestration.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if not line.startswith(("usage:", " "))]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _path_flags():
    """(family, flag) of every family flag declared with ``path=``."""
    return [(f.name, flag.flag) for f in fam.FAMILIES for flag in f.flags if flag.path]


def test_the_registry_flag_is_a_path_flag():
    assert ("biasdora", "--registry") in _path_flags()


@pytest.mark.parametrize("family,flag", _path_flags(), ids=[f"{f}:{g}" for f, g in _path_flags()])
def test_every_path_flag_refuses_a_fifo(tmp_path, monkeypatch, capsys, paths, no_command_runs, family, flag):
    monkeypatch.setenv("DORA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    assert _main(["audit", "--family", family, flag, paths["fifo"]]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"dora audit: error: {flag} {paths['fifo']}: not a regular file"), line
    assert not (tmp_path / "dagster").exists()


@pytest.mark.timeout(120)  # before the fix the loader blocked on the FIFO: a hang fails here
def test_a_local_model_that_is_a_fifo_is_refused(tmp_path, monkeypatch, capsys, paths, no_command_runs):
    """It exists, so it used to pass as a model path, and the loader would block reading it."""
    monkeypatch.setenv("DORA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    assert _main(["audit", "--family", "biasdora", "--model", paths["fifo"]]) == 2
    assert (
        _one_error_line(capsys.readouterr().err)
        == f"dora audit: error: --model {paths['fifo']}: not a regular file (a FIFO, socket or device); expected a file or folder"
    )


def test_models_list_refuses_a_fifo_registry(tmp_path, monkeypatch, capsys, paths, no_command_runs):
    monkeypatch.setenv("DORA_HOME", str(tmp_path / "home"))
    assert _main(["models", "list", "--no-resolve", "--registry", paths["fifo"]]) == 2
    assert (
        _one_error_line(capsys.readouterr().err)
        == f"dora models: error: --registry {paths['fifo']}: not a regular file (a FIFO, socket or device); expected a file"
    )


def test_a_fifo_named_by_dora_registry_is_refused_unopened(monkeypatch, paths):
    from ingestion.errors import RegistryError
    from ingestion.registry import load_registry

    monkeypatch.setenv("DORA_REGISTRY", paths["fifo"])
    with pytest.raises(RegistryError, match="not a regular file"):
        load_registry()


@pytest.mark.timeout(120)  # before the fix read_text blocked on the FIFO for ever: a hang fails here
def test_batch_import_of_a_fifo_is_one_line_and_does_not_hang(tmp_path, monkeypatch, capsys, paths):
    """It used to block for ever in ``read_text``."""
    monkeypatch.setenv("DORA_HOME", str(tmp_path / "home"))
    assert _main(["batch", "import", paths["fifo"]]) == 2
    assert (
        _one_error_line(capsys.readouterr().err)
        == f"dora batch import: OUTPUT {paths['fifo']}: not a regular file (a FIFO, socket or device); expected a file"
    )
    assert _main(["batch", "import", paths["dir"]]) == 2
    assert _one_error_line(capsys.readouterr().err) == f"dora batch import: OUTPUT {paths['dir']}: is a folder; expected a file"

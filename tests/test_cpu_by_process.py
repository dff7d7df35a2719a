"""scripts/cpu_by_process.py: the process kinds, and the CPU of a child it must see."""

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "cpu_by_process.py"
spec = importlib.util.spec_from_file_location("cpu_by_process", SCRIPT)
cpu_by_process = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpu_by_process)


def test_command_lines_get_their_kind():
    kind = cpu_by_process.kind_of
    assert kind("/r/.venv/bin/python -u -c import sys;exec(eval(sys.stdin.readline())) ") == "pytest workers (tests in process)"
    assert kind("/r/.venv/bin/python -m orchestration.cli audit --family biasdora ") == "dora commands"
    assert kind("/r/.venv/bin/python3 /r/.venv/bin/dora query select 1 ") == "dora commands"
    assert kind("/r/.venv/bin/python /r/.venv/bin/dbt build --select tag:scores ") == "dbt processes"
    assert kind("/r/.venv/bin/python -m dagster_webserver -p 3000 ") == "Dagster processes (steps, UI, daemon, code server)"
    assert kind("/usr/bin/redis-server 127.0.0.1:6380 ") == "servers (moto, PostgreSQL, Redis)"
    assert kind("sleep 1 ") == "other"


def test_a_grandchild_that_burns_cpu_is_counted(capsys):
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    # the grandchild (python under bash) is the one that burns: the tree is followed, not only the child
    status = cpu_by_process.main(["--interval", "0.05", "--", "bash", "-c", f'{sys.executable} -c "{burn}"; exit 3'])
    out = capsys.readouterr().out
    assert status == 3
    other = next(line for line in out.splitlines() if line.endswith(" other"))
    assert float(other.split()[0]) >= 0.5, out

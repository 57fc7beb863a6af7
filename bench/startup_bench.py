"""CPU time of starting a ``cove`` command, as a fresh process each time.

Measured per command (median of ``--rounds`` runs, user + system CPU of the child process):
a bare interpreter, ``cove --version``, ``cove --help``, ``cove list``, ``cove show ID`` (on a
database holding one conversation), and ``cove run`` up to its first request: the fake model
endpoint (in this process) reads the ``cove run`` process's CPU time from ``/proc`` when the
request arrives, then answers.

Targets (issue #29): ``--version``, ``list``, ``show`` <= 0.12 s; ``cove run`` <= 0.45 s before
its first request. The machine may be shared: the figures are upper bounds.

Run: ``.venv/bin/python bench/startup_bench.py [--rounds 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.openai_server import FakeOpenAI

COVE = [sys.executable, "-m", "cove"]
TICKS = os.sysconf("SC_CLK_TCK")
TARGETS = {"--version": 0.12, "list": 0.12, "show": 0.12, "run (to its request)": 0.45}


def cpu_of(argv: Sequence[str], env: Mapping[str, str]) -> float:
    """User + system CPU seconds of one run of ``argv``."""
    process = subprocess.Popen(argv, env=dict(env), cwd=env["HOME"], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}")
    return usage.ru_utime + usage.ru_stime


def proc_cpu(pid: int) -> float:
    """CPU seconds process ``pid`` has used so far (``/proc/PID/stat``: utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_to_request(env: Mapping[str, str], fake: FakeOpenAI) -> float:
    """CPU seconds ``cove run`` used before its first model request reached the endpoint."""
    seen: list[float] = []
    pid = 0

    def answer(body: Mapping[str, Any]) -> Mapping[str, Any]:
        if not seen:
            seen.append(proc_cpu(pid))
        return {"thinking": "", "code": [], "answer": "four"}

    fake.respond_with(answer)
    process = subprocess.Popen(
        [*COVE, "run", "2 + 2?"], env=dict(env), cwd=env["HOME"], stdout=subprocess.DEVNULL
    )
    pid = process.pid
    if process.wait(timeout=120) != 0:
        raise RuntimeError(f"cove run exited {process.returncode}")
    return seen[0]


def main(argv: Sequence[str] | None = None) -> None:
    """Measure each command and print the medians against the targets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]  # CPU times grow on a loaded machine (caches, frequency)
    with tempfile.TemporaryDirectory(prefix="cove-bench-") as tmp, FakeOpenAI() as fake:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "COVE_DATA_DIR": tmp,
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "COVE_MODEL": "fake-model",
            # To measure another checkout with this script: PYTHONPATH=/path/to/checkout.
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        }
        subprocess.run([*COVE, "exec", "x = 1"], env=env, cwd=tmp, check=True, capture_output=True)
        listed = subprocess.run(
            [*COVE, "list", "--json"], env=env, cwd=tmp, check=True, capture_output=True, text=True
        )
        conversation = json.loads(listed.stdout)[0]["id"]
        commands: dict[str, Sequence[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "--version": [*COVE, "--version"],
            "--help": [*COVE, "--help"],
            "list": [*COVE, "list"],
            "show": [*COVE, "show", conversation],
        }
        figures: dict[str, list[float]] = {name: [] for name in [*commands, *TARGETS]}
        for _ in range(args.rounds):  # interleaved, so load hits every command alike
            for name, command in commands.items():
                figures[name].append(cpu_of(command, env))
            figures["run (to its request)"].append(run_to_request(env, fake))
    print(
        f"CPU seconds per start, median of {args.rounds} (user + system); load average "
        f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end on {os.cpu_count()} cores"
    )
    for name, values in figures.items():
        median = statistics.median(values)
        target = TARGETS.get(name)
        verdict = "" if target is None else f"  target <= {target:.2f}: "
        verdict += "" if target is None else ("met" if median <= target else "NOT met")
        print(f"  {name:<22} {median:6.3f} s  (min {min(values):.3f}){verdict}")


if __name__ == "__main__":
    main()

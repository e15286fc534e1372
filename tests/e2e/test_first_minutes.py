"""The first minutes of a new user: scripts/quickstart and scripts/test check their prerequisites
before they install or build anything, and say what is missing."""
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A python3 that reports 3.10.12, as an older system Python first on PATH would.
OLD_PYTHON = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "Python 3.10.12"; exit 0; fi
if [ "$1" = "-c" ]; then
  exec "{real}" -c "import sys; sys.version_info = (3, 10, 12, 'final', 0); exec(sys.argv[1])" "$2"
fi
exec "{real}" "$@"
"""


def with_old_python(tmp_path: Path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = subprocess.run(["sh", "-c", "command -v python3"], capture_output=True, text=True, check=True).stdout.strip()
    fake = bin_dir / "python3"
    fake.write_text(OLD_PYTHON.format(real=real))
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PEERS=str(tmp_path / "peers"))
    return env


def test_quickstart_with_python_3_10_stops_first_and_names_3_11(tmp_path):
    env = with_old_python(tmp_path)
    run = subprocess.run([str(ROOT / "scripts" / "quickstart")], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert "Python 3.11" in last, run.stderr
    assert "3.10.12" in run.stderr
    # Nothing was installed or built before the check.
    assert not (tmp_path / "peers").exists()
    assert "[1/5]" not in run.stderr


def test_the_tests_check_their_prerequisites_too(tmp_path):
    env = with_old_python(tmp_path)
    run = subprocess.run([str(ROOT / "scripts" / "test")], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "Python 3.11" in run.stderr.strip().splitlines()[-1], run.stderr
    assert not (tmp_path / "peers").exists()


def test_the_model_fetch_alone_names_python_3_11(tmp_path):
    env = with_old_python(tmp_path)
    env["META_SERVER_EMBED_DIR"] = str(tmp_path / "embed")
    run = subprocess.run([str(ROOT / "scripts" / "fetch-embed-assets")], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "Python 3.11" in run.stderr and "3.10.12" in run.stderr, run.stderr
    assert not (tmp_path / "embed").exists()

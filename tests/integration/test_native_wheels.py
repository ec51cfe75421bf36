"""scripts/build-native-wheels: the lakesink-native wheel a cluster installs is a manylinux2014, abi3 wheel, and a fresh
environment with only that wheel runs its kernels (the JSON check, a side-file kernel)."""
from __future__ import annotations

import os
import re
import subprocess
import tomllib
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_x86_64_wheel_is_manylinux2014_abi3_and_runs_in_a_fresh_environment(tmp_path):
    out = tmp_path / "dist"
    done = subprocess.run([str(ROOT / "scripts" / "build-native-wheels")], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "OUT": str(out)})
    assert done.returncode == 0, done.stderr[-3000:]
    wheels = sorted(out.glob("lakesink_native-*.whl"))
    version = tomllib.loads((ROOT / "native" / "pyproject.toml").read_text())["project"]["version"]
    assert [w.name for w in wheels] == [
        f"lakesink_native-{version}-cp310-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"], wheels
    with zipfile.ZipFile(wheels[0]) as z:
        (so,) = [n for n in z.namelist() if n.endswith(".so")]
        elf = z.read(so)
    assert elf[:4] == b"\x7fELF" and int.from_bytes(elf[18:20], "little") == 62  # EM_X86_64
    # no symbol of a glibc newer than manylinux2014's 2.17
    versions = {v.decode() for v in re.findall(rb"GLIBC_([0-9.]+)", elf)}
    assert versions and all(tuple(map(int, v.split("."))) <= (2, 17) for v in versions), versions

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    pip = subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
                          str(wheels[0])], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-3000:]
    code = ("import struct, lakesink_native as n\n"
            "print(n.proven_mask(b'{\"a\":1}{\"a\": 1}[1.5]', struct.pack('<4q', 0, 7, 15, 20)).hex())\n"
            "data, ends = n.avro_bytes_datums(b'kab', struct.pack('<3q', 0, 1, 3))\n"
            "print(data.hex(), struct.unpack('<3q', ends))\n")
    run = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.splitlines() == ["010001", "026b046162 (0, 2, 5)"], run.stderr[-3000:]

"""nvcc for the bundle: one object per generated source, then one shared library.

Every object keeps only its three host-stub symbols as strong globals (the TileLang headers define
a few non-inline helpers that would otherwise collide at link). The library links the CUDA runtime
statically and not libcuda: the TMA descriptors reach the driver through the runtime's
entry-point query, so the library needs only libc/libstdc++ on the GPU machine, and building it
needs nvcc but no GPU or driver.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

COMMON_FLAGS = ["-std=c++20", "-w", "-Xcudafe", "--diag_suppress=177", "-lineinfo", "-Xcompiler", "-fPIC"]


class ToolMissing(RuntimeError):
    """nvcc or objcopy is not on PATH."""


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolMissing(f"{name} not found on PATH: the bundle build needs the CUDA toolkit (nvcc) and binutils")
    return path


def nvcc_version() -> str:
    out = subprocess.run([tool("nvcc"), "--version"], check=True, capture_output=True, text=True).stdout
    m = re.search(r"release [\d.]+, V([\d.]+)", out)
    return m.group(1) if m else out.strip().splitlines()[-1]


def arch_flags(arch: str) -> list[str]:
    """`-gencode` for sm_90a: the `-arch=sm_90a` shorthand can add an sm_90 pass that rejects wgmma."""
    return ["-gencode", f"arch=compute_{arch.removeprefix('sm_')},code={arch}"]


def include_dirs() -> list[str]:
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH

    return [f"-I{TILELANG_TEMPLATE_PATH}", f"-I{CUTLASS_INCLUDE_DIR}"]


def compile_object(source: Path, obj: Path, *, arch: str, fast_math: bool, extra: list[str], keep: list[str]) -> None:
    """nvcc -c SOURCE -o OBJ for sm_90a, then make every global symbol but `keep` local."""
    cmd = [tool("nvcc"), *COMMON_FLAGS, *arch_flags(arch), *include_dirs(), *extra, "-c", str(source), "-o", str(obj)]
    if fast_math:
        cmd.append("--use_fast_math")
    run(cmd, what=f"compiling {source.name}")
    clashing = sorted(strong_globals(obj) - set(keep))
    if clashing:
        run([tool("objcopy"), *(f"--localize-symbol={s}" for s in clashing), str(obj)], what=f"localizing {obj.name}")


def strong_globals(obj: Path) -> set[str]:
    """Global symbols an object defines strongly (weak/COMDAT ones the linker merges by itself)."""
    out = subprocess.run(
        [tool("nm"), "-g", "--defined-only", str(obj)], check=True, capture_output=True, text=True
    ).stdout
    return {parts[2] for parts in map(str.split, out.splitlines()) if len(parts) == 3 and parts[1] in "TDBR"}


def link_library(objects: list[Path], library: Path, *, arch: str) -> None:
    """One shared library from the objects; undefined symbols are an error, not a surprise at load."""
    cmd = [
        tool("nvcc"),
        "--shared",
        *arch_flags(arch),
        "-cudart",
        "static",
        "-Xlinker",
        "--no-undefined",
        *map(str, objects),
        "-o",
        str(library),
    ]
    run(cmd, what=f"linking {library.name}")


def exported_symbols(library: Path) -> set[str]:
    out = subprocess.run(
        [tool("nm"), "-D", "--defined-only", str(library)], check=True, capture_output=True, text=True
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def run(cmd: list[str], *, what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n$ {' '.join(cmd)}\n{done.stdout}{done.stderr}")

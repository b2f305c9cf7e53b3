"""TileLang's generated source for one kernel, and the host-stub ABI check against the manifest.

TileLang 0.1.14's cython backend wraps each kernel in one CUDA source holding the device kernel(s)
and a plain C host stub: `extern "C" int init()`, `extern "C" int call(<buffers>, <scalars>,
<dynamic dims>, cudaStream_t stream)` and `extern "C" const char* get_last_error()`. We take that
source without letting TileLang compile or load it (loading needs a GPU), check the stub's
signature against the signature the manifest declares, and rename the stub's and the kernels'
symbols per entry so that many kernels can live in one library. Any layout other than the one
described here fails the build with a message saying what differs: nothing is guessed.
"""

from __future__ import annotations

import re

import tilelang
from tilelang import tvm
from tilelang.jit.adapter.wrapper import TLWrapper
from tvm.target import Target

from bundle.manifest import Arg

STUB_FUNCTIONS = {  # generated name -> suffix of the renamed symbol
    "init": "init",
    "call": "call",
    "get_last_error": "get_last_error",
}
_STUB = re.compile(r'extern "C" TL_EXPORT (?:int|const char\*) (init|call|get_last_error)\(([^)]*)\)\s*\{')
_KERNEL = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(')


class AbiMismatch(RuntimeError):
    """The host stub TileLang generated differs from what the manifest declares."""


def declared_signature(prim_func) -> tuple[tuple[Arg, ...], tuple[str, ...]]:
    """The arguments and dynamic dimensions of a prim_func, as the manifest records them."""
    args = []
    dims: list[str] = []
    for param in prim_func.params:
        if param in prim_func.buffer_map:
            buf = prim_func.buffer_map[param]
            shape = tuple(int(d) if isinstance(d, tvm.tirx.IntImm) else str(d.name) for d in buf.shape)
            dims += [d for d in shape if isinstance(d, str) and d not in dims]
            args.append(Arg(buf.name, str(buf.dtype), shape))
        else:
            args.append(Arg(str(param.name), str(param.dtype)))
    return tuple(args), tuple(dims)


def generate(prim_func, *, pass_configs: dict, arch: str) -> str:
    """TileLang's CUDA source (kernel + host stub) for sm_`arch`, compiled by nobody yet."""
    target = Target({"kind": "cuda", "arch": arch})
    with tvm.transform.PassContext(opt_level=3, config=pass_configs), target:
        artifact = tilelang.lower(prim_func, target=target)
    wrapper = TLWrapper(target)
    wrapper.assign_optimized_module(tvm.IRModule({prim_func.attrs["global_symbol"]: prim_func}))
    wrapper.assign_pass_configs(pass_configs)
    wrapper.assign_host_module(artifact.host_mod)
    wrapper.assign_device_module(artifact.device_mod)
    return wrapper.wrap(artifact.kernel_source)


def stub_params(source: str) -> dict[str, list[str]]:
    """The parameter lists of init, call and get_last_error in a generated source."""
    found: dict[str, list[str]] = {}
    for name, params in _STUB.findall(source):
        if name in found:
            raise AbiMismatch(f"host stub defines {name}() twice")
        found[name] = [" ".join(p.split()) for p in params.split(",") if p.strip()]
    missing = sorted(set(STUB_FUNCTIONS) - set(found))
    if missing:
        raise AbiMismatch(f"host stub has no {', '.join(missing)}(): TileLang's stub layout changed")
    return found


def check_abi(entry_name: str, source: str, expected_call: list[str]) -> None:
    """Raise AbiMismatch naming every difference between the stub and the declared signature."""
    params = stub_params(source)
    problems = []
    if params["init"] or params["get_last_error"]:
        problems.append(f"init/get_last_error take arguments: {params['init']} / {params['get_last_error']}")
    call = params["call"]
    if call != expected_call:
        for i in range(max(len(call), len(expected_call))):
            got = call[i] if i < len(call) else "(nothing)"
            want = expected_call[i] if i < len(expected_call) else "(nothing)"
            if got != want:
                problems.append(f"call() parameter {i}: generated `{got}`, manifest declares `{want}`")
    if problems:
        raise AbiMismatch(f"{entry_name}: TileLang's host stub differs from the manifest:\n  " + "\n  ".join(problems))


_PDL_ALLOWED = re.compile(r"\.programmaticStreamSerializationAllowed = 1;")
_LAUNCH = re.compile(r"\bcudaLaunchKernelEx\(")
_KERNEL_BODY = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\([^;{]*\{')
_WAIT = "cudaGridDependencySynchronize();"
_LET_NEXT_START = "cudaTriggerProgrammaticLaunchCompletion();"
_CONSUMER_REGISTERS = "warpgroup_reg_alloc<"  # a warp-specialized kernel's consumers taking their registers


def check_dependent_launches(source: str, symbol: str) -> None:
    """Every launch is a programmatic dependent launch, every kernel body waits for its predecessor
    (`cudaGridDependencySynchronize`, which `kernels.common.wait_for_previous_kernel` puts first), and a
    warp-specialized kernel lets the next one start only after its main loop (`let_next_kernel_start`).

    TileLang's stub launches each kernel as a programmatic dependent launch: its blocks may start before
    the previous kernel in the stream has finished, which hides a launch's latency. A kernel that read its
    inputs without waiting (griddepcontrol.wait) would, behind a kernel that signals early as cuBLAS's
    GEMMs do, read an output before it is written (seen on the H200: wrong answers in CUDA graphs). Warp-specialized
    kernels that let the next start at their top hung the pass with our accumulating GEMMs in it (docs/kernels.md);
    in the source, such a signal comes before the consumers take their registers.

    :raise AbiMismatch: a launch without the attribute (the stub's layout changed), a kernel without the wait, or a
        warp-specialized kernel that lets the next start before its consumers take their registers.
    """
    launches = len(_LAUNCH.findall(source))
    if launches == 0 or len(_PDL_ALLOWED.findall(source)) != launches:
        raise AbiMismatch(
            f"{symbol}: expected one programmatic-serialization attribute per launch ({launches} launches): "
            "TileLang's stub layout changed"
        )
    bodies = list(_KERNEL_BODY.finditer(source))
    for i, kernel in enumerate(bodies):
        body = source[kernel.end() : bodies[i + 1].start() if i + 1 < len(bodies) else len(source)]
        if _WAIT not in body:
            raise AbiMismatch(
                f"{symbol}: kernel {kernel.group(1)} never waits for its predecessor ({_WAIT}): "
                "start it with T.pdl_sync()"
            )
        consumers = body.find(_CONSUMER_REGISTERS)  # -1: a kernel without warp roles
        if consumers >= 0 and _LET_NEXT_START in body[:consumers]:
            raise AbiMismatch(
                f"{symbol}: kernel {kernel.group(1)} is warp-specialized and lets the next kernel start before "
                "its main loop: call let_next_kernel_start() after it"
            )


def rename(source: str, symbol: str) -> str:
    """The source with init/call/get_last_error renamed to <symbol>_* and each kernel to <symbol>_kernel[N]."""
    kernels = list(dict.fromkeys(_KERNEL.findall(source)))
    if not kernels:
        raise AbiMismatch(f'{symbol}: no extern "C" __global__ kernel in the generated source')
    for i, kernel in enumerate(kernels):
        new = f"{symbol}_kernel" + (str(i) if len(kernels) > 1 else "")
        source = re.sub(rf"\b{re.escape(kernel)}\b", new, source)

    def stub(m: re.Match) -> str:
        return m.group(0).replace(f" {m.group(1)}(", f" {symbol}_{STUB_FUNCTIONS[m.group(1)]}(", 1)

    renamed = _STUB.sub(stub, source)
    if len(_STUB.findall(renamed)) != 0:
        raise AbiMismatch(f"{symbol}: some host-stub functions kept their generated names")
    return renamed

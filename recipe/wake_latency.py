"""What waking a sleeping process costs on this host: a ping-pong between two processes, blocking against spinning.

    python -m recipe.wake_latency --output wake.json [--samples 5000]

Two processes pass one byte back and forth over a socket pair. In the "blocking" series both sleep in
recv until the byte arrives (the kernel wakes them, as Redis, the worker and the API wait for each
other); in the "spinning" series the answering process polls its socket without sleeping, so the
round trip holds one wake-up fewer. The difference is about what one wake-up of an idle process costs
here, which on a virtual machine can be most of a Redis round trip, and grows with how long the core
slept (--idle-ms). Writes every sample (us) to --output.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import time


def _answer(sock: socket.socket, samples: int, spin: bool) -> None:
    sock.setblocking(not spin)
    for _ in range(samples):
        while True:
            try:
                byte = sock.recv(1)
                break
            except BlockingIOError:
                continue
        sock.send(byte)


def series(samples: int, *, spin: bool, idle_s: float) -> list[float]:
    """Round trip times in us, the answering process blocking or spinning, `idle_s` between two."""
    ours, theirs = socket.socketpair()
    child = multiprocessing.Process(target=_answer, args=(theirs, samples, spin))
    child.start()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        ours.send(b"x")
        ours.recv(1)
        times.append((time.perf_counter() - t0) * 1e6)
        time.sleep(idle_s)  # an idle core goes to sleep, as between requests
    child.join()
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument(
        "--idle-ms",
        type=float,
        nargs="+",
        default=[0.5, 2.0],
        help="time between two round trips, one series each (default: 0.5 2)",
    )
    parser.add_argument("--output", required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    result = {"cpus": os.cpu_count(), "load": os.getloadavg()}
    for idle_ms in args.idle_ms:
        for spin in (False, True, False, True):
            name = f"{'spinning' if spin else 'blocking'}, {idle_ms:g} ms idle"
            times = series(args.samples, spin=spin, idle_s=idle_ms / 1000)
            result.setdefault(name, []).append(times)
            print(f"{name}: p50 {statistics.median(times):.1f} us, p90 {statistics.quantiles(times, n=10)[-1]:.1f} us")
    with open(args.output, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()

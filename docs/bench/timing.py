"""What the benchmark scripts here share: the CPU they ran on, and the
median whole-process time of a command after one warm-up run."""

import pathlib
import statistics
import subprocess
import time


def cpu_model():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def timed(command, repeat):
    subprocess.run(command, check=True, capture_output=True)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)

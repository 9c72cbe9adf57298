"""The memory limit of a process that runs submitted code (a room, the zygote it comes from)."""
from __future__ import annotations

import re
from pathlib import Path


def limit_memory(torch, gigabytes: float) -> None:
    """Cap this process's address space at what torch already maps plus `gigabytes`, so a huge
    allocation in user code fails with an error instead of taking the machine. Not under CUDA,
    which reserves huge address ranges of its own."""
    import resource
    if torch.cuda.is_available():
        return
    try:
        vm = int(re.search(r"VmSize:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024
        limit = vm + int(gigabytes * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError, AttributeError):
        pass

"""The memory limit of a process: a room or the zygote it comes from (hard: the code in it cannot raise
it), or the judge (soft: the rooms it starts set their own below the hard limit)."""
from __future__ import annotations

import re
from pathlib import Path


def limit_memory(torch, gigabytes: float, hard: bool = True) -> None:
    """Cap this process's address space at what torch already maps plus `gigabytes`, so a huge
    allocation fails with MemoryError instead of taking the machine. Not under CUDA, which reserves
    huge address ranges of its own."""
    import resource
    if torch.cuda.is_available():
        return
    try:
        vm = int(re.search(r"VmSize:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024
        limit = vm + int(gigabytes * (1 << 30))
        top = limit if hard else resource.getrlimit(resource.RLIMIT_AS)[1]
        if top != resource.RLIM_INFINITY and top < limit:
            limit = top
        resource.setrlimit(resource.RLIMIT_AS, (limit, top))
    except (OSError, ValueError, AttributeError):
        pass


def give_back_freed_memory() -> None:
    """Memory freed by the code goes back to the system at once (glibc's trim threshold 0), so the
    resident size the kernel measures follows what the code holds, not what the allocator kept from
    earlier calls. For a room whose peak memory is measured (a few MiB of noise instead of ~15)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.mallopt(-1, 0)                       # M_TRIM_THRESHOLD: the heap's free top goes back
        libc.mallopt(-3, 128 << 10)               # M_MMAP_THRESHOLD at glibc's default, no longer raised
                                                  # by earlier frees: a big block is unmapped when freed
    except (OSError, AttributeError):
        pass                                      # not glibc: the peak is noisier, still measured

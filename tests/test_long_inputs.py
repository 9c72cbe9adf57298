"""A solution that is right only on short inputs must fail the default cases.

The cheat: the reference, with every tensor it returns replaced by zeros whenever an input is
"long": a tensor's non-batch size, the largest value of an integer tensor (lengths, offsets,
positions), or an integer argument reaches a threshold. If some default case is
longer than the threshold, the cheat fails; this holds for every problem with tensor outputs, at
thresholds from 12 (the shortest "long" case the seed document's problems used to lack) to 64.
"""

import pytest

from attn_drill import bank
from attn_drill.bank import sources

# zeros from 64 up fail only if some default case reaches 64; zeros from 12 up then fail too (a case of
# 64 is one of 12), so one grading at the larger threshold proves both
THRESHOLDS = (12, 64)

WRAPPER = '''

import torch as cheat_torch


def cheat_big(args, limit):
    for v in args:
        if isinstance(v, cheat_torch.Tensor) and any(s >= limit for s in v.shape[1:]):
            return True
        if isinstance(v, cheat_torch.Tensor) and v.dtype in (cheat_torch.int32, cheat_torch.int64) and v.numel() \
                and int(v.max()) >= limit:        # lengths and offsets: context_lens, cu_seqlens, positions
            return True
        if isinstance(v, int) and not isinstance(v, bool) and v >= limit:
            return True
        if isinstance(v, (list, tuple)) and cheat_big(v, limit):
            return True
    return False


def cheat_zero(out):
    if isinstance(out, cheat_torch.Tensor):
        return out * 0 if out.is_floating_point() else cheat_torch.zeros_like(out)
    if isinstance(out, tuple):
        return tuple(cheat_zero(o) for o in out)
    if isinstance(out, list):
        return [cheat_zero(o) for o in out]
    return out


def cheat(fn, limit):
    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        return cheat_zero(out) if cheat_big(list(args) + list(kwargs.values()), limit) else out
    return wrapped
'''

# what these problems return is not a tensor: a figure, two integers, a unit test
NOT_TENSORS = {"attention_heatmap", "attention_cost", "mha_unit_test"}


def cheat_source(pid: str, limit: int) -> str:
    spec = bank.get(pid)
    lines = [sources.read(bank.reference_path(pid)), WRAPPER]
    for name in spec.interface:
        if spec.kind == "module" or name[:1].isupper():
            lines.append(f"{name}.forward = cheat({name}.forward, {limit})")
        else:
            lines.append(f"{name} = cheat({name}, {limit})")
    return "\n".join(lines) + "\n"



@pytest.mark.parametrize("pid", [p for p in bank.ids() if p not in NOT_TENSORS])
def test_right_only_on_short_inputs_fails(judge, pid, tmp_path):
    limit = max(THRESHOLDS)
    path = tmp_path / f"{pid}.py"
    path.write_text(cheat_source(pid, limit), encoding="utf-8")
    r = judge.grade(pid, str(path), 0, fail_fast=True, diagnose=False, time_limit=60)
    assert r.status != "pass", f"zeros from size {limit} up pass every default case of {pid}"

"""Probes for `mixed_precision` (they run beside the submission and hold no answers)."""
import warnings

import torch

from attn_drill.room.tracer import OpTracer


def autocast_forward(p):
    """One forward with float32 master weights and input (the module must turn autocast on itself):
    the output, the dtypes the projections' matmuls ran in, and what warnings it raised."""
    m = p.build().eval()
    x = p.inputs["x"]
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught, OpTracer() as t:
        warnings.simplefilter("always")
        out = m(x)
    mm = [str(o.in_dtypes[-1]).replace("torch.", "") for o in t.ops
          if o.name.startswith(("aten.mm.", "aten.addmm.")) and o.in_dtypes]
    return {"out": out, "mm": mm,
            "warnings": [[w.category.__name__, str(w.message)[:300]] for w in caught][:20]}

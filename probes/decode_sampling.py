"""Probes for `decode_sampling` (they run beside the submission and hold no answers).

TinyLM is the model the statement describes: one causal attention layer over learned token and
position embeddings, with a KV cache, built from weights the case gives. The probes hand it to
`generate`:

run           generate(model, prompt, uniforms, **kwargs) -> (tokens, probs)
calls         the same, and the (length, start_pos) of every model call it made
distribution  one call with many copies of one prompt and seeded uniforms: what it drew"""
import torch

from attn_drill.room import kit


TinyLM = kit.TinyLM


def _model(p, log: list | None = None) -> TinyLM:
    return TinyLM(p.args["weights"], p.args["num_heads"], p.dtype, log)


def run(p):
    model = _model(p)
    return p.target(model, p.inputs["prompt"].clone(), p.inputs["uniforms"], **p.kwargs)


def calls(p):
    log = []                  # the model's record of its calls: held here, out of the submission's reach
    model = _model(p, log)
    out = p.target(model, p.inputs["prompt"].clone(), p.inputs["uniforms"], **p.kwargs)
    tokens = out[0] if isinstance(out, (tuple, list)) and out else out
    return {"calls": log, "tokens": tokens if isinstance(tokens, torch.Tensor) else None}


def distribution(p):
    """p.args: copies (how many rows share the one prompt), steps. The uniforms come from the case's
    seeded generator, here."""
    model = _model(p)
    copies, steps = int(p.args["copies"]), int(p.args["steps"])
    prompt = p.inputs["prompt"].expand(copies, -1).contiguous()
    u = torch.rand(copies, steps, generator=p.generator(), dtype=torch.float64).to(p.dtype)
    out = p.target(model, prompt, u, **p.kwargs)
    tokens = out[0] if isinstance(out, (tuple, list)) and out else out
    probs = out[1] if isinstance(out, (tuple, list)) and len(out) > 1 else None
    return {"tokens": tokens if isinstance(tokens, torch.Tensor) else None,
            "probs": probs if isinstance(probs, torch.Tensor) else None}

"""Probes for `softcap_qknorm` (they run beside the submission and hold no answers)."""
import torch


def with_params(p):
    """Set the parameters named in p.args["params"] (the QK-norm weights) to the given values: as built
    they are ones, and with unit weights a norm after RoPE would give the same answer as one before it.
    Then call the module on the case's inputs."""
    own = dict(p.impl.named_parameters())
    with torch.no_grad():
        for name, value in p.args["params"].items():
            if name not in own:
                raise AttributeError(f"the module has no parameter `{name}`; name it as the statement says")
            own[name].copy_(value)
    return p.impl(*p.inputs.values(), **p.kwargs)


def as_built(p):
    """The QK-norm weights as the module's own __init__ leaves them (nothing copied in)."""
    own = dict(p.build(params=False).named_parameters())
    return {name: (own[name].detach().clone() if name in own else None) for name in ("q_norm.weight", "k_norm.weight")}

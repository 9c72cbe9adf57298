"""Probes for `gated_deltanet` (they run beside the submission and hold no answers)."""


def forms(p):
    """The recurrent form, then the chunked form at each chunk size of p.args["chunks"], on the same
    inputs: a list of [output, final state] pairs."""
    args = list(p.inputs.values())
    got = [list(p.module.gated_delta_recurrent(*args, **p.kwargs))]
    for c in p.args["chunks"]:
        got.append(list(p.module.gated_delta_chunked(*args, chunk_size=c, **p.kwargs)))
    return got

"""Probes for `speculative_decoding` (they run beside the submission and hold no answers).

`draw` makes many independent verification calls at once, with the same target and draft rows in
every call: the drafts are drawn from the draft rows and the uniforms from the case's seeded
generator, here. The statistics are done by the grader's check, on what comes back."""
import torch


def draw(p):
    """p.args: target (G + 1, V) and draft (G, V) probability rows, calls (how many rows B)."""
    target, draft, calls = p.args["target"].double(), p.args["draft"].double(), int(p.args["calls"])
    G, V = draft.shape
    gen = p.generator()
    drafts = torch.stack([torch.multinomial(draft[i], calls, replacement=True, generator=gen)
                          for i in range(G)], dim=1)                              # (calls, G): x_i ~ q_i
    u_accept = torch.rand(calls, G, generator=gen, dtype=torch.float64).to(p.dtype)
    u_sample = torch.rand(calls, generator=gen, dtype=torch.float64).to(p.dtype)
    q = draft.to(p.dtype).expand(calls, G, V).contiguous()                        # (calls, G, V)
    pt = target.to(p.dtype).expand(calls, G + 1, V).contiguous()                  # (calls, G + 1, V)
    tokens, num_accepted = p.target(drafts.clone(), q, pt, u_accept, u_sample)
    return {"tokens": tokens, "num_accepted": num_accepted, "drafts": drafts}

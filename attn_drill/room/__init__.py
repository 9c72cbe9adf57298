"""The room: everything that runs in the same process as code under judgement.

A room is a process forked from a zygote that imported torch and this package, and nothing of the
problem bank: no reference, no grader, no mutant is ever imported, read or reachable here. It
receives one problem's data (case inputs, parameters, upstream gradients, probe code that holds no
answers), runs the submission, and sends back what happened as data (outputs, gradients, the ops it
ran). The judge, in another process, decides what that data is worth.

Modules: wire (framed messages), guards (fused kernels blocked at dispatch level, Python
tripwires, the audit hook), tracer (the op recorder), usercode (loading a file, its frames),
params (copying reference parameters by name and shape), side (running one side of a case, shared
with the judge for the reference), kit (helpers for probe files), runner (a room's main loop),
zygote (the fork server).
"""

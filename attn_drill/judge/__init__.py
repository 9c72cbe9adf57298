"""The trusted side: the judge process and everything it does with what a room sends back.

server      the judge process: one table of operations (grade, bench, questions, sandbox)
engine      a grading's orchestration: vet, build the cases, send them to a room, judge, name
prepare     the problem's trusted files and the reference's sides of each case (kept for reuse)
verdicts    the verdict on a case and on a whole grading
compare     one tensor against the float64 truth, judged by the dtype's own error
precision   the precision rule for float64 cases
mistakes    naming a failure by the problem's known mistakes (mutants)
symptoms    what the failures have in common when no known mistake fits
rooms       the judge's side of the rooms: the zygote, a room, its channel
untrusted   the only reader of the bytes a room sends
sandbox     the OS sandbox (bubblewrap) for someone else's code
timing      `bench`: time a submission against the reference and fused SDPA

The judge never runs submitted code; it imports attn_drill.room only to run the reference and
the mutants itself (with the same code that runs a submission in a room).
"""

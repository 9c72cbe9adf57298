"""What the tool keeps about the user: progress (schema, store, rules), the review schedule (FSRS),
the clock, and the settings made once (config). No torch."""

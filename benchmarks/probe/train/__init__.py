"""Stage 4, train: a trained read-out body on the spilled train split (loop, optimiser, losses)."""

"""Stage 3, read-out: streamed statistics, the closed-form solve and the decoders (the probe's spine)."""

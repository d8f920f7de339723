"""Stage 1, data: the splits' samples read per batch (sources, loaders, worker guard, sample cache)."""

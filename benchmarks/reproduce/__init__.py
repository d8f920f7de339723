"""Paper-table reproduction from official checkpoints and data in the documented layouts."""

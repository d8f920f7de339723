"""Stage 2, features: the frozen backbone's tapped features (store, disk cache) and the reference rows'."""

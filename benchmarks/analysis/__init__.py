"""Analysis scripts (metric behaviour studies); run as modules, never imported by the package."""

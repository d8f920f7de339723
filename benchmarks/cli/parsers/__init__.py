"""The commands' parsers: arguments and help text, importing no torch (see ``benchmarks/cli/commands.py``)."""

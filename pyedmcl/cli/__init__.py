"""The ``pyedmcl`` command line: one module per group of subcommands."""

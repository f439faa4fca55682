"""Compatibility front-ends for users of other EDM packages (``pyedmcl.compat.pyedm``)."""

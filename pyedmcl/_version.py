"""pyedmcl's version, in a module of its own so that code below the public facade
(``pyedmcl/__init__.py``) stamps it on what it writes without importing the facade."""

__version__ = "0.1.0"

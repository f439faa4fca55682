"""Empirical Dynamic Modeling on OpenCL: k-NN, Simplex, S-map, CCM and scans.

Public functions are reached lazily through :mod:`pyedmcl` (see ``_api.py``).
"""

"""Recurrence quantification analysis by Divide & Recombine (Rawald et al.).

``pe.rqa``, ``pe.cross_rqa``, ``pe.joint_rqa`` (measures from line histograms
computed on the device without storing the recurrence matrix) and
``pe.recurrence_plot`` (block-density images for any N).
"""

import sys as _sys
import types as _types


class _CallableRQAModule(_types.ModuleType):
    """``pyedmcl.rqa`` is both this subpackage and the public function ``pe.rqa``.

    Importing a subpackage binds it as ``pyedmcl.rqa``, which shadows the lazily
    exported function of the same name; making the package callable keeps
    ``pe.rqa(x, ...)`` working (it calls :func:`pyedmcl.rqa.core.rqa`).
    """

    def __call__(self, *args, **kwargs):
        from .core import rqa

        return rqa(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableRQAModule

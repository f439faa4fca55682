"""Recurrence quantification analysis by Divide & Recombine (Rawald et al.).

``pe.rqa``, ``pe.cross_rqa``, ``pe.joint_rqa`` (measures from line histograms
computed on the device without storing the recurrence matrix) and
``pe.recurrence_plot`` (block-density images for any N).
"""

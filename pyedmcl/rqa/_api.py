"""Public names of the RQA family (imported lazily by ``pyedmcl``)."""

API = {
    "rqa": "pyedmcl.rqa.core",
    "cross_rqa": "pyedmcl.rqa.core",
    "joint_rqa": "pyedmcl.rqa.core",
    "recurrence_plot": "pyedmcl.rqa.plot",
    "recurrence_network": "pyedmcl.rqa.network",
}

"""Public names of the RQA family (imported lazily by ``pyedmcl``)."""

API = {
    "rqa": "pyedmcl.rqa.core",
    "cross_rqa": "pyedmcl.rqa.core",
    "joint_rqa": "pyedmcl.rqa.core",
    "rqa_batch": "pyedmcl.rqa.batch",
    "rqa_batch_open": "pyedmcl.rqa.batch_store",
    "rqa_grid": "pyedmcl.rqa.grid",
    "recurrence_plot": "pyedmcl.rqa.plot",
    "plot_rqa_vs_radius": "pyedmcl.rqa.figures",
    "plot_rqa_heatmap": "pyedmcl.rqa.figures",
    "recurrence_network": "pyedmcl.rqa.network",
}

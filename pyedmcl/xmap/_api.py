"""Public all-to-all names -> the module that defines them (imported lazily by pyedmcl)."""

API = {
    "xmap": "pyedmcl.xmap.core",
    "read_panel": "pyedmcl.xmap.io",
    "xmap_open": "pyedmcl.xmap.store",
    "xmap_verify": "pyedmcl.xmap.store",
    "StoreCorruptError": "pyedmcl.xmap.store",
    "OutputBusyError": "pyedmcl._outputs",
}

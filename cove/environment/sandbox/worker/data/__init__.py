"""numpy, pandas and matplotlib in the sandbox: loading, curated namespaces and their surface.

The libraries are optional (cove's ``data`` install extra). When they are installed the worker
imports and warms them before it confines itself (``libraries.py``), hands sandbox code curated
namespaces of them (``numpy_api.py``, ``pandas_api.py``, ``pyplot_api.py``), checks every
attribute of every library object against an audited surface (``surface.py``), reads and writes
workspace files through the host (``files.py``) and renders the figures a block leaves open
(``figures.py``). Without them, importing one in the sandbox fails with a message saying how to
install it.
"""

"""Import bindings as versioned variables.

``import math`` binds a name like any assignment, so it is versioned (kind ``module``) and
restored with the other variables when an environment is rebuilt from the database. The sandbox
client tracks bindings as ``name -> (module, member)``; the stored value is that pair as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from cove.environment.sandbox.outcome import ImportBinding
from cove.persistence.records import VarVersionRecord
from cove.results import VarVersion


def import_binding(record: VarVersionRecord) -> ImportBinding:
    """The binding a stored ``module`` version holds."""
    data = json.loads(record.encoded or "{}")
    return (str(data.get("module", "")), data.get("member"))


def _import_snapshot(name: str, binding: ImportBinding) -> VarVersion:
    module, member = binding
    preview = f"import {module}" if member is None else f"from {module} import {member}"
    if name != (module if member is None else member):
        preview += f" as {name}"
    encoded = json.dumps({"module": module, "member": member}, sort_keys=True)
    return VarVersion(name, "module", encoded, "module" if member is None else "import", preview)


def import_snapshots(imports: Mapping[str, ImportBinding]) -> dict[str, VarVersion]:
    """Snapshots of the given import bindings."""
    return {name: _import_snapshot(name, binding) for name, binding in imports.items()}


def import_changes(
    before: Mapping[str, ImportBinding],
    after: Mapping[str, ImportBinding],
    value_changes: Mapping[str, VarVersion],
) -> dict[str, VarVersion]:
    """Import bindings made, changed or dropped by a block, as variable snapshots.

    Imports are named bindings like any other, so they are versioned and restored with the
    variables. A name that became an ordinary value is left to the value's own snapshot.
    """
    found = {
        name: _import_snapshot(name, binding)
        for name, binding in after.items()
        if before.get(name) != binding
    }
    for name in before.keys() - after.keys():
        if name not in value_changes:
            found[name] = VarVersion(name, "deleted", None, "module", "deleted")
    return found

"""The project's packaging metadata, in the form current build tools read without warnings."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def test_the_license_is_an_spdx_expression_and_the_build_backend_reads_it() -> None:
    """A license table makes setuptools print a deprecation banner on every install (three
    times on ``make run``'s first install); an SPDX string needs setuptools 77 or newer."""
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    assert data["project"]["license"] == "MIT"
    requires = " ".join(data["build-system"]["requires"])
    found = re.search(r"setuptools>=(\d+)", requires)
    assert found is not None and int(found[1]) >= 77

"""Where the committed Hugging Face fixtures are (tools/make_hf_fixtures.py)."""

from __future__ import annotations

import os

from tests.conftest import REPO

HF_DATA = os.path.join(REPO, "tests", "data", "hf")


def fixture(name):
    return os.path.join(HF_DATA, name)

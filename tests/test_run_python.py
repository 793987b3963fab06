"""The suite's helper for fresh processes (tests/conftest.py: run_python)."""

import pytest

from tests.conftest import run_python


def test_returns_the_childs_stdout():
    assert run_python("print(6 * 7)") == "42\n"


def test_a_failing_child_reports_its_exit_code_and_stderr():
    with pytest.raises(AssertionError, match=r"failed \(1\)[\s\S]*ZeroDivisionError"):
        run_python("1 / 0")


def test_a_hung_child_is_stopped_and_reports_where_it_hung():
    code = """
    import time

    def waiting_for_nothing():
        time.sleep(120)

    waiting_for_nothing()
    """
    with pytest.raises(AssertionError, match="still running after 3 s") as failure:
        run_python(code, timeout=3)
    assert "waiting_for_nothing" in str(failure.value)

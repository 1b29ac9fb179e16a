"""broker/patterns.py: RE2 patterns for the features that take one, re2 imported on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest
import re2

from broker.patterns import PatternError, compile_re2


def test_a_pattern_compiles_with_re2_and_matches_whole_names():
    r = compile_re2("orders-.*")
    assert r.fullmatch("orders-eu") and not r.fullmatch("x-orders-eu")


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "(?<!x)y"])
def test_a_refused_pattern_is_a_pattern_error_with_re2s_reason(pattern):
    with pytest.raises(re2.error) as direct:
        re2.compile(pattern)
    reason = direct.value.args[0]
    with pytest.raises(PatternError) as ours:
        compile_re2(pattern)
    assert str(ours.value) == (reason.decode() if isinstance(reason, bytes) else str(direct.value))


def test_re2_is_imported_by_the_first_pattern_not_by_the_module():
    code = (
        "import sys\n"
        "import broker.patterns, broker.coordinator.consumer.regex, broker.txn.admin\n"
        "before = 're2' in sys.modules\n"
        "broker.patterns.compile_re2('a+')\n"
        "print(before, 're2' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "True"], out.stderr

"""Runs the schemathesis CLI (`.ci/schemathesis.sh`) with one guard.

CPython 3.11 before 3.11.8 can raise `SystemError: AST constructor
recursion depth mismatch` from `ast.parse` (python/cpython#106905: an error
path in the AST constructor skips its depth bookkeeping). Hypothesis calls
`ast.parse` on a whole schemathesis module only to *describe* a filter
lambda in a strategy's repr, and the error then aborts the operation being
generated as a "Runtime Error" that says nothing about the API under test.
The guard turns that one error into Hypothesis's own "<unknown>"
description, which it already uses whenever a lambda's source cannot be
read. No request, check or generated value changes.
"""

import sys

from hypothesis.internal import lambda_sources

_describe = lambda_sources._lambda_description


def _described_or_unknown(f, *args, **kwargs):
    try:
        return _describe(f, *args, **kwargs)
    except SystemError as error:
        if "recursion depth mismatch" not in str(error):
            raise
        print(f"schemathesis_main: guarded CPython#106905 ({error})", file=sys.stderr)
        return "lambda: <unknown>"


lambda_sources._lambda_description = _described_or_unknown

from schemathesis.cli import schemathesis  # noqa: E402  (after the guard)

if __name__ == "__main__":
    sys.argv[0] = "schemathesis"
    sys.exit(schemathesis())

"""Drives `canopy mcp` over stdio with the official MCP Python SDK (PyPI
package `mcp`, the version pinned in .ci/mcp-sdk.sh) and checks what an
agent built on it meets first: the tool schemas and the errors.

Usage: python check_mcp.py CANOPY_BINARY REPO_DIR

REPO_DIR is a git repository holding a copy of tests/fixtures/graph/python.
Prints one line per check and exits 1 if any failed (2 on a usage error).
Run by crates/canopy-cli/tests/mcp_sdk.rs.
"""

import json
import re
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

# Values of the right shape for the parameters a tool requires, so that a
# call fails on the one parameter a check makes wrong.
REQUIRED_SAMPLES = {
    "task": "fix the parser",
    "handle_ids": ["h0123456789abcdef01234567"],
    "result_set": "rs0000000000000000",
    "target": "Parser.parse",
}


class Checks:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok    {what}")
        else:
            self.failed += 1
            print(f"FAIL  {what}: {detail}")


def answer(result):
    """The tool's JSON answer (the first text content)."""
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    if not texts:
        return {}
    try:
        return json.loads(texts[0])
    except json.JSONDecodeError:
        return {"text": texts[0]}


async def run(canopy, repo, checks):
    params = StdioServerParameters(command=canopy, args=["mcp"], cwd=repo)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            checks.check(len(tools) > 0, "tools/list lists tools", tools)

            async def call(name, arguments):
                return await session.call_tool(name, arguments)

            # Every parameter of every tool says what it is.
            for name, tool in sorted(tools.items()):
                props = tool.input_schema.get("properties", {})
                bare = [p for p, s in props.items() if not str(s.get("description", "")).strip()]
                checks.check(not bare, f"{name}: every parameter has a description", bare)

            # canopy_index: glob is optional, also with rebuild.
            index = tools["canopy_index"].input_schema
            checks.check(
                "glob" not in index.get("required", []),
                "canopy_index.glob is optional in the schema",
                index.get("required"),
            )
            for arguments in ({"path": repo}, {"path": repo, "rebuild": True}):
                result = await call("canopy_index", arguments)
                checks.check(
                    not result.is_error,
                    f"canopy_index without glob {sorted(arguments)} succeeds",
                    answer(result),
                )

            # canopy_refine.kind accepts `reference`, in the schema and in a call.
            kind = tools["canopy_refine"].input_schema["properties"]["kind"]
            checks.check(
                "reference" in kind.get("enum", []),
                "canopy_refine.kind lists reference",
                kind,
            )
            found = answer(
                await call("canopy_query", {"path": repo, "pattern": "parse", "result_set": True})
            )
            result_set = found.get("result_set")
            checks.check(bool(result_set), "canopy_query keeps a result set", found)
            if result_set:
                result = await call(
                    "canopy_refine",
                    {"path": repo, "result_set": result_set, "kind": "reference"},
                )
                checks.check(
                    not result.is_error,
                    "canopy_refine with kind=reference succeeds",
                    answer(result),
                )

            # A value outside a parameter's enum: the error names the
            # parameter and every allowed value, whatever the tool.
            for name, tool in sorted(tools.items()):
                schema = tool.input_schema
                props = schema.get("properties", {})
                for param, prop in sorted(props.items()):
                    allowed = prop.get("enum")
                    if not allowed:
                        continue
                    arguments = {"path": repo}
                    for req in schema.get("required", []):
                        if req in REQUIRED_SAMPLES:
                            arguments[req] = REQUIRED_SAMPLES[req]
                        elif req != "path" and "enum" in props.get(req, {}):
                            arguments[req] = props[req]["enum"][0]
                    arguments[param] = "not-a-value"
                    result = await call(name, arguments)
                    err = answer(result)
                    message = str(err.get("message", ""))
                    missing = [v for v in allowed if str(v) not in message]
                    checks.check(
                        result.is_error
                        and err.get("code") == "Validation"
                        and re.search(rf"\b{param}\b", message)
                        and not missing,
                        f"{name}.{param}=not-a-value: a Validation error naming {param} and its values",
                        f"is_error={result.is_error} {err} (values not named: {missing})",
                    )

            # A value of the wrong type names its parameter.
            result = await call("canopy_query", {"path": repo, "pattern": "x", "limit": "ten"})
            err = answer(result)
            checks.check(
                result.is_error
                and err.get("code") == "Validation"
                and re.search(r"\blimit\b", str(err.get("message"))),
                "canopy_query.limit=\"ten\": a Validation error naming limit",
                err,
            )

            # A malformed handle id is called malformed, not missing; a
            # well-formed unknown one is not found.
            result = await call("canopy_expand", {"path": repo, "handle_ids": ["hxyz"]})
            err = answer(result)
            message = str(err.get("message", "")).lower()
            checks.check(
                result.is_error
                and err.get("code") == "MalformedHandle"
                and "malformed" in message
                and "not found" not in message,
                "canopy_expand of a malformed id says malformed",
                err,
            )
            result = await call(
                "canopy_expand", {"path": repo, "handle_ids": ["h000000000000000000000000"]}
            )
            err = answer(result)
            checks.check(
                result.is_error and err.get("code") == "HandleNotFound",
                "canopy_expand of a well-formed unknown id says not found",
                err,
            )

            # A target that is not there suggests the nearest names.
            result = await call(
                "canopy_graph", {"path": repo, "op": "callers", "target": "Parser.pars"}
            )
            missing = answer(result)
            hint = str(missing.get("hint", ""))
            checks.check(
                not result.is_error
                and missing.get("empty", {}).get("kind") == "target_not_found"
                and "nearest" in hint
                and "parse" in hint,
                "canopy_graph on a misspelt target suggests the nearest names",
                missing,
            )

            # The context budget error's hint is about the budget.
            result = await call(
                "canopy_context", {"path": repo, "task": "fix the parser", "budget_tokens": 10}
            )
            err = answer(result)
            checks.check(
                result.is_error
                and err.get("code") == "Validation"
                and "budget_tokens" in str(err.get("message"))
                and "budget_tokens" in str(err.get("hint"))
                and "input schema" not in str(err.get("hint")),
                "canopy_context budget_tokens=10: the hint is about the budget",
                err,
            )


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    checks = Checks()

    async def bounded():
        with anyio.fail_after(300):
            await run(sys.argv[1], sys.argv[2], checks)

    anyio.run(bounded)
    print(f"{checks.passed} passed, {checks.failed} failed")
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()

"""MkDocs hooks: pages drawn from the code itself, so they cannot drift from it.

- ``<!-- cli-reference -->`` becomes every command of ``relaystate``, from its argparse
  parser (usage, help, options);
- ``<!-- api-reference -->`` becomes every endpoint of the HTTP API, from the app's own
  OpenAPI document (and ``openapi.json`` is written beside the site);
- ``<!-- include: PATH -->`` becomes the file at PATH (relative to the repository), its
  links to other files of the repository pointed at the pages that hold them.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r"<!--\s*include:\s*(?P<path>\S+)\s*-->")
LINKS = {
    "RELIABILITY.md": "reliability.md",
    "README.md": "index.md",
    "CHANGELOG.md": "changelog.md",
}
"""Files of the repository that are pages of the site."""


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- cli-reference -->" in markdown:
        markdown = markdown.replace("<!-- cli-reference -->", cli_reference())
    if "<!-- api-reference -->" in markdown:
        markdown = markdown.replace("<!-- api-reference -->", api_reference())
    return INCLUDE.sub(lambda m: included(m["path"]), markdown)


def on_post_build(config: Any) -> None:
    """``openapi.json`` beside the pages, for clients and code generators."""
    site = Path(config["site_dir"])
    (site / "openapi.json").write_text(json.dumps(_openapi(), indent=2), encoding="utf-8")


def included(path: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    text = re.sub(r"^# .*\n", "", text, count=1)  # the page has its own title
    for source, page in LINKS.items():
        text = text.replace(f"]({source})", f"]({page})")
    return text.replace("](docs/", "](")  # a page of the site, seen from the repository


# -- the command line -------------------------------------------------------------------------


def cli_reference() -> str:
    from relaystate.cli import parser

    out: list[str] = []
    _command(parser(), ["relaystate"], out)
    return "\n".join(out)


def _command(cmd: argparse.ArgumentParser, words: list[str], out: list[str]) -> None:
    subs = next((a for a in cmd._actions if isinstance(a, argparse._SubParsersAction)), None)
    if len(words) > 1:
        out.append(f"{'#' * min(len(words) + 1, 4)} `{' '.join(words)}`\n")
        doc = _help_of(words)
        if doc:
            out.append(f"{doc}\n")
        out.append("```text\n" + cmd.format_usage().removeprefix("usage: ").strip() + "\n```\n")
        rows = [
            _row(a)
            for a in cmd._actions
            if a.dest != "help" and not isinstance(a, argparse._SubParsersAction)
        ]
        if rows:
            out.append("| argument | what it is |\n|---|---|")
            out.extend(rows)
            out.append("")
    if subs is not None:
        for name, sub in subs.choices.items():
            _command(sub, [*words, name], out)


_HELPS: dict[str, str] = {}


def _help_of(words: list[str]) -> str:
    if not _HELPS:
        from relaystate.cli import parser

        def walk(cmd: argparse.ArgumentParser, prefix: list[str]) -> None:
            for action in cmd._actions:
                if isinstance(action, argparse._SubParsersAction):
                    helps = {c.dest: c.help or "" for c in action._choices_actions}
                    for name, sub in action.choices.items():
                        _HELPS[" ".join([*prefix, name])] = helps.get(name, "")
                        walk(sub, [*prefix, name])

        walk(parser(), ["relaystate"])
    return _HELPS.get(" ".join(words), "")


def _row(action: argparse.Action) -> str:
    names = (
        ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
    )
    text = (action.help or "").replace("|", "\\|").replace("\n", " ")
    if action.choices and not isinstance(action.choices, dict):
        text += f" One of: {', '.join(f'`{c}`' for c in action.choices)}."
    if action.default not in (None, False, argparse.SUPPRESS) and action.option_strings:
        text += f" Default: `{action.default}`."
    return f"| {names} | {text.strip()} |"


# -- the HTTP API -----------------------------------------------------------------------------


def _openapi() -> dict[str, Any]:
    from relaystate import Runtime, open_store
    from relaystate.server import create_app

    return create_app(Runtime(open_store("memory://"), []), recover_on_start=False).openapi()


def api_reference() -> str:
    spec = _openapi()
    out: list[str] = []
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            out.append(f"### `{method.upper()} {path}`\n")
            if op.get("summary"):
                out.append(f"**{op['summary']}.** " + (op.get("description") or "").strip() + "\n")
            params = op.get("parameters", [])
            if params:
                out.append("| parameter | in | required | what it is |\n|---|---|---|---|")
                out.extend(_parameter(p) for p in params)
                out.append("")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            if body:
                out.append(f"Body: {_schema_name(body.get('schema', {}))}\n")
            answers = ", ".join(_answer(code, r) for code, r in op.get("responses", {}).items())
            out.append(f"Answers: {answers}\n")
    out.append("## Schemas\n")
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        out.append(f"### {name}\n")
        if schema.get("description"):
            out.append(schema["description"].strip() + "\n")
        props = schema.get("properties", {})
        if props:
            out.append("| field | type | what it is |\n|---|---|---|")
            required = set(schema.get("required", []))
            for field, sub in props.items():
                desc = (sub.get("description") or "").replace("\n", " ").replace("|", "\\|")
                mark = "" if field in required else " (optional)"
                out.append(f"| `{field}`{mark} | {_type(sub)} | {desc} |")
            out.append("")
    return "\n".join(out)


def _parameter(p: dict[str, Any]) -> str:
    desc = p.get("description") or p.get("schema", {}).get("description") or ""
    required = "yes" if p.get("required") else "no"
    return f"| `{p['name']}` | {p['in']} | {required} | {' '.join(desc.split())} |"


def _answer(code: str, response: dict[str, Any]) -> str:
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    return f"{code} ({_schema_name(schema) or response.get('description', '')})"


def _schema_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref", "")
    return f"[{ref.rsplit('/', 1)[-1]}](#{ref.rsplit('/', 1)[-1].lower()})" if ref else ""


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return _schema_name(schema)
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}"
    return str(schema.get("type", "any"))

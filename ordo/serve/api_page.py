"""``GET /docs`` of ``ordo serve``: the API's description as one plain HTML page, written on the server from its
OpenAPI schema, so that it reads without the network (FastAPI's own page loads Swagger UI from a CDN).

Per endpoint: its method and path, its description, and the fields of its JSON body and of its answer (name,
type, whether required, default, description), nested bodies listed after it.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

Schema = dict[str, Any]
_LITERAL = re.compile(r"``(.+?)``")


def _prose(text: object) -> str:
    """A docstring's text as HTML: escaped, its ``literals`` (reStructuredText) as code."""
    return _LITERAL.sub(r"<code>\1</code>", escape(str(text)))


def _referenced(schema: Schema) -> str | None:
    """The component name a ``$ref`` points to: the schema's own, or one in its list items or anyOf branches."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    inner_schemas = [schema["items"]] if "items" in schema else []
    for inner in (*inner_schemas, *schema.get("anyOf", [])):
        found = _referenced(inner)
        if found is not None:
            return found
    return None


def _type_name(schema: Schema) -> str:
    """A short type for a property: ``integer``, ``list of string``, ``Candidate``, ``string or null``."""
    if "anyOf" in schema:
        return " or ".join(_type_name(branch) for branch in schema["anyOf"])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return "list of " + _type_name(schema.get("items", {}))
    return str(schema.get("type", "any"))


def _fields_table(name: str, components: dict[str, Schema]) -> str:
    """The table of component ``name``'s fields."""
    schema = components.get(name, {})
    required = set(schema.get("required", []))
    rows = "".join(
        f"<tr><td><code>{escape(field)}</code></td><td>{escape(_type_name(spec))}</td>"
        f"<td>{'yes' if field in required else ''}</td>"
        f"<td>{escape(repr(spec['default'])) if 'default' in spec else ''}</td>"
        f"<td>{escape(str(spec.get('description', '')))}</td></tr>"
        for field, spec in schema.get("properties", {}).items()
    )
    return (f"<h4>{escape(name)}</h4><p>{_prose(schema.get('description', ''))}</p>"
            "<table><tr><th>field</th><th>type</th><th>required</th><th>default</th><th>description</th></tr>"
            f"{rows}</table>")


def _with_nested(names: list[str], components: dict[str, Schema]) -> list[str]:
    """``names`` and every component their fields refer to, each once, in order of first mention."""
    found: list[str] = []
    pending = list(names)
    while pending:
        name = pending.pop(0)
        if name in found or name not in components:
            continue
        found.append(name)
        pending += [ref for spec in components[name].get("properties", {}).values()
                    if (ref := _referenced(spec)) is not None]
    return found


def _body_names(operation: Schema) -> list[str]:
    """The components of an operation's JSON request body and of its 200 answer."""
    bodies = [operation.get("requestBody", {}), operation.get("responses", {}).get("200", {})]
    names = [_referenced(body.get("content", {}).get("application/json", {}).get("schema", {})) for body in bodies]
    return [name for name in names if name is not None]


def api_page(openapi: Schema) -> str:
    """The HTML page of an OpenAPI schema (module docstring)."""
    components: dict[str, Schema] = openapi.get("components", {}).get("schemas", {})
    info = openapi.get("info", {})
    sections = []
    for path, operations in openapi.get("paths", {}).items():
        for method, operation in operations.items():
            tables = "".join(_fields_table(name, components)
                             for name in _with_nested(_body_names(operation), components))
            text = operation.get("description") or operation.get("summary", "")
            sections.append(f"<h2><code>{escape(method.upper())} {escape(path)}</code></h2>"
                            f"<p>{_prose(text)}</p>{tables}")
    title = escape(str(info.get("title", "API")))
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}: API</title><link rel=\"stylesheet\" href=\"/static/style.css\"></head><body>"
            f"<main class=\"api\"><h1>{title}</h1><p>{escape(str(info.get('description', '')))}</p>"
            "<p>The same as JSON: <a href=\"/openapi.json\">/openapi.json</a>.</p>"
            f"{''.join(sections)}</main></body></html>")

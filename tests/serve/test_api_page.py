"""``GET /docs``'s page from an OpenAPI schema (ordo.serve.api_page), on a hand-written schema: every endpoint,
its body's and answer's fields with type, required, default and description, nested bodies once each, text
escaped."""

from __future__ import annotations

from ordo.serve.api_page import api_page

SCHEMA = {
    "info": {"title": "demo <api>", "description": "d"},
    "paths": {
        "/v1/do": {"post": {
            "description": "Do ``it`` & say so.",
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Ask"}}}},
            "responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Answer"}}}}},
        }},
        "/ping": {"get": {"summary": "Ping"}},
    },
    "components": {"schemas": {
        "Ask": {"description": "a request", "required": ["text"], "properties": {
            "text": {"type": "array", "items": {"type": "string"}, "description": "lines"},
            "beam": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "description": "width"},
        }},
        "Answer": {"properties": {
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}},
            "extra": {"anyOf": [{"type": "array", "items": {"$ref": "#/components/schemas/Item"}}, {"type": "null"}]},
        }},
        "Item": {"properties": {"score": {"type": "number", "default": 0.5}}},
        "Unused": {"properties": {"x": {"type": "string"}}},
    }},
}


def test_the_page_lists_each_endpoint_with_its_fields():
    page = api_page(SCHEMA)
    assert "<title>demo &lt;api&gt;: API</title>" in page
    assert "<code>POST /v1/do</code>" in page and "Do <code>it</code> &amp; say so." in page
    assert "<code>GET /ping</code></h2><p>Ping</p>" in page
    assert ("<tr><td><code>text</code></td><td>list of string</td><td>yes</td><td></td><td>lines</td></tr>"
            in page)
    assert "<tr><td><code>beam</code></td><td>integer or null</td><td></td><td>None</td><td>width</td></tr>" in page
    assert "<td>list of Item</td>" in page and "<td>list of Item or null</td>" in page
    assert page.count("<h4>Item</h4>") == 1 and "<td>0.5</td>" in page  # nested once, though named twice
    assert "Unused" not in page
    assert page.index("<h4>Ask</h4>") < page.index("<h4>Answer</h4>") < page.index("<h4>Item</h4>")

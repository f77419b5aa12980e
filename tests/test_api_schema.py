"""The OpenAPI schema: JSON to a browser or a JSON client, YAML when asked for; its docs
page points at both."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.django_db

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("accept", [BROWSER, "application/json", "*/*"])
def test_a_browser_or_a_json_client_gets_json(api: Any, accept: str) -> None:
    answer = api.get("/api/schema", HTTP_ACCEPT=accept)
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("application/json")
    assert answer.json()["openapi"].startswith("3.")


@pytest.mark.parametrize(
    ("query", "accept"),
    [("?format=yaml", BROWSER), ("", "application/yaml"), ("", "application/vnd.oai.openapi")],
)
def test_yaml_on_request(api: Any, query: str, accept: str) -> None:
    answer = api.get(f"/api/schema{query}", HTTP_ACCEPT=accept)
    assert answer.status_code == 200
    assert "yaml" in answer["Content-Type"] or "openapi" in answer["Content-Type"]
    assert yaml.safe_load(answer.content)["paths"]["/api/tasks"]


def test_the_docs_page_links_both(api: Any) -> None:
    description = api.get("/api/schema", HTTP_ACCEPT="application/json").json()["info"]
    assert "[JSON](/api/schema)" in description["description"]
    assert "[YAML](/api/schema?format=yaml)" in description["description"]
    assert api.get("/api/docs", HTTP_ACCEPT=BROWSER).status_code == 200

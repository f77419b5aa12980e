"""What the door says of itself (RFC 7643 §5-7): `/ServiceProviderConfig`,
`/ResourceTypes` and `/Schemas`, kept to what it does."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from agent.doors.scim.groups import GROUP_SCHEMA
from agent.doors.scim.listing import LIST_RESPONSE, MAX_COUNT
from agent.doors.scim.users import USER_SCHEMA

CONFIG_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"
RESOURCE_TYPE_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ResourceType"
SCHEMA_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Schema"
DOCS = "https://www.rfc-editor.org/rfc/rfc7644"


def service_provider_config() -> dict[str, Any]:
    return {
        "schemas": [CONFIG_SCHEMA],
        "documentationUri": DOCS,
        "patch": {"supported": True},
        "bulk": {"supported": False, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": True, "maxResults": MAX_COUNT},
        "changePassword": {"supported": False},
        "sort": {"supported": False},
        "etag": {"supported": False},
        "authenticationSchemes": [
            {
                "type": "oauthbearertoken",
                "name": "Bearer token",
                "description": "Authorization: Bearer <AGENT_SCIM_TOKEN>",
                "primary": True,
            }
        ],
        "meta": {"resourceType": "ServiceProviderConfig"},
    }


def resource_types(request: HttpRequest) -> list[dict[str, Any]]:
    def one(name: str, endpoint: str, schema: str) -> dict[str, Any]:
        location = request.build_absolute_uri(reverse("scim-resource-type", args=[name]))
        return {
            "schemas": [RESOURCE_TYPE_SCHEMA],
            "id": name,
            "name": name,
            "endpoint": endpoint,
            "schema": schema,
            "meta": {"resourceType": "ResourceType", "location": location},
        }

    return [one("User", "/Users", USER_SCHEMA), one("Group", "/Groups", GROUP_SCHEMA)]


def _attribute(name: str, kind: str = "string", **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "multiValued": False,
        "required": False,
        "caseExact": False,
        "mutability": "readWrite",
        "returned": "default",
        "uniqueness": "none",
        **more,
    }


def _sub(*names: str) -> list[dict[str, Any]]:
    return [_attribute(name) for name in names]


def schemas(request: HttpRequest) -> list[dict[str, Any]]:
    def one(ident: str, name: str, attributes: list[dict[str, Any]]) -> dict[str, Any]:
        location = request.build_absolute_uri(reverse("scim-schema", args=[ident]))
        return {
            "schemas": [SCHEMA_SCHEMA],
            "id": ident,
            "name": name,
            "attributes": attributes,
            "meta": {"resourceType": "Schema", "location": location},
        }

    user = [
        _attribute("userName", required=True, uniqueness="server"),
        _attribute("name", "complex", subAttributes=_sub("givenName", "familyName", "formatted")),
        _attribute("displayName", mutability="readOnly"),
        _attribute("active", "boolean"),
        _attribute("emails", "complex", multiValued=True, subAttributes=_sub("value", "type")),
        _attribute(
            "groups",
            "complex",
            multiValued=True,
            mutability="readOnly",
            subAttributes=_sub("value", "display"),
        ),
    ]
    group = [
        _attribute("displayName", required=True, uniqueness="server"),
        _attribute("members", "complex", multiValued=True, subAttributes=_sub("value", "display")),
    ]
    return [one(USER_SCHEMA, "User", user), one(GROUP_SCHEMA, "Group", group)]


def listed(resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schemas": [LIST_RESPONSE],
        "totalResults": len(resources),
        "startIndex": 1,
        "itemsPerPage": len(resources),
        "Resources": resources,
    }

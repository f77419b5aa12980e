"""The SCIM door's routes, under `/scim/v2/`: each answers with and without a trailing
slash, and any other path is a SCIM 404."""

from __future__ import annotations

from django.urls import re_path

from agent.doors.scim import views

urlpatterns = [
    re_path(r"^ServiceProviderConfig/?$", views.service_provider_config, name="scim-config"),
    re_path(r"^ResourceTypes/?$", views.resource_types, name="scim-resource-types"),
    re_path(r"^ResourceTypes/(?P<name>[^/]+)/?$", views.resource_types, name="scim-resource-type"),
    re_path(r"^Schemas/?$", views.schemas, name="scim-schemas"),
    re_path(r"^Schemas/(?P<name>[^/]+)/?$", views.schemas, name="scim-schema"),
    re_path(r"^Users/?$", views.user_list, name="scim-users"),
    re_path(r"^Users/(?P<ident>[^/]+)/?$", views.user_detail, name="scim-user"),
    re_path(r"^Groups/?$", views.group_list, name="scim-groups"),
    re_path(r"^Groups/(?P<ident>[^/]+)/?$", views.group_detail, name="scim-group"),
    re_path(r"^(?P<rest>.*)$", views.unknown),
]

"""The SCIM 2.0 door (RFC 7643, RFC 7644), under `/scim/v2/`: the identity provider's
provisioning (Microsoft Entra ID, Okta, Keycloak with a SCIM plugin, Authentik) creates
people, updates and deactivates them, and pushes its groups as teams.

A person is a Django user (their id: the user's pk); a group is a team (its id: the team's
pk), found by its slug, the group's name slugified. Deleting a person deactivates them:
their chats, runs and the audit log's history stay. `AGENT_SCIM_TOKEN` unset: no SCIM at
all, every URL here is a 404.
"""

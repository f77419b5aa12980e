"""Teams, their policies, a person's own policy, named API tokens and sign-in identities.

A team is a Django group with a profile (`Team`): its slug names it at every door and in the
identity provider's groups claim. A policy field left empty (null) means the operator's
setting; the operator's settings stay the ceiling whatever a team says
(`teams_app.policy.effective_policy`).
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone


class PolicyFields(models.Model):
    """What a policy may say; null: the operator's setting (or, for a person's own policy,
    whatever their teams say)."""

    allowed_models = models.JSONField(
        null=True,
        blank=True,
        help_text="Model ids its members may pick, a list; empty: every model the site allows.",
    )
    tools = models.JSONField(
        null=True,
        blank=True,
        help_text="Tool names their agents may use, a list; empty: every tool.",
    )
    approve_tools = models.JSONField(
        default=list,
        blank=True,
        help_text="Tool names (or patterns such as mcp_github_*) whose calls wait for a yes.",
    )
    turn_rate = models.CharField(
        max_length=40,
        blank=True,
        help_text="Turns each member may start, as 30/min; empty: the site's rate.",
    )
    exec_network = models.BooleanField(
        null=True,
        blank=True,
        help_text="Whether exec may use the network; empty: the site's setting.",
    )

    class Meta:
        abstract = True


class Team(PolicyFields):
    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="team")
    slug = models.SlugField(
        max_length=80,
        unique=True,
        help_text="Its name at every door and in the identity provider's groups claim.",
    )
    name = models.CharField(max_length=150)
    admins = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="teams_administered",
        help_text="Members who manage this team (its members, policy, skills and MCP servers).",
    )
    synced = models.BooleanField(
        default=True,
        help_text=(
            "Members follow the identity provider's groups at each sign-in. Off: members are "
            "set by hand here and sign-ins leave them alone."
        ),
    )
    member_daily_budget = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="USD each member's runs may cost per UTC day; empty: the site's budget.",
    )
    team_daily_budget = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="USD all members' runs together may cost per UTC day; empty: no team budget.",
    )
    mcp_servers = models.ManyToManyField(
        "mcp_app.McpServer",
        blank=True,
        related_name="teams",
        help_text="MCP servers for this team: a server assigned to teams is theirs alone.",
    )
    skills = models.ManyToManyField(
        "skills_app.Skill",
        blank=True,
        related_name="teams",
        help_text="Skills for this team: a skill assigned to teams is theirs alone.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug


class PersonalPolicy(PolicyFields):
    """What staff set for one person over what their teams say (still under the operator's
    ceiling)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personal_policy"
    )
    note = models.CharField(max_length=300, blank=True, help_text="Why, for the next admin.")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "personal policies"

    def __str__(self) -> str:
        return f"{self.user}'s own policy"


def token_digest(secret: str) -> str:
    """How a named token's secret is kept: its SHA-256, never the secret itself."""
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiToken(models.Model):
    """A named API token of one person: shown once when made, kept as a digest, with an
    expiry and the time it was last used."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    # The secret's first characters, so that a person can tell their tokens apart.
    prefix = models.CharField(max_length=12, editable=False)
    created = models.DateTimeField(default=timezone.now, editable=False)
    expires = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.user}: {self.name}"

    def expired(self, now: datetime | None = None) -> bool:
        return self.expires is not None and self.expires <= (now or timezone.now())


class SignInIdentity(models.Model):
    """Who a person is at an identity provider: the issuer and its subject, which stay the
    same when their name or address there changes."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_in_identities"
    )
    provider = models.CharField(max_length=20)  # "oidc" or "ldap"
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True, help_text="The groups at the last sign-in.")
    last_sign_in = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_identity_per_subject")
        ]

    def __str__(self) -> str:
        return f"{self.user} at {self.issuer}"

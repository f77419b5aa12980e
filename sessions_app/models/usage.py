"""Spending: the daily ledger of what users' runs cost, users' own daily budgets, and what
running turns hold of them until they end."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models


class DailyUsage(models.Model):
    """What one user's runs of one model used and cost on one UTC day, added to as each run
    ends (in the transaction that records it). The usage pages and the daily budget read
    this rather than the runs: one row per model a day, and it outlives the conversations,
    since deleting one does not give back what it cost."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="agent_usage",
    )
    day = models.DateField(help_text="The UTC day the runs ended.")
    model = models.CharField(max_length=200, blank=True)
    runs = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    total_tokens = models.PositiveBigIntegerField(default=0)
    priced_cost = models.DecimalField(
        max_digits=14,
        decimal_places=6,
        default=0,
        help_text="USD, of the runs whose model has a known price.",
    )
    unpriced_runs = models.PositiveIntegerField(
        default=0, help_text="Runs that used tokens of a model with no known price."
    )

    class Meta:
        ordering = ["-day", "model"]
        verbose_name_plural = "daily usage"
        constraints = [
            models.UniqueConstraint(fields=["owner", "day", "model"], name="usage_per_owner_day"),
            models.UniqueConstraint(
                fields=["day", "model"],
                condition=models.Q(owner__isnull=True),
                name="usage_per_day_without_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.owner or 'no account'} {self.day} {self.model}"


class UserBudget(models.Model):
    """A user's own daily budget, set by staff: lifted altogether, or an amount other than
    the site's AGENT_USER_DAILY_BUDGET."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_budget"
    )
    unlimited = models.BooleanField(
        default=False, help_text="No daily budget for this user, whatever the site's is."
    )
    daily_budget = models.DecimalField(
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="USD this user's runs may cost per UTC day; empty: AGENT_USER_DAILY_BUDGET.",
    )

    def __str__(self) -> str:
        if self.unlimited:
            return f"{self.user}: no daily budget"
        if self.daily_budget is None:
            return f"{self.user}: the site's daily budget"
        return f"{self.user}: ${self.daily_budget} a day"


class SpendingHold(models.Model):
    """What a running turn, or a consolidation, of a user holds of their daily budget: what
    its model calls have cost so far, and the most the call it is making may cost. Until it
    ends, none of this is in the ledger (`DailyUsage`), and every check of the user's budget
    counts it beside the ledger. It goes in the transaction that adds its run to the ledger,
    when the sweep finds its run dead, or once `expires` has passed (no check counts it
    then)."""

    # The run's id, or a consolidation's own.
    id = models.UUIDField(primary_key=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    amount = models.DecimalField(max_digits=14, decimal_places=6, default=0, help_text="USD.")
    # Pushed on with each model call it holds for.
    expires = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["owner", "expires"], name="spending_hold_owner")]

    def __str__(self) -> str:
        return f"{self.owner_id} holds ${self.amount} until {self.expires:%H:%M}"

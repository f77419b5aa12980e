"""What a team's members spent, on its admin page: today and over the last 30 UTC days, in
all and per member, read from the daily usage ledger (`sessions_app.models.DailyUsage`);
and what the team's chats used over those days, per member whose message started each
turn (`sessions_app.usage.team_chat_usage`). Amounts only: what the members asked and what
their agents did stay theirs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db.models import Q, Sum
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from sessions_app.models import DailyUsage
from sessions_app.usage import first_day, team_chat_usage, today
from teams_app.models import Team

DAYS = 30


@dataclass(frozen=True, slots=True)
class Spent:
    today: Decimal
    month: Decimal
    # Runs of a model with no known price, which the amounts leave out.
    unpriced: int


@dataclass(frozen=True, slots=True)
class TeamUsage:
    total: Spent
    members: list[tuple[str, Spent]]


def team_usage(team: Team) -> TeamUsage:
    """The priced cost of the team's current members' runs, today and over `DAYS` days."""
    now = today()
    first = now - timedelta(days=DAYS - 1)
    people = dict(team.group.user_set.order_by("username").values_list("pk", "username"))
    rows = (
        DailyUsage.objects.filter(owner__in=list(people), day__gte=first)
        .values("owner")
        .annotate(
            month=Sum("priced_cost"),
            today=Sum("priced_cost", filter=Q(day=now)),
            unpriced=Sum("unpriced_runs"),
        )
    )
    found = {
        row["owner"]: Spent(row["today"] or Decimal(0), row["month"] or Decimal(0), row["unpriced"])
        for row in rows
    }
    nothing = Spent(Decimal(0), Decimal(0), 0)
    members = [(name, found.get(pk, nothing)) for pk, name in people.items()]
    total = Spent(
        sum((spent.today for _, spent in members), Decimal(0)),
        sum((spent.month for _, spent in members), Decimal(0)),
        sum(spent.unpriced for _, spent in members),
    )
    return TeamUsage(total, members)


def _money(amount: Decimal) -> str:
    return f"${amount:.2f}"


def usage_table(team: Team) -> SafeString:
    """The team's usage as a small table: a line per member, the total first."""
    used = team_usage(team)
    lines = [("All members", used.total), *used.members]
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (name, _money(spent.today), _money(spent.month), spent.unpriced or "")
            for name, spent in lines
        ),
    )
    return format_html(
        "<table><thead><tr><th>Member</th><th>Today (UTC)</th><th>Last {} days</th>"
        "<th>Runs without a known price</th></tr></thead><tbody>{}</tbody></table>",
        DAYS,
        rows,
    )


def chat_usage_table(team: Team) -> SafeString:
    """What the team's chats used over the last `DAYS` days, a line per member who sent a
    message there (those no longer members too), the total first."""
    used = team_chat_usage(team_ids=[team.group_id], since=first_day(DAYS))[team.group_id]
    lines = [("All members", used["total"])]
    lines += [(member["user"] or "(a deleted account)", member) for member in used["members"]]
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                name,
                line["runs"],
                line["total_tokens"],
                _money(Decimal(str(line["priced_cost"]))),
                line["unpriced_runs"] or "",
            )
            for name, line in lines
        ),
    )
    return format_html(
        "<table><thead><tr><th>Sender</th><th>Runs</th><th>Tokens</th><th>Cost</th>"
        "<th>Runs without a known price</th></tr></thead><tbody>{}</tbody></table>",
        rows,
    )

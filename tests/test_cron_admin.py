"""Cron jobs in the admin: its pages, its form under the model's rules (an owner among
them, the admin who adds the job unless another is picked), and its actions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agent.jobs import RUN_CRON_JOB
from cron_app import services
from cron_app.models import CronJob

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:cron_app_cronjob_changelist")
ADD = reverse("admin:cron_app_cronjob_add")


def change_url(job: CronJob) -> str:
    return reverse("admin:cron_app_cronjob_change", args=[job.pk])


def make_job(owner: User | None = None, **fields: Any) -> CronJob:
    fields = {"message": "Any news?", "session": "web:news", "every_seconds": 3600, **fields}
    owner = owner or User.objects.get_or_create(username="owner")[0]
    return services.create_job(owner=owner, **fields)


def the_admin() -> User:
    return User.objects.get(username="admin")  # pytest-django's admin_client logs in as it


def form_data(**fields: Any) -> dict[str, Any]:
    """The add/change form as a browser posts it (`at` split into its date and time)."""
    data = {
        "owner": str(the_admin().pk),
        "name": "Morning news",
        "message": "Any news?",
        "session": "web:news",
        "enabled": "on",
        "kind": "every",
        "every_seconds": "600",
        "cron_expr": "",
        "tz": "UTC",
        "at_0": "",
        "at_1": "",
    }
    data.update(fields)
    return {key: value for key, value in data.items() if value is not None}


def test_the_list_and_change_pages_open(admin_client: Client, ada: User) -> None:
    job = make_job(ada, name="Morning news")
    make_job(ada, kind="cron", cron_expr="0 9 * * *", tz="Europe/Paris", every_seconds=None)
    listed = admin_client.get(CHANGELIST)
    assert listed.status_code == 200
    page = listed.content.decode()
    assert "Morning news" in page and "every 3600 s" in page
    assert "cron &#x27;0 9 * * *&#x27; (Europe/Paris)" in page
    assert admin_client.get(CHANGELIST, {"q": "news"}).status_code == 200
    assert admin_client.get(CHANGELIST, {"kind__exact": "cron"}).status_code == 200
    assert admin_client.get(change_url(job)).status_code == 200
    assert admin_client.get(ADD).status_code == 200


def test_a_job_added_in_the_admin_is_planned(admin_client: Client) -> None:
    before = timezone.now()
    response = admin_client.post(ADD, form_data())
    assert response.status_code == 302, response.context["adminform"].form.errors
    job = CronJob.objects.get(name="Morning news")
    assert job.next_run is not None and job.next_run >= before + timedelta(seconds=600)
    assert job.owner == the_admin()


def test_the_add_form_offers_the_admin_as_the_owner(admin_client: Client, ada: User) -> None:
    form = admin_client.get(ADD).context["adminform"].form
    assert form["owner"].value() == str(the_admin().pk)
    page = admin_client.get(ADD).content.decode()
    assert f'<option value="{the_admin().pk}" selected>admin</option>' in page


def test_a_job_without_an_owner_is_refused(admin_client: Client) -> None:
    response = admin_client.post(ADD, form_data(owner=""))
    assert response.status_code == 200
    assert "owner" in response.context["adminform"].form.errors
    assert not CronJob.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"every_seconds": "5"}, "every_seconds"),
        ({"kind": "cron", "cron_expr": "at nine"}, "cron_expr"),
        ({"kind": "cron", "cron_expr": "0 0 31 2 *"}, "cron_expr"),
        ({"kind": "cron", "cron_expr": "0 9 * * *", "tz": "Mars/Base"}, "tz"),
        ({"kind": "at"}, "at"),
        ({"kind": "at", "at_0": "2001-01-01", "at_1": "00:00:00"}, "at"),
    ],
)
def test_the_form_keeps_to_the_models_rules(
    admin_client: Client, fields: dict[str, str], field: str
) -> None:
    response = admin_client.post(ADD, form_data(**fields))
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert not CronJob.objects.exists()


def test_a_change_of_timing_replans_and_a_rename_does_not(admin_client: Client) -> None:
    job = make_job()
    planned = job.next_run
    data = form_data(name="renamed", every_seconds="3600")
    assert admin_client.post(change_url(job), data).status_code == 302
    job.refresh_from_db()
    assert job.name == "renamed" and job.next_run == planned

    data["every_seconds"] = "60"
    assert admin_client.post(change_url(job), data).status_code == 302
    job.refresh_from_db()
    assert job.next_run is not None and planned is not None and job.next_run < planned

    data.pop("enabled")  # an unticked box is not posted
    assert admin_client.post(change_url(job), data).status_code == 302
    job.refresh_from_db()
    assert not job.enabled and job.next_run is None


def test_deleting_in_the_admin(admin_client: Client) -> None:
    job = make_job()
    delete = reverse("admin:cron_app_cronjob_delete", args=[job.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not CronJob.objects.exists()


def act(client: Client, action: str, jobs: list[CronJob]) -> str:
    """Run a list action on `jobs`; the text of the page it leads back to."""
    response = client.post(
        CHANGELIST, {"action": action, "_selected_action": [j.pk for j in jobs]}, follow=True
    )
    assert response.status_code == 200
    return response.content.decode()


def test_disable_and_enable_actions_replan(admin_client: Client) -> None:
    jobs = [make_job(name="one"), make_job(name="two")]
    untouched = make_job(name="three")
    assert "Disabled 2 job(s)" in act(admin_client, "disable", jobs)
    for job in jobs:
        job.refresh_from_db()
        assert not job.enabled and job.next_run is None
    untouched.refresh_from_db()
    assert untouched.enabled and untouched.next_run is not None

    assert "Enabled 2 job(s)" in act(admin_client, "enable", jobs)
    for job in jobs:
        job.refresh_from_db()
        assert job.enabled and job.next_run is not None


def test_enabling_a_one_off_job_that_ran_warns_it_will_not_run(admin_client: Client) -> None:
    job = make_job(name="once", kind="at", at=timezone.now() + timedelta(hours=1))
    yesterday = timezone.now() - timedelta(days=1)
    CronJob.objects.filter(pk=job.pk).update(
        enabled=False, next_run=None, at=yesterday, last_run=yesterday
    )
    page = act(admin_client, "enable", [job])
    assert "Enabled 1 job(s)" in page and "Will not run again" in page
    job.refresh_from_db()
    assert job.next_run is None


def test_enabling_a_one_off_job_whose_time_passed_unrun_is_refused(admin_client: Client) -> None:
    job = make_job(name="missed", kind="at", at=timezone.now() + timedelta(hours=1))
    past = timezone.now() - timedelta(days=1)
    CronJob.objects.filter(pk=job.pk).update(enabled=False, next_run=None, at=past)
    page = act(admin_client, "enable", [job])
    assert "is in the past" in page
    assert not CronJob.objects.get(pk=job.pk).enabled


def test_the_run_now_action_queues_each_job(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    queued: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(
        "django_q.tasks.async_task", lambda func, *a, **kw: queued.append((func, a))
    )
    jobs = [make_job(name="one"), make_job(name="two", enabled=False)]
    with django_capture_on_commit_callbacks(execute=True):
        page = act(admin_client, "run_now", jobs)
    assert "Queued 2 job(s)" in page
    assert sorted(queued) == [
        (RUN_CRON_JOB, (jobs[0].pk,)),
        (RUN_CRON_JOB, (jobs[1].pk,)),
    ]
    # Outside its schedule: the plan stays as it was.
    for job in jobs:
        assert CronJob.objects.get(pk=job.pk).next_run == job.next_run

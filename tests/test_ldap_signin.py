"""Signing in with an LDAP directory (the `ldap` extra), against a real OpenLDAP server
(slapd) of the tests' own: the first sign-in makes the person, with their name and email
from the directory and a membership of each team whose slug is one of their groups; a change
of their groups in the directory moves them at their next sign-in; a wrong password, an
unknown name, a person deactivated here and a person whose groups cannot be read are
refused. With AGENT_PASSWORD_LOGIN=false the
directory's password is the one that counts and a superuser's local one still works.

The first tests call the site's backends in this process (`authenticate` with a request,
and the sign-in page through Django's test client); the last ones run the site as a
daphne process whose settings come from the environment, and sign in over HTTP.
"""

from __future__ import annotations

import importlib.util
import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth import authenticate, get_user_model
from django.test import Client, RequestFactory

from tests.conftest import LOGIN, clean_env, free_port, manage, needs, python

HAVE_EXTRA = all(importlib.util.find_spec(name) for name in ("ldap", "django_auth_ldap"))
if HAVE_EXTRA:
    from tests.ldap_server import GROUPS, PEOPLE, SERVICE, SERVICE_PASSWORD, Directory, slapd_path

SLAPD = slapd_path() if HAVE_EXTRA else None
# Where .ci/run has installed both (AGENTSITE_TESTS_NEED_SANDBOX), a missing one fails.
needs_directory = needs(
    not (HAVE_EXTRA and SLAPD),
    "the ldap extra is not installed (uv sync --extra ldap), and LDAP sign-in is tested with it"
    if not HAVE_EXTRA
    else "OpenLDAP's server is not installed (apt install slapd), and LDAP sign-in is tested "
    "against a real one",
)

BACKENDS = [
    "agentsite.signin.passwords.PasswordGate",
    "agentsite.login_throttle.LoginThrottleBackend",
    "agentsite.signin.directory.DirectoryBackend",
    "django.contrib.auth.backends.ModelBackend",
]
ADA_PASSWORD = "analytical-engine"


def directory_env(directory: Any) -> dict[str, str]:
    """The site's settings for the tests' directory, as an operator writes them."""
    return {
        "AGENT_LDAP_SERVER_URI": directory.uri,
        "AGENT_LDAP_BIND_DN": SERVICE,
        "AGENT_LDAP_BIND_PASSWORD": SERVICE_PASSWORD,
        "AGENT_LDAP_USER_SEARCH": f"{PEOPLE}?(uid=%(user)s)",
        "AGENT_LDAP_GROUP_SEARCH": GROUPS,
        "AGENT_LDAP_GROUP_TYPE": "groupofnames",
    }


@pytest.fixture(scope="session")
def ldap_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    directory = Directory.start(tmp_path_factory.mktemp("slapd"))
    try:
        yield directory
    finally:
        directory.stop()


@pytest.fixture
def directory(ldap_server: Any) -> Any:
    """The organisation's directory with no people and no groups yet."""
    ldap_server.clear()
    return ldap_server


@pytest.fixture
def ldap_site(settings: Any, directory: Any) -> Any:
    """This process's settings as agentsite/settings.py makes them for the directory."""
    from agentsite.signin.directory import ldap_settings

    values = directory_env(directory)
    for name, value in {**values, **ldap_settings(values)}.items():
        setattr(settings, name, value)
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    return settings


def sign_in(username: str, password: str) -> Any:
    request = RequestFactory().post("/accounts/login/", REMOTE_ADDR="127.0.0.1")
    return authenticate(request, username=username, password=password)


def teams_of(user: Any) -> set[str]:
    return set(user.groups.values_list("team__slug", flat=True))


def team(slug: str, *, synced: bool = True) -> Any:
    from teams_app.services import create_team

    return create_team(slug=slug, synced=synced)


@needs_directory
@pytest.mark.django_db
def test_first_sign_in_makes_the_person_with_their_name_and_teams(directory, ldap_site):
    from teams_app.models import SignInIdentity

    for slug in ("research", "ops", "finance"):
        team(slug)
    team("handpicked", synced=False)
    ada = directory.add_person(
        "ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="ada@example.com"
    )
    directory.add_group("research", ada)
    directory.add_group("ops", ada)
    directory.add_group("handpicked", ada)  # its members are set by hand here
    directory.add_group("finance")  # she is not in it
    directory.add_group("book-club", ada)  # no team of that name

    user = sign_in("ada", ADA_PASSWORD)

    assert user is not None and user.username == "ada"
    assert (user.first_name, user.last_name, user.email) == ("Ada", "Lovelace", "ada@example.com")
    assert not user.has_usable_password()  # the directory's password is never kept here
    assert teams_of(user) == {"research", "ops"}
    identity = SignInIdentity.objects.get(user=user)
    assert (identity.provider, identity.issuer, identity.subject) == ("ldap", directory.uri, ada)


@needs_directory
@pytest.mark.django_db
def test_a_change_in_the_directory_moves_the_person_at_their_next_sign_in(directory, ldap_site):
    import ldap

    for slug in ("research", "ops"):
        team(slug)
    handpicked = team("handpicked", synced=False)
    ada = directory.add_person(
        "ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="ada@example.com"
    )
    directory.add_group("research", ada)
    directory.add_group("ops")
    user = sign_in("ada", ADA_PASSWORD)
    assert teams_of(user) == {"research"}
    handpicked.group.user_set.add(user)

    directory.leave("research", ada)
    directory.join("ops", ada)
    directory.modify(ada, [(ldap.MOD_REPLACE, "sn", ["King"])])
    directory.modify(ada, [(ldap.MOD_REPLACE, "mail", ["ada.king@example.com"])])
    again = sign_in("ada", ADA_PASSWORD)

    assert again.pk == user.pk
    assert teams_of(again) == {"ops", "handpicked"}  # a hand-set team is left alone
    assert (again.last_name, again.email) == ("King", "ada.king@example.com")


@needs_directory
@pytest.mark.django_db
def test_a_person_whose_groups_cannot_be_read_is_refused_and_keeps_their_teams(
    directory, ldap_site
):
    from agentsite.signin.directory import ldap_settings

    team("research")
    ada = directory.add_person(
        "ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="ada@example.com"
    )
    directory.add_group("research", ada)
    user = sign_in("ada", ADA_PASSWORD)
    assert teams_of(user) == {"research"}
    directory.leave("research", ada)

    # The groups' base is gone (a directory reorganised): the search of it fails.
    values = {**directory_env(directory), "AGENT_LDAP_GROUP_SEARCH": f"ou=teams,{GROUPS}"}
    ldap_site.AUTH_LDAP_GROUP_SEARCH = ldap_settings(values)["AUTH_LDAP_GROUP_SEARCH"]

    assert sign_in("ada", ADA_PASSWORD) is None
    assert teams_of(user) == {"research"}  # no sign-in, no change: her next one settles it


@needs_directory
@pytest.mark.django_db
def test_a_wrong_password_and_an_unknown_name_are_refused(directory, ldap_site):
    directory.add_person("ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="a@x.org")

    assert sign_in("ada", "difference-engine") is None
    assert sign_in("grace", ADA_PASSWORD) is None
    assert sign_in("ada", "") is None
    assert sign_in("*", ADA_PASSWORD) is None  # the name is a value, never a filter
    assert not get_user_model().objects.filter(username__in=["ada", "grace", "*"]).exists()


@needs_directory
@pytest.mark.django_db
def test_a_person_deactivated_here_is_refused_and_signed_out(directory, ldap_site):
    import ldap

    team("research")
    ada = directory.add_person(
        "ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="ada@example.com"
    )
    directory.add_group("research", ada)
    browser = Client()
    response = browser.post("/accounts/login/", {"username": "ada", "password": ADA_PASSWORD})
    assert response.status_code == 302
    assert browser.get("/").status_code == 200

    user = get_user_model().objects.get(username="ada")
    user.is_active = False
    user.save()
    directory.modify(ada, [(ldap.MOD_REPLACE, "mail", ["new@example.com"])])

    assert browser.get("/").status_code == 302  # their session ends at the next request
    assert sign_in("ada", ADA_PASSWORD) is None
    refused = Client().post("/accounts/login/", {"username": "ada", "password": ADA_PASSWORD})
    assert refused.status_code == 200 and "_auth_user_id" not in refused.client.session
    user.refresh_from_db()
    assert user.email == "ada@example.com"  # nothing of theirs was updated


@needs_directory
@pytest.mark.django_db
def test_the_sign_in_page_signs_a_directory_person_in(directory, ldap_site):
    directory.add_person("ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="a@x.org")
    browser = Client()

    wrong = browser.post("/accounts/login/", {"username": "ada", "password": "nope"})
    assert wrong.status_code == 200 and "_auth_user_id" not in browser.session
    right = browser.post("/accounts/login/?next=/", {"username": "ada", "password": ADA_PASSWORD})

    assert right.status_code == 302 and right["Location"] == "/"
    assert browser.get("/").status_code == 200
    assert browser.session["_auth_user_backend"] == "agentsite.signin.directory.DirectoryBackend"


@needs_directory
@pytest.mark.django_db
def test_with_passwords_off_the_directory_password_counts_and_a_local_one_does_not(
    directory, ldap_site
):
    ldap_site.AGENT_PASSWORD_LOGIN = False
    users = get_user_model().objects
    directory.add_person("ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="a@x.org")
    directory.add_person("bob", "bobs-directory-pass", given="Bob", surname="B", mail="b@x.org")
    users.create_user("bob", password="an-old-local-pass")  # set here long ago
    users.create_user("carol", password="carols-local-pass")  # not in the directory
    users.create_superuser("root", password="break-glass-pass")

    assert sign_in("ada", ADA_PASSWORD).username == "ada"
    assert sign_in("bob", "bobs-directory-pass").username == "bob"
    assert sign_in("bob", "an-old-local-pass") is None
    assert sign_in("carol", "carols-local-pass") is None
    assert sign_in("root", "break-glass-pass").username == "root"


@needs_directory
@pytest.mark.django_db
def test_with_passwords_on_a_local_account_still_signs_in(directory, ldap_site):
    get_user_model().objects.create_user("carol", password="carols-local-pass")
    directory.add_person("ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="a@x.org")

    assert sign_in("carol", "carols-local-pass").username == "carol"
    assert sign_in("ada", ADA_PASSWORD).username == "ada"


@needs_directory
@pytest.mark.django_db
def test_with_the_directory_down_a_superuser_still_signs_in_and_no_one_else(directory, ldap_site):
    from agentsite.signin.directory import ldap_settings

    values = {**directory_env(directory), "AGENT_LDAP_SERVER_URI": unused_uri()}
    for name, value in ldap_settings(values).items():
        setattr(ldap_site, name, value)
    ldap_site.AGENT_PASSWORD_LOGIN = False
    users = get_user_model().objects
    users.create_user("bob", password="an-old-local-pass")
    users.create_superuser("root", password="break-glass-pass")

    assert sign_in("bob", "an-old-local-pass") is None
    assert sign_in("root", "break-glass-pass").username == "root"


def unused_uri() -> str:
    return f"ldap://127.0.0.1:{free_port()}"


@needs(not HAVE_EXTRA, "the searches are python-ldap's (the ldap extra: uv sync --extra ldap)")
@pytest.mark.parametrize(
    "search", ["", "ou=people,dc=example,dc=com", "ou=people,dc=example,dc=com?(uid=ada)"]
)
def test_a_user_search_without_a_filter_for_the_name_stops_the_site(search):
    from django.core.exceptions import ImproperlyConfigured

    from agentsite.signin.directory import ldap_settings

    values = {
        "AGENT_LDAP_SERVER_URI": "ldap://directory.example.com",
        "AGENT_LDAP_BIND_DN": "",
        "AGENT_LDAP_BIND_PASSWORD": "",
        "AGENT_LDAP_USER_SEARCH": search,
        "AGENT_LDAP_GROUP_SEARCH": "",
        "AGENT_LDAP_GROUP_TYPE": "groupofnames",
    }
    with pytest.raises(ImproperlyConfigured, match=r"AGENT_LDAP_USER_SEARCH.*%\(user\)s"):
        ldap_settings(values)


def test_a_site_without_the_extra_says_how_to_install_it(tmp_path: Path):
    """The settings stop the site with the way to install the extra, where `ldap` cannot be
    imported (this process hides it from a fresh one, installed or not)."""
    program = textwrap.dedent(
        """
        import sys
        sys.modules["ldap"] = sys.modules["django_auth_ldap"] = None  # import them: ImportError
        import django
        try:
            django.setup()
        except Exception as exc:
            print(type(exc).__name__, exc)
        else:
            print("started")
        """
    )
    env = {
        **clean_env(),
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "AGENT_DATA_DIR": str(tmp_path),
        "AGENT_LDAP_SERVER_URI": "ldap://directory.example.com",
    }
    done = python(program, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ImproperlyConfigured"), done.stdout
    assert "uv sync --extra ldap" in done.stdout and "libldap2-dev" in done.stdout
    assert "libsasl2-dev" in done.stdout

    del env["AGENT_LDAP_SERVER_URI"]  # without a directory the site starts, extra or not
    assert python(program, env).stdout.strip() == "started"


# The site as a process of its own, its settings from the environment.


def site_orm(site_env: dict[str, str], code: str) -> Any:
    """What `code` (Python, with `result` to hand back as JSON) finds in the site's
    database, run by `manage.py shell` with the site's environment."""
    program = f"import json\n{textwrap.dedent(code)}\nprint(json.dumps(result))"
    return json.loads(manage(site_env, "shell", "-c", program).strip().splitlines()[-1])


def form_sign_in(site: str, username: str, password: str) -> httpx.Response:
    """A visitor's sign-in through the form, in a browser of its own; the answer to the
    POST, and on success the chat page fetched with the session it set."""
    with httpx.Client(base_url=site, timeout=60) as browser:
        form = browser.get("/accounts/login/")
        assert form.status_code == 200, form.text[:300]
        answer = browser.post(
            "/accounts/login/?next=/",
            data={
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
                "username": username,
                "password": password,
            },
        )
        if answer.status_code == 302:
            page = browser.get("/")
            assert page.status_code == 200, page.status_code
        return answer


@pytest.fixture
def directory_site(site_env: dict[str, str], directory: Any, request: pytest.FixtureRequest):
    site_env.update(directory_env(directory))
    site_env.update({"AGENT_PASSWORD_LOGIN": "false", "AGENT_LOGIN_FAILURE_LIMIT": "3"})
    site_orm(
        site_env,
        """
        from teams_app.services import create_team
        for slug in ("research", "ops"):
            create_team(slug=slug)
        result = None
        """,
    )
    return request.getfixturevalue("live_site")


@needs_directory
@pytest.mark.django_db(transaction=True)
def test_over_http_a_directory_person_signs_in_and_follows_their_groups(
    directory, directory_site, site_env
):
    ada = directory.add_person(
        "ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="ada@example.com"
    )
    directory.add_group("research", ada)
    directory.add_group("ops")
    teams = """
        from django.contrib.auth.models import User
        user = User.objects.get(username="ada")
        result = [user.email, sorted(user.groups.values_list("team__slug", flat=True))]
        """

    assert form_sign_in(directory_site, "ada", ADA_PASSWORD).status_code == 302
    assert site_orm(site_env, teams) == ["ada@example.com", ["research"]]

    directory.leave("research", ada)
    directory.join("ops", ada)
    assert form_sign_in(directory_site, "ada", ADA_PASSWORD).status_code == 302
    assert site_orm(site_env, teams) == ["ada@example.com", ["ops"]]

    refused = form_sign_in(directory_site, "ada", "not-her-password")
    assert refused.status_code == 200 and re.search("errornote|notice-error", refused.text)
    # Passwords are off for all but superusers: the break-glass account's still works.
    assert form_sign_in(directory_site, *LOGIN).status_code == 302


@needs_directory
@pytest.mark.django_db(transaction=True)
def test_over_http_a_locked_out_name_is_refused_before_the_directory_is_asked(
    directory, directory_site, site_env
):
    directory.add_person("ada", ADA_PASSWORD, given="Ada", surname="Lovelace", mail="a@x.org")
    answers = [form_sign_in(directory_site, "ada", "a-guess").status_code for _ in range(3)]
    assert answers == [200, 200, 429]  # the third wrong password locks the name

    assert form_sign_in(directory_site, "ada", ADA_PASSWORD).status_code == 429

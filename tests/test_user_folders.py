"""Each account's folder: a name no username can turn into a path outside `users/` or onto
another account's folder, kept through a rename, put aside when the account goes."""

from __future__ import annotations

import itertools
import os
import unicodedata
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.contrib.auth.validators import UnicodeUsernameValidator

from agent.tools.guards import GuardError
from agent.tools.guards.folders import (
    OWNERLESS,
    RETIRED,
    folder_name,
    make_user_folder,
    user_folder,
)

LONG = "a" * 150
LOOKALIKES = [
    ".",
    "..",
    "...",
    ".ownerless",
    ".deleted",
    "%2E",
    "%2E.",
    "%",
    "%25",
    "a%2Fb",
    "a/b",
    "../x",
    "a\\b",
    "a\x00b",
    "~x",
    "users",
    "ada",
    "Ada",
    "ADA",
    "a.b",
    "a_b",
    "a-b",
    "a@b",
    "a+b",
    "a b",
    "ab.",
    "@",
    "+",
    "-",
    "_",
    unicodedata.normalize("NFC", "zoé"),
    unicodedata.normalize("NFD", "zoé"),
    "ｚｏｅ",  # fullwidth: a lookalike of "zoe" that Django lets through
    "zoe",
    "日本語",
    "ad\u200ba",  # a zero-width space inside
    LONG,
    LONG + "b",
    LONG[:-1] + "b",
    "é" * 150,
    "é" * 149 + "e",
]


def test_django_lets_most_of_these_lookalikes_through() -> None:
    """The names are real accounts' names, not made up: Django's own validator passes them."""
    validate = UnicodeUsernameValidator()
    allowed = []
    for name in LOOKALIKES:
        try:
            validate(name)
            allowed.append(name)
        except Exception:
            continue
    assert {".", "..", "...", "Ada", "a@b", "a+b", "zoe", LONG} <= set(allowed)


def test_no_two_names_share_a_folder_and_none_leaves_users(tmp_path: Path) -> None:
    names = {name: folder_name(name) for name in LOOKALIKES}
    assert len(set(names.values())) == len(names)
    for name, folder in names.items():
        assert folder not in ("", ".", "..", OWNERLESS, RETIRED), name
        assert "/" not in folder and "\x00" not in folder and "\\" not in folder, name
        assert not folder.startswith("."), name
        assert len(folder.encode()) <= 255, name
        path = user_folder(tmp_path, name)
        assert path.parent == tmp_path.resolve() / "users", name
        made = make_user_folder(tmp_path, name)
        assert made == path and made.is_dir(), name
    # Every folder was made, each for one name: none landed on another's.
    assert len(list((tmp_path / "users").iterdir())) == len(LOOKALIKES)


def test_common_names_read_as_themselves() -> None:
    for name in ("ada", "Ada.Lovelace", "ada@example.com", "ada+agent", "ada_l-2"):
        assert folder_name(name) == name
    assert folder_name("..") == "%2E."
    assert folder_name("a/b") == "a%2Fb"
    assert folder_name("50%") == "50%25"


def test_an_account_without_a_name_has_no_folder() -> None:
    with pytest.raises(ValueError, match="without a username"):
        folder_name("")


def test_turns_of_no_account_have_a_folder_no_name_maps_to(tmp_path: Path) -> None:
    assert user_folder(tmp_path, None).name == OWNERLESS
    assert all(folder_name(name) != OWNERLESS for name in LOOKALIKES)


@pytest.mark.parametrize("where", ["users", "folder"])
def test_a_link_in_place_of_a_folder_is_refused(tmp_path: Path, where: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "workspace"
    (workspace / "users").mkdir(parents=True)
    if where == "users":
        (workspace / "users").rmdir()
        os.symlink(outside, workspace / "users")
    else:
        os.symlink(outside, workspace / "users" / "ada")
    with pytest.raises(GuardError, match="leads elsewhere through a link"):
        make_user_folder(workspace, "ada")


@pytest.mark.django_db(transaction=True)
def test_a_renamed_user_keeps_their_files(settings, tmp_path: Path) -> None:
    settings.AGENT_WORKSPACE = tmp_path
    ada = User.objects.create_user("ada")
    (make_user_folder(tmp_path, "ada") / "notes.txt").write_text("mine")

    ada.username = "ada.lovelace"
    ada.save()

    assert (user_folder(tmp_path, "ada.lovelace") / "notes.txt").read_text() == "mine"
    assert not user_folder(tmp_path, "ada").exists()
    # A save that leaves the name alone (a login's) moves nothing.
    ada.save(update_fields=["last_login"])
    assert user_folder(tmp_path, "ada.lovelace").exists()


@pytest.mark.django_db(transaction=True)
def test_a_rename_rolled_back_moves_nothing(settings, tmp_path: Path) -> None:
    from django.db import transaction

    settings.AGENT_WORKSPACE = tmp_path
    ada = User.objects.create_user("ada")
    make_user_folder(tmp_path, "ada")

    def rename_then_fail() -> None:
        with transaction.atomic():
            ada.username = "eve"
            ada.save()
            raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError):
        rename_then_fail()
    assert user_folder(tmp_path, "ada").is_dir() and not user_folder(tmp_path, "eve").exists()


@pytest.mark.django_db(transaction=True)
def test_a_new_account_of_a_deleted_ones_name_starts_empty(settings, tmp_path: Path) -> None:
    settings.AGENT_WORKSPACE = tmp_path
    bob = User.objects.create_user("bob")
    (make_user_folder(tmp_path, "bob") / "diary.txt").write_text("private")

    bob.delete()
    User.objects.create_user("bob")

    assert not user_folder(tmp_path, "bob").exists()
    [kept] = (tmp_path / "users" / RETIRED).iterdir()
    assert kept.name.startswith("bob~") and (kept / "diary.txt").read_text() == "private"


@pytest.mark.django_db(transaction=True)
def test_renaming_onto_a_leftover_folder_keeps_both(settings, tmp_path: Path) -> None:
    settings.AGENT_WORKSPACE = tmp_path
    (make_user_folder(tmp_path, "eve") / "old.txt").write_text("someone else's")
    ada = User.objects.create_user("ada")
    (make_user_folder(tmp_path, "ada") / "mine.txt").write_text("ada's")

    ada.username = "eve"
    ada.save()

    assert sorted(p.name for p in user_folder(tmp_path, "eve").iterdir()) == ["mine.txt"]
    [kept] = (tmp_path / "users" / RETIRED).iterdir()
    assert (kept / "old.txt").read_text() == "someone else's"


def test_the_lookalikes_are_pairwise_distinct_strings() -> None:
    """Guards the test above: two equal names in the list would prove nothing."""
    for first, second in itertools.combinations(LOOKALIKES, 2):
        assert first != second

"""A private OpenLDAP server (slapd) for the tests: its own configuration and database in a
folder of its own, on a free loopback port, with an organisation's people and groups.

The directory reads as a small company's: `dc=example,dc=com` with people under
`ou=people` (inetOrgPerson, with passwords), groups under `ou=groups` (groupOfNames, whose
names are teams' slugs) and the site's search account under `ou=services`. Only a signed-in
account may read it, as in most organisations: the site must search with its own account.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import ldap
import ldap.modlist

from tests.conftest import free_port

BASE = "dc=example,dc=com"
ADMIN = f"cn=admin,{BASE}"
PEOPLE = f"ou=people,{BASE}"
GROUPS = f"ou=groups,{BASE}"
SERVICE = f"cn=agentsite,ou=services,{BASE}"
SERVICE_PASSWORD = "search-account-secret"
# A groupOfNames must have a member; a group whose people have all left keeps this one.
NOBODY = f"cn=nobody,{BASE}"
SCHEMAS = ("core", "cosine", "inetorgperson", "nis")


def slapd_path() -> str | None:
    """Debian installs slapd in /usr/sbin, which is on root's PATH only."""
    return shutil.which("slapd") or shutil.which("slapd", path="/usr/sbin:/usr/local/sbin")


def _config(folder: Path, admin_password: str) -> str:
    schemas = "".join(f"include /etc/ldap/schema/{name}.schema\n" for name in SCHEMAS)
    # The password is the people's to bind with, never to read; the rest is for accounts
    # that have signed in (the site's search account among them), not for anonymous ones.
    return f"""{schemas}
pidfile {folder}/slapd.pid
argsfile {folder}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb

database mdb
suffix "{BASE}"
rootdn "{ADMIN}"
rootpw {admin_password}
directory {folder}/data
maxsize 16777216

access to attrs=userPassword
    by anonymous auth
    by * none
access to *
    by users read
    by * none
"""


@dataclass
class Directory:
    """A running slapd and the administrator's hand in it."""

    uri: str
    admin_password: str
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, folder: Path) -> Directory:
        slapd = slapd_path()
        assert slapd, "slapd is not installed"
        (folder / "data").mkdir(parents=True)
        admin_password = "admin-secret"
        (folder / "slapd.conf").write_text(_config(folder, admin_password))
        port = free_port()
        uri = f"ldap://127.0.0.1:{port}"
        log = (folder / "slapd.log").open("wb")
        # -d keeps slapd in the foreground (no fork), so that this process owns it.
        command = [slapd, "-f", str(folder / "slapd.conf"), "-h", f"{uri}/", "-d", "0"]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        directory = cls(uri=uri, admin_password=admin_password, process=process)
        try:
            directory._wait()
            directory._add_tree()
        except BaseException:
            directory.stop()
            raise
        return directory

    def _wait(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, "slapd exited: see slapd.log in its folder"
            try:
                self.admin().unbind_s()
                return
            except ldap.SERVER_DOWN:
                assert time.monotonic() < deadline, "slapd did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def admin(self) -> ldap.ldapobject.LDAPObject:
        """A connection bound as the directory's administrator."""
        connection = ldap.initialize(self.uri)
        connection.simple_bind_s(ADMIN, self.admin_password)
        return connection

    def _add(self, dn: str, attributes: dict[str, list[str]]) -> None:
        encoded = {
            name: [value.encode() for value in values] for name, values in attributes.items()
        }
        connection = self.admin()
        try:
            connection.add_s(dn, ldap.modlist.addModlist(encoded))
        finally:
            connection.unbind_s()

    def _add_tree(self) -> None:
        self._add(BASE, {"objectClass": ["dcObject", "organization"], "o": ["Example"]})
        for unit in ("people", "groups", "services"):
            self._add(f"ou={unit},{BASE}", {"objectClass": ["organizationalUnit"]})
        self._add(
            SERVICE,
            {
                "objectClass": ["organizationalRole", "simpleSecurityObject"],
                "userPassword": [SERVICE_PASSWORD],
            },
        )

    def clear(self) -> None:
        """No people and no groups: each test starts its organisation afresh."""
        connection = self.admin()
        try:
            for base in (PEOPLE, GROUPS):
                found = connection.search_s(base, ldap.SCOPE_ONELEVEL, attrlist=["1.1"])
                for dn, _ in found:
                    connection.delete_s(dn)
        finally:
            connection.unbind_s()

    def add_person(self, uid: str, password: str, *, given: str, surname: str, mail: str) -> str:
        """A person who signs in as `uid`; their DN."""
        dn = f"uid={uid},{PEOPLE}"
        self._add(
            dn,
            {
                "objectClass": ["inetOrgPerson"],
                "uid": [uid],
                "cn": [f"{given} {surname}"],
                "givenName": [given],
                "sn": [surname],
                "mail": [mail],
                "userPassword": [password],
            },
        )
        return dn

    def add_group(self, name: str, *members: str) -> str:
        dn = f"cn={name},{GROUPS}"
        self._add(dn, {"objectClass": ["groupOfNames"], "member": [NOBODY, *members]})
        return dn

    def modify(self, dn: str, changes: list[tuple[int, str, list[str]]]) -> None:
        """What `ldapmodify` does: `changes` as (ldap.MOD_ADD/MOD_DELETE/MOD_REPLACE,
        attribute, values)."""
        connection = self.admin()
        try:
            connection.modify_s(
                dn,
                [(op, name, [value.encode() for value in values]) for op, name, values in changes],
            )
        finally:
            connection.unbind_s()

    def join(self, group: str, member: str) -> None:
        self.modify(f"cn={group},{GROUPS}", [(ldap.MOD_ADD, "member", [member])])

    def leave(self, group: str, member: str) -> None:
        self.modify(f"cn={group},{GROUPS}", [(ldap.MOD_DELETE, "member", [member])])

"""Signing in: passwords, the organisation's OpenID Connect provider, LDAP."""

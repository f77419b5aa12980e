"""`manage.py runserver` on daphne, so that the development server speaks WebSocket too.

The `daphne` app would give this command as well, but its start-up imports Twisted in every
process that loads the settings; here daphne is imported only when this command runs.
"""

from daphne.management.commands.runserver import Command as DaphneRunserver


class Command(DaphneRunserver):
    pass

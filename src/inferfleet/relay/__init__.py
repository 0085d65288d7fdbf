"""``inferfleet relay``: Alertmanager webhooks turned into a command of the user's choice.

``alertmanager.render`` writes the Alertmanager configuration whose webhook
receiver is the relay; ``app.create_app`` is the ASGI application that
receives the notifications; ``runner.CommandRunner`` runs the command (an
argv list, never a shell string) once per alert, with the alert's fields in
``INFERFLEET_ALERT_*`` environment variables.
"""

from __future__ import annotations

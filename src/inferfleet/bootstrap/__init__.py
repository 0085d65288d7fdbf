"""``inferfleet host bootstrap HOST``: make a bare host ready for deploys, over ssh.

``wheels`` builds (once, cached) the wheel of this very inferfleet and, when
a host cannot reach a package index, a wheelhouse of its dependencies for
that host's Python and platform. ``host`` reads the host (Python, venv,
checkout) with commands whose output is parsed by pure functions, and
changes only what differs. ``checkout`` brings the fleet checkout there to
this revision. ``run`` walks the steps and reports each one.
"""

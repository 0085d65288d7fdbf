"""``inferfleet doctor``: what a host really has, compared with what the fleet file declares.

``facts`` reads the host (commands through :mod:`inferfleet.io.process`, files
under a root that tests replace); ``parse`` turns each tool's output into data
and ``findings`` compares that data with the fleet file. Both are pure.
"""
